/* SPDX-License-Identifier: MIT */
/*
 * Limit stacking rules and live propagation, with a minimal stacked type
 * defined here (so the core's rules are tested apart from the mappers).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/opts.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

/* ---- a test-only stacked type: every component side by side --------- */

static int cat_open(struct bs_dev *dev, struct bs_opts *opts)
{
	unsigned i;

	(void)opts;
	for (i = 0; i < dev->ncomponents; i++)
		dev->size += dev->components[i]->size;
	return 0;
}

static int cat_stack(struct bs_dev *dev, struct bs_limits *lim)
{
	uint64_t start = 0;
	unsigned i;

	for (i = 0; i < dev->ncomponents; i++) {
		bs_limits_stack(lim, &dev->components[i]->limits, start);
		start += dev->components[i]->size;
	}
	return 0;
}

static void cat_submit(struct bs_dev *dev, struct bs_req *req)
{
	bs_req_complete(req, -EIO);
}

static const struct bs_dev_type cat_type = {
	.name = "test-cat",
	.stacked = true,
	.open = cat_open,
	.submit = cat_submit,
	.stack_limits = cat_stack,
};
BS_DEV_TYPE(cat_type)

/* ---- bs_limits_stack itself ------------------------------------------- */

static void stack_min_and_lcm(void **state)
{
	struct bs_limits t, a, b;

	(void)state;
	bs_limits_init(&a);
	bs_limits_init(&b);
	a.logical_block_size = 512;
	a.physical_block_size = 4096;
	a.max_hw_sectors = 256;
	a.max_write_zeroes_sectors = 16384;
	a.max_discard_sectors = 1000;
	a.features = BS_FEAT_WRITE_ZEROES_UNMAP | BS_FEAT_FUA;
	b.logical_block_size = 4096;
	b.max_hw_sectors = 2048;
	b.max_write_zeroes_sectors = 8192;
	b.max_discard_sectors = 4000;
	b.features = BS_FEAT_WRITE_ZEROES_UNMAP | BS_FEAT_WRITE_CACHE;

	bs_limits_init_stacking(&t);
	assert_int_equal(bs_limits_stack(&t, &a, 0), 0);
	assert_int_equal(bs_limits_stack(&t, &b, 1 << 20), 0);
	bs_limits_finish(&t);
	assert_int_equal(t.logical_block_size, 4096);
	assert_int_equal(t.physical_block_size, 4096);
	assert_int_equal(t.max_hw_sectors, 256);
	assert_int_equal(t.max_write_zeroes_sectors, 8192);
	assert_int_equal(t.max_discard_sectors, 1000 - 1000 % 8);
	assert_true(t.features & BS_FEAT_WRITE_ZEROES_UNMAP);
	assert_true(t.features & BS_FEAT_WRITE_CACHE); /* any has it */
	assert_false(t.features & BS_FEAT_FUA);		/* all must have it */
}

/* io_opt stacks as the least common multiple, zeroes ignored, not max */
static void stack_io_opt_lcm(void **state)
{
	struct bs_limits t, a, b, c;

	(void)state;
	bs_limits_init(&a);
	bs_limits_init(&b);
	bs_limits_init(&c);
	a.io_opt = 3 * 4096;
	b.io_opt = 2 * 4096;
	c.io_opt = 0;			/* not reported: ignored */
	bs_limits_init_stacking(&t);
	bs_limits_stack(&t, &a, 0);
	bs_limits_stack(&t, &c, 0);
	bs_limits_stack(&t, &b, 0);
	bs_limits_finish(&t);
	assert_int_equal(t.io_opt, 6 * 4096);	/* max would say 3 * 4096 */

	/* one component alone: its value; none: 0 */
	bs_limits_init_stacking(&t);
	bs_limits_stack(&t, &c, 0);
	assert_int_equal(t.io_opt, 0);
	bs_limits_stack(&t, &b, 0);
	assert_int_equal(t.io_opt, 2 * 4096);

	/* an lcm past 32 bits says nothing: 0 */
	a.io_opt = 0xfffffffbu;			/* prime */
	b.io_opt = 0xfffffff1u;			/* prime */
	bs_limits_init_stacking(&t);
	bs_limits_stack(&t, &a, 0);
	bs_limits_stack(&t, &b, 0);
	assert_int_equal(t.io_opt, 0);
}

