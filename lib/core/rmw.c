/* SPDX-License-Identifier: MIT */
/*
 * Byte-granular requests: read-modify-write of partial blocks below a front
 * end whose protocol allows any offset and length.
 *
 * A request [off, end) is cut into at most three pieces: the partial head
 * block, the aligned middle and the partial tail block (one piece when it
 * lies inside one block). The middle goes down as an ordinary request on
 * the caller's own buffer (zero copy). A partial block is read into a
 * bounce of one block, changed, and written back while it holds an
 * exclusive place in the device's write ordering (order.c), so no other
 * write to that block lands between the read and the write. Bounce memory
 * is therefore at most two blocks per request, however long it is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/zero.h>

#include "core/internal.h"

struct rmw;

/* One partial block. */
struct rmw_part {
	struct rmw *r;
	struct bs_wt_node node;	/* exclusive over the block (writes only) */
	struct bs_req io;	/* the read, then the write */
	uint64_t blk;		/* byte offset of the block */
	uint32_t in_off, in_len; /* the request's bytes within the block */
	uint64_t req_off;	/* where they are within the request */
	void *bounce;
};

struct rmw {
	struct bs_dev *dev;
	enum bs_op op;		/* READ, WRITE, WRITE_ZEROES or DISCARD */
	struct bs_req *parent;	/* bs_submit_bytes(); NULL for a zeroout */
	bs_zero_done_fn zdone;	/* bs_zeroout_bytes() */
	void *zarg;
	unsigned zflags;
	uint32_t wflags;	/* flags of the pieces written */
	unsigned pending;
	int result;
	struct rmw_part parts[2];
	unsigned nparts;
	struct bs_req mid;	/* the aligned middle */
	struct iovec *mid_iov;
	struct bs_work work;
};

#define PART_OF(n) ((struct rmw_part *)((char *)(n) - \
					offsetof(struct rmw_part, node)))

static void rmw_free(struct rmw *r)
{
	unsigned i;

	for (i = 0; i < r->nparts; i++)
		free(r->parts[i].bounce);
	free(r->mid_iov);
	free(r);
}

static void zero_finish(void *arg)
{
	struct rmw *r = arg;
	bs_zero_done_fn done = r->zdone;
	void *darg = r->zarg;
	int result = r->result;

	rmw_free(r);
	done(darg, result);
}

static void piece_done(struct rmw *r, int result)
{
	if (result && !r->result)
		r->result = result;
	if (--r->pending)
		return;
	if (r->parent) {
		struct bs_req *p = r->parent;
		struct bs_dev *dev = r->dev;
		int res = r->result;

		rmw_free(r);
		bs_req_finish(dev, p, res);
		return;
	}
	/* the zeroout's callback too comes from the loop, never inline */
	r->work.fn = zero_finish;
	r->work.arg = r;
	bs_loop_defer(bs_ctx_current_loop(r->dev->ctx), &r->work);
}

/* Copy between the caller's scatter list at @off and a flat buffer. */
static void iov_copy(const struct iovec *iov, int cnt, uint64_t off,
		     void *buf, uint64_t len, bool to_iov)
{
	uint8_t *b = buf;
	int i;

	for (i = 0; i < cnt && len; i++) {
		uint64_t n;

		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		n = iov[i].iov_len - off;
		if (n > len)
			n = len;
		if (to_iov)
			memcpy((uint8_t *)iov[i].iov_base + off, b, n);
		else
			memcpy(b, (uint8_t *)iov[i].iov_base + off, n);
		b += n;
		len -= n;
		off = 0;
	}
}

/* ---- partial blocks ----------------------------------------------------- */

static void part_write_done(struct bs_req *io)
{
	struct rmw_part *pt = io->priv;
	struct rmw *r = pt->r;

	bs_wt_release(r->dev, &pt->node);
	piece_done(r, io->result);
}

static void part_read_done(struct bs_req *io)
{
	struct rmw_part *pt = io->priv;
	struct rmw *r = pt->r;
	uint8_t *b = pt->bounce;

	if (io->result || r->op == BS_OP_READ) {
		if (!io->result)
			iov_copy(r->parent->iov, r->parent->iovcnt, pt->req_off,
				 b + pt->in_off, pt->in_len, true);
		bs_wt_release(r->dev, &pt->node);
		piece_done(r, io->result);
		return;
	}
	if (r->op == BS_OP_WRITE)
		iov_copy(r->parent->iov, r->parent->iovcnt, pt->req_off,
			 b + pt->in_off, pt->in_len, false);
	else
		memset(b + pt->in_off, 0, pt->in_len);
	/* still holding the block: nothing landed since the read */
	bs_req_init(&pt->io, BS_OP_WRITE, r->wflags, pt->blk,
		    bs_dev_limits(r->dev)->logical_block_size, pt->bounce,
		    part_write_done, pt);
	bs_submit_untracked(r->dev, &pt->io);
}

