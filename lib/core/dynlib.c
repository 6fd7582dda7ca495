/* SPDX-License-Identifier: MIT */
/*
 * Client libraries loaded on first use: see dynlib.h for why.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>

#include "core/dynlib.h"

/* pthread_once() takes no argument: the library being loaded is this
 * thread's, set just before (loads of different libraries may run at
 * once on different threads) */
static __thread struct bs_dynlib *loading;

static void load(void)
{
	struct bs_dynlib *lib = loading;
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);
	size_t i;

	if (!h) {
		const char *e = dlerror();

		snprintf(lib->why, sizeof(lib->why), "%s: cannot load %s: %s "
			 "(Debian: %s)", lib->driver, lib->soname,
			 e ? e : "unknown error", lib->package);
		lib->err = -ELIBACC;
		return;
	}
	for (i = 0; i < lib->nsyms; i++) {
		const struct bs_dynsym *s = &lib->syms[i];

		*s->slot = dlsym(h, s->name);
		if (!*s->slot && !s->optional) {
			snprintf(lib->why, sizeof(lib->why), "%s: %s has no "
				 "%s: a version this build does not support",
				 lib->driver, lib->soname, s->name);
			lib->err = -ELIBACC;
			return;
		}
	}
}

int bs_dynlib_load(struct bs_dynlib *lib, char *why, size_t len)
{
	loading = lib;
	pthread_once(&lib->once, load);
	loading = NULL;
	if (lib->err && why && len)
		snprintf(why, len, "%s", lib->why);
	return lib->err;
}
