/* SPDX-License-Identifier: MIT */
/*
 * NBD transmission phase: request validation, execution on the device
 * through the core's asynchronous API, and replies (simple or structured)
 * queued in completion order.
 *
 * Capability mapping (the seed's write-zeroes triple):
 *   WRITE_ZEROES            -> bs_zeroout(flags 0): may unmap
 *   WRITE_ZEROES + NO_HOLE  -> bs_zeroout(BS_ZERO_NOUNMAP)
 *   ... + FAST_ZERO         -> only when write_zeroes_unmap(dev) holds now,
 *                              with BS_ZERO_NOFALLBACK; else NBD_ENOTSUP at
 *                              once, nothing written
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bufpool.h>
#include <blkstack/zero.h>

#include "export/nbd/internal.h"

/* Most descriptors in one block status reply. */
#define NBD_MAX_EXTENTS 1024

struct nbd_req {
	struct nbd_session *s;
	uint16_t type, flags;
	uint64_t cookie, offset;
	uint32_t len;
	void *buf;		/* from the thread's pool (bufpool.h) */
	size_t acct;		/* bytes of buf counted in the session */
	size_t got;		/* payload bytes received */
	bool in_dev;		/* given to the device, not back yet */
	size_t dev_bytes;	/* of acct, counted in the device meanwhile */
	struct bs_req breq;
};

static const char *cmd_name(uint16_t type)
{
	static const char *const names[] = {
		"read", "write", "disc", "flush", "trim", "cache",
		"write-zeroes", "block-status",
	};
	return type < sizeof(names) / sizeof(names[0]) ? names[type] : "?";
}

/* ---- flags and sizes ------------------------------------------------------ */

uint16_t nbd_tx_flags(const struct nbd_session *s,
		      const struct bs_export_unit *u)
{
	struct bs_caps c;
	uint16_t f = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
		     NBD_FLAG_SEND_CACHE |
		     /* one device behind every connection; FLUSH is device-wide */
		     NBD_FLAG_CAN_MULTI_CONN;

	/* read at negotiation: a change applies to the next connection */
	bs_dev_caps(u->dev, &c);
	if (u->readonly) {
		/* nothing that writes is offered: those commands get EPERM */
		f |= NBD_FLAG_READ_ONLY;
	} else {
		/* FUA is native or emulated by the core, zeroing native or
		 * written zero buffers: both always offered */
		f |= NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_WRITE_ZEROES;
		if (c.discard)
			f |= NBD_FLAG_SEND_TRIM;
		if (c.fast_zero)
			f |= NBD_FLAG_SEND_FAST_ZERO;
	}
	/* reads always go out as one data chunk, so DF always holds */
	if (s->structured)
		f |= NBD_FLAG_SEND_DF;
	if (c.rotational)
		f |= NBD_FLAG_ROTATIONAL;
	return f;
}

void nbd_tx_block_sizes(const struct bs_export_unit *u, uint32_t *min,
			uint32_t *pref, uint32_t *max)
{
	struct bs_caps c;
	uint32_t p;

	bs_dev_caps(u->dev, &c);
	p = c.physical_block_size;
	/* preferred: a power of two, at least the minimum and 512 */
	if (p < c.logical_block_size || (p & (p - 1)))
		p = c.logical_block_size;
	if (c.io_opt && !(c.io_opt & (c.io_opt - 1)) && c.io_opt > p &&
	    c.io_opt <= NBD_MAX_PAYLOAD)
		p = c.io_opt;
	if (p < 512)
		p = 512;
	/*
	 * Any offset and length: the core read-modify-writes partial blocks
	 * (bs_submit_bytes), as nbdkit and qemu-nbd accept them too; the
	 * preferred size tells clients what avoids that.
	 */
	if (min)
		*min = 1;
	if (pref)
		*pref = p;
	/* the core splits by max_sectors: any payload up to this is fine */
	if (max)
		*max = NBD_MAX_PAYLOAD;
}

/* ---- replies ---------------------------------------------------------------- */

