/* SPDX-License-Identifier: MIT */
/*
 * Synchronous waits for asynchronous device operations, from the loop's
 * own thread (run the loop until done) or from another thread (post the
 * start to the loop, sleep on a condition variable until the loop says
 * done). See bs_sync_run() in core/internal.h.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/loop.h>

#include "core/internal.h"

static void save_msg(struct bs_sync *s)
{
	snprintf(s->msg, sizeof(s->msg), "%s", bs_last_error());
}

void bs_sync_done(struct bs_sync *s)
{
	if (!s->remote) {
		s->done = true;
		return;
	}
	if (s->failed)
		save_msg(s);
	pthread_mutex_lock(&s->lock);
	s->done = true;
	pthread_cond_signal(&s->cond);
	/* the waiter may free @s as soon as the lock is released */
	pthread_mutex_unlock(&s->lock);
}

/* On the loop's thread: begin the caller's operation. */
static void remote_start(void *arg)
{
	struct bs_sync *s = arg;
	int err;

	bs_error_clear();
	err = s->start(s, s->arg);
	if (err) {
		s->start_err = err;
		s->failed = true;
		bs_sync_done(s);
	}
}

int bs_sync_run(struct bs_ctx *ctx, struct bs_sync *s,
		int (*start)(struct bs_sync *s, void *arg), void *arg)
{
	int err;

	s->done = false;
	s->failed = false;
	s->start_err = 0;
	s->start = start;
	s->arg = arg;
	s->remote = !bs_loop_is_current(ctx->loop);
	if (!s->remote) {
		err = start(s, arg);
		if (err)
			return err;
		return bs_ctx_wait(ctx, &s->done);
	}
	s->msg[0] = '\0';
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	/* the loop must hear of it: retry a failed allocation (any other
	 * error still queued the call, only the wake-up failed) */
	while (bs_loop_post(ctx->loop, remote_start, s) == -ENOMEM)
		usleep(1000);
	pthread_mutex_lock(&s->lock);
	while (!s->done)
		pthread_cond_wait(&s->cond, &s->lock);
	pthread_mutex_unlock(&s->lock);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
	if (s->failed)
		bs_error(s->start_err, "%s", s->msg);
	return s->start_err;
}
