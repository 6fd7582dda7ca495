/* SPDX-License-Identifier: MIT */
/* mirror mapper: data against a model on every leg, round robin reads,
 * sizes, a leg failing mid-run (nothing acknowledged is lost, degraded,
 * limits restacked), read retry, the last leg, EOPNOTSUPP is no fault. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/th.h"
#include "helpers/model.h"

#include <blkstack/attr.h>
#include <blkstack/explain.h>
#include <blkstack/zero.h>

static void test_mirror_model(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v, *leg[3];
	struct th_model m;
	unsigned i;

	leg[0] = th_dev(ctx, "a", "mem:2M,chunk=4K");
	leg[1] = th_dev(ctx, "b", "mem:2M,chunk=16K");
	leg[2] = th_dev(ctx, "c", "mem:2M");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=a b c");
	assert_int_equal(v->size, 2u << 20);
	th_model_init(&m, v, 21, 64 * 1024, 200 * 1024);
	th_model_run(&m, 500, TH_MODEL_ALL);
	th_model_check_all(&m);
	/* every leg holds every byte */
	for (i = 0; i < 3; i++)
		th_model_check(&m, leg[i], 0, 0, v->size);
	/* reads went round robin */
	for (i = 0; i < 3; i++)
		assert_true(leg[i]->stats.ops[BS_OP_READ] >= m.ops[3] / 3);
	/* write-zeroes and discard reached every leg as themselves */
	for (i = 0; i < 3; i++) {
		assert_int_equal(leg[i]->stats.ops[BS_OP_WRITE],
				 leg[0]->stats.ops[BS_OP_WRITE]);
		assert_true(leg[i]->stats.ops[BS_OP_WRITE_ZEROES] >= m.ops[1]);
		assert_true(leg[i]->stats.ops[BS_OP_DISCARD] >= m.ops[2]);
	}
	th_model_free(&m);
}

static void test_mirror_sizes(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v = NULL;
	struct th_desc d;

	th_dev(ctx, "a", "mem:2M");
	th_dev(ctx, "b", "mem:1M");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=a b");
	assert_int_equal(v->size, 1u << 20);
	assert_non_null(strstr(th_describe(v, &d), "size_from: leg b, the smallest"));
	assert_non_null(strstr(d.text, "state: optimal"));
	assert_int_equal(th_dev_kv_try(ctx, "w", "type=mirror;devices=a", &v),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "two legs"));
	assert_int_equal(th_dev_kv_try(ctx, "w", "type=mirror;devices=a a", &v),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "twice"));
}

struct slot {
	struct bs_req req;
	uint8_t *buf;
	bool busy;
};

struct run {
	struct slot slot[8];
	uint8_t *model;
	uint64_t region;	/* slot s writes inside region s only */
	unsigned done, failed;
};

static void slot_done(struct bs_req *r)
{
	struct run *run = r->priv;
	struct slot *s = (struct slot *)r;

	s->busy = false;
	run->done++;
	if (r->result) {
		run->failed++;
		return;
	}
	/* acknowledged: from now on these bytes must read back */
	memcpy(run->model + r->offset, s->buf, r->len);
}

/*
 * Writes at queue depth 8 through @v until @n are acknowledged; @arm is
 * called once after @arm_at acknowledgements (may be NULL).
 */
static void run_writes(struct bs_ctx *ctx, struct bs_dev *v, struct run *run,
		       unsigned n, uint64_t seed, void (*arm)(void *),
		       void *arm_arg, unsigned arm_at)
{
	unsigned issued = 0, i;
	bool armed = false;

	run->region = v->size / 8;
	for (i = 0; i < 8; i++)
		run->slot[i].buf = malloc(128 * 1024);
	while (run->done < n) {
		for (i = 0; i < 8 && issued < n; i++) {
			struct slot *s = &run->slot[i];
			uint64_t len = (th_rand(&seed) % 256 + 1) * 512;
			uint64_t off = (th_rand(&seed) %
					((run->region - len) / 512 + 1)) * 512;

			if (s->busy)
				continue;
			th_fill(s->buf, len, th_rand(&seed));
			bs_req_init(&s->req, BS_OP_WRITE, 0,
				    i * run->region + off, len, s->buf,
				    slot_done, run);
			s->busy = true;
			issued++;
			bs_submit(v, &s->req);
		}
		assert_int_equal(bs_loop_run_once(bs_ctx_loop(ctx), 1000), 0);
		if (arm && !armed && run->done >= arm_at) {
			arm(arm_arg);
			armed = true;
		}
	}
	for (i = 0; i < 8; i++)
		free(run->slot[i].buf);
}