static void reply_ok(struct nbd_session *s, uint64_t cookie)
{
	uint8_t h[NBD_SIMPLE_HDR_SIZE];

	nbd_put32(h, NBD_SIMPLE_REPLY_MAGIC);
	nbd_put32(h + 4, 0);
	nbd_put64(h + 8, cookie);
	nbd_out_push(s, h, sizeof(h), NULL, 0, 0);
}

static void chunk_hdr(uint8_t *h, uint16_t flags, uint16_t type,
		      uint64_t cookie, uint32_t len)
{
	nbd_put32(h, NBD_STRUCTURED_REPLY_MAGIC);
	nbd_put16(h + 4, flags);
	nbd_put16(h + 6, type);
	nbd_put64(h + 8, cookie);
	nbd_put32(h + 16, len);
}

static void reply_error(struct nbd_session *s, uint64_t cookie, uint16_t type,
			uint32_t err, const char *msg)
{
	uint8_t h[NBD_CHUNK_HDR_SIZE + 6 + 128];
	size_t ml = msg ? strlen(msg) : 0;

	s->stats.errors++;
	if (!s->structured) {
		/* simple: error only; a failed read carries no data */
		nbd_put32(h, NBD_SIMPLE_REPLY_MAGIC);
		nbd_put32(h + 4, err);
		nbd_put64(h + 8, cookie);
		nbd_out_push(s, h, NBD_SIMPLE_HDR_SIZE, NULL, 0, 0);
		return;
	}
	if (ml > 128)
		ml = 128;
	chunk_hdr(h, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_ERROR, cookie,
		  (uint32_t)(6 + ml));
	nbd_put32(h + NBD_CHUNK_HDR_SIZE, err);
	nbd_put16(h + NBD_CHUNK_HDR_SIZE + 4, (uint16_t)ml);
	memcpy(h + NBD_CHUNK_HDR_SIZE + 6, msg, ml);
	nbd_out_push(s, h, NBD_CHUNK_HDR_SIZE + 6 + ml, NULL, 0, 0);
	(void)type;
}

static void reply_errno(struct nbd_session *s, struct nbd_req *r, int err)
{
	bool fast = r->type == NBD_CMD_WRITE_ZEROES &&
		    (r->flags & NBD_CMD_FLAG_FAST_ZERO);
	uint32_t nerr = nbd_errno(err);
	char msg[128];

	snprintf(msg, sizeof(msg), "%s: %s", cmd_name(r->type),
		 strerror(-err));
	/*
	 * NBD_ENOTSUP answers a fast zero that cannot be fast, and nothing
	 * else: a plain WRITE_ZEROES must not get it once fast zero was
	 * offered, and no other command should. A device's "not supported"
	 * is then an I/O failure for the client.
	 */
	if (nerr == NBD_ENOTSUP && !fast)
		nerr = NBD_EIO;
	/* a refused fast zero is an answer, not a failure worth a log line */
	if (!(err == -EOPNOTSUPP && fast))
		nbd_log(s, "%s %llu+%u: %s", cmd_name(r->type),
			(unsigned long long)r->offset, r->len, strerror(-err));
	reply_error(s, r->cookie, r->type, nerr, msg);
}

/* ---- completion ------------------------------------------------------------ */

/*
 * @r goes to the device (@in) or is back from it, with the budget bytes
 * it holds (r->acct): those wait for the device, not for the client, and
 * while all the session holds is in a device the budget's watchdog does
 * not take it for stalled. Bytes outside (a reply not read, a payload
 * that stops) are the client's whatever else is in a device: requests
 * it goes on sending do not keep an unread reply alive (budget.h). Per
 * request: a zeroout's pieces and a read-modify-write's steps are one
 * request in the device until the core calls back.
 */
static void req_dev(struct nbd_req *r, bool in)
{
	struct nbd_session *s = r->s;

	if (r->in_dev == in)
		return;
	r->in_dev = in;
	if (!s->budget)
		return;
	if (in) {
		r->dev_bytes = r->acct;
		bs_budget_dev_begin(&s->bh, r->dev_bytes);
	} else {
		bs_budget_dev_end(&s->bh, r->dev_bytes);
	}
}

