/* SPDX-License-Identifier: MIT */
/*
 * Open files: OPEN (by parent path and name, CLAIM_NULL, no delegation
 * wanted), CLOSE, READ, WRITE, COMMIT.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/bdev.h>

#include "nfsclient/internal.h"

static void put_fh(struct nfsc_cpd *c, const struct bs_nfs_fh *fh)
{
	nfsc_cpd_op(c, OP_PUTFH);
	xdr_put_opaque(&c->e, fh->data, fh->len, NFS4_FHSIZE);
}

/* The open_delegation4 of OPEN's reply: read past whatever it holds. */
static void skip_delegation(struct xdr_dec *d)
{
	uint32_t type = xdr_get_enum(d), len, why;

	switch (type) {
	case OPEN_DELEGATE_NONE:
		return;
	case OPEN_DELEGATE_READ:
	case OPEN_DELEGATE_WRITE:
		xdr_skip(d, NFS4_STATEID_SIZE);
		xdr_get_bool(d);		/* recall */
		if (type == OPEN_DELEGATE_WRITE) {
			if (xdr_get_enum(d) == 1)	/* NFS_LIMIT_SIZE */
				xdr_get_u64(d);
			else			/* NFS_LIMIT_BLOCKS */
				xdr_skip(d, 8);
		}
		xdr_skip(d, 12);		/* ace type, flag, mask */
		xdr_get_opaque_ref(d, &len, XDR_NOMAX);	/* who */
		return;
	case OPEN_DELEGATE_NONE_EXT:
		why = xdr_get_enum(d);
		if (why == WND4_CONTENTION || why == WND4_RESOURCE)
			xdr_get_bool(d);
		return;
	}
	xdr_dec_fail(d, -EBADMSG);
}

int bs_nfs_open(struct bs_nfs *nfs, const char *path, unsigned flags,
		struct bs_nfs_file *f)
{
	char parent[1024], name[NFSC_NAME_MAX + 1], what[64];
	struct nfsc_cpd c;
	uint32_t n, w[2], access;
	int err;

	memset(f, 0, sizeof(*f));
	if ((err = nfsc_split_path(nfs, path, parent, sizeof(parent), name)))
		return err;
	snprintf(what, sizeof(what), "OPEN /%.50s",
		 path + strspn(path, "/"));
	nfsc_cpd_begin(nfs, &c, what);
	if ((err = nfsc_put_path(&c, parent, &n)))
		return err;
	nfsc_cpd_op(&c, OP_OPEN);
	xdr_put_u32(&c.e, 0);			/* seqid: unused in 4.1 */
	access = flags & BS_NFS_OPEN_WRITE ? OPEN4_SHARE_ACCESS_BOTH
					   : OPEN4_SHARE_ACCESS_READ;
	xdr_put_u32(&c.e, access | OPEN4_SHARE_ACCESS_WANT_NO_DELEG);
	xdr_put_u32(&c.e, OPEN4_SHARE_DENY_NONE);
	xdr_put_u64(&c.e, nfs->clientid);
	xdr_put_opaque(&c.e, nfs->owner, nfs->owner_len, NFS4_OPAQUE_LIMIT);
	if (flags & BS_NFS_OPEN_CREATE) {
		size_t lenpos;

		xdr_put_enum(&c.e, OPEN4_CREATE);
		xdr_put_enum(&c.e, UNCHECKED4);
		w[0] = flags & BS_NFS_OPEN_TRUNC ? 1u << FATTR4_SIZE : 0;
		w[1] = 1u << (FATTR4_MODE - 32);
		nfsc_put_bitmap(&c.e, w, 2);
		lenpos = xdr_enc_len(&c.e);
		xdr_put_u32(&c.e, 0);
		if (flags & BS_NFS_OPEN_TRUNC)
			xdr_put_u64(&c.e, 0);
		xdr_put_u32(&c.e, 0644);
		xdr_patch_u32(&c.e, lenpos,
			      (uint32_t)(xdr_enc_len(&c.e) - lenpos - 4));
	} else {
		xdr_put_enum(&c.e, OPEN4_NOCREATE);
	}
	xdr_put_enum(&c.e, CLAIM_NULL);
	xdr_put_cstring(&c.e, name, NFS4_OPAQUE_LIMIT);
	nfsc_cpd_op(&c, OP_GETFH);
	if ((err = nfsc_cpd_call(&c)))
		return err;
	err = nfsc_cpd_res(&c, OP_PUTROOTFH);
	while (!err && n--)
		err = nfsc_cpd_res(&c, OP_LOOKUP);
	if (err || (err = nfsc_cpd_res(&c, OP_OPEN)))
		return err;
	xdr_get_fixed(&c.d, f->stateid, NFS4_STATEID_SIZE);
	xdr_get_bool(&c.d);			/* change info */
	xdr_get_u64(&c.d);
	xdr_get_u64(&c.d);
	xdr_get_u32(&c.d);			/* rflags */
	{
		uint32_t set[3];

		nfsc_get_bitmap(&c.d, set, 3);
	}
	skip_delegation(&c.d);
	if ((err = nfsc_cpd_end(&c)))
		return err;
	/* opened now: close it if what follows fails */
	f->open = true;
	err = nfsc_cpd_res(&c, OP_GETFH);
	if (!err) {
		f->fh.len = xdr_get_opaque(&c.d, f->fh.data,
					   sizeof(f->fh.data), NFS4_FHSIZE);
		err = nfsc_cpd_end(&c);
	}
	if (err) {
		f->open = false;	/* no handle to close it by */
		return err;
	}
	return 0;
}

