/* SPDX-License-Identifier: MIT */
/*
 * Worker threads for blocking calls: jobs go to the threads through a
 * locked FIFO and come back to the loop that submitted them, each through
 * bs_loop_send() (intrusive, no allocation).
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
	struct bs_loop *loop;		/* for jobs submitted off any loop */
	unsigned max_inflight;
	pthread_mutex_t lock;		/* everything below */
	pthread_cond_t cond;
	struct job_fifo todo;		/* handed to the threads */
	struct job_fifo waiting;	/* beyond max_inflight */
	unsigned inflight;		/* in todo or running */
	unsigned pending;		/* submitted, done() not yet run */
	unsigned idle;			/* threads asleep on cond */
	unsigned running;		/* threads in a job's run() */
	bool stop;
	pthread_t threads[MAX_THREADS];
	unsigned nthreads;
};

/*
 * Hand waiting jobs to the threads while there is room (locked): one
 * sleeping thread woken per job, none when a thread is awake to take it
 * (a broadcast woke every idle thread for each job, and on a guest whose
 * idle CPUs halt each wake-up is an interrupt to another CPU).
 */
static void feed_locked(struct bs_workers *w)
{
	unsigned spare = w->nthreads - w->idle - w->running, queued, wake;

	while (w->waiting.head &&
	       (!w->max_inflight || w->inflight < w->max_inflight)) {
		fifo_push(&w->todo, fifo_pop(&w->waiting));
		w->inflight++;
	}
	/* threads awake between jobs take from todo before they sleep */
	queued = w->inflight - w->running;
	for (wake = 0; queued > spare + wake && wake < w->idle; wake++)
		pthread_cond_signal(&w->cond);
}

/* On the submitter's loop: finish what a thread did. */
static void job_done(void *arg)
{
	struct bs_job *j = arg;
	struct bs_workers *w = j->pool;

	/* done() may free @j; @w lives until pending is 0 */
	j->done(j);
	pthread_mutex_lock(&w->lock);
	w->pending--;
	pthread_mutex_unlock(&w->lock);
}

static void *worker(void *arg)
{
	struct bs_workers *w = arg;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		struct bs_job *j = fifo_pop(&w->todo);

		if (!j) {
			if (w->stop)
				break;
			w->idle++;
			pthread_cond_wait(&w->cond, &w->lock);
			w->idle--;
			continue;
		}
		w->running++;
		pthread_mutex_unlock(&w->lock);
		j->result = j->run(j);
		pthread_mutex_lock(&w->lock);
		w->running--;
		w->inflight--;
		feed_locked(w);
		pthread_mutex_unlock(&w->lock);
		/* back to the loop that submitted it (no allocation) */
		j->work.fn = job_done;
		j->work.arg = j;
		bs_loop_send(j->loop, &j->work);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
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
	struct bs_loop *cur = bs_loop_current();

	j->result = 0;
	j->pool = w;
	/* done() runs where the job came from */
	j->loop = cur ? cur : w->loop;
	pthread_mutex_lock(&w->lock);
	w->pending++;
	fifo_push(&w->waiting, j);
	feed_locked(w);
	pthread_mutex_unlock(&w->lock);
}

unsigned bs_workers_pending(const struct bs_workers *w)
{
	unsigned n;

	pthread_mutex_lock((pthread_mutex_t *)&w->lock);
	n = w->pending;
	pthread_mutex_unlock((pthread_mutex_t *)&w->lock);
	return n;
}

void bs_workers_free(struct bs_workers *w)
{
	unsigned i;

	if (!w)
		return;
	/*
	 * Every job comes back through job_done() on its loop: run ours
	 * meanwhile (the jobs of the I/O loops finish on those threads).
	 */
	while (bs_workers_pending(w))
		if (bs_loop_is_current(w->loop) ? bs_loop_run_once(w->loop, 10)
						: (usleep(1000), 0))
			break;
	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
	for (i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static struct bs_workers *ctx_workers_new(struct bs_ctx *ctx)
{
	struct bs_workers *w;

	return bs_workers_new(ctx->loop, 2, 0, &w) ? NULL : w;
}

/* first used from any thread (an NFS call, a hostbdev zeroout) */
struct bs_workers *bs_ctx_workers(struct bs_ctx *ctx)
{
	return BS_CTX_LAZY_GET(ctx, workers, ctx_workers_new(ctx));
}
