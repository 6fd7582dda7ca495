/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the unit tests. */
#ifndef BLKSTACK_TEST_HELPERS_H
#define BLKSTACK_TEST_HELPERS_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <blkstack/bdev.h>

/* cmocka fixtures: *state is a fresh struct bs_ctx, freed afterwards. */
int th_ctx_setup(void **state);
int th_ctx_teardown(void **state);

/* Create device @name from a spec ("mem:64M,chunk=4K"); fails the test. */
struct bs_dev *th_dev(struct bs_ctx *ctx, const char *name, const char *spec);
/* Same, returning the error (and leaving bs_last_error()). */
int th_dev_try(struct bs_ctx *ctx, const char *name, const char *spec,
	       struct bs_dev **out);
/* Create a device from "key=value" pairs separated by ';' (any type). */
struct bs_dev *th_dev_kv(struct bs_ctx *ctx, const char *name, const char *kv);
int th_dev_kv_try(struct bs_ctx *ctx, const char *name, const char *kv,
		  struct bs_dev **out);

/* A loopback TCP port that was free a moment ago (the kernel's choice:
 * tests running side by side do not pick the same one). */
unsigned th_free_port(void);

/* Deterministic pseudo-random bytes. */
void th_fill(void *buf, size_t len, uint64_t seed);
uint64_t th_rand(uint64_t *state);

/* Put @loop in ring mode (bs_loop_use_ring, @entries); the test is
 * skipped, with the reason, where the kernel has no io_uring or no
 * synchronous cancel (before Linux 6.0); @loop is freed then. */
struct bs_loop;
void th_loop_ring(struct bs_loop *loop, unsigned entries);

/* Run @loop (its timers too) for @ms milliseconds. */
void th_run_for(struct bs_loop *loop, unsigned ms);

/* Create (or truncate) the host file @path holding @len bytes of @buf;
 * fails the test on error. */
void th_write_file(const char *path, const void *buf, size_t len);

/* True if [buf, buf+len) is all zero. */
int th_is_zero(const void *buf, size_t len);

/* Read an attribute as an unsigned number; fails the test on error. */
unsigned long long th_attr_u64(struct bs_dev *dev, const char *name);

/* Peak resident set size of this process, bytes. */
uint64_t th_peak_rss(void);

/* What bs_dev_describe() says of a device, as "key: value" lines. */
struct th_desc {
	char text[4096];
	size_t len;
};

/* Fill @d with @dev's description (cut at its size); returns d->text. */
const char *th_describe(struct bs_dev *dev, struct th_desc *d);

#endif
