/* SPDX-License-Identifier: MIT */
/*
 * Byte-granular requests (lib/core/rmw.c) and the write ordering that keeps
 * read-modify-writes from losing bytes (lib/core/order.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)

/* ---- a test device that holds requests until the test releases them ---- */

#define HELD_MAX 4096

struct held {
	uint8_t *data;
	struct bs_req *q[HELD_MAX];
	unsigned n;
	unsigned max_n;		/* most held at once */
};

static int held_open(struct bs_dev *dev, struct bs_opts *opts)
{
	uint64_t size = 0;
	uint32_t lbs = 512;
	struct held *h;
	int err;

	if ((err = bs_opts_get_size(opts, "size", &size)) < 0 ||
	    (err = bs_opts_get_u32(opts, "logical_block_size", &lbs)) < 0)
		return err;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->data = calloc(1, size);
	if (!h->data) {
		free(h);
		return -ENOMEM;
	}
	dev->size = size;
	dev->priv = h;
	dev->limits.logical_block_size = lbs;
	dev->limits.physical_block_size = lbs;
	dev->limits.max_hw_sectors = 2048;
	dev->limits.max_write_zeroes_sectors = 2048;
	dev->limits.max_discard_sectors = 2048;
	dev->limits.discard_granularity = lbs;
	return 0;
}

static void held_close(struct bs_dev *dev)
{
	struct held *h = dev->priv;

	free(h->data);
	free(h);
}

static void held_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct held *h = dev->priv;

	assert_true(h->n < HELD_MAX);
	h->q[h->n++] = req;
	if (h->n > h->max_n)
		h->max_n = h->n;
}

static const struct bs_dev_type held_type = {
	.name = "held",
	.summary = "test: requests wait until the test releases them",
	.spec_key = "size",
	.open = held_open,
	.close = held_close,
	.submit = held_submit,
};
BS_DEV_TYPE(held_type)

/* Carry out one held request, picked at random, and complete it. */
static void held_release_one(struct bs_dev *dev, uint64_t *rng)
{
	struct held *h = dev->priv;
	unsigned i = (unsigned)(th_rand(rng) % h->n);
	struct bs_req *req = h->q[i];
	uint64_t off = req->offset;
	int k;

	h->q[i] = h->q[--h->n];
	switch (req->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
		for (k = 0; k < req->iovcnt; k++) {
			if (req->op == BS_OP_READ)
				memcpy(req->iov[k].iov_base, h->data + off,
				       req->iov[k].iov_len);
			else
				memcpy(h->data + off, req->iov[k].iov_base,
				       req->iov[k].iov_len);
			off += req->iov[k].iov_len;
		}
		break;
	case BS_OP_DISCARD:
	case BS_OP_WRITE_ZEROES:
		memset(h->data + off, 0, req->len);
		break;
	default:
		break;
	}
	bs_req_complete(req, 0);
}

/* ---- synchronous byte-granular helpers ---------------------------------- */

struct wait1 {
	bool done;
};

static void wait1_done(struct bs_req *req)
{
	((struct wait1 *)req->priv)->done = true;
}

static int bytes_sync(struct bs_dev *d, enum bs_op op, uint32_t flags,
		      uint64_t off, uint64_t len, void *buf)
{
	struct wait1 w = { false };
	struct bs_req req;
	int err;

	bs_req_init(&req, op, flags, off, len, buf, wait1_done, &w);
	bs_submit_bytes(d, &req);
	assert_false(w.done); /* never completed inside the submit */
	err = bs_ctx_wait(d->ctx, &w.done);
	return err ? err : req.result;
}

struct zwait {
	bool done;
	int result;
};

static void zwait_done(void *arg, int result)
{
	struct zwait *w = arg;

	w->result = result;
	w->done = true;
}

static int zero_bytes_sync(struct bs_dev *d, uint64_t off, uint64_t len,
			   unsigned flags)
{
	struct zwait w = { false, 0 };
	int err = bs_zeroout_bytes(d, off, len, flags, zwait_done, &w);

	if (err)
		return err;
	assert_false(w.done);
	err = bs_ctx_wait(d->ctx, &w.done);
	return err ? err : w.result;
}

/* ---- tests -------------------------------------------------------------- */

