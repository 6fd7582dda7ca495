/* SPDX-License-Identifier: MIT */
/* The INI configuration (libinih) and device creation in dependency order. */
#include <errno.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/config.h>
#include <blkstack/opts.h>

struct parse {
	struct bs_config *cfg;
	const char *label;
	int line;		/* lines read so far */
	char cur[256];		/* current section header */
	bool header_seen;	/* a [header] line was read since the last key */
	int header_line;	/* line of the last [header] */
	int err;
	char msg[512];
	/* string reader state */
	const char *str;
	FILE *f;
};

static char *reader(char *buf, int num, void *stream)
{
	struct parse *p = stream;

	if (p->f) {
		if (!fgets(buf, num, p->f))
			return NULL;
	} else {
		const char *nl;
		size_t n;

		if (!*p->str)
			return NULL;
		nl = strchr(p->str, '\n');
		n = nl ? (size_t)(nl - p->str + 1) : strlen(p->str);
		if (n > (size_t)num - 1)
			n = (size_t)num - 1;
		memcpy(buf, p->str, n);
		buf[n] = '\0';
		p->str += n;
	}
	p->line++;
	{
		const char *c = buf;
		while (*c == ' ' || *c == '\t')
			c++;
		if (*c == '[') {
			p->header_seen = true;
			p->header_line = p->line;
		}
	}
	return buf;
}

static int fail(struct parse *p, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct parse *p, int err, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(p->msg, sizeof(p->msg), "%s:%d: ", p->label, p->line);
	va_start(ap, fmt);
	vsnprintf(p->msg + n, sizeof(p->msg) - (size_t)n, fmt, ap);
	va_end(ap);
	p->err = err;
	return 0; /* stop inih */
}

static struct bs_config_section *new_section(struct parse *p,
					     const char *header)
{
	struct bs_config *cfg = p->cfg;
	struct bs_config_section *s, *v;
	const char *sp = strchr(header, ' ');
	char kind[64];
	const char *name;
	unsigned i;

	if (sp) {
		snprintf(kind, sizeof(kind), "%.*s", (int)(sp - header), header);
		name = sp + 1;
		while (*name == ' ')
			name++;
	} else {
		snprintf(kind, sizeof(kind), "%s", header);
		name = "";
	}
	if (strcmp(kind, "device") && strcmp(kind, "export") &&
	    strcmp(kind, "daemon")) {
		fail(p, -EINVAL, "unknown section [%s] (expected [device NAME], "
		     "[export NAME] or [daemon])", header);
		return NULL;
	}
	if (!strcmp(kind, "daemon") ? *name != '\0' : *name == '\0') {
		fail(p, -EINVAL, "section [%s]: %s", header,
		     *name ? "[daemon] takes no name" : "a name is needed");
		return NULL;
	}
	for (i = 0; i < cfg->nsections; i++) {
		if (!strcmp(cfg->sections[i].kind, kind) &&
		    !strcmp(cfg->sections[i].name, name)) {
			fail(p, -EINVAL, "[%s] defined twice (first at line %d)",
			     header, cfg->sections[i].line);
			return NULL;
		}
	}
	v = realloc(cfg->sections, (cfg->nsections + 1) * sizeof(*v));
	if (!v) {
		fail(p, -ENOMEM, "out of memory");
		return NULL;
	}
	cfg->sections = v;
	s = &v[cfg->nsections];
	memset(s, 0, sizeof(*s));
	s->kind = strdup(kind);
	s->name = strdup(name);
	s->line = p->header_line ? p->header_line : p->line;
	if (!s->kind || !s->name || bs_opts_new(&s->opts)) {
		free(s->kind);
		free(s->name);
		fail(p, -ENOMEM, "out of memory");
		return NULL;
	}
	bs_opts_set_label(s->opts, *name ? name : kind);
	cfg->nsections++;
	return s;
}

