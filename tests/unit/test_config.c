/* SPDX-License-Identifier: MIT */
/* INI config and device specs: order, errors with file and line. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/config.h>
#include <blkstack/opts.h>

#include "helpers/th.h"

static int load_and_create(const char *text, struct bs_ctx **ctxp)
{
	struct bs_config *cfg = NULL;
	struct bs_ctx *ctx;
	int err;

	assert_int_equal(bs_ctx_new(&ctx), 0);
	err = bs_config_load_string(text, "t.ini", &cfg);
	if (!err)
		err = bs_config_create_devices(cfg, ctx);
	bs_config_free(cfg);
	if (ctxp && !err)
		*ctxp = ctx;
	else
		bs_ctx_free(ctx);
	return err;
}

static void dependency_order(void **state)
{
	struct bs_ctx *ctx = NULL;
	struct bs_dev *d;

	(void)state;
	/* the knob is set at start; components may come after their users */
	assert_int_equal(load_and_create("[device a]\n"
					 "type = mem\n"
					 "size = 16M\n"
					 "write_zeroes_unmap = 0\n"
					 "[export e]\n"
					 "device = a\n"
					 "[daemon]\n"
					 "state_dir = /tmp\n"
					 "[device b]\n"
					 "type = mem\n"
					 "size = 1G ; inline comment\n",
					 &ctx),
			 0);
	d = bs_dev_find(ctx, "a");
	assert_non_null(d);
	assert_false(bs_dev_write_zeroes_unmap(d));
	d = bs_dev_find(ctx, "b");
	assert_non_null(d);
	assert_int_equal(d->size, 1 << 30);
	assert_true(bs_dev_write_zeroes_unmap(d));
	bs_ctx_free(ctx);
}

static void errors_name_file_and_line(void **state)
{
	static const struct {
		const char *text;
		int err;
		const char *msg;
	} rows[] = {
		{ "[device a]\ntype = mem\nsize = 1M\ncolour = red\n", -EINVAL,
		  "t.ini:4: a: unknown key 'colour'" },
		{ "[device a]\ntype = mem\n", -EINVAL, "mem needs size" },
		{ "[device a]\ntype = nosuch\nsize = 1M\n", -EINVAL,
		  "t.ini:2: a: unknown device type 'nosuch'" },
		{ "[device a]\ntype = mem\nsize = lots\n", -EINVAL,
		  "t.ini:3: a: size = 'lots'" },
		{ "[device a]\ntype = mem\nsize = 1M\n[device a]\ntype = mem\n",
		  -EINVAL, "t.ini:4: [device a] defined twice (first at line 1)" },
		{ "[disk a]\ntype = mem\n", -EINVAL, "t.ini:1: unknown section" },
		{ "type = mem\n", -EINVAL, "t.ini:1: 'type' is outside" },
		{ "[device a]\ntype = mem\ntype = mem\n", -EINVAL,
		  "t.ini:3: [device a]: 'type' given twice" },
		{ "[device a]\nthis is not ini\n", -EINVAL, "t.ini:2: syntax" },
		{ "[device a]\ntype = mem\nsize = 1M\nwrite_zeroes_unmap = 2\n",
		  -EINVAL, "t.ini:4: a: write_zeroes_unmap = '2'" },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int err = load_and_create(rows[i].text, NULL);
		print_message("row %u: %s\n", i, bs_last_error());
		assert_int_equal(err, rows[i].err);
		assert_non_null(strstr(bs_last_error(), rows[i].msg));
	}
}

/* The value of @key in the section @kind/@name of @cfg (marks it used). */
static const char *val(struct bs_config *cfg, const char *kind,
		       const char *name, const char *key)
{
	struct bs_config_section *s = NULL;

	while ((s = bs_config_next(cfg, kind, s)))
		if (!strcmp(s->name, name))
			return bs_opts_get(s->opts, key);
	return NULL;
}

