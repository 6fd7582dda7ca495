/* SPDX-License-Identifier: MIT */
/*
 * Contexts, the registry of device types and devices, and the propagation
 * of limits up a stack.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/caps.h>
#include <blkstack/opts.h>
#include <blkstack/workers.h>

#include "core/internal.h"

/* ---- types ------------------------------------------------------------- */

#define MAX_TYPES 64
static const struct bs_dev_type *types[MAX_TYPES];
static unsigned ntypes;

void bs_dev_type_register(const struct bs_dev_type *type)
{
	/* called from constructors only: single-threaded, before main() */
	if (ntypes < MAX_TYPES && !bs_dev_type_find(type->name))
		types[ntypes++] = type;
}

const struct bs_dev_type *bs_dev_type_find(const char *name)
{
	unsigned i;

	for (i = 0; i < ntypes; i++)
		if (!strcmp(types[i]->name, name))
			return types[i];
	return NULL;
}

const struct bs_dev_type *bs_dev_type_next(const struct bs_dev_type *prev)
{
	unsigned i;

	if (!prev)
		return ntypes ? types[0] : NULL;
	for (i = 0; i + 1 < ntypes; i++)
		if (types[i] == prev)
			return types[i + 1];
	return NULL;
}

/* ---- contexts ---------------------------------------------------------- */

int bs_ctx_new(struct bs_ctx **out)
{
	struct bs_ctx *ctx = calloc(1, sizeof(*ctx));
	int err;

	if (!ctx)
		return -ENOMEM;
	err = bs_loop_new(&ctx->loop);
	if (err) {
		free(ctx);
		return err;
	}
	bs_loop_set_index(ctx->loop, 0);
	ctx->loops[0] = ctx->loop;
	pthread_mutex_init(&ctx->snap_lock, NULL);
	pthread_mutex_init(&ctx->lazy_lock, NULL);
	*out = ctx;
	return 0;
}

void bs_ctx_free(struct bs_ctx *ctx)
{
	if (!ctx)
		return;
	/* newest first: holders were created after their components */
	while (ctx->devs) {
		struct bs_dev *d, *last = NULL;
		for (d = ctx->devs; d; d = d->next)
			if (!d->nholders)
				last = d;
		if (!last)
			break;
		/* everyone above is gone: what they forgot to give back goes */
		bs_dev_claims_drop(last);
		if (bs_dev_destroy(last))
			break;
	}
	/* the devices' channels on the I/O loops are closed: stop them */
	bs_ctx_stop_threads(ctx);
	bs_workers_free(ctx->workers);
	bs_budget_free(ctx->budget);
	bs_ctx_snaps_free(ctx);
	pthread_mutex_destroy(&ctx->snap_lock);
	pthread_mutex_destroy(&ctx->lazy_lock);
	bs_loop_free(ctx->loop);
	free(ctx->zero_buf);
	free(ctx);
}

struct bs_loop *bs_ctx_loop(struct bs_ctx *ctx)
{
	return ctx->loop;
}

void bs_ctx_set_log(struct bs_ctx *ctx, bs_ctx_log_fn fn, void *arg)
{
	ctx->log = fn;
	ctx->log_arg = arg;
}

void bs_dev_log(struct bs_dev *dev, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	if (!dev->ctx->log)
		return;
	n = snprintf(msg, sizeof(msg), "%s: ", dev->name);
	va_start(ap, fmt);
	vsnprintf(msg + n, sizeof(msg) - (size_t)n, fmt, ap);
	va_end(ap);
	dev->ctx->log(dev->ctx->log_arg, msg);
}

int bs_ctx_wait(struct bs_ctx *ctx, const bool *flag)
{
	int err = 0;

	/* another thread never runs this loop (see bs_sync_run()) */
	if (!bs_loop_is_current(ctx->loop))
		return bs_error(-EDEADLK, "waiting on the loop from another "
				"thread");
	while (!*flag && !err)
		err = bs_loop_run_once(ctx->loop, -1);
	return err;
}

