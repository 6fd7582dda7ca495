/* SPDX-License-Identifier: MIT */
/*
 * The fd pump: a library's socket driven from the loop. With libnbd
 * (a real asynchronous client library) against nbdkit started by libnbd
 * itself, and with a toy library over socketpairs for what libnbd cannot
 * be made to do on demand: a descriptor that changes (reconnect), a lost
 * connection, the periodic tick, and freeing the pump from a callback.
 */
#include <errno.h>
#include <libnbd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/fdpump.h>
#include <blkstack/loop.h>

#include "helpers/th.h"

/* ---- libnbd ------------------------------------------------------------- */

static int nbd_fd(void *lib)
{
	return nbd_aio_get_fd(lib);
}

static uint32_t nbd_events(void *lib)
{
	unsigned dir = nbd_aio_get_direction(lib);

	return (dir & LIBNBD_AIO_DIRECTION_READ ? EPOLLIN : 0) |
	       (dir & LIBNBD_AIO_DIRECTION_WRITE ? EPOLLOUT : 0);
}

static int nbd_service(void *lib, uint32_t revents)
{
	int r = 0;

	if (revents & (EPOLLIN | EPOLLHUP | EPOLLERR))
		r = nbd_aio_notify_read(lib);
	else if (revents & EPOLLOUT)
		r = nbd_aio_notify_write(lib);
	return r < 0 ? -(nbd_get_errno() ? nbd_get_errno() : EIO) : 0;
}

static const struct bs_fdpump_ops nbd_ops = {
	.get_fd = nbd_fd,
	.events = nbd_events,
	.service = nbd_service,
};

static void libnbd_round_trip(void **state)
{
	char *argv[] = { (char *)"nbdkit", (char *)"-s", (char *)"--exit-with-parent",
			 (char *)"memory", (char *)"1M", NULL };
	struct bs_loop *loop;
	struct bs_fdpump *p;
	struct nbd_handle *h;
	char wbuf[4096], rbuf[4096];
	int64_t cookie;
	int n;

	(void)state;
	if (system("command -v nbdkit >/dev/null 2>&1")) {
		/* scripts/deps.sh installs nbdkit; without it this case
		 * cannot run, the toy-library cases below still do */
		print_message("SKIP libnbd_round_trip: nbdkit not installed\n");
		skip();
	}
	assert_int_equal(bs_loop_new(&loop), 0);
	h = nbd_create();
	assert_non_null(h);
	assert_int_not_equal(nbd_aio_connect_command(h, argv), -1);
	assert_int_equal(bs_fdpump_new(loop, &nbd_ops, h, 0, &p), 0);
	for (n = 0; n < 2000 && !nbd_aio_is_ready(h); n++) {
		assert_false(nbd_aio_is_dead(h));
		bs_loop_run_once(loop, 10);
	}
	assert_true(nbd_aio_is_ready(h));
	assert_int_equal(nbd_get_size(h), 1 << 20);

	memset(wbuf, 0x6b, sizeof(wbuf));
	cookie = nbd_aio_pwrite(h, wbuf, sizeof(wbuf), 8192,
				NBD_NULL_COMPLETION, 0);
	assert_true(cookie > 0);
	assert_int_equal(bs_fdpump_update(p), 0);
	for (n = 0; n < 2000 && nbd_aio_command_completed(h, cookie) == 0; n++)
		bs_loop_run_once(loop, 10);
	cookie = nbd_aio_pread(h, rbuf, sizeof(rbuf), 8192,
			       NBD_NULL_COMPLETION, 0);
	assert_true(cookie > 0);
	assert_int_equal(bs_fdpump_update(p), 0);
	for (n = 0; n < 2000 && nbd_aio_command_completed(h, cookie) == 0; n++)
		bs_loop_run_once(loop, 10);
	assert_memory_equal(wbuf, rbuf, sizeof(rbuf));

	bs_fdpump_free(p);
	nbd_close(h);
	bs_loop_free(loop);
}

/* ---- a toy library: sends "ping", expects "pong" ---------------------- */

