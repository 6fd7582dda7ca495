/* SPDX-License-Identifier: MIT */
/*
 * The nbd driver's options and capability decision (nbd_config.h). Each
 * rule says which server flag it reads and why it maps as it does; the
 * table is docs/drivers.md "nbd".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

#include "drivers/nbd_config.h"
#include "drivers/reach.h"

static bool pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

bool nbdc_uri_scheme_ok(const char *uri)
{
	static const char *const schemes[] = {
		"nbd://", "nbds://", "nbd+unix://", "nbds+unix://",
		"nbd+vsock://", "nbds+vsock://", NULL
	};
	unsigned i;

	if (!uri)
		return false;
	for (i = 0; schemes[i]; i++)
		if (!strncmp(uri, schemes[i], strlen(schemes[i])))
			return true;
	return false;
}

void nbdc_opts_free(struct nbdc_opts *o)
{
	free(o->uri);
	o->uri = NULL;
}

int nbdc_opts_parse(struct bs_opts *opts, const char *name,
		    struct nbdc_opts *out)
{
	const char *uri = bs_opts_get(opts, "uri");
	uint32_t conns = 4, timeout = 30, rms = 1000, retries = 5,
		 down = REACH_DOWN_AFTER_DEFAULT;
	uint64_t max_io = 1u << 20;
	int err;

	memset(out, 0, sizeof(*out));
	if ((err = bs_opts_get_u32(opts, "connections", &conns)) < 0 ||
	    (err = bs_opts_get_u32(opts, "timeout", &timeout)) < 0 ||
	    (err = bs_opts_get_u32(opts, "reconnect_ms", &rms)) < 0 ||
	    (err = bs_opts_get_u32(opts, "max_retries", &retries)) < 0 ||
	    (err = bs_opts_get_u32(opts, "down_after", &down)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_io", &max_io)) < 0)
		return err;
	if (!uri || !*uri)
		return bs_error(-EINVAL, "%s: nbd needs uri = nbd://HOST[:PORT]"
				"[/EXPORT] or nbd+unix:///[EXPORT]?socket=PATH",
				name);
	if (!nbdc_uri_scheme_ok(uri))
		return bs_error(-EINVAL, "%s: nbd: uri %s: not an NBD URI (want "
				"nbd://, nbds://, nbd+unix://, nbds+unix://, "
				"nbd+vsock://)", name, uri);
	if (conns < 1 || conns > NBDC_MAX_CONNS)
		return bs_error(-EINVAL, "%s: nbd: connections %u: 1..%u", name,
				conns, NBDC_MAX_CONNS);
	if (timeout < 1 || timeout > 3600 || rms < 10 || rms > 600000 ||
	    retries > 100 || down > REACH_DOWN_AFTER_MAX)
		return bs_error(-EINVAL, "%s: nbd: timeout 1..3600 s, "
				"reconnect_ms 10..600000, max_retries 0..100, "
				"down_after 0..86400 s", name);
	if (max_io < 4096 || max_io > (32u << 20) || !pow2(max_io))
		return bs_error(-EINVAL, "%s: nbd: max_io %llu: a power of two "
				"in 4K..32M", name, (unsigned long long)max_io);
	out->uri = strdup(uri);
	if (!out->uri)
		return -ENOMEM;
	out->connections = conns;
	out->timeout_s = timeout;
	out->reconnect_ms = rms;
	out->max_retries = retries;
	out->down_after_s = down;
	out->max_io = (uint32_t)max_io;
	return 0;
}

bool nbdc_zero_no_hole(bool req_nounmap, bool dev_wz_unmap)
{
	/* NOUNMAP: the blocks must stay allocated, which is NBD's NO_HOLE.
	 * Without unmap zeroing on the device (no fast zero, or the user's
	 * knob at 0) a zero must not punch holes either: the knob says the
	 * user does not want deallocation by zeroing. */
	return req_nounmap || !dev_wz_unmap;
}

int nbdc_config_decide(const struct nbdc_facts *f, const struct nbdc_opts *o,
		       struct nbdc_config *out)
{
	struct bs_limits *l = &out->limits;
	uint32_t lbs, pbs, max_rw;
	bool zero;

	memset(out, 0, sizeof(*out));
	bs_limits_init(l);

	/* Block sizes (NBD_INFO_BLOCK_SIZE). The minimum is the smallest
	 * request the server takes: blkstack's logical block, at least 512
	 * (a minimum of 1 or none at all: 512, libnbd's advice). */
	lbs = f->bs_min > 512 ? f->bs_min : 512;
	if (!pow2(lbs) || lbs > 65536) {
		snprintf(out->why, sizeof(out->why), "minimum block size %u is "
			 "not a power of two in 1..64K", f->bs_min);
		return -EINVAL;
	}
	pbs = f->bs_pref && pow2(f->bs_pref) && f->bs_pref > lbs &&
	      f->bs_pref <= 65536 ? f->bs_pref : lbs;
	if (f->bs_max && f->bs_max < lbs) {
		snprintf(out->why, sizeof(out->why), "maximum block size %u is "
			 "below the minimum %u", f->bs_max, lbs);
		return -EINVAL;
	}
	max_rw = o->max_io;
	if (f->bs_max && f->bs_max < max_rw)
		max_rw = f->bs_max;
	max_rw -= max_rw % lbs;
	l->logical_block_size = lbs;
	l->physical_block_size = pbs;
	l->io_min = pbs;
	l->io_opt = f->bs_pref > pbs && pow2(f->bs_pref) ? f->bs_pref : 0;
	l->max_hw_sectors = max_rw >> BS_SECTOR_SHIFT;
	l->max_sectors = l->max_hw_sectors;
	l->discard_granularity = pbs;

