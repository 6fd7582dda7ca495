/* SPDX-License-Identifier: MIT */
/*
 * Client libraries loaded at a driver's first open (dlopen), not linked.
 *
 * A process links only what every process needs. The client libraries of
 * the remote drivers are large and pull in more: libnbd brings GnuTLS,
 * libxml2, ICU and libstdc++, libiscsi brings the RDMA and netlink
 * libraries, librbd all of Ceph. Linked, every blkstack command and every
 * daemon paid for them at start (time, and about 5 MiB of resident
 * memory in the daemon) whether or not a device used them. Loaded here,
 * only a process that opens such a device pays, once, for its life (never
 * unloaded: these libraries keep threads and static state).
 *
 * A driver keeps a table of function pointers, each typed from the
 * library's own header and named as the function (X-macros build both the
 * table and the symbol list), and calls lib.f(...). Not a public API.
 */
#ifndef BLKSTACK_CORE_DYNLIB_H
#define BLKSTACK_CORE_DYNLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

struct bs_dynsym {
	const char *name;
	void **slot;
	bool optional;			/* NULL when missing, not an error */
};

struct bs_dynlib {
	const char *driver;		/* "nbd": the error's prefix */
	const char *soname;		/* "libnbd.so.0" */
	const char *package;		/* the Debian package that has it */
	const struct bs_dynsym *syms;
	size_t nsyms;
	/* the outcome, set once */
	pthread_once_t once;
	int err;
	char why[256];
};

/* Initialiser of a struct bs_dynlib with its symbol list @syms[]. */
#define BS_DYNLIB(drv, so, pkg, syms_)					\
	{ .driver = (drv), .soname = (so), .package = (pkg),		\
	  .syms = (syms_), .nsyms = sizeof(syms_) / sizeof((syms_)[0]),	\
	  .once = PTHREAD_ONCE_INIT }

/* X-macro helpers: a table member and a symbol-list entry per function. */
#define BS_DYNLIB_MEMBER(f) __typeof__(f) *f;
#define BS_DYNLIB_SYM(tab, f) { #f, (void **)&(tab).f, false },
#define BS_DYNLIB_OPT_SYM(tab, f) { #f, (void **)&(tab).f, true },

/*
 * Load the library and fill every slot (once per process; later calls
 * return the first call's result). 0, or -ELIBACC with the reason in
 * @why ("nbd: cannot load libnbd.so.0: ... (Debian: libnbd0)"): the
 * library is missing, or lacks a function this build calls. Thread-safe.
 */
int bs_dynlib_load(struct bs_dynlib *lib, char *why, size_t len);

#endif
