/* SPDX-License-Identifier: MIT */
/*
 * The command layer as blkstackd will use it: many commands in one process
 * on one context, output only to the env's streams, one-line errors, exit
 * codes 0/1/2, DEV names and specs.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/cmd.h>

#include "helpers/th.h"

struct fx {
	struct bs_ctx *ctx;
	struct bs_cmd_env env;
	char *out, *err;
	size_t outlen, errlen;
};

static void streams_open(struct fx *f)
{
	f->out = f->err = NULL;
	f->env.out = open_memstream(&f->out, &f->outlen);
	f->env.err = open_memstream(&f->err, &f->errlen);
	assert_non_null(f->env.out);
	assert_non_null(f->env.err);
}

static void streams_close(struct fx *f)
{
	fclose(f->env.out);
	fclose(f->env.err);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(bs_ctx_new(&f->ctx), 0);
	f->env.ctx = f->ctx;
	th_dev(f->ctx, "d0", "mem:64M");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	bs_ctx_free(f->ctx);
	free(f->out);
	free(f->err);
	free(f);
	return 0;
}

/* Run a command line given as one string of words. */
static int run(struct fx *f, const char *line)
{
	char buf[512], *argv[32], *save = NULL, *tok;
	int argc = 0, rc;

	free(f->out);
	free(f->err);
	streams_open(f);
	snprintf(buf, sizeof(buf), "%s", line);
	for (tok = strtok_r(buf, " ", &save); tok && argc < 31;
	     tok = strtok_r(NULL, " ", &save))
		argv[argc++] = tok;
	argv[argc] = NULL;
	rc = bs_cmd_run(&f->env, argc, argv);
	streams_close(f);
	return rc;
}

static unsigned lines(const char *s)
{
	unsigned n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void fail_is_one_line_without_repeats(void **state)
{
	struct fx *f = *state;

	streams_open(f);
	bs_error(-EINVAL, "d0: fallocate: not aligned\nto 512");
	assert_int_equal(bs_cmd_fail(&f->env, "d0", "fallocate", -EINVAL), 1);
	streams_close(f);
	assert_string_equal(f->err, "blkstack: d0: fallocate: Invalid argument "
			    "(not aligned to 512)\n");
	free(f->err);
	free(f->out);

	streams_open(f);
	bs_error_clear();
	bs_cmd_fail(&f->env, NULL, "open", -ENOENT);
	streams_close(f);
	assert_string_equal(f->err, "blkstack: open: No such file or "
			    "directory\n");
}

static void dev_names_and_specs(void **state)
{
	struct fx *f = *state;
	struct bs_dev *a, *b, *c;

	assert_int_equal(bs_cmd_get_dev(&f->env, "d0", &a), 0);
	assert_string_equal(a->name, "d0");
	assert_int_equal(bs_cmd_get_dev(&f->env, "mem:1M", &b), 0);
	assert_int_equal(bs_cmd_get_dev(&f->env, "mem:2M", &c), 0);
	assert_string_equal(b->name, "mem");
	assert_string_equal(c->name, "mem-2");
	assert_int_equal(c->size, 2 << 20);
	assert_int_equal(bs_cmd_get_dev(&f->env, "nope", &a), -ENOENT);
	assert_non_null(strstr(bs_last_error(), "file:PATH"));
	assert_int_equal(bs_cmd_get_dev(&f->env, "mem:1M,colour=red", &a),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "colour"));
	f->env.in_daemon = true;
	assert_int_equal(bs_cmd_get_dev(&f->env, "mem:1M", &a), -EINVAL);
	/* the daemon refuses specs: its unknown-device line must not
	 * suggest them */
	assert_int_equal(bs_cmd_get_dev(&f->env, "nope", &a), -ENOENT);
	assert_null(strstr(bs_last_error(), "file:PATH"));
	assert_non_null(strstr(bs_last_error(), "ls"));
	f->env.in_daemon = false;
}

static void exit_codes(void **state)
{
	struct fx *f = *state;

	assert_int_equal(run(f, "info d0"), 0);
	assert_string_equal(f->err, "");
	assert_int_equal(run(f, "nosuch"), 2);
	assert_int_equal(run(f, "info"), 2);
	assert_int_equal(run(f, "info --frob d0"), 2);
	assert_int_equal(run(f, "fallocate -l 1X d0"), 2);
	assert_int_equal(run(f, "fallocate -o"), 2);
	assert_int_equal(run(f, "info nodev"), 1);
	assert_int_equal(lines(f->err), 1);
	assert_int_equal(run(f, "attr d0 queue/write_zeroes_unmap 2"), 1);
	assert_int_equal(lines(f->err), 1);
	assert_non_null(strstr(f->err, "Invalid argument"));
	assert_int_equal(run(f, "attr d0 size 1"), 1);
	assert_non_null(strstr(f->err, "Permission denied"));
	assert_int_equal(run(f, "attr d0 nope"), 1);
	assert_non_null(strstr(f->err, "No such file"));
	assert_int_equal(run(f, "fallocate --help"), 0);
	assert_non_null(strstr(f->out, "SYNOPSIS"));
}

/* The daemon runs command after command: getopt state must not leak. */
static void commands_in_sequence(void **state)
{
	struct fx *f = *state;
	struct bs_dev *d = bs_dev_find(f->ctx, "d0");
	static char pattern[4096];

	memset(pattern, 0xab, sizeof(pattern));
	assert_int_equal(bs_write_sync(d, pattern, sizeof(pattern), 1 << 20), 0);
	assert_int_equal(run(f, "fallocate -w -o 1M -l 4K d0"), 0);
	assert_int_equal(run(f, "zeroout -o 2M -l 1M d0"), 0);
	assert_int_equal(run(f, "attr d0 queue/write_zeroes_unmap 0"), 0);
	assert_int_equal(run(f, "fallocate -w -l 1M d0"), 1);
	assert_non_null(strstr(f->err, "queue/write_zeroes_unmap=0"));
	assert_int_equal(run(f, "fallocate -w -l 1M -k d0"), 1);
	assert_int_equal(run(f, "attr d0 queue/write_zeroes_unmap 1"), 0);
	assert_int_equal(run(f, "fallocate -w -l 1M d0"), 0);
	assert_int_equal(run(f, "attr d0 queue/write_zeroes_unmap"), 0);
	assert_string_equal(f->out, "1\n");
	assert_int_equal(run(f, "zeroout --no-fallback -l 1M d0"), 0);
	assert_int_equal(run(f, "ls"), 0);
	assert_non_null(strstr(f->out, "d0"));
}

static void info_json(void **state)
{
	struct fx *f = *state;
	json_error_t jerr;
	json_t *o;

	assert_int_equal(run(f, "info --json d0"), 0);
	o = json_loads(f->out, 0, &jerr);
	assert_non_null(o);
	assert_true(json_is_true(json_object_get(o, "write_zeroes_unmap")));
	assert_int_equal(json_integer_value(json_object_get(o, "size")),
			 64 << 20);
	assert_non_null(json_object_get(json_object_get(o, "limits"),
					"max_write_zeroes_sectors"));
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(fail_is_one_line_without_repeats,
						setup, teardown),
		cmocka_unit_test_setup_teardown(dev_names_and_specs, setup,
						teardown),
		cmocka_unit_test_setup_teardown(exit_codes, setup, teardown),
		cmocka_unit_test_setup_teardown(commands_in_sequence, setup,
						teardown),
		cmocka_unit_test_setup_teardown(info_json, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
