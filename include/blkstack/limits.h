/* SPDX-License-Identifier: MIT */
/*
 * Queue limits: what a device can do, and how stacked devices combine the
 * limits of their components (the rules of DESIGN.md "Core rules").
 */
#ifndef BLKSTACK_LIMITS_H
#define BLKSTACK_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#define BS_SECTOR_SHIFT 9
#define BS_SECTOR_SIZE (1u << BS_SECTOR_SHIFT)

/* features: what the device (driver) can do */
#define BS_FEAT_WRITE_CACHE (1u << 0)	/* volatile write cache: FLUSH matters */
#define BS_FEAT_FUA (1u << 1)		/* native forced unit access */
#define BS_FEAT_ROTATIONAL (1u << 2)
/* write-zeroes may deallocate instead of writing; reads return zeroes */
#define BS_FEAT_WRITE_ZEROES_UNMAP (1u << 17)

/* flags: what the user asked for */
#define BS_FLAG_WRITE_CACHE_DISABLED (1u << 0)
#define BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED (1u << 3)

struct bs_limits {
	uint32_t logical_block_size;	/* bytes, power of two, >= 512 */
	uint32_t physical_block_size;	/* bytes */
	uint32_t io_min;		/* bytes, 0 = none */
	uint32_t io_opt;		/* bytes, 0 = none */
	uint32_t max_hw_sectors;	/* driver's max READ/WRITE size */
	uint32_t max_user_sectors;	/* user's cap (max_sectors_kb), 0 = none */
	uint32_t max_sectors;		/* effective: min(hw, user) */
	uint32_t max_write_zeroes_sectors; /* 0 = no write-zeroes command */
	uint32_t max_discard_sectors;	/* 0 = no discard */
	uint32_t discard_granularity;	/* bytes */
	uint32_t max_segments;		/* iovec entries per request, 0 = any */
	uint32_t features;		/* BS_FEAT_* */
	uint32_t flags;			/* BS_FLAG_* */
};

/* Defaults for a leaf device: 512-byte blocks, 1 MiB I/O, nothing else. */
void bs_limits_init(struct bs_limits *lim);

/*
 * Start limits for a stacked device: everything unlimited, block sizes 0 so
 * that stacking takes the components', and WRITE_ZEROES_UNMAP on (it stays
 * only if every component has it enabled).
 */
void bs_limits_init_stacking(struct bs_limits *lim);

/*
 * Combine component limits @b into stacked limits @t, as the block layer's
 * limit stacking does: minimum of the maxima, lcm of block sizes, features
 * that need every component cleared when @b lacks them. A component whose
 * user knob disabled unmap write-zeroes counts as lacking the feature.
 * @start is the component's byte offset inside the stacked device (for
 * alignment); returns 0, or -EINVAL if the result is misaligned.
 */
int bs_limits_stack(struct bs_limits *t, const struct bs_limits *b,
		    uint64_t start);

/*
 * Finish stacking: fix derived values (max_sectors from hw and user) and
 * clear WRITE_ZEROES_UNMAP when the result has no write-zeroes at all.
 */
void bs_limits_finish(struct bs_limits *lim);

/* feature && !disabled: the device offers fast, unmapping zeroing. */
static inline bool bs_limits_write_zeroes_unmap(const struct bs_limits *l)
{
	return (l->features & BS_FEAT_WRITE_ZEROES_UNMAP) &&
	       !(l->flags & BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED);
}

static inline bool bs_limits_write_cache(const struct bs_limits *l)
{
	return (l->features & BS_FEAT_WRITE_CACHE) &&
	       !(l->flags & BS_FLAG_WRITE_CACHE_DISABLED);
}

#endif
