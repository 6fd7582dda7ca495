/* SPDX-License-Identifier: MIT */
/*
 * blkstack: the command line tool. Global options, then one command from
 * the table of lib/cmd/, run against devices of a config file or specs
 * given on the command line (or, with -s, inside a running blkstackd).
 *
 * Exit codes: 0 ok, 1 the operation failed, 2 usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/config.h>

#include "remote.h"

#ifndef BLKSTACK_VERSION
#define BLKSTACK_VERSION "0.1.0"
#endif

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, "blkstack: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nTry 'blkstack --help'.\n");
	return 2;
}

static int run_help(FILE *out)
{
	struct bs_cmd_env env = { .out = out, .err = stderr };
	char *argv[] = { (char *)"help", NULL };

	return bs_cmd_run(&env, 1, argv);
}

/* Interrupted on a terminal: do not leave half a progress bar behind. */
static void on_interrupt(int sig)
{
	static const char clear[] = "\r\033[K";
	ssize_t n = write(STDERR_FILENO, clear, sizeof(clear) - 1);

	(void)n;
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Make what the command wrote durable before the process goes away. */
static int flush_all(struct bs_cmd_env *env)
{
	struct bs_dev *d;
	int rc = 0, err;

	for (d = bs_dev_next(env->ctx, NULL); d; d = bs_dev_next(env->ctx, d)) {
		/* nothing was written to one that never opened */
		if (d->readonly || d->state != BS_DEV_LIVE)
			continue;
		bs_error_clear();
		err = bs_flush_sync(d);
		if (err)
			rc = bs_cmd_fail(env, d->name, "flush", err);
	}
	return rc;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *sock = NULL;
	struct bs_config *cfg = NULL;
	struct bs_cmd_env env = { .out = stdout, .err = stderr };
	int c, rc, err;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:c:s:hV", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			config = optarg;
			break;
		case 's':
			sock = optarg;
			break;
		case 'h':
			return run_help(stdout);
		case 'V':
			printf("blkstack %s\n", BLKSTACK_VERSION);
			return 0;
		case ':':
			return usage_error("option '%s' needs a value",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option '%s'",
					   argv[optind - 1]);
		}
	}
	if (optind >= argc)
		return usage_error("%s", "no command given");
	if (config && sock)
		return usage_error("%s", "-c and -s exclude each other (the "
				   "daemon has its own config)");
	if (sock)
		return run_remote(sock, argc - optind, argv + optind);

	err = bs_ctx_new(&env.ctx);
	if (err) {
		fprintf(stderr, "blkstack: cannot start: %s\n", strerror(-err));
		return 1;
	}
	if (config) {
		err = bs_config_load(config, &cfg);
		if (!err)
			err = bs_config_create_devices(cfg, env.ctx);
		if (err) {
			const char *msg = bs_last_error();
			if (*msg)
				fprintf(stderr, "blkstack: %.*s\n",
					(int)strcspn(msg, "\n"), msg);
			else
				fprintf(stderr, "blkstack: %s: %s\n", config,
					strerror(-err));
			bs_ctx_free(env.ctx);
			bs_config_free(cfg);
			return 1;
		}
	}
	env.tty = isatty(STDERR_FILENO);
	if (env.tty) {
		signal(SIGINT, on_interrupt);
		signal(SIGTERM, on_interrupt);
	}
	rc = bs_cmd_run(&env, argc - optind, argv + optind);
	if (rc != 2) {
		int frc = flush_all(&env);
		if (!rc)
			rc = frc;
	}
	bs_ctx_free(env.ctx);
	bs_config_free(cfg);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "blkstack: writing output: %s\n",
			strerror(errno));
		return 1;
	}
	return rc;
}