static void req_free(struct nbd_req *r)
{
	struct nbd_session *s = r->s;

	req_dev(r, false);	/* never left counted in the device */
	s->inflight_bytes -= r->acct;
	nbd_budget_give(s, r->acct);
	bs_buf_put(r->buf, r->acct);
	free(r);
}

static void finish(struct nbd_req *r, int result)
{
	struct nbd_session *s = r->s;

	/* first: an orphan's session may go with the last request */
	req_dev(r, false);
	s->inflight_reqs--;
	if (s->orphan) {
		req_free(r);
		if (!s->inflight_reqs)
			nbd_session_destroy(s);
		return;
	}
	if (result) {
		reply_errno(s, r, result);
	} else if (r->type == NBD_CMD_READ) {
		uint8_t h[NBD_CHUNK_HDR_SIZE + 8];
		void *data = r->buf;
		size_t acct = r->acct;

		/* the buffer moves to the reply, its accounting with it */
		r->buf = NULL;
		s->inflight_bytes -= r->acct;
		r->acct = 0;
		s->stats.bytes_read += r->len;
		if (s->structured) {
			chunk_hdr(h, NBD_REPLY_FLAG_DONE,
				  NBD_REPLY_TYPE_OFFSET_DATA, r->cookie,
				  r->len + 8);
			nbd_put64(h + NBD_CHUNK_HDR_SIZE, r->offset);
			nbd_out_push(s, h, sizeof(h), data, r->len, acct);
		} else {
			nbd_put32(h, NBD_SIMPLE_REPLY_MAGIC);
			nbd_put32(h + 4, 0);
			nbd_put64(h + 8, r->cookie);
			nbd_out_push(s, h, NBD_SIMPLE_HDR_SIZE, data, r->len,
				     acct);
		}
	} else {
		if (r->type == NBD_CMD_WRITE)
			s->stats.bytes_written += r->len;
		reply_ok(s, r->cookie);
	}
	req_free(r);
	nbd_kick(s);
}

static void io_done(struct bs_req *breq)
{
	struct nbd_req *r = breq->priv;

	/*
	 * TRIM is a hint the server may ignore: a device that stopped
	 * discarding since negotiation is not an error for the client.
	 */
	if (r->type == NBD_CMD_TRIM && breq->result == -EOPNOTSUPP)
		finish(r, 0);
	else
		finish(r, breq->result);
}

static void zero_done(void *arg, int result)
{
	finish(arg, result);
}

/* ---- block status ---------------------------------------------------------- */

struct extents {
	uint8_t *buf;		/* descriptors after the chunk header */
	unsigned n, max;
	uint32_t lbs;
	bool pending;
	uint64_t pstart, plen;
	uint32_t pflags;
};

static void ext_emit(struct extents *e)
{
	uint8_t *d = e->buf + 8 * e->n;

	nbd_put32(d, (uint32_t)e->plen);
	nbd_put32(d + 4, e->pflags);
	e->n++;
	e->pending = false;
}

static int ext_cb(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct extents *e = arg;
	uint32_t f = ((flags & BS_EXT_HOLE) ? NBD_STATE_HOLE : 0) |
		     ((flags & BS_EXT_ZERO) ? NBD_STATE_ZERO : 0);

	if (!len)
		return 0;
	if (e->pending) {
		/*
		 * Same status: one descriptor. A boundary off the minimum
		 * block size is not allowed: merge, keeping only what holds
		 * for both (a status of 0 is always safe).
		 */
		if (f == e->pflags || (e->pstart + e->plen) % e->lbs) {
			e->pflags &= f;
			e->plen += len;
			return 0;
		}
		ext_emit(e);
		if (e->n == e->max)
			return 1;
	}
	e->pending = true;
	e->pstart = off;
	e->plen = len;
	e->pflags = f;
	return 0;
}

