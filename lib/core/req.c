/* SPDX-License-Identifier: MIT */
/*
 * Request submission: validation, splitting by the device's limits, FUA
 * emulation, and completion through the loop. Writes entering bs_submit()
 * take their place in the device's write ordering (order.c) and leave it
 * when they complete; the core's own pieces go down untracked.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>

#include "core/internal.h"

/* Children of one split request in flight at once. */
#define SPLIT_WINDOW 32

static const char *const op_names[BS_OP__COUNT] = {
	[BS_OP_READ] = "read",
	[BS_OP_WRITE] = "write",
	[BS_OP_FLUSH] = "flush",
	[BS_OP_DISCARD] = "discard",
	[BS_OP_WRITE_ZEROES] = "write-zeroes",
};

const char *bs_op_name(enum bs_op op)
{
	return (unsigned)op < BS_OP__COUNT ? op_names[op] : "?";
}

void bs_req_init(struct bs_req *req, enum bs_op op, uint32_t flags,
		 uint64_t offset, uint64_t len, void *buf, bs_req_fn done,
		 void *priv)
{
	memset(req, 0, sizeof(*req));
	req->op = op;
	req->flags = flags;
	req->offset = offset;
	req->len = len;
	req->done = done;
	req->priv = priv;
	if (buf) {
		req->iov1.iov_base = buf;
		req->iov1.iov_len = len;
		req->iov = &req->iov1;
		req->iovcnt = 1;
	}
}

static void run_done(void *arg)
{
	struct bs_req *req = arg;

	req->done(req);
}

/*
 * Queue the submitter's callback on the loop it submitted from; end its
 * write ordering.
 */
static void finish(struct bs_dev *dev, struct bs_req *req, int result)
{
	bs_wt_release(dev, &req->ord);
	req->result = result;
	req->work.fn = run_done;
	req->work.arg = req;
	bs_loop_send(req->loop ? req->loop : bs_ctx_current_loop(dev->ctx),
		     &req->work);
}

/* Where a request submitted now belongs: the calling thread's loop. */
static struct bs_loop *here(struct bs_dev *dev)
{
	return bs_ctx_current_loop(dev->ctx);
}

static void stat_add(uint64_t *v, uint64_t n)
{
	__atomic_fetch_add(v, n, __ATOMIC_RELAXED);
}

void bs_dev_stats_read(const struct bs_dev *dev, struct bs_dev_stats *out)
{
	int op;

	for (op = 0; op < BS_OP__COUNT; op++) {
		out->ops[op] = __atomic_load_n(&dev->stats.ops[op],
					       __ATOMIC_RELAXED);
		out->bytes[op] = __atomic_load_n(&dev->stats.bytes[op],
						 __ATOMIC_RELAXED);
	}
	out->errors = __atomic_load_n(&dev->stats.errors, __ATOMIC_RELAXED);
}

/* ---- per-request driver contexts ---------------------------------------- */

/* Free contexts kept per device; beyond this they go back to malloc. */
#define DRV_CTX_KEEP 1024

static size_t drv_ctx_size(const struct bs_dev *dev)
{
	size_t n = dev->type->req_ctx_size;

	/* a free context holds the free-list link */
	return n < sizeof(void *) ? sizeof(void *) : n;
}

/*
 * One cache per loop: a context is taken on the loop that submits and
 * given back there (requests complete where they were submitted).
 */
static void *drv_ctx_get(struct bs_dev *dev, unsigned li)
{
	void *c = dev->drv_ctx_free[li].head;

	if (c) {
		dev->drv_ctx_free[li].head = *(void **)c;
		dev->drv_ctx_free[li].n--;
		memset(c, 0, drv_ctx_size(dev));
		return c;
	}
	return calloc(1, drv_ctx_size(dev));
}

static void drv_ctx_put(struct bs_dev *dev, unsigned li, void *c)
{
	if (dev->drv_ctx_free[li].n >= DRV_CTX_KEEP) {
		free(c);
		return;
	}
	*(void **)c = dev->drv_ctx_free[li].head;
	dev->drv_ctx_free[li].head = c;
	dev->drv_ctx_free[li].n++;
}

