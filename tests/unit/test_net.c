/* SPDX-License-Identifier: MIT */
/*
 * The network server's rules (lib/export/net/): address, mode and timeout
 * parsing; and with real loopback sockets and a toy echo protocol: the
 * per-listener and per-peer limits, the handshake and idle timeouts, the
 * output bound (a peer that does not read stops being read), the drain,
 * and a UNIX socket born with its mode.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include <blkstack/loop.h>
#include <blkstack/net.h>

#include "helpers/th.h"

/* ---- parsing ------------------------------------------------------------ */

static void parse_ok(const char *s, int family, unsigned port, bool wild)
{
	struct bs_net_addr a;
	char why[160] = "";
	int err = bs_net_parse_addr(s, &a, why, sizeof(why));

	if (err)
		fail_msg("%s: %s", s, why);
	assert_int_equal(a.ss.ss_family, family);
	if (family == AF_INET)
		assert_int_equal(ntohs(((struct sockaddr_in *)&a.ss)->sin_port),
				 port);
	else
		assert_int_equal(ntohs(((struct sockaddr_in6 *)&a.ss)->sin6_port),
				 port);
	assert_int_equal(a.wildcard, wild);
}

static void parse_bad(const char *s, const char *needle)
{
	struct bs_net_addr a;
	char why[160] = "";

	assert_int_equal(bs_net_parse_addr(s, &a, why, sizeof(why)), -EINVAL);
	if (!strstr(why, needle))
		fail_msg("%s: '%s' lacks '%s'", s, why, needle);
}

static void addresses(void **state)
{
	(void)state;
	parse_ok("127.0.0.1:10809", AF_INET, 10809, false);
	parse_ok("127.0.0.1:1", AF_INET, 1, false);
	parse_ok("127.0.0.1:65535", AF_INET, 65535, false);
	parse_ok("0.0.0.0:10809", AF_INET, 10809, true);
	parse_ok("[::1]:10809", AF_INET6, 10809, false);
	parse_ok("[::]:10809", AF_INET6, 10809, true);
	/* issue 10 item 5: a wrapped port, an empty host */
	parse_bad("127.0.0.1:99999", "out of range (1-65535)");
	parse_bad("127.0.0.1:65536", "out of range");
	parse_bad("127.0.0.1:0", "out of range");
	parse_bad("127.0.0.1:4294977105", "out of range");
	parse_bad(":10809", "empty host");
	parse_bad("[]:10809", "empty host");
	parse_bad("127.0.0.1:", "no port");
	parse_bad("127.0.0.1:+80", "not a decimal");
	parse_bad("127.0.0.1: 80", "not a decimal");
	parse_bad("127.0.0.1:0x50", "not a decimal");
	parse_bad("nonsense", "HOST:PORT");
	parse_bad("localhost:10809", "not an IPv4 address");
	parse_bad("::1:10809", "brackets");
	parse_bad("[::1]10809", "[IPV6]:PORT");
	parse_bad("[::1:10809", "[IPV6]:PORT");
	parse_bad("[1.2.3.4]:80", "not an IPv6 address");
}

