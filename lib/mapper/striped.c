/* SPDX-License-Identifier: MIT */
/*
 * striped: RAID 0 over N components of one size, the dm-stripe analogue.
 * Chunk k of the device is chunk k / N of component k % N. A request is
 * cut at chunk boundaries; the pieces that land on one component are
 * contiguous there, so they travel as one child request per component
 * (a gathered iovec for data), capped at MAX_KID_SEGS buffer segments.
 * Write-zeroes and discard go to the components as the same operation
 * with the same flags: a mapper never turns them into data writes.
 *
 * Options: devices = A B ...; chunk = SIZE (64K; a power of two and a
 * multiple of the logical block size of the stack).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

#include "mapper/mapper.h"

#define DEFAULT_CHUNK (64u * 1024)
#define MAX_CHUNK (1u << 30)
/* buffer segments per child request: stays under every driver's IOV_MAX */
#define MAX_KID_SEGS 256

struct striped {
	uint64_t chunk;		/* bytes, power of two */
	unsigned shift;		/* log2(chunk) */
	uint64_t comp_bytes;	/* bytes used on each component */
};

static int striped_stack(struct bs_dev *dev, struct bs_limits *lim)
{
	struct striped *s = dev->priv;
	uint64_t opt;
	int err;

	err = mp_stack_components(dev, lim, NULL, NULL);
	if (err)
		return err;
	if (s->chunk % lim->logical_block_size ||
	    s->chunk < lim->physical_block_size)
		return bs_error(-EINVAL, "%s: striped: chunk %llu is not a "
				"multiple of the %u-byte blocks (physical %u) of "
				"the components", dev->name,
				(unsigned long long)s->chunk,
				lim->logical_block_size,
				lim->physical_block_size);
	/*
	 * The mapper's own hints after stacking (as dm's io_hints): the
	 * chunk is the smallest I/O that does not straddle components, a
	 * full stripe the best; these replace what the components said.
	 */
	lim->io_min = (uint32_t)s->chunk;
	if (lim->io_min < lim->physical_block_size)
		lim->io_min = lim->physical_block_size;
	opt = s->chunk * dev->ncomponents;
	lim->io_opt = opt <= UINT32_MAX ? (uint32_t)opt : 0;
	return 0;
}

static int striped_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct striped *s;
	struct bs_limits lim;
	uint64_t chunk = DEFAULT_CHUNK, csize;
	unsigned i;
	int err;

	err = bs_opts_get_size(opts, "chunk", &chunk);
	if (err < 0)
		return err;
	if (chunk < BS_SECTOR_SIZE || chunk > MAX_CHUNK ||
	    (chunk & (chunk - 1)))
		return bs_error(-EINVAL, "%s: striped: chunk %llu is not a power "
				"of two from 512 to 1G", dev->name,
				(unsigned long long)chunk);
	csize = dev->components[0]->size;
	for (i = 1; i < dev->ncomponents; i++) {
		struct bs_dev *c = dev->components[i];

		if (c->size != csize)
			return bs_error(-EINVAL, "%s: striped: components must "
					"have one size: %s has %llu bytes, %s has "
					"%llu", dev->name, c->name,
					(unsigned long long)c->size,
					dev->components[0]->name,
					(unsigned long long)csize);
	}
	for (i = 0; i < dev->ncomponents; i++) {
		unsigned j;

		for (j = 0; j < i; j++)
			if (dev->components[j] == dev->components[i])
				return bs_error(-EINVAL, "%s: striped: %s is "
						"listed twice", dev->name,
						dev->components[i]->name);
	}
	if (csize < chunk)
		return bs_error(-EINVAL, "%s: striped: components (%llu bytes) "
				"are smaller than one chunk (%llu)", dev->name,
				(unsigned long long)csize,
				(unsigned long long)chunk);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->chunk = chunk;
	s->shift = (unsigned)__builtin_ctzll(chunk);
	s->comp_bytes = csize & ~(chunk - 1);
	dev->priv = s;
	dev->size = s->comp_bytes * dev->ncomponents;
	bs_limits_init_stacking(&lim);
	err = striped_stack(dev, &lim);
	if (err) {
		free(s);
		dev->priv = NULL;
	}
	return err;
}

static void striped_close(struct bs_dev *dev)
{
	free(dev->priv);
}

/* Device byte @off -> component index and byte offset on it. */
static unsigned map(const struct bs_dev *dev, uint64_t off, uint64_t *coff)
{
	const struct striped *s = dev->priv;
	uint64_t k = off >> s->shift;
	unsigned n = dev->ncomponents;

	*coff = ((k / n) << s->shift) | (off & (s->chunk - 1));
	return (unsigned)(k % n);
}

/*
 * Children @req needs at most: one per component for write-zeroes and
 * discard; for data one per chunk piece (a child holds at least one
 * piece), so a gathered child can be cut at MAX_KID_SEGS segments.
 */
static uint64_t max_kids(const struct bs_dev *dev, const struct bs_req *req)
{
	const struct striped *s = dev->priv;
	uint64_t first = req->offset >> s->shift;
	uint64_t last = (req->offset + req->len - 1) >> s->shift;
	uint64_t pieces = last - first + 1;

	if (!req->iov && pieces > dev->ncomponents)
		return dev->ncomponents;
	return pieces;
}

