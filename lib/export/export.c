/* SPDX-License-Identifier: MIT */
/*
 * The export registry: export types by name, the set of exports of one
 * context, creation from [export NAME] config sections.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/config.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#define MAX_EXPORT_TYPES 16

static const struct bs_export_type *types[MAX_EXPORT_TYPES];
static unsigned ntypes;

void bs_export_type_register(const struct bs_export_type *type)
{
	/* constructors only: single-threaded, before main() */
	if (ntypes < MAX_EXPORT_TYPES && !bs_export_type_find(type->name))
		types[ntypes++] = type;
}

const struct bs_export_type *bs_export_type_find(const char *name)
{
	unsigned i;

	for (i = 0; i < ntypes; i++)
		if (!strcmp(types[i]->name, name))
			return types[i];
	return NULL;
}

const struct bs_export_type *bs_export_type_next(const struct bs_export_type *p)
{
	unsigned i;

	if (!p)
		return ntypes ? types[0] : NULL;
	for (i = 0; i + 1 < ntypes; i++)
		if (types[i] == p)
			return types[i + 1];
	return NULL;
}

struct bs_exports {
	struct bs_ctx *ctx;
	struct bs_export *exports;	/* creation order */
	void *slots[MAX_EXPORT_TYPES];
	bs_log_fn log;
	void *log_arg;
	unsigned holds;
	bool released;			/* for bs_ctx_wait() */
};

int bs_exports_new(struct bs_ctx *ctx, struct bs_exports **out)
{
	struct bs_exports *set = calloc(1, sizeof(*set));

	if (!set)
		return -ENOMEM;
	set->ctx = ctx;
	*out = set;
	return 0;
}

struct bs_ctx *bs_exports_ctx(struct bs_exports *set)
{
	return set->ctx;
}

void bs_exports_set_log(struct bs_exports *set, bs_log_fn fn, void *arg)
{
	set->log = fn;
	set->log_arg = arg;
}