static void part_go(struct bs_wt_node *n)
{
	struct rmw_part *pt = PART_OF(n);
	struct rmw *r = pt->r;

	bs_req_init(&pt->io, BS_OP_READ, 0, pt->blk,
		    bs_dev_limits(r->dev)->logical_block_size, pt->bounce,
		    part_read_done, pt);
	bs_submit_untracked(r->dev, &pt->io);
}

static int part_add(struct rmw *r, uint64_t blk, uint64_t in_off,
		    uint64_t in_len, uint64_t req_off)
{
	struct rmw_part *pt = &r->parts[r->nparts];
	uint32_t lbs = bs_dev_limits(r->dev)->logical_block_size;

	/* page aligned, so a direct-I/O driver need not bounce it again */
	if (posix_memalign(&pt->bounce, lbs < 4096 ? 4096 : lbs, lbs))
		return -ENOMEM;
	r->nparts++;
	pt->r = r;
	pt->blk = blk;
	pt->in_off = (uint32_t)in_off;
	pt->in_len = (uint32_t)in_len;
	pt->req_off = req_off;
	pt->node.start = blk;
	pt->node.end = blk + lbs;
	pt->node.excl = true;
	pt->node.go = part_go;
	return 0;
}

static void part_start(struct rmw_part *pt)
{
	/* admitted later, it goes on here, on the submitting loop */
	pt->node.loop = bs_ctx_current_loop(pt->r->dev->ctx);
	/* reads take no place in the ordering: they change nothing */
	if (pt->r->op == BS_OP_READ || bs_wt_admit(pt->r->dev, &pt->node))
		part_go(&pt->node);
}

/* ---- the aligned middle ------------------------------------------------- */

static void mid_done(struct bs_req *req)
{
	struct rmw *r = req->priv;

	piece_done(r, req->result);
}

static void mid_zero_done(void *arg, int result)
{
	piece_done(arg, result);
}

static void mid_start(struct rmw *r, uint64_t start, uint64_t end)
{
	struct bs_req *p = r->parent;
	int n, err;

	if (!p) {
		err = bs_zeroout(r->dev, start, end - start, r->zflags, NULL,
				 mid_zero_done, r);
		if (err)
			piece_done(r, err);
		return;
	}
	bs_req_init(&r->mid, p->op, p->flags, start, end - start, NULL,
		    mid_done, r);
	if (p->iov) {
		n = bs_iov_slice(p->iov, p->iovcnt, start - p->offset,
				 end - start, &r->mid_iov);
		if (n < 0) {
			piece_done(r, n);
			return;
		}
		r->mid.iov = r->mid_iov;
		r->mid.iovcnt = n;
	}
	/* an ordinary request: a write takes its (shared) place */
	bs_submit(r->dev, &r->mid);
}

/* ---- the cut ------------------------------------------------------------ */

/* Cut [off, off+len) into pieces and start them; 0 or -errno (nothing
 * started). @r is freed on failure. */
static int rmw_start(struct rmw *r, uint64_t off, uint64_t len)
{
	uint64_t lbs = bs_dev_limits(r->dev)->logical_block_size, mask = lbs - 1;
	uint64_t end = off + len, first = off & ~mask, last = (end - 1) & ~mask;
	uint64_t mstart = (off + mask) & ~mask, mend = end & ~mask;
	bool head = off & mask, tail = end & mask, mid = mstart < mend;
	unsigned i;
	int err = 0;

	if (r->op == BS_OP_DISCARD) {
		/* advisory: partial blocks are left as they are */
		head = tail = false;
	} else if (head && first == last) {
		err = part_add(r, first, off - first, len, 0);
		tail = false;
	} else {
		if (head)
			err = part_add(r, first, off - first, lbs - (off - first),
				       0);
		if (!err && tail)
			err = part_add(r, last, 0, end - last, last - off);
	}
	if (err) {
		rmw_free(r);
		return err;
	}
	/* one count per piece, plus one held while starting them */
	r->pending = 1 + r->nparts + (mid ? 1 : 0);
	if (head)
		part_start(&r->parts[0]);
	if (mid)
		mid_start(r, mstart, mend);
	for (i = head ? 1 : 0; i < r->nparts; i++)
		part_start(&r->parts[i]);
	piece_done(r, 0);
	return 0;
}

