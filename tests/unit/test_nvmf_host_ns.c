/* SPDX-License-Identifier: MIT */
/*
 * The whole nvmf host driver (an nvmf device) against a scripted NVMe/TCP
 * controller on a loopback socket (a thread per connection, below): what
 * the driver does when the namespace changes under it, and the in-capsule
 * data size it takes from the controller.
 *
 * - A Namespace Attribute Changed event after which Identify Namespace
 *   reports another LBA size (512 -> 4096): every request fails with EIO
 *   and "namespace LBA size changed from 512 to 4096 bytes ...: reattach
 *   the device" (the error, info's state and `refusing` lines, explain);
 *   the requests waiting for a slot fail at once and those in flight
 *   fail when they come back; no command reaches the controller after
 *   the change, so nothing is written at an offset of the wrong size.
 * - The same change seen by a reconnect (the controller drops every
 *   connection): the path is refused and I/O fails at once with the
 *   same reason, instead of waiting for a path until its timeout.
 * - A size-only change: the device follows, I/O past the old end works.
 * - IOCCSZ from a hostile controller (0xffffffff, 0x10000004 whose bytes
 *   wrap 32 bits to 0): in-capsule data is clamped to max_io, and the
 *   largest write goes in the capsule and reads back; under 5 units no
 *   in-capsule data (every write by R2T).
 */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <blkstack/explain.h>
#include <blkstack/loop.h>
#include <blkstack/nvme.h>
#include "drivers/nvmf.h"
#include "helpers/th.h"

/* ---- the scripted controller --------------------------------------------- */

#define FT_STORE (2u << 20)	/* bytes behind the namespace */
#define FT_CONNS 32
#define FT_HELD 16
#define FT_LOG 256
#define FT_NQN "nqn.2026-12.org.blkstack:test-fake"

struct ft;

struct ft_conn {
	struct ft *t;
	int fd;
	pthread_t th;
	pthread_mutex_t wl;		/* one PDU at a time on the socket */
	int qid;			/* -1 before Connect */
	bool aer;			/* an event request is held */
	uint16_t aer_cid;
	/* a write waiting for its H2CData */
	uint8_t wsqe[64];
	uint8_t *wbuf;
	uint32_t wlen, wgot;
	uint8_t wlbads;
	unsigned wepoch;
};

/* A command as the controller received it (geometry of that moment). */
struct ft_cmd {
	struct ft_conn *c;
	uint8_t sqe[64];
	uint8_t *data;
	uint32_t len;
	uint8_t lbads;
	unsigned epoch;
	bool icd;
};

struct ft_write {
	uint64_t slba;
	uint32_t nlb, len;
	uint8_t lbads;
	unsigned epoch;
	bool icd;
};

struct ft {
	pthread_mutex_t lock;		/* everything below */
	int lfd;
	unsigned port;
	pthread_t acc;
	bool stop;
	struct ft_conn conns[FT_CONNS];
	unsigned nconns;
	uint8_t lbads;
	uint64_t nsze;
	uint32_t ioccsz;
	uint8_t nguid;			/* every byte of the NGUID */
	unsigned epoch;			/* bumped at each change */
	uint8_t *store;
	bool hold;			/* keep I/O commands, answer later */
	struct ft_cmd held[FT_HELD];
	unsigned nheld;
	unsigned io_cmds;		/* I/O commands received */
	unsigned reid;			/* descriptors read after one */
	struct ft_write wlog[FT_LOG];
	unsigned nw;
	unsigned r2ts;
};

static int ft_recvn(int fd, uint8_t *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t k = recv(fd, p + got, n - got, 0);

		if (k <= 0)
			return -1;
		got += (size_t)k;
	}
	return 0;
}

/* One PDU: common header, @hdr (@hl bytes after it), then @dl data. */
static void ft_pdu(struct ft_conn *c, uint8_t type, uint8_t flags,
		   const uint8_t *hdr, size_t hl, const void *data, size_t dl)
{
	uint8_t h[128];
	uint8_t hlen = (uint8_t)(8 + hl);

	h[0] = type;
	h[1] = flags;
	h[2] = hlen;
	h[3] = dl ? hlen : 0;
	put32(h + 4, (uint32_t)(hlen + dl));
	memcpy(h + 8, hdr, hl);
	pthread_mutex_lock(&c->wl);
	if (send(c->fd, h, hlen, MSG_NOSIGNAL) == hlen && dl)
		(void)!send(c->fd, data, dl, MSG_NOSIGNAL);
	pthread_mutex_unlock(&c->wl);
}

