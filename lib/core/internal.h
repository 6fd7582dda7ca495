/* SPDX-License-Identifier: MIT */
/* Core-private state shared by the files of lib/core/. */
#ifndef BLKSTACK_CORE_INTERNAL_H
#define BLKSTACK_CORE_INTERNAL_H

#include <pthread.h>

#include <blkstack/bdev.h>
#include <blkstack/threads.h>

struct io_thread;
struct retired;

struct bs_ctx {
	struct bs_loop *loop;		/* the main loop, index 0 */
	/* I/O threads (threads.c): their loops are loops[1..nio] */
	struct io_thread *io;
	unsigned nio;
	unsigned poll_us;	/* bs_ctx_set_poll(), for threads started later */
	bool ring;		/* bs_ctx_set_ring(), likewise */
	int ring_err;		/* why an I/O loop stayed on epoll (0: none) */
	unsigned next_io;		/* round robin, atomic */
	struct bs_loop *loops[BS_THREADS_MAX + 1];
	/* published device snapshots (snap.c) */
	pthread_mutex_t snap_lock;
	struct retired *retired;
	int snap_timer;
	struct bs_dev *devs;	/* creation order */
	/*
	 * Made at first use, from any thread: built under lazy_lock and
	 * published with a release store; readers load with acquire
	 * (BS_CTX_LAZY_GET), so nobody sees one half built.
	 */
	pthread_mutex_t lazy_lock;
	void *zero_buf;		/* BS_ZERO_BUF_SIZE of zeroes, shared, lazy */
	struct bs_workers *workers;	/* bs_ctx_workers(), lazy */
	struct bs_budget *budget;	/* bs_ctx_budget(), lazy */
	bs_ctx_log_fn log;		/* bs_ctx_set_log(), NULL: none */
	void *log_arg;
};

/*
 * The lazy members of a context: return @field if made; else make it
 * once under lazy_lock with @make (an expression giving the new value or
 * NULL) and publish it.
 */
#define BS_CTX_LAZY_GET(ctx, field, make)                                  \
	({                                                                 \
		__typeof__((ctx)->field) v_ =                              \
			__atomic_load_n(&(ctx)->field, __ATOMIC_ACQUIRE);  \
		if (!v_) {                                                 \
			pthread_mutex_lock(&(ctx)->lazy_lock);             \
			v_ = (ctx)->field;                                 \
			if (!v_ && (v_ = (make)))                          \
				__atomic_store_n(&(ctx)->field, v_,        \
						 __ATOMIC_RELEASE);        \
			pthread_mutex_unlock(&(ctx)->lazy_lock);           \
		}                                                          \
		v_;                                                        \
	})

/*
 * Waiting for an asynchronous operation, from either side of the loop
 * (sync.c). bs_sync_run(ctx, s, start, arg) calls start(s, arg) on the
 * loop's thread, which begins the operation; the operation's completion
 * (on the loop) calls bs_sync_done(s). On the loop's thread itself the
 * caller runs the loop meanwhile (the CLI's way); on any other thread (a
 * command thread of blkstackd) start() is posted to the loop and the
 * caller sleeps on a condition variable, never touching device state and
 * never running a nested loop. Returns start()'s error, or 0 once done;
 * the operation's result is whatever the completion stored. In the
 * threaded case the loop's last error message (bs_last_error()) at
 * completion is copied to the caller's thread when start() fails or the
 * completion sets s->failed.
 */
struct bs_sync {
	bool done;
	bool remote;
	bool failed;		/* set by the completion with its result */
	int start_err;
	int (*start)(struct bs_sync *s, void *arg);
	void *arg;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char msg[512];
};

int bs_sync_run(struct bs_ctx *ctx, struct bs_sync *s,
		int (*start)(struct bs_sync *s, void *arg), void *arg);
/* On the loop's thread, once: the operation has completed. */
void bs_sync_done(struct bs_sync *s);

/*
 * Opening (dev.c, open.c). components_ready: 0 when every component is
 * live, BS_OPEN_PENDING when one is opening, -ENXIO (bs_error) when one
 * failed. open_driver: the type's open with @opts, then finish_open
 * (stack or finish limits, the knob, the size check; state LIVE) unless
 * the driver went on asynchronously (state OPENING).
 */
int bs_dev_components_ready(struct bs_dev *dev);
int bs_dev_open_driver(struct bs_dev *dev, struct bs_opts *opts);
int bs_dev_finish_open(struct bs_dev *dev);

/*
 * Free every claim still held on @dev (claim.c): only for a context going
 * away, when their holders are gone without giving them back.
 */
void bs_dev_claims_drop(struct bs_dev *dev);

/*
 * Snapshots (snap.c). Publish @dev's limits, state and capabilities as
 * they are now (main loop); free the device's own at destruction, and
 * every retired one when the context goes.
 */
int bs_dev_publish(struct bs_dev *dev);
void bs_dev_snap_free(struct bs_dev *dev);
void bs_ctx_snaps_free(struct bs_ctx *ctx);
/* bs_dev_caps() computed afresh from the main loop's state (caps.c). */
void bs_dev_caps_compute(const struct bs_dev *dev, struct bs_caps *c);

/* Free @dev's cached per-request driver contexts (device going away). */
void bs_req_drv_ctx_drain(struct bs_dev *dev);

/* The context's shared, read-only zero buffer (allocated on first use). */
const void *bs_ctx_zero_buf(struct bs_ctx *ctx);

/*
 * Write ordering (order.c). Admit @n (start, end, excl, go set): true when
 * it may go now (it is active), false when it waits; n->go(n) is then
 * called once it is admitted. Release it when its I/O is done.
 */
bool bs_wt_admit(struct bs_dev *dev, struct bs_wt_node *n);
void bs_wt_release(struct bs_dev *dev, struct bs_wt_node *n);

/*
 * Requests (req.c). Submit without taking a place in the write ordering:
 * for the core's own pieces of a request that already holds one. Complete
 * @req with @result through the loop (releasing its ordering node).
 */
void bs_submit_untracked(struct bs_dev *dev, struct bs_req *req);
void bs_req_finish(struct bs_dev *dev, struct bs_req *req, int result);

/*
 * Point a new array *@dstp (free() it) at bytes [off, off+len) of the
 * scatter list @src; returns its entry count or -ENOMEM.
 */
int bs_iov_slice(const struct iovec *src, int cnt, uint64_t off,
		 uint64_t len, struct iovec **dstp);

#endif
