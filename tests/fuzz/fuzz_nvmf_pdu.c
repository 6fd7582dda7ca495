/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: one NVMe/TCP queue of the nvmf target (PDU assembly,
 * header and data digests, ICReq, capsules, in-capsule data, R2T and
 * H2CData, Connect, Property Get/Set, admin commands, I/O commands) over a
 * mem device, driven through the network server's session operations.
 *
 * Input layout:
 *   byte 0   configuration: bit 0 digests allowed; bits 1-2 the device
 *            (mem 4K chunks; zeroes=write; 4 KiB blocks with a write
 *            cache; no zeroing, no discard); bit 3 keep output unread
 *            until the queue stops taking input
 *   byte 1   feed granularity: bytes per feed is 1 + byte * 61
 *   rest     the host's byte stream
 *
 * A controller with ID 1 (host nqn.2014-08.org.example:fuzz, enabled)
 * exists from the start, so a stream may also Connect an I/O queue to it.
 * At the end the loop runs until commands in flight complete, then the
 * queue closes and everything is freed (LeakSanitizer checks).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
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
	void *q = NULL;
	size_t step, off;
	int i;

	if (size < 2)
		return 0;
	if (bs_ctx_new(&ctx))
		return 0;
	loop = bs_ctx_loop(ctx);
	if (make_dev(ctx, (data[0] >> 1) & 3, &dev))
		goto out;
	memset(&exp, 0, sizeof(exp));
	memset(&unit, 0, sizeof(unit));
	memset(&ss, 0, sizeof(ss));
	memset(&ns, 0, sizeof(ns));
	unit.exp = &exp;
	unit.dev = dev;
	strcpy(unit.name, "d");
	bs_dev_caps(dev, &unit.caps);
	exp.units = &unit;
	exp.nunits = 1;
	ns.nsid = 1;
	ns.unit = &unit;
	ns.caps = unit.caps;
	pthread_mutex_init(&ss.lock, NULL);
	strcpy(ss.nqn, "nqn.2026-12.org.blkstack:fuzz");
	ss.exp = &exp;
	ss.loop = loop;
	ss.ns = &ns;
	ss.nns = 1;
	ss.hdgst_ok = ss.ddgst_ok = data[0] & 1;
	ss.max_ioq = 2;
	ss.qdepth = 32;
	ss.next_cntlid = 2;
	strcpy(ss.listen, "127.0.0.1:4420");
	ctrl = calloc(1, sizeof(*ctrl));
	if (!ctrl)
		goto out;
	ctrl->ioq = calloc(ss.max_ioq + 1, sizeof(*ctrl->ioq));
	if (!ctrl->ioq) {
		free(ctrl);
		goto out;
	}
	ctrl->ss = &ss;
	ctrl->cntlid = 1;
	strcpy(ctrl->hostnqn, "nqn.2014-08.org.example:fuzz");
	ctrl->csts = BS_NVME_CSTS_RDY;
	ctrl->nr_ioq = 2;
	ctrl->wce = true;
	ctrl->refs = 1;		/* ours */
	ss.ctrls = ctrl;

	if (nvmf_net_proto.start(&ss, NULL, &q))
		goto free_ctrl;
	step = 1 + (size_t)data[1] * 61;
	for (off = 2; off < size;) {
		size_t n = size - off < step ? size - off : step;

		if (!nvmf_net_proto.wants_input(q)) {
			if (nvmf_net_proto.finished(q))
				break;
			bs_loop_run_once(loop, 0);
			drain(q);
			if (!nvmf_net_proto.wants_input(q) && !in_core(q))
				break;
			continue;
		}
		off += nvmf_net_proto.input(q, data + off, n);
		bs_loop_run_once(loop, 0);
		if (!(data[0] & 8))
			drain(q);
	}
	/* commands in the device complete; ones waiting for data that
	 * never comes are dropped by close */
	for (i = 0; i < 10000 && in_core(q); i++) {
		bs_loop_run_once(loop, 1);
		drain(q);
	}
	drain(q);
	nvmf_net_proto.close(q, "fuzz input ended");
free_ctrl:
	/* the controller made by a Connect in the stream went with the queue;
	 * ours is the last one left */
	while (ss.ctrls) {
		struct nvmf_ctrl *c = ss.ctrls;

		ss.ctrls = c->next;
		free(c->ioq);
		free(c);
	}
	pthread_mutex_destroy(&ss.lock);
out:
	bs_ctx_free(ctx);
	return 0;
}
