/* SPDX-License-Identifier: MIT */
/*
 * SCSI zeroing and provisioning over a file device: WRITE SAME with UNMAP
 * frees blocks and reads zeroes, without UNMAP keeps them allocated, a
 * non-zero block is written out; UNMAP parameter list edge cases; GET LBA
 * STATUS sees the holes, its first descriptor at the LBA asked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "helpers/sth.h"
#include "helpers/th.h"

#define MiB (1ull << 20)
#define NB (32 * MiB / 512)

static struct sth_res R;
static char path[128];

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static struct bs_dev *file_lu(struct sth *s, const char *extra)
{
	char spec[256];
	struct bs_dev *d;

	snprintf(path, sizeof(path), "%s/f.img", s->dir);
	snprintf(spec, sizeof(spec), "file:%s,size=32M%s", path, extra);
	d = th_dev(s->ctx, "f", spec);
	sth_lu(s, 0, d, false);
	sth_clear_ua(s, s->n[0], 0);
	return d;
}

static long long allocated(void)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (long long)st.st_blocks * 512;
}

/* Write 4 MiB of data at LBA 0 through SCSI. */
static void fill(struct sth *s, uint8_t byte)
{
	uint8_t cdb[16], *buf = malloc(MiB);

	memset(buf, byte, MiB);
	for (unsigned i = 0; i < 4; i++) {
		sth_cdb_rw(cdb, 16, true, i * (MiB / 512), MiB / 512);
		assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, buf, MiB, 0,
					 &R),
				 BS_SCSI_GOOD);
	}
	free(buf);
}

static bool reads_byte(struct sth *s, uint64_t lba, uint32_t n, uint8_t byte)
{
	uint8_t cdb[16];
	uint32_t i;

	sth_cdb_rw(cdb, 16, false, lba, n);
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, n * 512, &R),
			 BS_SCSI_GOOD);
	for (i = 0; i < n * 512; i++)
		if (R.din[i] != byte)
			return false;
	return true;
}

static uint8_t write_same(struct sth *s, bool ws16, uint8_t flags,
			  uint64_t lba, uint32_t n, const void *block)
{
	uint8_t cdb[16] = { 0 };

	if (ws16) {
		cdb[0] = 0x93;
		put_be64(cdb + 2, lba);
		put_be32(cdb + 10, n);
	} else {
		cdb[0] = 0x41;
		put_be32(cdb + 2, (uint32_t)lba);
		cdb[7] = (uint8_t)(n >> 8);
		cdb[8] = (uint8_t)n;
	}
	cdb[1] = flags;
	return sth_cmd(s, s->n[0], 0, cdb, 16, block, block ? 512 : 0, 0, &R);
}

/* WRITE SAME(16) UNMAP of a zero block: zeroes, and the blocks are freed. */
static void ws_unmap_frees(void **state)
{
	struct sth *s = *state;
	uint8_t zero[512] = { 0 };
	long long before;

	file_lu(s, "");
	fill(s, 0x5a);
	before = allocated();
	assert_true(before >= 4 * (long long)MiB);
	assert_int_equal(write_same(s, true, 0x08, 0, 4 * MiB / 512, zero),
			 BS_SCSI_GOOD);
	assert_true(reads_byte(s, 0, 128, 0));
	assert_true(reads_byte(s, 4 * MiB / 512 - 128, 128, 0));
	assert_true(allocated() < before - 3 * (long long)MiB);
	/* WRITE SAME(10) with NDOB is not a field of the 10-byte form; the
	 * 16-byte form with NDOB zeroes without a Data-Out */
	fill(s, 0x5a);
	assert_int_equal(write_same(s, true, 0x09, 0, 4 * MiB / 512, NULL),
			 BS_SCSI_GOOD);
	assert_true(reads_byte(s, 100, 128, 0));
	assert_true(allocated() < before - 3 * (long long)MiB);
	/* WRITE SAME(10) UNMAP too */
	fill(s, 0x5a);
	assert_int_equal(write_same(s, false, 0x08, 0, 4096, zero),
			 BS_SCSI_GOOD);
	assert_true(reads_byte(s, 0, 128, 0));
	assert_true(reads_byte(s, 4096, 1, 0x5a));
}

