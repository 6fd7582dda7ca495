/* SPDX-License-Identifier: MIT */
/*
 * Open and lock state (RFC 8881 8-9, 18.10-18.21, 18.48, 18.45): stateids
 * (the server's boot tag and 64 random bits in "other", seqid bumped on
 * each change), OPEN with share access/deny checks, OPEN_DOWNGRADE, CLOSE,
 * byte-range LOCK/LOCKT/LOCKU between lock owners, TEST_STATEID,
 * FREE_STATEID, and the 4.0 OPEN_CONFIRM / RELEASE_LOCKOWNER. State
 * lives in memory: a restart loses it and clients reclaim in the grace
 * period (which this server refuses: it keeps no record of them).
 *
 * A state is found by its stateid in the server's tables, and the states
 * of a file through the file's bucket (tables.c); a client lists its
 * states, an open its lock states. So a request costs what its stateid,
 * its file, its client or its open hold, never a walk of all states.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "core/random.h"
#include "export/nfs/nfs.h"

static const uint8_t zeros[NFS4_OTHER_SIZE];
static const uint8_t ones[NFS4_OTHER_SIZE] = {
	0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
};

/* the state whose stateid's "other" is @other, or NULL */
static struct nfs_state *state_by_other(struct nfs_server *srv,
					const uint8_t *other)
{
	struct nfs_state **b = nfs_sid_bucket(srv, other), *st;

	for (st = b ? *b : NULL; st; st = st->sid_next)
		if (!memcmp(st->sid.other, other, NFS4_OTHER_SIZE))
			return st;
	return NULL;
}

struct nfs_state *nfs_state_new(struct nfs_server *srv,
				struct nfs_client *clp, enum nfs_state_type t,
				const struct nfs_fh *fh, const uint8_t *owner,
				uint32_t owner_len)
{
	struct nfs_state *st;

	/* srv->tab: made with the client */
	if (clp->nstates >= NFS_MAX_CLIENT_STATES ||
	    srv->nstates >= NFS_MAX_STATES || !srv->tab)
		return NULL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	st->type = t;
	st->clp = clp;
	st->fh = *fh;
	if (owner_len)			/* a delegation has no owner */
		memcpy(st->owner, owner, owner_len);
	st->owner_len = owner_len;
	st->sid.seqid = 1;
	/* the boot (STALE_STATEID), then 64 random bits: a stateid of
	 * another client's cannot be guessed from one's own */
	xdr_set_be32(st->sid.other, srv->boot_tag);
	do {
		if (bs_random_bytes(st->sid.other + 4, 8)) {
			free(st);
			return NULL;
		}
	} while (state_by_other(srv, st->sid.other));
	NFS_LIST_ADD(nfs_sid_bucket(srv, st->sid.other), st, sid_next,
		     sid_pprev);
	NFS_LIST_ADD(nfs_file_bucket(srv, fh), st, file_next, file_pprev);
	if (t == NFS_ST_DELEG)
		NFS_LIST_ADD(nfs_deleg_bucket(srv, fh), st, deleg_next,
			     deleg_pprev);
	NFS_LIST_ADD(&clp->states, st, clp_next, clp_pprev);
	clp->nstates++;
	srv->nstates++;
	return st;
}

static void locks_free(struct nfs_state *st)
{
	struct nfs_lock_range *l, *n;

	for (l = st->locks; l; l = n) {
		n = l->next;
		free(l);
	}
	st->locks = NULL;
}

void nfs_state_free(struct nfs_server *srv, struct nfs_state *st)
{
	struct nfs_state *o;

	/* an open's lock states go with it */
	while ((o = st->lock_states))
		nfs_state_free(srv, o);
	NFS_LIST_DEL(st, sid_next, sid_pprev);
	NFS_LIST_DEL(st, file_next, file_pprev);
	NFS_LIST_DEL(st, deleg_next, deleg_pprev);
	NFS_LIST_DEL(st, clp_next, clp_pprev);
	NFS_LIST_DEL(st, lock_next, lock_pprev);
	if (st->type == NFS_ST_DELEG && st->revoked)
		st->clp->nrevoked--;
	locks_free(st);
	nfs_cb_call_put(srv, st->recall);
	st->clp->nstates--;
	srv->nstates--;
	free(st);
}

void nfs_states_of_client_free(struct nfs_server *srv,
			       struct nfs_client *clp)
{
	struct nfs_state *st;

	/* from the head each time: freeing an open frees its locks too */
	while ((st = clp->states))
		nfs_state_free(srv, st);
}

