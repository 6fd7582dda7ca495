/* SPDX-License-Identifier: MIT */
/*
 * Core attributes of every device: the sysfs analogue of /sys/block/DEV/.
 * Values are shown as sysfs shows them; a successful store restacks every
 * device above (bs_dev_limits_changed()).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>

int bs_attr_parse_u64(const char *buf, unsigned long long *out)
{
	unsigned long long v = 0;
	const char *p = buf;
	bool digits = false;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '+')
		p++;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (~0ull - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
		digits = true;
	}
	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '\n')
		p++;
	if (!digits || *p)
		return -EINVAL;
	*out = v;
	return 0;
}

static int show_u64(char *buf, size_t len, unsigned long long v)
{
	return snprintf(buf, len, "%llu\n", v);
}

#define LIM(dev) (&(dev)->limits)

static int size_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, dev->size >> BS_SECTOR_SHIFT);
}

static int ro_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, dev->readonly);
}

static int lbs_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, LIM(dev)->logical_block_size);
}

static int pbs_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, LIM(dev)->physical_block_size);
}

static int io_min_show(struct bs_dev *dev, char *buf, size_t len)
{
	uint32_t v = LIM(dev)->io_min;

	return show_u64(buf, len, v ? v : LIM(dev)->physical_block_size);
}

static int io_opt_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, LIM(dev)->io_opt);
}

static int max_hw_kb_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, LIM(dev)->max_hw_sectors >> 1);
}

static int max_kb_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, LIM(dev)->max_sectors >> 1);
}

static int max_kb_store(struct bs_dev *dev, const char *buf)
{
	struct bs_limits *l = LIM(dev);
	unsigned long long kb;

	unsigned long long lo = 4, hi = l->max_hw_sectors >> 1;

	/* at least a page (as the kernel asks) and one logical block */
	if (lo * 1024 < l->logical_block_size)
		lo = l->logical_block_size / 1024;
	if (bs_attr_parse_u64(buf, &kb) ||
	    (kb && (kb > hi || kb < lo)))
		return bs_error(-EINVAL, "allowed: 0 (the driver's maximum) "
				"or %llu..%llu KiB", lo, hi);
	if (kb == 0) {
		/* 0 restores the driver's maximum */
		l->max_user_sectors = 0;
	} else {
		l->max_user_sectors = (uint32_t)(kb << 1);
	}
	l->max_sectors = l->max_hw_sectors;
	if (l->max_user_sectors && l->max_user_sectors < l->max_sectors)
		l->max_sectors = l->max_user_sectors;
	return 0;
}

static int wz_max_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, (unsigned long long)
			LIM(dev)->max_write_zeroes_sectors << BS_SECTOR_SHIFT);
}

static int wz_unmap_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, bs_dev_write_zeroes_unmap(dev));
}

static void set_unmap_disabled(struct bs_dev *dev, bool disabled)
{
	if (disabled)
		LIM(dev)->flags |= BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED;
	else
		LIM(dev)->flags &= ~BS_FLAG_WRITE_ZEROES_UNMAP_DISABLED;
}

static int wz_unmap_store(struct bs_dev *dev, const char *buf)
{
	unsigned long long v;

	/* 0 disables, 1 re-enables; anything else is a mistake */
	if (bs_attr_parse_u64(buf, &v) || v > 1)
		return bs_error(-EINVAL, "allowed: 0 (disable) or 1 (enable)");
	set_unmap_disabled(dev, v == 0);
	return 0;
}

/* Upstream's byte form: hw is 0 or exactly write_zeroes_max_bytes. */
static unsigned long long wz_unmap_hw_bytes(const struct bs_dev *dev)
{
	const struct bs_limits *l = LIM(dev);

	if (!(l->features & BS_FEAT_WRITE_ZEROES_UNMAP))
		return 0;
	return (unsigned long long)l->max_write_zeroes_sectors << BS_SECTOR_SHIFT;
}

static int wz_unmap_hw_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, wz_unmap_hw_bytes(dev));
}

static int wz_unmap_max_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, bs_dev_write_zeroes_unmap(dev) ?
				  wz_unmap_hw_bytes(dev) : 0);
}

static int wz_unmap_max_store(struct bs_dev *dev, const char *buf)
{
	unsigned long long v, hw = wz_unmap_hw_bytes(dev);

	/* 64-bit throughout, so values above 4 GiB can be written back */
	if (bs_attr_parse_u64(buf, &v) || (v != 0 && v != hw))
		return bs_error(-EINVAL, "allowed: 0 (disable) or %llu (the "
				"hw value)", hw);
	set_unmap_disabled(dev, v == 0);
	return 0;
}

static int discard_max_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, (unsigned long long)
			LIM(dev)->max_discard_sectors << BS_SECTOR_SHIFT);
}

static int discard_gran_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, LIM(dev)->max_discard_sectors ?
				  LIM(dev)->discard_granularity : 0);
}

static int wc_show(struct bs_dev *dev, char *buf, size_t len)
{
	return snprintf(buf, len, "%s\n", bs_limits_write_cache(LIM(dev)) ?
				 "write back" : "write through");
}

static bool word_is(const char *buf, const char *word)
{
	size_t n;

	while (*buf == ' ' || *buf == '\t')
		buf++;
	n = strlen(word);
	if (strncmp(buf, word, n))
		return false;
	buf += n;
	while (*buf == ' ' || *buf == '\t' || *buf == '\n')
		buf++;
	return !*buf;
}

