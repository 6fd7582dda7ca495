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
 *
 * A wake is a turn. Bytes given back wake the waiter whose turn it is
 * (the smallest that fits, and the overdue one): one or two, never the
 * whole queue. The others wait while it has its turn, and the turn
 * passes on, wake_head() choosing again by the rules above, as soon as
 * the budget learns it is not being used, by whichever comes first:
 *   - the waiter takes (and the next one is woken if room is left);
 *   - it comes back and is refused (it asks for more now, or a smaller
 *     newcomer took the room): bs_budget_take();
 *   - it stops waiting: bs_budget_cancel() (its session ended, saw EOF
 *     or was freed with requests still in devices) or bs_budget_leave();
 *   - WAKE_GRACE_NS passes without any of these (its session cannot go
 *     on: a client that reads none of its replies; or its I/O thread is
 *     slow to run the wake): the turn timer fires. It runs on the main
 *     loop, not the waiter's, so a stuck I/O thread cannot hold it up,
 *     and it runs whether or not there is a stall timeout.
 * Nobody behind a turn that is not used waits for another give or for
 * the watchdog (before the turn timer, that was up to half the stall
 * timeout, and for good with none).
 *
 * A waiter whose turn passed ("quiet") keeps its place and age: when it
 * does come back it takes like any other. It no longer holds the others
 * back; if it also holds bytes and makes no progress, it is evicted like
 * a holder that does not wait. Without both, one such client at the head
 * of the queue stopped every larger request of every session for good.
 * A waiter not woken yet is never evicted (its held bytes may wait for
 * input it reads only when its turn comes), nor is anyone while every
 * waiter has gone quiet (nobody could use the room).
 *
 * Nor is a holder all of whose bytes are in a device
 * (bs_budget_dev_begin() counts them): a slow device is not a stalled
 * client, and those bytes come back only when the device is done,
 * evicted or not. Bytes outside a device (a reply the client does not
 * read) are its client's part, whatever else is in a device: their
 * clock runs from the last progress, or from when the holder stopped
 * being all in a device (a request back, more bytes taken). A request
 * coming back is not progress by itself: first (whole-session shield,
 * "back is progress") a client that read no reply kept its bytes for
 * days by sending a FLUSH every few seconds. A front end that does not
 * say when its requests are in a device has the device's time counted
 * against its client.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <unistd.h>

#include <blkstack/budget.h>
#include <blkstack/loop.h>

#include "core/internal.h"

/*
 * Threads: holders live on the I/O loops; everything here is under @lock.
 * A holder is woken or evicted on its own loop (h->loop) by a work item
 * sent there, never called from another thread; the watchdog and the
 * turn timer run on the main loop (b->loop), armed from an I/O thread
 * through arm_work.
 */
struct bs_budget {
	struct bs_loop *loop;
	pthread_mutex_t lock;
	struct bs_work arm_work;		/* arms the timer on the main loop */
	bool arm_sent;
	uint64_t limit, used, peak, waits;
	uint64_t over;		/* bytes taken above the limit (take_over) */
	uint32_t stall_ms;
	uint32_t age_ms;			/* 0: the default rule */
	int timer;				/* watchdog, > 0 while armed */
	int turn_timer;		/* end of a woken waiter's turn, > 0: armed */
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

static struct bs_budget *budget_new(struct bs_ctx *ctx)
{
	struct bs_budget *b = calloc(1, sizeof(*b));

