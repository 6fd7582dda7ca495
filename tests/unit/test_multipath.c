/* SPDX-License-Identifier: MIT */
/* multipath mapper: paths are error devices over one mem device (shared
 * claims), so a path can be broken and mended through error/after. A
 * failing path's I/O is retried on another with the data right; with no
 * live path requests queue, then fail with EIO; a path that comes back
 * rejoins (and the queue goes out); unmap zeroing follows the live paths;
 * paths of different sizes are refused; round robin spreads the I/O;
 * request errors are not path failures. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/th.h"

#include <blkstack/attr.h>
#include <blkstack/explain.h>
#include <blkstack/loop.h>

/* Paths p0, p1 (error devices passing everything) over mem "vol". */
static struct bs_dev *setup(struct bs_ctx *ctx, const char *vol_spec,
			    const char *mp_opts, struct bs_dev **p0,
			    struct bs_dev **p1)
{
	char kv[256];

	th_dev(ctx, "vol", vol_spec);
	*p0 = th_dev_kv(ctx, "p0", "type=error;devices=vol;claim=shared;"
			"after=100000000");
	*p1 = th_dev_kv(ctx, "p1", "type=error;devices=vol;claim=shared;"
			"after=100000000");
	snprintf(kv, sizeof(kv), "type=multipath;devices=p0 p1%s%s",
		 mp_opts[0] ? ";" : "", mp_opts);
	return th_dev_kv(ctx, "mp", kv);
}

static void path_break(struct bs_dev *p)
{
	assert_int_equal(bs_attr_store(p, "error/after", "0"), 0);
}

static void path_mend(struct bs_dev *p)
{
	assert_int_equal(bs_attr_store(p, "error/after", "100000000"), 0);
}

/* Run the loop until @mp's info contains @what, at most @ms. */
static bool wait_for(struct bs_ctx *ctx, struct bs_dev *mp, const char *what,
		     unsigned ms)
{
	uint64_t until = bs_now_ns() + (uint64_t)ms * 1000000;
	struct th_desc d;

	while (bs_now_ns() < until) {
		if (strstr(th_describe(mp, &d), what))
			return true;
		bs_loop_run_once(bs_ctx_loop(ctx), 20);
	}
	return strstr(th_describe(mp, &d), what) != NULL;
}

static void test_failover_retry(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *p0, *p1, *vol;
	uint8_t *buf = malloc(1 << 20), *back = malloc(1 << 20);
	struct th_desc d;
	char rule[256];

	mp = setup(ctx, "mem:2M", "retry_interval=50ms", &p0, &p1);
	vol = bs_dev_find(ctx, "vol");
	assert_int_equal(mp->size, 2u << 20);
	assert_non_null(strstr(th_describe(mp, &d), "paths: 2 (2 live)"));
	assert_non_null(strstr(d.text, "policy: failover"));
	/* failover: everything on p0 while it lives */
	th_fill(buf, 1 << 20, 1);
	assert_int_equal(bs_write_sync(mp, buf, 1 << 20, 0), 0);
	assert_int_equal(p1->stats.ops[BS_OP_WRITE], 0);
	/* p0 breaks: the next write fails there, is retried on p1 */
	path_break(p0);
	th_fill(buf, 1 << 20, 2);
	assert_int_equal(bs_write_sync(mp, buf, 1 << 20, 4096), 0);
	assert_int_equal(bs_read_sync(vol, back, 1 << 20, 4096), 0);
	assert_memory_equal(back, buf, 1 << 20);
	assert_int_equal(bs_read_sync(mp, back, 1 << 20, 4096), 0);
	assert_memory_equal(back, buf, 1 << 20);
	th_describe(mp, &d);
	assert_non_null(strstr(d.text, "paths: 2 (1 live)"));
	assert_non_null(strstr(d.text, "state: degraded"));
	assert_non_null(strstr(d.text, "path0: p0 failed"));
	assert_non_null(strstr(d.text, "failures 1, last EIO on write at 4096"));
	assert_non_null(strstr(d.text, "path1: p1 live"));
	assert_non_null(strstr(d.text, "retried: 1"));
	bs_explain_rule(mp, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "p0 failed (failures 1, last EIO on write)"));
	assert_non_null(strstr(rule, "p1 live"));
	/* the checker keeps failing while p0 is broken; mended, it rejoins */
	assert_true(wait_for(ctx, mp, "checks failed 1", 2000));
	path_mend(p0);
	assert_true(wait_for(ctx, mp, "paths: 2 (2 live)", 2000));
	assert_non_null(strstr(th_describe(mp, &d), "state: optimal"));
	bs_explain_rule(mp, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "p0 live (failures 1"));
	free(buf);
	free(back);
}

