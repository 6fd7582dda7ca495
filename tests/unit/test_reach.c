/* SPDX-License-Identifier: MIT */
/*
 * Bounded reconnect of the remote drivers (lib/drivers/reach.c, used by
 * nbd and nvmf): nothing usable for down_after seconds makes the device
 * down once (one log line), requests then fail with EIO naming why,
 * explain and info say so, and the first usable connection ends it (one
 * more log line); down_after 0 never goes down. The clock is moved by
 * setting unreach_ns back (no sleeping).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/loop.h>

#include "drivers/reach.h"
#include "helpers/th.h"

static char logbuf[4096];
static unsigned nlogs;

static void log_fn(void *arg, const char *msg)
{
	(void)arg;
	nlogs++;
	snprintf(logbuf, sizeof(logbuf), "%s", msg);
}

static char info[1024];

static void kv_fn(void *arg, const char *key, const char *fmt, ...)
{
	va_list ap;
	int n;

	(void)arg;
	n = snprintf(info, sizeof(info), "%s ", key);
	va_start(ap, fmt);
	vsnprintf(info + n, sizeof(info) - (size_t)n, fmt, ap);
	va_end(ap);
}

static const struct reach_words words = {
	.drv = "tst", .what = "server", .lack = "no connection",
	.back = "a connection is made again",
};

static void back_dated(struct reach *r, uint64_t s)
{
	r->unreach_ns = bs_now_ns() - s * 1000000000ull;
}

static void down_and_up(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *dev = th_dev(ctx, "r0", "mem:1M");
	struct reach r;

	bs_ctx_set_log(ctx, log_fn, NULL);
	nlogs = 0;
	reach_init(&r, dev, &words, "tst tst://h/x", 2, 100);
	reach_describe(&r, NULL, kv_fn, NULL);
	assert_string_equal(info, "reachable yes (down 0 times)");
	assert_false(reach_check(&r, "x"));		/* usable: no clock */

	/* lost: the clock runs, not down before down_after */
	reach_lost(&r);
	assert_true(r.unreach_ns != 0);
	assert_false(reach_check(&r, "refused"));
	reach_describe(&r, NULL, kv_fn, NULL);
	assert_non_null(strstr(info, "reachable no connection for "));
	assert_non_null(strstr(info, "(down after 2 s)"));
	assert_int_equal(nlogs, 0);

	/* down_after passed: down once, one log line */
	back_dated(&r, 3);
	assert_true(reach_check(&r, "connect: refused"));
	assert_true(r.down);
	assert_false(reach_check(&r, "connect: refused"));
	assert_int_equal(nlogs, 1);
	assert_string_equal(logbuf, "r0: tst tst://h/x: server unreachable "
			    "for 2 s (connect: refused): requests fail at once "
			    "with EIO until a connection is made again; "
			    "reconnecting every 100 ms");
	assert_int_equal(reach_fail(&r, "read"), -EIO);
	assert_string_equal(bs_last_error(), "r0: tst tst://h/x: read: server "
			    "unreachable over 2 s (down_after): connect: "
			    "refused");
	reach_set_reason(&r);
	assert_non_null(strstr(dev->wz_reason, "tst server unreachable over "
				"2 s (down_after): I/O fails at once with EIO"));
	reach_describe(&r, "connect: reset", kv_fn, NULL);
	assert_non_null(strstr(info, "reachable no: down for 0 s (no "
				"connection for down_after 2 s before): "
				"requests fail at once with EIO (1 so far)"));
	assert_non_null(strstr(info, "last error: connect: reset"));
	reach_lost(&r);				/* still lost: no change */
	assert_true(r.down);

	/* usable again: up, one log line; a second ok says nothing */
	assert_true(reach_ok(&r, "connected"));
	assert_false(r.down);
	assert_int_equal(r.unreach_ns, 0);
	assert_int_equal(nlogs, 2);
	assert_string_equal(logbuf, "r0: tst tst://h/x: connected again after "
			    "0 s down; requests are served (1 failed while "
			    "down)");
	assert_false(reach_ok(&r, "connected"));
	assert_int_equal(nlogs, 2);
	reach_describe(&r, NULL, kv_fn, NULL);
	assert_string_equal(info, "reachable yes (down 1 times)");

	/* a second time: why defaults to the lack */
	back_dated(&r, 5);
	assert_true(reach_check(&r, ""));
	assert_string_equal(r.why, "no connection");
	assert_int_equal(r.downs, 2);
	bs_ctx_set_log(ctx, NULL, NULL);
}

static void never_with_zero(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *dev = th_dev(ctx, "r1", "mem:1M");
	struct reach r;

	reach_init(&r, dev, &words, "tst x", 0, 1000);
	reach_lost(&r);
	back_dated(&r, 10);
	assert_false(reach_check(&r, "gone"));
	assert_false(r.down);
	reach_describe(&r, NULL, kv_fn, NULL);
	assert_non_null(strstr(info, "(down after 0 s: never)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(down_and_up, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(never_with_zero, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
