/* SPDX-License-Identifier: MIT */
/*
 * EXTENDED COPY (LID1) block to block, within a unit and between two
 * units of the target, named by their VPD 83h NAA designators; the
 * parameter list checks; COPY ABORTED for what cannot be copied; RECEIVE
 * COPY RESULTS operating parameters; CSCD descriptor ID FFFFh (the unit
 * itself); 3PC and VPD 8Fh (Third-party Copy) with the same limits; a
 * copy into another unit against that unit's COMPARE AND WRITE and its
 * LOGICAL UNIT RESET.
 */
#include <stdlib.h>
#include <string.h>

#include "helpers/sth.h"
#include "helpers/th.h"

static struct sth_res R;

static void put_be(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

/* The NAA designator (header + 8 bytes) of @lun from VPD 83h. */
static void naa_of(struct sth *s, uint64_t lun, uint8_t out[12])
{
	uint8_t cdb[6] = { 0x12, 1, 0x83, 0, 255, 0 };
	unsigned off;

	assert_int_equal(sth_cmd(s, s->n[0], lun, cdb, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	for (off = 4; off < R.din_len; off += 4 + R.din[off + 3])
		if ((R.din[off + 1] & 0x3f) == 0x03) {
			memcpy(out, R.din + off, 12);
			return;
		}
	fail_msg("no NAA designator");
}

/* A parameter list: @ntd identification descriptors, @nseg segments. */
static uint32_t plist(uint8_t *p, const uint8_t (*ids)[12], unsigned ntd,
		      unsigned nseg, const uint16_t *si, const uint16_t *di,
		      const uint16_t *n, const uint64_t *src,
		      const uint64_t *dst)
{
	uint32_t off = 16;

	memset(p, 0, 16 + 32 * ntd + 28 * nseg);
	p[1] = 0x18;	/* LIST ID USAGE 11b */
	put_be(p + 2, 32 * ntd, 2);
	put_be(p + 8, 28 * nseg, 4);
	for (unsigned i = 0; i < ntd; i++, off += 32) {
		p[off] = 0xe4;
		memcpy(p + off + 4, ids[i], 12);
		put_be(p + off + 29, 512, 3);
	}
	for (unsigned i = 0; i < nseg; i++, off += 28) {
		p[off] = 0x02;
		put_be(p + off + 2, 0x18, 2);
		put_be(p + off + 4, si[i], 2);
		put_be(p + off + 6, di[i], 2);
		put_be(p + off + 10, n[i], 2);
		put_be(p + off + 12, src[i], 8);
		put_be(p + off + 20, dst[i], 8);
	}
	return off;
}

static uint8_t xcopy(struct sth *s, const uint8_t *p, uint32_t len)
{
	uint8_t cdb[16] = { 0x83, 0x00 };

	put_be(cdb + 10, len, 4);
	return sth_cmd(s, s->n[0], 0, cdb, 16, p, len, 0, &R);
}

static bool reads_byte(struct sth *s, uint64_t lun, uint64_t lba, uint32_t n,
		       uint8_t byte)
{
	uint8_t cdb[16];

	sth_cdb_rw(cdb, 16, false, lba, n);
	if (sth_cmd(s, s->n[0], lun, cdb, 16, NULL, 0, n * 512, &R) !=
	    BS_SCSI_GOOD)
		return false;
	for (uint32_t i = 0; i < n * 512; i++)
		if (R.din[i] != byte)
			return false;
	return true;
}

static void fill(struct sth *s, uint64_t lun, uint64_t lba, uint32_t n,
		 uint8_t byte)
{
	uint8_t cdb[16], *buf = malloc(n * 512);

	memset(buf, byte, n * 512);
	sth_cdb_rw(cdb, 16, true, lba, n);
	assert_int_equal(sth_cmd(s, s->n[0], lun, cdb, 16, buf, n * 512, 0,
				 &R),
			 BS_SCSI_GOOD);
	free(buf);
}

/* LUs 0 and 1 over @spec devices, unit attentions cleared on both
 * nexuses, their NAA designators in @ids. */
static void two_units(struct sth *s, const char *spec, uint8_t ids[2][12])
{
	sth_lu(s, 0, th_dev(s->ctx, "a", spec), false);
	sth_lu(s, 1, th_dev(s->ctx, "b", spec), false);
	for (unsigned n = 0; n < 2; n++)
		for (uint64_t lun = 0; lun < 2; lun++)
			sth_clear_ua(s, s->n[n], lun);
	naa_of(s, 0, ids[0]);
	naa_of(s, 1, ids[1]);
}

static void copies(void **state)
{
	struct sth *s = *state;
	uint8_t ids[2][12], p[512];
	uint16_t si[2] = { 0, 0 }, di[2] = { 0, 1 }, n[2] = { 3000, 16 };
	uint64_t src[2] = { 0, 100 }, dst[2] = { 10000, 50 };
	uint32_t len;

	two_units(s, "mem:8M", ids);
	fill(s, 0, 0, 2048, 0x61);
	fill(s, 0, 2048, 2048, 0x62);
	/* 3000 blocks within LU 0 (more than one chunk), 16 to LU 1 */
	len = plist(p, ids, 2, 2, si, di, n, src, dst);
	assert_int_equal(xcopy(s, p, len), BS_SCSI_GOOD);
	assert_true(reads_byte(s, 0, 10000, 1, 0x61));
	assert_true(reads_byte(s, 0, 10000 + 2047, 1, 0x61));
	assert_true(reads_byte(s, 0, 10000 + 2048, 1, 0x62));
	assert_true(reads_byte(s, 0, 10000 + 2999, 1, 0x62));
	assert_true(reads_byte(s, 0, 13000, 1, 0x00));
	assert_true(reads_byte(s, 1, 50, 16, 0x61));
	assert_true(reads_byte(s, 1, 66, 1, 0x00));
	/* COPY STATUS: unknown list id 7; after a held copy with id 7 */
	{
		uint8_t cdb[16] = { 0x84, 0x00, 7 };

		cdb[13] = 255;
		sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 255, &R);
		sth_assert_check(&R, 0x5, 0x2400);
		len = plist(p, ids, 2, 1, si, di, n, src, dst);
		p[0] = 7;
		p[1] = 0;	/* LIST ID USAGE 00b: hold the results */
		assert_int_equal(xcopy(s, p, len), BS_SCSI_GOOD);
		assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 255,
					 &R),
				 BS_SCSI_GOOD);
		assert_int_equal(R.din[4], 0);		/* completed, good */
		assert_int_equal(R.din[6], 1);		/* 1 segment */
		assert_int_equal(R.din[7], 0xf1);	/* KiB */
		assert_int_equal(be32(R.din + 8), 3000 * 512 / 1024);
	}
	/* a length of 0: nothing */
	assert_int_equal(xcopy(s, p, 0), BS_SCSI_GOOD);
	/* the list cut short */
	{
		uint8_t cdb[16] = { 0x83 };

		put_be(cdb + 10, 16 + 64 + 27, 4);
		sth_cmd(s, s->n[0], 0, cdb, 16, p, 16 + 64 + 27, 0, &R);
		sth_assert_check(&R, 0x5, 0x1a00);
	}
	/* a destination index not in the list: COPY ABORTED */
	di[0] = 2;
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	xcopy(s, p, len);
	sth_assert_check(&R, 0xa, 0x0d02);
	/* past the end of the destination */
	di[0] = 1;
	dst[0] = 16384 - 10;
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	xcopy(s, p, len);
	assert_int_equal(sth_key(&R), 0xa);
	/* an unknown unit */
	ids[1][11] ^= 0xff;
	dst[0] = 0;
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	xcopy(s, p, len);
	sth_assert_check(&R, 0xa, 0x0d02);
}

