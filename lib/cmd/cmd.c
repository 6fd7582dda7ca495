/* SPDX-License-Identifier: MIT */
/*
 * The command registry of `blkstack` and what every command shares:
 * resolving DEV arguments, the one-line error format, usage errors, the
 * progress bar. Commands print only to env->out / env->err and never exit,
 * so blkstackd can run them for a client of its control socket.
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/opts.h>

#include "cmd/internal.h"

/* ---- registry ------------------------------------------------------------ */

#define MAX_CMDS 64
static const struct bs_cmd *cmds[MAX_CMDS];
static unsigned ncmds;

void bs_cmd_register(const struct bs_cmd *cmd)
{
	unsigned i, j;

	/* constructors only: single-threaded, before main() */
	if (ncmds >= MAX_CMDS || bs_cmd_find(cmd->name))
		return;
	/* keep the table sorted by name: help lists it in that order */
	for (i = 0; i < ncmds && strcmp(cmds[i]->name, cmd->name) < 0; i++)
		;
	for (j = ncmds; j > i; j--)
		cmds[j] = cmds[j - 1];
	cmds[i] = cmd;
	ncmds++;
}

const struct bs_cmd *bs_cmd_find(const char *name)
{
	unsigned i;

	for (i = 0; i < ncmds; i++)
		if (!strcmp(cmds[i]->name, name))
			return cmds[i];
	return NULL;
}

const struct bs_cmd *bs_cmd_next(const struct bs_cmd *prev)
{
	unsigned i;

	if (!prev)
		return ncmds ? cmds[0] : NULL;
	for (i = 0; i + 1 < ncmds; i++)
		if (cmds[i] == prev)
			return cmds[i + 1];
	return NULL;
}

/* ---- DEV arguments --------------------------------------------------------- */

/* A short device name for a spec: the file's base name, or the type. */
static void derive_name(struct bs_ctx *ctx, const char *type,
			struct bs_opts *opts, char *name, size_t len)
{
	const char *k, *v, *path = NULL, *base;
	char stem[40];
	unsigned i, n;

	for (i = 0; bs_opts_at(opts, i, &k, &v); i++)
		if (!strcmp(k, "path"))
			path = v;
	base = path ? strrchr(path, '/') : NULL;
	base = base ? base + 1 : path;
	if (!base || !*base)
		base = type;
	snprintf(stem, sizeof(stem), "%s", base);
	/* device names have no blanks and none of / , : = */
	for (i = 0; stem[i]; i++)
		if (strchr(" \t/,:=", stem[i]))
			stem[i] = '_';
	snprintf(name, len, "%s", stem);
	for (n = 2; bs_dev_find(ctx, name) && n < 1000; n++)
		snprintf(name, len, "%s-%u", stem, n);
}

/* Skip "WORD: " at the start of @s when WORD is @word. */
static const char *skip_prefix(const char *s, const char *word)
{
	size_t n;

	if (!word || !*word)
		return s;
	n = strlen(word);
	if (!strncmp(s, word, n) && s[n] == ':' && s[n + 1] == ' ')
		return s + n + 2;
	return s;
}

int bs_cmd_get_dev(struct bs_cmd_env *env, const char *arg,
		   struct bs_dev **out)
{
	struct bs_dev *dev;
	int err = bs_cmd_find_dev(env, arg, &dev);

	if (err)
		return err;
	/* the CLI waits for an opening device; the daemon answers now */
	if (env->in_daemon || dev->state != BS_DEV_OPENING)
		err = bs_dev_check_live(dev);
	else
		err = bs_dev_wait_live(dev, BS_CMD_OPEN_WAIT_MS);
	if (err)
		return err;
	*out = dev;
	return 0;
}

int bs_cmd_find_dev(struct bs_cmd_env *env, const char *arg,
		    struct bs_dev **out)
{
	struct bs_opts *opts = NULL;
	struct bs_dev *dev;
	char *type = NULL;
	char name[BS_NAME_MAX];
	int err;

