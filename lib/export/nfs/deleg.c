/* SPDX-License-Identifier: MIT */
/*
 * File delegations (RFC 8881 10.2, 10.4, 18.16.3, 18.6, 20.2, 20.1): a
 * read or write delegation handed out on OPEN, when the export allows
 * them (`delegations = 1`), the client asked for one
 * (OPEN4_SHARE_ACCESS_WANT_*_DELEG, minor version 1 and up), its back
 * channel works, and no other client's open or delegation conflicts. A
 * conflicting OPEN, REMOVE, RENAME, SETATTR, READ/WRITE (a write
 * delegation) or WRITE (a read one) of another client sends CB_RECALL
 * and answers NFS4ERR_DELAY until the holder's DELEGRETURN; a holder that
 * has not returned it half a lease after the first conflict loses it: the
 * delegation is revoked (its stateid is NFS4ERR_DELEG_REVOKED, SEQUENCE
 * says SEQ4_STATUS_RECALLABLE_STATE_REVOKED until FREE_STATEID). GETATTR
 * of another client on a write-delegated file asks the holder with
 * CB_GETATTR (compound.c waits for it without srv->lock). Delegations
 * are states of the client (state.c): lease expiry and
 * DESTROY_CLIENTID free them with the rest.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export/nfs/nfs.h"

/* how long a CB_RECALL / CB_GETATTR may take to be answered */
#define CB_TIMEOUT_MS 5000
/* GETATTR waits this long for CB_GETATTR before answering DELAY */
#define CB_GETATTR_WAIT_MS 2000

enum { NFS_LIMIT_SIZE = 1, ACE4_ACCESS_ALLOWED_ACE_TYPE = 0 };

static struct nfs_client *caller(struct nfs_compound *c)
{
	return c->sess ? c->sess->clp : NULL;
}

static bool live_deleg(const struct nfs_state *s, const struct nfs_fh *fh)
{
	return s->type == NFS_ST_DELEG && !s->revoked &&
	       nfs_fh_equal(&s->fh, fh);
}

/* ---- OPEN ---------------------------------------------------------------- */

/* the delegation type @clp may have on @fh for @want, or a WND4_ reason */
static uint32_t choose(struct nfs_compound *c, struct nfs_client *clp,
		       const struct nfs_fh *fh, uint32_t access, uint32_t want,
		       uint32_t *why)
{
	struct nfs_server *srv = c->srv;
	struct nfs_state *o;
	uint32_t type;

	*why = WND4_RESOURCE;
	if (!srv->delegations || !c->sess || !nfs_cb_up(srv, c->sess->cb))
		return OPEN_DELEGATE_NONE;
	if (want == OPEN4_SHARE_ACCESS_WANT_READ_DELEG)
		type = OPEN_DELEGATE_READ;
	else if (want == OPEN4_SHARE_ACCESS_WANT_WRITE_DELEG ||
		 (access & OPEN4_SHARE_ACCESS_WRITE))
		type = OPEN_DELEGATE_WRITE;
	else
		type = OPEN_DELEGATE_READ;
	/* a write delegation for a write open only */
	if (type == OPEN_DELEGATE_WRITE &&
	    !(access & OPEN4_SHARE_ACCESS_WRITE)) {
		*why = WND4_NOT_SUPP_DOWNGRADE;
		return OPEN_DELEGATE_NONE;
	}
	*why = WND4_CONTENTION;
	for (o = nfs_file_states(srv, fh); o; o = o->file_next) {
		if (!nfs_fh_equal(&o->fh, fh))
			continue;
		if (o->type == NFS_ST_DELEG) {
			if (o->revoked)
				continue;
			if (o->clp == clp) {
				/* one delegation per client and file */
				*why = WND4_NOT_SUPP_UPGRADE;
				return OPEN_DELEGATE_NONE;
			}
			if (type == OPEN_DELEGATE_WRITE ||
			    o->dtype == OPEN_DELEGATE_WRITE || o->recall_ms)
				return OPEN_DELEGATE_NONE;
		} else if (o->type == NFS_ST_OPEN) {
			/* no read delegation while anyone writes */
			if (type == OPEN_DELEGATE_READ &&
			    (o->access & OPEN4_SHARE_ACCESS_WRITE))
				return OPEN_DELEGATE_NONE;
			if (type == OPEN_DELEGATE_WRITE && o->clp != clp)
				return OPEN_DELEGATE_NONE;
		}
	}
	return type;
}

static void put_ace(struct xdr_enc *r)
{
	xdr_put_u32(r, ACE4_ACCESS_ALLOWED_ACE_TYPE);
	xdr_put_u32(r, 0);			/* flags */
	xdr_put_u32(r, 0);			/* mask */
	xdr_put_u32(r, 0);			/* who: "" */
}

void nfs_deleg_open(struct nfs_compound *c, struct nfs_client *clp,
		    const struct nfs_fh *fh, uint32_t access, uint32_t want,
		    struct xdr_enc *r)
{
	struct nfs_state *d = NULL;
	uint32_t type = OPEN_DELEGATE_NONE, why = WND4_NOT_WANTED;

