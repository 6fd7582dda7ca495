/* SPDX-License-Identifier: MIT */
/* What the mappers share: fanning a request out to components, stacking. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/explain.h>

#include "mapper/mapper.h"

struct mp_io *mp_io_new(struct bs_dev *dev, struct bs_req *parent,
			unsigned nkids)
{
	struct mp_io *io = calloc(1, sizeof(*io) + nkids * sizeof(io->kids[0]));

	if (!io)
		return NULL;
	io->dev = dev;
	io->parent = parent;
	io->nkids = nkids;
	return io;
}

static void io_free(struct mp_io *io)
{
	unsigned i;

	for (i = 0; i < io->nkids; i++)
		free(io->kids[i].iov);
	free(io);
}

static void kid_done(struct bs_req *req)
{
	struct mp_kid *kid = req->priv;
	struct mp_io *io = kid->io;

	if (io->kid_done && io->kid_done(kid))
		return; /* resubmitted */
	if (req->result && kid->excused) {
		if (!io->excused_result)
			io->excused_result = req->result;
	} else if (req->result) {
		if (!io->result)
			io->result = req->result;
	} else {
		io->nok++;
	}
	if (--io->pending == 0) {
		struct bs_req *parent = io->parent;
		int result = io->result;

		if (!result && !io->nok)
			result = io->excused_result;
		io_free(io);
		bs_req_complete(parent, result);
	}
}

void mp_kid_init(struct mp_io *io, unsigned k, unsigned comp, enum bs_op op,
		 uint32_t flags, uint64_t offset, uint64_t len)
{
	struct mp_kid *kid = &io->kids[k];

	bs_req_init(&kid->req, op, flags, offset, len, NULL, kid_done, kid);
	kid->io = io;
	kid->comp = comp;
}

int mp_kid_add_iov(struct mp_kid *kid, const struct bs_req *parent,
		   uint64_t off, uint64_t len)
{
	int i;

	for (i = 0; i < parent->iovcnt && off >= parent->iov[i].iov_len; i++)
		off -= parent->iov[i].iov_len;
	for (; i < parent->iovcnt && len; i++) {
		uint64_t take = parent->iov[i].iov_len - off;

		if (take > len)
			take = len;
		if (kid->iovcnt == kid->iovcap) {
			int cap = kid->iovcap ? kid->iovcap * 2 : 4;
			struct iovec *v = realloc(kid->iov, (size_t)cap * sizeof(*v));

			if (!v)
				return -ENOMEM;
			kid->iov = v;
			kid->iovcap = cap;
		}
		kid->iov[kid->iovcnt].iov_base =
			(char *)parent->iov[i].iov_base + off;
		kid->iov[kid->iovcnt].iov_len = take;
		kid->iovcnt++;
		len -= take;
		off = 0;
	}
	kid->req.iov = kid->iov;
	kid->req.iovcnt = kid->iovcnt;
	return len ? -EINVAL : 0;
}

void mp_io_submit(struct mp_io *io, unsigned n)
{
	unsigned i;

	io->pending = n;
	if (!n) {
		struct bs_req *parent = io->parent;
		int result = io->result;

		io_free(io);
		bs_req_complete(parent, result);
		return;
	}
	/* completions run from the loop, never in here: pending is safe */
	for (i = 0; i < n; i++)
		bs_submit(io->dev->components[io->kids[i].comp],
			  &io->kids[i].req);
}

void mp_kid_resubmit(struct mp_kid *kid, unsigned comp)
{
	struct bs_req *r = &kid->req;

	kid->comp = comp;
	bs_req_init(r, r->op, r->flags, r->offset, r->len, NULL, kid_done, kid);
	r->iov = kid->iov;
	r->iovcnt = kid->iovcnt;
	bs_submit(kid->io->dev->components[comp], r);
}

int mp_stack_components(struct bs_dev *dev, struct bs_limits *lim,
			const bool *use, const uint64_t *start)
{
	unsigned i;

	for (i = 0; i < dev->ncomponents; i++) {
		struct bs_dev *c = dev->components[i];
		uint64_t s = start ? start[i] : 0;

		if (use && !use[i])
			continue;
		if (bs_limits_stack(lim, &c->limits, s))
			return bs_error(-EINVAL, "%s: %s: component %s starts at "
					"byte %llu, not on a %u-byte block of the "
					"stack", dev->name, dev->type->name,
					c->name, (unsigned long long)s,
					lim->logical_block_size);
	}
	bs_explain_stacked(dev, lim, use, BS_CAP_WRITE_ZEROES_UNMAP,
			   dev->wz_reason, sizeof(dev->wz_reason));
	return 0;
}

int64_t mp_components_allocated(struct bs_dev *dev)
{
	int64_t sum = 0;
	unsigned i;

	for (i = 0; i < dev->ncomponents; i++) {
		int64_t a = bs_dev_allocated(dev->components[i]);

		if (a < 0)
			return a;
		sum += a;
	}
	return sum;
}