	/* Size: whole logical blocks; a tail below one is not reachable. */
	out->size = f->size - f->size % lbs;
	if (!out->size) {
		snprintf(out->why, sizeof(out->why), "export size %llu is below "
			 "one block of %u", (unsigned long long)f->size, lbs);
		return -EINVAL;
	}
	if (out->size != f->size)
		snprintf(out->size_why, sizeof(out->size_why), "server size "
			 "%llu is not whole blocks of %u: the last %llu bytes "
			 "are not used", (unsigned long long)f->size, lbs,
			 (unsigned long long)(f->size - out->size));
	else
		snprintf(out->size_why, sizeof(out->size_why), "%llu bytes "
			 "from the server", (unsigned long long)f->size);

	out->readonly = f->read_only;

	/* FLUSH and FUA (NBD_FLAG_SEND_FLUSH / SEND_FUA). A server without
	 * flush has no cache we could empty: no write cache, so the core
	 * completes FLUSH at once; FUA without flush means nothing either. */
	if (f->can_flush) {
		l->features |= BS_FEAT_WRITE_CACHE;
		snprintf(out->flush_why, sizeof(out->flush_why),
			 "yes: server offers FLUSH (write cache)");
		if (f->can_fua) {
			l->features |= BS_FEAT_FUA;
			snprintf(out->fua_why, sizeof(out->fua_why),
				 "yes: server offers FUA");
		} else {
			snprintf(out->fua_why, sizeof(out->fua_why), "no: server "
				 "does not offer FUA (the core flushes after)");
		}
	} else {
		snprintf(out->flush_why, sizeof(out->flush_why), "no: server "
			 "does not offer FLUSH (no write cache to flush)");
		snprintf(out->fua_why, sizeof(out->fua_why), "no: server does "
			 "not offer FLUSH, so FUA has nothing to force");
	}
	if (f->rotational)
		l->features |= BS_FEAT_ROTATIONAL;

	/* Discard = TRIM (NBD_FLAG_SEND_TRIM). */
	if (f->read_only)
		snprintf(out->trim_why, sizeof(out->trim_why),
			 "no: the export is read-only");
	else if (!f->can_trim)
		snprintf(out->trim_why, sizeof(out->trim_why),
			 "no: server does not offer TRIM");
	else {
		l->max_discard_sectors = NBDC_MAX_ZERO_BYTES >> BS_SECTOR_SHIFT;
		snprintf(out->trim_why, sizeof(out->trim_why),
			 "yes: server offers TRIM");
	}

	/* Write-zeroes (NBD_FLAG_SEND_WRITE_ZEROES). */
	zero = f->can_zero && !f->zero_broken && !f->read_only;
	if (zero)
		l->max_write_zeroes_sectors =
			NBDC_MAX_ZERO_BYTES >> BS_SECTOR_SHIFT;
	snprintf(out->zero_why, sizeof(out->zero_why), "%s",
		 f->read_only ? "no: the export is read-only" :
		 f->zero_broken ? "no: WRITE_ZEROES refused at run time" :
		 !f->can_zero ? "no: server does not offer WRITE_ZEROES "
				"(the core writes zeroes)" :
		 "yes: WRITE_ZEROES (NO_HOLE for NOUNMAP)");

	/*
	 * Unmap zeroing. A zero request without NO_HOLE lets the server punch
	 * holes; that is cheap, unmapping zeroing only where the server says
	 * zeroing is fast (NBD_FLAG_SEND_FAST_ZERO: the server tells fast
	 * zeroes from slow ones, the sense blkstack's own export gives it).
	 * And only where the server can deallocate at all: a server without
	 * TRIM has told us it has no way to give blocks back, so its zeroes
	 * never unmap, however fast they are (the feature promises "may
	 * deallocate", and users check it with du).
	 */
	if (!zero)
		snprintf(out->why, sizeof(out->why), "%s -> no unmap zeroing",
			 out->zero_why);
	else if (!f->can_fast_zero)
		snprintf(out->why, sizeof(out->why), "server does not offer "
			 "fast zero -> no unmap zeroing (zeroes keep NO_HOLE)");
	else if (!f->can_trim)
		snprintf(out->why, sizeof(out->why), "server offers fast zero "
			 "but no TRIM (it cannot deallocate) -> no unmap zeroing");
	else {
		out->wz_unmap = true;
		l->features |= BS_FEAT_WRITE_ZEROES_UNMAP;
		snprintf(out->why, sizeof(out->why), "server offers "
			 "WRITE_ZEROES, fast zero and TRIM -> unmap zeroing "
			 "(zero without NO_HOLE)");
	}

	/* Block status (meta context base:allocation). */
	snprintf(out->status_why, sizeof(out->status_why), "%s",
		 f->base_allocation ? "yes: base:allocation" :
		 "no: server does not offer base:allocation (all data)");

	/* Several connections only where the server promises that a FLUSH
	 * on one covers writes completed on all (NBD_FLAG_CAN_MULTI_CONN). */
	if (f->can_multi_conn) {
		out->conns = o->connections;
		snprintf(out->conns_why, sizeof(out->conns_why), "%u: server "
			 "offers multi-conn (connections = %u)", out->conns,
			 o->connections);
	} else {
		out->conns = 1;
		snprintf(out->conns_why, sizeof(out->conns_why), "1: server "
			 "does not offer multi-conn");
	}
	bs_limits_finish(l);
	return 0;
}
