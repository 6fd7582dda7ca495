/* SPDX-License-Identifier: MIT */
/* Requests: validation, splitting by limits, FUA emulation, flush, mem rules. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define MiB (1ull << 20)

/* Misaligned or out-of-range requests fail EINVAL and change no byte. */
static void invalid_requests_touch_nothing(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,logical_block_size=4096");
	static const struct {
		enum bs_op op;
		uint64_t off, len;
		uint32_t flags;
		int err;
	} rows[] = {
		{ BS_OP_WRITE, 512, 4096, 0, -EINVAL },
		{ BS_OP_WRITE, 0, 4000, 0, -EINVAL },
		{ BS_OP_WRITE, MiB - 4096, 8192, 0, -EINVAL },
		{ BS_OP_WRITE, MiB, 4096, 0, -EINVAL },
		{ BS_OP_WRITE, UINT64_MAX - 4095, 8192, 0, -EINVAL },
		{ BS_OP_WRITE, 0, 0, 0, -EINVAL },
		{ BS_OP_WRITE, 0, 4096, BS_REQ_NOUNMAP, -EINVAL },
		{ BS_OP_WRITE_ZEROES, 4096, 100, 0, -EINVAL },
		{ BS_OP_WRITE_ZEROES, 0, 2 * MiB, 0, -EINVAL },
		{ BS_OP_WRITE_ZEROES, 0, 4096, 1u << 7, -EINVAL },
		{ BS_OP_DISCARD, 0, 4096, BS_REQ_NOUNMAP, -EINVAL },
		{ BS_OP_DISCARD, 0, 4096 + 512, 0, -EINVAL },
		{ BS_OP_DISCARD, MiB, 4096, 0, -EINVAL },
		{ BS_OP_READ, 1, 4096, 0, -EINVAL },
		{ (enum bs_op)99, 0, 4096, 0, -EINVAL },
	};
	uint8_t *ref = malloc(MiB), *buf = malloc(2 * MiB), *got = malloc(MiB);
	unsigned i;

	th_fill(ref, MiB, 1);
	assert_int_equal(bs_write_sync(d, ref, MiB, 0), 0);
	th_fill(buf, 2 * MiB, 2);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		uint64_t before = d->stats.ops[BS_OP_WRITE] +
				  d->stats.ops[BS_OP_WRITE_ZEROES] +
				  d->stats.ops[BS_OP_DISCARD];
		int err = bs_io_sync(d, rows[i].op, rows[i].flags, rows[i].off,
				     rows[i].len,
				     rows[i].op == BS_OP_READ ||
						     rows[i].op == BS_OP_WRITE ?
					     buf :
					     NULL);
		print_message("row %u\n", i);
		assert_int_equal(err, rows[i].err);
		/* nothing reached the driver */
		assert_int_equal(d->stats.ops[BS_OP_WRITE] +
					 d->stats.ops[BS_OP_WRITE_ZEROES] +
					 d->stats.ops[BS_OP_DISCARD],
				 before);
	}
	assert_int_equal(bs_read_sync(d, got, MiB, 0), 0);
	assert_memory_equal(got, ref, MiB);
	free(ref);
	free(buf);
	free(got);
}

static void unsupported_ops(void **state)
{
	struct bs_dev *d = th_dev(*state, "d",
				  "mem:1M,zeroes=none,max_discard=0,readonly=0");
	struct bs_dev *r = th_dev(*state, "r", "mem:1M,readonly=1");
	char buf[4096] = { 0 };

	assert_int_equal(bs_io_sync(d, BS_OP_WRITE_ZEROES, 0, 0, 4096, NULL),
			 -EOPNOTSUPP);
	assert_int_equal(bs_io_sync(d, BS_OP_DISCARD, 0, 0, 4096, NULL),
			 -EOPNOTSUPP);
	assert_int_equal(bs_write_sync(r, buf, 4096, 0), -EROFS);
	assert_int_equal(bs_io_sync(r, BS_OP_WRITE_ZEROES, 0, 0, 4096, NULL),
			 -EROFS);
	assert_int_equal(bs_read_sync(r, buf, 4096, 0), 0);
	assert_int_equal(bs_flush_sync(r), 0);
}

/* Large requests are split by max_sectors, scatter lists included. */
static void split_read_write(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:64M,max_io=64K");
	uint8_t *a = malloc(3 * MiB), *b = malloc(3 * MiB);

	th_fill(a, 3 * MiB, 7);
	assert_int_equal(bs_io_sync(d, BS_OP_WRITE, 0, 4096, 3 * MiB, a), 0);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 48);
	memset(b, 0, 3 * MiB);
	assert_int_equal(bs_read_sync(d, b, 3 * MiB, 4096), 0);
	assert_memory_equal(a, b, 3 * MiB);
	assert_int_equal(d->stats.ops[BS_OP_READ], 48);
	free(a);
	free(b);
}

