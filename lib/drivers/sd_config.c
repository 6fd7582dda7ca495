/* SPDX-License-Identifier: MIT */
/*
 * The sd decision (lib/drivers/sd_config.h). Each rule below names the
 * Linux sd rule it follows; where this differs from sd it says why.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "drivers/sd_config.h"

static uint32_t min_not_zero(uint32_t a, uint32_t b)
{
	if (!a)
		return b;
	if (!b)
		return a;
	return a < b ? a : b;
}

const char *sd_zeroing_name(enum sd_zeroing z)
{
	switch (z) {
	case SD_ZERO_WS16_UNMAP: return "WRITE SAME(16) UNMAP";
	case SD_ZERO_WS10_UNMAP: return "WRITE SAME(10) UNMAP";
	case SD_ZERO_WS: return "WRITE SAME";
	default: return "write";
	}
}

const char *sd_prov_name(enum sd_prov p)
{
	switch (p) {
	case SD_LBP_UNMAP: return "unmap";
	case SD_LBP_WS16: return "writesame_16";
	case SD_LBP_WS10: return "writesame_10";
	case SD_LBP_DISABLE: return "disabled";
	default: return "full";
	}
}

bool sd_nounmap_ws16(const struct sd_facts *f, uint64_t lba,
		     uint64_t nblocks)
{
	/* sd: WRITE SAME(16) when listed, or when (10) cannot carry it */
	return f->ws16 || lba > 0xffffffffull || nblocks > SD_MAX_WS10_BLOCKS;
}

/*
 * Provisioning mode, as sd's discard mode: a disk without LBPME is fully
 * provisioned; else the provisioning page tells (UNMAP only with a
 * maximum UNMAP LBA count), and a thin disk that offers none of them (or
 * refused one at run time) has discard disabled.
 */
static enum sd_prov prov_mode(const struct sd_facts *f,
			      uint32_t max_unmap_blocks)
{
	if (f->no_discard)
		return SD_LBP_DISABLE;
	if (!f->lbpme)
		return SD_LBP_FULL;
	if (f->lbpu && max_unmap_blocks)
		return SD_LBP_UNMAP;
	if (f->lbpws)
		return SD_LBP_WS16;
	if (f->lbpws10)
		return SD_LBP_WS10;
	return SD_LBP_DISABLE;
}

/*
 * The largest WRITE SAME, as sd configures it: a disk's own maximum above
 * the WRITE SAME(10) range is kept (capped to sd's WRITE SAME(16) cap);
 * otherwise 64 Ki blocks when the disk lists a WRITE SAME or cannot say
 * (no REPORT SUPPORTED OPERATION CODES), since some disks cannot take
 * more; else the disk has no WRITE SAME.
 */
static uint32_t ws_blocks(const struct sd_facts *f, uint32_t raw,
			  const char **why_none)
{
	*why_none = NULL;
	if (f->no_write_same) {
		*why_none = "WRITE SAME was refused at run time";
		return 0;
	}
	if (raw > SD_MAX_WS10_BLOCKS)
		return min_not_zero(raw, SD_MAX_WS16_BLOCKS);
	if (f->ws16 || f->ws10 || !f->rsoc)
		return min_not_zero(raw, SD_MAX_WS10_BLOCKS);
	*why_none = "opcodes list lacks WRITE SAME(16) and (10), "
		    "max_ws_len 0";
	return 0;
}

int sd_config_decide(const struct sd_facts *f, uint32_t max_io_bytes,
		     struct sd_config *out)
{
	struct bs_limits *l = &out->limits;
	uint32_t lbs = f->lbs, pbs = f->lbs, raw_ws, max_unmap = 0, ws;
	uint64_t hw, v;
	const char *why_none;

	memset(out, 0, sizeof(*out));
	if (lbs < 512 || lbs > 65536 || (lbs & (lbs - 1)))
		return -EINVAL;
	if (f->rc16 && f->lbppbe < 8 && ((uint64_t)lbs << f->lbppbe) <= 65536)
		pbs = lbs << f->lbppbe;
	bs_limits_init(l);
	l->logical_block_size = lbs;
	l->physical_block_size = pbs;
	/* sd: io_min is the physical block, or the optimal granularity */
	l->io_min = pbs;
	v = (uint64_t)f->opt_gran_blocks * lbs;
	if (v > pbs && v <= UINT32_MAX && !(v % pbs))
		l->io_min = (uint32_t)v;

	/* one READ/WRITE: the driver's cap, and the disk's maximum */
	hw = max_io_bytes ? max_io_bytes : 1u << 20;
	if (f->max_xfer_blocks && (uint64_t)f->max_xfer_blocks * lbs < hw)
		hw = (uint64_t)f->max_xfer_blocks * lbs;
	if (hw < lbs)
		hw = lbs;
	l->max_hw_sectors = (uint32_t)(hw >> BS_SECTOR_SHIFT);
	l->max_sectors = l->max_hw_sectors;
	/* sd: an optimal transfer length that is whole physical blocks and
	 * within the maximum becomes io_opt */
	v = (uint64_t)f->opt_xfer_blocks * lbs;
	if (v && v <= hw && !(v % pbs))
		l->io_opt = (uint32_t)v;

