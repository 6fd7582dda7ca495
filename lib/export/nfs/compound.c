/* SPDX-License-Identifier: MIT */
/*
 * COMPOUND (RFC 8881 16.2, 7530 for minor version 0): the op table (op
 * number -> handler; each handler decodes its arguments and encodes its
 * result body), the rules of the sessions (SEQUENCE first, ops that may
 * run without it and must then be alone, the reply cache), and the reply:
 * status, tag, one result per op up to the first that failed.
 *
 * A COMPOUND is a struct nfs_run, so that it can stop at an op and go on
 * later: first tried on the connection's I/O thread (nowait: the lock
 * only if free, ops only that cannot block), then, from the op that would
 * have blocked, on a worker, with what came before kept as it was (a
 * SEQUENCE's slot taken once, the current filehandle, results encoded).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export/nfs/nfs.h"

enum {
	F_V40 = 1 << 0,		/* 4.0 only: NOTSUPP from 4.1 on */
	F_SOLO = 1 << 1,	/* 4.1: may come without SEQUENCE, alone */
	F_SEQ = 1 << 2,		/* SEQUENCE itself */
	F_NOSTOP = 1 << 3,
	/*
	 * may run on a connection's I/O thread (nfs_compound_run's nowait):
	 * never blocks (protocol state, handles, an inode's attributes the
	 * kernel holds) or says NFS_OP_BLOCK itself before changing anything
	 */
	F_INLINE = 1 << 4,
};

struct op_desc {
	nfs_op_fn fn;
	uint8_t min_minor;	/* the first minor version defining it */
	uint8_t flags;
};

#define OP(num, f, m, fl) [num] = { .fn = (f), .min_minor = (m), .flags = (fl) }

static const struct op_desc ops[NFS4_OP_LAST + 1] = {
	OP(OP_ACCESS, nfs_op_access, 0, 0),
	OP(OP_CLOSE, nfs_op_close, 0, 0),
	OP(OP_COMMIT, nfs_op_commit, 0, 0),
	OP(OP_CREATE, nfs_op_create, 0, 0),
	OP(OP_DELEGPURGE, NULL, 0, 0),
	OP(OP_DELEGRETURN, nfs_op_delegreturn, 0, 0),
	OP(OP_GETATTR, nfs_op_getattr, 0, F_INLINE),
	OP(OP_GETFH, nfs_op_getfh, 0, F_INLINE),
	OP(OP_LINK, nfs_op_link, 0, 0),
	OP(OP_LOCK, nfs_op_lock, 0, 0),
	OP(OP_LOCKT, nfs_op_lockt, 0, 0),
	OP(OP_LOCKU, nfs_op_locku, 0, 0),
	OP(OP_LOOKUP, nfs_op_lookup, 0, 0),
	OP(OP_LOOKUPP, nfs_op_lookupp, 0, 0),
	OP(OP_NVERIFY, nfs_op_nverify, 0, 0),
	OP(OP_OPEN, nfs_op_open, 0, 0),
	OP(OP_OPENATTR, NULL, 0, 0),
	OP(OP_OPEN_CONFIRM, nfs_op_open_confirm, 0, F_V40),
	OP(OP_OPEN_DOWNGRADE, nfs_op_open_downgrade, 0, 0),
	OP(OP_PUTFH, nfs_op_putfh, 0, F_INLINE),
	OP(OP_PUTPUBFH, nfs_op_putpubfh, 0, 0),
	OP(OP_PUTROOTFH, nfs_op_putrootfh, 0, 0),
	OP(OP_READ, nfs_op_read, 0, F_INLINE),
	OP(OP_READDIR, nfs_op_readdir, 0, 0),
	OP(OP_READLINK, nfs_op_readlink, 0, 0),
	OP(OP_REMOVE, nfs_op_remove, 0, 0),
	OP(OP_RENAME, nfs_op_rename, 0, 0),
	OP(OP_RENEW, nfs_op_renew, 0, F_V40),
	OP(OP_RESTOREFH, nfs_op_restorefh, 0, F_INLINE),
	OP(OP_SAVEFH, nfs_op_savefh, 0, F_INLINE),
	OP(OP_SECINFO, nfs_op_secinfo, 0, 0),
	OP(OP_SETATTR, nfs_op_setattr, 0, 0),
	OP(OP_SETCLIENTID, nfs_op_setclientid, 0, F_V40),
	OP(OP_SETCLIENTID_CONFIRM, nfs_op_setclientid_confirm, 0, F_V40),
	OP(OP_VERIFY, nfs_op_verify, 0, 0),
	OP(OP_WRITE, nfs_op_write, 0, F_INLINE),
	OP(OP_RELEASE_LOCKOWNER, nfs_op_release_lockowner, 0, F_V40),
	OP(OP_BACKCHANNEL_CTL, nfs_op_backchannel_ctl, 1, 0),
	OP(OP_BIND_CONN_TO_SESSION, nfs_op_bind_conn, 1, F_SOLO),
	OP(OP_EXCHANGE_ID, nfs_op_exchange_id, 1, F_SOLO),
	OP(OP_CREATE_SESSION, nfs_op_create_session, 1, F_SOLO),
	OP(OP_DESTROY_SESSION, nfs_op_destroy_session, 1, F_SOLO),
	OP(OP_FREE_STATEID, nfs_op_free_stateid, 1, 0),
	OP(OP_GET_DIR_DELEGATION, NULL, 1, 0),
	OP(OP_GETDEVICEINFO, NULL, 1, 0),
	OP(OP_GETDEVICELIST, NULL, 1, 0),
	OP(OP_LAYOUTCOMMIT, NULL, 1, 0),
	OP(OP_LAYOUTGET, NULL, 1, 0),
	OP(OP_LAYOUTRETURN, NULL, 1, 0),
	OP(OP_SECINFO_NO_NAME, nfs_op_secinfo_no_name, 1, 0),
	OP(OP_SEQUENCE, nfs_sequence, 1, F_SEQ | F_INLINE),
	OP(OP_SET_SSV, NULL, 1, 0),
	OP(OP_TEST_STATEID, nfs_op_test_stateid, 1, 0),
	OP(OP_WANT_DELEGATION, NULL, 1, 0),
	OP(OP_DESTROY_CLIENTID, nfs_op_destroy_clientid, 1, F_SOLO),
	OP(OP_RECLAIM_COMPLETE, nfs_op_reclaim_complete, 1, 0),
	OP(OP_ALLOCATE, nfs_op_allocate, 2, 0),
	OP(OP_COPY, NULL, 2, 0),
	OP(OP_COPY_NOTIFY, NULL, 2, 0),
	OP(OP_DEALLOCATE, nfs_op_deallocate, 2, 0),
	OP(OP_IO_ADVISE, NULL, 2, 0),
	OP(OP_LAYOUTERROR, NULL, 2, 0),
	OP(OP_LAYOUTSTATS, NULL, 2, 0),
	OP(OP_OFFLOAD_CANCEL, NULL, 2, 0),
	OP(OP_OFFLOAD_STATUS, NULL, 2, 0),
	OP(OP_READ_PLUS, nfs_op_read_plus, 2, 0),
	OP(OP_SEEK, nfs_op_seek, 2, 0),
	OP(OP_WRITE_SAME, nfs_op_write_same, 2, 0),
	OP(OP_CLONE, NULL, 2, 0),
	OP(OP_GETXATTR, nfs_op_getxattr, 2, 0),
	OP(OP_SETXATTR, nfs_op_setxattr, 2, 0),
	OP(OP_LISTXATTRS, nfs_op_listxattrs, 2, 0),
	OP(OP_REMOVEXATTR, nfs_op_removexattr, 2, 0),
};

