/* SPDX-License-Identifier: MIT */
/* Helpers shared by the libFuzzer targets (linked into each by fuzz.mk). */
#ifndef BLKSTACK_FUZZ_FZ_DEV_H
#define BLKSTACK_FUZZ_FZ_DEV_H

#include <stddef.h>
#include <sys/uio.h>

#include <blkstack/bdev.h>

/*
 * Create the mem device "d" in @ctx from @spec, "key=value" options
 * separated by ';' (e.g. "size=1M;chunk=4K"). 0, or nonzero (the input
 * is skipped).
 */
int fz_mem_dev(struct bs_ctx *ctx, const char *spec, struct bs_dev **out);

/*
 * Check @n output pieces a session offers as a socket would send them:
 * at least one, none empty, the first and last byte of each readable
 * (ASan checks the bounds); aborts otherwise. Returns their total.
 */
size_t fz_out_iov_check(const struct iovec *iov, int n);

#endif
