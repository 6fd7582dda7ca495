/* SPDX-License-Identifier: MIT */
/*
 * Clients and sessions (RFC 8881 2.10, 18.35-18.37, 18.46, 18.50-18.51):
 * EXCHANGE_ID's client records, CREATE_SESSION with its own replay,
 * SEQUENCE with a slot table whose every slot caches its last reply,
 * DESTROY_SESSION, DESTROY_CLIENTID, RECLAIM_COMPLETE,
 * BIND_CONN_TO_SESSION; leases (renewed by SEQUENCE, expired lazily at
 * the next COMPOUND) and the grace period after start. The 4.0 client
 * ops SETCLIENTID, SETCLIENTID_CONFIRM and RENEW share the records.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/random.h"
#include "export/nfs/nfs.h"

time_t nfs_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec;
}

bool nfs_in_grace(struct nfs_server *srv)
{
	return nfs_now() < srv->boot + (time_t)srv->grace;
}

struct nfs_client *nfs_client_find(struct nfs_server *srv, uint64_t id)
{
	struct nfs_client **b = nfs_clientid_bucket(srv, id), *clp;

	for (clp = b ? *b : NULL; clp; clp = clp->id_next)
		if (clp->clientid == id)
			return clp;
	return NULL;
}

static void session_free(struct nfs_server *srv, struct nfs_session *s)
{
	unsigned i;

	NFS_LIST_DEL(s, next, pprev);
	NFS_LIST_DEL(s, id_next, id_pprev);
	NFS_LIST_DEL(s, clp_next, clp_pprev);
	for (i = 0; i < NFS_MAX_SLOTS; i++)
		free(s->slots[i].reply);
	nfs_cb_chan_put(srv, s->cb);
	s->clp->nsessions--;
	srv->nsessions--;
	free(s);
}

void nfs_client_free(struct nfs_server *srv, struct nfs_client *clp)
{
	struct nfs_session *s;

	while ((s = clp->sessions))
		session_free(srv, s);
	nfs_states_of_client_free(srv, clp);
	NFS_LIST_DEL(clp, next, pprev);
	NFS_LIST_DEL(clp, id_next, id_pprev);
	NFS_LIST_DEL(clp, owner_next, owner_pprev);
	free(clp->cs_cache.reply);
	free(clp);
	srv->nclients--;
}

void nfs_expire_clients(struct nfs_server *srv)
{
	struct nfs_client *clp, *next;
	time_t now = nfs_now();

	/*
	 * Every COMPOUND asks, and this is a walk of all clients: once a
	 * second is as good, since a lease runs out at a second's turn
	 * (renewals only move "renewed" on to now, so no record seen in
	 * time at this second's check can be out later in the same second)
	 */
	if (now == srv->expire_at && srv->lease == srv->expire_lease)
		return;
	srv->expire_at = now;
	srv->expire_lease = srv->lease;
	for (clp = srv->clients; clp; clp = next) {
		next = clp->next;
		if (now > clp->renewed + (time_t)srv->lease)
			nfs_client_free(srv, clp);
	}
}

/*
 * Room for one more client record: at NFS_MAX_CLIENTS the oldest
 * unconfirmed record without sessions goes (a confirmed one is a client
 * in use); false when there is none.
 */
static bool client_room(struct nfs_server *srv)
{
	struct nfs_client *clp, *old = NULL;

	if (srv->nclients < NFS_MAX_CLIENTS)
		return true;
	for (clp = srv->clients; clp; clp = clp->next)
		if (!clp->confirmed && !clp->nsessions &&
		    (!old || clp->renewed <= old->renewed))
			old = clp;
	if (!old)
		return false;
	nfs_client_free(srv, old);
	return true;
}

