/* SPDX-License-Identifier: MIT */
/*
 * Zero-copy input of the network server (lib/export/net/conn.c): a big
 * payload still missing goes straight into the session's buffer, and once
 * one did, the next read into the input buffer takes only a header
 * (direct_hdr), so that the payload of a next big request goes zero-copy
 * too instead of being read into the input buffer and copied out of it
 * (issue 12: that copy was 3.7 % of the CPU of 1 MiB writes).
 *
 * A toy protocol: 4-byte big-endian length, then that many payload bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include <blkstack/loop.h>
#include <blkstack/net.h>

#include "helpers/th.h"

#define PAYLOAD (64u << 10)
#define HDR 4u
#define DIRECT_MIN (16u << 10)
#define TOO_BIG 0xffffffffu		/* a header the session refuses */
#define CLOSE_AFTER (PAYLOAD + 8)	/* a frame after which it closes */

struct frames {
	struct bs_net_conn *c;
	uint8_t hdr[HDR];
	size_t have;		/* header bytes */
	uint8_t *buf;		/* payload of the frame being received */
	size_t len, got;
	unsigned done;		/* complete frames */
	size_t copied;		/* payload bytes that came through input() */
	size_t direct;		/* payload bytes received zero-copy */
	bool bad, eof;
};

static struct frames *F;
/* run the server's loop in ring mode (bs_loop_use_ring): receives and
 * sends through io_uring instead of recv/sendmsg after epoll */
static bool RING;

static void new_loop(struct bs_loop **loop)
{
	assert_int_equal(bs_loop_new(loop), 0);
	if (RING)
		th_loop_ring(*loop, 64);
}

static int f_start(void *owner, struct bs_net_conn *c, void **sess)
{
	(void)owner;
	F = calloc(1, sizeof(*F));
	if (!F)
		return -ENOMEM;
	F->c = c;
	*sess = F;
	bs_net_conn_handshake_done(c);
	return 0;
}

/* The payload of a frame is all here: check and drop it. */
static void frame_done(struct frames *f)
{
	size_t i;

	for (i = 0; i < f->len; i++)
		if (f->buf[i] != (uint8_t)(f->done + i))
			f->bad = true;
	free(f->buf);
	f->buf = NULL;
	f->have = f->got = f->len = 0;
	f->done++;
}

static size_t f_input(void *sess, const uint8_t *p, size_t len)
{
	struct frames *f = sess;
	size_t used = 0, n;

	while (p && used < len) {
		if (f->have < HDR) {
			f->hdr[f->have++] = p[used++];
			if (f->have == HDR) {
				f->len = ((size_t)f->hdr[0] << 24) |
					 ((size_t)f->hdr[1] << 16) |
					 ((size_t)f->hdr[2] << 8) | f->hdr[3];
				if (f->len == TOO_BIG) {
					/* as NFS does with a record over its
					 * limit: closed from inside input() */
					bs_net_conn_close(f->c, "too big");
					return len;
				}
				f->buf = malloc(f->len);
				assert_non_null(f->buf);
			}
			continue;
		}
		n = f->len - f->got;
		if (n > len - used)
			n = len - used;
		memcpy(f->buf + f->got, p + used, n);
		f->got += n;
		f->copied += n;
		used += n;
		if (f->got == f->len)
			frame_done(f);
	}
	return used;
}

static bool f_wants(void *sess)
{
	return !((struct frames *)sess)->eof;
}

static size_t f_in_direct(void *sess, uint8_t **dst)
{
	struct frames *f = sess;

	if (f->have < HDR || !f->buf)
		return 0;
	*dst = f->buf + f->got;
	return f->len - f->got;
}

static void f_in_direct_done(void *sess, size_t n)
{
	struct frames *f = sess;

	f->got += n;
	f->direct += n;
	if (f->got == f->len && f->len == CLOSE_AFTER) {
		/* closed from inside in_direct_done() (a failed submit) */
		bs_net_conn_close(f->c, "closing after this payload");
		return;
	}
	if (f->got == f->len)
		frame_done(f);
}

static int f_output(void *sess, struct iovec *iov, int max)
{
	(void)sess, (void)iov, (void)max;
	return 0;
}

static size_t f_out_bytes(void *sess)
{
	(void)sess;
	return 0;
}

static void f_sent(void *sess, size_t n)
{
	(void)sess, (void)n;
}

static void f_eof(void *sess)
{
	((struct frames *)sess)->eof = true;
}

static bool f_finished(void *sess)
{
	return ((struct frames *)sess)->eof;
}

static bool f_busy(void *sess)
{
	(void)sess;
	return false;
}

static void f_close(void *sess, const char *why)
{
	struct frames *f = sess;

	(void)why;
	free(f->buf);
	f->buf = NULL;
	f->c = NULL;
}

static const struct bs_net_proto frames_proto = {
	.name = "frames",
	.inbuf = 256 << 10,
	.direct_min = DIRECT_MIN,
	.direct_hdr = HDR,
	.start = f_start,
	.input = f_input,
	.wants_input = f_wants,
	.in_direct = f_in_direct,
	.in_direct_done = f_in_direct_done,
	.output = f_output,
	.out_bytes = f_out_bytes,
	.sent = f_sent,
	.eof = f_eof,
	.finished = f_finished,
	.busy = f_busy,
	.close = f_close,
};

static void send_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		assert_true(n > 0);
		b += n;
		len -= (size_t)n;
	}
}

