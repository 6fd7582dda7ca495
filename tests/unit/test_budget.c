/* SPDX-License-Identifier: MIT */
/*
 * The server-wide in-flight budget: takes within the limit pass, above it
 * wait (smallest first, an overdue one before all) and are woken when
 * bytes come back; a
 * request bigger than the limit goes alone; a stalled holder is evicted
 * only while someone waits, not while its requests are in a device, and
 * not for progress made after the watchdog read the clock; leaving gives
 * everything back; taking above the limit (take_over) never waits, is
 * counted, and wakes nobody. A woken waiter has its turn for a second;
 * if it does not come back, the turn passes on by itself, to one waiter
 * at a time, on any thread; at once when it comes back and still cannot
 * take, leaves or cancels.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/loop.h>
#include <blkstack/threads.h>

#include "helpers/th.h"

#define MiB (1ull << 20)

static void run_ms(struct bs_ctx *ctx, int ms);

/*
 * A holder is woken on its own loop (a work item sent there), not inside
 * the call that freed the bytes: run the loop once after each call.
 */
static struct bs_loop *test_loop;

static void settle(void)
{
	if (test_loop)
		bs_loop_run_once(test_loop, 0);
}

static bool take_settled(struct bs_budget *b, struct bs_budget_holder *h,
			 uint64_t n)
{
	bool ok = bs_budget_take(b, h, n);

	settle();
	return ok;
}

static void give_settled(struct bs_budget *b, struct bs_budget_holder *h,
			 uint64_t n)
{
	bs_budget_give(b, h, n);
	settle();
}

static void leave_settled(struct bs_budget *b, struct bs_budget_holder *h)
{
	bs_budget_leave(b, h);
	settle();
}

struct th {
	struct bs_budget_holder h;
	int woken, evicted;
};

static void wake(struct bs_budget_holder *h)
{
	((struct th *)h)->woken++;
}

static void evict(struct bs_budget_holder *h, const char *why)
{
	struct th *t = (struct th *)h;

	assert_non_null(strstr(why, "no progress"));
	t->evicted++;
}

static void init(struct th *t)
{
	memset(t, 0, sizeof(*t));
	t->h.wake = wake;
	t->h.evict = evict;
}

static struct bs_budget *budget(void **state, uint64_t limit, uint32_t ms)
{
	struct bs_budget *b = bs_ctx_budget(*state);

	test_loop = bs_ctx_loop(*state);
	assert_non_null(b);
	assert_int_equal(bs_budget_configure(b, limit, ms), 0);
	return b;
}

static void default_is_bounded(void **state)
{
	struct bs_budget *b = bs_ctx_budget(*state);

	assert_true(bs_budget_limit(b) >= BS_BUDGET_MIN);
	assert_true(bs_budget_limit(b) <= BS_BUDGET_MAX_DEFAULT);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN - 1, 0),
			 -EINVAL);
}

