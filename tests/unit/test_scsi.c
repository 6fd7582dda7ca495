/* SPDX-License-Identifier: MIT */
/*
 * The SCSI target core: INQUIRY and VPD bytes, READ CAPACITY, the
 * capability mapping following the knob (with its unit attention), READ
 * and WRITE of every CDB size, range checks, REPORT LUNS, unknown LUNs,
 * REQUEST SENSE, REPORT SUPPORTED OPERATION CODES.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>

#include "helpers/sth.h"
#include "helpers/th.h"

#define MiB (1ull << 20)

static struct sth_res R;

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static uint64_t be64(const uint8_t *p)
{
	return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint8_t inquiry(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun,
		       bool evpd, uint8_t page)
{
	uint8_t cdb[6] = { 0x12, evpd, page, 0x10, 0x00, 0 };

	return sth_cmd(s, n, lun, cdb, 6, NULL, 0, 4096, &R);
}

/* One block at @lba reads as @byte throughout. */
static bool reads_byte(struct sth *s, uint64_t lba, uint8_t byte)
{
	uint8_t cdb[16];

	sth_cdb_rw(cdb, 16, false, lba, 1);
	if (sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 512, &R) != BS_SCSI_GOOD)
		return false;
	for (int i = 0; i < 512; i++)
		if (R.din[i] != byte)
			return false;
	return true;
}

static uint8_t rc16(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun)
{
	uint8_t cdb[16] = { 0x9e, 0x10 };

	cdb[13] = 32;
	return sth_cmd(s, n, lun, cdb, 16, NULL, 0, 4096, &R);
}

/* Standard INQUIRY; unknown LUNs answer with peripheral qualifier 3. */
static void inquiry_standard(void **state)
{
	struct sth *s = *state;

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:64M"), false);
	assert_int_equal(inquiry(s, s->n[0], 0, false, 0), BS_SCSI_GOOD);
	assert_true(R.din_len >= 36);
	assert_int_equal(R.din[0], 0x00);
	assert_int_equal(R.din[2], 0x06);		/* SPC-4 */
	assert_int_equal(R.din[3] & 0x10, 0x10);	/* HiSup */
	assert_int_equal(R.din[3] & 0x0f, 2);
	assert_int_equal(R.din[4], R.din_len - 5);
	assert_int_equal(R.din[5] & 0x30, 0);		/* TPGS 0 */
	assert_int_equal(R.din[5] & 0x08, 0x08);	/* 3PC: EXTENDED COPY */
	assert_int_equal(R.din[7] & 0x02, 0x02);	/* CMDQUE */
	assert_memory_equal(R.din + 8, "BLKSTACK", 8);
	assert_memory_equal(R.din + 16, "test            ", 16);
	assert_memory_equal(R.din + 32, "0.1 ", 4);
	/* INQUIRY does not report the pending POWER ON unit attention */
	assert_int_equal(inquiry(s, s->n[0], 5, false, 0), BS_SCSI_GOOD);
	assert_int_equal(R.din[0], 0x7f);
	/* a page without EVPD, CMDDT: invalid field */
	assert_int_equal(inquiry(s, s->n[0], 0, false, 0x80),
			 BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x2400);
	{
		uint8_t cdb[6] = { 0x12, 0x02, 0, 0, 0xff, 0 };

		sth_cmd(s, s->n[0], 0, cdb, 6, NULL, 0, 255, &R);
		sth_assert_check(&R, 0x5, 0x2400);
		/* field pointer: byte 1, bit 1, in the CDB */
		assert_int_equal(R.sense[15], 0x80 | 0x40 | 0x08 | 1);
		assert_int_equal(R.sense[17], 1);
	}
	/* the allocation length cuts the answer */
	{
		uint8_t cdb[6] = { 0x12, 0, 0, 0, 5, 0 };

		sth_cmd(s, s->n[0], 0, cdb, 6, NULL, 0, 255, &R);
		assert_int_equal(R.din_len, 5);
	}
	/* the first other command reports POWER ON, RESET */
	{
		uint8_t tur[6] = { 0 };

		sth_cmd(s, s->n[0], 0, tur, 6, NULL, 0, 0, &R);
		sth_assert_check(&R, 0x6, 0x2900);
		sth_cmd(s, s->n[0], 0, tur, 6, NULL, 0, 0, &R);
		assert_int_equal(R.status, BS_SCSI_GOOD);
	}
}