static struct nfs_client *client_new(struct nfs_server *srv,
				     const uint8_t *owner, uint32_t len,
				     const uint8_t *verf, uint32_t principal)
{
	struct nfs_client *clp;

	if (!client_room(srv) || nfs_tables_get(srv))
		return NULL;
	clp = calloc(1, sizeof(*clp));
	if (!clp)
		return NULL;
	srv->nclients++;
	clp->clientid = (uint64_t)srv->boot_tag << 32 | ++srv->next_clientid;
	memcpy(clp->owner, owner, len);
	clp->owner_len = len;
	memcpy(clp->verifier, verf, NFS4_VERIFIER_SIZE);
	clp->principal = principal;
	clp->renewed = nfs_now();
	NFS_LIST_ADD(&srv->clients, clp, next, pprev);
	NFS_LIST_ADD(nfs_clientid_bucket(srv, clp->clientid), clp, id_next,
		     id_pprev);
	NFS_LIST_ADD(nfs_owner_bucket(srv, owner, len), clp, owner_next,
		     owner_pprev);
	return clp;
}

static uint32_t principal_of(const struct nfs_compound *c)
{
	return c->cred.flavor == RPC_AUTH_SYS ? c->cred.uid : 0xffffffffu;
}

static void put_server_owner(struct nfs_server *srv, struct xdr_enc *r)
{
	char major[32];

	xdr_put_u64(r, 0);			/* so_minor_id */
	snprintf(major, sizeof(major), "blkstack-%u", srv->export_id);
	xdr_put_cstring(r, major, NFS4_OPAQUE_LIMIT);
	xdr_put_cstring(r, "blkstack", NFS4_OPAQUE_LIMIT);	/* scope */
}

/* ---- EXCHANGE_ID --------------------------------------------------------- */

/* Whether @clp holds anything: a session, an open or a lock. */
static bool client_has_state(struct nfs_client *clp)
{
	return clp->nsessions || clp->states;
}

/* the first client record in @owner's bucket (walk owner_next, comparing
 * owners), or NULL */
static struct nfs_client *owner_records(struct nfs_server *srv,
					const uint8_t *owner, uint32_t len)
{
	struct nfs_client **b = nfs_owner_bucket(srv, owner, len);

	return b ? *b : NULL;
}

static bool same_owner(const struct nfs_client *clp, const uint8_t *owner,
		       uint32_t len)
{
	return clp->owner_len == len && !memcmp(clp->owner, owner, len);
}

uint32_t nfs_op_exchange_id(struct nfs_compound *c, struct xdr_dec *a,
			    struct xdr_enc *r)
{
	struct nfs_server *srv = c->srv;
	uint8_t verf[NFS4_VERIFIER_SIZE];
	const uint8_t *owner;
	uint32_t olen, flags, how, n, principal = principal_of(c);
	struct nfs_client *clp, *conf = NULL, *unconf = NULL;
	bool update;

	xdr_get_fixed(a, verf, sizeof(verf));
	owner = xdr_get_opaque_ref(a, &olen, NFS4_OPAQUE_LIMIT);
	flags = xdr_get_u32(a);
	how = xdr_get_u32(a);
	if (how == SP4_MACH_CRED) {
		uint32_t bm[8];

		nfs_get_bitmap(a, bm, 8);
		nfs_get_bitmap(a, bm, 8);
	} else if (how != SP4_NONE) {
		return xdr_dec_err(a) ? NFS4ERR_BADXDR : NFS4ERR_NOTSUPP;
	}
	n = xdr_get_u32(a);			/* impl_id<1> */
	if (n > 1)
		return NFS4ERR_BADXDR;
	if (n) {
		uint32_t l;

		xdr_get_opaque_ref(a, &l, XDR_NOMAX);
		xdr_get_opaque_ref(a, &l, XDR_NOMAX);
		xdr_get_u64(a);
		xdr_get_u32(a);
	}
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (flags & ~EXCHGID4_FLAG_MASK_A)
		return NFS4ERR_INVAL;
	if (how == SP4_MACH_CRED)
		return NFS4ERR_NOTSUPP;
	update = flags & EXCHGID4_FLAG_UPD_CONFIRMED_REC_A;

