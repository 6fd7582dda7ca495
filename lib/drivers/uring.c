/* SPDX-License-Identifier: MIT */
/* The io_uring request path of the file and hostbdev drivers (uring.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include <blkstack/bdev.h>

#include "drivers/uring.h"

static void uring_prepoll(void *arg);
static void uring_reap(void *arg, uint32_t events);

/* Make the ring of @loop (on @loop's thread). */
static int ring_new(struct drv_uring *u, struct bs_loop *loop,
		    struct drv_uring_ring **out)
{
	struct drv_uring_ring *r = calloc(1, sizeof(*r));
	int err;

	if (!r)
		return -ENOMEM;
	r->u = u;
	r->loop = loop;
	err = io_uring_queue_init(u->depth, &r->ring, 0);
	if (err < 0) {
		free(r);
		return err;
	}
	err = bs_loop_add_fd(loop, r->ring.ring_fd, EPOLLIN, uring_reap, r);
	if (!err) {
		err = bs_loop_add_prepoll(loop, uring_prepoll, r);
		if (err)
			bs_loop_del_fd(loop, r->ring.ring_fd);
	}
	if (err) {
		io_uring_queue_exit(&r->ring);
		free(r);
		return err;
	}
	*out = r;
	return 0;
}

/* On the ring's loop: let what is in flight finish, then tear down. */
static void ring_free(void *arg)
{
	struct drv_uring_ring *r = arg;

	while (r->inflight || r->wait_head)
		if (bs_loop_run_once(r->loop, 100))
			break;
	bs_loop_del_prepoll(r->loop, uring_prepoll, r);
	bs_loop_del_fd(r->loop, r->ring.ring_fd);
	io_uring_queue_exit(&r->ring);
	free(r);
}

int drv_uring_init(struct drv_uring *u, struct bs_dev *dev, int fd,
		   unsigned depth, const struct drv_uring_ops *ops,
		   const char *what)
{
	struct bs_loop *loop = bs_ctx_loop(dev->ctx);
	struct drv_uring_ring *r;
	int err;

	u->dev = dev;
	u->fd = fd;
	u->ops = ops;
	u->depth = depth;
	memset(u->rings, 0, sizeof(u->rings));
	err = ring_new(u, loop, &r);
	if (err < 0)
		return bs_error(err, "%s: %s: io_uring setup: %s", dev->name,
				what, strerror(-err));
	u->rings[bs_loop_index(loop)] = r;
	return 0;
}

void drv_uring_exit(struct drv_uring *u)
{
	unsigned i;

	for (i = 0; i <= BS_THREADS_MAX; i++) {
		struct drv_uring_ring *r =
			__atomic_load_n(&u->rings[i], __ATOMIC_ACQUIRE);

		if (!r)
			continue;
		u->rings[i] = NULL;
		bs_loop_call(r->loop, ring_free, r);
	}
}

/* The calling loop's ring, made on its first request. */
static struct drv_uring_ring *ring_here(struct drv_uring *u,
					struct bs_req *req, int *err)
{
	struct bs_loop *loop = req->loop ? req->loop
					 : bs_ctx_current_loop(u->dev->ctx);
	unsigned li = bs_loop_index(loop);
	struct drv_uring_ring *r = __atomic_load_n(&u->rings[li],
						   __ATOMIC_ACQUIRE);

	if (r)
		return r;
	*err = ring_new(u, loop, &r);
	if (*err)
		return NULL;
	__atomic_store_n(&u->rings[li], r, __ATOMIC_RELEASE);
	return r;
}

static bool aligned(const struct drv_uring *u, const struct bs_req *req)
{
	int i;

	if (u->mem_align <= 1)
		return true;
	for (i = 0; i < req->iovcnt; i++)
		if (((uintptr_t)req->iov[i].iov_base | req->iov[i].iov_len) &
		    (u->mem_align - 1))
			return false;
	return true;
}

static void copy_from_iov(void *dst, const struct bs_req *req)
{
	char *p = dst;
	int i;

	for (i = 0; i < req->iovcnt; i++) {
		memcpy(p, req->iov[i].iov_base, req->iov[i].iov_len);
		p += req->iov[i].iov_len;
	}
}

static void copy_to_iov(const struct bs_req *req, const void *src)
{
	const char *p = src;
	int i;

	for (i = 0; i < req->iovcnt; i++) {
		memcpy(req->iov[i].iov_base, p, req->iov[i].iov_len);
		p += req->iov[i].iov_len;
	}
}

static void bounce_free(struct drv_uring_ring *rg, struct bs_req *req)
{
	struct drv_uring_req *r = drv_uring_req(req);

	if (r->bounce) {
		free(r->bounce);
		r->bounce = NULL;
		rg->bounces--;
	}
}

static void uring_complete(struct drv_uring_ring *rg, struct bs_req *req,
			   int res)
{
	if (!res && req->op == BS_OP_READ && drv_uring_req(req)->bounce)
		copy_to_iov(req, drv_uring_req(req)->bounce);
	bounce_free(rg, req);
	bs_req_complete(req, res);
}

