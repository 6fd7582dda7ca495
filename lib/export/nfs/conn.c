/* SPDX-License-Identifier: MIT */
/*
 * NFS on a network connection: the session-operations table of the
 * network server. Input is cut into RPC records (record marking, rpc.c).
 * A record is first tried right here on the connection's loop (when the
 * export allows it: srv->inline_io): its COMPOUND runs if the server's
 * lock is free and as long as its ops cannot block (nfs_compound_run's
 * nowait), and its reply is queued at once. Otherwise, or from the op
 * that would block, it is one job on the context's worker pool, where
 * the COMPOUND runs (on) under the server's lock; the job's done() runs
 * back on the connection's loop and queues the reply. Replies go out in
 * completion order (RPC matches them by XID). A connection closed with
 * jobs in flight is freed by the last done().
 *
 * Each connection is also a way back to the client (an nfs_xprt): the
 * back channel (backchannel.c) hands callbacks to conn_send() from any
 * thread, which posts them to the connection's loop; RPC REPLY records
 * coming in are the answers to them and go to nfs_cb_reply(). Posted
 * callbacks hold a reference, so the connection outlives them.
 *
 * Memory: every call takes its bytes from the server-wide in-flight
 * budget (budget.h) before they are held. At each fragment header of a
 * record (rpc.c's admission) the fragment's length is taken, and with
 * the first also room for the largest reply (NFS_CONN_REPLY_ROOM): the
 * call may be a READ whose data sits in its reply until it is sent. When
 * the whole record is in, that room shrinks to what its COMPOUND can
 * need (room.c: a READ's count, a few bytes for most ops); once the reply
 * is made, to its size; the reply's bytes go back when it has been sent
 * (or the connection is gone). A
 * fragment refused at its header stops the connection's input there
 * until the budget's wake (on this loop) admits it; a connection that
 * holds bytes and moves none while others wait is closed by the
 * budget's watchdog, but not while a call of it is on a worker (in the
 * backend's device, bs_budget_dev_begin()): that time is the server's;
 * its other bytes (replies not read) are the client's meanwhile.
 * Callbacks the server sends are not counted (a few hundred bytes
 * each).
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/budget.h>
#include <blkstack/loop.h>
#include <blkstack/workers.h>

#include "export/nfs/nfs.h"

#define NFS_CONN_INFLIGHT 16
/* fragment bytes still to come from which they are received in place */
#define NFS_CONN_DIRECT_MIN (16u << 10)
/* after such a payload, read one call's header at most into the input
 * buffer (RPC header, credential, SEQUENCE, PUTFH, WRITE arguments) so
 * that the next WRITE's data goes in place too */
#define NFS_CONN_DIRECT_HDR 1024u
/* budget held for a call's reply from its first fragment on: the largest
 * reply and its record mark */
#define NFS_CONN_REPLY_ROOM (NFS_MAX_REPLY + 4u)

struct nfs_out {
	uint8_t *buf;
	size_t len, off;
	size_t acct;		/* of the budget, given back when freed */
	struct nfs_out *next;
};

struct nfs_conn {
	struct bs_net_conn *nc;
	struct nfs_server *srv;
	struct nfs_xprt xprt;
	struct bs_loop *loop;
	unsigned refs;		/* the connection's + one per posted callback */
	struct nfs_rm rm;
	unsigned inflight;
	bool closed, eof, stopping;
	struct nfs_out *head, *tail;
	size_t out_bytes;
	uint8_t *spare;		/* a reply buffer for inline calls */
	struct bs_budget *budget;	/* server-wide payload budget */
	struct bs_budget_holder bh;
	uint64_t rec_acct;	/* taken for the record in rm */
};

#define CONN_OF(h) ((struct nfs_conn *)((char *)(h) - \
				       offsetof(struct nfs_conn, bh)))

struct nfs_job {
	struct bs_job job;
	struct nfs_conn *c;
	uint64_t conn_id;
	uint8_t *req;
	size_t len;
	uint8_t *reply;
	size_t reply_len;
	bool started;		/* the call began on the connection's loop */
	uint64_t acct;		/* budget taken for the call and its reply */
	struct nfs_call call;
};