	if (!b)
		return NULL;
	b->loop = ctx->loop;
	pthread_mutex_init(&b->lock, NULL);
	b->limit = default_limit();
	b->stall_ms = BS_BUDGET_STALL_MS_DEFAULT;
	return b;
}

struct bs_budget *bs_ctx_budget(struct bs_ctx *ctx)
{
	return BS_CTX_LAZY_GET(ctx, budget, budget_new(ctx));
}

void bs_budget_free(struct bs_budget *b)
{
	if (!b)
		return;
	if (b->timer > 0)
		bs_loop_cancel_timer(b->loop, b->timer);
	if (b->turn_timer > 0)
		bs_loop_cancel_timer(b->loop, b->turn_timer);
	if (b->arm_sent)
		bs_loop_cancel_work(b->loop, &b->arm_work);
	pthread_mutex_destroy(&b->lock);
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
static uint64_t locked_read(const struct bs_budget *b, const uint64_t *v)
{
	uint64_t x;

	pthread_mutex_lock((pthread_mutex_t *)&b->lock);
	x = *v;
	pthread_mutex_unlock((pthread_mutex_t *)&b->lock);
	return x;
}

uint64_t bs_budget_used(const struct bs_budget *b)
{
	return locked_read(b, &b->used);
}

uint64_t bs_budget_peak(const struct bs_budget *b)
{
	return locked_read(b, &b->peak);
}

uint64_t bs_budget_waits(const struct bs_budget *b)
{
	return locked_read(b, &b->waits);
}

uint64_t bs_budget_over(const struct bs_budget *b)
{
	return locked_read(b, &b->over);
}

/* ---- calls into holders, on their own loops ---------------------------- */

static void run_wake(void *arg)
{
	struct bs_budget_holder *h = arg;

	/* release: the loop is done with wake_work (it read fn and next)
	 * before another thread may send it again */
	__atomic_store_n(&h->wake_sent, false, __ATOMIC_RELEASE);
	if (h->wake)
		h->wake(h);
}

static void run_evict(void *arg)
{
	struct bs_budget_holder *h = arg;

	if (h->evict)
		h->evict(h, h->why);
}

/* Under the lock: have h->wake() called on its loop (once until it ran). */
static void send_wake(struct bs_budget_holder *h)
{
	if (h->wake && !h->woken_ns)
		h->woken_ns = bs_now_ns();
	if (!h->wake || __atomic_exchange_n(&h->wake_sent, true,
					    __ATOMIC_ACQ_REL))
		return;
	h->wake_work.fn = run_wake;
	h->wake_work.arg = h;
	bs_loop_send(h->loop, &h->wake_work);
}

#define WAKE_GRACE_NS (1000ull * 1000000)

/* @h was woken that long ago and did not come back: others go on */
/* A wake stamped after @now was read (another thread, or wake_head()
 * called since) is fresh, not 2^64 ns old. */
static bool quiet(const struct bs_budget_holder *h, uint64_t now)
{
	return h->woken_ns && now > h->woken_ns &&
	       now - h->woken_ns >= WAKE_GRACE_NS;
}

/* Everything @h holds is in a device (on @h's loop, or under the lock:
 * only @h's loop changes held and in_dev_bytes). */
static bool covered(const struct bs_budget_holder *h)
{
	return h->held <= __atomic_load_n(&h->in_dev_bytes, __ATOMIC_ACQUIRE);
}

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
	h->woken_ns = 0;
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
	uint64_t now = bs_now_ns();
	struct bs_budget_holder *h = b->whead;

	while (h && quiet(h, now))
		h = h->wnext;
	return h && now - h->queued_ns >= age_ns(b) ? h : NULL;
}

static struct bs_budget_holder *smallest(const struct bs_budget *b)
{
	uint64_t now = bs_now_ns();
	struct bs_budget_holder *h, *best = NULL;

