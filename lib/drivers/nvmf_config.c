/* SPDX-License-Identifier: MIT */
/*
 * The nvmf host decision (lib/drivers/nvmf_config.h). Each rule names the
 * Linux nvme host rule it follows; where this differs it says why.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "drivers/nvmf_config.h"

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

int nvmf_config_decide(const struct nvmf_facts *f, uint32_t max_io_bytes,
		       struct nvmf_config *out)
{
	struct bs_limits *l = &out->limits;
	uint32_t lbs, spb;
	uint64_t page, hw, wz, v;
	bool dlfeat_ok;

	memset(out, 0, sizeof(*out));
	if (f->lbads < 9 || f->lbads > 16)
		return -EINVAL;
	lbs = 1u << f->lbads;
	spb = lbs >> BS_SECTOR_SHIFT;
	page = 4096ull << (f->mpsmin > 15 ? 15 : f->mpsmin);
	bs_limits_init(l);
	l->logical_block_size = lbs;
	l->physical_block_size = lbs;
	l->io_min = lbs;

	/* nvme: max_hw_sectors from MDTS (in minimum pages), 0 = no limit;
	 * the driver's own cap below it; and never above what one 16-bit
	 * block count can carry */
	hw = max_io_bytes ? max_io_bytes : 1u << 20;
	if (f->mdts && f->mdts < 32)
		hw = min64(hw, page << f->mdts);
	hw = min64(hw, (uint64_t)NVMF_MAX_NLB * lbs);
	if (hw < lbs)
		hw = lbs;
	hw -= hw % lbs;
	l->max_hw_sectors = (uint32_t)(hw >> BS_SECTOR_SHIFT);
	l->max_sectors = l->max_hw_sectors;

	/* nvme: Write Zeroes when ONCS says so; the NVM command set's WZSL
	 * (minimum pages) caps it, 0 = no limit beyond the command's own
	 * 16-bit block count */
	if ((f->oncs & NVMF_ONCS_WRITE_ZEROES) && !f->no_write_zeroes) {
		wz = NVMF_MAX_NLB;
		if (f->wzsl && f->wzsl < 32)
			wz = min64(wz, (page << f->wzsl) / lbs);
		out->max_wz_blocks = wz ? (uint32_t)wz : 1;
	}
	v = (uint64_t)out->max_wz_blocks * spb;
	l->max_write_zeroes_sectors = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;

	/* nvme: discard through DSM deallocate when ONCS has DSM; one range
	 * carries a 32-bit count, here capped to 32-bit sectors */
	if ((f->oncs & NVMF_ONCS_DSM) && !f->no_dsm) {
		v = UINT32_MAX / spb;
		out->max_dsm_blocks = (uint32_t)v;
		l->max_discard_sectors = (uint32_t)(v * spb);
		l->discard_granularity = lbs;
	}

	/*
	 * The seed's nvme patch: DEAC only when reads of deallocated blocks
	 * return zeroes (DLFEAT bits 2:0 = 001b) and Write Zeroes honours
	 * DEAC (bit 3); unmap zeroing only when there is a Write Zeroes too.
	 */
	dlfeat_ok = (f->dlfeat & 0x7) == 0x1 && (f->dlfeat & (1u << 3));
	out->deac = dlfeat_ok;
	out->wz_unmap = dlfeat_ok && out->max_wz_blocks;
	if (out->wz_unmap)
		l->features |= BS_FEAT_WRITE_ZEROES_UNMAP;

	if (out->wz_unmap)
		snprintf(out->why, sizeof(out->why), "nvme: DLFEAT=0x%02x "
			 "(reads of deallocated blocks are zeroes, DEAC in "
			 "Write Zeroes) and ONCS has Write Zeroes -> unmap "
			 "zeroing", f->dlfeat);
	else if (!out->max_wz_blocks)
		snprintf(out->why, sizeof(out->why), "nvme: %s -> no "
			 "write-zeroes command, no unmap zeroing",
			 f->no_write_zeroes ? "Write Zeroes refused at run time"
					    : "ONCS lacks Write Zeroes");
	else if ((f->dlfeat & 0x7) != 0x1)
		snprintf(out->why, sizeof(out->why), "nvme: DLFEAT=0x%02x: "
			 "bits 2:0 = %u, not 001b (deallocated blocks need not "
			 "read as zeroes) -> Write Zeroes without DEAC",
			 f->dlfeat, f->dlfeat & 0x7);
	else
		snprintf(out->why, sizeof(out->why), "nvme: DLFEAT=0x%02x: "
			 "bit 3 clear (Write Zeroes ignores DEAC) -> Write "
			 "Zeroes without DEAC", f->dlfeat);

	/* nvme: a volatile write cache means FLUSH, and FUA with it */
	if (f->vwc & 1)
		l->features |= BS_FEAT_WRITE_CACHE | BS_FEAT_FUA;
	return 0;
}

int nvmf_size_bytes(uint64_t nsze, uint8_t lbads, uint64_t *bytes)
{
	if (lbads >= 64 || nsze > UINT64_MAX >> lbads)
		return -EOVERFLOW;
	*bytes = nsze << lbads;
	return 0;
}

int nvmf_ids_match(const struct nvmf_ids *a, const struct nvmf_ids *b,
		   const char **field)
{
	bool compared = false;

	if (strcmp(a->subnqn, b->subnqn)) {
		*field = "subsystem NQN";
		return -EINVAL;
	}
	/* nvme: nvme_ns_ids_equal() compares the identifiers both report */
	if (a->has_uuid && b->has_uuid) {
		if (memcmp(a->uuid, b->uuid, 16)) {
			*field = "UUID";
			return -EINVAL;
		}
		compared = true;
	}
	if (a->has_nguid && b->has_nguid) {
		if (memcmp(a->nguid, b->nguid, 16)) {
			*field = "NGUID";
			return -EINVAL;
		}
		compared = true;
	}
	if (a->has_eui64 && b->has_eui64) {
		if (memcmp(a->eui64, b->eui64, 8)) {
			*field = "EUI64";
			return -EINVAL;
		}
		compared = true;
	}
	/* a shared namespace without identifiers cannot be told apart */
	if (!compared) {
		*field = "no namespace identifier";
		return -EINVAL;
	}
	return 0;
}

void nvmf_mpath_limits(const struct bs_limits *const *paths,
		       const char *const *names, unsigned n,
		       const struct bs_limits *last, struct bs_limits *out,
		       char *why, size_t why_len)
{
	const char *lacking = NULL;
	unsigned i;

	if (!n) {
		*out = *last;
		snprintf(why, why_len, "multipath: no live path (limits kept "
			 "from the last one)");
		return;
	}
	/* seed: the multipath device starts with unmap zeroing on */
	bs_limits_init_stacking(out);
	/* FUA stays only when every path has it (stacking clears it) */
	out->features |= BS_FEAT_FUA;
	for (i = 0; i < n; i++) {
		if (!lacking && !bs_limits_write_zeroes_unmap(paths[i]))
			lacking = names[i];
		/* paths of one namespace have one geometry: cannot fail */
		(void)bs_limits_stack(out, paths[i], 0);
	}
	bs_limits_finish(out);
	if (lacking)
		snprintf(why, why_len, "multipath: path %s has no unmap "
			 "zeroing -> off for the device", lacking);
	else if (!bs_limits_write_zeroes_unmap(out))
		snprintf(why, why_len, "multipath: no write-zeroes on the "
			 "paths -> no unmap zeroing");
	else
		snprintf(why, why_len, "multipath: every live path (%u) has "
			 "unmap zeroing", n);
}