/* The network connection's side; none when a test drives the session
 * ops by hand (c->nc NULL). */
static void conn_kick(struct nfs_conn *c)
{
	if (c->nc)
		bs_net_conn_kick(c->nc);
}

static void conn_close(struct nfs_conn *c, const char *why)
{
	if (c->nc)
		bs_net_conn_close(c->nc, why);
}

static void budget_give(struct nfs_conn *c, uint64_t n)
{
	if (n && c->budget)
		bs_budget_give(c->budget, &c->bh, n);
}

/* on the connection's loop, like every budget call of the connection */
static void conn_free(struct nfs_conn *c)
{
	struct nfs_out *o, *n;

	if (__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL))
		return;
	for (o = c->head; o; o = n) {
		n = o->next;
		free(o->buf);
		free(o);
	}
	/* gives back what the queue and a partial record held */
	if (c->budget)
		bs_budget_leave(c->budget, &c->bh);
	nfs_rm_free(&c->rm);
	free(c->spare);
	nfs_server_put(c->srv);
	free(c);
}

/* @acct bytes of the budget go with @buf until it is freed */
static void queue_out(struct nfs_conn *c, uint8_t *buf, size_t len,
		      size_t acct)
{
	struct nfs_out *o = malloc(sizeof(*o));

	if (!o) {
		free(buf);
		budget_give(c, acct);
		return;
	}
	o->buf = buf;
	o->len = len;
	o->off = 0;
	o->acct = acct;
	o->next = NULL;
	if (c->tail)
		c->tail->next = o;
	else
		c->head = o;
	c->tail = o;
	c->out_bytes += len;
}

struct cb_send {
	struct nfs_conn *c;
	uint8_t *rec;
	size_t len;
};

/* on the connection's loop: a callback goes out */
static void cb_send_run(void *arg)
{
	struct cb_send *cs = arg;
	struct nfs_conn *c = cs->c;

	if (!c->closed) {
		queue_out(c, cs->rec, cs->len, 0);
		conn_kick(c);
	} else {
		free(cs->rec);
	}
	free(cs);
	conn_free(c);
}

/* any thread, srv->cb_lock held: the connection is registered (alive) */
static int conn_send(struct nfs_xprt *x, uint8_t *rec, size_t len)
{
	struct nfs_conn *c = (struct nfs_conn *)((char *)x -
		offsetof(struct nfs_conn, xprt));
	struct cb_send *cs = malloc(sizeof(*cs));

	if (!cs) {
		free(rec);
		return -ENOMEM;
	}
	cs->c = c;
	cs->rec = rec;
	cs->len = len;
	__atomic_add_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
	if (bs_loop_post(c->loop, cb_send_run, cs)) {
		/* the connection's own reference remains: never the last */
		__atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL);
		free(rec);
		free(cs);
		return -ENOMEM;
	}
	return 0;
}

/* ---- the in-flight budget ------------------------------------------------ */

/* rpc.c's admission: a fragment of @len bytes (and, for a record's first,
 * its reply's room) is held only once taken */
static bool rm_admit(void *arg, uint32_t len)
{
	struct nfs_conn *c = arg;
	uint64_t n = len + (c->rec_acct ? 0 : NFS_CONN_REPLY_ROOM);

	if (c->budget && !bs_budget_take(c->budget, &c->bh, n))
		return false;	/* queued: budget_wake() comes */
	c->rec_acct += n;
	return true;
}

/*
 * The whole record is here: of the room for the largest reply taken at
 * its first fragment, keep what its COMPOUND can need (room.c) and give
 * back the rest, so that a call waiting for a worker or running holds
 * its request and its own reply's room, not a 1 MiB READ's.
 */
static void trim_room(struct nfs_conn *c)
{
	uint64_t room, need;

	if (c->rec_acct < c->rm.len)
		return;
	room = c->rec_acct - c->rm.len;
	need = (uint64_t)nfs_reply_room(c->rm.buf, c->rm.len) + 4;
	if (need < room) {
		budget_give(c, room - need);
		c->rec_acct -= room - need;
	}
}

