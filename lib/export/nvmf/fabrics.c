/* SPDX-License-Identifier: MIT */
/*
 * Fabrics commands: Connect (an admin queue makes a controller with an ID
 * unique in the subsystem; an I/O queue joins the controller it names),
 * the host NQN allow-list, Property Get/Set (CAP, VS, CC, CSTS), and the
 * keep alive timer (KATO) enforced once a second.
 *
 * Everything here runs under the subsystem's lock (ss->lock): the queues
 * of a controller may live on different I/O threads, the tick on the
 * main loop. A queue of another thread is closed by a message to its
 * loop, never by a direct call.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/loop.h>

#include "export/nvmf/nvmf.h"

#define IPO_CMD(off) ((uint32_t)(off))
#define IPO_DATA(off) (BS_NVME_CONNECT_IATTR_DATA | (uint32_t)(off))
#define CAP_TO 20	/* CAP.TO: 10 s for CC.EN transitions */

const char *nvmf_queue_subnqn(const struct nvmf_queue *q)
{
	if (q->ctrl && q->ctrl->discovery)
		return BS_NVME_DISC_SUBSYS_NAME;
	return q->ss->nqn;
}

static bool host_allowed(struct nvmf_subsys *ss, const char *hostnqn)
{
	unsigned i;

	if (!ss->nallow)
		return true;
	for (i = 0; i < ss->nallow; i++)
		if (!strcmp(ss->allow[i], hostnqn))
			return true;
	return false;
}

static struct nvmf_ctrl *ctrl_find(struct nvmf_subsys *ss, uint16_t id)
{
	struct nvmf_ctrl *c;

	for (c = ss->ctrls; c; c = c->next)
		if (c->cntlid == id)
			return c;
	return NULL;
}

static uint16_t cntlid_alloc(struct nvmf_subsys *ss)
{
	unsigned tries;

	for (tries = 0; tries < BS_NVME_CNTLID_MAX; tries++) {
		uint16_t id = ss->next_cntlid;

		ss->next_cntlid = id >= BS_NVME_CNTLID_MAX ? 1 : id + 1;
		if (id && !ctrl_find(ss, id))
			return id;
	}
	return 0;
}

static void ctrl_free(struct nvmf_ctrl *ctrl)
{
	struct nvmf_ctrl **pp;

	for (pp = &ctrl->ss->ctrls; *pp; pp = &(*pp)->next)
		if (*pp == ctrl) {
			*pp = ctrl->next;
			break;
		}
	free(ctrl->ioq);
	free(ctrl);
}

void nvmf_ctrl_detach(struct nvmf_queue *q)
{
	struct nvmf_ctrl *ctrl = q->ctrl;
	unsigned i;

	if (!ctrl)
		return;
	pthread_mutex_lock(&q->ss->lock);
	q->ctrl = NULL;
	if (q->qid == 0 && ctrl->admin == q) {
		/* the association ends: every I/O queue goes with it */
		ctrl->admin = NULL;
		for (i = 1; i <= ctrl->ss->max_ioq; i++)
			if (ctrl->ioq[i])
				nvmf_queue_send_close(ctrl->ioq[i],
						      "the admin queue closed");
	} else if (q->qid && ctrl->ioq[q->qid] == q) {
		ctrl->ioq[q->qid] = NULL;
	}
	if (!--ctrl->refs)
		ctrl_free(ctrl);
	pthread_mutex_unlock(&q->ss->lock);
}