static void check_dev(struct bs_dev *d, const uint8_t *model)
{
	uint8_t *buf = malloc(d->size);

	assert_int_equal(bs_read_sync(d, buf, d->size, 0), 0);
	assert_memory_equal(buf, model, d->size);
	free(buf);
}

/*
 * The fault test: mirror over a (mem) and e (error over mem b, failing
 * writes after 120 have passed); writes running at depth 8.
 */
static void test_mirror_leg_fails_mid_run(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a, *e, *v, *top;
	struct run run = { .done = 0 };
	struct th_desc d;
	char rule[256];

	a = th_dev(ctx, "a", "mem:4M,chunk=4K");
	th_dev(ctx, "b", "mem:4M,zeroes=write");
	e = th_dev_kv(ctx, "e", "type=error;devices=b;ops=write;after=120");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=a e");
	top = th_dev_kv(ctx, "top", "type=linear;devices=v");
	/* b writes its zeroes: no unmap on the mirror nor above it */
	assert_false(bs_dev_write_zeroes_unmap(v));
	assert_false(bs_dev_write_zeroes_unmap(top));
	bs_explain_rule(v, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "cleared because e lacks it"));

	run.model = calloc(1, v->size);
	run_writes(ctx, v, &run, 600, 99, NULL, NULL, 0);
	/* every write was acknowledged, also those that hit the failure */
	assert_int_equal(run.failed, 0);
	assert_int_equal(th_attr_u64(e, "error/passed"), 120);
	assert_true(th_attr_u64(e, "error/failed") >= 1);
	/* degraded, and says why */
	th_describe(v, &d);
	assert_non_null(strstr(d.text, "state: degraded"));
	assert_non_null(strstr(d.text, "degraded: leg e faulty (EIO on write at "));
	assert_non_null(strstr(d.text, "leg0: a live"));
	/* nothing acknowledged is lost: through the mirror and on a itself */
	check_dev(v, run.model);
	check_dev(a, run.model);
	/* restacked from the live leg, here and above, in the same step */
	assert_true(bs_dev_write_zeroes_unmap(v));
	assert_true(bs_dev_write_zeroes_unmap(top));
	bs_explain_rule(v, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "faulty leg e not counted"));
	/* the faulty leg gets nothing more */
	e->stats = (struct bs_dev_stats){ 0 };
	check_dev(v, run.model);
	assert_int_equal(bs_zeroout_sync(v, 0, 65536, 0, NULL, NULL), 0);
	assert_int_equal(e->stats.ops[BS_OP_READ] + e->stats.ops[BS_OP_WRITE_ZEROES],
			 0);
	free(run.model);
}

static void arm_now(void *arg)
{
	assert_int_equal(bs_attr_store(arg, "error/after", "0"), 0);
}

/* Armed at run time through the attribute, while writes are in flight. */
static void test_mirror_armed_by_attribute(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a, *e, *v;
	struct run run = { .done = 0 };
	struct th_desc d;

	th_dev(ctx, "a", "mem:2M");
	a = th_dev(ctx, "b", "mem:2M");
	e = th_dev_kv(ctx, "e", "type=error;devices=a;after=1000000");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=e b");
	run.model = calloc(1, v->size);
	run_writes(ctx, v, &run, 300, 5, arm_now, e, 77);
	assert_int_equal(run.failed, 0);
	assert_non_null(strstr(th_describe(v, &d), "degraded: leg e faulty (EIO on "
				"write at"));
	check_dev(v, run.model);
	check_dev(a, run.model);
	free(run.model);
}

