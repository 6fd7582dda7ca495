/* SPDX-License-Identifier: MIT */
/*
 * The capability mapping: what a logical unit reports of its device (from
 * struct bs_caps, never raw limits), in one place, and READ CAPACITY 10/16
 * which carries LBPME and LBPRZ.
 *
 *   LBPME        the device discards, or zeroes by unmapping
 *   LBPRZ        exactly write_zeroes_unmap (or discard_zeroes): unmapped
 *                blocks read back as zeroes
 *   MAXIMUM TRANSFER LENGTH   32 MiB in blocks, whatever the device's
 *                max_transfer (the core splits a request by the device's
 *                limits): initiators also size their zeroing by it (qemu
 *                caps a WRITE SAME at the transfer length), and a 1 MiB
 *                limit made 10 GiB of WRITE SAME UNMAP 10240 commands,
 *                4.5x slower than tgt, which reports no limit
 *   MAXIMUM WRITE SAME LENGTH max_write_zeroes in blocks when zeroing is
 *                native, 0 (not reported) when emulated or read-only
 *   MAXIMUM UNMAP LBA COUNT   max_discard in blocks, at most 2^20 (only
 *                with discard)
 */
#include <errno.h>
#include <string.h>

#include "export/scsi/internal.h"

#define XFER_CAP (32u << 20)
#define UNMAP_CAP (1u << 20)

void scsi_lu_geometry(const struct bs_scsi_lu *lu, uint64_t *nblocks,
		      uint32_t *bs)
{
	const struct bs_dev_snap *s = bs_dev_snap(lu->dev);
	uint32_t lbs;
	uint64_t size;

	if (s) {
		lbs = s->limits.logical_block_size;
		size = s->size;
	} else {
		lbs = lu->dev->limits.logical_block_size;
		size = lu->dev->size;
	}
	if (!lbs)
		lbs = 512;
	*bs = lbs;
	*nblocks = size / lbs;
}

void scsi_lu_caps(const struct bs_scsi_lu *lu, struct bs_caps *c)
{
	bs_dev_caps(lu->dev, c);
	if (lu->readonly) {	/* a read-only unit offers no writing at all */
		c->readonly = true;
		c->zeroing = BS_CAP_NO;
		c->write_zeroes_unmap = c->fast_zero = false;
		c->discard = c->discard_zeroes = false;
	}
}

uint32_t scsi_max_xfer_blocks(const struct bs_caps *c)
{
	uint64_t b = XFER_CAP;
	uint32_t lbs = c->logical_block_size ? c->logical_block_size : 512;

	b /= lbs;
	return b ? (uint32_t)b : 1;
}

uint64_t scsi_max_ws_blocks(const struct bs_caps *c)
{
	uint32_t lbs = c->logical_block_size ? c->logical_block_size : 512;
	uint64_t b;

	if (c->zeroing != BS_CAP_NATIVE || !c->max_write_zeroes)
		return 0;
	b = c->max_write_zeroes / lbs;
	/* WRITE SAME(16) carries a 32-bit count */
	return b > UINT32_MAX ? UINT32_MAX : b;
}

uint32_t scsi_max_unmap_blocks(const struct bs_caps *c)
{
	uint32_t lbs = c->logical_block_size ? c->logical_block_size : 512;
	uint64_t b;

	if (!c->discard)
		return 0;
	b = c->max_discard / lbs;
	/*
	 * Initiators split by it, and a count in the millions is taken for
	 * garbage by conformance tools (libiscsi's test suite): one UNMAP
	 * descriptor unmaps at most 2^20 blocks (the core splits further).
	 */
	return b > UNMAP_CAP ? UNMAP_CAP : (uint32_t)(b ? b : 1);
}

bool scsi_lbprz(const struct bs_caps *c)
{
	return c->write_zeroes_unmap || c->discard_zeroes;
}

bool scsi_lbpme(const struct bs_caps *c)
{
	return c->discard || c->write_zeroes_unmap;
}

int scsi_check_range(struct bs_scsi_cmd *cmd, const struct bs_scsi_lu *lu,
		     uint64_t lba, uint64_t n)
{
	uint64_t nblocks;
	uint32_t bs;

	scsi_lu_geometry(lu, &nblocks, &bs);
	if (lba > nblocks || n > nblocks - lba)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_LBA_OUT_OF_RANGE);
	return 0;
}

int scsi_read_capacity10(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint64_t nblocks;
	uint32_t bs;
	uint8_t *d;

	/* PMI = 0 with an LBA is invalid (SBC-3); PMI itself is obsolete */
	if (!(cmd->cdb[8] & 0x01) && get32(cmd->cdb + 2))
		return scsi_bad_cdb(cmd, 2, -1);
	scsi_lu_geometry(lu, &nblocks, &bs);
	d = scsi_din(cmd, 8);
	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	put32(d, nblocks == 0 ? 0
		 : nblocks - 1 >= 0xffffffffull ? 0xffffffffu
						: (uint32_t)(nblocks - 1));
	put32(d + 4, bs);
	return scsi_din_done(cmd, 8, 8);
}

int scsi_read_capacity16(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint32_t alloc = get32(cmd->cdb + 10);
	struct bs_caps c;
	uint64_t nblocks;
	uint32_t bs, pbs;
	unsigned exp = 0;
	uint8_t *d;

	scsi_lu_caps(lu, &c);
	scsi_lu_geometry(lu, &nblocks, &bs);
	pbs = c.physical_block_size;
	while (pbs > bs && (bs << (exp + 1)) <= pbs && exp < 15)
		exp++;
	d = scsi_din(cmd, 32);
	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	put64(d, nblocks ? nblocks - 1 : 0);
	put32(d + 8, bs);
	d[13] = (uint8_t)exp;	/* logical blocks per physical block exponent */
	/* lowest aligned LBA: 0 (the device is aligned at its start) */
	if (scsi_lbpme(&c)) {
		d[14] |= 0x80;
		if (scsi_lbprz(&c))
			d[14] |= 0x40;
	}
	return scsi_din_done(cmd, 32, alloc);
}