static void ft_rsp(struct ft_conn *c, uint16_t cid, uint16_t status,
		   uint64_t dw01)
{
	uint8_t cqe[16] = { 0 };

	put64(cqe, dw01);
	put16(cqe + 10, (uint16_t)(c->qid < 0 ? 0 : c->qid));
	put16(cqe + 12, cid);
	put16(cqe + 14, (uint16_t)(status << 1));
	ft_pdu(c, BS_NVME_TCP_RSP, 0, cqe, 16, NULL, 0);
}

/* Data to the host ending the command (SUCCESS: no response follows). */
static void ft_c2h(struct ft_conn *c, uint16_t cid, const void *p, uint32_t len)
{
	uint8_t h[16] = { 0 };

	put16(h, cid);
	put32(h + 8, len);
	ft_pdu(c, BS_NVME_TCP_C2H_DATA, BS_NVME_TCP_F_DATA_LAST |
	       BS_NVME_TCP_F_DATA_SUCCESS, h, 16, p, len);
}

static void ft_identify(struct ft_conn *c, const uint8_t *sqe, uint16_t cid)
{
	struct ft *t = c->t;
	uint8_t d[4096] = { 0 };

	switch (sqe[40]) {
	case 0x01:		/* controller */
		put16(d + 0, 0x1b36);
		put32(d + 92, 1u << 8);	/* OAES: namespace notices */
		put32(d + 516, 1);		/* NN */
		snprintf((char *)d + 768, 256, "%s", FT_NQN);
		pthread_mutex_lock(&t->lock);
		put32(d + 1792, t->ioccsz);
		pthread_mutex_unlock(&t->lock);
		put32(d + 1796, 1);		/* IORCSZ */
		break;
	case 0x00:		/* namespace 1 */
		pthread_mutex_lock(&t->lock);
		put64(d + 0, t->nsze);
		put64(d + 8, t->nsze);
		put64(d + 16, t->nsze);
		d[130] = t->lbads;		/* LBAF0.LBADS, FLBAS 0 */
		memset(d + 104, t->nguid, 16);	/* NGUID */
		pthread_mutex_unlock(&t->lock);
		break;
	case 0x03:	/* descriptors: none (the last re-identify step) */
		pthread_mutex_lock(&t->lock);
		t->reid += t->epoch > 0;
		pthread_mutex_unlock(&t->lock);
		break;
	default:
		ft_rsp(c, cid, 0x02, 0);	/* Invalid Field */
		return;
	}
	ft_c2h(c, cid, d, sizeof(d));
}

static void ft_admin(struct ft_conn *c, const uint8_t *sqe)
{
	struct ft *t = c->t;
	uint16_t cid = get16(sqe + 2);
	uint8_t zero[4096] = { 0 };
	uint32_t len;

	switch (sqe[0]) {
	case BS_NVME_ADMIN_IDENTIFY:
		ft_identify(c, sqe, cid);
		return;
	case BS_NVME_ADMIN_GET_LOG_PAGE:
		len = ((get32(sqe + 40) >> 16) + 1) * 4;
		ft_c2h(c, cid, zero, len > sizeof(zero) ? sizeof(zero) : len);
		return;
	case BS_NVME_ADMIN_ASYNC_EVENT:
		pthread_mutex_lock(&t->lock);
		c->aer = true;
		c->aer_cid = cid;
		pthread_mutex_unlock(&t->lock);
		return;
	case BS_NVME_ADMIN_SET_FEATURES:
	case BS_NVME_ADMIN_KEEP_ALIVE:
		ft_rsp(c, cid, 0, 0);
		return;
	default:
		ft_rsp(c, cid, 0x01, 0);	/* Invalid Opcode */
	}
}