	if (c->minor && want && want != OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE &&
	    want != OPEN4_SHARE_ACCESS_WANT_NO_DELEG &&
	    want != OPEN4_SHARE_ACCESS_WANT_CANCEL)
		type = choose(c, clp, fh, access, want, &why);
	if (type != OPEN_DELEGATE_NONE) {
		d = nfs_state_new(c->srv, clp, NFS_ST_DELEG, fh, NULL, 0);
		if (!d) {
			type = OPEN_DELEGATE_NONE;
			why = WND4_RESOURCE;
		}
	}
	if (d) {
		d->dtype = type;
		d->access = type == OPEN_DELEGATE_WRITE ?
			    OPEN4_SHARE_ACCESS_BOTH : OPEN4_SHARE_ACCESS_READ;
		xdr_put_u32(r, type);
		nfs_put_stateid(r, &d->sid);
		xdr_put_bool(r, false);		/* no recall now */
		if (type == OPEN_DELEGATE_WRITE) {
			xdr_put_u32(r, NFS_LIMIT_SIZE);
			xdr_put_u64(r, UINT64_MAX);
		}
		put_ace(r);
		return;
	}
	if (!c->minor || !want ||
	    want == OPEN4_SHARE_ACCESS_WANT_NO_PREFERENCE) {
		xdr_put_u32(r, OPEN_DELEGATE_NONE);
		return;
	}
	/* none: say why (18.16.3) */
	xdr_put_u32(r, OPEN_DELEGATE_NONE_EXT);
	if (want == OPEN4_SHARE_ACCESS_WANT_NO_DELEG) {
		xdr_put_u32(r, WND4_NOT_WANTED);
	} else if (want == OPEN4_SHARE_ACCESS_WANT_CANCEL) {
		xdr_put_u32(r, WND4_CANCELLED);
	} else {
		xdr_put_u32(r, why);
		if (why == WND4_CONTENTION || why == WND4_RESOURCE)
			xdr_put_bool(r, false);	/* no signal later */
	}
}

/* ---- recall and revocation ----------------------------------------------- */

static struct nfs_session *session_of(struct nfs_server *srv,
				      struct nfs_client *clp)
{
	struct nfs_session *s, *any = NULL;

	for (s = clp->sessions; s; s = s->clp_next) {
		if (nfs_cb_up(srv, s->cb))
			return s;
		any = s;
	}
	return any;
}

struct recall_args {
	const struct nfs_stateid *sid;
	struct nfs_fh wire;
};

static void put_recall(struct xdr_enc *e, const void *arg)
{
	const struct recall_args *ra = arg;

	nfs_put_stateid(e, ra->sid);
	xdr_put_bool(e, false);			/* truncate */
	xdr_put_opaque(e, ra->wire.data, ra->wire.len, NFS4_FHSIZE);
}

/*
 * How long a recalled delegation may stay (10.4.6 leaves it to the
 * server): half a lease, at least a second. Not a whole lease: a holder
 * that stopped renewing would then lose its delegation and its lease in
 * the same second, and never learn of the revocation (pynfs DELEG8 runs
 * into that: its conflicting OPEN retries DELAY for up to 10 s while the
 * holder does not renew).
 */
static uint64_t revoke_ms(struct nfs_server *srv)
{
	return srv->lease > 2 ? (uint64_t)srv->lease * 500 : 1000;
}

static void revoke(struct nfs_server *srv, struct nfs_state *d)
{
	d->revoked = true;
	d->clp->nrevoked++;		/* until its FREE_STATEID */
	nfs_cb_call_put(srv, d->recall);
	d->recall = NULL;
}

/* send CB_RECALL for @d unless one is out (the slot may be busy: later) */
static void recall(struct nfs_server *srv, struct nfs_state *d)
{
	struct nfs_session *s = session_of(srv, d->clp);
	struct recall_args ra = { .sid = &d->sid };
	uint32_t status;
	int st;

	if (d->recall) {
		st = nfs_cb_poll(srv, d->recall, &status);
		if (st == -EINPROGRESS || (!st && status == NFS4_OK))
			return;
		/* unanswered, or refused: send it again */
		nfs_cb_call_put(srv, d->recall);
		d->recall = NULL;
	}
	if (!s)
		return;
	nfs_fh_wrap(srv, &d->fh, &ra.wire);
	if (nfs_cb_start(srv, s->cb, OP_CB_RECALL, put_recall, &ra,
			 CB_TIMEOUT_MS, &d->recall))
		d->recall = NULL;
}

uint32_t nfs_deleg_break(struct nfs_compound *c, struct nfs_client *clp,
			 const struct nfs_fh *fh, bool write)
{
	struct nfs_server *srv = c->srv;
	uint64_t now = nfs_now_ms();
	struct nfs_state *d;
	bool wait = false;

	for (d = nfs_file_delegs(srv, fh); d; d = d->deleg_next) {
		if (!live_deleg(d, fh) || (clp && d->clp == clp))
			continue;
		if (!write && d->dtype == OPEN_DELEGATE_READ)
			continue;
		if (!d->recall_ms)
			d->recall_ms = now ? now : 1;
		if (now - d->recall_ms > revoke_ms(srv)) {
			revoke(srv, d);
			continue;
		}
		recall(srv, d);
		wait = true;
	}
	return wait ? NFS4ERR_DELAY : NFS4_OK;
}