/*
 * A call's reply of @len bytes is made: of the call's @acct it keeps that
 * much (the reply holds @len from now on), the rest goes back now. A
 * reply longer than its room (one from the reply cache, answering a
 * retry whose ops differ) takes the difference at once, above the limit
 * if need be: the reply is already made, and what it holds stays counted.
 */
static void reply_acct(struct nfs_conn *c, uint64_t acct, size_t len)
{
	if (len <= acct)
		budget_give(c, acct - len);
	else if (c->budget)
		bs_budget_take_over(c->budget, &c->bh, len - acct);
}

static bool record_ready(struct nfs_conn *c);

/* on the connection's loop: bytes were given back, try the held header */
static void budget_wake(struct bs_budget_holder *h)
{
	struct nfs_conn *c = CONN_OF(h);

	if (c->closed || !c->rm.held)
		return;
	if (nfs_rm_retry(&c->rm) < 0) {
		conn_close(c, "out of memory");
		return;
	}
	if (c->rm.held)
		return;
	/* an empty last fragment completes its record at once */
	if (c->rm.ready && !record_ready(c))
		return;
	conn_kick(c);
}

/* on the connection's loop: it held bytes others wait for, and moved
 * none for the stall timeout; closing frees them */
static void budget_evict(struct bs_budget_holder *h, const char *why)
{
	struct nfs_conn *c = CONN_OF(h);

	if (!c->closed)
		conn_close(c, why);
}

/* ---- the session operations ---------------------------------------------- */

static int c_start(void *owner, struct bs_net_conn *nc, void **sess)
{
	struct nfs_server *srv = owner;
	struct nfs_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->nc = nc;
	c->srv = srv;
	c->refs = 1;
	c->loop = bs_loop_current();
	nfs_server_get(srv);
	c->xprt.id = nc ? bs_net_conn_id(nc) : 0;
	c->xprt.send = conn_send;
	if (c->loop)
		nfs_xprt_add(srv, &c->xprt);
	nfs_rm_init(&c->rm, NFS_MAX_RECORD);
	c->budget = srv->ctx ? bs_ctx_budget(srv->ctx) : NULL;
	c->bh.wake = budget_wake;
	c->bh.evict = budget_evict;
	c->rm.admit = rm_admit;
	c->rm.admit_arg = c;
	/* no handshake in NFS: the first byte may be a COMPOUND */
	if (nc)
		bs_net_conn_handshake_done(nc);
	*sess = c;
	return 0;
}

static int job_run(struct bs_job *j)
{
	struct nfs_job *job = (struct nfs_job *)j;
	size_t n = 0;
	int err = 0;

	if (!job->started) {
		job->reply = malloc(NFS_MAX_REPLY + 4);
		if (!job->reply)
			return -ENOMEM;
		err = nfs_call_start(&job->call, job->c->srv, job->conn_id,
				     job->req, job->len, job->reply + 4,
				     NFS_MAX_REPLY);
	}
	if (!err)
		err = nfs_call_run(&job->call, false, &n);
	if (err || !n)
		return err ? err : -EBADMSG;
	xdr_set_be32(job->reply, RPC_LAST_FRAG | (uint32_t)n);
	job->reply_len = n + 4;
	return 0;
}

static void job_done(struct bs_job *j)
{
	struct nfs_job *job = (struct nfs_job *)j;
	struct nfs_conn *c = job->c;

	/* back from the backend (before c may be freed): progress only
	 * for a connection that had all its bytes on workers (budget.h) */
	if (c->budget)
		bs_budget_dev_end(&c->bh, job->acct);
	c->inflight--;
	if (c->closed) {
		budget_give(c, job->acct);
		if (!c->inflight)
			conn_free(c);
	} else if (job->job.result == 0) {
		reply_acct(c, job->acct, job->reply_len);
		queue_out(c, job->reply, job->reply_len, job->reply_len);
		job->reply = NULL;
		conn_kick(c);
	} else {
		/* not a call, or no memory: nothing to answer */
		budget_give(c, job->acct);
		conn_kick(c);
	}
	free(job->reply);
	free(job->req);
	free(job);
}