static void block_status(struct nbd_req *r)
{
	struct nbd_session *s = r->s;
	/* merge below the device's own block: it has no finer status */
	struct extents e = { .lbs = bs_dev_limits(s->dev)->logical_block_size };
	size_t hl = NBD_CHUNK_HDR_SIZE + 4;
	uint8_t *msg;
	int err;

	e.max = (r->flags & NBD_CMD_FLAG_REQ_ONE) ? 1 : NBD_MAX_EXTENTS;
	msg = malloc(hl + 8 * (size_t)e.max);
	if (!msg) {
		finish(r, -ENOMEM);
		return;
	}
	e.buf = msg + hl;
	/* synchronous, but a driver may wait for a remote server in it */
	req_dev(r, true);
	err = bs_block_status(s->dev, r->offset, r->len, ext_cb, &e);
	req_dev(r, false);
	if (!err && e.pending && e.n < e.max)
		ext_emit(&e);
	if (!err && !e.n)
		err = -EIO; /* a device that described nothing */
	if (err) {
		free(msg);
		finish(r, err);
		return;
	}
	chunk_hdr(msg, NBD_REPLY_FLAG_DONE, NBD_REPLY_TYPE_BLOCK_STATUS,
		  r->cookie, (uint32_t)(4 + 8 * e.n));
	nbd_put32(msg + NBD_CHUNK_HDR_SIZE, NBD_META_ID_ALLOCATION);
	s->inflight_reqs--;
	nbd_out_push(s, msg, hl + 8 * e.n, NULL, 0, 0);
	free(msg);
	req_free(r);
}

/* ---- execution ------------------------------------------------------------- */

static void execute(struct nbd_req *r)
{
	struct nbd_session *s = r->s;
	struct bs_dev *dev = s->dev;
	unsigned zf;
	int err;

	/* what goes to the device is marked so until finish() (req_dev) */
	switch (r->type) {
	/* byte granular: partial blocks are read-modify-written below */
	case NBD_CMD_READ:
		bs_req_init(&r->breq, BS_OP_READ, 0, r->offset, r->len, r->buf,
			    io_done, r);
		req_dev(r, true);
		bs_submit_bytes(dev, &r->breq);
		break;
	case NBD_CMD_WRITE:
		bs_req_init(&r->breq, BS_OP_WRITE,
			    (r->flags & NBD_CMD_FLAG_FUA) ? BS_REQ_FUA : 0,
			    r->offset, r->len, r->buf, io_done, r);
		req_dev(r, true);
		bs_submit_bytes(dev, &r->breq);
		break;
	case NBD_CMD_FLUSH:
		bs_req_init(&r->breq, BS_OP_FLUSH, 0, 0, 0, NULL, io_done, r);
		req_dev(r, true);
		bs_submit(dev, &r->breq);
		break;
	case NBD_CMD_TRIM:
		/* only the whole blocks inside; partial ones keep their data */
		bs_req_init(&r->breq, BS_OP_DISCARD,
			    (r->flags & NBD_CMD_FLAG_FUA) ? BS_REQ_FUA : 0,
			    r->offset, r->len, NULL, io_done, r);
		req_dev(r, true);
		bs_submit_bytes(dev, &r->breq);
		break;
	case NBD_CMD_WRITE_ZEROES:
		zf = (r->flags & NBD_CMD_FLAG_NO_HOLE) ? BS_ZERO_NOUNMAP : 0;
		/* the core flushes once after it where FUA is not native */
		if (r->flags & NBD_CMD_FLAG_FUA)
			zf |= BS_ZERO_FUA;
		if (r->flags & NBD_CMD_FLAG_FAST_ZERO) {
			/* fast only where the stack zeroes by deallocating */
			if (!bs_dev_write_zeroes_unmap(dev)) {
				finish(r, -EOPNOTSUPP);
				return;
			}
			zf |= BS_ZERO_NOFALLBACK;
		}
		/* partial blocks: RMW with zeroes; with FAST_ZERO refused */
		req_dev(r, true);
		err = bs_zeroout_bytes(dev, r->offset, r->len, zf, zero_done, r);
		if (err)
			finish(r, err);
		break;
	case NBD_CMD_CACHE:
		/* a hint: every read is served from the device anyway */
		finish(r, 0);
		break;
	case NBD_CMD_BLOCK_STATUS:
		block_status(r);
		break;
	default:
		finish(r, -EINVAL);
		break;
	}
}

