/* SPDX-License-Identifier: MIT */
/* zero mapper: reads zeroes whatever was written, zeroing succeeds and is
 * free (WRITE_ZEROES_UNMAP), one hole; a stack over it keeps the feature. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/th.h"
#include "helpers/model.h"

#include <blkstack/attr.h>
#include <blkstack/explain.h>
#include <blkstack/zero.h>

static void test_zero_reads_zeroes(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *z;
	uint8_t *buf = malloc(1 << 20);
	uint64_t seed = 1;
	unsigned i;

	z = th_dev(ctx, "z", "zero:size=16M");
	assert_int_equal(z->size, 16u << 20);
	for (i = 0; i < 50; i++) {
		uint64_t off = (th_rand(&seed) % 32767) * 512;
		uint64_t len = (th_rand(&seed) % 2048 + 1) * 512;

		if (len > z->size - off)
			len = z->size - off;
		memset(buf, 0x77, len);
		assert_int_equal(bs_write_sync(z, buf, len, off), 0);
		assert_int_equal(bs_read_sync(z, buf, len, off), 0);
		assert_true(th_is_zero(buf, len));
	}
	assert_int_equal(bs_flush_sync(z), 0);
	assert_int_equal(bs_dev_allocated(z), 0);
	free(buf);
}

static void test_zero_zeroing_is_free(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *z;
	char rule[256];

	z = th_dev(ctx, "z", "zero:size=1T");
	assert_true(bs_dev_write_zeroes_unmap(z));
	assert_true(th_attr_u64(z, "queue/write_zeroes_max_bytes") >= 1u << 30);
	assert_true(th_attr_u64(z, "queue/discard_max_bytes") >= 1u << 30);
	bs_explain_rule(z, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "zeroing is free"));
	/* a whole TiB of zeroes, each way, with no fallback */
	assert_int_equal(bs_zeroout_sync(z, 0, z->size, BS_ZERO_NOFALLBACK, NULL,
					 NULL), 0);
	assert_int_equal(bs_zeroout_sync(z, 0, z->size,
					 BS_ZERO_NOUNMAP | BS_ZERO_NOFALLBACK,
					 NULL, NULL), 0);
	assert_int_equal(bs_io_sync(z, BS_OP_DISCARD, 0, 0, 1 << 30, NULL), 0);
	assert_int_equal(z->stats.ops[BS_OP_WRITE], 0);
	assert_int_equal(bs_fallocate_sync(z, BS_FALLOC_WRITE_ZEROES, 0, 1 << 30,
					   NULL, NULL), 0);
}

struct ext {
	unsigned n;
	uint64_t covered;
	uint32_t flags;
};

static int ext_fn(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct ext *e = arg;

	(void)off;
	e->n++;
	e->covered += len;
	e->flags |= flags;
	return 0;
}

static void test_zero_block_status(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *z;
	struct ext e = { 0 };

	z = th_dev(ctx, "z", "zero:size=64M");
	assert_int_equal(bs_block_status(z, 4096, z->size - 8192, ext_fn, &e), 0);
	assert_int_equal(e.n, 1);
	assert_int_equal(e.covered, z->size - 8192);
	assert_int_equal(e.flags, BS_EXT_HOLE | BS_EXT_ZERO);
}

static void test_zero_options(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *z = NULL;

	assert_int_equal(th_dev_kv_try(ctx, "z", "type=zero", &z), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "size"));
	assert_int_equal(th_dev_try(ctx, "z", "zero:size=1M,logical_block_size=1000",
				    &z), -EINVAL);
	assert_int_equal(th_dev_try(ctx, "z", "zero:size=6K,logical_block_size=4096",
				    &z), -EINVAL);
	z = th_dev(ctx, "z", "zero:size=8K,logical_block_size=4096");
	assert_int_equal(th_attr_u64(z, "queue/logical_block_size"), 4096);
}

/* Striped and mirror over zero devices stay capable; data reads zero. */
static void test_zero_under_mappers(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *s, *m;
	struct th_model model;

	th_dev(ctx, "z1", "zero:size=4M");
	th_dev(ctx, "z2", "zero:size=4M");
	/* both over z1 and z2: shared claims */
	s = th_dev_kv(ctx, "s", "type=striped;devices=z1 z2;claim=shared");
	m = th_dev_kv(ctx, "m", "type=mirror;devices=z1 z2;claim=shared");
	assert_true(bs_dev_write_zeroes_unmap(s));
	assert_true(bs_dev_write_zeroes_unmap(m));
	/* the model of a zero device: zeroouts and discards only */
	th_model_init(&model, s, 4, 65536, 300000);
	th_model_run(&model, 100, TH_MODEL_ZERO | TH_MODEL_DISCARD |
					  TH_MODEL_READ);
	th_model_check_all(&model);
	th_model_free(&model);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_zero_reads_zeroes,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_zero_zeroing_is_free,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_zero_block_status,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_zero_options, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_zero_under_mappers,
						th_ctx_setup, th_ctx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