/* Frame @k: header, then PAYLOAD bytes k, k+1, ... */
static uint8_t *frame(unsigned k)
{
	uint8_t *b = malloc(HDR + PAYLOAD);
	size_t i;

	assert_non_null(b);
	b[0] = (uint8_t)(PAYLOAD >> 24);
	b[1] = (uint8_t)(PAYLOAD >> 16);
	b[2] = (uint8_t)(PAYLOAD >> 8);
	b[3] = (uint8_t)PAYLOAD;
	for (i = 0; i < PAYLOAD; i++)
		b[HDR + i] = (uint8_t)(k + i);
	return b;
}

/* Run the loop until @cond holds (at most ~5 s). */
#define RUN_UNTIL(loop, cond)                                          \
	do {                                                           \
		int i_;                                                \
		for (i_ = 0; i_ < 500 && !(cond); i_++)                \
			bs_loop_run_once(loop, 10);                    \
		assert_true(cond);                                     \
	} while (0)

/* A listener of the toy protocol on its own loop and a client connected
 * to it (the session started); the client's socket is returned. */
struct server {
	struct bs_loop *loop;
	struct bs_net_listener *l;
};

static int serve(struct server *sv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct bs_net_listen_cfg cfg = { .proto = &frames_proto };
	char addr[64];
	int fd;

	F = NULL;
	bs_net_limits_default(&cfg.limits);
	new_loop(&sv->loop);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)th_free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	cfg.addr = addr;
	assert_int_equal(bs_net_listen(sv->loop, &cfg, &sv->l), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	RUN_UNTIL(sv->loop, F != NULL);
	return fd;
}

static void unserve(struct server *sv)
{
	bs_net_listener_free(sv->l);
	bs_loop_run_once(sv->loop, 0);
	bs_loop_free(sv->loop);
	free(F);
}

static void next_payload_goes_direct(void **state)
{
	struct server sv;
	uint8_t *f0 = frame(0), *two;
	size_t copied;
	int fd;

	(void)state;
	fd = serve(&sv);

	/* frame 0: its header and 1 KiB arrive first (into the buffer) ... */
	send_all(fd, f0, HDR + 1024);
	RUN_UNTIL(sv.loop, F->got == 1024);
	/* ... the rest is missing while the server waits: zero-copy */
	send_all(fd, f0 + HDR + 1024, PAYLOAD - 1024);
	RUN_UNTIL(sv.loop, F->done == 1);
	/* (a tail under direct_min may come through the buffer) */
	assert_true(F->copied >= 1024 && F->copied < 1024 + DIRECT_MIN);
	copied = F->copied;

	/* frames 1 and 2 arrive back to back, all in the socket at once */
	two = malloc(2 * (HDR + PAYLOAD));
	assert_non_null(two);
	{
		uint8_t *a = frame(1), *b = frame(2);

		memcpy(two, a, HDR + PAYLOAD);
		memcpy(two + HDR + PAYLOAD, b, HDR + PAYLOAD);
		free(a);
		free(b);
	}
	send_all(fd, two, 2 * (HDR + PAYLOAD));
	RUN_UNTIL(sv.loop, F->done == 3);
	assert_false(F->bad);
	/*
	 * Only headers (and at most a short tail of a payload that had not
	 * all arrived) went through the input buffer. Without direct_hdr the
	 * header read takes 256 KiB, both payloads with it, and copies them.
	 */
	assert_true(F->copied - copied < 2 * DIRECT_MIN);
	assert_int_equal(F->copied + F->direct, 3 * PAYLOAD);

	close(fd);
	RUN_UNTIL(sv.loop, F->eof);
	unserve(&sv);
	free(f0);
	free(two);
}

/*
 * The session closes the connection from inside its own callbacks, as
 * NFS does on a record over its limit: the server must not touch the
 * freed connection afterwards (ASan) and the peer sees the close.
 */
static void closed_from_inside(unsigned what)
{
	struct server sv;
	char junk[64];
	uint8_t *b;
	size_t len;
	int fd = serve(&sv);

	len = HDR + (what == TOO_BIG ? 60 : CLOSE_AFTER + HDR + 60);
	b = calloc(1, len);
	assert_non_null(b);
	b[0] = (uint8_t)(what >> 24);
	b[1] = (uint8_t)(what >> 16);
	b[2] = (uint8_t)(what >> 8);
	b[3] = (uint8_t)what;
	if (what == CLOSE_AFTER) {
		/* the header first, so that the payload goes zero-copy and
		 * the next header comes with it */
		send_all(fd, b, HDR);
		RUN_UNTIL(sv.loop, F->have == HDR);
		send_all(fd, b + HDR, len - HDR);
	} else {
		send_all(fd, b, len);
	}
	RUN_UNTIL(sv.loop, F->c == NULL);
	/* EOF, or a reset: the server closed over input it did not read */
	assert_true(recv(fd, junk, sizeof(junk), 0) <= 0);
	close(fd);
	unserve(&sv);
	free(b);
}

static void closed_in_input(void **state)
{
	(void)state;
	closed_from_inside(TOO_BIG);
}

static void closed_in_direct_done(void **state)
{
	(void)state;
	closed_from_inside(CLOSE_AFTER);
}

static int epoll_mode(void **state)
{
	(void)state;
	RING = false;
	return 0;
}

static int ring_mode(void **state)
{
	(void)state;
	RING = true;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(next_payload_goes_direct, epoll_mode),
		cmocka_unit_test_setup(closed_in_input, epoll_mode),
		cmocka_unit_test_setup(closed_in_direct_done, epoll_mode),
		cmocka_unit_test_setup(next_payload_goes_direct, ring_mode),
		cmocka_unit_test_setup(closed_in_input, ring_mode),
		cmocka_unit_test_setup(closed_in_direct_done, ring_mode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
