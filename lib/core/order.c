/* SPDX-License-Identifier: MIT */
/*
 * Write ordering: the per-device tracker of writes in flight that keeps a
 * read-modify-write of a block from interleaving with any other write to
 * that block.
 *
 * Every write-like request entering bs_submit() (and every partial block a
 * byte-granular request read-modify-writes) holds a node over the whole
 * blocks it touches while it is in flight. Two nodes conflict when they
 * overlap and at least one of them is exclusive (an RMW); plain writes
 * never wait for each other, as in the block layer, where in-flight
 * overlapping writes have no order. A node conflicting with an active node
 * or with an earlier waiting one waits, and is admitted in arrival order.
 *
 * Cost: while no exclusive node is active or waiting, admitting a plain
 * write is a list insert and releasing it a list remove, O(1), with the
 * node embedded in the request (no allocation). Only while RMWs are around
 * do admissions scan the lists.
 *
 * Threads: the tracker of a device is shared by every loop submitting to
 * it, under dev->wt_lock. A waiting node admitted by a release is sent to
 * its own loop (n->loop), where go() runs: never inside the release,
 * never on another thread.
 *
 * No cycle can form: a node waits only for nodes that arrived before it,
 * and an active node completes on its own (its I/O goes to the driver
 * untracked), never waiting for a later one.
 */
#include <blkstack/bdev.h>

#include "core/internal.h"

enum { WT_IDLE, WT_WAITING, WT_ACTIVE };

static bool conflict(const struct bs_wt_node *a, const struct bs_wt_node *b)
{
	return (a->excl || b->excl) && a->start < b->end && b->start < a->end;
}

static void active_link(struct bs_wtrack *wt, struct bs_wt_node *n)
{
	n->state = WT_ACTIVE;
	n->prev = NULL;
	n->next = wt->active;
	if (wt->active)
		wt->active->prev = n;
	wt->active = n;
}

static void active_unlink(struct bs_wtrack *wt, struct bs_wt_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		wt->active = n->next;
	if (n->next)
		n->next->prev = n->prev;
	n->prev = n->next = NULL;
}

static void wait_append(struct bs_wtrack *wt, struct bs_wt_node *n)
{
	n->state = WT_WAITING;
	n->next = NULL;
	n->prev = wt->wait_tail;
	if (wt->wait_tail)
		wt->wait_tail->next = n;
	else
		wt->wait_head = n;
	wt->wait_tail = n;
}

static void wait_unlink(struct bs_wtrack *wt, struct bs_wt_node *n)
{
	if (n->prev)
		n->prev->next = n->next;
	else
		wt->wait_head = n->next;
	if (n->next)
		n->next->prev = n->prev;
	else
		wt->wait_tail = n->prev;
	n->prev = n->next = NULL;
}

/* Does @n conflict with an active node, or a waiting one before @stop? */
static bool blocked(const struct bs_wtrack *wt, const struct bs_wt_node *n,
		    const struct bs_wt_node *stop)
{
	const struct bs_wt_node *o;

	for (o = wt->active; o; o = o->next)
		if (conflict(n, o))
			return true;
	for (o = wt->wait_head; o && o != stop; o = o->next)
		if (conflict(n, o))
			return true;
	return false;
}

bool bs_wt_admit(struct bs_dev *dev, struct bs_wt_node *n)
{
	struct bs_wtrack *wt = &dev->wt;
	bool go = true;

	/* where go() runs if it has to wait: the caller's loop */
	if (!n->loop)
		n->loop = bs_ctx_current_loop(dev->ctx);
	pthread_mutex_lock(&dev->wt_lock);
	if (!n->excl && !wt->nexcl) {
		/* the fast path: no RMW anywhere on this device */
		active_link(wt, n);
		goto out;
	}
	if (n->excl)
		wt->nexcl++;
	if (blocked(wt, n, NULL)) {
		wt->waited++;
		wait_append(wt, n);
		go = false;
		goto out;
	}
	active_link(wt, n);
out:
	pthread_mutex_unlock(&dev->wt_lock);
	return go;
}

static void run_go(void *arg)
{
	struct bs_wt_node *n = arg;

	n->go(n);
}

void bs_wt_release(struct bs_dev *dev, struct bs_wt_node *n)
{
	struct bs_wtrack *wt = &dev->wt;
	struct bs_wt_node *w, *next;

	/* only the submitting loop touches its node's state outside the
	 * lock: idle and waiting nodes are never released */
	if (n->state != WT_ACTIVE)
		return;
	pthread_mutex_lock(&dev->wt_lock);
	active_unlink(wt, n);
	n->state = WT_IDLE;
	if (n->excl)
		wt->nexcl--;
	for (w = wt->wait_head; w; w = next) {
		next = w->next;
		if (blocked(wt, w, w))
			continue;
		wait_unlink(wt, w);
		active_link(wt, w);
		/* admitted: go() runs on its own loop, after this returns */
		w->work.fn = run_go;
		w->work.arg = w;
		bs_loop_send(w->loop, &w->work);
	}
	pthread_mutex_unlock(&dev->wt_lock);
}
