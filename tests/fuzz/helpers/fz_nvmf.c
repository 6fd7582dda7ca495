/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fz_nvmf.h"

int fz_nvmf_setup(struct fz_nvmf *t, struct bs_loop *loop,
		  struct bs_dev *dev, bool digests)
{
	struct nvmf_subsys *ss = &t->ss;
	struct nvmf_ctrl *ctrl;

	memset(t, 0, sizeof(*t));
	t->unit.exp = &t->exp;
	t->unit.dev = dev;
	strcpy(t->unit.name, "d");
	bs_dev_caps(dev, &t->unit.caps);
	t->exp.units = &t->unit;
	t->exp.nunits = 1;
	t->ns.nsid = 1;
	t->ns.unit = &t->unit;
	t->ns.caps = t->unit.caps;
	strcpy(ss->nqn, "nqn.2026-12.org.blkstack:fuzz");
	ss->exp = &t->exp;
	ss->loop = loop;
	ss->ns = &t->ns;
	ss->nns = 1;
	ss->hdgst_ok = ss->ddgst_ok = digests;
	ss->max_ioq = 2;
	ss->qdepth = 32;
	ss->incapsule = 16384;	/* small: data above it is refused */
	bs_net_limits_default(&ss->lim);	/* out_max as a listener's */
	ss->next_cntlid = 2;
	/* one port, with ANA reported so that its log page and statuses
	 * are in reach of the inputs */
	ss->nports = 1;
	ss->ports[0].ss = ss;
	ss->ports[0].index = 1;
	nvmf_ana_port_init(&ss->ports[0], BS_NVME_ANA_OPTIMIZED);
	strcpy(ss->ports[0].listen, "127.0.0.1:4420");
	ss->ana = true;
	ss->anatt = NVMF_ANATT;
	ss->ana_maxgrp = NVMF_ANAGRPID;
	t->ns.anagrpid = NVMF_ANAGRPID;
	ctrl = calloc(1, sizeof(*ctrl));
	if (!ctrl)
		return -1;
	ctrl->ioq = calloc(ss->max_ioq + 1, sizeof(*ctrl->ioq));
	if (!ctrl->ioq) {
		free(ctrl);
		return -1;
	}
	ctrl->ss = ss;
	ctrl->port = &ss->ports[0];
	ctrl->cntlid = 1;
	strcpy(ctrl->hostnqn, "nqn.2014-08.org.example:fuzz");
	ctrl->csts = BS_NVME_CSTS_RDY;
	ctrl->nr_ioq = 2;
	ctrl->wce = true;
	ctrl->refs = 1;		/* ours */
	ss->ctrls = ctrl;
	t->ctrl = ctrl;
	pthread_mutex_init(&ss->lock, NULL);
	return 0;
}

void fz_nvmf_teardown(struct fz_nvmf *t)
{
	while (t->ss.ctrls) {
		struct nvmf_ctrl *c = t->ss.ctrls;

		t->ss.ctrls = c->next;
		free(c->ioq);
		free(c);
	}
	pthread_mutex_destroy(&t->ss.lock);
}

void fz_nvmf_drain(void *q)
{
	struct iovec iov[16];
	int n, i;

	while ((n = nvmf_net_proto.output(q, iov, 16)) > 0) {
		size_t bytes = 0;

		for (i = 0; i < n; i++)
			bytes += iov[i].iov_len;
		nvmf_net_proto.sent(q, bytes);
	}
}

bool fz_nvmf_in_core(const struct nvmf_queue *q)
{
	const struct nvmf_cmd *c;

	for (c = q->cmds; c; c = c->next)
		if (c->in_core)
			return true;
	return false;
}

void fz_nvmf_settle(struct bs_loop *loop, struct nvmf_queue *q)
{
	int i;

	for (i = 0; i < 10000 && fz_nvmf_in_core(q); i++) {
		bs_loop_run_once(loop, 1);
		fz_nvmf_drain(q);
	}
	fz_nvmf_drain(q);
}
