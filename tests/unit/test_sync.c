/* SPDX-License-Identifier: MIT */
/*
 * The sync wrappers from a thread that is not the loop's (a command
 * thread of blkstackd): the I/O is posted to the loop and the caller
 * sleeps, so the loop's thread alone touches the device; results and
 * error messages come back to the caller; waiting on the loop from the
 * wrong thread is refused instead of running a second loop. Claims taken
 * and released from such a thread are made on the loop's thread too.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

struct side {
	struct bs_dev *dev;
	int write_err, read_err, zero_err, falloc_err, bad_err, wait_err;
	int cmp;
	char bad_msg[512];
	int claim_err, busy_err, check_err;
	char busy_msg[512];
	struct bs_claim *claim;
	atomic_bool done;
};

static void noop(void *arg)
{
	(void)arg;
}

static void *side_thread(void *arg)
{
	struct side *s = arg;
	size_t len = 1 << 20;
	uint8_t *a = malloc(len), *b = malloc(len);
	bool never = false;

	th_fill(a, len, 7);
	s->write_err = bs_write_sync(s->dev, a, len, 4096);
	s->read_err = bs_read_sync(s->dev, b, len, 4096);
	s->cmp = memcmp(a, b, len);
	s->zero_err = bs_zeroout_sync(s->dev, 4096, 65536, BS_ZERO_NOUNMAP,
				      NULL, NULL);
	s->falloc_err = bs_fallocate_sync(s->dev, BS_FALLOC_PUNCH_HOLE |
					  BS_FALLOC_KEEP_SIZE, 65536 + 4096,
					  65536, NULL, NULL);
	if (!s->zero_err && !s->falloc_err) {
		s->read_err = bs_read_sync(s->dev, b, 2 * 65536, 4096);
		if (!th_is_zero(b, 2 * 65536))
			s->cmp = 1;
	}
	/* past the end: the core's error comes back with its message */
	bs_error_clear();
	s->bad_err = bs_zeroout_sync(s->dev, 64 << 20, 4096, 0, NULL, NULL);
	snprintf(s->bad_msg, sizeof(s->bad_msg), "%s", bs_last_error());
	s->wait_err = bs_ctx_wait(s->dev->ctx, &never);
	/* the loop's thread holds "export x" for write: exclusive is busy */
	s->busy_err = bs_dev_claim(s->dev, BS_CLAIM_EXCL, "cmd", &s->claim);
	snprintf(s->busy_msg, sizeof(s->busy_msg), "%s", bs_last_error());
	s->check_err = bs_dev_claim_check(s->dev, BS_CLAIM_WRITE);
	s->claim_err = bs_dev_claim(s->dev, BS_CLAIM_READ, "cmd", &s->claim);
	free(a);
	free(b);
	atomic_store(&s->done, true);
	bs_loop_post(bs_ctx_loop(s->dev->ctx), noop, NULL); /* wake it */
	return NULL;
}

static void from_another_thread(void **state)
{
	struct bs_ctx *ctx = *state;
	struct side s = { 0 };
	struct bs_claim *exp, *cmd;
	pthread_t t;
	int n;

	s.dev = th_dev(ctx, "d", "mem:64M,chunk=4K");
	assert_int_equal(bs_dev_claim(s.dev, BS_CLAIM_WRITE, "export x", &exp),
			 0);
	assert_true(bs_loop_is_current(bs_ctx_loop(ctx)));
	assert_int_equal(pthread_create(&t, NULL, side_thread, &s), 0);
	/* the loop's thread serves the other thread's I/O; bounded */
	for (n = 0; n < 3000 && !atomic_load(&s.done); n++)
		bs_loop_run_once(bs_ctx_loop(ctx), 10);
	pthread_join(t, NULL);
	bs_loop_run_once(bs_ctx_loop(ctx), 0);
	assert_true(atomic_load(&s.done));
	assert_int_equal(s.write_err, 0);
	assert_int_equal(s.read_err, 0);
	assert_int_equal(s.cmp, 0);
	assert_int_equal(s.zero_err, 0);
	assert_int_equal(s.falloc_err, 0);
	assert_int_not_equal(s.bad_err, 0);
	assert_true(s.bad_msg[0] != '\0');
	assert_int_equal(s.wait_err, -EDEADLK);
	assert_int_equal(s.busy_err, -EBUSY);
	assert_non_null(strstr(s.busy_msg, "export x"));
	assert_int_equal(s.check_err, 0);
	assert_int_equal(s.claim_err, 0);
	/* the thread's claim is on the list, after the export's */
	cmd = (struct bs_claim *)bs_dev_claim_next(s.dev,
						   bs_dev_claim_next(s.dev, NULL));
	assert_ptr_equal(cmd, s.claim);
	assert_string_equal(bs_claim_holder(cmd), "cmd");
	bs_claim_release(s.claim);
	bs_claim_release(exp);
	assert_null(bs_dev_claim_next(s.dev, NULL));
}

/* On the loop's own thread the wrappers still run the loop themselves. */
static void on_the_loop_thread(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "d", "mem:64M");
	uint8_t buf[4096];

	memset(buf, 0xab, sizeof(buf));
	assert_int_equal(bs_write_sync(d, buf, sizeof(buf), 0), 0);
	assert_int_equal(bs_zeroout_sync(d, 0, 4096, 0, NULL, NULL), 0);
	assert_int_equal(bs_read_sync(d, buf, sizeof(buf), 0), 0);
	assert_true(th_is_zero(buf, sizeof(buf)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(from_another_thread,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(on_the_loop_thread,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
