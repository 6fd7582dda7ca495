/* SPDX-License-Identifier: MIT */
/*
 * `blkstack fallocate`: fallocate(2) on a block device, with util-linux's
 * option letters, through the core's block device rules (bs_fallocate).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/cmd.h>
#include <blkstack/zero.h>

#include "cmd/internal.h"

static const char *mode_name(int mode)
{
	switch (mode & BS_FALLOC_MODE_MASK) {
	case BS_FALLOC_ZERO_RANGE: return "zero range";
	case BS_FALLOC_PUNCH_HOLE: return "punch hole";
	case BS_FALLOC_WRITE_ZEROES: return "write zeroes";
	case BS_FALLOC_COLLAPSE_RANGE: return "collapse range";
	case BS_FALLOC_INSERT_RANGE: return "insert range";
	default: return "allocate";
	}
}

/* A reason for the refusals of the generic checks that say what to do. */
static void explain_check(struct bs_dev *dev, int mode, int err)
{
	if (err != -EOPNOTSUPP)
		return;
	if ((mode & BS_FALLOC_WRITE_ZEROES) && (mode & BS_FALLOC_KEEP_SIZE))
		bs_error(err, "--write-zeroes cannot be combined with "
			 "--keep-size (written extents past the end do not "
			 "exist; the kernel refuses it too)");
	else if ((mode & BS_FALLOC_PUNCH_HOLE) && !(mode & BS_FALLOC_KEEP_SIZE))
		bs_error(err, "--punch-hole needs --keep-size");
}

bool cmd_falloc_letter(int ch, int *mode, int *modes)
{
	switch (ch) {
	case 'k':
	case 'n': /* util-linux's own letter for --keep-size */
		*mode |= BS_FALLOC_KEEP_SIZE;
		return true;
	case 'z':
		*mode |= BS_FALLOC_ZERO_RANGE;
		break;
	case 'p':
		/* as in util-linux: punching implies keeping the size */
		*mode |= BS_FALLOC_PUNCH_HOLE | BS_FALLOC_KEEP_SIZE;
		break;
	case 'w':
		*mode |= BS_FALLOC_WRITE_ZEROES;
		break;
	case 'c':
		*mode |= BS_FALLOC_COLLAPSE_RANGE;
		break;
	case 'i':
		*mode |= BS_FALLOC_INSERT_RANGE;
		break;
	default:
		return false;
	}
	(*modes)++;
	return true;
}

