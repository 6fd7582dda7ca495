/* SPDX-License-Identifier: MIT */
/*
 * The NFSv4.1 back channel and delegations through nfs_compound() on the
 * directory backend, each client's connection a fake nfs_xprt that keeps
 * the callback records the server sends, the test answering them with
 * nfs_cb_reply() as a client would. Back channel: a CB_COMPOUND is an
 * RPC CALL of the session's cb_program with its AUTH_SYS credential,
 * CB_SEQUENCE on slot 0 with the sequence moving on; one call at a time
 * (-EBUSY); the reply is matched by XID, also for a waiter on another
 * thread; an unanswered call or a closed connection is
 * SEQ4_STATUS_CB_PATH_DOWN(_SESSION) until BIND_CONN_TO_SESSION; a
 * session that never asked for one has no flag. Delegations: granted
 * when asked for, with a back channel, without conflicts (else NONE_EXT
 * and the reason); another client's conflicting OPEN / REMOVE gets DELAY
 * and the holder CB_RECALL until DELEGRETURN; not returned half a lease
 * later, revoked (DELEG_REVOKED, RECALLABLE_STATE_REVOKED, TEST_STATEID,
 * FREE_STATEID); dropped with DESTROY_CLIENTID; another client's GETATTR
 * waits for CB_GETATTR on a thread of its own while the server goes on;
 * tried on an I/O thread first, it stops at GETATTR with the callback
 * sent and a worker waits for it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

/* a client's connection: the last record sent on it */
struct fake {
	struct nfs_xprt x;
	uint8_t *rec;
	size_t len;
	unsigned sent;
};

struct cl {
	uint64_t clid;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint32_t seq;
	struct fake fx;
};

struct fix {
	struct nfs_th_fix th;
	struct cl a, b;
};

static uint8_t out[NFS_MAX_REPLY];

static int fake_send(struct nfs_xprt *x, uint8_t *rec, size_t len)
{
	struct fake *fx = (struct fake *)x;

	free(fx->rec);
	fx->rec = rec;
	fx->len = len;
	fx->sent++;
	return 0;
}

static int setup(void **state)
{
	struct fix *f = NFS_TH_FIX_NEW(struct fix, "/tmp");

	f->th.srv->delegations = true;
	*state = f;
	return 0;
}

static void fake_gone(struct fix *f, struct cl *c)
{
	if (c->fx.x.id) {
		nfs_xprt_del(f->th.srv, &c->fx.x);
		c->fx.x.id = 0;
	}
	free(c->fx.rec);
	c->fx.rec = NULL;
}

static int teardown(void **state)
{
	struct fix *f = *state;

	fake_gone(f, &f->a);
	fake_gone(f, &f->b);
	nfs_th_fix_free(f);
	return 0;
}

/* a COMPOUND of minor version 1 from @c's connection; the last status */
static uint32_t run(struct fix *f, struct cl *c, struct xdr_enc *e,
		    struct xdr_dec *d)
{
	return nfs_th_run_on(f->th.srv, 1, c->fx.x.id, e, d, out, sizeof(out));
}

static void head(struct xdr_enc *e, uint8_t *b, size_t cap, uint32_t nops)
{
	xdr_enc_init(e, b, cap);
	xdr_put_u32(e, 0);			/* tag */
	xdr_put_u32(e, 1);			/* minor */
	xdr_put_u32(e, nops);
}

/* SEQUENCE of @c and @nops ops the caller appends */
static void seq_head(struct cl *c, struct xdr_enc *e, uint8_t *b, size_t cap,
		     uint32_t nops)
{
	head(e, b, cap, 1 + nops);
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, c->sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(e, ++c->seq);
	xdr_put_u32(e, 0);			/* slot */
	xdr_put_u32(e, 0);
	xdr_put_bool(e, false);
}

/*
 * A client on connection @conn: EXCHANGE_ID, CREATE_SESSION with @flags
 * and AUTH_SYS callbacks as uid 17, RECLAIM_COMPLETE.
 */
static void client(struct fix *f, struct cl *c, const char *owner,
		   uint64_t conn, uint32_t flags)
{
	const struct nfs_th_chan fore = { 65536, 65536, 8192, 16, 4 };
	const struct nfs_th_chan back = { 8192, 8192, 0, 2, 1 };
	uint8_t b[512], verf[8] = { 1 };
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t seq;

	c->fx.x.id = conn;
	c->fx.x.send = fake_send;
	nfs_xprt_add(f->th.srv, &c->fx.x);
	head(&e, b, sizeof(b), 1);
	nfs_th_put_exchange_id(&e, verf, owner);
	assert_int_equal(run(f, c, &e, &d), NFS4_OK);
	c->clid = xdr_get_u64(&d);
	seq = xdr_get_u32(&d);
	head(&e, b, sizeof(b), 1);
	nfs_th_put_create_session_cb(&e, c->clid, seq, &fore, &back,
				     0x40000123, flags, 17);
	assert_int_equal(run(f, c, &e, &d), NFS4_OK);
	xdr_get_fixed(&d, c->sid, NFS4_SESSIONID_SIZE);
	c->seq = 0;
	seq_head(c, &e, b, sizeof(b), 1);
	xdr_put_u32(&e, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&e, false);
	assert_int_equal(run(f, c, &e, &d), NFS4_OK);
}

