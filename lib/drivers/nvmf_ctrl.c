/* SPDX-License-Identifier: MIT */
/*
 * A controller of the nvmf driver = one path (see nvmf.h). Bring-up, all
 * on the admin queue, each step the completion of the one before:
 *
 *   TCP + ICReq -> Connect (qid 0, dynamic controller ID, KATO)
 *   -> Property Get CAP -> Property Set CC (EN, 64/16-byte entries)
 *   -> Property Get CSTS until RDY (CAP.TO bounds it)
 *   -> Identify Controller -> Identify Namespace -> namespace
 *      identification descriptors (optional) -> NVM command set
 *      Identify Controller for WZSL (optional)
 *   -> Set Features Number of Queues -> Set Features Async Event
 *      Configuration (namespace attribute notices, ANA change notices
 *      when OAES has them; optional)
 *   -> with ANA (CMIC bit 3): Get Log Page ANA (0Ch), whole (in parts
 *      of at most MDTS), the path's state
 *   -> each I/O queue: TCP + ICReq + Connect (qid n, that controller ID)
 *   -> live: an Asynchronous Event Request kept posted, Keep Alive every
 *      KATO/2.
 *
 * A Namespace Attribute Changed event: Get Log Page (changed namespace
 * list, which re-arms the event), Identify Namespace again, then the
 * device decides again and restacks, or follows a resize, or (another
 * LBA size) refuses all I/O from then on (nvmf_path_changed). An ANA change
 * notice: Get Log Page ANA again (nvmf_ana.c). Anything that
 * fails loses the path: every queue closes, its commands go back to the
 * device (which retries them on another path or waits), and the path
 * connects again after reconnect_ms, for as long as the device lives
 * (with no path live for down_after the device is down meanwhile, its
 * requests failing at once: nvmf.c, reach.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/nvme.h>
#include "drivers/nvmf.h"

enum {
	S_CONNECT, S_CAP, S_CC, S_CSTS, S_ID_CTRL, S_ID_NS, S_ID_DESC,
	S_ID_NVM, S_NQUEUES, S_AEC, S_ANA, S_IOQ, S_LIVE,
	S_RE_LOG, S_RE_NS, S_RE_DESC, S_RE_ANA,
};
#define AEN_NS_ATTR (1u << 8)
#define AEN_ANA (1u << 11)


#define REG_CAP 0x00
#define REG_CC 0x14
#define REG_CSTS 0x1c

const char *nvc_state_name(enum nvc_state s)
{
	switch (s) {
	case NVC_CONNECTING: return "connecting";
	case NVC_LIVE: return "live";
	case NVC_REFUSED: return "refused";
	default: return "down";
	}
}

static void admin_done(void *arg, const uint8_t *cqe, int err);
static void step(struct nvc *c);
static void reconnect(void *arg);

static uint16_t cqe_status(const uint8_t *cqe)
{
	return (uint16_t)(get16(cqe + 14) >> 1) & 0x7ff;
}

/* An admin command reading @in_len bytes into @in (or writing @out). */
static int admin_buf(struct nvc *c, uint8_t *sqe, uint8_t *in,
		     uint32_t in_len, const struct iovec *out,
		     uint32_t out_len)
{
	int err;

	if (in_len) {
		c->idiov.iov_base = in;
		c->idiov.iov_len = in_len;
		memset(in, 0, in_len);
	}
	err = nvq_submit(&c->admin, sqe, out, out ? 1 : 0,
			 in_len ? &c->idiov : NULL, in_len ? 1 : 0,
			 in_len ? in_len : out_len, admin_done, c);
	if (err)
		nvc_lost(c, "admin queue full or closed");
	return err;
}

static int admin(struct nvc *c, uint8_t *sqe, uint32_t in_len,
		 const struct iovec *out, uint32_t out_len)
{
	return admin_buf(c, sqe, c->idbuf, in_len, out, out_len);
}

/*
 * The ANA log, whole (nvmf_ana.c): the next part from c->ana_have, at
 * most MDTS bytes. The buffer is sized from Identify Controller.
 */
