/* SPDX-License-Identifier: MIT */
/*
 * `blkstack ls`: the devices of the config file (or of the daemon) as
 * trees, with sizes and capabilities. The view is the explain library's.
 */
#include <stdio.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/explain.h>

#include "cmd/internal.h"

static int ls_run(struct bs_cmd_env *env, int argc, char **argv)
{
	if (argc > 1)
		return cmd_usage(env, "ls", "%s", argv[1][0] == '-'
				 ? "no options but --help" : "no arguments");
	bs_ls_print(env->ctx, env->out);
	return CMD_OK;
}

static const struct bs_cmd ls_cmd = {
	.name = "ls",
	.usage = "ls",
	.summary = "list the devices of the config file or the daemon, as trees",
	.run = ls_run,
	.help =
	"DESCRIPTION\n"
	"  Lists the devices defined by -c FILE (or, with -s SOCKET, served by\n"
	"  the daemon) in creation order. Devices that no other device uses are\n"
	"  roots; the components of a stacked device are indented under it.\n"
	"  Columns:\n"
	"    NAME      the device (with its place in the tree)\n"
	"    TYPE      its type (mem, file, hostbdev, linear, striped, ...)\n"
	"    SIZE      its size; `opening` while its open goes on (a remote\n"
	"              device connecting, a mapper waiting for one), `failed`\n"
	"              when it could not open (`blkstack info DEV` says why)\n"
	"    WZ-UNMAP  yes when it zeroes by unmapping (queue/write_zeroes_unmap\n"
	"              reads 1); `blkstack explain DEV` says why not\n"
	"    WZ-MAX    largest write-zeroes command (queue/write_zeroes_max_bytes),\n"
	"              - when it has none\n"
	"    DISCARD   largest discard (queue/discard_max_bytes), - when none\n"
	"  Without -c or -s the list is empty.\n"
	"\n"
	"OPTIONS\n"
	"  --help    show this text.\n"
	"\n"
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  blkstack -c blkstack.ini ls\n",
};

BS_CMD(ls_cmd)
