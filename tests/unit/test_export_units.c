/* SPDX-License-Identifier: MIT */
/*
 * Targets with units: a `device =` export is one unit named like the
 * export; `unit.NAME = DEV` lines make several, in config order, with
 * per-unit readonly and description; each unit claims its own device; bad
 * unit lines and NBD export names clashing on one listener are refused
 * naming FILE:LINE.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/config.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "helpers/th.h"

/* ---- a stub export type: units without a network ------------------------ */

static int stub_open(struct bs_export *exp, struct bs_opts *opts)
{
	(void)opts;
	(void)exp;
	return 0;
}

static void stub_close(struct bs_export *exp)
{
	(void)exp;
}

static const struct bs_export_type stub_export = {
	.name = "ustub",
	.summary = "test export",
	.options = "",
	.open = stub_open,
	.close = stub_close,
};

BS_EXPORT_TYPE(stub_export)

static const char devs[] =
	"[device d0]\ntype = mem\nsize = 1M\n"		/* lines 1-3 */
	"[device d1]\ntype = mem\nsize = 2M\n";		/* lines 4-6 */

/* Load devs + @exports, create the devices once per context. */
static struct bs_config *load(struct bs_ctx *ctx, const char *exports)
{
	struct bs_config *cfg;
	char *text;

	assert_true(asprintf(&text, "%s%s", devs, exports) > 0);
	assert_int_equal(bs_config_load_string(text, "u.ini", &cfg), 0);
	free(text);
	assert_int_equal(bs_config_check_devices(cfg, NULL), 0);
	if (!bs_dev_find(ctx, "d0"))
		assert_int_equal(bs_config_create_devices(cfg, ctx), 0);
	return cfg;
}

/* Check and create the exports of @exports into @set; returns the error. */
static int try_exports(struct bs_ctx *ctx, struct bs_exports *set,
		       const char *exports)
{
	struct bs_config *cfg = load(ctx, exports);
	int err = bs_config_check_exports(cfg);

	if (!err)
		err = bs_config_create_exports(cfg, set);
	bs_config_free(cfg);
	return err;
}

static const char *holder_of(struct bs_dev *dev, unsigned i)
{
	const struct bs_claim *c = NULL;

	do
		c = bs_dev_claim_next(dev, c);
	while (c && i--);
	return c ? bs_claim_holder(c) : NULL;
}

/* An old config: `device =` is one unit named like the export. */
static void device_is_one_unit(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_exports *set;
	struct bs_export *e;

	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_int_equal(try_exports(ctx, set,
				     "[export vol0]\ntype = ustub\n"
				     "device = d0\nreadonly = 1\n"
				     "description = old\n"), 0);
	e = bs_export_find(set, "vol0");
	assert_non_null(e);
	assert_int_equal(e->nunits, 1);
	assert_string_equal(e->units[0].name, "vol0");
	assert_ptr_equal(e->units[0].exp, e);
	assert_string_equal(e->units[0].dev->name, "d0");
	assert_true(e->units[0].readonly);
	assert_string_equal(e->units[0].description, "old");
	assert_ptr_equal(bs_export_unit_find(e, "vol0"), &e->units[0]);
	assert_null(bs_export_unit_find(e, "d0"));
	assert_string_equal(holder_of(e->units[0].dev, 0), "export ustub/vol0");
	bs_exports_free(set);
	/* the claim went with the export */
	assert_null(holder_of(bs_dev_find(ctx, "d0"), 0));
}

/* unit.NAME lines: config order, per-unit readonly and description. */
static void units_in_order(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_exports *set;
	struct bs_export *e;
	char label[600];

	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_int_equal(try_exports(ctx, set,
				     "[export t]\ntype = ustub\n"
				     "description = shared text\n"
				     "unit.zz = d1\n"
				     "unit.a = d0\n"
				     "unit.a.readonly = 1\n"
				     "unit.zz.description = big one\n"
				     "unit.again = d0\n"), 0);
	e = bs_export_find(set, "t");
	assert_non_null(e);
	assert_int_equal(e->nunits, 3);
	assert_string_equal(e->units[0].name, "zz");
	assert_string_equal(e->units[1].name, "a");
	assert_string_equal(e->units[2].name, "again");
	assert_int_equal(e->units[1].index, 1);
	assert_string_equal(e->units[0].dev->name, "d1");
	assert_string_equal(e->units[1].dev->name, "d0");
	assert_false(e->units[0].readonly);
	assert_true(e->units[1].readonly);
	assert_false(e->units[2].readonly);
	assert_string_equal(e->units[0].description, "big one");
	assert_string_equal(e->units[1].description, "shared text");
	assert_ptr_equal(bs_export_unit_find(e, "again"), &e->units[2]);
	/* one claim per unit, named after the unit */
	assert_string_equal(holder_of(e->units[0].dev, 0),
			    "export ustub/t/zz");
	assert_string_equal(holder_of(e->units[1].dev, 0), "export ustub/t/a");
	assert_string_equal(holder_of(e->units[1].dev, 1),
			    "export ustub/t/again");
	assert_string_equal(bs_export_unit_label(&e->units[1], label,
						 sizeof(label)),
			    "export t unit a");
	bs_exports_free(set);

	/* readonly = 1 on the export covers every unit */
	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_int_equal(try_exports(ctx, set,
				     "[export t]\ntype = ustub\nreadonly = 1\n"
				     "unit.a = d0\nunit.b = d1\n"
				     "unit.b.readonly = 0\n"), 0);
	e = bs_export_find(set, "t");
	assert_true(e->units[0].readonly && e->units[1].readonly);
	bs_exports_free(set);
}

