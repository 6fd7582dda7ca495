/* SPDX-License-Identifier: MIT */
/*
 * COMPOUND calls of the NFS client: the header, SEQUENCE on slot 0 of the
 * session, the retries of NFS4ERR_GRACE / NFS4ERR_DELAY (the same request
 * again with the slot's next sequence id, once a second), and the reading
 * of each operation's result.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/bdev.h>

#include "nfsclient/internal.h"

static const struct {
	uint32_t status;
	const char *name;
	int err;
} statuses[] = {
	{ NFS4_OK, "NFS4_OK", 0 },
	{ NFS4ERR_PERM, "NFS4ERR_PERM", -EPERM },
	{ NFS4ERR_NOENT, "NFS4ERR_NOENT", -ENOENT },
	{ NFS4ERR_IO, "NFS4ERR_IO", -EIO },
	{ NFS4ERR_NXIO, "NFS4ERR_NXIO", -ENXIO },
	{ NFS4ERR_ACCESS, "NFS4ERR_ACCESS", -EACCES },
	{ NFS4ERR_EXIST, "NFS4ERR_EXIST", -EEXIST },
	{ NFS4ERR_XDEV, "NFS4ERR_XDEV", -EXDEV },
	{ NFS4ERR_NOTDIR, "NFS4ERR_NOTDIR", -ENOTDIR },
	{ NFS4ERR_ISDIR, "NFS4ERR_ISDIR", -EISDIR },
	{ NFS4ERR_INVAL, "NFS4ERR_INVAL", -EINVAL },
	{ NFS4ERR_FBIG, "NFS4ERR_FBIG", -EFBIG },
	{ NFS4ERR_NOSPC, "NFS4ERR_NOSPC", -ENOSPC },
	{ NFS4ERR_ROFS, "NFS4ERR_ROFS", -EROFS },
	{ NFS4ERR_NAMETOOLONG, "NFS4ERR_NAMETOOLONG", -ENAMETOOLONG },
	{ NFS4ERR_NOTEMPTY, "NFS4ERR_NOTEMPTY", -ENOTEMPTY },
	{ NFS4ERR_DQUOT, "NFS4ERR_DQUOT", -EDQUOT },
	{ NFS4ERR_STALE, "NFS4ERR_STALE", -ESTALE },
	{ NFS4ERR_BADHANDLE, "NFS4ERR_BADHANDLE", -EBADF },
	{ NFS4ERR_NOTSUPP, "NFS4ERR_NOTSUPP", -EOPNOTSUPP },
	{ NFS4ERR_TOOSMALL, "NFS4ERR_TOOSMALL", -EMSGSIZE },
	{ NFS4ERR_SERVERFAULT, "NFS4ERR_SERVERFAULT", -EREMOTEIO },
	{ NFS4ERR_DELAY, "NFS4ERR_DELAY", -EAGAIN },
	{ NFS4ERR_GRACE, "NFS4ERR_GRACE", -EAGAIN },
	{ NFS4ERR_EXPIRED, "NFS4ERR_EXPIRED", -ESTALE },
	{ NFS4ERR_LOCKED, "NFS4ERR_LOCKED", -EAGAIN },
	{ NFS4ERR_SHARE_DENIED, "NFS4ERR_SHARE_DENIED", -EACCES },
	{ NFS4ERR_WRONGSEC, "NFS4ERR_WRONGSEC", -EACCES },
	{ NFS4ERR_MOVED, "NFS4ERR_MOVED", -EREMOTE },
	{ NFS4ERR_NOFILEHANDLE, "NFS4ERR_NOFILEHANDLE", -EBADF },
	{ NFS4ERR_MINOR_VERS_MISMATCH, "NFS4ERR_MINOR_VERS_MISMATCH",
	  -EPROTONOSUPPORT },
	{ NFS4ERR_STALE_CLIENTID, "NFS4ERR_STALE_CLIENTID", -ESTALE },
	{ NFS4ERR_STALE_STATEID, "NFS4ERR_STALE_STATEID", -ESTALE },
	{ NFS4ERR_OLD_STATEID, "NFS4ERR_OLD_STATEID", -ESTALE },
	{ NFS4ERR_BAD_STATEID, "NFS4ERR_BAD_STATEID", -EBADF },
	{ NFS4ERR_SYMLINK, "NFS4ERR_SYMLINK", -ELOOP },
	{ NFS4ERR_ATTRNOTSUPP, "NFS4ERR_ATTRNOTSUPP", -EOPNOTSUPP },
	{ NFS4ERR_BADXDR, "NFS4ERR_BADXDR", -EBADMSG },
	{ NFS4ERR_OPENMODE, "NFS4ERR_OPENMODE", -EBADF },
	{ NFS4ERR_BADOWNER, "NFS4ERR_BADOWNER", -EINVAL },
	{ NFS4ERR_BADCHAR, "NFS4ERR_BADCHAR", -EINVAL },
	{ NFS4ERR_BADNAME, "NFS4ERR_BADNAME", -EINVAL },
	{ NFS4ERR_OP_ILLEGAL, "NFS4ERR_OP_ILLEGAL", -EOPNOTSUPP },
	{ NFS4ERR_BADSESSION, "NFS4ERR_BADSESSION", -ESTALE },
	{ NFS4ERR_BADSLOT, "NFS4ERR_BADSLOT", -EPROTO },
	{ NFS4ERR_COMPLETE_ALREADY, "NFS4ERR_COMPLETE_ALREADY", 0 },
	{ NFS4ERR_SEQ_MISORDERED, "NFS4ERR_SEQ_MISORDERED", -EPROTO },
	{ NFS4ERR_SEQUENCE_POS, "NFS4ERR_SEQUENCE_POS", -EPROTO },
	{ NFS4ERR_REQ_TOO_BIG, "NFS4ERR_REQ_TOO_BIG", -EMSGSIZE },
	{ NFS4ERR_REP_TOO_BIG, "NFS4ERR_REP_TOO_BIG", -EMSGSIZE },
	{ NFS4ERR_TOO_MANY_OPS, "NFS4ERR_TOO_MANY_OPS", -EMSGSIZE },
	{ NFS4ERR_OP_NOT_IN_SESSION, "NFS4ERR_OP_NOT_IN_SESSION", -EPROTO },
	{ NFS4ERR_DEADSESSION, "NFS4ERR_DEADSESSION", -ESTALE },
	{ NFS4ERR_WRONG_TYPE, "NFS4ERR_WRONG_TYPE", -EINVAL },
	{ NFS4ERR_UNION_NOTSUPP, "NFS4ERR_UNION_NOTSUPP", -EOPNOTSUPP },
};

const char *bs_nfs_status_name(uint32_t status)
{
	static __thread char num[24];
	size_t i;

	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
		if (statuses[i].status == status)
			return statuses[i].name;
	snprintf(num, sizeof(num), "nfsstat4 %u", status);
	return num;
}

int bs_nfs_status_errno(uint32_t status)
{
	size_t i;

	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++)
		if (statuses[i].status == status)
			return statuses[i].err;
	return -EREMOTEIO;
}

const char *nfsc_op_name(uint32_t op)
{
	switch (op) {
	case OP_ACCESS: return "ACCESS";
	case OP_CLOSE: return "CLOSE";
	case OP_COMMIT: return "COMMIT";
	case OP_GETATTR: return "GETATTR";
	case OP_GETFH: return "GETFH";
	case OP_LOOKUP: return "LOOKUP";
	case OP_OPEN: return "OPEN";
	case OP_PUTFH: return "PUTFH";
	case OP_PUTROOTFH: return "PUTROOTFH";
	case OP_READ: return "READ";
	case OP_READDIR: return "READDIR";
	case OP_REMOVE: return "REMOVE";
	case OP_WRITE: return "WRITE";
	case OP_EXCHANGE_ID: return "EXCHANGE_ID";
	case OP_CREATE_SESSION: return "CREATE_SESSION";
	case OP_DESTROY_SESSION: return "DESTROY_SESSION";
	case OP_SEQUENCE: return "SEQUENCE";
	case OP_DESTROY_CLIENTID: return "DESTROY_CLIENTID";
	case OP_RECLAIM_COMPLETE: return "RECLAIM_COMPLETE";
	case OP_ALLOCATE: return "ALLOCATE";
	case OP_DEALLOCATE: return "DEALLOCATE";
	case OP_WRITE_SAME: return "WRITE_SAME";
	case OP_ILLEGAL: return "ILLEGAL";
	}
	return "op";
}

int nfsc_fail_status(struct bs_nfs *nfs, const char *what, uint32_t op,
		     uint32_t status)
{
	int err = bs_nfs_status_errno(status);

	nfs->last_status = status;
	nfs->last_op = op;
	if (!err)
		err = -EPROTO;
	/* "OPEN /a: NFS4ERR_NOENT", "READ: PUTFH: NFS4ERR_STALE" */
	if (!strncmp(what, nfsc_op_name(op), strlen(nfsc_op_name(op))))
		return bs_error(err, "nfs %s: %s: %s", nfs->peer, what,
				bs_nfs_status_name(status));
	return bs_error(err, "nfs %s: %s: %s: %s", nfs->peer, what,
			nfsc_op_name(op), bs_nfs_status_name(status));
}

