/* SPDX-License-Identifier: MIT */
/* Helpers shared by the commands of lib/cmd/ (not a public API). */
#ifndef BLKSTACK_CMD_INTERNAL_H
#define BLKSTACK_CMD_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>

/* Exit codes of every command. */
#define CMD_OK 0
#define CMD_FAILED 1
#define CMD_USAGE 2

/* Common man-page sections, pasted into each command's help text. */
#define CMD_HELP_DEV                                                        \
	"DEVICES\n"                                                         \
	"  DEV is the name of a device defined in the config file (-c FILE),\n" \
	"  or a device spec that is opened for this one command:\n"         \
	"    file:PATH[,size=SIZE][,key=value...]   a regular file\n"       \
	"    mem:SIZE[,key=value...]                a thin RAM disk\n"      \
	"  `blkstack --help` lists every type's options.\n\n"
#define CMD_HELP_EXIT                                                       \
	"EXIT STATUS\n"                                                     \
	"  0  success\n"                                                    \
	"  1  the operation failed; one line on stderr says\n"              \
	"     \"blkstack: DEV: OPERATION: error (reason)\"\n"               \
	"  2  usage error (unknown option, bad size, missing DEV)\n\n"

/*
 * Print "blkstack: CMD: message" and "Try 'blkstack help CMD'." to env->err;
 * returns CMD_USAGE.
 */
int cmd_usage(struct bs_cmd_env *env, const char *cmd, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Take @dev exclusively for destructive command @cmd ("zeroout"): holder
 * "command zeroout". On a conflict (an export, the fs layer, a mapper
 * above, another command) prints the failure line naming the holder and
 * returns CMD_FAILED; else 0 with *@out to give back (bs_claim_release).
 * @force (--force): shared write instead, beside exports and other
 * sharers (the user knows the range is free), never under an exclusive
 * holder (a mapper, the fs layer read-write, mkfs).
 */
int cmd_claim_excl(struct bs_cmd_env *env, struct bs_dev *dev,
		   const char *cmd, bool force, struct bs_claim **out);

/* Parse a size argument of option @opt; CMD_USAGE on error, else 0. */
/*
 * A mode letter of fallocate(1) (k/n keep size, z zero range, p punch
 * hole, w write zeroes, c collapse, i insert): adds it to *@mode, counts
 * the exclusive modes in *@modes. False for any other letter.
 */
bool cmd_falloc_letter(int ch, int *mode, int *modes);

int cmd_parse_size(struct bs_cmd_env *env, const char *cmd, const char *opt,
		   const char *arg, uint64_t *out);

/* Usage error for what getopt_long() returned as @c ('?' or ':'). */
int cmd_bad_option(struct bs_cmd_env *env, const char *cmd, char **argv,
		   int c);

/*
 * getopt_long() wrapper state: resets getopt for a fresh argv (the daemon
 * runs many commands in one process) and keeps it quiet (errors go to
 * env->err through cmd_usage()).
 */
void cmd_getopt_reset(void);

/* The man page of @cmd: NAME, SYNOPSIS, then cmd->help. */
void cmd_print_help(FILE *f, const struct bs_cmd *cmd);

/* Progress bar for zeroouts that fall back to writing zero buffers. */
struct cmd_progress {
	struct bs_cmd_env *env;
	const char *label;
	uint64_t start_ns;
	uint64_t last_ns;
	uint64_t fallback_from;	/* bytes done when writing began */
	uint64_t fallback_ns;
	bool fallback;
	bool shown;
};

void cmd_progress_init(struct cmd_progress *p, struct bs_cmd_env *env,
		       const char *label);
/* A bs_zero_progress_fn; @arg is a struct cmd_progress. */
void cmd_progress_cb(void *arg, uint64_t done, uint64_t total, bool fallback);
/* Clear the bar (if one was drawn). */
void cmd_progress_end(struct cmd_progress *p);

#endif