void nfs_get_stateid(struct nfs_compound *c, struct xdr_dec *a,
		     struct nfs_stateid *sid)
{
	sid->seqid = xdr_get_u32(a);
	xdr_get_fixed(a, sid->other, NFS4_OTHER_SIZE);
	/* 4.1's "current stateid": seqid 1, other zero */
	if (c->minor && sid->seqid == 1 &&
	    !memcmp(sid->other, zeros, NFS4_OTHER_SIZE) && c->has_csid)
		*sid = c->csid;
}

void nfs_put_stateid(struct xdr_enc *r, const struct nfs_stateid *sid)
{
	xdr_put_u32(r, sid->seqid);
	xdr_put_fixed(r, sid->other, NFS4_OTHER_SIZE);
}

static void set_current(struct nfs_compound *c, const struct nfs_stateid *s)
{
	c->csid = *s;
	c->has_csid = true;
}

static bool special(const struct nfs_stateid *sid)
{
	return !memcmp(sid->other, zeros, NFS4_OTHER_SIZE) ||
	       !memcmp(sid->other, ones, NFS4_OTHER_SIZE);
}

uint32_t nfs_state_find(struct nfs_compound *c,
			const struct nfs_stateid *sid, struct nfs_state **out)
{
	struct nfs_state *st;

	*out = NULL;
	if (special(sid))
		return NFS4ERR_BAD_STATEID;
	st = state_by_other(c->srv, sid->other);
	if (!st) {
		if (xdr_be32(sid->other) != c->srv->boot_tag)
			return c->minor ? NFS4ERR_BAD_STATEID :
			       NFS4ERR_STALE_STATEID;
		return NFS4ERR_BAD_STATEID;
	}
	if (!(c->minor && sid->seqid == 0)) {
		if (sid->seqid < st->sid.seqid)
			return NFS4ERR_OLD_STATEID;
		if (sid->seqid > st->sid.seqid)
			return NFS4ERR_BAD_STATEID;
	}
	if (c->minor && c->sess && st->clp != c->sess->clp)
		return NFS4ERR_BAD_STATEID;
	st->clp->renewed = nfs_now();
	*out = st;
	/* kept for FREE_STATEID (RFC 8881 8.2.4, 10.2.1) */
	if (st->type == NFS_ST_DELEG && st->revoked)
		return NFS4ERR_DELEG_REVOKED;
	return NFS4_OK;
}

uint32_t nfs_state_check_io(struct nfs_compound *c,
			    const struct nfs_stateid *sid, uint32_t access)
{
	struct nfs_state *st, *o;
	uint32_t r;

	if (special(sid)) {
		if (sid->seqid != 0 && sid->seqid != 0xffffffffu)
			return NFS4ERR_BAD_STATEID;
		/* anonymous I/O: refused only by a deny of an open */
		for (o = nfs_file_states(c->srv, &c->cfh); o; o = o->file_next)
			if (o->type == NFS_ST_OPEN &&
			    nfs_fh_equal(&o->fh, &c->cfh) &&
			    (o->deny & access))
				return NFS4ERR_LOCKED;
		return nfs_deleg_break_cur(c, access &
					   OPEN4_SHARE_ACCESS_WRITE);
	}
	r = nfs_state_find(c, sid, &st);
	if (r)
		return r;
	if (!nfs_fh_equal(&st->fh, &c->cfh))
		return NFS4ERR_BAD_STATEID;
	r = nfs_deleg_break(c, st->clp, &c->cfh,
			    access & OPEN4_SHARE_ACCESS_WRITE);
	if (r)
		return r;
	if (st->type == NFS_ST_LOCK)
		st = st->open;
	if (!st)
		return NFS4ERR_BAD_STATEID;
	if ((access & OPEN4_SHARE_ACCESS_WRITE) &&
	    !(st->access & OPEN4_SHARE_ACCESS_WRITE))
		return NFS4ERR_OPENMODE;
	return NFS4_OK;
}

/* ---- OPEN ---------------------------------------------------------------- */

static void put_cinfo(struct xdr_enc *r, uint64_t before, uint64_t after)
{
	nfs_put_change_info(r, before, after);
}

static uint32_t open_type_check(struct nfs_compound *c, uint32_t type)
{
	if (type == NF4REG)
		return NFS4_OK;
	if (type == NF4DIR)
		return NFS4ERR_ISDIR;
	if (type == NF4LNK)
		return NFS4ERR_SYMLINK;
	return c->minor ? NFS4ERR_WRONG_TYPE : NFS4ERR_INVAL;
}