static void connect_admin(struct nvmf_cmd *c,
			  const struct bs_nvme_connect_cmd *cmd,
			  const struct bs_nvme_connect_data *d, bool disc)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_subsys *ss = q->ss;
	struct nvmf_ctrl *ctrl;
	uint32_t kato = bs_nvme_le32(cmd->kato);

	if (bs_nvme_le16(d->cntlid) != BS_NVME_CNTLID_DYNAMIC) {
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_INVALID_PARAM |
				 BS_NVME_SF_DNR,
			      IPO_DATA(offsetof(struct bs_nvme_connect_data,
						cntlid)), NULL, 0);
		return;
	}
	if (ss->kato_max_ms && kato > ss->kato_max_ms) {
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_INVALID_PARAM |
				 BS_NVME_SF_DNR,
			      IPO_CMD(offsetof(struct bs_nvme_connect_cmd,
					       kato)), NULL, 0);
		return;
	}
	ctrl = calloc(1, sizeof(*ctrl));
	if (ctrl)
		ctrl->ioq = calloc(ss->max_ioq + 1, sizeof(*ctrl->ioq));
	if (!ctrl || !ctrl->ioq) {
		if (ctrl)
			free(ctrl);
		nvmf_cmd_done(c, BS_NVME_SC_INTERNAL, 0, NULL, 0);
		return;
	}
	ctrl->cntlid = cntlid_alloc(ss);
	if (!ctrl->cntlid) {
		free(ctrl->ioq);
		free(ctrl);
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_CTRL_BUSY, 0, NULL, 0);
		return;
	}
	ctrl->ss = ss;
	ctrl->port = q->port;
	ctrl->discovery = disc;
	memcpy(ctrl->hostnqn, d->hostnqn, sizeof(ctrl->hostnqn));
	ctrl->hostnqn[sizeof(ctrl->hostnqn) - 1] = 0;
	memcpy(ctrl->hostid, d->hostid, sizeof(ctrl->hostid));
	ctrl->kato_ms = kato;
	ctrl->ka_ns = bs_now_ns();
	ctrl->nr_ioq = disc ? 0 : ss->max_ioq;
	ctrl->wce = true;
	ctrl->admin = q;
	ctrl->refs = 1;
	ctrl->next = ss->ctrls;
	ss->ctrls = ctrl;
	q->ctrl = ctrl;
	q->qid = 0;
	q->sqsize = bs_nvme_le16(cmd->sqsize);
	q->sqhd = 1;		/* the Connect (sqsize is at least 1) */
	q->sqflow_off = cmd->cattr & BS_NVME_CONNECT_CATTR_DISABLE_SQFLOW;
	if (q->nc)
		bs_net_conn_log(q->nc, "controller %u of %s for host %s (KATO %u "
			"ms)", ctrl->cntlid,
			disc ? BS_NVME_DISC_SUBSYS_NAME : ss->nqn,
			ctrl->hostnqn, kato);
	nvmf_cmd_done(c, 0, ctrl->cntlid, NULL, 0);
}

static void connect_io(struct nvmf_cmd *c, const struct bs_nvme_connect_cmd *cmd,
		       const struct bs_nvme_connect_data *d, bool disc)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_subsys *ss = q->ss;
	uint16_t qid = bs_nvme_le16(cmd->qid);
	struct nvmf_ctrl *ctrl = ctrl_find(ss, bs_nvme_le16(d->cntlid));

	if (!ctrl || !ctrl->admin || ctrl->discovery || disc ||
	    ctrl->port != q->port ||
	    strncmp(ctrl->hostnqn, d->hostnqn, sizeof(d->hostnqn))) {
		/* the host NQN must match; the host ID is not checked (as
		 * Linux's nvmet; some hosts send a fresh one per queue);
		 * an association lives on one port (its ANA state); a
		 * controller whose admin queue is gone is ending (nothing
		 * would close a queue that joined it: no KATO, no admin
		 * queue closing its I/O queues) */
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_INVALID_PARAM |
				 BS_NVME_SF_DNR,
			      IPO_DATA(offsetof(struct bs_nvme_connect_data,
						cntlid)), NULL, 0);
		return;
	}
	if (!(ctrl->csts & BS_NVME_CSTS_RDY)) {
		nvmf_cmd_done(c, BS_NVME_SC_CMD_SEQ_ERROR | BS_NVME_SF_DNR, 0,
			      NULL, 0);
		return;
	}
	if (qid > ctrl->nr_ioq || ctrl->ioq[qid]) {
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_INVALID_PARAM |
				 BS_NVME_SF_DNR,
			      IPO_CMD(offsetof(struct bs_nvme_connect_cmd, qid)),
			      NULL, 0);
		return;
	}
	ctrl->ioq[qid] = q;
	ctrl->refs++;
	q->ctrl = ctrl;
	q->qid = qid;
	q->sqsize = bs_nvme_le16(cmd->sqsize);
	q->sqhd = 1;		/* the Connect (sqsize is at least 1) */
	q->sqflow_off = cmd->cattr & BS_NVME_CONNECT_CATTR_DISABLE_SQFLOW;
	nvmf_cmd_done(c, 0, ctrl->cntlid, NULL, 0);
}

