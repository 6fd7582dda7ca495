/* SPDX-License-Identifier: MIT */
/* striped mapper: data against a model, layout, sizes, limits, mapping of
 * write-zeroes and discard, allocation map. */
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "helpers/th.h"
#include "helpers/model.h"

#include <blkstack/attr.h>
#include <blkstack/explain.h>
#include <blkstack/zero.h>

static void test_striped_model(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v, *c[3];
	struct th_model m;
	uint64_t k, chunk = 16 * 1024;

	c[0] = th_dev(ctx, "a", "mem:1M,chunk=4K");
	c[1] = th_dev(ctx, "b", "mem:1M,chunk=4K");
	c[2] = th_dev(ctx, "c", "mem:1M,chunk=4K");
	v = th_dev_kv(ctx, "v", "type=striped;devices=a b c;chunk=16K");
	assert_int_equal(v->size, 3u << 20);
	th_model_init(&m, v, 11, chunk, 100 * 1024);
	th_model_run(&m, 600, TH_MODEL_ALL);
	assert_true(m.ops[0] > 50 && m.ops[1] > 50 && m.ops[2] > 50);
	th_model_check_all(&m);
	/* chunk k lives on component k % 3 at (k / 3) * chunk */
	for (k = 0; k < v->size / chunk; k++)
		th_model_check(&m, c[k % 3], (k / 3) * chunk, k * chunk, chunk);
	th_model_free(&m);
}

static void test_striped_one_component_and_rounding(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v;
	struct th_model m;

	th_dev(ctx, "a", "mem:200K");
	th_dev(ctx, "b", "mem:200K");
	/* 200K holds three 64K chunks: the rest is unused */
	/* v and w both stack on a: shared claims */
	v = th_dev_kv(ctx, "v", "type=striped;devices=a b;claim=shared");
	assert_int_equal(v->size, 2 * 192 * 1024);
	v = th_dev_kv(ctx, "w", "type=striped;devices=a;chunk=4K;claim=shared");
	assert_int_equal(v->size, 200 * 1024);
	th_model_init(&m, v, 3, 4096, 20000);
	th_model_run(&m, 200, TH_MODEL_ALL);
	th_model_check_all(&m);
	th_model_free(&m);
}

static void test_striped_bad_config(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v = NULL;

	th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "b", "mem:2M");
	th_dev(ctx, "c", "mem:1M,logical_block_size=4096");
	th_dev(ctx, "d", "mem:1M");
	assert_int_equal(th_dev_kv_try(ctx, "v", "type=striped;devices=a b", &v),
			 -EINVAL);
	/* the error names the odd component and both sizes */
	assert_non_null(strstr(bs_last_error(), "b has 2097152 bytes"));
	assert_non_null(strstr(bs_last_error(), "a has 1048576"));
	assert_int_equal(th_dev_kv_try(ctx, "v",
				       "type=striped;devices=a d;chunk=48K", &v),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "power of two"));
	assert_int_equal(th_dev_kv_try(ctx, "v",
				       "type=striped;devices=a c;chunk=2K", &v),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "4096-byte blocks"));
	assert_int_equal(th_dev_kv_try(ctx, "v",
				       "type=striped;devices=a a", &v), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "twice"));
	assert_int_equal(th_dev_kv_try(ctx, "v",
				       "type=striped;devices=a d;chunk=2M", &v),
			 -EINVAL);
	assert_null(bs_dev_find(ctx, "v"));
}

static void test_striped_limits(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v;

	th_dev(ctx, "a", "mem:1M,max_write_zeroes=256K,max_io=512K");
	th_dev(ctx, "b", "mem:1M,physical_block_size=4096");
	th_dev(ctx, "c", "mem:1M");
	v = th_dev_kv(ctx, "v", "type=striped;devices=a b c;chunk=32K");
	assert_int_equal(th_attr_u64(v, "queue/minimum_io_size"), 32768);
	assert_int_equal(th_attr_u64(v, "queue/optimal_io_size"), 3 * 32768);
	assert_int_equal(th_attr_u64(v, "queue/physical_block_size"), 4096);
	assert_int_equal(th_attr_u64(v, "queue/write_zeroes_max_bytes"),
			 256 * 1024);
	assert_int_equal(th_attr_u64(v, "queue/max_hw_sectors_kb"), 512);
	assert_true(bs_dev_write_zeroes_unmap(v));
}

/* Write-zeroes and discard reach the components as themselves. */
static void test_striped_zeroes_stay_zeroes(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v, *c[2];
	uint8_t *buf = malloc(1 << 20);
	unsigned i;

	c[0] = th_dev(ctx, "a", "mem:1M,chunk=4K");
	c[1] = th_dev(ctx, "b", "mem:1M,chunk=4K");
	v = th_dev_kv(ctx, "v", "type=striped;devices=a b;chunk=8K");
	memset(buf, 0x5a, 1 << 20);
	assert_int_equal(bs_write_sync(v, buf, 1 << 20, 0), 0);
	assert_int_equal(bs_dev_allocated(v), 1 << 20);
	for (i = 0; i < 2; i++)
		c[i]->stats = (struct bs_dev_stats){ 0 };
	/* 1 MiB minus a partial chunk at each end, one child per component */
	assert_int_equal(bs_zeroout_sync(v, 4096, (1 << 20) - 8192, 0, NULL,
					 NULL), 0);
	assert_int_equal(bs_io_sync(v, BS_OP_DISCARD, 0, 0, 4096, NULL), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(c[i]->stats.ops[BS_OP_WRITE], 0);
		assert_true(c[i]->stats.ops[BS_OP_WRITE_ZEROES] >= 1);
		assert_true(c[i]->stats.ops[BS_OP_WRITE_ZEROES] <= 2);
	}
	assert_int_equal(c[0]->stats.ops[BS_OP_DISCARD], 1);
	assert_int_equal(c[0]->stats.bytes[BS_OP_WRITE_ZEROES] +
				 c[1]->stats.bytes[BS_OP_WRITE_ZEROES],
			 (1 << 20) - 8192);
	/* unmapped: only the last 4K chunk of b keeps memory */
	assert_int_equal(bs_dev_allocated(v), 4096);
	assert_int_equal(bs_read_sync(v, buf, 1 << 20, 0), 0);
	assert_true(th_is_zero(buf, (1 << 20) - 4096));
	free(buf);
}

