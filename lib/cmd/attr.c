/* SPDX-License-Identifier: MIT */
/* `blkstack attr`: list, read or write a device's attributes (sysfs-like). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/cmd.h>

#include "cmd/internal.h"

/* The value without its trailing newline, for one-line output. */
static int show_one(struct bs_dev *dev, const struct bs_attr *a, char *buf,
		    size_t len)
{
	int n;

	bs_error_clear();
	n = a->show(dev, buf, len);
	if (n < 0)
		return n;
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static int list(struct bs_cmd_env *env, struct bs_dev *dev)
{
	const struct bs_attr *a;
	char buf[256];
	size_t w = 4;
	unsigned i;
	int err;

	for (i = 0; (a = bs_attr_at(dev, i)); i++)
		if (strlen(a->name) > w)
			w = strlen(a->name);
	for (i = 0; (a = bs_attr_at(dev, i)); i++) {
		err = show_one(dev, a, buf, sizeof(buf));
		if (err)
			snprintf(buf, sizeof(buf), "(error: %s)",
				 strerror(-err));
		fprintf(env->out, "%-*s  %s  %s\n", (int)w, a->name,
			a->mode == BS_ATTR_RW ? "RW" : "RO", buf);
	}
	return CMD_OK;
}

static int attr_run(struct bs_cmd_env *env, int argc, char **argv)
{
	const struct bs_attr *a;
	struct bs_dev *dev;
	const char *name;
	char buf[256], op[160];
	int err, i = 1;

	/* no options but --help; a lone "--" may guard a value like "-1" */
	if (i < argc && !strcmp(argv[i], "--"))
		i++;
	else if (i < argc && argv[i][0] == '-' && argv[i][1])
		return cmd_usage(env, "attr", "unknown option '%s'", argv[i]);
	if (i >= argc)
		return cmd_usage(env, "attr", "DEV is missing");
	if (argc - i > 3)
		return cmd_usage(env, "attr", "too many arguments");
	err = bs_cmd_find_dev(env, argv[i], &dev);
	if (err)
		return bs_cmd_fail(env, argv[i], "open", err);
	if (argc - i == 1)
		return list(env, dev);

	name = argv[i + 1];
	a = bs_attr_find(dev, name);
	if (argc - i == 2) {
		if (!a) {
			bs_error(-ENOENT, "no attribute '%s'; `blkstack attr "
				 "%s` lists them", name, argv[i]);
			return bs_cmd_fail(env, dev->name, name, -ENOENT);
		}
		err = show_one(dev, a, buf, sizeof(buf));
		if (err)
			return bs_cmd_fail(env, dev->name, name, err);
		fprintf(env->out, "%s\n", buf);
		return CMD_OK;
	}

	snprintf(op, sizeof(op), "%s", name);
	err = bs_attr_store(dev, name, argv[i + 2]);
	if (err == -ENOENT)
		bs_error(err, "no attribute '%s'; `blkstack attr %s` lists "
			 "them", name, argv[i]);
	else if (err == -EACCES)
		bs_error(err, "%s is read-only", name);
	else if (err == -EINVAL && a) {
		/* the core's line, less the "DEV: NAME: " the failure
		 * line prints anyway: what was refused and what is allowed */
		char why[256];
		const char *m = bs_last_error();
		size_t dn = strlen(dev->name), nn = strlen(name);

		if (!strncmp(m, dev->name, dn) && !strncmp(m + dn, ": ", 2) &&
		    !strncmp(m + dn + 2, name, nn) &&
		    !strncmp(m + dn + 2 + nn, ": ", 2))
			m += dn + 2 + nn + 2;
		snprintf(why, sizeof(why), "%s", m);
		bs_error(err, "%s", why);
	}
	if (err)
		return bs_cmd_fail(env, dev->name, op, err);
	return CMD_OK;
}

static const struct bs_cmd attr_cmd = {
	.name = "attr",
	.usage = "attr DEV [NAME [VALUE]]",
	.summary = "list, read or write device attributes (the sysfs analogue)",
	.run = attr_run,
	.help =
	"DESCRIPTION\n"
	"  Attributes are a device's settings and facts, named and shown as\n"
	"  Linux shows them under /sys/block/DEV/ (sizes in the same units,\n"
	"  values as text). With DEV alone, lists every attribute as\n"
	"  NAME  MODE  VALUE, MODE being RO (read-only) or RW. With NAME,\n"
	"  prints that value. With NAME VALUE, stores it, accepting what sysfs\n"
	"  accepts (\"1\", \" 1\", \"1\\n\"). A store that changes limits restacks\n"
	"  every device built on DEV at once.\n"
	"\n"
	"  Attributes of note:\n"
	"    queue/write_zeroes_unmap        RW  1 when write-zeroes may\n"
	"        unmap; write 0 to turn fast zeroing (and so fallocate\n"
	"        WRITE_ZEROES, NBD fast zero...) off, 1 to turn it back on.\n"
	"    queue/write_zeroes_unmap_max_bytes  RW  the same knob in bytes:\n"
	"        0, or exactly queue/write_zeroes_unmap_max_hw_bytes.\n"
	"    queue/max_sectors_kb            RW  cap on read/write size.\n"
	"    queue/write_cache               RW  \"write back\" / \"write through\".\n"
	"\n"
	"  Without a daemon, a stored value lives as long as this one\n"
	"  blkstack process: with a spec or -c FILE the device is opened, set\n"
	"  and closed again, so a store only affects what this same command\n"
	"  does (nothing, for attr). To make it last, put the setting in the\n"
	"  config file (write_zeroes_unmap = 0) or use blkstack -s SOCKET\n"
	"  against a running blkstackd.\n"
	"\n"
	"OPTIONS\n"
	"  --help    show this text.\n"
	"  --        end of options (for a VALUE starting with '-').\n"
	"\n"
	CMD_HELP_DEV
	"EXIT STATUS\n"
	"  0  success\n"
	"  1  failed: unknown attribute (ENOENT), read-only attribute\n"
	"     (EACCES), or a value the attribute refuses (EINVAL)\n"
	"  2  usage error\n"
	"\n"
	"EXAMPLES\n"
	"  blkstack attr mem:1G\n"
	"  blkstack attr file:disk.img queue/write_zeroes_unmap\n"
	"  blkstack -s var/blkstackd.sock attr vol0 queue/write_zeroes_unmap 0\n",
};

BS_CMD(attr_cmd)