	for (clp = owner_records(srv, owner, olen); clp;
	     clp = clp->owner_next) {
		if (!same_owner(clp, owner, olen) || !clp->minor)
			continue;
		if (clp->confirmed)
			conf = clp;
		else
			unconf = clp;
	}
	if (update) {
		if (!conf)
			return NFS4ERR_NOENT;
		if (memcmp(conf->verifier, verf, sizeof(verf)))
			return NFS4ERR_NOT_SAME;
		if (conf->principal != principal)
			return NFS4ERR_PERM;
		clp = conf;
	} else if (conf && !memcmp(conf->verifier, verf, sizeof(verf)) &&
		   conf->principal == principal) {
		clp = conf;		/* the same client again */
	} else if (conf && conf->principal != principal &&
		   client_has_state(conf)) {
		/* another principal's client in use (18.35.4 case 3) */
		return NFS4ERR_CLID_INUSE;
	} else {
		/*
		 * a new client, or one that rebooted: a new record. One of
		 * another principal with no state is replaced at once
		 * (18.35.4 case 3): its clientid is stale from now on.
		 */
		if (unconf)
			nfs_client_free(srv, unconf);
		if (conf && conf->principal != principal)
			nfs_client_free(srv, conf);
		clp = client_new(srv, owner, olen, verf, principal);
		if (!clp)	/* NFS_MAX_CLIENTS in use: later */
			return NFS4ERR_DELAY;
		clp->minor = c->minor;
	}
	clp->renewed = nfs_now();
	xdr_put_u64(r, clp->clientid);
	xdr_put_u32(r, clp->cs_seq + 1);
	xdr_put_u32(r, (clp->confirmed ? EXCHGID4_FLAG_CONFIRMED_R : 0) |
		    EXCHGID4_FLAG_USE_NON_PNFS);
	xdr_put_u32(r, SP4_NONE);
	put_server_owner(srv, r);
	xdr_put_u32(r, 1);			/* impl id */
	xdr_put_cstring(r, "blkstack.org", NFS4_OPAQUE_LIMIT);
	xdr_put_cstring(r, "blkstack nfs", NFS4_OPAQUE_LIMIT);
	xdr_put_i64(r, 0);
	xdr_put_u32(r, 0);
	return NFS4_OK;
}

/* ---- CREATE_SESSION ------------------------------------------------------ */

struct chan {
	uint32_t pad, maxreq, maxresp, maxcached, maxops, maxreqs, rdma;
	uint32_t nrdma;
};

static void get_chan(struct xdr_dec *a, struct chan *ch)
{
	ch->pad = xdr_get_u32(a);
	ch->maxreq = xdr_get_u32(a);
	ch->maxresp = xdr_get_u32(a);
	ch->maxcached = xdr_get_u32(a);
	ch->maxops = xdr_get_u32(a);
	ch->maxreqs = xdr_get_u32(a);
	ch->nrdma = xdr_get_u32(a);
	if (ch->nrdma > 1)
		xdr_dec_fail(a, -EBADMSG);
	else if (ch->nrdma)
		ch->rdma = xdr_get_u32(a);
}

static void put_chan(struct xdr_enc *r, const struct chan *ch)
{
	xdr_put_u32(r, 0);
	xdr_put_u32(r, ch->maxreq);
	xdr_put_u32(r, ch->maxresp);
	xdr_put_u32(r, ch->maxcached);
	xdr_put_u32(r, ch->maxops);
	xdr_put_u32(r, ch->maxreqs);
	xdr_put_u32(r, 0);			/* no RDMA */
}

static uint32_t min32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

uint32_t nfs_op_create_session(struct nfs_compound *c, struct xdr_dec *a,
			       struct xdr_enc *r)
{
	struct nfs_server *srv = c->srv;
	struct nfs_client *clp, *o, *next;
	struct nfs_session *s;
	struct chan fore, back;
	struct nfs_cb_sec sec;
	uint64_t id = xdr_get_u64(a);
	uint32_t seq = xdr_get_u32(a), flags = xdr_get_u32(a), prog, st;
	size_t body = xdr_enc_len(r);