/* the exclusive-create verifier, kept in the file's times */
/* Another owner's open of @fh denies @access, or is denied by @deny. */
static bool share_denied(struct nfs_server *srv,
			 const struct nfs_client *clp,
			 const struct nfs_fh *fh, const uint8_t *owner,
			 uint32_t olen, uint32_t access, uint32_t deny)
{
	const struct nfs_state *o;

	for (o = nfs_file_states(srv, fh); o; o = o->file_next) {
		if (o->type != NFS_ST_OPEN || !nfs_fh_equal(&o->fh, fh))
			continue;
		if (o->clp == clp && o->owner_len == olen &&
		    !memcmp(o->owner, owner, olen))
			continue;
		if ((access & o->deny) || (deny & o->access))
			return true;
	}
	return false;
}

static void verf_to_times(const uint8_t *v, struct nfs_sattr *sa)
{
	sa->mask |= NFS_SA_ATIME | NFS_SA_MTIME;
	sa->atime.tv_sec = xdr_be32(v);
	sa->atime.tv_nsec = 0;
	sa->mtime.tv_sec = xdr_be32(v + 4);
	sa->mtime.tv_nsec = 0;
}

static bool verf_matches(const uint8_t *v, const struct nfs_attr *at)
{
	return (uint32_t)at->atime.tv_sec == xdr_be32(v) &&
	       (uint32_t)at->mtime.tv_sec == xdr_be32(v + 4);
}

uint32_t nfs_op_open(struct nfs_compound *c, struct xdr_dec *a,
		     struct xdr_enc *r)
{
	struct nfs_server *srv = c->srv;
	struct nfs_backend *be = &srv->be;
	uint32_t access, deny, olen, opentype, mode = 0, claim, st, dtype, want;
	uint32_t set[NFS4_BITMAP_WORDS] = { 0 };
	uint8_t verf[NFS4_VERIFIER_SIZE];
	const uint8_t *owner;
	uint64_t clientid;
	struct nfs_sattr sa;
	struct nfs_attr dir, at, dir_after;
	struct nfs_client *clp;
	struct nfs_state *s, *o;
	struct nfs_fh fh;
	char name[NFS_NAME_MAX + 1];
	bool created = false;
	int err;

	memset(&sa, 0, sizeof(sa));
	xdr_get_u32(a);				/* seqid (4.0) */
	access = xdr_get_u32(a);
	deny = xdr_get_u32(a);
	clientid = xdr_get_u64(a);
	owner = xdr_get_opaque_ref(a, &olen, NFS4_OPAQUE_LIMIT);
	opentype = xdr_get_u32(a);
	if (opentype == OPEN4_CREATE) {
		mode = xdr_get_u32(a);
		if (mode == UNCHECKED4 || mode == GUARDED4) {
			st = nfs_decode_sattr(c, a, &sa, set);
			if (st)
				return st;
		} else if (mode == EXCLUSIVE4) {
			xdr_get_fixed(a, verf, sizeof(verf));
		} else if (mode == EXCLUSIVE4_1 && c->minor) {
			xdr_get_fixed(a, verf, sizeof(verf));
			st = nfs_decode_sattr(c, a, &sa, set);
			if (st)
				return st;
		} else {
			return NFS4ERR_BADXDR;
		}
	} else if (opentype != OPEN4_NOCREATE) {
		return NFS4ERR_BADXDR;
	}
	claim = xdr_get_u32(a);
	name[0] = 0;
	switch (claim) {
	case CLAIM_NULL:
		st = nfs_get_name(a, name);
		if (st)
			return st;
		break;
	case CLAIM_PREVIOUS:
		dtype = xdr_get_u32(a);
		(void)dtype;
		break;
	case CLAIM_FH:
		if (!c->minor)
			return NFS4ERR_BADXDR;
		break;
	case CLAIM_DELEGATE_CUR:
		xdr_skip(a, NFS4_STATEID_SIZE);
		st = nfs_get_name(a, name);
		return st ? st : NFS4ERR_RECLAIM_BAD;
	case CLAIM_DELEGATE_PREV:
		st = nfs_get_name(a, name);
		return st ? st : NFS4ERR_NOTSUPP;
	case CLAIM_DELEG_CUR_FH:
		xdr_skip(a, NFS4_STATEID_SIZE);
		return xdr_dec_err(a) ? NFS4ERR_BADXDR : NFS4ERR_BAD_STATEID;
	case CLAIM_DELEG_PREV_FH:
		return NFS4ERR_NOTSUPP;
	default:
		return NFS4ERR_BADXDR;
	}
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = nfs_need_fh(c);
	if (st)
		return st;
	if (!(access & OPEN4_SHARE_ACCESS_BOTH) ||
	    (access & ~(OPEN4_SHARE_ACCESS_BOTH |
			OPEN4_SHARE_ACCESS_WANT_DELEG_MASK |
			OPEN4_SHARE_ACCESS_WANT_SIGNAL_DELEG_WHEN_RESRC_AVAIL |
			OPEN4_SHARE_ACCESS_WANT_PUSH_DELEG_WHEN_UNCONTENDED |
			/* RFC 9754's, not offered (open_arguments): ignored */
			OPEN4_SHARE_ACCESS_WANT_DELEG_TIMESTAMPS |
			OPEN4_SHARE_ACCESS_WANT_OPEN_XOR_DELEGATION)) ||
	    deny > OPEN4_SHARE_DENY_BOTH)
		return NFS4ERR_INVAL;
	if (!c->minor && (access & ~OPEN4_SHARE_ACCESS_BOTH))
		return NFS4ERR_INVAL;
	want = access & OPEN4_SHARE_ACCESS_WANT_DELEG_MASK;
	access &= OPEN4_SHARE_ACCESS_BOTH;
	if (c->minor) {
		clp = c->sess->clp;
	} else {
		clp = nfs_client_find(srv, clientid);
		if (!clp || !clp->confirmed)
			return NFS4ERR_STALE_CLIENTID;
		clp->renewed = nfs_now();
	}
	if (claim == CLAIM_PREVIOUS) {
		if (!nfs_in_grace(srv) || clp->reclaim_done)
			return NFS4ERR_NO_GRACE;
		return NFS4ERR_RECLAIM_BAD;
	}
	if (nfs_in_grace(srv) || (c->minor && !clp->reclaim_done))
		return NFS4ERR_GRACE;
	/* at the state limits: refused before anything is created or
	 * truncated (an open that would add no state is refused too) */
	if (clp->nstates >= NFS_MAX_CLIENT_STATES ||
	    srv->nstates >= NFS_MAX_STATES)
		return c->minor ? NFS4ERR_SERVERFAULT : NFS4ERR_RESOURCE;

