/* SPDX-License-Identifier: MIT */
/*
 * The sd decision: from what a SCSI disk reports (READ CAPACITY 16, VPD
 * pages B0 and B2, REPORT SUPPORTED OPERATION CODES, MODE SENSE), the
 * provisioning (discard) mode, the zeroing mode, whether write-zeroes may
 * unmap (BS_FEAT_WRITE_ZEROES_UNMAP) and the queue limits, chosen the way
 * Linux's sd driver chooses them. Pure: no I/O, so the rules are tested
 * against a table (tests/unit/test_sd_config.c). Used by the iscsi
 * driver; not a public API.
 */
#ifndef BLKSTACK_DRIVERS_SD_CONFIG_H
#define BLKSTACK_DRIVERS_SD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <blkstack/limits.h>

/* sd's caps on WRITE SAME block counts (and so on discard by WRITE SAME) */
#define SD_MAX_WS10_BLOCKS 0xffffu
#define SD_MAX_WS16_BLOCKS 0x7fffffu

/* What the disk said. Zero means "not reported" unless noted. */
struct sd_facts {
	uint32_t lbs;			/* logical block size, bytes */
	uint32_t lbppbe;		/* RC16: log2(logical per physical) */
	bool rc16;			/* READ CAPACITY 16 answered */
	bool lbpme, lbprz;		/* RC16 byte 14 */

	bool vpd_b0;			/* block limits page read */
	uint32_t max_xfer_blocks;	/* MAXIMUM TRANSFER LENGTH */
	uint32_t opt_xfer_blocks;	/* OPTIMAL TRANSFER LENGTH */
	uint32_t opt_gran_blocks;	/* OPTIMAL TRANSFER LENGTH GRANULARITY */
	uint32_t max_unmap_lba;		/* MAXIMUM UNMAP LBA COUNT */
	uint32_t max_unmap_desc;	/* MAXIMUM UNMAP BLOCK DESCRIPTOR COUNT */
	uint32_t unmap_gran;		/* OPTIMAL UNMAP GRANULARITY */
	uint64_t max_ws_len;		/* MAXIMUM WRITE SAME LENGTH */

	bool vpd_b2;			/* provisioning page read */
	bool lbpu, lbpws, lbpws10;	/* VPD B2 byte 5 */

	bool vpd_b1;			/* characteristics page read */
	uint16_t rotation_rate;		/* VPD B1: 1 = non-rotating */

	bool rsoc;			/* REPORT SUPPORTED OPCODES answered */
	bool ws16, ws10;		/* ... and listed WRITE SAME 16 / 10 */

	bool no_write_same;		/* WRITE SAME refused at run time */
	bool no_discard;		/* discard refused at run time */

	bool wce;			/* MODE SENSE caching page: WCE */
	bool dpofua;			/* MODE SENSE: DPOFUA */
};

enum sd_zeroing {
	SD_ZERO_WRITE,		/* zeroes are written (no WRITE SAME) */
	SD_ZERO_WS,		/* WRITE SAME of a zero block, no UNMAP */
	SD_ZERO_WS16_UNMAP,	/* WRITE SAME(16) with UNMAP */
	SD_ZERO_WS10_UNMAP,	/* WRITE SAME(10) with UNMAP */
};

enum sd_prov {
	SD_LBP_FULL,		/* fully provisioned (LBPME = 0): no discard */
	SD_LBP_UNMAP,		/* UNMAP */
	SD_LBP_WS16,		/* WRITE SAME(16) with UNMAP */
	SD_LBP_WS10,		/* WRITE SAME(10) with UNMAP */
	SD_LBP_DISABLE,		/* thin, but no usable command (or refused) */
};

struct sd_config {
	enum sd_zeroing zeroing;
	enum sd_prov prov;
	uint32_t max_ws_blocks;		/* per WRITE SAME, 0 = none */
	uint32_t max_discard_blocks;	/* per discard command, 0 = none */
	bool wz_unmap;			/* BS_FEAT_WRITE_ZEROES_UNMAP */
	struct bs_limits limits;	/* driver limits (user fields 0) */
	char why[192];			/* the rule that decided wz_unmap */
};

/*
 * Decide from @f. @max_io_bytes caps one READ/WRITE (0 = 1 MiB) below the
 * disk's MAXIMUM TRANSFER LENGTH. 0, or -EINVAL when the block size is not
 * a power of two in 512..65536.
 */
int sd_config_decide(const struct sd_facts *f, uint32_t max_io_bytes,
		     struct sd_config *out);

/* "WRITE SAME(16) UNMAP", "WRITE SAME", "write", ... */
const char *sd_zeroing_name(enum sd_zeroing z);
/* "unmap", "writesame_16", "writesame_10", "full", "disabled" (sysfs's) */
const char *sd_prov_name(enum sd_prov p);

/*
 * For a write-zeroes of @nblocks at @lba: true when WRITE SAME(16) is to
 * be used without UNMAP (sd: the disk lists WS16, or the range does not
 * fit WRITE SAME(10)).
 */
bool sd_nounmap_ws16(const struct sd_facts *f, uint64_t lba,
		     uint64_t nblocks);

#endif
