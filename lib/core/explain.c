/* SPDX-License-Identifier: MIT */
/*
 * Explain capabilities: which rule gave or took write_zeroes_unmap (or
 * discard) on each device of a stack, and the tree views of `blkstack
 * explain` and `blkstack ls`.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/explain.h>

#include "core/internal.h"

int bs_cap_parse(const char *s, enum bs_cap *out)
{
	if (!strcmp(s, "write-zeroes") || !strcmp(s, "write_zeroes") ||
	    !strcmp(s, "write_zeroes_unmap") || !strcmp(s, "wz")) {
		*out = BS_CAP_WRITE_ZEROES_UNMAP;
		return 0;
	}
	if (!strcmp(s, "discard")) {
		*out = BS_CAP_DISCARD;
		return 0;
	}
	return bs_error(-EINVAL, "'%s': not a capability (write-zeroes, "
			"discard)", s);
}

const char *bs_cap_name(enum bs_cap cap)
{
	return cap == BS_CAP_DISCARD ? "discard" : "write-zeroes unmap";
}

static bool lim_has(const struct bs_limits *l, enum bs_cap cap)
{
	if (cap == BS_CAP_DISCARD)
		return l->max_discard_sectors != 0;
	return bs_limits_write_zeroes_unmap(l) && l->max_write_zeroes_sectors;
}

const char *bs_cap_attr(enum bs_cap cap)
{
	return cap == BS_CAP_DISCARD ? "discard" : "write_zeroes_unmap";
}

bool bs_dev_has_cap(const struct bs_dev *dev, enum bs_cap cap)
{
	return lim_has(&dev->limits, cap);
}

/* Append ", name" of each used component matching @pick to @buf. */
static size_t list_comps(const struct bs_dev *dev, const bool *use,
			 bool (*pick)(const struct bs_dev *c, enum bs_cap cap),
			 enum bs_cap cap, char *buf, size_t len, unsigned *n)
{
	size_t o = 0;
	unsigned i;

	*n = 0;
	if (len)
		buf[0] = 0;
	for (i = 0; i < dev->ncomponents; i++) {
		const struct bs_dev *c = dev->components[i];
		unsigned j;
		bool seen = false;

		if ((use && !use[i]) || !pick(c, cap))
			continue;
		for (j = 0; j < i; j++) /* a component listed twice (linear) */
			if (dev->components[j] == c && (!use || use[j]))
				seen = true;
		if (seen)
			continue;
		if (o < len)
			o += (size_t)snprintf(buf + o, len - o, "%s%s",
					      *n ? ", " : "", c->name);
		(*n)++;
	}
	return o;
}

static bool lacks_wz_cmd(const struct bs_dev *c, enum bs_cap cap)
{
	(void)cap;
	return !c->limits.max_write_zeroes_sectors;
}

static bool lacks_cap(const struct bs_dev *c, enum bs_cap cap)
{
	return !lim_has(&c->limits, cap);
}

void bs_explain_stacked(const struct bs_dev *dev, const struct bs_limits *lim,
			const bool *use, enum bs_cap cap, char *buf,
			size_t len)
{
	const char *type = dev->type->name;
	char names[160];
	unsigned n;

	if (cap == BS_CAP_WRITE_ZEROES_UNMAP && !lim->max_write_zeroes_sectors) {
		list_comps(dev, use, lacks_wz_cmd, cap, names, sizeof(names), &n);
		if (n)
			snprintf(buf, len, "%s: no write-zeroes "
				 "(write_zeroes_max_bytes = 0) because %s %s none",
				 type, names, n > 1 ? "have" : "has");
		else
			snprintf(buf, len, "%s: no write-zeroes "
				 "(write_zeroes_max_bytes = 0)", type);
		return;
	}
	list_comps(dev, use, lacks_cap, cap, names, sizeof(names), &n);
	if (lim_has(lim, cap))
		snprintf(buf, len, "%s: every component has it", type);
	else if (n)
		snprintf(buf, len, "%s: cleared because %s lack%s it", type,
			 names, n > 1 ? "" : "s");
	else if (cap == BS_CAP_DISCARD)
		snprintf(buf, len, "%s: the mapper offers no discard", type);
	else
		snprintf(buf, len, "%s: the mapper does not unmap", type);
}