	if (claim == CLAIM_FH) {
		st = nfs_cur_attr(c, &at);
		if (st)
			return st;
		st = open_type_check(c, at.type);
		if (st)
			return st;
		fh = c->cfh;
		dir.change = dir_after.change = 0;
		if (opentype == OPEN4_CREATE)
			return NFS4ERR_INVAL;
		st = nfs_deleg_break(c, clp, &fh,
				     access & OPEN4_SHARE_ACCESS_WRITE);
		if (st)
			return st;
	} else {
		st = nfs_cur_attr(c, &dir);
		if (st)
			return st;
		if (dir.type != NF4DIR)
			return dir.type == NF4LNK ? NFS4ERR_SYMLINK :
			       NFS4ERR_NOTDIR;
		err = be->ops->lookup(be, &c->cfh, name, &fh);
		if (err && err != -ENOENT)
			return nfs_errno(err);
		if (err == -ENOENT) {
			if (opentype != OPEN4_CREATE)
				return NFS4ERR_NOENT;
			if (mode == EXCLUSIVE4 || mode == EXCLUSIVE4_1) {
				if (mode == EXCLUSIVE4_1 &&
				    (sa.mask & (NFS_SA_ATIME | NFS_SA_MTIME)))
					return NFS4ERR_INVAL;
				verf_to_times(verf, &sa);
			}
			err = be->ops->create(be, &c->cfh, name, NF4REG,
					      (sa.mask & NFS_SA_MODE) ?
					      sa.mode : 0644, NULL, 0, 0, true,
					      &fh);
			if (err)
				return nfs_errno(err);
			created = true;
			sa.mask &= ~NFS_SA_MODE;
			if (sa.mask) {
				err = be->ops->setattr(be, &fh, &sa);
				if (err)
					return nfs_errno(err);
			}
			if (mode == EXCLUSIVE4 || mode == EXCLUSIVE4_1) {
				memset(set, 0, sizeof(set));
				if (mode == EXCLUSIVE4_1 &&
				    (sa.mask & NFS_SA_MODE))
					set[1] |= 1u << (FATTR4_MODE - 32);
			}
		} else {
			err = be->ops->getattr(be, &fh, &at);
			if (err)
				return nfs_errno(err);
			if (opentype == OPEN4_CREATE) {
				if (mode == GUARDED4)
					return NFS4ERR_EXIST;
				if ((mode == EXCLUSIVE4 ||
				     mode == EXCLUSIVE4_1) &&
				    (at.type != NF4REG ||
				     !verf_matches(verf, &at)))
					return NFS4ERR_EXIST;
			}
			st = open_type_check(c, at.type);
			if (st)
				return st;
			st = nfs_deleg_break(c, clp, &fh, (access &
					     OPEN4_SHARE_ACCESS_WRITE) ||
					     (sa.mask & NFS_SA_SIZE));
			if (st)
				return st;
			if (opentype == OPEN4_CREATE && mode == UNCHECKED4 &&
			    (sa.mask & NFS_SA_SIZE) && sa.size == 0) {
				struct nfs_sattr t = { .mask = NFS_SA_SIZE };

				/* denied opens truncate nothing */
				if (share_denied(srv, clp, &fh, owner, olen,
						 access, deny))
					return NFS4ERR_SHARE_DENIED;

				err = be->ops->setattr(be, &fh, &t);
				if (err)
					return nfs_errno(err);
			} else {
				memset(set, 0, sizeof(set));
			}
		}
		err = be->ops->getattr(be, &c->cfh, &dir_after);
		if (err)
			dir_after.change = dir.change;
	}
	(void)created;
	/* share reservations of other owners */
	if (share_denied(srv, clp, &fh, owner, olen, access, deny))
		return NFS4ERR_SHARE_DENIED;
	s = NULL;
	for (o = nfs_file_states(srv, &fh); o && !s; o = o->file_next)
		if (o->type == NFS_ST_OPEN && nfs_fh_equal(&o->fh, &fh) &&
		    o->clp == clp && o->owner_len == olen &&
		    !memcmp(o->owner, owner, olen))
			s = o;
	if (s) {
		s->access |= access;
		s->deny |= deny;
		s->sid.seqid++;
	} else {
		s = nfs_state_new(srv, clp, NFS_ST_OPEN, &fh, owner, olen);
		if (!s)
			return NFS4ERR_SERVERFAULT;
		s->access = access;
		s->deny = deny;
		s->confirmed = true;
	}
	c->cfh = fh;
	set_current(c, &s->sid);
	nfs_put_stateid(r, &s->sid);
	put_cinfo(r, dir.change, dir_after.change);
	xdr_put_u32(r, OPEN4_RESULT_LOCKTYPE_POSIX);
	nfs_put_bitmap(r, set, NFS4_BITMAP_WORDS);
	nfs_deleg_open(c, clp, &fh, access, want, r);
	return NFS4_OK;
}

