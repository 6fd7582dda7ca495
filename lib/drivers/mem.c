/* SPDX-License-Identifier: MIT */
/*
 * mem: a thin RAM disk. Memory is taken in chunks on the first write of
 * non-zero data; unmap zeroing and discard give whole chunks back and zero
 * the partial ones; reads of unallocated chunks return zeroes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

/*
 * Zeroing and discard touch at most this much per turn of the loop: a
 * write-zeroes of a gigabyte that must stay allocated (NOUNMAP, or
 * zeroes = write) is a gigabyte of memset, done in slices so that the
 * loop serves every other client between them.
 */
#define MEM_SLICE (4u << 20)

enum zeroes_mode { Z_UNMAP, Z_WRITE, Z_NONE };
static const char *const zeroes_modes[] = { "unmap", "write", "none", NULL };

struct mem {
	/*
	 * Threads: reads, writes and NOUNMAP zeroing of several I/O threads
	 * share the read side (a missing chunk is installed with a
	 * compare-and-swap); freeing chunks (discard, unmap zeroing) takes
	 * the write side, so nobody copies from a chunk being freed.
	 */
	pthread_rwlock_t lock;
	uint64_t chunk;		/* bytes, power of two */
	unsigned shift;
	uint64_t nchunks;
	uint8_t **chunks;
	uint64_t allocated;	/* chunks in use (atomic) */
	bool detect_zeroes;
	bool broken_wz;		/* claims write-zeroes, answers EOPNOTSUPP */
	int zeroes;
};

/* A zeroing or discard in progress (bs_req_drv()). */
struct mem_req {
	struct bs_work work;
	struct bs_dev *dev;
	uint64_t done;		/* bytes of the range finished */
	bool keep;		/* blocks stay allocated */
};

static bool all_zero(const uint8_t *p, size_t n)
{
	static const uint8_t z[256];

	while (n >= sizeof(z)) {
		if (memcmp(p, z, sizeof(z)))
			return false;
		p += sizeof(z);
		n -= sizeof(z);
	}
	return !n || !memcmp(p, z, n);
}

static int mem_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct mem *m;
	uint64_t size = 0, chunk = 64 * 1024, max_wz = 1ull << 30;
	uint64_t max_discard = 1ull << 30, max_io = 1 << 20;
	uint32_t lbs = 512, pbs = 0;
	bool wc = false;
	int err;

	if ((err = bs_opts_get_size(opts, "size", &size)) < 0 ||
	    (err = bs_opts_get_size(opts, "chunk", &chunk)) < 0 ||
	    (err = bs_opts_get_u32(opts, "logical_block_size", &lbs)) < 0 ||
	    (err = bs_opts_get_u32(opts, "physical_block_size", &pbs)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_write_zeroes", &max_wz)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_discard", &max_discard)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_io", &max_io)) < 0 ||
	    (err = bs_opts_get_bool(opts, "write_cache", &wc)) < 0)
		return err;
	if (!size)
		return bs_error(-EINVAL, "%s: mem needs size = SIZE", dev->name);
	if (lbs < 512 || lbs > 65536 || (lbs & (lbs - 1)))
		return bs_error(-EINVAL, "%s: logical_block_size %u is not a "
				"power of two from 512 to 64K", dev->name, lbs);
	if (pbs && (pbs < lbs || (pbs & (pbs - 1))))
		return bs_error(-EINVAL, "%s: physical_block_size %u must be a "
				"power of two >= logical_block_size", dev->name,
				pbs);
	if (chunk < lbs || chunk > (1u << 30) || (chunk & (chunk - 1)))
		return bs_error(-EINVAL, "%s: chunk must be a power of two "
				"between the block size and 1G", dev->name);
	if (size % lbs)
		return bs_error(-EINVAL, "%s: size is not a multiple of the "
				"logical block size %u", dev->name, lbs);
	if (max_io < lbs || max_io > (1ull << 31) ||
	    max_wz > (uint64_t)UINT32_MAX << 9 ||
	    max_discard > (uint64_t)UINT32_MAX << 9)
		return bs_error(-EINVAL, "%s: max_io/max_write_zeroes/"
				"max_discard out of range", dev->name);

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_rwlock_init(&m->lock, NULL);
	m->zeroes = Z_UNMAP;
	m->detect_zeroes = true;
	if ((err = bs_opts_get_enum(opts, "zeroes", zeroes_modes,
				    &m->zeroes)) < 0 ||
	    (err = bs_opts_get_bool(opts, "detect_zeroes",
				    &m->detect_zeroes)) < 0 ||
	    (err = bs_opts_get_bool(opts, "broken_write_zeroes",
				    &m->broken_wz)) < 0) {
		free(m);
		return err;
	}
	m->chunk = chunk;
	m->shift = (unsigned)__builtin_ctzll(chunk);
	m->nchunks = (size + chunk - 1) >> m->shift;
	m->chunks = calloc(m->nchunks, sizeof(*m->chunks));
	if (!m->chunks) {
		uint64_t n = m->nchunks;
		free(m);
		return bs_error(-ENOMEM, "%s: no memory for %llu chunk pointers",
				dev->name, (unsigned long long)n);
	}

	dev->size = size;
	dev->priv = m;
	dev->limits.logical_block_size = lbs;
	dev->limits.physical_block_size = pbs ? pbs : lbs;
	dev->limits.max_hw_sectors = (uint32_t)(max_io >> 9);
	dev->limits.max_discard_sectors = (uint32_t)(max_discard >> 9);
	dev->limits.discard_granularity = lbs;
	if (wc)
		dev->limits.features |= BS_FEAT_WRITE_CACHE;
	switch (m->zeroes) {
	case Z_UNMAP:
		dev->limits.max_write_zeroes_sectors = (uint32_t)(max_wz >> 9);
		dev->limits.features |= BS_FEAT_WRITE_ZEROES_UNMAP;
		bs_dev_set_reason(dev, "mem: write-zeroes frees whole chunks "
				  "(unmap)");
		break;
	case Z_WRITE:
		dev->limits.max_write_zeroes_sectors = (uint32_t)(max_wz >> 9);
		bs_dev_set_reason(dev, "mem: zeroes = write set by the user: "
				  "write-zeroes writes, no unmap");
		break;
	default:
		bs_dev_set_reason(dev, "mem: zeroes = none set by the user: no "
				  "write-zeroes command");
		break;
	}
	return 0;
}

