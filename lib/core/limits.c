/* SPDX-License-Identifier: MIT */
/*
 * Queue limits and their stacking. The rules follow the Linux block
 * layer's limit stacking: maxima take the minimum (0 meaning "none" for
 * write-zeroes and discard), block sizes the largest (they are powers of
 * two, so that is their lcm), and features that need every component are
 * cleared by any component that lacks them.
 */
#include <errno.h>
#include <string.h>

#include <blkstack/limits.h>

#define UNLIMITED UINT32_MAX

void bs_limits_init(struct bs_limits *lim)
{
	memset(lim, 0, sizeof(*lim));
	lim->logical_block_size = 512;
	lim->physical_block_size = 512;
	lim->max_hw_sectors = 2048; /* 1 MiB */
	lim->max_sectors = 2048;
	lim->discard_granularity = 512;
}

void bs_limits_init_stacking(struct bs_limits *lim)
{
	memset(lim, 0, sizeof(*lim));
	lim->max_hw_sectors = UNLIMITED;
	lim->max_sectors = UNLIMITED;
	lim->max_write_zeroes_sectors = UNLIMITED;
	lim->max_discard_sectors = UNLIMITED;
	/* A stacked device starts capable; any component can take it away. */
	lim->features = BS_FEAT_WRITE_ZEROES_UNMAP;
}

static uint32_t min_nonzero(uint32_t a, uint32_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static uint32_t max_u32(uint32_t a, uint32_t b)
{
	return a > b ? a : b;
}

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

/*
 * The optimal I/O of a stack: a size that is a whole multiple of every
 * component's (the least common multiple, zeroes ignored), as the block
 * layer stacks it. An lcm that does not fit the 32-bit field says nothing
 * useful: 0, "not reported".
 */
static uint32_t io_opt_stack(uint32_t a, uint32_t b)
{
	uint64_t l;

	if (!a || !b)
		return a ? a : b;
	l = (uint64_t)a / gcd_u64(a, b) * b;
	return l <= UINT32_MAX ? (uint32_t)l : 0;
}

int bs_limits_stack(struct bs_limits *t, const struct bs_limits *b,
		    uint64_t start)
{
	int ret = 0;

	t->max_hw_sectors = min_u32(t->max_hw_sectors, b->max_hw_sectors);
	t->max_sectors = min_u32(t->max_sectors, b->max_sectors);
	t->max_user_sectors = min_nonzero(t->max_user_sectors,
					  b->max_user_sectors);
	/* 0 below means "no write-zeroes"; min keeps it 0 above */
	t->max_write_zeroes_sectors = min_u32(t->max_write_zeroes_sectors,
					      b->max_write_zeroes_sectors);
	t->max_discard_sectors = min_u32(t->max_discard_sectors,
					 b->max_discard_sectors);
	t->max_segments = min_nonzero(t->max_segments, b->max_segments);

	t->logical_block_size = max_u32(t->logical_block_size,
					b->logical_block_size);
	t->physical_block_size = max_u32(t->physical_block_size,
					 b->physical_block_size);
	t->io_min = max_u32(t->io_min, b->io_min);
	t->io_opt = io_opt_stack(t->io_opt, b->io_opt);
	t->discard_granularity = max_u32(t->discard_granularity,
					 b->discard_granularity);

	/* features every component must have */
	if (!bs_limits_write_zeroes_unmap(b))
		t->features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
	if (!(b->features & BS_FEAT_FUA))
		t->features &= ~BS_FEAT_FUA;
	/* features any component brings */
	if (bs_limits_write_cache(b))
		t->features |= BS_FEAT_WRITE_CACHE;
	if (b->features & BS_FEAT_ROTATIONAL)
		t->features |= BS_FEAT_ROTATIONAL;

	/* A component must start on a logical block of the stack. */
	if (t->logical_block_size &&
	    (start & (t->logical_block_size - 1)))
		ret = -EINVAL;
	if (!t->max_write_zeroes_sectors)
		t->features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
	return ret;
}

void bs_limits_finish(struct bs_limits *lim)
{
	uint32_t lbs_sectors;

	if (!lim->logical_block_size)
		lim->logical_block_size = 512;
	if (lim->physical_block_size < lim->logical_block_size)
		lim->physical_block_size = lim->logical_block_size;
	if (lim->discard_granularity < lim->logical_block_size)
		lim->discard_granularity = lim->logical_block_size;
	if (lim->max_hw_sectors == UNLIMITED)
		lim->max_hw_sectors = 2048;
	lim->max_sectors = lim->max_hw_sectors;
	if (lim->max_user_sectors && lim->max_user_sectors < lim->max_sectors)
		lim->max_sectors = lim->max_user_sectors;

	/* round the maxima down to whole logical blocks */
	lbs_sectors = lim->logical_block_size >> BS_SECTOR_SHIFT;
	lim->max_sectors -= lim->max_sectors % lbs_sectors;
	if (!lim->max_sectors)
		lim->max_sectors = lbs_sectors;
	lim->max_write_zeroes_sectors -= lim->max_write_zeroes_sectors %
					 lbs_sectors;
	lim->max_discard_sectors -= lim->max_discard_sectors % lbs_sectors;

	if (!lim->max_write_zeroes_sectors)
		lim->features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
}
