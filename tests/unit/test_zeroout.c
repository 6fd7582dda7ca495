/* SPDX-License-Identifier: MIT */
/* Zeroout: splitting, NOUNMAP, NOFALLBACK, bounded fallback, run-time EOPNOTSUPP. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* 10 GiB with an 8 MiB write-zeroes limit: exactly 1280 commands. */
static void split_by_limit(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:10G,max_write_zeroes=8M");

	assert_int_equal(bs_zeroout_sync(d, 0, 10 * GiB, 0, NULL, NULL), 0);
	assert_int_equal(d->stats.ops[BS_OP_WRITE_ZEROES], 1280);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 0);
	assert_int_equal(d->stats.bytes[BS_OP_WRITE_ZEROES], 10 * GiB);
	/* an unaligned tail still splits exactly */
	assert_int_equal(bs_zeroout_sync(d, 4096, 8 * MiB + 512, 0, NULL, NULL),
			 0);
	assert_int_equal(d->stats.ops[BS_OP_WRITE_ZEROES], 1282);
}

/* No write-zeroes and NOFALLBACK: EOPNOTSUPP, nothing written. */
static void nofallback_refuses(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:10G,zeroes=none");
	char buf[4096];

	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(bs_write_sync(d, buf, sizeof(buf), 0), 0);
	d->stats.ops[BS_OP_WRITE] = 0;
	assert_int_equal(bs_zeroout_sync(d, 0, 10 * GiB, BS_ZERO_NOFALLBACK,
					 NULL, NULL),
			 -EOPNOTSUPP);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 0);
	assert_int_equal(d->stats.ops[BS_OP_WRITE_ZEROES], 0);
	assert_int_equal(bs_read_sync(d, buf, sizeof(buf), 0), 0);
	assert_int_equal((unsigned char)buf[100], 0x5a);
}

static uint64_t last_progress;
static bool saw_fallback;

static void progress(void *arg, uint64_t done, uint64_t total, bool fallback)
{
	(void)arg;
	assert_true(done <= total);
	last_progress = done;
	saw_fallback |= fallback;
}

/* Fallback: writes from one shared buffer, bounded memory. */
static void fallback_bounded_memory(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:10G,zeroes=none,max_io=1M");
	uint64_t before;
	char buf[4096];

	memset(buf, 0x77, sizeof(buf));
	assert_int_equal(bs_write_sync(d, buf, sizeof(buf), 5 * GiB), 0);
	before = th_peak_rss();
	last_progress = 0;
	saw_fallback = false;
	assert_int_equal(bs_zeroout_sync(d, 0, 10 * GiB, 0, progress, NULL), 0);
	assert_true(th_peak_rss() - before < 64 * MiB);
	assert_int_equal(last_progress, 10 * GiB);
	assert_true(saw_fallback);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 1 + 10 * 1024);
	assert_int_equal(bs_read_sync(d, buf, sizeof(buf), 5 * GiB), 0);
	assert_true(th_is_zero(buf, sizeof(buf)));
}

/* NOUNMAP keeps blocks allocated; the default may unmap. */
static void nounmap_keeps_allocation(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:16M,chunk=64K");
	char *buf = malloc(MiB);

	memset(buf, 0xee, MiB);
	assert_int_equal(bs_write_sync(d, buf, MiB, 0), 0);
	assert_int_equal(bs_dev_allocated(d), MiB);
	assert_int_equal(bs_zeroout_sync(d, 0, MiB, BS_ZERO_NOUNMAP, NULL, NULL),
			 0);
	assert_int_equal(bs_dev_allocated(d), MiB);
	assert_int_equal(bs_read_sync(d, buf, MiB, 0), 0);
	assert_true(th_is_zero(buf, MiB));
	memset(buf, 0xee, MiB);
	assert_int_equal(bs_write_sync(d, buf, MiB, 0), 0);
	assert_int_equal(bs_zeroout_sync(d, 0, MiB, 0, NULL, NULL), 0);
	assert_int_equal(bs_dev_allocated(d), 0);
	free(buf);
}

/*
 * A device that claims write-zeroes but refuses it: the zeroout still
 * yields zeroes, and afterwards the device reports no write-zeroes.
 */
