/* SPDX-License-Identifier: MIT */
/*
 * Capabilities as the layers above see them (one snapshot, one reason for
 * every "no"), and change events delivered on the loop.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/explain.h>

#include "core/internal.h"

struct bs_caps_sub {
	struct bs_caps_state *st;
	bs_caps_fn fn;
	void *arg;
	bool dead;		/* unsubscribed during a delivery */
	struct bs_caps_sub *next;
};

/* Per-device event state, made when the device is (bs_caps_dev_init). */
struct bs_caps_state {
	struct bs_dev *dev;
	uint64_t generation;
	struct bs_caps current;		/* as of the last change noted */
	struct bs_caps published;	/* what subscribers last saw */
	struct bs_caps_sub *subs;
	struct bs_work work;
	bool queued;
	unsigned delivering;	/* depth of deliveries in progress */
};

const char *bs_cap_how_name(enum bs_cap_how how)
{
	switch (how) {
	case BS_CAP_NATIVE:
		return "native";
	case BS_CAP_EMULATED:
		return "emulated";
	default:
		return "no";
	}
}

void bs_caps_why_no_unmap(const struct bs_dev *dev, char *buf, size_t len)
{
	const struct bs_limits *l = &dev->limits;
	char rule[BS_CAPS_WHY];

	if (bs_limits_write_zeroes_unmap(l)) {
		snprintf(buf, len, "%s", "");
		return;
	}
	if (l->flags & BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED &&
	    l->features & BS_FEAT_WRITE_ZEROES_UNMAP) {
		snprintf(buf, len, "write zeroes unmap disabled by the user "
			 "(queue/write_zeroes_unmap=0)");
		return;
	}
	/*
	 * The rule that decided it: a run-time failure, the stacking rule
	 * (which components), or the driver's own reason for a leaf.
	 */
	bs_explain_rule(dev, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	if (!dev->type->stacked && !dev->wz_broken)
		snprintf(rule, sizeof(rule), "%s", dev->wz_reason);
	if (dev->wz_broken)
		snprintf(buf, len, "%s", rule);
	else
		snprintf(buf, len, "the device %s%s%s",
			 !l->max_write_zeroes_sectors
				 ? "has no write-zeroes command"
				 : "cannot zero by unmapping",
			 *rule ? ": " : "", rule);
}

void bs_dev_caps(const struct bs_dev *dev, struct bs_caps *c)
{
	/* the main loop owns the state; other threads read the snapshot */
	if (bs_loop_is_current(bs_ctx_loop(dev->ctx)) || !bs_dev_snap(dev)) {
		bs_dev_caps_compute(dev, c);
		return;
	}
	pthread_mutex_lock(&dev->ctx->snap_lock);
	*c = dev->snap->caps;
	pthread_mutex_unlock(&dev->ctx->snap_lock);
}

void bs_dev_caps_compute(const struct bs_dev *dev, struct bs_caps *c)
{
	const struct bs_limits *l = &dev->limits;

	memset(c, 0, sizeof(*c));
	c->generation = bs_dev_caps_generation(dev);
	c->state = dev->state;
	/* no size until it is open */
	c->size = dev->state == BS_DEV_LIVE ? dev->size : 0;
	c->readonly = dev->readonly;
	c->logical_block_size = l->logical_block_size;
	c->physical_block_size = l->physical_block_size;
	c->io_min = l->io_min;
	c->io_opt = l->io_opt;
	c->max_transfer = (uint64_t)l->max_sectors << BS_SECTOR_SHIFT;

	c->max_write_zeroes = (uint64_t)l->max_write_zeroes_sectors
			      << BS_SECTOR_SHIFT;
	if (dev->readonly) {
		c->zeroing = BS_CAP_NO;
		snprintf(c->why_emulated_zeroing, sizeof(c->why_emulated_zeroing),
			 "the device is read-only");
	} else if (c->max_write_zeroes) {
		c->zeroing = BS_CAP_NATIVE;
	} else {
		c->zeroing = BS_CAP_EMULATED;
		snprintf(c->why_emulated_zeroing,
			 sizeof(c->why_emulated_zeroing),
			 "no write-zeroes command: the core writes zero "
			 "buffers%s%s", *dev->wz_reason ? " (" : "",
			 dev->wz_reason);
		if (*dev->wz_reason)
			strncat(c->why_emulated_zeroing, ")",
				sizeof(c->why_emulated_zeroing) -
					strlen(c->why_emulated_zeroing) - 1);
	}
	c->write_zeroes_unmap = !dev->readonly && bs_limits_write_zeroes_unmap(l);
	c->fast_zero = c->write_zeroes_unmap;
	if (dev->readonly)
		snprintf(c->why_no_unmap, sizeof(c->why_no_unmap),
			 "the device is read-only");
	else
		bs_caps_why_no_unmap(dev, c->why_no_unmap,
				     sizeof(c->why_no_unmap));

	c->max_discard = (uint64_t)l->max_discard_sectors << BS_SECTOR_SHIFT;
	c->discard = !dev->readonly && c->max_discard;
	c->discard_granularity = c->discard ? l->discard_granularity : 0;
	/*
	 * A discard is a hint: nothing promises what it reads back as (the
	 * block layer dropped that promise too). Zeroing goes through
	 * write-zeroes, where write_zeroes_unmap says when it is cheap.
	 */
	c->discard_zeroes = false;
	if (dev->readonly)
		snprintf(c->why_no_discard, sizeof(c->why_no_discard),
			 "the device is read-only");
	else if (!c->discard)
		bs_explain_rule(dev, BS_CAP_DISCARD, c->why_no_discard,
				sizeof(c->why_no_discard));

	c->write_cache = bs_limits_write_cache(l);
	/* without a volatile cache a completed write is durable: native */
	c->fua = (l->features & BS_FEAT_FUA) || !c->write_cache
			 ? BS_CAP_NATIVE
			 : BS_CAP_EMULATED;
	c->rotational = l->features & BS_FEAT_ROTATIONAL;
}

/* ---- change events ------------------------------------------------------ */

uint64_t bs_dev_caps_generation(const struct bs_dev *dev)
{
	return dev->caps_state ? dev->caps_state->generation : 0;
}

/* Snapshots equal in everything but the generation. */
static bool caps_same(const struct bs_caps *a, const struct bs_caps *b)
{
	struct bs_caps x = *a, y = *b;

	x.generation = y.generation = 0;
	return !memcmp(&x, &y, sizeof(x));
}

/* ---- describing a change ------------------------------------------------ */

struct diff_out {
	char *buf;
	size_t len, used;
	unsigned n;
};

static void diff_add(struct diff_out *o, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void diff_add(struct diff_out *o, const char *fmt, ...)
{
	va_list ap;
	int w;

	o->n++;
	if (o->used + 1 >= o->len)
		return;
	if (o->n > 1) {
		w = snprintf(o->buf + o->used, o->len - o->used, ", ");
		o->used += (size_t)w < o->len - o->used ? (size_t)w
							 : o->len - o->used - 1;
	}
	va_start(ap, fmt);
	w = vsnprintf(o->buf + o->used, o->len - o->used, fmt, ap);
	va_end(ap);
	if (w > 0)
		o->used += (size_t)w < o->len - o->used ? (size_t)w
							 : o->len - o->used - 1;
}

static const char *yes_no(bool b)
{
	return b ? "yes" : "no";
}

static void diff_bool(struct diff_out *o, const char *name, bool a, bool b,
		      const char *why)
{
	if (a == b)
		return;
	if (!b && why && *why)
		diff_add(o, "%s yes->no (%s)", name, why);
	else
		diff_add(o, "%s %s->%s", name, yes_no(a), yes_no(b));
}

static void diff_u64(struct diff_out *o, const char *name, uint64_t a,
		     uint64_t b)
{
	if (a != b)
		diff_add(o, "%s %llu->%llu", name, (unsigned long long)a,
			 (unsigned long long)b);
}

unsigned bs_caps_diff(const struct bs_caps *a, const struct bs_caps *b,
		      char *buf, size_t len)
{
	struct diff_out o = { .buf = buf, .len = len };

	if (len)
		buf[0] = '\0';
	if (a->state != b->state)
		diff_add(&o, "state %s->%s", bs_dev_state_name(a->state),
			 bs_dev_state_name(b->state));
	diff_u64(&o, "size", a->size, b->size);
	diff_bool(&o, "readonly", a->readonly, b->readonly, NULL);
	if (a->zeroing != b->zeroing)
		diff_add(&o, "zeroing %s->%s%s%s%s", bs_cap_how_name(a->zeroing),
			 bs_cap_how_name(b->zeroing),
			 *b->why_emulated_zeroing ? " (" : "",
			 b->why_emulated_zeroing,
			 *b->why_emulated_zeroing ? ")" : "");
	diff_u64(&o, "max_write_zeroes", a->max_write_zeroes,
		 b->max_write_zeroes);
	diff_bool(&o, "write_zeroes_unmap", a->write_zeroes_unmap,
		  b->write_zeroes_unmap, b->why_no_unmap);
	diff_bool(&o, "fast_zero", a->fast_zero, b->fast_zero, NULL);
	diff_bool(&o, "discard", a->discard, b->discard, b->why_no_discard);
	diff_u64(&o, "max_discard", a->max_discard, b->max_discard);
	diff_u64(&o, "discard_granularity", a->discard_granularity,
		 b->discard_granularity);
	diff_bool(&o, "discard_zeroes", a->discard_zeroes, b->discard_zeroes,
		  NULL);
	if (a->fua != b->fua)
		diff_add(&o, "fua %s->%s", bs_cap_how_name(a->fua),
			 bs_cap_how_name(b->fua));
	diff_bool(&o, "write_cache", a->write_cache, b->write_cache, NULL);
	diff_bool(&o, "rotational", a->rotational, b->rotational, NULL);
	diff_u64(&o, "logical_block_size", a->logical_block_size,
		 b->logical_block_size);
	diff_u64(&o, "physical_block_size", a->physical_block_size,
		 b->physical_block_size);
	diff_u64(&o, "io_min", a->io_min, b->io_min);
	diff_u64(&o, "io_opt", a->io_opt, b->io_opt);
	diff_u64(&o, "max_transfer", a->max_transfer, b->max_transfer);
	return o.n;
}

static void sweep_dead(struct bs_caps_state *st)
{
	struct bs_caps_sub **pp = &st->subs;

	while (*pp) {
		struct bs_caps_sub *s = *pp;

		if (s->dead) {
			*pp = s->next;
			free(s);
		} else {
			pp = &s->next;
		}
	}
}

static void deliver(void *arg)
{
	struct bs_caps_state *st = arg;
	struct bs_caps now;
	struct bs_caps_sub *s;

	st->queued = false;
	bs_dev_caps(st->dev, &now);
	if (caps_same(&now, &st->published))
		return;		/* changed and changed back: nothing to say */
	st->published = now;
	st->delivering++;
	for (s = st->subs; s; s = s->next)
		if (!s->dead)
			s->fn(s->arg, st->dev, &now);
	st->delivering--;
	if (!st->delivering)
		sweep_dead(st);
}

void bs_caps_note_change(struct bs_dev *dev)
{
	struct bs_caps_state *st = dev->caps_state;
	struct bs_caps now;

	if (!st) {
		bs_dev_publish(dev);
		return;
	}
	bs_dev_caps_compute(dev, &now);
	if (caps_same(&now, &st->current)) {
		/* limits the caps do not show may have changed: publish */
		bs_dev_publish(dev);
		return;
	}
	st->current = now;
	st->generation++;
	bs_dev_publish(dev);
	if (!st->queued && st->subs) {
		st->queued = true;
		st->work.fn = deliver;
		st->work.arg = st;
		bs_loop_defer(bs_ctx_loop(dev->ctx), &st->work);
	}
}

int bs_caps_dev_init(struct bs_dev *dev)
{
	struct bs_caps_state *st = calloc(1, sizeof(*st));

	if (!st)
		return bs_error(-ENOMEM, "%s: out of memory", dev->name);
	st->dev = dev;
	dev->caps_state = st;
	bs_dev_caps(dev, &st->current);
	st->published = st->current;
	return 0;
}

int bs_caps_subscribe(struct bs_dev *dev, bs_caps_fn fn, void *arg,
		      struct bs_caps_sub **out)
{
	struct bs_caps_state *st = dev->caps_state;
	struct bs_caps_sub *s;

	if (!st)
		return -EINVAL;
	/* a new subscriber hears of changes from now on */
	if (!st->queued)
		st->published = st->current;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->st = st;
	s->fn = fn;
	s->arg = arg;
	s->next = st->subs;
	st->subs = s;
	*out = s;
	return 0;
}

void bs_caps_unsubscribe(struct bs_caps_sub *sub)
{
	if (!sub)
		return;
	sub->dead = true;
	if (!sub->st->delivering)
		sweep_dead(sub->st);
}

void bs_caps_dev_free(struct bs_dev *dev)
{
	struct bs_caps_state *st = dev->caps_state;

	if (!st)
		return;
	/* a queued event must not run on a freed device */
	if (st->queued)
		bs_loop_cancel_work(bs_ctx_loop(dev->ctx), &st->work);
	while (st->subs) {
		struct bs_caps_sub *s = st->subs;

		st->subs = s->next;
		free(s);
	}
	free(st);
	dev->caps_state = NULL;
}
