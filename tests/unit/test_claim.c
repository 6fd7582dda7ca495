/* SPDX-License-Identifier: MIT */
/*
 * Claims: the mode compatibility matrix, release on close, holder naming;
 * mappers on their components, exports (a stub export type), the fs layer
 * and the destructive commands; OFD locks on backing files, inside one
 * process and across two; mkfs's probe for what is on a device.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <blkstack/cmd.h>
#include <blkstack/config.h>
#include <blkstack/export.h>
#include <blkstack/fs.h>
#include <blkstack/opts.h>

#include "helpers/th.h"

/* ---- a stub export type: claims without a network ------------------------ */

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
	.name = "stub",
	.summary = "test export",
	.options = "",
	.open = stub_open,
	.close = stub_close,
};

BS_EXPORT_TYPE(stub_export)

static struct bs_export *export_of(struct bs_exports *set, const char *name,
				   const char *dev, bool ro, int *err)
{
	struct bs_opts *o;
	struct bs_export *e = NULL;

	assert_int_equal(bs_opts_new(&o), 0);
	assert_int_equal(bs_opts_set(o, "device", dev, "test"), 0);
	if (ro)
		assert_int_equal(bs_opts_set(o, "readonly", "1", "test"), 0);
	*err = bs_export_create(set, name, "stub", o, &e);
	bs_opts_free(o);
	return e;
}

/* ---- the rule ----------------------------------------------------------- */

static void matrix(void **state)
{
	static const enum bs_claim_mode m[] = { BS_CLAIM_READ, BS_CLAIM_WRITE,
						BS_CLAIM_EXCL };
	/* held (row) x wanted (column): 1 = shares */
	static const int ok[3][3] = { { 1, 1, 0 }, { 1, 1, 0 }, { 0, 0, 0 } };
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "d", "mem:1M");
	struct bs_claim *a, *b;
	unsigned i, j;

	for (i = 0; i < 3; i++) {
		for (j = 0; j < 3; j++) {
			assert_int_equal(bs_claim_compatible(m[i], m[j]),
					 ok[i][j]);
			assert_int_equal(bs_dev_claim(d, m[i], "first", &a), 0);
			assert_int_equal(bs_dev_claim_check(d, m[j]),
					 ok[i][j] ? 0 : -EBUSY);
			assert_int_equal(bs_dev_claim(d, m[j], "second", &b),
					 ok[i][j] ? 0 : -EBUSY);
			if (!ok[i][j]) {
				assert_null(b);
				assert_string_equal(bs_last_error(),
						    "d: in use by first");
			}
			bs_claim_release(b);
			bs_claim_release(a);
			/* released: nothing left in the way */
			assert_null(bs_dev_claim_next(d, NULL));
		}
	}
	assert_string_equal(bs_claim_mode_name(BS_CLAIM_READ), "read");
	assert_string_equal(bs_claim_mode_name(BS_CLAIM_WRITE), "write");
	assert_string_equal(bs_claim_mode_name(BS_CLAIM_EXCL), "exclusive");
}

static void naming_order_and_release(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "vol0", "mem:1M");
	struct bs_dev *r = th_dev_kv(ctx, "ro", "type=mem;size=1M;readonly=1");
	struct bs_claim *a, *b, *c;
	const struct bs_claim *it;

	assert_int_equal(bs_dev_claim(d, BS_CLAIM_READ, "export nbd/r", &a), 0);
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_WRITE, "export nbd/vol0",
				      &b), 0);
	/* the first holder in the way is named */
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_EXCL, "fs mkfs", &c), -EBUSY);
	assert_string_equal(bs_last_error(), "vol0: in use by export nbd/r");
	it = bs_dev_claim_next(d, NULL);
	assert_string_equal(bs_claim_holder(it), "export nbd/r");
	assert_int_equal(bs_claim_mode_of(it), BS_CLAIM_READ);
	it = bs_dev_claim_next(d, it);
	assert_string_equal(bs_claim_holder(it), "export nbd/vol0");
	assert_null(bs_dev_claim_next(d, it));
	bs_claim_release(a);
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_EXCL, "fs mkfs", &c), -EBUSY);
	assert_string_equal(bs_last_error(), "vol0: in use by export nbd/vol0");
	/* a device with a claim on it is not destroyed under its holder */
	assert_int_equal(bs_dev_destroy(d), -EBUSY);
	assert_string_equal(bs_last_error(), "vol0: in use by export nbd/vol0");
	bs_claim_release(b);
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_EXCL, "fs mkfs", &c), 0);
	bs_claim_release(c);
	bs_claim_release(NULL);
	/* read-only: no write claim; reading and exclusive are fine */
	assert_int_equal(bs_dev_claim(r, BS_CLAIM_WRITE, "w", &a), -EROFS);
	assert_int_equal(bs_dev_claim(r, BS_CLAIM_READ, "r", &a), 0);
	bs_claim_release(a);
	/* a context going away drops claims whose holders forgot them */
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_WRITE, "leaked", &a), 0);
}

