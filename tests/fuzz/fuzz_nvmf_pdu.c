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
 *            until the queue stops taking input; bit 4 the server budget
 *            has only 256 KiB left (another holder has the rest until
 *            the stream ends), so commands wait for it
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
#include <blkstack/budget.h>
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
	struct bs_budget *b = NULL;
	struct bs_budget_holder other;
	void *q = NULL;
	size_t step, off;

	if (size < 2)
		return 0;
	if (bs_ctx_new(&ctx))
		return 0;
	loop = bs_ctx_loop(ctx);
	if (fz_mem_dev(ctx, dev_specs[(data[0] >> 1) & 3], &dev) ||
	    fz_nvmf_setup(&t, loop, dev, data[0] & 1))
		goto out;

	/* the queue takes its payload from the context's budget */
	t.exp.ctx = ctx;
	b = bs_ctx_budget(ctx);
	memset(&other, 0, sizeof(other));
	if (b && (data[0] & 16) &&
	    !bs_budget_configure(b, BS_BUDGET_MIN, 0))
		bs_budget_take(b, &other, BS_BUDGET_MIN - (256 << 10));
	if (nvmf_net_proto.start(&t.ss.ports[0], NULL, &q))
		goto free_fixture;
	step = 1 + (size_t)data[1] * 61;
	for (off = 2; off < size;) {
		size_t n = size - off < step ? size - off : step;

		if (!nvmf_net_proto.wants_input(q)) {
			if (nvmf_net_proto.finished(q))
				break;
			bs_loop_run_once(loop, 0);
			fz_nvmf_drain(q);
			if (!nvmf_net_proto.wants_input(q) && !fz_nvmf_in_core(q))
				break;
			continue;
		}
		off += nvmf_net_proto.input(q, data + off, n);
		bs_loop_run_once(loop, 0);
		if (!(data[0] & 8))
			fz_nvmf_drain(q);
	}
	/* the other holder's bytes come back: waiting commands go on */
	if (b && other.held) {
		bs_budget_leave(b, &other);
		bs_loop_run_once(loop, 0);
	}
	/* commands in the device complete; ones waiting for data that
	 * never comes are dropped by close */
	fz_nvmf_settle(loop, q);
	nvmf_net_proto.close(q, "fuzz input ended");
free_fixture:
	if (b && other.held)
		bs_budget_leave(b, &other);
	/* the controller made by a Connect in the stream went with the queue;
	 * ours is the last one left */
	fz_nvmf_teardown(&t);
out:
	bs_ctx_free(ctx);
	return 0;
}
