/* SPDX-License-Identifier: MIT */
/*
 * The nvmf host decision: from what an NVMe controller and namespace
 * report (Identify Controller, Identify Namespace, the NVM command set's
 * Identify Controller, the namespace identification descriptors), the
 * queue limits, whether Write Zeroes sets DEAC and whether write-zeroes may
 * unmap (BS_FEAT_WRITE_ZEROES_UNMAP), chosen as Linux's nvme host driver
 * chooses them with the seed's patch. Also the two multipath rules: which
 * paths may join (identifiers) and the combined limits. Pure: no I/O, so
 * the rules are tested against a table (tests/unit/test_nvmf_host_config.c).
 * Used by the nvmf driver; not a public API.
 */
#ifndef BLKSTACK_DRIVERS_NVMF_CONFIG_H
#define BLKSTACK_DRIVERS_NVMF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/limits.h>

/* ONCS bits (Identify Controller bytes 520-521) */
#define NVMF_ONCS_DSM (1u << 2)
#define NVMF_ONCS_WRITE_ZEROES (1u << 3)

/* Write Zeroes and Read/Write carry a 16-bit 0-based block count */
#define NVMF_MAX_NLB 65536u

/* What the controller and namespace said. */
struct nvmf_facts {
	uint8_t lbads;		/* log2 of the logical block size */
	uint64_t nsze;		/* namespace size, blocks */
	uint8_t mdts;		/* max data transfer, 2^n min pages, 0 = none */
	uint8_t mpsmin;		/* CAP.MPSMIN: min page = 4096 << mpsmin */
	uint16_t oncs;		/* optional NVM commands */
	uint8_t dlfeat;		/* deallocate logical block features */
	uint8_t vwc;		/* volatile write cache (bit 0) */
	uint8_t wzsl;		/* write zeroes size limit, 2^n min pages,
				 * 0 = none (or not read) */
	bool no_write_zeroes;	/* Write Zeroes refused at run time */
	bool no_dsm;		/* DSM refused at run time */
};

struct nvmf_config {
	bool deac;			/* Write Zeroes may set DEAC */
	bool wz_unmap;			/* BS_FEAT_WRITE_ZEROES_UNMAP */
	uint32_t max_wz_blocks;		/* per Write Zeroes, 0 = none */
	uint32_t max_dsm_blocks;	/* per DSM range, 0 = no discard */
	struct bs_limits limits;	/* driver limits (user fields 0) */
	char why[192];			/* the rule that decided wz_unmap */
};

/*
 * Decide from @f. @max_io_bytes caps one Read/Write (0 = 1 MiB) below
 * MDTS. 0, or -EINVAL when the block size is not 512..65536.
 */
int nvmf_config_decide(const struct nvmf_facts *f, uint32_t max_io_bytes,
		       struct nvmf_config *out);

/*
 * The namespace's size in bytes: @nsze blocks of 2^@lbads bytes into
 * *@bytes. 0, or -EOVERFLOW when it does not fit in 64 bits (NSZE is a
 * 64-bit block count: a shift would wrap to a small size).
 */
int nvmf_size_bytes(uint64_t nsze, uint8_t lbads, uint64_t *bytes);

/* The namespace identifiers a multipath device joins paths by. */
struct nvmf_ids {
	char subnqn[257];
	uint8_t nguid[16];
	uint8_t eui64[8];
	uint8_t uuid[16];
	bool has_nguid, has_eui64, has_uuid;
};

/*
 * May a path with identifiers @b join a device whose paths have @a? 0, or
 * -EINVAL with *@field naming what differs ("subsystem NQN", "NGUID",
 * "EUI64", "UUID", or "no namespace identifier" when the namespace has none
 * to compare). An identifier one side lacks is not compared; at least one
 * must be on both sides.
 */
int nvmf_ids_match(const struct nvmf_ids *a, const struct nvmf_ids *b,
		   const char **field);

/*
 * Native multipath limits from the live paths' limits @paths[0..n): start
 * with unmap zeroing on (seed patch "nvme-multipath: add
 * BLK_FEAT_WRITE_ZEROES_UNMAP support"), stack every path (a path lacking
 * it, or with it disabled, clears it). n == 0 keeps @last (the limits
 * before the last path was lost, so a device with no live path keeps its
 * shape while it waits). @why names the first path that cleared it (by
 * @names) or says all have it.
 */
void nvmf_mpath_limits(const struct bs_limits *const *paths,
		       const char *const *names, unsigned n,
		       const struct bs_limits *last, struct bs_limits *out,
		       char *why, size_t why_len);

#endif