void bs_exports_log(struct bs_exports *set, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	if (!set || !set->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	set->log(set->log_arg, msg);
}

void **bs_exports_type_slot(struct bs_exports *set,
			    const struct bs_export_type *type)
{
	unsigned i;

	for (i = 0; i < ntypes; i++)
		if (types[i] == type)
			return &set->slots[i];
	return NULL;
}

void bs_exports_hold(struct bs_exports *set)
{
	set->holds++;
	set->released = false;
}

void bs_exports_release(struct bs_exports *set)
{
	if (set->holds && !--set->holds)
		set->released = true;
}

struct bs_export *bs_export_find(struct bs_exports *set, const char *name)
{
	struct bs_export *e;

	for (e = set->exports; e; e = e->next)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

struct bs_export *bs_export_next(struct bs_exports *set,
				 struct bs_export *prev)
{
	return prev ? prev->next : set->exports;
}

static int where_fail(struct bs_opts *opts, const char *key, int err,
		      const char *name, const char *fmt, const char *arg)
{
	const char *w = bs_opts_where(opts, key);
	char msg[512];

	snprintf(msg, sizeof(msg), fmt, arg);
	return bs_error(err, "%s%sexport %s: %s", w, *w ? ": " : "", name, msg);
}

/*
 * The served device's capabilities changed: one log line saying what, then
 * the type's own reaction.
 */
static void export_caps_changed(void *arg, struct bs_dev *dev,
				const struct bs_caps *now)
{
	struct bs_export *exp = arg;
	char what[1024];

	if (bs_caps_diff(&exp->caps, now, what, sizeof(what)))
		bs_exports_log(exp->set, "export %s: device %s capabilities "
			       "changed (generation %llu): %s; new "
			       "connections get them", exp->name,
			       dev->name,
			       (unsigned long long)now->generation, what);
	if (exp->type->caps_changed)
		exp->type->caps_changed(exp, now);
	exp->caps = *now;
}

int bs_export_create(struct bs_exports *set, const char *name,
		     const char *typename, struct bs_opts *opts,
		     struct bs_export **out)
{
	const struct bs_export_type *type;
	struct bs_export *exp, **pp;
	const char *devname, *desc;
	char holder[BS_EXPORT_NAME_MAX + 32];
	bool ro = false;
	size_t i, n;
	int err;

	bs_opts_set_label(opts, name ? name : "");
	n = name ? strlen(name) : 0;
	if (!n || n >= BS_EXPORT_NAME_MAX)
		return bs_error(-EINVAL, "export '%s': a name is 1 to %d bytes",
				name ? name : "", BS_EXPORT_NAME_MAX - 1);
	for (i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return bs_error(-EINVAL, "export '%s': control "
					"characters in the name", name);
	if (bs_export_find(set, name))
		return bs_error(-EEXIST, "export %s: defined twice", name);
	if (!typename)
		typename = bs_opts_get(opts, "type");
	else
		bs_opts_get(opts, "type");
	if (!typename)
		return bs_error(-EINVAL, "export %s: no 'type' given (type = "
				"nbd)", name);
	type = bs_export_type_find(typename);
	if (!type)
		return where_fail(opts, "type", -EINVAL, name,
				  "unknown export type '%s'", typename);
	if (type->options) {
		/* unknown keys first: before anything listens */
		static const char *const common[] = { "type", "device",
						      "readonly", "description",
						      NULL };

		err = bs_opts_check_known(opts, common, type->options);
		if (err)
			return err;
	}
	devname = bs_opts_get(opts, "device");
	if (!devname || !*devname)
		return bs_error(-EINVAL, "export %s: no 'device' given", name);
	err = bs_opts_get_bool(opts, "readonly", &ro);
	if (err < 0)
		return err;
	desc = bs_opts_get(opts, "description");

	exp = calloc(1, sizeof(*exp));
	if (!exp)
		return -ENOMEM;
	snprintf(exp->name, sizeof(exp->name), "%s", name);
	exp->type = type;
	exp->set = set;
	exp->ctx = set->ctx;
	exp->dev = bs_dev_find(set->ctx, devname);
	if (!exp->dev) {
		free(exp);
		return where_fail(opts, "device", -ENOENT, name,
				  "device '%s' does not exist", devname);
	}
	exp->readonly = ro || exp->dev->readonly;
	exp->description = strdup(desc ? desc : "");
	if (!exp->description) {
		free(exp);
		return -ENOMEM;
	}
	/*
	 * Claimed before anything listens: a writable export shares the
	 * device with other readers and writers (two export names of one
	 * device), never with an exclusive user (a mapper, mkfs, zeroout).
	 */
	snprintf(holder, sizeof(holder), "export %s/%s", type->name, name);
	err = bs_dev_claim(exp->dev, exp->readonly ? BS_CLAIM_READ :
			   BS_CLAIM_WRITE, holder, &exp->claim);
	if (err) {
		char why[256];

		snprintf(why, sizeof(why), "%s", bs_last_error());
		err = bs_error(err, "export %s: %s", name, why);
		goto fail;
	}
	bs_dev_caps(exp->dev, &exp->caps);
	err = type->open(exp, opts);
	if (err)
		goto fail;
	err = bs_opts_check_unused(opts);
	if (!err)
		err = bs_caps_subscribe(exp->dev, export_caps_changed, exp,
					&exp->caps_sub);
	if (err) {
		type->close(exp);
		goto fail;
	}
	for (pp = &set->exports; *pp; pp = &(*pp)->next)
		;
	*pp = exp;
	if (out)
		*out = exp;
	return 0;
fail:
	bs_claim_release(exp->claim);
	free(exp->description);
	free(exp);
	return err;
}

void bs_export_destroy(struct bs_export *exp)
{
	struct bs_export **pp;

	for (pp = &exp->set->exports; *pp; pp = &(*pp)->next) {
		if (*pp == exp) {
			*pp = exp->next;
			break;
		}
	}
	bs_caps_unsubscribe(exp->caps_sub);
	exp->type->close(exp);
	bs_claim_release(exp->claim);
	free(exp->description);
	free(exp);
}

void bs_exports_shutdown(struct bs_exports *set)
{
	struct bs_export *e;

	for (e = set->exports; e; e = e->next)
		if (e->type->shutdown)
			e->type->shutdown(e);
}

unsigned bs_exports_clients(struct bs_exports *set)
{
	struct bs_export *e;
	unsigned n = 0;

	for (e = set->exports; e; e = e->next)
		if (e->type->clients)
			n += e->type->clients(e);
	return n;
}

void bs_exports_free(struct bs_exports *set)
{
	if (!set)
		return;
	/* newest first, as created */
	while (set->exports) {
		struct bs_export *e = set->exports, *last = e;
		while (last->next)
			last = last->next;
		bs_export_destroy(last);
	}
	/* requests of vanished clients still run in the devices: wait */
	if (set->holds)
		bs_ctx_wait(set->ctx, &set->released);
	/* closed connections may still have work queued on the loop */
	bs_loop_run_once(bs_ctx_loop(set->ctx), 0);
	free(set);
}

static const char *peek(const struct bs_opts *opts, const char *key)
{
	const char *k, *v;
	unsigned i;

	for (i = 0; bs_opts_at(opts, i, &k, &v); i++)
		if (!strcmp(k, key))
			return v;
	return NULL;
}

int bs_config_check_exports(struct bs_config *cfg)
{
	static const char *const common[] = { "type", "device", "readonly",
					      "description", NULL };
	struct bs_config_section *s = NULL, *d;
	const struct bs_export_type *type;
	const char *tname, *dev;
	bool shared;
	int err;

	while ((s = bs_config_next(cfg, "export", s))) {
		bs_opts_set_label(s->opts, s->name);
		tname = peek(s->opts, "type");
		if (!tname)
			return bs_error(-EINVAL, "%s:%d: export %s: no 'type' "
					"given (type = nbd)", cfg->path,
					s->line, s->name);
		type = bs_export_type_find(tname);
		if (!type)
			return where_fail(s->opts, "type", -EINVAL, s->name,
					  "unknown export type '%s'", tname);
		if (type->options &&
		    (err = bs_opts_check_known(s->opts, common, type->options)))
			return err;
		if (type->check && (err = type->check(s->name, s->opts)))
			return err;
		dev = peek(s->opts, "device");
		if (!dev || !*dev)
			return bs_error(-EINVAL, "%s:%d: export %s: no 'device' "
					"given", cfg->path, s->line, s->name);
		for (d = NULL; (d = bs_config_next(cfg, "device", d));)
			if (!strcmp(d->name, dev))
				break;
		if (!d)
			return where_fail(s->opts, "device", -ENOENT, s->name,
					  "device '%s' does not exist", dev);
		/* a component a mapper holds exclusively is not served */
		d = bs_config_user_of(cfg, dev, NULL, &shared);
		if (d && !shared) {
			char msg[BS_NAME_MAX * 3 + 64];

			snprintf(msg, sizeof(msg), "%s: in use by mapper %s/%s",
				 dev, peek(d->opts, "type") ?
				 peek(d->opts, "type") : "?", d->name);
			return where_fail(s->opts, "device", -EBUSY, s->name,
					  "%s", msg);
		}
	}
	return 0;
}

int bs_config_create_exports(struct bs_config *cfg, struct bs_exports *set)
{
	struct bs_config_section *s = NULL;
	int err;

	while ((s = bs_config_next(cfg, "export", s))) {
		err = bs_export_create(set, s->name, NULL, s->opts, NULL);
		if (err) {
			const char *msg = bs_last_error();
			char copy[768];

			if (strstr(msg, cfg->path) == msg)
				return err;
			snprintf(copy, sizeof(copy), "%s", *msg ? msg :
				 strerror(-err));
			return bs_error(err, "%s:%d: %s", cfg->path, s->line,
					copy);
		}
	}
	return 0;
}