/* Run an I/O command with the geometry it was received with. */
static void ft_exec(struct ft_cmd *k)
{
	struct ft *t = k->c->t;
	uint16_t cid = get16(k->sqe + 2);
	uint64_t slba = get64(k->sqe + 40);
	uint32_t nlb = get16(k->sqe + 48) + 1u;
	uint64_t off = slba << k->lbads, bytes = (uint64_t)nlb << k->lbads;
	uint8_t *rd = NULL;
	uint16_t st = 0;

	pthread_mutex_lock(&t->lock);
	if (k->sqe[0] == BS_NVME_CMD_WRITE && t->nw < FT_LOG)
		t->wlog[t->nw++] = (struct ft_write){ slba, nlb, k->len,
						      k->lbads, k->epoch,
						      k->icd };
	if (k->sqe[0] == BS_NVME_CMD_FLUSH) {
		/* nothing to move */
	} else if (bytes != k->len || off + bytes > FT_STORE) {
		st = 0x02;
	} else if (k->sqe[0] == BS_NVME_CMD_WRITE) {
		memcpy(t->store + off, k->data, bytes);
	} else if (k->sqe[0] == BS_NVME_CMD_READ) {
		rd = malloc(bytes);
		if (rd)
			memcpy(rd, t->store + off, bytes);
	} else {
		st = 0x01;
	}
	pthread_mutex_unlock(&t->lock);
	if (rd) {
		ft_c2h(k->c, cid, rd, (uint32_t)bytes);
		free(rd);
	} else {
		ft_rsp(k->c, cid, st ? st : (k->sqe[0] == BS_NVME_CMD_READ
					     ? 0x06 : 0), 0);
	}
	free(k->data);
	k->data = NULL;
}

/* An I/O command has all its data: run it now, or keep it while held. */
static void ft_ready(struct ft_cmd *k)
{
	struct ft *t = k->c->t;

	pthread_mutex_lock(&t->lock);
	if (t->hold && t->nheld < FT_HELD) {
		t->held[t->nheld++] = *k;
		pthread_mutex_unlock(&t->lock);
		return;
	}
	pthread_mutex_unlock(&t->lock);
	ft_exec(k);
}

static void ft_io(struct ft_conn *c, const uint8_t *sqe, const uint8_t *data,
		  uint32_t dlen)
{
	struct ft *t = c->t;
	struct ft_cmd k = { .c = c };
	uint32_t len = get32(sqe + 32);

	memcpy(k.sqe, sqe, 64);
	pthread_mutex_lock(&t->lock);
	t->io_cmds++;
	k.lbads = t->lbads;
	k.epoch = t->epoch;
	pthread_mutex_unlock(&t->lock);
	k.len = len;
	if (sqe[0] == BS_NVME_CMD_WRITE && !dlen) {
		/* the data by R2T, all of it at once */
		uint8_t h[16] = { 0 };

		free(c->wbuf);
		c->wbuf = malloc(len ? len : 1);
		c->wlen = len;
		c->wgot = 0;
		c->wlbads = k.lbads;
		c->wepoch = k.epoch;
		memcpy(c->wsqe, sqe, 64);
		pthread_mutex_lock(&t->lock);
		t->r2ts++;
		pthread_mutex_unlock(&t->lock);
		put16(h, get16(sqe + 2));
		put16(h + 2, get16(sqe + 2));
		put32(h + 8, len);
		ft_pdu(c, BS_NVME_TCP_R2T, 0, h, 16, NULL, 0);
		return;
	}
	if (dlen) {
		k.data = malloc(dlen);
		memcpy(k.data, data, dlen);
		k.icd = true;
	}
	ft_ready(&k);
}

static void ft_h2c(struct ft_conn *c, const uint8_t *p, uint32_t plen)
{
	uint32_t off = get32(p + 12), len = get32(p + 16);
	uint8_t pdo = p[3];

	if (!c->wbuf || (uint64_t)off + len > c->wlen || pdo + len > plen)
		return;
	memcpy(c->wbuf + off, p + pdo, len);
	c->wgot += len;
	if (c->wgot == c->wlen) {
		struct ft_cmd k = { .c = c, .data = c->wbuf, .len = c->wlen,
				    .lbads = c->wlbads, .epoch = c->wepoch };

		memcpy(k.sqe, c->wsqe, 64);
		c->wbuf = NULL;
		ft_ready(&k);
	}
}

