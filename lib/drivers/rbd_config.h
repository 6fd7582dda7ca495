/* SPDX-License-Identifier: MIT */
/*
 * The rbd driver's pure parts: which image the options name, and what a
 * librbd image can do (limits and whether write-zeroes may unmap) from the
 * facts the driver reads at open. No librbd calls here, so the rules are
 * tested against a table (tests/unit/test_rbd_config.c). Not a public API.
 *
 * What librbd guarantees (read in its source, librbd/api/Io.cc and
 * io/ImageRequest.cc, Ceph 16 through today):
 *   - rbd_aio_write_zeroes(flags 0) is a discard with a granularity of 0:
 *     whole objects in the range are removed (or truncated, for a clone
 *     over a parent), partial pieces are zeroed; any byte range reads back
 *     as zeroes. Its only flag, RBD_WRITE_ZEROES_FLAG_THICK_PROVISION,
 *     writes zeroes instead (write-same of a zero block, plain writes for
 *     unaligned ends): the objects stay allocated.
 *   - rbd_aio_discard uses the image's discard granularity: 0 when
 *     rbd_skip_partial_discard is false, else rbd_discard_granularity_bytes
 *     (64 KiB by default); each object piece is shrunk inward to that
 *     granularity and dropped when nothing is left, so the unaligned parts
 *     of a discard keep their data. Advisory, as a discard may be.
 */
#ifndef BLKSTACK_DRIVERS_RBD_CONFIG_H
#define BLKSTACK_DRIVERS_RBD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/limits.h>

#define RBD_NAME_MAX 256

/*
 * Split the options into pool and image: @image may be "IMAGE" or
 * "POOL/IMAGE" (the spec's bare argument, rbd:POOL/IMAGE); @pool (NULL =
 * not given) names the pool otherwise; the default pool is "rbd". 0, or
 * -EINVAL with a reason in @why: no image, an empty part, both forms
 * naming different pools, a snapshot ("@") or namespace ("/" twice),
 * names too long.
 */
int rbd_parse_name(const char *image, const char *pool, char *pool_out,
		   char *image_out, char *why, size_t why_len);

/* What the driver read from librbd and the configuration. */
struct rbd_facts {
	uint64_t size;			/* image bytes */
	uint64_t obj_size;		/* bytes per object (1 << order) */
	bool write_zeroes;		/* librbd has rbd_aio_write_zeroes */
	bool wz_refused;		/* it failed with EOPNOTSUPP/EINVAL at run time */
	bool skip_partial_discard;	/* rbd_skip_partial_discard */
	uint64_t discard_gran;		/* rbd_discard_granularity_bytes */
	bool cache;			/* rbd_cache: writes may sit in librbd */
	uint32_t max_io;		/* the user's largest read/write */
};

struct rbd_config {
	struct bs_limits limits;	/* driver limits (user fields 0) */
	uint64_t discard_gran;		/* bytes a discard really frees in */
	bool wz_unmap;			/* BS_FEAT_WRITE_ZEROES_UNMAP */
	char why[192];			/* the rule that decided wz_unmap */
};

/* The decision; 0, or -EINVAL for facts no image has (object size). */
int rbd_config_decide(const struct rbd_facts *f, struct rbd_config *out);

#endif
