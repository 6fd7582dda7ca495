/* SPDX-License-Identifier: MIT */
/*
 * The capability API: one snapshot with a reason for every "no", and
 * change events: the knob, a lost mirror leg and a run-time EOPNOTSUPP
 * each deliver exactly one event, on the loop, with the new capabilities.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

struct seen {
	unsigned events;
	struct bs_dev *dev;
	struct bs_caps last;
	struct bs_caps_sub *self;	/* unsubscribe from the callback */
};

static void on_change(void *arg, struct bs_dev *dev, const struct bs_caps *c)
{
	struct seen *s = arg;

	s->events++;
	s->dev = dev;
	s->last = *c;
	if (s->self) {
		bs_caps_unsubscribe(s->self);
		s->self = NULL;
	}
}

/* Let the loop run what it has queued (events come from there). */
static void settle(struct bs_ctx *ctx)
{
	int i;

	for (i = 0; i < 4; i++)
		bs_loop_run_once(bs_ctx_loop(ctx), 0);
}

static void snapshot_and_reasons(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *m, *w, *ro;
	struct bs_caps c;

	m = th_dev(ctx, "m", "mem:64M");
	bs_dev_caps(m, &c);
	assert_int_equal(c.size, 64 << 20);
	assert_int_equal(c.zeroing, BS_CAP_NATIVE);
	assert_true(c.write_zeroes_unmap);
	assert_true(c.fast_zero);
	assert_string_equal(c.why_no_unmap, "");
	assert_true(c.discard);
	assert_false(c.discard_zeroes);
	assert_int_equal(c.logical_block_size, 512);
	assert_true(c.max_transfer >= 4096);

	w = th_dev(ctx, "w", "mem:64M,zeroes=write");
	bs_dev_caps(w, &c);
	assert_false(c.write_zeroes_unmap);
	assert_false(c.fast_zero);
	assert_non_null(strstr(c.why_no_unmap, "cannot zero by unmapping"));

	w = th_dev(ctx, "n", "mem:64M,zeroes=none");
	bs_dev_caps(w, &c);
	assert_int_equal(c.zeroing, BS_CAP_EMULATED);
	assert_non_null(strstr(c.why_emulated_zeroing, "zero buffers"));
	assert_non_null(strstr(c.why_no_unmap, "no write-zeroes command"));

	ro = th_dev(ctx, "ro", "mem:64M,readonly=1");
	bs_dev_caps(ro, &c);
	assert_true(c.readonly);
	assert_int_equal(c.zeroing, BS_CAP_NO);
	assert_false(c.discard);
	assert_false(c.fast_zero);
	assert_string_equal(c.why_no_unmap, "the device is read-only");

	assert_int_equal(bs_attr_store(m, "queue/write_zeroes_unmap", "0"), 0);
	bs_dev_caps(m, &c);
	assert_false(c.write_zeroes_unmap);
	assert_string_equal(c.why_no_unmap, "write zeroes unmap disabled by "
			    "the user (queue/write_zeroes_unmap=0)");
	assert_string_equal(bs_cap_how_name(BS_CAP_EMULATED), "emulated");
}

static void knob_delivers_one_event(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a, *b, *top;
	struct seen sa = { 0 }, st = { 0 };
	struct bs_caps_sub *suba, *subt;
	uint64_t gen;

	a = th_dev(ctx, "a", "mem:8M");
	b = th_dev(ctx, "b", "mem:8M");
	top = th_dev_kv(ctx, "top", "type=linear;devices=a b");
	(void)b;
	assert_int_equal(bs_caps_subscribe(a, on_change, &sa, &suba), 0);
	assert_int_equal(bs_caps_subscribe(top, on_change, &st, &subt), 0);
	gen = bs_dev_caps_generation(top);

	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "0"), 0);
	/* not from inside the store: on the loop */
	assert_int_equal(sa.events, 0);
	settle(ctx);
	assert_int_equal(sa.events, 1);
	assert_int_equal(st.events, 1);
	assert_ptr_equal(st.dev, top);
	assert_false(st.last.write_zeroes_unmap);
	assert_non_null(strstr(st.last.why_no_unmap, "a"));
	assert_true(bs_dev_caps_generation(top) > gen);
	assert_int_equal(st.last.generation, bs_dev_caps_generation(top));

	/* a write that changes nothing: no event */
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "0"), 0);
	settle(ctx);
	assert_int_equal(sa.events, 1);
	assert_int_equal(st.events, 1);

	/* off and on again before the loop runs: nothing to say */
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "1"), 0);
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "0"), 0);
	settle(ctx);
	assert_int_equal(st.events, 1);

	/* back on: one more event each */
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "1"), 0);
	settle(ctx);
	assert_int_equal(sa.events, 2);
	assert_int_equal(st.events, 2);
	assert_true(st.last.write_zeroes_unmap);

	/* unsubscribed: no more */
	bs_caps_unsubscribe(subt);
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "0"), 0);
	settle(ctx);
	assert_int_equal(st.events, 2);
	assert_int_equal(sa.events, 3);
	bs_caps_unsubscribe(suba);
}