static void test_all_paths_fail_queue_then_eio(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *p0, *p1;
	uint8_t buf[4096];
	uint64_t t0, dt;
	struct th_desc d;

	mp = setup(ctx, "mem:1M", "queue_if_no_path=300ms;retry_interval=50ms",
		   &p0, &p1);
	path_break(p0);
	path_break(p1);
	t0 = bs_now_ns();
	assert_int_equal(bs_read_sync(mp, buf, 4096, 0), -EIO);
	dt = bs_now_ns() - t0;
	/* it waited for a path (queue_if_no_path), then gave up */
	assert_true(dt >= 300000000ull);
	assert_true(dt < 5000000000ull);
	th_describe(mp, &d);
	assert_non_null(strstr(d.text, "paths: 2 (0 live)"));
	assert_non_null(strstr(d.text, "no live path"));
	assert_non_null(strstr(d.text, "queue_timeouts: 1"));
	assert_non_null(strstr(d.text, "queued_now: 0"));
}

static void test_queue_fail_at_once(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *p0, *p1;
	uint8_t buf[4096];
	uint64_t t0;

	mp = setup(ctx, "mem:1M", "queue_if_no_path=0", &p0, &p1);
	path_break(p0);
	path_break(p1);
	t0 = bs_now_ns();
	assert_int_equal(bs_read_sync(mp, buf, 4096, 0), -EIO);
	assert_true(bs_now_ns() - t0 < 1000000000ull);
}

struct qreq {
	struct bs_req req;
	bool done;
};

static void qdone(struct bs_req *r)
{
	((struct qreq *)r)->done = true;
}

/* Queued while no path lives; a path that comes back takes the queue. */
static void test_path_returns_queue_flows(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *p0, *p1, *vol;
	uint8_t *buf = malloc(65536), *back = malloc(65536);
	struct qreq q = { .done = false };
	unsigned i;
	struct th_desc d;

	mp = setup(ctx, "mem:1M", "queue_if_no_path=20;retry_interval=50ms",
		   &p0, &p1);
	vol = bs_dev_find(ctx, "vol");
	path_break(p0);
	path_break(p1);
	th_fill(buf, 65536, 7);
	bs_req_init(&q.req, BS_OP_WRITE, 0, 65536, 65536, buf, qdone, NULL);
	bs_submit(mp, &q.req);
	for (i = 0; i < 20; i++)
		bs_loop_run_once(bs_ctx_loop(ctx), 10);
	assert_false(q.done);
	assert_non_null(strstr(th_describe(mp, &d), "queued_now: 1"));
	path_mend(p1);
	while (!q.done)
		bs_loop_run_once(bs_ctx_loop(ctx), 100);
	assert_int_equal(q.req.result, 0);
	assert_int_equal(bs_read_sync(vol, back, 65536, 65536), 0);
	assert_memory_equal(back, buf, 65536);
	th_describe(mp, &d);
	assert_non_null(strstr(d.text, "paths: 2 (1 live)"));
	assert_non_null(strstr(d.text, "path1: p1 live"));
	assert_non_null(strstr(d.text, "queued: 1"));
	free(buf);
	free(back);
}

/* A live path without unmap zeroing takes it away; failed, it gives it
 * back; mended, it takes it away again; every level above follows. */
static void test_capability_follows_live_paths(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *top, *k, *e;
	uint8_t buf[4096];
	char rule[256];

	th_dev(ctx, "vol", "mem:1M");
	th_dev_kv(ctx, "p0", "type=error;devices=vol;claim=shared;"
		  "after=100000000");
	/* the same volume seen through a path whose knob is 0 */
	k = th_dev_kv(ctx, "k", "type=error;devices=vol;claim=shared;"
		      "after=100000000;write_zeroes_unmap=0");
	e = th_dev_kv(ctx, "e", "type=error;devices=k;after=100000000");
	mp = th_dev_kv(ctx, "mp", "type=multipath;devices=p0 e;"
		       "policy=round-robin;retry_interval=50ms");
	top = th_dev_kv(ctx, "top", "type=linear;devices=mp");
	assert_false(bs_dev_write_zeroes_unmap(mp));
	assert_false(bs_dev_write_zeroes_unmap(top));
	bs_explain_rule(mp, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "cleared because e lacks it"));
	/* e fails: only p0 is live, which has it */
	path_break(e);
	assert_int_equal(bs_read_sync(mp, buf, 4096, 0), 0);
	assert_int_equal(bs_read_sync(mp, buf, 4096, 0), 0);
	assert_true(bs_dev_write_zeroes_unmap(mp));
	assert_true(bs_dev_write_zeroes_unmap(top));
	bs_explain_rule(mp, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "every live path has it (1 live)"));
	assert_non_null(strstr(rule, "e failed"));
	/* e comes back: cleared again */
	path_mend(e);
	assert_true(wait_for(ctx, mp, "paths: 2 (2 live)", 2000));
	assert_false(bs_dev_write_zeroes_unmap(mp));
	assert_false(bs_dev_write_zeroes_unmap(top));
	/* the knob on the path's device back at 1: it has it again */
	assert_int_equal(bs_attr_store(k, "queue/write_zeroes_unmap", "1"), 0);
	assert_true(bs_dev_write_zeroes_unmap(mp));
	assert_true(bs_dev_write_zeroes_unmap(top));
}