/* Without UNMAP the blocks stay allocated (and read zeroes). */
static void ws_nounmap_keeps(void **state)
{
	struct sth *s = *state;
	uint8_t zero[512] = { 0 };
	long long before;

	file_lu(s, "");
	fill(s, 0x5a);
	before = allocated();
	assert_int_equal(write_same(s, true, 0x00, 0, 4 * MiB / 512, zero),
			 BS_SCSI_GOOD);
	assert_true(reads_byte(s, 0, 128, 0));
	assert_true(allocated() >= before);
}

/* A non-zero block is written out, in chunks, whatever the length. */
static void ws_pattern(void **state)
{
	struct sth *s = *state;
	uint8_t blk[512];

	file_lu(s, "");
	for (int i = 0; i < 512; i++)
		blk[i] = (uint8_t)(i * 7 + 1);
	/* 3 MiB + 1 block: more than one pattern buffer */
	assert_int_equal(write_same(s, true, 0x08, 10, 6 * 1024 + 1, blk),
			 BS_SCSI_GOOD);
	{
		uint8_t cdb[16];

		sth_cdb_rw(cdb, 16, false, 10, 2);
		sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 1024, &R);
		assert_memory_equal(R.din, blk, 512);
		assert_memory_equal(R.din + 512, blk, 512);
		sth_cdb_rw(cdb, 16, false, 10 + 6 * 1024, 2);
		sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 1024, &R);
		assert_memory_equal(R.din, blk, 512);
		for (int i = 512; i < 1024; i++)
			assert_int_equal(R.din[i], 0);
	}
	/* exactly one block of Data-Out */
	{
		uint8_t cdb[16] = { 0x93 }, two[1024] = { 1 };

		cdb[13] = 1;
		sth_cmd(s, s->n[0], 0, cdb, 16, two, 1024, 0, &R);
		sth_assert_check(&R, 0x5, 0x0e03);
		sth_cmd(s, s->n[0], 0, cdb, 16, two, 256, 0, &R);
		sth_assert_check(&R, 0x5, 0x0e03);
	}
	/* ANCHOR is refused; out of range; 0 blocks = to the end */
	write_same(s, true, 0x10, 0, 1, blk);
	sth_assert_check(&R, 0x5, 0x2400);
	write_same(s, true, 0x00, NB - 1, 2, blk);
	sth_assert_check(&R, 0x5, 0x2100);
	write_same(s, true, 0x00, UINT64_MAX, 2, blk);
	sth_assert_check(&R, 0x5, 0x2100);
	assert_int_equal(write_same(s, true, 0x00, NB - 4, 0, blk),
			 BS_SCSI_GOOD);
	assert_true(reads_byte(s, NB - 4, 1, 0) == false);
	{
		uint8_t cdb[16];

		sth_cdb_rw(cdb, 16, false, NB - 1, 1);
		sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 512, &R);
		assert_memory_equal(R.din, blk, 512);
	}
}

/* More than MAXIMUM WRITE SAME LENGTH: invalid field. */
static void ws_max_length(void **state)
{
	struct sth *s = *state;
	struct bs_dev *d = th_dev(s->ctx, "m", "mem:64M,max_write_zeroes=1M");
	uint8_t zero[512] = { 0 };

	sth_lu(s, 0, d, false);
	sth_clear_ua(s, s->n[0], 0);
	assert_int_equal(write_same(s, true, 0x08, 0, 2048, zero),
			 BS_SCSI_GOOD);
	write_same(s, true, 0x08, 0, 2049, zero);
	sth_assert_check(&R, 0x5, 0x2400);
	/* 0 blocks = to the end = more than the maximum */
	write_same(s, true, 0x08, 0, 0, zero);
	sth_assert_check(&R, 0x5, 0x2400);
}