static void take_wait_smallest_first(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, c, d, e;

	init(&a);
	init(&c);
	init(&d);
	init(&e);
	assert_true(take_settled(b, &a.h, 40 * MiB));
	assert_int_equal(bs_budget_used(b), 40 * MiB);
	/* c does not fit: queued */
	assert_false(take_settled(b, &c.h, 32 * MiB));
	/* d is smaller than every waiter and fits: it passes */
	assert_true(take_settled(b, &d.h, 4 * MiB));
	/* e does not fit (44 + 24 > 64): queued behind nobody smaller */
	assert_false(take_settled(b, &e.h, 24 * MiB));
	assert_int_equal(bs_budget_waits(b), 2);
	/* asking again does not queue twice */
	assert_false(take_settled(b, &c.h, 32 * MiB));
	assert_int_equal(bs_budget_waits(b), 2);
	/* 4 MiB back: 40 used, e (24) fits and is the smallest: woken */
	give_settled(b, &a.h, 4 * MiB);
	assert_int_equal(e.woken, 1);
	assert_int_equal(c.woken, 0);
	/* c may not take e's turn even though it asks */
	assert_false(take_settled(b, &c.h, 32 * MiB));
	assert_true(take_settled(b, &e.h, 24 * MiB));
	assert_int_equal(bs_budget_used(b), 64 * MiB);
	/* room for c: woken, taken */
	give_settled(b, &a.h, 32 * MiB);
	assert_int_equal(c.woken, 1);
	assert_true(take_settled(b, &c.h, 32 * MiB));
	assert_int_equal(bs_budget_peak(b), 64 * MiB);
	leave_settled(b, &c.h);
	leave_settled(b, &d.h);
	leave_settled(b, &e.h);
	leave_settled(b, &a.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/* A big request that waited the age limit has its room reserved. */
static void overdue_waiter_goes_first(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, big, small;

	bs_budget_set_age(b, 200);

	init(&a);
	init(&big);
	init(&small);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &big.h, 32 * MiB));
	bs_budget_progress(&a.h);
	run_ms(*state, 250);	/* big is overdue now (200 ms) */
	/* a small newcomer that would fit may not pass it any more */
	give_settled(b, &a.h, 28 * MiB);
	assert_int_equal(big.woken, 1);
	assert_false(take_settled(b, &small.h, 1 * MiB));
	assert_true(take_settled(b, &big.h, 32 * MiB));
	assert_int_equal(small.woken, 0);	/* 32 + 32 = 64: no room */
	leave_settled(b, &big.h);
	assert_int_equal(small.woken, 1);
	assert_true(take_settled(b, &small.h, 1 * MiB));
	leave_settled(b, &small.h);
	leave_settled(b, &a.h);

	/* beyond the overdue one's room, small ones still pass */
	init(&a);
	init(&big);
	init(&small);
	assert_true(take_settled(b, &a.h, 64 * MiB));
	assert_false(take_settled(b, &big.h, 32 * MiB));
	bs_budget_progress(&a.h);
	run_ms(*state, 250);
	leave_settled(b, &a.h);
	assert_int_equal(big.woken, 1);
	assert_true(take_settled(b, &small.h, 1 * MiB));
	assert_true(take_settled(b, &big.h, 32 * MiB));
	leave_settled(b, &big.h);
	leave_settled(b, &small.h);
	assert_int_equal(bs_budget_used(b), 0);
}

static void oversize_goes_alone(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, c;

	init(&a);
	init(&c);
	assert_true(take_settled(b, &a.h, 1 * MiB));
	assert_false(take_settled(b, &c.h, 100 * MiB));
	give_settled(b, &a.h, 1 * MiB);
	assert_int_equal(c.woken, 1);
	assert_true(take_settled(b, &c.h, 100 * MiB));
	assert_false(take_settled(b, &a.h, 1));
	leave_settled(b, &c.h);
	assert_int_equal(a.woken, 1);
	leave_settled(b, &a.h);
}

/* Taking above the limit never waits and is counted; a waiter is woken
 * only once the bytes are back under the limit. */
static void take_over_goes_above_the_limit(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, c;

	init(&a);
	init(&c);
	assert_true(take_settled(b, &a.h, 64 * MiB));
	bs_budget_take_over(b, &a.h, 16384);
	bs_budget_take_over(b, &a.h, 16384);
	assert_int_equal(bs_budget_used(b), 64 * MiB + 32768);
	assert_int_equal(bs_budget_peak(b), 64 * MiB + 32768);
	assert_int_equal(bs_budget_over(b), 32768);
	assert_int_equal(bs_budget_waits(b), 0);
	assert_false(take_settled(b, &c.h, 1 * MiB));
	give_settled(b, &a.h, 1 * MiB);
	assert_int_equal(c.woken, 0);	/* 63 MiB + 32 KiB: no room yet */
	give_settled(b, &a.h, 32768);
	assert_int_equal(c.woken, 1);
	assert_true(take_settled(b, &c.h, 1 * MiB));
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	assert_int_equal(bs_budget_used(b), 0);
	assert_int_equal(bs_budget_over(b), 32768);
}

static void run_ms(struct bs_ctx *ctx, int ms)
{
	uint64_t end = bs_now_ns() + (uint64_t)ms * 1000000;

	while (bs_now_ns() < end)
		bs_loop_run_once(bs_ctx_loop(ctx), 10);
}