/* ---- mappers ---------------------------------------------------------- */

static void mappers_take_components(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a, *l0, *v;
	struct bs_claim *c;

	a = th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "b", "mem:1M");
	l0 = th_dev_kv(ctx, "l0", "type=linear;devices=a b");
	/* two mappers taking one component exclusively */
	assert_int_equal(th_dev_kv_try(ctx, "m1", "type=mirror;devices=a b",
				       &v), -EBUSY);
	assert_string_equal(bs_last_error(),
			    "m1: component a: in use by mapper linear/l0");
	assert_null(bs_dev_find(ctx, "m1"));
	/* the component stays claimed once, by l0 */
	assert_string_equal(bs_claim_holder(bs_dev_claim_next(a, NULL)),
			    "mapper linear/l0");
	assert_null(bs_dev_claim_next(a, bs_dev_claim_next(a, NULL)));
	/* and nothing else writes it meanwhile */
	assert_int_equal(bs_dev_claim(a, BS_CLAIM_READ, "export nbd/a", &c),
			 -EBUSY);
	assert_string_equal(bs_last_error(), "a: in use by mapper linear/l0");
	/* released when the mapper goes */
	assert_int_equal(bs_dev_destroy(l0), 0);
	assert_null(bs_dev_claim_next(a, NULL));
	v = th_dev_kv(ctx, "m1", "type=mirror;devices=a b");
	assert_int_equal(bs_dev_destroy(v), 0);

	/* one mapper listing a component twice claims it once */
	v = th_dev_kv(ctx, "l2", "type=linear;devices=a a");
	assert_int_equal(bs_dev_destroy(v), 0);
	assert_null(bs_dev_claim_next(a, NULL));

	/* claim = shared: several mappers (and exports) over one disk */
	th_dev_kv(ctx, "s1", "type=linear;devices=a;map=0:512K;claim=shared");
	th_dev_kv(ctx, "s2", "type=linear;devices=a;map=512K:512K;claim=shared");
	assert_int_equal(bs_dev_claim(a, BS_CLAIM_WRITE, "export nbd/a", &c), 0);
	bs_claim_release(c);
	/* an exclusive one still cannot join */
	assert_int_equal(th_dev_kv_try(ctx, "x", "type=linear;devices=a", &v),
			 -EBUSY);
	assert_string_equal(bs_last_error(),
			    "x: component a: in use by mapper linear/s1");
	/* claim= is for devices with components; other values refused */
	assert_int_equal(th_dev_kv_try(ctx, "y", "type=mem;size=1M;"
				       "claim=shared", &v), -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "y", "type=linear;devices=b;"
				       "claim=mine", &v), -EINVAL);
}

