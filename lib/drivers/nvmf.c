/* SPDX-License-Identifier: MIT */
/*
 * nvmf: a namespace of a remote NVMe over TCP subsystem as a blkstack
 * device (blkstack as an NVMe host), with native multipath: several
 * controllers (paths) to one namespace make one device.
 *
 * This file: the device type (options, open, close, describe), the
 * requests and the multipath rules; nvmf_ctrl.c: a controller (bring-up,
 * identify, keep alive, events, reconnects); nvmf_queue.c: one NVMe/TCP
 * queue. Everything runs on the context's main loop; requests submitted
 * on an I/O thread are handed over (bs_loop_send) and complete back on
 * their loop.
 *
 * The decision (DLFEAT/ONCS -> DEAC, unmap zeroing, limits) is in
 * nvmf_config.c, pure. A device with several paths joins a path only when
 * its subsystem NQN and namespace identifiers (NGUID/EUI64/UUID), block
 * size and size match the device's (else the path is refused, naming the
 * field). The device's limits are those of its live paths stacked, unmap
 * zeroing starting on (the seed's multipath patch); re-evaluated when a
 * path comes, goes or changes, and every device above restacks. A
 * namespace that changes size (re-identify) resizes the device; one whose
 * LBA size changes (re-identify, or a path of it coming back in another
 * format) stops the device's I/O for good: every request fails with EIO
 * naming the change, until the device is made again (lba_changed()).
 *
 * Requests go to a live path (round robin over paths, or the first live
 * one for failover) among those of the best ANA state (nvmf_ana.c:
 * optimized, else non-optimized, never one without access), and within a
 * path round robin over its I/O queues. An ANA path status sends the
 * request to another path without counting a retry.
 * A request whose path is lost is sent again on another live path, or
 * waits for one; it fails (-EIO) only at its deadline (`timeout`), or
 * when the device goes down: bounded reconnect (drivers/reach.h), no
 * path live for down_after seconds, and then every request fails at once
 * until a path is live again (the paths keep connecting).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/opts.h>

#include <blkstack/nvme.h>
#include "drivers/nvmf.h"


static const char *const policy_names[] = { "round-robin", "failover", NULL };

static const struct reach_words nvmf_reach_words = {
	.drv = "nvmf", .what = "target", .lack = "no live path",
	.back = "a path is live again",
};

/* ---- limits of the device from its paths -------------------------------- */

static unsigned live_paths(const struct nvmf *m)
{
	unsigned i, n = 0;

	for (i = 0; i < m->npaths; i++)
		n += m->paths[i].state == NVC_LIVE;
	return n;
}

/*
 * Explain's reason once the LBA size changed (m->lba_why): given by
 * lba_changed() when it happens and by apply_limits() whenever the
 * limits are made again, in place of the decision.
 */
static void lba_reason(struct nvmf *m)
{
	bs_dev_set_reason(m->dev, "nvmf: %s: I/O fails with EIO", m->lba_why);
}

static void apply_limits(struct nvmf *m)
{
	struct bs_dev *dev = m->dev;
	struct bs_limits *l = &dev->limits, last = dev->limits, pl[NVMF_MAX_PATHS];
	const struct bs_limits *pp[NVMF_MAX_PATHS] = { 0 };
	const char *names[NVMF_MAX_PATHS] = { 0 };
	uint32_t flags = l->flags, user = l->max_user_sectors;
	struct nvc *first = NULL;
	unsigned i, n = 0;

	for (i = 0; i < m->npaths; i++) {
		struct nvc *c = &m->paths[i];

		if (c->state != NVC_LIVE)
			continue;
		if (!first)
			first = c;
		pl[n] = c->cfg.limits;
		bs_limits_finish(&pl[n]);
		pp[n] = &pl[n];
		names[n] = c->name;
		n++;
	}
	nvmf_mpath_limits(pp, names, n, &last, l, m->mp_why,
			  sizeof(m->mp_why));
	l->flags = flags;
	l->max_user_sectors = user;
	bs_limits_finish(l);
	if (dev->wz_broken) {
		l->max_write_zeroes_sectors = 0;
		l->features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
		return;
	}
	if (m->lba_changed) {
		lba_reason(m);	/* instead of the decision */
		return;
	}
	if (!first)
		return;
	if (m->npaths == 1)
		bs_dev_set_reason(dev, "nvmf DLFEAT=0x%02x ONCS=0x%04x: %s",
				  first->facts.dlfeat, first->facts.oncs,
				  first->cfg.why);
	else {
		char st[160] = "";
		size_t o = 0;

		/* every path and its state (and ANA state), for explain */
		for (i = 0; i < m->npaths && o < sizeof(st); i++) {
			const struct nvc *p = &m->paths[i];
			bool ana = p->ana && p->state == NVC_LIVE;

			o += (size_t)snprintf(st + o, sizeof(st) - o,
					      "%s%u %s%s%s", i ? ", " : "",
					      i + 1, nvc_state_name(p->state),
					      ana ? "/" : "",
					      ana ? nvmf_ana_state_name(
							    p->ana_state)
						  : "");
		}
		bs_dev_set_reason(dev, "%s [paths %s; first live: DLFEAT=0x%02x "
				  "ONCS=0x%04x]", m->mp_why, st,
				  first->facts.dlfeat, first->facts.oncs);
	}
}