static void ana_read_next(struct nvc *c)
{
	uint8_t sqe[64];
	uint32_t chunk = nvmf_ana_log_chunk(c->facts.mdts, c->facts.mpsmin);
	size_t left = c->ana_size - c->ana_have;
	uint32_t len = left < chunk ? (uint32_t)left : chunk;

	nvmf_ana_log_sqe(sqe, len, c->ana_have);
	admin_buf(c, sqe, c->ana_log + c->ana_have, len, NULL, 0);
	c->ana_want = len;
}

static void ana_read_start(struct nvc *c)
{
	size_t size = nvmf_ana_log_bound(c->nanagrpid, c->nn);

	if (size != c->ana_size || !c->ana_log) {
		uint8_t *p = realloc(c->ana_log, size);

		if (!p) {
			nvc_lost(c, "out of memory for the ANA log");
			return;
		}
		c->ana_log = p;
		c->ana_size = size;
	}
	c->ana_have = 0;
	ana_read_next(c);
}

/* A part came (@st 0): true when more is to read (and asked for). */
static bool ana_read_more(struct nvc *c, uint16_t st)
{
	if (st)
		return false;
	c->ana_have += c->ana_want;
	if (nvmf_ana_log_need(c->ana_log, c->ana_have) <= c->ana_have ||
	    c->ana_have >= c->ana_size)
		return false;
	ana_read_next(c);
	return true;
}

static void connect_data(struct nvc *c, uint8_t *d, uint16_t cntlid)
{
	struct nvmf *m = c->m;

	memset(d, 0, 1024);
	memcpy(d, m->hostid, 16);
	put16(d + 16, cntlid);
	snprintf((char *)d + 256, 256, "%s", c->subnqn);
	snprintf((char *)d + 512, 256, "%s", m->hostnqn);
}

static void connect_sqe(struct nvc *c, uint8_t *sqe, uint16_t qid,
			uint16_t depth)
{
	memset(sqe, 0, 64);
	sqe[0] = BS_NVME_FABRICS_OPC;
	sqe[4] = BS_NVME_FCTYPE_CONNECT;
	put16(sqe + 42, qid);
	put16(sqe + 44, (uint16_t)(depth - 1));
	if (!qid)
		put32(sqe + 48, c->m->kato_ms);
}

static void prop(struct nvc *c, bool set, uint32_t off, bool wide,
		 uint64_t val)
{
	uint8_t sqe[64] = { 0 };

	sqe[0] = BS_NVME_FABRICS_OPC;
	sqe[4] = set ? BS_NVME_FCTYPE_PROP_SET : BS_NVME_FCTYPE_PROP_GET;
	sqe[40] = wide ? 1 : 0;
	put32(sqe + 44, off);
	if (set)
		put64(sqe + 48, val);
	admin(c, sqe, 0, NULL, 0);
}

static void identify(struct nvc *c, uint8_t cns, uint32_t nsid, uint8_t csi)
{
	uint8_t sqe[64] = { 0 };

	sqe[0] = BS_NVME_ADMIN_IDENTIFY;
	put32(sqe + 4, nsid);
	put32(sqe + 40, cns);
	put32(sqe + 44, (uint32_t)csi << 24);
	admin(c, sqe, 4096, NULL, 0);
}

static void post_aer(struct nvc *c)
{
	uint8_t sqe[64] = { 0 };

	if (c->aer_posted || !(c->oaes_lo & (AEN_NS_ATTR | AEN_ANA)))
		return;
	sqe[0] = BS_NVME_ADMIN_ASYNC_EVENT;
	if (!admin(c, sqe, 0, NULL, 0))
		c->aer_posted = true;
}

static void ka_fire(void *arg)
{
	struct nvc *c = arg;
	uint8_t sqe[64] = { 0 };

	c->ka_timer = 0;
	if (c->state != NVC_LIVE)
		return;
	sqe[0] = BS_NVME_ADMIN_KEEP_ALIVE;
	c->keepalives++;
	if (admin(c, sqe, 0, NULL, 0))
		return;
	c->ka_timer = bs_loop_add_timer(c->m->loop, c->m->kato_ms / 2, ka_fire,
					c);
	if (c->ka_timer < 0)
		c->ka_timer = 0;
}