static void stalled_holder_evicted_only_with_waiters(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, busy, c;

	init(&a);
	init(&busy);
	init(&c);
	assert_true(take_settled(b, &a.h, 48 * MiB));
	assert_true(take_settled(b, &busy.h, 8 * MiB));
	/* nobody waits: stalling is allowed */
	run_ms(*state, 300);
	assert_int_equal(a.evicted, 0);
	assert_false(take_settled(b, &c.h, 16 * MiB));
	/* busy keeps making progress, a does not */
	for (int i = 0; i < 30 && !a.evicted; i++) {
		bs_budget_progress(&busy.h);
		run_ms(*state, 20);
	}
	assert_int_equal(a.evicted, 1);
	assert_int_equal(busy.evicted, 0);
	assert_int_equal(c.evicted, 0);	/* waiting is not stalling */
	/* the evicted holder's session frees its buffers */
	give_settled(b, &a.h, 48 * MiB);
	assert_int_equal(c.woken, 1);
	assert_true(take_settled(b, &c.h, 16 * MiB));
	leave_settled(b, &a.h);
	leave_settled(b, &busy.h);
	leave_settled(b, &c.h);
	assert_int_equal(bs_budget_used(b), 0);
}

static void leave_while_queued(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, c, d;

	init(&a);
	init(&c);
	init(&d);
	assert_true(take_settled(b, &a.h, 64 * MiB));
	assert_false(take_settled(b, &c.h, 1 * MiB));
	assert_false(take_settled(b, &d.h, 1 * MiB));
	leave_settled(b, &c.h);	/* the head goes away */
	leave_settled(b, &a.h);
	assert_int_equal(d.woken, 1);
	assert_true(take_settled(b, &d.h, 1 * MiB));
	leave_settled(b, &d.h);
}

/*
 * A waiter woken that does not come back for its bytes (its session
 * cannot go on: a client that reads none of its replies) keeps the
 * others back for a second at most; when it does come back, it takes
 * as usual. Before, the smallest waiter held every larger request back
 * for as long as it did not come.
 */
static void woken_waiter_gone_quiet(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, x, c;

	init(&a);
	init(&x);
	init(&c);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &x.h, 8 * MiB));
	give_settled(b, &a.h, 60 * MiB);
	assert_int_equal(x.woken, 1);
	/* x's turn (the smallest, woken): c waits */
	assert_false(take_settled(b, &c.h, 16 * MiB));
	run_ms(*state, 1100);
	/* x never came back: c goes */
	assert_true(take_settled(b, &c.h, 16 * MiB));
	assert_true(take_settled(b, &x.h, 8 * MiB));
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	leave_settled(b, &x.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * A holder that also waits for more: not evicted while it was not woken
 * (an iSCSI session's write waits for Data-Out the session reads only
 * once its next command got its turn); once woken, if it does not come
 * back and makes no progress while others wait, it is evicted like any
 * other (before it never was: a client holding replies it never reads,
 * with one more request queued, kept its bytes for good).
 */
static void waiting_holder_stalled_evicted(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, c, d;

	init(&a);
	init(&c);
	init(&d);
	assert_true(take_settled(b, &a.h, 30 * MiB));
	assert_true(take_settled(b, &d.h, 30 * MiB));
	assert_false(take_settled(b, &a.h, 10 * MiB));	/* a waits too */
	assert_false(take_settled(b, &c.h, 20 * MiB));
	for (int i = 0; i < 15; i++) {		/* 300 ms: 3 stall limits */
		bs_budget_progress(&d.h);
		run_ms(*state, 20);
	}
	assert_int_equal(a.evicted, 0);	/* its turn never came */
	give_settled(b, &d.h, 30 * MiB);	/* a's turn: woken */
	assert_int_equal(a.woken, 1);
	/* a does not come back: a second later c goes and a is evicted */
	for (int i = 0; i < 100 && !a.evicted; i++)
		run_ms(*state, 20);
	assert_int_equal(a.evicted, 1);
	assert_true(c.woken >= 1);
	assert_true(take_settled(b, &c.h, 20 * MiB));
	assert_int_equal(c.evicted, 0);
	assert_int_equal(d.evicted, 0);
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	leave_settled(b, &d.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/* Every waiter gone quiet: nobody can use the room, nobody is evicted */
static void quiet_waiters_evict_nobody(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, x;

	init(&a);
	init(&x);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &x.h, 8 * MiB));
	give_settled(b, &a.h, 30 * MiB);
	assert_int_equal(x.woken, 1);	/* and never comes back */
	for (int i = 0; i < 60; i++) {	/* 1.2 s: a busy while x may come */
		bs_budget_progress(&a.h);
		run_ms(*state, 20);
	}
	run_ms(*state, 500);		/* then a idle, x quiet */
	assert_int_equal(a.evicted, 0);	/* nobody waits for a's bytes */
	leave_settled(b, &a.h);
	leave_settled(b, &x.h);
}

/* Run the loop until *@flag is set or @ms passed; true if it was set. */
static bool run_until(struct bs_ctx *ctx, const int *flag, int ms)
{
	uint64_t end = bs_now_ns() + (uint64_t)ms * 1000000;

	while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE) && bs_now_ns() < end)
		bs_loop_run_once(bs_ctx_loop(ctx), 10);
	return __atomic_load_n(flag, __ATOMIC_ACQUIRE) != 0;
}

