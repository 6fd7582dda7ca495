/* SPDX-License-Identifier: MIT */
/*
 * Zeroout: write-zeroes commands split by max_write_zeroes_sectors, with a
 * bounded number in flight, falling back to writes from one shared zero
 * buffer (memory stays bounded however large the range).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/zero.h>

#include "core/internal.h"

static void *zero_buf_new(void)
{
	void *b = aligned_alloc(4096, BS_ZERO_BUF_SIZE);

	if (b)
		memset(b, 0, BS_ZERO_BUF_SIZE);
	return b;
}

/* I/O threads zero concurrently: the buffer is whole before anyone sees it */
const void *bs_ctx_zero_buf(struct bs_ctx *ctx)
{
	return BS_CTX_LAZY_GET(ctx, zero_buf, zero_buf_new());
}

struct zslot {
	struct bs_req req;
	struct zctx *z;
};

struct zctx {
	struct bs_dev *dev;
	uint64_t start, end;	/* byte range */
	uint64_t next;		/* next byte to issue */
	uint64_t done_bytes;
	unsigned flags;
	bool fallback;		/* writing zero buffers */
	uint64_t redo_from;	/* lowest range refused with EOPNOTSUPP */
	bool redo;
	int result;
	unsigned inflight;
	bs_zero_progress_fn progress;
	bs_zero_done_fn done;
	void *arg;
	struct bs_work finish_work;
	struct bs_req flush;	/* BS_ZERO_FUA: one flush at the end */
	struct zslot slots[BS_ZERO_MAX_INFLIGHT];
	unsigned free_slots[BS_ZERO_MAX_INFLIGHT];
	unsigned nfree;
};

static void z_issue(struct zctx *z);

static void z_end(struct zctx *z, int result)
{
	bs_zero_done_fn done = z->done;
	void *darg = z->arg;

	free(z);
	done(darg, result);
}

static void z_flush_done(struct bs_req *req)
{
	z_end(req->priv, req->result);
}

static void z_finish(void *arg)
{
	struct zctx *z = arg;

	/* BS_ZERO_FUA: one flush after all of it, not one per piece (the
	 * core completes it at once on a device without a volatile cache) */
	if (!z->result && (z->flags & BS_ZERO_FUA)) {
		bs_req_init(&z->flush, BS_OP_FLUSH, 0, 0, 0, NULL,
			    z_flush_done, z);
		bs_submit(z->dev, &z->flush);
		return;
	}
	z_end(z, z->result);
}

static void z_slot_done(struct bs_req *req)
{
	struct zslot *s = req->priv;
	struct zctx *z = s->z;

	z->inflight--;
	z->free_slots[z->nfree++] = (unsigned)(s - z->slots);
	if (req->result == -EOPNOTSUPP && req->op == BS_OP_WRITE_ZEROES &&
	    !(z->flags & BS_ZERO_NOFALLBACK)) {
		/* redo from here by writing, once the others are back */
		if (!z->redo || req->offset < z->redo_from)
			z->redo_from = req->offset;
		z->redo = true;
	} else if (req->result) {
		if (!z->result)
			z->result = req->result;
	} else {
		z->done_bytes += req->len;
		if (z->progress)
			z->progress(z->arg, z->done_bytes, z->end - z->start,
				    z->fallback);
	}
	z_issue(z);
}

static void z_issue(struct zctx *z)
{
	struct bs_dev *dev = z->dev;

	if (z->redo && !z->inflight && !z->result) {
		/* the device refused write-zeroes: write zeroes instead */
		z->redo = false;
		z->fallback = true;
		z->next = z->redo_from;
		z->done_bytes = z->redo_from - z->start;
	}
	while (!z->result && !z->redo && z->next < z->end && z->nfree) {
		struct zslot *s = &z->slots[z->free_slots[--z->nfree]];
		uint64_t len = z->end - z->next, max;
		uint64_t lbs = bs_dev_limits(dev)->logical_block_size;

		if (z->fallback) {
			max = (uint64_t)bs_dev_limits(dev)->max_sectors << BS_SECTOR_SHIFT;
			if (max > BS_ZERO_BUF_SIZE)
				max = BS_ZERO_BUF_SIZE;
		} else {
			max = (uint64_t)bs_dev_limits(dev)->max_write_zeroes_sectors
			      << BS_SECTOR_SHIFT;
			if (!max) {
				/* turned off meanwhile (knob, failure below) */
				z->free_slots[z->nfree++] = (unsigned)(s - z->slots);
				if (z->flags & BS_ZERO_NOFALLBACK) {
					z->result = -EOPNOTSUPP;
					break;
				}
				z->fallback = true;
				continue;
			}
		}
		max -= max % lbs;
		if (len > max)
			len = max;
		s->z = z;
		if (z->fallback)
			bs_req_init(&s->req, BS_OP_WRITE, 0, z->next, len,
				    (void *)bs_ctx_zero_buf(dev->ctx),
				    z_slot_done, s);
		else
			bs_req_init(&s->req, BS_OP_WRITE_ZEROES,
				    (z->flags & BS_ZERO_NOUNMAP) ? BS_REQ_NOUNMAP : 0,
				    z->next, len, NULL, z_slot_done, s);
		z->next += len;
		z->inflight++;
		bs_submit(dev, &s->req);
	}
	if (!z->inflight && !z->redo && (z->result || z->next >= z->end)) {
		z->finish_work.fn = z_finish;
		z->finish_work.arg = z;
		bs_loop_defer(bs_ctx_current_loop(dev->ctx), &z->finish_work);
	}
}

