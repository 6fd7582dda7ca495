/* SPDX-License-Identifier: MIT */
/*
 * The INI configuration shared by the CLI and the daemon:
 *
 *   [device NAME]    type = file|mem|striped|...  plus the type's options
 *   [export NAME]    (daemon) type = nbd, device = DEV, ...
 *   [daemon]         (daemon) state_dir, control
 *
 * Devices are created in dependency order (components first); cycles,
 * unknown components and unknown keys are errors naming file and line.
 */
#ifndef BLKSTACK_CONFIG_H
#define BLKSTACK_CONFIG_H

#include <stdbool.h>

struct bs_ctx;
struct bs_opts;

struct bs_config_section {
	char *kind;		/* "device", "export", "daemon" */
	char *name;		/* "" for [daemon] */
	int line;		/* line of the [header] */
	struct bs_opts *opts;
};

struct bs_config {
	char *path;
	struct bs_config_section *sections;
	unsigned nsections;
};

/* Parse @path; -errno with bs_error() "PATH:LINE: reason". */
int bs_config_load(const char *path, struct bs_config **out);
/* Parse from a string (tests, embedded defaults); @label names it. */
int bs_config_load_string(const char *text, const char *label,
			  struct bs_config **out);
void bs_config_free(struct bs_config *cfg);

/* Sections of one kind, in file order: pass NULL first. */
struct bs_config_section *bs_config_next(struct bs_config *cfg,
					 const char *kind,
					 struct bs_config_section *prev);

/*
 * Check every [device] without opening or creating anything: a known type,
 * no unknown key (from the type's option help), components defined (in
 * @cfg, or existing in @ctx, which may be NULL), no cycle. The first
 * problem, in file order, is -errno with "FILE:LINE: ..." in bs_error().
 */
int bs_config_check_devices(struct bs_config *cfg, struct bs_ctx *ctx);

/*
 * The first [device] of @cfg, in file order and before @before (NULL: all),
 * whose "devices =" lists @name: the mapper that will claim it (*@shared:
 * with claim = shared). NULL when none does.
 */
struct bs_config_section *bs_config_user_of(struct bs_config *cfg,
					    const char *name,
					    const struct bs_config_section *before,
					    bool *shared);

/*
 * Create every [device] in dependency order, after bs_config_check_devices()
 * passed for all of them (so a mistake in a later section creates
 * nothing). Stops at the first error.
 */
int bs_config_create_devices(struct bs_config *cfg, struct bs_ctx *ctx);

#endif