static void runtime_eopnotsupp_falls_back(void **state)
{
	struct bs_dev *d = th_dev(*state, "d",
				  "mem:64M,broken_write_zeroes=1,max_write_zeroes=1M");
	char *buf = malloc(8 * MiB);

	memset(buf, 0x33, 8 * MiB);
	assert_int_equal(bs_write_sync(d, buf, 8 * MiB, 0), 0);
	assert_true(bs_dev_write_zeroes_unmap(d));
	assert_int_equal(bs_zeroout_sync(d, 0, 8 * MiB, 0, NULL, NULL), 0);
	assert_int_equal(bs_read_sync(d, buf, 8 * MiB, 0), 0);
	assert_true(th_is_zero(buf, 8 * MiB));
	assert_false(bs_dev_write_zeroes_unmap(d));
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_max_bytes"), 0);
	assert_int_equal(th_attr_u64(d, "queue/write_zeroes_unmap"), 0);
	assert_true(d->wz_broken);
	/* NOFALLBACK now fails at once */
	assert_int_equal(bs_zeroout_sync(d, 0, MiB, BS_ZERO_NOFALLBACK, NULL,
					 NULL),
			 -EOPNOTSUPP);
	free(buf);
}

/* NOFALLBACK on a refusing device: EOPNOTSUPP, data untouched. */
static void runtime_eopnotsupp_nofallback(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:16M,broken_write_zeroes=1");
	char buf[4096];

	memset(buf, 0x44, sizeof(buf));
	assert_int_equal(bs_write_sync(d, buf, sizeof(buf), 0), 0);
	assert_int_equal(bs_zeroout_sync(d, 0, 16 * MiB, BS_ZERO_NOFALLBACK,
					 NULL, NULL),
			 -EOPNOTSUPP);
	assert_int_equal(bs_read_sync(d, buf, sizeof(buf), 0), 0);
	assert_int_equal((unsigned char)buf[0], 0x44);
}

/* Bounds and alignment fail EINVAL before anything is issued. */
static void bad_ranges(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,logical_block_size=4096");

	assert_int_equal(bs_zeroout_sync(d, 512, 4096, 0, NULL, NULL), -EINVAL);
	assert_int_equal(bs_zeroout_sync(d, 0, 4096 + 512, 0, NULL, NULL),
			 -EINVAL);
	assert_int_equal(bs_zeroout_sync(d, MiB - 4096, 8192, 0, NULL, NULL),
			 -EINVAL);
	assert_int_equal(bs_zeroout_sync(d, UINT64_MAX - 4095, 4096, 0, NULL,
					 NULL),
			 -EINVAL);
	assert_int_equal(bs_zeroout_sync(d, 0, 4096, 0x100, NULL, NULL),
			 -EINVAL);
	assert_int_equal(d->stats.ops[BS_OP_WRITE_ZEROES] +
				 d->stats.ops[BS_OP_WRITE],
			 0);
}

/* Never more than BS_ZERO_MAX_INFLIGHT requests of one zeroout at once. */
static void (*mem_submit)(struct bs_dev *, struct bs_req *);
static struct bs_req *held[1024];
static unsigned nheld, max_held;

static void holding_submit(struct bs_dev *dev, struct bs_req *req)
{
	(void)dev;
	held[nheld++] = req;
	if (nheld > max_held)
		max_held = nheld;
}

static void zdone(void *arg, int result)
{
	int *r = arg;

	*r = result;
}

static void inflight_bounded(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1G,max_write_zeroes=64K");
	const struct bs_dev_type *orig = d->type;
	struct bs_dev_type t = *orig;
	int result = 1;
	unsigned i, rounds = 0;

	mem_submit = orig->submit;
	t.submit = holding_submit;
	d->type = &t;
	nheld = max_held = 0;
	assert_int_equal(bs_zeroout(d, 0, 64 * MiB, 0, NULL, zdone, &result),
			 0);
	while (result == 1 && rounds++ < 10000) {
		unsigned n = nheld;
		nheld = 0;
		for (i = 0; i < n; i++)
			mem_submit(d, held[i]);
		bs_loop_run_once(bs_ctx_loop(*state), 0);
	}
	d->type = orig;
	assert_int_equal(result, 0);
	assert_int_equal(max_held, BS_ZERO_MAX_INFLIGHT);
	assert_int_equal(d->stats.ops[BS_OP_WRITE_ZEROES], 1024);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(split_by_limit, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(nofallback_refuses, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(fallback_bounded_memory, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(nounmap_keeps_allocation, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(runtime_eopnotsupp_falls_back,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(runtime_eopnotsupp_nofallback,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(bad_ranges, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(inflight_bounded, th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("zeroout", tests, NULL, NULL);
}
