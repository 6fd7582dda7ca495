/* SPDX-License-Identifier: MIT */
/*
 * An NFS connection's share of the server-wide in-flight budget, through
 * the session ops the network server drives (no socket): a call takes
 * its record's bytes and its reply's room at the record's header, before
 * any of its body is held; once the whole record is in, the room shrinks
 * to what its COMPOUND can need (room.c); once the reply is made only the
 * reply's bytes stay held, and they go back when it has been sent. With the budget
 * full the connection waits at the header (the header consumed, nothing
 * more, no input wanted) until bytes are given back; then it goes on. A
 * connection closed in the middle of a record, or with a reply unsent,
 * gives everything back, and a callback's reply from the client is given
 * back as soon as it has been matched. One closed while it waits at a
 * header (calls still on workers) passes its turn to the next waiter at
 * once. A connection whose calls wait in a slow backend is not closed as
 * stalled while another holder waits; one whose client reads no reply
 * is.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <blkstack/budget.h>
#include <blkstack/loop.h>
#include <blkstack/net.h>
#include <blkstack/workers.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

#define MiB (1ull << 20)

/* what conn.c takes for a reply before it is made */
#define ROOM (NFS_MAX_REPLY + 4u)
/* an RPC NULL call (AUTH_NONE) and its accepted reply, record marked */
#define CALL_LEN 40u
#define REPLY_LEN (4u + 24u)

struct fx {
	struct bs_ctx *ctx;
	struct bs_budget *b;
	struct nfs_server *srv;
	char dir[64];
	void *sess;
	struct bs_budget_holder other;	/* waits beside the connection */
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	th_ctx_setup((void **)&f->ctx);
	strcpy(f->dir, "/tmp/test_nfs_budget.XXXXXX");
	f->srv = nfs_th_tmp_server(f->dir);
	assert_non_null(f->srv);
	f->srv->ctx = f->ctx;
	f->b = bs_ctx_budget(f->ctx);
	assert_int_equal(bs_budget_configure(f->b, BS_BUDGET_MIN, 0), 0);
	assert_int_equal(nfs_net_proto.start(f->srv, NULL, &f->sess), 0);
	*state = f;
	return 0;
}

static void slow_release_all(struct fx *f);

static int teardown(void **state)
{
	struct fx *f = *state;

	slow_release_all(f);
	bs_budget_leave(f->b, &f->other);
	nfs_th_tmp_drop(f->srv, f->dir);
	th_ctx_teardown((void **)&f->ctx);
	free(f);
	return 0;
}

/* record mark + a NULL call (type RPC_CALL) or a stray REPLY */
static size_t record(uint8_t *p, uint32_t xid, uint32_t type)
{
	static const uint32_t rest[] = { RPC_VERSION, NFS4_PROGRAM,
					 NFS4_VERSION, NFS4_PROC_NULL,
					 0, 0, 0, 0 };
	unsigned i;

	xdr_set_be32(p, RPC_LAST_FRAG | CALL_LEN);
	xdr_set_be32(p + 4, xid);
	xdr_set_be32(p + 8, type);
	for (i = 0; i < 8; i++)
		xdr_set_be32(p + 12 + 4 * i, rest[i]);
	return 4 + CALL_LEN;
}

