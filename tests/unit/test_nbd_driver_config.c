/* SPDX-License-Identifier: MIT */
/*
 * The nbd driver's pure parts (lib/drivers/nbd_config.c): options and URI
 * schemes, and the capability decision against a table of servers (what
 * nbdkit, qemu-nbd and blkstackd offer, and the corners between).
 */
#include <errno.h>
#include <string.h>

#include <blkstack/opts.h>

#include "drivers/nbd_config.h"
#include "helpers/th.h"

/* nbdkit's file plugin: everything but fast zero, no block sizes. */
static struct nbdc_facts nbdkit_file(void)
{
	struct nbdc_facts f = {
		.size = 64 << 20, .can_flush = true, .can_fua = true,
		.can_trim = true, .can_zero = true, .can_multi_conn = true,
		.base_allocation = true,
	};
	return f;
}

static struct nbdc_opts def_opts(void)
{
	struct nbdc_opts o = {
		.uri = (char *)"nbd://x", .connections = 4, .timeout_s = 30,
		.reconnect_ms = 1000, .max_retries = 5, .down_after_s = 60,
		.max_io = 1 << 20,
	};
	return o;
}

struct row {
	const char *name;
	void (*tweak)(struct nbdc_facts *f);
	bool wz_unmap;
	bool has_zero;
	bool has_trim;
	unsigned conns;
	const char *why_has;	/* a piece of the reason */
};

static void t_none(struct nbdc_facts *f) { (void)f; }
static void t_fast(struct nbdc_facts *f) { f->can_fast_zero = true; }
static void t_nozero(struct nbdc_facts *f)
{
	/* nbdkit --filter=nozero */
	f->can_zero = false;
}
static void t_fast_notrim(struct nbdc_facts *f)
{
	f->can_fast_zero = true;
	f->can_trim = false;
}
static void t_qemu(struct nbdc_facts *f)
{
	/* qemu-nbd: fast zero, trim, no multi-conn, block sizes */
	f->can_fast_zero = true;
	f->can_multi_conn = false;
	f->bs_min = 1;
	f->bs_pref = 4096;
	f->bs_max = 32 << 20;
}
static void t_fast_ro(struct nbdc_facts *f)
{
	f->can_fast_zero = true;
	f->read_only = true;
}
static void t_fast_broken(struct nbdc_facts *f)
{
	f->can_fast_zero = true;
	f->zero_broken = true;
}

static const struct row rows[] = {
	{ "nbdkit file", t_none, false, true, true, 4,
	  "server does not offer fast zero" },
	{ "fast zero + trim", t_fast, true, true, true, 4,
	  "WRITE_ZEROES, fast zero and TRIM -> unmap zeroing" },
	{ "nozero filter", t_nozero, false, false, true, 4,
	  "server does not offer WRITE_ZEROES" },
	{ "fast zero, no trim", t_fast_notrim, false, true, false, 4,
	  "no TRIM (it cannot deallocate)" },
	{ "qemu-nbd", t_qemu, true, true, true, 1, "unmap zeroing" },
	{ "read-only", t_fast_ro, false, false, false, 4, "read-only" },
	{ "zero refused at run time", t_fast_broken, false, false, true, 4,
	  "refused at run time" },
};

static void decision_table(void **state)
{
	struct nbdc_opts o = def_opts();
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		struct nbdc_facts f = nbdkit_file();
		struct nbdc_config c;

		r->tweak(&f);
		assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
		if (c.wz_unmap != r->wz_unmap ||
		    !!(c.limits.features & BS_FEAT_WRITE_ZEROES_UNMAP) !=
			    r->wz_unmap ||
		    !!c.limits.max_write_zeroes_sectors != r->has_zero ||
		    !!c.limits.max_discard_sectors != r->has_trim ||
		    c.conns != r->conns || !strstr(c.why, r->why_has))
			fail_msg("%s: wz_unmap %d zero %u trim %u conns %u why "
				 "'%s'", r->name, c.wz_unmap,
				 c.limits.max_write_zeroes_sectors,
				 c.limits.max_discard_sectors, c.conns, c.why);
	}
}

static void reasons_for_every_no(void **state)
{
	struct nbdc_opts o = def_opts();
	struct nbdc_facts f = { .size = 1 << 20 };	/* offers nothing */
	struct nbdc_config c;

	(void)state;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
	assert_non_null(strstr(c.zero_why, "server does not offer WRITE_ZEROES"));
	assert_non_null(strstr(c.trim_why, "server does not offer TRIM"));
	assert_non_null(strstr(c.flush_why, "server does not offer FLUSH"));
	assert_non_null(strstr(c.fua_why, "no: "));
	assert_non_null(strstr(c.status_why, "base:allocation"));
	assert_non_null(strstr(c.conns_why, "does not offer multi-conn"));
	assert_int_equal(c.limits.features &
			 (BS_FEAT_WRITE_CACHE | BS_FEAT_FUA), 0);
	/* flush without FUA: the core flushes after */
	f.can_flush = true;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
	assert_true(c.limits.features & BS_FEAT_WRITE_CACHE);
	assert_false(c.limits.features & BS_FEAT_FUA);
	assert_non_null(strstr(c.fua_why, "the core flushes after"));
}

