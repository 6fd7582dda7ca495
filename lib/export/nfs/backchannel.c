/* SPDX-License-Identifier: MIT */
/*
 * The NFSv4.1 back channel (RFC 8881 2.10.3.1, 2.10.6.3, 18.33, 18.36,
 * 20.9): callbacks go out as RPC CALLs of the session's cb_program,
 * version 1, procedure CB_COMPOUND, on a connection the client bound for
 * them (CREATE_SESSION with CONN_BACK_CHAN, BIND_CONN_TO_SESSION), with
 * the credential it gave (AUTH_NONE or AUTH_SYS). Every CB_COMPOUND is
 * CB_SEQUENCE on slot 0, this server's one back-channel slot (it offers
 * ca_maxrequests 1), plus one op. Replies come back on that connection
 * as RPC REPLY records; conn.c hands them here and they are matched by
 * XID. A call is awaited a bounded time; an unanswered one leaves the
 * channel "down" (SEQ4_STATUS_CB_PATH_DOWN*) until a reply or a new bind.
 *
 * Locking: srv->cb_lock guards the connections, the channels' binding
 * and slot, and the calls; it is taken with or without srv->lock held,
 * and nothing here takes srv->lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export/nfs/nfs.h"

#define CB_RECORD_MAX (4096 + NFS4_FHSIZE)

struct nfs_cb_call {
	unsigned refs;		/* the caller's + the pending list's */
	struct nfs_cb_chan *chan;
	uint64_t conn_id;
	uint32_t xid, seqid;
	int state;		/* -EINPROGRESS, 0, -ETIMEDOUT, -EPIPE, ... */
	uint32_t status;
	uint8_t *reply;		/* the whole reply record */
	size_t len, body;	/* the op's result body at reply + body */
	uint64_t deadline;	/* nfs_now_ms() */
	bool listed;
	struct nfs_cb_call *next;
};

uint64_t nfs_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void nfs_cb_init(struct nfs_server *srv)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&srv->cb_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&srv->cb_cond, &ca);
	pthread_condattr_destroy(&ca);
}

static void unlist(struct nfs_server *srv, struct nfs_cb_call *call);

/* after the clients: calls still awaited are forgotten */
void nfs_cb_fini(struct nfs_server *srv)
{
	while (srv->calls)
		unlist(srv, srv->calls);
	pthread_cond_destroy(&srv->cb_cond);
	pthread_mutex_destroy(&srv->cb_lock);
}

/* ---- connections and channels -------------------------------------------- */

static struct nfs_xprt *xprt_find(struct nfs_server *srv, uint64_t id)
{
	struct nfs_xprt *x;

