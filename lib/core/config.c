/* SPDX-License-Identifier: MIT */
/*
 * The INI configuration and device creation in dependency order.
 *
 * The format is ours (docs/core.md): [kind name] headers, key = value
 * lines, whole-line comments starting with # or ;, and inline comments: a
 * # or ; at the start of a value or after a blank ends it, so
 * "state_dir = /srv # default ./var" is "/srv" while "path = /a#b" keeps
 * its '#'. Lines may be as long as MAX_LINE; every message names the real
 * FILE:LINE.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/config.h>
#include <blkstack/opts.h>

/* Limits that keep a wrong -c (a device, a huge file) from eating memory. */
#define MAX_LINE (64 * 1024)
#define MAX_CONFIG (16 * 1024 * 1024)
/* Sections are compared pairwise (duplicates, components): keep n small. */
#define MAX_SECTIONS 4096

struct parse {
	struct bs_config *cfg;
	const char *label;
	int line;		/* the line being read, from 1 */
	int cur;		/* index of the current section, -1 before one */
};

static int fail(struct parse *p, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct parse *p, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return bs_error(err, "%s:%d: %s", p->label, p->line, msg);
}

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

static char *trim(char *s)
{
	char *e;

	while (blank(*s))
		s++;
	e = s + strlen(s);
	while (e > s && blank(e[-1]))
		*--e = '\0';
	return s;
}

/* Cut an inline comment: '#' or ';' at the start or after a blank. */
static void cut_comment(char *s)
{
	char *c;

	for (c = s; *c; c++) {
		if ((*c == '#' || *c == ';') && (c == s || blank(c[-1]))) {
			*c = '\0';
			return;
		}
	}
}

