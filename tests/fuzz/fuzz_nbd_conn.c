/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the NBD connection layer as a whole. The real network
 * server (lib/export/net/: listener, accept, connection pump, output
 * bound, timers, drain) runs the real NBD session-operations table
 * (nbd_net_proto, lib/export/nbd/conn.c) on a UNIX listener in a temporary
 * directory; the fuzzer is the client on a real non-blocking socket. The
 * client sends its byte stream in chunks whose sizes and interleaving
 * (reading replies, not reading them, half-closing, closing mid-request,
 * draining the server) the input chooses, so partial reads and writes,
 * the zero-copy payload receive, the output queue limit and connections
 * closed with requests in flight are all exercised.
 *
 * Input layout:
 *   byte 0   configuration: bit 0 read-only export; bits 1-2 the 64 MiB
 *            device (0 mem, 1 mem with 4K blocks and a write cache, 2 a
 *            `file`
 *            in the temporary directory: io_uring, so requests really are
 *            in flight when the client goes, 3 `error` over mem failing
 *            every op after byte 1's count); bits 3-4 the listener's out_max (4 KiB,
 *            64 KiB, 1 MiB, the default 16 MiB); bit 5 abrupt end: free
 *            the listener with the client still connected and its
 *            requests in flight (else the client hangs up, the server
 *            must close, then the listener drains); bit 6 a crowd: a bystander client that
 *            writes 32 MiB to export "other" a slice per step, reading
 *            its replies, with the server-wide payload budget at its
 *            minimum (64 MiB) and a stall timeout of 1 ms, so stalled
 *            sessions are evicted; max_connections 2 and a third client
 *            (refused); at the end, before the hang-up, the bystander
 *            sends the rest while the client neither sends nor reads; bit 7 handshake and idle timeouts of 1 ms
 *   byte 1   bits 0-3: schedule length - 1; bits 4-6: the error device's
 *            requests that pass before it fails; bit 7 a 2 MiB client
 *            send buffer (the server's 256 KiB input buffer can fill up
 *            in one read, then be compacted)
 *   schedule one byte per step, used in turn and cyclically: bits 0-4 a
 *            chunk size code (1..8, 16 B..512 KiB, or an odd size), bits
 *            5-7 what the client does with the chunk:
 *              0 send it, read every reply there is
 *              1 send it, read at most 100 bytes of replies
 *              2 send it, read nothing (replies pile up)
 *              3 send it, let the server run a while (with bit 7 of
 *                byte 0, long enough for the timers), read everything
 *              4 send that many zero bytes (cheap big payloads), read
 *                nothing; the stream does not advance
 *              5 send it, then half-close (no more sending)
 *              6 send it, then close the socket at once (mid-request,
 *                unread replies, before the server saw the last bytes)
 *              7 send it, then drain the listener (graceful stop)
 *   rest     the client's byte stream, from the client flags on
 *
 * Every step runs the loop a bounded number of times (bs_loop_run_once,
 * no blocking); the number of steps, bytes and loop turns are bounded, so
 * each input ends in bounded time. At the end (unless bit 5) the client
 * hangs up (if it has not) and the server must close the connection
 * within a bounded number of loop turns; then everything is freed (LeakSanitizer checks
 * that nothing outlives the input).
 */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>
#include <blkstack/net.h>
#include <blkstack/opts.h>

#include "export/nbd/server.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_STEPS 4096
#define MAX_ZERO_BYTES (8u << 20)
#define END_TURNS 4000

/* ---- the export type: an nbd_export without listeners of its own ------- */

static int fz_open(struct bs_export *exp, struct bs_opts *opts)
{
	(void)opts;
	exp->priv = calloc(1, sizeof(struct nbd_export));
	return exp->priv ? 0 : -ENOMEM;
}

static void fz_close(struct bs_export *exp)
{
	free(exp->priv);
	exp->priv = NULL;
}

static const struct bs_export_type fuzz_export_type = {
	.name = "nbd-conn-fuzz",
	.summary = "export object for the NBD connection fuzzer",
	.open = fz_open,
	.close = fz_close,
};

BS_EXPORT_TYPE(fuzz_export_type)

/* ---- setup ----------------------------------------------------------------*/

static char sock_dir[64];
static char sock_path[128];
static char img_path[128];

static void remove_dir(void)
{
	unlink(sock_path);
	unlink(img_path);
	rmdir(sock_dir);
}

static int init_paths(void)
{
	if (*sock_path)
		return 0;
	snprintf(sock_dir, sizeof(sock_dir), "%s/bs-nbdconn.XXXXXX",
		 getenv("TMPDIR") && strlen(getenv("TMPDIR")) < 32 ?
		 getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(sock_dir))
		return -1;
	snprintf(sock_path, sizeof(sock_path), "%s/nbd.sock", sock_dir);
	snprintf(img_path, sizeof(img_path), "%s/img", sock_dir);
	atexit(remove_dir);
	return 0;
}

static int set_opts(struct bs_opts *o, const char *spec)
{
	char *copy = strdup(spec), *tok, *save = NULL;
	int err = copy ? 0 : -1;

	for (tok = copy ? strtok_r(copy, ";", &save) : NULL; tok && !err;
	     tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');
		*eq = '\0';
		err = bs_opts_set(o, tok, eq + 1, "fuzz");
	}
	free(copy);
	return err;
}

static int make_dev(struct bs_ctx *ctx, const char *name, const char *type,
		    const char *spec)
{
	struct bs_opts *o = NULL;
	struct bs_dev *dev;
	int err = bs_opts_new(&o);

	if (!err)
		err = set_opts(o, spec);
	if (!err)
		err = bs_dev_create(ctx, name, type, o, &dev);
	bs_opts_free(o);
	return err;
}

static int make_devs(struct bs_ctx *ctx, unsigned which, unsigned after)
{
	char spec[128];

	switch (which & 3) {
	case 0:
		return make_dev(ctx, "d", "mem", "size=64M;chunk=4K");
	case 1:
		return make_dev(ctx, "d", "mem",
				"size=64M;logical_block_size=4096;write_cache=1");
	case 2:
		/* a fresh image each input: inputs replay the same */
		unlink(img_path);
		snprintf(spec, sizeof(spec), "path=%s;size=64M;queue_depth=8",
			 img_path);
		return make_dev(ctx, "d", "file", spec);
	default:
		if (make_dev(ctx, "m", "mem", "size=64M;chunk=64K"))
			return -1;
		snprintf(spec, sizeof(spec), "devices=m;ops=all;errno=EIO;"
			 "after=%u", after);
		return make_dev(ctx, "d", "error", spec);
	}
}

static int make_export(struct bs_exports *set, const char *name, bool ro)
{
	struct bs_opts *o = NULL;
	int err = bs_opts_new(&o);

	if (!err)
		err = bs_opts_set(o, "device", "d", "fuzz");
	if (!err && ro)
		err = bs_opts_set(o, "readonly", "1", "fuzz");
	if (!err)
		err = bs_opts_set(o, "description", "fuzzed", "fuzz");
	if (!err)
		err = bs_export_create(set, name, fuzz_export_type.name, o,
				       NULL);
	bs_opts_free(o);
	return err;
}

/* BLKSTACK_FUZZ_VERBOSE=1: the server's log and a summary on stderr */
static bool verbose;

static void server_log(void *arg, const char *msg)
{
	(void)arg;
	if (verbose)
		fprintf(stderr, "server: %s\n", msg);
}

/* ---- the client ---------------------------------------------------------- */

struct client {
	struct bs_loop *loop;
	struct bs_net_listener *nl;
	int fd;			/* -1 once closed */
	bool wr_shut;		/* half-closed: sends no more */
	bool srv_gone;		/* EOF or reset from the server */
	bool timeouts;		/* the 1 ms timers may fire */
	int wait_ms;		/* loop timeout while waiting: 1 for io_uring */
	uint8_t head[8];	/* first bytes of the server's stream */
	size_t got;
};

static void turn(struct client *cl, unsigned n)
{
	while (n--)
		bs_loop_run_once(cl->loop, 0);
}

/* Read replies, at most @max bytes (as many as there are for SIZE_MAX). */
static void client_read(struct client *cl, size_t max)
{
	static uint8_t buf[64 << 10];
	unsigned rounds;

	for (rounds = 0; cl->fd >= 0 && !cl->srv_gone && max && rounds < 4096;
	     rounds++) {
		ssize_t n = recv(cl->fd, buf, max < sizeof(buf) ? max :
				 sizeof(buf), MSG_DONTWAIT);

		if (n > 0) {
			size_t i;

			for (i = 0; i < (size_t)n && cl->got + i < 8; i++)
				cl->head[cl->got + i] = buf[i];
			/* every NBD server stream starts with its magic */
			if (cl->got < 8 && cl->got + (size_t)n >= 8 &&
			    memcmp(cl->head, "NBDMAGIC", 8))
				abort();
			cl->got += (size_t)n;
			max -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		cl->srv_gone = true;	/* 0: FIN; else reset */
	}
}

/*
 * Send @len bytes; the server runs while the socket is full. A client that
 * does not read can block the server for good (it stops reading when its
 * output is over out_max): after a few turns without progress, read.
 */
static void client_send(struct client *cl, const uint8_t *p, size_t len,
			bool reads)
{
	unsigned stuck = 0;

	while (len && cl->fd >= 0 && !cl->wr_shut && stuck < 64) {
		ssize_t n = send(cl->fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			p += n;
			len -= (size_t)n;
			stuck = 0;
			if (len)
				turn(cl, 1);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
			cl->wr_shut = true;	/* EPIPE, ECONNRESET: gone */
			return;
		}
		stuck++;
		turn(cl, 2);
		if (reads || stuck > 4)
			client_read(cl, SIZE_MAX);
	}
}

static void client_close(struct client *cl)
{
	if (cl->fd >= 0)
		close(cl->fd);
	cl->fd = -1;
	cl->wr_shut = true;
}

static int client_connect(bool big_sndbuf)
{
	int sndbuf = 2 << 20;
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (big_sndbuf)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		close(fd);
		return -1;
	}
	return fd;
}

static size_t chunk_size(unsigned code)
{
	static const size_t odd[8] = { 13, 27, 100, 511, 1000, 4095, 4097,
				       65537 };

	code &= 31;
	if (code < 8)
		return code + 1;
	if (code < 24)
		return (size_t)1 << (code - 4);
	return odd[code - 24];
}

/*
 * The bystander's stream: the oldest handshake to "other", a 32 MiB write
 * (zero payload), a read, NBD_CMD_DISC; sent a slice per step.
 */
#define BY_WRITE (32u << 20)

static size_t be(uint8_t *p, uint64_t v, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	return n;
}

static size_t nbd_req(uint8_t *p, uint16_t cmd, uint64_t off, uint32_t len)
{
	size_t n = be(p, 0x25609513, 4);

	n += be(p + n, 0, 2);
	n += be(p + n, cmd, 2);
	n += be(p + n, 0xb1, 8);
	n += be(p + n, off, 8);
	n += be(p + n, len, 4);
	return n;
}

struct bystander {
	struct client cl;
	uint8_t head[64], tail[64];
	size_t nhead, ntail, pos;
};

static void by_init(struct bystander *b)
{
	uint8_t *p = b->head;

	p += be(p, 1, 4);			/* NBD_FLAG_C_FIXED_NEWSTYLE */
	p += be(p, 0x49484156454F5054ull, 8);	/* IHAVEOPT */
	p += be(p, 1, 4);			/* NBD_OPT_EXPORT_NAME */
	p += be(p, 5, 4);
	memcpy(p, "other", 5);
	p += 5;
	p += nbd_req(p, 1, 0, BY_WRITE);	/* NBD_CMD_WRITE */
	b->nhead = (size_t)(p - b->head);
	b->ntail = nbd_req(b->tail, 0, 0, 4096);	/* NBD_CMD_READ */
	b->ntail += nbd_req(b->tail + b->ntail, 2, 0, 0); /* NBD_CMD_DISC */
}

/* Send the next @max bytes of the bystander's stream, read its replies. */
static void by_step(struct bystander *b, size_t max, const uint8_t *zeroes,
		    size_t zlen)
{
	size_t total = b->nhead + BY_WRITE + b->ntail;

	while (max && b->pos < total && b->cl.fd >= 0 && !b->cl.wr_shut) {
		const uint8_t *src;
		size_t n;

		if (b->pos < b->nhead) {
			src = b->head + b->pos;
			n = b->nhead - b->pos;
		} else if (b->pos < b->nhead + BY_WRITE) {
			src = zeroes;
			n = b->nhead + BY_WRITE - b->pos;
			if (n > zlen)
				n = zlen;
		} else {
			src = b->tail + (b->pos - b->nhead - BY_WRITE);
			n = total - b->pos;
		}
		if (n > max)
			n = max;
		client_send(&b->cl, src, n, true);
		b->pos += n;
		max -= n;
	}
	client_read(&b->cl, SIZE_MAX);
}

/* A client hangs up and reads until the server closes; abort if not. */
static void hang_up(struct client *cl, const char *who)
{
	unsigned i;

	if (cl->fd < 0)
		return;
	if (!cl->wr_shut)
		shutdown(cl->fd, SHUT_WR);
	for (i = 0; i < END_TURNS && !cl->srv_gone; i++) {
		bs_loop_run_once(cl->loop, cl->wait_ms);
		client_read(cl, SIZE_MAX);
	}
	/* every request ends and the connection closes */
	if (!cl->srv_gone) {
		fprintf(stderr, "fuzz_nbd_conn: the server did not close "
			"the %s's connection after it hung up\n", who);
		abort();
	}
	client_close(cl);
}

/* ---- one input ----------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const size_t out_max[4] = { 4u << 10, 64u << 10, 1u << 20,
					   BS_NET_OUT_MAX };
	static uint8_t zeroes[512 << 10];
	struct bs_ctx *ctx = NULL;
	struct bs_exports *set = NULL;
	/* one shared listener serving both exports, as bs_share_listen()
	 * would make it, without the export type's open around it */
	struct bs_share sh = { 0 };
	struct bs_share_ref refs[2] = { { 0 } };
	struct bs_share_ref *refp[2] = { &refs[0], &refs[1] };
	struct bs_share_listener nl = { .sh = &sh, .refs = refp, .n = 2 };
	struct bs_export *exps[2];
	struct bs_net_listen_cfg cfg = { 0 };
	struct client cl = { .fd = -1 };
	struct bystander by = { .cl = { .fd = -1 } };
	bool crowd;
	const uint8_t *sched, *stream;
	size_t nsched, slen, pos = 0, zero_sent = 0;
	unsigned step, i;
	uint8_t c0, c1;
	int fd2 = -1;

	if (size < 3 || init_paths())
		return 0;
	verbose = getenv("BLKSTACK_FUZZ_VERBOSE") != NULL;
	c0 = data[0];
	c1 = data[1];
	nsched = 1 + (c1 & 15);
	if (size < 2 + nsched)
		return 0;
	sched = data + 2;
	stream = sched + nsched;
	slen = size - 2 - nsched;

	crowd = c0 & 64;
	if (bs_ctx_new(&ctx))
		return 0;
	if (crowd && bs_budget_configure(bs_ctx_budget(ctx), BS_BUDGET_MIN, 1))
		goto out;
	if (make_devs(ctx, (c0 >> 1) & 3, (c1 >> 4) & 7) ||
	    bs_exports_new(ctx, &set) || make_export(set, "vol0", c0 & 1) ||
	    make_export(set, "other", false))
		goto out;
	exps[0] = bs_export_find(set, "vol0");
	exps[1] = bs_export_find(set, "other");
	sh.set = set;
	sh.ctx = ctx;
	sh.loop = bs_ctx_loop(ctx);
	for (i = 0; i < 2; i++) {
		refs[i].member = exps[i];
		refs[i].name = exps[i]->name;
		refs[i].sh = &sh;
	}

	cfg.addr = sock_path;
	cfg.is_unix = true;
	bs_net_limits_default(&cfg.limits);
	cfg.limits.out_max = out_max[(c0 >> 3) & 3];
	if (crowd)
		cfg.limits.max_conns = cfg.limits.max_per_peer = 2;
	cfg.limits.handshake_ms = (c0 & 128) ? 1 : 0;
	cfg.limits.idle_ms = (c0 & 128) ? 1 : 0;
	cfg.proto = &nbd_net_proto;
	cfg.owner = &nl;
	cfg.log = server_log;
	if (bs_net_listen(sh.loop, &cfg, &nl.nl))
		goto out;

	cl.loop = sh.loop;
	cl.nl = nl.nl;
	cl.timeouts = c0 & 128;
	cl.wait_ms = (cl.timeouts || crowd || ((c0 >> 1) & 3) == 2) ? 1 : 0;
	cl.fd = client_connect(c1 & 128);
	if (cl.fd < 0)
		goto out;
	turn(&cl, 2);
	if (crowd) {
		by.cl = cl;
		by.cl.fd = client_connect(false);
		by_init(&by);
		turn(&cl, 2);
		/* over max_connections: accepted and closed at once */
		fd2 = client_connect(false);
		turn(&cl, 2);
	}

	for (step = 0; step < MAX_STEPS && cl.fd >= 0 && !cl.wr_shut; step++) {
		uint8_t s = sched[step % nsched];
		unsigned action = s >> 5;
		size_t n = chunk_size(s);

		if (action == 4) {
			if (zero_sent + n > MAX_ZERO_BYTES)
				n = MAX_ZERO_BYTES - zero_sent;
			zero_sent += n;
			client_send(&cl, zeroes, n, false);
			turn(&cl, 2);
			if (zero_sent >= MAX_ZERO_BYTES && pos >= slen)
				break;
			continue;
		}
		if (pos >= slen)
			break;
		if (n > slen - pos)
			n = slen - pos;
		client_send(&cl, stream + pos, n, action == 0 || action == 3);
		pos += n;
		if (action == 6) {
			client_close(&cl);
			break;
		}
		turn(&cl, action == 3 ? 16 : 2);
		/* settling with 1 ms timeouts or io_uring: let them happen */
		for (i = 0; action == 3 && cl.wait_ms && i < 3; i++)
			bs_loop_run_once(cl.loop, 1);
		switch (action) {
		case 0:
		case 3:
			client_read(&cl, SIZE_MAX);
			break;
		case 1:
			client_read(&cl, 100);
			break;
		case 5:
			shutdown(cl.fd, SHUT_WR);
			cl.wr_shut = true;
			break;
		case 7:
			bs_net_listener_drain(nl.nl);
			break;
		}
		turn(&cl, 1);
		if (crowd)
			by_step(&by, 256 << 10, zeroes, sizeof(zeroes));
	}

	if (c0 & 32)
		goto out;	/* the listener goes with the client there */
	/*
	 * The crowd: the bystander sends the rest of its stream while the
	 * client sits there, neither sending nor reading. If the client holds
	 * budget the bystander needs, it is evicted after 1 ms of no progress.
	 */
	for (i = 0; crowd && i < 256 && !by.cl.wr_shut &&
	     by.pos < by.nhead + BY_WRITE + by.ntail; i++) {
		by_step(&by, 512 << 10, zeroes, sizeof(zeroes));
		bs_loop_run_once(cl.loop, cl.wait_ms);
	}
	/* the clients hang up; the server must close both */
	hang_up(&cl, "client");
	hang_up(&by.cl, "bystander");
	/* the server notices a client that is gone */
	for (i = 0; i < END_TURNS && bs_net_listener_conns(nl.nl); i++)
		bs_loop_run_once(cl.loop, cl.wait_ms);
	if (bs_net_listener_conns(nl.nl)) {
		fprintf(stderr, "fuzz_nbd_conn: %u connections left after their "
			"clients closed\n", bs_net_listener_conns(nl.nl));
		abort();
	}
	bs_net_listener_drain(nl.nl);
	turn(&cl, 4);
out:
	if (verbose)
		fprintf(stderr, "client: %zu of %zu stream bytes and %zu zero "
			"bytes offered, %zu bytes received, server %s\n", pos,
			slen, zero_sent, cl.got, cl.srv_gone ? "closed" :
			"did not close");
	if (verbose && crowd)
		fprintf(stderr, "bystander: %zu bytes sent, %zu received\n",
			by.pos, by.cl.got);
	client_close(&cl);
	client_close(&by.cl);
	if (fd2 >= 0)
		close(fd2);
	if (nl.nl)
		bs_net_listener_free(nl.nl);
	/* requests still in the device finish first (the set waits) */
	if (set)
		bs_exports_free(set);
	bs_ctx_free(ctx);
	return 0;
}