/*
 * Cut @req at chunk boundaries and give each piece to the child that
 * collects its component's pieces (they are contiguous on it). Returns
 * the number of children filled, or -ENOMEM.
 */
static int plan(struct bs_dev *dev, struct bs_req *req, struct mp_io *io)
{
	const struct striped *s = dev->priv;
	unsigned n = dev->ncomponents, c;
	uint64_t off = req->offset, end = req->offset + req->len;
	bool data = req->iov != NULL;
	int nk = 0;
	int cur[n];	/* child collecting component c's pieces, -1 none */

	for (c = 0; c < n; c++)
		cur[c] = -1;
	while (off < end) {
		uint64_t coff, len = s->chunk - (off & (s->chunk - 1));
		struct mp_kid *kid;

		if (len > end - off)
			len = end - off;
		c = map(dev, off, &coff);
		if (cur[c] < 0 ||
		    (data && io->kids[cur[c]].iovcnt >= MAX_KID_SEGS)) {
			cur[c] = nk++;
			mp_kid_init(io, (unsigned)cur[c], c, req->op,
				    req->flags, coff, 0);
		}
		kid = &io->kids[cur[c]];
		kid->req.len += len;
		if (data && mp_kid_add_iov(kid, req, off - req->offset, len))
			return -ENOMEM;
		off += len;
	}
	return nk;
}

static void striped_submit(struct bs_dev *dev, struct bs_req *req)
{
	unsigned n = dev->ncomponents, i;
	struct mp_io *io;
	int nk;

	if (req->op == BS_OP_FLUSH) {
		io = mp_io_new(dev, req, n);
		if (!io) {
			bs_req_complete(req, -ENOMEM);
			return;
		}
		for (i = 0; i < n; i++)
			mp_kid_init(io, i, i, BS_OP_FLUSH, 0, 0, 0);
		mp_io_submit(io, n);
		return;
	}
	io = mp_io_new(dev, req, (unsigned)max_kids(dev, req));
	if (!io) {
		bs_req_complete(req, -ENOMEM);
		return;
	}
	nk = plan(dev, req, io);
	if (nk < 0) {
		io->result = nk;
		mp_io_submit(io, 0);
		return;
	}
	mp_io_submit(io, (unsigned)nk);
}

struct walk {
	bs_extent_fn fn;
	void *arg;
	uint64_t shift;	/* device offset - component offset in this piece */
	uint64_t lo, hi; /* component range of the piece */
	int stop;
};

static int walk_fn(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct walk *w = arg;
	uint64_t a = off < w->lo ? w->lo : off, b = off + len;

	if (b > w->hi)
		b = w->hi;
	if (a >= b)
		return 0;
	w->stop = w->fn(w->arg, a + w->shift, b - a, flags);
	return w->stop;
}

/* Chunk by chunk, in device order: each chunk is described by its
 * component. */
static int striped_block_status(struct bs_dev *dev, uint64_t offset,
				uint64_t len, bs_extent_fn fn, void *arg)
{
	const struct striped *s = dev->priv;
	uint64_t off = offset, end = offset + len;

	while (off < end) {
		uint64_t coff, n = s->chunk - (off & (s->chunk - 1));
		unsigned c;
		struct walk w;
		int err;

		if (n > end - off)
			n = end - off;
		c = map(dev, off, &coff);
		w = (struct walk){ fn, arg, off - coff, coff, coff + n, 0 };
		err = bs_block_status(dev->components[c], coff, n, walk_fn, &w);
		if (err < 0)
			return err;
		if (w.stop)
			break;
		off += n;
	}
	return 0;
}

static void striped_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	const struct striped *s = dev->priv;
	char sz[32];
	unsigned i;

	kv(arg, "chunk", "%llu (%s)", (unsigned long long)s->chunk,
	   bs_fmt_size(s->chunk, sz, sizeof(sz)));
	kv(arg, "stripes", "%u", dev->ncomponents);
	kv(arg, "per_component", "%llu bytes used",
	   (unsigned long long)s->comp_bytes);
	for (i = 0; i < dev->ncomponents; i++) {
		char key[32];

		snprintf(key, sizeof(key), "stripe%u", i);
		kv(arg, key, "%s", dev->components[i]->name);
	}
}

static const struct bs_dev_type striped_type = {
	.name = "striped",
	.summary = "RAID 0: chunks dealt round robin over equal-size components",
	.options =
		"devices=A B ...      components, all of one size (required);\n"
		"                     chunk k lives on component k mod N\n"
		"chunk=SIZE           stripe unit, a power of two and a multiple\n"
		"                     of the components' block size (64K); the\n"
		"                     size is N x each component's size rounded\n"
		"                     down to whole chunks; optimal_io_size is\n"
		"                     N x chunk, minimum_io_size the chunk\n",
	.stacked = true,
	.open = striped_open,
	.close = striped_close,
	.submit = striped_submit,
	.stack_limits = striped_stack,
	.block_status = striped_block_status,
	.allocated = mp_components_allocated,
	.describe = striped_describe,
};

BS_DEV_TYPE(striped_type)