static void block_sizes_and_size(void **state)
{
	struct nbdc_opts o = def_opts();
	struct nbdc_facts f = nbdkit_file();
	struct nbdc_config c;

	(void)state;
	/* minimum 1 -> 512; preferred 4096 -> physical; maximum caps I/O */
	f.bs_min = 1;
	f.bs_pref = 4096;
	f.bs_max = 256 << 10;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
	assert_int_equal(c.limits.logical_block_size, 512);
	assert_int_equal(c.limits.physical_block_size, 4096);
	assert_int_equal(c.limits.max_hw_sectors, (256 << 10) >> 9);
	/* no maximum: max_io */
	f.bs_max = 0;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
	assert_int_equal(c.limits.max_hw_sectors, (1 << 20) >> 9);
	/* minimum 4096 is the logical block */
	f.bs_min = 4096;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
	assert_int_equal(c.limits.logical_block_size, 4096);
	/* a size not whole blocks loses its tail, and says so */
	f.size = (1 << 20) + 100;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
	assert_int_equal(c.size, 1 << 20);
	assert_non_null(strstr(c.size_why, "last 100 bytes"));
	/* below one block: refused */
	f.size = 100;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), -EINVAL);
	assert_non_null(strstr(c.why, "below one block"));
	/* a maximum below the minimum, a minimum above 64K: refused */
	f = nbdkit_file();
	f.bs_min = 4096;
	f.bs_max = 2048;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), -EINVAL);
	f.bs_max = 0;
	f.bs_min = 1 << 17;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), -EINVAL);
	/* read-only and rotational go through */
	f = nbdkit_file();
	f.read_only = f.rotational = true;
	assert_int_equal(nbdc_config_decide(&f, &o, &c), 0);
	assert_true(c.readonly);
	assert_true(c.limits.features & BS_FEAT_ROTATIONAL);
}

static void zero_flags(void **state)
{
	(void)state;
	/* may unmap only when the request allows it and the device has
	 * unmap zeroing (fast zero, trim, knob on) */
	assert_false(nbdc_zero_no_hole(false, true));
	assert_true(nbdc_zero_no_hole(true, true));
	assert_true(nbdc_zero_no_hole(false, false));
	assert_true(nbdc_zero_no_hole(true, false));
}

static int parse(const char *const *kv, struct nbdc_opts *o)
{
	struct bs_opts *opts;
	int err;

	assert_int_equal(bs_opts_new(&opts), 0);
	for (; *kv; kv += 2)
		assert_int_equal(bs_opts_set(opts, kv[0], kv[1], "test"), 0);
	err = nbdc_opts_parse(opts, "d", o);
	bs_opts_free(opts);
	return err;
}

static void options(void **state)
{
	struct nbdc_opts o;

	(void)state;
	{
		const char *kv[] = { "uri", "nbd+unix:///e?socket=/tmp/s", NULL };

		assert_int_equal(parse(kv, &o), 0);
		assert_string_equal(o.uri, "nbd+unix:///e?socket=/tmp/s");
		assert_int_equal(o.connections, 4);
		assert_int_equal(o.timeout_s, 30);
		assert_int_equal(o.reconnect_ms, 1000);
		assert_int_equal(o.down_after_s, 60);
		assert_int_equal(o.max_io, 1 << 20);
		nbdc_opts_free(&o);
	}
	{
		const char *kv[] = { "uri", "nbd://h:10809/x", "connections", "8",
				     "timeout", "5", "reconnect_ms", "50",
				     "max_io", "4M", "down_after", "0", NULL };

		assert_int_equal(parse(kv, &o), 0);
		assert_int_equal(o.down_after_s, 0);
		assert_int_equal(o.connections, 8);
		assert_int_equal(o.timeout_s, 5);
		assert_int_equal(o.reconnect_ms, 50);
		assert_int_equal(o.max_io, 4 << 20);
		nbdc_opts_free(&o);
	}
	{
		const char *none[] = { NULL };
		const char *http[] = { "uri", "http://h/x", NULL };
		const char *c0[] = { "uri", "nbd://h", "connections", "0", NULL };
		const char *c17[] = { "uri", "nbd://h", "connections", "17", NULL };
		const char *t0[] = { "uri", "nbd://h", "timeout", "0", NULL };
		const char *io[] = { "uri", "nbd://h", "max_io", "3M", NULL };
		const char *r5[] = { "uri", "nbd://h", "reconnect_ms", "5", NULL };
		const char *dn[] = { "uri", "nbd://h", "down_after", "86401",
				     NULL };

		assert_int_equal(parse(none, &o), -EINVAL);
		assert_non_null(strstr(bs_last_error(), "needs uri"));
		assert_int_equal(parse(http, &o), -EINVAL);
		assert_non_null(strstr(bs_last_error(), "not an NBD URI"));
		assert_int_equal(parse(c0, &o), -EINVAL);
		assert_int_equal(parse(c17, &o), -EINVAL);
		assert_int_equal(parse(t0, &o), -EINVAL);
		assert_int_equal(parse(io, &o), -EINVAL);
		assert_int_equal(parse(r5, &o), -EINVAL);
		assert_int_equal(parse(dn, &o), -EINVAL);
		assert_non_null(strstr(bs_last_error(), "down_after 0..86400"));
	}
	assert_true(nbdc_uri_scheme_ok("nbds+unix:///?socket=/s"));
	assert_true(nbdc_uri_scheme_ok("nbd+vsock:///"));
	assert_false(nbdc_uri_scheme_ok("nbdx://h"));
	assert_false(nbdc_uri_scheme_ok(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decision_table),
		cmocka_unit_test(reasons_for_every_no),
		cmocka_unit_test(block_sizes_and_size),
		cmocka_unit_test(zero_flags),
		cmocka_unit_test(options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
