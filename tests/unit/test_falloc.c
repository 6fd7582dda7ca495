/* SPDX-License-Identifier: MIT */
/* fallocate on a block device: the rules of DESIGN.md, row by row. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define MiB (1ll << 20)
#define K BS_FALLOC_KEEP_SIZE
#define P BS_FALLOC_PUNCH_HOLE
#define Z BS_FALLOC_ZERO_RANGE
#define W BS_FALLOC_WRITE_ZEROES

static void generic_checks(void **state)
{
	static const struct {
		int mode;
		int64_t off, len;
		int err;
	} rows[] = {
		{ 0, -1, 4096, -EINVAL },
		{ 0, 0, 0, -EINVAL },
		{ 0, 0, -4096, -EINVAL },
		{ 0x100, 0, 4096, -EOPNOTSUPP },
		{ BS_FALLOC_NO_HIDE_STALE, 0, 4096, -EOPNOTSUPP },
		{ P, 0, 4096, -EOPNOTSUPP },
		{ P | K, 0, 4096, 0 },
		{ Z | P | K, 0, 4096, -EOPNOTSUPP },
		{ W | K, 0, 4096, -EOPNOTSUPP },
		{ W | Z, 0, 4096, -EOPNOTSUPP },
		{ BS_FALLOC_COLLAPSE_RANGE | K, 0, 4096, -EOPNOTSUPP },
		{ BS_FALLOC_INSERT_RANGE | K, 0, 4096, -EOPNOTSUPP },
		{ BS_FALLOC_COLLAPSE_RANGE, 0, 4096, 0 },
		{ BS_FALLOC_UNSHARE_RANGE | K, 0, 4096, 0 },
		{ W, 0, 4096, 0 },
		{ Z | K, 0, 4096, 0 },
		{ K, 0, 4096, 0 },
		{ 0, INT64_MAX, 1, -EFBIG },
		{ 0, INT64_MAX - 10, 10, 0 },
		/* the argument checks come before the mode checks */
		{ 0x100, -1, 4096, -EINVAL },
		{ P, 0, 0, -EINVAL },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		print_message("row %u: mode 0x%x\n", i, rows[i].mode);
		assert_int_equal(bs_falloc_check(rows[i].mode, rows[i].off,
						 rows[i].len, INT64_MAX),
				 rows[i].err);
	}
	assert_int_equal(bs_falloc_check(0, 1 << 20, 1 << 20, 1 << 20), -EFBIG);
}

static void bdev_rules(void **state)
{
	struct bs_ctx *ctx;
	struct bs_dev *d, *n, *w;
	/* size 16 MiB, 4 KiB blocks; n: no write-zeroes; w: zeroes = write */
	static const struct {
		char dev;
		int mode;
		int64_t off, len;
		int err;
	} rows[] = {
		{ 'd', 0x100, 0, 4096, -EOPNOTSUPP },
		{ 'd', BS_FALLOC_UNSHARE_RANGE, 0, 4096, -EOPNOTSUPP },
		{ 'd', BS_FALLOC_COLLAPSE_RANGE, 0, 4096, -EOPNOTSUPP },
		{ 'd', BS_FALLOC_INSERT_RANGE, 0, 4096, -EOPNOTSUPP },
		{ 'd', 0, 0, 4096, -EOPNOTSUPP },
		{ 'd', K, 0, 4096, -EOPNOTSUPP },
		{ 'd', 0, 16 * MiB, 4096, -EINVAL }, /* range before mode */
		{ 'd', Z, 16 * MiB, 4096, -EINVAL },
		{ 'd', Z, 16 * MiB - 4096, 8192, -EINVAL },
		{ 'd', Z | K, 16 * MiB - 4096, 8192, 0 }, /* clipped */
		{ 'd', P | K, 16 * MiB - 4096, 1 << 30, 0 },
		{ 'd', Z, 512, 4096, -EINVAL },
		{ 'd', Z, 0, 4096 + 512, -EINVAL },
		{ 'd', W, 0, 4096, 0 },
		{ 'd', W, 16 * MiB, 4096, -EINVAL },
		{ 'd', W, 0, 100, -EINVAL },
		{ 'd', W | K, 0, 4096, -EOPNOTSUPP },
		{ 'd', P | K, 0, 4096, 0 },
		{ 'd', Z, 0, 4096, 0 },
		/* no unmap: WRITE_ZEROES refused before the range is looked at */
		{ 'w', W, 0, 4096, -EOPNOTSUPP },
		{ 'w', W, 32 * MiB, 4096, -EOPNOTSUPP },
		{ 'w', Z, 0, 4096, 0 },
		{ 'w', P | K, 0, 4096, 0 },
		{ 'n', W, 0, 4096, -EOPNOTSUPP },
		{ 'n', P | K, 0, 4096, -EOPNOTSUPP }, /* no fallback for punch */
		{ 'n', Z, 0, 4096, 0 },		      /* zero range writes */
	};
	unsigned i;

	(void)state;
	assert_int_equal(bs_ctx_new(&ctx), 0);
	d = th_dev(ctx, "d", "mem:16M,logical_block_size=4096");
	n = th_dev(ctx, "n", "mem:16M,logical_block_size=4096,zeroes=none");
	w = th_dev(ctx, "w", "mem:16M,logical_block_size=4096,zeroes=write");
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct bs_dev *x = rows[i].dev == 'd' ? d :
				   rows[i].dev == 'n' ? n : w;
		print_message("row %u: %c mode 0x%x %lld+%lld\n", i, rows[i].dev,
			      rows[i].mode, (long long)rows[i].off,
			      (long long)rows[i].len);
		assert_int_equal(bs_fallocate_sync(x, rows[i].mode, rows[i].off,
						   rows[i].len, NULL, NULL),
				 rows[i].err);
	}
	bs_ctx_free(ctx);
}

