/* SPDX-License-Identifier: MIT */
/*
 * The export registry: export types by name, the set of exports of one
 * context, creation from [export NAME] config sections.
 */
#include <errno.h>
#include <unistd.h>
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

/*
 * Holds come from sessions on any I/O loop; bs_exports_free() on the main
 * loop polls the count while it runs its loop (no post that could outlive
 * the set).
 */
void bs_exports_hold(struct bs_exports *set)
{
	__atomic_fetch_add(&set->holds, 1, __ATOMIC_ACQ_REL);
}

void bs_exports_release(struct bs_exports *set)
{
	__atomic_fetch_sub(&set->holds, 1, __ATOMIC_ACQ_REL);
}

struct bs_export *bs_export_find(struct bs_exports *set, const char *name)
{
	struct bs_export *e;

	for (e = set->exports; e; e = e->next)
		if (!strcmp(e->name, name))
			return e;
	return NULL;
}

int bs_export_port_state(struct bs_export *exp, const char *port,
			 const char *state, const char *group, bs_kv_fn kv,
			 void *arg)
{
	if (!exp->type->set_port_state)
		return bs_error(-EOPNOTSUPP, "export %s: type %s has no port "
				"states", exp->name, exp->type->name);
	if (!port != !state || (group && !port))
		return bs_error(-EINVAL, "export %s: give a port and a state",
				exp->name);
	return exp->type->set_port_state(exp, port, state, group, kv, arg);
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
	char msg[1024];

	snprintf(msg, sizeof(msg), fmt, arg);
	return bs_error(err, "%s%sexport %s: %s", w, *w ? ": " : "", name, msg);
}

/* ---- units ------------------------------------------------------------- */

/* Keys every export type takes; "unit.*" are the unit lines. */
static const char *const common_keys[] = { "type", "device", "readonly",
					   "description", "unit.*", NULL };

/* A unit as the config gives it, before any device is looked up. */
struct unit_spec {
	const char *name;	/* the export's name for `device =` */
	const char *dev;
	const char *key;	/* "device" or "unit.NAME": for file:line */
	bool ro;
	const char *desc;	/* NULL: the export's */
};

_Static_assert(BS_EXPORT_MAX_UNITS == 256, "the message below says 256");

static const char *const unit_attrs[] = { ".readonly", ".description",
					  NULL };

/* The attribute @key ("unit.a.readonly") sets, with its stem length. */
static const char *unit_attr(const char *rest, size_t *stem)
{
	size_t n = strlen(rest), a;
	unsigned i;

	for (i = 0; unit_attrs[i]; i++) {
		a = strlen(unit_attrs[i]);
		if (n > a && !strcmp(rest + n - a, unit_attrs[i])) {
			*stem = n - a;
			return unit_attrs[i] + 1;
		}
	}
	return NULL;
}

static int check_name(const char *what, const char *name)
{
	size_t i, n = strlen(name);

	if (!n || n >= BS_EXPORT_NAME_MAX)
		return bs_error(-EINVAL, "%s '%s': a name is 1 to %d bytes",
				what, name, BS_EXPORT_NAME_MAX - 1);
	for (i = 0; i < n; i++)
		if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
			return bs_error(-EINVAL, "%s '%s': control characters "
					"in the name", what, name);
	return 0;
}

/*
 * Read the units of export @name (device, readonly, description and the
 * unit.* lines, consumed here) into *out (malloc'd, *n at least 1).
 * Errors name the line: "FILE:LINE: export NAME: ...".
 */