void bs_explain_rule(const struct bs_dev *dev, enum bs_cap cap, char *buf,
		     size_t len)
{
	const struct bs_limits *l = &dev->limits;

	if (cap == BS_CAP_DISCARD) {
		char g[32], m[32];

		if (dev->type->stacked) {
			bs_explain_stacked(dev, l, NULL, cap, buf, len);
			return;
		}
		if (!l->max_discard_sectors)
			snprintf(buf, len, "%s: the driver offers no discard",
				 dev->type->name);
		else
			snprintf(buf, len, "%s: discard up to %s, granularity %s",
				 dev->type->name,
				 bs_fmt_size((uint64_t)l->max_discard_sectors
					     << BS_SECTOR_SHIFT, m, sizeof(m)),
				 bs_fmt_size(l->discard_granularity, g,
					     sizeof(g)));
		return;
	}
	if (l->flags & BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED) {
		snprintf(buf, len, "knob write_zeroes_unmap=0 set by user");
		return;
	}
	if (dev->wz_broken) {
		/* the reason recorded when it broke names the failing call */
		if (strstr(dev->wz_reason, "EOPNOTSUPP"))
			snprintf(buf, len, "%s", dev->wz_reason);
		else
			snprintf(buf, len, "write-zeroes failed with EOPNOTSUPP "
				 "at run time");
		return;
	}
	if (dev->type->stacked) {
		/* the mapper wrote the rule at its last restack (it knows
		 * which components count, e.g. a mirror's live legs) */
		if (dev->wz_reason[0])
			snprintf(buf, len, "%s", dev->wz_reason);
		else
			bs_explain_stacked(dev, l, NULL, cap, buf, len);
		return;
	}
	if (!l->max_write_zeroes_sectors)
		snprintf(buf, len, "no write-zeroes (write_zeroes_max_bytes = 0)"
			 "%s%s", dev->wz_reason[0] ? ": " : "", dev->wz_reason);
	else if (dev->wz_reason[0])
		snprintf(buf, len, "%s", dev->wz_reason);
	else
		snprintf(buf, len, "%s: driver %s the feature", dev->type->name,
			 bs_dev_write_zeroes_unmap(dev) ? "sets" : "does not set");
}

/* Terminal columns of code point @c: 0 combining, 2 East Asian wide. */
static int cp_cols(uint32_t c)
{
	static const uint32_t zero[][2] = {
		{ 0x0300, 0x036f }, { 0x1ab0, 0x1aff }, { 0x1dc0, 0x1dff },
		{ 0x200b, 0x200f }, { 0x20d0, 0x20ff }, { 0xfe00, 0xfe0f },
		{ 0xfe20, 0xfe2f },
	};
	static const uint32_t wide[][2] = {
		{ 0x1100, 0x115f }, { 0x2e80, 0x303e }, { 0x3041, 0x33ff },
		{ 0x3400, 0x4dbf }, { 0x4e00, 0x9fff }, { 0xa000, 0xa4cf },
		{ 0xac00, 0xd7a3 }, { 0xf900, 0xfaff }, { 0xfe30, 0xfe4f },
		{ 0xff00, 0xff60 }, { 0xffe0, 0xffe6 }, { 0x1f300, 0x1f64f },
		{ 0x1f900, 0x1f9ff }, { 0x20000, 0x3fffd },
	};
	size_t i;

	for (i = 0; i < sizeof(zero) / sizeof(zero[0]); i++)
		if (c >= zero[i][0] && c <= zero[i][1])
			return 0;
	for (i = 0; i < sizeof(wide) / sizeof(wide[0]); i++)
		if (c >= wide[i][0] && c <= wide[i][1])
			return 2;
	return 1;
}

/*
 * Display columns of UTF-8 @s (box-drawing characters are three bytes but
 * one column; CJK names two columns a character). Bytes that are not
 * valid UTF-8 count one column each, as terminals show a replacement.
 */
static int utf8_cols(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	int n = 0;

	while (*p) {
		uint32_t c;
		int len, i;

		if (*p < 0x80) {
			n++;
			p++;
			continue;
		}
		len = (*p & 0xe0) == 0xc0 ? 2 : (*p & 0xf0) == 0xe0 ? 3
		      : (*p & 0xf8) == 0xf0 ? 4 : 0;
		c = len == 2 ? *p & 0x1f : len == 3 ? *p & 0x0f : *p & 0x07;
		for (i = 1; i < len && (p[i] & 0xc0) == 0x80; i++)
			c = c << 6 | (p[i] & 0x3f);
		if (!len || i < len) {
			n++;
			p++;
			continue;
		}
		n += cp_cols(c);
		p += len;
	}
	return n;
}

