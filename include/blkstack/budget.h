/* SPDX-License-Identifier: MIT */
/*
 * The server-wide in-flight payload budget.
 *
 * Every front end takes bytes from one budget per context before it holds
 * a request's payload (a write being received, read data waiting to be
 * sent) and gives them back when the buffer is freed. Above the limit a
 * new request waits: its holder is queued and woken once enough bytes
 * were given back (the smallest request first; the oldest, once it has
 * waited a minute or four stall timeouts, has its room reserved). Per-session caps bound one
 * client; this bounds all of them together, so that many sessions cannot
 * take the machine's memory.
 *
 * A wake is a turn: one waiter at a time (and the overdue one) is woken.
 * If it does not take, the turn passes on to the next at once when it is
 * refused again, cancels or leaves, and after a second when it does not
 * come back at all (lib/core/budget.c has the rule).
 *
 * A client can hold bytes and stall (send half a write payload and stop,
 * or not read its replies). While others wait, a holder that made no
 * progress for the stall timeout is evicted: its evict callback ends the
 * session, which frees what it held. Nobody waiting: nobody is evicted.
 * Bytes in a device (bs_budget_dev_begin()) are not stalled: their
 * client is not what they wait for. A holder all of whose bytes are in
 * a device is passed over; one that also holds bytes its client has to
 * move (a reply it does not read) is not, whatever else it has in a
 * device.
 *
 * Thread-safe: holders on any loop share one budget (a mutex inside).
 * A holder's wake and evict callbacks run on the loop it first took bytes
 * on, never on another thread; take, give and leave are called there.
 */
#ifndef BLKSTACK_BUDGET_H
#define BLKSTACK_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/loop.h>

struct bs_ctx;
struct bs_budget;

/* Defaults: the lesser of 1 GiB and an eighth of RAM; 30 s of no progress. */
#define BS_BUDGET_MAX_DEFAULT (1ull << 30)
#define BS_BUDGET_MIN (64ull << 20)
#define BS_BUDGET_STALL_MS_DEFAULT 30000u
/* A waiter older than this (or four stall timeouts) has its room reserved. */
#define BS_BUDGET_AGE_MS 60000u

struct bs_budget_holder {
	/* Bytes may be free again: try once more (queue a retry, no more).
	 * A holder that will not (it ended) calls bs_budget_cancel(). */
	void (*wake)(struct bs_budget_holder *h);
	/* Stalled while holding bytes others wait for: end the holder. */
	void (*evict)(struct bs_budget_holder *h, const char *why);
	/* --- owned by the budget --- */
	struct bs_loop *loop;	/* where wake/evict run (first take's) */
	struct bs_work wake_work, evict_work;
	bool wake_sent;		/* atomic */
	char why[160];		/* the eviction's reason */
	uint64_t held;
	uint64_t want;		/* bytes asked for while queued */
	uint64_t progress_ns;	/* last bs_budget_progress() */
	unsigned in_dev;	/* atomic: requests in a device */
	uint64_t in_dev_bytes;	/* atomic: held bytes of those requests */
	uint64_t queued_ns;	/* when it began to wait */
	uint64_t woken_ns;	/* a wake it has not come back from (0: none) */
	bool queued, listed;
	struct bs_budget_holder *next, *prev;	/* holders with bytes */
	struct bs_budget_holder *wnext;		/* wait queue */
};

/* The context's budget (made on first use with the defaults). */
struct bs_budget *bs_ctx_budget(struct bs_ctx *ctx);

/* Limit in bytes (at least BS_BUDGET_MIN) and stall timeout (0 = never). */
int bs_budget_configure(struct bs_budget *b, uint64_t limit,
			uint32_t stall_ms);
/* Override the age limit (0: the default rule); for tests and tuning. */
void bs_budget_set_age(struct bs_budget *b, uint32_t ms);
uint64_t bs_budget_limit(const struct bs_budget *b);
uint32_t bs_budget_stall_ms(const struct bs_budget *b);
uint64_t bs_budget_used(const struct bs_budget *b);
/* Largest use seen since start, and requests that had to wait. */
uint64_t bs_budget_peak(const struct bs_budget *b);
uint64_t bs_budget_waits(const struct bs_budget *b);
/* Bytes taken above the limit with bs_budget_take_over() since start. */
uint64_t bs_budget_over(const struct bs_budget *b);

/*
 * Take @n bytes for @h: true when taken. False queues @h (once) and calls
 * h->wake when it should try again. A request larger than the whole limit
 * is taken only when nothing else is held.
 */
bool bs_budget_take(struct bs_budget *b, struct bs_budget_holder *h,
		    uint64_t n);
/*
 * Take @n bytes for @h even above the limit, never waiting: for bytes
 * without which @h cannot reach the input that gives bytes back (NVMe/TCP
 * in-capsule data in front of the data of an R2T already granted). The
 * caller bounds how much it takes this way.
 */
void bs_budget_take_over(struct bs_budget *b, struct bs_budget_holder *h,
			 uint64_t n);
/* Give back @n of @h's bytes. */
void bs_budget_give(struct bs_budget *b, struct bs_budget_holder *h,
		    uint64_t n);
/*
 * @h waits no more (its session ends but is not freed yet: requests still
 * in devices; the request it waited for went away): it leaves the queue
 * and keeps what it holds until it gives it back or leaves. If it was
 * woken, its turn passes on now (so does the room reserved for it).
 * Called on @h's loop; nothing when it does not wait.
 */
void bs_budget_cancel(struct bs_budget *b, struct bs_budget_holder *h);
/* @h moved data (received payload, sent a reply): not stalled. */
void bs_budget_progress(struct bs_budget_holder *h);
/*
 * @h gave a request holding @bytes of its budget bytes (0: none, a
 * FLUSH) to a device / has it back: in pairs with the same @bytes, on
 * @h's loop. Those bytes wait for the device (a slow disk, a remote
 * target), not for the client, and ending the session would not give
 * them back any sooner: while everything @h holds is in a device, @h is
 * not stalled, however long the device takes. Bytes that are not (a
 * reply its client does not read, a payload it does not send) are: a
 * stall timeout after the last progress, or after the moment they
 * stopped being covered by the device (a request coming back to a
 * holder that had nothing else, bytes taken by such a holder). So a
 * client cannot keep its unread replies alive by sending requests that
 * go to a device. (Payload it sends is progress, though: a client that
 * reads no reply but keeps sending WRITE data is not evicted until its
 * output cap stops its input. Open: a clock of its own for output.)
 */
void bs_budget_dev_begin(struct bs_budget_holder *h, uint64_t bytes);
void bs_budget_dev_end(struct bs_budget_holder *h, uint64_t bytes);
/* @h goes away: leave the queue and give back what it still holds. */
void bs_budget_leave(struct bs_budget *b, struct bs_budget_holder *h);

/* Internal: the context frees its budget. */
void bs_budget_free(struct bs_budget *b);

#endif