/* What each mode does to the data and the allocation. */
static void bdev_effects(void **state)
{
	struct bs_ctx *ctx;
	struct bs_dev *d;
	uint8_t *buf = malloc(4 * MiB);

	(void)state;
	assert_int_equal(bs_ctx_new(&ctx), 0);
	d = th_dev(ctx, "d", "mem:4M,chunk=64K");

	th_fill(buf, 4 * MiB, 3);
	assert_int_equal(bs_write_sync(d, buf, 4 * MiB, 0), 0);
	assert_int_equal(bs_dev_allocated(d), 4 * MiB);
	/* ZERO_RANGE: zeroes, stays allocated */
	assert_int_equal(bs_fallocate_sync(d, Z, 0, MiB, NULL, NULL), 0);
	assert_int_equal(bs_dev_allocated(d), 4 * MiB);
	/* WRITE_ZEROES: zeroes by unmapping */
	assert_int_equal(bs_fallocate_sync(d, W, MiB, MiB, NULL, NULL), 0);
	assert_int_equal(bs_dev_allocated(d), 3 * MiB);
	/* PUNCH_HOLE: unmaps too */
	assert_int_equal(bs_fallocate_sync(d, P | K, 2 * MiB, MiB, NULL, NULL), 0);
	assert_int_equal(bs_dev_allocated(d), 2 * MiB);
	assert_int_equal(bs_read_sync(d, buf, 4 * MiB, 0), 0);
	assert_true(th_is_zero(buf, 3 * MiB));
	assert_false(th_is_zero(buf + 3 * MiB, MiB));

	/* knob off: -w refused with nothing changed; on again: works */
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "0"), 0);
	assert_int_equal(bs_fallocate_sync(d, W, 3 * MiB, MiB, NULL, NULL),
			 -EOPNOTSUPP);
	assert_non_null(strstr(bs_last_error(), "write_zeroes_unmap=0"));
	assert_int_equal(bs_read_sync(d, buf, MiB, 3 * MiB), 0);
	assert_false(th_is_zero(buf, MiB));
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "1"), 0);
	assert_int_equal(bs_fallocate_sync(d, W, 3 * MiB, MiB, NULL, NULL), 0);
	assert_int_equal(bs_dev_allocated(d), MiB);
	bs_ctx_free(ctx);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(generic_checks),
		cmocka_unit_test(bdev_rules),
		cmocka_unit_test(bdev_effects),
	};

	return cmocka_run_group_tests_name("falloc", tests, NULL, NULL);
}