	for (x = srv->xprts; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

void nfs_xprt_add(struct nfs_server *srv, struct nfs_xprt *x)
{
	pthread_mutex_lock(&srv->cb_lock);
	x->next = srv->xprts;
	srv->xprts = x;
	pthread_mutex_unlock(&srv->cb_lock);
}

/* end @call with @state (cb_lock held) */
static void finish(struct nfs_server *srv, struct nfs_cb_call *call,
		   int state)
{
	call->state = state;
	if (call->chan->inflight == call)
		call->chan->inflight = NULL;
	if (state == -ETIMEDOUT || state == -EPIPE)
		call->chan->fault = true;
	unlist(srv, call);
	pthread_cond_broadcast(&srv->cb_cond);
}

void nfs_xprt_del(struct nfs_server *srv, struct nfs_xprt *x)
{
	struct nfs_xprt **pp;
	struct nfs_cb_call *call, *next;

	pthread_mutex_lock(&srv->cb_lock);
	for (pp = &srv->xprts; *pp; pp = &(*pp)->next)
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	for (call = srv->calls; call; call = next) {
		next = call->next;
		if (call->conn_id == x->id)
			finish(srv, call, -EPIPE);
	}
	pthread_mutex_unlock(&srv->cb_lock);
}

struct nfs_cb_chan *nfs_cb_chan_new(struct nfs_server *srv,
				    const uint8_t *sessid, uint32_t minor)
{
	struct nfs_cb_chan *ch = calloc(1, sizeof(*ch));

	(void)srv;
	if (!ch)
		return NULL;
	ch->refs = 1;
	memcpy(ch->sessid, sessid, NFS4_SESSIONID_SIZE);
	ch->minor = minor;
	ch->prog = NFS4_CB_PROGRAM;
	ch->sec.flavor = RPC_AUTH_NONE;
	return ch;
}

/* cb_lock held */
static void chan_unref(struct nfs_cb_chan *ch)
{
	if (!--ch->refs)
		free(ch);
}

void nfs_cb_chan_put(struct nfs_server *srv, struct nfs_cb_chan *ch)
{
	if (!ch)
		return;
	pthread_mutex_lock(&srv->cb_lock);
	chan_unref(ch);
	pthread_mutex_unlock(&srv->cb_lock);
}

void nfs_cb_bind(struct nfs_server *srv, struct nfs_cb_chan *ch,
		 uint64_t conn_id)
{
	pthread_mutex_lock(&srv->cb_lock);
	ch->conn_id = conn_id;
	ch->fault = false;
	pthread_mutex_unlock(&srv->cb_lock);
}

void nfs_cb_set_sec(struct nfs_server *srv, struct nfs_cb_chan *ch,
		    uint32_t prog, const struct nfs_cb_sec *sec)
{
	pthread_mutex_lock(&srv->cb_lock);
	ch->prog = prog;
	ch->sec = *sec;
	pthread_mutex_unlock(&srv->cb_lock);
}

static bool up_locked(struct nfs_server *srv, struct nfs_cb_chan *ch)
{
	return ch->conn_id && !ch->fault && xprt_find(srv, ch->conn_id);
}

bool nfs_cb_up(struct nfs_server *srv, struct nfs_cb_chan *ch)
{
	bool up;

	pthread_mutex_lock(&srv->cb_lock);
	up = up_locked(srv, ch);
	pthread_mutex_unlock(&srv->cb_lock);
	return up;
}

bool nfs_cb_down(struct nfs_server *srv, struct nfs_cb_chan *ch)
{
	bool down;

	pthread_mutex_lock(&srv->cb_lock);
	down = ch->conn_id && !up_locked(srv, ch);
	pthread_mutex_unlock(&srv->cb_lock);
	return down;
}

uint32_t nfs_get_cb_sec(struct xdr_dec *a, struct nfs_cb_sec *sec)
{
	uint32_t n = xdr_get_u32(a), i, l;
	bool chosen = false;

	memset(sec, 0, sizeof(*sec));
	sec->flavor = RPC_AUTH_NONE;
	for (i = 0; i < n && !xdr_dec_err(a); i++) {
		uint32_t fl = xdr_get_u32(a);

		if (fl == RPC_AUTH_SYS) {
			struct nfs_cb_sec s = { .flavor = RPC_AUTH_SYS };

			s.stamp = xdr_get_u32(a);
			xdr_get_cstring(a, s.machine, sizeof(s.machine),
					RPC_AUTHSYS_NAME_MAX);
			s.uid = xdr_get_u32(a);
			s.gid = xdr_get_u32(a);
			l = xdr_get_u32(a);
			if (l > RPC_AUTHSYS_GIDS_MAX)
				return NFS4ERR_BADXDR;
			xdr_skip(a, (size_t)l * 4);
			if (!chosen)
				*sec = s;
			chosen = true;
		} else if (fl == RPC_RPCSEC_GSS) {
			/* not offered: the next flavor is used */
			xdr_get_u32(a);
			xdr_get_opaque_ref(a, &l, XDR_NOMAX);
			xdr_get_opaque_ref(a, &l, XDR_NOMAX);
		} else if (fl == RPC_AUTH_NONE) {
			chosen = true;
		} else {
			return NFS4ERR_BADXDR;
		}
	}
	return xdr_dec_err(a) ? NFS4ERR_BADXDR : NFS4_OK;
}

/* ---- calls --------------------------------------------------------------- */

static void unlist(struct nfs_server *srv, struct nfs_cb_call *call)
{
	struct nfs_cb_call **pp;

	if (!call->listed)
		return;
	for (pp = &srv->calls; *pp; pp = &(*pp)->next)
		if (*pp == call) {
			*pp = call->next;
			break;
		}
	call->listed = false;
	if (!--call->refs) {
		chan_unref(call->chan);
		free(call->reply);
		free(call);
	}
}

static void put_cred(struct xdr_enc *e, const struct nfs_cb_sec *sec)
{
	size_t at;

	if (sec->flavor != RPC_AUTH_SYS) {
		xdr_put_u32(e, RPC_AUTH_NONE);
		xdr_put_u32(e, 0);
		return;
	}
	xdr_put_u32(e, RPC_AUTH_SYS);
	at = xdr_enc_len(e);
	xdr_put_u32(e, 0);			/* body length, patched */
	xdr_put_u32(e, sec->stamp);
	xdr_put_cstring(e, sec->machine, RPC_AUTHSYS_NAME_MAX);
	xdr_put_u32(e, sec->uid);
	xdr_put_u32(e, sec->gid);
	xdr_put_u32(e, 0);			/* no more groups */
	if (!xdr_enc_err(e))
		xdr_patch_u32(e, at, (uint32_t)(xdr_enc_len(e) - at - 4));
}

int nfs_cb_start(struct nfs_server *srv, struct nfs_cb_chan *ch,
		 uint32_t op, void (*put)(struct xdr_enc *, const void *),
		 const void *arg, unsigned ms, struct nfs_cb_call **out)
{
	struct nfs_cb_call *call;
	struct nfs_xprt *x;
	struct xdr_enc e;
	uint8_t *rec;
	int err;

	*out = NULL;
	rec = malloc(CB_RECORD_MAX);
	call = calloc(1, sizeof(*call));
	if (!rec || !call) {
		free(rec);
		free(call);
		return -ENOMEM;
	}
	pthread_mutex_lock(&srv->cb_lock);
	if (ch->inflight && nfs_now_ms() >= ch->inflight->deadline)
		finish(srv, ch->inflight, -ETIMEDOUT);
	x = ch->conn_id ? xprt_find(srv, ch->conn_id) : NULL;
	err = !x ? -ENOTCONN : ch->inflight ? -EBUSY : 0;
	if (err)
		goto fail;
	call->refs = 2;			/* the caller's, the list's */
	call->chan = ch;
	ch->refs++;
	call->conn_id = ch->conn_id;
	call->xid = ++srv->cb_xid;
	call->seqid = ch->seqid + 1;
	call->state = -EINPROGRESS;
	call->deadline = nfs_now_ms() + ms;

	xdr_enc_init(&e, rec, CB_RECORD_MAX);
	xdr_put_u32(&e, 0);			/* record mark, patched */
	xdr_put_u32(&e, call->xid);
	xdr_put_u32(&e, RPC_CALL);
	xdr_put_u32(&e, RPC_VERSION);
	xdr_put_u32(&e, ch->prog);
	xdr_put_u32(&e, NFS4_CB_VERSION);
	xdr_put_u32(&e, NFS4_CB_PROC_COMPOUND);
	put_cred(&e, &ch->sec);
	xdr_put_u32(&e, RPC_AUTH_NONE);		/* verifier */
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 0);			/* tag */
	xdr_put_u32(&e, ch->minor);
	xdr_put_u32(&e, 0);			/* callback_ident: 4.0 only */
	xdr_put_u32(&e, 2);
	xdr_put_u32(&e, OP_CB_SEQUENCE);
	xdr_put_fixed(&e, ch->sessid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(&e, call->seqid);
	xdr_put_u32(&e, 0);			/* slot */
	xdr_put_u32(&e, 0);			/* highest slot */
	xdr_put_bool(&e, false);		/* cachethis */
	xdr_put_u32(&e, 0);			/* no referring calls */
	xdr_put_u32(&e, op);
	put(&e, arg);
	if (xdr_enc_err(&e)) {
		err = -EMSGSIZE;
		goto fail_call;
	}
	xdr_set_be32(rec, RPC_LAST_FRAG | (uint32_t)(xdr_enc_len(&e) - 4));
	err = x->send(x, rec, xdr_enc_len(&e));
	rec = NULL;
	if (err)
		goto fail_call;
	/*
	 * the slot's sequence moves on now: a call that is never answered
	 * may or may not have reached the client, and the next one finds
	 * out (SEQ_MISORDERED steps back, nfs_cb_reply())
	 */
	ch->seqid = call->seqid;
	ch->inflight = call;
	call->listed = true;
	call->next = srv->calls;
	srv->calls = call;
	pthread_mutex_unlock(&srv->cb_lock);
	*out = call;
	return 0;
fail_call:
	chan_unref(ch);
fail:
	pthread_mutex_unlock(&srv->cb_lock);
	free(rec);
	free(call);
	return err;
}

/* cb_lock held */
static int poll_locked(struct nfs_server *srv, struct nfs_cb_call *call,
		       uint32_t *status)
{
	if (call->state == -EINPROGRESS && nfs_now_ms() >= call->deadline)
		finish(srv, call, -ETIMEDOUT);
	if (status)
		*status = call->status;
	return call->state;
}

int nfs_cb_poll(struct nfs_server *srv, struct nfs_cb_call *call,
		uint32_t *status)
{
	int st;

	pthread_mutex_lock(&srv->cb_lock);
	st = poll_locked(srv, call, status);
	pthread_mutex_unlock(&srv->cb_lock);
	return st;
}

int nfs_cb_wait(struct nfs_server *srv, struct nfs_cb_call *call,
		uint32_t *status)
{
	struct timespec ts;
	int st;

	ts.tv_sec = (time_t)(call->deadline / 1000);
	ts.tv_nsec = (long)(call->deadline % 1000) * 1000000;
	pthread_mutex_lock(&srv->cb_lock);
	while (call->state == -EINPROGRESS && nfs_now_ms() < call->deadline)
		if (pthread_cond_timedwait(&srv->cb_cond, &srv->cb_lock, &ts) ==
		    ETIMEDOUT)
			break;
	st = poll_locked(srv, call, status);
	pthread_mutex_unlock(&srv->cb_lock);
	return st;
}

void nfs_cb_result(struct nfs_cb_call *call, struct xdr_dec *d)
{
	/* an answered call does not change any more: no lock needed */
	xdr_dec_init(d, call->reply + call->body, call->len - call->body);
}

void nfs_cb_call_put(struct nfs_server *srv, struct nfs_cb_call *call)
{
	if (!call)
		return;
	pthread_mutex_lock(&srv->cb_lock);
	if (!--call->refs) {
		chan_unref(call->chan);
		free(call->reply);
		free(call);
	}
	pthread_mutex_unlock(&srv->cb_lock);
}

/* the CB_COMPOUND4res of @call in @d: state and status */
static int parse_reply(struct nfs_cb_call *call, struct xdr_dec *d,
		       uint32_t *status)
{
	uint32_t l, n, op, st;

	if (xdr_get_u32(d) != RPC_MSG_ACCEPTED)
		return -EPROTO;
	xdr_get_u32(d);				/* verifier */
	xdr_get_opaque_ref(d, &l, RPC_AUTH_MAX);
	if (xdr_get_u32(d) != RPC_SUCCESS || xdr_dec_err(d))
		return -EPROTO;
	*status = xdr_get_u32(d);
	xdr_get_opaque_ref(d, &l, NFS4_OPAQUE_LIMIT);	/* tag */
	n = xdr_get_u32(d);
	if (xdr_dec_err(d))
		return -EPROTO;
	if (!n)
		return *status ? 0 : -EPROTO;
	op = xdr_get_u32(d);
	st = xdr_get_u32(d);
	if (op != OP_CB_SEQUENCE || xdr_dec_err(d))
		return -EPROTO;
	if (st) {
		if (st == NFS4ERR_SEQ_MISORDERED &&
		    call->chan->seqid == call->seqid)
			call->chan->seqid--;	/* it never saw the last */
		*status = st;
		return 0;
	}
	xdr_skip(d, NFS4_SESSIONID_SIZE + 16);
	if (n < 2)
		return *status ? 0 : -EPROTO;
	xdr_get_u32(d);				/* op */
	*status = xdr_get_u32(d);
	if (xdr_dec_err(d))
		return -EPROTO;
	call->body = d->pos;
	return 0;
}

void nfs_cb_reply(struct nfs_server *srv, uint64_t conn_id,
		  const uint8_t *rec, size_t len)
{
	struct nfs_cb_call *call;
	struct xdr_dec d;
	uint32_t xid, status = 0;
	int st;

	xdr_dec_init(&d, rec, len);
	xid = xdr_get_u32(&d);
	if (xdr_get_u32(&d) != RPC_REPLY || xdr_dec_err(&d))
		return;
	pthread_mutex_lock(&srv->cb_lock);
	for (call = srv->calls; call; call = call->next)
		if (call->xid == xid && call->conn_id == conn_id)
			break;
	if (call) {
		call->reply = malloc(len ? len : 1);
		if (call->reply) {
			memcpy(call->reply, rec, len);
			call->len = len;
			xdr_dec_init(&d, call->reply, len);
			xdr_skip(&d, 8);
			st = parse_reply(call, &d, &status);
			if (!st && !call->body)
				call->body = len;	/* no op result */
		} else {
			st = -ENOMEM;
		}
		call->status = status;
		/* an answer: the path works, whatever it said */
		call->chan->fault = false;
		finish(srv, call, st);
	}
	pthread_mutex_unlock(&srv->cb_lock);
}