/* ---- devices ----------------------------------------------------------- */

struct bs_dev *bs_dev_find(struct bs_ctx *ctx, const char *name)
{
	struct bs_dev *d;

	for (d = ctx->devs; d; d = d->next)
		if (!strcmp(d->name, name))
			return d;
	return NULL;
}

struct bs_dev *bs_dev_next(struct bs_ctx *ctx, struct bs_dev *prev)
{
	return prev ? prev->next : ctx->devs;
}

static int add_holder(struct bs_dev *below, struct bs_dev *above)
{
	struct bs_dev **h = realloc(below->holders,
				    (below->nholders + 1) * sizeof(*h));

	if (!h)
		return -ENOMEM;
	h[below->nholders++] = above;
	below->holders = h;
	return 0;
}

static void del_holder(struct bs_dev *below, struct bs_dev *above)
{
	unsigned i;

	for (i = 0; i < below->nholders; i++) {
		if (below->holders[i] == above) {
			memmove(&below->holders[i], &below->holders[i + 1],
				(below->nholders - i - 1) * sizeof(above));
			below->nholders--;
			return;
		}
	}
}

/* Register @dev as a holder of each component that does not have it yet. */
static int hold_components(struct bs_dev *dev)
{
	unsigned i, j;

	for (i = 0; i < dev->ncomponents; i++) {
		struct bs_dev *c = dev->components[i];
		bool held = false;

		for (j = 0; j < c->nholders && !held; j++)
			held = c->holders[j] == dev;
		if (!held && add_holder(c, dev))
			return -ENOMEM;
	}
	return 0;
}

static int resolve_components(struct bs_dev *dev, struct bs_opts *opts)
{
	const char *list = bs_opts_get(opts, "devices");
	char *copy, *tok, *save = NULL;
	int err = 0;

	if (!list || !*list)
		return bs_error(-EINVAL, "%s: %s needs 'devices = A B ...'",
				dev->name, dev->type->name);
	copy = strdup(list);
	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, " \t,", &save); tok;
	     tok = strtok_r(NULL, " \t,", &save)) {
		struct bs_dev *c = bs_dev_find(dev->ctx, tok), **v;
		if (!c) {
			const char *w = bs_opts_where(opts, "devices");
			err = bs_error(-ENOENT, "%s%s%s: component '%s' does not exist",
				       w, bs_sep(w), dev->name, tok);
			break;
		}
		v = realloc(dev->components,
			    (dev->ncomponents + 1) * sizeof(*v));
		if (!v) {
			err = -ENOMEM;
			break;
		}
		v[dev->ncomponents++] = c;
		dev->components = v;
	}
	free(copy);
	return err;
}

/*
 * A stacked device takes each of its components exclusively: a component
 * written behind the mapper's back (another mapper, an export, a zeroout)
 * breaks the mapping (mirror legs diverge, stripes tear). A component
 * listed twice (linear over two ranges of one disk) is claimed once.
 * "claim = shared" takes them shared-write instead, for users who carve
 * one disk into several linear volumes of disjoint ranges and vouch for
 * it (as dm lets its tables share a disk): other shared mappers and
 * exports may then use the components too.
 */
enum { CLAIM_UNSET = -1, CLAIM_EXCLUSIVE, CLAIM_SHARED };
static const char *const claim_modes[] = { "exclusive", "shared", NULL };