static int new_section(struct parse *p, const char *header)
{
	struct bs_config *cfg = p->cfg;
	struct bs_config_section *s, *v;
	size_t klen = strcspn(header, " \t");
	const char *name = header + klen;
	char kind[16];
	unsigned i;

	while (blank(*name))
		name++;
	if (klen >= sizeof(kind) ||
	    (snprintf(kind, sizeof(kind), "%.*s", (int)klen, header),
	     strcmp(kind, "device") && strcmp(kind, "export") &&
		     strcmp(kind, "daemon")))
		return fail(p, -EINVAL, "unknown section [%s] (expected "
			    "[device NAME], [export NAME] or [daemon])", header);
	if (!strcmp(kind, "daemon") ? *name != '\0' : *name == '\0')
		return fail(p, -EINVAL, "section [%s]: %s", header,
			    *name ? "[daemon] takes no name"
				  : "a name is needed");
	for (i = 0; i < cfg->nsections; i++) {
		if (!strcmp(cfg->sections[i].kind, kind) &&
		    !strcmp(cfg->sections[i].name, name))
			return fail(p, -EINVAL, "[%s] defined twice (first at "
				    "line %d)", header, cfg->sections[i].line);
	}
	if (cfg->nsections >= MAX_SECTIONS)
		return fail(p, -EINVAL, "more than %d sections", MAX_SECTIONS);
	v = realloc(cfg->sections, (cfg->nsections + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	cfg->sections = v;
	s = &v[cfg->nsections];
	memset(s, 0, sizeof(*s));
	s->kind = strdup(kind);
	s->name = strdup(name);
	s->line = p->line;
	if (!s->kind || !s->name || bs_opts_new(&s->opts)) {
		free(s->kind);
		free(s->name);
		return -ENOMEM;
	}
	bs_opts_set_label(s->opts, *name ? name : kind);
	p->cur = (int)cfg->nsections++;
	return 0;
}

static int key_value(struct parse *p, char *text)
{
	struct bs_config_section *s;
	char *eq = strchr(text, '='), *key, *value, *where;
	const char *k, *v;
	unsigned i;
	int err;

	if (!eq)
		return fail(p, -EINVAL, "syntax error (expected [section] or "
			    "key = value)");
	*eq = '\0';
	key = trim(text);
	value = eq + 1;
	cut_comment(value);
	value = trim(value);
	if (!*key)
		return fail(p, -EINVAL, "syntax error (no key before '=')");
	if (p->cur < 0)
		return fail(p, -EINVAL, "'%s' is outside any section", key);
	s = &p->cfg->sections[p->cur];
	/* lookups mark keys used; peek through the iterator instead */
	for (i = 0; bs_opts_at(s->opts, i, &k, &v); i++)
		if (!strcmp(k, key))
			return fail(p, -EINVAL, "[%s%s%s]: '%s' given twice",
				    s->kind, *s->name ? " " : "", s->name, key);
	if (asprintf(&where, "%s:%d", p->label, p->line) < 0)
		return -ENOMEM;
	err = bs_opts_set(s->opts, key, value, where);
	free(where);
	return err;
}

static int one_line(struct parse *p, char *line)
{
	char *t = trim(line), *close;

	if (!*t || *t == '#' || *t == ';')
		return 0;
	if (*t != '[')
		return key_value(p, t);
	close = strchr(t, ']');
	if (!close)
		return fail(p, -EINVAL, "syntax error ('[' without ']')");
	*close = '\0';
	cut_comment(close + 1);
	if (*trim(close + 1))
		return fail(p, -EINVAL, "syntax error (text after ']')");
	return new_section(p, trim(t + 1));
}

static int parse_text(struct parse *p, const char *text, size_t len)
{
	const char *pos = text, *end = text + len;
	char *buf;
	int err = 0;

	buf = malloc(MAX_LINE + 1);
	if (!buf)
		return -ENOMEM;
	if (len >= 3 && !memcmp(pos, "\xef\xbb\xbf", 3))
		pos += 3;	/* a UTF-8 byte order mark */
	while (!err && pos < end) {
		const char *nl = memchr(pos, '\n', (size_t)(end - pos));
		size_t n = (size_t)((nl ? nl : end) - pos);

		p->line++;
		if (n && pos[n - 1] == '\r')
			n--;
		if (n > MAX_LINE)
			err = fail(p, -EINVAL, "line longer than %d KiB",
				   MAX_LINE / 1024);
		else if (memchr(pos, '\0', n))
			err = fail(p, -EINVAL, "syntax error (a NUL byte)");
		else {
			memcpy(buf, pos, n);
			buf[n] = '\0';
			err = one_line(p, buf);
		}
		pos = nl ? nl + 1 : end;
	}
	free(buf);
	if (err == -ENOMEM)
		bs_error(err, "%s: out of memory", p->label);
	return err;
}

static int parse(const char *label, const char *text, size_t len,
		 struct bs_config **out)
{
	struct bs_config *cfg = calloc(1, sizeof(*cfg));
	struct parse p = { .label = label, .cur = -1, .cfg = cfg };
	int err;

	if (!cfg || !(cfg->path = strdup(label))) {
		free(cfg);
		return bs_error(-ENOMEM, "%s: out of memory", label);
	}
	err = parse_text(&p, text, len);
	if (err) {
		bs_config_free(cfg);
		return err;
	}
	*out = cfg;
	return 0;
}

int bs_config_load(const char *path, struct bs_config **out)
{
	size_t len = 0, cap = 0;
	char *text = NULL;
	FILE *f;
	int err;

	f = fopen(path, "r");
	if (!f)
		return bs_error(-errno, "%s: %s", path, strerror(errno));
	for (;;) {
		size_t n;

		if (cap - len < 4096) {
			char *t;

			if (cap >= MAX_CONFIG) {
				fclose(f);
				free(text);
				return bs_error(-EFBIG, "%s: larger than %d MiB: "
						"not a config", path,
						MAX_CONFIG >> 20);
			}
			cap = cap ? cap * 2 : 8192;
			t = realloc(text, cap + 1);
			if (!t) {
				fclose(f);
				free(text);
				return bs_error(-ENOMEM, "%s: out of memory",
						path);
			}
			text = t;
		}
		n = fread(text + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		err = bs_error(-EIO, "%s: read error", path);
		fclose(f);
		free(text);
		return err;
	}
	fclose(f);
	err = parse(path, text ? text : "", len, out);
	free(text);
	return err;
}

int bs_config_load_string(const char *text, const char *label,
			  struct bs_config **out)
{
	return parse(label, text, strlen(text), out);
}

void bs_config_free(struct bs_config *cfg)
{
	unsigned i;

	if (!cfg)
		return;
	for (i = 0; i < cfg->nsections; i++) {
		free(cfg->sections[i].kind);
		free(cfg->sections[i].name);
		bs_opts_free(cfg->sections[i].opts);
	}
	free(cfg->sections);
	free(cfg->path);
	free(cfg);
}

struct bs_config_section *bs_config_next(struct bs_config *cfg,
					 const char *kind,
					 struct bs_config_section *prev)
{
	unsigned i = prev ? (unsigned)(prev - cfg->sections) + 1 : 0;

	for (; i < cfg->nsections; i++)
		if (!strcmp(cfg->sections[i].kind, kind))
			return &cfg->sections[i];
	return NULL;
}

/* ---- dependency order ---------------------------------------------------- */

static const char *peek(const struct bs_opts *opts, const char *key)
{
	const char *k, *v;
	unsigned i;

	for (i = 0; bs_opts_at(opts, i, &k, &v); i++)
		if (!strcmp(k, key))
			return v;
	return NULL;
}

static struct bs_config_section *find_device(struct bs_config *cfg,
					     const char *name)
{
	struct bs_config_section *s = NULL;

	while ((s = bs_config_next(cfg, "device", s)))
		if (!strcmp(s->name, name))
			return s;
	return NULL;
}

enum { WHITE, GREY, BLACK };

/*
 * Depth first over "devices =": components before their users. With @ctx
 * NULL nothing is created (the check); else each device is created once
 * its components exist.
 */
static int visit(struct bs_config *cfg, struct bs_ctx *ctx,
		 struct bs_ctx *known, struct bs_config_section *s, int *color,
		 char *path, size_t pathlen)
{
	unsigned idx = (unsigned)(s - cfg->sections);
	const char *list;
	char *copy, *tok, *save = NULL;
	size_t plen = strlen(path);
	int err = 0;

	if (color[idx] == BLACK)
		return 0;
	snprintf(path + plen, pathlen - plen, "%s%s", plen ? " -> " : "",
		 s->name);
	if (color[idx] == GREY)
		return bs_error(-ELOOP, "%s:%d: device cycle: %s", cfg->path,
				s->line, path);
	color[idx] = GREY;
	list = peek(s->opts, "devices");
	if (list) {
		copy = strdup(list);
		if (!copy)
			return -ENOMEM;
		for (tok = strtok_r(copy, " \t,", &save); tok && !err;
		     tok = strtok_r(NULL, " \t,", &save)) {
			struct bs_config_section *c = find_device(cfg, tok);
			if (!c) {
				if (!known || !bs_dev_find(known, tok))
					err = bs_error(-ENOENT, "%s: %s: component "
						       "'%s' is not defined",
						       bs_opts_where(s->opts,
								     "devices"),
						       s->name, tok);
				continue;
			}
			err = visit(cfg, ctx, known, c, color, path, pathlen);
		}
		free(copy);
		if (err)
			return err;
	}
	path[plen] = '\0';
	color[idx] = BLACK;
	return ctx ? bs_dev_create(ctx, s->name, NULL, s->opts, NULL) : 0;
}

/* Prefix the section's place to a device's message that lacks one. */
static int at_section(struct bs_config *cfg, struct bs_config_section *s,
		      int err)
{
	char msg[768];

	if (strstr(bs_last_error(), cfg->path))
		return err;
	snprintf(msg, sizeof(msg), "%s", *bs_last_error() ? bs_last_error()
							   : strerror(-err));
	return bs_error(err, "%s:%d: %s", cfg->path, s->line, msg);
}

/* What can be known of one [device] without opening anything. */
static int check_device(struct bs_config *cfg, struct bs_config_section *s)
{
	const char *tname = peek(s->opts, "type");
	const struct bs_dev_type *t;
	const char *w = bs_opts_where(s->opts, "type");

	if (!tname)
		return bs_error(-EINVAL, "%s:%d: %s: no 'type' given",
				cfg->path, s->line, s->name);
	t = bs_dev_type_find(tname);
	if (!t)
		return bs_error(-EINVAL, "%s: %s: unknown device type '%s'", w,
				s->name, tname);
	if (t->options) {
		const char *const core[] = { "type", "readonly",
					     "write_zeroes_unmap", "claim",
					     t->stacked ? "devices" : NULL,
					     NULL };

		bs_opts_set_label(s->opts, s->name);
		return bs_opts_check_known(s->opts, core, t->options);
	}
	return 0;
}

static int walk(struct bs_config *cfg, struct bs_ctx *ctx,
		struct bs_ctx *known)
{
	struct bs_config_section *s = NULL;
	int *color = calloc(cfg->nsections + 1, sizeof(*color));
	char path[1024];
	int err = 0;

	if (!color)
		return -ENOMEM;
	while (!err && (s = bs_config_next(cfg, "device", s))) {
		path[0] = '\0';
		err = visit(cfg, ctx, known, s, color, path, sizeof(path));
		if (err)
			err = at_section(cfg, s, err);
	}
	free(color);
	return err;
}

/* Does [device] @s list @name in "devices ="? */
static bool lists(const struct bs_config_section *s, const char *name)
{
	const char *p = peek(s->opts, "devices");
	size_t n = strlen(name), len;

	while (p && *p) {
		p += strspn(p, " \t,");
		len = strcspn(p, " \t,");
		if (len == n && !strncmp(p, name, n))
			return true;
		p += len;
	}
	return false;
}

static bool claims_shared(const struct bs_config_section *s)
{
	const char *v = peek(s->opts, "claim");

	return v && !strcmp(v, "shared");
}

struct bs_config_section *bs_config_user_of(struct bs_config *cfg,
					    const char *name,
					    const struct bs_config_section *before,
					    bool *shared)
{
	struct bs_config_section *s = NULL;

	while ((s = bs_config_next(cfg, "device", s)) && s != before) {
		if (lists(s, name)) {
			if (shared)
				*shared = claims_shared(s);
			return s;
		}
	}
	return NULL;
}

/*
 * The claims the devices will take (docs/core.md), checked before anything
 * is opened: a component of a stack that claims it exclusively is not the
 * component of a second stack. The earlier section is the holder, as it
 * is created first.
 */
static int check_claims(struct bs_config *cfg)
{
	struct bs_config_section *s = NULL, *u;
	const char *list;
	char *copy, *tok, *save = NULL;
	bool shared;
	int err = 0;

	while (!err && (s = bs_config_next(cfg, "device", s))) {
		list = peek(s->opts, "devices");
		if (!list)
			continue;
		copy = strdup(list);
		if (!copy)
			return -ENOMEM;
		for (tok = strtok_r(copy, " \t,", &save); tok && !err;
		     tok = strtok_r(NULL, " \t,", &save)) {
			u = bs_config_user_of(cfg, tok, s, &shared);
			if (u && !(shared && claims_shared(s)))
				err = bs_error(-EBUSY, "%s: %s: component %s: "
					       "in use by mapper %s/%s",
					       bs_opts_where(s->opts, "devices"),
					       s->name, tok,
					       peek(u->opts, "type") ?
					       peek(u->opts, "type") : "?",
					       u->name);
		}
		free(copy);
	}
	return err;
}

int bs_config_check_devices(struct bs_config *cfg, struct bs_ctx *ctx)
{
	struct bs_config_section *s = NULL;
	int err;

	while ((s = bs_config_next(cfg, "device", s)))
		if ((err = check_device(cfg, s)))
			return err;
	err = walk(cfg, NULL, ctx);
	return err ? err : check_claims(cfg);
}

int bs_config_create_devices(struct bs_config *cfg, struct bs_ctx *ctx)
{
	int err = bs_config_check_devices(cfg, ctx);

	return err ? err : walk(cfg, ctx, ctx);
}