struct wait {
	int done;
	int result;
};

static void req_done(struct bs_req *req)
{
	struct wait *w = req->priv;

	w->done++;
	w->result = req->result;
}

static void split_iovec(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:64M,max_io=64K");
	uint8_t *a = malloc(MiB), *b = malloc(MiB);
	struct iovec iov[3];
	struct bs_req req;
	struct wait w = { 0, 1 };
	int i;

	th_fill(a, MiB, 9);
	iov[0] = (struct iovec){ a, 1000 * 512 };
	iov[1] = (struct iovec){ a + 1000 * 512, 3 * 512 };
	iov[2] = (struct iovec){ a + 1003 * 512, MiB - 1003 * 512 };
	bs_req_init(&req, BS_OP_WRITE, 0, 8192, MiB, NULL, req_done, &w);
	req.iov = iov;
	req.iovcnt = 3;
	bs_submit(d, &req);
	/* completion never runs inside submit */
	assert_int_equal(w.done, 0);
	for (i = 0; i < 1000 && !w.done; i++)
		bs_loop_run_once(bs_ctx_loop(*state), 0);
	assert_int_equal(w.done, 1);
	assert_int_equal(w.result, 0);
	assert_int_equal(d->stats.ops[BS_OP_WRITE], 16);
	assert_int_equal(bs_read_sync(d, b, MiB, 8192), 0);
	assert_memory_equal(a, b, MiB);
	free(a);
	free(b);
}

/*
 * FUA on write-zeroes and discard: the core flushes after them where the
 * device has a volatile cache (drivers never see the flag), as it does for
 * writes; zeroout's BS_ZERO_FUA flushes once at the end, not per piece.
 */
static void fua_emulation_zero_discard(void **state)
{
	struct bs_dev *c = th_dev(*state, "c", "mem:4M,write_cache=1,"
				  "max_write_zeroes=64K");
	struct bs_dev *n = th_dev(*state, "n", "mem:4M");
	char buf[4096];

	memset(buf, 0x77, sizeof(buf));
	assert_int_equal(bs_write_sync(c, buf, 4096, 8192), 0);
	assert_int_equal(bs_io_sync(c, BS_OP_WRITE_ZEROES, BS_REQ_FUA, 0,
				    65536, NULL), 0);
	assert_int_equal(c->stats.ops[BS_OP_WRITE_ZEROES], 1);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 1);
	assert_int_equal(bs_read_sync(c, buf, 4096, 8192), 0);
	assert_true(th_is_zero(buf, 4096));
	assert_int_equal(bs_io_sync(c, BS_OP_WRITE_ZEROES,
				    BS_REQ_FUA | BS_REQ_NOUNMAP, 0, 4096, NULL), 0);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 2);
	assert_int_equal(bs_io_sync(c, BS_OP_DISCARD, BS_REQ_FUA, 0, 8192,
				    NULL), 0);
	assert_int_equal(c->stats.ops[BS_OP_DISCARD], 1);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 3);
	/* split by max_write_zeroes: still one flush, after all pieces */
	assert_int_equal(bs_io_sync(c, BS_OP_WRITE_ZEROES, BS_REQ_FUA, 0,
				    4 * 65536, NULL), 0);
	assert_int_equal(c->stats.ops[BS_OP_WRITE_ZEROES], 2 + 4);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 4);
	/* zeroout: one flush for the whole range */
	assert_int_equal(bs_zeroout_sync(c, 0, MiB, BS_ZERO_FUA, NULL, NULL),
			 0);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 5);
	assert_int_equal(bs_zeroout_sync(c, 0, MiB, 0, NULL, NULL), 0);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 5);
	/* no volatile cache: nothing to flush */
	assert_int_equal(bs_io_sync(n, BS_OP_WRITE_ZEROES, BS_REQ_FUA, 0,
				    4096, NULL), 0);
	assert_int_equal(bs_io_sync(n, BS_OP_DISCARD, BS_REQ_FUA, 0, 4096,
				    NULL), 0);
	assert_int_equal(bs_zeroout_sync(n, 0, 8192, BS_ZERO_FUA, NULL, NULL),
			 0);
	assert_int_equal(n->stats.ops[BS_OP_FLUSH], 0);
}