static void ft_capsule(struct ft_conn *c, const uint8_t *p, uint32_t plen)
{
	const uint8_t *sqe = p + 8;
	uint16_t cid = get16(sqe + 2);
	uint32_t dlen = plen > p[3] && p[3] ? plen - p[3] : 0;
	uint64_t v;

	if (sqe[0] == BS_NVME_FABRICS_OPC) {
		switch (sqe[4]) {
		case BS_NVME_FCTYPE_CONNECT:
			pthread_mutex_lock(&c->t->lock);
			c->qid = get16(sqe + 42);
			pthread_mutex_unlock(&c->t->lock);
			ft_rsp(c, cid, 0, c->qid ? 0 : 1);	/* cntlid 1 */
			return;
		case BS_NVME_FCTYPE_PROP_GET:
			/* CAP: MQES 127, TO 500 ms; CSTS: RDY */
			v = get32(sqe + 44) == 0 ? 127u | 1u << 24 : 1;
			ft_rsp(c, cid, 0, v);
			return;
		default:
			ft_rsp(c, cid, 0, 0);
			return;
		}
	}
	if (c->qid == 0)
		ft_admin(c, sqe);
	else
		ft_io(c, sqe, p + p[3], dlen);
}

static void *ft_conn_main(void *arg)
{
	struct ft_conn *c = arg;
	uint8_t h[8], *p = NULL;

	for (;;) {
		uint32_t plen;

		if (ft_recvn(c->fd, h, 8))
			break;
		plen = get32(h + 4);
		if (plen < 8 || plen > (4u << 20))
			break;
		free(p);
		p = malloc(plen);
		if (!p)
			break;
		memcpy(p, h, 8);
		if (ft_recvn(c->fd, p + 8, plen - 8))
			break;
		switch (p[0]) {
		case BS_NVME_TCP_ICREQ: {
			uint8_t r[120] = { 0 };

			put32(r + 4, 131072);		/* MAXH2CDATA */
			ft_pdu(c, BS_NVME_TCP_ICRESP, 0, r, sizeof(r), NULL, 0);
			break;
		}
		case BS_NVME_TCP_CMD:
			ft_capsule(c, p, plen);
			break;
		case BS_NVME_TCP_H2C_DATA:
			ft_h2c(c, p, plen);
			break;
		default:
			break;
		}
	}
	free(p);
	free(c->wbuf);
	c->wbuf = NULL;
	return NULL;
}

static void *ft_accept_main(void *arg)
{
	struct ft *t = arg;

	for (;;) {
		int fd = accept(t->lfd, NULL, NULL);
		struct ft_conn *c;

		if (fd < 0)
			return NULL;
		pthread_mutex_lock(&t->lock);
		if (t->stop || t->nconns == FT_CONNS) {
			pthread_mutex_unlock(&t->lock);
			close(fd);
			continue;
		}
		c = &t->conns[t->nconns];
		memset(c, 0, sizeof(*c));
		c->t = t;
		c->fd = fd;
		c->qid = -1;
		pthread_mutex_init(&c->wl, NULL);
		if (pthread_create(&c->th, NULL, ft_conn_main, c)) {
			close(fd);
		} else {
			t->nconns++;
		}
		pthread_mutex_unlock(&t->lock);
	}
}

static struct ft *ft_start(uint8_t lbads, uint32_t ioccsz)
{
	struct ft *t = calloc(1, sizeof(*t));
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	assert_non_null(t);
	pthread_mutex_init(&t->lock, NULL);
	t->store = calloc(1, FT_STORE);
	assert_non_null(t->store);
	t->lbads = lbads;
	t->nguid = 0x5a;
	t->nsze = (FT_STORE / 2) >> lbads;	/* room to grow */
	t->ioccsz = ioccsz;
	t->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(t->lfd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(t->lfd, (void *)&a, sizeof(a)), 0);
	assert_int_equal(listen(t->lfd, 16), 0);
	getsockname(t->lfd, (void *)&a, &al);
	t->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&t->acc, NULL, ft_accept_main, t), 0);
	return t;
}