/* Bad unit lines fail the config check, naming the line. */
static void unit_errors(void **state)
{
	static const struct {
		const char *text, *msg;
		int err;
	} cases[] = {
		{ "[export t]\ntype = ustub\ndevice = d0\nunit.a = d1\n",
		  "u.ini:10: export t: 'unit.a' beside 'device =': give either "
		  "one device (device = DEV) or units (unit.NAME = DEV), not "
		  "both", -EINVAL },
		{ "[export t]\ntype = ustub\nunit.a = d0\n"
		  "unit.b.readonly = 1\n",
		  "u.ini:10: export t: unit.b.readonly: no unit 'b' (define it "
		  "with unit.b = DEVICE)", -EINVAL },
		{ "[export t]\ntype = ustub\nunit.a = d0\nunit.b = nosuch\n",
		  "u.ini:10: export t: device 'nosuch' does not exist",
		  -ENOENT },
		{ "[export t]\ntype = ustub\nunit.a =\n",
		  "u.ini:9: export t: unit.a: no device given (unit.NAME = "
		  "DEVICE)", -EINVAL },
		{ "[export t]\ntype = ustub\nunit.a = d0\n"
		  "unit.a.readonly = 2\n",
		  NULL, -EINVAL },
		{ "[export t]\ntype = ustub\n",
		  "u.ini:7: export t: no 'device' given (device = DEV, or "
		  "unit.NAME = DEV lines)", -EINVAL },
		{ "[export t]\ntype = ustub\nunits = a\n",
		  "u.ini:9: t: unknown key 'units'", -EINVAL },
		{ "[export t]\ntype = ustub\nunit. = d0\n",
		  "u.ini:9: t: unknown key 'unit.'", -EINVAL },
	};
	struct bs_ctx *ctx = *state;
	struct bs_config *cfg;
	unsigned i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cfg = load(ctx, cases[i].text);
		assert_int_equal(bs_config_check_exports(cfg), cases[i].err);
		if (cases[i].msg)
			assert_string_equal(bs_last_error(), cases[i].msg);
		else
			assert_non_null(strstr(bs_last_error(), "u.ini:10:"));
		bs_config_free(cfg);
		/* the devices of this round go; the next load makes them */
		bs_ctx_free(ctx);
		assert_int_equal(bs_ctx_new(&ctx), 0);
		*state = ctx;
	}
}

/*
 * NBD: every unit is an export name of its listener; two units of
 * different targets with one name on one listener are refused at the line
 * of the second, on two listeners they are fine.
 */
static void nbd_name_clash(void **state)
{
	struct bs_ctx *ctx = *state;
	char dir[] = "/tmp/bs-units-XXXXXX", *text;
	struct bs_exports *set;
	int err;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_true(asprintf(&text,
			     "[export t]\ntype = nbd\nsocket = %s/s\n"
			     "unit.a = d0\nunit.b = d1\n"	/* 10, 11 */
			     "[export u]\ntype = nbd\nsocket = %s/s\n"
			     "unit.c = d1\nunit.b = d0\n",	/* 15, 16 */
			     dir, dir) > 0);
	err = try_exports(ctx, set, text);
	free(text);
	assert_int_equal(err, -EEXIST);
	assert_string_equal(strstr(bs_last_error(), "u.ini:16:") ?
			    "found" : bs_last_error(), "found");
	assert_non_null(strstr(bs_last_error(), "export u: NBD export name "
			       "'b' is already served on unix:"));
	assert_non_null(strstr(bs_last_error(), "by export t"));
	bs_exports_free(set);

	/* a one-device export named like a unit of another target */
	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_true(asprintf(&text,
			     "[export t]\ntype = nbd\nsocket = %s/s\n"
			     "unit.a = d0\nunit.b = d1\n"
			     "[export a]\ntype = nbd\nsocket = %s/s\n"
			     "device = d0\n",			/* 15 */
			     dir, dir) > 0);
	err = try_exports(ctx, set, text);
	free(text);
	assert_int_equal(err, -EEXIST);
	assert_non_null(strstr(bs_last_error(), "u.ini:15: export a: NBD "
			       "export name 'a' is already served"));
	bs_exports_free(set);

	/* on two listeners one name is fine */
	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_true(asprintf(&text,
			     "[export t]\ntype = nbd\nsocket = %s/s\n"
			     "unit.a = d0\nunit.b = d1\n"
			     "[export u]\ntype = nbd\nsocket = %s/s2\n"
			     "unit.b = d0\n",
			     dir, dir) > 0);
	err = try_exports(ctx, set, text);
	free(text);
	if (err)
		fail_msg("%s", bs_last_error());
	assert_int_equal(bs_export_find(set, "u")->nunits, 1);
	bs_exports_free(set);
	assert_true(asprintf(&text, "%s/s", dir) > 0);
	unlink(text);
	free(text);
	assert_true(asprintf(&text, "%s/s2", dir) > 0);
	unlink(text);
	free(text);
	assert_int_equal(rmdir(dir), 0);
}

