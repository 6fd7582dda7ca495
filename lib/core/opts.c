/* SPDX-License-Identifier: MIT */
/* Device options: ordered key = value pairs that remember their place. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdio.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

struct opt {
	char *key;
	char *value;
	char *where;
	bool used;
};

struct bs_opts {
	struct opt *v;
	unsigned n, cap;
	char label[BS_NAME_MAX + 16];
};

int bs_opts_new(struct bs_opts **out)
{
	struct bs_opts *o = calloc(1, sizeof(*o));

	if (!o)
		return -ENOMEM;
	*out = o;
	return 0;
}

void bs_opts_free(struct bs_opts *o)
{
	unsigned i;

	if (!o)
		return;
	for (i = 0; i < o->n; i++) {
		free(o->v[i].key);
		free(o->v[i].value);
		free(o->v[i].where);
	}
	free(o->v);
	free(o);
}

static struct opt *find(const struct bs_opts *o, const char *key)
{
	unsigned i;

	for (i = 0; i < o->n; i++)
		if (!strcmp(o->v[i].key, key))
			return &o->v[i];
	return NULL;
}

int bs_opts_set(struct bs_opts *o, const char *key, const char *value,
		const char *where)
{
	struct opt *p = find(o, key);
	char *k, *v, *w = NULL;

	v = strdup(value ? value : "");
	if (where)
		w = strdup(where);
	if (!v || (where && !w))
		goto nomem;
	if (p) {
		free(p->value);
		free(p->where);
		p->value = v;
		p->where = w;
		p->used = false;
		return 0;
	}
	if (o->n == o->cap) {
		unsigned cap = o->cap ? o->cap * 2 : 8;
		struct opt *nv = realloc(o->v, cap * sizeof(*nv));
		if (!nv)
			goto nomem;
		o->v = nv;
		o->cap = cap;
	}
	k = strdup(key);
	if (!k)
		goto nomem;
	o->v[o->n++] = (struct opt){ .key = k, .value = v, .where = w };
	return 0;
nomem:
	free(v);
	free(w);
	return -ENOMEM;
}

const char *bs_opts_get(struct bs_opts *o, const char *key)
{
	struct opt *p = find(o, key);

	if (!p)
		return NULL;
	p->used = true;
	return p->value;
}

const char *bs_opts_where(const struct bs_opts *o, const char *key)
{
	struct opt *p = find(o, key);

	return p && p->where ? p->where : "";
}

int bs_opts_take_rest(struct bs_opts *o, struct bs_opts **out)
{
	struct bs_opts *c;
	unsigned i;
	int err;

	err = bs_opts_new(&c);
	if (err)
		return err;
	memcpy(c->label, o->label, sizeof(c->label));
	for (i = 0; i < o->n; i++) {
		if (o->v[i].used)
			continue;
		err = bs_opts_set(c, o->v[i].key, o->v[i].value, o->v[i].where);
		if (err) {
			bs_opts_free(c);
			return err;
		}
		o->v[i].used = true;
	}
	*out = c;
	return 0;
}

void bs_opts_set_label(struct bs_opts *o, const char *label)
{
	snprintf(o->label, sizeof(o->label), "%s", label);
}

static int bad(const struct bs_opts *o, const char *key, const char *value,
	       const char *why)
{
	const char *w = bs_opts_where(o, key);

	return bs_error(-EINVAL, "%s%s%s%s%s = '%s': %s", w, *w ? ": " : "",
			o->label, *o->label ? ": " : "", key, value, why);
}

int bs_opts_get_size(struct bs_opts *o, const char *key, uint64_t *out)
{
	const char *v = bs_opts_get(o, key);
	int err;

	if (!v)
		return 1;
	err = bs_parse_size(v, out);
	if (err)
		return bad(o, key, v, bs_size_strerror(err));
	return 0;
}

int bs_opts_get_u32(struct bs_opts *o, const char *key, uint32_t *out)
{
	const char *v = bs_opts_get(o, key);
	uint64_t x;

	if (!v)
		return 1;
	if (bs_parse_size(v, &x) || x > UINT32_MAX)
		return bad(o, key, v, "not a number below 2^32");
	*out = (uint32_t)x;
	return 0;
}

int bs_opts_get_bool(struct bs_opts *o, const char *key, bool *out)
{
	const char *v = bs_opts_get(o, key);

	if (!v)
		return 1;
	if (!strcmp(v, "1") || !strcasecmp(v, "yes") || !strcasecmp(v, "true") ||
	    !strcasecmp(v, "on"))
		*out = true;
	else if (!strcmp(v, "0") || !strcasecmp(v, "no") ||
		 !strcasecmp(v, "false") || !strcasecmp(v, "off"))
		*out = false;
	else
		return bad(o, key, v, "expected 0 or 1");
	return 0;
}

int bs_opts_get_enum(struct bs_opts *o, const char *key,
		     const char *const *choices, int *out)
{
	const char *v = bs_opts_get(o, key);
	char list[256] = "expected one of:";
	int i;

	if (!v)
		return 1;
	for (i = 0; choices[i]; i++) {
		if (!strcmp(v, choices[i])) {
			*out = i;
			return 0;
		}
		strncat(list, " ", sizeof(list) - strlen(list) - 1);
		strncat(list, choices[i], sizeof(list) - strlen(list) - 1);
	}
	return bad(o, key, v, list);
}

int bs_opts_check_unused(const struct bs_opts *o)
{
	unsigned i;

	for (i = 0; i < o->n; i++) {
		const struct opt *p = &o->v[i];
		if (!p->used)
			return bs_error(-EINVAL, "%s%s%s%sunknown key '%s'",
					p->where ? p->where : "",
					p->where ? ": " : "", o->label,
					*o->label ? ": " : "", p->key);
	}
	return 0;
}

/*
 * Does help line @l name @key? "key=" at its start; a segment of one
 * capital letter ("ana_state.N.G=") stands for a number there (one or
 * more digits in @key).
 */