/* VPD 00h, 80h, 83h: the pages and identifiers that stay across restarts. */
static void vpd_ident(void **state)
{
	struct sth *s = *state;
	uint8_t naa[8];
	unsigned off, types = 0;

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:64M"), false);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0x00), BS_SCSI_GOOD);
	assert_int_equal(R.din[3], 7);
	assert_memory_equal(R.din + 4, "\x00\x80\x83\x8f\xb0\xb1\xb2", 7);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0x80), BS_SCSI_GOOD);
	assert_int_equal(R.din[1], 0x80);
	assert_true(R.din[3] > 0);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0x83), BS_SCSI_GOOD);
	for (off = 4; off + 4 <= R.din_len; off += 4 + R.din[off + 3]) {
		uint8_t type = R.din[off + 1] & 0x0f;

		types |= 1u << type;
		if (type == 3 && !(R.din[off + 1] & 0x30)) {
			assert_int_equal(R.din[off + 3], 8);
			assert_int_equal(R.din[off + 4] >> 4, 3); /* NAA 3 */
			memcpy(naa, R.din + off + 4, 8);
		}
	}
	assert_int_equal(off, R.din_len);
	/* NAA, EUI-64, T10 vendor id, relative port, SCSI name string */
	assert_int_equal(types & 0x11e, 0x11e);
	/* the same names give the same identifier: a second target */
	{
		struct bs_scsi_tgt_cfg tc = { .name = "iqn.2026-01.test:t" };
		struct bs_scsi_lu_cfg lc = {
			.lun = 3, .dev = bs_dev_find(s->ctx, "m"), .name = "m"
		};
		struct bs_scsi_nexus_cfg nc = { "i", "t", 1, 1 };
		struct bs_scsi_tgt *t2;
		struct bs_scsi_nexus *n2;

		assert_int_equal(bs_scsi_tgt_new(&tc, &t2), 0);
		assert_int_equal(bs_scsi_lu_add(t2, &lc, NULL), 0);
		assert_int_equal(bs_scsi_nexus_new(t2, &nc, &n2), 0);
		assert_int_equal(inquiry(s, n2, 3, true, 0x83), BS_SCSI_GOOD);
		assert_memory_equal(R.din + 8, naa, 8);
		bs_scsi_tgt_free(t2);
	}
	/* an unknown page */
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0x99),
			 BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x2400);
}

/*
 * The capability mapping follows the knob: LBPRZ / LBPWS / LBPWS10 and
 * READ CAPACITY 16 LBPRZ go to 0 with queue/write_zeroes_unmap = 0, each
 * nexus gets INQUIRY DATA HAS CHANGED once, and they come back with 1.
 */
static void caps_follow_knob(void **state)
{
	struct sth *s = *state;
	struct bs_dev *d = th_dev(s->ctx, "m", "mem:64M,max_write_zeroes=16M,"
				  "max_discard=32M,max_io=1M");
	struct bs_scsi_lu *lu = sth_lu(s, 0, d, false);
	struct bs_caps old, now;
	uint8_t tur[6] = { 0 };

	sth_clear_ua(s, s->n[0], 0);
	sth_clear_ua(s, s->n[1], 0);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb2), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 0x80 | 0x40 | 0x20 | 0x04);
	assert_int_equal(R.din[6] & 0x07, 2);		/* thin */
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb0), BS_SCSI_GOOD);
	/* max transfer: 32 MiB, whatever the device's 1 MiB (the core
	 * splits; initiators size WRITE SAME by it too) */
	assert_int_equal(be32(R.din + 8), 32 * MiB / 512);
	assert_int_equal(be32(R.din + 20), 32 * MiB / 512); /* max unmap */
	assert_int_equal(be32(R.din + 24), 256);
	assert_int_equal(be64(R.din + 36), 16 * MiB / 512); /* max WS */
	assert_int_equal(R.din[4] & 1, 0);		/* WSNZ */
	assert_int_equal(rc16(s, s->n[0], 0), BS_SCSI_GOOD);
	assert_int_equal(be64(R.din), 64 * MiB / 512 - 1);
	assert_int_equal(be32(R.din + 8), 512);
	assert_int_equal(R.din[14] & 0xc0, 0xc0);	/* LBPME, LBPRZ */
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb1), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 1);			/* non-rotating */

	bs_dev_caps(d, &old);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "0"), 0);
	bs_dev_caps(d, &now);
	bs_scsi_lu_caps_changed(lu, &old, &now);
	/* VPD answers follow at once; INQUIRY does not consume the UA */
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb2), BS_SCSI_GOOD);
	/* LBPU only: UNMAP still works, the device still discards */
	assert_int_equal(R.din[5], 0x80);
	for (int i = 0; i < 2; i++) {
		sth_cmd(s, s->n[i], 0, tur, 6, NULL, 0, 0, &R);
		sth_assert_check(&R, 0x6, 0x3f03);
		sth_cmd(s, s->n[i], 0, tur, 6, NULL, 0, 0, &R);
		assert_int_equal(R.status, BS_SCSI_GOOD);
	}
	assert_int_equal(rc16(s, s->n[1], 0), BS_SCSI_GOOD);
	assert_int_equal(R.din[14] & 0xc0, 0x80);	/* LBPME, not LBPRZ */

	old = now;
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "1"), 0);
	bs_dev_caps(d, &now);
	bs_scsi_lu_caps_changed(lu, &old, &now);
	sth_cmd(s, s->n[1], 0, tur, 6, NULL, 0, 0, &R);
	sth_assert_check(&R, 0x6, 0x3f03);
	assert_int_equal(inquiry(s, s->n[1], 0, true, 0xb2), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 0x80 | 0x40 | 0x20 | 0x04);
}