/* bs_submit() keeps the block device rule; bs_submit_bytes() serves it. */
static void plain_submit_still_aligned(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,logical_block_size=4096");
	uint8_t buf[5000], got[5000];

	th_fill(buf, sizeof(buf), 1);
	assert_int_equal(bs_io_sync(d, BS_OP_WRITE, 0, 1, 1000, buf), -EINVAL);
	assert_int_equal(bs_io_sync(d, BS_OP_READ, 0, 0, 1000, got), -EINVAL);
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, 1, 1000, buf), 0);
	assert_int_equal(bytes_sync(d, BS_OP_READ, 0, 1, 1000, got), 0);
	assert_memory_equal(got, buf, 1000);
	/* byte 0 and the rest of the block untouched */
	assert_int_equal(bytes_sync(d, BS_OP_READ, 0, 0, 1, got), 0);
	assert_int_equal(got[0], 0);
	assert_int_equal(bytes_sync(d, BS_OP_READ, 0, 1001, 3095, got), 0);
	assert_true(th_is_zero(got, 3095));
	/* out of bounds is still refused, and nothing reached the driver */
	d->stats.ops[BS_OP_WRITE] = 0;
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, MiB - 10, 11, buf),
			 -EINVAL);
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, MiB, 1, buf), -EINVAL);
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, UINT64_MAX, 2, buf),
			 -EINVAL);
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, 10, 0, buf), -EINVAL);
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, BS_REQ_NOUNMAP, 10, 10,
				    buf), -EINVAL);
	assert_int_equal(bytes_sync(d, BS_OP_READ, BS_REQ_FUA, 10, 10, got),
			 -EINVAL);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 0);
}

static void readonly_and_unsupported(void **state)
{
	struct bs_dev *r = th_dev(*state, "r", "mem:1M,readonly=1");
	struct bs_dev *n = th_dev(*state, "n",
				  "mem:1M,zeroes=none,max_discard=0");
	uint8_t buf[100] = { 0 };

	assert_int_equal(bytes_sync(r, BS_OP_WRITE, 0, 3, 100, buf), -EROFS);
	assert_int_equal(zero_bytes_sync(r, 3, 100, 0), -EROFS);
	assert_int_equal(bytes_sync(r, BS_OP_READ, 0, 3, 100, buf), 0);
	assert_int_equal(bytes_sync(n, BS_OP_DISCARD, 0, 3, 1000, NULL),
			 -EOPNOTSUPP);
	assert_int_equal(bytes_sync(n, BS_OP_WRITE_ZEROES, 0, 3, 1000, NULL),
			 -EOPNOTSUPP);
	/* the zeroout falls back to writing for the middle */
	assert_int_equal(zero_bytes_sync(n, 3, 5000, 0), 0);
	/* but "fast" cannot be partial blocks */
	assert_int_equal(zero_bytes_sync(n, 3, 5000, BS_ZERO_NOFALLBACK),
			 -EOPNOTSUPP);
}

/* Random byte-granular I/O against a byte model, every byte compared. */
static void model_run(struct bs_dev *d, uint64_t seed, unsigned n)
{
	uint64_t size = d->size, lbs = d->limits.logical_block_size;
	uint8_t *model = calloc(1, size), *buf = malloc(size),
		*got = malloc(size);
	uint64_t rng = seed;
	unsigned i;

	assert_int_equal(zero_bytes_sync(d, 0, size, 0), 0);
	for (i = 0; i < n; i++) {
		unsigned what = (unsigned)(th_rand(&rng) % 5);
		uint64_t off = th_rand(&rng) % size, len, b, e;

		/* lengths from 1 byte to a few blocks, some across splits */
		len = 1 + th_rand(&rng) % (th_rand(&rng) % 4 ? 2 * lbs : 40 * KiB);
		if (len > size - off)
			len = size - off;
		switch (what) {
		case 0:
		case 1:
			th_fill(buf, len, seed * 1000 + i);
			assert_int_equal(bytes_sync(d, BS_OP_WRITE,
						    what ? BS_REQ_FUA : 0, off,
						    len, buf), 0);
			memcpy(model + off, buf, len);
			break;
		case 2:
			assert_int_equal(zero_bytes_sync(d, off, len,
							 i & 1 ? BS_ZERO_NOUNMAP : 0),
					 0);
			memset(model + off, 0, len);
			break;
		case 3:
			assert_int_equal(bytes_sync(d, BS_OP_DISCARD, 0, off,
						    len, NULL), 0);
			/* only whole blocks inside; mem reads them as 0 */
			b = (off + lbs - 1) / lbs * lbs;
			e = (off + len) / lbs * lbs;
			if (b < e)
				memset(model + b, 0, e - b);
			break;
		default:
			assert_int_equal(bytes_sync(d, BS_OP_READ, 0, off, len,
						    got), 0);
			assert_memory_equal(got, model + off, len);
			break;
		}
	}
	assert_int_equal(bs_read_sync(d, got, size, 0), 0);
	assert_memory_equal(got, model, size);
	/* nothing left in the ordering */
	assert_null(d->wt.active);
	assert_null(d->wt.wait_head);
	assert_int_equal(d->wt.nexcl, 0);
	free(model);
	free(buf);
	free(got);
}