/* run the context's loop until the connection has output (bounded) */
static void until_reply(struct fx *f)
{
	int i;

	for (i = 0; i < 500 && !nfs_net_proto.out_bytes(f->sess); i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_int_equal(nfs_net_proto.out_bytes(f->sess), REPLY_LEN);
}

static void taken_at_the_header_given_back_when_sent(void **state)
{
	struct fx *f = *state;
	struct iovec iov[4];
	uint8_t rec[64];

	record(rec, 7, RPC_CALL);
	assert_int_equal(nfs_net_proto.input(f->sess, rec, 4), 4);
	/* the body is not here yet, its bytes and the reply's room are */
	assert_int_equal(bs_budget_used(f->b), CALL_LEN + ROOM);
	assert_int_equal(nfs_net_proto.input(f->sess, rec + 4, CALL_LEN),
			 CALL_LEN);
	until_reply(f);
	/* the reply is made: only its bytes stay */
	assert_int_equal(bs_budget_used(f->b), REPLY_LEN);
	assert_int_equal(nfs_net_proto.output(f->sess, iov, 4), 1);
	assert_int_equal(iov[0].iov_len, REPLY_LEN);
	assert_int_equal(xdr_be32((uint8_t *)iov[0].iov_base + 4), 7);
	nfs_net_proto.sent(f->sess, 10);
	assert_int_equal(bs_budget_used(f->b), REPLY_LEN);
	nfs_net_proto.sent(f->sess, REPLY_LEN - 10);
	assert_int_equal(bs_budget_used(f->b), 0);
	nfs_net_proto.close(f->sess, NULL);
	assert_int_equal(bs_budget_used(f->b), 0);
}

static void waits_at_the_header_while_the_budget_is_full(void **state)
{
	struct fx *f = *state;
	struct bs_budget_holder other;
	uint8_t rec[64], *dst;
	uint64_t held = BS_BUDGET_MIN - 512 * 1024;
	int i;

	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(f->b, &other, held));
	record(rec, 8, RPC_CALL);
	/* refused: the header is consumed, nothing more; no input wanted */
	assert_int_equal(nfs_net_proto.input(f->sess, rec, 4 + CALL_LEN), 4);
	assert_false(nfs_net_proto.wants_input(f->sess));
	assert_int_equal(nfs_net_proto.in_direct(f->sess, &dst), 0);
	assert_int_equal(bs_budget_used(f->b), held);
	assert_int_equal(bs_budget_waits(f->b), 1);
	/* bytes back: the budget's wake admits the record on the loop */
	bs_budget_give(f->b, &other, held);
	for (i = 0; i < 50 && !nfs_net_proto.wants_input(f->sess); i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_true(nfs_net_proto.wants_input(f->sess));
	assert_int_equal(bs_budget_used(f->b), CALL_LEN + ROOM);
	assert_int_equal(nfs_net_proto.input(f->sess, rec + 4, CALL_LEN),
			 CALL_LEN);
	until_reply(f);
	assert_int_equal(bs_budget_used(f->b), REPLY_LEN);
	/* closed with the reply unsent: all of it back */
	nfs_net_proto.close(f->sess, "test over");
	assert_int_equal(bs_budget_used(f->b), 0);
	bs_budget_leave(f->b, &other);
}

static void partial_records_and_callback_replies(void **state)
{
	struct fx *f = *state;
	uint8_t rec[64], hdr[4], body[4096] = { 0 };

	/* a callback's reply (not matched here): back as soon as it is in */
	record(rec, 9, RPC_REPLY);
	assert_int_equal(nfs_net_proto.input(f->sess, rec, 4 + CALL_LEN),
			 4 + CALL_LEN);
	assert_int_equal(bs_budget_used(f->b), 0);
	assert_int_equal(nfs_net_proto.out_bytes(f->sess), 0);
	/* a 64 KiB record of which 4 KiB came, then the connection closed */
	xdr_set_be32(hdr, RPC_LAST_FRAG | (64u << 10));
	assert_int_equal(nfs_net_proto.input(f->sess, hdr, 4), 4);
	assert_int_equal(nfs_net_proto.input(f->sess, body, sizeof(body)),
			 sizeof(body));
	assert_int_equal(bs_budget_used(f->b), (64u << 10) + ROOM);
	nfs_net_proto.close(f->sess, "test over");
	assert_int_equal(bs_budget_used(f->b), 0);
}

/* A worker job that holds its thread until the gate opens. */
struct gate_job {
	struct bs_job job;
	atomic_bool *gate;
	bool done;
};

static int gate_run(struct bs_job *j)
{
	struct gate_job *g = (struct gate_job *)j;
	int i;

	for (i = 0; i < 5000 && !atomic_load(g->gate); i++)
		usleep(1000);
	return 0;
}

static void gate_done(struct bs_job *j)
{
	((struct gate_job *)j)->done = true;
}

/* a 4.0 COMPOUND record (mark included) in @p: PUTROOTFH, GETFH and,
 * with @read, a READ of @read bytes of the root (it fails, small) */
static size_t compound_record(uint8_t *p, size_t cap, uint32_t read)
{
	static const uint8_t zero[NFS4_STATEID_SIZE];
	struct xdr_enc e;

	xdr_enc_init(&e, p + 4, cap - 4);
	xdr_put_u32(&e, 11);
	xdr_put_u32(&e, RPC_CALL);
	xdr_put_u32(&e, RPC_VERSION);
	xdr_put_u32(&e, NFS4_PROGRAM);
	xdr_put_u32(&e, NFS4_VERSION);
	xdr_put_u32(&e, NFS4_PROC_COMPOUND);
	xdr_put_u32(&e, RPC_AUTH_NONE);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, RPC_AUTH_NONE);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 0);		/* tag */
	xdr_put_u32(&e, 0);		/* minor version */
	xdr_put_u32(&e, read ? 3 : 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_GETFH);
	if (read) {
		xdr_put_u32(&e, OP_READ);
		xdr_put_fixed(&e, zero, sizeof(zero));
		xdr_put_u64(&e, 0);
		xdr_put_u32(&e, read);
	}
	assert_int_equal(xdr_enc_err(&e), 0);
	xdr_set_be32(p, RPC_LAST_FRAG | (uint32_t)xdr_enc_len(&e));
	return 4 + xdr_enc_len(&e);
}