/* A device without write-zeroes or discard: nothing claimed. */
static void caps_thick(void **state)
{
	struct sth *s = *state;
	struct bs_dev *d = th_dev(s->ctx, "m", "mem:64M,zeroes=none,"
				  "max_discard=0");

	sth_lu(s, 0, d, false);
	sth_clear_ua(s, s->n[0], 0);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb2), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 0);
	assert_int_equal(R.din[6] & 7, 0);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb0), BS_SCSI_GOOD);
	assert_int_equal(be64(R.din + 36), 0);
	assert_int_equal(be32(R.din + 20), 0);
	assert_int_equal(rc16(s, s->n[0], 0), BS_SCSI_GOOD);
	assert_int_equal(R.din[14] & 0xc0, 0);
}

/*
 * LBPU says the UNMAP command is supported (SBC-4), so it follows discard,
 * not unmap zeroing (docs/iscsi.md, "LBPU follows discard"): a device that
 * discards but zeroes by writing has LBPU alone, one that zeroes by
 * unmapping but cannot discard has LBPWS/LBPWS10/LBPRZ without LBPU. Both
 * are thin provisioned (LBPME 1: a fully provisioned unit has LBPME 0).
 */
static void caps_lbpu_is_unmap(void **state)
{
	struct sth *s = *state;

	sth_lu(s, 0, th_dev(s->ctx, "dw", "mem:64M,zeroes=write"), false);
	sth_lu(s, 1, th_dev(s->ctx, "zu", "mem:64M,max_discard=0"), false);
	for (uint64_t lun = 0; lun < 2; lun++)
		sth_clear_ua(s, s->n[0], lun);

	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb2), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 0x80);		/* LBPU only */
	assert_int_equal(R.din[6] & 0x07, 2);		/* thin */
	assert_int_equal(rc16(s, s->n[0], 0), BS_SCSI_GOOD);
	assert_int_equal(R.din[14] & 0xc0, 0x80);	/* LBPME */

	assert_int_equal(inquiry(s, s->n[0], 1, true, 0xb2), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 0x40 | 0x20 | 0x04);	/* no LBPU */
	assert_int_equal(R.din[6] & 0x07, 2);		/* thin */
	assert_int_equal(rc16(s, s->n[0], 1), BS_SCSI_GOOD);
	assert_int_equal(R.din[14] & 0xc0, 0xc0);	/* LBPME, LBPRZ */
}

