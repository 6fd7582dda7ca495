/* SPDX-License-Identifier: MIT */
/*
 * I/O threads: a context's main loop and, in a server, N more loops, each
 * run by its own thread. Connections are spread over the I/O loops; a
 * request completes on the loop that submitted it. bs_loop_call() runs a
 * function on another loop and waits for it (device channels are set up
 * and torn down on their own loop this way).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/threads.h>

#include "core/internal.h"

struct io_thread {
	struct bs_loop *loop;
	pthread_t tid;
	bool started;
};

static void *io_main(void *arg)
{
	struct io_thread *t = arg;

	bs_loop_run(t->loop);
	return NULL;
}

unsigned bs_cpu_count(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > BS_THREADS_MAX ? BS_THREADS_MAX : (unsigned)n;
}

void bs_ctx_set_poll(struct bs_ctx *ctx, unsigned us)
{
	ctx->poll_us = us;
}

void bs_ctx_set_ring(struct bs_ctx *ctx, bool on)
{
	ctx->ring = on;
}

int bs_ctx_ring_error(const struct bs_ctx *ctx)
{
	return ctx->ring_err;
}

int bs_ctx_start_threads(struct bs_ctx *ctx, unsigned n)
{
	sigset_t all, old;
	unsigned i;
	int err = 0;

	if (ctx->nio)
		return bs_error(-EBUSY, "I/O threads already started");
	if (n > BS_THREADS_MAX)
		return bs_error(-EINVAL, "threads = %u: at most %u", n,
				BS_THREADS_MAX);
	if (!n)
		return 0;
	ctx->io = calloc(n, sizeof(*ctx->io));
	if (!ctx->io)
		return bs_error(-ENOMEM, "out of memory for %u I/O threads", n);
	/* the threads take no signal: the main loop's signalfd gets them */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (i = 0; i < n; i++) {
		struct io_thread *t = &ctx->io[i];
		struct bs_loop *keep = bs_loop_current();

		err = bs_loop_new(&t->loop);
		/* bs_loop_new() made it this thread's loop if it had none */
		bs_loop_set_current(keep);
		if (err)
			break;
		bs_loop_set_index(t->loop, i + 1);
		bs_loop_set_poll(t->loop, ctx->poll_us);
		if (ctx->ring) {
			int e = bs_loop_use_ring(t->loop, BS_RING_ENTRIES);

			/* no io_uring here: this loop stays on epoll */
			if (e && !ctx->ring_err)
				ctx->ring_err = e;
		}
		ctx->loops[i + 1] = t->loop;
		err = -pthread_create(&t->tid, NULL, io_main, t);
		if (err) {
			bs_loop_free(t->loop);
			t->loop = NULL;
			ctx->loops[i + 1] = NULL;
			break;
		}
		/* from now on only that thread counts as the loop's own */
		bs_loop_set_owner(t->loop, t->tid);
		t->started = true;
		ctx->nio++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		bs_ctx_stop_threads(ctx);
		return bs_error(err, "cannot start I/O thread %u: %s", i + 1,
				strerror(-err));
	}
	return 0;
}

void bs_ctx_stop_threads(struct bs_ctx *ctx)
{
	unsigned i;

	for (i = 0; i < ctx->nio; i++)
		bs_loop_stop(ctx->io[i].loop);
	for (i = 0; i < ctx->nio; i++) {
		if (ctx->io[i].started)
			pthread_join(ctx->io[i].tid, NULL);
		bs_loop_free(ctx->io[i].loop);
		ctx->loops[i + 1] = NULL;
	}
	free(ctx->io);
	ctx->io = NULL;
	ctx->nio = 0;
}

unsigned bs_ctx_nthreads(const struct bs_ctx *ctx)
{
	return ctx->nio;
}

unsigned bs_ctx_nloops(const struct bs_ctx *ctx)
{
	return ctx->nio + 1;
}

struct bs_loop *bs_ctx_loop_at(struct bs_ctx *ctx, unsigned index)
{
	return index <= ctx->nio ? ctx->loops[index] : NULL;
}

struct bs_loop *bs_ctx_io_loop(struct bs_ctx *ctx)
{
	unsigned i;

	if (!ctx->nio)
		return ctx->loop;
	i = __atomic_fetch_add(&ctx->next_io, 1, __ATOMIC_RELAXED);
	return ctx->io[i % ctx->nio].loop;
}

struct bs_loop *bs_ctx_current_loop(struct bs_ctx *ctx)
{
	struct bs_loop *l = bs_loop_current();
	unsigned i = l ? bs_loop_index(l) : 0;

	/* a thread without a loop (or another context's) counts as main */
	return l && i <= ctx->nio && ctx->loops[i] == l ? l : ctx->loop;
}

/* ---- running a function on another loop and waiting ------------------ */

struct call {
	struct bs_work work;
	bs_fn fn;
	void *arg;
	bool done;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

static void call_run(void *arg)
{
	struct call *c = arg;

	c->fn(c->arg);
	pthread_mutex_lock(&c->lock);
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

void bs_loop_call(struct bs_loop *loop, bs_fn fn, void *arg)
{
	struct call c = { .fn = fn, .arg = arg };

	if (bs_loop_current() == loop || bs_loop_is_current(loop)) {
		fn(arg);
		return;
	}
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	c.work.fn = call_run;
	c.work.arg = &c;
	bs_loop_send(loop, &c.work);
	pthread_mutex_lock(&c.lock);
	while (!c.done)
		pthread_cond_wait(&c.cond, &c.lock);
	pthread_mutex_unlock(&c.lock);
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
}
