/* SPDX-License-Identifier: MIT */
/* `blkstack zeroout`: the block layer's zeroout (BLKZEROOUT's analogue). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include <blkstack/bdev.h>
#include <blkstack/cmd.h>
#include <blkstack/zero.h>

#include "cmd/internal.h"

static int zeroout_run(struct bs_cmd_env *env, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "no-unmap", no_argument, NULL, 'U' },
		{ "no-fallback", no_argument, NULL, 'F' },
		{ "offset", required_argument, NULL, 'o' },
		{ "length", required_argument, NULL, 'l' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct cmd_progress prog;
	struct bs_claim *claim;
	struct bs_dev *dev;
	uint64_t offset = 0, length = 0;
	bool have_len = false, verbose = false, force = false;
	unsigned flags = 0;
	const char *devarg;
	char a[32], b[32];
	int c, err;

	while ((c = getopt_long(argc, argv, "+:o:l:v", longopts, NULL)) != -1) {
		switch (c) {
		case 'U':
			flags |= BS_ZERO_NOUNMAP;
			break;
		case 'F':
			flags |= BS_ZERO_NOFALLBACK;
			break;
		case 'o':
			if ((err = cmd_parse_size(env, "zeroout", "-o", optarg,
						  &offset)))
				return err;
			break;
		case 'l':
			if ((err = cmd_parse_size(env, "zeroout", "-l", optarg,
						  &length)))
				return err;
			have_len = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'f':
			force = true;
			break;
		default:
			return cmd_bad_option(env, "zeroout", argv, c);
		}
	}
	if (optind != argc - 1)
		return cmd_usage(env, "zeroout", "%s",
				 optind >= argc ? "DEV is missing"
						: "only one DEV, please");
	devarg = argv[optind];
	err = bs_cmd_get_dev(env, devarg, &dev);
	if (err)
		return bs_cmd_fail(env, devarg, "open", err);
	if (!have_len) {
		if (offset > dev->size) {
			bs_error(-EINVAL, "offset %llu is beyond the end (%llu)",
				 (unsigned long long)offset,
				 (unsigned long long)dev->size);
			return bs_cmd_fail(env, dev->name, "zeroout", -EINVAL);
		}
		length = dev->size - offset;
	}

	/* never under an export, the fs layer or a mapper (docs/cli.md) */
	if (cmd_claim_excl(env, dev, "zeroout", force, &claim))
		return CMD_FAILED;
	cmd_progress_init(&prog, env, dev->name);
	bs_error_clear();
	err = bs_zeroout_sync(dev, offset, length, flags, cmd_progress_cb,
			      &prog);
	cmd_progress_end(&prog);
	bs_claim_release(claim);
	if (err) {
		if (err == -EOPNOTSUPP && (flags & BS_ZERO_NOFALLBACK)) {
			/* name the cause below: the knob does not matter here */
			if (*dev->wz_reason)
				bs_error(err, "no write-zeroes command and "
					 "--no-fallback given; %s",
					 dev->wz_reason);
			else
				bs_error(err, "no write-zeroes command and "
					 "--no-fallback given");
		} else if (!*bs_last_error()) {
			bs_error(err, "zeroing %llu+%llu failed",
				 (unsigned long long)offset,
				 (unsigned long long)length);
		}
		return bs_cmd_fail(env, dev->name, "zeroout", err);
	}
	if (verbose)
		fprintf(env->out, "%s: zeroout: %s at %s done\n", dev->name,
			bs_fmt_size(length, a, sizeof(a)),
			bs_fmt_size(offset, b, sizeof(b)));
	return CMD_OK;
}

static const struct bs_cmd zeroout_cmd = {
	.name = "zeroout",
	.usage = "zeroout [--no-unmap] [--no-fallback] [--force] [-o OFFSET] [-l LENGTH] DEV",
	.summary = "make a range read back as zeroes, by any means allowed",
	.run = zeroout_run,
	.threaded = true,
	.help =
	"DESCRIPTION\n"
	"  Makes [OFFSET, OFFSET+LENGTH) of DEV read back as zeroes, the way\n"
	"  the kernel's blkdev_issue_zeroout() does: with the device's\n"
	"  write-zeroes command, split by its max_write_zeroes limit and with a\n"
	"  bounded number of commands in flight, and where the device has no\n"
	"  such command (or answers EOPNOTSUPP) by writing from one shared zero\n"
	"  buffer, so memory stays bounded however large the range. OFFSET\n"
	"  defaults to 0, LENGTH to the rest of the device; both must be\n"
	"  multiples of the logical block size and inside DEV (else EINVAL,\n"
	"  with nothing written). While zero buffers are being written, a\n"
	"  progress bar is shown on a terminal.\n"
	"\n"
	"  Unlike fallocate --write-zeroes, zeroout works on every device:\n"
	"  it is the slow path that fallocate refuses to hide.\n"
	"\n"
	"  DEV must not be in use: a device an export serves, a mapper stacks\n"
	"  on or the filesystem layer has open is refused with EBUSY naming\n"
	"  the holder (\"in use by export nbd/vol0\"), and nothing is written.\n"
	"  With --force it zeroes beside an export (a range you know no\n"
	"  client uses), never under a mapper or an open filesystem.\n"
	"\n"
	"OPTIONS\n"
	"  --no-unmap          the blocks must stay allocated (NOUNMAP)\n"
	"  --no-fallback       fail with EOPNOTSUPP instead of writing zero\n"
	"                      buffers (NOFALLBACK)\n"
	"  -o, --offset=OFFSET start, bytes; K M G T P E suffixes (1024-based)\n"
	"  -l, --length=LENGTH length, bytes; suffixes as for -o\n"
	"  -v, --verbose       say what was done\n"
	"  --force             run beside an export (shared, not exclusive)\n"
	"  --help              show this text\n"
	"\n"
	CMD_HELP_DEV
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  blkstack zeroout -o 1G -l 4G file:var/vol0.img\n"
	"  blkstack zeroout --no-unmap -l 64M file:disk.img\n"
	"  blkstack zeroout --no-fallback mem:1G,zeroes=none   # EOPNOTSUPP\n",
};

BS_CMD(zeroout_cmd)