static uint8_t unmap(struct sth *s, const uint8_t *plist, uint16_t plen,
		     uint32_t dout_len)
{
	uint8_t cdb[10] = { 0x42 };

	cdb[7] = (uint8_t)(plen >> 8);
	cdb[8] = (uint8_t)plen;
	return sth_cmd(s, s->n[0], 0, cdb, 10, plist, dout_len, 0, &R);
}

/* One descriptor list: @n descriptors of (lba, count). */
static uint16_t plist_make(uint8_t *p, unsigned n, const uint64_t *lba,
			   const uint32_t *cnt)
{
	uint16_t len = (uint16_t)(8 + 16 * n);

	memset(p, 0, len);
	p[0] = (uint8_t)((len - 2) >> 8);
	p[1] = (uint8_t)(len - 2);
	p[2] = (uint8_t)((16 * n) >> 8);
	p[3] = (uint8_t)(16 * n);
	for (unsigned i = 0; i < n; i++) {
		put_be64(p + 8 + 16 * i, lba[i]);
		put_be32(p + 16 + 16 * i, cnt[i]);
	}
	return len;
}

/* UNMAP on an LBPRZ unit leaves zeroes; its lists are checked first. */
static void unmap_lists(void **state)
{
	struct sth *s = *state;
	uint8_t *p = calloc(1, 8 + 16 * 300);
	uint64_t lba[300];
	uint32_t cnt[300];
	uint16_t len;
	long long before;

	file_lu(s, "");
	fill(s, 0x77);
	before = allocated();
	lba[0] = 0;
	cnt[0] = 2048;
	lba[1] = 4096;
	cnt[1] = 2048;
	len = plist_make(p, 2, lba, cnt);
	assert_int_equal(unmap(s, p, len, len), BS_SCSI_GOOD);
	assert_true(reads_byte(s, 0, 64, 0));
	assert_true(reads_byte(s, 2048, 64, 0x77));
	assert_true(reads_byte(s, 4096 + 2047, 1, 0));
	assert_true(allocated() < before - (long long)MiB);

	/* truncated: the header claims more descriptors than were sent */
	len = plist_make(p, 2, lba, cnt);
	assert_int_equal(unmap(s, p, 24, 24), BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x2600);
	/* the Data-Out is shorter than the parameter list length */
	assert_int_equal(unmap(s, p, len, 20), BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x0e03);
	/* a parameter list length under 8 */
	assert_int_equal(unmap(s, p, 7, 7), BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x1a00);
	/* too many descriptors */
	for (int i = 0; i < 300; i++) {
		lba[i] = i;
		cnt[i] = 1;
	}
	len = plist_make(p, 300, lba, cnt);
	assert_int_equal(unmap(s, p, len, len), BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x2600);
	/* out of range, in 64 bits: nothing is unmapped */
	fill(s, 0x77);
	lba[0] = 0;
	cnt[0] = 8;
	lba[1] = UINT64_MAX;
	cnt[1] = 2;
	len = plist_make(p, 2, lba, cnt);
	assert_int_equal(unmap(s, p, len, len), BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x2100);
	lba[1] = NB - 1;
	len = plist_make(p, 2, lba, cnt);
	assert_int_equal(unmap(s, p, len, len), BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x2100);
	assert_true(reads_byte(s, 0, 8, 0x77));
	/* an empty list and a zero-length descriptor are fine */
	assert_int_equal(unmap(s, p, 0, 0), BS_SCSI_GOOD);
	cnt[0] = 0;
	len = plist_make(p, 1, lba, cnt);
	assert_int_equal(unmap(s, p, len, len), BS_SCSI_GOOD);
	/* ANCHOR */
	{
		uint8_t cdb[10] = { 0x42, 0x01 };

		cdb[8] = (uint8_t)len;
		sth_cmd(s, s->n[0], 0, cdb, 10, p, len, 0, &R);
		sth_assert_check(&R, 0x5, 0x2400);
	}
	free(p);
}