/* Reads from this size on go to io_uring workers (IOSQE_ASYNC). */
#define DRV_URING_ASYNC_BYTES (64u << 10)

/* Prepare the SQE of a READ/WRITE from where it stands (r->done). */
static void prep_rw(struct drv_uring *u, struct bs_req *req,
		    struct io_uring_sqe *sqe)
{
	struct drv_uring_req *r = drv_uring_req(req);
	uint64_t off = req->offset + r->done;
	uint64_t len = req->len - r->done;
	bool rd = req->op == BS_OP_READ;

	if (r->bounce) {
		char *p = (char *)r->bounce + r->done;
		if (rd)
			io_uring_prep_read(sqe, u->fd, p, (unsigned)len, off);
		else
			io_uring_prep_write(sqe, u->fd, p, (unsigned)len, off);
	} else if (r->done || req->iovcnt != 1) {
		/* resume a short transfer: one piece at a time */
		uint64_t skip = r->done;
		int i;

		for (i = 0; i < req->iovcnt && skip >= req->iov[i].iov_len; i++)
			skip -= req->iov[i].iov_len;
		if (r->done || i) {
			void *p = (char *)req->iov[i].iov_base + skip;
			unsigned n = (unsigned)(req->iov[i].iov_len - skip);
			if (rd)
				io_uring_prep_read(sqe, u->fd, p, n, off);
			else
				io_uring_prep_write(sqe, u->fd, p, n, off);
		} else if (rd) {
			io_uring_prep_readv(sqe, u->fd, req->iov,
					    (unsigned)req->iovcnt, off);
		} else {
			io_uring_prep_writev(sqe, u->fd, req->iov,
					     (unsigned)req->iovcnt, off);
		}
	} else if (rd) {
		io_uring_prep_read(sqe, u->fd, req->iov[0].iov_base,
				   (unsigned)len, off);
	} else {
		io_uring_prep_write(sqe, u->fd, req->iov[0].iov_base,
				    (unsigned)len, off);
	}
	if (!rd && (req->flags & BS_REQ_FUA))
		sqe->rw_flags |= RWF_DSYNC;
	/*
	 * A large read that hits the page cache would be copied inline, on
	 * the loop thread that also serves every client: hand it to an
	 * io_uring worker so the copy runs on another core. Not writes:
	 * buffered writes to one file in many workers fight over its inode
	 * lock (measured: more CPU, less throughput).
	 */
	if (rd && len >= DRV_URING_ASYNC_BYTES)
		sqe->flags |= IOSQE_ASYNC;
}

/* Queue one SQE for @req; false when the ring (or the bounce pool) is full. */
static bool queue_sqe(struct drv_uring_ring *rg, struct bs_req *req)
{
	struct drv_uring *u = rg->u;
	struct io_uring_sqe *sqe;
	bool rw = req->op == BS_OP_READ || req->op == BS_OP_WRITE;
	int err;

	if (rw && !drv_uring_req(req)->bounce && !drv_uring_req(req)->done &&
	    !aligned(u, req)) {
		void *b;

		if (rg->bounces >= DRV_URING_MAX_BOUNCES)
			return false;
		if (posix_memalign(&b, u->mem_align, req->len)) {
			bs_req_complete(req, -ENOMEM);
			return true;
		}
		if (req->op == BS_OP_WRITE)
			copy_from_iov(b, req);
		drv_uring_req(req)->bounce = b;
		rg->bounces++;
		__atomic_fetch_add(&u->bounced, 1, __ATOMIC_RELAXED);
	}
	sqe = io_uring_get_sqe(&rg->ring);
	if (!sqe)
		return false; /* the bounce buffer, if any, stays with req */
	switch (req->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
		prep_rw(u, req, sqe);
		break;
	case BS_OP_FLUSH:
		io_uring_prep_fsync(sqe, u->fd, IORING_FSYNC_DATASYNC);
		break;
	default:
		err = u->ops && u->ops->prep ? u->ops->prep(u->dev, req, sqe)
					     : -EOPNOTSUPP;
		if (err) {
			/* answered here: a no-op brings it back to be
			 * completed from uring_reap(), not from inside this
			 * submit (the callback may submit again) */
			struct drv_uring_req *r = drv_uring_req(req);

			io_uring_prep_nop(sqe);
			r->answered = true;
			r->answer = err == DRV_URING_DONE ? 0 : err;
		}
	}
	io_uring_sqe_set_data(sqe, req);
	rg->inflight++;
	rg->dirty = true;
	return true;
}

/* Park a request until the ring has room (FIFO through req->work.next). */
static void wait_push(struct drv_uring_ring *rg, struct bs_req *req)
{
	req->work.next = NULL;
	if (rg->wait_tail)
		rg->wait_tail->work.next = (struct bs_work *)req;
	else
		rg->wait_head = req;
	rg->wait_tail = req;
}

/*
 * A small buffered write, done here: true when @req is finished (written
 * or failed); false to go through the ring for what is left (interrupted,
 * or written in part: r->done says how much).
 */
