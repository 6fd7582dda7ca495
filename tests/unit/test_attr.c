/* SPDX-License-Identifier: MIT */
/* Attributes: values as sysfs shows them, parsing as sysfs accepts, modes. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/attr.h>

#include "helpers/th.h"

static void parse_like_sysfs(void **state)
{
	static const struct {
		const char *in;
		int err;
		unsigned long long v;
	} rows[] = {
		{ "0", 0, 0 },	      { "1\n", 0, 1 },	    { " 1", 0, 1 },
		{ "+7", 0, 7 },	      { "12 \n", 0, 12 },   { "", -EINVAL, 0 },
		{ "\n", -EINVAL, 0 }, { "-1", -EINVAL, 0 }, { "1x", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 }, { "1\n\n", -EINVAL, 0 },
		{ "18446744073709551615", 0, 18446744073709551615ull },
		{ "18446744073709551616", -EINVAL, 0 },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		unsigned long long v = 12345;
		int err = bs_attr_parse_u64(rows[i].in, &v);
		print_message("'%s'\n", rows[i].in);
		assert_int_equal(err, rows[i].err);
		if (!err)
			assert_int_equal(v, rows[i].v);
	}
}

static void core_values(void **state)
{
	struct bs_dev *d = th_dev(*state, "d",
				  "mem:1G,logical_block_size=4096,max_write_zeroes=8M,"
				  "max_discard=16M,max_io=512K");
	char buf[64];

	assert_int_equal(th_attr_u64(d, "size"), (1ull << 30) >> 9);
	assert_int_equal(th_attr_u64(d, "queue/logical_block_size"), 4096);
	assert_int_equal(th_attr_u64(d, "queue/physical_block_size"), 4096);
	assert_int_equal(th_attr_u64(d, "queue/max_hw_sectors_kb"), 512);
	assert_int_equal(th_attr_u64(d, "queue/max_sectors_kb"), 512);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_max_bytes"), 8 << 20);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 1);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap_max_hw_bytes"),
			 8 << 20);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap_max_bytes"),
			 8 << 20);
	assert_int_equal(th_attr_u64(d, "queue/discard_max_bytes"), 16 << 20);
	assert_int_equal(th_attr_u64(d, "queue/discard_granularity"), 4096);
	assert_int_equal(bs_attr_show(d, "queue/write_cache", buf, sizeof(buf)),
			 strlen("write through\n"));
	assert_string_equal(buf, "write through\n");
	assert_int_equal(bs_attr_show(d, "queue/write_zeroes_unmap", buf,
				      sizeof(buf)),
			 2);
	assert_string_equal(buf, "1\n");
	assert_int_equal(bs_attr_show(d, "queue/nope", buf, sizeof(buf)),
			 -ENOENT);
}

static void knob_rules(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1G,max_write_zeroes=8M");

	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "2"),
			 -EINVAL);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "yes"),
			 -EINVAL);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 1);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "0\n"), 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 0);
	/* both views are one state */
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap_max_bytes"), 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap_max_hw_bytes"),
			 8 << 20);
	/* the command itself stays: only unmapping is off */
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_max_bytes"), 8 << 20);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", " 1"), 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap_max_bytes"),
			 8 << 20);

	/* byte form: 0 or exactly the hw value */
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       "4096"),
			 -EINVAL);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       "0"),
			 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 0);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       "8388608\n"),
			 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 1);

	/* read-only attributes */
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_hw_bytes",
				       "0"),
			 -EACCES);
	assert_int_equal(bs_attr_store(d, "queue/logical_block_size", "4096"),
			 -EACCES);
	assert_int_equal(bs_attr_store(d, "size", "1"), -EACCES);
	assert_int_equal(bs_attr_store(d, "queue/nope", "1"), -ENOENT);
}

/* Above 4 GiB the byte form still round-trips (64-bit arithmetic). */
static void knob_above_4g(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:64G,max_write_zeroes=8G");
	char buf[64];

	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap_max_hw_bytes"),
			 8ull << 30);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       "0"),
			 0);
	snprintf(buf, sizeof(buf), "%llu\n", 8ull << 30);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       buf),
			 0);
	assert_true(bs_dev_write_zeroes_unmap(d));
}

/* No feature: hw 0; the knob can be written but nothing appears. */
static void knob_without_feature(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1G,zeroes=write");

	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap_max_hw_bytes"),
			 0);
	assert_true(th_attr_u64(d, "queue/write_zeroes_max_bytes") > 0);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "1"), 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 0);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       "1073741824"),
			 -EINVAL);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       "0"),
			 0);
}

static void max_sectors_and_cache(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1G,max_io=1M,write_cache=1");
	struct bs_dev *e = th_dev(*state, "e", "mem:1G");
	char buf[64];

	assert_int_equal(bs_attr_store(d, "queue/max_sectors_kb", "256"), 0);
	assert_int_equal(d->limits.max_sectors, 512);
	assert_int_equal(bs_attr_store(d, "queue/max_sectors_kb", "2048"),
			 -EINVAL);
	assert_int_equal(bs_attr_store(d, "queue/max_sectors_kb", "0"), 0);
	assert_int_equal(th_attr_u64(d, "queue/max_sectors_kb"), 1024);

	bs_attr_show(d, "queue/write_cache", buf, sizeof(buf));
	assert_string_equal(buf, "write back\n");
	assert_int_equal(bs_attr_store(d, "queue/write_cache", "write through\n"),
			 0);
	bs_attr_show(d, "queue/write_cache", buf, sizeof(buf));
	assert_string_equal(buf, "write through\n");
	assert_int_equal(bs_attr_store(d, "queue/write_cache", "write back"), 0);
	assert_int_equal(bs_attr_store(d, "queue/write_cache", "sometimes"),
			 -EINVAL);
	/* no volatile cache to turn on */
	assert_int_equal(bs_attr_store(e, "queue/write_cache", "write back"),
			 -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_like_sysfs),
		cmocka_unit_test_setup_teardown(core_values, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(knob_rules, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(knob_above_4g, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(knob_without_feature, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(max_sectors_and_cache, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("attr", tests, NULL, NULL);
}
