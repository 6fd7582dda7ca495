/* SPDX-License-Identifier: MIT */
/*
 * Options of a device (or export): an ordered list of key = value pairs,
 * each remembering where it came from ("conf.ini:12" or "spec") and whether
 * anything consumed it, so that unknown keys are reported with their place.
 */
#ifndef BLKSTACK_OPTS_H
#define BLKSTACK_OPTS_H

#include <stdbool.h>
#include <stdint.h>

struct bs_opts;

int bs_opts_new(struct bs_opts **out);
void bs_opts_free(struct bs_opts *opts);

/* Add (or replace) @key; @where is copied, may be NULL. */
int bs_opts_set(struct bs_opts *opts, const char *key, const char *value,
		const char *where);

/* Value of @key or NULL; marks it consumed. */
const char *bs_opts_get(struct bs_opts *opts, const char *key);
/* Where @key came from ("file:line"), or "" when unknown. */
const char *bs_opts_where(const struct bs_opts *opts, const char *key);
/* The separator after a place from bs_opts_where(): ": ", or "" when the
 * place is unknown, so "%s%s..." of (where, bs_sep(where)) reads
 * "file:line: ..." or just "...". */
static inline const char *bs_sep(const char *where)
{
	return *where ? ": " : "";
}
/*
 * Move the keys nothing consumed yet into a new set (places and label
 * kept), marking them consumed here: for an open that happens later.
 */
int bs_opts_take_rest(struct bs_opts *opts, struct bs_opts **out);
/* Label used in messages about these options, e.g. the device name. */
void bs_opts_set_label(struct bs_opts *opts, const char *label);

/*
 * Typed getters: 0 with *out set, 1 when the key is absent (*out left as
 * the caller's default), or -EINVAL with bs_error() naming key, place and
 * reason.
 */
int bs_opts_get_size(struct bs_opts *opts, const char *key, uint64_t *out);
int bs_opts_get_u32(struct bs_opts *opts, const char *key, uint32_t *out);
int bs_opts_get_bool(struct bs_opts *opts, const char *key, bool *out);
/* @choices: NULL-terminated; *out = index of the match. */
int bs_opts_get_enum(struct bs_opts *opts, const char *key,
		     const char *const *choices, int *out);

/* -EINVAL with "WHERE: LABEL: unknown key 'k'" if a key was not consumed. */
int bs_opts_check_unused(const struct bs_opts *opts);

/*
 * Before anything reads them: -EINVAL "WHERE: LABEL: unknown key 'k'" for
 * the first key (in order) that is neither in @known (NULL-terminated, may
 * be NULL) nor named at the start of a line of @help, a type's option help
 * ("key=VALUE  text" lines; a segment of one capital letter there,
 * as in "ana_state.N.G=STATE", takes any number). A @known entry ending in '*' ("unit.*") takes
 * every longer key starting with what precedes the '*'. So a misspelled
 * key is named before a missing required one, and before anything is
 * opened or created.
 */
int bs_opts_check_known(const struct bs_opts *opts, const char *const *known,
			const char *help);

/* Iterate: index from 0; returns false past the end. */
bool bs_opts_at(const struct bs_opts *opts, unsigned i, const char **key,
		const char **value);

/*
 * Parse a device spec "TYPE:ARG[,key=value...]". The ARG is stored as
 * "path" for file and hostbdev, "size" for mem; other types take only
 * key=value pairs ("striped:devices=a b,chunk=64K").
 */
int bs_opts_parse_spec(const char *spec, char **type, struct bs_opts **out);

#endif