void bs_submit_bytes(struct bs_dev *dev, struct bs_req *req)
{
	const struct bs_limits *lim = bs_dev_limits(dev);
	uint64_t mask = lim->logical_block_size - 1, total = 0, size;
	struct rmw *r;
	int i, err;

	req->dev = dev;
	/* it completes on this loop, whichever path it takes */
	req->loop = bs_ctx_current_loop(dev->ctx);
	req->result = 0;
	req->ord.state = 0;
	if ((unsigned)req->op >= BS_OP__COUNT || req->op == BS_OP_FLUSH ||
	    bs_dev_snap(dev)->state != BS_DEV_LIVE || !((req->offset | req->len) & mask)) {
		/* aligned (or no range at all): the block path, zero copy */
		bs_submit(dev, req);
		return;
	}
	size = bs_dev_size(dev);
	if (!req->len || req->offset > size || req->len > size - req->offset) {
		bs_req_finish(dev, req, -EINVAL);
		return;
	}
	if (req->op != BS_OP_READ && dev->readonly) {
		bs_req_finish(dev, req, -EROFS);
		return;
	}
	err = 0;
	switch (req->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
		for (i = 0; req->iov && i < req->iovcnt; i++)
			total += req->iov[i].iov_len;
		if (!req->iov || req->iovcnt <= 0 || total != req->len ||
		    (req->flags & ~BS_REQ_FUA) ||
		    (req->op == BS_OP_READ && req->flags))
			err = -EINVAL;
		break;
	case BS_OP_DISCARD:
		if (req->flags & ~BS_REQ_FUA)
			err = -EINVAL;
		else if (!lim->max_discard_sectors)
			err = -EOPNOTSUPP;
		break;
	case BS_OP_WRITE_ZEROES:
		if (req->flags & ~(BS_REQ_NOUNMAP | BS_REQ_FUA))
			err = -EINVAL;
		else if (!lim->max_write_zeroes_sectors)
			err = -EOPNOTSUPP;
		break;
	default:
		err = -EINVAL;
		break;
	}
	if (err) {
		bs_req_finish(dev, req, err);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		bs_req_finish(dev, req, -ENOMEM);
		return;
	}
	r->dev = dev;
	r->op = req->op;
	r->parent = req;
	/* FUA on every written piece: the whole request is durable */
	r->wflags = req->flags & BS_REQ_FUA;
	err = rmw_start(r, req->offset, req->len);
	if (err)
		bs_req_finish(dev, req, err);
}

int bs_zeroout_bytes(struct bs_dev *dev, uint64_t offset, uint64_t len,
		     unsigned flags, bs_zero_done_fn done, void *arg)
{
	uint64_t mask = bs_dev_limits(dev)->logical_block_size - 1, size;
	struct rmw *r;

	if (!((offset | len) & mask))
		return bs_zeroout(dev, offset, len, flags, NULL, done, arg);
	if (flags & ~(BS_ZERO_NOUNMAP | BS_ZERO_NOFALLBACK | BS_ZERO_FUA))
		return -EINVAL;
	size = bs_dev_size(dev);
	if (!len || offset > size || len > size - offset)
		return bs_error(-EINVAL, "%s: zeroout: range %llu+%llu is "
				"beyond the end (%llu)", dev->name,
				(unsigned long long)offset,
				(unsigned long long)len,
				(unsigned long long)size);
	if (dev->readonly)
		return bs_error(-EROFS, "%s: zeroout: read-only device",
				dev->name);
	if (flags & BS_ZERO_NOFALLBACK)
		/* a partial block is zeroed by writing: never "fast" */
		return bs_error(-EOPNOTSUPP, "%s: zeroout: range %llu+%llu "
				"has partial blocks, which only writing can "
				"zero", dev->name, (unsigned long long)offset,
				(unsigned long long)len);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->dev = dev;
	r->op = BS_OP_WRITE_ZEROES;
	r->zdone = done;
	r->zarg = arg;
	r->zflags = flags;
	/* FUA: the middle flushes at its end, the partial blocks are FUA */
	r->wflags = flags & BS_ZERO_FUA ? BS_REQ_FUA : 0;
	return rmw_start(r, offset, len);
}
