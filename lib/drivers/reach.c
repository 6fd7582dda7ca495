/* SPDX-License-Identifier: MIT */
/*
 * Bounded reconnect of remote drivers: down after down_after seconds with
 * nothing usable (see reach.h; used by nbd and nvmf).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/loop.h>

#include "drivers/reach.h"

void reach_init(struct reach *r, struct bs_dev *dev,
		const struct reach_words *w, const char *where,
		unsigned down_after_s, unsigned reconnect_ms)
{
	memset(r, 0, sizeof(*r));
	r->dev = dev;
	r->w = w;
	snprintf(r->where, sizeof(r->where), "%s", where);
	r->down_after_s = down_after_s;
	r->reconnect_ms = reconnect_ms;
}

void reach_lost(struct reach *r)
{
	if (!r->unreach_ns)
		r->unreach_ns = bs_now_ns();
}

bool reach_check(struct reach *r, const char *why)
{
	uint64_t now = bs_now_ns();

	if (r->down || !r->unreach_ns || !r->down_after_s ||
	    now - r->unreach_ns < r->down_after_s * 1000000000ull)
		return false;
	r->down = true;
	r->down_ns = now;
	r->downs++;
	snprintf(r->why, sizeof(r->why), "%s",
		 why && *why ? why : r->w->lack);
	bs_dev_log(r->dev, "%s: %s unreachable for %u s (%s): requests fail "
		   "at once with EIO until %s; reconnecting every %u ms",
		   r->where, r->w->what, r->down_after_s, r->why, r->w->back,
		   r->reconnect_ms);
	return true;
}

bool reach_ok(struct reach *r, const char *how)
{
	r->unreach_ns = 0;
	if (!r->down)
		return false;
	r->down = false;
	bs_dev_log(r->dev, "%s: %s again after %llu s down; requests are "
		   "served (%llu failed while down)", r->where, how,
		   (unsigned long long)((bs_now_ns() - r->down_ns) /
					1000000000ull),
		   (unsigned long long)r->failed);
	return true;
}

int reach_fail(struct reach *r, const char *op)
{
	r->failed++;
	return bs_error(-EIO, "%s: %s: %s: %s unreachable over %u s "
			"(down_after): %s", r->dev->name, r->where, op,
			r->w->what, r->down_after_s, r->why);
}

void reach_set_reason(const struct reach *r)
{
	bs_dev_set_reason(r->dev, "%s %s unreachable over %u s (down_after): "
			  "I/O fails at once with EIO, reconnecting every %u "
			  "ms; last error: %s", r->w->drv, r->w->what,
			  r->down_after_s, r->reconnect_ms, r->why);
}

void reach_describe(const struct reach *r, const char *last, bs_kv_fn kv,
		    void *arg)
{
	uint64_t now = bs_now_ns();

	if (r->down)
		kv(arg, "reachable", "no: down for %llu s (%s for down_after "
		   "%u s before): requests fail at once with EIO (%llu so "
		   "far); reconnecting every %u ms; last error: %s",
		   (unsigned long long)((now - r->down_ns) / 1000000000ull),
		   r->w->lack, r->down_after_s, (unsigned long long)r->failed,
		   r->reconnect_ms, last && *last ? last : r->why);
	else if (r->unreach_ns)
		kv(arg, "reachable", "%s for %llu ms (down after %u s%s)",
		   r->w->lack,
		   (unsigned long long)((now - r->unreach_ns) / 1000000ull),
		   r->down_after_s, r->down_after_s ? "" : ": never");
	else
		kv(arg, "reachable", "yes (down %llu times)",
		   (unsigned long long)r->downs);
}