/* READ CAPACITY 10 of a unit past 2 TiB: 0xFFFFFFFF. */
static void read_capacity(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[10] = { 0x25 };

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:3T"), false);
	sth_lu(s, 1, th_dev(s->ctx, "n", "mem:1M,logical_block_size=4096"),
	       false);
	sth_clear_ua(s, s->n[0], 0);
	sth_clear_ua(s, s->n[0], 1);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 10, NULL, 0, 8, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(be32(R.din), 0xffffffffu);
	assert_int_equal(rc16(s, s->n[0], 0), BS_SCSI_GOOD);
	assert_int_equal(be64(R.din), (3ull << 40) / 512 - 1);
	assert_int_equal(sth_cmd(s, s->n[0], 1, cdb, 10, NULL, 0, 8, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(be32(R.din), 255);
	assert_int_equal(be32(R.din + 4), 4096);
}

/* Physical blocks: READ CAPACITY 16 exponent, VPD B0 granularity. */
static void physical_blocks(void **state)
{
	struct sth *s = *state;
	uint8_t ms10[10] = { 0x55, 0x10, 0, 0, 0, 0, 0, 0, 0, 0 };
	uint8_t p[8 + 8 + 12] = { 0 };

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:4M,physical_block_size=4096"),
	       false);
	sth_clear_ua(s, s->n[0], 0);
	assert_int_equal(rc16(s, s->n[0], 0), BS_SCSI_GOOD);
	assert_int_equal(R.din[13] & 0x0f, 3);	/* 8 logical per physical */
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb0), BS_SCSI_GOOD);
	/* OPTIMAL TRANSFER GRANULARITY */
	assert_int_equal(R.din[7], 8);
	/* MODE SELECT(10) with a block descriptor of the right length */
	p[7] = 8;
	p[8 + 6] = 0x02;			/* 512 */
	p[16] = 0x0a;
	p[17] = 0x0a;
	p[18] = 0x04;
	p[19] = 0x10;
	p[21] = 0x40;				/* TAS (not changeable) */
	ms10[8] = sizeof(p);
	assert_int_equal(sth_cmd(s, s->n[0], 0, ms10, 10, p, sizeof(p), 0, &R),
			 BS_SCSI_GOOD);
	/* ... and with another block length: refused */
	p[8 + 6] = 0x10;
	sth_cmd(s, s->n[0], 0, ms10, 10, p, sizeof(p), 0, &R);
	sth_assert_check(&R, 0x5, 0x2600);
}

/* Every CDB size writes and reads back the same bytes. */
static void rw_every_size(void **state)
{
	static const unsigned sizes[] = { 6, 10, 12, 16 };
	struct sth *s = *state;
	uint8_t cdb[16], *buf = malloc(64 * 512);

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:64M"), false);
	sth_clear_ua(s, s->n[0], 0);
	for (unsigned w = 0; w < 4; w++) {
		for (unsigned r = 0; r < 4; r++) {
			uint64_t lba = 1000 + 100 * w + 10 * r;

			th_fill(buf, 64 * 512, lba);
			sth_cdb_rw(cdb, sizes[w], true, lba, 64);
			assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf,
						 64 * 512, 0, &R),
					 BS_SCSI_GOOD);
			sth_cdb_rw(cdb, sizes[r], false, lba, 64);
			assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL,
						 0, 64 * 512, &R),
					 BS_SCSI_GOOD);
			assert_int_equal(R.din_len, 64 * 512);
			assert_memory_equal(R.din, buf, 64 * 512);
		}
	}
	/* FUA and DPO are accepted */
	sth_cdb_rw(cdb, 10, true, 0, 1);
	cdb[1] = 0x18;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 512, 0, &R),
			 BS_SCSI_GOOD);
	/* RDPROTECT: no protection information */
	sth_cdb_rw(cdb, 16, false, 0, 1);
	cdb[1] = 0x20;
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 512, &R);
	sth_assert_check(&R, 0x5, 0x2400);
	/* READ(6) of 0 blocks is 256 blocks; READ(10) of 0 is nothing */
	sth_cdb_rw(cdb, 6, false, 0, 0);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 1 << 20, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din_len, 256 * 512);
	sth_cdb_rw(cdb, 10, false, 0, 0);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 1 << 20, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din_len, 0);
	/* a short Data-Out: INVALID FIELD IN INFORMATION UNIT */
	sth_cdb_rw(cdb, 10, true, 0, 2);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 512, 0, &R);
	sth_assert_check(&R, 0x5, 0x0e03);
	/* the initiator's expected length cuts the Data-In */
	sth_cdb_rw(cdb, 10, false, 0, 2);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 100, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din_len, 100);
	free(buf);
}