/* Every path's last error, for the bounded reconnect's messages. */
static void paths_why(const struct nvmf *m, char *buf, size_t len)
{
	size_t o = 0;
	unsigned i;

	buf[0] = 0;
	for (i = 0; i < m->npaths && o < len; i++) {
		const struct nvc *c = &m->paths[i];

		o += (size_t)snprintf(buf + o, len - o, "%s%s: %s",
				      i ? "; " : "", c->name,
				      c->last_error[0] ? c->last_error
						       : nvc_state_name(c->state));
	}
}

static void open_finish(struct nvmf *m, int err)
{
	if (!m->opening)
		return;
	m->opening = false;
	if (m->open_timer)
		bs_loop_cancel_timer(m->loop, m->open_timer);
	m->open_timer = 0;
	bs_dev_open_done(m->dev, err);
}

static int refuse(struct nvc *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int refuse(struct nvc *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/*
 * The namespace of @c is too large to be a device (its bytes wrap 64
 * bits): say so naming the device, in the path's last error too.
 */
static int size_overflow(struct nvmf *m, struct nvc *c, const char *when)
{
	bs_error(-EOVERFLOW, "%s: nvmf %s: %snamespace size %llu blocks of "
		 "%u bytes does not fit in 64 bits", m->dev->name, c->url, when,
		 (unsigned long long)c->facts.nsze, 1u << c->facts.lbads);
	snprintf(c->last_error, sizeof(c->last_error), "%s: %srefused: "
		 "namespace size %llu blocks of %u bytes is past 2^64 bytes",
		 m->dev->name, when, (unsigned long long)c->facts.nsze,
		 1u << c->facts.lbads);
	return -EOVERFLOW;
}

/* A block size of 2^@lbads bytes as text (LBADS is a byte off the wire). */
static const char *lbs_str(char *buf, size_t len, uint8_t lbads)
{
	if (lbads < 32)
		snprintf(buf, len, "%u", 1u << lbads);
	else
		snprintf(buf, len, "2^%u", lbads);
	return buf;
}

static void finish(struct nvmf_req *r, int res);

/* A request refused since the LBA size changed: counted, bs_error, EIO. */
static int lba_fail(struct nvmf *m, enum bs_op op)
{
	m->lba_failed++;
	return bs_error(-EIO, "%s: nvmf: %s: %s", m->dev->name, bs_op_name(op),
			m->lba_why);
}

/*
 * Path @c reports our namespace with another LBA size than the device's
 * (nvmf.h, lba_changed). Linux's nvme host revalidates and sets the
 * queue's new logical block size; here devices and exports stacked above
 * hold the old one, so the device refuses I/O instead: said once (log,
 * info's state, explain), and the requests waiting for a path fail now,
 * never sent in blocks of the new size. The paths stay as they are.
 */
static void lba_changed(struct nvmf *m, struct nvc *c)
{
	struct nvmf_req *r, *next;
	char was[16], now[16];

	if (m->lba_changed)
		return;
	m->lba_changed = true;
	snprintf(m->lba_why, sizeof(m->lba_why), "namespace LBA size changed "
		 "from %s to %s bytes (%s): reattach the device",
		 lbs_str(was, sizeof(was), m->lbads),
		 lbs_str(now, sizeof(now), c->facts.lbads), c->name);
	bs_dev_log(m->dev, "nvmf %s: %s; requests fail with EIO until then",
		   c->url, m->lba_why);
	snprintf(m->dev->state_reason, sizeof(m->dev->state_reason), "%s",
		 m->lba_why);
	/* here, not by calling apply_limits(): the limits stay as they
	 * are, and apply_limits() returns before the reason on a device
	 * with wz_broken */
	lba_reason(m);
	bs_dev_limits_changed(m->dev);		/* publishes the state */
	/* the whole list at once: a completion that submits again finds it
	 * empty and fails in issue() */
	r = m->wait_head;
	m->wait_head = m->wait_tail = NULL;
	for (; r; r = next) {
		next = r->wnext;
		r->waiting = false;
		finish(r, lba_fail(m, r->req->op));
	}
}

int nvmf_path_up(struct nvmf *m, struct nvc *c)
{
	const char *field = NULL;
	uint64_t bytes;

	if (m->have_shape) {
		if (nvmf_ids_match(&m->ids, &c->ids, &field))
			return refuse(c, "refused: %s differs from the "
				      "device's (not the same namespace)",
				      field);
		/* the same namespace in another LBA format (a reconnect
		 * after it was formatted again): the device's blocks are
		 * not its blocks any more */
		if (c->facts.lbads != m->lbads) {
			lba_changed(m, c);
			return refuse(c, "refused: %s", m->lba_why);
		}
	}
	if (nvmf_config_decide(&c->facts, m->max_io, &c->cfg))
		return refuse(c, "refused: logical block size 2^%u is not "
			      "one blkstack can use", c->facts.lbads);
	if (nvmf_size_bytes(c->facts.nsze, c->facts.lbads, &bytes))
		return size_overflow(m, c, "");
	if (m->have_shape && c->facts.nsze != m->nsze)
		return refuse(c, "refused: size differs from the device's");
	if (m->npaths > 1 && !(c->nmic & 1))
		return refuse(c, "refused: namespace not shared (NMIC bit 0 "
			      "clear): no multipath");
	if (!m->have_shape) {
		m->ids = c->ids;
		m->nsze = c->facts.nsze;
		m->lbads = c->facts.lbads;
		m->have_shape = true;
		m->dev->size = bytes;
	}
	c->last_error[0] = 0;
	return 0;
}

void nvmf_path_live(struct nvmf *m, struct nvc *c)
{
	char how[96];

	snprintf(how, sizeof(how), "%s live", c->name);
	reach_ok(&m->reach, how);	/* up again, if it was down */
	apply_limits(m);		/* and the decision as the reason */
	if (m->opening)
		open_finish(m, 0);
	else
		bs_dev_limits_changed(m->dev);
	nvmf_kick(m);
}

void nvmf_path_changed(struct nvmf *m, struct nvc *c)
{
	const char *field = NULL;
	uint64_t bytes;
	char why[128];

	if (nvmf_ids_match(&m->ids, &c->ids, &field)) {
		/* another namespace at this NSID now: none of its blocks are
		 * the device's; the path goes, and nvmf_path_up() refuses it
		 * when it comes back */
		snprintf(why, sizeof(why), "re-identify: %s differs from the "
			 "device's (not the same namespace)", field);
		nvc_lost(c, why);
		return;
	}
	if (c->facts.lbads != m->lbads) {
		/* not decided again: the path's limits, and so the
		 * device's, stay in the old blocks */
		lba_changed(m, c);
		return;
	}
	if (nvmf_config_decide(&c->facts, m->max_io, &c->cfg)) {
		nvc_lost(c, "re-identify: unusable block size");
		return;
	}
	if (nvmf_size_bytes(c->facts.nsze, c->facts.lbads, &bytes)) {
		/* the device keeps its size; the path goes (and is refused
		 * when it comes back this large) */
		size_overflow(m, c, "re-identify: ");
		nvc_lost(c, c->last_error);
		return;
	}
	if (c->facts.nsze != m->nsze) {
		/* a resize (same block size): the device follows */
		m->nsze = c->facts.nsze;
		m->dev->size = bytes;
	}
	apply_limits(m);
	bs_dev_limits_changed(m->dev);
}

void nvmf_path_ana(struct nvmf *m, struct nvc *c, bool was, bool now)
{
	(void)c;
	if (m->opening || m->closing)
		return;
	apply_limits(m);	/* explain names the state */
	if (now && !was)
		nvmf_kick(m);	/* requests that waited for a path */
}

void nvmf_path_down(struct nvmf *m, struct nvc *c)
{
	unsigned i;

	(void)c;
	if (m->opening) {
		for (i = 0; i < m->npaths; i++)
			if (m->paths[i].failed_connects <= m->max_retries)
				return;
		bs_error(-EHOSTUNREACH, "%s: nvmf: no path came up: %s",
			 m->dev->name, m->paths[0].last_error);
		snprintf(m->dev->state_reason, sizeof(m->dev->state_reason),
			 "no path came up (%.160s)", m->paths[0].last_error);
		open_finish(m, -EHOSTUNREACH);
		return;
	}
	if (m->closing)
		return;
	if (!live_paths(m))
		reach_lost(&m->reach);	/* down after down_after */
	apply_limits(m);
	bs_dev_limits_changed(m->dev);
}

/* ---- requests ------------------------------------------------------------ */

static void finish(struct nvmf_req *r, int res)
{
	struct nvmf *m = r->m;

	if (r->prev)
		r->prev->next = r->next;
	else
		m->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	m->nreqs--;
	bs_req_complete(r->req, res);
}

static void issue(struct nvmf_req *r);

static void wait_push(struct nvmf *m, struct nvmf_req *r)
{
	r->waiting = true;
	r->wnext = NULL;
	if (m->wait_tail)
		m->wait_tail->wnext = r;
	else
		m->wait_head = r;
	m->wait_tail = r;
}

void nvmf_kick(struct nvmf *m)
{
	unsigned n = m->nreqs;

	/* each waiting request once: one that waits again ends the round */
	while (m->wait_head && n--) {
		struct nvmf_req *r = m->wait_head;

		m->wait_head = r->wnext;
		if (!m->wait_head)
			m->wait_tail = NULL;
		r->waiting = false;
		issue(r);
		/* @r may be finished and its context back with its loop (a
		 * deadline, or the device down): not read again; it waits
		 * again only if issue() queued it, as the tail */
		if (m->wait_tail == r)
			break;
	}
}

static void disable_wz(struct nvmf *m, struct nvc *c)
{
	char why[192];

	c->facts.no_write_zeroes = true;
	nvmf_config_decide(&c->facts, m->max_io, &c->cfg);
	snprintf(why, sizeof(why), "nvmf %s: Write Zeroes refused (invalid "
		 "opcode/field: EOPNOTSUPP) at run time: write zeroes off",
		 c->url);
	bs_dev_disable_write_zeroes(m->dev, why);
}

static void io_done(void *arg, const uint8_t *cqe, int err)
{
	struct nvmf_req *r = arg;
	struct nvmf *m = r->m;
	struct nvc *c = r->path;
	uint16_t st;
	unsigned sct, sc;
	bool dnr;

	r->path = NULL;
	if (m->lba_changed) {
		/* sent in the old blocks, and the namespace's changed
		 * meanwhile: where the data went (or came from) is not
		 * known, whatever the status says */
		finish(r, lba_fail(m, r->req->op));
		nvmf_kick(m);
		return;
	}
	if (err) {
		/* the path was lost: another live path, or wait for one */
		m->failovers++;
		issue(r);
		return;
	}
	st = (uint16_t)(get16(cqe + 14) >> 1);
	sc = st & 0xff;
	sct = (st >> 8) & 7;
	dnr = st & (1u << 14);
	if (!(st & 0x7ff)) {
		finish(r, 0);
		nvmf_kick(m);
		return;
	}
	if (c && c->ana && nvmf_ana_state_of_status(st)) {
		/* the path has no access now: another path, or wait for
		 * one until the deadline; not a retry (from a controller
		 * without ANA reporting it is a plain path error below, as
		 * its state could never be read back) */
		m->ana_redirects++;
		nvc_ana_status(c, nvmf_ana_state_of_status(st));
		issue(r);
		return;
	}
	if (sct == 0 && (sc == 0x01 || sc == 0x02)) {
		if (r->req->op == BS_OP_WRITE_ZEROES) {
			disable_wz(m, c);
			finish(r, -EOPNOTSUPP);
			nvmf_kick(m);
			return;
		}
		if (r->req->op == BS_OP_DISCARD) {
			c->facts.no_dsm = true;
			nvmf_config_decide(&c->facts, m->max_io, &c->cfg);
			apply_limits(m);
			bs_dev_limits_changed(m->dev);
			finish(r, -EOPNOTSUPP);
			nvmf_kick(m);
			return;
		}
	}
	/* path related (SCT 3), or a transient error the target allows to
	 * retry: again, on any path */
	if ((sct == 3 || (!dnr && sct == 0 && (sc == 0x06 || sc == 0x07 ||
					       sc == 0x82))) &&
	    r->tries++ < m->max_retries) {
		m->retries++;
		issue(r);
		return;
	}
	bs_error(-EIO, "%s: nvmf %s: %s: status SCT %u SC 0x%02x%s",
		 m->dev->name, c ? c->url : "?", bs_op_name(r->req->op), sct,
		 sc, dnr ? " (do not retry)" : "");
	finish(r, -EIO);
	nvmf_kick(m);
}

static struct nvq *pick(struct nvmf *m, struct nvc **out)
{
	uint8_t states[NVMF_MAX_PATHS];
	bool live[NVMF_MAX_PATHS];
	unsigned i;
	int best;

	for (i = 0; i < m->npaths; i++) {
		live[i] = m->paths[i].state == NVC_LIVE;
		states[i] = m->paths[i].ana_state;
	}
	/* only paths of the best ANA state present take requests */
	best = nvmf_ana_best_rank(states, live, m->npaths);
	if (best < 0)
		return NULL;
	for (i = 0; i < m->npaths; i++) {
		unsigned k = m->policy == NVMF_RR ? (m->rr + i) % m->npaths : i;
		struct nvc *c = &m->paths[k];
		struct nvq *q;

		if (!live[k] || nvmf_ana_rank(c->ana_state) != best)
			continue;
		q = nvc_queue(c);
		if (m->policy == NVMF_FAILOVER && !q)
			return NULL;	/* the active path is busy: wait */
		if (q) {
			if (m->policy == NVMF_RR)
				m->rr = (k + 1) % m->npaths;
			*out = c;
			return q;
		}
	}
	return NULL;
}

static void issue(struct nvmf_req *r)
{
	struct nvmf *m = r->m;
	struct bs_req *req = r->req;
	uint8_t sqe[64] = { 0 };
	const struct iovec *out = NULL;
	struct iovec *in = NULL;
	int outcnt = 0, incnt = 0, err;
	uint32_t len = 0, lbs, cdw12 = 0;
	uint64_t lba, n;
	struct nvc *c;
	struct nvq *q;

	if (m->closing) {
		finish(r, -EIO);
		return;
	}
	if (m->lba_changed) {
		/* never built in blocks of another size */
		finish(r, lba_fail(m, req->op));
		return;
	}
	if (bs_now_ns() > r->deadline_ns) {
		m->expired++;
		bs_error(-EIO, "%s: nvmf: %s not done within %u s (no live "
			 "path: %s)", m->dev->name, bs_op_name(req->op),
			 m->timeout_s, m->paths[0].last_error);
		finish(r, -EIO);
		return;
	}
	q = pick(m, &c);
	if (!q && m->reach.down) {
		/* bounded reconnect: no waiting while no path lives */
		finish(r, reach_fail(&m->reach, bs_op_name(req->op)));
		return;
	}
	if (!q) {
		wait_push(m, r);
		return;
	}
	lbs = 1u << c->facts.lbads;
	lba = req->offset / lbs;
	n = req->len / lbs;
	put32(sqe + 4, c->nsid);
	put64(sqe + 40, lba);
	if (n)
		cdw12 = (uint32_t)(n - 1);
	switch (req->op) {
	case BS_OP_READ:
		sqe[0] = BS_NVME_CMD_READ;
		in = req->iov;
		incnt = req->iovcnt;
		len = (uint32_t)req->len;
		break;
	case BS_OP_WRITE:
		sqe[0] = BS_NVME_CMD_WRITE;
		out = req->iov;
		outcnt = req->iovcnt;
		len = (uint32_t)req->len;
		if (req->flags & BS_REQ_FUA)
			cdw12 |= BS_NVME_RW_FUA;
		break;
	case BS_OP_FLUSH:
		sqe[0] = BS_NVME_CMD_FLUSH;
		memset(sqe + 40, 0, 8);
		cdw12 = 0;
		break;
	case BS_OP_WRITE_ZEROES:
		if (!c->cfg.max_wz_blocks) {
			finish(r, -EOPNOTSUPP);
			return;
		}
		sqe[0] = BS_NVME_CMD_WRITE_ZEROES;
		/* DEAC only when the blocks may go, the knob allows it and
		 * the namespace reads deallocated blocks as zeroes */
		if (!(req->flags & BS_REQ_NOUNMAP) && c->cfg.deac &&
		    bs_dev_write_zeroes_unmap(m->dev))
			cdw12 |= BS_NVME_RW_DEAC;
		if (req->flags & BS_REQ_FUA)
			cdw12 |= BS_NVME_RW_FUA;
		break;
	case BS_OP_DISCARD:
		if (!c->cfg.max_dsm_blocks) {
			finish(r, -EOPNOTSUPP);
			return;
		}
		sqe[0] = BS_NVME_CMD_DSM;
		memset(sqe + 40, 0, 8);
		put32(sqe + 44, 1u << 2);	/* AD: deallocate */
		cdw12 = 0;
		memset(r->dsm, 0, 16);
		put32(r->dsm + 4, (uint32_t)n);
		put64(r->dsm + 8, lba);
		r->dsm_iov.iov_base = r->dsm;
		r->dsm_iov.iov_len = 16;
		out = &r->dsm_iov;
		outcnt = 1;
		len = 16;
		break;
	default:
		finish(r, -EOPNOTSUPP);
		return;
	}
	put32(sqe + 48, cdw12);
	r->path = c;
	err = nvq_submit(q, sqe, out, outcnt, in, incnt, len, io_done, r);
	if (!err)
		c->commands++;
	if (err) {
		r->path = NULL;
		if (err == -ENOMEM) {
			finish(r, -ENOMEM);
			return;
		}
		wait_push(m, r);
	}
}

static void start_req(void *arg)
{
	struct nvmf_req *r = arg;
	struct nvmf *m = r->m;

	r->deadline_ns = bs_now_ns() + m->timeout_s * 1000000000ull;
	r->prev = NULL;
	r->next = m->reqs;
	if (m->reqs)
		m->reqs->prev = r;
	m->reqs = r;
	m->nreqs++;
	/* behind those waiting already, to keep order fair */
	if (m->wait_head)
		wait_push(m, r);
	else
		issue(r);
}

static void nvmf_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct nvmf *m = dev->priv;
	struct nvmf_req *r = bs_req_drv(req);

	memset(r, 0, sizeof(*r));
	r->req = req;
	r->m = m;
	if (bs_loop_is_current(m->loop)) {
		start_req(r);
		return;
	}
	r->work.fn = start_req;
	r->work.arg = r;
	bs_loop_send(m->loop, &r->work);
}

/* ---- the tick: deadlines, stuck commands --------------------------------- */

static void tick(void *arg)
{
	struct nvmf *m = arg;
	struct nvmf_req *r, **pp;
	uint64_t now = bs_now_ns();
	unsigned i;

	m->tick_timer = 0;
	for (i = 0; i < m->npaths; i++)
		nvc_tick(&m->paths[i]);
	if (!m->reach.down && m->reach.unreach_ns) {
		char why[256];

		paths_why(m, why, sizeof(why));
		/* down: explain says so, and nvmf_kick() below fails what
		 * waits (issue() sees it) */
		if (reach_check(&m->reach, why) && !m->dev->wz_broken &&
		    !m->lba_changed)
			reach_set_reason(&m->reach);
	}
	/* waiting requests past their deadline fail */
	pp = &m->wait_head;
	m->wait_tail = NULL;
	while ((r = *pp)) {
		if (now > r->deadline_ns) {
			*pp = r->wnext;
			r->waiting = false;
			issue(r);	/* fails it with the reason */
			continue;
		}
		m->wait_tail = r;
		pp = &r->wnext;
	}
	nvmf_kick(m);
	m->tick_timer = bs_loop_add_timer(m->loop, NVMF_TICK_MS, tick, m);
	if (m->tick_timer < 0)
		m->tick_timer = 0;
}

static void open_timeout(void *arg)
{
	struct nvmf *m = arg;

	m->open_timer = 0;
	bs_error(-ETIMEDOUT, "%s: nvmf: no path came up within %u s: %s",
		 m->dev->name, m->timeout_s, m->paths[0].last_error);
	snprintf(m->dev->state_reason, sizeof(m->dev->state_reason),
		 "no path came up within %u s (%.150s)", m->timeout_s,
		 m->paths[0].last_error);
	open_finish(m, -ETIMEDOUT);
}

/* ---- the device type ----------------------------------------------------- */

static int parse_url(struct nvmf *m, struct nvc *c, const char *url)
{
	const char *p, *host, *slash, *colon;
	char *end;
	unsigned long nsid;

	if (strncmp(url, "nvme+tcp://", 11))
		goto bad;
	host = url + 11;
	slash = strchr(host, '/');
	if (!slash)
		goto bad;
	if (*host == '[') {
		const char *rb = memchr(host, ']', (size_t)(slash - host));

		if (!rb)
			goto bad;
		c->host = strndup(host + 1, (size_t)(rb - host - 1));
		colon = rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(host, ':', (size_t)(slash - host));
		c->host = strndup(host, (size_t)((colon ? colon : slash) - host));
	}
	c->port = colon ? strndup(colon + 1, (size_t)(slash - colon - 1))
			: strdup("4420");
	p = strrchr(slash + 1, '/');
	if (!p || p == slash + 1)
		goto bad;
	c->subnqn = strndup(slash + 1, (size_t)(p - slash - 1));
	nsid = strtoul(p + 1, &end, 10);
	if (*end || !p[1] || !nsid || nsid >= 0xffffffffu)
		goto bad;
	c->nsid = (uint32_t)nsid;
	c->url = strdup(url);
	if (!c->host || !c->port || !c->subnqn || !c->url || !*c->host ||
	    !*c->port)
		goto bad;
	return 0;
bad:
	return bs_error(-EINVAL, "%s: nvmf: url %s: want "
			"nvme+tcp://HOST[:PORT]/SUBNQN/NSID", m->dev->name, url);
}

static void nvmf_free(struct nvmf *m)
{
	unsigned i;

	for (i = 0; i < m->npaths; i++) {
		struct nvc *c = &m->paths[i];

		free(c->url);
		free(c->host);
		free(c->port);
		free(c->subnqn);
		free(c->idbuf);
		free(c->ana_log);
	}
	free(m->hostnqn);
	free(m);
}

static int nvmf_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct nvmf *m = calloc(1, sizeof(*m));
	uint32_t timeout = 30, rms = 1000, kato = 5000, retries = 5,
		 nq = 2, depth = 64, down = REACH_DOWN_AFTER_DEFAULT;
	uint64_t max_io = 1u << 20, h = 1469598103934665603ull;
	char host[64] = "localhost", buf[256], key[16];
	const char *v;
	int err, pol = 0;
	unsigned i;

	if (!m)
		return -ENOMEM;
	m->dev = dev;
	m->loop = bs_ctx_loop(dev->ctx);
	if ((err = bs_opts_get_u32(opts, "timeout", &timeout)) < 0 ||
	    (err = bs_opts_get_u32(opts, "reconnect_ms", &rms)) < 0 ||
	    (err = bs_opts_get_u32(opts, "kato_ms", &kato)) < 0 ||
	    (err = bs_opts_get_u32(opts, "max_retries", &retries)) < 0 ||
	    (err = bs_opts_get_u32(opts, "down_after", &down)) < 0 ||
	    (err = bs_opts_get_u32(opts, "queues", &nq)) < 0 ||
	    (err = bs_opts_get_u32(opts, "queue_depth", &depth)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_io", &max_io)) < 0 ||
	    (err = bs_opts_get_bool(opts, "hdgst", &m->hdgst)) < 0 ||
	    (err = bs_opts_get_bool(opts, "ddgst", &m->ddgst)) < 0 ||
	    (err = bs_opts_get_enum(opts, "policy", policy_names, &pol)) < 0)
		goto fail;
	if (timeout < 1 || timeout > 3600 || rms < 10 || rms > 600000 ||
	    kato < 1000 || kato > 600000 || retries > 100 || nq < 1 ||
	    nq > NVMF_MAX_QUEUES || depth < 2 || depth > 1024 ||
	    max_io < 4096 || max_io > (32u << 20) ||
	    down > REACH_DOWN_AFTER_MAX) {
		err = bs_error(-EINVAL, "%s: nvmf: timeout 1..3600 s, "
			       "reconnect_ms 10..600000, kato_ms 1000..600000, "
			       "max_retries 0..100, queues 1..%u, queue_depth "
			       "2..1024, max_io 4K..32M, down_after 0..%u s",
			       dev->name, NVMF_MAX_QUEUES,
			       REACH_DOWN_AFTER_MAX);
		goto fail;
	}
	m->timeout_s = timeout;
	m->reconnect_ms = rms;
	m->kato_ms = kato;
	m->max_retries = retries;
	m->down_after_s = down;
	m->nqueues = nq;
	m->depth = depth;
	m->max_io = (uint32_t)max_io;
	m->policy = (enum nvmf_policy)pol;
	v = bs_opts_get(opts, "hostnqn");
	if (v && *v) {
		snprintf(buf, sizeof(buf), "%s", v);
	} else {
		gethostname(host, sizeof(host) - 1);
		snprintf(buf, sizeof(buf), "nqn.2026-12.org.blkstack:host-%s",
			 host);
	}
	if (strlen(buf) > 223) {
		err = bs_error(-EINVAL, "%s: nvmf: hostnqn longer than 223 "
			       "bytes", dev->name);
		goto fail;
	}
	m->hostnqn = strdup(buf);
	if (!m->hostnqn) {
		err = -ENOMEM;
		goto fail;
	}
	/* a host identifier stable for a host NQN (FNV-1a, spread) */
	for (v = m->hostnqn; *v; v++)
		h = (h ^ (uint8_t)*v) * 1099511628211ull;
	put64(m->hostid, h);
	put64(m->hostid + 8, h * 0x9e3779b97f4a7c15ull + 1);

	for (i = 0; i < NVMF_MAX_PATHS; i++) {
		if (!i)
			snprintf(key, sizeof(key), "url");
		else
			snprintf(key, sizeof(key), "url.%u", i + 1);
		v = bs_opts_get(opts, key);
		if (!v || !*v) {
			if (!i) {
				err = bs_error(-EINVAL, "%s: nvmf needs url = "
					       "nvme+tcp://HOST[:PORT]/SUBNQN/"
					       "NSID", dev->name);
				goto fail;
			}
			continue;
		}
		m->paths[m->npaths].m = m;
		m->paths[m->npaths].index = m->npaths;
		m->paths[m->npaths].nio = m->nqueues;
		err = parse_url(m, &m->paths[m->npaths], v);
		if (!err)
			snprintf(m->paths[m->npaths].name,
				 sizeof(m->paths[m->npaths].name), "path.%u %s:%s",
				 m->npaths + 1, m->paths[m->npaths].host,
				 m->paths[m->npaths].port);
		m->npaths++;
		if (err)
			goto fail;
	}
	snprintf(buf, sizeof(buf), "nvmf %s", m->paths[0].url);
	if (m->npaths > 1)
		snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
			 " (+%u path%s)", m->npaths - 1,
			 m->npaths > 2 ? "s" : "");
	reach_init(&m->reach, dev, &nvmf_reach_words, buf, m->down_after_s,
		   m->reconnect_ms);
	dev->priv = m;
	m->opening = true;
	snprintf(dev->state_reason, sizeof(dev->state_reason), "connecting to "
		 "%s%s", m->paths[0].url, m->npaths > 1 ? " (and more paths)"
							 : "");
	m->open_timer = bs_loop_add_timer(m->loop, m->timeout_s * 1000ull,
					  open_timeout, m);
	m->tick_timer = bs_loop_add_timer(m->loop, NVMF_TICK_MS, tick, m);
	if (m->open_timer < 0)
		m->open_timer = 0;
	if (m->tick_timer < 0)
		m->tick_timer = 0;
	for (i = 0; i < m->npaths; i++)
		nvc_start(&m->paths[i]);
	return BS_OPEN_PENDING;
fail:
	dev->priv = NULL;
	nvmf_free(m);
	return err;
}

