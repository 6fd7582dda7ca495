/* SPDX-License-Identifier: MIT */
/*
 * The nbd driver's pure parts: its options, and the decision from what an
 * NBD server offers (the handshake's transmission flags, block sizes, meta
 * contexts) to blkstack limits and capabilities, with the reason for every
 * "no". No I/O, so the rules are tested against a table
 * (tests/unit/test_nbd_driver_config.c). Not a public API.
 */
#ifndef BLKSTACK_DRIVERS_NBD_CONFIG_H
#define BLKSTACK_DRIVERS_NBD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include <blkstack/limits.h>

struct bs_opts;

#define NBDC_MAX_CONNS 16
/* The largest WRITE_ZEROES / TRIM we send: NBD lengths are 32-bit. */
#define NBDC_MAX_ZERO_BYTES (1u << 30)

/* The device's options, read by nbdc_opts_parse(). */
struct nbdc_opts {
	char *uri;			/* nbd://, nbds://, nbd+unix://, ... */
	unsigned connections;		/* wanted when the server has multi-conn */
	unsigned timeout_s;		/* one request (retries included), open */
	unsigned reconnect_ms;		/* between connect attempts */
	unsigned max_retries;		/* failed connects before open gives up */
	unsigned down_after_s;		/* no connection this long: down (0 never) */
	uint32_t max_io;		/* bytes per READ/WRITE we send */
};

/* What the server said (libnbd's nbd_can_* / nbd_get_* after connecting). */
struct nbdc_facts {
	uint64_t size;			/* bytes */
	bool read_only;			/* NBD_FLAG_READ_ONLY */
	bool can_flush;			/* NBD_FLAG_SEND_FLUSH */
	bool can_fua;			/* NBD_FLAG_SEND_FUA */
	bool can_trim;			/* NBD_FLAG_SEND_TRIM */
	bool can_zero;			/* NBD_FLAG_SEND_WRITE_ZEROES */
	bool can_fast_zero;		/* NBD_FLAG_SEND_FAST_ZERO */
	bool can_multi_conn;		/* NBD_FLAG_CAN_MULTI_CONN */
	bool rotational;		/* NBD_FLAG_ROTATIONAL */
	bool base_allocation;		/* meta context base:allocation agreed */
	/* NBD_INFO_BLOCK_SIZE, 0 when the server sent none */
	uint32_t bs_min, bs_pref, bs_max;
	bool zero_broken;		/* WRITE_ZEROES refused at run time */
};

/* What the driver does with them. */
struct nbdc_config {
	struct bs_limits limits;	/* driver limits (user fields 0) */
	uint64_t size;			/* bytes, whole logical blocks */
	bool readonly;
	bool wz_unmap;			/* BS_FEAT_WRITE_ZEROES_UNMAP */
	unsigned conns;			/* connections to open */
	char why[192];			/* the rule that decided wz_unmap */
	/* one line each: why zeroing, discard, FUA, flush, block status and
	 * multi-conn are what they are ("no: server does not offer ...") */
	char zero_why[128], trim_why[96], fua_why[96], flush_why[96];
	char status_why[96], conns_why[128], size_why[96];
};

/*
 * Read the driver's options from @opts (@name labels messages): uri
 * (required), connections (4, 1..16), timeout (30 s, 1..3600),
 * reconnect_ms (1000, 10..600000), max_retries (5, 0..100), down_after
 * (60 s, 0..86400, 0 = never), max_io (1M,
 * 4K..32M, power of two). 0, or -EINVAL / -ENOMEM with bs_error() set.
 * Free with nbdc_opts_free().
 */
int nbdc_opts_parse(struct bs_opts *opts, const char *name,
		    struct nbdc_opts *out);
void nbdc_opts_free(struct nbdc_opts *o);

/*
 * True when @uri has a scheme libnbd connects to (nbd, nbds, nbd+unix,
 * nbds+unix, nbd+vsock, nbds+vsock); libnbd checks the rest on connect.
 */
bool nbdc_uri_scheme_ok(const char *uri);

/*
 * Decide from @f and @o. 0, or -EINVAL with @out->why saying why the
 * export cannot be used (a size below one block, a block size blkstack
 * cannot take).
 */
int nbdc_config_decide(const struct nbdc_facts *f, const struct nbdc_opts *o,
		       struct nbdc_config *out);

/* The NBD zero flags for a write-zeroes: NO_HOLE unless it may unmap. */
bool nbdc_zero_no_hole(bool req_nounmap, bool dev_wz_unmap);

#endif
