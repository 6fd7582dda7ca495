/* SPDX-License-Identifier: MIT */
/*
 * ONC RPC for the NFS server (RFC 5531): record marking over TCP, the
 * call header, AUTH_NONE and AUTH_SYS credentials, and the replies that
 * refuse a call (PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS,
 * RPC_MISMATCH, AUTH_ERROR). NULL and COMPOUND of program 100003
 * version 4 go on to compound.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export/nfs/nfs.h"

/* ---- record marking ------------------------------------------------------ */

void nfs_rm_init(struct nfs_rm *rm, size_t max)
{
	memset(rm, 0, sizeof(*rm));
	rm->max = max;
}

void nfs_rm_free(struct nfs_rm *rm)
{
	free(rm->buf);
	rm->buf = NULL;
}

void nfs_rm_next(struct nfs_rm *rm)
{
	rm->len = 0;
	rm->hdr_have = 0;
	rm->in_frag = false;
	rm->last = false;
	rm->ready = false;
	rm->held = false;
}

static int grow(struct nfs_rm *rm, size_t need)
{
	size_t cap = rm->cap ? rm->cap : 4096;
	uint8_t *p;

	if (need <= rm->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	if (cap > rm->max)
		cap = rm->max;
	p = realloc(rm->buf, cap);
	if (!p)
		return -ENOMEM;
	rm->buf = p;
	rm->cap = cap;
	return 0;
}

/* the fragment in hand is complete: the record, if it was the last */
static void frag_end(struct nfs_rm *rm)
{
	if (rm->in_frag && !rm->frag_left) {
		rm->in_frag = false;
		if (rm->last)
			rm->ready = true;
	}
}

/*
 * The fragment whose header was just read: admitted (1: its room made),
 * held at its header until nfs_rm_retry() (0), or -ENOMEM.
 */
static int frag_open(struct nfs_rm *rm)
{
	if (rm->admit && !rm->admit(rm->admit_arg, rm->frag_left)) {
		rm->held = true;
		return 0;
	}
	rm->held = false;
	if (grow(rm, rm->len + rm->frag_left))
		return -ENOMEM;
	rm->in_frag = true;
	frag_end(rm);
	return 1;
}

int nfs_rm_retry(struct nfs_rm *rm)
{
	return rm->held ? frag_open(rm) : 1;
}

long nfs_rm_feed(struct nfs_rm *rm, const uint8_t *p, size_t n)
{
	size_t used = 0;
	int r;

	if (rm->held && (r = frag_open(rm)) <= 0)
		return r;
	while (used < n && !rm->ready) {
		if (!rm->in_frag) {
			uint32_t h;

			rm->hdr[rm->hdr_have++] = p[used++];
			if (rm->hdr_have < 4)
				continue;
			rm->hdr_have = 0;
			h = xdr_be32(rm->hdr);
			rm->last = h & RPC_LAST_FRAG;
			rm->frag_left = h & RPC_FRAG_LEN;
			if (rm->frag_left > rm->max - rm->len)
				return -EMSGSIZE;
			if ((r = frag_open(rm)) < 0)
				return r;
			if (!r)
				break;	/* held: the header is consumed */
		} else {
			size_t k = n - used;

			if (k > rm->frag_left)
				k = rm->frag_left;
			memcpy(rm->buf + rm->len, p + used, k);
			rm->len += k;
			rm->frag_left -= (uint32_t)k;
			used += k;
			frag_end(rm);
		}
	}
	return (long)used;
}

size_t nfs_rm_direct(struct nfs_rm *rm, uint8_t **dst)
{
	/* the fragment's room was reserved when its header came */
	if (rm->ready || !rm->in_frag || !rm->frag_left)
		return 0;
	*dst = rm->buf + rm->len;
	return rm->frag_left;
}

void nfs_rm_direct_done(struct nfs_rm *rm, size_t n)
{
	rm->len += n;
	rm->frag_left -= (uint32_t)n;
	frag_end(rm);
}

/* ---- calls and replies --------------------------------------------------- */

static void reply_head(struct xdr_enc *e, uint32_t xid)
{
	xdr_put_u32(e, xid);
	xdr_put_u32(e, RPC_REPLY);
}

static void accepted(struct xdr_enc *e, uint32_t xid, uint32_t stat)
{
	reply_head(e, xid);
	xdr_put_u32(e, RPC_MSG_ACCEPTED);
	xdr_put_u32(e, RPC_AUTH_NONE);	/* verifier */
	xdr_put_u32(e, 0);
	xdr_put_u32(e, stat);
}

static void denied_auth(struct xdr_enc *e, uint32_t xid, uint32_t why)
{
	reply_head(e, xid);
	xdr_put_u32(e, RPC_MSG_DENIED);
	xdr_put_u32(e, RPC_AUTH_ERROR);
	xdr_put_u32(e, why);
}

/* the credential: AUTH_NONE or AUTH_SYS; else an auth_stat */
static int get_cred(struct xdr_dec *d, struct nfs_cred *cred)
{
	uint32_t flavor = xdr_get_u32(d), len, n;
	const uint8_t *body = xdr_get_opaque_ref(d, &len, RPC_AUTH_MAX);
	struct xdr_dec b;

	if (xdr_dec_err(d))
		return -EBADMSG;
	cred->flavor = flavor;
	cred->uid = cred->gid = 65534;
	if (flavor == RPC_AUTH_NONE)
		return 0;
	if (flavor != RPC_AUTH_SYS)
		return RPC_AUTH_REJECTEDCRED;
	xdr_dec_init(&b, body, len);
	xdr_get_u32(&b);			/* stamp */
	xdr_get_opaque_ref(&b, &n, RPC_AUTHSYS_NAME_MAX);
	cred->uid = xdr_get_u32(&b);
	cred->gid = xdr_get_u32(&b);
	n = xdr_get_u32(&b);
	if (n > RPC_AUTHSYS_GIDS_MAX)
		return RPC_AUTH_BADCRED;
	xdr_skip(&b, (size_t)n * 4);
	if (xdr_dec_err(&b) || xdr_dec_left(&b))
		return RPC_AUTH_BADCRED;
	return 0;
}

int nfs_call_start(struct nfs_call *k, struct nfs_server *srv,
		   uint64_t conn_id, const uint8_t *req, size_t len,
		   uint8_t *out, size_t cap)
{
	struct xdr_dec *d = &k->d;
	struct xdr_enc *e = &k->e;
	struct nfs_cred cred;
	uint32_t xid, type, vers, prog, pvers, proc, vlen;
	int a;

	k->compound = false;
	xdr_dec_init(d, req, len);
	xdr_enc_init(e, out, cap);
	xid = xdr_get_u32(d);
	type = xdr_get_u32(d);
	if (xdr_dec_err(d) || type != RPC_CALL)
		return -EBADMSG;	/* not a call: nothing to answer */
	vers = xdr_get_u32(d);
	prog = xdr_get_u32(d);
	pvers = xdr_get_u32(d);
	proc = xdr_get_u32(d);
	if (xdr_dec_err(d))
		return -EBADMSG;
	if (vers != RPC_VERSION) {
		reply_head(e, xid);
		xdr_put_u32(e, RPC_MSG_DENIED);
		xdr_put_u32(e, RPC_MISMATCH);
		xdr_put_u32(e, RPC_VERSION);
		xdr_put_u32(e, RPC_VERSION);
		return 0;
	}
	a = get_cred(d, &cred);
	xdr_get_u32(d);				/* verifier flavor */
	xdr_get_opaque_ref(d, &vlen, RPC_AUTH_MAX);
	if (a < 0 || xdr_dec_err(d)) {
		denied_auth(e, xid, RPC_AUTH_BADCRED);
		return 0;
	}
	if (a > 0) {
		denied_auth(e, xid, (uint32_t)a);
		return 0;
	}
	if (prog != NFS4_PROGRAM) {
		accepted(e, xid, RPC_PROG_UNAVAIL);
		return 0;
	}
	if (pvers != NFS4_VERSION) {
		accepted(e, xid, RPC_PROG_MISMATCH);
		xdr_put_u32(e, NFS4_VERSION);
		xdr_put_u32(e, NFS4_VERSION);
		return 0;
	}
	if (proc == NFS4_PROC_NULL) {
		accepted(e, xid, RPC_SUCCESS);
		return 0;
	}
	if (proc != NFS4_PROC_COMPOUND) {
		accepted(e, xid, RPC_PROC_UNAVAIL);
		return 0;
	}
	accepted(e, xid, RPC_SUCCESS);
	if (nfs_compound_begin(&k->run, srv, &cred, conn_id, d, e) ==
	    -EBADMSG) {
		xdr_enc_init(e, out, cap);
		accepted(e, xid, RPC_GARBAGE_ARGS);
		return 0;
	}
	k->compound = true;
	return 0;
}

int nfs_call_run(struct nfs_call *k, bool nowait, size_t *out_len)
{
	*out_len = 0;
	if (k->compound && nfs_compound_run(&k->run, nowait) == -EAGAIN)
		return -EAGAIN;
	if (xdr_enc_err(&k->e))
		return xdr_enc_err(&k->e);
	*out_len = xdr_enc_len(&k->e);
	return 0;
}

int nfs_rpc_process(struct nfs_server *srv, uint64_t conn_id,
		    const uint8_t *req, size_t len, uint8_t *out, size_t cap,
		    size_t *out_len)
{
	struct nfs_call *k = malloc(sizeof(*k));
	int err;

	*out_len = 0;
	if (!k)
		return -ENOMEM;
	err = nfs_call_start(k, srv, conn_id, req, len, out, cap);
	if (!err)
		err = nfs_call_run(k, false, out_len);
	free(k);
	return err;
}