/* ---- reading Identify data ---------------------------------------------- */

static void read_ctrl(struct nvc *c)
{
	const uint8_t *d = c->idbuf;

	c->cmic = d[76];
	c->ana = c->cmic & BS_NVME_CMIC_ANA;
	c->anacap = d[343];
	c->anatt = d[342];
	c->nanagrpid = get32(d + 348);
	c->nn = get32(d + 516);
	c->ana_state = 0;
	c->ana_change_ns = 0;
	c->reana = false;
	c->facts.mdts = d[77];
	c->oaes_lo = (uint16_t)get32(d + 92);
	c->facts.oncs = get16(d + 520);
	c->facts.vwc = d[525];
	c->ioccsz = get32(d + 1792);
	memcpy(c->ids.subnqn, d + 768, 256);
	c->ids.subnqn[256] = 0;
}

static int read_ns(struct nvc *c)
{
	const uint8_t *d = c->idbuf;
	uint8_t flbas = d[26] & 0xf;

	c->facts.nsze = get64(d);
	if (!c->facts.nsze) {
		snprintf(c->last_error, sizeof(c->last_error), "namespace %u "
			 "is not active on %s", c->nsid, c->url);
		return -ENXIO;
	}
	c->facts.lbads = d[128 + 4 * flbas + 2];
	c->facts.dlfeat = d[33];
	c->nmic = d[30];
	c->anagrpid = get32(d + 92);
	memcpy(c->ids.nguid, d + 104, 16);
	memcpy(c->ids.eui64, d + 120, 8);
	c->ids.has_nguid = memcmp(c->ids.nguid, (uint8_t[16]){ 0 }, 16) != 0;
	c->ids.has_eui64 = memcmp(c->ids.eui64, (uint8_t[8]){ 0 }, 8) != 0;
	return 0;
}

static void read_desc(struct nvc *c)
{
	const uint8_t *d = c->idbuf;
	unsigned off = 0;

	while (off + 4 <= 4096) {
		uint8_t t = d[off], l = d[off + 1];

		if (!t || off + 4 + l > 4096)
			break;
		if (t == 1 && l == 8) {
			memcpy(c->ids.eui64, d + off + 4, 8);
			c->ids.has_eui64 = true;
		} else if (t == 2 && l == 16) {
			memcpy(c->ids.nguid, d + off + 4, 16);
			c->ids.has_nguid = true;
		} else if (t == 3 && l == 16) {
			memcpy(c->ids.uuid, d + off + 4, 16);
			c->ids.has_uuid = true;
		}
		off += 4 + l;
	}
}

/* ---- I/O queues ---------------------------------------------------------- */

/*
 * The in-capsule data bytes an I/O queue may carry: IOCCSZ (Identify
 * Controller, a 32-bit count of 16-byte units, the 64-byte SQE included)
 * less the SQE, at most @bound (the most data the driver sends in one
 * command); 0 when IOCCSZ leaves no room past the SQE.
 */
static uint32_t icd_max(uint32_t ioccsz, uint32_t bound)
{
	uint64_t icd;

	/* the SQE alone (4 units) or less: no data in the capsule */
	if (ioccsz <= 4)
		return 0;
	/* 64 bits: a hostile IOCCSZ near 2^32 units wraps 32 */
	icd = (uint64_t)ioccsz * 16 - 64;
	return icd < bound ? (uint32_t)icd : bound;
}

static void ioq_connected(void *arg, const uint8_t *cqe, int err);

static void ioq_event(void *owner, struct nvq *q, int err)
{
	struct nvc *c = owner;
	uint8_t sqe[64], data[1024];
	struct iovec iov = { data, sizeof(data) };

	if (err) {
		nvc_lost(c, q->err[0] ? q->err : "I/O queue lost");
		return;
	}
	/* TCP and ICResp done: Connect, its data in the capsule */
	q->icd_max = 1024;
	connect_sqe(c, sqe, q->qid, (uint16_t)q->depth);
	connect_data(c, data, c->cntlid);
	if (nvq_submit(q, sqe, &iov, 1, NULL, 0, sizeof(data), ioq_connected,
		       q))
		nvc_lost(c, "cannot send Connect on an I/O queue");
}