void bs_req_drv_ctx_drain(struct bs_dev *dev)
{
	unsigned li;

	for (li = 0; li <= BS_THREADS_MAX; li++) {
		while (dev->drv_ctx_free[li].head) {
			void *c = dev->drv_ctx_free[li].head;

			dev->drv_ctx_free[li].head = *(void **)c;
			free(c);
		}
		dev->drv_ctx_free[li].n = 0;
	}
}

static void complete_here(struct bs_req *req, int result);

static void complete_forwarded(void *arg)
{
	struct bs_req *req = arg;

	complete_here(req, req->result);
}

void bs_req_complete(struct bs_req *req, int result)
{
	/* a driver finishing on another thread (a worker): go home first */
	if (req->loop && bs_loop_current() != req->loop) {
		req->result = result;
		req->work.fn = complete_forwarded;
		req->work.arg = req;
		bs_loop_send(req->loop, &req->work);
		return;
	}
	complete_here(req, result);
}

static void complete_here(struct bs_req *req, int result)
{
	struct bs_dev *dev = req->dev;

	if (req->drv_ctx) {
		drv_ctx_put(dev, req->loop ? bs_loop_index(req->loop) : 0,
			    req->drv_ctx);
		req->drv_ctx = NULL;
	}

	if (result) {
		stat_add(&dev->stats.errors, 1);
		/*
		 * A device that claimed write-zeroes and refuses it: stop
		 * offering it here and above rather than failing again and
		 * again (the block layer's rule for stacked devices). The
		 * change itself is made on the main loop.
		 */
		if (req->op == BS_OP_WRITE_ZEROES && result == -EOPNOTSUPP &&
		    bs_dev_limits(dev)->max_write_zeroes_sectors)
			bs_dev_disable_write_zeroes(dev,
				"write-zeroes failed with EOPNOTSUPP at run time");
	}
	finish(dev, req, result);
}

static void to_driver(struct bs_dev *dev, struct bs_req *req)
{
	req->dev = dev;
	req->drv_ctx = NULL;
	if (dev->type->req_ctx_size) {
		req->drv_ctx = drv_ctx_get(dev, bs_loop_index(req->loop));
		if (!req->drv_ctx) {
			finish(dev, req, -ENOMEM);
			return;
		}
	}
	stat_add(&dev->stats.ops[req->op], 1);
	stat_add(&dev->stats.bytes[req->op], req->len);
	dev->type->submit(dev, req);
}

/* ---- splitting ---------------------------------------------------------- */

struct split {
	struct bs_req *parent;
	struct bs_dev *dev;
	uint64_t next;		/* next byte offset (relative) to issue */
	uint64_t chunk;		/* bytes per child */
	unsigned inflight;
	int result;
	struct split_child {
		struct bs_req req;
		struct split *s;
		struct iovec *iov;
	} kids[SPLIT_WINDOW];
	unsigned free_kids[SPLIT_WINDOW];
	unsigned nfree;
};

int bs_iov_slice(const struct iovec *src, int cnt, uint64_t off,
		 uint64_t len, struct iovec **dstp)
{
	struct iovec *dst;
	int i, n = 0;

	for (i = 0; i < cnt && off >= src[i].iov_len; i++)
		off -= src[i].iov_len;
	dst = malloc((size_t)(cnt - i) * sizeof(*dst));
	if (!dst)
		return -ENOMEM;
	for (; i < cnt && len; i++) {
		uint64_t take = src[i].iov_len - off;
		if (take > len)
			take = len;
		dst[n].iov_base = (char *)src[i].iov_base + off;
		dst[n].iov_len = take;
		n++;
		len -= take;
		off = 0;
	}
	*dstp = dst;
	return n;
}

static void split_issue(struct split *s);

static void split_child_done(struct bs_req *child)
{
	struct split_child *k = child->priv;
	struct split *s = k->s;

	if (child->result && !s->result)
		s->result = child->result;
	free(k->iov);
	k->iov = NULL;
	s->free_kids[s->nfree++] = (unsigned)(k - s->kids);
	s->inflight--;
	split_issue(s);
}

