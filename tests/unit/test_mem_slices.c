/* SPDX-License-Identifier: MIT */
/*
 * The mem driver's long zeroing runs in slices: a write-zeroes that must
 * keep its blocks (zeroes = write, or NOUNMAP) over many MiB is not one
 * memset on the loop's thread; other work queued on the loop runs before
 * it completes, and the result is still all zeroes, allocated.
 */
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>

#include "helpers/th.h"

struct mark {
	struct bs_work work;
	bool ran;
	bool zero_done_first;	/* the zeroing had completed when it ran */
	const bool *zero_done;
};

static void mark_run(void *arg)
{
	struct mark *m = arg;

	m->ran = true;
	m->zero_done_first = *m->zero_done;
}

static void req_done(struct bs_req *req)
{
	*(bool *)req->priv = true;
}

static void check(struct bs_ctx *ctx, const char *spec, uint32_t flags)
{
	struct bs_dev *d = th_dev(ctx, "d", spec);
	size_t len = 64 << 20;
	uint8_t *buf = malloc(len);
	bool done = false;
	struct mark m = { .zero_done = &done };
	struct bs_req req;
	int n;

	th_fill(buf, len, 3);
	assert_int_equal(bs_write_sync(d, buf, 1 << 20, 0), 0);
	bs_req_init(&req, BS_OP_WRITE_ZEROES, flags, 0, len, NULL, req_done,
		    &done);
	bs_submit(d, &req);
	m.work.fn = mark_run;
	m.work.arg = &m;
	bs_loop_defer(bs_ctx_loop(ctx), &m.work);
	for (n = 0; n < 10000 && !done; n++)
		bs_loop_run_once(bs_ctx_loop(ctx), 0);
	assert_true(done);
	assert_int_equal(req.result, 0);
	/* work queued after the submit ran while the zeroing went on */
	assert_true(m.ran);
	assert_false(m.zero_done_first);
	assert_int_equal(bs_read_sync(d, buf, len, 0), 0);
	assert_true(th_is_zero(buf, len));
	/* the blocks stayed allocated: 64 MiB of chunks */
	assert_true(bs_dev_allocated(d) >= (int64_t)len);
	free(buf);
	assert_int_equal(bs_dev_destroy(d), 0);
}

static void write_mode_slices(void **state)
{
	check(*state, "mem:128M,zeroes=write,max_write_zeroes=64M", 0);
}

static void nounmap_slices(void **state)
{
	check(*state, "mem:128M,max_write_zeroes=64M", BS_REQ_NOUNMAP);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(write_mode_slices, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(nounmap_slices, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
