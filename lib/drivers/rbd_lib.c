/* SPDX-License-Identifier: MIT */
/*
 * librados and librbd through dlopen: see rbd_lib.h for why.
 */
#if __has_include(<rbd/librbd.h>)

#include "drivers/rbd_lib.h"

struct rbd_lib rbd_lib;

#define SYM(f) BS_DYNLIB_SYM(rbd_lib, f)
static const struct bs_dynsym rados_syms[] = { RBD_LIB_RADOS(SYM) };
static const struct bs_dynsym rbd_syms[] = {
	RBD_LIB_RBD(SYM)
#ifdef LIBRBD_SUPPORTS_WRITE_ZEROES
	/* optional: without it the driver has no write-zeroes */
	BS_DYNLIB_OPT_SYM(rbd_lib, rbd_aio_write_zeroes)
#endif
};
#undef SYM

static struct bs_dynlib rados = BS_DYNLIB("rbd", "librados.so.2", "librados2",
					  rados_syms);
static struct bs_dynlib rbd = BS_DYNLIB("rbd", "librbd.so.1", "librbd1",
					rbd_syms);

int rbd_lib_load(char *why, size_t len)
{
	int err = bs_dynlib_load(&rados, why, len);

	return err ? err : bs_dynlib_load(&rbd, why, len);
}

#endif /* librbd */