void nfsc_cpd_begin(struct bs_nfs *nfs, struct nfsc_cpd *c, const char *what)
{
	memset(c, 0, sizeof(*c));
	c->nfs = nfs;
	c->what = what;
	xdr_enc_init(&c->e, nfs->req, NFSC_BUF_SIZE);
	nfsc_rpc_call_header(nfs, &c->e, NFS4_PROC_COMPOUND);
	xdr_put_cstring(&c->e, "blkstack", NFS4_OPAQUE_LIMIT);	/* tag */
	xdr_put_u32(&c->e, nfs->minor);
	c->nops_pos = xdr_enc_len(&c->e);
	xdr_put_u32(&c->e, 0);
	if (nfs->have_session) {
		nfsc_cpd_op(c, OP_SEQUENCE);
		xdr_put_fixed(&c->e, nfs->sessionid, NFS4_SESSIONID_SIZE);
		c->seq_pos = xdr_enc_len(&c->e);
		xdr_put_u32(&c->e, 0);		/* sequenceid, set when sent */
		xdr_put_u32(&c->e, 0);		/* slot 0 */
		xdr_put_u32(&c->e, 0);		/* highest slot 0 */
		xdr_put_bool(&c->e, false);	/* do not cache */
	}
}

void nfsc_cpd_op(struct nfsc_cpd *c, uint32_t op)
{
	xdr_put_u32(&c->e, op);
	c->nops++;
}

