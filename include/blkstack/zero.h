/* SPDX-License-Identifier: MIT */
/*
 * Zeroout and fallocate: making ranges of zeroes, fast where the device
 * below can zero by deallocating.
 */
#ifndef BLKSTACK_ZERO_H
#define BLKSTACK_ZERO_H

#include <stdbool.h>
#include <stdint.h>

struct bs_dev;

/* zeroout flags */
#define BS_ZERO_NOUNMAP (1u << 0)    /* blocks must stay allocated */
#define BS_ZERO_NOFALLBACK (1u << 1) /* -EOPNOTSUPP instead of writing zeroes */
#define BS_ZERO_FUA (1u << 2)        /* durable when done: one flush after */

/* At most this many requests of one zeroout are in flight. */
#define BS_ZERO_MAX_INFLIGHT 16
/* The shared zero buffer, and so the largest fallback write. */
#define BS_ZERO_BUF_SIZE (1u << 20)

typedef void (*bs_zero_done_fn)(void *arg, int result);
/* Progress: bytes done of total; @fallback when writing zero buffers. */
typedef void (*bs_zero_progress_fn)(void *arg, uint64_t done, uint64_t total,
				    bool fallback);

/*
 * Make [offset, offset+len) read as zeroes. Uses the device's write-zeroes
 * (split by max_write_zeroes_sectors, NOUNMAP passed down) and, unless
 * NOFALLBACK, writes from one shared zero buffer where the device has no
 * write-zeroes or answers -EOPNOTSUPP (after which the device's write-zeroes
 * is turned off, see bs_dev_disable_write_zeroes()). Returns 0 when started
 * (@done is then called once from the loop), or -errno without calling it.
 */
int bs_zeroout(struct bs_dev *dev, uint64_t offset, uint64_t len,
	       unsigned flags, bs_zero_progress_fn progress, bs_zero_done_fn done,
	       void *arg);
int bs_zeroout_sync(struct bs_dev *dev, uint64_t offset, uint64_t len,
		    unsigned flags, bs_zero_progress_fn progress, void *arg);

/*
 * bs_zeroout() at byte granularity, for front ends (NBD WRITE_ZEROES with
 * minimum block size 1): an aligned range is bs_zeroout() itself; else the
 * aligned middle is a bs_zeroout() (NOUNMAP kept) and the partial head and
 * tail blocks are read-modify-written with zeroes, ordered against every
 * other write to them (see bs_submit_bytes()). With BS_ZERO_NOFALLBACK a
 * range with a partial block is -EOPNOTSUPP at once, nothing written: only
 * writing can zero part of a block. Returns 0 when started (@done called
 * once from the loop) or -errno without calling it.
 */
int bs_zeroout_bytes(struct bs_dev *dev, uint64_t offset, uint64_t len,
		     unsigned flags, bs_zero_done_fn done, void *arg);

/* fallocate(2) mode bits, values as in <linux/falloc.h> */
#define BS_FALLOC_KEEP_SIZE 0x01
#define BS_FALLOC_PUNCH_HOLE 0x02
#define BS_FALLOC_NO_HIDE_STALE 0x04
#define BS_FALLOC_COLLAPSE_RANGE 0x08
#define BS_FALLOC_ZERO_RANGE 0x10
#define BS_FALLOC_INSERT_RANGE 0x20
#define BS_FALLOC_UNSHARE_RANGE 0x40
#define BS_FALLOC_WRITE_ZEROES 0x80
#define BS_FALLOC_MODE_MASK                                             \
	(BS_FALLOC_PUNCH_HOLE | BS_FALLOC_COLLAPSE_RANGE |              \
	 BS_FALLOC_ZERO_RANGE | BS_FALLOC_INSERT_RANGE |                \
	 BS_FALLOC_UNSHARE_RANGE | BS_FALLOC_WRITE_ZEROES)

/* The largest file offset of a block device (the kernel's MAX_LFS_FILESIZE). */
#define BS_MAX_LFS_FILESIZE INT64_MAX

/*
 * The generic fallocate checks, in the kernel's order: offset < 0 or
 * len <= 0 -> -EINVAL; unknown bits -> -EOPNOTSUPP; more than one mode ->
 * -EOPNOTSUPP; PUNCH_HOLE without KEEP_SIZE, or COLLAPSE/INSERT/WRITE_ZEROES
 * with KEEP_SIZE -> -EOPNOTSUPP; offset + len past @maxbytes or overflowing
 * -> -EFBIG.
 */
int bs_falloc_check(int mode, int64_t offset, int64_t len, int64_t maxbytes);

/*
 * fallocate on a block device: bs_falloc_check(), then the block device
 * rules of DESIGN.md, then the zeroout. On failure bs_last_error() says
 * why (e.g. "write zeroes unmap disabled by the user (queue/...=0)").
 * Returns 0 when started (@done called later) or -errno at once.
 */
int bs_fallocate(struct bs_dev *dev, int mode, int64_t offset, int64_t len,
		 bs_zero_progress_fn progress, bs_zero_done_fn done, void *arg);
int bs_fallocate_sync(struct bs_dev *dev, int mode, int64_t offset,
		      int64_t len, bs_zero_progress_fn progress, void *arg);

#endif