/*
 * A woken waiter that does not come back has its turn for a second
 * (WAKE_GRACE_NS); then the turn passes on by itself, with no other
 * give and no watchdog (a stall timeout of 0 means there is none), to
 * one waiter at a time in the usual order. Before, the waiters behind it
 * waited for the next give or the watchdog's round: half the stall
 * timeout, and for good without one.
 */
static void quiet_turn_passes_on(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, x, c, d;

	init(&a);
	init(&x);
	init(&c);
	init(&d);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &x.h, 8 * MiB));
	assert_false(take_settled(b, &c.h, 16 * MiB));
	assert_false(take_settled(b, &d.h, 32 * MiB));
	give_settled(b, &a.h, 60 * MiB);
	/* x's turn (the smallest): one wake, not one for everyone */
	assert_int_equal(x.woken, 1);
	assert_int_equal(c.woken, 0);
	assert_int_equal(d.woken, 0);
	run_ms(*state, 500);
	assert_int_equal(c.woken, 0);	/* still x's turn */
	/* x never comes back: c is woken without anything given back */
	assert_true(run_until(*state, &c.woken, 5000));
	assert_int_equal(c.woken, 1);
	assert_int_equal(d.woken, 0);	/* the next one only */
	assert_true(take_settled(b, &c.h, 16 * MiB));
	assert_int_equal(d.woken, 1);	/* c took: d's turn */
	assert_true(take_settled(b, &d.h, 32 * MiB));
	/* x comes back late: it takes as usual (8 + 16 + 32 <= 64) */
	assert_true(take_settled(b, &x.h, 8 * MiB));
	assert_int_equal(x.woken, 1);
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	leave_settled(b, &d.h);
	leave_settled(b, &x.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * The same with each waiter on its own I/O thread: wakes are work items
 * sent to the waiter's loop, the turn's timer runs on the main loop. c,
 * woken on its loop once x's second is up, takes there.
 */
struct mt {
	struct bs_budget_holder h;	/* first */
	struct bs_budget *b;
	uint64_t want;
	bool take_on_wake;
	int woken, tries, got;		/* atomic */
};

static void mt_try(void *arg)
{
	struct mt *m = arg;

	__atomic_add_fetch(&m->tries, 1, __ATOMIC_RELAXED);
	if (bs_budget_take(m->b, &m->h, m->want))
		__atomic_store_n(&m->got, 1, __ATOMIC_RELEASE);
}

static void mt_wake(struct bs_budget_holder *h)
{
	struct mt *m = (struct mt *)h;

	__atomic_store_n(&m->woken, 1, __ATOMIC_RELEASE);
	if (m->take_on_wake)
		mt_try(m);
}

static void mt_leave(void *arg)
{
	struct mt *m = arg;

	bs_budget_leave(m->b, &m->h);
}

static void quiet_turn_passes_across_threads(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct bs_loop *l1, *l2;
	struct th a;
	struct mt x = { .b = b, .want = 8 * MiB };
	struct mt c = { .b = b, .want = 16 * MiB, .take_on_wake = true };

	assert_int_equal(bs_ctx_start_threads(ctx, 2), 0);
	l1 = bs_ctx_loop_at(ctx, 1);
	l2 = bs_ctx_loop_at(ctx, 2);
	x.h.wake = mt_wake;
	c.h.wake = mt_wake;
	init(&a);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	bs_loop_call(l1, mt_try, &x);	/* x waits, bound to l1 */
	bs_loop_call(l2, mt_try, &c);	/* c waits, bound to l2 */
	assert_int_equal(__atomic_load_n(&x.got, __ATOMIC_ACQUIRE), 0);
	assert_int_equal(__atomic_load_n(&c.got, __ATOMIC_ACQUIRE), 0);
	give_settled(b, &a.h, 60 * MiB);
	assert_true(run_until(ctx, &x.woken, 5000));
	/* x never asks again; c is woken on l2 and takes there */
	assert_true(run_until(ctx, &c.got, 5000));
	assert_int_equal(__atomic_load_n(&c.tries, __ATOMIC_RELAXED), 2);
	assert_int_equal(__atomic_load_n(&x.got, __ATOMIC_ACQUIRE), 0);
	assert_int_equal(bs_budget_used(b), 16 * MiB);
	bs_loop_call(l1, mt_leave, &x);
	bs_loop_call(l2, mt_leave, &c);
	leave_settled(b, &a.h);
	assert_int_equal(bs_budget_used(b), 0);
	bs_ctx_stop_threads(ctx);
}

static void mt_give_all(void *arg)
{
	struct mt *m = arg;

	bs_budget_give(m->b, &m->h, m->want);
}

/*
 * A give on an I/O thread asks the main loop to arm the turn timer; if
 * the main loop runs that request only after the woken waiter's turn is
 * over (it was busy for a second: an open, a restack), the turn must
 * still pass on then. Before, it armed nothing (no turn running any
 * more) and, with no watchdog, the waiters behind waited for good.
 */
static void late_main_loop_passes_turn_on(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct bs_loop *l1, *l2;
	struct mt g = { .b = b, .want = 60 * MiB };
	struct mt x = { .b = b, .want = 8 * MiB };
	struct mt c = { .b = b, .want = 16 * MiB, .take_on_wake = true };
	struct timespec busy = { 1, 200000000 };

	assert_int_equal(bs_ctx_start_threads(ctx, 2), 0);
	l1 = bs_ctx_loop_at(ctx, 1);
	l2 = bs_ctx_loop_at(ctx, 2);
	g.h.wake = mt_wake;
	x.h.wake = mt_wake;
	c.h.wake = mt_wake;
	bs_loop_call(l1, mt_try, &g);	/* g holds 60 MiB, on l1 */
	assert_int_equal(__atomic_load_n(&g.got, __ATOMIC_ACQUIRE), 1);
	bs_loop_call(l1, mt_try, &x);	/* x waits, on l1 */
	bs_loop_call(l2, mt_try, &c);	/* c waits, on l2 */
	bs_loop_call(l1, mt_give_all, &g);	/* x woken; main asked to arm */
	/* the main loop does not run for 1.2 s: x's turn is over by then,
	 * and x never comes back */
	nanosleep(&busy, NULL);
	assert_int_equal(__atomic_load_n(&x.woken, __ATOMIC_ACQUIRE), 1);
	assert_int_equal(__atomic_load_n(&c.woken, __ATOMIC_ACQUIRE), 0);
	assert_true(run_until(ctx, &c.got, 3000));
	assert_int_equal(__atomic_load_n(&x.got, __ATOMIC_ACQUIRE), 0);
	bs_loop_call(l1, mt_leave, &x);
	bs_loop_call(l1, mt_leave, &g);
	bs_loop_call(l2, mt_leave, &c);
	assert_int_equal(bs_budget_used(b), 0);
	bs_ctx_stop_threads(ctx);
}

/*
 * A woken waiter that comes back and still cannot take (it asks for
 * more than it waited for) hands its turn on at once: c, now the
 * smallest, fits and is woken. Before, c waited for the next give or
 * the watchdog.
 */
static void failed_retake_passes_on(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, x, c;

	init(&a);
	init(&x);
	init(&c);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &x.h, 8 * MiB));
	assert_false(take_settled(b, &c.h, 16 * MiB));
	give_settled(b, &a.h, 44 * MiB);	/* 16 used: both would fit */
	assert_int_equal(x.woken, 1);
	assert_int_equal(c.woken, 0);
	assert_false(take_settled(b, &x.h, 56 * MiB));
	assert_int_equal(c.woken, 1);
	assert_true(take_settled(b, &c.h, 16 * MiB));
	assert_int_equal(x.woken, 1);	/* 32 + 56 > 64: not yet */
	give_settled(b, &c.h, 16 * MiB);
	assert_int_equal(x.woken, 1);	/* 16 + 56 > 64: not yet */
	give_settled(b, &a.h, 16 * MiB);
	assert_int_equal(x.woken, 2);
	assert_true(take_settled(b, &x.h, 56 * MiB));
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	leave_settled(b, &x.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * A woken waiter whose session closes before it took (the close is late:
 * the wake was already sent) passes its turn on as it leaves.
 */
static void woken_waiter_leaves(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, x, c;

	init(&a);
	init(&x);
	init(&c);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &x.h, 8 * MiB));
	assert_false(take_settled(b, &c.h, 16 * MiB));
	give_settled(b, &a.h, 56 * MiB);	/* 4 used */
	assert_int_equal(x.woken, 1);
	assert_int_equal(c.woken, 0);
	leave_settled(b, &x.h);
	assert_int_equal(c.woken, 1);
	assert_true(take_settled(b, &c.h, 16 * MiB));
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * A waiter that stops waiting without leaving (its session ends but still
 * has requests in devices) cancels: a woken one's turn passes on at once,
 * and so does the room reserved for an overdue one. What it holds stays
 * held until given back.
 */