static int claim_components(struct bs_dev *dev, int how)
{
	char holder[BS_NAME_MAX + 40];
	enum bs_claim_mode mode = how == CLAIM_SHARED ? BS_CLAIM_WRITE
						      : BS_CLAIM_EXCL;
	unsigned i, j;
	int err;

	if (!dev->ncomponents)
		return how == CLAIM_UNSET ? 0 :
			bs_error(-EINVAL, "%s: claim = ... is for devices with "
				 "components", dev->name);
	dev->comp_claims = calloc(dev->ncomponents, sizeof(*dev->comp_claims));
	if (!dev->comp_claims)
		return -ENOMEM;
	snprintf(holder, sizeof(holder), "mapper %s/%s", dev->type->name,
		 dev->name);
	for (i = 0; i < dev->ncomponents; i++) {
		for (j = 0; j < i; j++)
			if (dev->components[j] == dev->components[i])
				break;
		if (j < i)
			continue;
		err = bs_dev_claim(dev->components[i], mode, holder,
				   &dev->comp_claims[i]);
		if (err) {
			/* "m1: component a: in use by mapper linear/l0" */
			char why[256];

			snprintf(why, sizeof(why), "%s", bs_last_error());
			return bs_error(err, "%s: component %s", dev->name, why);
		}	/* (free_dev() gives back the others) */
	}
	return 0;
}

static void release_components(struct bs_dev *dev)
{
	unsigned i;

	if (!dev->comp_claims)
		return;
	for (i = 0; i < dev->ncomponents; i++)
		bs_claim_release(dev->comp_claims[i]);
	free(dev->comp_claims);
	dev->comp_claims = NULL;
}

static void free_dev(struct bs_dev *dev)
{
	bs_opts_free(dev->pending_opts);
	release_components(dev);
	bs_caps_dev_free(dev);
	bs_req_drv_ctx_drain(dev);
	bs_dev_snap_free(dev);
	pthread_mutex_destroy(&dev->wt_lock);
	free(dev->components);
	free(dev->holders);
	free(dev);
}

int bs_dev_set_reason(struct bs_dev *dev, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dev->wz_reason, sizeof(dev->wz_reason), fmt, ap);
	va_end(ap);
	return 0;
}

/* Recompute a stacked device's limits from its components. */
static void restack(struct bs_dev *dev)
{
	struct bs_limits lim;
	uint32_t user_flags = dev->limits.flags;
	uint32_t user_sectors = dev->limits.max_user_sectors;

	/* not open yet (or failed): it stacks when it opens */
	if (!dev->type->stack_limits || dev->state != BS_DEV_LIVE)
		return;
	bs_limits_init_stacking(&lim);
	if (dev->type->stack_limits(dev, &lim))
		return; /* keep the old limits: the type refused the new ones */
	lim.flags = user_flags;
	lim.max_user_sectors = user_sectors;
	bs_limits_finish(&lim);
	if (dev->wz_broken) {
		lim.max_write_zeroes_sectors = 0;
		lim.features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
	}
	dev->limits = lim;
}

static void propagate(struct bs_dev *dev, unsigned depth)
{
	unsigned i;

	if (depth > 64)
		return; /* cycles are refused at creation; stay bounded anyway */
	for (i = 0; i < dev->nholders; i++) {
		/* a holder not open yet stacks when it opens */
		if (dev->holders[i]->state != BS_DEV_LIVE)
			continue;
		restack(dev->holders[i]);
		bs_caps_note_change(dev->holders[i]);
		propagate(dev->holders[i], depth + 1);
	}
}

static void limits_changed_main(void *arg)
{
	bs_dev_limits_changed(arg);
}

void bs_dev_limits_changed(struct bs_dev *dev)
{
	/* limits change on the main loop only: an I/O thread sends it there
	 * (retried on ENOMEM: the change must not be lost) */
	if (!bs_loop_is_current(dev->ctx->loop)) {
		while (bs_loop_post(dev->ctx->loop, limits_changed_main, dev) ==
		       -ENOMEM)
			usleep(1000);
		return;
	}
	/*
	 * One thread runs the loop, so this whole walk happens between two
	 * requests: every request sees either the old or the new limits of
	 * every level, never a mix.
	 */
	restack(dev);
	bs_caps_note_change(dev);
	propagate(dev, 0);
}

struct wz_msg {
	struct bs_dev *dev;
	char why[192];
};

static void disable_wz_main(void *arg)
{
	struct wz_msg *m = arg;

	if (!m->dev->wz_broken)
		bs_dev_disable_write_zeroes(m->dev, m->why);
	free(m);
}

