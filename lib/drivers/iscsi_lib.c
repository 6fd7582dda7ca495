/* SPDX-License-Identifier: MIT */
/*
 * libiscsi through dlopen: see iscsi_lib.h for why.
 */
#include "drivers/iscsi_lib.h"

struct iscsi_lib iscsi_lib;

#define SYM(f) BS_DYNLIB_SYM(iscsi_lib, f)
static const struct bs_dynsym syms[] = { ISCSI_LIB(SYM) };
#undef SYM

static struct bs_dynlib lib = BS_DYNLIB("iscsi", "libiscsi.so.7", "libiscsi7",
					syms);

int iscsi_lib_load(char *why, size_t len)
{
	return bs_dynlib_load(&lib, why, len);
}