	get_chan(a, &fore);
	get_chan(a, &back);
	prog = xdr_get_u32(a);
	st = nfs_get_cb_sec(a, &sec);
	if (st)
		return st;
	clp = nfs_client_find(srv, id);
	if (!clp || !clp->minor)
		return NFS4ERR_STALE_CLIENTID;
	/*
	 * 18.36.4: the CREATE_SESSION that confirms a record must come
	 * from the principal of its EXCHANGE_ID; once confirmed, any
	 * principal may add sessions (SP4_NONE).
	 */
	if (!clp->confirmed && clp->principal != principal_of(c))
		return NFS4ERR_CLID_INUSE;
	if (seq == clp->cs_seq && clp->cs_cache.reply) {
		/* a retry: the same answer */
		if (clp->cs_cache.status != NFS4_OK)
			return clp->cs_cache.status;
		xdr_put_fixed(r, clp->cs_cache.reply, clp->cs_cache.len);
		return NFS4_OK;
	}
	if (seq != clp->cs_seq + 1)
		return NFS4ERR_SEQ_MISORDERED;
	if (flags & ~(CREATE_SESSION4_FLAG_PERSIST |
		      CREATE_SESSION4_FLAG_CONN_BACK_CHAN |
		      CREATE_SESSION4_FLAG_CONN_RDMA))
		return NFS4ERR_INVAL;
	if (fore.maxreq < 256 || fore.maxresp < 128 || !fore.maxreqs)
		return NFS4ERR_TOOSMALL;
	/*
	 * a back channel that could never carry CB_SEQUENCE plus a
	 * callback (18.36.3: TOOSMALL, and the record stays as it was)
	 */
	if (back.maxreq < 256 || back.maxresp < 128 || back.maxops < 2)
		return NFS4ERR_TOOSMALL;
	/*
	 * Confirming frees the owner's older confirmed record and its
	 * sessions: not the one this compound's SEQUENCE runs in (its
	 * slot gets the reply), so such a CREATE_SESSION comes alone.
	 */
	if (clp->nsessions >= NFS_MAX_CLIENT_SESSIONS ||
	    srv->nsessions >= NFS_MAX_SESSIONS)
		return NFS4ERR_NOSPC;
	if (!clp->confirmed && c->sess && c->sess->clp != clp &&
	    c->sess->clp->confirmed &&
	    c->sess->clp->owner_len == clp->owner_len &&
	    !memcmp(c->sess->clp->owner, clp->owner, clp->owner_len))
		return NFS4ERR_NOT_ONLY_OP;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NFS4ERR_SERVERFAULT;
	/*
	 * 64 bits in the middle are random: a session's id is all that
	 * SEQUENCE, DESTROY_SESSION and BIND_CONN_TO_SESSION ask for, and
	 * a counter let any client name (destroy, replay, take the back
	 * channel of) another's sessions
	 */
	xdr_set_be32(s->id, srv->boot_tag);
	xdr_set_be32(s->id + 12, srv->export_id);
	do {
		if (bs_random_bytes(s->id + 4, 8)) {
			free(s);
			return NFS4ERR_SERVERFAULT;
		}
	} while (nfs_session_find(srv, s->id));
	s->cb = nfs_cb_chan_new(srv, s->id, c->minor);
	if (!s->cb) {
		free(s);
		return NFS4ERR_SERVERFAULT;
	}
	nfs_cb_set_sec(srv, s->cb, prog, &sec);
	/* the connection it came on carries callbacks (18.36.3) */
	if (flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN)
		nfs_cb_bind(srv, s->cb, c->conn_id);
	clp->cs_seq = seq;
	if (!clp->confirmed) {
		/* confirm: an older confirmed record of the owner goes */
		for (o = owner_records(srv, clp->owner, clp->owner_len); o;
		     o = next) {
			next = o->owner_next;
			if (o != clp && o->confirmed &&
			    same_owner(o, clp->owner, clp->owner_len))
				nfs_client_free(srv, o);
		}
		clp->confirmed = true;
	}
	clp->renewed = nfs_now();
	s->clp = clp;
	clp->nsessions++;
	srv->nsessions++;
	fore.maxreq = min32(fore.maxreq, NFS_MAX_RECORD);
	fore.maxresp = min32(fore.maxresp, NFS_MAX_REPLY);
	fore.maxcached = min32(fore.maxcached, NFS_MAX_CACHED);
	fore.maxops = min32(fore.maxops, NFS_MAX_OPS);
	fore.maxreqs = min32(fore.maxreqs, NFS_MAX_SLOTS);
	s->nslots = fore.maxreqs;
	s->max_req = fore.maxreq;
	s->max_resp = fore.maxresp;
	s->max_resp_cached = fore.maxcached;
	s->max_ops = fore.maxops;
	s->flags = flags & CREATE_SESSION4_FLAG_CONN_BACK_CHAN;
	NFS_LIST_ADD(&srv->sessions, s, next, pprev);
	NFS_LIST_ADD(nfs_sessid_bucket(srv, s->id), s, id_next, id_pprev);
	NFS_LIST_ADD(&clp->sessions, s, clp_next, clp_pprev);
	back.maxreqs = min32(back.maxreqs, 1);
	back.maxops = min32(back.maxops, 2);
	xdr_put_fixed(r, s->id, NFS4_SESSIONID_SIZE);
	xdr_put_u32(r, seq);
	xdr_put_u32(r, s->flags);
	put_chan(r, &fore);
	put_chan(r, &back);
	if (!xdr_enc_err(r)) {
		free(clp->cs_cache.reply);
		clp->cs_cache.len = xdr_enc_len(r) - body;
		clp->cs_cache.reply = malloc(clp->cs_cache.len);
		if (clp->cs_cache.reply)
			memcpy(clp->cs_cache.reply, r->buf + body,
			       clp->cs_cache.len);
		clp->cs_cache.status = NFS4_OK;
	}
	return NFS4_OK;
}

