/* SPDX-License-Identifier: MIT */
/*
 * Asynchronous open: a driver that returns BS_OPEN_PENDING leaves its
 * device `opening` (size 0, requests -EAGAIN) until bs_dev_open_done();
 * success makes it live with one capability event, failure leaves it
 * `failed` with the reason (requests -ENXIO). Stacked devices over an
 * opening component wait and open in turn (at any depth), or fail with
 * the component's reason. The `error` mapper's open_delay/open_error
 * stand in for a remote driver.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/loop.h>

#include "helpers/th.h"

#define MiB (1ull << 20)

struct events {
	unsigned n;
	struct bs_caps last;
};

static void on_caps(void *arg, struct bs_dev *dev, const struct bs_caps *c)
{
	struct events *e = arg;

	(void)dev;
	e->n++;
	e->last = *c;
}

static void run_ms(struct bs_ctx *ctx, int ms)
{
	uint64_t end = bs_now_ns() + (uint64_t)ms * 1000000;

	while (bs_now_ns() < end)
		bs_loop_run_once(bs_ctx_loop(ctx), 5);
}

static struct bs_dev *stack(struct bs_ctx *ctx, const char *name,
			    const char *type, const char *devices)
{
	char kv[256];

	snprintf(kv, sizeof(kv), "type=%s;devices=%s", type, devices);
	return th_dev_kv(ctx, name, kv);
}

static void opening_then_live(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "slow", "error:8M,open_delay=100,"
						"ops=discard");
	struct bs_caps_sub *sub;
	struct events ev = { 0 };
	char buf[4096];

	assert_int_equal(d->state, BS_DEV_OPENING);
	{
		struct bs_caps c;

		bs_dev_caps(d, &c);	/* no size until it is open */
		assert_int_equal(c.size, 0);
		assert_int_equal(c.state, BS_DEV_OPENING);
	}
	assert_non_null(strstr(d->state_reason, "open_delay = 100 ms"));
	assert_int_equal(bs_dev_check_live(d), -EAGAIN);
	assert_non_null(strstr(bs_last_error(), "slow: still opening"));
	assert_int_equal(bs_read_sync(d, buf, sizeof(buf), 0), -EAGAIN);
	assert_int_equal(bs_caps_subscribe(d, on_caps, &ev, &sub), 0);

	run_ms(ctx, 250);
	assert_int_equal(d->state, BS_DEV_LIVE);
	assert_int_equal(d->size, 8 * MiB);
	assert_string_equal(d->state_reason, "");
	assert_int_equal(bs_dev_check_live(d), 0);
	assert_int_equal(bs_read_sync(d, buf, sizeof(buf), 0), 0);
	/* one event: state, size and limits together */
	assert_int_equal(ev.n, 1);
	assert_int_equal(ev.last.state, BS_DEV_LIVE);
	assert_int_equal(ev.last.size, 8 * MiB);
	bs_caps_unsubscribe(sub);
}

static void open_fails(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "bad", "error:8M,open_delay=50,"
					       "open_error=ETIMEDOUT");
	char buf[512];

	run_ms(ctx, 150);
	assert_int_equal(d->state, BS_DEV_FAILED);
	/* the reason without the device's name: lines name it already */
	assert_string_equal(d->state_reason, "error: open failed on purpose "
					     "(ETIMEDOUT)");
	assert_int_equal(bs_read_sync(d, buf, sizeof(buf), 0), -ENXIO);
	assert_int_equal(bs_dev_check_live(d), -ENXIO);
	assert_non_null(strstr(bs_last_error(), "bad: failed to open:"));
	/* a failed device can be destroyed (its driver is closed already) */
	assert_int_equal(bs_dev_destroy(d), 0);
}

/* Mappers over an opening component wait, at any depth, then open. */
static void stacked_waits_for_components(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *slow, *fast, *lin, *top;
	char buf[4096];

	slow = th_dev(ctx, "slow", "error:4M,open_delay=100,ops=discard");
	fast = th_dev(ctx, "fast", "mem:4M");
	lin = stack(ctx, "lin", "linear", "fast slow");
	top = stack(ctx, "top", "linear", "lin");
	assert_int_equal(lin->state, BS_DEV_OPENING);
	assert_non_null(strstr(lin->state_reason,
			       "waiting for component slow"));
	assert_int_equal(top->state, BS_DEV_OPENING);
	assert_non_null(strstr(top->state_reason,
			       "waiting for component lin"));
	assert_int_equal(bs_read_sync(top, buf, sizeof(buf), 0), -EAGAIN);
	/* a component's knob does not restack a holder that is not open */
	bs_dev_limits_changed(fast);
	assert_int_equal(lin->state, BS_DEV_OPENING);

	run_ms(ctx, 250);
	assert_int_equal(slow->state, BS_DEV_LIVE);
	assert_int_equal(lin->state, BS_DEV_LIVE);
	assert_int_equal(top->state, BS_DEV_LIVE);
	assert_int_equal(lin->size, 8 * MiB);
	assert_int_equal(top->size, 8 * MiB);
	assert_int_equal(bs_read_sync(top, buf, sizeof(buf), 6 * MiB), 0);
	/* the holders know each other: the components are in use */
	assert_int_equal(bs_dev_destroy(slow), -EBUSY);
}

static void stacked_fails_with_component(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *lin, *d;

	th_dev(ctx, "bad", "error:4M,open_delay=50,open_error=EIO");
	lin = stack(ctx, "lin", "linear", "bad");
	run_ms(ctx, 150);
	assert_int_equal(lin->state, BS_DEV_FAILED);
	assert_non_null(strstr(lin->state_reason, "component bad failed to "
						  "open"));
	/* a new mapper over a failed component is refused at once */
	assert_int_equal(th_dev_kv_try(ctx, "lin2", "type=linear;devices=bad",
				       &d), -ENXIO);
	assert_non_null(strstr(bs_last_error(), "component bad failed"));
}

/* The error mapper takes its component itself: it cannot wait. */
static void self_resolving_type_refuses_opening(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d;

	th_dev(ctx, "slow", "error:4M,open_delay=1000");
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error;devices=slow",
				       &d), -EAGAIN);
	assert_non_null(strstr(bs_last_error(), "slow: still opening"));
}

static void wait_live_and_timeout(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a = th_dev(ctx, "a", "error:4M,open_delay=50");
	struct bs_dev *b = th_dev(ctx, "b", "error:4M,open_delay=5000");

	assert_int_equal(bs_dev_wait_live(a, 2000), 0);
	assert_int_equal(bs_dev_wait_live(b, 100), -ETIMEDOUT);
	assert_non_null(strstr(bs_last_error(), "b: still opening after"));
	/* freeing the context with an open still going on is clean */
}

static void option_errors_are_synchronous(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d;

	assert_int_equal(th_dev_try(ctx, "x", "error:4M,open_error=EIO", &d),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "open_error needs"));
	th_dev(ctx, "slow", "error:4M,open_delay=100");
	/* a mapper's unknown key is refused now, not after the wait */
	assert_int_equal(th_dev_kv_try(ctx, "lin", "type=linear;devices=slow;"
					 "bogus=1", &d), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "unknown key 'bogus'"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(opening_then_live,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(open_fails, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(stacked_waits_for_components,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(stacked_fails_with_component,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			self_resolving_type_refuses_opening, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(wait_live_and_timeout,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(option_errors_are_synchronous,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