void nfs_unlock(struct nfs_compound *c)
{
	if (c->sess)
		memcpy(c->sess_id, c->sess->id, sizeof(c->sess_id));
	pthread_mutex_unlock(&c->srv->lock);
}

uint32_t nfs_relock(struct nfs_compound *c)
{
	pthread_mutex_lock(&c->srv->lock);
	/* DESTROY_SESSION, DESTROY_CLIENTID or the lease may have freed it */
	if (c->sess && nfs_session_find(c->srv, c->sess_id) != c->sess) {
		c->sess = NULL;
		c->slot = NULL;
		return NFS4ERR_BADSESSION;
	}
	return NFS4_OK;
}

/*
 * An op waits for a callback (NFS_OP_WAIT): without the server's lock,
 * so the callback's holder can go on meanwhile. With @locked false the
 * lock was let go already (a run stopped on an I/O thread).
 */
static uint32_t wait_callback(struct nfs_compound *c, bool locked)
{
	uint32_t st;

	if (locked)
		nfs_unlock(c);
	nfs_cb_wait(c->srv, c->wait, NULL);
	st = nfs_relock(c);
	if (st == NFS4_OK)
		c->waited = true;
	return st;
}

/* The op @num of minor version @minor, or NULL when it is not one. */
static const struct op_desc *op_find(uint32_t num, uint32_t minor)
{
	const struct op_desc *d;

	if (num < NFS4_OP_FIRST || num > NFS4_OP_LAST)
		return NULL;
	d = &ops[num];
	if (minor < d->min_minor)
		return NULL;
	return d;
}


