/* SPDX-License-Identifier: MIT */
/*
 * The worker pool: blocking jobs run off the loop, complete on the loop's
 * thread in done(), never inside submit; the in-flight bound holds; the
 * loop keeps running while workers block; freeing waits for every job.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/workers.h>

#include "helpers/th.h"

struct tjob {
	struct bs_job job;
	pthread_t loop_thread;
	pthread_t ran_on;
	bool done_on_loop;
	bool done;
	int sleep_ms;
	int ret;
};

static atomic_int running, max_running;

static int tjob_run(struct bs_job *job)
{
	struct tjob *t = (struct tjob *)job;
	int now = atomic_fetch_add(&running, 1) + 1, m;

	while ((m = atomic_load(&max_running)) < now &&
	       !atomic_compare_exchange_weak(&max_running, &m, now))
		;
	t->ran_on = pthread_self();
	if (t->sleep_ms)
		usleep((useconds_t)t->sleep_ms * 1000);
	atomic_fetch_sub(&running, 1);
	return t->ret;
}

static void tjob_done(struct bs_job *job)
{
	struct tjob *t = (struct tjob *)job;

	t->done_on_loop = pthread_equal(pthread_self(), t->loop_thread);
	t->done = true;
}

static void init(struct tjob *t, int sleep_ms, int ret)
{
	memset(t, 0, sizeof(*t));
	t->job.run = tjob_run;
	t->job.done = tjob_done;
	t->loop_thread = pthread_self();
	t->sleep_ms = sleep_ms;
	t->ret = ret;
}

static void jobs_run_off_loop_and_complete_on_it(void **state)
{
	struct bs_loop *loop;
	struct bs_workers *w;
	struct tjob t[16];
	int i, n;

	(void)state;
	assert_int_equal(bs_loop_new(&loop), 0);
	assert_int_equal(bs_workers_new(loop, 2, 3, &w), 0);
	atomic_store(&max_running, 0);
	for (i = 0; i < 16; i++) {
		init(&t[i], 5, i % 3 ? 0 : -EIO);
		bs_workers_submit(w, &t[i].job);
		assert_false(t[i].done);	/* never inside submit */
	}
	assert_int_equal(bs_workers_pending(w), 16);
	for (n = 0; n < 2000 && bs_workers_pending(w); n++)
		bs_loop_run_once(loop, 10);
	assert_int_equal(bs_workers_pending(w), 0);
	for (i = 0; i < 16; i++) {
		assert_true(t[i].done);
		assert_true(t[i].done_on_loop);
		assert_false(pthread_equal(t[i].ran_on, t[i].loop_thread));
		assert_int_equal(t[i].job.result, i % 3 ? 0 : -EIO);
	}
	/* two threads, at most three handed out: never more than two run */
	assert_true(atomic_load(&max_running) <= 2);
	assert_true(atomic_load(&max_running) >= 1);
	bs_workers_free(w);
	bs_loop_free(loop);
}

struct tick {
	int n;
	struct bs_loop *loop;
};

static void on_tick(void *arg)
{
	struct tick *k = arg;

	if (++k->n < 1000)
		bs_loop_add_timer(k->loop, 1, on_tick, k);
}

/* A job blocking 200 ms does not stop the loop from running timers. */
static void loop_keeps_running_while_a_job_blocks(void **state)
{
	struct bs_loop *loop;
	struct bs_workers *w;
	struct tjob t;
	struct tick k = { 0 };
	int n;

	(void)state;
	assert_int_equal(bs_loop_new(&loop), 0);
	assert_int_equal(bs_workers_new(loop, 1, 0, &w), 0);
	k.loop = loop;
	init(&t, 200, 0);
	bs_workers_submit(w, &t.job);
	bs_loop_add_timer(loop, 1, on_tick, &k);
	for (n = 0; n < 5000 && !t.done; n++)
		bs_loop_run_once(loop, 10);
	assert_true(t.done);
	/* 1 ms timers kept firing while the worker slept */
	assert_true(k.n >= 20);
	bs_workers_free(w);
	bs_loop_free(loop);
}

