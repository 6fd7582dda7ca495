/* SPDX-License-Identifier: MIT */
/*
 * The nvmf host decision (lib/drivers/nvmf_config.c) against a table: what
 * a controller and namespace report -> DEAC, WRITE_ZEROES_UNMAP and the
 * limits, as Linux's nvme host (with the seed's patches) sets them; which
 * paths may join a multipath device; and the multipath limits. Sizes
 * whose bytes wrap 64 bits, and a path of such a namespace refused.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "drivers/nvmf.h"
#include "drivers/nvmf_config.h"
#include "helpers/th.h"

/* blkstack's own target over a capable file: 512-byte blocks, ONCS DSM +
 * Write Zeroes, DLFEAT = (1<<3)|1, no MDTS, a write cache */
static struct nvmf_facts capable(void)
{
	struct nvmf_facts f = {
		.lbads = 9, .nsze = 1u << 21, .mdts = 0, .mpsmin = 0,
		.oncs = NVMF_ONCS_DSM | NVMF_ONCS_WRITE_ZEROES,
		.dlfeat = 0x09, .vwc = 1,
	};
	return f;
}

struct row {
	const char *name;
	void (*tweak)(struct nvmf_facts *f);
	bool deac, wz_unmap;
	uint32_t max_wz_blocks;
	uint32_t max_hw_sectors;
	bool discard;
	const char *why_has;
};

static void t_none(struct nvmf_facts *f) { (void)f; }
static void t_dlfeat0(struct nvmf_facts *f) { f->dlfeat = 0; }
static void t_dlfeat1(struct nvmf_facts *f) { f->dlfeat = 1; }
static void t_dlfeat8(struct nvmf_facts *f) { f->dlfeat = 8; }
static void t_dlfeat2_8(struct nvmf_facts *f) { f->dlfeat = 0x0a; }
static void t_dlfeat_guard(struct nvmf_facts *f) { f->dlfeat = 0x19; }
static void t_no_wz(struct nvmf_facts *f) { f->oncs = NVMF_ONCS_DSM; }
static void t_wz_refused(struct nvmf_facts *f) { f->no_write_zeroes = true; }
static void t_no_dsm(struct nvmf_facts *f) { f->oncs = NVMF_ONCS_WRITE_ZEROES; }
static void t_mdts5(struct nvmf_facts *f) { f->mdts = 5; }	/* 128 KiB */
static void t_wzsl4(struct nvmf_facts *f) { f->wzsl = 4; }	/* 64 KiB */
static void t_4k(struct nvmf_facts *f) { f->lbads = 12; }
static void t_4k_wzsl(struct nvmf_facts *f)
{
	f->lbads = 12;
	f->mpsmin = 1;		/* 8 KiB pages */
	f->wzsl = 2;		/* 32 KiB = 8 blocks */
}

static const struct row rows[] = {
	{ "capable", t_none, true, true, 65536, 2048, true, "DLFEAT=0x09" },
	{ "DLFEAT 0", t_dlfeat0, false, false, 65536, 2048, true,
	  "not 001b" },
	{ "DLFEAT 1: zeroes but no DEAC", t_dlfeat1, false, false, 65536,
	  2048, true, "bit 3 clear" },
	{ "DLFEAT 8: DEAC but reads undefined", t_dlfeat8, false, false,
	  65536, 2048, true, "not 001b" },
	{ "DLFEAT 0x0a: reads 0xff", t_dlfeat2_8, false, false, 65536, 2048,
	  true, "bits 2:0 = 2" },
	{ "DLFEAT 0x19: guard bit beside", t_dlfeat_guard, true, true, 65536,
	  2048, true, "unmap zeroing" },
	{ "no Write Zeroes", t_no_wz, true, false, 0, 2048, true,
	  "ONCS lacks Write Zeroes" },
	{ "Write Zeroes refused", t_wz_refused, true, false, 0, 2048, true,
	  "refused at run time" },
	{ "no DSM", t_no_dsm, true, true, 65536, 2048, false, "unmap" },
	{ "MDTS 5", t_mdts5, true, true, 65536, 256, true, "unmap" },
	{ "WZSL 4", t_wzsl4, true, true, 128, 2048, true, "unmap" },
	{ "4 KiB blocks", t_4k, true, true, 65536, 2048, true, "unmap" },
	{ "4 KiB, 8 KiB pages, WZSL 2", t_4k_wzsl, true, true, 8, 2048, true,
	  "unmap" },
};