	/*
	 * sd reads the maximum write same length as 32 bits (truncating);
	 * here anything above 32 bits is the largest 32-bit count, which the
	 * caps below reduce anyway.
	 */
	raw_ws = f->vpd_b0 ? (f->max_ws_len > UINT32_MAX ? UINT32_MAX
				: (uint32_t)f->max_ws_len) : 0;

	/* ---- discard (sd_config_discard) ---- */
	if (f->lbpme && f->vpd_b0 && f->max_unmap_lba && f->max_unmap_desc)
		max_unmap = f->max_unmap_lba;
	out->prov = prov_mode(f, max_unmap);
	switch (out->prov) {
	case SD_LBP_UNMAP:
		out->max_discard_blocks = min_not_zero(max_unmap,
						       SD_MAX_WS16_BLOCKS);
		break;
	case SD_LBP_WS16:
		out->max_discard_blocks = min_not_zero(raw_ws,
						       SD_MAX_WS16_BLOCKS);
		break;
	case SD_LBP_WS10:
		out->max_discard_blocks = min_not_zero(raw_ws,
						       SD_MAX_WS10_BLOCKS);
		break;
	default:
		out->max_discard_blocks = 0;
	}
	l->discard_granularity = pbs;
	if (f->lbpme && (uint64_t)f->unmap_gran * lbs > pbs &&
	    (uint64_t)f->unmap_gran * lbs <= UINT32_MAX)
		l->discard_granularity = f->unmap_gran * lbs;
	v = (uint64_t)out->max_discard_blocks * (lbs >> BS_SECTOR_SHIFT);
	l->max_discard_sectors = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;

	/* ---- zeroing (sd_config_write_same, and the seed's sd patch) ---- */
	ws = ws_blocks(f, raw_ws, &why_none);
	if (f->lbprz && f->lbpws)
		out->zeroing = SD_ZERO_WS16_UNMAP;
	else if (f->lbprz && f->lbpws10)
		out->zeroing = SD_ZERO_WS10_UNMAP;
	else if (ws)
		out->zeroing = SD_ZERO_WS;
	else
		out->zeroing = SD_ZERO_WRITE;
	/*
	 * WRITE SAME(10) carries 16 bits of block count: sd would send a
	 * larger count truncated; here the maximum stays within it.
	 */
	if (out->zeroing == SD_ZERO_WS10_UNMAP && ws > SD_MAX_WS10_BLOCKS)
		ws = SD_MAX_WS10_BLOCKS;
	out->wz_unmap = ws && (out->zeroing == SD_ZERO_WS16_UNMAP ||
			       out->zeroing == SD_ZERO_WS10_UNMAP);
	/* sd: a maximum of whole physical blocks, so pieces stay aligned */
	if (ws && pbs > lbs)
		ws -= ws % (pbs / lbs);
	out->max_ws_blocks = ws;
	v = (uint64_t)ws * (lbs >> BS_SECTOR_SHIFT);
	l->max_write_zeroes_sectors = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
	if (out->wz_unmap)
		l->features |= BS_FEAT_WRITE_ZEROES_UNMAP;

	if (!ws)
		snprintf(out->why, sizeof(out->why), "sd: no WRITE SAME (%s) "
			 "-> zeroing mode write, no unmap zeroing", why_none);
	else if (out->wz_unmap)
		snprintf(out->why, sizeof(out->why), "sd: LBPRZ=1 %s=1 -> "
			 "zeroing mode %s -> unmap zeroing",
			 out->zeroing == SD_ZERO_WS16_UNMAP ? "LBPWS" : "LBPWS10",
			 sd_zeroing_name(out->zeroing));
	else
		snprintf(out->why, sizeof(out->why), "sd: zeroing mode WRITE "
			 "SAME, no UNMAP (%s) -> no unmap zeroing",
			 f->lbprz ? "LBPRZ=1 but LBPWS=0 LBPWS10=0"
				  : "LBPRZ=0: unmapped blocks need not read as "
				    "zeroes");

	/* ---- cache, FUA, rotation ---- */
	if (f->wce) {
		l->features |= BS_FEAT_WRITE_CACHE;
		/* sd: FUA only matters (and is used) with a write cache */
		if (f->dpofua)
			l->features |= BS_FEAT_FUA;
	}
	/* sd: a disk is rotational unless VPD B1 says "non-rotating" */
	if (!(f->vpd_b1 && f->rotation_rate == 1))
		l->features |= BS_FEAT_ROTATIONAL;
	return 0;
}