static void model_512(void **state)
{
	model_run(th_dev(*state, "d", "mem:256K,max_io=8K,chunk=4K"), 1, 600);
}

static void model_4k_write_cache(void **state)
{
	model_run(th_dev(*state, "d", "mem:512K,logical_block_size=4096,"
			 "max_io=16K,write_cache=1,max_write_zeroes=8K"),
		  2, 600);
}

static void model_no_write_zeroes(void **state)
{
	model_run(th_dev(*state, "d", "mem:256K,zeroes=none,max_io=4K"), 3,
		  400);
}

/* Through a mapper: the byte path sits above any device. */
static void model_linear(void **state)
{
	th_dev(*state, "m", "mem:1M,logical_block_size=4096");
	model_run(th_dev_kv(*state, "v", "type=linear;devices=m"), 4, 300);
}

/* The cuts at their edges: aligned start or end, one byte, the last byte. */
static void edges(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:64K,logical_block_size=4096");
	static const struct {
		uint64_t off, len;
	} rows[] = {
		{ 0, 1 }, { 0, 4095 }, { 4096, 100 }, { 1, 4095 }, { 4095, 1 },
		{ 4095, 4097 }, { 100, 8092 }, { 8192, 4097 }, { 3, 12285 },
		{ 65535, 1 }, { 61440, 4095 }, { 1, 65535 }, { 0, 65535 },
	};
	uint8_t *model = calloc(1, 64 * KiB), *buf = malloc(64 * KiB),
		*got = malloc(64 * KiB);
	unsigned i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint64_t off = rows[i].off, len = rows[i].len;

		print_message("row %u: %llu+%llu\n", i, (unsigned long long)off,
			      (unsigned long long)len);
		th_fill(buf, len, 100 + i);
		assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, off, len, buf), 0);
		memcpy(model + off, buf, len);
		assert_int_equal(bytes_sync(d, BS_OP_READ, 0, off, len, got), 0);
		assert_memory_equal(got, buf, len);
		assert_int_equal(bs_read_sync(d, got, 64 * KiB, 0), 0);
		assert_memory_equal(got, model, 64 * KiB);
		/* zero it again, through the same cut */
		assert_int_equal(zero_bytes_sync(d, off, len, 0), 0);
		memset(model + off, 0, len);
		assert_int_equal(bs_read_sync(d, got, 64 * KiB, 0), 0);
		assert_memory_equal(got, model, 64 * KiB);
	}
	free(model);
	free(buf);
	free(got);
}