uint32_t nfs_op_open_confirm(struct nfs_compound *c, struct xdr_dec *a,
			     struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_state *s;
	uint32_t st;

	nfs_get_stateid(c, a, &sid);
	xdr_get_u32(a);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = nfs_need_fh(c);
	if (!st)
		st = nfs_state_find(c, &sid, &s);
	if (st)
		return st;
	if (s->type != NFS_ST_OPEN)
		return NFS4ERR_BAD_STATEID;
	s->sid.seqid++;
	nfs_put_stateid(r, &s->sid);
	return NFS4_OK;
}

uint32_t nfs_state_find_cur(struct nfs_compound *c,
			    const struct nfs_stateid *sid,
			    enum nfs_state_type type, struct nfs_state **s)
{
	uint32_t st = nfs_need_fh(c);

	if (!st)
		st = nfs_state_find(c, sid, s);
	if (st)
		return st;
	if ((*s)->type != type)
		return NFS4ERR_BAD_STATEID;
	if (!nfs_fh_equal(&(*s)->fh, &c->cfh))
		return NFS4ERR_BAD_STATEID;
	return NFS4_OK;
}

static uint32_t find_open(struct nfs_compound *c, const struct nfs_stateid *sid,
			  struct nfs_state **s)
{
	return nfs_state_find_cur(c, sid, NFS_ST_OPEN, s);
}

uint32_t nfs_op_open_downgrade(struct nfs_compound *c, struct xdr_dec *a,
			       struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_state *s;
	uint32_t st, access, deny;

	nfs_get_stateid(c, a, &sid);
	xdr_get_u32(a);
	access = xdr_get_u32(a) & ~OPEN4_SHARE_ACCESS_WANT_DELEG_MASK;
	deny = xdr_get_u32(a);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = find_open(c, &sid, &s);
	if (st)
		return st;
	if (!access || (access & ~s->access) || (deny & ~s->deny) ||
	    access > OPEN4_SHARE_ACCESS_BOTH)
		return NFS4ERR_INVAL;
	s->access = access;
	s->deny = deny;
	s->sid.seqid++;
	set_current(c, &s->sid);
	nfs_put_stateid(r, &s->sid);
	return NFS4_OK;
}

