/* SPDX-License-Identifier: MIT */
/*
 * Asynchronous open: device states (live / opening / failed), the driver's
 * bs_dev_open_done(), stacked devices that wait for their components, and
 * the checks front ends and the CLI make before they use a device.
 *
 * A stacked device created over a component that is still opening keeps
 * its options (bs_opts_take_rest) and is opened by open_waiting() once
 * every component is live; a component that fails fails it too, with the
 * component's reason. Every state change is a capability change (size,
 * limits and the state are in the snapshot), so exports hear of it
 * through their subscription.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "core/internal.h"

const char *bs_dev_state_name(enum bs_dev_state state)
{
	switch (state) {
	case BS_DEV_LIVE:
		return "live";
	case BS_DEV_OPENING:
		return "opening";
	case BS_DEV_FAILED:
		return "failed";
	}
	return "?";
}

int bs_dev_components_ready(struct bs_dev *dev)
{
	bool opening = false;
	unsigned i;

	for (i = 0; i < dev->ncomponents; i++) {
		struct bs_dev *c = dev->components[i];

		if (c->state == BS_DEV_FAILED)
			return bs_error(-ENXIO, "%s: component %s failed to "
					"open: %s", dev->name, c->name,
					c->state_reason);
		if (c->state == BS_DEV_OPENING && !opening) {
			opening = true;
			/* the component's reason, cut to fit */
			snprintf(dev->state_reason, sizeof(dev->state_reason),
				 "waiting for component %s (%.100s)", c->name,
				 *c->state_reason ? c->state_reason
						  : "opening");
		}
	}
	return opening ? BS_OPEN_PENDING : 0;
}

/* The open failed: keep the reason, close the driver, stay listed. */
static void fail(struct bs_dev *dev, int err)
{
	const char *why = bs_last_error();
	size_t n = strlen(dev->name);

	/* "slow: connect: ..." -> "connect: ...": lines name the device */
	if (why && !strncmp(why, dev->name, n) && why[n] == ':' &&
	    why[n + 1] == ' ')
		why += n + 2;
	dev->state = BS_DEV_FAILED;
	snprintf(dev->state_reason, sizeof(dev->state_reason), "%s",
		 why && *why ? why : strerror(-err));
	if (dev->drv_open && dev->type->close)
		dev->type->close(dev);
	dev->drv_open = false;
	dev->size = 0;
}

/* Open every stacked device whose components all became live; repeat
 * while that makes others ready (a mapper over a mapper). */
static void open_waiting(struct bs_ctx *ctx)
{
	bool again = true;
	unsigned rounds = 0;

	while (again && rounds++ < 1024) {
		struct bs_dev *d;

		again = false;
		for (d = bs_dev_next(ctx, NULL); d; d = bs_dev_next(ctx, d)) {
			struct bs_opts *opts = d->pending_opts;
			int err;

			if (d->state != BS_DEV_OPENING || !opts)
				continue;
			err = bs_dev_components_ready(d);
			if (err == BS_OPEN_PENDING)
				continue;
			d->pending_opts = NULL;
			if (!err)
				err = bs_dev_open_driver(d, opts);
			bs_opts_free(opts);
			if (err)
				fail(d, err);
			bs_caps_note_change(d);
			again = true;
		}
	}
}

void bs_dev_open_done(struct bs_dev *dev, int err)
{
	if (dev->state != BS_DEV_OPENING || dev->pending_opts)
		return;
	if (!err)
		err = bs_dev_finish_open(dev);
	if (err)
		fail(dev, err);
	bs_caps_note_change(dev);
	open_waiting(dev->ctx);
}

int bs_dev_check_live(const struct bs_dev *dev)
{
	/* from any loop: the published state (the main loop's is newer
	 * only inside the call that changes it) */
	struct bs_dev_snap copy;
	const struct bs_dev_snap *s = bs_dev_snap(dev);

	/* a thread without a loop reads a locked copy */
	if (!bs_loop_current()) {
		bs_dev_snap_copy(dev, &copy);
		s = &copy;
	}
	switch (s->state) {
	case BS_DEV_LIVE:
		return 0;
	case BS_DEV_OPENING:
		return bs_error(-EAGAIN, "%s: still opening (%s)", dev->name,
				*s->state_reason ? s->state_reason
						 : "no reason given");
	case BS_DEV_FAILED:
		break;
	}
	return bs_error(-ENXIO, "%s: failed to open: %s", dev->name,
			s->state_reason);
}

int bs_dev_wait_live(struct bs_dev *dev, unsigned timeout_ms)
{
	struct bs_loop *loop = bs_ctx_loop(dev->ctx);
	uint64_t end = bs_now_ns() + (uint64_t)timeout_ms * 1000000;

	/* another thread never runs the loop (docs/daemon.md "Threads") */
	if (!bs_loop_is_current(loop))
		return bs_dev_check_live(dev);
	while (dev->state == BS_DEV_OPENING) {
		uint64_t now = bs_now_ns();
		int err;

		if (now >= end)
			return bs_error(-ETIMEDOUT, "%s: still opening after "
					"%u s (%s)", dev->name,
					timeout_ms / 1000, dev->state_reason);
		err = bs_loop_run_once(loop, (int)((end - now) / 1000000) + 1);
		if (err < 0)
			return err;
	}
	return bs_dev_check_live(dev);
}