/* SEQUENCE alone: its sr_status_flags (its own reply buffer) */
static uint32_t seq_flags(struct fix *f, struct cl *c)
{
	static uint8_t sout[1024];
	uint8_t b[128];
	struct xdr_enc e;
	struct xdr_dec d;

	seq_head(c, &e, b, sizeof(b), 0);
	assert_int_equal(nfs_th_run_on(f->th.srv, 1, c->fx.x.id, &e, &d, sout,
				       sizeof(sout)), NFS4_OK);
	xdr_skip(&d, 32);
	return xdr_get_u32(&d);
}

static struct nfs_session *session_of(struct fix *f, struct cl *c)
{
	struct nfs_session *s;

	for (s = f->th.srv->sessions; s; s = s->next)
		if (!memcmp(s->id, c->sid, NFS4_SESSIONID_SIZE))
			return s;
	fail();
	return NULL;
}

/* the file of a's latest state (its delegation); srv->lock held */
static const struct nfs_fh *a_file(struct fix *f)
{
	return &session_of(f, &f->a)->clp->states->fh;
}

static void put_word(struct xdr_enc *e, const void *arg)
{
	xdr_put_u32(e, *(const uint32_t *)arg);
}

/* the CB_SEQUENCE of @c's last record checked; @d after it, at its op */
static uint32_t open_call(struct cl *c, struct xdr_dec *d, uint32_t *seqid)
{
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint32_t xid, l;

	assert_non_null(c->fx.rec);
	xdr_dec_init(d, c->fx.rec, c->fx.len);
	assert_int_equal(xdr_get_u32(d), RPC_LAST_FRAG | (c->fx.len - 4));
	xid = xdr_get_u32(d);
	assert_int_equal(xdr_get_u32(d), RPC_CALL);
	assert_int_equal(xdr_get_u32(d), RPC_VERSION);
	assert_int_equal(xdr_get_u32(d), 0x40000123);	/* cb_program */
	assert_int_equal(xdr_get_u32(d), NFS4_CB_VERSION);
	assert_int_equal(xdr_get_u32(d), NFS4_CB_PROC_COMPOUND);
	assert_int_equal(xdr_get_u32(d), RPC_AUTH_SYS);
	xdr_get_u32(d);				/* body length */
	assert_int_equal(xdr_get_u32(d), 13);	/* stamp */
	xdr_get_opaque_ref(d, &l, 255);
	assert_int_equal(l, 2);
	assert_int_equal(xdr_get_u32(d), 17);	/* uid */
	assert_int_equal(xdr_get_u32(d), 18);	/* gid */
	assert_int_equal(xdr_get_u32(d), 0);
	assert_int_equal(xdr_get_u32(d), RPC_AUTH_NONE);
	assert_int_equal(xdr_get_u32(d), 0);
	assert_int_equal(xdr_get_u32(d), 0);	/* tag */
	assert_int_equal(xdr_get_u32(d), 1);	/* minor */
	assert_int_equal(xdr_get_u32(d), 0);	/* callback_ident */
	assert_int_equal(xdr_get_u32(d), 2);
	assert_int_equal(xdr_get_u32(d), OP_CB_SEQUENCE);
	xdr_get_fixed(d, sid, sizeof(sid));
	assert_memory_equal(sid, c->sid, sizeof(sid));
	*seqid = xdr_get_u32(d);
	assert_int_equal(xdr_get_u32(d), 0);	/* slot */
	assert_int_equal(xdr_get_u32(d), 0);	/* highest */
	assert_int_equal(xdr_get_u32(d), 0);	/* cachethis */
	assert_int_equal(xdr_get_u32(d), 0);	/* referring calls */
	assert_int_equal(xdr_dec_err(d), 0);
	return xid;
}