/*
 * The record in c->rm, run here on the connection's loop as far as it
 * goes without blocking: true when it is done (its reply queued, or
 * nothing to answer); false when @job must go on on a worker (it then
 * holds the reply buffer, and the call stopped at an op, or never began
 * because the server's lock was taken).
 */
static bool run_inline(struct nfs_conn *c, struct nfs_job *job)
{
	struct nfs_server *srv = c->srv;
	uint8_t *out;
	size_t n = 0;
	int err;

	if (!c->spare && !(c->spare = malloc(NFS_MAX_REPLY + 4)))
		return false;
	err = nfs_call_start(&job->call, srv, job->conn_id, c->rm.buf,
			     c->rm.len, c->spare + 4, NFS_MAX_REPLY);
	if (!err)
		err = nfs_call_run(&job->call, true, &n);
	if (err == -EAGAIN) {
		job->started = true;
		job->reply = c->spare;
		c->spare = NULL;
		return false;
	}
	__atomic_add_fetch(&srv->calls_inline, 1, __ATOMIC_RELAXED);
	/* the reply in a buffer of its size; the big one stays for the next */
	if (!err && n && (out = malloc(n + 4))) {
		xdr_set_be32(out, RPC_LAST_FRAG | (uint32_t)n);
		memcpy(out + 4, c->spare + 4, n);
		reply_acct(c, c->rec_acct, n + 4);
		queue_out(c, out, n + 4, n + 4);
	} else {
		budget_give(c, c->rec_acct);
	}
	c->rec_acct = 0;
	conn_kick(c);
	nfs_rm_next(&c->rm);
	return true;
}

static int submit(struct nfs_conn *c)
{
	struct bs_workers *w = bs_ctx_workers(c->srv->ctx);
	struct nfs_job *job;

	if (!w)
		return -ENOMEM;
	job = calloc(1, sizeof(*job));
	if (!job)
		return -ENOMEM;
	job->c = c;
	job->conn_id = c->xprt.id;
	if (c->srv->inline_io && c->loop && run_inline(c, job)) {
		free(job);
		return 0;
	}
	__atomic_add_fetch(&c->srv->calls_worker, 1, __ATOMIC_RELAXED);
	job->req = c->rm.buf;
	job->len = c->rm.len;
	job->acct = c->rec_acct;
	c->rec_acct = 0;
	c->rm.buf = NULL;
	c->rm.cap = 0;
	nfs_rm_next(&c->rm);
	job->job.run = job_run;
	job->job.done = job_done;
	c->inflight++;
	/*
	 * Until job_done(), on this loop, the call is the server's: waiting
	 * for a worker or the server's lock, in the backend's device calls
	 * (a slow disk under the directory, the ext4 backend's device), or
	 * for another client's answer to a callback (bounded by its
	 * deadline). The budget's watchdog does not count this call's
	 * bytes (its record) against the client meanwhile.
	 */
	if (c->budget)
		bs_budget_dev_begin(&c->bh, job->acct);
	bs_workers_submit(w, &job->job);
	return 0;
}

static bool c_wants_input(void *sess)
{
	struct nfs_conn *c = sess;

	/* replies made inline pile up within one input: bounded here too;
	 * a fragment held at its header waits for the budget's wake */
	return !c->closed && !c->stopping && !c->rm.held &&
	       c->inflight < NFS_CONN_INFLIGHT &&
	       c->out_bytes <= BS_NET_OUT_MAX;
}

/* A whole record came: a callback's reply, or a call for a worker.
 * false when the connection was closed. */
static bool record_ready(struct nfs_conn *c)
{
	if (c->rm.len >= 8 && xdr_be32(c->rm.buf + 4) == RPC_REPLY) {
		/* the answer to a callback */
		nfs_cb_reply(c->srv, c->xprt.id, c->rm.buf, c->rm.len);
		budget_give(c, c->rec_acct);
		c->rec_acct = 0;
		nfs_rm_next(&c->rm);
		return true;
	}
	trim_room(c);
	if (submit(c)) {
		conn_close(c, "out of memory");
		return false;
	}
	return true;
}