static void cancel_passes_turn_on(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 0);
	struct th a, x, c, big, small;

	init(&a);
	init(&x);
	init(&c);
	assert_true(take_settled(b, &a.h, 56 * MiB));
	assert_true(take_settled(b, &x.h, 4 * MiB));
	assert_false(take_settled(b, &x.h, 8 * MiB));	/* x waits too */
	assert_false(take_settled(b, &c.h, 16 * MiB));
	give_settled(b, &a.h, 48 * MiB);		/* 12 used */
	assert_int_equal(x.woken, 1);
	assert_int_equal(c.woken, 0);
	bs_budget_cancel(b, &x.h);			/* x's session ends */
	settle();
	assert_int_equal(c.woken, 1);
	assert_int_equal(bs_budget_used(b), 12 * MiB);	/* x keeps its 4 */
	bs_budget_cancel(b, &x.h);			/* again: nothing */
	settle();
	assert_int_equal(bs_budget_waits(b), 2);
	assert_true(take_settled(b, &c.h, 16 * MiB));
	leave_settled(b, &x.h);
	leave_settled(b, &c.h);
	leave_settled(b, &a.h);
	assert_int_equal(bs_budget_used(b), 0);

	/* an overdue waiter that cancels frees the room reserved for it */
	bs_budget_set_age(b, 200);
	init(&a);
	init(&big);
	init(&small);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &big.h, 32 * MiB));
	run_ms(*state, 250);				/* big is overdue */
	assert_false(take_settled(b, &small.h, 2 * MiB));	/* 62 + 32 */
	assert_int_equal(small.woken, 0);
	bs_budget_cancel(b, &big.h);
	settle();
	assert_int_equal(small.woken, 1);
	assert_true(take_settled(b, &small.h, 2 * MiB));
	leave_settled(b, &big.h);
	leave_settled(b, &small.h);
	leave_settled(b, &a.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * Progress a holder makes on its own loop while the watchdog runs (after
 * the watchdog read the clock) is fresh. Before, the watchdog took such
 * a holder's last progress for 2^64 ns ago and evicted it: the busier a
 * holder on another thread, the likelier. Here the holder's progress is
 * put after the watchdog's clock by hand.
 */
static void progress_after_the_watchdog_clock(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, c;

	init(&a);
	init(&c);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &c.h, 8 * MiB));
	a.h.progress_ns = bs_now_ns() + 400ull * 1000000;
	run_ms(*state, 300);			/* three stall timeouts */
	assert_int_equal(a.evicted, 0);
	/* and counted from there: a stall timeout after it, a goes */
	run_ms(*state, 400);
	assert_int_equal(a.evicted, 1);
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * A holder whose requests are in a device is not stalled, however long
 * the device takes, while others wait: its client is not what it waits
 * for. Its last request back counts as progress, and from then on it is
 * the client's part again: a stall timeout after that, with no progress,
 * it is evicted. Before, a session whose writes waited on a slow device
 * for a stall timeout was evicted.
 */
