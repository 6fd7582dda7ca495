/* SPDX-License-Identifier: MIT */
/*
 * Worker threads for blocking calls: jobs go to the threads through a
 * locked FIFO, come back through another, and the loop hears of finished
 * jobs through one bs_loop_post() per batch.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/workers.h>

#include "core/internal.h"

#define MAX_THREADS 64

struct job_fifo {
	struct bs_job *head, *tail;
};

static void fifo_push(struct job_fifo *q, struct bs_job *j)
{
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
}

static struct bs_job *fifo_pop(struct job_fifo *q)
{
	struct bs_job *j = q->head;

	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		j->next = NULL;
	}
	return j;
}

struct bs_workers {
	struct bs_loop *loop;
	unsigned max_inflight;
	/* shared with the threads, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job_fifo todo;
	struct job_fifo done;
	bool kicked;		/* a post will collect the done FIFO */
	unsigned posts;		/* bs_loop_post()s not yet run */
	bool stop;
	pthread_t threads[MAX_THREADS];
	unsigned nthreads;
	/* loop thread only */
	struct job_fifo waiting;	/* beyond max_inflight */
	unsigned inflight;		/* handed to the threads */
	unsigned pending;		/* submitted, done() not yet run */
};

static void on_done(void *arg);

static void *worker(void *arg)
{
	struct bs_workers *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct bs_job *j = fifo_pop(&w->todo);
		bool kick;

		if (!j) {
			if (w->stop)
				break;
			pthread_cond_wait(&w->cond, &w->lock);
			continue;
		}
		pthread_mutex_unlock(&w->lock);
		j->result = j->run(j);
		pthread_mutex_lock(&w->lock);
		fifo_push(&w->done, j);
		kick = !w->kicked;
		w->kicked = true;
		if (kick) {
			w->posts++;
			pthread_mutex_unlock(&w->lock);
			/* the loop must hear of it: retry a failed allocation */
			while (bs_loop_post(w->loop, on_done, w) == -ENOMEM)
				usleep(1000);
			pthread_mutex_lock(&w->lock);
		}
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* Hand waiting jobs to the threads while there is room. */
static void feed(struct bs_workers *w)
{
	bool any = false;

	if (!w->waiting.head)
		return;
	pthread_mutex_lock(&w->lock);
	while (w->waiting.head &&
	       (!w->max_inflight || w->inflight < w->max_inflight)) {
		fifo_push(&w->todo, fifo_pop(&w->waiting));
		w->inflight++;
		any = true;
	}
	if (any)
		pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* On the loop's thread: finish what the threads did. */
static void on_done(void *arg)
{
	struct bs_workers *w = arg;
	struct job_fifo done;
	struct bs_job *j;

	pthread_mutex_lock(&w->lock);
	done = w->done;
	w->done.head = w->done.tail = NULL;
	w->kicked = false;
	w->posts--;
	pthread_mutex_unlock(&w->lock);
	while ((j = fifo_pop(&done))) {
		w->inflight--;
		w->pending--;
		j->done(j);
	}
	feed(w);
}

int bs_workers_new(struct bs_loop *loop, unsigned nthreads,
		   unsigned max_inflight, struct bs_workers **out)
{
	struct bs_workers *w;
	sigset_t all, old;
	int err = 0;

	if (!nthreads || nthreads > MAX_THREADS)
		return bs_error(-EINVAL, "workers: %u threads (1..%u)",
				nthreads, MAX_THREADS);
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->loop = loop;
	w->max_inflight = max_inflight;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	/* signals are the main thread's business */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (w->nthreads = 0; w->nthreads < nthreads; w->nthreads++) {
		err = -pthread_create(&w->threads[w->nthreads], NULL, worker, w);
		if (err)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!w->nthreads) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->lock);
		free(w);
		return bs_error(err, "workers: cannot start a thread: %s",
				strerror(-err));
	}
	*out = w;
	return 0;
}

void bs_workers_submit(struct bs_workers *w, struct bs_job *j)
{
	j->result = 0;
	w->pending++;
	fifo_push(&w->waiting, j);
	feed(w);
}

unsigned bs_workers_pending(const struct bs_workers *w)
{
	return w->pending;
}

void bs_workers_free(struct bs_workers *w)
{
	unsigned i;

	if (!w)
		return;
	/* every job handed out comes back through on_done() */
	while (w->pending)
		if (bs_loop_run_once(w->loop, 100))
			break;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	/* a post still queued on the loop must not find @w freed (one may
	 * come after its jobs were collected by an earlier one) */
	for (;;) {
		unsigned posts;

		pthread_mutex_lock(&w->lock);
		posts = w->posts;
		pthread_mutex_unlock(&w->lock);
		if (!posts || bs_loop_run_once(w->loop, 100))
			break;
	}
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

struct bs_workers *bs_ctx_workers(struct bs_ctx *ctx)
{
	if (!ctx->workers && bs_workers_new(ctx->loop, 2, 0, &ctx->workers))
		return NULL;
	return ctx->workers;
}