static void test_refused(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v = NULL;

	th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "b", "mem:2M");
	th_dev(ctx, "c", "mem:1M,logical_block_size=4096");
	assert_int_equal(th_dev_kv_try(ctx, "m", "type=multipath;devices=a b",
				       &v), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "paths must agree on size: b "
			       "has 2097152 bytes, a has 1048576"));
	assert_int_equal(th_dev_kv_try(ctx, "m", "type=multipath;devices=a c",
				       &v), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "logical_block_size: c has "
			       "4096, a has 512"));
	assert_int_equal(th_dev_kv_try(ctx, "m", "type=multipath;devices=a a",
				       &v), -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "m", "type=multipath;devices=a;"
				       "policy=random", &v), -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "m", "type=multipath;devices=a;"
				       "retry_interval=0", &v), -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "m", "type=multipath;devices=a;"
				       "queue_if_no_path=soon", &v), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "queue_if_no_path"));
}

static void test_round_robin_spreads(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *p0, *p1;
	uint8_t buf[4096];
	unsigned i;
	struct th_desc d;

	mp = setup(ctx, "mem:1M", "policy=round-robin", &p0, &p1);
	for (i = 0; i < 100; i++)
		assert_int_equal(bs_read_sync(mp, buf, 4096, i * 4096), 0);
	assert_int_equal(p0->stats.ops[BS_OP_READ], 50);
	assert_int_equal(p1->stats.ops[BS_OP_READ], 50);
	assert_non_null(strstr(th_describe(mp, &d), "path0: p0 live, ios 50"));
	assert_non_null(strstr(d.text, "path1: p1 live, ios 50"));
}

/* Errors of the request itself go up and fail no path. */
static void test_request_errors_no_path_failure(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp;
	uint8_t buf[4096];
	struct th_desc d;

	th_dev(ctx, "vol", "mem:1M");
	th_dev_kv(ctx, "p0", "type=error;devices=vol;claim=shared;"
		  "errno=ENOSPC;ops=write");
	th_dev_kv(ctx, "p1", "type=error;devices=vol;claim=shared;"
		  "errno=EROFS;ops=write");
	mp = th_dev_kv(ctx, "mp", "type=multipath;devices=p0 p1;"
		       "policy=round-robin");
	memset(buf, 1, sizeof(buf));
	assert_int_equal(bs_write_sync(mp, buf, 4096, 0), -ENOSPC);
	assert_int_equal(bs_write_sync(mp, buf, 4096, 0), -EROFS);
	assert_non_null(strstr(th_describe(mp, &d), "paths: 2 (2 live)"));
	assert_non_null(strstr(d.text, "retried: 0"));
}

/* Many requests in flight while a path breaks: none fails, data right. */
static void test_depth_break_mid_run(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *p0, *p1, *vol;
	struct qreq q[16];
	uint8_t *bufs = malloc(16 * 8192), *model = calloc(1, 1 << 20);
	uint8_t *back = malloc(1 << 20);
	uint64_t seed = 5;
	unsigned i, round;

	mp = setup(ctx, "mem:1M", "policy=round-robin;retry_interval=50ms",
		   &p0, &p1);
	vol = bs_dev_find(ctx, "vol");
	for (round = 0; round < 30; round++) {
		if (round == 10)
			path_break(p1);
		if (round == 20)
			path_mend(p1);
		for (i = 0; i < 16; i++) {
			/* slot i writes in its own 64 KiB region */
			uint64_t off = i * 65536 + (th_rand(&seed) % 14) * 4096;

			th_fill(bufs + i * 8192, 8192, th_rand(&seed));
			q[i].done = false;
			bs_req_init(&q[i].req, BS_OP_WRITE, 0, off, 8192,
				    bufs + i * 8192, qdone, NULL);
			bs_submit(mp, &q[i].req);
		}
		for (i = 0; i < 16; i++) {
			while (!q[i].done)
				bs_loop_run_once(bs_ctx_loop(ctx), 100);
			assert_int_equal(q[i].req.result, 0);
			memcpy(model + q[i].req.offset, bufs + i * 8192, 8192);
		}
	}
	assert_int_equal(bs_read_sync(vol, back, 1 << 20, 0), 0);
	assert_memory_equal(back, model, 1 << 20);
	assert_true(wait_for(ctx, mp, "paths: 2 (2 live)", 2000));
	free(bufs);
	free(model);
	free(back);
}