static int read_units(const char *name, struct bs_opts *opts,
		      bool optional, struct unit_spec **out, unsigned *n)
{
	const char *device, *desc, *k, *v, *attr;
	struct unit_spec *u = NULL;
	unsigned i, j, nu = 0;
	bool ro = false;
	size_t stem;
	int err;

	*out = NULL;
	*n = 0;
	device = bs_opts_get(opts, "device");
	err = bs_opts_get_bool(opts, "readonly", &ro);
	if (err < 0)
		return err;
	desc = bs_opts_get(opts, "description");
	/* the unit lines first, in config order, then their attributes */
	for (i = 0; bs_opts_at(opts, i, &k, &v); i++) {
		if (strncmp(k, "unit.", 5) || unit_attr(k + 5, &stem))
			continue;
		if (device) {
			err = where_fail(opts, k, -EINVAL, name, "'%s' beside "
					 "'device =': give either one device "
					 "(device = DEV) or units (unit.NAME "
					 "= DEV), not both", k);
			goto fail;
		}
		err = check_name("unit", k + 5);
		if (err) {
			char why[BS_EXPORT_NAME_MAX + 128];

			snprintf(why, sizeof(why), "%s", bs_last_error());
			err = where_fail(opts, k, err, name, "%s", why);
			goto fail;
		}
		if (nu == BS_EXPORT_MAX_UNITS) {
			err = where_fail(opts, k, -E2BIG, name, "%s: more "
					 "than 256 units", k);
			goto fail;
		}
		if (!v || !*v) {
			err = where_fail(opts, k, -EINVAL, name, "%s: no "
					 "device given (unit.NAME = DEVICE)",
					 k);
			goto fail;
		}
		if (!nu) {
			u = calloc(BS_EXPORT_MAX_UNITS, sizeof(*u));
			if (!u)
				return -ENOMEM;
		}
		bs_opts_get(opts, k);
		u[nu++] = (struct unit_spec){ .name = k + 5, .dev = v,
					      .key = k, .ro = ro,
					      .desc = desc };
	}
	for (i = 0; bs_opts_at(opts, i, &k, &v); i++) {
		if (strncmp(k, "unit.", 5) || !(attr = unit_attr(k + 5, &stem)))
			continue;
		for (j = 0; j < nu; j++)
			if (strlen(u[j].name) == stem &&
			    !strncmp(u[j].name, k + 5, stem))
				break;
		if (j == nu) {
			char msg[2 * BS_EXPORT_NAME_MAX + 128];

			snprintf(msg, sizeof(msg), "%s: no unit '%.*s' (define "
				 "it with unit.%.*s = DEVICE)", k, (int)stem,
				 k + 5, (int)stem, k + 5);
			err = where_fail(opts, k, -EINVAL, name, "%s", msg);
			goto fail;
		}
		if (!strcmp(attr, "readonly")) {
			bool b = false;

			err = bs_opts_get_bool(opts, k, &b);
			if (err < 0)
				goto fail;
			u[j].ro = ro || b;
		} else {
			u[j].desc = bs_opts_get(opts, k);
		}
	}
	if (!nu) {
		if (!device && optional)
			return 0;
		if (!device || !*device)
			return bs_error(-EINVAL, "export %s: no 'device' given "
					"(device = DEV, or unit.NAME = DEV "
					"lines)", name);
		u = calloc(1, sizeof(*u));
		if (!u)
			return -ENOMEM;
		u[nu++] = (struct unit_spec){ .name = name, .dev = device,
					      .key = "device", .ro = ro,
					      .desc = desc };
	}
	*out = u;
	*n = nu;
	return 0;
fail:
	free(u);
	return err;
}

const char *bs_export_unit_label(const struct bs_export_unit *u, char *buf,
				 size_t len)
{
	if (!strcmp(u->name, u->exp->name))
		snprintf(buf, len, "export %s", u->name);
	else
		snprintf(buf, len, "export %s unit %s", u->exp->name, u->name);
	return buf;
}

struct bs_export_unit *bs_export_unit_find(struct bs_export *exp,
					   const char *name)
{
	unsigned i;

	for (i = 0; i < exp->nunits; i++)
		if (!strcmp(exp->units[i].name, name))
			return &exp->units[i];
	return NULL;
}

/*
 * A unit's device changed its capabilities: one log line saying what, then
 * the type's own reaction.
 */
static void unit_caps_changed(void *arg, struct bs_dev *dev,
			      const struct bs_caps *now)
{
	struct bs_export_unit *u = arg;
	struct bs_export *exp = u->exp;
	char what[1024], label[2 * BS_EXPORT_NAME_MAX + 16];

	if (bs_caps_diff(&u->caps, now, what, sizeof(what)))
		bs_exports_log(exp->set, "%s: device %s capabilities "
			       "changed (generation %llu): %s; new "
			       "connections get them",
			       bs_export_unit_label(u, label, sizeof(label)),
			       dev->name,
			       (unsigned long long)now->generation, what);
	if (exp->type->caps_changed)
		exp->type->caps_changed(exp, u, now);
	u->caps = *now;
}

/* Release what the units hold (claims, subscriptions) and free them. */
static void units_free(struct bs_export *exp)
{
	unsigned i;

	for (i = 0; exp->units && i < exp->nunits; i++) {
		struct bs_export_unit *u = &exp->units[i];

		bs_caps_unsubscribe(u->caps_sub);
		bs_claim_release(u->claim);
		free(u->description);
	}
	free(exp->units);
	exp->units = NULL;
	exp->nunits = 0;
}

/*
 * Each unit's device found and claimed, before anything listens: a
 * writable unit shares the device with other readers and writers (two
 * export names of one device), never with an exclusive user (a mapper,
 * mkfs, zeroout).
 */
