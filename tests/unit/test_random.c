/* SPDX-License-Identifier: MIT */
/*
 * bs_random_bytes() (lib/core/random.c), the one getrandom(2) loop of
 * the library: every byte asked for is written, also past the most one
 * getrandom() call gives on older kernels (32 MiB - 1) and while
 * signals interrupt it (short reads, EINTR); nothing is asked for a
 * length of 0; a failure comes back as -errno.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "core/random.h"
#include "helpers/th.h"

/* every @win-byte window of @buf holds a nonzero byte (a window of
 * random bytes is all zero with probability 2^-(8 win)) */
static void assert_all_written(const uint8_t *buf, size_t len, size_t win)
{
	size_t off;

	for (off = 0; off < len; off += win)
		assert_false(th_is_zero(buf + off,
					len - off < win ? len - off : win));
}

static void fills_small_buffers(void **state)
{
	uint8_t a[32] = { 0 }, b[32] = { 0 };
	uint32_t gen = 0;

	(void)state;
	assert_int_equal(bs_random_bytes(a, sizeof(a)), 0);
	assert_int_equal(bs_random_bytes(b, sizeof(b)), 0);
	assert_false(th_is_zero(a, sizeof(a)));
	assert_memory_not_equal(a, b, sizeof(a));
	/* the inode generation case: a word, in place */
	while (!gen)
		assert_int_equal(bs_random_bytes(&gen, sizeof(gen)), 0);
}

static void zero_length_touches_nothing(void **state)
{
	uint8_t b[8];

	(void)state;
	memset(b, 0xa5, sizeof(b));
	assert_int_equal(bs_random_bytes(b, 0), 0);
	for (size_t i = 0; i < sizeof(b); i++)
		assert_int_equal(b[i], 0xa5);
	assert_int_equal(bs_random_bytes(NULL, 0), 0);
}

static void past_one_call(void **state)
{
	/* older kernels give at most 32 MiB - 1 a call: two calls there */
	size_t len = (32u << 20) + 4096;
	uint8_t *buf = calloc(1, len);

	(void)state;
	assert_non_null(buf);
	assert_int_equal(bs_random_bytes(buf, len), 0);
	assert_all_written(buf, len, 256);
	free(buf);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void signals_interrupt(void **state)
{
	/* no SA_RESTART: a signal during getrandom() gives a short read
	 * (or EINTR before the first byte), never a failed fill */
	struct sigaction sa = { .sa_handler = on_alarm }, old;
	struct itimerval it = { .it_interval = { 0, 200 },
				.it_value = { 0, 200 } };
	struct itimerval off = { { 0, 0 }, { 0, 0 } };
	size_t len = 4u << 20;
	uint8_t *buf = malloc(len);
	int i;

	(void)state;
	assert_non_null(buf);
	sigemptyset(&sa.sa_mask);
	assert_int_equal(sigaction(SIGALRM, &sa, &old), 0);
	alarms = 0;
	assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	for (i = 0; i < 64 && alarms < 8; i++) {
		memset(buf, 0, len);
		assert_int_equal(bs_random_bytes(buf, len), 0);
		assert_all_written(buf, len, 256);
	}
	assert_int_equal(setitimer(ITIMER_REAL, &off, NULL), 0);
	assert_int_equal(sigaction(SIGALRM, &old, NULL), 0);
	assert_true(alarms > 0);
	free(buf);
}

static void failure_is_negative_errno(void **state)
{
	(void)state;
	/* an address nobody maps: the kernel's EFAULT, not a short fill */
	assert_int_equal(bs_random_bytes((void *)(uintptr_t)8, 16), -EFAULT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fills_small_buffers),
		cmocka_unit_test(zero_length_touches_nothing),
		cmocka_unit_test(past_one_call),
		cmocka_unit_test(signals_interrupt),
		cmocka_unit_test(failure_is_negative_errno),
	};

	return cmocka_run_group_tests_name("random", tests, NULL, NULL);
}