/* ---- request headers -------------------------------------------------------- */

static uint32_t validate(const struct nbd_session *s, uint16_t type,
			 uint16_t flags, uint64_t off, uint32_t len,
			 const char **msg)
{
	uint16_t allowed = 0;
	uint64_t size = bs_dev_size(s->dev);
	bool writes = type == NBD_CMD_WRITE || type == NBD_CMD_TRIM ||
		      type == NBD_CMD_WRITE_ZEROES;

	if (writes && s->ro) {
		*msg = "read-only export";
		return NBD_EPERM;
	}
	if (s->tflags & NBD_FLAG_SEND_FUA)
		allowed |= NBD_CMD_FLAG_FUA; /* valid on every command */
	switch (type) {
	case NBD_CMD_READ:
		if (s->tflags & NBD_FLAG_SEND_DF)
			allowed |= NBD_CMD_FLAG_DF;
		break;
	case NBD_CMD_WRITE_ZEROES:
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		if (s->tflags & NBD_FLAG_SEND_FAST_ZERO)
			allowed |= NBD_CMD_FLAG_FAST_ZERO;
		break;
	case NBD_CMD_BLOCK_STATUS:
		allowed |= NBD_CMD_FLAG_REQ_ONE;
		break;
	case NBD_CMD_WRITE:
	case NBD_CMD_FLUSH:
	case NBD_CMD_TRIM:
	case NBD_CMD_CACHE:
		break;
	default:
		*msg = "unknown command";
		return NBD_EINVAL;
	}
	/* FAST_ZERO not offered included: EINVAL, as the protocol asks */
	if (flags & ~allowed) {
		*msg = "command flag not valid for this command";
		return NBD_EINVAL;
	}
	if (type == NBD_CMD_FLUSH) {
		if (off || len) {
			*msg = "flush needs offset and length 0";
			return NBD_EINVAL;
		}
		return 0;
	}
	if (!len) {
		*msg = "zero-length request";
		return NBD_EINVAL;
	}
	/* CACHE moves no payload: any in-bounds length is served */
	if ((type == NBD_CMD_READ || type == NBD_CMD_WRITE) &&
	    len > NBD_MAX_PAYLOAD) {
		/*
		 * Beyond the advertised maximum: EINVAL; EOVERFLOW is only
		 * for a read that cannot be sent unfragmented (DF).
		 */
		*msg = "length exceeds the maximum block size";
		return type == NBD_CMD_READ && (flags & NBD_CMD_FLAG_DF) ?
			       NBD_EOVERFLOW : NBD_EINVAL;
	}
	if (off + len < off) {
		*msg = "offset + length overflows";
		return NBD_EINVAL;
	}
	if (off + len > size) {
		*msg = "beyond the end of the export";
		return type == NBD_CMD_WRITE || type == NBD_CMD_WRITE_ZEROES ?
			       NBD_ENOSPC : NBD_EINVAL;
	}
	if ((off | len) & (s->min_block - 1)) {
		*msg = "not aligned to the minimum block size";
		return NBD_EINVAL;
	}
	if (type == NBD_CMD_TRIM && !(s->tflags & NBD_FLAG_SEND_TRIM)) {
		*msg = "trim was not offered";
		return NBD_EINVAL;
	}
	if (type == NBD_CMD_BLOCK_STATUS && !s->meta_alloc) {
		*msg = "no metadata context negotiated";
		return NBD_EINVAL;
	}
	return 0;
}