static void mem_close(struct bs_dev *dev)
{
	struct mem *m = dev->priv;
	uint64_t i;

	for (i = 0; i < m->nchunks; i++)
		free(m->chunks[i]);
	free(m->chunks);
	pthread_rwlock_destroy(&m->lock);
	free(m);
}

static uint8_t *chunk_at(const struct mem *m, uint64_t idx)
{
	return __atomic_load_n(&m->chunks[idx], __ATOMIC_ACQUIRE);
}

/* Under the read side: the chunk, allocated now if it was a hole. */
static uint8_t *chunk_get(struct mem *m, uint64_t idx)
{
	uint8_t *c = chunk_at(m, idx), *expect = NULL;

	if (c)
		return c;
	c = calloc(1, m->chunk);
	if (!c)
		return NULL;
	if (!__atomic_compare_exchange_n(&m->chunks[idx], &expect, c, false,
					 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		free(c);	/* another thread installed one first */
		return expect;
	}
	__atomic_fetch_add(&m->allocated, 1, __ATOMIC_RELAXED);
	return c;
}

/* Under the write side. */
static void chunk_put(struct mem *m, uint64_t idx)
{
	if (m->chunks[idx]) {
		free(m->chunks[idx]);
		__atomic_store_n(&m->chunks[idx], NULL, __ATOMIC_RELEASE);
		__atomic_fetch_sub(&m->allocated, 1, __ATOMIC_RELAXED);
	}
}

/* Walk [off, off+len) chunk by chunk. */
#define FOR_EACH_PIECE(m, off, len, idx, coff, n)                        \
	for (uint64_t _o = (off), _e = (off) + (len), idx, coff, n;      \
	     _o < _e && ((idx = _o >> (m)->shift),                       \
			 (coff = _o & ((m)->chunk - 1)),                 \
			 (n = (m)->chunk - coff < _e - _o ?              \
				      (m)->chunk - coff : _e - _o),      \
			 1);                                             \
	     _o += n)

static int do_read(struct mem *m, struct bs_req *req)
{
	uint64_t done = 0;
	int i;

	for (i = 0; i < req->iovcnt; i++) {
		uint8_t *dst = req->iov[i].iov_base;
		FOR_EACH_PIECE(m, req->offset + done, req->iov[i].iov_len, idx,
			       coff, n) {
			const uint8_t *c = chunk_at(m, idx);
			if (c)
				memcpy(dst, c + coff, n);
			else
				memset(dst, 0, n);
			dst += n;
		}
		done += req->iov[i].iov_len;
	}
	return 0;
}

static int do_write(struct mem *m, struct bs_req *req)
{
	uint64_t done = 0;
	int i;

	for (i = 0; i < req->iovcnt; i++) {
		const uint8_t *src = req->iov[i].iov_base;
		FOR_EACH_PIECE(m, req->offset + done, req->iov[i].iov_len, idx,
			       coff, n) {
			uint8_t *c = chunk_at(m, idx);
			/* thin: zeroes into a hole need no memory */
			if (!c && m->detect_zeroes && all_zero(src, n)) {
				src += n;
				continue;
			}
			c = chunk_get(m, idx);
			if (!c)
				return -ENOMEM;
			memcpy(c + coff, src, n);
			src += n;
		}
		done += req->iov[i].iov_len;
	}
	return 0;
}

/* Zero a range; @keep: blocks stay allocated (NOUNMAP), else free chunks. */
static int do_zero(struct mem *m, uint64_t off, uint64_t len, bool keep)
{
	FOR_EACH_PIECE(m, off, len, idx, coff, n) {
		if (!keep && n == m->chunk) {
			chunk_put(m, idx);
		} else if (keep) {
			uint8_t *c = chunk_get(m, idx);
			if (!c)
				return -ENOMEM;
			memset(c + coff, 0, n);
		} else if (chunk_at(m, idx)) {
			memset(chunk_at(m, idx) + coff, 0, n);
		}
	}
	return 0;
}

/* One slice of a zeroing or discard, then the rest on a later turn. */
static void zero_slice(void *arg)
{
	struct bs_req *req = arg;
	struct mem_req *mr = bs_req_drv(req);
	struct mem *m = mr->dev->priv;
	uint64_t n = req->len - mr->done;
	int err;

	if (n > MEM_SLICE)
		n = MEM_SLICE;
	if (mr->keep)
		pthread_rwlock_rdlock(&m->lock);
	else
		pthread_rwlock_wrlock(&m->lock);	/* frees chunks */
	err = do_zero(m, req->offset + mr->done, n, mr->keep);
	pthread_rwlock_unlock(&m->lock);
	mr->done += n;
	if (err || mr->done == req->len) {
		bs_req_complete(req, err);
		return;
	}
	/* the next slice on a later turn of this request's own loop */
	bs_loop_defer(req->loop, &mr->work);
}

static void zero_start(struct bs_dev *dev, struct bs_req *req, bool keep)
{
	struct mem_req *mr = bs_req_drv(req);

	mr->dev = dev;
	mr->keep = keep;
	mr->work.fn = zero_slice;
	mr->work.arg = req;
	zero_slice(req);
}

static void mem_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct mem *m = dev->priv;
	int err = 0;

	switch (req->op) {
	case BS_OP_READ:
		pthread_rwlock_rdlock(&m->lock);
		err = do_read(m, req);
		pthread_rwlock_unlock(&m->lock);
		break;
	case BS_OP_WRITE:
		pthread_rwlock_rdlock(&m->lock);
		err = do_write(m, req);
		pthread_rwlock_unlock(&m->lock);
		break;
	case BS_OP_FLUSH:
		break;
	case BS_OP_DISCARD:
		zero_start(dev, req, false);
		return;
	case BS_OP_WRITE_ZEROES:
		if (m->broken_wz) {
			err = -EOPNOTSUPP;
			break;
		}
		zero_start(dev, req, (req->flags & BS_REQ_NOUNMAP) ||
				     m->zeroes == Z_WRITE);
		return;
	default:
		err = -EINVAL;
	}
	bs_req_complete(req, err);
}