static size_t c_input(void *sess, const uint8_t *buf, size_t len)
{
	struct nfs_conn *c = sess;
	size_t used = 0;

	while (used < len && c_wants_input(c)) {
		long k = nfs_rm_feed(&c->rm, buf + used, len - used);

		if (k < 0) {
			conn_close(c, k == -EMSGSIZE ?
					  "RPC record over the size limit" :
					  "out of memory");
			return len;
		}
		used += (size_t)k;
		if (c->rm.ready && !record_ready(c))
			return len;
	}
	if (used)
		bs_budget_progress(&c->bh);
	return used;
}

/*
 * The body of a big fragment (a WRITE's data) is received straight into
 * the record's buffer: one copy less, and one recv() for up to the whole
 * fragment instead of one per 64 KiB of input buffer.
 */
static size_t c_in_direct(void *sess, uint8_t **dst)
{
	struct nfs_conn *c = sess;

	if (!c_wants_input(c))
		return 0;
	return nfs_rm_direct(&c->rm, dst);
}

static void c_in_direct_done(void *sess, size_t n)
{
	struct nfs_conn *c = sess;

	nfs_rm_direct_done(&c->rm, n);
	bs_budget_progress(&c->bh);
	if (c->rm.ready)
		record_ready(c);
}

static int c_output(void *sess, struct iovec *iov, int max)
{
	struct nfs_conn *c = sess;
	struct nfs_out *o;
	int n = 0;

	for (o = c->head; o && n < max; o = o->next, n++) {
		iov[n].iov_base = o->buf + o->off;
		iov[n].iov_len = o->len - o->off;
	}
	return n;
}

static size_t c_out_bytes(void *sess)
{
	return ((struct nfs_conn *)sess)->out_bytes;
}

static void c_sent(void *sess, size_t n)
{
	struct nfs_conn *c = sess;

	c->out_bytes -= n;
	bs_budget_progress(&c->bh);
	while (n && c->head) {
		struct nfs_out *o = c->head;
		size_t k = o->len - o->off;

		if (n < k) {
			o->off += n;
			return;
		}
		n -= k;
		c->head = o->next;
		if (!c->head)
			c->tail = NULL;
		budget_give(c, o->acct);
		free(o->buf);
		free(o);
	}
}

static void c_eof(void *sess)
{
	((struct nfs_conn *)sess)->eof = true;
}

static void c_shutdown(void *sess)
{
	((struct nfs_conn *)sess)->stopping = true;
}

static bool c_finished(void *sess)
{
	struct nfs_conn *c = sess;

	return (c->eof || c->stopping) && !c->inflight;
}

static bool c_busy(void *sess)
{
	return ((struct nfs_conn *)sess)->inflight > 0;
}

static void c_close(void *sess, const char *why)
{
	struct nfs_conn *c = sess;

	if (why && c->nc)
		bs_net_conn_log(c->nc, "closed: %s", why);
	if (c->loop)
		nfs_xprt_del(c->srv, &c->xprt);
	c->closed = true;
	/* a header held for the budget waits no more: its turn goes on now,
	 * not when the last call on a worker is done */
	if (c->budget)
		bs_budget_cancel(c->budget, &c->bh);
	if (!c->inflight)
		conn_free(c);
}

const struct bs_net_proto nfs_net_proto = {
	.name = "nfs",
	.inbuf = 64 * 1024,
	.direct_min = NFS_CONN_DIRECT_MIN,
	.direct_hdr = NFS_CONN_DIRECT_HDR,
	.start = c_start,
	.input = c_input,
	.wants_input = c_wants_input,
	.in_direct = c_in_direct,
	.in_direct_done = c_in_direct_done,
	.output = c_output,
	.out_bytes = c_out_bytes,
	.sent = c_sent,
	.eof = c_eof,
	.shutdown = c_shutdown,
	.finished = c_finished,
	.busy = c_busy,
	.close = c_close,
};