static void limits(void **state)
{
	struct sth *s = *state;
	uint8_t ids[3][12], p[2048];
	uint16_t si[9] = { 0 }, di[9] = { 0 }, n[9] = { 1, 1, 1, 1, 1, 1, 1,
							1, 1 };
	uint64_t src[9] = { 0 }, dst[9] = { 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	uint32_t len;

	sth_lu(s, 0, th_dev(s->ctx, "a", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	naa_of(s, 0, ids[0]);
	memcpy(ids[1], ids[0], 12);
	memcpy(ids[2], ids[0], 12);
	/* RECEIVE COPY RESULTS: the limits the checks below use */
	{
		uint8_t cdb[16] = { 0x84, 0x03 };

		cdb[13] = 255;
		assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 255,
					 &R),
				 BS_SCSI_GOOD);
		assert_int_equal(R.din[9], 2);		/* targets */
		assert_int_equal(R.din[11], 8);		/* segments */
		assert_int_equal(be32(R.din + 12), 1024);
		assert_int_equal(R.din[43], 2);
		assert_int_equal(R.din[44], 0x02);
		assert_int_equal(R.din[45], 0xe4);
	}
	len = plist(p, ids, 3, 1, si, di, n, src, dst);
	xcopy(s, p, len);
	sth_assert_check(&R, 0x5, 0x2606);
	len = plist(p, ids, 1, 9, si, di, n, src, dst);
	xcopy(s, p, len);
	sth_assert_check(&R, 0x5, 0x2608);
	len = plist(p, ids, 1, 8, si, di, n, src, dst);
	assert_int_equal(xcopy(s, p, len), BS_SCSI_GOOD);
	/* unsupported descriptor types */
	len = plist(p, ids, 1, 1, si, di, n, src, dst);
	p[16] = 0xe0;
	xcopy(s, p, len);
	sth_assert_check(&R, 0x5, 0x2607);
	p[16] = 0xe4;
	p[16 + 32] = 0x03;
	xcopy(s, p, len);
	sth_assert_check(&R, 0x5, 0x2609);
	/* more than the maximum list length */
	memset(p, 0, sizeof(p));
	put_be(p + 2, 64, 2);
	put_be(p + 8, 28 * 36, 4);
	xcopy(s, p, 16 + 64 + 28 * 36);
	sth_assert_check(&R, 0x5, 0x1a00);
}

static uint16_t be16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

/* VPD 8Fh: the descriptors, with the limits EXTENDED COPY enforces and
 * lengths from the block size; 3PC in the standard data. */
static void vpd_tpc(void **state)
{
	struct sth *s = *state;
	uint8_t inq[6] = { 0x12, 1, 0x8f, 0, 255, 0 };
	uint8_t rcr[16] = { 0x84, 0x03 };
	unsigned off, seen = 0;

	sth_lu(s, 0, th_dev(s->ctx, "a", "mem:1M,logical_block_size=4096"),
	       false);
	sth_clear_ua(s, s->n[0], 0);
	assert_int_equal(sth_cmd(s, s->n[0], 0, inq, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[1], 0x8f);
	assert_int_equal(be16(R.din + 2) + 4u, R.din_len);
	for (off = 4; off + 4 <= R.din_len; off += 4 + be16(R.din + off + 2)) {
		const uint8_t *d = R.din + off;

		assert_int_equal(be16(d + 2) % 4, 0);
		switch (be16(d)) {
		case 0x0001:	/* supported commands */
			assert_int_equal(d[4], 7);
			assert_int_equal(d[5], 0x83);
			assert_int_equal(d[8], 0x84);
			seen |= 1;
			break;
		case 0x0004:	/* parameter data */
			assert_int_equal(be16(d + 8), 2);
			assert_int_equal(be16(d + 10), 8);
			assert_int_equal(be32(d + 12), 1024);
			seen |= 2;
			break;
		case 0x0008:	/* supported descriptors */
			assert_int_equal(d[4], 2);
			assert_int_equal(d[5], 0x02);
			assert_int_equal(d[6], 0xe4);
			seen |= 4;
			break;
		case 0x000c:	/* supported CSCD IDs: FFFFh */
			assert_int_equal(be16(d + 4), 2);
			assert_int_equal(be16(d + 6), 0xffff);
			seen |= 8;
			break;
		case 0x8001:	/* general copy operations */
			assert_int_equal(be32(d + 12), 0xffffu * 4096);
			assert_int_equal(d[16], 12);
			seen |= 16;
			break;
		}
	}
	assert_int_equal(seen, 31);
	/* RECEIVE COPY RESULTS says the same for 4096-byte blocks */
	rcr[13] = 255;
	assert_int_equal(sth_cmd(s, s->n[0], 0, rcr, 16, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 16), 0xffffu * 4096);
	assert_int_equal(R.din[37], 12);
	/* standard INQUIRY: 3PC */
	inq[1] = 0;
	inq[2] = 0;
	assert_int_equal(sth_cmd(s, s->n[0], 0, inq, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[5] & 0x08, 0x08);
	/* VPD 00h lists 8Fh */
	inq[1] = 1;
	assert_int_equal(sth_cmd(s, s->n[0], 0, inq, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	assert_non_null(memchr(R.din + 4, 0x8f, R.din[3]));
}

/* CSCD descriptor ID FFFFh: the unit the command went to, with no
 * identification descriptor at all, or mixed with list indexes. */
static void cscd_self(void **state)
{
	struct sth *s = *state;
	uint8_t ids[1][12], p[512];
	uint16_t si[2] = { 0xffff, 0xffff }, di[2] = { 0xffff, 0 };
	uint16_t n[2] = { 8, 4 };
	uint64_t src[2] = { 0, 0 }, dst[2] = { 100, 200 };
	uint32_t len;

	sth_lu(s, 0, th_dev(s->ctx, "a", "mem:1M"), false);
	sth_lu(s, 1, th_dev(s->ctx, "b", "mem:1M"), false);
	sth_clear_ua(s, s->n[0], 0);
	sth_clear_ua(s, s->n[0], 1);
	fill(s, 1, 0, 8, 0x71);
	naa_of(s, 0, ids[0]);
	/* sent to LU 1: FFFFh is LU 1, index 0 is LU 0 */
	len = plist(p, ids, 0, 1, si, di, n, src, dst);
	{
		uint8_t cdb[16] = { 0x83, 0x00 };

		put_be(cdb + 10, len, 4);
		assert_int_equal(sth_cmd(s, s->n[0], 1, cdb, 16, p, len, 0,
					 &R),
				 BS_SCSI_GOOD);
		assert_true(reads_byte(s, 1, 100, 8, 0x71));
		assert_true(reads_byte(s, 0, 100, 1, 0x00));
		len = plist(p, ids, 1, 2, si, di, n, src, dst);
		put_be(cdb + 10, len, 4);
		assert_int_equal(sth_cmd(s, s->n[0], 1, cdb, 16, p, len, 0,
					 &R),
				 BS_SCSI_GOOD);
		assert_true(reads_byte(s, 0, 200, 4, 0x71));
		/* another reserved ID is still not reachable */
		si[0] = 0xfffe;
		len = plist(p, ids, 1, 1, si, di, n, src, dst);
		put_be(cdb + 10, len, 4);
		sth_cmd(s, s->n[0], 1, cdb, 16, p, len, 0, &R);
		sth_assert_check(&R, 0xa, 0x0d02);
	}
}

/* PERSISTENT RESERVE OUT from @n on @lun: REGISTER @key, or RESERVE */
static uint8_t pr_out(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun,
		      uint8_t sa, uint8_t type, uint64_t key, uint64_t sakey)
{
	uint8_t cdb[10] = { 0x5f, sa, type }, p[24] = { 0 };

	cdb[8] = 24;
	put_be(p, key, 8);
	put_be(p + 8, sakey, 8);
	return sth_cmd(s, n, lun, cdb, 10, p, 24, 0, &R);
}

/*
 * The units a copy reaches beyond its own answer to their reservations:
 * with B holding Write Exclusive on LU 1, A's copy from LU 0 into LU 1
 * is RESERVATION CONFLICT and writes nothing (it wrote before); with
 * Exclusive Access, reading LU 1 as the source is refused too.
 */
static void reservations_of_other_units(void **state)
{
	struct sth *s = *state;
	uint8_t ids[2][12], p[512];
	uint16_t si[1] = { 0 }, di[1] = { 1 }, n[1] = { 8 };
	uint64_t src[1] = { 0 }, dst[1] = { 0 };
	uint32_t len;

	two_units(s, "mem:1M", ids);
	fill(s, 0, 0, 8, 0x61);
	assert_int_equal(pr_out(s, s->n[1], 1, 0, 0, 0, 0xb), BS_SCSI_GOOD);
	assert_int_equal(pr_out(s, s->n[1], 1, 1, 1, 0xb, 0), BS_SCSI_GOOD);
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	assert_int_equal(xcopy(s, p, len), BS_SCSI_RESERVATION_CONFLICT);
	assert_true(reads_byte(s, 1, 0, 8, 0x00));
	/* into its own unit, from LU 1 (reading is allowed under WE) */
	si[0] = 1;
	di[0] = 0;
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	assert_int_equal(xcopy(s, p, len), BS_SCSI_GOOD);
	assert_true(reads_byte(s, 0, 0, 8, 0x00));
	/* Exclusive Access: LU 1 cannot be the source either */
	assert_int_equal(pr_out(s, s->n[1], 1, 2, 1, 0xb, 0), BS_SCSI_GOOD);
	assert_int_equal(pr_out(s, s->n[1], 1, 1, 3, 0xb, 0), BS_SCSI_GOOD);
	assert_int_equal(xcopy(s, p, len), BS_SCSI_RESERVATION_CONFLICT);
	/* released: the first copy goes through */
	assert_int_equal(pr_out(s, s->n[1], 1, 2, 3, 0xb, 0), BS_SCSI_GOOD);
	fill(s, 0, 0, 8, 0x62);
	si[0] = 0;
	di[0] = 1;
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	assert_int_equal(xcopy(s, p, len), BS_SCSI_GOOD);
	assert_true(reads_byte(s, 1, 0, 8, 0x62));
}

static void flag_done(struct bs_scsi_cmd *cmd)
{
	*(bool *)cmd->priv = true;
}

static void flag_set(void *arg)
{
	*(bool *)arg = true;
}

/* A command for bs_scsi_exec() that sets *@done when it answers. */
static struct bs_scsi_cmd *async_cmd(struct bs_scsi_nexus *n, uint64_t lun,
				     const uint8_t *cdb, const uint8_t *dout,
				     uint32_t dout_len, bool *done)
{
	struct bs_scsi_cmd *c = calloc(1, sizeof(*c));

	c->nexus = n;
	c->lun = lun;
	memcpy(c->cdb, cdb, 16);
	c->cdb_len = 16;
	c->dout = dout;
	c->dout_len = dout_len;
	c->done = flag_done;
	c->priv = done;
	return c;
}

static void async_free(struct bs_scsi_cmd *c)
{
	bs_scsi_cmd_release(c);
	free(c);
}

/* Do blocks [@lba, @lba + @n) of @lun all hold @byte? (any length) */
static bool all_byte(struct sth *s, uint64_t lun, uint64_t lba, uint32_t n,
		     uint8_t byte)
{
	for (uint32_t off = 0; off < n; off += 2048)
		if (!reads_byte(s, lun, lba + off,
				n - off < 2048 ? n - off : 2048, byte))
			return false;
	return true;
}

/*
 * A copy into LU 1 is in LU 1's write gate: a COMPARE AND WRITE of LU 1
 * sent while the copy runs waits for it and compares against the copied
 * data (MISCOMPARE here), rather than passing against the old data and
 * then being overwritten by the copy's next chunk.
 */
static void other_unit_gate(void **state)
{
	struct sth *s = *state;
	uint8_t ids[2][12], p[512], cdb[16] = { 0x83 }, caw[16] = { 0x89 };
	uint8_t cawbuf[1024];
	uint16_t si[1] = { 0 }, di[1] = { 1 }, n[1] = { 4096 };
	uint64_t src[1] = { 0 }, dst[1] = { 0 };
	struct bs_scsi_cmd *c1, *c2;
	bool d1 = false, d2 = false;
	uint32_t len;

	two_units(s, "mem:8M", ids);
	fill(s, 0, 0, 2048, 0x61);
	fill(s, 0, 2048, 2048, 0x61);
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	put_be(cdb + 10, len, 4);
	/* block 3000 of LU 1: zeroes now, 0x61 once the copy's second
	 * chunk is written */
	memset(cawbuf, 0, 512);
	memset(cawbuf + 512, 0x11, 512);
	put_be(caw + 2, 3000, 8);
	caw[13] = 1;
	c1 = async_cmd(s->n[0], 0, cdb, p, len, &d1);
	c2 = async_cmd(s->n[1], 1, caw, cawbuf, sizeof(cawbuf), &d2);
	bs_scsi_exec(c1);
	bs_scsi_exec(c2);
	assert_int_equal(bs_ctx_wait(s->ctx, &d1), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &d2), 0);
	assert_int_equal(c1->status, BS_SCSI_GOOD);
	/* the outcome of one order: copy, then COMPARE AND WRITE */
	assert_int_equal(c2->status, BS_SCSI_CHECK_CONDITION);
	assert_true(reads_byte(s, 1, 3000, 1, 0x61));
	assert_true(all_byte(s, 1, 0, 4096, 0x61));
	async_free(c1);
	async_free(c2);
}

/*
 * A LOGICAL UNIT RESET of the copy's destination waits for the copy's
 * request in flight there and ends the copy (COPY ABORTED, THIRD PARTY
 * DEVICE FAILURE): nothing of it is written after the reset answered.
 */
static void other_unit_reset(void **state)
{
	struct sth *s = *state;
	uint8_t ids[2][12], p[512], cdb[16] = { 0x83 };
	uint16_t si[1] = { 0 }, di[1] = { 1 }, n[1] = { 0xffff };
	uint64_t src[1] = { 0 }, dst[1] = { 0 };
	struct bs_scsi_cmd *c1;
	bool d1 = false, reset = false;
	struct sth_res r;
	uint32_t len;
	int rc;

	two_units(s, "mem:64M", ids);
	for (uint32_t lba = 0; lba < 0xffff; lba += 2048)
		fill(s, 0, lba, 0xffff - lba < 2048 ? 0xffff - lba : 2048,
		     0x61);
	len = plist(p, ids, 2, 1, si, di, n, src, dst);
	p[1] = 0;		/* hold the results */
	p[0] = 9;
	put_be(cdb + 10, len, 4);
	c1 = async_cmd(s->n[0], 0, cdb, p, len, &d1);
	bs_scsi_exec(c1);
	rc = bs_scsi_lu_reset_wait(s->tgt, 1, s->n[1], flag_set, &reset);
	/* the copy's read is in flight: the reset waits for it */
	assert_int_equal(rc, 1);
	assert_false(reset);
	assert_int_equal(bs_ctx_wait(s->ctx, &reset), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &d1), 0);
	assert_int_equal(c1->status, BS_SCSI_CHECK_CONDITION);
	memset(&r, 0, sizeof(r));
	r.status = c1->status;
	memcpy(r.sense, c1->sense, c1->sense_len);
	r.sense_len = c1->sense_len;
	sth_assert_check(&r, 0xa, 0x0d01);
	async_free(c1);
	sth_clear_ua(s, s->n[0], 1);
	assert_true(all_byte(s, 1, 0, 0xffff, 0x00));
	/* COPY STATUS: held, ended in error, no segment done */
	{
		uint8_t rcr[16] = { 0x84, 0x00, 9 };

		rcr[13] = 255;
		assert_int_equal(sth_cmd(s, s->n[0], 0, rcr, 16, NULL, 0, 255,
					 &R),
				 BS_SCSI_GOOD);
		assert_int_equal(R.din[4], 1);
		assert_int_equal(R.din[6], 0);
	}
	/* LU 1 still takes copies */
	p[1] = 0x18;
	assert_int_equal(xcopy(s, p, len), BS_SCSI_GOOD);
	assert_true(all_byte(s, 1, 0, 0xffff, 0x61));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(copies, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(limits, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(vpd_tpc, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(reservations_of_other_units,
						sth_setup, sth_teardown),
		cmocka_unit_test_setup_teardown(cscd_self, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(other_unit_gate, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(other_unit_reset, sth_setup,
						sth_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
