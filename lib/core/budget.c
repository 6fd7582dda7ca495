/* SPDX-License-Identifier: MIT */
/*
 * The server-wide in-flight payload budget (see include/blkstack/budget.h):
 * a byte counter with a limit, a wait queue, and a stall watchdog that
 * runs only while someone waits.
 *
 * Who goes next: the smallest request first. That keeps a small request
 * (a bystander's 64 KiB read) from queueing behind a row of stalled 32 MiB
 * writes that each must be evicted in turn. So that a big request is not
 * starved by a stream of small ones, the oldest waiter, once it has waited
 * the age limit (a minute, or four stall timeouts), has its room reserved:
 * it goes as soon as it fits, and others take only what is left beyond it.
 * The age limit is long on purpose: stalled big writes queued together
 * all come of age together, and would then keep a bystander out for as
 * many eviction rounds as there are of them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <blkstack/budget.h>
#include <blkstack/loop.h>

#include "core/internal.h"

struct bs_budget {
	struct bs_loop *loop;
	uint64_t limit, used, peak, waits;
	uint32_t stall_ms;
	uint32_t age_ms;			/* 0: the default rule */
	int timer;				/* watchdog, > 0 while armed */
	struct bs_budget_holder *holders;	/* holders with bytes */
	struct bs_budget_holder *whead, *wtail;	/* wait queue */
};

static uint64_t default_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	uint64_t l = BS_BUDGET_MAX_DEFAULT;

	if (pages > 0 && psize > 0 && (uint64_t)pages * psize / 8 < l)
		l = (uint64_t)pages * psize / 8;
	return l < BS_BUDGET_MIN ? BS_BUDGET_MIN : l;
}

struct bs_budget *bs_ctx_budget(struct bs_ctx *ctx)
{
	struct bs_budget *b = ctx->budget;

	if (b)
		return b;
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL;
	b->loop = ctx->loop;
	b->limit = default_limit();
	b->stall_ms = BS_BUDGET_STALL_MS_DEFAULT;
	ctx->budget = b;
	return b;
}

void bs_budget_free(struct bs_budget *b)
{
	if (!b)
		return;
	if (b->timer > 0)
		bs_loop_cancel_timer(b->loop, b->timer);
	free(b);
}

int bs_budget_configure(struct bs_budget *b, uint64_t limit, uint32_t stall_ms)
{
	if (limit < BS_BUDGET_MIN)
		return -EINVAL;
	b->limit = limit;
	b->stall_ms = stall_ms;
	return 0;
}

void bs_budget_set_age(struct bs_budget *b, uint32_t ms)
{
	b->age_ms = ms;
}

uint64_t bs_budget_limit(const struct bs_budget *b) { return b->limit; }
uint32_t bs_budget_stall_ms(const struct bs_budget *b) { return b->stall_ms; }
uint64_t bs_budget_used(const struct bs_budget *b) { return b->used; }
uint64_t bs_budget_peak(const struct bs_budget *b) { return b->peak; }
uint64_t bs_budget_waits(const struct bs_budget *b) { return b->waits; }

static void list_add(struct bs_budget *b, struct bs_budget_holder *h)
{
	if (h->listed)
		return;
	h->listed = true;
	h->prev = NULL;
	h->next = b->holders;
	if (b->holders)
		b->holders->prev = h;
	b->holders = h;
}

static void list_del(struct bs_budget *b, struct bs_budget_holder *h)
{
	if (!h->listed)
		return;
	h->listed = false;
	if (h->prev)
		h->prev->next = h->next;
	else
		b->holders = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->next = h->prev = NULL;
}

static void dequeue(struct bs_budget *b, struct bs_budget_holder *h)
{
	struct bs_budget_holder **pp, *prev = NULL;

	if (!h->queued)
		return;
	for (pp = &b->whead; *pp; prev = *pp, pp = &(*pp)->wnext) {
		if (*pp != h)
			continue;
		*pp = h->wnext;
		if (b->wtail == h)
			b->wtail = prev;
		break;
	}
	h->queued = false;
	h->wnext = NULL;
}

static bool fits(const struct bs_budget *b, uint64_t n)
{
	/* one request bigger than everything still goes, alone */
	return b->used + n <= b->limit || b->used == 0;
}