/* prefix of the current line: one "│  " or "   " per level above */
struct tree {
	FILE *out;
	enum bs_cap cap;
	char prefix[4 * 66 * 3];
	bool ls;
	int namew;
};

static void node_line(struct tree *t, struct bs_dev *dev, const char *branch,
		      unsigned depth)
{
	char rule[256], sz[32], wz[32], dz[32], name[1024];

	if (t->ls) {
		snprintf(name, sizeof(name), "%s%s%s", t->prefix, branch,
			 dev->name);
		/* pad by display columns: box-drawing characters are
		 * several bytes but one column */
		if (dev->state != BS_DEV_LIVE) {
			/* no size or limits yet: the state instead */
			fprintf(t->out, "%s%*s  %-8s  %10s  %-8s  %10s  %10s\n",
				name, t->namew - utf8_cols(name), "",
				dev->type->name, bs_dev_state_name(dev->state),
				"-", "-", "-");
			return;
		}
		fprintf(t->out, "%s%*s  %-8s  %10s  %-8s  %10s  %10s\n",
			name, t->namew - utf8_cols(name), "",
			dev->type->name,
			bs_fmt_size(dev->size, sz, sizeof(sz)),
			bs_dev_write_zeroes_unmap(dev) ? "yes" : "no",
			dev->limits.max_write_zeroes_sectors
				? bs_fmt_size((uint64_t)dev->limits
						      .max_write_zeroes_sectors
					      << BS_SECTOR_SHIFT, wz, sizeof(wz))
				: "-",
			dev->limits.max_discard_sectors
				? bs_fmt_size((uint64_t)dev->limits
						      .max_discard_sectors
					      << BS_SECTOR_SHIFT, dz, sizeof(dz))
				: "-");
		return;
	}
	(void)depth;
	bs_explain_rule(dev, t->cap, rule, sizeof(rule));
	fprintf(t->out, "%s%s%s (%s, %s): %s %s: %s\n", t->prefix, branch,
		dev->name, dev->type->name,
		bs_fmt_size(dev->size, sz, sizeof(sz)), bs_cap_attr(t->cap),
		bs_dev_has_cap(dev, t->cap) ? "yes" : "no", rule);
}

static void walk(struct tree *t, struct bs_dev *dev, unsigned depth)
{
	size_t plen = strlen(t->prefix);
	unsigned i;

	if (depth > 64)
		return;
	for (i = 0; i < dev->ncomponents; i++) {
		bool last = i + 1 == dev->ncomponents;

		node_line(t, dev->components[i], last ? "└─ " : "├─ ",
			  depth + 1);
		if (plen + 8 < sizeof(t->prefix)) {
			strcat(t->prefix, last ? "   " : "│  ");
			walk(t, dev->components[i], depth + 1);
			t->prefix[plen] = 0;
		}
	}
}

int bs_explain_print(struct bs_dev *dev, enum bs_cap cap, FILE *out)
{
	struct tree t = { .out = out, .cap = cap };

	node_line(&t, dev, "", 0);
	walk(&t, dev, 0);
	return 0;
}

/* Display width of the NAME column: the longest name plus its indent. */
static int name_width(struct bs_dev *dev, unsigned depth)
{
	int w = utf8_cols(dev->name) + 3 * (int)depth;
	unsigned i;

	if (depth > 64)
		return w;
	for (i = 0; i < dev->ncomponents; i++) {
		int cw = name_width(dev->components[i], depth + 1);
		if (cw > w)
			w = cw;
	}
	return w;
}

int bs_ls_print(struct bs_ctx *ctx, FILE *out)
{
	struct tree t = { .out = out, .ls = true, .namew = 4 };
	struct bs_dev *d;

	for (d = bs_dev_next(ctx, NULL); d; d = bs_dev_next(ctx, d))
		if (!d->nholders && name_width(d, 0) > t.namew)
			t.namew = name_width(d, 0);
	fprintf(out, "%-*s  %-8s  %10s  %-8s  %10s  %10s\n", t.namew, "NAME",
		"TYPE", "SIZE", "WZ-UNMAP", "WZ-MAX", "DISCARD");
	for (d = bs_dev_next(ctx, NULL); d; d = bs_dev_next(ctx, d)) {
		if (d->nholders)
			continue;
		node_line(&t, d, "", 0);
		walk(&t, d, 0);
	}
	return 0;
}
