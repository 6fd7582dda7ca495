/* SPDX-License-Identifier: MIT */
/*
 * linear: the components (or ranges of them) one after another, the
 * dm-linear analogue. Requests are split where one segment ends and the
 * next begins; every piece, write-zeroes and discard included, goes to its
 * component as the same operation with the same flags.
 *
 * Options: devices = A B ...; map = OFFSET[:LENGTH] ... (one entry per
 * component, in the order of devices; LENGTH omitted = to the end of the
 * component; no map = every component whole).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

#include "mapper/mapper.h"

struct linear {
	uint64_t *start;	/* segment i's first byte in the linear device */
	uint64_t *coff;		/* ... and on its component */
	uint64_t *len;
};

static int parse_map(struct bs_dev *dev, struct linear *l, const char *map)
{
	char *copy = strdup(map), *tok, *save = NULL;
	unsigned i = 0;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, " \t", &save); tok;
	     tok = strtok_r(NULL, " \t", &save), i++) {
		char *colon = strchr(tok, ':');
		struct bs_dev *c;

		if (i >= dev->ncomponents) {
			err = bs_error(-EINVAL, "%s: linear: map has more entries "
				       "than devices (%u)", dev->name,
				       dev->ncomponents);
			goto out;
		}
		c = dev->components[i];
		if (colon)
			*colon = 0;
		if (bs_parse_size(tok, &l->coff[i]) ||
		    (colon && bs_parse_size(colon + 1, &l->len[i]))) {
			err = bs_error(-EINVAL, "%s: linear: map entry %u for %s: "
				       "want OFFSET[:LENGTH] with sizes like 1M",
				       dev->name, i + 1, c->name);
			goto out;
		}
		if (!colon)
			l->len[i] = l->coff[i] <= c->size ? c->size - l->coff[i] : 0;
		if (l->coff[i] > c->size || l->len[i] > c->size - l->coff[i] ||
		    !l->len[i]) {
			err = bs_error(-EINVAL, "%s: linear: map entry %u: %s has "
				       "%llu bytes, range %llu+%llu is empty or "
				       "beyond its end", dev->name, i + 1,
				       c->name, (unsigned long long)c->size,
				       (unsigned long long)l->coff[i],
				       (unsigned long long)l->len[i]);
			goto out;
		}
	}
	if (i != dev->ncomponents)
		err = bs_error(-EINVAL, "%s: linear: map has %u entries for %u "
			       "devices", dev->name, i, dev->ncomponents);
out:
	free(copy);
	return err;
}

static void linear_free(struct linear *l)
{
	free(l->start);
	free(l->coff);
	free(l->len);
	free(l);
}

static int linear_stack(struct bs_dev *dev, struct bs_limits *lim)
{
	struct linear *l = dev->priv;
	unsigned i;
	int err;

	err = mp_stack_components(dev, lim, NULL, l->start);
	if (err)
		return err;
	/* each segment must also start on a block of its own component */
	for (i = 0; i < dev->ncomponents; i++) {
		uint32_t lbs = lim->logical_block_size;
		if ((l->coff[i] | l->len[i]) % lbs)
			return bs_error(-EINVAL, "%s: linear: segment on %s "
					"(%llu+%llu) is not aligned to the %u-byte "
					"blocks of the stack", dev->name,
					dev->components[i]->name,
					(unsigned long long)l->coff[i],
					(unsigned long long)l->len[i], lbs);
	}
	return 0;
}

static int linear_open(struct bs_dev *dev, struct bs_opts *opts)
{
	const char *map = bs_opts_get(opts, "map");
	struct bs_limits lim;
	struct linear *l;
	uint64_t pos = 0;
	unsigned i, n = dev->ncomponents;
	int err;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->start = calloc(n, sizeof(uint64_t));
	l->coff = calloc(n, sizeof(uint64_t));
	l->len = calloc(n, sizeof(uint64_t));
	if (!l->start || !l->coff || !l->len) {
		linear_free(l);
		return -ENOMEM;
	}
	if (map) {
		err = parse_map(dev, l, map);
		if (err) {
			linear_free(l);
			return err;
		}
	} else {
		for (i = 0; i < n; i++)
			l->len[i] = dev->components[i]->size;
	}
	for (i = 0; i < n; i++) {
		l->start[i] = pos;
		pos += l->len[i];
	}
	dev->priv = l;
	dev->size = pos;
	bs_limits_init_stacking(&lim);
	err = linear_stack(dev, &lim);
	if (err) {
		linear_free(l);
		dev->priv = NULL;
	}
	return err;
}

static void linear_close(struct bs_dev *dev)
{
	linear_free(dev->priv);
}