static void ioq_connected(void *arg, const uint8_t *cqe, int err)
{
	struct nvq *q = arg;
	struct nvc *c = q->owner;
	uint16_t st;

	if (err)
		return;		/* the queue's loss is handled by its event */
	if ((st = cqe_status(cqe))) {
		snprintf(c->last_error, sizeof(c->last_error), "Connect of I/O "
			 "queue %u: status 0x%03x", q->qid, st);
		nvc_lost(c, c->last_error);
		return;
	}
	/* in-capsule data from now on as the controller allows, bounded by
	 * the largest Write we send (max_io; a DSM range is 16 bytes) */
	q->icd_max = icd_max(c->ioccsz, c->m->max_io);
	if (++c->io_ready == c->nio) {
		c->step = S_LIVE;
		step(c);
	}
}

/* ---- the steps ----------------------------------------------------------- */

static void csts_poll(void *arg)
{
	struct nvc *c = arg;

	c->timer = 0;
	prop(c, false, REG_CSTS, false, 0);
}

static void step(struct nvc *c)
{
	struct nvmf *m = c->m;
	uint8_t sqe[64] = { 0 };
	unsigned i;
	int err;

	switch (c->step) {
	case S_CAP:
		prop(c, false, REG_CAP, true, 0);
		return;
	case S_CC:
		/* EN, NVM command set, 4 KiB pages, 64-byte SQ / 16-byte CQ
		 * entries */
		prop(c, true, REG_CC, false, 1u | 6u << 16 | 4u << 20);
		return;
	case S_CSTS:
		prop(c, false, REG_CSTS, false, 0);
		return;
	case S_ID_CTRL:
		identify(c, 0x01, 0, 0);
		return;
	case S_ID_NS:
	case S_RE_NS:
		identify(c, 0x00, c->nsid, 0);
		return;
	case S_ID_DESC:
	case S_RE_DESC:
		identify(c, 0x03, c->nsid, 0);
		return;
	case S_ID_NVM:
		identify(c, 0x06, 0, 0);
		return;
	case S_NQUEUES:
		sqe[0] = BS_NVME_ADMIN_SET_FEATURES;
		put32(sqe + 40, 0x07);
		put32(sqe + 44, (c->nio - 1) | (c->nio - 1) << 16);
		admin(c, sqe, 0, NULL, 0);
		return;
	case S_AEC:
		sqe[0] = BS_NVME_ADMIN_SET_FEATURES;
		put32(sqe + 40, 0x0b);
		/* namespace attribute notices, ANA change notices */
		put32(sqe + 44, AEN_NS_ATTR |
				(c->ana ? c->oaes_lo & AEN_ANA : 0));
		admin(c, sqe, 0, NULL, 0);
		return;
	case S_ANA:
	case S_RE_ANA:
		ana_read_start(c);
		return;
	case S_IOQ:
		c->io_ready = 0;
		for (i = 0; i < c->nio; i++) {
			err = nvq_open(&c->io[i], m->loop, c->host, c->port,
				       (uint16_t)(i + 1), m->depth, m->hdgst,
				       m->ddgst, ioq_event, c);
			if (err) {
				nvc_lost(c, c->io[i].err);
				return;
			}
		}
		return;
	case S_LIVE:
		c->state = NVC_LIVE;
		if (nvmf_path_up(m, c)) {
			/* not the device's namespace: down, and tried again
			 * (slowly) in case the target is put right */
			c->state = NVC_CONNECTING;
			nvc_lost(c, c->last_error);
			c->state = NVC_REFUSED;
			if (c->timer)
				bs_loop_cancel_timer(m->loop, c->timer);
			c->timer = bs_loop_add_timer(m->loop,
						     m->reconnect_ms * 10ull,
						     reconnect, c);
			if (c->timer < 0)
				c->timer = 0;
			return;
		}
		c->connects++;
		c->failed_connects = 0;
		post_aer(c);
		c->ka_timer = bs_loop_add_timer(m->loop, m->kato_ms / 2,
						ka_fire, c);
		if (c->ka_timer < 0)
			c->ka_timer = 0;
		nvmf_path_live(m, c);
		if (c->reana)
			nvc_ana_refresh(c);
		return;
	case S_RE_LOG:
		sqe[0] = BS_NVME_ADMIN_GET_LOG_PAGE;
		put32(sqe + 4, 0xffffffff);
		put32(sqe + 40, 0x04 | ((4096 / 4 - 1) << 16));
		admin(c, sqe, 4096, NULL, 0);
		return;
	default:
		return;
	}
}