uint32_t nfs_op_close(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_state *s, *o;
	uint32_t st;

	xdr_get_u32(a);
	nfs_get_stateid(c, a, &sid);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = find_open(c, &sid, &s);
	if (st)
		return st;
	if (c->minor)
		for (o = s->lock_states; o; o = o->lock_next)
			if (o->locks)
				return NFS4ERR_LOCKS_HELD;
	sid = s->sid;
	sid.seqid++;
	nfs_state_free(c->srv, s);
	if (c->minor) {
		/* RFC 8881 18.2.4: a special invalid stateid back */
		sid.seqid = 0xffffffffu;
		memset(sid.other, 0, NFS4_OTHER_SIZE);
	}
	nfs_put_stateid(r, &sid);
	return NFS4_OK;
}

/* ---- byte-range locks ---------------------------------------------------- */

static uint64_t range_end(uint64_t off, uint64_t len)
{
	return len == UINT64_MAX || off + len < off ? UINT64_MAX :
	       off + len - 1;
}

static bool overlaps(uint64_t o1, uint64_t l1, uint64_t o2, uint64_t l2)
{
	return o1 <= range_end(o2, l2) && o2 <= range_end(o1, l1);
}

static uint32_t check_range(uint64_t off, uint64_t len)
{
	if (!len)
		return NFS4ERR_INVAL;
	if (len != UINT64_MAX && off + len < off)
		return NFS4ERR_INVAL;
	return NFS4_OK;
}

/* a conflicting lock of another owner, or NULL */
static struct nfs_lock_range *conflict(struct nfs_server *srv,
				       const struct nfs_fh *fh,
				       struct nfs_client *clp,
				       const uint8_t *owner, uint32_t olen,
				       uint32_t type, uint64_t off,
				       uint64_t len, struct nfs_state **by)
{
	struct nfs_state *s;
	struct nfs_lock_range *l;
	bool write = type == WRITE_LT || type == WRITEW_LT;

	for (s = nfs_file_states(srv, fh); s; s = s->file_next) {
		if (s->type != NFS_ST_LOCK || !nfs_fh_equal(&s->fh, fh))
			continue;
		if (s->clp == clp && s->owner_len == olen &&
		    !memcmp(s->owner, owner, olen))
			continue;
		for (l = s->locks; l; l = l->next)
			if (overlaps(l->off, l->len, off, len) &&
			    (write || l->type == WRITE_LT)) {
				*by = s;
				return l;
			}
	}
	return NULL;
}

static void put_denied(struct xdr_enc *r, const struct nfs_lock_range *l,
		       const struct nfs_state *s)
{
	xdr_put_u64(r, l->off);
	xdr_put_u64(r, l->len);
	xdr_put_u32(r, l->type);
	xdr_put_u64(r, s->clp->clientid);
	xdr_put_opaque(r, s->owner, s->owner_len, NFS4_OPAQUE_LIMIT);
}

/* remove [off, off+len) from st's ranges, splitting as POSIX does */
static int unlock_range(struct nfs_state *st, uint64_t off, uint64_t len)
{
	struct nfs_lock_range **pp = &st->locks, *l;
	uint64_t end = range_end(off, len);

	while ((l = *pp)) {
		uint64_t lend = range_end(l->off, l->len);

		if (!overlaps(l->off, l->len, off, len)) {
			pp = &l->next;
			continue;
		}
		if (l->off < off && lend > end) {
			struct nfs_lock_range *tail = malloc(sizeof(*tail));

			if (!tail)
				return -ENOMEM;
			*tail = *l;
			tail->off = end + 1;
			tail->len = lend == UINT64_MAX ? UINT64_MAX :
				    lend - end;
			l->len = off - l->off;
			tail->next = l->next;
			l->next = tail;
			return 0;
		}
		if (l->off < off) {
			l->len = off - l->off;
			pp = &l->next;
		} else if (lend > end) {
			l->len = lend == UINT64_MAX ? UINT64_MAX :
				 lend - end;
			l->off = end + 1;
			pp = &l->next;
		} else {
			*pp = l->next;
			free(l);
		}
	}
	return 0;
}

static uint32_t lock_file_check(struct nfs_compound *c)
{
	struct nfs_attr at;
	uint32_t st = nfs_cur_attr(c, &at);

	if (st)
		return st;
	if (at.type == NF4DIR)
		return NFS4ERR_ISDIR;
	if (at.type != NF4REG)
		return c->minor ? NFS4ERR_WRONG_TYPE : NFS4ERR_INVAL;
	return NFS4_OK;
}