int nfs_compound_begin(struct nfs_run *p, struct nfs_server *srv,
		       const struct nfs_cred *cred, uint64_t conn_id,
		       struct xdr_dec *a, struct xdr_enc *r)
{
	struct nfs_compound *c = &p->c;
	const uint8_t *tag;
	uint32_t tag_len, status = NFS4_OK;

	memset(p, 0, sizeof(*p));
	p->a = a;
	p->r = r;
	c->srv = srv;
	c->cred = *cred;
	c->conn_id = conn_id;
	c->req_len = a->len;
	p->start = xdr_enc_len(r);
	tag = xdr_get_opaque_ref(a, &tag_len, NFS4_OPAQUE_LIMIT);
	c->minor = xdr_get_u32(a);
	p->nops = xdr_get_u32(a);
	if (xdr_dec_err(a))
		return -EBADMSG;
	c->nops = p->nops;

	xdr_put_u32(r, 0);			/* status, patched */
	xdr_put_opaque(r, tag, tag_len, NFS4_OPAQUE_LIMIT);
	p->count_at = xdr_enc_len(r);
	xdr_put_u32(r, 0);			/* results, patched */
	if (c->minor > NFS4_MINOR_MAX)
		status = NFS4ERR_MINOR_VERS_MISMATCH;
	else if (p->nops > NFS_MAX_OPS * 4)
		status = c->minor ? NFS4ERR_TOO_MANY_OPS : NFS4ERR_RESOURCE;
	if (status) {
		/* no op runs: the reply is whole now */
		xdr_patch_u32(r, p->start, status);
		p->done = true;
	}
	return xdr_enc_err(r);
}

/*
 * One op @num (of descriptor @d) whose number is encoded: its status,
 * or NFS_OP_BLOCK when it must go on from a worker (nowait). An op that
 * waits for a callback waits here, on a worker; on an I/O thread the
 * run stops and the worker waits before running the op again.
 */
static uint32_t run_op(struct nfs_run *p, const struct op_desc *d,
		       size_t body, bool nowait)
{
	struct nfs_compound *c = &p->c;
	size_t arg_at = p->a->pos;
	uint32_t status;

	if (nowait && !(d->flags & F_INLINE))
		return NFS_OP_BLOCK;
	status = d->fn(c, p->a, p->r);
	if (status == NFS_OP_WAIT && !c->waited) {
		if (nowait)
			return NFS_OP_BLOCK;	/* c->wait kept */
		status = wait_callback(c, true);
		if (status == NFS4_OK) {
			p->a->pos = arg_at;
			xdr_enc_truncate(p->r, body);
			status = d->fn(c, p->a, p->r);
		}
	}
	if (status == NFS_OP_WAIT)
		status = NFS4ERR_DELAY;
	if (status == NFS_OP_BLOCK && !nowait)
		status = NFS4ERR_SERVERFAULT;	/* an op's bug */
	if (c->wait && status != NFS_OP_BLOCK) {
		c->waited = false;
		nfs_cb_call_put(c->srv, c->wait);
		c->wait = NULL;
	}
	return status;
}

/*
 * Take the server's lock for a run: the first time (then expire leases),
 * or again after a run stopped at an op (with its callback waited for
 * first, without the lock). NFS4_OK, or the status the stopped op ends
 * with (BADSESSION: its session went meanwhile); -EAGAIN when @nowait
 * and the lock is held elsewhere.
 */
static int run_lock(struct nfs_run *p, bool nowait, uint32_t *st)
{
	struct nfs_compound *c = &p->c;

	*st = NFS4_OK;
	if (!p->started) {
		if (nowait) {
			if (pthread_mutex_trylock(&c->srv->lock))
				return -EAGAIN;
		} else {
			pthread_mutex_lock(&c->srv->lock);
		}
		p->started = true;
		nfs_expire_clients(c->srv);
		return 0;
	}
	/* resumed: on a worker (a stopped run never resumes nowait) */
	if (c->wait) {
		*st = wait_callback(c, false);
		if (*st) {
			nfs_cb_call_put(c->srv, c->wait);
			c->wait = NULL;
		}
		return 0;
	}
	*st = nfs_relock(c);
	return 0;
}