uint32_t nfs_deleg_break_name(struct nfs_compound *c,
			      const struct nfs_fh *dir, const char *name)
{
	struct nfs_backend *be = &c->srv->be;
	struct nfs_fh fh;

	if (!c->srv->nstates || be->ops->lookup(be, dir, name, &fh))
		return NFS4_OK;
	return nfs_deleg_break(c, caller(c), &fh, true);
}

uint32_t nfs_deleg_break_cur(struct nfs_compound *c, bool write)
{
	if (!c->has_cfh || !c->srv->nstates)
		return NFS4_OK;
	return nfs_deleg_break(c, caller(c), &c->cfh, write);
}

uint32_t nfs_deleg_seq_flags(struct nfs_server *srv, struct nfs_client *clp)
{
	(void)srv;
	return clp->nrevoked ? SEQ4_STATUS_RECALLABLE_STATE_REVOKED : 0;
}

/* ---- CB_GETATTR (10.4.3) ----------------------------------------------- */

#define B(n) (1u << ((n) % 32))

struct getattr_args {
	struct nfs_fh wire;
};

static void put_getattr(struct xdr_enc *e, const void *arg)
{
	const struct getattr_args *ga = arg;

	xdr_put_opaque(e, ga->wire.data, ga->wire.len, NFS4_FHSIZE);
	xdr_put_u32(e, 1);
	xdr_put_u32(e, B(FATTR4_CHANGE) | B(FATTR4_SIZE));
}

/* CB_GETATTR4resok: change and size, or false */
static bool cb_attrs(struct nfs_cb_call *call, uint64_t *change,
		     uint64_t *size)
{
	uint32_t bm[NFS4_BITMAP_WORDS], len;
	struct xdr_dec d, v;
	const uint8_t *p;

	nfs_cb_result(call, &d);
	nfs_get_bitmap(&d, bm, NFS4_BITMAP_WORDS);
	p = xdr_get_opaque_ref(&d, &len, XDR_NOMAX);
	/* both, and nothing before them in the list */
	if (xdr_dec_err(&d) || (bm[0] & (B(FATTR4_CHANGE) - 1)) ||
	    !(bm[0] & B(FATTR4_CHANGE)) || !(bm[0] & B(FATTR4_SIZE)))
		return false;
	xdr_dec_init(&v, p, len);
	*change = xdr_get_u64(&v);
	*size = xdr_get_u64(&v);
	return !xdr_dec_err(&v);
}

uint32_t nfs_deleg_getattr(struct nfs_compound *c, const uint32_t *bm,
			   struct nfs_attr *at)
{
	struct nfs_server *srv = c->srv;
	struct nfs_client *clp = caller(c);
	struct getattr_args ga;
	struct nfs_session *s;
	struct nfs_state *d;
	uint64_t change, size;
	uint32_t status;

	if (!(bm[0] & (B(FATTR4_CHANGE) | B(FATTR4_SIZE))))
		return NFS4_OK;
	for (d = nfs_file_delegs(srv, &c->cfh); d; d = d->deleg_next)
		if (live_deleg(d, &c->cfh) && d->clp != clp &&
		    d->dtype == OPEN_DELEGATE_WRITE)
			break;
	if (!d)
		return NFS4_OK;
	if (c->waited) {
		if (nfs_cb_poll(srv, c->wait, &status) == 0 &&
		    status == NFS4_OK && cb_attrs(c->wait, &change, &size)) {
			/*
			 * the holder's view: modified when its change
			 * differs, shown as a change of the server's value
			 */
			if (change != at->change || size != at->size) {
				at->change++;
				at->size = size;
			}
			return NFS4_OK;
		}
		/* no answer: take the delegation back instead */
		return nfs_deleg_break(c, clp, &c->cfh, true);
	}
	if (d->recall_ms)
		return nfs_deleg_break(c, clp, &c->cfh, true);
	s = session_of(srv, d->clp);
	nfs_fh_wrap(srv, &d->fh, &ga.wire);
	if (!s || nfs_cb_start(srv, s->cb, OP_CB_GETATTR, put_getattr, &ga,
			       CB_GETATTR_WAIT_MS, &c->wait))
		return nfs_deleg_break(c, clp, &c->cfh, true);
	return NFS_OP_WAIT;
}

/* ---- DELEGRETURN ---------------------------------------------------------- */

uint32_t nfs_op_delegreturn(struct nfs_compound *c, struct xdr_dec *a,
			    struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_state *d;
	uint32_t st;

	nfs_get_stateid(c, a, &sid);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = nfs_state_find_cur(c, &sid, NFS_ST_DELEG, &d);
	if (st)
		return st;
	nfs_state_free(c->srv, d);
	return NFS4_OK;
}