/*
 * Once the whole record is in, a call waiting for a worker holds its
 * request and its own reply's room (room.c), not the largest reply's:
 * a handle lookup a few hundred bytes, a 1 MiB READ its MiB.
 */
static void the_room_shrinks_to_the_call_when_its_record_is_in(void **state)
{
	struct fx *f = *state;
	struct bs_workers *w = bs_ctx_workers(f->ctx);
	atomic_bool gate = false;
	struct gate_job g[2];
	uint8_t rec[256];
	size_t len, room;
	uint32_t read;
	int i, k;

	f->srv->inline_io = false;	/* every call to a worker */
	for (k = 0; k < 2; k++) {
		read = k ? NFS_MAX_IO : 0;
		atomic_store(&gate, false);
		memset(g, 0, sizeof(g));
		for (i = 0; i < 2; i++) {	/* the pool's two threads held */
			g[i].gate = &gate;
			g[i].job.run = gate_run;
			g[i].job.done = gate_done;
			bs_workers_submit(w, &g[i].job);
		}
		len = compound_record(rec, sizeof(rec), read);
		room = nfs_reply_room(rec + 4, len - 4) + 4;
		assert_true(k ? room > NFS_MAX_IO : room < 512);
		assert_true(room < ROOM);
		assert_int_equal(nfs_net_proto.input(f->sess, rec, len), len);
		/* queued behind the held threads: request and its room */
		assert_int_equal(bs_budget_used(f->b), len - 4 + room);
		atomic_store(&gate, true);
		for (i = 0; i < 500 && !nfs_net_proto.out_bytes(f->sess); i++)
			bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
		assert_true(nfs_net_proto.out_bytes(f->sess) > 0);
		/* the reply made: its bytes only */
		assert_int_equal(bs_budget_used(f->b),
				 nfs_net_proto.out_bytes(f->sess));
		nfs_net_proto.sent(f->sess, nfs_net_proto.out_bytes(f->sess));
		assert_int_equal(bs_budget_used(f->b), 0);
		for (i = 0; i < 500 && !(g[0].done && g[1].done); i++)
			bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	}
	nfs_net_proto.close(f->sess, NULL);
}

struct waiter {
	struct bs_budget_holder h;	/* first */
	int woken;
};

static void waiter_wake(struct bs_budget_holder *h)
{
	((struct waiter *)h)->woken++;
}

/*
 * A connection closed while it waits at a header, with a call still on a
 * worker (it is freed only when that call is done), was woken for its
 * turn just before: the turn goes to the next waiter at the close, not a
 * second later when the budget gives up on it, nor when the call ends.
 */