int nfs_compound_run(struct nfs_run *p, bool nowait)
{
	struct nfs_compound *c = &p->c;
	struct nfs_server *srv = c->srv;
	struct xdr_dec *a = p->a;
	struct xdr_enc *r = p->r;
	size_t start = p->start, op_at;
	uint32_t status = NFS4_OK, pending;

	if (p->done)
		return xdr_enc_err(r);
	if (run_lock(p, nowait, &pending))
		return -EAGAIN;
	c->nowait = nowait;
	for (; p->i < p->nops; p->i++) {
		size_t op_pos = a->pos;
		uint32_t num = xdr_get_u32(a), i = p->i;
		const struct op_desc *d;

		c->opindex = i;
		c->keep_body = false;
		op_at = xdr_enc_len(r);
		if (xdr_dec_err(a)) {
			/* the count promised more ops than came */
			xdr_put_u32(r, OP_ILLEGAL);
			xdr_put_u32(r, status = NFS4ERR_BADXDR);
			p->n++;
			break;
		}
		d = op_find(num, c->minor);
		if (!d) {
			xdr_put_u32(r, OP_ILLEGAL);
			xdr_put_u32(r, status = NFS4ERR_OP_ILLEGAL);
			p->n++;
			break;
		}
		xdr_put_u32(r, num);
		if (c->minor && (d->flags & F_V40))
			status = NFS4ERR_NOTSUPP;
		else if (!d->fn)
			status = NFS4ERR_NOTSUPP;
		else if (c->minor && i == 0 && !(d->flags & (F_SEQ | F_SOLO)))
			status = NFS4ERR_OP_NOT_IN_SESSION;
		else if (c->minor && i > 0 && (d->flags & F_SEQ))
			status = NFS4ERR_SEQUENCE_POS;
		else if (c->minor && i == 0 && (d->flags & F_SOLO) &&
			 p->nops > 1)
			/* 18.34.3, 18.35.3, 18.36.3, 18.37.3: ops without a
			 * SEQUENCE before them come alone; what followed ran
			 * with no session (and read through its NULL) */
			status = NFS4ERR_NOT_ONLY_OP;
		else if (c->minor && i > 0 && !c->sess && !pending)
			/* the session went within this compound (its own
			 * DESTROY_SESSION): nothing runs after it */
			status = NFS4ERR_OP_NOT_IN_SESSION;
		else {
			size_t body = xdr_enc_len(r) + 4;

			xdr_put_u32(r, 0);	/* status, patched */
			if (pending) {
				/* the session went while the run was stopped */
				status = pending;
				pending = NFS4_OK;
			} else {
				status = run_op(p, d, body, nowait);
			}
			if (status == NFS_OP_BLOCK) {
				/* go on from this op on a worker */
				a->pos = op_pos;
				a->err = 0;
				xdr_enc_truncate(r, op_at);
				nfs_unlock(c);
				return -EAGAIN;
			}
			if (status == NFS_SEQ_REPLAY) {
				/* the slot's cached reply, as it was */
				xdr_enc_truncate(r, start);
				xdr_put_fixed(r, c->slot->reply,
					      c->slot->reply_len);
				c->slot = NULL;
				pthread_mutex_unlock(&srv->lock);
				p->done = p->replayed = true;
				return xdr_enc_err(r);
			}
			if (c->sess && status == NFS4_OK &&
			    xdr_enc_len(r) - start > c->sess->max_resp) {
				xdr_enc_truncate(r, op_at);
				xdr_put_u32(r, num);
				xdr_put_u32(r, status = NFS4ERR_REP_TOO_BIG);
				p->n++;
				break;
			}
			/*
			 * sa_cachethis asks for a reply the session's
			 * cache may not hold (RFC 8881 18.46.3)
			 */
			if (c->sess && c->cache_reply && status == NFS4_OK &&
			    xdr_enc_len(r) - start > c->sess->max_resp_cached) {
				xdr_enc_truncate(r, op_at);
				xdr_put_u32(r, num);
				xdr_put_u32(r, status =
					    NFS4ERR_REP_TOO_BIG_TO_CACHE);
				p->n++;
				break;
			}
			if (xdr_enc_err(r) == -ENOSPC) {
				xdr_enc_truncate(r, op_at);
				xdr_put_u32(r, num);
				xdr_put_u32(r, status = c->minor ?
					    NFS4ERR_REP_TOO_BIG :
					    NFS4ERR_RESOURCE);
				p->n++;
				break;
			}
			if (status != NFS4_OK && !c->keep_body)
				xdr_enc_truncate(r, body);
			xdr_patch_u32(r, body - 4, status);
			p->n++;
			if (status != NFS4_OK)
				break;
			continue;
		}
		xdr_put_u32(r, status);
		p->n++;
		break;
	}
	xdr_patch_u32(r, start, status);
	xdr_patch_u32(r, p->count_at, p->n);
	if (c->slot)
		nfs_slot_store(c, r->buf + start, xdr_enc_len(r) - start);
	pthread_mutex_unlock(&srv->lock);
	p->done = true;
	return xdr_enc_err(r);
}

int nfs_compound(struct nfs_server *srv, const struct nfs_cred *cred,
		 uint64_t conn_id, struct xdr_dec *a, struct xdr_enc *r)
{
	struct nfs_run p;
	int err = nfs_compound_begin(&p, srv, cred, conn_id, a, r);

	return err ? err : nfs_compound_run(&p, false);
}