struct nfs_session *nfs_session_find(struct nfs_server *srv,
				     const uint8_t *id)
{
	struct nfs_session **b = nfs_sessid_bucket(srv, id), *s;

	for (s = b ? *b : NULL; s; s = s->id_next)
		if (!memcmp(s->id, id, NFS4_SESSIONID_SIZE))
			return s;
	return NULL;
}

uint32_t nfs_op_destroy_session(struct nfs_compound *c, struct xdr_dec *a,
				struct xdr_enc *r)
{
	uint8_t id[NFS4_SESSIONID_SIZE];
	struct nfs_session *s;

	xdr_get_fixed(a, id, sizeof(id));
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	s = nfs_session_find(c->srv, id);
	if (!s)
		return NFS4ERR_BADSESSION;
	if (s == c->sess) {
		/* the slot is gone with the session: no reply cached */
		if (c->opindex + 1 != c->nops)
			return NFS4ERR_BADSESSION;
		c->sess = NULL;
		c->slot = NULL;
	}
	session_free(c->srv, s);
	return NFS4_OK;
}

uint32_t nfs_op_destroy_clientid(struct nfs_compound *c, struct xdr_dec *a,
				 struct xdr_enc *r)
{
	uint64_t id = xdr_get_u64(a);
	struct nfs_client *clp;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	clp = nfs_client_find(c->srv, id);
	if (!clp)
		return NFS4ERR_STALE_CLIENTID;
	if (clp->nsessions)
		return NFS4ERR_CLIENTID_BUSY;
	nfs_client_free(c->srv, clp);
	return NFS4_OK;
}

uint32_t nfs_op_reclaim_complete(struct nfs_compound *c, struct xdr_dec *a,
				 struct xdr_enc *r)
{
	bool one_fs = xdr_get_bool(a);

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (one_fs)
		return NFS4_OK;
	if (c->sess->clp->reclaim_done)
		return NFS4ERR_COMPLETE_ALREADY;
	c->sess->clp->reclaim_done = true;
	return NFS4_OK;
}

uint32_t nfs_op_bind_conn(struct nfs_compound *c, struct xdr_dec *a,
			  struct xdr_enc *r)
{
	uint8_t id[NFS4_SESSIONID_SIZE];
	uint32_t dir;
	struct nfs_session *s;

