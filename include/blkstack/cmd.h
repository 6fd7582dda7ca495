/* SPDX-License-Identifier: MIT */
/*
 * Commands of the `blkstack` tool. Each command is one table entry
 * registered by name (BS_CMD); the same code runs in the CLI against a
 * context it built from specs / a config file, and inside blkstackd against
 * the daemon's live devices when the CLI is given `-s SOCKET`. So commands
 * write only to env->out / env->err, never to stdout/stderr directly, and
 * never exit.
 */
#ifndef BLKSTACK_CMD_H
#define BLKSTACK_CMD_H

#include <stdbool.h>
#include <stdio.h>

struct bs_ctx;
struct bs_dev;
struct bs_config;
struct bs_exports;

struct bs_cmd_env {
	struct bs_ctx *ctx;	/* devices of the config / the daemon */
	FILE *out;		/* results */
	FILE *err;		/* one-line errors, progress */
	bool tty;		/* env->err is a terminal: progress bars ok */
	bool in_daemon;		/* running inside blkstackd */
	/* blkstackd's exports (NULL in the CLI); read on the loop's thread
	 * only, so by commands that are not threaded */
	struct bs_exports *exports;
};

struct bs_cmd {
	const char *name;	/* "info" */
	const char *usage;	/* "info [--json] DEV" */
	const char *summary;	/* one line */
	const char *help;	/* full text for `blkstack help CMD` */
	/* argv[0] is the command name; returns 0 or a process exit code */
	int (*run)(struct bs_cmd_env *env, int argc, char **argv);
	/*
	 * The command may run on a thread of its own in blkstackd (it does
	 * I/O that can take long): it reaches devices only through the sync
	 * wrappers (bs_io_sync(), bs_zeroout_sync(), bs_fallocate_sync(), the
	 * fs layer), reads nothing of them but their fixed facts (name, size,
	 * block sizes, read-only) and capabilities, and changes no device
	 * state otherwise. Without it the command runs on the loop's thread
	 * and must be quick (no I/O waits). See docs/daemon.md "Threads".
	 */
	bool threaded;
};

void bs_cmd_register(const struct bs_cmd *cmd);
const struct bs_cmd *bs_cmd_find(const char *name);
const struct bs_cmd *bs_cmd_next(const struct bs_cmd *prev);

#define BS_CMD(var)                                                       \
	__attribute__((constructor)) static void bs_cmd_register_##var(void) \
	{                                                                 \
		bs_cmd_register(&(var));                                  \
	}

/*
 * Resolve a DEV argument: the name of a device in env->ctx, or a spec
 * ("file:PATH[,size=SIZE]", "mem:SIZE") that is opened into env->ctx under
 * a derived name. Returns 0 or -errno with bs_error() set.
 *
 * bs_cmd_get_dev() is for commands that do I/O: the device must be live
 * (the CLI waits up to BS_CMD_OPEN_WAIT_MS for one still opening; in the
 * daemon an opening or failed device is refused with its state and
 * reason). bs_cmd_find_dev() takes a device in any state (info, attr).
 */
#define BS_CMD_OPEN_WAIT_MS 60000u
int bs_cmd_get_dev(struct bs_cmd_env *env, const char *arg,
		   struct bs_dev **out);
int bs_cmd_find_dev(struct bs_cmd_env *env, const char *arg,
		    struct bs_dev **out);

/*
 * Print "blkstack: DEV: OPERATION: strerror (reason)" to env->err and
 * return 1 (the exit code). @dev may be NULL. The reason is bs_last_error()
 * with the "DEV: " prefix removed when it repeats.
 */
int bs_cmd_fail(struct bs_cmd_env *env, const char *dev, const char *op,
		int err);

/*
 * Print a type's option lines ("key=VALUE  text", one per line, as in
 * bs_dev_type.options and bs_export_type.options) indented under it:
 * `blkstack help` and `blkstackd --help`.
 */
void bs_cmd_print_options(FILE *f, const char *options);

/* Run argv (argv[0] = command name) with @env; unknown command -> 2. */
int bs_cmd_run(struct bs_cmd_env *env, int argc, char **argv);

#endif