static void nvmf_close(struct bs_dev *dev)
{
	struct nvmf *m = dev->priv;
	uint64_t until = bs_now_ns() + 2000000000ull;
	struct nvmf_req *r;
	unsigned i;

	if (!m)
		return;
	/* let what is in flight finish, a little */
	while (m->nreqs && live_paths(m) && bs_now_ns() < until)
		if (bs_loop_run_once(m->loop, 50))
			break;
	m->closing = true;
	if (m->open_timer)
		bs_loop_cancel_timer(m->loop, m->open_timer);
	if (m->tick_timer)
		bs_loop_cancel_timer(m->loop, m->tick_timer);
	for (i = 0; i < m->npaths; i++)
		nvc_stop(&m->paths[i]);
	while ((r = m->wait_head)) {
		m->wait_head = r->wnext;
		finish(r, -EIO);
	}
	while ((r = m->reqs))
		finish(r, -EIO);
	nvmf_free(m);
	dev->priv = NULL;
}

static void hex(char *out, const uint8_t *p, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", p[i]);
	out[2 * n] = 0;
}

static void nvmf_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct nvmf *m = dev->priv;
	char key[32], a[40], b[40];
	unsigned i;

	if (!m)
		return;
	kv(arg, "hostnqn", "%s", m->hostnqn);
	kv(arg, "policy", "%s, %u paths (%u live), %u I/O queues of %u per "
	   "path, digests header %s data %s", policy_names[m->policy],
	   m->npaths, live_paths(m), m->nqueues, m->depth,
	   m->hdgst ? "on" : "off", m->ddgst ? "on" : "off");
	kv(arg, "timeouts", "request %u s, reconnect_ms %u, kato_ms %u, "
	   "max_retries %u, down_after %u s%s", m->timeout_s, m->reconnect_ms,
	   m->kato_ms, m->max_retries, m->down_after_s,
	   m->down_after_s ? "" : " (never)");
	reach_describe(&m->reach, NULL, kv, arg);
	if (m->lba_changed)
		kv(arg, "refusing", "%s: every request fails with EIO (%llu "
		   "so far)", m->lba_why, (unsigned long long)m->lba_failed);
	for (i = 0; i < m->npaths; i++) {
		struct nvc *c = &m->paths[i];

		snprintf(key, sizeof(key), "path.%u", i + 1);
		kv(arg, key, "%s: %s (controller %u, connects %u, lost %llu, "
		   "events %llu, commands %llu)%s%s", c->url,
		   nvc_state_name(c->state), c->cntlid, c->connects,
		   (unsigned long long)c->lost, (unsigned long long)c->events,
		   (unsigned long long)c->commands,
		   c->last_error[0] ? ", last error: " : "", c->last_error);
		if (!c->connects)
			continue;
		snprintf(key, sizeof(key), "path.%u.facts", i + 1);
		kv(arg, key, "DLFEAT=0x%02x ONCS=0x%04x VWC=%u MDTS=%u WZSL=%u "
		   "NMIC=%u LBADS=%u NSZE=%llu IOCCSZ=%u", c->facts.dlfeat,
		   c->facts.oncs, c->facts.vwc & 1, c->facts.mdts,
		   c->facts.wzsl, c->nmic & 1, c->facts.lbads,
		   (unsigned long long)c->facts.nsze, c->ioccsz);
		snprintf(key, sizeof(key), "path.%u.decision", i + 1);
		kv(arg, key, "%s%s", c->cfg.why, c->cfg.deac ? " (DEAC used)"
							     : "");
		snprintf(key, sizeof(key), "path.%u.ana", i + 1);
		if (c->ana)
			kv(arg, key, "%s (group %u, change count %llu, ANACAP "
			   "0x%02x, states seen %llu, path statuses %llu, "
			   "ANATT %u s, lost to ANATT %llu, log %zu bytes)",
			   nvmf_ana_state_name(c->ana_state), c->anagrpid,
			   (unsigned long long)c->ana_chgcnt, c->anacap,
			   (unsigned long long)c->ana_changes,
			   (unsigned long long)c->ana_errors, c->anatt,
			   (unsigned long long)c->ana_timeouts, c->ana_have);
		else
			kv(arg, key, "not reported (CMIC bit 3 clear): as "
			   "optimized");
		if (c->state == NVC_LIVE) {
			snprintf(key, sizeof(key), "path.%u.transport", i + 1);
			kv(arg, key, "digests agreed: header %s data %s, "
			   "in-capsule data up to %u bytes, MAXH2CDATA %u",
			   c->admin.hdgst ? "on" : "off",
			   c->admin.ddgst ? "on" : "off", c->io[0].icd_max,
			   c->io[0].maxh2cdata);
		}
	}
	hex(a, m->ids.nguid, 16);
	hex(b, m->ids.eui64, 8);
	kv(arg, "namespace", "subsystem %s, NGUID %s, EUI64 %s",
	   m->ids.subnqn[0] ? m->ids.subnqn : "?", m->ids.has_nguid ? a : "-",
	   m->ids.has_eui64 ? b : "-");
	kv(arg, "multipath", "%s", m->mp_why);
	kv(arg, "retries", "%llu (failovers %llu, ANA redirects %llu, failed "
	   "at the deadline %llu)", (unsigned long long)m->retries,
	   (unsigned long long)m->failovers,
	   (unsigned long long)m->ana_redirects,
	   (unsigned long long)m->expired);
}