	xdr_get_fixed(a, id, sizeof(id));
	dir = xdr_get_u32(a);
	xdr_get_bool(a);			/* use_conn_in_rdma_mode */
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	s = nfs_session_find(c->srv, id);
	if (!s)
		return NFS4ERR_BADSESSION;
	if (dir != CDFC4_FORE && dir != CDFC4_BACK &&
	    dir != CDFC4_FORE_OR_BOTH && dir != CDFC4_BACK_OR_BOTH)
		return NFS4ERR_INVAL;
	/*
	 * 18.34.3: BACK and the *_OR_BOTH directions make this connection
	 * the session's way back (this server keeps one: the latest);
	 * "or both" is granted as both
	 */
	if (dir != CDFC4_FORE)
		nfs_cb_bind(c->srv, s->cb, c->conn_id);
	xdr_put_fixed(r, id, sizeof(id));
	xdr_put_u32(r, dir == CDFC4_BACK ? CDFS4_BACK :
		    dir == CDFC4_FORE ? CDFS4_FORE : CDFS4_BOTH);
	xdr_put_bool(r, false);
	return NFS4_OK;
}

uint32_t nfs_op_backchannel_ctl(struct nfs_compound *c, struct xdr_dec *a,
				struct xdr_enc *r)
{
	struct nfs_cb_sec sec;
	uint32_t prog = xdr_get_u32(a), st;

	st = nfs_get_cb_sec(a, &sec);
	if (st)
		return st;
	nfs_cb_set_sec(c->srv, c->sess->cb, prog, &sec);
	return NFS4_OK;
}

/*
 * SEQ4_STATUS_CB_PATH_DOWN_SESSION: this session asked for a back channel
 * (bound a connection) and has none working; _CB_PATH_DOWN: no session of
 * the client has one while one asked (18.46.3).
 */
static uint32_t cb_flags(struct nfs_server *srv, struct nfs_session *s)
{
	struct nfs_session *o;
	bool asked = false;
	uint32_t f = 0;

	if (nfs_cb_down(srv, s->cb))
		f |= SEQ4_STATUS_CB_PATH_DOWN_SESSION;
	for (o = s->clp->sessions; o; o = o->clp_next) {
		if (nfs_cb_up(srv, o->cb))
			return f;
		asked |= nfs_cb_down(srv, o->cb);
	}
	return asked ? f | SEQ4_STATUS_CB_PATH_DOWN : f;
}

/* ---- SEQUENCE ------------------------------------------------------------ */

uint32_t nfs_sequence(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	uint8_t id[NFS4_SESSIONID_SIZE];
	uint32_t seq, slotid, highest;
	struct nfs_session *s;
	struct nfs_slot *sl;

	xdr_get_fixed(a, id, sizeof(id));
	seq = xdr_get_u32(a);
	slotid = xdr_get_u32(a);
	highest = xdr_get_u32(a);
	c->cache_reply = xdr_get_bool(a);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	s = nfs_session_find(c->srv, id);
	if (!s)
		return NFS4ERR_BADSESSION;
	if (slotid >= s->nslots)
		return NFS4ERR_BADSLOT;
	(void)highest;
	sl = &s->slots[slotid];
	/*
	 * the slot's COMPOUND still runs (its op let go of the lock): a
	 * retry of it, or a client that reuses the slot too early, waits
	 */
	if (sl->busy)
		return NFS4ERR_DELAY;
	if (seq == sl->seqid && seq) {
		if (!sl->reply)
			return NFS4ERR_RETRY_UNCACHED_REP;
		c->slot = sl;
		return NFS_SEQ_REPLAY;
	}
	if (seq != sl->seqid + 1)
		return NFS4ERR_SEQ_MISORDERED;
	if (c->nops > s->max_ops)
		return NFS4ERR_TOO_MANY_OPS;
	if (c->req_len > s->max_req)
		return NFS4ERR_REQ_TOO_BIG;
	sl->seqid = seq;
	sl->busy = true;
	free(sl->reply);
	sl->reply = NULL;
	sl->reply_len = 0;
	c->sess = s;
	c->slot = sl;
	s->clp->renewed = nfs_now();
	xdr_put_fixed(r, id, sizeof(id));
	xdr_put_u32(r, seq);
	xdr_put_u32(r, slotid);
	xdr_put_u32(r, s->nslots - 1);
	xdr_put_u32(r, s->nslots - 1);
	xdr_put_u32(r, cb_flags(c->srv, s) |
		    nfs_deleg_seq_flags(c->srv, s->clp));
	return NFS4_OK;
}