/* Inline comments as the README's own examples use them. */
static void inline_comments(void **state)
{
	struct bs_config *cfg = NULL;

	(void)state;
	assert_int_equal(bs_config_load_string(
				 "\xef\xbb\xbf# whole line\n"
				 "  ; indented whole line\n"
				 "[daemon]   # the daemon\n"
				 "state_dir = /var/lib/blkstack      # default ./var\n"
				 "control = /run/blkstack.sock\t; tab, then ;\n"
				 "[device  d0 ]\r\n"
				 "type=file\r\n"
				 "path = /srv/a#b;c.img\n"
				 "size = 100G#no blank: part of the value\n"
				 "description = # only a comment\n"
				 "[export d0]\n"
				 "listen = 127.0.0.1:10809 [::1]:10809 # two\n",
				 "t.ini", &cfg),
			 0);
	assert_string_equal(val(cfg, "daemon", "", "state_dir"),
			    "/var/lib/blkstack");
	assert_string_equal(val(cfg, "daemon", "", "control"),
			    "/run/blkstack.sock");
	assert_string_equal(val(cfg, "device", "d0", "type"), "file");
	assert_string_equal(val(cfg, "device", "d0", "path"), "/srv/a#b;c.img");
	assert_string_equal(val(cfg, "device", "d0", "size"),
			    "100G#no blank: part of the value");
	assert_string_equal(val(cfg, "device", "d0", "description"), "");
	assert_string_equal(val(cfg, "export", "d0", "listen"),
			    "127.0.0.1:10809 [::1]:10809");
	assert_string_equal(bs_config_next(cfg, "device", NULL)->name, "d0");
	assert_int_equal(bs_config_next(cfg, "device", NULL)->line, 6);
	bs_config_free(cfg);
}

/* Lines of any sensible length; errors after them name the right line. */
static void long_lines(void **state)
{
	struct bs_config *cfg = NULL;
	char path[3000], *text;
	size_t n;

	(void)state;
	memset(path, 'p', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	n = 2 * sizeof(path) + 200;
	text = malloc(n);
	assert_non_null(text);
	snprintf(text, n, "[device a]\ntype = file\npath = %s\n"
		 "description = %s # comment\nsize = 1G\n", path, path + 1);
	assert_int_equal(bs_config_load_string(text, "t.ini", &cfg), 0);
	assert_string_equal(val(cfg, "device", "a", "path"), path);
	assert_string_equal(val(cfg, "device", "a", "description"), path + 1);
	assert_string_equal(val(cfg, "device", "a", "size"), "1G");
	assert_string_equal(bs_opts_where(cfg->sections[0].opts, "size"),
			    "t.ini:5");
	bs_config_free(cfg);

	snprintf(text, n, "[device a]\npath = %s\nnot ini\n", path);
	assert_int_equal(bs_config_load_string(text, "t.ini", &cfg), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "t.ini:3: syntax error"));
	free(text);
}

static void syntax_errors(void **state)
{
	static const struct {
		const char *text;
		const char *msg;
	} rows[] = {
		{ "[device a\ntype = mem\n", "t.ini:1: syntax error" },
		{ "[device a] x\n", "t.ini:1: syntax error" },
		{ "[device a]\n= mem\n", "t.ini:2: syntax error" },
		{ "\n\n[device a]\ntype: mem\n", "t.ini:4: syntax error" },
		{ "[device]\n", "t.ini:1: section [device]: a name is needed" },
		{ "[daemon x]\n", "t.ini:1: section [daemon x]: [daemon] takes" },
		{ "[]\n", "t.ini:1: unknown section []" },
		{ "[devicedevicedevice a]\n", "t.ini:1: unknown section" },
	};
	struct bs_config *cfg;
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		cfg = NULL;
		assert_int_equal(bs_config_load_string(rows[i].text, "t.ini",
						       &cfg),
				 -EINVAL);
		print_message("row %u: %s\n", i, bs_last_error());
		assert_non_null(strstr(bs_last_error(), rows[i].msg));
		assert_null(cfg);
	}
}

/* A misspelled key is named first: before a missing required key. */
static void unknown_keys_first(void **state)
{
	char dir[] = "/tmp/blkstack-cfg.XXXXXX", text[4096], img[256];
	struct bs_ctx *ctx;
	struct bs_opts *o;
	char *type;

	(void)state;
	assert_int_equal(load_and_create("[device a]\ntype = mem\nsise = 1G\n",
					 NULL),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "t.ini:3: a: unknown key 'sise'"));

	/* a spec too, and the file is not created */
	assert_non_null(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/a.img", dir);
	snprintf(text, sizeof(text), "file:%s,sise=1G", img);
	assert_int_equal(bs_ctx_new(&ctx), 0);
	assert_int_equal(bs_opts_parse_spec(text, &type, &o), 0);
	assert_int_equal(bs_dev_create(ctx, "f", type, o, NULL), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "f: unknown key 'sise'"));
	bs_opts_free(o);
	free(type);
	snprintf(text, sizeof(text), "file:%s,size=1M,colour=red", img);
	assert_int_equal(bs_opts_parse_spec(text, &type, &o), 0);
	assert_int_equal(bs_dev_create(ctx, "f", type, o, NULL), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "f: unknown key 'colour'"));
	assert_int_equal(access(img, F_OK), -1);
	bs_opts_free(o);
	free(type);
	bs_ctx_free(ctx);

	/* core keys of every type, and devices= only for stacked types */
	assert_int_equal(load_and_create("[device a]\ntype = mem\nsize = 1M\n"
					 "readonly = 1\nwrite_zeroes_unmap = 0\n"
					 "devices = b\n",
					 NULL),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "t.ini:6: a: unknown key 'devices'"));
	assert_int_equal(rmdir(dir), 0);
}

