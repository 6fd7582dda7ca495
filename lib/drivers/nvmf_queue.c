/* SPDX-License-Identifier: MIT */
/*
 * One NVMe/TCP queue of the nvmf driver (see nvmf.h): a non-blocking
 * socket on the loop (bs_fdpump), the ICReq/ICResp exchange, command
 * capsules (with in-capsule data up to what the controller accepts),
 * H2CData answering R2T (one R2T per command at a time, each for the next
 * bytes not yet sent; the H2CData is copied out only while less than
 * NVQ_OUT_HIGH waits for the socket), C2HData into the request's buffers
 * in order (a C2HData with SUCCESS and LAST_PDU ends its command),
 * capsule responses, header and data digests (CRC32C). A command ends in
 * success only with all its data moved; its cid carries a generation
 * (nvmf.h), so a completion for a command that ended is refused even
 * when the slot is busy again. A malformed PDU, an R2T out of turn, a
 * success without all the data, a completion for no command in flight,
 * a bad digest or a C2HTermReq loses the queue (the owner hears it
 * through event()).
 *
 * Wire facts follow the NVMe/TCP transport binding: an 8-byte common
 * header (type, flags, hlen, pdo, plen), a header digest after hlen bytes
 * when agreed, data at pdo, a data digest after the data.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <blkstack/nvme.h>
#include "drivers/nvmf.h"
#include "core/crc32c.h"


#define IN_CHUNK 65536
/* what a PDU may hold beside its data: header, digests, padding to PDO */
#define PDU_OVERHEAD (24 + 4 + 255 + 4)
#define PDU_MIN_MAX 4096

/*
 * The largest PDU the target may send: a C2HData with all of the
 * largest read sent on the queue (at least a few KiB for the others),
 * so the receive buffer never grows past what a request holds.
 */
static uint32_t pdu_max(const struct nvq *q)
{
	return (q->max_in > PDU_MIN_MAX ? q->max_in : PDU_MIN_MAX) +
	       PDU_OVERHEAD;
}

static int q_err(struct nvq *q, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int q_err(struct nvq *q, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(q->err, sizeof(q->err), fmt, ap);
	va_end(ap);
	return err;
}

static int buf_reserve(struct nvq_buf *b, size_t more)
{
	uint8_t *p;
	size_t cap;

	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (b->len + more <= b->cap)
		return 0;
	if (b->off) {
		memmove(b->p, b->p + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->len + more <= b->cap)
			return 0;
	}
	cap = b->cap ? b->cap : 65536;
	while (cap < b->len + more)
		cap *= 2;
	p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

static int put(struct nvq *q, const void *p, size_t n)
{
	int err = buf_reserve(&q->out, n);

	if (err)
		return err;
	memcpy(q->out.p + q->out.len, p, n);
	q->out.len += n;
	return 0;
}

static uint32_t crc_iov(uint32_t crc, const struct iovec *iov, int cnt,
			size_t off, size_t len)
{
	int i;

	for (i = 0; i < cnt && len; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > len)
			l = len;
		crc = bs_crc32c_update(crc, (uint8_t *)iov[i].iov_base + off,
				       l);
		off = 0;
		len -= l;
	}
	return crc;
}

static int put_iov(struct nvq *q, const struct iovec *iov, int cnt,
		   size_t off, size_t len)
{
	int i, err;

	for (i = 0; i < cnt && len; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > len)
			l = len;
		if ((err = put(q, (uint8_t *)iov[i].iov_base + off, l)))
			return err;
		off = 0;
		len -= l;
	}
	return len ? -EINVAL : 0;
}

static void copy_to_iov(struct iovec *iov, int cnt, size_t off,
			const uint8_t *p, size_t len)
{
	int i;

	for (i = 0; i < cnt && len; i++) {
		size_t l = iov[i].iov_len;

		if (off >= l) {
			off -= l;
			continue;
		}
		l -= off;
		if (l > len)
			l = len;
		memcpy((uint8_t *)iov[i].iov_base + off, p, l);
		p += l;
		len -= l;
		off = 0;
	}
}

/*
 * One PDU: header @hdr of @hlen bytes (common header filled by the
 * caller except hlen/pdo/plen/flags digests), then @len data bytes from
 * @iov at @off.
 */