/*
 * The watchdog itself wakes an overdue waiter (room appeared while a
 * smaller one's turn ran, and no give since): the waiter's bytes have
 * seen no progress (an iSCSI write whose Data-Out waits behind it), but
 * being woken in that same pass is not "woken and gone quiet": a wake
 * stamped after the watchdog read its clock once counted as 2^64 ns old.
 */
static void watchdog_wake_is_not_quiet(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, w, s2;

	bs_budget_set_age(b, 200);
	init(&a);
	init(&w);
	init(&s2);
	assert_true(take_settled(b, &a.h, 40 * MiB));
	assert_true(take_settled(b, &w.h, 8 * MiB));
	assert_false(take_settled(b, &w.h, 20 * MiB));	/* 68: queued first */
	assert_false(take_settled(b, &s2.h, 17 * MiB));	/* 65: queued */
	give_settled(b, &a.h, 10 * MiB);	/* 38: s2 (smaller) woken */
	assert_int_equal(s2.woken, 1);
	assert_int_equal(w.woken, 0);
	/* s2 does not come back within this test's 400 ms (its turn is a
	 * second); w turns overdue at 200 ms and the watchdog wakes it */
	for (int i = 0; i < 20 && !w.woken; i++) {
		bs_budget_progress(&a.h);
		run_ms(*state, 20);
	}
	assert_int_equal(w.woken, 1);
	settle();
	assert_int_equal(w.evicted, 0);
	assert_true(take_settled(b, &w.h, 20 * MiB));
	bs_budget_cancel(b, &s2.h);
	settle();
	leave_settled(b, &s2.h);
	leave_settled(b, &w.h);
	leave_settled(b, &a.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * Two requests holding all of a's bytes are in a device for three stall
 * timeouts: not a stall. The first comes back (its reply waits for the
 * client) and is sent: a is all in the device again. The last back, its
 * reply is never read: evicted a stall timeout later, not sooner.
 */
static void device_requests_are_not_a_stall(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, c;

	init(&a);
	init(&c);
	assert_true(take_settled(b, &a.h, 60 * MiB));
	assert_false(take_settled(b, &c.h, 8 * MiB));
	bs_budget_dev_begin(&a.h, 30 * MiB);
	bs_budget_dev_begin(&a.h, 30 * MiB);
	run_ms(*state, 300);			/* three stall timeouts */
	assert_int_equal(a.evicted, 0);
	bs_budget_dev_end(&a.h, 30 * MiB);	/* its reply's clock starts */
	run_ms(*state, 30);
	bs_budget_progress(&a.h);		/* ... and it is sent */
	give_settled(b, &a.h, 30 * MiB);
	run_ms(*state, 300);			/* one still in the device */
	assert_int_equal(a.evicted, 0);
	bs_budget_dev_end(&a.h, 30 * MiB);	/* counted from here */
	run_ms(*state, 50);
	assert_int_equal(a.evicted, 0);
	for (int i = 0; i < 30 && !a.evicted; i++)
		run_ms(*state, 20);
	assert_int_equal(a.evicted, 1);
	assert_int_equal(c.evicted, 0);
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * A client that does not read a 1 MiB reply keeps sending requests that
 * go to a device and come back (a FLUSH every 20 ms; then one slow
 * zeroout always in the device): neither is progress for the reply's
 * bytes. The first version took every request back as progress, and
 * any request in a device as cover for the whole session: such a client
 * kept its bytes, with others waiting, for as long as it liked.
 */
static void device_requests_do_not_hide_an_unread_reply(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, c, d;
	int i;

	init(&a);
	init(&c);
	assert_true(take_settled(b, &a.h, 60 * MiB));	/* the reply */
	assert_false(take_settled(b, &c.h, 8 * MiB));
	for (i = 0; i < 50 && !a.evicted; i++) {
		bs_budget_dev_begin(&a.h, 0);		/* FLUSH */
		run_ms(*state, 10);
		bs_budget_dev_end(&a.h, 0);
		run_ms(*state, 10);
	}
	assert_int_equal(a.evicted, 1);
	assert_true(i <= 15);			/* about 100-150 ms */
	leave_settled(b, &a.h);
	assert_int_equal(c.woken, 1);
	assert_true(take_settled(b, &c.h, 8 * MiB));

	init(&d);
	assert_true(take_settled(b, &d.h, 50 * MiB));	/* the reply */
	assert_false(take_settled(b, &c.h, 16 * MiB));	/* 74: waits */
	bs_budget_dev_begin(&d.h, 0);		/* a zeroout, never back */
	for (i = 0; i < 30 && !d.evicted; i++)
		run_ms(*state, 20);
	assert_int_equal(d.evicted, 1);
	bs_budget_dev_end(&d.h, 0);
	leave_settled(b, &d.h);
	assert_int_equal(c.evicted, 0);
	bs_budget_cancel(b, &c.h);
	settle();
	leave_settled(b, &c.h);
	assert_int_equal(bs_budget_used(b), 0);
}

/*
 * A holder all in a device for longer than the stall timeout takes more
 * (a next write's payload, still to come from its client): those bytes'
 * clock starts at the take, not at the last progress before the device
 * time, which would evict it at once.
 */
static void bytes_taken_while_in_a_device_start_fresh(void **state)
{
	struct bs_budget *b = budget(state, 64 * MiB, 100);
	struct th a, c;

	init(&a);
	init(&c);
	assert_true(take_settled(b, &a.h, 10 * MiB));
	bs_budget_dev_begin(&a.h, 10 * MiB);
	run_ms(*state, 300);
	assert_true(take_settled(b, &a.h, 50 * MiB));
	assert_false(take_settled(b, &c.h, 8 * MiB));
	run_ms(*state, 60);
	assert_int_equal(a.evicted, 0);
	for (int i = 0; i < 30 && !a.evicted; i++)
		run_ms(*state, 20);
	assert_int_equal(a.evicted, 1);
	bs_budget_dev_end(&a.h, 10 * MiB);
	leave_settled(b, &a.h);
	leave_settled(b, &c.h);
	assert_int_equal(bs_budget_used(b), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(default_is_bounded,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(take_wait_smallest_first,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(overdue_waiter_goes_first,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(take_over_goes_above_the_limit,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(oversize_goes_alone,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			stalled_holder_evicted_only_with_waiters, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(woken_waiter_gone_quiet,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(waiting_holder_stalled_evicted,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(quiet_waiters_evict_nobody,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(leave_while_queued,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(quiet_turn_passes_on,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			quiet_turn_passes_across_threads, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(failed_retake_passes_on,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(woken_waiter_leaves,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(cancel_passes_turn_on,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			progress_after_the_watchdog_clock, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(late_main_loop_passes_turn_on,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(watchdog_wake_is_not_quiet,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			device_requests_do_not_hide_an_unread_reply,
			th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			bytes_taken_while_in_a_device_start_fresh,
			th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(device_requests_are_not_a_stall,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