bool nbd_tx_header(struct nbd_session *s)
{
	const uint8_t *h = s->hdr;
	uint32_t magic = nbd_get32(h), len = nbd_get32(h + 24), err;
	uint16_t flags = nbd_get16(h + 4), type = nbd_get16(h + 6);
	uint64_t cookie = nbd_get64(h + 8), off = nbd_get64(h + 16);
	const char *msg = NULL;
	struct nbd_req *r;
	size_t need = 0;

	if (magic != NBD_REQUEST_MAGIC) {
		nbd_end(s, "bad request magic 0x%08x", magic);
		return false;
	}
	if (type == NBD_CMD_DISC) {
		/* no reply; finish what is in flight, then close */
		s->have = 0;
		s->disc = true;
		s->in = IN_NONE;
		nbd_kick(s);
		return false;
	}
	err = validate(s, type, flags, off, len, &msg);
	if (err) {
		s->have = 0;
		nbd_log(s, "%s %llu+%u flags 0x%x: %s", cmd_name(type),
			(unsigned long long)off, len, flags, msg);
		if (type == NBD_CMD_WRITE && len) {
			/* read past the payload, then answer */
			s->in = IN_REQ_SKIP;
			s->skip_left = len;
			s->skip_cookie = cookie;
			s->skip_type = type;
			s->skip_err = err;
			snprintf(s->skip_msg, sizeof(s->skip_msg), "%s", msg);
			return true;
		}
		reply_error(s, cookie, type, err, msg);
		return true;
	}
	if (type == NBD_CMD_READ || type == NBD_CMD_WRITE)
		need = ((size_t)len + 4095) & ~(size_t)4095;
	if (!nbd_has_room(s, need))
		return false;
	/* over the server-wide budget: wait at this header for a kick */
	if (!nbd_budget_take(s, need))
		return false;
	s->have = 0;
	r = calloc(1, sizeof(*r));
	if (r && need) {
		/* page aligned: drivers may do direct I/O from it; pooled:
		 * warm, already mapped, and no heap left at its high mark */
		r->buf = bs_buf_get(need);
		if (!r->buf) {
			free(r);
			r = NULL;
		}
	}
	if (!r) {
		nbd_budget_give(s, need);
		if (type == NBD_CMD_WRITE) {
			s->in = IN_REQ_SKIP;
			s->skip_left = len;
			s->skip_cookie = cookie;
			s->skip_type = type;
			s->skip_err = NBD_ENOMEM;
			snprintf(s->skip_msg, sizeof(s->skip_msg),
				 "out of memory");
			return true;
		}
		reply_error(s, cookie, type, NBD_ENOMEM, "out of memory");
		return true;
	}
	r->s = s;
	r->type = type;
	r->flags = flags;
	r->cookie = cookie;
	r->offset = off;
	r->len = len;
	r->acct = need;
	s->inflight_bytes += need;
	s->inflight_reqs++;
	s->stats.requests++;
	if (type == NBD_CMD_WRITE) {
		s->cur = r;
		s->in = IN_REQ_PAYLOAD;
		return true;
	}
	execute(r);
	return true;
}

size_t nbd_tx_payload_room(struct nbd_session *s, uint8_t **dst)
{
	struct nbd_req *r = s->cur;

	*dst = (uint8_t *)r->buf + r->got;
	return r->len - r->got;
}

void nbd_tx_payload_add(struct nbd_session *s, size_t n)
{
	struct nbd_req *r = s->cur;

	r->got += n;
	bs_budget_progress(&s->bh);
	if (r->got < r->len)
		return;
	/* complete payload: only now does anything reach the device */
	s->cur = NULL;
	s->in = IN_REQ_HDR;
	execute(r);
}

void nbd_tx_skipped(struct nbd_session *s)
{
	s->in = IN_REQ_HDR;
	reply_error(s, s->skip_cookie, s->skip_type, s->skip_err, s->skip_msg);
}

void nbd_tx_drop_partial(struct nbd_session *s)
{
	struct nbd_req *r = s->cur;

	if (!r)
		return;
	s->cur = NULL;
	s->inflight_reqs--;
	req_free(r);
}