/* Range checks at the edge and in 64 bits. */
static void range_checks(void **state)
{
	struct sth *s = *state;
	uint64_t nb = 64 * MiB / 512;
	uint8_t cdb[16], buf[1024] = { 0 };

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:64M,max_io=1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	sth_cdb_rw(cdb, 16, false, nb - 1, 1);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 512, &R),
			 BS_SCSI_GOOD);
	sth_cdb_rw(cdb, 16, false, nb - 1, 2);
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 1024, &R);
	sth_assert_check(&R, 0x5, 0x2100);
	sth_cdb_rw(cdb, 16, true, nb, 1);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 512, 0, &R);
	sth_assert_check(&R, 0x5, 0x2100);
	/* LBA 2^64-1 + 2 blocks wraps to 1: still out of range */
	sth_cdb_rw(cdb, 16, false, UINT64_MAX, 2);
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 1024, &R);
	sth_assert_check(&R, 0x5, 0x2100);
	sth_cdb_rw(cdb, 16, true, UINT64_MAX, 1);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 512, 0, &R);
	sth_assert_check(&R, 0x5, 0x2100);
	/* 0 blocks past the end is still a bad LBA */
	sth_cdb_rw(cdb, 10, false, nb + 1, 0);
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 0, &R);
	sth_assert_check(&R, 0x5, 0x2100);
	/* longer than MAXIMUM TRANSFER LENGTH (32 MiB) */
	sth_cdb_rw(cdb, 16, false, 0, 65537);
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 64 << 20, &R);
	sth_assert_check(&R, 0x5, 0x2400);
	/* VERIFY(16) of the whole unit is served */
	memset(cdb, 0, 16);
	cdb[0] = 0x8f;
	cdb[13] = 0;
	cdb[10] = (uint8_t)(nb >> 24);
	cdb[11] = (uint8_t)(nb >> 16);
	cdb[12] = (uint8_t)(nb >> 8);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 0, &R),
			 BS_SCSI_GOOD);
	/* SYNCHRONIZE CACHE(16) past the end */
	memset(cdb, 0, 16);
	cdb[0] = 0x91;
	put_be64(cdb + 2, nb);
	cdb[13] = 1;
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 0, &R);
	sth_assert_check(&R, 0x5, 0x2100);
	cdb[9] = 0;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 0, &R),
			 BS_SCSI_CHECK_CONDITION);
	put_be64(cdb + 2, 0);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 0, &R),
			 BS_SCSI_GOOD);
}

/* A read-only unit refuses writes with DATA PROTECT. */
static void readonly_unit(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16], buf[512] = { 0 };

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M"), true);
	sth_clear_ua(s, s->n[0], 0);
	sth_cdb_rw(cdb, 10, true, 0, 1);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 512, 0, &R);
	sth_assert_check(&R, 0x7, 0x2700);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb2), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 0);
}

