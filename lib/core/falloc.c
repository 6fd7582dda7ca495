/* SPDX-License-Identifier: MIT */
/*
 * fallocate: the generic mode checks (in the kernel's order) and the block
 * device rules of DESIGN.md "Core rules", ending in a zeroout.
 */
#include <errno.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/zero.h>

#include "core/internal.h"

int bs_falloc_check(int mode, int64_t offset, int64_t len, int64_t maxbytes)
{
	if (offset < 0 || len <= 0)
		return -EINVAL;
	if (mode & ~(BS_FALLOC_MODE_MASK | BS_FALLOC_KEEP_SIZE))
		return -EOPNOTSUPP;
	/* modes are exclusive; "allocate" is no mode bit at all */
	switch (mode & BS_FALLOC_MODE_MASK) {
	case 0:
	case BS_FALLOC_UNSHARE_RANGE:
	case BS_FALLOC_ZERO_RANGE:
		break;
	case BS_FALLOC_PUNCH_HOLE:
		if (!(mode & BS_FALLOC_KEEP_SIZE))
			return -EOPNOTSUPP;
		break;
	case BS_FALLOC_COLLAPSE_RANGE:
	case BS_FALLOC_INSERT_RANGE:
	case BS_FALLOC_WRITE_ZEROES:
		/* written extents past EOF are not a thing */
		if (mode & BS_FALLOC_KEEP_SIZE)
			return -EOPNOTSUPP;
		break;
	default:
		return -EOPNOTSUPP;
	}
	/* wrap-around, or past the largest offset the file can have */
	if (offset > INT64_MAX - len || offset + len > maxbytes)
		return -EFBIG;
	return 0;
}

int bs_fallocate(struct bs_dev *dev, int mode, int64_t offset, int64_t len,
		 bs_zero_progress_fn progress, bs_zero_done_fn done, void *arg)
{
	const int supported = BS_FALLOC_KEEP_SIZE | BS_FALLOC_PUNCH_HOLE |
			      BS_FALLOC_ZERO_RANGE | BS_FALLOC_WRITE_ZEROES;
	int64_t isize = (int64_t)dev->size;
	uint64_t mask = bs_dev_limits(dev)->logical_block_size - 1;
	unsigned flags;
	int err;

	err = bs_falloc_check(mode, offset, len, BS_MAX_LFS_FILESIZE);
	if (err)
		return bs_error(err, "%s: fallocate: invalid mode 0x%x or range "
				"%lld+%lld", dev->name, mode, (long long)offset,
				(long long)len);

	/* the block device's own rules, in its order */
	if (mode & ~supported)
		return bs_error(-EOPNOTSUPP, "%s: fallocate: mode 0x%x is not "
				"supported on a block device", dev->name, mode);
	if ((mode & BS_FALLOC_WRITE_ZEROES) && !bs_dev_write_zeroes_unmap(dev)) {
		char why[BS_CAPS_WHY];

		bs_caps_why_no_unmap(dev, why, sizeof(why));
		return bs_error(-EOPNOTSUPP, "%s: fallocate: %s", dev->name,
				why);
	}
	if (offset >= isize)
		return bs_error(-EINVAL, "%s: fallocate: offset %lld is at or "
				"beyond the end (%lld)", dev->name,
				(long long)offset, (long long)isize);
	if (len > isize - offset) {
		if (!(mode & BS_FALLOC_KEEP_SIZE))
			return bs_error(-EINVAL, "%s: fallocate: range ends "
					"beyond the device (%lld bytes); a "
					"block device cannot grow", dev->name,
					(long long)isize);
		len = isize - offset;
	}
	if (((uint64_t)offset | (uint64_t)len) & mask)
		return bs_error(-EINVAL, "%s: fallocate: %lld+%lld is not "
				"aligned to the logical block size %u",
				dev->name, (long long)offset, (long long)len,
				bs_dev_limits(dev)->logical_block_size);

	switch (mode) {
	case BS_FALLOC_ZERO_RANGE:
	case BS_FALLOC_ZERO_RANGE | BS_FALLOC_KEEP_SIZE:
		flags = BS_ZERO_NOUNMAP;
		break;
	case BS_FALLOC_PUNCH_HOLE | BS_FALLOC_KEEP_SIZE:
		flags = BS_ZERO_NOFALLBACK;
		break;
	case BS_FALLOC_WRITE_ZEROES:
		flags = 0;
		break;
	default:
		return bs_error(-EOPNOTSUPP, "%s: fallocate: mode 0x%x "
				"(allocate) means nothing on a block device",
				dev->name, mode);
	}
	return bs_zeroout(dev, (uint64_t)offset, (uint64_t)len, flags, progress,
			  done, arg);
}

struct fsync_wait {
	struct bs_sync sync;
	struct bs_dev *dev;
	int mode;
	int64_t offset, len;
	int result;
	bs_zero_progress_fn progress;
	void *arg;
};

static void fsync_progress(void *arg, uint64_t done, uint64_t total,
			   bool fallback)
{
	struct fsync_wait *w = arg;

	if (w->progress)
		w->progress(w->arg, done, total, fallback);
}

static void fsync_done(void *arg, int result)
{
	struct fsync_wait *w = arg;

	w->result = result;
	w->sync.failed = result < 0;
	bs_sync_done(&w->sync);
}

static int fsync_start(struct bs_sync *s, void *arg)
{
	struct fsync_wait *w = arg;

	(void)s;
	return bs_fallocate(w->dev, w->mode, w->offset, w->len,
			    fsync_progress, fsync_done, w);
}

/* As bs_zeroout_sync(): from any thread, no progress off the loop. */
int bs_fallocate_sync(struct bs_dev *dev, int mode, int64_t offset,
		      int64_t len, bs_zero_progress_fn progress, void *arg)
{
	struct fsync_wait w = { .dev = dev, .mode = mode, .offset = offset,
				.len = len, .progress = progress, .arg = arg };
	int err;

	if (!bs_loop_is_current(bs_ctx_loop(dev->ctx)))
		w.progress = NULL;
	err = bs_sync_run(dev->ctx, &w.sync, fsync_start, &w);
	return err ? err : w.result;
}
