/* SPDX-License-Identifier: MIT */
/*
 * libnbd, loaded at the first nbd open (lib/core/dynlib.h), not linked:
 * it brings GnuTLS, libxml2, ICU and libstdc++, which cost every blkstack
 * process start-up time and the daemon about 4 MiB of resident memory.
 *
 * The table holds a pointer per libnbd function the driver calls, typed
 * from libnbd.h and named as the function: a call reads
 * nbd_lib.nbd_aio_pread(...). Not a public API.
 */
#ifndef BLKSTACK_DRIVERS_NBD_LIB_H
#define BLKSTACK_DRIVERS_NBD_LIB_H

#include <stddef.h>

#include <libnbd.h>

#include "core/dynlib.h"

#define NBD_LIB(X)							\
	X(nbd_add_meta_context) X(nbd_aio_block_status)	\
	X(nbd_aio_command_completed) X(nbd_aio_connect_uri)	\
	X(nbd_aio_disconnect) X(nbd_aio_flush)	\
	X(nbd_aio_get_direction) X(nbd_aio_get_fd)	\
	X(nbd_aio_is_closed) X(nbd_aio_is_dead) X(nbd_aio_is_ready)	\
	X(nbd_aio_notify_read) X(nbd_aio_notify_write)	\
	X(nbd_aio_pread) X(nbd_aio_pwrite) X(nbd_aio_trim)	\
	X(nbd_aio_zero) X(nbd_can_fast_zero) X(nbd_can_flush)	\
	X(nbd_can_fua) X(nbd_can_meta_context) X(nbd_can_multi_conn)	\
	X(nbd_can_trim) X(nbd_can_zero) X(nbd_close) X(nbd_create)	\
	X(nbd_get_block_size) X(nbd_get_errno) X(nbd_get_error)	\
	X(nbd_get_size) X(nbd_is_read_only) X(nbd_is_rotational)	\
	X(nbd_poll) X(nbd_set_handle_name)

struct nbd_lib {
	NBD_LIB(BS_DYNLIB_MEMBER)
};

/* Filled by nbd_lib_load(); read only after it returned 0. */
extern struct nbd_lib nbd_lib;

/* Load libnbd.so.0 (once per process): 0, or -ELIBACC and why. */
int nbd_lib_load(char *why, size_t len);

#endif
