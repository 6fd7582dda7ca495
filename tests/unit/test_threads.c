/* SPDX-License-Identifier: MIT */
/*
 * I/O threads: requests submitted on several I/O loops at once complete on
 * the loop that submitted them, with the right bytes, while the main loop
 * flips the write-zeroes knob (a new published snapshot each time); a
 * device's per-loop io_uring channels are torn down on their own loops
 * when it closes; work sent from another thread runs on the target loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/threads.h>
#include <blkstack/workers.h>
#include <blkstack/zero.h>

#include "core/internal.h"
#include "helpers/th.h"

#define NTHREADS 2
#define PER_LOOP 64		/* requests per loop per round */
#define BLK 4096

struct job;

/* One I/O loop's share: writes then reads of its own range. */
struct share {
	struct bs_dev *dev;
	struct bs_loop *loop;
	unsigned index;
	struct bs_work start;
	struct job *jobs;
	unsigned pending;	/* atomic */
	unsigned wrong_loop;	/* atomic: completions seen elsewhere */
	unsigned errors;	/* atomic */
	unsigned mismatches;	/* atomic */
	bool reading;
};

struct job {
	struct share *sh;
	struct bs_req req;
	uint8_t *buf;
	uint64_t off;
};

static void job_done(struct bs_req *req)
{
	struct job *j = req->priv;
	struct share *sh = j->sh;

	if (bs_loop_current() != sh->loop)
		__atomic_fetch_add(&sh->wrong_loop, 1, __ATOMIC_RELAXED);
	if (req->result)
		__atomic_fetch_add(&sh->errors, 1, __ATOMIC_RELAXED);
	if (sh->reading) {
		uint8_t want[BLK];

		th_fill(want, BLK, j->off + 1);
		if (memcmp(want, j->buf, BLK))
			__atomic_fetch_add(&sh->mismatches, 1,
					   __ATOMIC_RELAXED);
	}
	__atomic_fetch_sub(&sh->pending, 1, __ATOMIC_RELEASE);
}

/* On the share's own loop: submit every job. */
static void share_start(void *arg)
{
	struct share *sh = arg;
	unsigned i;

	for (i = 0; i < PER_LOOP; i++) {
		struct job *j = &sh->jobs[i];

		if (!sh->reading)
			th_fill(j->buf, BLK, j->off + 1);
		else
			memset(j->buf, 0, BLK);
		bs_req_init(&j->req, sh->reading ? BS_OP_READ : BS_OP_WRITE,
			    0, j->off, BLK, j->buf, job_done, j);
		bs_submit(sh->dev, &j->req);
	}
}

static void run_round(struct bs_ctx *ctx, struct share *sh, unsigned n,
		      bool reading, bool flip)
{
	unsigned i, spins;
	bool busy = true;

	for (i = 0; i < n; i++) {
		sh[i].reading = reading;
		sh[i].pending = PER_LOOP;
		sh[i].start.fn = share_start;
		sh[i].start.arg = &sh[i];
		bs_loop_send(sh[i].loop, &sh[i].start);
	}
	/* the main loop meanwhile changes the limits: new snapshots */
	for (spins = 0; busy && spins < 20000; spins++) {
		if (flip)
			assert_int_equal(bs_attr_store(sh[0].dev,
					 "queue/write_zeroes_unmap",
					 spins & 1 ? "1" : "0"), 0);
		bs_loop_run_once(bs_ctx_loop(ctx), 1);
		busy = false;
		for (i = 0; i < n; i++)
			if (__atomic_load_n(&sh[i].pending, __ATOMIC_ACQUIRE))
				busy = true;
	}
	assert_false(busy);
}

static void io_threads_complete_where_submitted(void **state)
{
	struct bs_ctx *ctx = *state;
	char path[] = "/var/tmp/blkstack-threads.XXXXXX", spec[128];
	struct share sh[NTHREADS];
	struct bs_dev *dev;
	unsigned i, k, round;
	int fd;

	assert_int_equal(bs_ctx_start_threads(ctx, NTHREADS), 0);
	assert_int_equal(bs_ctx_nthreads(ctx), NTHREADS);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 16 << 20), 0);
	close(fd);
	snprintf(spec, sizeof(spec), "file:%s", path);
	dev = th_dev(ctx, "f", spec);
	for (i = 0; i < NTHREADS; i++) {
		memset(&sh[i], 0, sizeof(sh[i]));
		sh[i].dev = dev;
		sh[i].loop = bs_ctx_loop_at(ctx, i + 1);
		assert_non_null(sh[i].loop);
		assert_int_equal(bs_loop_index(sh[i].loop), i + 1);
		sh[i].jobs = calloc(PER_LOOP, sizeof(*sh[i].jobs));
		for (k = 0; k < PER_LOOP; k++) {
			struct job *j = &sh[i].jobs[k];

			j->sh = &sh[i];
			j->off = ((uint64_t)i * PER_LOOP + k) * BLK;
			assert_int_equal(posix_memalign((void **)&j->buf, 4096,
							BLK), 0);
		}
	}
	for (round = 0; round < 3; round++) {
		run_round(ctx, sh, NTHREADS, false, true);
		run_round(ctx, sh, NTHREADS, true, round == 1);
	}
	for (i = 0; i < NTHREADS; i++) {
		assert_int_equal(sh[i].wrong_loop, 0);
		assert_int_equal(sh[i].errors, 0);
		assert_int_equal(sh[i].mismatches, 0);
	}
	/* the device closes with rings on both I/O loops: no hang, no leak */
	assert_int_equal(bs_dev_destroy(dev), 0);
	for (i = 0; i < NTHREADS; i++) {
		for (k = 0; k < PER_LOOP; k++)
			free(sh[i].jobs[k].buf);
		free(sh[i].jobs);
	}
	unlink(path);
}