static int fallocate_run(struct bs_cmd_env *env, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "keep-size", no_argument, NULL, 'k' },
		{ "zero-range", no_argument, NULL, 'z' },
		{ "punch-hole", no_argument, NULL, 'p' },
		{ "write-zeroes", no_argument, NULL, 'w' },
		{ "collapse-range", no_argument, NULL, 'c' },
		{ "insert-range", no_argument, NULL, 'i' },
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
	int mode = 0, modes = 0, c, err;
	const char *devarg;
	char a[32], b[32];

	while ((c = getopt_long(argc, argv, "+:knzpwcio:l:v", longopts,
				NULL)) != -1) {
		if (cmd_falloc_letter(c, &mode, &modes))
			continue;
		switch (c) {
		case 'o':
			if ((err = cmd_parse_size(env, "fallocate", "-o", optarg,
						  &offset)))
				return err;
			break;
		case 'l':
			if ((err = cmd_parse_size(env, "fallocate", "-l", optarg,
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
			return cmd_bad_option(env, "fallocate", argv, c);
		}
	}
	if (modes > 1)
		return cmd_usage(env, "fallocate", "-z, -p, -w, -c and -i are "
				 "mutually exclusive");
	if (optind != argc - 1)
		return cmd_usage(env, "fallocate", "%s",
				 optind >= argc ? "DEV is missing"
						: "only one DEV, please");
	if (offset > INT64_MAX || length > INT64_MAX)
		return cmd_usage(env, "fallocate", "offset and length must be "
				 "below 8 EiB");
	devarg = argv[optind];
	err = bs_cmd_get_dev(env, devarg, &dev);
	if (err)
		return bs_cmd_fail(env, devarg, "open", err);
	if (have_len && !length) {
		bs_error(-EINVAL, "length 0 (fallocate(2) refuses an empty "
			 "range)");
		return bs_cmd_fail(env, dev->name, "fallocate", -EINVAL);
	}
	if (!have_len) {
		/* the rest of the device */
		if (offset >= dev->size) {
			bs_error(-EINVAL, "offset %llu is at or beyond the end "
				 "(%llu)", (unsigned long long)offset,
				 (unsigned long long)dev->size);
			return bs_cmd_fail(env, dev->name, "fallocate", -EINVAL);
		}
		length = dev->size - offset;
	}

	err = bs_falloc_check(mode, (int64_t)offset, (int64_t)length,
			      BS_MAX_LFS_FILESIZE);
	if (err) {
		bs_error(err, "invalid mode 0x%x or range %llu+%llu", mode,
			 (unsigned long long)offset, (unsigned long long)length);
		explain_check(dev, mode, err);
		return bs_cmd_fail(env, dev->name, "fallocate", err);
	}

	/* every mode that reaches the device changes data: exclusive */
	if (cmd_claim_excl(env, dev, "fallocate", force, &claim))
		return CMD_FAILED;
	cmd_progress_init(&prog, env, dev->name);
	bs_error_clear();
	err = bs_fallocate_sync(dev, mode, (int64_t)offset, (int64_t)length,
				cmd_progress_cb, &prog);
	cmd_progress_end(&prog);
	bs_claim_release(claim);
	if (err) {
		struct bs_caps caps;

		/* the published capabilities: this may run off the main loop */
		bs_dev_caps(dev, &caps);
		if (err == -EOPNOTSUPP && (mode & BS_FALLOC_WRITE_ZEROES) &&
		    !caps.write_zeroes_unmap && !caps.readonly) {
			/* say why: the feature is missing, or the knob is off */
			bs_error(err, "%s", caps.why_no_unmap);
		} else if (err == -EOPNOTSUPP &&
			   (mode & BS_FALLOC_PUNCH_HOLE)) {
			/* punching may only unmap, never write zeroes */
			bs_error(err, "punch hole needs a write-zeroes command "
				 "and the device has none%s%s",
				 *dev->wz_reason ? ": " : "", dev->wz_reason);
		} else if (!*bs_last_error()) {
			bs_error(err, "%s of %llu+%llu failed", mode_name(mode),
				 (unsigned long long)offset,
				 (unsigned long long)length);
		}
		return bs_cmd_fail(env, dev->name, "fallocate", err);
	}
	if (verbose) {
		uint64_t len = length;
		if (offset + len > dev->size)
			len = dev->size - offset; /* KEEP_SIZE clipped it */
		fprintf(env->out, "%s: %s: %s at %s done\n", dev->name,
			mode_name(mode), bs_fmt_size(len, a, sizeof(a)),
			bs_fmt_size(offset, b, sizeof(b)));
	}
	return CMD_OK;
}

static const struct bs_cmd fallocate_cmd = {
	.name = "fallocate",
	.usage = "fallocate [-k] [-z|-p|-w] [--force] [-o OFFSET] [-l LENGTH] DEV",
	.summary = "zero, punch or write-zeroes a range as fallocate(2) would",
	.run = fallocate_run,
	.threaded = true,
	.help =
	"DESCRIPTION\n"
	"  Applies fallocate(2) with the given mode to DEV as Linux does on a\n"
	"  block device, with the letters of util-linux's fallocate(1). The\n"
	"  range starts at OFFSET (default 0) and is LENGTH bytes long (default:\n"
	"  to the end of DEV). Checks, in the kernel's order: unknown mode\n"
	"  combinations -> EOPNOTSUPP; --write-zeroes on a device without\n"
	"  unmap write-zeroes -> EOPNOTSUPP; OFFSET at or past the end ->\n"
	"  EINVAL; a range past the end -> clipped with --keep-size, else\n"
	"  EINVAL; OFFSET or LENGTH not a multiple of the logical block size\n"
	"  -> EINVAL. A refused request changes no byte.\n"
	"\n"
	"  What each mode does on the device:\n"
	"    -z            zeroout keeping blocks allocated (NOUNMAP); falls\n"
	"                  back to writing zeroes where needed.\n"
	"    -p            zeroout by unmapping only (NOFALLBACK): fails with\n"
	"                  EOPNOTSUPP rather than write zeroes.\n"
	"    -w            zeroout that may unmap; offered only when the\n"
	"                  device has write_zeroes_unmap (see `blkstack info`),\n"
	"                  i.e. zeroing is a cheap metadata operation. When\n"
	"                  refused, the error says why: the device lacks the\n"
	"                  feature, or queue/write_zeroes_unmap was set to 0.\n"
	"    (no mode)     allocation means nothing on a block device:\n"
	"                  EOPNOTSUPP.\n"
	"  A long zeroout that has to write zero buffers shows a progress bar\n"
	"  on a terminal.\n"
	"\n"
	"  DEV must not be in use: a device an export serves, a mapper stacks\n"
	"  on or the filesystem layer has open is refused with EBUSY naming\n"
	"  the holder (\"in use by export nbd/vol0\"), and nothing is written.\n"
	"  With --force it runs beside an export (a range you know no client\n"
	"  uses), never under a mapper or an open filesystem.\n"
	"\n"
	"OPTIONS\n"
	"  -k, -n, --keep-size     FALLOC_FL_KEEP_SIZE: clip at the end of DEV\n"
	"  -z, --zero-range        FALLOC_FL_ZERO_RANGE\n"
	"  -p, --punch-hole        FALLOC_FL_PUNCH_HOLE (implies --keep-size)\n"
	"  -w, --write-zeroes      FALLOC_FL_WRITE_ZEROES (not with -k)\n"
	"  -c, --collapse-range    FALLOC_FL_COLLAPSE_RANGE (refused on a block\n"
	"                          device, as by Linux)\n"
	"  -i, --insert-range      FALLOC_FL_INSERT_RANGE (likewise)\n"
	"  -o, --offset=OFFSET     start, bytes; K M G T P E suffixes (1024-based)\n"
	"  -l, --length=LENGTH     length, bytes; suffixes as for -o\n"
	"  -v, --verbose           say what was done\n"
	"  --force                 run beside an export (shared, not exclusive)\n"
	"  --help                  show this text\n"
	"\n"
	CMD_HELP_DEV
	CMD_HELP_EXIT
	"EXAMPLES\n"
	"  Zero the first GiB of a thin image by deallocating it:\n"
	"    blkstack fallocate -w -l 1G file:var/vol0.img\n"
	"  Zero 64 MiB at 1 GiB, keeping the blocks allocated:\n"
	"    blkstack fallocate -z -o 1G -l 64M file:disk.img\n"
	"  Show that -w is refused once the knob is off:\n"
	"    blkstack fallocate -w -l 1M mem:16M,write_zeroes_unmap=0\n",
};

BS_CMD(fallocate_cmd)
