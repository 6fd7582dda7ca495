/* SPDX-License-Identifier: MIT */
/*
 * librados and librbd through dlopen: see rbd_lib.h for why.
 */
#if __has_include(<rbd/librbd.h>)

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "drivers/rbd_lib.h"

struct rbd_lib rbd_lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_err;
static char load_why[256];

static void *open_lib(const char *name)
{
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		const char *e = dlerror();

		snprintf(load_why, sizeof(load_why), "rbd: cannot load %s: %s "
			 "(Debian: librbd1)", name, e ? e : "unknown error");
		load_err = -ELIBACC;
	}
	return h;
}

/* dlsym() of @name in @h into *@slot; on failure say which and stop */
static void sym(void *h, const char *lib, const char *name, void **slot)
{
	if (load_err)
		return;
	*slot = dlsym(h, name);
	if (!*slot) {
		snprintf(load_why, sizeof(load_why), "rbd: %s has no %s: a librbd "
			 "this build does not support", lib, name);
		load_err = -ELIBACC;
	}
}

static void load(void)
{
	void *rados, *rbd;

	rados = open_lib("librados.so.2");
	if (!rados)
		return;
	rbd = open_lib("librbd.so.1");
	if (!rbd)
		return;
#define RADOS_SYM(f) sym(rados, "librados.so.2", #f, (void **)&rbd_lib.f);
#define RBD_SYM(f) sym(rbd, "librbd.so.1", #f, (void **)&rbd_lib.f);
	RBD_LIB_RADOS(RADOS_SYM)
	RBD_LIB_RBD(RBD_SYM)
#undef RADOS_SYM
#undef RBD_SYM
#ifdef LIBRBD_SUPPORTS_WRITE_ZEROES
	/* optional: without it the driver has no write-zeroes */
	*(void **)&rbd_lib.rbd_aio_write_zeroes =
		dlsym(rbd, "rbd_aio_write_zeroes");
#endif
}

int rbd_lib_load(char *why, size_t len)
{
	pthread_once(&once, load);
	if (load_err && why && len)
		snprintf(why, len, "%s", load_why);
	return load_err;
}

#endif /* librbd */
