/* SPDX-License-Identifier: MIT */
/*
 * The nvmf target's fixture for fuzz_nvmf_pdu and fuzz_nvmf_cmd: one
 * subsystem with one namespace over a device, and controller 1 (host
 * nqn.2014-08.org.example:fuzz, CSTS.RDY, two I/O queues, write cache)
 * made as a Connect would on its one port (ss.ports[0], the owner to
 * pass to the session's start), so a stream may attach queues to it.
 */
#ifndef BLKSTACK_FUZZ_FZ_NVMF_H
#define BLKSTACK_FUZZ_FZ_NVMF_H

#include <stdbool.h>

#include <blkstack/bdev.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>

#include "export/nvmf/nvmf.h"

struct fz_nvmf {
	struct bs_export exp;
	struct bs_export_unit unit;
	struct nvmf_subsys ss;
	struct nvmf_ns ns;
	struct nvmf_ctrl *ctrl;		/* controller 1 */
};

/* Fill @t over @dev; @digests allows header and data digests. 0, or -1
 * (nothing to tear down). */
int fz_nvmf_setup(struct fz_nvmf *t, struct bs_loop *loop,
		  struct bs_dev *dev, bool digests);
/* Free the controllers left (ours; a Connect's went with its queue). */
void fz_nvmf_teardown(struct fz_nvmf *t);

/* Take all of queue @q's output, as a socket would. */
void fz_nvmf_drain(void *q);
/* Whether a command of @q is in the device. */
bool fz_nvmf_in_core(const struct nvmf_queue *q);
/* Run @loop until no command of @q is in the device (bounded), then
 * drain once more. */
void fz_nvmf_settle(struct bs_loop *loop, struct nvmf_queue *q);

#endif