static const struct bs_dev_type nvmf_type = {
	.name = "nvmf",
	.req_ctx_size = sizeof(struct nvmf_req),
	.spec_key = "url",
	.summary = "a namespace of a remote NVMe/TCP subsystem, native "
		   "multipath over several controllers",
	.options =
		"url=nvme+tcp://HOST[:PORT]/SUBNQN/NSID  the namespace (port 4420)\n"
		"url.2=URL            a second path to the same namespace (native\n"
		"                     multipath: joined when the subsystem NQN and\n"
		"                     NGUID/EUI64/UUID match, else refused)\n"
		"url.3=URL            a third path (and so on, up to url.8)\n"
		"url.4=URL\n"
		"url.5=URL\n"
		"url.6=URL\n"
		"url.7=URL\n"
		"url.8=URL\n"
		"policy=round-robin|failover  how paths share requests (round-robin)\n"
		"hostnqn=NQN          our NQN (nqn.2026-12.org.blkstack:host-HOST)\n"
		"hdgst=0|1            header digest (0)\n"
		"ddgst=0|1            data digest (0)\n"
		"queues=N             I/O queues per path (2)\n"
		"queue_depth=N        commands in flight per queue (64)\n"
		"timeout=SECONDS      longest a request (retries, failovers\n"
		"                     included) or the open may take; then -EIO (30)\n"
		"reconnect_ms=MS      delay before a lost path connects again (1000)\n"
		"kato_ms=MS           keep alive timeout asked for (5000)\n"
		"down_after=SECONDS   no path live this long: requests fail at once\n"
		"                     (EIO) until one is live again (60; 0 never)\n"
		"max_retries=N        retries of a command on a retryable status;\n"
		"                     failed connects of every path before the open\n"
		"                     gives up (5)\n"
		"max_io=SIZE          largest Read/Write, below MDTS (1M)\n",
	.open = nvmf_open,
	.close = nvmf_close,
	.submit = nvmf_submit,
	.describe = nvmf_describe,
};

BS_DEV_TYPE(nvmf_type)