static int units_open(struct bs_export *exp, struct bs_opts *opts,
		      const struct unit_spec *spec, unsigned n)
{
	char holder[2 * BS_EXPORT_NAME_MAX + 32];
	char label[2 * BS_EXPORT_NAME_MAX + 16];
	unsigned i;
	int err;

	if (!n)
		return 0;
	exp->units = calloc(n, sizeof(*exp->units));
	if (!exp->units)
		return -ENOMEM;
	exp->nunits = n;
	for (i = 0; i < n; i++) {
		struct bs_export_unit *u = &exp->units[i];

		snprintf(u->name, sizeof(u->name), "%s", spec[i].name);
		u->exp = exp;
		u->index = i;
		u->description = strdup(spec[i].desc ? spec[i].desc : "");
		if (!u->description)
			return -ENOMEM;
		u->dev = bs_dev_find(exp->ctx, spec[i].dev);
		if (!u->dev)
			return where_fail(opts, spec[i].key, -ENOENT, exp->name,
					  "device '%s' does not exist",
					  spec[i].dev);
		u->readonly = spec[i].ro || u->dev->readonly;
		if (!strcmp(u->name, exp->name))
			snprintf(holder, sizeof(holder), "export %s/%s",
				 exp->type->name, exp->name);
		else
			snprintf(holder, sizeof(holder), "export %s/%s/%s",
				 exp->type->name, exp->name, u->name);
		err = bs_dev_claim(u->dev, u->readonly ? BS_CLAIM_READ :
				   BS_CLAIM_WRITE, holder, &u->claim);
		if (err) {
			char why[256];

			snprintf(why, sizeof(why), "%s", bs_last_error());
			return bs_error(err, "%s: %s",
					bs_export_unit_label(u, label,
							     sizeof(label)),
					why);
		}
		bs_dev_caps(u->dev, &u->caps);
	}
	return 0;
}

int bs_export_create(struct bs_exports *set, const char *name,
		     const char *typename, struct bs_opts *opts,
		     struct bs_export **out)
{
	const struct bs_export_type *type;
	struct bs_export *exp, **pp;
	struct unit_spec *spec = NULL;
	unsigned i, nspec = 0;
	int err;

	bs_opts_set_label(opts, name ? name : "");
	err = check_name("export", name ? name : "");
	if (err)
		return err;
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
		err = bs_opts_check_known(opts, common_keys, type->options);
		if (err)
			return err;
	}
	err = read_units(name, opts, type->device_optional, &spec, &nspec);
	if (err)
		return err;

	exp = calloc(1, sizeof(*exp));
	if (!exp) {
		free(spec);
		return -ENOMEM;
	}
	snprintf(exp->name, sizeof(exp->name), "%s", name);
	exp->type = type;
	exp->set = set;
	exp->ctx = set->ctx;
	err = units_open(exp, opts, spec, nspec);
	free(spec);
	if (err)
		goto fail;
	err = type->open(exp, opts);
	if (err)
		goto fail;
	err = bs_opts_check_unused(opts);
	for (i = 0; !err && i < exp->nunits; i++)
		err = bs_caps_subscribe(exp->units[i].dev, unit_caps_changed,
					&exp->units[i],
					&exp->units[i].caps_sub);
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
	units_free(exp);
	free(exp);
	return err;
}

void bs_export_destroy(struct bs_export *exp)
{
	struct bs_export **pp;
	unsigned i;

	for (pp = &exp->set->exports; *pp; pp = &(*pp)->next) {
		if (*pp == exp) {
			*pp = exp->next;
			break;
		}
	}
	for (i = 0; i < exp->nunits; i++) {
		bs_caps_unsubscribe(exp->units[i].caps_sub);
		exp->units[i].caps_sub = NULL;
	}
	exp->type->close(exp);
	units_free(exp);
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
	while (__atomic_load_n(&set->holds, __ATOMIC_ACQUIRE))
		if (bs_loop_run_once(bs_ctx_loop(set->ctx), 10))
			break;
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

/* A device @dev of @cfg for unit @u of export @s, not held exclusively. */
static int check_unit_device(struct bs_config *cfg,
			     struct bs_config_section *s,
			     const struct unit_spec *u)
{
	struct bs_config_section *d;
	bool shared;

	for (d = NULL; (d = bs_config_next(cfg, "device", d));)
		if (!strcmp(d->name, u->dev))
			break;
	if (!d)
		return where_fail(s->opts, u->key, -ENOENT, s->name,
				  "device '%s' does not exist", u->dev);
	/* a component a mapper holds exclusively is not served */
	d = bs_config_user_of(cfg, u->dev, NULL, &shared);
	if (d && !shared) {
		char msg[BS_NAME_MAX * 3 + 64];

		snprintf(msg, sizeof(msg), "%s: in use by mapper %s/%s",
			 u->dev, peek(d->opts, "type") ?
			 peek(d->opts, "type") : "?", d->name);
		return where_fail(s->opts, u->key, -EBUSY, s->name, "%s",
				  msg);
	}
	return 0;
}

int bs_config_check_exports(struct bs_config *cfg)
{
	struct bs_config_section *s = NULL;
	const struct bs_export_type *type;
	struct unit_spec *units;
	const char *tname;
	unsigned i, n;
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
		    (err = bs_opts_check_known(s->opts, common_keys,
					       type->options)))
			return err;
		if (type->check && (err = type->check(s->name, s->opts)))
			return err;
		err = read_units(s->name, s->opts, type->device_optional,
				 &units, &n);
		if (err) {
			const char *msg = bs_last_error();
			char copy[768];

			if (strstr(msg, cfg->path) == msg)
				return err;
			snprintf(copy, sizeof(copy), "%s", msg);
			return bs_error(err, "%s:%d: %s", cfg->path, s->line,
					copy);
		}
		for (i = 0, err = 0; !err && i < n; i++)
			err = check_unit_device(cfg, s, &units[i]);
		free(units);
		if (err)
			return err;
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
