/* SPDX-License-Identifier: MIT */
/*
 * Adaptive polling of a loop (bs_loop_set_poll): it spins before blocking
 * only while events keep coming soon after it would block, never longer
 * than the maximum, and stops spinning once idle; off by default.
 */
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <blkstack/loop.h>

/* bytes written by another thread, @gap_us apart, into a watched pipe */
struct ping {
	struct bs_loop *loop;
	int fds[2];
	unsigned got, n, gap_us;
};

static void on_read(void *arg, uint32_t events)
{
	struct ping *p = arg;
	char buf[64];
	ssize_t n = read(p->fds[0], buf, sizeof(buf));

	(void)events;
	if (n > 0)
		p->got += (unsigned)n;
}

static void *writer(void *arg)
{
	struct ping *p = arg;
	unsigned i;

	for (i = 0; i < p->n; i++) {
		if (write(p->fds[1], "x", 1) != 1)
			break;
		usleep(p->gap_us);
	}
	return NULL;
}

/* Serve @n bytes, @gap_us apart; bounded by 10 s. */
static void serve_pings(struct ping *p, unsigned n, unsigned gap_us)
{
	uint64_t deadline = bs_now_ns() + 10ull * 1000000000;
	pthread_t t;

	p->n = n;
	p->gap_us = gap_us;
	p->got = 0;
	assert_int_equal(pthread_create(&t, NULL, writer, p), 0);
	while (p->got < n && bs_now_ns() < deadline)
		assert_int_equal(bs_loop_run_once(p->loop, 100), 0);
	pthread_join(t, NULL);
	assert_int_equal(p->got, n);
}

static int setup(void **state)
{
	static struct ping p;

	assert_int_equal(bs_loop_new(&p.loop), 0);
	assert_int_equal(pipe(p.fds), 0);
	assert_int_equal(bs_loop_add_fd(p.loop, p.fds[0], EPOLLIN, on_read, &p),
			 0);
	*state = &p;
	return 0;
}

static int teardown(void **state)
{
	struct ping *p = *state;

	bs_loop_del_fd(p->loop, p->fds[0]);
	bs_loop_free(p->loop);
	close(p->fds[0]);
	close(p->fds[1]);
	return 0;
}

static void spins_while_events_come_soon_and_stops_when_idle(void **state)
{
	struct ping *p = *state;
	int i;

	bs_loop_set_poll(p->loop, 1000);
	assert_int_equal(bs_loop_poll_ns(p->loop), 0);
	serve_pings(p, 200, 50);
	/* events came within 1 ms of blocking: it spins, at most 1 ms */
	assert_true(bs_loop_poll_ns(p->loop) > 0);
	assert_true(bs_loop_poll_ns(p->loop) <= 1000000);
	/* idle: every wait is longer than the maximum, the spin halves away */
	for (i = 0; i < 16; i++)
		assert_int_equal(bs_loop_run_once(p->loop, 3), 0);
	assert_int_equal(bs_loop_poll_ns(p->loop), 0);
}

static void events_later_than_the_maximum_never_start_a_spin(void **state)
{
	struct ping *p = *state;

	/* 2 ms apart against a 100 us maximum: spinning would not help */
	bs_loop_set_poll(p->loop, 100);
	serve_pings(p, 20, 2000);
	assert_int_equal(bs_loop_poll_ns(p->loop), 0);
}

static void off_by_default(void **state)
{
	struct ping *p = *state;

	serve_pings(p, 200, 50);
	assert_int_equal(bs_loop_poll_ns(p->loop), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			spins_while_events_come_soon_and_stops_when_idle, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			events_later_than_the_maximum_never_start_a_spin, setup,
			teardown),
		cmocka_unit_test_setup_teardown(off_by_default, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