static void closed_while_waiting_passes_the_turn_on(void **state)
{
	struct fx *f = *state;
	struct bs_workers *w = bs_ctx_workers(f->ctx);
	struct bs_budget_holder other;
	struct waiter next;
	/* static: the workers still use them if an assertion fails */
	static atomic_bool gate;
	static struct gate_job g[2];
	uint8_t rec[64], rec2[64];
	uint64_t held;
	int i;

	f->srv->inline_io = false;	/* every call to a worker */
	atomic_store(&gate, false);
	memset(g, 0, sizeof(g));
	for (i = 0; i < 2; i++) {	/* the pool's two threads held */
		g[i].gate = &gate;
		g[i].job.run = gate_run;
		g[i].job.done = gate_done;
		bs_workers_submit(w, &g[i].job);
	}
	/* a call on a worker: the connection cannot be freed yet */
	record(rec, 8, RPC_CALL);
	assert_int_equal(nfs_net_proto.input(f->sess, rec, 4 + CALL_LEN),
			 4 + CALL_LEN);
	/* the budget full: the next call waits at its header */
	memset(&other, 0, sizeof(other));
	held = BS_BUDGET_MIN - bs_budget_used(f->b) - 512 * 1024;
	assert_true(bs_budget_take(f->b, &other, held));
	record(rec2, 9, RPC_CALL);
	assert_int_equal(nfs_net_proto.input(f->sess, rec2, 4 + CALL_LEN), 4);
	/* and behind it, someone who wants more */
	memset(&next, 0, sizeof(next));
	next.h.wake = waiter_wake;
	assert_false(bs_budget_take(f->b, &next.h, 8 * MiB));
	/* room for both: the connection's turn (the smaller) */
	bs_budget_give(f->b, &other, 16 * MiB);
	held -= 16 * MiB;
	/* closed before its wake ran */
	nfs_net_proto.close(f->sess, "test over");
	bs_loop_run_once(bs_ctx_loop(f->ctx), 0);
	assert_int_equal(next.woken, 1);
	assert_true(bs_budget_take(f->b, &next.h, 8 * MiB));
	/* the call done, the connection goes with all it held */
	atomic_store(&gate, true);
	for (i = 0; i < 500 && bs_budget_used(f->b) != held + 8 * MiB; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_int_equal(bs_budget_used(f->b), held + 8 * MiB);
	for (i = 0; i < 500 && !(g[0].done && g[1].done); i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	bs_budget_leave(f->b, &next.h);
	bs_budget_leave(f->b, &other);
	assert_int_equal(bs_budget_used(f->b), 0);
}

/* ---- a slow backend: its reads and writes wait for the test ------------- */

static const struct nfs_backend_ops *slow_orig;
static struct nfs_backend_ops slow_ops;
static atomic_bool slow_open;		/* calls go through */
static atomic_uint slow_in;		/* calls waiting now */

/* On a worker: wait until the test opens the gate (at most 5 s, so that
 * a failed test leaves no worker behind) */
static void slow_gate(void)
{
	int i;

	atomic_fetch_add(&slow_in, 1);
	for (i = 0; i < 5000 && !atomic_load(&slow_open); i++)
		usleep(1000);
	atomic_fetch_sub(&slow_in, 1);
}

static int slow_read(struct nfs_backend *b, const struct nfs_fh *fh,
		     uint64_t off, void *buf, size_t len, size_t *n,
		     bool *eof)
{
	slow_gate();
	return slow_orig->read(b, fh, off, buf, len, n, eof);
}

static int slow_write(struct nfs_backend *b, const struct nfs_fh *fh,
		      uint64_t off, const void *buf, size_t len, bool sync)
{
	slow_gate();
	return slow_orig->write(b, fh, off, buf, len, sync);
}

/* A test that failed with a call at the gate: let it go and end (its
 * done() runs on the loop) before the server goes. */
static void slow_release_all(struct fx *f)
{
	int i;

	atomic_store(&slow_open, true);
	for (i = 0; i < 500 && atomic_load(&slow_in); i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	for (i = 0; i < 50; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 1);
}

static char net_log[4096];

static void log_line(void *arg, const char *msg)
{
	size_t n = strlen(net_log);

	(void)arg;
	snprintf(net_log + n, sizeof(net_log) - n, "%s\n", msg);
}

/* The client sends all of @buf, the server's loop running meanwhile. */
static void client_send(struct bs_loop *loop, int fd, const uint8_t *buf,
			size_t len)
{
	size_t done = 0;
	int i;

	for (i = 0; i < 20000 && done < len; i++) {
		ssize_t n = send(fd, buf + done, len - done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		bs_loop_run_once(loop, 1);
	}
	assert_int_equal(done, len);
}

static void client_recv(struct bs_loop *loop, int fd, uint8_t *buf,
			size_t len)
{
	size_t got = 0;
	int i;

	for (i = 0; i < 20000 && got < len; i++) {
		ssize_t n = recv(fd, buf + got, len - got, MSG_DONTWAIT);

		if (n > 0) {
			got += (size_t)n;
			continue;
		}
		assert_true(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		bs_loop_run_once(loop, 1);
	}
	assert_int_equal(got, len);
}

/* The next reply record (one fragment): its body, @len bytes, malloc'd. */
static uint8_t *client_reply(struct bs_loop *loop, int fd, size_t *len)
{
	uint8_t mark[4], *body;

	client_recv(loop, fd, mark, 4);
	assert_true(xdr_be32(mark) & RPC_LAST_FRAG);
	*len = xdr_be32(mark) & ~RPC_LAST_FRAG;
	body = malloc(*len);
	assert_non_null(body);
	client_recv(loop, fd, body, *len);
	return body;
}

/* A 4.0 COMPOUND record (mark included) in @p: PUTROOTFH, LOOKUP "f",
 * and a FILE_SYNC WRITE of @len bytes of @data at @off (@data NULL: a
 * READ of @len bytes there), with the anonymous stateid */
static size_t io_record(uint8_t *p, size_t cap, uint64_t off, uint32_t len,
			const void *data)
{
	static const uint8_t anon[NFS4_STATEID_SIZE];
	struct xdr_enc e;

	nfs_th_compound(&e, p + 4, cap - 4, 0, 3);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_LOOKUP);
	xdr_put_cstring(&e, "f", NFS4_OPAQUE_LIMIT);
	xdr_put_u32(&e, data ? OP_WRITE : OP_READ);
	xdr_put_fixed(&e, anon, sizeof(anon));
	xdr_put_u64(&e, off);
	if (data) {
		xdr_put_u32(&e, FILE_SYNC4);
		xdr_put_opaque(&e, data, len, XDR_NOMAX);
	} else {
		xdr_put_u32(&e, len);
	}
	assert_int_equal(xdr_enc_err(&e), 0);
	xdr_set_be32(p, RPC_LAST_FRAG | (uint32_t)xdr_enc_len(&e));
	return 4 + xdr_enc_len(&e);
}

/* The COMPOUND status of a reply body (accepted, AUTH_NONE verifier) */
static uint32_t reply_status(const uint8_t *body, size_t len)
{
	assert_true(len >= 28);
	assert_int_equal(xdr_be32(body + 20), 0);	/* SUCCESS */
	return xdr_be32(body + 24);
}

/*
 * A slow backend is not a stalled client. With a stall timeout of 20 ms
 * and another holder waiting for the budget, a connection whose calls
 * wait in the backend on a worker (its device: here every read and
 * write of the directory waits for the test) keeps its bytes however
 * long that takes: a 512 KiB FILE_SYNC WRITE and a 512 KiB READ, each
 * held 100 ms in the backend, are answered on a connection still open.
 * Before, the connection was closed ("no progress for ...") a stall
 * timeout after the WRITE's record was in, though its client was the one
 * waiting. Once the backend is done the client's part counts again: a
 * 1 MiB READ whose reply the client never reads gets it closed.
 */
static void slow_backend_is_not_a_stall(void **state)
{
	struct fx *f = *state;
	struct bs_loop *loop = bs_ctx_loop(f->ctx);
	struct bs_net_listen_cfg cfg = { .proto = &nfs_net_proto };
	struct sockaddr_in sa = { .sin_family = AF_INET };
	const size_t half = 512 * 1024, cap = MiB + 4096;
	struct bs_net_listener *l;
	uint8_t *data = malloc(half), *zero = calloc(1, MiB);
	uint8_t *rec = malloc(cap), *body;
	char addr[64], path[96];
	int fd, rcv = 16 << 10, i;
	size_t len;

	assert_non_null(data);
	assert_non_null(zero);
	assert_non_null(rec);
	th_fill(data, half, 101);
	snprintf(path, sizeof(path), "%s/f", f->dir);
	th_write_file(path, zero, MiB);
	f->srv->inline_io = false;	/* every call to a worker */
	assert_int_equal(bs_budget_configure(f->b, BS_BUDGET_MIN, 20), 0);
	slow_orig = f->srv->be.ops;
	slow_ops = *slow_orig;
	slow_ops.read = slow_read;
	slow_ops.write = slow_write;
	f->srv->be.ops = &slow_ops;
	atomic_store(&slow_open, false);
	net_log[0] = 0;

	/* a listener on the context's loop; a client that reads 16 KiB at
	 * a time, the server sending 64 KiB at most ahead */
	bs_net_limits_default(&cfg.limits);
	cfg.limits.sndbuf = 64 << 10;
	cfg.owner = f->srv;
	cfg.log = log_line;
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
	for (i = 0; i < 500 && bs_net_listener_conns(l) < 1; i++)
		bs_loop_run_once(loop, 5);
	assert_int_equal(bs_net_listener_conns(l), 1);

	/* a 512 KiB WRITE: in the backend, its bytes held; then the other
	 * holder waits for the whole budget */
	len = io_record(rec, cap, 0, half, data);
	client_send(loop, fd, rec, len);
	for (i = 0; i < 500 && atomic_load(&slow_in) < 1; i++)
		bs_loop_run_once(loop, 5);
	assert_int_equal(atomic_load(&slow_in), 1);
	assert_false(bs_budget_take(f->b, &f->other, BS_BUDGET_MIN));
	th_run_for(loop, 100);
	assert_null(strstr(net_log, "no progress"));
	assert_int_equal(bs_net_listener_conns(l), 1);
	atomic_store(&slow_open, true);
	body = client_reply(loop, fd, &len);
	assert_int_equal(reply_status(body, len), NFS4_OK);
	free(body);

	/* a 512 KiB READ of it, as slowly */
	atomic_store(&slow_open, false);
	len = io_record(rec, cap, 0, half, NULL);
	client_send(loop, fd, rec, len);
	for (i = 0; i < 500 && atomic_load(&slow_in) < 1; i++)
		bs_loop_run_once(loop, 5);
	assert_int_equal(atomic_load(&slow_in), 1);
	th_run_for(loop, 100);
	assert_null(strstr(net_log, "no progress"));
	assert_int_equal(bs_net_listener_conns(l), 1);
	atomic_store(&slow_open, true);
	body = client_reply(loop, fd, &len);
	assert_int_equal(reply_status(body, len), NFS4_OK);
	assert_true(len > half + 4);
	assert_int_equal(xdr_be32(body + len - half - 4), half);
	assert_memory_equal(body + len - half, data, half);
	free(body);

	/* the backend done, a 1 MiB READ whose reply is never read: the
	 * connection is closed */
	len = io_record(rec, cap, 0, MiB, NULL);
	client_send(loop, fd, rec, len);
	for (i = 0; i < 500 && bs_net_listener_conns(l); i++)
		bs_loop_run_once(loop, 10);
	assert_int_equal(bs_net_listener_conns(l), 0);
	assert_non_null(strstr(net_log, "no progress for"));

	close(fd);
	bs_net_listener_free(l);
	f->srv->be.ops = slow_orig;
	bs_budget_leave(f->b, &f->other);
	nfs_net_proto.close(f->sess, NULL);
	assert_int_equal(bs_budget_used(f->b), 0);
	free(rec);
	free(zero);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			taken_at_the_header_given_back_when_sent, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			waits_at_the_header_while_the_budget_is_full, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			partial_records_and_callback_replies, setup, teardown),
		cmocka_unit_test_setup_teardown(
			the_room_shrinks_to_the_call_when_its_record_is_in,
			setup, teardown),
		cmocka_unit_test_setup_teardown(
			closed_while_waiting_passes_the_turn_on, setup,
			teardown),
		cmocka_unit_test_setup_teardown(slow_backend_is_not_a_stall,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
