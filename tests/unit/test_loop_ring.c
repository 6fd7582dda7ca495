/* SPDX-License-Identifier: MIT */
/*
 * Ring mode of the loop (bs_loop_use_ring): fd watches keep epoll's level
 * semantics on one-shot io_uring polls (an event again while data stays
 * unread, none while the events are 0, none after delete), work sent from
 * another thread wakes it, timers fire, and operations queued with
 * bs_loop_sqe() complete into their op, or are cancelled synchronously.
 */
#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <blkstack/loop.h>

#include "helpers/th.h"

struct rd {
	int fd;
	unsigned calls;
	size_t take;		/* bytes read per call */
	size_t got;
	bool del_in_cb;
	struct bs_loop *loop;
};

static void on_read(void *arg, uint32_t events)
{
	struct rd *r = arg;
	char buf[64];
	ssize_t n;

	assert_true(events & EPOLLIN);
	r->calls++;
	n = read(r->fd, buf, r->take < sizeof(buf) ? r->take : sizeof(buf));
	if (n > 0)
		r->got += (size_t)n;
	if (r->del_in_cb)
		bs_loop_del_fd(r->loop, r->fd);
}

/* A loop in ring mode (the test is skipped where there is none) */
static struct bs_loop *ring_loop(void)
{
	struct bs_loop *loop;

	assert_int_equal(bs_loop_new(&loop), 0);
	th_loop_ring(loop, 32);
	return loop;
}

static void spin(struct bs_loop *loop, unsigned n)
{
	while (n--)
		assert_int_equal(bs_loop_run_once(loop, 0), 0);
}

static void level_semantics(void **state)
{
	struct bs_loop *loop = ring_loop();
	struct rd r = { .take = 1 };
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	r.fd = p[0];
	r.loop = loop;
	assert_int_equal(bs_loop_add_fd(loop, p[0], EPOLLIN, on_read, &r), 0);
	spin(loop, 3);
	assert_int_equal(r.calls, 0);
	/* three bytes, one read per call: called until all are read */
	assert_int_equal(write(p[1], "abc", 3), 3);
	for (int i = 0; i < 20 && r.got < 3; i++)
		bs_loop_run_once(loop, 100);
	assert_int_equal(r.got, 3);
	assert_int_equal(r.calls, 3);

	/* events 0: quiet although data waits */
	assert_int_equal(bs_loop_mod_fd(loop, p[0], 0), 0);
	assert_int_equal(write(p[1], "de", 2), 2);
	spin(loop, 5);
	assert_int_equal(r.got, 3);
	/* back on: what waited is reported at once */
	assert_int_equal(bs_loop_mod_fd(loop, p[0], EPOLLIN), 0);
	for (int i = 0; i < 20 && r.got < 5; i++)
		bs_loop_run_once(loop, 100);
	assert_int_equal(r.got, 5);

	/* deleted while armed: no call after, even with data */
	bs_loop_del_fd(loop, p[0]);
	assert_int_equal(write(p[1], "f", 1), 1);
	spin(loop, 5);
	assert_int_equal(r.got, 5);
	assert_int_equal(bs_loop_mod_fd(loop, p[0], EPOLLIN), -ENOENT);

	/* the same fd watched again, deleted from inside its callback */
	r.del_in_cb = true;
	r.calls = 0;
	assert_int_equal(bs_loop_add_fd(loop, p[0], EPOLLIN, on_read, &r), 0);
	assert_int_equal(write(p[1], "gh", 2), 2);
	for (int i = 0; i < 20 && !r.calls; i++)
		bs_loop_run_once(loop, 100);
	spin(loop, 5);
	assert_int_equal(r.calls, 1);
	close(p[0]);
	close(p[1]);
	bs_loop_free(loop);
}