static void stack_feature_rules(void **state)
{
	struct bs_limits t, a, b;

	(void)state;
	bs_limits_init(&a);
	a.max_write_zeroes_sectors = 100;
	a.features = BS_FEAT_WRITE_ZEROES_UNMAP;
	b = a;

	/* a component without the feature clears it */
	b.features = 0;
	bs_limits_init_stacking(&t);
	bs_limits_stack(&t, &a, 0);
	bs_limits_stack(&t, &b, 0);
	assert_false(t.features & BS_FEAT_WRITE_ZEROES_UNMAP);

	/* a component with the knob at 0 counts as lacking it */
	b = a;
	b.flags |= BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED;
	bs_limits_init_stacking(&t);
	bs_limits_stack(&t, &a, 0);
	bs_limits_stack(&t, &b, 0);
	assert_false(t.features & BS_FEAT_WRITE_ZEROES_UNMAP);

	/* no write-zeroes at all below: max 0 and the feature goes */
	b = a;
	b.max_write_zeroes_sectors = 0;
	bs_limits_init_stacking(&t);
	bs_limits_stack(&t, &a, 0);
	bs_limits_stack(&t, &b, 0);
	assert_int_equal(t.max_write_zeroes_sectors, 0);
	assert_false(t.features & BS_FEAT_WRITE_ZEROES_UNMAP);

	/* misaligned component start */
	bs_limits_init_stacking(&t);
	a.logical_block_size = 4096;
	assert_int_equal(bs_limits_stack(&t, &a, 512), -EINVAL);
}

/* ---- stacks of devices ------------------------------------------------ */

static void stack_table(void **state)
{
	static const struct {
		const char *b;		/* second component */
		bool unmap;		/* expected at the top */
		unsigned long long wz;	/* expected write_zeroes_max_bytes */
	} rows[] = {
		{ "mem:16M,max_write_zeroes=8M", true, 8 << 20 },
		{ "mem:16M,max_write_zeroes=8M,zeroes=write", false, 8 << 20 },
		{ "mem:16M,max_write_zeroes=8M,write_zeroes_unmap=0", false,
		  8 << 20 },
		{ "mem:16M,zeroes=none", false, 0 },
		{ "mem:16M,max_write_zeroes=1M", true, 1 << 20 },
	};
	unsigned i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct bs_ctx *ctx;
		struct bs_dev *top, *mid;

		assert_int_equal(bs_ctx_new(&ctx), 0);
		th_dev(ctx, "a", "mem:16M,max_write_zeroes=8M");
		th_dev(ctx, "b", rows[i].b);
		th_dev(ctx, "c", "mem:16M");
		mid = th_dev_kv(ctx, "mid", "type=test-cat;devices=a b");
		top = th_dev_kv(ctx, "top", "type=test-cat;devices=mid c");
		assert_int_equal(mid->size, 32 << 20);
		assert_int_equal(top->size, 48 << 20);
		print_message("row %u: %s\n", i, rows[i].b);
		assert_int_equal(bs_dev_write_zeroes_unmap(mid), rows[i].unmap);
		assert_int_equal(bs_dev_write_zeroes_unmap(top), rows[i].unmap);
		assert_int_equal(th_attr_u64(top, "queue/write_zeroes_max_bytes"),
				 rows[i].wz);
		assert_int_equal(th_attr_u64(top, "queue/write_zeroes_unmap"),
				 rows[i].unmap);
		bs_ctx_free(ctx);
	}
}