/* The middle goes down as one request from the caller's buffer. */
static void middle_is_zero_copy(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,logical_block_size=4096");
	uint8_t *buf = malloc(64 * KiB);

	th_fill(buf, 64 * KiB, 5);
	memset(&d->stats, 0, sizeof(d->stats));
	/* 100 .. 100+60K: head block, 14 whole blocks, tail block */
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, 100, 60 * KiB, buf), 0);
	assert_int_equal(d->stats.ops[BS_OP_READ], 2);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 3);
	assert_int_equal(d->stats.bytes[BS_OP_WRITE], 2 * 4096 + 14 * 4096);
	/* aligned: straight down, nothing read */
	memset(&d->stats, 0, sizeof(d->stats));
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, 8192, 8192, buf), 0);
	assert_int_equal(d->stats.ops[BS_OP_READ], 0);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 1);
	/* unaligned read: two blocks bounced, the middle read in place */
	memset(&d->stats, 0, sizeof(d->stats));
	assert_int_equal(bytes_sync(d, BS_OP_READ, 0, 1, 3 * 4096, buf), 0);
	assert_int_equal(d->stats.ops[BS_OP_READ], 3);
	/* zeroes: partial blocks written, the middle as write-zeroes */
	memset(&d->stats, 0, sizeof(d->stats));
	assert_int_equal(zero_bytes_sync(d, 1, 5 * 4096, BS_ZERO_NOUNMAP), 0);
	assert_int_equal(d->stats.ops[BS_OP_WRITE_ZEROES], 1);
	assert_int_equal(d->stats.bytes[BS_OP_WRITE_ZEROES], 4 * 4096);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 2);
	/* a discard of no whole block reaches nothing, and succeeds */
	memset(&d->stats, 0, sizeof(d->stats));
	assert_int_equal(bytes_sync(d, BS_OP_DISCARD, 0, 1, 8190, NULL), 0);
	assert_int_equal(d->stats.ops[BS_OP_DISCARD], 0);
	assert_int_equal(bytes_sync(d, BS_OP_DISCARD, 0, 1, 8191 + 4096, NULL),
			 0);
	assert_int_equal(d->stats.ops[BS_OP_DISCARD], 1);
	assert_int_equal(d->stats.bytes[BS_OP_DISCARD], 8192);
	free(buf);
}

/* Unaligned zeroes keep NOUNMAP for the middle, and may unmap without it. */
static void zeroes_nounmap_kept(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,chunk=4K");
	uint8_t *buf = malloc(64 * KiB);

	th_fill(buf, 64 * KiB, 8);
	assert_int_equal(bs_write_sync(d, buf, 64 * KiB, 0), 0);
	assert_int_equal(bs_dev_allocated(d), 64 * KiB);
	assert_int_equal(zero_bytes_sync(d, 1, 64 * KiB - 2, BS_ZERO_NOUNMAP),
			 0);
	assert_int_equal(bs_dev_allocated(d), 64 * KiB);
	assert_int_equal(zero_bytes_sync(d, 1, 64 * KiB - 2, 0), 0);
	/* the chunks holding the partial blocks stay, the rest is freed */
	assert_int_equal(bs_dev_allocated(d), 8 * KiB);
	assert_int_equal(bs_read_sync(d, buf, 64 * KiB, 0), 0);
	assert_true(th_is_zero(buf + 1, 64 * KiB - 2));
	assert_false(th_is_zero(buf, 1) && th_is_zero(buf + 64 * KiB - 1, 1));
	free(buf);
}

/* FUA holds for every written piece: each is followed by a flush. */
static void fua_every_piece(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,write_cache=1");
	uint8_t buf[4096];

	th_fill(buf, sizeof(buf), 6);
	memset(&d->stats, 0, sizeof(d->stats));
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, BS_REQ_FUA, 100, 2000, buf),
			 0);
	/* head block, two whole blocks, tail block: three writes, three
	 * flushes (the device has a cache and no native FUA) */
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 3);
	assert_int_equal(d->stats.ops[BS_OP_FLUSH], 3);
	memset(&d->stats, 0, sizeof(d->stats));
	assert_int_equal(bytes_sync(d, BS_OP_WRITE, 0, 100, 2000, buf), 0);
	assert_int_equal(d->stats.ops[BS_OP_FLUSH], 0);
}

/*
 * Overlapping writes in flight at once on a device that completes them in
 * random order: a read-modify-write never loses another write's bytes.
 * Unaligned writes overlap each other (and one aligned write per block per
 * batch); conflicting writes are ordered by arrival, so the result must be
 * every write applied in submission order.
 */
struct ow {
	struct bs_req req;
	uint8_t buf[1024];
	bool done;
	int *outstanding;
};

static void ow_done(struct bs_req *req)
{
	struct ow *o = req->priv;

	assert_int_equal(req->result, 0);
	o->done = true;
	(*o->outstanding)--;
}