/* answer @c's last callback: CB_SEQUENCE ok, then @op with @st, @body */
static void answer(struct fix *f, struct cl *c, uint32_t op, uint32_t st,
		   const void *body, size_t blen)
{
	uint8_t b[1024];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t xid, seqid;

	xid = open_call(c, &d, &seqid);
	xdr_enc_init(&e, b, sizeof(b));
	xdr_put_u32(&e, xid);
	xdr_put_u32(&e, RPC_REPLY);
	xdr_put_u32(&e, RPC_MSG_ACCEPTED);
	xdr_put_u32(&e, RPC_AUTH_NONE);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, RPC_SUCCESS);
	xdr_put_u32(&e, st);
	xdr_put_u32(&e, 0);			/* tag */
	xdr_put_u32(&e, 2);
	xdr_put_u32(&e, OP_CB_SEQUENCE);
	xdr_put_u32(&e, NFS4_OK);
	xdr_put_fixed(&e, c->sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(&e, seqid);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, op);
	xdr_put_u32(&e, st);
	if (blen)
		xdr_put_fixed(&e, body, blen);
	assert_int_equal(xdr_enc_err(&e), 0);
	nfs_cb_reply(f->th.srv, c->fx.x.id, b, xdr_enc_len(&e));
}

/* ---- the back channel ---------------------------------------------------- */

static void callback_round_trip(void **state)
{
	struct fix *f = *state;
	struct nfs_cb_call *call, *call2;
	struct nfs_session *s;
	struct xdr_dec d;
	uint32_t word = 0x1234, seqid, st;
	uint8_t body[4];

	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	assert_int_equal(seq_flags(f, &f->a), 0);
	s = session_of(f, &f->a);
	assert_true(nfs_cb_up(f->th.srv, s->cb));

	assert_int_equal(nfs_cb_start(f->th.srv, s->cb, OP_CB_RECALL, put_word,
				      &word, 5000, &call), 0);
	open_call(&f->a, &d, &seqid);
	assert_int_equal(seqid, 1);
	assert_int_equal(xdr_get_u32(&d), OP_CB_RECALL);
	assert_int_equal(xdr_get_u32(&d), 0x1234);
	assert_int_equal(xdr_dec_left(&d), 0);
	assert_int_equal(nfs_cb_poll(f->th.srv, call, &st), -EINPROGRESS);
	/* one back-channel slot: one call at a time */
	assert_int_equal(nfs_cb_start(f->th.srv, s->cb, OP_CB_RECALL, put_word,
				      &word, 5000, &call2), -EBUSY);

	xdr_set_be32(body, 77);
	answer(f, &f->a, OP_CB_RECALL, NFS4_OK, body, 4);
	assert_int_equal(nfs_cb_poll(f->th.srv, call, &st), 0);
	assert_int_equal(st, NFS4_OK);
	nfs_cb_result(call, &d);
	assert_int_equal(xdr_get_u32(&d), 77);
	nfs_cb_call_put(f->th.srv, call);

	/* the slot is free and its sequence moved on */
	assert_int_equal(nfs_cb_start(f->th.srv, s->cb, OP_CB_RECALL, put_word,
				      &word, 5000, &call), 0);
	open_call(&f->a, &d, &seqid);
	assert_int_equal(seqid, 2);
	answer(f, &f->a, OP_CB_RECALL, NFS4ERR_BADHANDLE, NULL, 0);
	assert_int_equal(nfs_cb_poll(f->th.srv, call, &st), 0);
	assert_int_equal(st, NFS4ERR_BADHANDLE);
	nfs_cb_call_put(f->th.srv, call);
	assert_int_equal(seq_flags(f, &f->a), 0);
}