static void on_event(struct nvc *c, uint32_t dw0)
{
	uint8_t type = dw0 & 7, info = (uint8_t)(dw0 >> 8);

	c->events++;
	c->aer_posted = false;
	/* a notice: ANA change: the path's state again */
	if (type == 2 && info == 0x03)
		nvc_ana_refresh(c);
	/* a notice: namespace attribute changed */
	if (type == 2 && info == 0x00) {
		if (c->step == S_LIVE) {
			c->step = S_RE_LOG;
			step(c);
		} else {
			c->reidentify = true;
		}
	}
	post_aer(c);
}

static void admin_done(void *arg, const uint8_t *cqe, int err)
{
	struct nvc *c = arg;
	uint16_t st;
	uint8_t opc;

	if (err)
		return;		/* the admin queue's event handles it */
	/* which command: the slot's SQE is gone, the CID names it; AER and
	 * Keep Alive complete at any time, told apart by what was asked */
	st = cqe_status(cqe);
	opc = c->admin.slots ? c->admin.slots[nvq_cid_slot(get16(cqe + 12))
					      ].sqe[0] : 0;
	if (opc == BS_NVME_ADMIN_ASYNC_EVENT) {
		if (st) {
			c->aer_posted = false;	/* refused: not again */
			return;
		}
		on_event(c, get32(cqe));
		return;
	}
	if (opc == BS_NVME_ADMIN_KEEP_ALIVE) {
		if (st)
			nvc_lost(c, "Keep Alive refused");
		return;
	}
	switch (c->step) {
	case S_CONNECT:
		if (st) {
			snprintf(c->last_error, sizeof(c->last_error),
				 "Connect: status 0x%03x (subsystem %s, host "
				 "%s)", st, c->subnqn, c->m->hostnqn);
			nvc_lost(c, c->last_error);
			return;
		}
		c->cntlid = get16(cqe);
		c->step = S_CAP;
		break;
	case S_CAP:
		if (st)
			goto fail;
		c->cap = get64(cqe);
		c->facts.mpsmin = (uint8_t)((c->cap >> 48) & 0xf);
		c->step = S_CC;
		break;
	case S_CC:
		if (st)
			goto fail;
		c->step = S_CSTS;
		c->rdy_polls = 0;
		break;
	case S_CSTS:
		if (st)
			goto fail;
		if (get32(cqe) & 2) {
			nvc_lost(c, "CSTS.CFS: controller fatal status");
			return;
		}
		if (!(get32(cqe) & 1)) {
			/* CAP.TO is in 500 ms units; poll every 50 ms */
			if (++c->rdy_polls > ((c->cap >> 24) & 0xff) * 10 + 10) {
				nvc_lost(c, "CSTS.RDY not set within CAP.TO");
				return;
			}
			c->timer = bs_loop_add_timer(c->m->loop, 50, csts_poll,
						     c);
			if (c->timer < 0)
				c->timer = 0;
			return;
		}
		c->step = S_ID_CTRL;
		break;
	case S_ID_CTRL:
		if (st)
			goto fail;
		read_ctrl(c);
		c->step = S_ID_NS;
		break;
	case S_ID_NS:
	case S_RE_NS:
		if (st)
			goto fail;
		if (read_ns(c)) {
			nvc_lost(c, c->last_error);
			return;
		}
		c->ids.has_uuid = false;
		c->step = c->step == S_ID_NS ? S_ID_DESC : S_RE_DESC;
		break;
	case S_ID_DESC:
	case S_RE_DESC:
		if (!st)
			read_desc(c);
		if (c->step == S_RE_DESC) {
			c->step = S_LIVE;
			nvmf_path_changed(c->m, c);
			if (c->reidentify) {
				c->reidentify = false;
				c->step = S_RE_LOG;
				break;
			}
			if (c->reana)
				nvc_ana_refresh(c);
			return;
		}
		c->step = S_ID_NVM;
		break;
	case S_ID_NVM:
		/* optional: a controller without it has no limit */
		c->facts.wzsl = st ? 0 : c->idbuf[1];
		c->step = S_NQUEUES;
		break;
	case S_NQUEUES:
		if (st)
			goto fail;
		c->step = S_AEC;
		break;
	case S_AEC:
		if (st)
			c->oaes_lo &= (uint16_t)~(AEN_NS_ATTR | AEN_ANA);
		c->step = c->ana ? S_ANA : S_IOQ;
		break;
	case S_ANA:
		if (ana_read_more(c, st))
			return;
		nvc_ana_log_read(c, st);
		c->step = S_IOQ;
		break;
	case S_RE_ANA:
		if (ana_read_more(c, st))
			return;
		nvc_ana_log_read(c, st);
		c->step = S_LIVE;
		if (c->reidentify) {
			c->reidentify = false;
			c->step = S_RE_LOG;
			break;
		}
		return;
	case S_RE_LOG:
		c->step = S_RE_NS;
		break;
	default:
		return;
	}
	step(c);
	return;
fail:
	snprintf(c->last_error, sizeof(c->last_error), "bring-up step %d: "
		 "status 0x%03x", c->step, st);
	nvc_lost(c, c->last_error);
}