static void decision_table(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct nvmf_facts f = capable();
		struct nvmf_config c;

		r->tweak(&f);
		print_message("%s\n", r->name);
		assert_int_equal(nvmf_config_decide(&f, 0, &c), 0);
		assert_int_equal(c.deac, r->deac);
		assert_int_equal(c.wz_unmap, r->wz_unmap);
		assert_int_equal(!!(c.limits.features &
				    BS_FEAT_WRITE_ZEROES_UNMAP), r->wz_unmap);
		assert_int_equal(c.max_wz_blocks, r->max_wz_blocks);
		assert_int_equal(c.limits.max_write_zeroes_sectors,
				 (uint64_t)r->max_wz_blocks << (f.lbads - 9));
		assert_int_equal(c.limits.max_hw_sectors, r->max_hw_sectors);
		assert_int_equal(!!c.limits.max_discard_sectors, r->discard);
		assert_int_equal(c.limits.logical_block_size, 1u << f.lbads);
		assert_non_null(strstr(c.why, r->why_has));
	}
}

static void cache_and_bad_sizes(void **state)
{
	struct nvmf_facts f = capable();
	struct nvmf_config c;

	(void)state;
	assert_int_equal(nvmf_config_decide(&f, 0, &c), 0);
	assert_true(c.limits.features & BS_FEAT_WRITE_CACHE);
	assert_true(c.limits.features & BS_FEAT_FUA);
	assert_false(c.limits.features & BS_FEAT_ROTATIONAL);
	f.vwc = 0;
	assert_int_equal(nvmf_config_decide(&f, 0, &c), 0);
	assert_false(c.limits.features & (BS_FEAT_WRITE_CACHE | BS_FEAT_FUA));
	f.lbads = 8;
	assert_int_equal(nvmf_config_decide(&f, 0, &c), -EINVAL);
	f.lbads = 17;
	assert_int_equal(nvmf_config_decide(&f, 0, &c), -EINVAL);
	/* the driver's cap below MDTS */
	f = capable();
	assert_int_equal(nvmf_config_decide(&f, 65536, &c), 0);
	assert_int_equal(c.limits.max_hw_sectors, 128);
}

static struct nvmf_ids ids(const char *nqn, uint8_t n)
{
	struct nvmf_ids i = { .has_nguid = true, .has_eui64 = true };

	strcpy(i.subnqn, nqn);
	memset(i.nguid, n, 16);
	memset(i.eui64, n, 8);
	return i;
}

static void join_rules(void **state)
{
	struct nvmf_ids a = ids("nqn.x:a", 1), b = ids("nqn.x:a", 1);
	const char *field = NULL;

	(void)state;
	assert_int_equal(nvmf_ids_match(&a, &b, &field), 0);
	b = ids("nqn.x:b", 1);
	assert_int_equal(nvmf_ids_match(&a, &b, &field), -EINVAL);
	assert_string_equal(field, "subsystem NQN");
	b = ids("nqn.x:a", 1);
	b.nguid[15] = 9;
	assert_int_equal(nvmf_ids_match(&a, &b, &field), -EINVAL);
	assert_string_equal(field, "NGUID");
	b = ids("nqn.x:a", 1);
	b.eui64[0] = 9;
	assert_int_equal(nvmf_ids_match(&a, &b, &field), -EINVAL);
	assert_string_equal(field, "EUI64");
	b = ids("nqn.x:a", 1);
	a.has_uuid = b.has_uuid = true;
	b.uuid[3] = 1;
	assert_int_equal(nvmf_ids_match(&a, &b, &field), -EINVAL);
	assert_string_equal(field, "UUID");
	/* an identifier only one side reports is not compared */
	a = ids("nqn.x:a", 1);
	b = ids("nqn.x:a", 1);
	b.has_eui64 = false;
	b.eui64[0] = 7;
	assert_int_equal(nvmf_ids_match(&a, &b, &field), 0);
	/* nothing to compare: refused */
	a.has_nguid = a.has_eui64 = false;
	assert_int_equal(nvmf_ids_match(&a, &b, &field), -EINVAL);
	assert_string_equal(field, "no namespace identifier");
}

