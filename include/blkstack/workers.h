/* SPDX-License-Identifier: MIT */
/*
 * A pool of worker threads for the blocking calls a driver or command
 * cannot make on the loop (ioctls, fallocate on a block device, a
 * library's synchronous API, opening a host file that may block). Jobs
 * run on a worker and complete on the loop's thread, in a callback, the
 * way requests do.
 */
#ifndef BLKSTACK_WORKERS_H
#define BLKSTACK_WORKERS_H

#include <blkstack/loop.h>

struct bs_ctx;
struct bs_workers;

struct bs_job {
	/* set by the submitter */
	int (*run)(struct bs_job *job);	/* on a worker: 0 or -errno */
	void (*done)(struct bs_job *job); /* on the loop, once */
	/* set by the pool */
	int result;			/* what run() returned */
	struct bs_job *next;
	struct bs_workers *pool;
	struct bs_loop *loop;		/* the submitter's: done() runs there */
	struct bs_work work;
};

/*
 * A pool of @nthreads workers completing on @loop; at most @max_inflight
 * jobs are handed to the threads at once, the rest wait in FIFO order on
 * the loop side (0: no limit).
 */
int bs_workers_new(struct bs_loop *loop, unsigned nthreads,
		   unsigned max_inflight, struct bs_workers **out);
/* Run the loop until every submitted job is done, then join and free. */
void bs_workers_free(struct bs_workers *w);

/*
 * From any loop's thread: queue @job; its done() runs later on that same
 * loop, never inside this call.
 */
void bs_workers_submit(struct bs_workers *w, struct bs_job *job);

/* Jobs submitted and not yet done. */
unsigned bs_workers_pending(const struct bs_workers *w);

/*
 * The context's shared pool (2 threads), started on first use and
 * stopped when the context is freed, after its devices. NULL when the
 * threads cannot be started (bs_error() says why).
 */
struct bs_workers *bs_ctx_workers(struct bs_ctx *ctx);

#endif