/* The same rule read from a config, before anything is opened. */
static void config_checked_first(void **state)
{
	static const char two[] =
		"[device a]\ntype = mem\nsize = 1M\n"
		"[device b]\ntype = mem\nsize = 1M\n"
		"[device l0]\ntype = linear\ndevices = a\n"
		"[device m1]\ntype = mirror\ndevices = b a\n";
	static const char shared[] =
		"[device a]\ntype = mem\nsize = 1M\n"
		"[device l0]\ntype = linear\ndevices = a\nclaim = shared\n"
		"[device l1]\ntype = linear\ndevices = a\nclaim = shared\n"
		"[export a]\ntype = stub\ndevice = a\n";
	static const char served[] =
		"[device a]\ntype = mem\nsize = 1M\n"
		"[device l0]\ntype = linear\ndevices = a a\n"
		"[export l0]\ntype = stub\ndevice = l0\n"
		"[export a]\ntype = stub\ndevice = a\n";
	struct bs_ctx *ctx = *state;
	struct bs_config *cfg;

	assert_int_equal(bs_config_load_string(two, "two.ini", &cfg), 0);
	assert_int_equal(bs_config_check_devices(cfg, NULL), -EBUSY);
	assert_string_equal(bs_last_error(), "two.ini:12: m1: component a: in "
			    "use by mapper linear/l0");
	/* nothing was created */
	assert_int_equal(bs_config_create_devices(cfg, ctx), -EBUSY);
	assert_null(bs_dev_find(ctx, "a"));
	bs_config_free(cfg);

	assert_int_equal(bs_config_load_string(shared, "s.ini", &cfg), 0);
	assert_int_equal(bs_config_check_devices(cfg, NULL), 0);
	assert_int_equal(bs_config_check_exports(cfg), 0);
	assert_int_equal(bs_config_create_devices(cfg, ctx), 0);
	bs_config_free(cfg);

	assert_int_equal(bs_config_load_string(served, "e.ini", &cfg), 0);
	/* one stack listing a twice is one claim */
	assert_int_equal(bs_config_check_devices(cfg, NULL), 0);
	assert_int_equal(bs_config_check_exports(cfg), -EBUSY);
	assert_string_equal(bs_last_error(), "e.ini:12: export a: a: in use by "
			    "mapper linear/l0");
	bs_config_free(cfg);
}

/* ---- exports ---------------------------------------------------------- */

static void exports_claim(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_exports *set;
	struct bs_export *e1, *e2, *e3;
	struct bs_dev *d = th_dev(ctx, "vol0", "mem:1M"), *v;
	struct bs_claim *c;
	int err;

	th_dev(ctx, "leg", "mem:1M");
	assert_int_equal(bs_exports_new(ctx, &set), 0);
	e1 = export_of(set, "vol0", "vol0", false, &err);
	assert_int_equal(err, 0);
	/* a second export name of one device shares it, read or write */
	e2 = export_of(set, "vol0-ro", "vol0", true, &err);
	assert_int_equal(err, 0);
	assert_int_equal(bs_claim_mode_of(e1->claim), BS_CLAIM_WRITE);
	assert_int_equal(bs_claim_mode_of(e2->claim), BS_CLAIM_READ);
	/* mkfs, zeroout, a mapper: refused, naming the export */
	assert_int_equal(bs_fs_mkfs(d, NULL), -EBUSY);
	assert_string_equal(bs_last_error(), "vol0: in use by export stub/vol0");
	assert_int_equal(th_dev_kv_try(ctx, "l", "type=linear;devices=vol0",
				       &v), -EBUSY);
	assert_string_equal(bs_last_error(),
			    "l: component vol0: in use by export stub/vol0");
	bs_export_destroy(e1);
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_EXCL, "x", &c), -EBUSY);
	assert_string_equal(bs_last_error(),
			    "vol0: in use by export stub/vol0-ro");
	bs_export_destroy(e2);
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_EXCL, "x", &c), 0);
	/* an export of an exclusively held device is not created */
	e3 = export_of(set, "vol0", "vol0", false, &err);
	assert_null(e3);
	assert_int_equal(err, -EBUSY);
	assert_string_equal(bs_last_error(), "export vol0: vol0: in use by x");
	bs_claim_release(c);
	/* nor of a mapper's component */
	th_dev_kv(ctx, "m", "type=linear;devices=leg");
	assert_null(export_of(set, "leg", "leg", true, &err));
	assert_int_equal(err, -EBUSY);
	assert_string_equal(bs_last_error(),
			    "export leg: leg: in use by mapper linear/m");
	bs_exports_free(set);
}

/* ---- the fs layer and the commands -------------------------------------- */

static uint64_t sum_dev(struct bs_dev *d)
{
	uint64_t h = 1469598103934665603ull, off;
	static uint8_t buf[1 << 16];
	size_t i;

	for (off = 0; off < d->size; off += sizeof(buf)) {
		assert_int_equal(bs_read_sync(d, buf, sizeof(buf), off), 0);
		for (i = 0; i < sizeof(buf); i++)
			h = (h ^ buf[i]) * 1099511628211ull;
	}
	return h;
}

