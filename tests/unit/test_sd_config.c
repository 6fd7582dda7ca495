/* SPDX-License-Identifier: MIT */
/*
 * The sd decision (lib/drivers/sd_config.c) against a table: what a disk
 * reports -> zeroing mode, provisioning mode, WRITE_ZEROES_UNMAP and the
 * limits, as Linux's sd (with the seed's patch) would set them.
 */
#include <errno.h>
#include <string.h>

#include "drivers/sd_config.h"
#include "helpers/th.h"

/* A thin disk like tgt's thin_provisioning=1 LUN: 512/4096, LBPME+LBPRZ,
 * B2 LBPU/LBPWS/LBPWS10, unmap counts unlimited, no max write same. */
static struct sd_facts tgt_thin(void)
{
	struct sd_facts f = {
		.lbs = 512, .lbppbe = 3, .rc16 = true,
		.lbpme = true, .lbprz = true,
		.vpd_b0 = true, .max_unmap_lba = 0xffffffff,
		.max_unmap_desc = 0xffffffff,
		.vpd_b2 = true, .lbpu = true, .lbpws = true, .lbpws10 = true,
		.rsoc = false,
	};
	return f;
}

struct row {
	const char *name;
	void (*tweak)(struct sd_facts *f);
	enum sd_zeroing zeroing;
	enum sd_prov prov;
	bool wz_unmap;
	uint32_t max_ws_blocks;
	uint32_t max_discard_blocks;
	const char *why_has;	/* a piece of the reason */
};

static void t_none(struct sd_facts *f) { (void)f; }
static void t_thick(struct sd_facts *f)
{
	/* tgt's thick LUN: LBPME 0, B2 all 0, B0 counts 0 */
	f->lbpme = f->lbprz = false;
	f->lbpu = f->lbpws = f->lbpws10 = false;
	f->max_unmap_lba = f->max_unmap_desc = 0;
}
static void t_no_lbprz(struct sd_facts *f) { f->lbprz = false; }
static void t_ws10_only(struct sd_facts *f) { f->lbpws = false; f->lbpu = false; }
static void t_unmap_only(struct sd_facts *f) { f->lbpws = f->lbpws10 = false; }
static void t_unmap_no_count(struct sd_facts *f)
{
	f->max_unmap_desc = 0;	/* sd: UNMAP needs both counts */
}
static void t_rsoc_none(struct sd_facts *f)
{
	t_thick(f);
	f->rsoc = true;		/* answered, lists no WRITE SAME */
}
static void t_rsoc_ws16(struct sd_facts *f) { f->rsoc = true; f->ws16 = true; }
static void t_rsoc_none_thin(struct sd_facts *f)
{
	f->rsoc = true;		/* thin, but no WRITE SAME: no write-zeroes */
}
static void t_big_ws(struct sd_facts *f)
{
	f->max_ws_len = 1u << 30; /* capped at sd's WS16 cap */
}
static void t_mid_ws(struct sd_facts *f)
{
	f->lbppbe = 0;
	f->max_ws_len = 0x20000; /* above WS10's range: kept */
}
static void t_small_ws(struct sd_facts *f)
{
	f->lbppbe = 0;
	f->max_ws_len = 1000;	/* below: the disk's own */
}
static void t_ws_refused(struct sd_facts *f) { f->no_write_same = true; }
static void t_ws10_big(struct sd_facts *f)
{
	t_ws10_only(f);
	f->lbppbe = 0;
	f->max_ws_len = 0x100000; /* WS10 UNMAP cannot carry more than 64Ki */
}
static void t_no_b2(struct sd_facts *f)
{
	/* LBPME but no provisioning page: nothing says which command */
	f->vpd_b2 = false;
	f->lbpu = f->lbpws = f->lbpws10 = false;
}
static void t_discard_refused(struct sd_facts *f) { f->no_discard = true; }
static void t_huge_ws64(struct sd_facts *f)
{
	f->max_ws_len = 0x100000000ull; /* sd would truncate this to 0 */
}

