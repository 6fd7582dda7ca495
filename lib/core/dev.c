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

#include <blkstack/bdev.h>
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
		if (!last || bs_dev_destroy(last))
			break;
	}
	bs_workers_free(ctx->workers);
	bs_loop_free(ctx->loop);
	free(ctx->zero_buf);
	free(ctx);
}

struct bs_loop *bs_ctx_loop(struct bs_ctx *ctx)
{
	return ctx->loop;
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
				       w, *w ? ": " : "", dev->name, tok);
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

static void free_dev(struct bs_dev *dev)
{
	bs_caps_dev_free(dev);
	bs_req_drv_ctx_drain(dev);
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

	if (!dev->type->stack_limits)
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
		restack(dev->holders[i]);
		bs_caps_note_change(dev->holders[i]);
		propagate(dev->holders[i], depth + 1);
	}
}

void bs_dev_limits_changed(struct bs_dev *dev)
{
	/*
	 * One thread runs the loop, so this whole walk happens between two
	 * requests: every request sees either the old or the new limits of
	 * every level, never a mix.
	 */
	restack(dev);
	bs_caps_note_change(dev);
	propagate(dev, 0);
}

void bs_dev_disable_write_zeroes(struct bs_dev *dev, const char *why)
{
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
					     "write_zeroes_unmap",
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

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return -ENOMEM;
	snprintf(dev->name, sizeof(dev->name), "%s", name);
	dev->type = type;
	dev->ctx = ctx;
	dev->readonly = ro;
	bs_limits_init(&dev->limits);

	if (type->stacked) {
		err = resolve_components(dev, opts);
		if (err)
			goto fail;
	}
	err = type->open(dev, opts);
	if (err)
		goto fail;
	err = bs_opts_check_unused(opts);
	if (err) {
		if (type->close)
			type->close(dev);
		goto fail;
	}
	for (i = 0; i < dev->ncomponents; i++) {
		err = add_holder(dev->components[i], dev);
		if (err) {
			while (i--)
				del_holder(dev->components[i], dev);
			if (type->close)
				type->close(dev);
			goto fail;
		}
	}
	if (type->stacked)
		restack(dev);
	else
		bs_limits_finish(&dev->limits);
	if (knob_set && !knob)
		dev->limits.flags |= BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED;
	if (dev->size % dev->limits.logical_block_size)
		err = bs_error(-EINVAL, "%s: size %llu is not a multiple of the "
			       "logical block size %u", name,
			       (unsigned long long)dev->size,
			       dev->limits.logical_block_size);
	else
		err = bs_caps_dev_init(dev);	/* the first snapshot */
	if (err) {
		for (i = 0; i < dev->ncomponents; i++)
			del_holder(dev->components[i], dev);
		if (type->close)
			type->close(dev);
		goto fail;
	}

	for (pp = &ctx->devs; *pp; pp = &(*pp)->next)
		;
	*pp = dev;
	if (out)
		*out = dev;
	return 0;
fail:
	free_dev(dev);
	return err;
}

int bs_dev_destroy(struct bs_dev *dev)
{
	struct bs_ctx *ctx = dev->ctx;
	struct bs_dev **pp;
	unsigned i;

	if (dev->nholders)
		return bs_error(-EBUSY, "%s: in use by %s", dev->name,
				dev->holders[0]->name);
	if (dev->type->close)
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
	return dev->type->allocated(dev);
}

void bs_dev_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	if (dev->type->describe)
		dev->type->describe(dev, kv, arg);
}