static uint32_t bind_conn(struct fix *f, struct cl *c, uint32_t dir)
{
	uint8_t b[128];
	struct xdr_enc e;
	struct xdr_dec d;

	head(&e, b, sizeof(b), 1);
	xdr_put_u32(&e, OP_BIND_CONN_TO_SESSION);
	xdr_put_fixed(&e, c->sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(&e, dir);
	xdr_put_bool(&e, false);
	assert_int_equal(run(f, c, &e, &d), NFS4_OK);
	xdr_skip(&d, NFS4_SESSIONID_SIZE);
	return xdr_get_u32(&d);
}

static void path_down(void **state)
{
	struct fix *f = *state;
	const uint32_t down = SEQ4_STATUS_CB_PATH_DOWN |
			      SEQ4_STATUS_CB_PATH_DOWN_SESSION;
	struct nfs_cb_call *call;
	struct nfs_session *s;
	uint32_t word = 1, st;

	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	s = session_of(f, &f->a);
	/* unanswered within its time: the path is down */
	assert_int_equal(nfs_cb_start(f->th.srv, s->cb, OP_CB_RECALL, put_word,
				      &word, 0, &call), 0);
	usleep(2000);
	assert_int_equal(nfs_cb_wait(f->th.srv, call, &st), -ETIMEDOUT);
	assert_int_equal(seq_flags(f, &f->a), down);
	/* a late answer changes nothing */
	answer(f, &f->a, OP_CB_RECALL, NFS4_OK, NULL, 0);
	assert_int_equal(nfs_cb_poll(f->th.srv, call, &st), -ETIMEDOUT);
	nfs_cb_call_put(f->th.srv, call);
	/* binding a connection again brings it back, as both directions */
	assert_int_equal(bind_conn(f, &f->a, CDFC4_BACK_OR_BOTH), CDFS4_BOTH);
	assert_int_equal(seq_flags(f, &f->a), 0);
	assert_int_equal(bind_conn(f, &f->a, CDFC4_FORE), CDFS4_FORE);
	assert_int_equal(seq_flags(f, &f->a), 0);

	/* the connection closes under a call: it fails, the path is down */
	assert_int_equal(nfs_cb_start(f->th.srv, s->cb, OP_CB_RECALL, put_word,
				      &word, 5000, &call), 0);
	fake_gone(f, &f->a);
	assert_int_equal(nfs_cb_poll(f->th.srv, call, &st), -EPIPE);
	nfs_cb_call_put(f->th.srv, call);
	assert_int_equal(nfs_cb_start(f->th.srv, s->cb, OP_CB_RECALL, put_word,
				      &word, 5000, &call), -ENOTCONN);
	assert_false(nfs_cb_up(f->th.srv, s->cb));

	/* a session that never asked for a back channel: no flag */
	client(f, &f->b, "b", 12, 0);
	assert_int_equal(seq_flags(f, &f->b), 0);
	assert_false(nfs_cb_up(f->th.srv, session_of(f, &f->b)->cb));
}

struct waiter {
	struct fix *f;
	struct nfs_cb_call *call;
	int ret;
	uint32_t st;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	w->ret = nfs_cb_wait(w->f->th.srv, w->call, &w->st);
	return NULL;
}

/* a waiter on another thread wakes at the reply, long before its limit */
static void waiter_wakes(void **state)
{
	struct fix *f = *state;
	struct waiter w = { .f = f };
	struct nfs_session *s;
	uint32_t word = 1;
	uint64_t t0 = nfs_now_ms();
	pthread_t th;

	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	s = session_of(f, &f->a);
	assert_int_equal(nfs_cb_start(f->th.srv, s->cb, OP_CB_GETATTR, put_word,
				      &word, 20000, &w.call), 0);
	assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
	usleep(10000);
	answer(f, &f->a, OP_CB_GETATTR, NFS4_OK, NULL, 0);
	pthread_join(th, NULL);
	assert_int_equal(w.ret, 0);
	assert_int_equal(w.st, NFS4_OK);
	assert_true(nfs_now_ms() - t0 < 10000);
	nfs_cb_call_put(f->th.srv, w.call);
}

/* ---- delegations --------------------------------------------------------- */

struct deleg {
	uint32_t type;			/* OPEN_DELEGATE_* */
	uint32_t why;			/* OPEN_DELEGATE_NONE_EXT's */
	struct nfs_stateid sid, open;
};

/* OPEN (UNCHECKED4 create) of @name in the root by @c; its delegation */
static uint32_t open_file(struct fix *f, struct cl *c, const char *name,
			  uint32_t access, struct deleg *dl)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st, n;

	memset(dl, 0, sizeof(*dl));
	seq_head(c, &e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_OPEN);
	xdr_put_u32(&e, 0);			/* seqid */
	xdr_put_u32(&e, access);
	xdr_put_u32(&e, OPEN4_SHARE_DENY_NONE);
	xdr_put_u64(&e, c->clid);
	xdr_put_cstring(&e, "owner", 64);
	xdr_put_u32(&e, OPEN4_CREATE);
	xdr_put_u32(&e, UNCHECKED4);
	xdr_put_u32(&e, 0);			/* no attributes */
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, CLAIM_NULL);
	xdr_put_cstring(&e, name, 255);
	st = run(f, c, &e, &d);
	if (st)
		return st;
	dl->open.seqid = xdr_get_u32(&d);
	xdr_get_fixed(&d, dl->open.other, NFS4_OTHER_SIZE);
	xdr_skip(&d, 20 + 4);			/* change_info, rflags */
	n = xdr_get_u32(&d);
	xdr_skip(&d, (size_t)n * 4);
	dl->type = xdr_get_u32(&d);
	if (dl->type == OPEN_DELEGATE_READ ||
	    dl->type == OPEN_DELEGATE_WRITE) {
		dl->sid.seqid = xdr_get_u32(&d);
		xdr_get_fixed(&d, dl->sid.other, NFS4_OTHER_SIZE);
	} else if (dl->type == OPEN_DELEGATE_NONE_EXT) {
		dl->why = xdr_get_u32(&d);
	}
	assert_int_equal(xdr_dec_err(&d), 0);
	return NFS4_OK;
}

/* open_file() that must succeed: the delegation type it got */
static uint32_t granted(struct fix *f, struct cl *c, const char *name,
			uint32_t access, struct deleg *dl)
{
	assert_int_equal(open_file(f, c, name, access, dl), NFS4_OK);
	return dl->type;
}