static int wc_store(struct bs_dev *dev, const char *buf)
{
	struct bs_limits *l = LIM(dev);

	if (word_is(buf, "write back")) {
		if (!(l->features & BS_FEAT_WRITE_CACHE))
			return bs_error(-EINVAL, "the device has no write "
					"cache: only \"write through\"");
		l->flags &= ~BS_FLAG_WRITE_CACHE_DISABLED;
	} else if (word_is(buf, "write through") || word_is(buf, "none")) {
		l->flags |= BS_FLAG_WRITE_CACHE_DISABLED;
	} else {
		return bs_error(-EINVAL, "allowed: \"write back\" or "
				"\"write through\"");
	}
	return 0;
}

static int fua_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, !!(LIM(dev)->features & BS_FEAT_FUA));
}

static int rot_show(struct bs_dev *dev, char *buf, size_t len)
{
	return show_u64(buf, len, !!(LIM(dev)->features & BS_FEAT_ROTATIONAL));
}

static const struct bs_attr core_attrs[] = {
	{ "size", BS_ATTR_RO, size_show, NULL,
	  "size in 512-byte sectors" },
	{ "ro", BS_ATTR_RO, ro_show, NULL, "1 if read-only" },
	{ "queue/logical_block_size", BS_ATTR_RO, lbs_show, NULL,
	  "smallest addressable unit, bytes" },
	{ "queue/physical_block_size", BS_ATTR_RO, pbs_show, NULL,
	  "smallest unit written without read-modify-write, bytes" },
	{ "queue/minimum_io_size", BS_ATTR_RO, io_min_show, NULL,
	  "preferred minimum I/O, bytes" },
	{ "queue/optimal_io_size", BS_ATTR_RO, io_opt_show, NULL,
	  "preferred I/O (0 = not reported), bytes" },
	{ "queue/max_hw_sectors_kb", BS_ATTR_RO, max_hw_kb_show, NULL,
	  "largest read/write the driver takes, KiB" },
	{ "queue/max_sectors_kb", BS_ATTR_RW, max_kb_show, max_kb_store,
	  "largest read/write sent, KiB (0 restores the driver's)" },
	{ "queue/write_zeroes_max_bytes", BS_ATTR_RO, wz_max_show, NULL,
	  "largest write-zeroes command, bytes (0 = none)" },
	{ "queue/write_zeroes_unmap", BS_ATTR_RW, wz_unmap_show,
	  wz_unmap_store,
	  "1 if write-zeroes zeroes by unmapping; write 0 to disable, 1 to "
	  "re-enable" },
	{ "queue/write_zeroes_unmap_max_hw_bytes", BS_ATTR_RO,
	  wz_unmap_hw_show, NULL,
	  "unmap write-zeroes the device can do, bytes (0 or "
	  "write_zeroes_max_bytes)" },
	{ "queue/write_zeroes_unmap_max_bytes", BS_ATTR_RW, wz_unmap_max_show,
	  wz_unmap_max_store,
	  "unmap write-zeroes allowed, bytes; write 0 or the hw value" },
	{ "queue/discard_max_bytes", BS_ATTR_RO, discard_max_show, NULL,
	  "largest discard, bytes (0 = none)" },
	{ "queue/discard_granularity", BS_ATTR_RO, discard_gran_show, NULL,
	  "discard unit, bytes" },
	{ "queue/write_cache", BS_ATTR_RW, wc_show, wc_store,
	  "\"write back\" (flushes needed) or \"write through\"" },
	{ "queue/fua", BS_ATTR_RO, fua_show, NULL, "1 if FUA is native" },
	{ "queue/rotational", BS_ATTR_RO, rot_show, NULL,
	  "1 for spinning media" },
};

#define NCORE (sizeof(core_attrs) / sizeof(core_attrs[0]))

const struct bs_attr *bs_attr_at(const struct bs_dev *dev, unsigned i)
{
	const struct bs_attr *extra = dev->type->attrs;

	if (i < NCORE)
		return &core_attrs[i];
	i -= NCORE;
	/* the type's attributes read its state: only while it is open */
	if (!extra || !dev->drv_open)
		return NULL;
	for (; extra->name; extra++, i--)
		if (!i)
			return extra;
	return NULL;
}

const struct bs_attr *bs_attr_find(const struct bs_dev *dev, const char *name)
{
	const struct bs_attr *a;
	unsigned i;

	for (i = 0; (a = bs_attr_at(dev, i)); i++)
		if (!strcmp(a->name, name))
			return a;
	return NULL;
}

int bs_attr_show(struct bs_dev *dev, const char *name, char *buf, size_t len)
{
	const struct bs_attr *a = bs_attr_find(dev, name);

	if (!a)
		return bs_error(-ENOENT, "%s: no attribute '%s'", dev->name,
				name);
	return a->show(dev, buf, len);
}

int bs_attr_store(struct bs_dev *dev, const char *name, const char *value)
{
	const struct bs_attr *a = bs_attr_find(dev, name);
	int err;

	if (!a)
		return bs_error(-ENOENT, "%s: no attribute '%s'", dev->name,
				name);
	if (a->mode != BS_ATTR_RW || !a->store)
		return bs_error(-EACCES, "%s: %s is read-only", dev->name, name);
	bs_error_clear();
	err = a->store(dev, value);
	if (err) {
		/* a store may say what it accepts: keep that as the reason */
		char why[160];

		snprintf(why, sizeof(why), "%s", bs_last_error());
		return bs_error(err, "%s: %s: cannot store '%.*s': %s",
				dev->name, name, (int)strcspn(value, "\n"),
				value, *why ? why : a->help ? a->help
							   : "bad value");
	}
	bs_dev_limits_changed(dev);
	return 0;
}