/* Without discard UNMAP is not offered (VPD B2 LBPU = 0). */
static void unmap_needs_discard(void **state)
{
	struct sth *s = *state;
	uint8_t p[24];
	uint64_t lba = 0;
	uint32_t cnt = 1;
	uint16_t len = plist_make(p, 1, &lba, &cnt);

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:1M,max_discard=0"), false);
	sth_clear_ua(s, s->n[0], 0);
	assert_int_equal(unmap(s, p, len, len), BS_SCSI_CHECK_CONDITION);
	sth_assert_check(&R, 0x5, 0x2000);
}

/* GET LBA STATUS reports the unmapped range as deallocated. */
static void lba_status(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16] = { 0x9e, 0x12 }, zero[512] = { 0 };

	file_lu(s, "");
	fill(s, 0x33);
	assert_int_equal(write_same(s, true, 0x08, 2048, 2048, zero),
			 BS_SCSI_GOOD);
	cdb[12] = 0x10;	/* 4 KiB */
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 4096, &R),
			 BS_SCSI_GOOD);
	assert_true(R.din_len >= 8 + 3 * 16);
	/* mapped [0, 2048), deallocated [2048, 4096), then mapped data */
	assert_int_equal(be32(R.din + 8 + 4), 0);
	assert_int_equal(be32(R.din + 8 + 8), 2048);
	assert_int_equal(R.din[8 + 12], 0);
	assert_int_equal(be32(R.din + 24 + 4), 2048);
	assert_int_equal(be32(R.din + 24 + 8), 2048);
	assert_int_equal(R.din[24 + 12], 1);
	/* past the end */
	put_be64(cdb + 2, NB);
	sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 4096, &R);
	sth_assert_check(&R, 0x5, 0x2100);
}

/*
 * On a unit whose physical block holds 8 logical blocks (LBPPBE 3), GET
 * LBA STATUS starts its first descriptor at the LBA asked, aligned or not
 * (SBC-4, LBA status descriptor relationships). libiscsi's
 * GetLBAStatus.UnmapSingle asks at i + 1 and wants the next physical
 * block, i + 8, instead (docs/iscsi.md, "What iscsi-test-cu says").
 */
static void lba_status_unaligned_start(void **state)
{
	struct sth *s = *state;
	uint8_t cdb[16] = { 0x9e, 0x10 }, p[24];
	uint64_t lba = 0;
	uint32_t cnt = 8;
	uint16_t len = plist_make(p, 1, &lba, &cnt);

	sth_lu(s, 0, th_dev(s->ctx, "m", "mem:4M,chunk=4096,"
			    "physical_block_size=4096"), false);
	sth_clear_ua(s, s->n[0], 0);
	cdb[13] = 32;	/* READ CAPACITY(16): LBPPBE 3 */
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 32, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(R.din[13] & 0x0f, 3);
	fill(s, 0x5a);
	/* unmap the first physical block, LBAs 0..7 */
	assert_int_equal(unmap(s, p, len, len), BS_SCSI_GOOD);

	cdb[1] = 0x12;
	cdb[13] = 64;
	put_be64(cdb + 2, 1);	/* inside the unmapped block */
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 64, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 8), 0);
	assert_int_equal(be32(R.din + 8 + 4), 1);
	assert_int_equal(be32(R.din + 8 + 8), 7);
	assert_int_equal(R.din[8 + 12], 1);		/* deallocated */
	assert_int_equal(be32(R.din + 24 + 4), 8);
	assert_int_equal(R.din[24 + 12], 0);		/* mapped */

	put_be64(cdb + 2, 9);	/* inside the next, mapped block */
	assert_int_equal(sth_cmd(s, s->n[0], 0, cdb, 16, NULL, 0, 64, &R),
			 BS_SCSI_GOOD);
	assert_int_equal(be32(R.din + 8), 0);
	assert_int_equal(be32(R.din + 8 + 4), 9);
	assert_int_equal(be32(R.din + 8 + 8), 4 * MiB / 512 - 9);
	assert_int_equal(R.din[8 + 12], 0);		/* mapped */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(ws_unmap_frees, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(ws_nounmap_keeps, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(ws_pattern, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(ws_max_length, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(unmap_lists, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(unmap_needs_discard, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(lba_status, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(lba_status_unaligned_start,
						sth_setup, sth_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