	dev = bs_dev_find(env->ctx, arg);
	if (dev) {
		*out = dev;
		return 0;
	}
	if (!strchr(arg, ':') && env->in_daemon)
		return bs_error(-ENOENT, "%s: no such device in the daemon "
				"(`ls` lists the devices it serves)", arg);
	if (!strchr(arg, ':'))
		return bs_error(-ENOENT, "%s: no such device (give a device "
				"of the config, or a spec file:PATH[,size=SIZE] "
				"or mem:SIZE)", arg);
	if (env->in_daemon)
		return bs_error(-EINVAL, "%s: the daemon serves only its "
				"configured devices; open specs with blkstack "
				"without -s", arg);
	err = bs_opts_parse_spec(arg, &type, &opts);
	if (err)
		return err;
	derive_name(env->ctx, type, opts, name, sizeof(name));
	err = bs_dev_create(env->ctx, name, type, opts, &dev);
	bs_opts_free(opts);
	free(type);
	if (err) {
		/* the line names the spec; the derived name would only confuse */
		const char *msg = skip_prefix(bs_last_error(), "spec");
		char copy[512];

		msg = skip_prefix(msg, name);
		snprintf(copy, sizeof(copy), "%s", msg);
		bs_error(err, "%s", copy);
		return err;
	}
	/*
	 * A spec opened here that connects somewhere (iscsi:URL) is seen
	 * once it opened or failed: "opening" would tell nothing. The state
	 * (and a failure's reason) is the command's to show.
	 */
	if (dev->state == BS_DEV_OPENING)
		(void)bs_dev_wait_live(dev, BS_CMD_OPEN_WAIT_MS);
	*out = dev;
	return 0;
}

int cmd_claim_excl(struct bs_cmd_env *env, struct bs_dev *dev,
		   const char *cmd, bool force, struct bs_claim **out)
{
	char holder[64];
	int err;

	snprintf(holder, sizeof(holder), "command %s", cmd);
	err = bs_dev_claim(dev, force ? BS_CLAIM_WRITE : BS_CLAIM_EXCL, holder,
			   out);
	if (err == -EBUSY && !force) {
		/* only sharers in the way: say how to go beside them */
		char why[256];
		bool shared;

		snprintf(why, sizeof(why), "%s", bs_last_error());
		shared = !bs_dev_claim_check(dev, BS_CLAIM_WRITE);
		bs_error(err, "%s%s", why, shared ? "; --force runs beside it"
						  : "");
	}
	if (err)
		return bs_cmd_fail(env, dev->name, cmd, err);
	return 0;
}

/* ---- errors -------------------------------------------------------------- */

int bs_cmd_fail(struct bs_cmd_env *env, const char *dev, const char *op,
		int err)
{
	const char *reason = bs_last_error();
	const char *msg = strerror(err < 0 ? -err : err);
	char line[1024];
	int n;

	/* "vol0: fallocate: why" -> "why": the line names both already */
	reason = skip_prefix(reason, dev);
	reason = skip_prefix(reason, op);
	n = snprintf(line, sizeof(line), "blkstack: ");
	if (dev && *dev)
		n += snprintf(line + n, sizeof(line) - n, "%s: ", dev);
	if (op && *op)
		n += snprintf(line + n, sizeof(line) - n, "%s: ", op);
	if (*reason && strcmp(reason, msg))
		snprintf(line + n, sizeof(line) - n, "%s (%s)", msg, reason);
	else
		snprintf(line + n, sizeof(line) - n, "%s", msg);
	/* exactly one line, whatever the reason held */
	for (n = 0; line[n]; n++)
		if (line[n] == '\n' || line[n] == '\r')
			line[n] = ' ';
	fprintf(env->err, "%s\n", line);
	fflush(env->err);
	return CMD_FAILED;
}

int cmd_usage(struct bs_cmd_env *env, const char *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(env->err, "blkstack: %s%s", cmd ? cmd : "", cmd ? ": " : "");
	va_start(ap, fmt);
	vfprintf(env->err, fmt, ap);
	va_end(ap);
	if (cmd)
		fprintf(env->err, "\nTry 'blkstack help %s'.\n", cmd);
	else
		fprintf(env->err, "\nTry 'blkstack --help'.\n");
	return CMD_USAGE;
}

int cmd_parse_size(struct bs_cmd_env *env, const char *cmd, const char *opt,
		   const char *arg, uint64_t *out)
{
	int err = bs_parse_size(arg, out);

	/* the same words as a size in a spec or a config (bs_opts_get_size) */
	if (err)
		return cmd_usage(env, cmd, "%s '%s': %s", opt, arg,
				 bs_size_strerror(err));
	return 0;
}