static uint64_t age_ns(const struct bs_budget *b)
{
	uint64_t ms = 4ull * b->stall_ms;

	if (b->age_ms)
		ms = b->age_ms;
	else if (ms < BS_BUDGET_AGE_MS)
		ms = BS_BUDGET_AGE_MS;
	return ms * 1000000;
}

/* The oldest waiter, if it has waited too long: its room is reserved. */
static struct bs_budget_holder *overdue(const struct bs_budget *b)
{
	struct bs_budget_holder *h = b->whead;

	return h && bs_now_ns() - h->queued_ns >= age_ns(b) ? h : NULL;
}

static struct bs_budget_holder *smallest(const struct bs_budget *b)
{
	struct bs_budget_holder *h, *best = NULL;

	for (h = b->whead; h; h = h->wnext)
		if (!best || h->want < best->want)
			best = h;
	return best;
}

/* May @h take @n now, with others waiting (see the top of the file)? */
static bool may_take(const struct bs_budget *b,
		     const struct bs_budget_holder *h, uint64_t n)
{
	const struct bs_budget_holder *o, *sm;

	if (!fits(b, n))
		return false;
	if (!b->whead)
		return true;
	o = overdue(b);
	if (o == h)
		return true;
	/* only the room beyond what the overdue one needs */
	if (o && b->used + n + o->want > b->limit)
		return false;
	sm = smallest(b);
	return h->queued ? n <= sm->want : n < sm->want;
}

/* Wake the overdue waiter and the smallest one, if they may go now. */
static void wake_head(struct bs_budget *b)
{
	struct bs_budget_holder *o = overdue(b), *sm = smallest(b);

	if (o && fits(b, o->want) && o->wake)
		o->wake(o);
	if (sm && sm != o && may_take(b, sm, sm->want) && sm->wake)
		sm->wake(sm);
}

static void arm(struct bs_budget *b);

static void watchdog(void *arg)
{
	struct bs_budget *b = arg;
	uint64_t now = bs_now_ns(), limit = (uint64_t)b->stall_ms * 1000000;
	struct bs_budget_holder *h, *next;
	char why[160];

	b->timer = 0;
	if (!b->whead || !b->stall_ms)
		return;
	for (h = b->holders; h; h = next) {
		next = h->next;
		if (h->queued || now - h->progress_ns < limit)
			continue;
		snprintf(why, sizeof(why),
			 "no progress for %u s while holding %llu KiB of the "
			 "in-flight budget others wait for",
			 b->stall_ms / 1000, (unsigned long long)h->held >> 10);
		/* evicting must not free @next: sessions end on the loop */
		list_del(b, h);
		if (h->evict)
			h->evict(h, why);
	}
	arm(b);
}

static void arm(struct bs_budget *b)
{
	int id;

	if (b->timer > 0 || !b->whead || !b->stall_ms)
		return;
	id = bs_loop_add_timer(b->loop, b->stall_ms / 2 ? b->stall_ms / 2 : 1,
			       watchdog, b);
	if (id > 0)
		b->timer = id;
}

bool bs_budget_take(struct bs_budget *b, struct bs_budget_holder *h,
		    uint64_t n)
{
	if (may_take(b, h, n)) {
		dequeue(b, h);
		b->used += n;
		if (b->used > b->peak)
			b->peak = b->used;
		h->held += n;
		if (!h->listed)
			h->progress_ns = bs_now_ns();
		list_add(b, h);
		wake_head(b);
		return true;
	}
	h->want = n;
	if (!h->queued) {
		h->queued = true;
		h->queued_ns = bs_now_ns();
		h->wnext = NULL;
		if (b->wtail)
			b->wtail->wnext = h;
		else
			b->whead = h;
		b->wtail = h;
		b->waits++;
	}
	arm(b);
	return false;
}

void bs_budget_give(struct bs_budget *b, struct bs_budget_holder *h,
		    uint64_t n)
{
	if (n > h->held)
		n = h->held;
	h->held -= n;
	b->used -= n;
	if (!h->held)
		list_del(b, h);
	wake_head(b);
}

void bs_budget_progress(struct bs_budget_holder *h)
{
	h->progress_ns = bs_now_ns();
}

void bs_budget_leave(struct bs_budget *b, struct bs_budget_holder *h)
{
	dequeue(b, h);
	bs_budget_give(b, h, h->held);
	list_del(b, h);
}
