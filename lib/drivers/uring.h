/* SPDX-License-Identifier: MIT */
/*
 * The io_uring request path shared by the drivers that do I/O on a file
 * descriptor (file, hostbdev); not a public API.
 *
 * READ, WRITE (FUA as RWF_DSYNC) and FLUSH (fdatasync) are handled here,
 * including short transfers and, for O_DIRECT, bouncing user buffers that
 * are not aligned as the kernel requires. Other ops are prepared by the
 * driver's prep() hook. A request that finds the ring full waits in FIFO
 * order and is queued before the loop next blocks.
 *
 * Threads: a device has one ring per loop that submits to it (a channel:
 * its own ring, in-flight count, wait queue and bounce count), made on
 * that loop's first request and watched by that loop alone, so a request
 * is prepared, reaped and completed on the loop that submitted it, with
 * no lock. drv_uring_exit() tears every ring down on its own loop.
 *
 * Per-request state: a driver using this path gives its requests a
 * context (req_ctx_size) that starts with struct drv_uring_req.
 */
#ifndef BLKSTACK_DRIVERS_URING_H
#define BLKSTACK_DRIVERS_URING_H

#include <liburing.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/bdev.h>

/* At most this many bounce buffers (each up to one request) at a time. */
#define DRV_URING_MAX_BOUNCES 16

/* The first member of the per-request context of a driver using io_uring. */
struct drv_uring_req {
	void *bounce;		/* O_DIRECT bounce buffer (READ/WRITE) */
	uint64_t done;		/* bytes transferred so far (READ/WRITE) */
	/* prep() answered without the kernel: a no-op SQE carries the
	 * request, which completes with this result when it is reaped
	 * (never inside the submit, and never while the wait list is
	 * being walked) */
	bool answered;
	int answer;
};

static inline struct drv_uring_req *drv_uring_req(const struct bs_req *req)
{
	return bs_req_drv(req);
}

/* prep(): the request is done, successfully, with no kernel call needed. */
#define DRV_URING_DONE 1

struct drv_uring_ops {
	/*
	 * Prepare @sqe for @req (an op other than READ, WRITE, FLUSH) over
	 * [req->offset, +req->len). Return 0, or -errno to complete @req
	 * with that error without asking the kernel, or DRV_URING_DONE to
	 * complete it with success without asking the kernel (nothing to do).
	 */
	int (*prep)(struct bs_dev *dev, struct bs_req *req,
		    struct io_uring_sqe *sqe);
	/*
	 * Optional: the kernel answered an SQE that prep() filled (called
	 * once per successful prep, before again() or the completion).
	 */
	void (*reaped)(struct bs_dev *dev, struct bs_req *req);
	/*
	 * Optional: @req (not READ/WRITE) succeeded; return true to queue
	 * it again for a next step (prep() then sees the state it left).
	 */
	bool (*again)(struct bs_dev *dev, struct bs_req *req);
};

struct drv_uring;

/* One loop's channel to the device (uring.c). */
struct drv_uring_ring {
	struct io_uring ring;
	struct drv_uring *u;
	struct bs_loop *loop;
	unsigned inflight;
	unsigned bounces;		/* bounce buffers in use */
	struct bs_req *wait_head, *wait_tail;
	bool dirty;			/* SQEs queued, not submitted */
	bool reaping;			/* in uring_reap(): no inline reap */
};

struct drv_uring {
	struct bs_dev *dev;
	const struct drv_uring_ops *ops;
	int fd;
	unsigned depth;			/* of each ring */
	/* O_DIRECT memory alignment: 0 = none; else unaligned buffers bounce */
	size_t mem_align;
	uint64_t bounced;		/* requests bounced, ever (atomic) */
	bool eof_zeroes;		/* reads past EOF give zeroes (files) */
	/*
	 * Buffered writes up to this many bytes are written with pwritev()
	 * on the loop thread instead of through the ring (0 = never). On
	 * ext4 io_uring cannot write buffered without blocking
	 * (RWF_NOWAIT is EOPNOTSUPP there), so every such write is handed to
	 * an io_uring worker: two context switches per 4 KiB write.
	 */
	uint32_t inline_write_max;
	/* per loop index, made by that loop (atomic pointers) */
	struct drv_uring_ring *rings[BS_THREADS_MAX + 1];
};

/*
 * Set up rings of @depth entries on @fd for @dev: the main loop's now
 * (so that an open reports a failure), the I/O loops' on their first
 * request. Returns 0 or -errno with bs_error() naming @what.
 */
int drv_uring_init(struct drv_uring *u, struct bs_dev *dev, int fd,
		   unsigned depth, const struct drv_uring_ops *ops,
		   const char *what);
/* Wait for every request in flight or waiting, then tear every ring
 * down on its own loop (main loop; the I/O threads still run). */
void drv_uring_exit(struct drv_uring *u);
/* Queue @req on the calling loop's ring; it completes there. */
void drv_uring_submit(struct drv_uring *u, struct bs_req *req);

#endif
