/* SPDX-License-Identifier: MIT */
/*
 * `blkstack explain`: why a device does or does not zero by unmapping,
 * down the whole stack below it.
 */
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/zero.h>

#include "cmd/internal.h"

#define MAX_DEPTH 32

static void explain_dev(FILE *f, struct bs_dev *dev, char *prefix,
			size_t plen, bool last, unsigned depth)
{
	const struct bs_limits *l = &dev->limits;
	bool wzu = bs_dev_write_zeroes_unmap(dev);
	const char *why = bs_write_zeroes_unmap_why_not(dev);
	size_t n = strlen(prefix);
	unsigned i;

	fprintf(f, "%s%s%s (%s): write_zeroes_unmap %s", prefix,
		depth ? (last ? "`- " : "|- ") : "", dev->name, dev->type->name,
		wzu ? "yes" : "no");
	if (!wzu && *why)
		fprintf(f, ": %s", why);
	fputc('\n', f);
	if (depth)
		snprintf(prefix + n, plen - n, "%s", last ? "   " : "|  ");
	if (*dev->wz_reason)
		fprintf(f, "%s%s  reason: %s\n", prefix,
			dev->ncomponents ? "|" : " ", dev->wz_reason);
	fprintf(f, "%s%s  write-zeroes max %llu bytes%s\n", prefix,
		dev->ncomponents ? "|" : " ",
		(unsigned long long)l->max_write_zeroes_sectors << BS_SECTOR_SHIFT,
		dev->wz_broken ? " (turned off after EOPNOTSUPP at run time)"
			       : "");
	if (depth < MAX_DEPTH)
		for (i = 0; i < dev->ncomponents; i++)
			explain_dev(f, dev->components[i], prefix, plen,
				    i + 1 == dev->ncomponents, depth + 1);
	prefix[n] = '\0';
}

static int explain_run(struct bs_cmd_env *env, int argc, char **argv)
{
	char prefix[3 * MAX_DEPTH + 8] = "";
	struct bs_dev *dev;
	int err;

	if (argc != 2 || argv[1][0] == '-')
		return cmd_usage(env, "explain", "%s",
				 argc < 2 ? "DEV is missing"
					  : argv[1][0] == '-' ? "no options but --help"
							      : "only one DEV, please");
	err = bs_cmd_get_dev(env, argv[1], &dev);
	if (err)
		return bs_cmd_fail(env, argv[1], "open", err);
	explain_dev(env->out, dev, prefix, sizeof(prefix), true, 0);
	return CMD_OK;
}

static const struct bs_cmd explain_cmd = {
	.name = "explain",
	.usage = "explain DEV",
	.summary = "say why DEV does or does not zero by unmapping, down the stack",
	.run = explain_run,
	.help =
	"DESCRIPTION\n"
	"  Prints DEV and every device below it as a tree, each with its\n"
	"  write_zeroes_unmap state, why it is off when it is (the device has\n"
	"  no write-zeroes, lacks the WRITE_ZEROES_UNMAP feature, or the user\n"
	"  set queue/write_zeroes_unmap to 0), the reason its driver or the\n"
	"  stacking gave, and its write-zeroes limit. A stacked device zeroes\n"
	"  by unmapping only when every component below it does, so the leaf\n"
	"  that says no is the one to look at.\n"
	"\n"
	"OPTIONS\n"
	"  --help    show this text.\n"
	"\n"
	CMD_HELP_DEV
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  blkstack explain mem:1G,zeroes=write\n"
	"  blkstack -c blkstack.ini explain vol0\n",
};

BS_CMD(explain_cmd)