	for (h = b->whead; h; h = h->wnext)
		if (!quiet(h, now) && (!best || h->want < best->want))
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
	if (!sm)		/* every waiter gone quiet */
		return true;
	return h->queued ? n <= sm->want : n < sm->want;
}

static void arm(struct bs_budget *b);

/*
 * Wake the overdue waiter and the smallest one, if they may go now; the
 * turn of one that does not come back ends on the turn timer (arm()).
 */
static void wake_head(struct bs_budget *b)
{
	struct bs_budget_holder *o = overdue(b), *sm = smallest(b);

	if (o && fits(b, o->want))
		send_wake(o);
	if (sm && sm != o && may_take(b, sm, sm->want))
		send_wake(sm);
	arm(b);
}

/* When the first woken waiter's turn ends, if it does not come back
 * (0: no woken waiter has a turn running). */
static uint64_t turn_due(const struct bs_budget *b)
{
	uint64_t now = bs_now_ns(), due = 0;
	const struct bs_budget_holder *h;

	for (h = b->whead; h; h = h->wnext)
		if (h->woken_ns && !quiet(h, now) &&
		    (!due || h->woken_ns + WAKE_GRACE_NS < due))
			due = h->woken_ns + WAKE_GRACE_NS;
	return due;
}

/* On the main loop: a woken waiter's turn is up; the next one's begins. */
static void turn_over(void *arg)
{
	struct bs_budget *b = arg;

	pthread_mutex_lock(&b->lock);
	b->turn_timer = 0;
	wake_head(b);		/* skips the quiet one now; arms for the rest */
	pthread_mutex_unlock(&b->lock);
}

static void watchdog(void *arg)
{
	struct bs_budget *b = arg;
	uint64_t now, limit;
	struct bs_budget_holder *h, *next;

	pthread_mutex_lock(&b->lock);
	limit = (uint64_t)b->stall_ms * 1000000;
	b->timer = 0;
	if (!b->whead || !b->stall_ms) {
		pthread_mutex_unlock(&b->lock);
		return;
	}
	/* the turn timer passes turns on; this only backs it up (a timer
	 * that could not be added: no memory) */
	wake_head(b);
	/* after the wakes: one woken just now is not quiet (quiet()) */
	now = bs_now_ns();
	/*
	 * Only while someone who can use the room waits (every waiter gone
	 * quiet: nobody); and not a holder that waits for more and was not
	 * woken yet: its own held bytes may wait for input it reads only
	 * once its turn comes (an iSCSI write's Data-Out behind the next
	 * command). One woken that did not come back had its turn.
	 */
	if (!smallest(b))
		goto out;
	for (h = b->holders; h; h = next) {
		uint64_t p;

		next = h->next;
		/* in_dev_bytes first: a request that came back recorded
		 * its progress before it left them (bs_budget_dev_end()) */
		if (covered(h))
			continue;
		/* progress made on its loop since @now was read is fresh,
		 * not 2^64 ns old */
		p = __atomic_load_n(&h->progress_ns, __ATOMIC_RELAXED);
		if (p >= now || now - p < limit ||
		    (h->queued && !quiet(h, now)))
			continue;
		snprintf(h->why, sizeof(h->why),
			 "no progress for %u s while holding %llu KiB of the "
			 "in-flight budget others wait for",
			 b->stall_ms / 1000, (unsigned long long)h->held >> 10);
		/* the holder ends on its own loop; it is off the list now */
		list_del(b, h);
		h->evict_work.fn = run_evict;
		h->evict_work.arg = h;
		bs_loop_send(h->loop, &h->evict_work);
	}
out:
	arm(b);
	pthread_mutex_unlock(&b->lock);
}

static void arm_main(void *arg)
{
	struct bs_budget *b = arg;

	pthread_mutex_lock(&b->lock);
	b->arm_sent = false;
	/* not arm() alone: run late (a busy main loop), the turn that
	 * asked for the timer may be over already, and nobody else would
	 * pass it on (no watchdog with stall_timeout = 0) */
	wake_head(b);
	pthread_mutex_unlock(&b->lock);
}

/*
 * Under the lock: the watchdog runs while someone waits (with a stall
 * timeout), the turn timer while a woken waiter's turn runs (always).
 */
static void arm(struct bs_budget *b)
{
	bool dog = b->timer <= 0 && b->whead && b->stall_ms;
	uint64_t due = b->turn_timer > 0 ? 0 : turn_due(b), now;
	int id;

	if (!dog && !due)
		return;
	if (!bs_loop_is_current(b->loop)) {
		/* timers belong to the main loop: ask it (once: it arms
		 * both, for what is due when it runs) */
		if (!b->arm_sent) {
			b->arm_sent = true;
			b->arm_work.fn = arm_main;
			b->arm_work.arg = b;
			bs_loop_send(b->loop, &b->arm_work);
		}
		return;
	}
	if (dog) {
		id = bs_loop_add_timer(b->loop,
				       b->stall_ms / 2 ? b->stall_ms / 2 : 1,
				       watchdog, b);
		if (id > 0)
			b->timer = id;
	}
	if (due) {
		/* rounded up: when it fires, that waiter is quiet() */
		now = bs_now_ns();
		id = bs_loop_add_timer(b->loop, due > now ?
				       (due - now + 999999) / 1000000 : 1,
				       turn_over, b);
		if (id > 0)
			b->turn_timer = id;
	}
}

/* Under the lock: @h's wake/evict loop, the first time it takes. */
static void bind_loop(struct bs_budget *b, struct bs_budget_holder *h)
{
	if (!h->loop) {
		struct bs_loop *cur = bs_loop_current();
		h->loop = cur ? cur : b->loop;
	}
}

/* Under the lock: @n more bytes held by @h. */
static void charge_locked(struct bs_budget *b, struct bs_budget_holder *h,
			  uint64_t n)
{
	/* nothing held outside a device until now (or nothing at all):
	 * these bytes' clock starts here */
	if (!h->listed || covered(h))
		__atomic_store_n(&h->progress_ns, bs_now_ns(),
				 __ATOMIC_RELAXED);
	b->used += n;
	if (b->used > b->peak)
		b->peak = b->used;
	h->held += n;
	list_add(b, h);
}

bool bs_budget_take(struct bs_budget *b, struct bs_budget_holder *h,
		    uint64_t n)
{
	bool ok = true, had_turn;

	pthread_mutex_lock(&b->lock);
	bind_loop(b, h);
	had_turn = h->woken_ns != 0;
	h->woken_ns = 0;	/* it came back */
	if (may_take(b, h, n)) {
		dequeue(b, h);
		charge_locked(b, h, n);
		wake_head(b);
		goto out;
	}
	ok = false;
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
	/* woken, came back and still cannot go (it asks for more now, or
	 * the room went to a smaller newcomer): the next one's turn */
	if (had_turn)
		wake_head(b);
	arm(b);
out:
	pthread_mutex_unlock(&b->lock);
	return ok;
}

void bs_budget_take_over(struct bs_budget *b, struct bs_budget_holder *h,
			 uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	bind_loop(b, h);
	charge_locked(b, h, n);
	b->over += n;
	pthread_mutex_unlock(&b->lock);
}

static void give_locked(struct bs_budget *b, struct bs_budget_holder *h,
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

void bs_budget_give(struct bs_budget *b, struct bs_budget_holder *h,
		    uint64_t n)
{
	pthread_mutex_lock(&b->lock);
	give_locked(b, h, n);
	pthread_mutex_unlock(&b->lock);
}

void bs_budget_cancel(struct bs_budget *b, struct bs_budget_holder *h)
{
	pthread_mutex_lock(&b->lock);
	if (h->queued) {
		dequeue(b, h);
		/* its turn, or the room reserved for it, goes on now */
		wake_head(b);
	}
	pthread_mutex_unlock(&b->lock);
}

void bs_budget_progress(struct bs_budget_holder *h)
{
	__atomic_store_n(&h->progress_ns, bs_now_ns(), __ATOMIC_RELAXED);
}

void bs_budget_dev_begin(struct bs_budget_holder *h, uint64_t bytes)
{
	__atomic_add_fetch(&h->in_dev_bytes, bytes, __ATOMIC_RELAXED);
	__atomic_add_fetch(&h->in_dev, 1, __ATOMIC_RELAXED);
}

void bs_budget_dev_end(struct bs_budget_holder *h, uint64_t bytes)
{
	/*
	 * A holder that had everything in a device: what it holds now
	 * (this request's reply) waits for its client from here. One that
	 * held bytes outside already keeps their clock: a request coming
	 * back is not progress (a client that reads no reply must not keep
	 * it alive by sending FLUSHes). The progress first: the watchdog
	 * reads in_dev_bytes, then progress_ns.
	 */
	if (covered(h))
		bs_budget_progress(h);
	__atomic_sub_fetch(&h->in_dev, 1, __ATOMIC_RELEASE);
	__atomic_sub_fetch(&h->in_dev_bytes, bytes, __ATOMIC_RELEASE);
}

void bs_budget_leave(struct bs_budget *b, struct bs_budget_holder *h)
{
	pthread_mutex_lock(&b->lock);
	dequeue(b, h);
	give_locked(b, h, h->held);
	list_del(b, h);
	pthread_mutex_unlock(&b->lock);
	/* nothing sends to it any more: take back what was sent (we are on
	 * its loop, where those would run) */
	if (h->loop) {
		bs_loop_cancel_work(h->loop, &h->wake_work);
		bs_loop_cancel_work(h->loop, &h->evict_work);
	}
}
