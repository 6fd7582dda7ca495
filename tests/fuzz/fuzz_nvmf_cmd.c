/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the nvmf target's command decoding after the PDU
 * layer (fabrics.c, admin.c, io.c): each record is a submission queue
 * entry with its in-capsule data, handed to the dispatch the capsule PDU
 * uses, over a mem device. Asynchronous event notices (as a capability
 * change raises them) are interleaved, so held AERs, the changed
 * namespace log and the cross-thread message path run too.
 * fuzz_nvmf_pdu covers the framing; this one reaches deep into commands
 * with every input byte.
 *
 * Input layout:
 *   byte 0   configuration: bits 0-1 the device (as fuzz_nvmf_pdu);
 *            bit 2 the queue starts as I/O queue 1 of controller 1
 *            (else its admin queue); bit 3 the queue starts unattached
 *            (a Connect must come first); bit 4 controller 1 disabled
 *   records  kind byte: kind % 8 == 7 is a namespace change notice
 *            (next byte: NSID); else a 64-byte SQE, a 2-byte
 *            little-endian length and that many bytes of data (capped
 *            at 16 KiB and at what is left)
 *
 * At the end the loop runs until commands in flight complete, then the
 * queue closes and everything is freed (LeakSanitizer checks).
 */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "export/nvmf/nvmf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const dev_specs[] = {
	"size=1M;chunk=4K",
	"size=1M;chunk=64K;zeroes=write",
	"size=1M;logical_block_size=4096;write_cache=1",
	"size=1M;zeroes=none;max_discard=0",
};

static int make_dev(struct bs_ctx *ctx, unsigned which, struct bs_dev **out)
{
	char *copy = strdup(dev_specs[which & 3]), *tok, *save = NULL;
	struct bs_opts *o = NULL;
	int err;

	if (!copy)
		return -1;
	err = bs_opts_new(&o);
	for (tok = strtok_r(copy, ";", &save); tok && !err;
	     tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');
		*eq = '\0';
		err = bs_opts_set(o, tok, eq + 1, "fuzz");
	}
	if (!err)
		err = bs_dev_create(ctx, "d", "mem", o, out);
	bs_opts_free(o);
	free(copy);
	return err;
}

static void drain(void *q)
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

static bool in_core(struct nvmf_queue *q)
{
	struct nvmf_cmd *c;

	for (c = q->cmds; c; c = c->next)
		if (c->in_core)
			return true;
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bs_ctx *ctx = NULL;
	struct bs_dev *dev = NULL;
	struct bs_loop *loop;
	struct bs_export exp;
	struct bs_export_unit unit;
	struct nvmf_subsys ss;
	struct nvmf_ctrl *ctrl;
	struct nvmf_ns ns;
	struct nvmf_queue *q = NULL;
	void *sess = NULL;
	size_t off;
	uint8_t cfg;
	int i;

	if (size < 1)
		return 0;
	cfg = data[0];
	if (bs_ctx_new(&ctx))
		return 0;
	loop = bs_ctx_loop(ctx);
	if (make_dev(ctx, cfg & 3, &dev))
		goto out;
	memset(&exp, 0, sizeof(exp));
	memset(&unit, 0, sizeof(unit));
	memset(&ss, 0, sizeof(ss));
	memset(&ns, 0, sizeof(ns));
	pthread_mutex_init(&ss.lock, NULL);
	unit.exp = &exp;
	unit.dev = dev;
	strcpy(unit.name, "d");
	bs_dev_caps(dev, &unit.caps);
	exp.units = &unit;
	exp.nunits = 1;
	ns.nsid = 1;
	ns.unit = &unit;
	ns.caps = unit.caps;
	strcpy(ss.nqn, "nqn.2026-12.org.blkstack:fuzz");
	ss.exp = &exp;
	ss.loop = loop;
	ss.ns = &ns;
	ss.nns = 1;
	ss.hdgst_ok = ss.ddgst_ok = true;
	ss.max_ioq = 2;
	ss.qdepth = 32;
	ss.next_cntlid = 2;
	strcpy(ss.listen, "127.0.0.1:4420");
	ctrl = calloc(1, sizeof(*ctrl));
	if (!ctrl)
		goto free_lock;
	ctrl->ioq = calloc(ss.max_ioq + 1, sizeof(*ctrl->ioq));
	if (!ctrl->ioq) {
		free(ctrl);
		goto free_lock;
	}
	ctrl->ss = &ss;
	ctrl->cntlid = 1;
	strcpy(ctrl->hostnqn, "nqn.2014-08.org.example:fuzz");
	if (!(cfg & 16)) {
		ctrl->cc = BS_NVME_CC_EN;
		ctrl->csts = BS_NVME_CSTS_RDY;
	}
	ctrl->nr_ioq = 2;
	ctrl->wce = true;
	ctrl->aen_cfg = BS_NVME_AEN_CFG_NS_ATTR;
	ctrl->refs = 1;		/* ours */
	ss.ctrls = ctrl;

	if (nvmf_net_proto.start(&ss, NULL, &sess))
		goto free_ctrl;
	q = sess;
	if (!(cfg & 8)) {
		q->ctrl = ctrl;
		ctrl->refs++;
		if (cfg & 4) {
			q->qid = 1;
			ctrl->ioq[1] = q;
		} else {
			ctrl->admin = q;
		}
		q->sqsize = 31;
	}

	for (off = 1; off < size && !q->ended;) {
		uint8_t kind = data[off++];

		if (kind % 8 == 7) {
			uint32_t nsid = off < size ? data[off++] : 1;

			pthread_mutex_lock(&ss.lock);
			nvmf_aen_ns_changed(&ss, nsid);
			pthread_mutex_unlock(&ss.lock);
		} else {
			const uint8_t *sqe;
			uint32_t dlen;

			if (size - off < 64 + 2)
				break;
			sqe = data + off;
			off += 64;
			dlen = data[off] | (uint32_t)data[off + 1] << 8;
			off += 2;
			if (dlen > NVMF_INCAPSULE)
				dlen = NVMF_INCAPSULE;
			if (dlen > size - off)
				dlen = (uint32_t)(size - off);
			nvmf_capsule(q, sqe, data + off, dlen);
			off += dlen;
		}
		bs_loop_run_once(loop, 0);
		drain(q);
		if (q->ncmds > ss.qdepth)
			break;
	}
	for (i = 0; i < 10000 && in_core(q); i++) {
		bs_loop_run_once(loop, 1);
		drain(q);
	}
	drain(q);
	nvmf_net_proto.close(q, "fuzz input ended");
	/* the queue's messages were taken back; nothing else is queued */
	bs_loop_run_once(loop, 0);
free_ctrl:
	while (ss.ctrls) {
		struct nvmf_ctrl *c = ss.ctrls;

		ss.ctrls = c->next;
		free(c->ioq);
		free(c);
	}
free_lock:
	pthread_mutex_destroy(&ss.lock);
out:
	bs_ctx_free(ctx);
	return 0;
}