static const struct row rows[] = {
	{ "tgt thin", t_none, SD_ZERO_WS16_UNMAP, SD_LBP_UNMAP, true,
	  0xfff8, SD_MAX_WS16_BLOCKS, "LBPRZ=1 LBPWS=1" },
	{ "tgt thick", t_thick, SD_ZERO_WS, SD_LBP_FULL, false, 0xfff8, 0,
	  "LBPRZ=0" },
	{ "no LBPRZ", t_no_lbprz, SD_ZERO_WS, SD_LBP_UNMAP, false, 0xfff8,
	  SD_MAX_WS16_BLOCKS, "need not read as zeroes" },
	{ "LBPWS10 only", t_ws10_only, SD_ZERO_WS10_UNMAP, SD_LBP_WS10, true,
	  0xfff8, SD_MAX_WS10_BLOCKS, "LBPWS10=1" },
	{ "UNMAP only", t_unmap_only, SD_ZERO_WS, SD_LBP_UNMAP, false, 0xfff8,
	  SD_MAX_WS16_BLOCKS, "LBPWS=0" },
	{ "UNMAP without descriptors", t_unmap_no_count, SD_ZERO_WS16_UNMAP,
	  SD_LBP_WS16, true, 0xfff8, SD_MAX_WS16_BLOCKS, "LBPWS=1" },
	{ "RSOC lists no WS, thick", t_rsoc_none, SD_ZERO_WRITE, SD_LBP_FULL,
	  false, 0, 0, "lacks WRITE SAME(16)" },
	{ "RSOC lists WS16", t_rsoc_ws16, SD_ZERO_WS16_UNMAP, SD_LBP_UNMAP,
	  true, 0xfff8, SD_MAX_WS16_BLOCKS, "unmap zeroing" },
	{ "RSOC lists no WS, thin", t_rsoc_none_thin, SD_ZERO_WS16_UNMAP,
	  SD_LBP_UNMAP, false, 0, SD_MAX_WS16_BLOCKS, "no WRITE SAME" },
	{ "max write same 1 Gi blocks", t_big_ws, SD_ZERO_WS16_UNMAP,
	  SD_LBP_UNMAP, true, SD_MAX_WS16_BLOCKS - 7, SD_MAX_WS16_BLOCKS,
	  "WRITE SAME(16) UNMAP" },
	{ "max write same 128Ki", t_mid_ws, SD_ZERO_WS16_UNMAP, SD_LBP_UNMAP,
	  true, 0x20000, SD_MAX_WS16_BLOCKS, "unmap" },
	{ "max write same 1000", t_small_ws, SD_ZERO_WS16_UNMAP, SD_LBP_UNMAP,
	  true, 1000, SD_MAX_WS16_BLOCKS, "unmap" },
	{ "WRITE SAME refused", t_ws_refused, SD_ZERO_WS16_UNMAP, SD_LBP_UNMAP,
	  false, 0, SD_MAX_WS16_BLOCKS, "refused at run time" },
	{ "WS10 UNMAP, big max", t_ws10_big, SD_ZERO_WS10_UNMAP, SD_LBP_WS10,
	  true, SD_MAX_WS10_BLOCKS, SD_MAX_WS10_BLOCKS, "LBPWS10" },
	{ "LBPME without B2", t_no_b2, SD_ZERO_WS, SD_LBP_DISABLE, false,
	  0xfff8, 0, "LBPWS=0" },
	{ "discard refused", t_discard_refused, SD_ZERO_WS16_UNMAP,
	  SD_LBP_DISABLE, true, 0xfff8, 0, "unmap zeroing" },
	{ "max write same 2^32", t_huge_ws64, SD_ZERO_WS16_UNMAP, SD_LBP_UNMAP,
	  true, SD_MAX_WS16_BLOCKS - 7, SD_MAX_WS16_BLOCKS, "unmap" },
};