static void mirror_leg_lost_delivers_one_event(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *v;
	struct seen s = { 0 };
	struct bs_caps_sub *sub;
	uint8_t buf[4096];
	int i;

	th_dev(ctx, "a", "mem:4M");
	th_dev(ctx, "b", "mem:4M,zeroes=write");
	th_dev_kv(ctx, "e", "type=error;devices=b;ops=write;after=3");
	v = th_dev_kv(ctx, "v", "type=mirror;devices=a e");
	assert_false(bs_dev_write_zeroes_unmap(v));
	assert_int_equal(bs_caps_subscribe(v, on_change, &s, &sub), 0);
	memset(buf, 0x5a, sizeof(buf));
	for (i = 0; i < 8; i++)
		assert_int_equal(bs_write_sync(v, buf, sizeof(buf),
					       (uint64_t)i * 4096), 0);
	settle(ctx);
	/* the faulty leg is dropped: the live leg unmaps */
	assert_int_equal(s.events, 1);
	assert_true(s.last.write_zeroes_unmap);
	assert_true(s.last.fast_zero);
	bs_caps_unsubscribe(sub);
}

static void runtime_eopnotsupp_delivers_one_event(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *b, *top;
	struct seen sb = { 0 }, st = { 0 };
	struct bs_caps_sub *subb, *subt;

	th_dev(ctx, "a", "mem:1M");
	b = th_dev(ctx, "b", "mem:1M,broken_write_zeroes=1");
	top = th_dev_kv(ctx, "top", "type=linear;devices=a b");
	assert_true(bs_dev_write_zeroes_unmap(top));
	assert_int_equal(bs_caps_subscribe(b, on_change, &sb, &subb), 0);
	st.self = NULL;
	assert_int_equal(bs_caps_subscribe(top, on_change, &st, &subt), 0);
	st.self = subt;		/* unsubscribes itself in the callback */
	/* zeroes all of it: b answers EOPNOTSUPP, the fallback writes */
	assert_int_equal(bs_zeroout_sync(top, 0, top->size, 0, NULL, NULL), 0);
	settle(ctx);
	assert_int_equal(sb.events, 1);
	assert_int_equal(sb.last.zeroing, BS_CAP_EMULATED);
	assert_non_null(strstr(sb.last.why_no_unmap, "EOPNOTSUPP"));
	assert_int_equal(st.events, 1);
	assert_false(st.last.write_zeroes_unmap);
	assert_int_equal(st.last.zeroing, BS_CAP_EMULATED);
	/* a second failure cannot happen (write-zeroes is off): no event */
	assert_int_equal(bs_zeroout_sync(top, 0, top->size, 0, NULL, NULL), 0);
	settle(ctx);
	assert_int_equal(sb.events, 1);
	assert_int_equal(st.events, 1);
	bs_caps_unsubscribe(subb);
}

/* A device destroyed with an event queued: nothing runs on freed memory. */
static void destroy_with_event_pending(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a;
	struct seen s = { 0 };
	struct bs_caps_sub *sub;

	a = th_dev(ctx, "a", "mem:1M");
	assert_int_equal(bs_caps_subscribe(a, on_change, &s, &sub), 0);
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "0"), 0);
	assert_int_equal(bs_dev_destroy(a), 0);
	settle(ctx);
	assert_int_equal(s.events, 0);
}

/* One log line per change: what changed, with the reason of a new "no". */
static void diff_names_changes_and_reasons(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *a;
	struct bs_caps before, after;
	char buf[1024], tiny[16];

	a = th_dev(ctx, "a", "mem:8M");
	bs_dev_caps(a, &before);
	assert_int_equal(bs_caps_diff(&before, &before, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");

	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "0"), 0);
	bs_dev_caps(a, &after);
	assert_int_equal(bs_caps_diff(&before, &after, buf, sizeof(buf)), 2);
	assert_string_equal(buf,
			    "write_zeroes_unmap yes->no (write zeroes unmap "
			    "disabled by the user (queue/write_zeroes_unmap=0)"
			    "), fast_zero yes->no");
	/* and back: no reason on a "yes" */
	assert_int_equal(bs_caps_diff(&after, &before, buf, sizeof(buf)), 2);
	assert_string_equal(buf, "write_zeroes_unmap no->yes, "
				 "fast_zero no->yes");
	/* a short buffer is cut, never overrun, and still counts */
	assert_int_equal(bs_caps_diff(&before, &after, tiny, sizeof(tiny)), 2);
	assert_int_equal(strlen(tiny), sizeof(tiny) - 1);

	after = before;
	after.size += 4096;
	after.fua = BS_CAP_EMULATED;
	before.fua = BS_CAP_NATIVE;
	assert_int_equal(bs_caps_diff(&before, &after, buf, sizeof(buf)), 2);
	assert_string_equal(buf, "size 8388608->8392704, fua native->emulated");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(snapshot_and_reasons,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(knob_delivers_one_event,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(mirror_leg_lost_delivers_one_event,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			runtime_eopnotsupp_delivers_one_event, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(destroy_with_event_pending,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(diff_names_changes_and_reasons,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