static bool write_inline(const struct drv_uring *u, struct bs_req *req)
{
	ssize_t n = pwritev(u->fd, req->iov, req->iovcnt,
			    (off_t)req->offset);

	if (n == (ssize_t)req->len) {
		bs_req_complete(req, 0);
		return true;
	}
	if (n < 0 && errno != EINTR && errno != EAGAIN) {
		bs_req_complete(req, -errno);
		return true;
	}
	if (n > 0)
		drv_uring_req(req)->done = (uint64_t)n;
	return false;
}

void drv_uring_submit(struct drv_uring *u, struct bs_req *req)
{
	int err = 0;
	struct drv_uring_ring *rg = ring_here(u, req, &err);

	if (!rg) {
		bs_req_complete(req, err);
		return;
	}
	if (req->op == BS_OP_WRITE && req->len <= u->inline_write_max &&
	    !u->mem_align && !(req->flags & BS_REQ_FUA) && !rg->wait_head &&
	    write_inline(u, req))
		return;
	/* the core gave a zeroed context: no bounce, nothing done */
	if (rg->wait_head || !queue_sqe(rg, req))
		wait_push(rg, req);
}

static void uring_prepoll(void *arg)
{
	struct drv_uring_ring *rg = arg;

	while (rg->wait_head) {
		struct bs_req *r = rg->wait_head;

		/* off the list first: queue_sqe() may complete @r (no
		 * memory for a bounce), and its callback reuse r->work */
		rg->wait_head = (struct bs_req *)r->work.next;
		if (!rg->wait_head)
			rg->wait_tail = NULL;
		if (!queue_sqe(rg, r)) {
			/* no SQE free: back at the head, in its turn */
			r->work.next = (struct bs_work *)rg->wait_head;
			rg->wait_head = r;
			if (!rg->wait_tail)
				rg->wait_tail = r;
			break;
		}
	}
	if (rg->dirty) {
		rg->dirty = false;
		io_uring_submit(&rg->ring);
		/*
		 * What completed inside the submit (a read from the page
		 * cache) is reaped now rather than after an epoll_wait that
		 * reports the ring readable: one wakeup less per request.
		 */
		if (!rg->reaping && io_uring_cq_ready(&rg->ring))
			uring_reap(rg, EPOLLIN);
	}
}

/* A READ/WRITE came back with @res >= 0: true when it is finished. */
static bool rw_done(struct drv_uring_ring *rg, struct bs_req *req, int res)
{
	struct drv_uring *u = rg->u;
	struct drv_uring_req *r = drv_uring_req(req);

	if (res == 0) {
		uint64_t skip = r->done;
		int i;

		if (req->op == BS_OP_WRITE || !u->eof_zeroes) {
			uring_complete(rg, req, -EIO);
			return true;
		}
		/* past EOF of a shorter file: zeroes */
		if (r->bounce) {
			memset((char *)r->bounce + skip, 0, req->len - skip);
		} else {
			for (i = 0; i < req->iovcnt; i++) {
				struct iovec *v = &req->iov[i];
				if (skip >= v->iov_len) {
					skip -= v->iov_len;
					continue;
				}
				memset((char *)v->iov_base + skip, 0,
				       v->iov_len - skip);
				skip = 0;
			}
		}
		uring_complete(rg, req, 0);
		return true;
	}
	r->done += (uint64_t)res;
	if (r->done < req->len)
		return false;
	uring_complete(rg, req, 0);
	return true;
}

static void uring_reap(void *arg, uint32_t events)
{
	struct drv_uring_ring *rg = arg;
	struct drv_uring *u = rg->u;
	struct io_uring_cqe *cqe;

	(void)events;
	rg->reaping = true;
	while (io_uring_peek_cqe(&rg->ring, &cqe) == 0) {
		struct bs_req *req = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&rg->ring, cqe);
		rg->inflight--;
		if (!req)
			continue; /* a no-op for a request already completed */
		if (drv_uring_req(req)->answered) {
			drv_uring_req(req)->answered = false;
			bs_req_complete(req, drv_uring_req(req)->answer);
			continue;
		}
		if (req->op != BS_OP_READ && req->op != BS_OP_WRITE &&
		    req->op != BS_OP_FLUSH && u->ops && u->ops->reaped)
			u->ops->reaped(u->dev, req);
		if (res == -EAGAIN || res == -EINTR)
			goto again;
		if (res < 0) {
			uring_complete(rg, req, res);
			continue;
		}
		if (req->op == BS_OP_READ || req->op == BS_OP_WRITE) {
			if (rw_done(rg, req, res))
				continue;
			goto again;
		}
		if (u->ops && u->ops->again && u->ops->again(u->dev, req))
			goto again;
		bs_req_complete(req, 0);
		continue;
again:
		if (rg->wait_head || !queue_sqe(rg, req))
			wait_push(rg, req);
	}
	if (rg->dirty || rg->wait_head)
		uring_prepoll(rg);
	rg->reaping = false;
}