static void split_issue(struct split *s)
{
	struct bs_req *p = s->parent;

	while (!s->result && s->next < p->len && s->nfree) {
		struct split_child *k = &s->kids[s->free_kids[--s->nfree]];
		uint64_t len = p->len - s->next;

		if (len > s->chunk)
			len = s->chunk;
		bs_req_init(&k->req, p->op, p->flags, p->offset + s->next, len,
			    NULL, split_child_done, k);
		k->s = s;
		if (p->iov) {
			int n = bs_iov_slice(p->iov, p->iovcnt, s->next, len,
					     &k->iov);
			if (n < 0) {
				s->result = n;
				s->free_kids[s->nfree++] =
					(unsigned)(k - s->kids);
				break;
			}
			k->req.iov = k->iov;
			k->req.iovcnt = n;
		}
		s->next += len;
		s->inflight++;
		/* a piece of a request that holds its place already */
		bs_submit_untracked(s->dev, &k->req);
	}
	if (!s->inflight && (s->result || s->next >= p->len)) {
		struct bs_dev *dev = s->dev;
		int result = s->result;
		free(s);
		finish(dev, p, result);
	}
}

static void submit_split(struct bs_dev *dev, struct bs_req *req,
			 uint64_t chunk)
{
	struct split *s = calloc(1, sizeof(*s));
	unsigned i;

	if (!s) {
		finish(dev, req, -ENOMEM);
		return;
	}
	s->parent = req;
	s->dev = dev;
	s->chunk = chunk;
	for (i = 0; i < SPLIT_WINDOW; i++)
		s->free_kids[i] = SPLIT_WINDOW - 1 - i;
	s->nfree = SPLIT_WINDOW;
	split_issue(s);
}

/* ---- FUA emulation: the request, then a flush --------------------------- */

struct fua {
	struct bs_req *parent;
	struct bs_req write, flush;
};

static void fua_flush_done(struct bs_req *r)
{
	struct fua *f = r->priv;
	struct bs_req *p = f->parent;
	struct bs_dev *dev = r->dev;
	int result = r->result;

	free(f);
	finish(dev, p, result);
}

static void fua_write_done(struct bs_req *r)
{
	struct fua *f = r->priv;

	if (r->result) {
		struct bs_dev *dev = r->dev;
		struct bs_req *p = f->parent;
		int result = r->result;
		free(f);
		finish(dev, p, result);
		return;
	}
	bs_req_init(&f->flush, BS_OP_FLUSH, 0, 0, 0, NULL, fua_flush_done, f);
	bs_submit_untracked(r->dev, &f->flush);
}

static void submit_fua_emulated(struct bs_dev *dev, struct bs_req *req)
{
	struct fua *f = calloc(1, sizeof(*f));

	if (!f) {
		finish(dev, req, -ENOMEM);
		return;
	}
	f->parent = req;
	bs_req_init(&f->write, req->op, req->flags & ~BS_REQ_FUA,
		    req->offset, req->len, NULL, fua_write_done, f);
	f->write.iov = req->iov;
	f->write.iovcnt = req->iovcnt;
	bs_submit_untracked(dev, &f->write);
}

/* ---- submit ------------------------------------------------------------- */