int bs_zeroout(struct bs_dev *dev, uint64_t offset, uint64_t len,
	       unsigned flags, bs_zero_progress_fn progress, bs_zero_done_fn done,
	       void *arg)
{
	uint64_t mask = bs_dev_limits(dev)->logical_block_size - 1;
	struct zctx *z;
	unsigned i;

	if (flags & ~(BS_ZERO_NOUNMAP | BS_ZERO_NOFALLBACK | BS_ZERO_FUA))
		return -EINVAL;
	if (offset > dev->size || len > dev->size - offset)
		return bs_error(-EINVAL, "%s: zeroout: range %llu+%llu is "
				"beyond the end (%llu)", dev->name,
				(unsigned long long)offset,
				(unsigned long long)len,
				(unsigned long long)dev->size);
	if ((offset | len) & mask)
		return bs_error(-EINVAL, "%s: zeroout: range %llu+%llu is not "
				"aligned to the logical block size %u",
				dev->name, (unsigned long long)offset,
				(unsigned long long)len,
				bs_dev_limits(dev)->logical_block_size);
	if (dev->readonly)
		return bs_error(-EROFS, "%s: zeroout: read-only device",
				dev->name);
	if (!bs_dev_limits(dev)->max_write_zeroes_sectors &&
	    (flags & BS_ZERO_NOFALLBACK))
		return bs_error(-EOPNOTSUPP, "%s: zeroout: no write-zeroes "
				"support and fallback not allowed", dev->name);
	if (!bs_dev_limits(dev)->max_write_zeroes_sectors &&
	    !bs_ctx_zero_buf(dev->ctx))
		return -ENOMEM;

	z = calloc(1, sizeof(*z));
	if (!z)
		return -ENOMEM;
	z->dev = dev;
	z->start = z->next = offset;
	z->end = offset + len;
	z->flags = flags;
	z->fallback = !bs_dev_limits(dev)->max_write_zeroes_sectors;
	z->progress = progress;
	z->done = done;
	z->arg = arg;
	for (i = 0; i < BS_ZERO_MAX_INFLIGHT; i++)
		z->free_slots[i] = BS_ZERO_MAX_INFLIGHT - 1 - i;
	z->nfree = BS_ZERO_MAX_INFLIGHT;
	z_issue(z);
	return 0;
}

struct zsync {
	struct bs_sync sync;
	struct bs_dev *dev;
	uint64_t offset, len;
	unsigned flags;
	int result;
	bs_zero_progress_fn progress;
	void *arg;
};

static void zsync_done(void *arg, int result)
{
	struct zsync *w = arg;

	w->result = result;
	w->sync.failed = result < 0;
	bs_sync_done(&w->sync);
}

static void zsync_progress(void *arg, uint64_t done, uint64_t total,
			   bool fallback)
{
	struct zsync *w = arg;

	if (w->progress)
		w->progress(w->arg, done, total, fallback);
}

static int zsync_start(struct bs_sync *s, void *arg)
{
	struct zsync *w = arg;

	return bs_zeroout(w->dev, w->offset, w->len, w->flags, zsync_progress,
			  zsync_done, w);
}

/*
 * From the loop's thread or any other (bs_sync_run()); from another
 * thread @progress is not called (it would run on the loop's thread).
 */
int bs_zeroout_sync(struct bs_dev *dev, uint64_t offset, uint64_t len,
		    unsigned flags, bs_zero_progress_fn progress, void *arg)
{
	struct zsync w = { .dev = dev, .offset = offset, .len = len,
			   .flags = flags, .progress = progress, .arg = arg };
	int err;

	if (!bs_loop_is_current(bs_ctx_loop(dev->ctx)))
		w.progress = NULL;
	err = bs_sync_run(dev->ctx, &w.sync, zsync_start, &w);
	return err ? err : w.result;
}