/* adding a watch before the ring would leave it on epoll: refused */
static void ring_only_before_watches(void **state)
{
	struct bs_loop *loop;
	struct rd r = { .take = 1 };
	int p[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(bs_loop_new(&loop), 0);
	assert_int_equal(bs_loop_add_fd(loop, p[0], EPOLLIN, on_read, &r), 0);
	assert_int_equal(bs_loop_use_ring(loop, 32), -EBUSY);
	assert_false(bs_loop_has_ring(loop));
	assert_null(bs_loop_sqe(loop));
	bs_loop_del_fd(loop, p[0]);
	bs_loop_free(loop);
	close(p[0]);
	close(p[1]);
}

struct sent {
	struct bs_work w;
	int ran;
	struct bs_loop *loop;
};

static void sent_fn(void *arg)
{
	__atomic_store_n(&((struct sent *)arg)->ran, 1, __ATOMIC_SEQ_CST);
}

static void *sender(void *arg)
{
	struct sent *s = arg;

	usleep(20000);
	s->w.fn = sent_fn;
	s->w.arg = s;
	bs_loop_send(s->loop, &s->w);
	return NULL;
}

static void fired(void *arg)
{
	(*(int *)arg)++;
}

/* a blocked ring loop wakes for work sent from afar, and for timers */
static void wakeups_and_timers(void **state)
{
	struct bs_loop *loop = ring_loop();
	struct sent s = { .loop = loop };
	pthread_t t;
	int n = 0;
	uint64_t t0;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, sender, &s), 0);
	t0 = bs_now_ns();
	for (int i = 0; i < 50 && !__atomic_load_n(&s.ran, __ATOMIC_SEQ_CST);
	     i++)
		bs_loop_run_once(loop, 1000);
	pthread_join(t, NULL);
	assert_int_equal(s.ran, 1);
	/* woken, not timed out */
	assert_true(bs_now_ns() - t0 < 900000000ull);

	assert_true(bs_loop_add_timer(loop, 30, fired, &n) > 0);
	t0 = bs_now_ns();
	for (int i = 0; i < 50 && !n; i++)
		bs_loop_run_once(loop, -1);
	assert_int_equal(n, 1);
	assert_true(bs_now_ns() - t0 >= 29000000ull);
	bs_loop_free(loop);
}

struct op {
	struct bs_ring_op op;
	int res, calls;
};

static void op_done(struct bs_ring_op *o, int res, uint32_t flags)
{
	struct op *x = (struct op *)o;

	(void)flags;
	x->res = res;
	x->calls++;
}

/* queued operations complete into their op; a receive in flight is
 * cancelled synchronously and its buffer is not written after */
static void ops_and_cancel(void **state)
{
	struct bs_loop *loop = ring_loop();
	struct op nop = { .op.fn = op_done }, rx = { .op.fn = op_done };
	struct io_uring_sqe *sqe;
	char buf[16];
	int sv[2];

	(void)state;
	sqe = bs_loop_sqe(loop);
	assert_non_null(sqe);
	io_uring_prep_nop(sqe);
	io_uring_sqe_set_data(sqe, &nop.op);
	for (int i = 0; i < 20 && !nop.calls; i++)
		bs_loop_run_once(loop, 100);
	assert_int_equal(nop.calls, 1);
	assert_int_equal(nop.res, 0);

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	memset(buf, 'x', sizeof(buf));
	sqe = bs_loop_sqe(loop);
	io_uring_prep_recv(sqe, sv[0], buf, sizeof(buf), 0);
	io_uring_sqe_set_data(sqe, &rx.op);
	spin(loop, 2);
	assert_int_equal(rx.calls, 0);		/* nothing to receive yet */
	assert_int_equal(bs_loop_ring_cancel(loop, &rx.op), 0);
	/* the kernel has let go of buf: data sent now stays in the socket */
	assert_int_equal(write(sv[1], "late", 4), 4);
	for (int i = 0; i < 20 && !rx.calls; i++)
		bs_loop_run_once(loop, 100);
	assert_int_equal(rx.calls, 1);
	assert_int_equal(rx.res, -ECANCELED);
	assert_int_equal(buf[0], 'x');
	assert_int_equal(recv(sv[0], buf, sizeof(buf), MSG_DONTWAIT), 4);
	/* nothing of that name in flight: nothing to wait for */
	assert_int_equal(bs_loop_ring_cancel(loop, &rx.op), 0);
	close(sv[0]);
	close(sv[1]);
	bs_loop_free(loop);
}

/* freeing a loop with a poll still armed and a cancelled op's
 * completion not yet reaped leaks nothing (ASan) */
static void free_with_things_in_flight(void **state)
{
	struct bs_loop *loop = ring_loop();
	struct rd r = { .take = 1 };
	struct op rx = { .op.fn = op_done };
	struct io_uring_sqe *sqe;
	char buf[8];
	int p[2], sv[2];

	(void)state;
	assert_int_equal(pipe(p), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(bs_loop_add_fd(loop, p[0], EPOLLIN, on_read, &r), 0);
	sqe = bs_loop_sqe(loop);
	io_uring_prep_recv(sqe, sv[0], buf, sizeof(buf), 0);
	io_uring_sqe_set_data(sqe, &rx.op);
	spin(loop, 1);
	bs_loop_del_fd(loop, p[0]);		/* armed: freed later */
	assert_int_equal(bs_loop_ring_cancel(loop, &rx.op), 0);
	bs_loop_free(loop);
	assert_int_equal(rx.calls, 1);	/* its completion was delivered */
	assert_int_equal(r.calls, 0);
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(level_semantics),
		cmocka_unit_test(ring_only_before_watches),
		cmocka_unit_test(wakeups_and_timers),
		cmocka_unit_test(ops_and_cancel),
		cmocka_unit_test(free_with_things_in_flight),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