static uint64_t iov_total(const struct iovec *iov, int cnt)
{
	uint64_t t = 0;
	int i;

	for (i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

/*
 * Check @req against @dev (bounds, alignment, flags, op support, read-only)
 * and find the size to split it by. 1 = go on with *@max set; 0 = it was
 * finished here (done at once, or failed).
 */
static int check(struct bs_dev *dev, struct bs_req *req, uint64_t *max,
		 const struct bs_limits **limp)
{
	/* one snapshot for the whole decision (lib/core/snap.c) */
	const struct bs_dev_snap *snap = bs_dev_snap(dev);
	const struct bs_limits *lim = &snap->limits;
	uint64_t mask = lim->logical_block_size - 1;
	uint64_t size = snap->size;

	*max = 0;
	*limp = lim;
	if ((unsigned)req->op >= BS_OP__COUNT) {
		finish(dev, req, -EINVAL);
		return 0;
	}
	/* not open (yet): nothing reaches the driver */
	if (snap->state != BS_DEV_LIVE) {
		finish(dev, req, snap->state == BS_DEV_OPENING ? -EAGAIN : -ENXIO);
		return 0;
	}
	if (req->op == BS_OP_FLUSH) {
		/* nothing volatile to flush: done (the block layer does so) */
		if (!bs_limits_write_cache(lim)) {
			finish(dev, req, 0);
			return 0;
		}
		return 1;
	}
	/* bounds and alignment: nothing invalid reaches a driver */
	if (!req->len || req->offset > size || req->len > size - req->offset ||
	    ((req->offset | req->len) & mask)) {
		finish(dev, req, -EINVAL);
		return 0;
	}
	if (req->op != BS_OP_READ && dev->readonly) {
		finish(dev, req, -EROFS);
		return 0;
	}
	switch (req->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
		if (!req->iov || req->iovcnt <= 0 ||
		    iov_total(req->iov, req->iovcnt) != req->len) {
			finish(dev, req, -EINVAL);
			return 0;
		}
		if ((req->flags & ~BS_REQ_FUA) ||
		    (req->op == BS_OP_READ && req->flags)) {
			finish(dev, req, -EINVAL);
			return 0;
		}
		*max = (uint64_t)lim->max_sectors << BS_SECTOR_SHIFT;
		break;
	case BS_OP_DISCARD:
		if (req->flags & ~BS_REQ_FUA) {
			finish(dev, req, -EINVAL);
			return 0;
		}
		*max = (uint64_t)lim->max_discard_sectors << BS_SECTOR_SHIFT;
		if (!*max) {
			finish(dev, req, -EOPNOTSUPP);
			return 0;
		}
		break;
	case BS_OP_WRITE_ZEROES:
		if (req->flags & ~(BS_REQ_NOUNMAP | BS_REQ_FUA)) {
			finish(dev, req, -EINVAL);
			return 0;
		}
		*max = (uint64_t)lim->max_write_zeroes_sectors << BS_SECTOR_SHIFT;
		if (!*max) {
			finish(dev, req, -EOPNOTSUPP);
			return 0;
		}
		break;
	default:
		finish(dev, req, -EINVAL);
		return 0;
	}
	*max &= ~mask;
	return 1;
}

/* A checked request: FUA emulation, splitting, or the driver. */
static void dispatch(struct bs_dev *dev, struct bs_req *req, uint64_t max,
		     const struct bs_limits *lim)
{
	/*
	 * FUA: a native FUA covers writes; write-zeroes and discard (which
	 * drivers carry out as other calls) and writes without native FUA
	 * get a flush after them, as the block layer's flush machinery does.
	 */
	if ((req->flags & BS_REQ_FUA) &&
	    (req->op != BS_OP_WRITE || !(lim->features & BS_FEAT_FUA))) {
		if (bs_limits_write_cache(lim)) {
			submit_fua_emulated(dev, req);
			return;
		}
		/* no volatile cache: every write is durable already */
		req->flags &= ~BS_REQ_FUA;
	}
	if (max && req->len > max) {
		submit_split(dev, req, max);
		return;
	}
	to_driver(dev, req);
}

void bs_submit_untracked(struct bs_dev *dev, struct bs_req *req)
{
	const struct bs_limits *lim;
	uint64_t max;

	req->dev = dev;
	req->loop = here(dev);
	req->result = 0;
	req->ord.state = 0;
	req->drv_ctx = NULL;	/* only to_driver() gives one */
	if (check(dev, req, &max, &lim))
		dispatch(dev, req, max, lim);
}

/* A write admitted after waiting: limits may have changed meanwhile. */
static void ord_go(struct bs_wt_node *n)
{
	struct bs_req *req = (struct bs_req *)((char *)n -
					       offsetof(struct bs_req, ord));
	const struct bs_limits *lim;
	uint64_t max;

	if (check(req->dev, req, &max, &lim))
		dispatch(req->dev, req, max, lim);
}

void bs_submit(struct bs_dev *dev, struct bs_req *req)
{
	const struct bs_limits *lim;
	uint64_t max;

	req->dev = dev;
	req->loop = here(dev);
	req->result = 0;
	req->ord.state = 0;
	req->drv_ctx = NULL;	/* only to_driver() gives one */
	if (!check(dev, req, &max, &lim))
		return;
	if (req->op == BS_OP_WRITE || req->op == BS_OP_WRITE_ZEROES ||
	    req->op == BS_OP_DISCARD) {
		/* its place among the writes in flight (order.c) */
		req->ord.start = req->offset;
		req->ord.end = req->offset + req->len;
		req->ord.excl = false;
		req->ord.go = ord_go;
		req->ord.loop = req->loop;
		if (!bs_wt_admit(dev, &req->ord))
			return;
	}
	dispatch(dev, req, max, lim);
}

void bs_req_finish(struct bs_dev *dev, struct bs_req *req, int result)
{
	finish(dev, req, result);
}

/* ---- synchronous wrappers ---------------------------------------------- */

struct io_sync {
	struct bs_sync sync;
	struct bs_dev *dev;
	struct bs_req req;
};

static void io_sync_done(struct bs_req *req)
{
	struct io_sync *w = req->priv;

	w->sync.failed = req->result < 0;
	bs_sync_done(&w->sync);
}

static int io_sync_start(struct bs_sync *s, void *arg)
{
	struct io_sync *w = arg;

	(void)s;
	bs_submit(w->dev, &w->req);
	return 0;
}

/* From the loop's thread or any other (bs_sync_run()). */
int bs_io_sync(struct bs_dev *dev, enum bs_op op, uint32_t flags,
	       uint64_t offset, uint64_t len, void *buf)
{
	struct io_sync w = { .dev = dev };
	int err;

	bs_req_init(&w.req, op, flags, offset, len, buf, io_sync_done, &w);
	err = bs_sync_run(dev->ctx, &w.sync, io_sync_start, &w);
	return err ? err : w.req.result;
}

int bs_read_sync(struct bs_dev *dev, void *buf, uint64_t len, uint64_t off)
{
	return bs_io_sync(dev, BS_OP_READ, 0, off, len, buf);
}

int bs_write_sync(struct bs_dev *dev, const void *buf, uint64_t len,
		  uint64_t off)
{
	return bs_io_sync(dev, BS_OP_WRITE, 0, off, len, (void *)buf);
}

int bs_flush_sync(struct bs_dev *dev)
{
	return bs_io_sync(dev, BS_OP_FLUSH, 0, 0, 0, NULL);
}

/* ---- block status ------------------------------------------------------- */

struct clip {
	uint64_t start, end, pos;
	bs_extent_fn fn;
	void *arg;
	int stop;
};

static int clip_fn(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct clip *c = arg;
	uint64_t s = off, e = off + len;

	if (s < c->pos)
		s = c->pos;
	if (e > c->end)
		e = c->end;
	if (s >= e)
		return e >= c->end;
	c->pos = e;
	c->stop = c->fn(c->arg, s, e - s, flags);
	return c->stop || c->pos >= c->end;
}

int bs_block_status(struct bs_dev *dev, uint64_t offset, uint64_t len,
		    bs_extent_fn fn, void *arg)
{
	struct clip c = { offset, offset + len, offset, fn, arg, 0 };
	const struct bs_dev_snap *snap = bs_dev_snap(dev);
	int err;

	if (snap->state != BS_DEV_LIVE)
		return snap->state == BS_DEV_OPENING ? -EAGAIN : -ENXIO;
	if (offset > snap->size || len > snap->size - offset)
		return -EINVAL;
	if (!len)
		return 0;
	if (!dev->type->block_status)
		return fn(arg, offset, len, 0) < 0 ? -EINTR : 0;
	err = dev->type->block_status(dev, offset, len, clip_fn, &c);
	if (err < 0)
		return err;
	/* whatever the driver left undescribed is data */
	if (!c.stop && c.pos < c.end)
		fn(arg, c.pos, c.end - c.pos, 0);
	return 0;
}
