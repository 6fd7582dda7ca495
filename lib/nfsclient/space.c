/* SPDX-License-Identifier: MIT */
/*
 * NFS v4.2 space operations of the client (RFC 7862): ALLOCATE,
 * DEALLOCATE and WRITE_SAME. On a 4.1 session they are not sent at all
 * (-EOPNOTSUPP with last status NFS4ERR_MINOR_VERS_MISMATCH), so callers
 * fall back the same way as when the server says NFS4ERR_NOTSUPP.
 */
#include <errno.h>
#include <string.h>

#include <blkstack/bdev.h>

#include "nfsclient/internal.h"

static int need_42(struct bs_nfs *nfs, uint32_t op)
{
	if (nfs->minor >= 2)
		return 0;
	nfs->last_status = NFS4ERR_MINOR_VERS_MISMATCH;
	nfs->last_op = op;
	return bs_error(-EOPNOTSUPP, "nfs %s: %s: the server refused minor "
			"version 2", nfs->peer, nfsc_op_name(op));
}

static void begin(struct bs_nfs *nfs, struct nfsc_cpd *c, uint32_t op,
		  struct bs_nfs_file *f)
{
	nfsc_cpd_begin(nfs, c, nfsc_op_name(op));
	nfsc_cpd_op(c, OP_PUTFH);
	xdr_put_opaque(&c->e, f->fh.data, f->fh.len, NFS4_FHSIZE);
	nfsc_cpd_op(c, op);
	nfsc_put_stateid(&c->e, f->stateid);
}

static int space_op(struct bs_nfs *nfs, uint32_t op, struct bs_nfs_file *f,
		    uint64_t off, uint64_t len)
{
	struct nfsc_cpd c;
	int err;

	if ((err = need_42(nfs, op)))
		return err;
	begin(nfs, &c, op, f);
	xdr_put_u64(&c.e, off);
	xdr_put_u64(&c.e, len);
	if ((err = nfsc_cpd_call(&c)) || (err = nfsc_cpd_res(&c, OP_PUTFH)) ||
	    (err = nfsc_cpd_res(&c, op)))
		return err;
	return 0;
}

int bs_nfs_allocate(struct bs_nfs *nfs, struct bs_nfs_file *f, uint64_t off,
		    uint64_t len)
{
	return space_op(nfs, OP_ALLOCATE, f, off, len);
}

int bs_nfs_deallocate(struct bs_nfs *nfs, struct bs_nfs_file *f,
		      uint64_t off, uint64_t len)
{
	return space_op(nfs, OP_DEALLOCATE, f, off, len);
}

int bs_nfs_write_same(struct bs_nfs *nfs, struct bs_nfs_file *f,
		      const struct bs_ws_adb *adb, enum bs_nfs_stable stable,
		      uint64_t *count, enum bs_nfs_stable *committed,
		      uint8_t verf[8])
{
	struct nfsc_cpd c;
	uint32_t n;
	int err;

	if ((err = need_42(nfs, OP_WRITE_SAME)))
		return err;
	if (adb->pattern_len > bs_nfs_io_max(nfs))
		return bs_error(-EMSGSIZE, "nfs %s: WRITE_SAME: a pattern of "
				"%u bytes is over the session's %u",
				nfs->peer, adb->pattern_len,
				bs_nfs_io_max(nfs));
	nfsc_cpd_begin(nfs, &c, "WRITE_SAME");
	nfsc_cpd_op(&c, OP_PUTFH);
	xdr_put_opaque(&c.e, f->fh.data, f->fh.len, NFS4_FHSIZE);
	nfsc_cpd_op(&c, OP_WRITE_SAME);
	nfsc_put_stateid(&c.e, f->stateid);
	xdr_put_enum(&c.e, stable);
	xdr_put_u64(&c.e, adb->offset);
	xdr_put_u64(&c.e, adb->block_size);
	xdr_put_u64(&c.e, adb->block_count);
	xdr_put_u64(&c.e, adb->reloff_blocknum);
	/* adb_block_num is a count4 on the wire */
	if (adb->block_num > UINT32_MAX)
		return bs_error(-EINVAL, "nfs %s: WRITE_SAME: block number "
				"%llu does not fit the protocol's 32 bits",
				nfs->peer,
				(unsigned long long)adb->block_num);
	xdr_put_u32(&c.e, (uint32_t)adb->block_num);
	xdr_put_u64(&c.e, adb->reloff_pattern);
	xdr_put_opaque(&c.e, adb->pattern, adb->pattern_len, XDR_NOMAX);
	if ((err = nfsc_cpd_call(&c)) || (err = nfsc_cpd_res(&c, OP_PUTFH)))
		return err;
	if ((err = nfsc_cpd_res(&c, OP_WRITE_SAME))) {
		if (nfs->last_status == NFS4ERR_UNION_NOTSUPP)
			err = -EOPNOTSUPP;
		return err;
	}
	n = xdr_get_u32(&c.d);		/* wr_callback_id<1> */
	if (n > 1)
		xdr_dec_fail(&c.d, -EBADMSG);
	if (n)
		xdr_skip(&c.d, NFS4_STATEID_SIZE);
	*count = xdr_get_u64(&c.d);
	*committed = xdr_get_enum(&c.d);
	xdr_get_fixed(&c.d, verf, NFS4_VERIFIER_SIZE);
	return nfsc_cpd_end(&c);
}