/* REPORT LUNS, unknown LUNs, REQUEST SENSE. */
static void luns(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[12] = { 0xa0 }, tur[6] = { 0 }, rs[6] = { 0x03, 0, 0, 0,
							       252, 0 };

	sth_lu(s, 0, th_dev(s->ctx, "a", "mem:1M"), false);
	sth_lu(s, 7, th_dev(s->ctx, "b", "mem:1M"), false);
	sth_lu(s, 300, th_dev(s->ctx, "c", "mem:1M"), false);
	cdb[9] = 255;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 12, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(be32(R.din), 24);
	assert_memory_equal(R.din + 8, "\0\0\0\0\0\0\0\0", 8);
	assert_memory_equal(R.din + 16, "\0\x07\0\0\0\0\0\0", 8);
	assert_memory_equal(R.din + 24, "\x41\x2c\0\0\0\0\0\0", 8);
	assert_int_equal(bs_scsi_lun_decode(R.din + 24), 300);
	/* served for an unknown LUN too; allocation length < 16 invalid */
	assert_int_equal(sth_cmd(s, s->n[0], 9, cdb, 12, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	cdb[9] = 8;
	sth_cmd(s, s->n[0], 0, cdb, 12, NULL, 0, 255, &R);
	sth_assert_check(&R, 0x5, 0x2400);
	/* unknown LUN */
	sth_cmd(s, s->n[0], 9, tur, 6, NULL, 0, 0, &R);
	sth_assert_check(&R, 0x5, 0x2500);
	assert_int_equal(sth_cmd(s, s->n[0], 9, rs, 6, NULL, 0, 252, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[0], 0x70);
	assert_int_equal(R.din[2], 0x5);
	assert_int_equal(R.din[12], 0x25);
	/* REQUEST SENSE reports (and clears) a pending UA; then NO SENSE */
	assert_int_equal(sth_cmd(s, s->n[1], 7, rs, 6, NULL, 0, 252, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[2], 0x6);
	assert_int_equal(R.din[12], 0x29);
	assert_int_equal(sth_cmd(s, s->n[1], 7, tur, 6, NULL, 0, 0, &R),
			 BS_SCSI_GOOD);
	rs[1] = 1;	/* descriptor format */
	assert_int_equal(sth_cmd(s, s->n[1], 7, rs, 6, NULL, 0, 252, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[0], 0x72);
	assert_int_equal(R.din[1], 0);
	/* an unknown operation code */
	{
		uint8_t bad[6] = { 0x02 };

		sth_cmd(s, s->n[1], 7, bad, 6, NULL, 0, 0, &R);
		sth_assert_check(&R, 0x5, 0x2000);
	}
}

/* REPORT SUPPORTED OPERATION CODES from the dispatch table. */
static void rsoc(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[12] = { 0xa3, 0x0c };
	unsigned off, found = 0;

	sth_lu(s, 0, th_dev(s->ctx, "a", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	cdb[8] = 0x10;	/* 4 KiB */
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 12, NULL, 0, 4096, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(be32(R.din) + 4, R.din_len);
	for (off = 4; off < R.din_len; off += 8) {
		if (R.din[off] == 0x88)
			found |= 1;
		if (R.din[off] == 0x9e && R.din[off + 3] == 0x10) {
			found |= 2;
			assert_int_equal(R.din[off + 5] & 1, 1); /* SERVACTV */
		}
		if (R.din[off] == 0x42)
			found |= 4;
	}
	assert_int_equal(found, 7);
	/* one command: READ(10) */
	cdb[2] = 1;
	cdb[3] = 0x28;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 12, NULL, 0, 4096, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[1] & 7, 3);
	assert_int_equal(R.din[3], 10);
	assert_int_equal(R.din[4], 0x28);
	/* RDPROTECT, DPO, FUA, FUA_NV */
	assert_int_equal(R.din[5], 0xfa);
	assert_int_equal(R.din[13], 0x00);	/* control: no NACA */
	/* with a service action: READ CAPACITY(16) */
	cdb[2] = 2;
	cdb[3] = 0x9e;
	cdb[5] = 0x10;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 12, NULL, 0, 4096, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[1] & 7, 3);
	assert_int_equal(R.din[3], 16);
	assert_int_equal(R.din[4], 0x9e);
	assert_int_equal(R.din[5], 0x10);	/* the service action itself */
	assert_int_equal(R.din[4 + 13], 0xff);	/* allocation length */
	/* not supported */
	cdb[3] = 0x9e;
	cdb[5] = 0x1f;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 12, NULL, 0, 4096, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[1] & 7, 1);
	/* option 1 for an opcode with service actions: invalid */
	cdb[2] = 1;
	sth_cmd(s, s->n[0], 0, cdb, 12, NULL, 0, 4096, &R);
	sth_assert_check(&R, 0x5, 0x2400);
}

/* COMPARE AND WRITE: match writes; miscompare says where. */
static void compare_and_write(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16] = { 0x89 }, buf[2048], rd[16];

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	memset(buf, 0xaa, 1024);
	sth_cdb_rw(rd, 10, true, 10, 2);
	assert_int_equal(sth_cmd(s, s->n[0], 0, rd, 16, buf, 1024, 0, &R),
			 BS_SCSI_GOOD);
	put_be64(cdb + 2, 10);
	cdb[13] = 2;
	memset(buf + 1024, 0x55, 1024);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 2048, 0, &R),
			 BS_SCSI_GOOD);
	sth_cdb_rw(rd, 10, false, 10, 2);
	sth_cmd(s, s->n[0], 0, rd, 16, NULL, 0, 1024, &R);
	assert_int_equal(R.din[0], 0x55);
	assert_int_equal(R.din[1023], 0x55);
	/* now the verify data is stale at byte 700 */
	memset(buf, 0x55, 1024);
	buf[700] = 0;
	memset(buf + 1024, 0x66, 1024);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 2048, 0, &R);
	sth_assert_check(&R, 0xe, 0x1d00);
	assert_int_equal(R.sense[0], 0xf0);	/* VALID, fixed */
	assert_int_equal(be32(R.sense + 3), 700);
	sth_cmd(s, s->n[0], 0, rd, 16, NULL, 0, 1024, &R);
	assert_int_equal(R.din[0], 0x55);	/* nothing written */
	/* the Data-Out must be exactly both halves */
	memset(buf, 0x55, 1024);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 2047, 0, &R);
	sth_assert_check(&R, 0x5, 0x0e03);
	cdb[13] = 1;
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 2048, 0, &R);
	sth_assert_check(&R, 0x5, 0x0e03);
	/* a count of 256 does not fit its byte: 0 with 256 blocks of data */
	cdb[13] = 0;
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 2048, 0, &R);
	sth_assert_check(&R, 0x5, 0x2400);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 0, &R),
			 BS_SCSI_GOOD);
	/* past the end */
	cdb[13] = 2;
	cdb[9] = 0;
	put_be64(cdb + 2, 2047);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 2048, 0, &R);
	sth_assert_check(&R, 0x5, 0x2100);
}