/* FUA without native FUA: write then flush when there is a cache. */
static void fua_emulation(void **state)
{
	struct bs_dev *c = th_dev(*state, "c", "mem:1M,write_cache=1");
	struct bs_dev *n = th_dev(*state, "n", "mem:1M");
	char buf[4096] = { 1 };

	assert_int_equal(bs_io_sync(c, BS_OP_WRITE, BS_REQ_FUA, 0, 4096, buf), 0);
	assert_int_equal(c->stats.ops[BS_OP_WRITE], 1);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 1);
	assert_int_equal(bs_io_sync(n, BS_OP_WRITE, BS_REQ_FUA, 0, 4096, buf), 0);
	assert_int_equal(n->stats.ops[BS_OP_FLUSH], 0);
	/* flush on a device without a volatile cache never reaches it */
	assert_int_equal(bs_flush_sync(n), 0);
	assert_int_equal(n->stats.ops[BS_OP_FLUSH], 0);
	assert_int_equal(bs_flush_sync(c), 0);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 2);
	/* turning the cache off through the attribute drops flushes */
	assert_int_equal(bs_attr_store(c, "queue/write_cache", "write through"),
			 0);
	assert_int_equal(bs_flush_sync(c), 0);
	assert_int_equal(c->stats.ops[BS_OP_FLUSH], 2);
}

/* mem: unmap frees chunks, partial blocks are zeroed, holes read zero. */
static void mem_rules(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,chunk=64K");
	uint8_t *buf = malloc(MiB);
	uint64_t i;

	memset(buf, 0, MiB);
	assert_int_equal(bs_read_sync(d, buf, MiB, 0), 0);
	assert_true(th_is_zero(buf, MiB));
	assert_int_equal(bs_dev_allocated(d), 0);
	/* zero data into holes allocates nothing */
	assert_int_equal(bs_write_sync(d, buf, MiB, 0), 0);
	assert_int_equal(bs_dev_allocated(d), 0);

	memset(buf, 0xa5, MiB);
	assert_int_equal(bs_write_sync(d, buf, MiB, 0), 0);
	assert_int_equal(bs_dev_allocated(d), MiB);
	/* 32K..160K: half of chunk 0, all of chunk 1, half of chunk 2 */
	assert_int_equal(bs_io_sync(d, BS_OP_WRITE_ZEROES, 0, 32768, 131072,
				    NULL),
			 0);
	assert_int_equal(bs_dev_allocated(d), MiB - 65536);
	assert_int_equal(bs_read_sync(d, buf, MiB, 0), 0);
	for (i = 0; i < MiB; i++) {
		uint8_t want = (i >= 32768 && i < 163840) ? 0 : 0xa5;
		if (buf[i] != want)
			fail_msg("byte %llu is %02x, want %02x",
				 (unsigned long long)i, buf[i], want);
	}
	/* discard frees as well */
	assert_int_equal(bs_io_sync(d, BS_OP_DISCARD, 0, 0, MiB, NULL), 0);
	assert_int_equal(bs_dev_allocated(d), 0);
	free(buf);
}

struct ext {
	uint64_t off[16], len[16];
	uint32_t flags[16];
	int n;
};

static int ext_fn(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct ext *e = arg;

	if (e->n == 16)
		return 1;
	e->off[e->n] = off;
	e->len[e->n] = len;
	e->flags[e->n++] = flags;
	return 0;
}

static void mem_block_status(void **state)
{
	struct bs_dev *d = th_dev(*state, "d", "mem:1M,chunk=64K");
	char buf[4096];
	struct ext e = { .n = 0 };

	memset(buf, 1, sizeof(buf));
	assert_int_equal(bs_write_sync(d, buf, sizeof(buf), 131072), 0);
	assert_int_equal(bs_block_status(d, 4096, MiB - 4096, ext_fn, &e), 0);
	assert_int_equal(e.n, 3);
	assert_int_equal(e.off[0], 4096);
	assert_int_equal(e.len[0], 131072 - 4096);
	assert_int_equal(e.flags[0], BS_EXT_HOLE | BS_EXT_ZERO);
	assert_int_equal(e.off[1], 131072);
	assert_int_equal(e.len[1], 65536);
	assert_int_equal(e.flags[1], 0);
	assert_int_equal(e.off[2], 196608);
	assert_int_equal(e.off[2] + e.len[2], MiB);
	assert_int_equal(bs_block_status(d, 0, 2 * MiB, ext_fn, &e), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(invalid_requests_touch_nothing,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(unsupported_ops, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(split_read_write, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(split_iovec, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(fua_emulation, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(fua_emulation_zero_discard,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(mem_rules, th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(mem_block_status, th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("req", tests, NULL, NULL);
}
