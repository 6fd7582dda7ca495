/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the mappers of lib/mapper/ (not a public API): a
 * parent request fanned out into child requests on the components, and
 * the common part of stack_limits().
 */
#ifndef BLKSTACK_MAPPER_H
#define BLKSTACK_MAPPER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <blkstack/bdev.h>

struct mp_io;

/* One child request on one component. */
struct mp_kid {
	struct bs_req req;
	struct mp_io *io;
	unsigned comp;		/* index into dev->components */
	struct iovec *iov;	/* owned; slices of the parent's buffers */
	int iovcnt, iovcap;
	/*
	 * Set by kid_done: this child's error is excused when another child
	 * of the io succeeded (a mirror leg that was just marked faulty).
	 */
	bool excused;
};

/*
 * Called for each finished child before it is counted; may change
 * io->result (e.g. mirror ignores a failed leg) or resubmit the child and
 * return true (it is then not counted yet).
 */
typedef bool (*mp_kid_fn)(struct mp_kid *kid);

struct mp_io {
	struct bs_req *parent;
	struct bs_dev *dev;
	unsigned pending;
	int result;		/* first error */
	int excused_result;	/* first excused error (mp_kid.excused) */
	unsigned nok;		/* children that succeeded */
	mp_kid_fn kid_done;
	unsigned nkids;
	struct mp_kid kids[];
};

/* Allocate an io for @parent with room for @nkids children (zeroed). */
struct mp_io *mp_io_new(struct bs_dev *dev, struct bs_req *parent,
			unsigned nkids);

/*
 * Prepare child @k: @op/@flags/@offset/@len on component @comp. Data
 * children then get their buffers with mp_kid_add_iov().
 */
void mp_kid_init(struct mp_io *io, unsigned k, unsigned comp, enum bs_op op,
		 uint32_t flags, uint64_t offset, uint64_t len);

/* Append bytes [off, off+len) of the parent's buffers to child @kid. */
int mp_kid_add_iov(struct mp_kid *kid, const struct bs_req *parent,
		   uint64_t off, uint64_t len);

/*
 * Submit the first @n children (io->nkids = n). The parent completes with
 * the first error (or 0) once all of them have; errors of excused
 * children count only when no child succeeded. @n == 0 completes at once.
 */
void mp_io_submit(struct mp_io *io, unsigned n);

/* Re-submit a child from its kid_done callback (e.g. to another leg). */
void mp_kid_resubmit(struct mp_kid *kid, unsigned comp);

/*
 * The common stacking step: bs_limits_stack() every component whose
 * @use[i] is true (all when @use is NULL) at byte offset @start[i] (0
 * when @start is NULL) into @lim, then set dev->wz_reason to the stacking
 * rule that decided write_zeroes_unmap. Returns 0 or -EINVAL with
 * bs_error() naming the misaligned component.
 */
int mp_stack_components(struct bs_dev *dev, struct bs_limits *lim,
			const bool *use, const uint64_t *start);

/* allocated(): the bytes every component has allocated, summed. */
int64_t mp_components_allocated(struct bs_dev *dev);

#endif
