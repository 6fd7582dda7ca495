/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the nvmf target's command decoding after the PDU
 * layer (fabrics.c, admin.c, io.c): each record is a submission queue
 * entry with its in-capsule data, handed to the dispatch the capsule PDU
 * uses, over a mem device. Asynchronous event notices (as a capability
 * change raises them) and ANA state changes of the port (as `blkstack
 * ana-state` makes them) are interleaved, so held AERs, the changed
 * namespace and ANA logs, the path statuses and the cross-thread
 * message path run too.
 * fuzz_nvmf_pdu covers the framing; this one reaches deep into commands
 * with every input byte.
 *
 * Input layout:
 *   byte 0   configuration: bits 0-1 the device (as fuzz_nvmf_pdu);
 *            bit 2 the queue starts as I/O queue 1 of controller 1
 *            (else its admin queue); bit 3 the queue starts unattached
 *            (a Connect must come first); bit 4 controller 1 disabled
 *   records  kind byte: kind % 8 == 7 is a namespace change notice
 *            (next byte: NSID); kind % 8 == 6 sets the port's ANA
 *            state (next byte % 5: optimized, non-optimized,
 *            inaccessible, persistent loss, change; its bit 4: of
 *            group 1 alone, else of every group); else a 64-byte
 *            SQE, a 2-byte little-endian length and that many bytes of data (capped
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
#include "helpers/fz_dev.h"
#include "helpers/fz_nvmf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const dev_specs[] = {
	"size=1M;chunk=4K",
	"size=1M;chunk=64K;zeroes=write",
	"size=1M;logical_block_size=4096;write_cache=1",
	"size=1M;zeroes=none;max_discard=0",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bs_ctx *ctx = NULL;
	struct bs_dev *dev = NULL;
	struct bs_loop *loop;
	struct fz_nvmf t;
	struct nvmf_ctrl *ctrl;
	struct nvmf_queue *q = NULL;
	void *sess = NULL;
	size_t off;
	uint8_t cfg;

	if (size < 1)
		return 0;
	cfg = data[0];
	if (bs_ctx_new(&ctx))
		return 0;
	loop = bs_ctx_loop(ctx);
	if (fz_mem_dev(ctx, dev_specs[cfg & 3], &dev) ||
	    fz_nvmf_setup(&t, loop, dev, true))
		goto out;
	ctrl = t.ctrl;
	if (cfg & 16)
		ctrl->csts = 0;
	else
		ctrl->cc = BS_NVME_CC_EN;
	ctrl->aen_cfg = BS_NVME_AEN_CFG_NS_ATTR | BS_NVME_AEN_CFG_ANA_CHANGE;

	if (nvmf_net_proto.start(&t.ss.ports[0], NULL, &sess))
		goto free_fixture;
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

			pthread_mutex_lock(&t.ss.lock);
			nvmf_aen_ns_changed(&t.ss, nsid);
			pthread_mutex_unlock(&t.ss.lock);
		} else if (kind % 8 == 6) {
			static const uint8_t states[] = {
				BS_NVME_ANA_OPTIMIZED,
				BS_NVME_ANA_NONOPTIMIZED,
				BS_NVME_ANA_INACCESSIBLE,
				BS_NVME_ANA_PERSISTENT_LOSS,
				BS_NVME_ANA_CHANGE,
			};
			uint8_t v = off < size ? data[off++] : 0;

			pthread_mutex_lock(&t.ss.lock);
			/* every group's, or group 1's (the namespace's) */
			nvmf_ana_set(&t.ss.ports[0], (v >> 4) & 1,
				     states[v % 5]);
			pthread_mutex_unlock(&t.ss.lock);
		} else {
			const uint8_t *sqe;
			uint8_t *buf;
			uint32_t dlen;

			if (size - off < 64 + 2)
				break;
			sqe = data + off;
			off += 64;
			dlen = data[off] | (uint32_t)data[off + 1] << 8;
			off += 2;
			if (dlen > t.ss.incapsule)
				dlen = t.ss.incapsule;
			if (dlen > size - off)
				dlen = (uint32_t)(size - off);
			buf = NULL;
			if (dlen && nvmf_buf_get(q, dlen, &buf))
				break;
			if (dlen)
				memcpy(buf, data + off, dlen);
			nvmf_capsule(q, sqe, buf, dlen);
			off += dlen;
		}
		bs_loop_run_once(loop, 0);
		fz_nvmf_drain(q);
		if (q->ncmds > t.ss.qdepth)
			break;
	}
	fz_nvmf_settle(loop, q);
	nvmf_net_proto.close(q, "fuzz input ended");
	/* the queue's messages were taken back; nothing else is queued */
	bs_loop_run_once(loop, 0);
free_fixture:
	fz_nvmf_teardown(&t);
out:
	bs_ctx_free(ctx);
	return 0;
}
