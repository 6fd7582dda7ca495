/* SPDX-License-Identifier: MIT */
/*
 * zero: a device of SIZE bytes that reads as zeroes and drops writes, the
 * dm-zero analogue. Nothing is ever stored, so zeroing is free: it offers
 * write-zeroes and discard of any size with WRITE_ZEROES_UNMAP, and its
 * allocation map is one hole.
 *
 * Options: size = SIZE (required); logical_block_size = N (512).
 */
#include <errno.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

/* largest write-zeroes/discard a request may carry: 2 GiB - 4 KiB */
#define ZERO_MAX_SECTORS (UINT32_MAX >> 1 & ~7u)

static int zero_open(struct bs_dev *dev, struct bs_opts *opts)
{
	uint64_t size = 0;
	uint32_t lbs = 512;
	int err;

	if ((err = bs_opts_get_size(opts, "size", &size)) < 0 ||
	    (err = bs_opts_get_u32(opts, "logical_block_size", &lbs)) < 0)
		return err;
	if (!size)
		return bs_error(-EINVAL, "%s: zero needs size = SIZE", dev->name);
	if (lbs < 512 || lbs > 65536 || (lbs & (lbs - 1)))
		return bs_error(-EINVAL, "%s: zero: logical_block_size %u is not "
				"a power of two from 512 to 64K", dev->name, lbs);
	if (size % lbs)
		return bs_error(-EINVAL, "%s: zero: size %llu is not a multiple "
				"of the logical block size %u", dev->name,
				(unsigned long long)size, lbs);
	dev->size = size;
	dev->limits.logical_block_size = lbs;
	dev->limits.physical_block_size = lbs;
	dev->limits.discard_granularity = lbs;
	dev->limits.max_write_zeroes_sectors = ZERO_MAX_SECTORS;
	dev->limits.max_discard_sectors = ZERO_MAX_SECTORS;
	dev->limits.features |= BS_FEAT_WRITE_ZEROES_UNMAP;
	bs_dev_set_reason(dev, "zero: nothing is stored, every block reads as "
			  "zeroes: zeroing is free");
	return 0;
}

static void zero_submit(struct bs_dev *dev, struct bs_req *req)
{
	int i;

	(void)dev;
	if (req->op == BS_OP_READ)
		for (i = 0; i < req->iovcnt; i++)
			memset(req->iov[i].iov_base, 0, req->iov[i].iov_len);
	/* writes, write-zeroes, discards, flushes: nothing to keep */
	bs_req_complete(req, 0);
}

static int zero_block_status(struct bs_dev *dev, uint64_t offset,
			     uint64_t len, bs_extent_fn fn, void *arg)
{
	(void)dev;
	fn(arg, offset, len, BS_EXT_HOLE | BS_EXT_ZERO);
	return 0;
}

static int64_t zero_allocated(struct bs_dev *dev)
{
	(void)dev;
	return 0;
}

static const struct bs_dev_type zero_type = {
	.name = "zero",
	.spec_key = "size",
	.summary = "reads zeroes, drops writes; zeroing is free (like dm-zero)",
	.options =
		"size=SIZE            capacity (required)\n"
		"logical_block_size=N 512..65536 (512)\n"
		"                     Write-zeroes and discard always succeed and\n"
		"                     it has WRITE_ZEROES_UNMAP; the allocation\n"
		"                     map is one hole\n",
	.open = zero_open,
	.submit = zero_submit,
	.block_status = zero_block_status,
	.allocated = zero_allocated,
};

BS_DEV_TYPE(zero_type)