static void decision_table(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct sd_facts f = tgt_thin();
		struct sd_config c;

		r->tweak(&f);
		print_message("%s\n", r->name);
		assert_int_equal(sd_config_decide(&f, 0, &c), 0);
		assert_string_equal(sd_zeroing_name(c.zeroing),
				    sd_zeroing_name(r->zeroing));
		assert_string_equal(sd_prov_name(c.prov), sd_prov_name(r->prov));
		assert_int_equal(c.wz_unmap, r->wz_unmap);
		assert_int_equal(!!(c.limits.features &
				    BS_FEAT_WRITE_ZEROES_UNMAP), r->wz_unmap);
		assert_int_equal(c.max_ws_blocks, r->max_ws_blocks);
		assert_int_equal(c.limits.max_write_zeroes_sectors,
				 r->max_ws_blocks * (f.lbs / 512));
		assert_int_equal(c.max_discard_blocks, r->max_discard_blocks);
		assert_int_equal(c.limits.max_discard_sectors,
				 r->max_discard_blocks * (f.lbs / 512));
		assert_non_null(strstr(c.why, r->why_has));
	}
}

static void block_sizes_and_transfer(void **state)
{
	struct sd_facts f = tgt_thin();
	struct sd_config c;

	(void)state;
	assert_int_equal(sd_config_decide(&f, 0, &c), 0);
	assert_int_equal(c.limits.logical_block_size, 512);
	assert_int_equal(c.limits.physical_block_size, 4096);
	assert_int_equal(c.limits.max_hw_sectors, 2048);	/* 1 MiB */
	assert_int_equal(c.limits.discard_granularity, 4096);

	/* 4K logical blocks, a disk maximum under the driver's cap */
	f.lbs = 4096;
	f.lbppbe = 0;
	f.max_xfer_blocks = 64;		/* 256 KiB */
	f.opt_xfer_blocks = 32;
	f.unmap_gran = 16;
	assert_int_equal(sd_config_decide(&f, 4u << 20, &c), 0);
	assert_int_equal(c.limits.max_hw_sectors, 512);
	assert_int_equal(c.limits.io_opt, 128 * 1024);
	assert_int_equal(c.limits.discard_granularity, 64 * 1024);
	/* 0xffff blocks of 4 KiB in 512-byte sectors */
	assert_int_equal(c.limits.max_write_zeroes_sectors, 0xffff * 8);

	/* block sizes that cannot be */
	f.lbs = 520;
	assert_int_equal(sd_config_decide(&f, 0, &c), -EINVAL);
	f.lbs = 256;
	assert_int_equal(sd_config_decide(&f, 0, &c), -EINVAL);
}

static void cache_fua_rotation(void **state)
{
	struct sd_facts f = tgt_thin();
	struct sd_config c;

	(void)state;
	f.dpofua = true;	/* DPOFUA without a write cache: no FUA */
	assert_int_equal(sd_config_decide(&f, 0, &c), 0);
	assert_false(c.limits.features & BS_FEAT_WRITE_CACHE);
	assert_false(c.limits.features & BS_FEAT_FUA);
	assert_true(c.limits.features & BS_FEAT_ROTATIONAL);
	f.wce = true;
	f.vpd_b1 = true;
	f.rotation_rate = 1;
	assert_int_equal(sd_config_decide(&f, 0, &c), 0);
	assert_true(c.limits.features & BS_FEAT_WRITE_CACHE);
	assert_true(c.limits.features & BS_FEAT_FUA);
	assert_false(c.limits.features & BS_FEAT_ROTATIONAL);
}

static void nounmap_command(void **state)
{
	struct sd_facts f = tgt_thin();

	(void)state;
	assert_false(sd_nounmap_ws16(&f, 0, 0xffff));
	assert_true(sd_nounmap_ws16(&f, 0, 0x10000));
	assert_true(sd_nounmap_ws16(&f, 0x100000000ull, 1));
	f.ws16 = true;
	assert_true(sd_nounmap_ws16(&f, 0, 1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decision_table),
		cmocka_unit_test(block_sizes_and_transfer),
		cmocka_unit_test(cache_fua_rotation),
		cmocka_unit_test(nounmap_command),
	};

	return cmocka_run_group_tests_name("sd_config", tests, NULL, NULL);
}