void bs_dev_disable_write_zeroes(struct bs_dev *dev, const char *why)
{
	/* limits change on the main loop only: an I/O thread sends it there */
	if (!bs_loop_is_current(dev->ctx->loop)) {
		struct wz_msg *m = malloc(sizeof(*m));

		if (!m)
			return; /* the next failure tries again */
		m->dev = dev;
		snprintf(m->why, sizeof(m->why), "%s", why);
		if (bs_loop_post(dev->ctx->loop, disable_wz_main, m))
			free(m);
		return;
	}
	dev->wz_broken = true;
	dev->limits.max_write_zeroes_sectors = 0;
	dev->limits.features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
	bs_dev_set_reason(dev, "%s", why);
	bs_caps_note_change(dev);
	propagate(dev, 0);
}

int bs_dev_create(struct bs_ctx *ctx, const char *name, const char *typename,
		  struct bs_opts *opts, struct bs_dev **out)
{
	struct bs_dev *dev, **pp;
	const struct bs_dev_type *type;
	bool ro = false, knob = true, knob_set = false;
	int claim_how = CLAIM_UNSET;
	unsigned i;
	int err;

	bs_opts_set_label(opts, name);
	if (!name || !*name || strlen(name) >= BS_NAME_MAX ||
	    strpbrk(name, " \t/,:="))
		return bs_error(-EINVAL, "'%s': a device name is 1 to %d "
				"characters without blanks or / , : =",
				name ? name : "", BS_NAME_MAX - 1);
	if (bs_dev_find(ctx, name))
		return bs_error(-EEXIST, "%s: a device of that name exists", name);
	if (!typename)
		typename = bs_opts_get(opts, "type");
	else
		bs_opts_get(opts, "type");
	if (!typename)
		return bs_error(-EINVAL, "%s: no 'type' given", name);
	type = bs_dev_type_find(typename);
	if (!type)
		return bs_error(-EINVAL, "%s%s%s: unknown device type '%s'",
				bs_opts_where(opts, "type"),
				*bs_opts_where(opts, "type") ? ": " : "", name,
				typename);

	if (type->options) {
		/* unknown keys first: before "needs size" and before open */
		const char *const core[] = { "type", "readonly",
					     "write_zeroes_unmap", "claim",
					     type->stacked ? "devices" : NULL,
					     NULL };

		err = bs_opts_check_known(opts, core, type->options);
		if (err)
			return err;
	}
	err = bs_opts_get_bool(opts, "readonly", &ro);
	if (err < 0)
		return err;
	err = bs_opts_get_bool(opts, "write_zeroes_unmap", &knob);
	if (err < 0)
		return err;
	knob_set = err == 0;
	err = bs_opts_get_enum(opts, "claim", claim_modes, &claim_how);
	if (err < 0)
		return err;
	if (err > 0)
		claim_how = CLAIM_UNSET;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	pthread_mutex_init(&dev->wt_lock, NULL);
	snprintf(dev->name, sizeof(dev->name), "%s", name);
	dev->type = type;
	dev->ctx = ctx;
	dev->readonly = ro;
	dev->knob_off = knob_set && !knob;
	bs_limits_init(&dev->limits);