static void fs_layer_claims(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "d", "mem:64M");
	struct bs_fs *fs, *fs2;
	struct bs_claim *c;
	char what[128];
	uint64_t before;

	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 0);
	assert_int_equal(bs_fs_mkfs(d, NULL), 0);
	/* mkfs gave its claim back */
	assert_null(bs_dev_claim_next(d, NULL));
	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 1);
	assert_string_equal(what, "an ext4 filesystem");
	/* read-write: exclusive until close */
	assert_int_equal(bs_fs_open(d, 0, &fs), 0);
	assert_int_equal(bs_fs_open(d, BS_FS_RDONLY, &fs2), -EBUSY);
	assert_string_equal(bs_last_error(), "d: in use by fs ext4 (read-write)");
	assert_int_equal(bs_fs_close(fs), 0);
	assert_null(bs_dev_claim_next(d, NULL));
	/* read-only: shared with a writer (a writable export) */
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_WRITE, "export nbd/d", &c), 0);
	assert_int_equal(bs_fs_open(d, BS_FS_RDONLY, &fs), 0);
	assert_int_equal(bs_fs_open(d, 0, &fs2), -EBUSY);
	assert_string_equal(bs_last_error(), "d: in use by export nbd/d");
	assert_int_equal(bs_fs_close(fs), 0);
	/* mkfs under the export: refused, and not a byte written */
	before = sum_dev(d);
	assert_int_equal(bs_fs_mkfs(d, NULL), -EBUSY);
	assert_string_equal(bs_last_error(), "d: in use by export nbd/d");
	assert_true(sum_dev(d) == before);
	bs_claim_release(c);
	/* a failed open gives its claim back */
	th_dev(ctx, "blank", "mem:8M");
	assert_int_equal(bs_fs_open(bs_dev_find(ctx, "blank"), 0, &fs),
			 -EINVAL);
	assert_null(bs_dev_claim_next(bs_dev_find(ctx, "blank"), NULL));
}

static void probe_signatures(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "d", "mem:1M");
	struct bs_dev *tiny = th_dev(ctx, "tiny", "mem:4K");
	static uint8_t blk[4096];
	char what[128];

	assert_int_equal(bs_fs_probe(tiny, what, sizeof(what)), 0);
	memcpy(blk, "XFSB", 4);
	assert_int_equal(bs_write_sync(d, blk, 4096, 0), 0);
	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 1);
	assert_string_equal(what, "an xfs filesystem");
	memset(blk, 0, sizeof(blk));
	blk[510] = 0x55;
	blk[511] = 0xaa;
	memcpy(blk + 512, "EFI PART", 8);
	assert_int_equal(bs_write_sync(d, blk, 4096, 0), 0);
	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 1);
	assert_string_equal(what, "a GPT partition table");
	memset(blk + 512, 0, 8);
	assert_int_equal(bs_write_sync(d, blk, 4096, 0), 0);
	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 1);
	assert_string_equal(what, "a DOS partition table or boot sector");
	/* ext2: the magic without the journal or ext4 features */
	memset(blk, 0, sizeof(blk));
	blk[1024 + 56] = 0x53;
	blk[1024 + 57] = 0xef;
	memcpy(blk + 1024 + 120, "old", 3);
	assert_int_equal(bs_write_sync(d, blk, 4096, 0), 0);
	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 1);
	assert_string_equal(what, "an ext2 filesystem (label 'old')");
	blk[1024 + 92] = 0x04;	/* has_journal */
	assert_int_equal(bs_write_sync(d, blk, 4096, 0), 0);
	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 1);
	assert_string_equal(what, "an ext3 filesystem (label 'old')");
	memset(blk, 0, sizeof(blk));
	memcpy(blk + 4096 - 10, "SWAPSPACE2", 10);
	assert_int_equal(bs_write_sync(d, blk, 4096, 0), 0);
	assert_int_equal(bs_fs_probe(d, what, sizeof(what)), 1);
	assert_string_equal(what, "a swap area");
}

struct fx {
	struct bs_cmd_env env;
	char *out, *err;
	size_t outlen, errlen;
};