static void mpath_limits(void **state)
{
	struct nvmf_facts f = capable();
	struct nvmf_config on, off;
	struct bs_limits out, last, knob;
	const struct bs_limits *p[3];
	const char *names[3] = { "p0", "p1", "p2" };
	char why[192];

	(void)state;
	assert_int_equal(nvmf_config_decide(&f, 0, &on), 0);
	f.dlfeat = 0;
	assert_int_equal(nvmf_config_decide(&f, 0, &off), 0);
	bs_limits_finish(&on.limits);
	bs_limits_finish(&off.limits);

	/* every path has it: on */
	p[0] = p[1] = &on.limits;
	nvmf_mpath_limits(p, names, 2, NULL, &out, why, sizeof(why));
	assert_true(bs_limits_write_zeroes_unmap(&out));
	assert_non_null(strstr(why, "every live path (2)"));
	/* one path without DEAC clears it, naming the path */
	p[2] = &off.limits;
	nvmf_mpath_limits(p, names, 3, NULL, &out, why, sizeof(why));
	assert_false(bs_limits_write_zeroes_unmap(&out));
	assert_int_equal(out.max_write_zeroes_sectors, 65536);
	assert_non_null(strstr(why, "path p2"));
	/* it leaves: back on */
	nvmf_mpath_limits(p, names, 2, NULL, &out, why, sizeof(why));
	assert_true(bs_limits_write_zeroes_unmap(&out));
	/* a path whose knob is off counts as lacking */
	knob = on.limits;
	knob.flags |= BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED;
	p[1] = &knob;
	nvmf_mpath_limits(p, names, 2, NULL, &out, why, sizeof(why));
	assert_false(bs_limits_write_zeroes_unmap(&out));
	assert_non_null(strstr(why, "path p1"));
	/* no live path: the last shape is kept */
	last = on.limits;
	nvmf_mpath_limits(p, names, 0, &last, &out, why, sizeof(why));
	assert_memory_equal(&out, &last, sizeof(out));
}

/* NSZE blocks of 2^LBADS bytes: refused where the bytes wrap 64 bits. */
static void size_bounds(void **state)
{
	static const struct {
		uint64_t nsze;
		uint8_t lbads;
		int err;
		uint64_t bytes;
	} sizes[] = {
		{ 1u << 21, 9, 0, 1ull << 30 },
		{ (1ull << 55) - 1, 9, 0, ((1ull << 55) - 1) << 9 },
		{ 1ull << 55, 9, -EOVERFLOW, 0 },		/* 2^64 */
		{ (1ull << 56) + 1, 9, -EOVERFLOW, 0 },	/* wrapped to 512 */
		{ (1ull << 48) - 1, 16, 0, ((1ull << 48) - 1) << 16 },
		{ 1ull << 48, 16, -EOVERFLOW, 0 },
		{ UINT64_MAX, 9, -EOVERFLOW, 0 },
		{ UINT64_MAX, 0, 0, UINT64_MAX },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		uint64_t b = 7;

		assert_int_equal(nvmf_size_bytes(sizes[i].nsze, sizes[i].lbads,
						 &b), sizes[i].err);
		assert_true(b == (sizes[i].err ? 7 : sizes[i].bytes));
	}
}

/*
 * A path whose namespace is 2^56 + 1 blocks of 512 bytes: joining it
 * once made the device 512 bytes (the size wrapped); it is refused now,
 * naming the device, and the device keeps no shape from it.
 */
static void path_size_overflow(void **state)
{
	static struct nvmf m;
	static struct nvc c;
	static struct bs_dev dev;

	(void)state;
	memset(&m, 0, sizeof(m));
	memset(&c, 0, sizeof(c));
	memset(&dev, 0, sizeof(dev));
	snprintf(dev.name, sizeof(dev.name), "vol7");
	m.dev = &dev;
	m.npaths = 1;
	m.max_io = 1u << 20;
	c.m = &m;
	c.url = "nvme+tcp://127.0.0.1:4420/nqn.x/1";
	c.facts = capable();
	c.facts.nsze = (1ull << 56) + 1;
	c.ids.has_nguid = true;
	assert_int_equal(nvmf_path_up(&m, &c), -EOVERFLOW);
	assert_true(dev.size == 0);
	assert_false(m.have_shape);
	assert_non_null(strstr(c.last_error, "vol7"));
	assert_non_null(strstr(c.last_error, "past 2^64 bytes"));
	assert_non_null(strstr(bs_last_error(), "vol7"));
	/* the largest that fits joins, with its whole size */
	c.facts.nsze = (1ull << 55) - 1;
	assert_int_equal(nvmf_path_up(&m, &c), 0);
	assert_true(dev.size == ((1ull << 55) - 1) << 9);
	/* and growing past 2^64 bytes later keeps the size, loses the path
	 * (a path not live: nvc_lost() has nothing to close) */
	c.state = NVC_DOWN;
	c.facts.nsze = 1ull << 60;
	nvmf_path_changed(&m, &c);
	assert_true(dev.size == ((1ull << 55) - 1) << 9);
	assert_true(m.nsze == (1ull << 55) - 1);
	assert_non_null(strstr(bs_last_error(), "re-identify"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decision_table),
		cmocka_unit_test(cache_and_bad_sizes),
		cmocka_unit_test(join_rules),
		cmocka_unit_test(mpath_limits),
		cmocka_unit_test(size_bounds),
		cmocka_unit_test(path_size_overflow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