/* A mistake anywhere in the config: no device is opened, no file made. */
static void later_error_creates_nothing(void **state)
{
	static const char *const later[] = {
		"[device b]\ntype = mem\nsize = 1M\ncolour = red\n",
		"[device b]\ntype = nosuch\n",
		"[device b]\nsize = 1M\n",
		"[device b]\ntype = test-pass\ndevices = ghost\n",
		"[device b]\ntype = test-pass\ndevices = c\n"
		"[device c]\ntype = test-pass\ndevices = b\n",
	};
	char dir[] = "/tmp/blkstack-cfg.XXXXXX", text[4096], img[256];
	unsigned i;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/a.img", dir);
	for (i = 0; i < sizeof(later) / sizeof(later[0]); i++) {
		snprintf(text, sizeof(text),
			 "[device a]\ntype = file\npath = %s\nsize = 1M\n%s",
			 img, later[i]);
		assert_int_not_equal(load_and_create(text, NULL), 0);
		print_message("row %u: %s\n", i, bs_last_error());
		assert_non_null(strstr(bs_last_error(), "t.ini:"));
		assert_int_equal(access(img, F_OK), -1);
	}
	assert_int_equal(rmdir(dir), 0);
}

/* Stacked sections: missing component and cycles (needs a stacked type). */
static int st_open(struct bs_dev *dev, struct bs_opts *opts)
{
	(void)opts;
	dev->size = dev->components[0]->size;
	return 0;
}

static int st_stack(struct bs_dev *dev, struct bs_limits *lim)
{
	return bs_limits_stack(lim, &dev->components[0]->limits, 0);
}

static void st_submit(struct bs_dev *dev, struct bs_req *req)
{
	bs_submit(dev->components[0], req);
}

static const struct bs_dev_type st_type = {
	.name = "test-pass",
	.stacked = true,
	.open = st_open,
	.submit = st_submit,
	.stack_limits = st_stack,
};
BS_DEV_TYPE(st_type)

static void stacked_sections(void **state)
{
	struct bs_ctx *ctx = NULL;

	(void)state;
	assert_int_equal(load_and_create("[device top]\ntype = test-pass\n"
					 "devices = mid\n"
					 "[device mid]\ntype = test-pass\n"
					 "devices = low\n"
					 "[device low]\ntype = mem\nsize = 4M\n",
					 &ctx),
			 0);
	assert_int_equal(bs_dev_find(ctx, "top")->size, 4 << 20);
	bs_ctx_free(ctx);

	assert_int_equal(load_and_create("[device top]\ntype = test-pass\n"
					 "devices = ghost\n",
					 NULL),
			 -ENOENT);
	assert_non_null(strstr(bs_last_error(),
			       "t.ini:3: top: component 'ghost' is not defined"));
	assert_int_equal(load_and_create("[device a]\ntype = test-pass\n"
					 "devices = b\n"
					 "[device b]\ntype = test-pass\n"
					 "devices = a\n",
					 NULL),
			 -ELOOP);
	assert_non_null(strstr(bs_last_error(), "cycle: a -> b -> a"));
}

static void specs(void **state)
{
	struct bs_opts *o;
	char *type;

	(void)state;
	assert_int_equal(bs_opts_parse_spec("file:/x/y.img,size=1G,direct=1",
					    &type, &o),
			 0);
	assert_string_equal(type, "file");
	assert_string_equal(bs_opts_get(o, "path"), "/x/y.img");
	assert_string_equal(bs_opts_get(o, "size"), "1G");
	assert_int_equal(bs_opts_check_unused(o), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "unknown key 'direct'"));
	bs_opts_free(o);
	free(type);
	assert_int_equal(bs_opts_parse_spec("mem:64M", &type, &o), 0);
	assert_string_equal(bs_opts_get(o, "size"), "64M");
	bs_opts_free(o);
	free(type);
	assert_int_equal(bs_opts_parse_spec("nocolon", &type, &o), -EINVAL);
	assert_int_equal(bs_opts_parse_spec(":x", &type, &o), -EINVAL);
	assert_int_equal(bs_opts_parse_spec("mem:1M,=3", &type, &o), -EINVAL);
}