/*
 * FLUSH reaches every live path, whatever the policy: a write that went
 * through p0 must be durable even if a flush were routed to p1 alone.
 * A path failing the flush with a path error is failed and the flush
 * still succeeds through the others; a failed path gets none; an error
 * of the request itself goes up.
 */
static void test_flush_every_live_path(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *mp, *p0, *p1, *p2, *s0, *s1;
	uint8_t buf[4096];
	struct th_desc d;

	th_dev(ctx, "vol", "mem:1M,write_cache=1");
	p0 = th_dev_kv(ctx, "p0", "type=error;devices=vol;claim=shared;"
		       "after=100000000");
	p1 = th_dev_kv(ctx, "p1", "type=error;devices=vol;claim=shared;"
		       "after=100000000");
	p2 = th_dev_kv(ctx, "p2", "type=error;devices=vol;claim=shared;"
		       "after=100000000");
	mp = th_dev_kv(ctx, "mp", "type=multipath;devices=p0 p1 p2;"
		       "retry_interval=50ms;queue_if_no_path=200ms");
	memset(buf, 3, sizeof(buf));
	/* failover: the write goes to p0 only, the flush to all three */
	assert_int_equal(bs_write_sync(mp, buf, 4096, 0), 0);
	assert_int_equal(p0->stats.ops[BS_OP_WRITE], 1);
	assert_int_equal(p1->stats.ops[BS_OP_WRITE], 0);
	assert_int_equal(bs_flush_sync(mp), 0);
	assert_int_equal(p0->stats.ops[BS_OP_FLUSH], 1);
	assert_int_equal(p1->stats.ops[BS_OP_FLUSH], 1);
	assert_int_equal(p2->stats.ops[BS_OP_FLUSH], 1);
	/* round robin gives no different answer */
	th_dev(ctx, "vol2", "mem:1M,write_cache=1");
	s0 = th_dev_kv(ctx, "s0", "type=error;devices=vol2;claim=shared;"
		       "after=100000000");
	s1 = th_dev_kv(ctx, "s1", "type=error;devices=vol2;claim=shared;"
		       "errno=EREMOTEIO;ops=flush");
	th_dev_kv(ctx, "rr", "type=multipath;devices=s0 s1;"
		  "policy=round-robin");
	/* s1 fails the flush with a target error (the request's, not the
	 * path's): the flush fails, no path is failed */
	assert_int_equal(bs_flush_sync(bs_dev_find(ctx, "rr")), -EREMOTEIO);
	assert_int_equal(s0->stats.ops[BS_OP_FLUSH], 1);
	assert_int_equal(s1->stats.ops[BS_OP_FLUSH], 1);
	assert_non_null(strstr(th_describe(bs_dev_find(ctx, "rr"), &d),
			       "paths: 2 (2 live)"));
	/* p1 breaks (a path error): failed, the flush succeeds via p0, p2 */
	path_break(p1);
	assert_int_equal(bs_flush_sync(mp), 0);
	assert_int_equal(p0->stats.ops[BS_OP_FLUSH], 2);
	assert_int_equal(p1->stats.ops[BS_OP_FLUSH], 2);
	assert_int_equal(p2->stats.ops[BS_OP_FLUSH], 2);
	th_describe(mp, &d);
	assert_non_null(strstr(d.text, "paths: 3 (2 live)"));
	assert_non_null(strstr(d.text, "last EIO on flush"));
	/* a failed path gets no flush (the checker only reads) */
	assert_int_equal(bs_flush_sync(mp), 0);
	assert_int_equal(p0->stats.ops[BS_OP_FLUSH], 3);
	assert_int_equal(p1->stats.ops[BS_OP_FLUSH], 2);
	assert_int_equal(p2->stats.ops[BS_OP_FLUSH], 3);
	/* every path fails it: none flushed, so it is not a success (it
	 * waits for a path like any request, then fails) */
	path_break(p0);
	path_break(p2);
	assert_int_equal(bs_flush_sync(mp), -EIO);
	/* mended, p1 rejoins and gets flushes again */
	path_mend(p1);
	assert_true(wait_for(ctx, mp, "paths: 3 (1 live)", 3000));
	assert_int_equal(bs_flush_sync(mp), 0);
	assert_int_equal(p1->stats.ops[BS_OP_FLUSH], 3);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_failover_retry,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			test_all_paths_fail_queue_then_eio, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_queue_fail_at_once,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_path_returns_queue_flows,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			test_capability_follows_live_paths, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_refused, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_round_robin_spreads,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			test_request_errors_no_path_failure, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_depth_break_mid_run,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_flush_every_live_path,
						th_ctx_setup, th_ctx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