int cmd_bad_option(struct bs_cmd_env *env, const char *cmd, char **argv,
		   int c)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "";

	if (c == ':')
		return cmd_usage(env, cmd, "option '%s' needs a value", arg);
	if (optopt && strncmp(arg, "--", 2))
		return cmd_usage(env, cmd, "unknown option '-%c'", optopt);
	return cmd_usage(env, cmd, "unknown option '%s'", arg);
}

void cmd_getopt_reset(void)
{
	/* 0, not 1: GNU getopt then forgets its state from the last argv */
	optind = 0;
	opterr = 0;
	optopt = 0;
}

void cmd_print_help(FILE *f, const struct bs_cmd *c)
{
	fprintf(f, "NAME\n  blkstack %s - %s\n\nSYNOPSIS\n  blkstack "
		"[-c FILE] %s\n\n%s", c->name, c->summary, c->usage, c->help);
}

/* ---- running ------------------------------------------------------------- */

static bool wants_help(int argc, char **argv)
{
	int i;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			break;
		if (!strcmp(argv[i], "--help"))
			return true;
	}
	return false;
}

int bs_cmd_run(struct bs_cmd_env *env, int argc, char **argv)
{
	const struct bs_cmd *c;
	int rc;

	if (argc < 1 || !argv[0])
		return cmd_usage(env, NULL, "no command given");
	c = bs_cmd_find(argv[0]);
	if (!c)
		return cmd_usage(env, NULL, "'%s' is not a command", argv[0]);
	if (wants_help(argc, argv)) {
		cmd_print_help(env->out, c);
		return CMD_OK;
	}
	bs_error_clear();
	cmd_getopt_reset();
	rc = c->run(env, argc, argv);
	fflush(env->out);
	fflush(env->err);
	return rc;
}

/* ---- progress ------------------------------------------------------------ */

#define PROGRESS_EVERY_NS (100ull * 1000 * 1000)
/* a bar for work that ends sooner would only flicker */
#define PROGRESS_AFTER_NS (300ull * 1000 * 1000)
#define BAR_WIDTH 30

void cmd_progress_init(struct cmd_progress *p, struct bs_cmd_env *env,
		       const char *label)
{
	memset(p, 0, sizeof(*p));
	p->env = env;
	p->label = label;
	p->start_ns = bs_now_ns();
}

void cmd_progress_cb(void *arg, uint64_t done, uint64_t total, bool fallback)
{
	struct cmd_progress *p = arg;
	uint64_t now, ns;
	char bar[BAR_WIDTH + 1], a[32], b[32];
	double pct, rate;
	unsigned i, fill;

	if (!p->env->tty || !total)
		return;
	now = bs_now_ns();
	if (fallback && !p->fallback) {
		/* the rate that matters is the one of the writes */
		p->fallback = true;
		p->fallback_from = done;
		p->fallback_ns = now;
	}
	if (!p->fallback)
		return; /* write-zeroes commands: fast, no bar */
	if (now - p->start_ns < PROGRESS_AFTER_NS ||
	    (p->shown && now - p->last_ns < PROGRESS_EVERY_NS && done < total))
		return;
	p->last_ns = now;
	p->shown = true;
	pct = 100.0 * (double)done / (double)total;
	fill = (unsigned)((double)BAR_WIDTH * (double)done / (double)total);
	for (i = 0; i < BAR_WIDTH; i++)
		bar[i] = i < fill ? '#' : '.';
	bar[BAR_WIDTH] = '\0';
	ns = now - p->fallback_ns;
	rate = ns ? (double)(done - p->fallback_from) * 1e9 / (double)ns /
			    (1024.0 * 1024.0)
		  : 0.0;
	fprintf(p->env->err, "\r%s: writing zeroes [%s] %5.1f%%  %s / %s  "
		"%.0f MiB/s\033[K", p->label, bar, pct,
		bs_fmt_size(done, a, sizeof(a)), bs_fmt_size(total, b, sizeof(b)),
		rate);
	fflush(p->env->err);
}

void cmd_progress_end(struct cmd_progress *p)
{
	if (p->shown) {
		fprintf(p->env->err, "\r\033[K");
		fflush(p->env->err);
		p->shown = false;
	}
}