/* A job that waits for a gate; the gate opens when the test says. */
struct gjob {
	struct bs_job job;
	atomic_bool *gate;
	atomic_bool started;
	bool done;
};

static int gjob_run(struct bs_job *job)
{
	struct gjob *g = (struct gjob *)job;
	int i;

	atomic_store(&g->started, true);
	for (i = 0; i < 5000 && g->gate && !atomic_load(g->gate); i++)
		usleep(1000);
	return 0;
}

static void gjob_done(struct bs_job *job)
{
	((struct gjob *)job)->done = true;
}

/*
 * Each job wakes one idle thread (no broadcast), and only when no thread
 * is free to take it: a job submitted while one thread is held in a long
 * job and the other sleeps starts at once on the sleeper, not after the
 * long job; many jobs at once all run (none waits for a wake-up that
 * never comes), on every thread.
 */
static void a_sleeping_thread_takes_a_job_while_another_blocks(void **state)
{
	struct bs_loop *loop;
	struct bs_workers *w;
	atomic_bool gate = false;
	struct gjob a = { .gate = &gate }, b = { 0 }, many[64];
	int i, n;

	(void)state;
	assert_int_equal(bs_loop_new(&loop), 0);
	assert_int_equal(bs_workers_new(loop, 2, 0, &w), 0);
	a.job.run = b.job.run = gjob_run;
	a.job.done = b.job.done = gjob_done;
	bs_workers_submit(w, &a.job);
	for (n = 0; n < 2000 && !atomic_load(&a.started); n++)
		usleep(1000);
	assert_true(atomic_load(&a.started));
	usleep(20000);	/* the other thread is asleep by now */
	bs_workers_submit(w, &b.job);
	for (n = 0; n < 2000 && !b.done; n++)
		bs_loop_run_once(loop, 1);
	assert_true(b.done);		/* while a still holds its thread */
	assert_false(a.done);
	atomic_store(&gate, true);
	for (n = 0; n < 2000 && !a.done; n++)
		bs_loop_run_once(loop, 1);
	assert_true(a.done);

	memset(many, 0, sizeof(many));
	for (i = 0; i < 64; i++) {
		many[i].job.run = gjob_run;
		many[i].job.done = gjob_done;
		bs_workers_submit(w, &many[i].job);
	}
	for (n = 0; n < 5000 && bs_workers_pending(w); n++)
		bs_loop_run_once(loop, 1);
	assert_int_equal(bs_workers_pending(w), 0);
	for (i = 0; i < 64; i++)
		assert_true(many[i].done);
	bs_workers_free(w);
	bs_loop_free(loop);
}

/* Freeing the pool waits for the jobs submitted and runs their done(). */
static void free_waits_for_jobs(void **state)
{
	struct bs_loop *loop;
	struct bs_workers *w;
	struct tjob t[4];
	int i;

	(void)state;
	assert_int_equal(bs_loop_new(&loop), 0);
	assert_int_equal(bs_workers_new(loop, 2, 0, &w), 0);
	for (i = 0; i < 4; i++) {
		init(&t[i], 20, 0);
		bs_workers_submit(w, &t[i].job);
	}
	bs_workers_free(w);
	for (i = 0; i < 4; i++)
		assert_true(t[i].done);
	assert_int_equal(bs_workers_new(loop, 0, 0, &w), -EINVAL);
	bs_loop_free(loop);
}

/* The context's shared pool: started on first use, freed with it. */
static void ctx_pool(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_workers *w = bs_ctx_workers(ctx);
	struct tjob t;
	int n;

	assert_non_null(w);
	assert_ptr_equal(bs_ctx_workers(ctx), w);
	init(&t, 1, 0);
	bs_workers_submit(w, &t.job);
	for (n = 0; n < 1000 && !t.done; n++)
		bs_loop_run_once(bs_ctx_loop(ctx), 10);
	assert_true(t.done);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(jobs_run_off_loop_and_complete_on_it),
		cmocka_unit_test(loop_keeps_running_while_a_job_blocks),
		cmocka_unit_test(a_sleeping_thread_takes_a_job_while_another_blocks),
		cmocka_unit_test(free_waits_for_jobs),
		cmocka_unit_test_setup_teardown(ctx_pool, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
