/* SPDX-License-Identifier: MIT */
/*
 * libnbd through dlopen: see nbd_lib.h for why.
 */
#include "drivers/nbd_lib.h"

struct nbd_lib nbd_lib;

#define SYM(f) BS_DYNLIB_SYM(nbd_lib, f)
static const struct bs_dynsym syms[] = { NBD_LIB(SYM) };
#undef SYM

static struct bs_dynlib lib = BS_DYNLIB("nbd", "libnbd.so.0", "libnbd0",
					syms);

int nbd_lib_load(char *why, size_t len)
{
	return bs_dynlib_load(&lib, why, len);
}