struct toy {
	int fd;			/* our end, -1 when disconnected */
	int pending_out;	/* bytes of "ping" left to send */
	int pongs;
	int ticks;
	int errors;
	int last_err;
	struct bs_fdpump **free_me;	/* free the pump from on_error */
};

static int toy_fd(void *lib)
{
	return ((struct toy *)lib)->fd;
}

static uint32_t toy_events(void *lib)
{
	struct toy *t = lib;

	return EPOLLIN | (t->pending_out ? EPOLLOUT : 0);
}

static int toy_service(void *lib, uint32_t revents)
{
	struct toy *t = lib;
	char buf[16];
	ssize_t n;

	if (revents & EPOLLIN) {
		n = read(t->fd, buf, sizeof(buf));
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		t->pongs += (int)n / 4;
	}
	if ((revents & EPOLLOUT) && t->pending_out) {
		n = write(t->fd, "ping", 4);
		if (n == 4)
			t->pending_out = 0;
	}
	return 0;
}

static void toy_tick(void *lib)
{
	((struct toy *)lib)->ticks++;
}

static void toy_error(void *lib, int err)
{
	struct toy *t = lib;

	t->errors++;
	t->last_err = err;
	if (t->free_me) {
		bs_fdpump_free(*t->free_me);
		*t->free_me = NULL;
	}
}

static const struct bs_fdpump_ops toy_ops = {
	.get_fd = toy_fd,
	.events = toy_events,
	.service = toy_service,
	.tick = toy_tick,
	.on_error = toy_error,
};

/* The peer: answer every "ping" with "pong". */
static void peer_answer(int fd)
{
	char buf[16];
	ssize_t n = read(fd, buf, sizeof(buf));

	if (n == 4)
		assert_int_equal(write(fd, "pong", 4), 4);
}

static void run_for(struct bs_loop *loop, int ms)
{
	int i;

	for (i = 0; i < ms / 5; i++)
		bs_loop_run_once(loop, 5);
}

static void toy_reconnect_error_tick(void **state)
{
	struct bs_loop *loop;
	struct bs_fdpump *p;
	struct toy t = { .fd = -1 };
	int sp[2], sp2[2];

	(void)state;
	assert_int_equal(bs_loop_new(&loop), 0);
	/* no descriptor yet: nothing watched, ticks still come */
	assert_int_equal(bs_fdpump_new(loop, &toy_ops, &t, 10, &p), 0);
	run_for(loop, 60);
	assert_true(t.ticks >= 2);

	/* connected: the pump follows the new descriptor */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp),
			 0);
	t.fd = sp[0];
	t.pending_out = 4;
	assert_int_equal(bs_fdpump_update(p), 0);
	run_for(loop, 20);		/* sends ping */
	peer_answer(sp[1]);
	run_for(loop, 20);		/* reads pong */
	assert_int_equal(t.pongs, 1);

	/* a reconnect: another descriptor; the old one is no longer watched */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0,
				    sp2), 0);
	t.fd = sp2[0];
	t.pending_out = 4;
	assert_int_equal(bs_fdpump_update(p), 0);
	close(sp[1]);			/* would be an error if still watched */
	run_for(loop, 20);
	peer_answer(sp2[1]);
	run_for(loop, 20);
	assert_int_equal(t.pongs, 2);
	assert_int_equal(t.errors, 0);
	close(sp[0]);

	/* the peer goes away: one error, then quiet until update() */
	close(sp2[1]);
	run_for(loop, 40);
	assert_int_equal(t.errors, 1);
	assert_int_equal(t.last_err, -ECONNRESET);
	run_for(loop, 40);
	assert_int_equal(t.errors, 1);
	close(sp2[0]);

	/* freed from inside on_error: no use after free */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp),
			 0);
	t.fd = sp[0];
	t.free_me = &p;
	assert_int_equal(bs_fdpump_update(p), 0);
	close(sp[1]);
	run_for(loop, 40);
	assert_int_equal(t.errors, 2);
	assert_null(p);
	close(sp[0]);
	bs_loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(libnbd_round_trip),
		cmocka_unit_test(toy_reconnect_error_tick),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