uint32_t nfs_op_lock(struct nfs_compound *c, struct xdr_dec *a,
		     struct xdr_enc *r)
{
	struct nfs_server *srv = c->srv;
	uint32_t type, st, olen = 0;
	uint64_t off, len, clientid = 0;
	bool reclaim, newowner, fresh = false;
	struct nfs_stateid osid, lsid;
	const uint8_t *owner = NULL;
	struct nfs_state *open, *lst = NULL, *by, *s;
	struct nfs_lock_range *l;

	type = xdr_get_u32(a);
	reclaim = xdr_get_bool(a);
	off = xdr_get_u64(a);
	len = xdr_get_u64(a);
	newowner = xdr_get_bool(a);
	if (newowner) {
		xdr_get_u32(a);
		nfs_get_stateid(c, a, &osid);
		xdr_get_u32(a);
		clientid = xdr_get_u64(a);
		owner = xdr_get_opaque_ref(a, &olen, NFS4_OPAQUE_LIMIT);
	} else {
		nfs_get_stateid(c, a, &lsid);
		xdr_get_u32(a);
	}
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	(void)clientid;
	if (type < READ_LT || type > WRITEW_LT)
		return NFS4ERR_INVAL;
	st = nfs_need_fh(c);
	if (!st)
		st = lock_file_check(c);
	if (!st)
		st = check_range(off, len);
	if (st)
		return st;
	if (reclaim)
		return nfs_in_grace(srv) ? NFS4ERR_RECLAIM_BAD :
		       NFS4ERR_NO_GRACE;
	if (nfs_in_grace(srv))
		return NFS4ERR_GRACE;
	if (newowner) {
		st = find_open(c, &osid, &open);
		if (st)
			return st;
		for (s = open->lock_states; s; s = s->lock_next)
			if (s->owner_len == olen &&
			    !memcmp(s->owner, owner, olen))
				lst = s;
		if (!lst) {
			lst = nfs_state_new(srv, open->clp, NFS_ST_LOCK,
					    &c->cfh, owner, olen);
			if (!lst)
				return NFS4ERR_SERVERFAULT;
			lst->open = open;
			NFS_LIST_ADD(&open->lock_states, lst, lock_next,
				     lock_pprev);
			fresh = true;
		}
	} else {
		st = nfs_state_find(c, &lsid, &lst);
		if (st)
			return st;
		if (lst->type != NFS_ST_LOCK ||
		    !nfs_fh_equal(&lst->fh, &c->cfh))
			return NFS4ERR_BAD_STATEID;
		open = lst->open;
	}
	if ((type == WRITE_LT || type == WRITEW_LT) &&
	    !(open->access & OPEN4_SHARE_ACCESS_WRITE))
		return NFS4ERR_OPENMODE;
	if ((type == READ_LT || type == READW_LT) &&
	    !(open->access & OPEN4_SHARE_ACCESS_READ))
		return NFS4ERR_OPENMODE;
	l = conflict(srv, &c->cfh, lst->clp, lst->owner, lst->owner_len,
		     type, off, len, &by);
	if (l) {
		if (!lst->locks && newowner)
			nfs_state_free(srv, lst);
		put_denied(r, l, by);
		c->keep_body = true;
		return NFS4ERR_DENIED;
	}
	{
		/* the unlock below may split one range, then one more */
		const struct nfs_lock_range *k;
		unsigned n = 0;

		for (k = lst->locks; k; k = k->next)
			n++;
		if (n + 2 > NFS_MAX_LOCK_RANGES) {
			if (!lst->locks && newowner)
				nfs_state_free(srv, lst);
			return c->minor ? NFS4ERR_SERVERFAULT
					: NFS4ERR_RESOURCE;
		}
	}
	if (unlock_range(lst, off, len))
		return NFS4ERR_SERVERFAULT;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NFS4ERR_SERVERFAULT;
	l->off = off;
	l->len = len;
	l->type = (type == READ_LT || type == READW_LT) ? READ_LT : WRITE_LT;
	l->next = lst->locks;
	lst->locks = l;
	if (!fresh)
		lst->sid.seqid++;	/* a new lock stateid starts at 1 */
	set_current(c, &lst->sid);
	nfs_put_stateid(r, &lst->sid);
	return NFS4_OK;
}