static int run(struct fx *f, const char *line)
{
	char buf[512], *argv[32], *save = NULL, *tok;
	int argc = 0, rc;

	f->env.out = open_memstream(&f->out, &f->outlen);
	f->env.err = open_memstream(&f->err, &f->errlen);
	snprintf(buf, sizeof(buf), "%s", line);
	for (tok = strtok_r(buf, " ", &save); tok && argc < 31;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	rc = bs_cmd_run(&f->env, argc, argv);
	fclose(f->env.out);
	fclose(f->env.err);
	return rc;
}

static void fx_free(struct fx *f)
{
	free(f->out);
	free(f->err);
	f->out = f->err = NULL;
}

static void commands_refuse_held(void **state)
{
	struct bs_ctx *ctx = *state;
	struct fx f = { .env = { .ctx = ctx, .in_daemon = true } };
	struct bs_dev *d = th_dev(ctx, "vol0", "mem:64M");
	static const char *const destructive[] = {
		"zeroout -l 1M vol0", "fallocate -z -l 1M vol0",
		"fallocate -p -l 1M vol0", "fallocate -w -l 1M vol0",
		"fs mkfs vol0", "fs mkfs -F vol0", "fs mkdir vol0 /x",
	};
	struct bs_claim *c;
	uint64_t before;
	unsigned i;

	assert_int_equal(run(&f, "fs mkfs vol0"), 0);
	fx_free(&f);
	assert_int_equal(bs_dev_claim(d, BS_CLAIM_WRITE, "export nbd/vol0",
				      &c), 0);
	before = sum_dev(d);
	for (i = 0; i < sizeof(destructive) / sizeof(destructive[0]); i++) {
		assert_int_equal(run(&f, destructive[i]), 1);
		print_message("%s: %s", destructive[i], f.err);
		assert_non_null(strstr(f.err, "in use by export nbd/vol0"));
		fx_free(&f);
	}
	assert_true(sum_dev(d) == before);
	/* zeroout and fallocate say how to go beside an export */
	assert_int_equal(run(&f, "zeroout -l 1M vol0"), 1);
	assert_non_null(strstr(f.err, "(in use by export nbd/vol0; --force "
				      "runs beside it)"));
	fx_free(&f);
	/* --force: beside the export, on a range the user knows is free */
	assert_int_equal(run(&f, "zeroout --force -o 60M -l 1M vol0"), 0);
	fx_free(&f);
	assert_int_equal(run(&f, "fallocate --force -z -o 61M -l 1M vol0"), 0);
	fx_free(&f);
	assert_null(bs_dev_claim_next(d, bs_dev_claim_next(d, NULL)));
	before = sum_dev(d);
	/* reading beside the export is fine */
	assert_int_equal(run(&f, "fs ls vol0"), 0);
	fx_free(&f);
	assert_int_equal(run(&f, "info vol0"), 0);
	fx_free(&f);
	bs_claim_release(c);
	/* the commands gave their claims back */
	assert_null(bs_dev_claim_next(d, NULL));

	/* mkfs over an existing ext4: -F or nothing happens */
	assert_int_equal(run(&f, "fs mkfs vol0"), 1);
	assert_non_null(strstr(f.err, "the device holds an ext4 filesystem; "
				      "give -F (--force) to replace it"));
	fx_free(&f);
	assert_true(sum_dev(d) == before);
	assert_int_equal(run(&f, "fs mkfs -F vol0"), 0);
	fx_free(&f);
	assert_false(sum_dev(d) == before);
	before = sum_dev(d);
	assert_int_equal(run(&f, "fs mkfs --force -L again vol0"), 0);
	fx_free(&f);
	assert_int_equal(run(&f, "zeroout -l 1M vol0"), 0);
	fx_free(&f);
	/* never under an exclusive holder, --force or not, and no hint */
	th_dev_kv(ctx, "l", "type=linear;devices=vol0");
	assert_int_equal(run(&f, "zeroout -l 1M vol0"), 1);
	assert_non_null(strstr(f.err, "(in use by mapper linear/l)"));
	fx_free(&f);
	assert_int_equal(run(&f, "zeroout --force -l 1M vol0"), 1);
	assert_non_null(strstr(f.err, "in use by mapper linear/l"));
	fx_free(&f);
	assert_int_equal(run(&f, "fallocate --force -z -l 1M vol0"), 1);
	fx_free(&f);
}

/* ---- OFD locks on backing files ----------------------------------------- */

static char dir[64], img[128];

static int make_img(void **state)
{
	int fd;

	snprintf(dir, sizeof(dir), "/var/tmp/blkstack-claim.XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(img, sizeof(img), "%s/vol.img", dir);
	fd = open(img, O_CREAT | O_RDWR | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, 1 << 20) < 0)
		return -1;
	close(fd);
	return th_ctx_setup(state);
}

static int remove_img(void **state)
{
	th_ctx_teardown(state);
	unlink(img);
	return rmdir(dir);
}

static void file_lock_in_process(void **state)
{
	struct bs_ctx *ctx = *state;
	char spec[256], want[512];
	struct bs_dev *a, *b, *c;

	snprintf(spec, sizeof(spec), "file:%s", img);
	a = th_dev(ctx, "a", spec);
	assert_int_equal(th_dev_try(ctx, "b", spec, &b), -EBUSY);
	snprintf(want, sizeof(want), "b: file: %s: in use by device a of this "
		 "process", img);
	assert_string_equal(bs_last_error(), want);
	/* read-only beside a writer: refused too */
	snprintf(spec, sizeof(spec), "file:%s,readonly=1", img);
	assert_int_equal(th_dev_try(ctx, "b", spec, &b), -EBUSY);
	assert_int_equal(bs_dev_destroy(a), 0);
	/* readers share */
	b = th_dev(ctx, "b", spec);
	c = th_dev(ctx, "c", spec);
	snprintf(spec, sizeof(spec), "file:%s", img);
	assert_int_equal(th_dev_try(ctx, "a", spec, &a), -EBUSY);
	snprintf(want, sizeof(want), "a: file: %s: in use by device ", img);
	assert_non_null(strstr(bs_last_error(), want));
	/* lock=0: the user says it is fine */
	snprintf(spec, sizeof(spec), "file:%s,lock=0", img);
	a = th_dev(ctx, "a", spec);
	assert_int_equal(bs_dev_destroy(a), 0);
	assert_int_equal(bs_dev_destroy(b), 0);
	assert_int_equal(bs_dev_destroy(c), 0);
	/* all closed: open again */
	snprintf(spec, sizeof(spec), "file:%s", img);
	a = th_dev(ctx, "a", spec);
	assert_int_equal(bs_dev_destroy(a), 0);
}

static void file_lock_across_processes(void **state)
{
	struct bs_ctx *ctx = *state;
	char spec[256], want[512], c;
	int to_child[2], to_parent[2], status;
	struct bs_dev *d;
	pid_t pid;

	assert_int_equal(pipe(to_child), 0);
	assert_int_equal(pipe(to_parent), 0);
	snprintf(spec, sizeof(spec), "file:%s", img);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* the other blkstack: holds the image until told */
		struct bs_ctx *cctx;
		struct bs_dev *cd;
		struct bs_opts *o;
		char *type = NULL;

		/* only the parent's ends stay open: its exit is our EOF */
		close(to_child[1]);
		close(to_parent[0]);
		alarm(60);	/* bounded, whatever happens to the parent */
		if (bs_ctx_new(&cctx) || bs_opts_parse_spec(spec, &type, &o) ||
		    bs_dev_create(cctx, "held", type, o, &cd))
			_exit(2);
		bs_opts_free(o);
		free(type);
		if (write(to_parent[1], "h", 1) != 1 ||
		    read(to_child[0], &c, 1) != 1)
			_exit(3);
		bs_ctx_free(cctx);
		_exit(0);
	}
	close(to_parent[1]);
	close(to_child[0]);
	assert_int_equal(read(to_parent[0], &c, 1), 1);
	assert_int_equal(th_dev_try(ctx, "d", spec, &d), -EBUSY);
	/* an OFD lock names no process: the holder's fdinfo does */
	snprintf(want, sizeof(want), "d: file: %s: in use by process %d "
		 "(test_claim): it holds a write lock", img, (int)pid);
	assert_string_equal(bs_last_error(), want);
	snprintf(spec, sizeof(spec), "file:%s,readonly=1", img);
	assert_int_equal(th_dev_try(ctx, "d", spec, &d), -EBUSY);
	assert_string_equal(bs_last_error() + strlen(bs_last_error()) -
			    strlen("it holds a write lock"),
			    "it holds a write lock");
	/* the other process is gone: its lock went with it */
	assert_int_equal(write(to_child[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(to_child[1]);
	close(to_parent[0]);
	snprintf(spec, sizeof(spec), "file:%s", img);
	d = th_dev(ctx, "d", spec);
	assert_int_equal(bs_dev_destroy(d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(matrix, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(naming_order_and_release,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(mappers_take_components,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(config_checked_first,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(exports_claim, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(fs_layer_claims, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(probe_signatures, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(commands_refuse_held,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(file_lock_in_process, make_img,
						remove_img),
		cmocka_unit_test_setup_teardown(file_lock_across_processes,
						make_img, remove_img),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