static int put_pdu(struct nvq *q, uint8_t *hdr, uint8_t hlen,
		   const struct iovec *iov, int cnt, size_t off, size_t len)
{
	uint32_t hd = q->hdgst ? 4 : 0, dd = q->ddgst && len ? 4 : 0;
	uint32_t pdo = 0, pad = 0, plen;
	uint8_t z[4] = { 0 }, dg[4];
	int err;

	if (len) {
		uint32_t align = (q->cpda + 1) * 4;

		pdo = hlen + hd;
		pad = (align - pdo % align) % align;
		pdo += pad;
	}
	plen = (len ? pdo + (uint32_t)len + dd : hlen + hd);
	if (q->hdgst)
		hdr[1] |= BS_NVME_TCP_F_HDGST;
	if (dd)
		hdr[1] |= BS_NVME_TCP_F_DDGST;
	hdr[2] = hlen;
	hdr[3] = (uint8_t)pdo;
	put32(hdr + 4, plen);
	if ((err = put(q, hdr, hlen)))
		return err;
	if (hd) {
		put32(dg, bs_crc32c(hdr, hlen));
		if ((err = put(q, dg, 4)))
			return err;
	}
	if (!len)
		return 0;
	while (pad) {
		uint32_t n = pad > 4 ? 4 : pad;

		if ((err = put(q, z, n)))
			return err;
		pad -= n;
	}
	if ((err = put_iov(q, iov, cnt, off, len)))
		return err;
	if (dd) {
		put32(dg, ~crc_iov(~0u, iov, cnt, off, len));
		if ((err = put(q, dg, 4)))
			return err;
	}
	return 0;
}

/* ---- the pump ------------------------------------------------------------ */

static int q_get_fd(void *lib)
{
	struct nvq *q = lib;

	return q->state == NVQ_CLOSED ? -1 : q->fd;
}

static uint32_t q_events(void *lib)
{
	struct nvq *q = lib;

	if (q->state == NVQ_CONNECTING)
		return EPOLLOUT;
	return EPOLLIN | (q->out.len > q->out.off || q->r2t_pending ?
			  EPOLLOUT : 0);
}

static int flush_out(struct nvq *q)
{
	while (q->out.len > q->out.off) {
		ssize_t n = send(q->fd, q->out.p + q->out.off,
				 q->out.len - q->out.off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return q_err(q, -errno, "send: %s", strerror(errno));
		}
		q->out.off += (size_t)n;
	}
	q->out.off = q->out.len = 0;
	return 0;
}

static void slot_finish(struct nvq *q, struct nvq_slot *s, const uint8_t *cqe,
			int err)
{
	nvq_done_fn done = s->done;
	void *arg = s->arg;

	if (s->r2t_left) {
		/* ended before its R2T was answered (an error status) */
		s->r2t_left = 0;
		q->r2t_pending--;
	}
	s->busy = false;
	s->gen = (s->gen + 1) & 0xf;
	q->inflight--;
	done(arg, cqe, err);
}

/*
 * An R2T: the command's next @len bytes from @off. We ask for one R2T
 * outstanding per command (ICReq MAXR2T 0) and answer each in full, in
 * order: so one is taken only when the last is answered and it starts at
 * the first byte not yet sent. Anything else (a repeated R2T, a second
 * one, an overlap, a gap) is a protocol error that loses the queue: it
 * cannot make us send a byte twice.
 */
static int take_r2t(struct nvq *q, struct nvq_slot *s, uint16_t cid,
		    uint16_t ttag, uint32_t off, uint32_t len)
{
	if (!s->out || !len || (uint64_t)off + len > s->len)
		return q_err(q, -EPROTO, "R2T for cid %u outside its data "
			     "(%u+%u of %u)", cid, off, len, s->len);
	if (s->r2t_left)
		return q_err(q, -EPROTO, "R2T for cid %u while one is being "
			     "answered (MAXR2T is 1)", cid);
	if (off != s->sent)
		return q_err(q, -EPROTO, "R2T for cid %u at offset %u, %u "
			     "bytes sent", cid, off, s->sent);
	s->ttag = ttag;
	s->r2t_left = len;
	q->r2t_pending++;
	return 0;
}

