/* SPDX-License-Identifier: MIT */
/*
 * `blkstack explain DEV [write-zeroes|discard]`: the tree of devices under
 * DEV, each with whether it has the capability and the rule that decided
 * it. The logic lives in the explain library (lib/core/explain.c).
 */
#include <stdio.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/explain.h>

#include "cmd/internal.h"

static int explain_run(struct bs_cmd_env *env, int argc, char **argv)
{
	enum bs_cap cap = BS_CAP_WRITE_ZEROES_UNMAP;
	struct bs_dev *dev;
	int err;

	if (argc < 2 || argc > 3 || argv[1][0] == '-' ||
	    (argc == 3 && argv[2][0] == '-'))
		return cmd_usage(env, "explain", "%s",
				 argc < 2 ? "DEV is missing"
				 : argc > 3 ? "one DEV and at most one capability, please"
					    : "no options but --help");
	if (argc == 3 && bs_cap_parse(argv[2], &cap))
		return cmd_usage(env, "explain", "'%s': not a capability "
				 "(write-zeroes or discard)", argv[2]);
	err = bs_cmd_find_dev(env, argv[1], &dev);
	if (err)
		return bs_cmd_fail(env, argv[1], "open", err);
	bs_explain_print(dev, cap, env->out);
	return CMD_OK;
}

static const struct bs_cmd explain_cmd = {
	.name = "explain",
	.usage = "explain DEV [write-zeroes|discard]",
	.summary = "say why DEV has or lacks unmap zeroing (or discard), down the stack",
	.run = explain_run,
	.help =
	"DESCRIPTION\n"
	"  Prints DEV and every device below it as a tree, one device a line:\n"
	"  its name, type and size, whether it has the capability, and the\n"
	"  rule that decided it:\n"
	"\n"
	"    vol0 (striped, 2 GiB): write_zeroes_unmap no: striped: cleared because disk1 lacks it\n"
	"    ├─ disk0 (mem, 1 GiB): write_zeroes_unmap yes: mem: write-zeroes frees whole chunks ...\n"
	"    └─ disk1 (file, 1 GiB): write_zeroes_unmap no: file on xfs: no punch hole -> no unmap\n"
	"\n"
	"  For a leaf the rule is the driver's (what the host filesystem, the\n"
	"  host's sysfs or the zeroes= option allowed); \"knob\n"
	"  write_zeroes_unmap=0 set by user\" when queue/write_zeroes_unmap was\n"
	"  set to 0; \"write-zeroes failed with EOPNOTSUPP at run time\" when the\n"
	"  device refused a write-zeroes it had claimed. A stacked device has\n"
	"  the capability only when every component below it has it, and its\n"
	"  line names the components that took it away.\n"
	"\n"
	"CAPABILITIES\n"
	"  write-zeroes  write_zeroes_unmap: write-zeroes may deallocate, so\n"
	"                zeroing is a metadata operation (the default; also\n"
	"                write_zeroes_unmap, wz)\n"
	"  discard       the device accepts discards (max and granularity)\n"
	"\n"
	"OPTIONS\n"
	"  --help    show this text.\n"
	"\n"
	CMD_HELP_DEV
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  blkstack explain mem:1G,zeroes=write\n"
	"  blkstack -c blkstack.ini explain vol0\n"
	"  blkstack -c blkstack.ini explain vol0 discard\n",
};

BS_CMD(explain_cmd)