static bool help_names(const char *l, const char *key)
{
	char prev = 0;

	while (*l && *l != '=' && *l != '\n') {
		if (l[0] >= 'A' && l[0] <= 'Z' && prev == '.' &&
		    (l[1] == '.' || l[1] == '=')) {
			if (*key < '0' || *key > '9')
				return false;
			while (*key >= '0' && *key <= '9')
				key++;
			prev = *l++;
			continue;
		}
		prev = *l;
		if (*l++ != *key++)
			return false;
	}
	return *l == '=' && !*key;
}

static bool in_help(const char *help, const char *key)
{
	const char *l;

	for (l = help; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (help_names(l, key))
			return true;
	return false;
}

int bs_opts_check_known(const struct bs_opts *o, const char *const *known,
			const char *help)
{
	unsigned i, j;

	for (i = 0; i < o->n; i++) {
		const struct opt *p = &o->v[i];
		bool ok = in_help(help, p->key);

		for (j = 0; !ok && known && known[j]; j++) {
			size_t n = strlen(known[j]);

			/* "unit.*": every key starting with "unit." */
			if (n && known[j][n - 1] == '*')
				ok = !strncmp(known[j], p->key, n - 1) &&
				     p->key[n - 1];
			else
				ok = !strcmp(known[j], p->key);
		}
		if (!ok)
			return bs_error(-EINVAL, "%s%s%s%sunknown key '%s'",
					p->where ? p->where : "",
					p->where ? ": " : "", o->label,
					*o->label ? ": " : "", p->key);
	}
	return 0;
}

bool bs_opts_at(const struct bs_opts *o, unsigned i, const char **key,
		const char **value)
{
	if (i >= o->n)
		return false;
	*key = o->v[i].key;
	*value = o->v[i].value;
	return true;
}

int bs_opts_parse_spec(const char *spec, char **typep, struct bs_opts **out)
{
	const char *colon = strchr(spec, ':');
	struct bs_opts *o = NULL;
	char *type = NULL, *rest = NULL, *tok, *save = NULL;
	bool first = true;
	int err;

	if (!colon || colon == spec)
		return bs_error(-EINVAL,
				"%s: not a device spec (file:PATH[,size=SIZE] "
				"or mem:SIZE)", spec);
	type = strndup(spec, colon - spec);
	rest = strdup(colon + 1);
	err = bs_opts_new(&o);
	if (!type || !rest || err) {
		err = -ENOMEM;
		goto fail;
	}
	for (tok = strtok_r(rest, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save), first = false) {
		char *eq = strchr(tok, '=');
		if (first && !eq) {
			/* the positional argument */
			const struct bs_dev_type *t = bs_dev_type_find(type);
			const char *key = t && t->spec_key ? t->spec_key
							   : "path";
			err = bs_opts_set(o, key, tok, "spec");
		} else if (!eq || eq == tok) {
			err = bs_error(-EINVAL, "%s: '%s' is not key=value",
				       spec, tok);
		} else {
			*eq = '\0';
			err = bs_opts_set(o, tok, eq + 1, "spec");
		}
		if (err)
			goto fail;
	}
	free(rest);
	*typep = type;
	*out = o;
	return 0;
fail:
	free(type);
	free(rest);
	bs_opts_free(o);
	return err;
}