int bs_nfs_close(struct bs_nfs *nfs, struct bs_nfs_file *f)
{
	struct nfsc_cpd c;
	int err;

	if (!f || !f->open)
		return 0;
	f->open = false;
	nfsc_cpd_begin(nfs, &c, "CLOSE");
	put_fh(&c, &f->fh);
	nfsc_cpd_op(&c, OP_CLOSE);
	xdr_put_u32(&c.e, 0);
	nfsc_put_stateid(&c.e, f->stateid);
	if ((err = nfsc_cpd_call(&c)) || (err = nfsc_cpd_res(&c, OP_PUTFH)) ||
	    (err = nfsc_cpd_res(&c, OP_CLOSE)))
		return err;
	return 0;
}

int64_t bs_nfs_read(struct bs_nfs *nfs, struct bs_nfs_file *f, void *buf,
		    uint32_t len, uint64_t off, bool *eof)
{
	struct nfsc_cpd c;
	uint32_t got;
	int err;

	if (len > bs_nfs_io_max(nfs))
		len = bs_nfs_io_max(nfs);
	nfsc_cpd_begin(nfs, &c, "READ");
	put_fh(&c, &f->fh);
	nfsc_cpd_op(&c, OP_READ);
	nfsc_put_stateid(&c.e, f->stateid);
	xdr_put_u64(&c.e, off);
	xdr_put_u32(&c.e, len);
	if ((err = nfsc_cpd_call(&c)) || (err = nfsc_cpd_res(&c, OP_PUTFH)) ||
	    (err = nfsc_cpd_res(&c, OP_READ)))
		return err;
	*eof = xdr_get_bool(&c.d);
	got = xdr_get_opaque(&c.d, buf, len, len);
	if ((err = nfsc_cpd_end(&c)))
		return err;
	return got;
}

int64_t bs_nfs_write(struct bs_nfs *nfs, struct bs_nfs_file *f,
		     const void *buf, uint32_t len, uint64_t off,
		     enum bs_nfs_stable stable, enum bs_nfs_stable *committed,
		     uint8_t verf[8])
{
	struct nfsc_cpd c;
	uint32_t count, how;
	int err;

	if (len > bs_nfs_io_max(nfs))
		len = bs_nfs_io_max(nfs);
	nfsc_cpd_begin(nfs, &c, "WRITE");
	put_fh(&c, &f->fh);
	nfsc_cpd_op(&c, OP_WRITE);
	nfsc_put_stateid(&c.e, f->stateid);
	xdr_put_u64(&c.e, off);
	xdr_put_enum(&c.e, stable);
	xdr_put_opaque(&c.e, buf, len, XDR_NOMAX);
	if ((err = nfsc_cpd_call(&c)) || (err = nfsc_cpd_res(&c, OP_PUTFH)) ||
	    (err = nfsc_cpd_res(&c, OP_WRITE)))
		return err;
	count = xdr_get_u32(&c.d);
	how = xdr_get_enum(&c.d);
	xdr_get_fixed(&c.d, verf, NFS4_VERIFIER_SIZE);
	if ((err = nfsc_cpd_end(&c)))
		return err;
	if (count > len)
		return bs_error(-EPROTO, "nfs %s: WRITE: %u bytes written of "
				"%u sent", nfs->peer, count, len);
	if (committed)
		*committed = how;
	return count;
}

int bs_nfs_commit(struct bs_nfs *nfs, struct bs_nfs_file *f, uint64_t off,
		  uint32_t count, uint8_t verf[8])
{
	struct nfsc_cpd c;
	int err;

	nfsc_cpd_begin(nfs, &c, "COMMIT");
	put_fh(&c, &f->fh);
	nfsc_cpd_op(&c, OP_COMMIT);
	xdr_put_u64(&c.e, off);
	xdr_put_u32(&c.e, count);
	if ((err = nfsc_cpd_call(&c)) || (err = nfsc_cpd_res(&c, OP_PUTFH)) ||
	    (err = nfsc_cpd_res(&c, OP_COMMIT)))
		return err;
	xdr_get_fixed(&c.d, verf, NFS4_VERIFIER_SIZE);
	return nfsc_cpd_end(&c);
}