static void do_connect(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_subsys *ss = q->ss;
	const struct bs_nvme_connect_cmd *cmd = (const void *)&c->sqe;
	struct bs_nvme_connect_data d;
	uint16_t qid = bs_nvme_le16(cmd->qid);
	uint16_t sqsize = bs_nvme_le16(cmd->sqsize);
	bool disc;

	if (q->ctrl) {
		nvmf_cmd_done(c, BS_NVME_SC_CMD_SEQ_ERROR | BS_NVME_SF_DNR, 0,
			      NULL, 0);
		return;
	}
	if (c->len == sizeof(d) && !c->got) {
		/* its data not in the capsule (an I/O queue's Connect from
		 * a host that keeps to an IOCCSZ under 1 KiB): asked for
		 * with an R2T, then here again */
		nvmf_cmd_want_data(c);
		return;
	}
	if (c->len != sizeof(d) || c->got != sizeof(d)) {
		nvmf_cmd_done(c, BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR,
			      0, NULL, 0);
		return;
	}
	memcpy(&d, c->buf, sizeof(d));
	d.subnqn[sizeof(d.subnqn) - 1] = 0;
	d.hostnqn[sizeof(d.hostnqn) - 1] = 0;
	if (bs_nvme_le16(cmd->recfmt) != 0) {
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_FORMAT | BS_NVME_SF_DNR,
			      0, NULL, 0);
		return;
	}
	disc = !strcmp(d.subnqn, BS_NVME_DISC_SUBSYS_NAME);
	if (!disc && strcmp(d.subnqn, ss->nqn)) {
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_INVALID_PARAM |
				 BS_NVME_SF_DNR,
			      IPO_DATA(offsetof(struct bs_nvme_connect_data,
						subnqn)), NULL, 0);
		return;
	}
	if (!disc && !host_allowed(ss, d.hostnqn)) {
		if (q->nc)
			bs_net_conn_log(q->nc, "host %s is not allowed on %s",
				d.hostnqn, ss->nqn);
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_INVALID_HOST |
				 BS_NVME_SF_DNR, 0, NULL, 0);
		return;
	}
	if (!sqsize || sqsize >= ss->qdepth) {
		nvmf_cmd_done(c, BS_NVME_SC_CONNECT_INVALID_PARAM |
				 BS_NVME_SF_DNR,
			      IPO_CMD(offsetof(struct bs_nvme_connect_cmd,
					       sqsize)), NULL, 0);
		return;
	}
	if (qid == 0)
		connect_admin(c, cmd, &d, disc);
	else
		connect_io(c, cmd, &d, disc);
}

static uint64_t prop_cap(struct nvmf_subsys *ss)
{
	return (uint64_t)(ss->qdepth - 1) | BS_NVME_CAP_CQR |
	       ((uint64_t)CAP_TO << BS_NVME_CAP_TO_SHIFT) |
	       BS_NVME_CAP_CSS_NVM | BS_NVME_CAP_CSS_IOCS;
}

static void prop_get(struct nvmf_cmd *c)
{
	const struct bs_nvme_prop_cmd *p = (const void *)&c->sqe;
	struct nvmf_ctrl *ctrl = c->q->ctrl;
	bool size8 = (p->attrib & BS_NVME_PROP_ATTR_SIZE_MASK) ==
		     BS_NVME_PROP_ATTR_SIZE_8;
	uint64_t v;

	switch (bs_nvme_le32(p->ofst)) {
	case BS_NVME_REG_CAP:
		v = prop_cap(c->q->ss);
		break;
	case BS_NVME_REG_VS:
		v = BS_NVME_VS(1, 4, 0);
		break;
	case BS_NVME_REG_CC:
		v = ctrl->cc;
		break;
	case BS_NVME_REG_CSTS:
		v = ctrl->csts;
		break;
	default:
		nvmf_cmd_done(c, BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR, 0,
			      NULL, 0);
		return;
	}
	if (!size8 && bs_nvme_le32(p->ofst) == BS_NVME_REG_CAP) {
		/* CAP is 8 bytes: a 4-byte read of it is invalid */
		nvmf_cmd_done(c, BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR, 0,
			      NULL, 0);
		return;
	}
	/* the value: DW0 (and DW1 for 8 bytes) of the CQE */
	nvmf_cmd_done(c, 0, size8 ? v : (uint32_t)v, NULL, 0);
}