static void admin_event(void *owner, struct nvq *q, int err)
{
	struct nvc *c = owner;
	uint8_t sqe[64], data[1024];
	struct iovec iov = { data, sizeof(data) };

	if (err) {
		nvc_lost(c, q->err[0] ? q->err : "admin queue lost");
		return;
	}
	q->icd_max = 8192;
	c->step = S_CONNECT;
	connect_sqe(c, sqe, 0, NVMF_ADMIN_DEPTH);
	connect_data(c, data, 0xffff);
	admin(c, sqe, 0, &iov, sizeof(data));
}

/* ---- the path ------------------------------------------------------------ */

static void reconnect(void *arg)
{
	struct nvc *c = arg;

	c->timer = 0;
	nvc_start(c);
}

void nvc_start(struct nvc *c)
{
	struct nvmf *m = c->m;
	int err;

	if (m->closing)
		return;
	if (!c->idbuf && !(c->idbuf = malloc(4096))) {
		nvc_lost(c, "out of memory");
		return;
	}
	c->state = NVC_CONNECTING;
	c->connect_ns = bs_now_ns();
	c->aer_posted = false;
	c->reidentify = false;
	c->io_ready = 0;
	memset(&c->ids, 0, sizeof(c->ids));
	err = nvq_open(&c->admin, m->loop, c->host, c->port, 0,
		       NVMF_ADMIN_DEPTH, m->hdgst, m->ddgst, admin_event, c);
	if (err)
		nvc_lost(c, c->admin.err);
}

static void close_queues(struct nvc *c)
{
	unsigned i;

	/* quietly: the path is going already */
	for (i = 0; i < c->nio; i++) {
		c->io[i].event = NULL;
		nvq_close(&c->io[i], -ECONNABORTED);
	}
	c->admin.event = NULL;
	nvq_close(&c->admin, -ECONNABORTED);
}

void nvc_stop(struct nvc *c)
{
	struct nvmf *m = c->m;

	if (c->timer)
		bs_loop_cancel_timer(m->loop, c->timer);
	if (c->ka_timer)
		bs_loop_cancel_timer(m->loop, c->ka_timer);
	c->timer = c->ka_timer = 0;
	c->state = NVC_DOWN;
	close_queues(c);
	free(c->idbuf);
	c->idbuf = NULL;
	free(c->ana_log);
	c->ana_log = NULL;
	c->ana_size = c->ana_have = 0;
}