uint32_t nfs_op_lockt(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	uint32_t type, olen, st;
	uint64_t off, len, clientid;
	const uint8_t *owner;
	struct nfs_client *clp;
	struct nfs_lock_range *l;
	struct nfs_state *by;

	type = xdr_get_u32(a);
	off = xdr_get_u64(a);
	len = xdr_get_u64(a);
	clientid = xdr_get_u64(a);
	owner = xdr_get_opaque_ref(a, &olen, NFS4_OPAQUE_LIMIT);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (type < READ_LT || type > WRITEW_LT)
		return NFS4ERR_INVAL;
	st = nfs_need_fh(c);
	if (!st)
		st = lock_file_check(c);
	if (!st)
		st = check_range(off, len);
	if (st)
		return st;
	if (c->minor) {
		clp = c->sess->clp;
	} else {
		clp = nfs_client_find(c->srv, clientid);
		if (!clp)
			return NFS4ERR_STALE_CLIENTID;
	}
	if (nfs_in_grace(c->srv))
		return NFS4ERR_GRACE;
	l = conflict(c->srv, &c->cfh, clp, owner, olen, type, off, len, &by);
	if (l) {
		put_denied(r, l, by);
		c->keep_body = true;
		return NFS4ERR_DENIED;
	}
	return NFS4_OK;
}

uint32_t nfs_op_locku(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_state *s;
	uint32_t type, st;
	uint64_t off, len;

	type = xdr_get_u32(a);
	xdr_get_u32(a);
	nfs_get_stateid(c, a, &sid);
	off = xdr_get_u64(a);
	len = xdr_get_u64(a);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (type < READ_LT || type > WRITEW_LT)
		return NFS4ERR_INVAL;
	st = nfs_need_fh(c);
	if (!st)
		st = lock_file_check(c);
	if (!st)
		st = nfs_state_find(c, &sid, &s);
	if (!st && (s->type != NFS_ST_LOCK || !nfs_fh_equal(&s->fh, &c->cfh)))
		st = NFS4ERR_BAD_STATEID;
	if (!st)
		st = check_range(off, len);
	if (st)
		return st;
	if (unlock_range(s, off, len))
		return NFS4ERR_SERVERFAULT;
	s->sid.seqid++;
	set_current(c, &s->sid);
	nfs_put_stateid(r, &s->sid);
	return NFS4_OK;
}

/* ---- TEST_STATEID, FREE_STATEID, RELEASE_LOCKOWNER ----------------------- */

uint32_t nfs_op_test_stateid(struct nfs_compound *c, struct xdr_dec *a,
			     struct xdr_enc *r)
{
	uint32_t n = xdr_get_u32(a), i;
	struct nfs_stateid *v;
	struct nfs_state *s;

	if (xdr_dec_err(a) || n > xdr_dec_left(a) / NFS4_STATEID_SIZE)
		return NFS4ERR_BADXDR;
	v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return NFS4ERR_SERVERFAULT;
	for (i = 0; i < n; i++) {
		v[i].seqid = xdr_get_u32(a);
		xdr_get_fixed(a, v[i].other, NFS4_OTHER_SIZE);
	}
	xdr_put_u32(r, n);
	for (i = 0; i < n; i++)
		xdr_put_u32(r, nfs_state_find(c, &v[i], &s));
	free(v);
	return xdr_dec_err(a) ? NFS4ERR_BADXDR : NFS4_OK;
}

uint32_t nfs_op_free_stateid(struct nfs_compound *c, struct xdr_dec *a,
			     struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_state *s;
	uint32_t st;

	nfs_get_stateid(c, a, &sid);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = nfs_state_find(c, &sid, &s);
	if (st == NFS4ERR_DELEG_REVOKED) {
		/* the client saw the revocation: forget it */
		nfs_state_free(c->srv, s);
		return NFS4_OK;
	}
	if (st)
		return st;
	if (s->type == NFS_ST_OPEN || s->type == NFS_ST_DELEG || s->locks)
		return NFS4ERR_LOCKS_HELD;
	nfs_state_free(c->srv, s);
	return NFS4_OK;
}

uint32_t nfs_op_release_lockowner(struct nfs_compound *c, struct xdr_dec *a,
				  struct xdr_enc *r)
{
	uint64_t id = xdr_get_u64(a);
	uint32_t olen;
	const uint8_t *owner = xdr_get_opaque_ref(a, &olen, NFS4_OPAQUE_LIMIT);
	struct nfs_client *clp;
	struct nfs_state *s, *next;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	clp = nfs_client_find(c->srv, id);
	if (!clp)
		return NFS4_OK;
	for (s = clp->states; s; s = s->clp_next)
		if (s->type == NFS_ST_LOCK && s->owner_len == olen &&
		    !memcmp(s->owner, owner, olen) && s->locks)
			return NFS4ERR_LOCKS_HELD;
	/* freeing a lock state frees nothing else: @next stays */
	for (s = clp->states; s; s = next) {
		next = s->clp_next;
		if (s->type == NFS_ST_LOCK && s->owner_len == olen &&
		    !memcmp(s->owner, owner, olen))
			nfs_state_free(c->srv, s);
	}
	return NFS4_OK;
}