static void prop_set(struct nvmf_cmd *c)
{
	const struct bs_nvme_prop_cmd *p = (const void *)&c->sqe;
	struct nvmf_ctrl *ctrl = c->q->ctrl;
	uint32_t v = (uint32_t)bs_nvme_le64(p->value);

	if (bs_nvme_le32(p->ofst) != BS_NVME_REG_CC) {
		nvmf_cmd_done(c, BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR, 0,
			      NULL, 0);
		return;
	}
	if ((v & BS_NVME_CC_EN) && !(ctrl->cc & BS_NVME_CC_EN)) {
		uint32_t css = v & BS_NVME_CC_CSS_MASK;

		if ((css != BS_NVME_CC_CSS_NVM && css != BS_NVME_CC_CSS_CSI) ||
		    (!ctrl->discovery &&
		     (((v & BS_NVME_CC_IOSQES_MASK) >>
		       BS_NVME_CC_IOSQES_SHIFT) != BS_NVME_SQES_LOG2 ||
		      ((v & BS_NVME_CC_IOCQES_MASK) >>
		       BS_NVME_CC_IOCQES_SHIFT) != BS_NVME_CQES_LOG2)))
			ctrl->csts = BS_NVME_CSTS_CFS;
		else
			ctrl->csts = BS_NVME_CSTS_RDY;
	}
	if (!(v & BS_NVME_CC_EN) && (ctrl->cc & BS_NVME_CC_EN))
		ctrl->csts &= ~BS_NVME_CSTS_RDY;
	if (v & BS_NVME_CC_SHN_MASK)
		ctrl->csts = (ctrl->csts & ~BS_NVME_CSTS_SHST_MASK) |
			     BS_NVME_CSTS_SHST_CMPLT;
	else
		ctrl->csts &= ~BS_NVME_CSTS_SHST_MASK;
	ctrl->cc = v;
	nvmf_cmd_done(c, 0, 0, NULL, 0);
}

static void fabrics(struct nvmf_cmd *c)
{
	const struct bs_nvme_fabrics_cmd *f = (const void *)&c->sqe;

	if (f->fctype == BS_NVME_FCTYPE_CONNECT) {
		do_connect(c);
		return;
	}
	if (!c->q->ctrl) {
		nvmf_cmd_done(c, BS_NVME_SC_CMD_SEQ_ERROR | BS_NVME_SF_DNR, 0,
			      NULL, 0);
		return;
	}
	switch (f->fctype) {
	case BS_NVME_FCTYPE_PROP_GET:
		if (c->q->qid) {
			nvmf_cmd_done(c, BS_NVME_SC_INVALID_OPCODE |
					 BS_NVME_SF_DNR, 0, NULL, 0);
			return;
		}
		prop_get(c);
		return;
	case BS_NVME_FCTYPE_PROP_SET:
		if (c->q->qid) {
			nvmf_cmd_done(c, BS_NVME_SC_INVALID_OPCODE |
					 BS_NVME_SF_DNR, 0, NULL, 0);
			return;
		}
		prop_set(c);
		return;
	case BS_NVME_FCTYPE_DISCONNECT: {
		struct nvmf_queue *q = c->q;	/* c is freed when done */

		nvmf_cmd_done(c, 0, 0, NULL, 0);
		nvmf_queue_end(q, "the host disconnected the queue");
		return;
	}
	default:
		nvmf_cmd_done(c, BS_NVME_SC_INVALID_OPCODE | BS_NVME_SF_DNR, 0,
			      NULL, 0);
	}
}

void nvmf_fabrics(struct nvmf_cmd *c)
{
	struct nvmf_subsys *ss = c->q->ss;

	pthread_mutex_lock(&ss->lock);
	fabrics(c);
	pthread_mutex_unlock(&ss->lock);
}

/* On the main loop: the admin queue's loop closes it (and with it the
 * controller and its I/O queues). */
void nvmf_subsys_tick(struct nvmf_subsys *ss)
{
	uint64_t now = bs_now_ns();
	struct nvmf_ctrl *ctrl;

	pthread_mutex_lock(&ss->lock);
	for (ctrl = ss->ctrls; ctrl; ctrl = ctrl->next) {
		uint64_t limit;

		if (!ctrl->kato_ms || !ctrl->admin)
			continue;
		/* the host may be one granularity (KAS) late */
		limit = ((uint64_t)ctrl->kato_ms + NVMF_KAS_100MS * 100) *
			1000000ull;
		if (now - ctrl->ka_ns > limit)
			nvmf_queue_send_close(ctrl->admin,
					      "keep alive timeout: no Keep "
					      "Alive within KATO");
	}
	pthread_mutex_unlock(&ss->lock);
}
