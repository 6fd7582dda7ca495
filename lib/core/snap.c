/* SPDX-License-Identifier: MIT */
/*
 * Published device snapshots: what the I/O threads read of a device.
 *
 * dev->limits, dev->state and the reasons belong to the main loop, which
 * changes them in place (open, attribute stores, restacking, a run-time
 * failure). After every change the main loop publishes a new immutable
 * struct bs_dev_snap (limits, state, size, capabilities) with one atomic
 * pointer store; a reader on any loop loads the pointer and uses it within
 * the callback it runs. The old snapshot is retired and freed once every
 * I/O loop has passed a quiescent point (began a new iteration, or is
 * blocked waiting) after the swap: no reader can still hold it.
 *
 * Threads without a loop (the control thread) read under ctx->snap_lock,
 * which the swap also takes, so they never see a retired snapshot.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/threads.h>

#include "core/internal.h"

/* How often retired snapshots are looked at while some wait. */
#define REAP_MS 20

struct retired {
	struct bs_dev_snap *snap;
	struct retired *next;
	unsigned nloops;
	uint64_t seen[];	/* each I/O loop's iterations at retirement */
};

static bool grace_over(struct bs_ctx *ctx, const struct retired *r)
{
	unsigned i;

	for (i = 1; i < r->nloops && i < bs_ctx_nloops(ctx); i++) {
		struct bs_loop *l = bs_ctx_loop_at(ctx, i);

		if (l && !bs_loop_idle(l) && bs_loop_iterations(l) == r->seen[i])
			return false;
	}
	return true;
}

static void reap(void *arg);

static void arm(struct bs_ctx *ctx)
{
	int id;

	if (ctx->snap_timer > 0 || !ctx->retired)
		return;
	id = bs_loop_add_timer(ctx->loop, REAP_MS, reap, ctx);
	if (id > 0)
		ctx->snap_timer = id;
}

static void reap(void *arg)
{
	struct bs_ctx *ctx = arg;
	struct retired **pp = &ctx->retired, *r;

	ctx->snap_timer = 0;
	while ((r = *pp)) {
		if (!grace_over(ctx, r)) {
			pp = &r->next;
			continue;
		}
		*pp = r->next;
		free(r->snap);
		free(r);
	}
	arm(ctx);
}

static void retire(struct bs_ctx *ctx, struct bs_dev_snap *old)
{
	unsigned n = bs_ctx_nloops(ctx), i;
	struct retired *r;

	if (!old)
		return;
	r = malloc(sizeof(*r) + n * sizeof(r->seen[0]));
	if (!r) {
		/* cannot track it: leak one snapshot rather than risk a use
		 * after free (a few hundred bytes, only without memory) */
		return;
	}
	r->snap = old;
	r->nloops = n;
	for (i = 1; i < n; i++) {
		struct bs_loop *l = bs_ctx_loop_at(ctx, i);
		r->seen[i] = l ? bs_loop_iterations(l) : 0;
	}
	r->next = ctx->retired;
	ctx->retired = r;
	/* never freed inside the call that published: a caller up the
	 * stack on the main loop may still hold the old one */
	arm(ctx);
}

int bs_dev_publish(struct bs_dev *dev)
{
	struct bs_ctx *ctx = dev->ctx;
	struct bs_dev_snap *s = calloc(1, sizeof(*s)), *old;

	if (!s)
		return -ENOMEM; /* the previous snapshot stays in force */
	s->limits = dev->limits;
	s->state = dev->state;
	s->size = dev->state == BS_DEV_LIVE ? dev->size : 0;
	s->readonly = dev->readonly;
	memcpy(s->state_reason, dev->state_reason, sizeof(s->state_reason));
	bs_dev_caps_compute(dev, &s->caps);
	pthread_mutex_lock(&ctx->snap_lock);
	old = dev->snap;
	__atomic_store_n(&dev->snap, s, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ctx->snap_lock);
	retire(ctx, old);
	return 0;
}

void bs_dev_snap_free(struct bs_dev *dev)
{
	/* the device goes: nothing reads it any more */
	free(dev->snap);
	dev->snap = NULL;
}

void bs_ctx_snaps_free(struct bs_ctx *ctx)
{
	if (ctx->snap_timer > 0)
		bs_loop_cancel_timer(ctx->loop, ctx->snap_timer);
	ctx->snap_timer = 0;
	while (ctx->retired) {
		struct retired *r = ctx->retired;
		ctx->retired = r->next;
		free(r->snap);
		free(r);
	}
}

void bs_dev_snap_copy(const struct bs_dev *dev, struct bs_dev_snap *out)
{
	struct bs_ctx *ctx = dev->ctx;

	pthread_mutex_lock(&ctx->snap_lock);
	if (dev->snap) {
		*out = *dev->snap;
	} else {
		/* not published yet: only the main loop knows it */
		memset(out, 0, sizeof(*out));
		out->limits = dev->limits;
		out->state = dev->state;
		out->readonly = dev->readonly;
	}
	pthread_mutex_unlock(&ctx->snap_lock);
}

void bs_dev_limits_copy(const struct bs_dev *dev, struct bs_limits *out)
{
	struct bs_ctx *ctx = dev->ctx;

	pthread_mutex_lock(&ctx->snap_lock);
	*out = dev->snap ? dev->snap->limits : dev->limits;
	pthread_mutex_unlock(&ctx->snap_lock);
}