/*
 * Answer R2Ts with H2CData while less than NVQ_OUT_HIGH waits for the
 * socket: what R2Ts ask for is never copied out faster than the target
 * takes it. One command's R2T is answered whole before the next.
 */
static int fill_out(struct nvq *q)
{
	uint8_t h[24];
	unsigned idle = 0;
	int err;

	while (q->r2t_pending && q->out.len - q->out.off < NVQ_OUT_HIGH) {
		struct nvq_slot *s = &q->slots[q->r2t_cur];
		uint32_t n;

		if (!s->busy || !s->r2t_left) {
			/* a whole turn with none: cannot be, never spin */
			if (++idle > q->depth)
				break;
			q->r2t_cur = (q->r2t_cur + 1) % q->depth;
			continue;
		}
		idle = 0;
		n = s->r2t_left > q->maxh2cdata ? q->maxh2cdata : s->r2t_left;
		memset(h, 0, sizeof(h));
		h[0] = BS_NVME_TCP_H2C_DATA;
		if (n == s->r2t_left)
			h[1] = BS_NVME_TCP_F_DATA_LAST;
		memcpy(h + 8, s->sqe + 2, 2);		/* the cid */
		put16(h + 10, s->ttag);
		put32(h + 12, s->sent);
		put32(h + 16, n);
		if ((err = put_pdu(q, h, 24, s->out, s->outcnt, s->sent, n)))
			return err;
		s->sent += n;
		s->r2t_left -= n;
		if (!s->r2t_left)
			q->r2t_pending--;
	}
	return 0;
}

/* Queue H2CData and send what the socket takes. */
static int pump_out(struct nvq *q)
{
	int err;

	for (;;) {
		if ((err = fill_out(q)))
			return err;
		if (q->out.len == q->out.off)
			return 0;
		if ((err = flush_out(q)))
			return err;
		/* flush_out empties the buffer only when all went */
		if (q->out.len || !q->r2t_pending)
			return 0;
	}
}

/* The command in flight with @cid (slot and generation), or NULL. */
static struct nvq_slot *slot_of(struct nvq *q, uint16_t cid)
{
	struct nvq_slot *s;

	if (nvq_cid_slot(cid) >= q->depth)
		return NULL;
	s = &q->slots[nvq_cid_slot(cid)];
	if (!s->busy || get16(s->sqe + 2) != cid)
		return NULL;
	return s;
}

