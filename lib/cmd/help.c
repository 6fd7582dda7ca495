/* SPDX-License-Identifier: MIT */
/* `blkstack help [CMD]` and the overview of `blkstack --help`. */
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>

#include "cmd/internal.h"

void bs_cmd_print_options(FILE *f, const char *options)
{
	const char *p = options, *nl;

	/* one "key=VALUE  text" per line, indented under the type */
	while (p && *p) {
		nl = strchr(p, '\n');
		fprintf(f, "      %.*s\n", (int)(nl ? nl - p : (long)strlen(p)), p);
		p = nl ? nl + 1 : NULL;
	}
}

static void overview(FILE *f)
{
	const struct bs_dev_type *t;
	const struct bs_cmd *c;
	size_t w = 0;

	for (c = bs_cmd_next(NULL); c; c = bs_cmd_next(c))
		if (strlen(c->name) > w)
			w = strlen(c->name);
	fprintf(f,
		"blkstack - a userspace block storage stack: inspect devices, "
		"zero ranges\n"
		"\n"
		"USAGE\n"
		"  blkstack [-c FILE | -s SOCKET] COMMAND [ARGS...]\n"
		"  blkstack help [COMMAND]\n"
		"  blkstack COMMAND --help\n"
		"\n"
		"GLOBAL OPTIONS\n"
		"  -c FILE     create the devices of the INI config FILE first;\n"
		"              DEV may then be one of their names\n"
		"  -s SOCKET   run the command inside a running blkstackd, on its\n"
		"              devices, through its control socket\n"
		"  -h, --help  show this text\n"
		"  -V, --version  show the version\n"
		"\n"
		"COMMANDS\n");
	for (c = bs_cmd_next(NULL); c; c = bs_cmd_next(c))
		fprintf(f, "  %-*s  %s\n", (int)w, c->name, c->summary);
	fprintf(f,
		"\n"
		"DEVICE SPECS\n"
		"  Wherever a command takes DEV, a spec opens a device for that one\n"
		"  command: TYPE:ARG[,key=value...], where ARG is the size for mem,\n"
		"  zero and error, and the path for the others:\n"
		"    file:PATH[,size=SIZE]   a regular file (created sparse at SIZE\n"
		"                            when missing)\n"
		"    hostbdev:/dev/NAME      a host block device or partition\n"
		"    mem:SIZE                a thin RAM disk\n"
		"    zero:SIZE               reads zeroes, drops writes (dm-zero)\n"
		"    error:SIZE[,errno=E]    fails requests (fault tests)\n"
		"  Sizes are decimal with K, M, G, T, P, E (or KiB..EiB) suffixes,\n"
		"  powers of 1024. Options of every type: readonly=0|1,\n"
		"  write_zeroes_unmap=0|1 (the knob at start).\n"
		"\n"
		"DEVICE TYPES\n");
	for (t = bs_dev_type_next(NULL); t; t = bs_dev_type_next(t)) {
		fprintf(f, "  %s%s - %s\n", t->name,
			t->stacked ? " (stacked: devices=A B ...)" : "",
			t->summary ? t->summary : "");
		if (t->options)
			bs_cmd_print_options(f, t->options);
	}
	fprintf(f,
		"\n"
		"CONFIG FILE (-c FILE)\n"
		"  One [device NAME] section per device, its type and options:\n"
		"    [device disk0]\n"
		"    type = file\n"
		"    path = /var/lib/blkstack/disk0.img\n"
		"    size = 64G\n"
		"    write_zeroes_unmap = 1\n"
		"  An error in it is one line, FILE:LINE: reason, and exit 1.\n"
		"\n"
		CMD_HELP_EXIT
		"See `blkstack help COMMAND` for each command, docs/cli.md for more.\n");
}

static int help_run(struct bs_cmd_env *env, int argc, char **argv)
{
	const struct bs_cmd *c;

	if (argc < 2) {
		overview(env->out);
		return CMD_OK;
	}
	if (argc > 2)
		return cmd_usage(env, "help", "one COMMAND at most");
	c = bs_cmd_find(argv[1]);
	if (!c)
		return cmd_usage(env, "help", "'%s' is not a command", argv[1]);
	cmd_print_help(env->out, c);
	return CMD_OK;
}

static const struct bs_cmd help_cmd = {
	.name = "help",
	.usage = "help [COMMAND]",
	.summary = "show the overview, or the manual of one command",
	.run = help_run,
	.help =
	"DESCRIPTION\n"
	"  Without COMMAND, prints the overview: global options, commands,\n"
	"  device spec syntax, the options of every device type, and the\n"
	"  config file format. With COMMAND, prints its manual.\n"
	"\n"
	"EXIT STATUS\n"
	"  0  success; 2  unknown COMMAND\n"
	"\n"
	"EXAMPLES\n"
	"  blkstack help\n"
	"  blkstack help fallocate\n",
};

BS_CMD(help_cmd)