static void concurrent_overlap(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "h", "held:8K");
	struct held *h = d->priv;
	enum { NB = 4, BATCH = 64, ROUNDS = 30 };
	uint64_t lbs = 512, region = NB * lbs, rng = 42;
	uint8_t model[NB * 512], got[NB * 512];
	struct ow *ow = calloc(BATCH, sizeof(*ow));
	uint64_t waited = 0;
	unsigned round, i;
	int outstanding;

	for (round = 0; round < ROUNDS; round++) {
		bool aligned_used[NB] = { false };

		memcpy(model, h->data, region);
		outstanding = 0;
		for (i = 0; i < BATCH; i++) {
			struct ow *o = &ow[i];
			uint64_t off, len;
			unsigned blk = (unsigned)(th_rand(&rng) % NB);

			if (th_rand(&rng) % 6 == 0 && !aligned_used[blk]) {
				/* at most one aligned write per block: two
				 * plain writes in flight have no order */
				aligned_used[blk] = true;
				off = blk * lbs;
				len = lbs;
			} else {
				/* 1..511 bytes, maybe across one boundary:
				 * never a whole block (no middle) */
				len = 1 + th_rand(&rng) % (lbs - 1);
				off = th_rand(&rng) % (region - len + 1);
			}
			th_fill(o->buf, len, round * 1000 + i + 1);
			memcpy(model + off, o->buf, len);
			o->done = false;
			o->outstanding = &outstanding;
			bs_req_init(&o->req, BS_OP_WRITE, 0, off, len, o->buf,
				    ow_done, o);
			outstanding++;
			bs_submit_bytes(d, &o->req);
		}
		/* drive: complete one held request at a time, at random */
		for (i = 0; outstanding && i < 100000; i++) {
			assert_int_equal(bs_loop_run_once(bs_ctx_loop(ctx), 0), 0);
			if (h->n)
				held_release_one(d, &rng);
		}
		assert_int_equal(outstanding, 0);
		assert_int_equal(h->n, 0);
		memcpy(got, h->data, region);
		if (memcmp(got, model, region)) {
			for (i = 0; i < region && got[i] == model[i]; i++)
				;
			fail_msg("round %u: byte %u is 0x%02x, want 0x%02x",
				 round, i, got[i], model[i]);
		}
		waited = d->wt.waited;
	}
	/* the interleaving really happened: writes had to wait */
	assert_true(waited > ROUNDS);
	assert_true(h->max_n >= 3);
	assert_null(d->wt.active);
	assert_null(d->wt.wait_head);
	assert_int_equal(d->wt.nexcl, 0);
	free(ow);
}

/*
 * An aligned write (plain bs_submit) in flight while an RMW of the same
 * block starts: the RMW waits for it, and a plain write arriving after the
 * RMW waits for the RMW.
 */
static void aligned_and_rmw_ordered(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "h", "held:4K");
	struct held *h = d->priv;
	uint8_t a[512], b[10], c[1024];
	struct wait1 wa = { false }, wb = { false }, wc = { false };
	struct bs_req ra, rb, rc;
	uint64_t rng = 7;

	memset(a, 0xaa, sizeof(a));
	memset(b, 0xbb, sizeof(b));
	memset(c, 0xcc, sizeof(c));
	bs_req_init(&ra, BS_OP_WRITE, 0, 512, 512, a, wait1_done, &wa);
	bs_submit(d, &ra);
	bs_req_init(&rb, BS_OP_WRITE, 0, 700, 10, b, wait1_done, &wb);
	bs_submit_bytes(d, &rb);
	bs_req_init(&rc, BS_OP_WRITE, 0, 0, 1024, c, wait1_done, &wc);
	bs_submit(d, &rc);
	/* only the first write reached the device: the RMW waits for it,
	 * the last write for the RMW */
	assert_int_equal(h->n, 1);
	assert_ptr_equal(h->q[0], &ra);
	held_release_one(d, &rng);
	assert_int_equal(bs_loop_run_once(bs_ctx_loop(ctx), 0), 0);
	assert_true(wa.done);
	/* now the RMW's read */
	assert_int_equal(h->n, 1);
	assert_int_equal(h->q[0]->op, BS_OP_READ);
	while (!wc.done) {
		assert_int_equal(bs_loop_run_once(bs_ctx_loop(ctx), 0), 0);
		if (h->n)
			held_release_one(d, &rng);
	}
	assert_true(wb.done);
	assert_memory_equal(h->data, c, 512);
	assert_memory_equal(h->data + 512, c, 512);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(plain_submit_still_aligned,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(readonly_and_unsupported,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(model_512, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(model_4k_write_cache,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(model_no_write_zeroes,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(model_linear, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(edges, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(middle_is_zero_copy,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(zeroes_nounmap_kept,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(fua_every_piece, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(concurrent_overlap,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(aligned_and_rmw_ordered,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("rmw", tests, NULL, NULL);
}