static int mem_block_status(struct bs_dev *dev, uint64_t offset, uint64_t len,
			    bs_extent_fn fn, void *arg)
{
	struct mem *m = dev->priv;
	uint64_t idx = offset >> m->shift, end = offset + len;
	uint64_t pos = idx << m->shift;

	pthread_rwlock_rdlock(&m->lock);
	while (pos < end && idx < m->nchunks) {
		bool hole = !chunk_at(m, idx);
		uint64_t start = pos;
		while (idx < m->nchunks && !chunk_at(m, idx) == hole &&
		       pos < end) {
			idx++;
			pos += m->chunk;
		}
		if (pos > dev->size)
			pos = dev->size;
		if (fn(arg, start, pos - start,
		       hole ? BS_EXT_HOLE | BS_EXT_ZERO : 0))
			break;
	}
	pthread_rwlock_unlock(&m->lock);
	return 0;
}

static int64_t mem_allocated(struct bs_dev *dev)
{
	struct mem *m = dev->priv;

	return (int64_t)(__atomic_load_n(&m->allocated, __ATOMIC_RELAXED) *
			 m->chunk);
}

static void mem_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct mem *m = dev->priv;

	kv(arg, "chunk", "%llu", (unsigned long long)m->chunk);
	kv(arg, "zeroes", "%s", zeroes_modes[m->zeroes]);
	kv(arg, "detect_zeroes", "%d", m->detect_zeroes);
}

static const struct bs_dev_type mem_type = {
	.name = "mem",
	.spec_key = "size",
	.summary = "thin RAM disk, chunks allocated on first write",
	.req_ctx_size = sizeof(struct mem_req),
	.options =
		"size=SIZE            capacity (required; mem:SIZE)\n"
		"chunk=SIZE           allocation unit (64K)\n"
		"logical_block_size=N 512..65536 (512)\n"
		"physical_block_size=N (= logical)\n"
		"max_io=SIZE          largest read/write (1M)\n"
		"max_write_zeroes=SIZE largest write-zeroes (1G)\n"
		"max_discard=SIZE     largest discard (1G)\n"
		"zeroes=unmap|write|none  what write-zeroes does (unmap)\n"
		"detect_zeroes=0|1    zero writes into holes allocate nothing (1)\n"
		"write_cache=0|1      pretend a volatile cache (0)\n"
		"broken_write_zeroes=0|1 claim write-zeroes, fail it (tests)\n",
	.open = mem_open,
	.close = mem_close,
	.submit = mem_submit,
	.block_status = mem_block_status,
	.allocated = mem_allocated,
	.describe = mem_describe,
};

BS_DEV_TYPE(mem_type)