/* Every connection closed by the controller (the host reconnects). */
static void ft_drop(struct ft *t)
{
	unsigned i;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nconns; i++)
		shutdown(t->conns[i].fd, SHUT_RDWR);
	pthread_mutex_unlock(&t->lock);
}

static void ft_stop(struct ft *t)
{
	unsigned i, n;

	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_mutex_unlock(&t->lock);
	shutdown(t->lfd, SHUT_RDWR);
	pthread_join(t->acc, NULL);
	ft_drop(t);
	pthread_mutex_lock(&t->lock);
	n = t->nconns;
	pthread_mutex_unlock(&t->lock);
	for (i = 0; i < n; i++) {
		pthread_join(t->conns[i].th, NULL);
		close(t->conns[i].fd);
		pthread_mutex_destroy(&t->conns[i].wl);
	}
	for (i = 0; i < t->nheld; i++)
		free(t->held[i].data);
	close(t->lfd);
	free(t->store);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

/* The namespace is now @nsze blocks of 2^@lbads (same bytes behind it). */
static void ft_reformat(struct ft *t, uint8_t lbads, uint64_t nsze)
{
	pthread_mutex_lock(&t->lock);
	t->lbads = lbads;
	t->nsze = nsze;
	t->epoch++;
	pthread_mutex_unlock(&t->lock);
}

/* Another namespace behind NSID 1 now: same shape, another NGUID. */
static void ft_other_ns(struct ft *t)
{
	pthread_mutex_lock(&t->lock);
	t->nguid = 0xa5;
	t->epoch++;
	pthread_mutex_unlock(&t->lock);
}

/* Namespace Attribute Changed to every host with an event request:
 * how many got it. */
static unsigned ft_notice(struct ft *t)
{
	unsigned i, n = 0;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nconns; i++) {
		struct ft_conn *c = &t->conns[i];

		if (c->qid == 0 && c->aer) {
			c->aer = false;
			/* notice (2), info 0, log page 04h */
			ft_rsp(c, c->aer_cid, 0, 0x00040002u);
			n++;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

static void ft_set_hold(struct ft *t, bool on)
{
	pthread_mutex_lock(&t->lock);
	t->hold = on;
	pthread_mutex_unlock(&t->lock);
}

/* Answer the held commands, each with the geometry it came with. */
static void ft_release(struct ft *t)
{
	struct ft_cmd held[FT_HELD];
	unsigned i, n;

	pthread_mutex_lock(&t->lock);
	t->hold = false;
	n = t->nheld;
	memcpy(held, t->held, sizeof(held));
	t->nheld = 0;
	pthread_mutex_unlock(&t->lock);
	for (i = 0; i < n; i++)
		ft_exec(&held[i]);
}

static unsigned ft_count(struct ft *t, const unsigned *field)
{
	unsigned v;

	pthread_mutex_lock(&t->lock);
	v = *field;
	pthread_mutex_unlock(&t->lock);
	return v;
}

/* Writes received after the namespace changed (epoch > 0). */
static unsigned ft_writes_after_change(struct ft *t)
{
	unsigned i, n = 0;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nw; i++)
		n += t->wlog[i].epoch > 0;
	pthread_mutex_unlock(&t->lock);
	return n;
}

/* ---- the host side ------------------------------------------------------- */

struct rig {
	struct bs_ctx *ctx;
	struct ft *t;
	struct bs_dev *dev;
};

static void rig_up(struct rig *r, uint8_t lbads, uint32_t ioccsz,
		   const char *extra)
{
	char kv[512];

	memset(r, 0, sizeof(*r));
	assert_int_equal(bs_ctx_new(&r->ctx), 0);
	r->t = ft_start(lbads, ioccsz);
	snprintf(kv, sizeof(kv), "type=nvmf;url=nvme+tcp://127.0.0.1:%u/%s/1;"
		 "queues=1;timeout=10;reconnect_ms=50;hostnqn=nqn.test:h%s%s",
		 r->t->port, FT_NQN, extra ? ";" : "", extra ? extra : "");
	r->dev = th_dev_kv(r->ctx, "nv", kv);
	assert_int_equal(bs_dev_wait_live(r->dev, 10000), 0);
}

static void rig_down(struct rig *r)
{
	bs_ctx_free(r->ctx);
	ft_stop(r->t);
}

static struct nvmf *nvmf_of(struct rig *r)
{
	return r->dev->priv;
}

/* Run the loop until @pred holds (at most 5 s). */
static bool run_until(struct rig *r, bool (*pred)(struct rig *))
{
	int i;

	for (i = 0; i < 500 && !pred(r); i++)
		bs_loop_run_once(bs_ctx_loop(r->ctx), 10);
	return pred(r);
}

/* The notice, once the host's event request has come (it is posted when
 * the path goes live, as the open ends). */
static void notice(struct rig *r)
{
	int i;

	for (i = 0; i < 500 && !ft_notice(r->t); i++)
		bs_loop_run_once(bs_ctx_loop(r->ctx), 10);
	assert_true(i < 500);
}

/* The host read the namespace again after the change (and a moment
 * later has taken it in). */
static bool reidentified(struct rig *r)
{
	return ft_count(r->t, &r->t->reid) > 0;
}

static bool has_refusing(struct rig *r)
{
	struct th_desc d;

	return strstr(th_describe(r->dev, &d), "LBA size changed") != NULL;
}

static bool size_grew(struct rig *r)
{
	return bs_dev_size(r->dev) == FT_STORE;
}

struct aio {
	struct bs_req req;
	uint8_t buf[512];
	bool done;
	int res;
};

static void aio_done(struct bs_req *req)
{
	struct aio *a = req->priv;

	a->done = true;
	a->res = req->result;
}

static void assert_lba_reason(const char *s)
{
	assert_non_null(s);
	assert_non_null(strstr(s, "namespace LBA size changed from 512 to "
				  "4096 bytes"));
	assert_non_null(strstr(s, "reattach the device"));
}

/* What a user sees once the LBA size changed: EIO with the reason, in
 * the error, info and explain. */
static void assert_refused(struct rig *r)
{
	uint8_t buf[4096];
	struct th_desc d;
	char why[512];

	memset(buf, 0xee, sizeof(buf));
	bs_error_clear();
	assert_int_equal(bs_write_sync(r->dev, buf, 512, 0), -EIO);
	assert_lba_reason(bs_last_error());
	assert_int_equal(bs_read_sync(r->dev, buf, 4096, 4096), -EIO);
	assert_lba_reason(bs_last_error());
	assert_lba_reason(r->dev->state_reason);	/* info: state */
	assert_lba_reason(strstr(th_describe(r->dev, &d), "refusing"));
	bs_explain_rule(r->dev, BS_CAP_WRITE_ZEROES_UNMAP, why, sizeof(why));
	assert_lba_reason(why);
	/* the device keeps its shape: nothing above sees a new block size */
	assert_int_equal(bs_dev_limits(r->dev)->logical_block_size, 512);
	assert_true(bs_dev_size(r->dev) == FT_STORE / 2);
}

/*
 * 512 -> 4096 on re-identify, with two writes in flight (held by the
 * controller) and two waiting for a slot (queue depth 2).
 */
static void reidentify_lba_change(void **state)
{
	struct rig r;
	struct aio a[4];
	uint8_t buf[8192], back[8192];
	unsigned i, before;

	(void)state;
	rig_up(&r, 9, 4 + 8192 / 16, "queue_depth=2");
	th_fill(buf, sizeof(buf), 7);
	assert_int_equal(bs_write_sync(r.dev, buf, sizeof(buf), 0), 0);
	assert_int_equal(bs_read_sync(r.dev, back, sizeof(back), 0), 0);
	assert_memory_equal(buf, back, sizeof(buf));

	ft_set_hold(r.t, true);
	before = ft_count(r.t, &r.t->io_cmds);
	for (i = 0; i < 4; i++) {
		memset(a[i].buf, 0xa0 + (int)i, sizeof(a[i].buf));
		a[i].done = false;
		bs_req_init(&a[i].req, BS_OP_WRITE, 0, 8192 + 512 * i, 512,
			    a[i].buf, aio_done, &a[i]);
		bs_submit(r.dev, &a[i].req);
	}
	for (i = 0; i < 200 && ft_count(r.t, &r.t->io_cmds) < before + 2; i++)
		bs_loop_run_once(bs_ctx_loop(r.ctx), 10);
	assert_int_equal(ft_count(r.t, &r.t->io_cmds), before + 2);
	assert_false(a[2].done || a[3].done);	/* waiting for a slot */

	ft_reformat(r.t, 12, (FT_STORE / 2) >> 12);
	notice(&r);
	assert_true(run_until(&r, reidentified));
	/* those waiting fail at once (completing on a next turn of the
	 * loop): never sent */
	for (i = 0; i < 100 && !(a[2].done && a[3].done); i++)
		bs_loop_run_once(bs_ctx_loop(r.ctx), 10);
	assert_false(a[0].done || a[1].done);

	/* the two in flight come back with success: not believed */
	ft_release(r.t);
	for (i = 0; i < 500 && !(a[0].done && a[1].done && a[2].done &&
				 a[3].done); i++)
		bs_loop_run_once(bs_ctx_loop(r.ctx), 10);
	/* no command after the change: nothing written at a wrong offset */
	assert_int_equal(ft_writes_after_change(r.t), 0);
	assert_int_equal(ft_count(r.t, &r.t->io_cmds), before + 2);
	for (i = 0; i < 4; i++) {
		assert_true(a[i].done);
		assert_int_equal(a[i].res, -EIO);
	}
	assert_true(has_refusing(&r));
	assert_refused(&r);
	pthread_mutex_lock(&r.t->lock);
	assert_memory_equal(r.t->store, buf, sizeof(buf));
	assert_true(th_is_zero(r.t->store + 9216, FT_STORE - 9216));
	pthread_mutex_unlock(&r.t->lock);
	assert_int_equal(nvmf_of(&r)->paths[0].state, NVC_LIVE);
	rig_down(&r);
}

/* The same change found by a reconnect: refused at once, same reason. */
static void reconnect_lba_change(void **state)
{
	struct rig r;
	uint8_t buf[4096];

	(void)state;
	rig_up(&r, 9, 4 + 8192 / 16, NULL);
	th_fill(buf, sizeof(buf), 9);
	assert_int_equal(bs_write_sync(r.dev, buf, sizeof(buf), 0), 0);
	ft_reformat(r.t, 12, (FT_STORE / 2) >> 12);
	ft_drop(r.t);
	assert_true(run_until(&r, has_refusing));
	assert_refused(&r);
	assert_non_null(strstr(nvmf_of(&r)->paths[0].last_error,
			       "refused: namespace LBA size changed"));
	assert_int_equal(ft_writes_after_change(r.t), 0);
	rig_down(&r);
}

/* A size-only change: the device follows, as before. */
static void reidentify_size_only(void **state)
{
	struct rig r;
	uint8_t buf[8192], back[8192];
	struct th_desc d;

	(void)state;
	rig_up(&r, 9, 4 + 8192 / 16, NULL);
	assert_true(bs_dev_size(r.dev) == FT_STORE / 2);
	ft_reformat(r.t, 9, FT_STORE >> 9);
	notice(&r);
	assert_true(run_until(&r, size_grew));
	th_fill(buf, sizeof(buf), 11);
	assert_int_equal(bs_write_sync(r.dev, buf, sizeof(buf),
				       FT_STORE - sizeof(buf)), 0);
	assert_int_equal(bs_read_sync(r.dev, back, sizeof(back),
				      FT_STORE - sizeof(back)), 0);
	assert_memory_equal(buf, back, sizeof(buf));
	assert_int_equal(bs_dev_limits(r.dev)->logical_block_size, 512);
	assert_null(strstr(th_describe(r.dev, &d), "refusing"));
	rig_down(&r);
}

static bool other_ns_seen(struct rig *r)
{
	struct th_desc d;

	return strstr(th_describe(r->dev, &d), "NGUID differs") != NULL;
}

/*
 * Another namespace behind the NSID on re-identify (same LBA size and
 * size, another NGUID): the path goes with the reason, and is refused
 * when it comes back; no command reaches that namespace after it.
 */
static void reidentify_other_namespace(void **state)
{
	static struct aio a;	/* may still wait as the context goes */
	struct rig r;
	uint8_t buf[4096];
	unsigned ios;
	int i;

	(void)state;
	rig_up(&r, 9, 4 + 8192 / 16, NULL);
	th_fill(buf, sizeof(buf), 5);
	assert_int_equal(bs_write_sync(r.dev, buf, sizeof(buf), 0), 0);
	ft_other_ns(r.t);
	notice(&r);
	assert_true(run_until(&r, reidentified));
	assert_true(run_until(&r, other_ns_seen));
	assert_true(nvmf_of(&r)->paths[0].state != NVC_LIVE);
	/* a write now waits for a path; none reaches the other namespace */
	ios = ft_count(r.t, &r.t->io_cmds);
	memset(a.buf, 0xee, sizeof(a.buf));
	bs_req_init(&a.req, BS_OP_WRITE, 0, 0, 512, a.buf, aio_done, &a);
	bs_submit(r.dev, &a.req);
	for (i = 0; i < 100; i++)
		bs_loop_run_once(bs_ctx_loop(r.ctx), 10);
	assert_int_equal(ft_count(r.t, &r.t->io_cmds), ios);
	assert_true(!a.done || a.res < 0);
	assert_non_null(strstr(nvmf_of(&r)->paths[0].last_error,
			       "NGUID differs"));
	rig_down(&r);
}

/*
 * IOCCSZ as a hostile controller may send it: in-capsule data at most
 * max_io (64 KiB here), computed without wrapping; the largest write
 * goes in the capsule and reads back. Under 5 units: none.
 */
static void ioccsz_clamped(void **state)
{
	static const struct {
		uint32_t ioccsz, icd;
	} rows[] = {
		{ 0xffffffffu, 65536 },
		{ 0x10000004u, 65536 },	/* x16 wraps 32 bits to 64: 0 */
		{ 0x10000003u, 65536 },	/* wraps to 48 - 64: 4 GiB - 16 */
		{ 4 + 4096 / 16, 4096 },
		{ 5, 16 },
		{ 4, 0 },
		{ 0, 0 },
	};
	static uint8_t buf[65536], back[65536];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		struct rig r;
		struct ft_write w;
		unsigned nw, r2ts;
		struct th_desc d;
		char want[64];

		print_message("IOCCSZ 0x%x\n", rows[i].ioccsz);
		rig_up(&r, 9, rows[i].ioccsz, "max_io=64K");
		assert_int_equal(nvmf_of(&r)->paths[0].io[0].icd_max,
				 rows[i].icd);
		snprintf(want, sizeof(want), "in-capsule data up to %u bytes",
			 rows[i].icd);
		assert_non_null(strstr(th_describe(r.dev, &d), want));
		th_fill(buf, sizeof(buf), i);
		r2ts = ft_count(r.t, &r.t->r2ts);
		assert_int_equal(bs_write_sync(r.dev, buf, sizeof(buf), 4096),
				 0);
		assert_int_equal(bs_read_sync(r.dev, back, sizeof(back), 4096),
				 0);
		assert_memory_equal(buf, back, sizeof(buf));
		pthread_mutex_lock(&r.t->lock);
		nw = r.t->nw;
		w = r.t->wlog[nw - 1];
		pthread_mutex_unlock(&r.t->lock);
		assert_int_equal(nw, 1);	/* one command of 64 KiB */
		assert_int_equal(w.len, 65536);
		assert_true(w.slba == 8 && w.nlb == 128);
		/* in the capsule when it fits, else by R2T */
		assert_int_equal(w.icd, rows[i].icd >= 65536);
		assert_int_equal(ft_count(r.t, &r.t->r2ts) - r2ts,
				 rows[i].icd >= 65536 ? 0 : 1);
		rig_down(&r);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reidentify_lba_change),
		cmocka_unit_test(reconnect_lba_change),
		cmocka_unit_test(reidentify_size_only),
		cmocka_unit_test(ioccsz_clamped),
		cmocka_unit_test(reidentify_other_namespace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