/* The compound's header and SEQUENCE's result. */
static int read_head(struct nfsc_cpd *c)
{
	struct bs_nfs *nfs = c->nfs;
	uint32_t len;
	int err;

	c->status = xdr_get_u32(&c->d);
	xdr_get_opaque_ref(&c->d, &len, NFS4_OPAQUE_LIMIT);	/* tag */
	c->nres = xdr_get_u32(&c->d);
	if (xdr_dec_err(&c->d))
		return bs_error(-EBADMSG, "nfs %s: %s: short COMPOUND reply",
				nfs->peer, c->what);
	if (!c->seq_pos)
		return 0;
	if (!c->nres)	/* e.g. MINOR_VERS_MISMATCH: nothing was run */
		return nfsc_fail_status(nfs, c->what, OP_SEQUENCE, c->status);
	if ((err = nfsc_cpd_res(c, OP_SEQUENCE)))
		return err;
	/* the slot's sequence id was used: the next call takes the next */
	nfs->slot_seq++;
	xdr_skip(&c->d, NFS4_SESSIONID_SIZE);
	xdr_get_u32(&c->d);	/* sequenceid */
	xdr_get_u32(&c->d);	/* slotid */
	xdr_get_u32(&c->d);	/* highest slotid */
	xdr_get_u32(&c->d);	/* target highest slotid */
	xdr_get_u32(&c->d);	/* status flags */
	return nfsc_cpd_end(c);
}

static bool retryable(uint32_t status)
{
	return status == NFS4ERR_GRACE || status == NFS4ERR_DELAY;
}

int nfsc_cpd_call(struct nfsc_cpd *c)
{
	struct bs_nfs *nfs = c->nfs;
	time_t start = time(NULL);
	int err;

	xdr_patch_u32(&c->e, c->nops_pos, c->nops);
	if (xdr_enc_err(&c->e))
		return bs_error(-EMSGSIZE, "nfs %s: %s: request too large",
				nfs->peer, c->what);
	if (nfs->have_session &&
	    xdr_enc_len(&c->e) - 4 > nfs->max_req)
		return bs_error(-EMSGSIZE, "nfs %s: %s: request of %zu bytes "
				"over the session's %u", nfs->peer, c->what,
				xdr_enc_len(&c->e) - 4, nfs->max_req);
	for (;;) {
		if (c->seq_pos)
			xdr_patch_u32(&c->e, c->seq_pos, nfs->slot_seq);
		err = nfsc_rpc_call(nfs, xdr_enc_len(&c->e), &c->d);
		if (err)
			return err;
		err = read_head(c);
		if (err && !(err == -EAGAIN && retryable(nfs->last_status)))
			return err;
		if (!err && !retryable(c->status))
			return 0;
		if (time(NULL) - start >= (time_t)nfs->retry_secs)
			return err ? err : 0;
		sleep(1);
	}
}

int nfsc_cpd_res(struct nfsc_cpd *c, uint32_t op)
{
	uint32_t got, status;

	if (!c->nres)
		return nfsc_fail_status(c->nfs, c->what, op,
					c->status ? c->status
						  : NFS4ERR_SERVERFAULT);
	c->nres--;
	got = xdr_get_u32(&c->d);
	status = xdr_get_u32(&c->d);
	if (xdr_dec_err(&c->d) || (got != op && got != OP_ILLEGAL))
		return bs_error(-EBADMSG, "nfs %s: %s: reply for op %u where "
				"%s was sent", c->nfs->peer, c->what, got,
				nfsc_op_name(op));
	if (status != NFS4_OK)
		return nfsc_fail_status(c->nfs, c->what, op, status);
	return 0;
}

int nfsc_cpd_end(struct nfsc_cpd *c)
{
	if (xdr_dec_err(&c->d))
		return bs_error(-EBADMSG, "nfs %s: %s: a reply that does not "
				"decode", c->nfs->peer, c->what);
	return 0;
}