/* Flipping the knob at the bottom clears and restores every level above. */
static void live_propagation(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a, *b, *mid, *top;

	a = th_dev(ctx, "a", "mem:16M");
	b = th_dev(ctx, "b", "mem:16M");
	mid = th_dev_kv(ctx, "mid", "type=test-cat;devices=a b");
	top = th_dev_kv(ctx, "top", "type=test-cat;devices=mid");
	assert_true(bs_dev_write_zeroes_unmap(top));

	assert_int_equal(bs_attr_store(b, "queue/write_zeroes_unmap", "0\n"), 0);
	assert_false(bs_dev_write_zeroes_unmap(b));
	assert_false(bs_dev_write_zeroes_unmap(mid));
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_true(bs_dev_write_zeroes_unmap(a));
	assert_int_equal(bs_fallocate_sync(top, BS_FALLOC_WRITE_ZEROES, 0, 4096,
					   NULL, NULL),
			 -EOPNOTSUPP);

	assert_int_equal(bs_attr_store(b, "queue/write_zeroes_unmap", "1"), 0);
	assert_true(bs_dev_write_zeroes_unmap(mid));
	assert_true(bs_dev_write_zeroes_unmap(top));

	/* the byte form is the same state */
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap_max_bytes",
				       "0"),
			 0);
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_int_equal(th_attr_u64(a, "queue/write_zeroes_unmap"), 0);
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap_max_bytes",
				       "1073741824"),
			 0);
	assert_true(bs_dev_write_zeroes_unmap(top));

	/* the knob on a stacked device survives restacking from below */
	assert_int_equal(bs_attr_store(mid, "queue/write_zeroes_unmap", "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_int_equal(bs_attr_store(b, "queue/write_zeroes_unmap", "1"), 0);
	assert_false(bs_dev_write_zeroes_unmap(mid));
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_int_equal(bs_attr_store(mid, "queue/write_zeroes_unmap", "1"), 0);
	assert_true(bs_dev_write_zeroes_unmap(top));
}

/* A run-time EOPNOTSUPP below turns write-zeroes off above, for good. */
static void runtime_disable_propagates(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a, *top;

	a = th_dev(ctx, "a", "mem:16M,broken_write_zeroes=1");
	th_dev(ctx, "b", "mem:16M");
	top = th_dev_kv(ctx, "top", "type=test-cat;devices=a b");
	assert_true(bs_dev_write_zeroes_unmap(top));
	assert_int_equal(bs_zeroout_sync(a, 0, 1 << 20, 0, NULL, NULL), 0);
	assert_false(bs_dev_write_zeroes_unmap(a));
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_int_equal(th_attr_u64(top, "queue/write_zeroes_max_bytes"), 0);
	/* re-enabling the knob does not bring back a broken command */
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "1"), 0);
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_true(strstr(a->wz_reason, "EOPNOTSUPP") != NULL);
}

/* Holders keep components alive; creation refuses unknown components. */
static void holders_and_errors(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a, *top, *x = NULL;

	a = th_dev(ctx, "a", "mem:16M");
	top = th_dev_kv(ctx, "top", "type=test-cat;devices=a");
	assert_int_equal(a->nholders, 1);
	assert_int_equal(bs_dev_destroy(a), -EBUSY);
	assert_int_equal(th_dev_kv_try(ctx, "t2", "type=test-cat;devices=a nope",
				       &x),
			 -ENOENT);
	assert_non_null(strstr(bs_last_error(), "nope"));
	assert_int_equal(th_dev_kv_try(ctx, "t3", "type=test-cat", &x), -EINVAL);
	assert_int_equal(th_dev_try(ctx, "a", "mem:1M", &x), -EEXIST);
	assert_int_equal(th_dev_try(ctx, "bad name", "mem:1M", &x), -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "t4", "type=nosuch", &x), -EINVAL);
	assert_int_equal(th_dev_try(ctx, "t5", "mem:1M,colour=blue", &x),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "unknown key 'colour'"));
	assert_int_equal(bs_dev_destroy(top), 0);
	assert_int_equal(a->nholders, 0);
	assert_int_equal(bs_dev_destroy(a), 0);
	assert_null(bs_dev_find(ctx, "a"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stack_min_and_lcm),
		cmocka_unit_test(stack_io_opt_lcm),
		cmocka_unit_test(stack_feature_rules),
		cmocka_unit_test(stack_table),
		cmocka_unit_test_setup_teardown(live_propagation, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(runtime_disable_propagates, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(holders_and_errors, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("limits", tests, NULL, NULL);
}