/*
 * COMPARE AND WRITE on a device with a small max_io: the unit reports the
 * largest length its CDB can carry (255 blocks: the core splits the read
 * and the write by the device's limits), and a 9-block one is served.
 */
static void compare_and_write_limit(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16] = { 0x89 }, *buf = calloc(1, 2 * 9 * 4096);

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M,logical_block_size=4096,"
			    "max_io=32K"), false);
	sth_clear_ua(s, s->n[0], 0);
	assert_int_equal(inquiry(s, s->n[0], 0, true, 0xb0), BS_SCSI_GOOD);
	assert_int_equal(R.din[5], 255); /* MAXIMUM COMPARE AND WRITE LENGTH */
	cdb[13] = 9;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 2 * 9 * 4096, 0,
				 &R),
			 BS_SCSI_GOOD);
	free(buf);
}

static void flag_done(struct bs_scsi_cmd *cmd)
{
	*(bool *)cmd->priv = true;
}

/*
 * COMPARE AND WRITE is atomic against writes: a WRITE sent while it runs
 * waits for it, so the WRITE's data is what stays.
 */
static void caw_gate(void **state)
{
	struct sth *s = *state;
	struct bs_scsi_cmd *c1 = calloc(1, sizeof(*c1));
	struct bs_scsi_cmd *c2 = calloc(1, sizeof(*c2));
	uint8_t cawbuf[1024], wbuf[512];
	bool d1 = false, d2 = false;

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	sth_clear_ua(s, s->n[1], 0);
	memset(cawbuf, 0, 512);		/* the block reads zeroes now */
	memset(cawbuf + 512, 0x11, 512);
	memset(wbuf, 0x22, 512);
	c1->nexus = s->n[0];
	c1->cdb[0] = 0x89;
	c1->cdb[9] = 5;
	c1->cdb[13] = 1;
	c1->cdb_len = 16;
	c1->dout = cawbuf;
	c1->dout_len = 1024;
	c1->done = flag_done;
	c1->priv = &d1;
	c2->nexus = s->n[1];
	sth_cdb_rw(c2->cdb, 10, true, 5, 1);
	c2->cdb_len = 16;
	c2->dout = wbuf;
	c2->dout_len = 512;
	c2->done = flag_done;
	c2->priv = &d2;
	bs_scsi_exec(c1);
	bs_scsi_exec(c2);
	assert_int_equal(bs_ctx_wait(s->ctx, &d1), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &d2), 0);
	assert_int_equal(c1->status, BS_SCSI_GOOD);
	assert_int_equal(c2->status, BS_SCSI_GOOD);
	assert_true(reads_byte(s, 5, 0x22));
	bs_scsi_cmd_release(c1);
	bs_scsi_cmd_release(c2);
	free(c1);
	free(c2);
}

