/* SPDX-License-Identifier: MIT */
/*
 * The rbd driver's pure parts (lib/drivers/rbd_config.c): which pool and
 * image the options name, and the decision from librbd's facts to limits
 * and WRITE_ZEROES_UNMAP. The rbd device type itself, if built, refuses
 * bad names before it connects anywhere.
 */
#include <errno.h>
#include <string.h>

#include "drivers/rbd_config.h"
#include "helpers/th.h"

static int parse(const char *image, const char *pool, char *p, char *i)
{
	char why[256];

	return rbd_parse_name(image, pool, p, i, why, sizeof(why));
}

static void names(void **state)
{
	char p[RBD_NAME_MAX], i[RBD_NAME_MAX], why[256], big[300];

	(void)state;
	assert_int_equal(parse("v1", NULL, p, i), 0);
	assert_string_equal(p, "rbd");
	assert_string_equal(i, "v1");
	assert_int_equal(parse("pool2/v2", NULL, p, i), 0);
	assert_string_equal(p, "pool2");
	assert_string_equal(i, "v2");
	assert_int_equal(parse("v3", "other", p, i), 0);
	assert_string_equal(p, "other");
	/* both forms agree: fine; disagree: refused, naming both */
	assert_int_equal(parse("other/v3", "other", p, i), 0);
	assert_int_equal(rbd_parse_name("a/v3", "other", p, i, why,
					sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "other"));
	/* refused: empty, snapshots, namespaces, empty parts, too long */
	assert_int_equal(parse(NULL, NULL, p, i), -EINVAL);
	assert_int_equal(parse("", NULL, p, i), -EINVAL);
	assert_int_equal(rbd_parse_name("v1@snap", NULL, p, i, why,
					sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "snapshot"));
	assert_int_equal(rbd_parse_name("p/ns/v1", NULL, p, i, why,
					sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "namespace"));
	assert_int_equal(parse("/v1", NULL, p, i), -EINVAL);
	assert_int_equal(parse("p/", NULL, p, i), -EINVAL);
	assert_int_equal(parse("v1", "a/b", p, i), -EINVAL);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(parse(big, NULL, p, i), -EINVAL);
}

static struct rbd_facts dflt(void)
{
	/* Ceph 16's defaults: 4 MiB objects, skip partial discard with a
	 * 64 KiB granularity, the cache on */
	struct rbd_facts f = {
		.size = 64ull << 20, .obj_size = 4u << 20,
		.write_zeroes = true, .skip_partial_discard = true,
		.discard_gran = 65536, .cache = true, .max_io = 4u << 20,
	};
	return f;
}

static void decision(void **state)
{
	struct rbd_facts f = dflt();
	struct rbd_config c;

	(void)state;
	/* librbd's write_zeroes: granularity-0 discard -> unmap zeroing */
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_true(c.wz_unmap);
	assert_true(c.limits.features & BS_FEAT_WRITE_ZEROES_UNMAP);
	assert_int_equal(c.limits.max_write_zeroes_sectors, (1u << 30) >> 9);
	assert_non_null(strstr(c.why, "granularity 0"));

	/* no write_zeroes in librbd: none, and no feature */
	f.write_zeroes = false;
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_false(c.wz_unmap);
	assert_int_equal(c.limits.max_write_zeroes_sectors, 0);
	assert_false(c.limits.features & BS_FEAT_WRITE_ZEROES_UNMAP);
	assert_non_null(strstr(c.why, "without rbd_aio_write_zeroes"));

	/* refused at run time: the same */
	f = dflt();
	f.wz_refused = true;
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_false(c.wz_unmap);
	assert_int_equal(c.limits.max_write_zeroes_sectors, 0);

	/* zeroing in whole objects: 1 GiB rounded down to 3 MiB objects
	 * is not a power of two -> refused; 64 MiB objects: 1 GiB */
	f = dflt();
	f.obj_size = 3u << 20;
	assert_int_equal(rbd_config_decide(&f, &c), -EINVAL);
	f.obj_size = 64u << 20;
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_int_equal(c.limits.max_write_zeroes_sectors, (1u << 30) >> 9);
	assert_int_equal(c.limits.io_opt, 64u << 20);
	f.obj_size = 2048;
	assert_int_equal(rbd_config_decide(&f, &c), -EINVAL);
}

static void discard_and_limits(void **state)
{
	struct rbd_facts f = dflt();
	struct rbd_config c;

	(void)state;
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_int_equal(c.limits.discard_granularity, 65536);
	assert_int_equal(c.limits.max_discard_sectors, (1u << 30) >> 9);
	assert_int_equal(c.limits.logical_block_size, 512);
	assert_int_equal(c.limits.io_opt, 4u << 20);
	assert_int_equal(c.limits.max_hw_sectors, (4u << 20) >> 9);
	assert_true(c.limits.features & BS_FEAT_WRITE_CACHE);
	assert_false(c.limits.features & BS_FEAT_FUA);

	/* rbd_skip_partial_discard = false: librbd zeroes partial pieces */
	f.skip_partial_discard = false;
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_int_equal(c.limits.discard_granularity, 512);
	/* a granularity above the object: whole objects */
	f = dflt();
	f.discard_gran = 16u << 20;
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_int_equal(c.limits.discard_granularity, 4u << 20);
	/* no cache: no write cache to flush */
	f = dflt();
	f.cache = false;
	f.max_io = 1u << 20;
	assert_int_equal(rbd_config_decide(&f, &c), 0);
	assert_false(c.limits.features & BS_FEAT_WRITE_CACHE);
	assert_int_equal(c.limits.max_hw_sectors, (1u << 20) >> 9);
}

/* The device type refuses bad options before connecting anywhere. */
static void type_refuses(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *dev = NULL;

	if (!bs_dev_type_find("rbd"))
		skip();
	assert_int_equal(th_dev_try(ctx, "r", "rbd:p/v@s", &dev), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "snapshot"));
	assert_int_equal(th_dev_try(ctx, "r", "rbd:v,create=1000", &dev),
			 -EINVAL);
	assert_int_equal(th_dev_try(ctx, "r", "rbd:v,create=0", &dev),
			 -EINVAL);
	assert_int_equal(th_dev_try(ctx, "r", "rbd:v,timeout=0", &dev),
			 -EINVAL);
	assert_int_equal(th_dev_try(ctx, "r", "rbd:v,bogus=1", &dev),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names),
		cmocka_unit_test(decision),
		cmocka_unit_test(discard_and_limits),
		cmocka_unit_test_setup_teardown(type_refuses, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("rbd_config", tests, NULL, NULL);
}