static void io_loops_in_turn(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_loop *io;

	assert_int_equal(bs_ctx_start_threads(ctx, 1), 0);
	io = bs_ctx_io_loop(ctx);
	assert_ptr_not_equal(io, bs_ctx_loop(ctx));
	/* round robin over one thread: the same loop again */
	assert_ptr_equal(bs_ctx_io_loop(ctx), io);
	/* once per context */
	assert_int_equal(bs_ctx_start_threads(ctx, 1), -EBUSY);
}

static void where(void *arg)
{
	*(struct bs_loop **)arg = bs_loop_current();
}

static void loop_call_runs_on_the_loop(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_loop *seen = NULL, *io;

	assert_int_equal(bs_ctx_start_threads(ctx, 2), 0);
	io = bs_ctx_loop_at(ctx, 2);
	bs_loop_call(io, where, &seen);
	assert_ptr_equal(seen, io);
	/* on the caller's own loop it runs at once */
	bs_loop_call(bs_ctx_loop(ctx), where, &seen);
	assert_ptr_equal(seen, bs_ctx_loop(ctx));
	assert_int_equal(bs_ctx_start_threads(ctx, BS_THREADS_MAX + 1),
			 -EBUSY);
}

static void too_many_threads_refused(void **state)
{
	struct bs_ctx *ctx = *state;

	assert_int_equal(bs_ctx_start_threads(ctx, BS_THREADS_MAX + 1),
			 -EINVAL);
	assert_int_equal(bs_ctx_nthreads(ctx), 0);
	/* none: everything stays on the main loop */
	assert_ptr_equal(bs_ctx_io_loop(ctx), bs_ctx_loop(ctx));
}

/* ---- the context's lazy members, first used from many threads ---------- */

struct lazy_race {
	struct bs_ctx *ctx;
	pthread_barrier_t *go;
	const void *zero;
	struct bs_workers *workers;
	struct bs_budget *budget;
};

static void *lazy_user(void *arg)
{
	struct lazy_race *r = arg;

	pthread_barrier_wait(r->go);
	r->zero = bs_ctx_zero_buf(r->ctx);
	r->workers = bs_ctx_workers(r->ctx);
	r->budget = bs_ctx_budget(r->ctx);
	return NULL;
}

static void lazy_members_made_once_whatever_thread_comes_first(void **state)
{
	struct bs_ctx *ctx = *state;
	struct lazy_race r[8];
	pthread_barrier_t go;
	pthread_t t[8];
	const unsigned char *z;
	unsigned i;
	size_t k;

	pthread_barrier_init(&go, NULL, 8);
	/* all eight ask at once */
	for (i = 0; i < 8; i++)
		r[i] = (struct lazy_race){ .ctx = ctx, .go = &go };
	for (i = 0; i < 8; i++)
		assert_int_equal(pthread_create(&t[i], NULL, lazy_user, &r[i]),
				 0);
	for (i = 0; i < 8; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&go);
	for (i = 0; i < 8; i++) {
		assert_non_null(r[i].zero);
		assert_ptr_equal(r[i].zero, r[0].zero);
		assert_non_null(r[i].workers);
		assert_ptr_equal(r[i].workers, r[0].workers);
		assert_non_null(r[i].budget);
		assert_ptr_equal(r[i].budget, r[0].budget);
	}
	/* whole before anyone saw it: zeroes throughout */
	z = r[0].zero;
	for (k = 0; k < BS_ZERO_BUF_SIZE; k++)
		if (z[k])
			fail_msg("zero buffer byte %zu is %u", k, z[k]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			io_threads_complete_where_submitted, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			io_loops_in_turn, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(loop_call_runs_on_the_loop,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(too_many_threads_refused,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			lazy_members_made_once_whatever_thread_comes_first,
			th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("threads", tests, NULL, NULL);
}