/* ORWRITE ORs the Data-Out into the blocks; READ DEFECT DATA is empty. */
static void orwrite(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16] = { 0x8b }, buf[1024];

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	memset(buf, 0xa5, sizeof(buf));
	sth_cdb_rw(cdb, 16, true, 7, 2);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 1024, 0, &R),
			 BS_SCSI_GOOD);
	cdb[0] = 0x8b;
	memset(buf, 0x5a, sizeof(buf));
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 1024, 0, &R),
			 BS_SCSI_GOOD);
	assert_true(reads_byte(s, 7, 0xff));
	assert_true(reads_byte(s, 8, 0xff));
	cdb[1] = 0x20;		/* ORPROTECT */
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 1024, 0, &R);
	sth_assert_check(&R, 0x5, 0x2400);
	{
		uint8_t rdd[10] = { 0x37, 0, 0x18 | 5, 0, 0, 0, 0, 0, 32, 0 };

		assert_int_equal(sth_cmd(s, s->n[0], 0, rdd, 10, NULL, 0, 32,
					 &R),
				 BS_SCSI_GOOD);
		assert_int_equal(R.din_len, 4);
		assert_int_equal(R.din[1], 0x1d);
		assert_int_equal(R.din[2] | R.din[3], 0);
	}
}

/* Device errors become sense: EIO, ENOSPC, EROFS. */
static void device_errors(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16], buf[512] = { 0 };

	sth_lu(s, 0, th_dev_kv(s->ctx, "e1", "type=error;size=1M;errno=EIO;"
			      "ops=read,write"), false);
	sth_lu(s, 1, th_dev_kv(s->ctx, "e2", "type=error;size=1M;"
			      "errno=ENOSPC;ops=write"), false);
	sth_lu(s, 2, th_dev_kv(s->ctx, "e3", "type=error;size=1M;"
			      "errno=EROFS;ops=write"), false);
	for (int i = 0; i < 3; i++)
		sth_clear_ua(s, s->n[0], i);
	sth_cdb_rw(cdb, 10, false, 0, 1);
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 512, &R);
	sth_assert_check(&R, 0x3, 0x1100);	/* UNRECOVERED READ ERROR */
	sth_cdb_rw(cdb, 10, true, 0, 1);
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 512, 0, &R);
	sth_assert_check(&R, 0x3, 0x0c00);	/* WRITE ERROR */
	sth_cmd(s, s->n[0], 1, cdb, 16, buf, 512, 0, &R);
	sth_assert_check(&R, 0x7, 0x2707);	/* SPACE ALLOCATION FAILED */
	sth_cmd(s, s->n[0], 2, cdb, 16, buf, 512, 0, &R);
	sth_assert_check(&R, 0x7, 0x2700);	/* WRITE PROTECTED */
	/* a read of the ENOSPC unit still works */
	sth_cdb_rw(cdb, 10, false, 0, 1);
	assert_int_equal(sth_cmd(s, s->n[0], 1, cdb, 16, NULL, 0, 512, &R),
			 BS_SCSI_GOOD);
}

/* VERIFY with BYTCHK compares; WRITE AND VERIFY writes. */
static void verify(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16] = { 0 }, buf[1024];

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	memset(buf, 0x11, sizeof(buf));
	cdb[0] = 0x2e;		/* WRITE AND VERIFY(10) */
	cdb[5] = 4;
	cdb[8] = 2;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 1024, 0, &R),
			 BS_SCSI_GOOD);
	cdb[0] = 0x2f;		/* VERIFY(10), BYTCHK 01b */
	cdb[1] = 0x02;
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 1024, 0, &R),
			 BS_SCSI_GOOD);
	buf[600] = 0x12;
	sth_cmd(s, s->n[0], 0, cdb, 16, buf, 1024, 0, &R);
	sth_assert_check(&R, 0xe, 0x1d00);
	assert_int_equal(be32(R.sense + 3), 600);
	cdb[1] = 0x06;		/* BYTCHK 11b: one block for each */
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, 512, 0, &R),
			 BS_SCSI_GOOD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(inquiry_standard, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(vpd_ident, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(caps_follow_knob, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(caps_thick, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(caps_lbpu_is_unmap, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(read_capacity, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(physical_blocks, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(rw_every_size, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(range_checks, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(readonly_unit, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(luns, sth_setup, sth_teardown),
		cmocka_unit_test_setup_teardown(rsoc, sth_setup, sth_teardown),
		cmocka_unit_test_setup_teardown(compare_and_write, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(compare_and_write_limit,
						sth_setup, sth_teardown),
		cmocka_unit_test_setup_teardown(caw_gate, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(orwrite, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(device_errors, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(verify, sth_setup,
						sth_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