/* One whole PDU at @p (plen bytes). */
static int handle_pdu(struct nvq *q, uint8_t *p, uint32_t plen)
{
	uint8_t type = p[0], flags = p[1], hlen = p[2], pdo = p[3];
	uint32_t hd = (flags & BS_NVME_TCP_F_HDGST) ? 4 : 0, dd, dlen = 0;
	struct nvq_slot *s;
	uint16_t cid;

	if (hlen < 8 || hlen + hd > plen)
		return q_err(q, -EPROTO, "PDU type %u: hlen %u, plen %u", type,
			     hlen, plen);
	/* digests as agreed in ICResp, on every PDU after it but the
	 * C2HTermReq (which never has them); a flag missing is an error,
	 * as for Linux's host, not a PDU left unchecked */
	if (q->state == NVQ_READY && type != BS_NVME_TCP_C2H_TERM &&
	    !hd != !q->hdgst)
		return q_err(q, -EPROTO, "PDU type %u: header digest flag %s, "
			     "digests %s", type, hd ? "set" : "clear",
			     q->hdgst ? "agreed" : "not agreed");
	if (hd && q->hdgst && get32(p + hlen) != bs_crc32c(p, hlen))
		return q_err(q, -EPROTO, "PDU type %u: header digest mismatch",
			     type);
	switch (type) {
	case BS_NVME_TCP_ICRESP:
		if (q->state != NVQ_IC || hlen != 128)
			return q_err(q, -EPROTO, "unexpected ICResp");
		if (get16(p + 8) != 0)
			return q_err(q, -EPROTO, "ICResp PFV %u", get16(p + 8));
		/* CPDA is 0's based dwords, 0..31 (PDO fits in a byte) */
		if (p[10] > 31)
			return q_err(q, -EPROTO, "ICResp CPDA %u", p[10]);
		q->cpda = p[10];
		q->hdgst = q->hdgst && (p[11] & 1);
		q->ddgst = q->ddgst && (p[11] & 2);
		q->maxh2cdata = get32(p + 12);
		if (q->maxh2cdata < 4096 || q->maxh2cdata % 4)
			return q_err(q, -EPROTO, "ICResp MAXH2CDATA %u",
				     q->maxh2cdata);
		q->state = NVQ_READY;
		q->event(q->owner, q, 0);
		return 0;
	case BS_NVME_TCP_C2H_TERM:
		return q_err(q, -ECONNRESET, "C2HTermReq: FES 0x%x",
			     get16(p + 8));
	case BS_NVME_TCP_RSP:
		if (hlen != 24)
			return q_err(q, -EPROTO, "capsule response hlen %u", hlen);
		cid = get16(p + 8 + 12);
		if (!(s = slot_of(q, cid)))
			return q_err(q, -EPROTO, "response for unknown cid %u",
				     cid);
		/* success only with all the data moved, either way */
		if (!(get16(p + 8 + 14) >> 1 & 0x7ff) &&
		    ((s->in && s->got != s->len) ||
		     (s->out && s->sent != s->len)))
			return q_err(q, -EPROTO, "response for cid %u: success "
				     "with %u of %u bytes %s", cid,
				     s->in ? s->got : s->sent, s->len,
				     s->in ? "received" : "sent");
		slot_finish(q, s, p + 8, 0);
		return 0;
	case BS_NVME_TCP_R2T:
		if (hlen != 24)
			return q_err(q, -EPROTO, "R2T hlen %u", hlen);
		cid = get16(p + 8);
		if (!(s = slot_of(q, cid)))
			return q_err(q, -EPROTO, "R2T for unknown cid %u", cid);
		return take_r2t(q, s, cid, get16(p + 10), get32(p + 12),
				get32(p + 16));
	case BS_NVME_TCP_C2H_DATA: {
		uint32_t off, len;

		if (hlen != 24)
			return q_err(q, -EPROTO, "C2HData hlen %u", hlen);
		cid = get16(p + 8);
		off = get32(p + 12);
		len = get32(p + 16);
		dd = (flags & BS_NVME_TCP_F_DDGST) ? 4 : 0;
		if (!(s = slot_of(q, cid)) || !s->in)
			return q_err(q, -EPROTO, "C2HData for cid %u not "
				     "reading", cid);
		if (pdo < hlen + hd || (uint64_t)pdo + len + dd != plen ||
		    (uint64_t)off + len > s->len)
			return q_err(q, -EPROTO, "C2HData cid %u: offset %u "
				     "length %u pdo %u plen %u of %u", cid, off,
				     len, pdo, plen, s->len);
		/* in order, as Linux's host reads it: no gap, no overlap */
		if (off != s->got)
			return q_err(q, -EPROTO, "C2HData cid %u at offset %u, "
				     "%u bytes received", cid, off, s->got);
		if (len && !dd != !q->ddgst)
			return q_err(q, -EPROTO, "C2HData cid %u: data digest "
				     "flag %s, digests %s", cid,
				     dd ? "set" : "clear",
				     q->ddgst ? "agreed" : "not agreed");
		dlen = len;
		if (dd && q->ddgst && get32(p + pdo + len) !=
		    bs_crc32c(p + pdo, len))
			return q_err(q, -EPROTO, "C2HData cid %u: data digest "
				     "mismatch", cid);
		copy_to_iov(s->in, s->incnt, off, p + pdo, dlen);
		s->got += dlen;
		if (flags & BS_NVME_TCP_F_DATA_SUCCESS) {
			uint8_t cqe[16] = { 0 };

			if (!(flags & BS_NVME_TCP_F_DATA_LAST))
				return q_err(q, -EPROTO, "C2HData cid %u: SUCCESS "
					     "without LAST_PDU", cid);
			if (s->got != s->len)
				return q_err(q, -EPROTO, "C2HData cid %u: SUCCESS "
					     "with %u of %u bytes", cid, s->got,
					     s->len);

			put16(cqe + 12, cid);
			slot_finish(q, s, cqe, 0);
		}
		return 0;
	}
	default:
		return q_err(q, -EPROTO, "unexpected PDU type 0x%02x", type);
	}
}

