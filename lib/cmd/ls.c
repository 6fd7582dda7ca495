/* SPDX-License-Identifier: MIT */
/* `blkstack ls`: the devices of the config file (or of the daemon). */
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>

#include "cmd/internal.h"

static int ls_run(struct bs_cmd_env *env, int argc, char **argv)
{
	struct bs_dev *d;
	char h[32];
	size_t w = 4, tw = 4;

	if (argc > 1)
		return cmd_usage(env, "ls", "%s", argv[1][0] == '-'
				 ? "no options but --help" : "no arguments");
	for (d = bs_dev_next(env->ctx, NULL); d; d = bs_dev_next(env->ctx, d)) {
		if (strlen(d->name) > w)
			w = strlen(d->name);
		if (strlen(d->type->name) > tw)
			tw = strlen(d->type->name);
	}
	fprintf(env->out, "%-*s  %-*s  %10s  %-18s  %s\n", (int)w, "NAME",
		(int)tw, "TYPE", "SIZE", "WRITE_ZEROES_UNMAP", "COMPONENTS");
	for (d = bs_dev_next(env->ctx, NULL); d; d = bs_dev_next(env->ctx, d)) {
		char comps[256] = "-";
		size_t n = 0;
		unsigned i;

		for (i = 0; i < d->ncomponents && n < sizeof(comps); i++)
			n += (size_t)snprintf(comps + n, sizeof(comps) - n, "%s%s",
					       i ? " " : "", d->components[i]->name);
		fprintf(env->out, "%-*s  %-*s  %10s  %-18s  %s\n", (int)w, d->name,
			(int)tw, d->type->name, bs_fmt_size(d->size, h, sizeof(h)),
			bs_dev_write_zeroes_unmap(d) ? "yes" : "no", comps);
	}
	return CMD_OK;
}

static const struct bs_cmd ls_cmd = {
	.name = "ls",
	.usage = "ls",
	.summary = "list the devices of the config file or the daemon",
	.run = ls_run,
	.help =
	"DESCRIPTION\n"
	"  Lists the devices defined by -c FILE (or, with -s SOCKET, served by\n"
	"  the daemon), in creation order: name, type, size, whether the\n"
	"  device zeroes by unmapping (write_zeroes_unmap), and the components\n"
	"  of stacked devices. Without -c or -s the list is empty.\n"
	"\n"
	"OPTIONS\n"
	"  --help    show this text.\n"
	"\n"
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  blkstack -c blkstack.ini ls\n",
};

BS_CMD(ls_cmd)