/*
 * iSCSI targets share an address like NBD exports (lib/export/net/share.c):
 * one IQN per address, and the same connection settings on it.
 */
static void iscsi_shared_address(void **state)
{
	struct bs_ctx *ctx = *state;
	unsigned port = th_free_port();
	struct bs_exports *set;
	char *text;
	int err;

	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_true(asprintf(&text,
			     "[export t]\ntype = iscsi\nlisten = 127.0.0.1:%u\n"
			     "iqn = iqn.2026-12.test:a\ndevice = d0\n"
			     "[export u]\ntype = iscsi\nlisten = 127.0.0.1:%u\n"
			     "iqn = iqn.2026-12.test:a\ndevice = d1\n",
			     port, port) > 0);
	err = try_exports(ctx, set, text);
	free(text);
	assert_int_equal(err, -EEXIST);
	assert_non_null(strstr(bs_last_error(), "export u: iqn "
			       "iqn.2026-12.test:a is already served on "
			       "127.0.0.1:"));
	assert_non_null(strstr(bs_last_error(), "by export t"));
	bs_exports_free(set);

	/* one listener, one set of limits for every target on it */
	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_true(asprintf(&text,
			     "[export t]\ntype = iscsi\nlisten = 127.0.0.1:%u\n"
			     "iqn = iqn.2026-12.test:a\ndevice = d0\n"
			     "[export u]\ntype = iscsi\nlisten = 127.0.0.1:%u\n"
			     "iqn = iqn.2026-12.test:b\ndevice = d1\n"
			     "max_connections = 7\n",
			     port, port) > 0);
	err = try_exports(ctx, set, text);
	free(text);
	assert_int_equal(err, -EINVAL);
	assert_non_null(strstr(bs_last_error(), "export u: 127.0.0.1:"));
	assert_non_null(strstr(bs_last_error(), "is shared with export t but "
			       "with other connection settings"));
	bs_exports_free(set);

	/* two names, one address: both served; closing one keeps the other */
	assert_int_equal(bs_exports_new(ctx, &set), 0);
	assert_true(asprintf(&text,
			     "[export t]\ntype = iscsi\nlisten = 127.0.0.1:%u\n"
			     "iqn = iqn.2026-12.test:a\ndevice = d0\n"
			     "[export u]\ntype = iscsi\nlisten = 127.0.0.1:%u\n"
			     "iqn = iqn.2026-12.test:b\ndevice = d1\n",
			     port, port) > 0);
	err = try_exports(ctx, set, text);
	free(text);
	if (err)
		fail_msg("%s", bs_last_error());
	assert_non_null(bs_export_find(set, "t"));
	assert_non_null(bs_export_find(set, "u"));
	bs_exports_free(set);
}

/* A capability change is logged once per unit, naming the unit. */
static char last_log[1024];
static unsigned nlogs;

static void log_fn(void *arg, const char *msg)
{
	(void)arg;
	nlogs++;
	snprintf(last_log, sizeof(last_log), "%s", msg);
}

static void caps_per_unit(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_exports *set;

	assert_int_equal(bs_exports_new(ctx, &set), 0);
	bs_exports_set_log(set, log_fn, NULL);
	assert_int_equal(try_exports(ctx, set,
				     "[export t]\ntype = ustub\n"
				     "unit.a = d0\nunit.b = d1\n"), 0);
	nlogs = 0;
	assert_int_equal(bs_attr_store(bs_dev_find(ctx, "d1"),
				     "queue/write_zeroes_unmap", "0"), 0);
	for (int i = 0; i < 4; i++)
		bs_loop_run_once(bs_ctx_loop(ctx), 0);
	assert_int_equal(nlogs, 1);
	assert_non_null(strstr(last_log, "export t unit b: device d1 "
			       "capabilities changed"));
	bs_exports_free(set);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(device_is_one_unit,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(units_in_order, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(unit_errors, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(iscsi_shared_address,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(nbd_name_clash, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(caps_per_unit, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