void nvc_lost(struct nvc *c, const char *why)
{
	struct nvmf *m = c->m;
	bool was_live = c->state == NVC_LIVE;

	if (c->state == NVC_DOWN || c->state == NVC_REFUSED)
		return;		/* already lost: keep the first reason */
	if (why && why != c->last_error)
		snprintf(c->last_error, sizeof(c->last_error), "%s", why);
	c->state = NVC_DOWN;
	if (c->ka_timer)
		bs_loop_cancel_timer(m->loop, c->ka_timer);
	if (c->timer)
		bs_loop_cancel_timer(m->loop, c->timer);
	c->ka_timer = c->timer = 0;
	if (was_live)
		c->lost++;
	else
		c->failed_connects++;
	/* closing fails the commands back: the device re-issues them on a
	 * live path, or holds them */
	close_queues(c);
	if (was_live)
		nvmf_path_down(m, c);
	else if (m->opening)
		nvmf_path_down(m, c);	/* the open may be waiting for it */
	if (m->closing)
		return;
	c->timer = bs_loop_add_timer(m->loop, m->reconnect_ms, reconnect, c);
	if (c->timer < 0)
		c->timer = 0;
}

void nvc_ana_refresh(struct nvc *c)
{
	if (!c->ana || c->step == S_RE_ANA)
		return;
	if (c->state != NVC_LIVE || c->step != S_LIVE) {
		c->reana = true;	/* after what runs now */
		return;
	}
	c->reana = false;
	c->step = S_RE_ANA;
	step(c);
}

struct nvq *nvc_queue(struct nvc *c)
{
	unsigned i;

	if (c->state != NVC_LIVE)
		return NULL;
	for (i = 0; i < c->nio; i++) {
		struct nvq *q = &c->io[(c->rr + i) % c->nio];

		if (nvq_has_slot(q)) {
			c->rr = (c->rr + i + 1) % c->nio;
			return q;
		}
	}
	return NULL;
}

void nvc_tick(struct nvc *c)
{
	uint64_t now = bs_now_ns(), t, limit;
	unsigned i;

	if (c->state == NVC_DOWN || c->state == NVC_REFUSED)
		return;
	/*
	 * A command unanswered for two keep-alive periods (or half the
	 * request timeout, when shorter) loses the path, so its requests
	 * move to another path well before their deadline; this also
	 * bounds a bring-up that hangs, and a Keep Alive that gets no
	 * answer.
	 */
	limit = (uint64_t)c->m->kato_ms * 2000000ull;
	if (limit > c->m->timeout_s * 500000000ull)
		limit = c->m->timeout_s * 500000000ull;
	if (c->state == NVC_CONNECTING && now - c->connect_ns > limit) {
		nvc_lost(c, "bring-up not done in time");
		return;
	}
	for (i = 0; i <= c->nio; i++) {
		const struct nvq *q = i < c->nio ? &c->io[i] : &c->admin;

		if (q->state == NVQ_CLOSED)
			continue;
		t = nvq_oldest_ns(q);
		if (t && now - t > limit) {
			nvc_lost(c, "a command got no answer in time");
			return;
		}
	}
	/* ANATT: in change for longer than the controller said a change
	 * lasts: the path has failed (Linux resets the controller) */
	if (c->state == NVC_LIVE &&
	    nvmf_ana_expired(c->ana_state, c->ana_change_ns, c->anatt, now)) {
		char why[96];

		c->ana_timeouts++;
		snprintf(why, sizeof(why), "ANA state change for more than "
			 "ANATT (%u s)", c->anatt ? c->anatt : 10);
		nvc_lost(c, why);
		return;
	}
	/* after the checks above: a command sent now is newer than now */
	if (c->state == NVC_LIVE && nvc_ana_stale(c, now))
		nvc_ana_refresh(c);
}
