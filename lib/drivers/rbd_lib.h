/* SPDX-License-Identifier: MIT */
/*
 * librados and librbd, loaded at the first rbd open (lib/core/dynlib.h),
 * not linked: linked, Ceph's start-up (about forty libraries and their
 * C++ initialisers) cost every blkstack process 40 ms of CPU, 0.7 s
 * under AddressSanitizer, whether or not it touched an RBD image.
 *
 * The table holds a pointer per function the driver calls, each typed
 * from librbd's own header, named as the function: a call reads
 * rbd_lib.rbd_open(...). Not a public API.
 */
#ifndef BLKSTACK_DRIVERS_RBD_LIB_H
#define BLKSTACK_DRIVERS_RBD_LIB_H

#include <stddef.h>

#include <rados/librados.h>
#include <rbd/librbd.h>

#include "core/dynlib.h"

#define RBD_LIB_RADOS(X)						\
	X(rados_create) X(rados_conf_read_file) X(rados_conf_parse_env)	\
	X(rados_conf_set) X(rados_conf_get) X(rados_connect)		\
	X(rados_ioctx_create) X(rados_ioctx_destroy) X(rados_shutdown)

#define RBD_LIB_RBD(X)							\
	X(rbd_open) X(rbd_open_read_only) X(rbd_close) X(rbd_create4)	\
	X(rbd_image_options_create) X(rbd_image_options_destroy)	\
	X(rbd_stat) X(rbd_get_features) X(rbd_get_flags) X(rbd_flush)	\
	X(rbd_metadata_get) X(rbd_diff_iterate2)			\
	X(rbd_aio_create_completion) X(rbd_aio_get_return_value)	\
	X(rbd_aio_release) X(rbd_aio_readv) X(rbd_aio_writev)		\
	X(rbd_aio_discard) X(rbd_aio_flush)

struct rbd_lib {
	RBD_LIB_RADOS(BS_DYNLIB_MEMBER)
	RBD_LIB_RBD(BS_DYNLIB_MEMBER)
#ifdef LIBRBD_SUPPORTS_WRITE_ZEROES
	/* NULL when the installed librbd is older than its header */
	__typeof__(rbd_aio_write_zeroes) *rbd_aio_write_zeroes;
#endif
};

/* Filled by rbd_lib_load(); read only after it returned 0. */
extern struct rbd_lib rbd_lib;

/*
 * Load librados.so.2 and librbd.so.1 and every function above (once per
 * process; later calls return the first call's result). 0, or -ELIBACC
 * with the loader's reason in @why ("cannot load librbd.so.1: ...").
 * Thread-safe.
 */
int rbd_lib_load(char *why, size_t len);

#endif