static void put_sid(struct xdr_enc *e, const struct nfs_stateid *sid)
{
	xdr_put_u32(e, sid->seqid);
	xdr_put_fixed(e, sid->other, NFS4_OTHER_SIZE);
}

/* PUTROOTFH, LOOKUP @name, then @op with stateid @sid (and its rest) */
static uint32_t on_file(struct fix *f, struct cl *c, const char *name,
			uint32_t op, const struct nfs_stateid *sid)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	seq_head(c, &e, b, sizeof(b), 3);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_LOOKUP);
	xdr_put_cstring(&e, name, 255);
	xdr_put_u32(&e, op);
	if (op == OP_READ) {
		put_sid(&e, sid);
		xdr_put_u64(&e, 0);
		xdr_put_u32(&e, 10);
	} else if (op == OP_WRITE) {
		put_sid(&e, sid);
		xdr_put_u64(&e, 0);
		xdr_put_u32(&e, FILE_SYNC4);
		xdr_put_cstring(&e, "data", 64);
	} else {
		put_sid(&e, sid);
	}
	return run(f, c, &e, &d);
}

/* REMOVE of @name in the root by @c */
static uint32_t remove_file(struct fix *f, struct cl *c, const char *name)
{
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;

	seq_head(c, &e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_REMOVE);
	xdr_put_cstring(&e, name, 255);
	return run(f, c, &e, &d);
}

/* TEST_STATEID (the stateid's status) or FREE_STATEID of @sid */
static uint32_t sid_op(struct fix *f, struct cl *c, uint32_t op,
		       const struct nfs_stateid *sid)
{
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st;

	seq_head(c, &e, b, sizeof(b), 1);
	xdr_put_u32(&e, op);
	if (op == OP_TEST_STATEID)
		xdr_put_u32(&e, 1);
	put_sid(&e, sid);
	st = run(f, c, &e, &d);
	if (st || op != OP_TEST_STATEID)
		return st;
	assert_int_equal(xdr_get_u32(&d), 1);
	return xdr_get_u32(&d);
}

/* @c's last callback is CB_RECALL of @sid */
static void is_recall(struct cl *c, const struct nfs_stateid *sid)
{
	struct xdr_dec d;
	uint32_t seqid, l;

	open_call(c, &d, &seqid);
	assert_int_equal(xdr_get_u32(&d), OP_CB_RECALL);
	assert_int_equal(xdr_get_u32(&d), sid->seqid);
	assert_memory_equal(xdr_get_fixed_ref(&d, NFS4_OTHER_SIZE),
			    sid->other, NFS4_OTHER_SIZE);
	assert_int_equal(xdr_get_u32(&d), 0);	/* truncate */
	xdr_get_opaque_ref(&d, &l, NFS4_FHSIZE);
	assert_true(l > 0);
	assert_int_equal(xdr_dec_err(&d), 0);
}

static const uint32_t RD = OPEN4_SHARE_ACCESS_READ;
static const uint32_t WR = OPEN4_SHARE_ACCESS_BOTH;
static const uint32_t W_RD = OPEN4_SHARE_ACCESS_WANT_READ_DELEG;
static const uint32_t W_WR = OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG;
static const uint32_t W_ANY = OPEN4_SHARE_ACCESS_WANT_ANY_DELEG;
static const uint32_t W_NO = OPEN4_SHARE_ACCESS_WANT_NO_DELEG;