static int handler(void *user, const char *section, const char *key,
		   const char *value)
{
	struct parse *p = user;
	struct bs_config *cfg = p->cfg;
	struct bs_config_section *s;
	char where[512];

	if (p->err)
		return 0;
	if (!*section)
		return fail(p, -EINVAL, "'%s' is outside any section", key);
	if (p->header_seen || strcmp(section, p->cur) || !cfg->nsections) {
		int key_line = p->line;

		p->header_seen = false;
		snprintf(p->cur, sizeof(p->cur), "%s", section);
		/* errors about the section name point at its [header] */
		if (p->header_line)
			p->line = p->header_line;
		if (!new_section(p, section))
			return 0;
		p->line = key_line;
	}
	s = &cfg->sections[cfg->nsections - 1];
	/* lookups mark keys used; peek through the iterator instead */
	{
		const char *k, *v;
		unsigned i;
		for (i = 0; bs_opts_at(s->opts, i, &k, &v); i++)
			if (!strcmp(k, key))
				return fail(p, -EINVAL, "[%s]: '%s' given twice",
					    section, key);
	}
	snprintf(where, sizeof(where), "%s:%d", p->label, p->line);
	if (bs_opts_set(s->opts, key, value, where))
		return fail(p, -ENOMEM, "out of memory");
	return 1;
}

static int parse(struct parse *p, struct bs_config **out)
{
	struct bs_config *cfg = calloc(1, sizeof(*cfg));
	int rc;

	if (!cfg)
		return -ENOMEM;
	cfg->path = strdup(p->label);
	p->cfg = cfg;
	rc = ini_parse_stream(reader, p, handler, p);
	if (p->err) {
		bs_error(p->err, "%s", p->msg);
		bs_config_free(cfg);
		return p->err;
	}
	if (rc) {
		bs_error(-EINVAL, "%s:%d: syntax error (expected [section] or "
			 "key = value)", p->label, rc > 0 ? rc : p->line);
		bs_config_free(cfg);
		return -EINVAL;
	}
	*out = cfg;
	return 0;
}

int bs_config_load(const char *path, struct bs_config **out)
{
	struct parse p = { .label = path };
	int err;

	p.f = fopen(path, "r");
	if (!p.f)
		return bs_error(-errno, "%s: %s", path, strerror(errno));
	err = parse(&p, out);
	fclose(p.f);
	return err;
}

int bs_config_load_string(const char *text, const char *label,
			  struct bs_config **out)
{
	struct parse p = { .label = label, .str = text };

	return parse(&p, out);
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

static int visit(struct bs_config *cfg, struct bs_ctx *ctx,
		 struct bs_config_section *s, int *color, char *path,
		 size_t pathlen)
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
				if (!bs_dev_find(ctx, tok))
					err = bs_error(-ENOENT, "%s: %s: component "
						       "'%s' is not defined",
						       bs_opts_where(s->opts,
								     "devices"),
						       s->name, tok);
				continue;
			}
			err = visit(cfg, ctx, c, color, path, pathlen);
		}
		free(copy);
		if (err)
			return err;
	}
	path[plen] = '\0';
	color[idx] = BLACK;
	return bs_dev_create(ctx, s->name, NULL, s->opts, NULL);
}

int bs_config_create_devices(struct bs_config *cfg, struct bs_ctx *ctx)
{
	struct bs_config_section *s = NULL;
	int *color = calloc(cfg->nsections + 1, sizeof(*color));
	char path[1024];
	int err = 0;

	if (!color)
		return -ENOMEM;
	while (!err && (s = bs_config_next(cfg, "device", s))) {
		path[0] = '\0';
		err = visit(cfg, ctx, s, color, path, sizeof(path));
		if (err && !strstr(bs_last_error(), cfg->path)) {
			/* prefix the section's place to the device's message */
			char msg[512];
			snprintf(msg, sizeof(msg), "%s", bs_last_error());
			bs_error(err, "%s:%d: %s", cfg->path, s->line, msg);
		}
	}
	free(color);
	return err;
}