static int read_in(struct nvq *q)
{
	for (;;) {
		size_t have;
		ssize_t n;
		int err;

		/* whole PDUs first */
		while ((have = q->in.len - q->in.off) >= 8) {
			uint8_t *p = q->in.p + q->in.off;
			uint32_t plen = get32(p + 4);

			if (plen < 8 || plen > pdu_max(q))
				return q_err(q, -EPROTO, "PDU length %u (at most "
					     "%u)", plen, pdu_max(q));
			if (have < plen)
				break;
			q->in.off += plen;
			if ((err = handle_pdu(q, p, plen)))
				return err;
			if (q->state == NVQ_CLOSED)
				return 0;
		}
		if ((err = buf_reserve(&q->in, IN_CHUNK)))
			return err;
		n = recv(q->fd, q->in.p + q->in.len, q->in.cap - q->in.len,
			 MSG_DONTWAIT);
		if (n == 0)
			return q_err(q, -ECONNRESET, "connection closed by the "
				     "target");
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return q_err(q, -errno, "recv: %s", strerror(errno));
		}
		q->in.len += (size_t)n;
	}
}

static int send_icreq(struct nvq *q)
{
	uint8_t h[128] = { 0 };

	h[0] = BS_NVME_TCP_ICREQ;
	h[2] = 128;
	put32(h + 4, 128);
	put16(h + 8, 0);			/* PFV */
	h[10] = 0;				/* HPDA */
	h[11] = (q->hdgst ? 1 : 0) | (q->ddgst ? 2 : 0);
	put32(h + 12, 0);			/* MAXR2T: 0's based, one */
	q->state = NVQ_IC;
	return put(q, h, sizeof(h));
}