struct ext {
	uint64_t off[64], len[64];
	uint32_t flags[64];
	unsigned n;
};

static int ext_fn(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct ext *e = arg;

	if (e->n && e->flags[e->n - 1] == flags &&
	    e->off[e->n - 1] + e->len[e->n - 1] == off) {
		e->len[e->n - 1] += len;
		return 0;
	}
	if (e->n == 64)
		return 1;
	e->off[e->n] = off;
	e->len[e->n] = len;
	e->flags[e->n++] = flags;
	return 0;
}

static void test_striped_block_status(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v;
	uint8_t buf[4096];
	struct ext e = { .n = 0 };

	th_dev(ctx, "a", "mem:1M,chunk=4K");
	th_dev(ctx, "b", "mem:1M,chunk=4K");
	v = th_dev_kv(ctx, "v", "type=striped;devices=a b;chunk=16K");
	memset(buf, 1, sizeof(buf));
	/* chunk 1 (on b) and chunk 2 (on a) get one block each */
	assert_int_equal(bs_write_sync(v, buf, 4096, 16384 + 12288), 0);
	assert_int_equal(bs_write_sync(v, buf, 4096, 32768), 0);
	assert_int_equal(bs_block_status(v, 0, v->size, ext_fn, &e), 0);
	assert_int_equal(e.n, 3);
	assert_int_equal(e.off[1], 16384 + 12288);
	assert_int_equal(e.len[1], 8192);
	assert_int_equal(e.flags[1], 0);
	assert_int_equal(e.flags[0], BS_EXT_HOLE | BS_EXT_ZERO);
	assert_int_equal(e.off[2] + e.len[2], v->size);
}

static void set_done(struct bs_req *r)
{
	*(bool *)r->priv = true;
}

/* Many small buffers: a child never gathers more than its segment cap. */
static void test_striped_many_segments(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v;
	enum { NSEG = 1024 };
	static struct iovec iov[NSEG];
	static uint8_t data[NSEG * 512], back[NSEG * 512];
	struct bs_req r;
	bool done = false;
	unsigned i;

	th_dev(ctx, "a", "mem:4M");
	th_dev(ctx, "b", "mem:4M");
	v = th_dev_kv(ctx, "v", "type=striped;devices=a b;chunk=512");
	th_fill(data, sizeof(data), 5);
	for (i = 0; i < NSEG; i++) {
		iov[i].iov_base = data + i * 512;
		iov[i].iov_len = 512;
	}
	/* a 512 KiB write in 1024 segments, one chunk each */
	bs_req_init(&r, BS_OP_WRITE, 0, 0, sizeof(data), NULL, set_done, &done);
	r.iov = iov;
	r.iovcnt = NSEG;
	bs_submit(v, &r);
	assert_int_equal(bs_ctx_wait(ctx, &done), 0);
	assert_int_equal(r.result, 0);
	/* 512 pieces per component, cut at 256 segments: 2 children each */
	assert_int_equal(bs_dev_find(ctx, "a")->stats.ops[BS_OP_WRITE], 2);
	assert_int_equal(bs_read_sync(v, back, sizeof(back), 0), 0);
	assert_memory_equal(back, data, sizeof(data));
}

/* Over file devices: io_uring completions in any order, same bytes. */
static void test_striped_over_files(void **state)
{
	struct bs_ctx *ctx = *state;
	char dir[] = "/var/tmp/bs-striped.XXXXXX", path[2][64], spec[160];
	struct bs_dev *v, *f[2];
	struct th_model m;
	unsigned i;

	assert_non_null(mkdtemp(dir));
	for (i = 0; i < 2; i++) {
		snprintf(path[i], sizeof(path[i]), "%s/f%u.img", dir, i);
		snprintf(spec, sizeof(spec), "file:%s,size=2M", path[i]);
		f[i] = th_dev(ctx, i ? "f1" : "f0", spec);
	}
	v = th_dev_kv(ctx, "v", "type=striped;devices=f0 f1;chunk=32K");
	th_model_init(&m, v, 31, 32768, 150 * 1024);
	th_model_run(&m, 300, TH_MODEL_ALL);
	th_model_check_all(&m);
	th_model_check(&m, f[1], 0, 32768, 32768);
	th_model_free(&m);
	for (i = 0; i < 2; i++)
		unlink(path[i]);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_striped_model,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			test_striped_one_component_and_rounding, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_striped_bad_config,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_striped_limits,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_striped_zeroes_stay_zeroes,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_striped_block_status,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_striped_many_segments,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_striped_over_files,
						th_ctx_setup, th_ctx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
