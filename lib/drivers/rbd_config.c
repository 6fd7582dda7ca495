/* SPDX-License-Identifier: MIT */
/*
 * The rbd driver's decision and name parsing (see rbd_config.h for what
 * librbd guarantees and where that was read).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "drivers/rbd_config.h"

/* Largest write-zeroes or discard we hand librbd at once: librbd splits
 * it into per-object operations itself, all in flight together. */
#define RBD_MAX_ZERO_BYTES (1ull << 30)

static int bad(char *why, size_t len, const char *msg, const char *what)
{
	snprintf(why, len, msg, what ? what : "");
	return -EINVAL;
}

static bool name_ok(const char *s)
{
	return *s && strlen(s) < RBD_NAME_MAX && !strchr(s, '@') &&
	       !strchr(s, '/');
}

int rbd_parse_name(const char *image, const char *pool, char *pool_out,
		   char *image_out, char *why, size_t why_len)
{
	const char *slash;
	size_t plen;

	if (!image || !*image)
		return bad(why, why_len, "no image (image = [POOL/]IMAGE, or "
			   "rbd:POOL/IMAGE)%s", NULL);
	if (strchr(image, '@'))
		return bad(why, why_len, "image %s: snapshots are not "
			   "supported", image);
	slash = strchr(image, '/');
	if (slash) {
		plen = (size_t)(slash - image);
		if (!plen || plen >= RBD_NAME_MAX)
			return bad(why, why_len, "image %s: want POOL/IMAGE",
				   image);
		if (strchr(slash + 1, '/'))
			return bad(why, why_len, "image %s: namespaces are "
				   "not supported (want POOL/IMAGE)", image);
		if (pool && (strlen(pool) != plen ||
			     strncmp(pool, image, plen)))
			return bad(why, why_len, "image %s names another pool "
				   "than pool = %s", image);
		memcpy(pool_out, image, plen);
		pool_out[plen] = '\0';
		image = slash + 1;
	} else {
		pool = pool ? pool : "rbd";
		if (!name_ok(pool))
			return bad(why, why_len, "pool '%s': a name without "
				   "'/' or '@', below 256 bytes", pool);
		snprintf(pool_out, RBD_NAME_MAX, "%s", pool);
	}
	if (!name_ok(image))
		return bad(why, why_len, "image '%s': a name without '/' or "
			   "'@', below 256 bytes", image);
	snprintf(image_out, RBD_NAME_MAX, "%s", image);
	return 0;
}

static uint32_t sectors(uint64_t bytes)
{
	uint64_t s = bytes >> BS_SECTOR_SHIFT;

	return s > UINT32_MAX ? UINT32_MAX : (uint32_t)s;
}

int rbd_config_decide(const struct rbd_facts *f, struct rbd_config *out)
{
	struct bs_limits *l = &out->limits;
	uint64_t zmax, gran;

	memset(out, 0, sizeof(*out));
	if (f->obj_size < 4096 || (f->obj_size & (f->obj_size - 1)))
		return -EINVAL;
	bs_limits_init(l);
	l->logical_block_size = BS_SECTOR_SIZE;
	l->physical_block_size = BS_SECTOR_SIZE;
	/* a write inside one object is one OSD operation */
	l->io_opt = f->obj_size > UINT32_MAX ? 0 : (uint32_t)f->obj_size;
	l->max_hw_sectors = sectors(f->max_io ? f->max_io : (4u << 20));
	l->max_segments = 1024;	/* librbd refuses more than IOV_MAX iovecs */
	if (f->cache)
		l->features |= BS_FEAT_WRITE_CACHE;	/* FUA: the core flushes */

	/* zeroing: whole objects per command, at most 1 GiB */
	zmax = RBD_MAX_ZERO_BYTES;
	if (f->obj_size <= zmax)
		zmax -= zmax % f->obj_size;

	/* discard: what a discard really frees in */
	gran = f->skip_partial_discard ? f->discard_gran : 0;
	if (gran > f->obj_size)
		gran = f->obj_size;
	if (gran < BS_SECTOR_SIZE)
		gran = BS_SECTOR_SIZE;
	out->discard_gran = gran;
	l->max_discard_sectors = sectors(zmax);
	l->discard_granularity = (uint32_t)gran;

	if (!f->write_zeroes) {
		snprintf(out->why, sizeof(out->why), "librbd without "
			 "rbd_aio_write_zeroes -> no write-zeroes (the core "
			 "writes zeroes), no unmap zeroing");
		return 0;
	}
	if (f->wz_refused) {
		snprintf(out->why, sizeof(out->why), "rbd_aio_write_zeroes "
			 "refused at run time -> no write-zeroes, no unmap "
			 "zeroing");
		return 0;
	}
	l->max_write_zeroes_sectors = sectors(zmax);
	l->features |= BS_FEAT_WRITE_ZEROES_UNMAP;
	out->wz_unmap = true;
	snprintf(out->why, sizeof(out->why), "librbd write_zeroes is a "
		 "discard of granularity 0: whole %llu KiB objects removed, "
		 "partial ranges zeroed, any byte range reads zeroes -> unmap "
		 "zeroing (NOUNMAP: THICK_PROVISION)",
		 (unsigned long long)(f->obj_size >> 10));
	return 0;
}
