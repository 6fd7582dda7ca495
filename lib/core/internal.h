/* SPDX-License-Identifier: MIT */
/* Core-private state shared by the files of lib/core/. */
#ifndef BLKSTACK_CORE_INTERNAL_H
#define BLKSTACK_CORE_INTERNAL_H

#include <blkstack/bdev.h>

struct bs_ctx {
	struct bs_loop *loop;
	struct bs_dev *devs;	/* creation order */
	void *zero_buf;		/* BS_ZERO_BUF_SIZE of zeroes, shared, lazy */
	struct bs_workers *workers;	/* bs_ctx_workers(), lazy */
};

/* Free @dev's cached per-request driver contexts (device going away). */
void bs_req_drv_ctx_drain(struct bs_dev *dev);

/* The context's shared, read-only zero buffer (allocated on first use). */
const void *bs_ctx_zero_buf(struct bs_ctx *ctx);

#endif