/* A read that fails is served by another leg; the leg is marked faulty. */
static void test_mirror_read_retry(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v, *b;
	uint8_t *buf = malloc(1 << 20), *back = malloc(1 << 20);
	struct th_desc d;
	unsigned i;

	th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "m", "mem:1M");
	th_dev_kv(ctx, "e", "type=error;devices=m;ops=read;errno=ETIMEDOUT");
	b = th_dev(ctx, "b", "mem:1M");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=a e b");
	th_fill(buf, 1 << 20, 8);
	assert_int_equal(bs_write_sync(v, buf, 1 << 20, 0), 0);
	for (i = 0; i < 6; i++) {
		assert_int_equal(bs_read_sync(v, back, 65536, i * 65536), 0);
		assert_memory_equal(back, buf + i * 65536, 65536);
	}
	th_describe(v, &d);
	assert_non_null(strstr(d.text, "leg e faulty (ETIMEDOUT on read at"));
	assert_non_null(strstr(d.text, "reads_retried: 1"));
	assert_non_null(strstr(d.text, "legs: 3 (2 live)"));
	assert_true(b->stats.ops[BS_OP_READ] >= 2);
	free(buf);
	free(back);
}

/* The last live leg is never dropped: its errors reach the caller. */
static void test_mirror_last_leg(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v;
	uint8_t buf[4096] = { 1 };
	struct th_desc d;

	th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "b", "mem:1M");
	th_dev_kv(ctx, "ea", "type=error;devices=a;ops=write;errno=ENOSPC");
	th_dev_kv(ctx, "eb", "type=error;devices=b;ops=write,read");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=ea eb");
	/* both legs fail this write: one is dropped, the other stays */
	assert_int_equal(bs_write_sync(v, buf, 4096, 0), -ENOSPC);
	assert_non_null(strstr(th_describe(v, &d), "legs: 2 (1 live)"));
	assert_int_equal(bs_write_sync(v, buf, 4096, 0) < 0, 1);
	assert_non_null(strstr(th_describe(v, &d), "legs: 2 (1 live)"));
}

/* EOPNOTSUPP on write-zeroes is the core's rule, not a leg fault. */
static void test_mirror_eopnotsupp_is_no_fault(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v, *b;
	uint8_t *buf = malloc(1 << 20);
	struct th_desc d;

	th_dev(ctx, "a", "mem:1M");
	b = th_dev(ctx, "b", "mem:1M,broken_write_zeroes=1");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=a b");
	memset(buf, 0xee, 1 << 20);
	assert_int_equal(bs_write_sync(v, buf, 1 << 20, 0), 0);
	assert_true(bs_dev_write_zeroes_unmap(v));
	assert_int_equal(bs_zeroout_sync(v, 4096, 512 * 1024, 0, NULL, NULL), 0);
	assert_true(b->wz_broken);
	assert_int_equal(v->limits.max_write_zeroes_sectors, 0);
	assert_false(bs_dev_write_zeroes_unmap(v));
	assert_non_null(strstr(th_describe(v, &d), "state: optimal"));
	/* both legs hold the zeroes (the fallback wrote them to each) */
	assert_int_equal(bs_read_sync(b, buf, 1 << 20, 0), 0);
	assert_true(th_is_zero(buf + 4096, 512 * 1024));
	assert_int_equal(buf[4095], 0xee);
	assert_int_equal(bs_read_sync(bs_dev_find(ctx, "a"), buf, 1 << 20, 0), 0);
	assert_true(th_is_zero(buf + 4096, 512 * 1024));
	assert_int_equal(buf[4096 + 512 * 1024], 0xee);
	free(buf);
}

/* A file leg and a mem leg: io_uring and immediate completions mixed. */
static void test_mirror_over_file(void **state)
{
	struct bs_ctx *ctx = *state;
	char dir[] = "/var/tmp/bs-mirror.XXXXXX", path[64], spec[160];
	struct bs_dev *v, *f, *a;
	struct th_model m;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/leg.img", dir);
	snprintf(spec, sizeof(spec), "file:%s,size=2M", path);
	f = th_dev(ctx, "f", spec);
	a = th_dev(ctx, "a", "mem:2M");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=f a");
	th_model_init(&m, v, 41, 65536, 150 * 1024);
	th_model_run(&m, 300, TH_MODEL_ALL);
	th_model_check_all(&m);
	th_model_check(&m, f, 0, 0, v->size);
	th_model_check(&m, a, 0, 0, v->size);
	th_model_free(&m);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_mirror_model, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_mirror_sizes, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_mirror_leg_fails_mid_run,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_mirror_armed_by_attribute,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_mirror_read_retry,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_mirror_last_leg,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			test_mirror_eopnotsupp_is_no_fault, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_mirror_over_file,
						th_ctx_setup, th_ctx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