static int q_service(void *lib, uint32_t revents)
{
	struct nvq *q = lib;
	int err, soerr = 0;
	socklen_t sl = sizeof(soerr);

	if (q->state == NVQ_CONNECTING) {
		if (getsockopt(q->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
			soerr = errno;
		if (soerr)
			return q_err(q, -soerr, "connect: %s", strerror(soerr));
		if (!(revents & EPOLLOUT))
			return 0;
		if ((err = send_icreq(q)))
			return err;
	}
	if ((revents & (EPOLLIN | EPOLLERR | EPOLLHUP)) &&
	    (err = read_in(q)))
		return err;
	if (q->state == NVQ_CLOSED)
		return 0;
	return pump_out(q);
}

static void q_on_error(void *lib, int err)
{
	struct nvq *q = lib;

	nvq_close(q, err);
}

static const struct bs_fdpump_ops q_ops = {
	.get_fd = q_get_fd,
	.events = q_events,
	.service = q_service,
	.on_error = q_on_error,
};

/* ---- the queue ----------------------------------------------------------- */

int nvq_open(struct nvq *q, struct bs_loop *loop, const char *host,
	     const char *port, uint16_t qid, unsigned depth, bool hdgst,
	     bool ddgst, void (*event)(void *, struct nvq *, int), void *owner)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai = NULL;
	int fd = -1, one = 1, err;

	memset(q, 0, sizeof(*q));
	q->fd = -1;
	if (!depth || depth > NVQ_CID_SLOT_MASK + 1)
		return q_err(q, -EINVAL, "queue depth %u: 1..%u", depth,
			     NVQ_CID_SLOT_MASK + 1);
	q->loop = loop;
	q->qid = qid;
	q->depth = depth;
	q->hdgst = hdgst;
	q->ddgst = ddgst;
	q->event = event;
	q->owner = owner;
	q->slots = calloc(depth, sizeof(*q->slots));
	if (!q->slots)
		return -ENOMEM;
	err = getaddrinfo(host, port, &hints, &ai);
	if (err || !ai) {
		err = q_err(q, -EHOSTUNREACH, "%s:%s: %s", host, port,
			    gai_strerror(err));
		goto fail;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0) {
		err = q_err(q, -errno, "socket: %s", strerror(errno));
		goto fail;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 &&
	    errno != EINPROGRESS) {
		err = q_err(q, -errno, "connect %s:%s: %s", host, port,
			    strerror(errno));
		goto fail;
	}
	freeaddrinfo(ai);
	ai = NULL;
	q->fd = fd;
	q->state = NVQ_CONNECTING;
	err = bs_fdpump_new(loop, &q_ops, q, 0, &q->pump);
	if (err) {
		q_err(q, err, "cannot watch the socket");
		q->fd = -1;
		goto fail;
	}
	return 0;
fail:
	if (ai)
		freeaddrinfo(ai);
	if (fd >= 0)
		close(fd);
	q->state = NVQ_CLOSED;
	free(q->slots);
	q->slots = NULL;
	return err;
}

void nvq_close(struct nvq *q, int err)
{
	unsigned i;
	bool was_open = q->state != NVQ_CLOSED;

	if (q->pump)
		bs_fdpump_free(q->pump);
	q->pump = NULL;
	/* a queue never opened has fd 0 from calloc: not ours to close */
	if (was_open && q->fd >= 0)
		close(q->fd);
	q->fd = -1;
	q->state = NVQ_CLOSED;
	free(q->out.p);
	free(q->in.p);
	memset(&q->out, 0, sizeof(q->out));
	memset(&q->in, 0, sizeof(q->in));
	/* the commands in flight fail back to their owners */
	for (i = 0; q->slots && i < q->depth; i++)
		if (q->slots[i].busy)
			slot_finish(q, &q->slots[i], NULL,
				    err ? err : -ECONNABORTED);
	free(q->slots);
	q->slots = NULL;
	if (was_open && err && q->event)
		q->event(q->owner, q, err);
}

bool nvq_has_slot(const struct nvq *q)
{
	return q->state == NVQ_READY && q->inflight < q->depth;
}

int nvq_submit(struct nvq *q, const uint8_t *sqe, const struct iovec *out,
	       int outcnt, struct iovec *in, int incnt, uint32_t len,
	       nvq_done_fn done, void *arg)
{
	uint8_t h[72];
	struct nvq_slot *s = NULL;
	bool icd = out && len && len <= q->icd_max;
	uint16_t cid;
	unsigned i;
	uint8_t gen;
	int err;

	if (q->state != NVQ_READY)
		return -ENOTCONN;
	for (i = 0; i < q->depth; i++)
		if (!q->slots[i].busy) {
			s = &q->slots[i];
			break;
		}
	if (!s)
		return -EAGAIN;
	gen = s->gen;
	memset(s, 0, sizeof(*s));
	s->gen = gen;
	cid = (uint16_t)(i | (unsigned)gen << NVQ_CID_GEN_SHIFT);
	memcpy(s->sqe, sqe, 64);
	s->out = out;
	s->outcnt = outcnt;
	s->in = in;
	s->incnt = incnt;
	s->len = len;
	s->sent = icd ? len : 0;
	s->done = done;
	s->arg = arg;
	s->sent_ns = bs_now_ns();
	/* cid, and SGL: in-capsule data, or data by R2T / C2HData */
	put16(s->sqe + 2, cid);
	s->sqe[1] = (s->sqe[1] & 0x3f) | 0x40;	/* PSDT: SGL */
	memset(s->sqe + 24, 0, 16);
	put32(s->sqe + 24 + 8, len);
	s->sqe[39] = icd ? BS_NVME_SGL_TCP_INCAPSULE : BS_NVME_SGL_TCP_TRANSPORT;
	memset(h, 0, 8);
	h[0] = BS_NVME_TCP_CMD;
	memcpy(h + 8, s->sqe, 64);
	err = put_pdu(q, h, 72, icd ? out : NULL, outcnt, 0, icd ? len : 0);
	if (err)
		return err;
	s->busy = true;
	q->inflight++;
	if (in && len > q->max_in)
		q->max_in = len;
	if ((err = pump_out(q)))
		return 0;	/* the pump sees the error next */
	bs_fdpump_update(q->pump);
	return 0;
}

uint64_t nvq_oldest_ns(const struct nvq *q)
{
	uint64_t t = 0;
	unsigned i;

	for (i = 0; q->slots && i < q->depth; i++) {
		const struct nvq_slot *s = &q->slots[i];

		/* an event request is held open by design */
		if (!s->busy || (!q->qid &&
				 s->sqe[0] == BS_NVME_ADMIN_ASYNC_EVENT))
			continue;
		if (!t || s->sent_ns < t)
			t = s->sent_ns;
	}
	return t;
}