static void grant_recall_return(void **state)
{
	struct fix *f = *state;
	struct deleg a, b;
	unsigned sent;

	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	client(f, &f->b, "b", 12, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	/* no preference: none; a read delegation when asked */
	assert_int_equal(granted(f, &f->a, "f", RD, &a),
			 OPEN_DELEGATE_NONE);
	assert_int_equal(granted(f, &f->a, "f", RD | W_RD, &a),
			 OPEN_DELEGATE_READ);
	/* readers of another client do not conflict, nor reads */
	assert_int_equal(open_file(f, &f->b, "f", RD, &b), NFS4_OK);
	assert_int_equal(on_file(f, &f->b, "f", OP_READ, &b.open), NFS4_OK);
	assert_int_equal(f->a.fx.sent, 0);
	/* its own write open is no conflict either */
	assert_int_equal(open_file(f, &f->a, "f", WR, &b), NFS4_OK);
	assert_int_equal(f->a.fx.sent, 0);
	assert_int_equal(on_file(f, &f->a, "f", OP_WRITE, &a.sid),
			 NFS4ERR_OPENMODE);

	/* a writer of another client: CB_RECALL, DELAY until returned */
	assert_int_equal(open_file(f, &f->b, "f", WR, &b), NFS4ERR_DELAY);
	assert_int_equal(f->a.fx.sent, 1);
	is_recall(&f->a, &a.sid);
	answer(f, &f->a, OP_CB_RECALL, NFS4_OK, NULL, 0);
	sent = f->a.fx.sent;
	assert_int_equal(open_file(f, &f->b, "f", WR, &b), NFS4ERR_DELAY);
	assert_int_equal(remove_file(f, &f->b, "f"), NFS4ERR_DELAY);
	assert_int_equal(f->a.fx.sent, sent);	/* answered: not again */
	assert_int_equal(on_file(f, &f->a, "f", OP_DELEGRETURN, &a.sid),
			 NFS4_OK);
	assert_int_equal(sid_op(f, &f->a, OP_TEST_STATEID, &a.sid),
			 NFS4ERR_BAD_STATEID);
	assert_int_equal(open_file(f, &f->b, "f", WR, &b), NFS4_OK);

	/* a write delegation: reads of another client recall it too */
	assert_int_equal(granted(f, &f->a, "g", WR | W_WR, &a),
			 OPEN_DELEGATE_WRITE);
	assert_int_equal(on_file(f, &f->a, "g", OP_WRITE, &a.sid), NFS4_OK);
	assert_int_equal(open_file(f, &f->b, "g", RD, &b), NFS4ERR_DELAY);
	is_recall(&f->a, &a.sid);
	answer(f, &f->a, OP_CB_RECALL, NFS4_OK, NULL, 0);
	assert_int_equal(on_file(f, &f->a, "g", OP_DELEGRETURN, &a.sid),
			 NFS4_OK);
	assert_int_equal(open_file(f, &f->b, "g", RD, &b), NFS4_OK);
	/* while b has it open for reading: no write delegation to a */
	assert_int_equal(granted(f, &f->a, "g", WR | W_WR, &a),
			 OPEN_DELEGATE_NONE_EXT);
	assert_int_equal(a.why, WND4_CONTENTION);
}

static void no_grant(void **state)
{
	struct fix *f = *state;
	struct deleg a;

	/* no back channel: none, for want of resources */
	client(f, &f->a, "a", 11, 0);
	assert_int_equal(granted(f, &f->a, "f", RD | W_ANY, &a),
			 OPEN_DELEGATE_NONE_EXT);
	assert_int_equal(a.why, WND4_RESOURCE);
	/* delegations = 0 */
	client(f, &f->b, "b", 12, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	f->th.srv->delegations = false;
	assert_int_equal(granted(f, &f->b, "f", RD | W_ANY, &a),
			 OPEN_DELEGATE_NONE_EXT);
	f->th.srv->delegations = true;
	assert_int_equal(granted(f, &f->b, "f", RD | W_ANY, &a),
			 OPEN_DELEGATE_READ);
	assert_int_equal(granted(f, &f->b, "f", RD | W_NO, &a),
			 OPEN_DELEGATE_NONE_EXT);
	assert_int_equal(a.why, WND4_NOT_WANTED);
}

/* not returned within half a lease of the conflict: revoked */
static void revoke_after_lease(void **state)
{
	struct fix *f = *state;
	struct deleg a, b;

	f->th.srv->lease = 4;
	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	client(f, &f->b, "b", 12, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	assert_int_equal(granted(f, &f->a, "f", RD | W_RD, &a),
			 OPEN_DELEGATE_READ);
	assert_int_equal(open_file(f, &f->b, "f", WR, &b), NFS4ERR_DELAY);
	is_recall(&f->a, &a.sid);
	answer(f, &f->a, OP_CB_RECALL, NFS4_OK, NULL, 0);
	usleep(1000 * 1000);
	/* both renew; the holder keeps its delegation */
	assert_int_equal(seq_flags(f, &f->a), 0);
	assert_int_equal(open_file(f, &f->b, "f", WR, &b), NFS4ERR_DELAY);
	usleep(1100 * 1000);
	assert_int_equal(open_file(f, &f->b, "f", WR, &b), NFS4_OK);
	/* the holder learns it */
	assert_int_equal(on_file(f, &f->a, "f", OP_READ, &a.sid),
			 NFS4ERR_DELEG_REVOKED);
	assert_int_equal(seq_flags(f, &f->a),
			 SEQ4_STATUS_RECALLABLE_STATE_REVOKED);
	assert_int_equal(sid_op(f, &f->a, OP_TEST_STATEID, &a.sid),
			 NFS4ERR_DELEG_REVOKED);
	assert_int_equal(on_file(f, &f->a, "f", OP_DELEGRETURN, &a.sid),
			 NFS4ERR_DELEG_REVOKED);
	assert_int_equal(sid_op(f, &f->a, OP_FREE_STATEID, &a.sid), NFS4_OK);
	assert_int_equal(seq_flags(f, &f->a), 0);
	assert_int_equal(sid_op(f, &f->a, OP_TEST_STATEID, &a.sid),
			 NFS4ERR_BAD_STATEID);
	/* a live delegation is not freed */
	assert_int_equal(open_file(f, &f->a, "h",
				   RD | W_RD,
				   &a), NFS4_OK);
	assert_int_equal(sid_op(f, &f->a, OP_FREE_STATEID, &a.sid),
			 NFS4ERR_LOCKS_HELD);
}

/* DESTROY_CLIENTID lets go of the client's delegations */
static void released_with_client(void **state)
{
	struct fix *f = *state;
	uint8_t buf[256];
	struct xdr_enc e;
	struct xdr_dec d;
	struct deleg a, b;

	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	client(f, &f->b, "b", 12, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	assert_int_equal(granted(f, &f->a, "f", WR | W_WR, &a),
			 OPEN_DELEGATE_WRITE);
	head(&e, buf, sizeof(buf), 1);
	xdr_put_u32(&e, OP_DESTROY_SESSION);
	xdr_put_fixed(&e, f->a.sid, NFS4_SESSIONID_SIZE);
	assert_int_equal(run(f, &f->a, &e, &d), NFS4_OK);
	head(&e, buf, sizeof(buf), 1);
	xdr_put_u32(&e, OP_DESTROY_CLIENTID);
	xdr_put_u64(&e, f->a.clid);
	assert_int_equal(run(f, &f->a, &e, &d), NFS4_OK);
	assert_int_equal(open_file(f, &f->b, "f", WR, &b), NFS4_OK);
	assert_int_equal(f->a.fx.sent, 0);
}

struct getattr_job {
	struct fix *f;
	uint32_t st;
	uint64_t change, size;
};

/* b's GETATTR of change and size of "g" */
static void *getattr_thread(void *arg)
{
	struct getattr_job *j = arg;
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;

	seq_head(&j->f->b, &e, b, sizeof(b), 3);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_LOOKUP);
	xdr_put_cstring(&e, "g", 255);
	xdr_put_u32(&e, OP_GETATTR);
	xdr_put_u32(&e, 1);
	xdr_put_u32(&e, 1u << FATTR4_CHANGE | 1u << FATTR4_SIZE);
	j->st = run(j->f, &j->f->b, &e, &d);
	if (!j->st) {
		xdr_skip(&d, 12);		/* bitmap, length */
		j->change = xdr_get_u64(&d);
		j->size = xdr_get_u64(&d);
	}
	return NULL;
}

/* wait (bounded) until @c's connection carried @n callbacks */
static void await_sent(struct fix *f, struct cl *c, unsigned n)
{
	unsigned i, sent = 0;

	for (i = 0; i < 5000; i++) {
		pthread_mutex_lock(&f->th.srv->cb_lock);
		sent = c->fx.sent;
		pthread_mutex_unlock(&f->th.srv->cb_lock);
		if (sent >= n)
			return;
		usleep(1000);
	}
	fail_msg("%u callbacks sent, not %u", sent, n);
}

/* @c answers its CB_GETATTR: change @change, size @size */
static void answer_getattr(struct fix *f, struct cl *c, uint64_t change,
			   uint64_t size)
{
	uint8_t body[64];
	struct xdr_enc e;

	xdr_enc_init(&e, body, sizeof(body));
	xdr_put_u32(&e, 1);
	xdr_put_u32(&e, 1u << FATTR4_CHANGE | 1u << FATTR4_SIZE);
	xdr_put_u32(&e, 16);
	xdr_put_u64(&e, change);
	xdr_put_u64(&e, size);
	answer(f, c, OP_CB_GETATTR, NFS4_OK, body, xdr_enc_len(&e));
}

/*
 * another client's GETATTR of a write-delegated file: CB_GETATTR, its
 * answer shown (without the server's lock held meanwhile: a's own
 * COMPOUNDs go on); unanswered, the delegation is recalled
 */
static void cb_getattr(void **state)
{
	struct fix *f = *state;
	struct getattr_job j = { .f = f };
	struct nfs_attr at;
	struct deleg a;
	struct xdr_dec d;
	uint32_t seqid;
	pthread_t th;

	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	client(f, &f->b, "b", 12, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	assert_int_equal(granted(f, &f->a, "g", WR | W_WR, &a),
			 OPEN_DELEGATE_WRITE);
	pthread_mutex_lock(&f->th.srv->lock);
	assert_int_equal(f->th.srv->be.ops->getattr(&f->th.srv->be,
						 a_file(f), &at), 0);
	pthread_mutex_unlock(&f->th.srv->lock);

	assert_int_equal(pthread_create(&th, NULL, getattr_thread, &j), 0);
	await_sent(f, &f->a, 1);
	open_call(&f->a, &d, &seqid);
	assert_int_equal(xdr_get_u32(&d), OP_CB_GETATTR);
	/* b waits for it without the server's lock: a is served */
	assert_int_equal(seq_flags(f, &f->a), 0);
	/* the holder has written 5 bytes */
	answer_getattr(f, &f->a, at.change + 7, 5);
	pthread_join(th, NULL);
	assert_int_equal(j.st, NFS4_OK);
	assert_int_equal(j.size, 5);
	assert_int_equal(j.change, at.change + 1);

	/* no answer within its time: DELAY, and the delegation recalled */
	assert_int_equal(pthread_create(&th, NULL, getattr_thread, &j), 0);
	await_sent(f, &f->a, 2);
	pthread_join(th, NULL);
	assert_int_equal(j.st, NFS4ERR_DELAY);
	assert_int_equal(f->a.fx.sent, 3);
	is_recall(&f->a, &a.sid);
}

static void *resume_thread(void *arg)
{
	struct nfs_run *p = arg;

	assert_int_equal(nfs_compound_run(p, false), 0);
	return NULL;
}

/*
 * the same GETATTR tried on a connection's I/O thread first (nowait): it
 * stops at GETATTR with the CB_GETATTR sent, without waiting; the worker
 * waits for the answer and runs GETATTR again, which shows it
 */
static void cb_getattr_inline(void **state)
{
	struct fix *f = *state;
	static uint8_t res[4096];
	static struct nfs_run p;
	struct nfs_cred cred = { .flavor = RPC_AUTH_SYS };
	struct nfs_fh wire;
	struct nfs_attr at;
	struct deleg a;
	struct xdr_dec args, d;
	struct xdr_enc e, r;
	uint8_t b[256];
	uint32_t seqid, l;
	pthread_t th;

	client(f, &f->a, "a", 11, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	client(f, &f->b, "b", 12, CREATE_SESSION4_FLAG_CONN_BACK_CHAN);
	assert_int_equal(granted(f, &f->a, "g", WR | W_WR, &a),
			 OPEN_DELEGATE_WRITE);
	pthread_mutex_lock(&f->th.srv->lock);
	assert_int_equal(f->th.srv->be.ops->getattr(&f->th.srv->be,
						 a_file(f), &at), 0);
	nfs_fh_wrap(f->th.srv, a_file(f), &wire);
	pthread_mutex_unlock(&f->th.srv->lock);

	seq_head(&f->b, &e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_PUTFH);
	xdr_put_opaque(&e, wire.data, wire.len, NFS4_FHSIZE);
	xdr_put_u32(&e, OP_GETATTR);
	xdr_put_u32(&e, 1);
	xdr_put_u32(&e, 1u << FATTR4_CHANGE | 1u << FATTR4_SIZE);
	xdr_dec_init(&args, b, xdr_enc_len(&e));
	xdr_enc_init(&r, res, sizeof(res));
	assert_int_equal(nfs_compound_begin(&p, f->th.srv, &cred, f->b.fx.x.id,
					    &args, &r), 0);
	assert_int_equal(nfs_compound_run(&p, true), -EAGAIN);
	assert_int_equal(p.i, 2);
	assert_non_null(p.c.wait);
	await_sent(f, &f->a, 1);
	assert_int_equal(pthread_create(&th, NULL, resume_thread, &p), 0);
	open_call(&f->a, &d, &seqid);
	assert_int_equal(xdr_get_u32(&d), OP_CB_GETATTR);
	answer_getattr(f, &f->a, at.change + 7, 5);
	pthread_join(th, NULL);
	assert_null(p.c.wait);
	xdr_dec_init(&d, res, xdr_enc_len(&r));
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	xdr_get_opaque_ref(&d, &l, 64);
	assert_int_equal(xdr_get_u32(&d), 3);
	xdr_skip(&d, 8 + 36 + 8);		/* SEQUENCE, PUTFH */
	assert_int_equal(xdr_get_u32(&d), OP_GETATTR);
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	xdr_skip(&d, 12);			/* bitmap, length */
	assert_int_equal(xdr_get_u64(&d), at.change + 1);
	assert_int_equal(xdr_get_u64(&d), 5);
	assert_int_equal(f->a.fx.sent, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(callback_round_trip, setup,
						teardown),
		cmocka_unit_test_setup_teardown(path_down, setup, teardown),
		cmocka_unit_test_setup_teardown(waiter_wakes, setup, teardown),
		cmocka_unit_test_setup_teardown(grant_recall_return, setup,
						teardown),
		cmocka_unit_test_setup_teardown(no_grant, setup, teardown),
		cmocka_unit_test_setup_teardown(revoke_after_lease, setup,
						teardown),
		cmocka_unit_test_setup_teardown(released_with_client, setup,
						teardown),
		cmocka_unit_test_setup_teardown(cb_getattr, setup, teardown),
		cmocka_unit_test_setup_teardown(cb_getattr_inline, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