/* Segment holding byte @off (binary search over the starts). */
static unsigned seg_of(const struct bs_dev *dev, uint64_t off)
{
	const struct linear *l = dev->priv;
	unsigned lo = 0, hi = dev->ncomponents;

	while (hi - lo > 1) {
		unsigned mid = (lo + hi) / 2;
		if (l->start[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static void linear_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct linear *l = dev->priv;
	struct mp_io *io;
	unsigned n = 0, s, first;
	uint64_t off = req->offset, end = req->offset + req->len;

	if (req->op == BS_OP_FLUSH) {
		io = mp_io_new(dev, req, dev->ncomponents);
		if (!io) {
			bs_req_complete(req, -ENOMEM);
			return;
		}
		for (s = 0; s < dev->ncomponents; s++)
			mp_kid_init(io, s, s, BS_OP_FLUSH, 0, 0, 0);
		mp_io_submit(io, dev->ncomponents);
		return;
	}
	first = seg_of(dev, off);
	for (s = first; s < dev->ncomponents && l->start[s] < end; s++)
		n++;
	io = mp_io_new(dev, req, n);
	if (!io) {
		bs_req_complete(req, -ENOMEM);
		return;
	}
	for (s = first, n = 0; off < end; s++, n++) {
		uint64_t in = off - l->start[s];
		uint64_t len = l->len[s] - in;

		if (len > end - off)
			len = end - off;
		mp_kid_init(io, n, s, req->op, req->flags, l->coff[s] + in, len);
		if (req->iov && mp_kid_add_iov(&io->kids[n], req,
					       off - req->offset, len)) {
			io->result = -ENOMEM;
			mp_io_submit(io, 0);
			return;
		}
		off += len;
	}
	mp_io_submit(io, n);
}

struct bs_walk {
	bs_extent_fn fn;
	void *arg;
	uint64_t shift;	/* add to component offsets */
	uint64_t lo, hi; /* component range of the segment */
	int stop;
};

static int walk_fn(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct bs_walk *w = arg;
	uint64_t s = off < w->lo ? w->lo : off, e = off + len;

	if (e > w->hi)
		e = w->hi;
	if (s >= e)
		return 0;
	w->stop = w->fn(w->arg, s + w->shift, e - s, flags);
	return w->stop;
}

static int linear_block_status(struct bs_dev *dev, uint64_t offset,
			       uint64_t len, bs_extent_fn fn, void *arg)
{
	struct linear *l = dev->priv;
	uint64_t end = offset + len;
	unsigned s;

	for (s = seg_of(dev, offset); s < dev->ncomponents &&
	     l->start[s] < end; s++) {
		uint64_t a = offset > l->start[s] ? offset : l->start[s];
		uint64_t b = end < l->start[s] + l->len[s] ? end
			     : l->start[s] + l->len[s];
		struct bs_walk w = { fn, arg, l->start[s] - l->coff[s],
				     l->coff[s] + (a - l->start[s]),
				     l->coff[s] + (b - l->start[s]), 0 };
		int err = bs_block_status(dev->components[s], w.lo, w.hi - w.lo,
					  walk_fn, &w);
		if (err < 0)
			return err;
		if (w.stop)
			break;
	}
	return 0;
}

static int64_t linear_allocated(struct bs_dev *dev)
{
	int64_t sum = 0;
	unsigned i, j;

	for (i = 0; i < dev->ncomponents; i++) {
		int64_t a;
		bool seen = false;

		for (j = 0; j < i; j++)
			seen |= dev->components[j] == dev->components[i];
		if (seen)
			continue;
		a = bs_dev_allocated(dev->components[i]);
		if (a < 0)
			return a;
		sum += a;
	}
	return sum;
}

static void linear_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct linear *l = dev->priv;
	unsigned i;

	for (i = 0; i < dev->ncomponents; i++) {
		char key[32];
		snprintf(key, sizeof(key), "segment%u", i);
		kv(arg, key, "%s offset %llu length %llu at %llu",
		   dev->components[i]->name, (unsigned long long)l->coff[i],
		   (unsigned long long)l->len[i],
		   (unsigned long long)l->start[i]);
	}
}

static const struct bs_dev_type linear_type = {
	.name = "linear",
	.summary = "concatenation of components (or ranges of them)",
	.options =
		"devices=A B ...      components, in order (required)\n"
		"map=OFF[:LEN] ...    range of each component, in the order of\n"
		"                     devices; LEN omitted = to its end (whole)\n",
	.stacked = true,
	.open = linear_open,
	.close = linear_close,
	.submit = linear_submit,
	.stack_limits = linear_stack,
	.block_status = linear_block_status,
	.allocated = linear_allocated,
	.describe = linear_describe,
};

BS_DEV_TYPE(linear_type)
