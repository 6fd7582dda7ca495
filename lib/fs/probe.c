/* SPDX-License-Identifier: MIT */
/*
 * What is on a device already: the signatures that mke2fs and wipefs look
 * for first, cheap to read (the first 68 KiB), so that mkfs does not
 * replace a filesystem, a partition table or a volume without being told.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>

/* Enough for every signature below: btrfs's is at 64 KiB + 64. */
#define PROBE_BYTES (65536u + 4096u)

static uint16_t le16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static bool at(const uint8_t *buf, uint64_t have, uint64_t off,
	       const char *magic, size_t n)
{
	return off + n <= have && !memcmp(buf + off, magic, n);
}

/* ext2/3/4: the superblock at 1024, magic 0xEF53 at +56. */
static bool probe_ext(const uint8_t *buf, uint64_t have, char *what,
		      size_t len)
{
	const uint8_t *sb = buf + 1024;
	uint32_t compat, incompat, ro_compat;
	char label[17];
	const char *kind;
	size_t i;

	if (have < 1024 + 1024 || le16(sb + 56) != 0xEF53)
		return false;
	compat = le32(sb + 92);
	incompat = le32(sb + 96);
	ro_compat = le32(sb + 100);
	/* as blkid tells them: ext4 has a feature ext3 lacks */
	if ((incompat & ~0x0006u) || (ro_compat & ~0x0007u))
		kind = "ext4";
	else if (compat & 0x0004u)
		kind = "ext3";
	else
		kind = "ext2";
	memcpy(label, sb + 120, 16);
	label[16] = '\0';
	for (i = 0; label[i]; i++)
		if ((unsigned char)label[i] < 0x20 || label[i] == 0x7f)
			label[i] = '?';
	if (*label)
		snprintf(what, len, "an %s filesystem (label '%s')", kind,
			 label);
	else
		snprintf(what, len, "an %s filesystem", kind);
	return true;
}

int bs_fs_probe(struct bs_dev *dev, char *what, size_t len)
{
	struct bs_limits lim;
	uint32_t lbs;
	uint64_t have = PROBE_BYTES;
	uint8_t *buf = NULL;
	unsigned i;
	int err;

	bs_dev_limits_copy(dev, &lim);	/* off the main loop: a copy */
	lbs = lim.logical_block_size;
	if (have > dev->size)
		have = dev->size;
	have -= have % lbs;
	if (!have)
		return 0;
	if (posix_memalign((void **)&buf, 4096, have))
		return bs_error(-ENOMEM, "%s: probe: out of memory", dev->name);
	err = bs_read_sync(dev, buf, have, 0);
	if (err) {
		char why[256];

		snprintf(why, sizeof(why), "%s", bs_last_error());
		err = bs_error(err, "%s: reading what is on the device: %s",
			       dev->name, *why ? why : strerror(-err));
		goto out;
	}
	err = 1;
	if (probe_ext(buf, have, what, len))
		goto out;
	if (at(buf, have, 0, "XFSB", 4)) {
		snprintf(what, len, "an xfs filesystem");
		goto out;
	}
	if (at(buf, have, 65536 + 64, "_BHRfS_M", 8)) {
		snprintf(what, len, "a btrfs filesystem");
		goto out;
	}
	if (at(buf, have, 0, "LUKS\xba\xbe", 6)) {
		snprintf(what, len, "a LUKS encrypted volume");
		goto out;
	}
	if (at(buf, have, 4096 - 10, "SWAPSPACE2", 10) ||
	    at(buf, have, 4096 - 10, "SWAP-SPACE", 10)) {
		snprintf(what, len, "a swap area");
		goto out;
	}
	for (i = 0; i < 4; i++) {
		if (at(buf, have, 512u * i, "LABELONE", 8)) {
			snprintf(what, len, "an LVM physical volume");
			goto out;
		}
	}
	if (at(buf, have, 512, "EFI PART", 8)) {
		snprintf(what, len, "a GPT partition table");
		goto out;
	}
	if (at(buf, have, 510, "\x55\xaa", 2)) {
		if (at(buf, have, 54, "FAT", 3) || at(buf, have, 82, "FAT32", 5))
			snprintf(what, len, "a vfat filesystem");
		else
			snprintf(what, len, "a DOS partition table or boot "
				 "sector");
		goto out;
	}
	err = 0;
out:
	free(buf);
	return err;
}