static void sizes(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(bs_parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(bs_parse_size("64K", &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(bs_parse_size("1g", &v), 0);
	assert_int_equal(v, 1 << 30);
	assert_int_equal(bs_parse_size("2TiB", &v), 0);
	assert_int_equal(v, 2ull << 40);
	assert_int_equal(bs_parse_size("16E", &v), -ERANGE);
	assert_int_equal(bs_parse_size("-1", &v), -EINVAL);
	assert_int_equal(bs_parse_size("1Q", &v), -EINVAL);
	assert_int_equal(bs_parse_size("", &v), -EINVAL);
}

/* Sizes are decimal: no octal, no hex, no spellings the docs do not name. */
static void sizes_are_decimal(void **state)
{
	static const struct {
		const char *s;
		int err;
		uint64_t v;
	} rows[] = {
		{ "010K", 0, 10 << 10 },	/* not octal 8 KiB */
		{ "010", 0, 10 },
		{ "0", 0, 0 },
		{ "0x10M", -EINVAL, 0 },
		{ "0x10", -EINVAL, 0 },
		{ "1e3", -EINVAL, 0 },		/* 1 EiB and a stray 3 */
		{ "1KB", -EINVAL, 0 },
		{ "4096B", -EINVAL, 0 },
		{ "1 G", -EINVAL, 0 },
		{ " 1G", -EINVAL, 0 },
		{ "1G ", -EINVAL, 0 },
		{ "+1", -EINVAL, 0 },
		{ "1Gib", -EINVAL, 0 },
		{ "64KiB", 0, 64 << 10 },
		{ "1p", 0, 1ull << 50 },
		{ "15E", 0, 15ull << 60 },
		{ "16E", -ERANGE, 0 },
		{ "18446744073709551615", 0, UINT64_MAX },
		{ "18446744073709551616", -ERANGE, 0 },
		{ "99999999999999999999999K", -ERANGE, 0 },
		{ "99999999999999999999999x", -EINVAL, 0 },
	};
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint64_t v = 12345;
		int err = bs_parse_size(rows[i].s, &v);

		print_message("'%s' -> %d %llu\n", rows[i].s, err,
			      (unsigned long long)v);
		assert_int_equal(err, rows[i].err);
		if (!err)
			assert_int_equal(v, rows[i].v);
		else
			assert_int_equal(v, 12345);	/* untouched */
	}
}

/* One message for a size too large, from a spec, a config or an option. */
static void size_too_large_one_message(void **state)
{
	struct bs_ctx *ctx;
	struct bs_opts *o;
	uint64_t v;
	char *type;

	(void)state;
	assert_int_equal(bs_opts_parse_spec("mem:16E", &type, &o), 0);
	assert_int_equal(bs_opts_get_size(o, "size", &v), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "too large"));
	bs_opts_free(o);
	free(type);

	assert_int_equal(bs_ctx_new(&ctx), 0);
	assert_int_equal(bs_opts_parse_spec("mem:16E", &type, &o), 0);
	assert_int_equal(bs_dev_create(ctx, "m", type, o, NULL), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "m: size = '16E': too large"));
	bs_opts_free(o);
	free(type);
	assert_int_equal(bs_opts_parse_spec("mem:0x10M", &type, &o), 0);
	assert_int_equal(bs_dev_create(ctx, "m", type, o, NULL), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "not a size"));
	bs_opts_free(o);
	free(type);
	bs_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(dependency_order),
		cmocka_unit_test(errors_name_file_and_line),
		cmocka_unit_test(inline_comments),
		cmocka_unit_test(long_lines),
		cmocka_unit_test(syntax_errors),
		cmocka_unit_test(stacked_sections),
		cmocka_unit_test(unknown_keys_first),
		cmocka_unit_test(later_error_creates_nothing),
		cmocka_unit_test(specs),
		cmocka_unit_test(sizes),
		cmocka_unit_test(sizes_are_decimal),
		cmocka_unit_test(size_too_large_one_message),
	};

	return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