	if (type->stacked) {
		err = resolve_components(dev, opts);
		if (err)
			goto fail;
	}
	err = hold_components(dev);
	if (err)
		goto fail_holders;
	err = bs_dev_components_ready(dev);
	if (err < 0)
		goto fail_holders;
	if (err == BS_OPEN_PENDING) {
		/* a component is still opening: open when it is live; the
		 * claims are taken now, so conflicts show at once */
		err = bs_opts_take_rest(opts, &dev->pending_opts);
		if (!err)
			err = claim_components(dev, claim_how);
		if (err)
			goto fail_holders;
		dev->state = BS_DEV_OPENING;
	} else {
		err = bs_dev_open_driver(dev, opts);
		if (err)
			goto fail_holders;
		/*
		 * Claims after open, so that the type's own checks ("two
		 * legs") speak first; mapper opens do no I/O on their
		 * components, so a refused stack has touched nothing. Types
		 * that take their components themselves (error) are held
		 * here too.
		 */
		err = claim_components(dev, claim_how);
		if (!err)
			err = hold_components(dev);
		if (err) {
			if (type->close)
				type->close(dev);
			goto fail_holders;
		}
	}
	if (dev->state == BS_DEV_OPENING)
		bs_limits_finish(&dev->limits);	/* defaults until it opens */
	err = bs_caps_dev_init(dev);	/* the first snapshot */
	if (!err && bs_dev_publish(dev))
		err = bs_error(-ENOMEM, "%s: out of memory", dev->name);
	if (err) {
		if (dev->drv_open && type->close)
			type->close(dev);
		goto fail_holders;
	}

	for (pp = &ctx->devs; *pp; pp = &(*pp)->next)
		;
	*pp = dev;
	if (out)
		*out = dev;
	return 0;
fail_holders:
	for (i = 0; i < dev->ncomponents; i++)
		del_holder(dev->components[i], dev);
fail:
	free_dev(dev);
	return err;
}

/*
 * Call the driver's open with @opts: 0 when live (limits stacked or
 * finished, the knob applied, size checked), 0 with the state OPENING when
 * the driver went on asynchronously, or -errno (nothing left open).
 */
int bs_dev_open_driver(struct bs_dev *dev, struct bs_opts *opts)
{
	int err = dev->type->open(dev, opts);
	bool pending;

	if (err < 0)
		return err;
	dev->drv_open = true;
	pending = err == BS_OPEN_PENDING;
	if (pending)
		dev->state = BS_DEV_OPENING;
	err = bs_opts_check_unused(opts);
	if (!err && !pending)
		err = bs_dev_finish_open(dev);
	if (err && dev->type->close) {
		dev->type->close(dev);
		dev->drv_open = false;
	}
	return err;
}

int bs_dev_finish_open(struct bs_dev *dev)
{
	dev->state = BS_DEV_LIVE;
	dev->state_reason[0] = '\0';
	if (dev->type->stacked)
		restack(dev);
	else
		bs_limits_finish(&dev->limits);
	if (dev->knob_off)
		dev->limits.flags |= BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED;
	if (dev->size % dev->limits.logical_block_size) {
		dev->state = BS_DEV_FAILED;
		return bs_error(-EINVAL, "%s: size %llu is not a multiple of "
				"the logical block size %u", dev->name,
				(unsigned long long)dev->size,
				dev->limits.logical_block_size);
	}
	return 0;
}

int bs_dev_destroy(struct bs_dev *dev)
{
	struct bs_ctx *ctx = dev->ctx;
	struct bs_dev **pp;
	unsigned i;

	if (dev->nholders)
		return bs_error(-EBUSY, "%s: in use by %s", dev->name,
				dev->holders[0]->name);
	if (dev->claims)
		return bs_error(-EBUSY, "%s: in use by %s", dev->name,
				bs_claim_holder(dev->claims));
	if (dev->drv_open && dev->type->close)
		dev->type->close(dev);
	for (i = 0; i < dev->ncomponents; i++)
		del_holder(dev->components[i], dev);
	for (pp = &ctx->devs; *pp; pp = &(*pp)->next) {
		if (*pp == dev) {
			*pp = dev->next;
			break;
		}
	}
	free_dev(dev);
	return 0;
}

int64_t bs_dev_allocated(struct bs_dev *dev)
{
	if (!dev->type->allocated)
		return -EOPNOTSUPP;
	if (dev->state != BS_DEV_LIVE)
		return dev->state == BS_DEV_OPENING ? -EAGAIN : -ENXIO;
	return dev->type->allocated(dev);
}

void bs_dev_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	/* the type's facts read its state: only while it is open */
	if (dev->type->describe && dev->drv_open)
		dev->type->describe(dev, kv, arg);
}
