/* SPDX-License-Identifier: MIT */
/*
 * A session drops output it queued while the peer does not read (as NBD,
 * iSCSI and NVMe/TCP do on a budget eviction): with event_loop = io_uring
 * a send of that output may be in flight in the kernel, reading the
 * session's buffers. bs_net_conn_drop_output() cancels it first, so that
 * the buffers may be reused at once: the peer, once it reads, gets only
 * bytes the session had queued, never what the buffers hold after the
 * drop. Before, the send went on from freed (pool-reused) memory.
 *
 * A toy protocol: on start the session queues OUT bytes of 0xab.
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

#include "export/net/internal.h"
#include "helpers/th.h"

#define OUT (8u << 20)
#define QUEUED 0xab
#define REUSED 0xee

struct sess {
	struct bs_net_conn *c;
	uint8_t *buf;
	size_t off;		/* bytes sent() reported */
	bool dropped;
	size_t sent_after_drop;
	bool closed;
};

static struct sess *S;
static bool RING;

static int s_start(void *owner, struct bs_net_conn *c, void **sess)
{
	(void)owner;
	S = calloc(1, sizeof(*S));
	assert_non_null(S);
	S->buf = malloc(OUT);
	assert_non_null(S->buf);
	memset(S->buf, QUEUED, OUT);
	S->c = c;
	*sess = S;
	bs_net_conn_handshake_done(c);
	bs_net_conn_kick(c);
	return 0;
}

static size_t s_input(void *sess, const uint8_t *p, size_t len)
{
	(void)sess, (void)p;
	return len;
}

static bool s_wants(void *sess)
{
	(void)sess;
	return true;
}

static int s_output(void *sess, struct iovec *iov, int max)
{
	struct sess *s = sess;

	if (s->dropped || s->off == OUT || max < 1)
		return 0;
	iov[0].iov_base = s->buf + s->off;
	iov[0].iov_len = OUT - s->off;
	return 1;
}

static size_t s_out_bytes(void *sess)
{
	struct sess *s = sess;

	return s->dropped ? 0 : OUT - s->off;
}

static void s_sent(void *sess, size_t n)
{
	struct sess *s = sess;

	if (s->dropped)
		s->sent_after_drop += n;
	else
		s->off += n;
}

static void s_eof(void *sess)
{
	(void)sess;
}

static bool s_finished(void *sess)
{
	return ((struct sess *)sess)->dropped;
}

static bool s_busy(void *sess)
{
	(void)sess;
	return false;
}

static void s_close(void *sess, const char *why)
{
	struct sess *s = sess;

	(void)why;
	s->closed = true;
	s->c = NULL;
}

static const struct bs_net_proto drop_proto = {
	.name = "drop",
	.inbuf = 4096,
	.start = s_start,
	.input = s_input,
	.wants_input = s_wants,
	.output = s_output,
	.out_bytes = s_out_bytes,
	.sent = s_sent,
	.eof = s_eof,
	.finished = s_finished,
	.busy = s_busy,
	.close = s_close,
};

static void run(struct bs_loop *loop, int n)
{
	while (n-- > 0)
		bs_loop_run_once(loop, 10);
}

static void dropped_output_is_not_sent(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct bs_net_listen_cfg cfg = { .proto = &drop_proto };
	struct bs_net_listener *l;
	struct bs_loop *loop;
	static uint8_t rbuf[64 << 10];
	size_t got = 0, reused = 0;
	int fd, rcv = 16 << 10, i;
	char addr[64];

	(void)state;
	S = NULL;
	assert_int_equal(bs_loop_new(&loop), 0);
	if (RING)
		th_loop_ring(loop, 64);
	bs_net_limits_default(&cfg.limits);
	cfg.limits.sndbuf = 64 << 10;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)th_free_port());
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
	cfg.addr = addr;
	assert_int_equal(bs_net_listen(loop, &cfg, &l), 0);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv,
				    sizeof(rcv)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);

	/* the peer reads nothing: the send stalls with most of OUT queued */
	for (i = 0; i < 100 && (!S || !S->off); i++)
		run(loop, 1);
	run(loop, 20);
	assert_non_null(S);
	assert_true(S->off > 0 && S->off < OUT);
	if (RING)
		assert_true(S->c->tx_busy);	/* in the kernel's hands */

	/* dropped, and the memory reused at once (a pool's buffer) */
	bs_net_conn_drop_output(S->c);
	S->dropped = true;
	memset(S->buf, REUSED, OUT);
	bs_net_conn_kick(S->c);

	/* now the peer reads all there is, until the server closes */
	for (i = 0; i < 2000; i++) {
		ssize_t n = recv(fd, rbuf, sizeof(rbuf), MSG_DONTWAIT);

		if (n > 0) {
			ssize_t k;

			for (k = 0; k < n; k++)
				reused += rbuf[k] == REUSED;
			got += (size_t)n;
			continue;
		}
		if (n == 0)
			break;
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
		run(loop, 1);
	}
	assert_true(S->closed);
	/* every byte the peer got was queued before the drop */
	assert_int_equal(reused, 0);
	assert_int_equal(S->sent_after_drop, 0);
	assert_true(got >= S->off);
	assert_true(got < OUT);

	close(fd);
	bs_net_listener_free(l);
	bs_loop_run_once(loop, 0);
	bs_loop_free(loop);
	free(S->buf);
	free(S);
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
		cmocka_unit_test_setup(dropped_output_is_not_sent, epoll_mode),
		cmocka_unit_test_setup(dropped_output_is_not_sent, ring_mode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