static void modes_and_durations(void **state)
{
	mode_t m;
	unsigned ms;

	(void)state;
	assert_int_equal(bs_net_parse_mode("0600", &m), 0);
	assert_int_equal(m, 0600);
	assert_int_equal(bs_net_parse_mode("660", &m), 0);
	assert_int_equal(m, 0660);
	assert_int_equal(bs_net_parse_mode("0777", &m), 0);
	assert_int_equal(bs_net_parse_mode("0800", &m), -EINVAL);
	assert_int_equal(bs_net_parse_mode("1777", &m), -EINVAL);
	assert_int_equal(bs_net_parse_mode("", &m), -EINVAL);
	assert_int_equal(bs_net_parse_mode("rw", &m), -EINVAL);

	assert_int_equal(bs_net_parse_ms("10", &ms), 0);
	assert_int_equal(ms, 10000);
	assert_int_equal(bs_net_parse_ms("2.5", &ms), 0);
	assert_int_equal(ms, 2500);
	assert_int_equal(bs_net_parse_ms("0.25s", &ms), 0);
	assert_int_equal(ms, 250);
	assert_int_equal(bs_net_parse_ms("300ms", &ms), 0);
	assert_int_equal(ms, 300);
	assert_int_equal(bs_net_parse_ms("0", &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(bs_net_parse_ms("86400", &ms), 0);
	assert_int_equal(bs_net_parse_ms("86401", &ms), -EINVAL);
	assert_int_equal(bs_net_parse_ms("1.5ms", &ms), -EINVAL);
	assert_int_equal(bs_net_parse_ms("-1", &ms), -EINVAL);
	assert_int_equal(bs_net_parse_ms("10m", &ms), -EINVAL);
	assert_int_equal(bs_net_parse_ms("", &ms), -EINVAL);
	assert_int_equal(bs_net_parse_ms(".", &ms), -EINVAL);
}

/* ---- a toy protocol ------------------------------------------------------ */

/*
 * "echo": the handshake is the 3 bytes "HI\n"; after it every byte is
 * echoed back. "BYE" ends the session cleanly.
 */
struct echo {
	struct bs_net_conn *c;
	char hs[3];
	size_t hs_have;
	uint8_t *out;
	size_t out_len, out_off;
	size_t in_total;
	bool bye, shut;
};

struct world {
	struct bs_loop *loop;
	unsigned opened, closed;
	char last_why[200];
	char log[4096];
};

static struct world W;

static int e_start(void *owner, struct bs_net_conn *c, void **sess)
{
	struct echo *e = calloc(1, sizeof(*e));

	(void)owner;
	if (!e)
		return -ENOMEM;
	e->c = c;
	W.opened++;
	*sess = e;
	return 0;
}

static size_t e_input(void *sess, const uint8_t *buf, size_t len)
{
	struct echo *e = sess;
	size_t used = 0;

	if (!buf)
		return 0;
	while (used < len && e->hs_have < 3) {
		e->hs[e->hs_have++] = (char)buf[used++];
		if (e->hs_have == 3 && !memcmp(e->hs, "HI\n", 3))
			bs_net_conn_handshake_done(e->c);
	}
	if (used == len)
		return used;
	if (len - used >= 3 && !memcmp(buf + used, "BYE", 3)) {
		e->bye = true;
		return len;
	}
	e->out = realloc(e->out, e->out_len + len - used);
	assert_non_null(e->out);
	memcpy(e->out + e->out_len, buf + used, len - used);
	e->out_len += len - used;
	e->in_total += len - used;
	return len;
}

static bool e_wants(void *sess)
{
	struct echo *e = sess;

	return !e->bye && !e->shut;
}

static int e_output(void *sess, struct iovec *iov, int max)
{
	struct echo *e = sess;

	if (e->out_off == e->out_len || !max)
		return 0;
	iov[0].iov_base = e->out + e->out_off;
	iov[0].iov_len = e->out_len - e->out_off;
	return 1;
}

static size_t e_out_bytes(void *sess)
{
	struct echo *e = sess;

	return e->out_len - e->out_off;
}

static void e_sent(void *sess, size_t n)
{
	struct echo *e = sess;

	e->out_off += n;
}

static void e_eof(void *sess)
{
	struct echo *e = sess;

	e->bye = true;
}

static void e_shutdown(void *sess)
{
	struct echo *e = sess;

	e->shut = true;
	bs_net_conn_kick(e->c);
}

static bool e_finished(void *sess)
{
	struct echo *e = sess;

	return e->bye || e->shut;
}

static bool e_busy(void *sess)
{
	(void)sess;
	return false;
}

static void e_close(void *sess, const char *why)
{
	struct echo *e = sess;

	W.closed++;
	snprintf(W.last_why, sizeof(W.last_why), "%s", why ? why : "clean");
	free(e->out);
	free(e);
}

static const struct bs_net_proto echo_proto = {
	.name = "echo",
	.inbuf = 4096,
	.start = e_start,
	.input = e_input,
	.wants_input = e_wants,
	.output = e_output,
	.out_bytes = e_out_bytes,
	.sent = e_sent,
	.eof = e_eof,
	.shutdown = e_shutdown,
	.finished = e_finished,
	.busy = e_busy,
	.close = e_close,
};

static void w_log(void *arg, const char *msg)
{
	size_t n = strlen(W.log);

	(void)arg;
	snprintf(W.log + n, sizeof(W.log) - n, "%s\n", msg);
}

static struct bs_net_listener *w_listen(const struct bs_net_limits *lim,
					unsigned *port)
{
	struct bs_net_listener *l;
	char addr[64];
	struct bs_net_listen_cfg cfg = {
		.addr = addr,
		.limits = *lim,
		.proto = &echo_proto,
		.log = w_log,
	};

	memset(&W, 0, sizeof(W));
	assert_int_equal(bs_loop_new(&W.loop), 0);
	*port = th_free_port();
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", *port);
	assert_int_equal(bs_net_listen(W.loop, &cfg, &l), 0);
	return l;
}

static void w_end(struct bs_net_listener *l)
{
	bs_net_listener_free(l);
	bs_loop_run_once(W.loop, 0);
	bs_loop_free(W.loop);
}

/* Connect to 127.0.0.1:@port from the loopback address @src. */
static int dial(unsigned port, const char *src)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	if (src) {
		struct sockaddr_in me = { .sin_family = AF_INET };

		inet_pton(AF_INET, src, &me.sin_addr);
		assert_int_equal(bind(fd, (struct sockaddr *)&me, sizeof(me)),
				 0);
	}
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Run the loop until @cond or about @ms milliseconds passed. */
#define RUN_UNTIL(cond, ms)                                             \
	do {                                                            \
		uint64_t end_ = bs_now_ns() + (uint64_t)(ms) * 1000000; \
		while (!(cond) && bs_now_ns() < end_)                   \
			bs_loop_run_once(W.loop, 5);                    \
	} while (0)

/* The server closed @fd (EOF or reset), without blocking. */
static bool peer_closed(int fd)
{
	char b[256];
	ssize_t n;

	for (;;) {
		n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n > 0)
			continue;
		return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
	}
}

/* ---- rules --------------------------------------------------------------- */

static void limits(void **state)
{
	struct bs_net_limits lim;
	struct bs_net_listener *l;
	unsigned port;
	int a, b, c, d, e, f;

	(void)state;
	bs_net_limits_default(&lim);
	lim.max_conns = 4;
	lim.max_per_peer = 2;
	l = w_listen(&lim, &port);
	a = dial(port, "127.0.0.1");
	b = dial(port, "127.0.0.1");
	RUN_UNTIL(W.opened == 2, 2000);
	assert_int_equal(W.opened, 2);
	/* a third from the same address is refused... */
	c = dial(port, "127.0.0.1");
	RUN_UNTIL(peer_closed(c), 2000);
	assert_true(peer_closed(c));
	assert_int_equal(W.opened, 2);
	assert_non_null(strstr(W.log, "max_connections_per_peer = 2"));
	/* ...another address is still served */
	d = dial(port, "127.0.0.2");
	e = dial(port, "127.0.0.2");
	RUN_UNTIL(W.opened == 4, 2000);
	assert_int_equal(W.opened, 4);
	assert_int_equal(bs_net_listener_conns(l), 4);
	/* the listener is full: anyone is refused, with one log line a second */
	{
		uint64_t t0 = bs_now_ns();
		unsigned i, lines = 0;
		const char *p;

		for (i = 0; i < 20; i++) {
			f = dial(port, "127.0.0.3");
			RUN_UNTIL(peer_closed(f), 2000);
			assert_true(peer_closed(f));
			close(f);
		}
		for (p = W.log; (p = strstr(p, ": refused ")); p++)
			lines++;
		/* 21 refusals; a line at most once a second (plus the first) */
		assert_true(lines >= 1);
		assert_true(lines <= 2 + (bs_now_ns() - t0) / 1000000000ull);
	}
	assert_int_equal(W.opened, 4);
	/* a slot frees when a client leaves */
	close(a);
	RUN_UNTIL(W.closed == 1, 2000);
	f = dial(port, "127.0.0.1");
	RUN_UNTIL(W.opened == 5, 2000);
	assert_int_equal(W.opened, 5);
	close(b);
	close(c);
	close(d);
	close(e);
	close(f);
	w_end(l);
}

static void handshake_timeout(void **state)
{
	struct bs_net_limits lim;
	struct bs_net_listener *l;
	unsigned port;
	int slow, ok;
	char buf[8];

	(void)state;
	bs_net_limits_default(&lim);
	lim.handshake_ms = 200;
	l = w_listen(&lim, &port);
	slow = dial(port, NULL);
	ok = dial(port, NULL);
	assert_int_equal(send(slow, "H", 1, 0), 1);	/* never finishes */
	assert_int_equal(send(ok, "HI\nab", 5, 0), 5);
	RUN_UNTIL(W.closed == 1, 3000);
	assert_int_equal(W.closed, 1);
	assert_non_null(strstr(W.last_why, "handshake not finished in 0.2 s"));
	assert_true(peer_closed(slow));
	/* the one that finished its handshake stays, and is served */
	RUN_UNTIL(false, 300);
	assert_int_equal(W.closed, 1);
	assert_int_equal(recv(ok, buf, sizeof(buf), MSG_DONTWAIT), 2);
	close(slow);
	close(ok);
	w_end(l);
}

static void idle_timeout(void **state)
{
	struct bs_net_limits lim;
	struct bs_net_listener *l;
	unsigned port;
	uint64_t t0;
	int fd, i;
	char buf[8];

	(void)state;
	bs_net_limits_default(&lim);
	lim.idle_ms = 300;
	l = w_listen(&lim, &port);
	fd = dial(port, NULL);
	assert_int_equal(send(fd, "HI\n", 3, 0), 3);
	t0 = bs_now_ns();
	/* activity keeps it open past the idle time */
	for (i = 0; i < 5; i++) {
		RUN_UNTIL(false, 150);
		assert_int_equal(send(fd, "x", 1, 0), 1);
	}
	RUN_UNTIL(false, 50);
	assert_int_equal(W.closed, 0);
	assert_true(bs_now_ns() - t0 > 600000000ull);
	assert_true(recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0);
	/* then silence closes it */
	RUN_UNTIL(W.closed == 1, 3000);
	assert_int_equal(W.closed, 1);
	assert_non_null(strstr(W.last_why, "idle for 0.3 s"));
	assert_true(peer_closed(fd));
	close(fd);
	w_end(l);
}

static void output_bound(void **state)
{
	struct bs_net_limits lim;
	struct bs_net_listener *l;
	struct bs_net_conn *c;
	struct echo *e;
	unsigned port;
	size_t sent = 0, before;
	char *chunk = calloc(1, 64 << 10);
	int fd, i, rcv = 4096;

	(void)state;
	bs_net_limits_default(&lim);
	lim.out_max = 256 << 10;
	l = w_listen(&lim, &port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	{
		struct sockaddr_in sa = { .sin_family = AF_INET };

		sa.sin_port = htons((uint16_t)port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa,
					 sizeof(sa)), 0);
	}
	assert_int_equal(send(fd, "HI\n", 3, 0), 3);
	/* write a lot, read nothing: the echo queues up to the bound */
	for (i = 0; i < 400; i++) {
		ssize_t n = send(fd, chunk, 64 << 10, MSG_DONTWAIT);
		if (n > 0)
			sent += (size_t)n;
		bs_loop_run_once(W.loop, 2);
	}
	RUN_UNTIL(false, 200);
	c = bs_net_conn_next(l, NULL);
	assert_non_null(c);
	e = bs_net_conn_session(c);
	/* it stopped reading: far less taken than sent, output bounded */
	assert_true(e->out_len - e->out_off <= lim.out_max + 4096);
	assert_true(e->in_total < sent);
	before = e->in_total;
	RUN_UNTIL(false, 200);
	assert_int_equal(e->in_total, before);
	/* reading the echo lets it go on */
	for (i = 0; i < 200 && e->in_total == before; i++) {
		char buf[65536];
		while (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			;
		bs_loop_run_once(W.loop, 5);
	}
	assert_true(e->in_total > before);
	close(fd);
	free(chunk);
	w_end(l);
}

static void drain_and_clean_end(void **state)
{
	struct bs_net_limits lim;
	struct bs_net_listener *l;
	unsigned port;
	int a, b;

	(void)state;
	bs_net_limits_default(&lim);
	l = w_listen(&lim, &port);
	a = dial(port, NULL);
	b = dial(port, NULL);
	assert_int_equal(send(a, "HI\nBYE", 6, 0), 6);
	RUN_UNTIL(W.closed == 1, 2000);
	assert_string_equal(W.last_why, "clean");
	bs_net_listener_drain(l);
	assert_false(bs_net_listener_accepting(l));
	RUN_UNTIL(W.closed == 2, 2000);
	assert_int_equal(W.closed, 2);
	assert_true(peer_closed(b));
	close(a);
	close(b);
	w_end(l);
}

static void unix_mode(void **state)
{
	char dir[] = "/tmp/bs-test-net.XXXXXX", path[128];
	struct stat st;
	mode_t old = umask(0);
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	/* under umask 0 a socket would be born 0777: the mode wins */
	assert_int_equal(bs_net_listen_unix(path, 4, 0600, &fd), 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	close(fd);
	/* the stale file is replaced, with the new mode */
	assert_int_equal(bs_net_listen_unix(path, 4, 0660, &fd), 0);
	assert_int_equal(lstat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	/* a live one is refused */
	{
		int fd2;
		assert_int_equal(bs_net_listen_unix(path, 4, 0600, &fd2),
				 -EADDRINUSE);
	}
	close(fd);
	unlink(path);
	rmdir(dir);
	/* the umask is the caller's again */
	assert_int_equal(umask(old), 0);
}

/* On a UNIX socket the peer is its uid: one user cannot take every slot. */
static void unix_per_uid(void **state)
{
	char dir[] = "/tmp/bs-test-net.XXXXXX", path[128];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct bs_net_listener *l;
	struct bs_net_listen_cfg cfg = {
		.addr = path,
		.is_unix = true,
		.proto = &echo_proto,
		.log = w_log,
	};
	int a, b;

	(void)state;
	memset(&W, 0, sizeof(W));
	assert_int_equal(bs_loop_new(&W.loop), 0);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	bs_net_limits_default(&cfg.limits);
	cfg.limits.max_per_peer = 1;
	assert_int_equal(bs_net_listen(W.loop, &cfg, &l), 0);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	a = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	b = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(connect(a, (struct sockaddr *)&sa, sizeof(sa)), 0);
	RUN_UNTIL(W.opened == 1, 2000);
	assert_int_equal(connect(b, (struct sockaddr *)&sa, sizeof(sa)), 0);
	RUN_UNTIL(peer_closed(b), 2000);
	assert_true(peer_closed(b));
	assert_int_equal(W.opened, 1);
	assert_non_null(strstr(W.log, "connections from uid "));
	close(a);
	close(b);
	w_end(l);
	/* the listener removed its socket file */
	assert_int_equal(access(path, F_OK), -1);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(addresses),
		cmocka_unit_test(modes_and_durations),
		cmocka_unit_test(limits),
		cmocka_unit_test(handshake_timeout),
		cmocka_unit_test(idle_timeout),
		cmocka_unit_test(output_bound),
		cmocka_unit_test(drain_and_clean_end),
		cmocka_unit_test(unix_mode),
		cmocka_unit_test(unix_per_uid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