void nfs_slot_store(struct nfs_compound *c, const uint8_t *reply,
		    size_t len)
{
	struct nfs_slot *sl = c->slot;

	sl->busy = false;
	free(sl->reply);
	sl->reply = NULL;
	sl->reply_len = 0;
	/* not asked for and not small: a retry is RETRY_UNCACHED_REP
	 * (a reply asked for fits ca_maxresponsesize_cached: compound.c
	 * answered REP_TOO_BIG_TO_CACHE else) */
	if (!c->cache_reply && len > NFS_SLOT_KEEP_SMALL)
		return;
	sl->reply = malloc(len ? len : 1);
	sl->reply_len = sl->reply ? len : 0;
	if (sl->reply)
		memcpy(sl->reply, reply, len);
}

/* ---- 4.0: SETCLIENTID, SETCLIENTID_CONFIRM, RENEW ------------------------- */

uint32_t nfs_op_setclientid(struct nfs_compound *c, struct xdr_dec *a,
			    struct xdr_enc *r)
{
	struct nfs_server *srv = c->srv;
	uint8_t verf[NFS4_VERIFIER_SIZE];
	const uint8_t *owner;
	uint32_t olen, l;
	struct nfs_client *clp, *next;

	xdr_get_fixed(a, verf, sizeof(verf));
	owner = xdr_get_opaque_ref(a, &olen, NFS4_OPAQUE_LIMIT);
	xdr_get_u32(a);				/* cb_program */
	xdr_get_opaque_ref(a, &l, XDR_NOMAX);	/* netid */
	xdr_get_opaque_ref(a, &l, XDR_NOMAX);	/* addr */
	xdr_get_u32(a);				/* callback_ident */
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	for (clp = owner_records(srv, owner, olen); clp; clp = next) {
		next = clp->owner_next;
		if (!clp->minor && !clp->confirmed &&
		    same_owner(clp, owner, olen))
			nfs_client_free(srv, clp);
	}
	clp = client_new(srv, owner, olen, verf, principal_of(c));
	if (!clp)
		return NFS4ERR_RESOURCE;
	xdr_set_be32(clp->confirm, srv->boot_tag);
	xdr_set_be32(clp->confirm + 4, (uint32_t)clp->clientid);
	xdr_put_u64(r, clp->clientid);
	xdr_put_fixed(r, clp->confirm, sizeof(clp->confirm));
	return NFS4_OK;
}

uint32_t nfs_op_setclientid_confirm(struct nfs_compound *c,
				    struct xdr_dec *a, struct xdr_enc *r)
{
	struct nfs_server *srv = c->srv;
	uint64_t id = xdr_get_u64(a);
	uint8_t confirm[NFS4_VERIFIER_SIZE];
	struct nfs_client *clp, *o, *next;

	xdr_get_fixed(a, confirm, sizeof(confirm));
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	clp = nfs_client_find(srv, id);
	if (!clp || clp->minor)
		return NFS4ERR_STALE_CLIENTID;
	if (memcmp(clp->confirm, confirm, sizeof(confirm)))
		return NFS4ERR_STALE_CLIENTID;
	if (!clp->confirmed) {
		for (o = owner_records(srv, clp->owner, clp->owner_len); o;
		     o = next) {
			next = o->owner_next;
			if (o != clp && !o->minor && o->confirmed &&
			    same_owner(o, clp->owner, clp->owner_len))
				nfs_client_free(srv, o);
		}
		clp->confirmed = true;
	}
	clp->renewed = nfs_now();
	return NFS4_OK;
}

uint32_t nfs_op_renew(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	uint64_t id = xdr_get_u64(a);
	struct nfs_client *clp;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	clp = nfs_client_find(c->srv, id);
	if (!clp || clp->minor)
		return NFS4ERR_STALE_CLIENTID;
	if (!clp->confirmed)
		return NFS4ERR_STALE_CLIENTID;
	clp->renewed = nfs_now();
	return NFS4_OK;
}
