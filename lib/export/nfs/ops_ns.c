/* SPDX-License-Identifier: MIT */
/*
 * The namespace ops (RFC 8881 18): the current and saved file handles
 * (PUTROOTFH, PUTPUBFH, PUTFH, GETFH, SAVEFH, RESTOREFH), LOOKUP,
 * LOOKUPP, READDIR (cookies are the backend's directory offsets, the
 * verifier is zero), ACCESS, CREATE, REMOVE, RENAME, LINK, READLINK,
 * SECINFO and SECINFO_NO_NAME (AUTH_SYS and AUTH_NONE).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export/nfs/nfs.h"

uint32_t nfs_errno(int err)
{
	switch (-err) {
	case 0: return NFS4_OK;
	case EPERM: return NFS4ERR_PERM;
	case ENOENT: return NFS4ERR_NOENT;
	case ENXIO: return NFS4ERR_NXIO;
	case EACCES: return NFS4ERR_ACCESS;
	case EEXIST: return NFS4ERR_EXIST;
	case EXDEV: return NFS4ERR_XDEV;
	case ENOTDIR: return NFS4ERR_NOTDIR;
	case EISDIR: return NFS4ERR_ISDIR;
	case EINVAL: return NFS4ERR_INVAL;
	case EFBIG: return NFS4ERR_FBIG;
	case ENOSPC: return NFS4ERR_NOSPC;
	case EROFS: return NFS4ERR_ROFS;
	case EMLINK: return NFS4ERR_MLINK;
	case ENAMETOOLONG: return NFS4ERR_NAMETOOLONG;
	case ENOTEMPTY: return NFS4ERR_NOTEMPTY;
	case EDQUOT: return NFS4ERR_DQUOT;
	case ESTALE: return NFS4ERR_STALE;
	case EBADF: return NFS4ERR_STALE;
	case ELOOP: return NFS4ERR_SYMLINK;
	case EOPNOTSUPP: return NFS4ERR_NOTSUPP;
	case EAGAIN: return NFS4ERR_DELAY;
	default: return NFS4ERR_IO;
	}
}

/* well-formed UTF-8 (no overlongs, no surrogates) */
static bool utf8_ok(const uint8_t *s, uint32_t n)
{
	uint32_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		uint32_t k, cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf)
			k = 1, cp = c & 0x1f;
		else if (c >= 0xe0 && c <= 0xef)
			k = 2, cp = c & 0x0f;
		else if (c >= 0xf0 && c <= 0xf4)
			k = 3, cp = c & 0x07;
		else
			return false;
		for (uint32_t j = 1; j <= k; j++) {
			if (i + j >= n || (s[i + j] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
			return false;
		i += k + 1;
	}
	return true;
}

uint32_t nfs_get_name(struct xdr_dec *a, char *name)
{
	uint32_t len;
	const uint8_t *p = xdr_get_opaque_ref(a, &len, XDR_NOMAX);

	name[0] = 0;
	if (!p)
		return NFS4ERR_BADXDR;
	if (!len)
		return NFS4ERR_INVAL;
	if (len > NFS_NAME_MAX)
		return NFS4ERR_NAMETOOLONG;
	if (!utf8_ok(p, len))
		return NFS4ERR_INVAL;
	if (memchr(p, '/', len) || memchr(p, 0, len) ||
	    (len == 1 && p[0] == '.') ||
	    (len == 2 && p[0] == '.' && p[1] == '.'))
		return NFS4ERR_BADNAME;
	memcpy(name, p, len);
	name[len] = 0;
	return NFS4_OK;
}

uint32_t nfs_need_fh(struct nfs_compound *c)
{
	return c->has_cfh ? NFS4_OK : NFS4ERR_NOFILEHANDLE;
}

uint32_t nfs_cur_attr(struct nfs_compound *c, struct nfs_attr *at)
{
	int err;

	if (!c->has_cfh)
		return NFS4ERR_NOFILEHANDLE;
	err = c->srv->be.ops->getattr(&c->srv->be, &c->cfh, at);
	return err ? nfs_errno(err) : NFS4_OK;
}

void nfs_put_change_info(struct xdr_enc *r, uint64_t before, uint64_t after)
{
	xdr_put_bool(r, false);
	xdr_put_u64(r, before);
	xdr_put_u64(r, after);
}

/* the current fh is a directory: NOTDIR (SYMLINK for a link) otherwise */
static uint32_t cur_dir(struct nfs_compound *c, struct nfs_attr *at)
{
	uint32_t st = nfs_cur_attr(c, at);

	if (st)
		return st;
	if (at->type == NF4LNK)
		return NFS4ERR_SYMLINK;
	if (at->type != NF4DIR)
		return NFS4ERR_NOTDIR;
	return NFS4_OK;
}

static void set_cfh(struct nfs_compound *c, const struct nfs_fh *fh)
{
	c->cfh = *fh;
	c->has_cfh = true;
	c->has_csid = false;
}

/* ---- file handles -------------------------------------------------------- */

uint32_t nfs_op_putrootfh(struct nfs_compound *c, struct xdr_dec *a,
			  struct xdr_enc *r)
{
	struct nfs_fh fh;
	int err = c->srv->be.ops->root(&c->srv->be, &fh);

	if (err)
		return nfs_errno(err);
	set_cfh(c, &fh);
	return NFS4_OK;
}

uint32_t nfs_op_putpubfh(struct nfs_compound *c, struct xdr_dec *a,
			 struct xdr_enc *r)
{
	return nfs_op_putrootfh(c, a, r);
}

uint32_t nfs_op_putfh(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	uint32_t len, st;
	const uint8_t *p = xdr_get_opaque_ref(a, &len, NFS4_FHSIZE);
	struct nfs_fh fh;
	struct nfs_attr at;

	if (!p)
		return NFS4ERR_BADXDR;
	st = nfs_fh_unwrap(c->srv, p, len, &fh);
	if (st)
		return st;
	if (c->srv->be.ops->getattr(&c->srv->be, &fh, &at)) {
		/* a file removed while open stays usable for its state */
		struct nfs_state *s;

		for (s = nfs_file_states(c->srv, &fh); s; s = s->file_next)
			if (nfs_fh_equal(&s->fh, &fh))
				break;
		if (!s)
			return NFS4ERR_STALE;
	}
	set_cfh(c, &fh);
	return NFS4_OK;
}

uint32_t nfs_op_getfh(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	struct nfs_fh w;
	uint32_t st = nfs_need_fh(c);

	if (st)
		return st;
	nfs_fh_wrap(c->srv, &c->cfh, &w);
	xdr_put_opaque(r, w.data, w.len, NFS4_FHSIZE);
	return NFS4_OK;
}

uint32_t nfs_op_savefh(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	uint32_t st = nfs_need_fh(c);

	if (st)
		return st;
	c->sfh = c->cfh;
	c->has_sfh = true;
	c->ssid = c->csid;
	c->has_ssid = c->has_csid;
	return NFS4_OK;
}

uint32_t nfs_op_restorefh(struct nfs_compound *c, struct xdr_dec *a,
			  struct xdr_enc *r)
{
	if (!c->has_sfh)
		return NFS4ERR_RESTOREFH;
	c->cfh = c->sfh;
	c->has_cfh = true;
	c->csid = c->ssid;
	c->has_csid = c->has_ssid;
	return NFS4_OK;
}

/* ---- lookups ------------------------------------------------------------- */

uint32_t nfs_op_lookup(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	char name[NFS_NAME_MAX + 1];
	struct nfs_attr at;
	struct nfs_fh fh;
	uint32_t st = nfs_get_name(a, name), st2;
	int err;

	st2 = cur_dir(c, &at);
	if (st2)
		return st2;
	if (st)
		return st;
	err = c->srv->be.ops->lookup(&c->srv->be, &c->cfh, name, &fh);
	if (err)
		return nfs_errno(err);
	set_cfh(c, &fh);
	return NFS4_OK;
}

uint32_t nfs_op_lookupp(struct nfs_compound *c, struct xdr_dec *a,
			struct xdr_enc *r)
{
	struct nfs_attr at;
	struct nfs_fh fh;
	uint32_t st = cur_dir(c, &at);
	int err;

	if (st)
		return st;
	err = c->srv->be.ops->parent(&c->srv->be, &c->cfh, &fh);
	if (err)
		return nfs_errno(err);
	set_cfh(c, &fh);
	return NFS4_OK;
}

/* ---- READDIR ------------------------------------------------------------- */

struct rd {
	struct nfs_compound *c;
	struct xdr_enc *r;
	const uint32_t *bm;
	size_t limit;		/* reply bytes allowed (maxcount) */
	size_t start;
	unsigned n;
	bool full;
	uint32_t err;
};

static int rd_entry(void *arg, const char *name, uint64_t cookie,
		    const struct nfs_fh *fh, const struct nfs_attr *at)
{
	struct rd *d = arg;
	size_t at_pos = xdr_enc_len(d->r);
	uint32_t st;

	xdr_put_bool(d->r, true);
	xdr_put_u64(d->r, cookie);
	xdr_put_cstring(d->r, name, NFS_NAME_MAX);
	st = nfs_encode_fattr(d->c, d->r, d->bm, fh, at);
	/* room for this entry and the closing "no more, eof" words */
	if (st || xdr_enc_err(d->r) ||
	    xdr_enc_len(d->r) + 8 - d->start > d->limit) {
		xdr_enc_truncate(d->r, at_pos);
		d->full = true;
		if (st)
			d->err = st;
		return 1;
	}
	d->n++;
	return 0;
}

uint32_t nfs_op_readdir(struct nfs_compound *c, struct xdr_dec *a,
			struct xdr_enc *r)
{
	uint64_t cookie = xdr_get_u64(a);
	uint8_t verf[NFS4_VERIFIER_SIZE];
	uint32_t dircount, maxcount, bm[NFS4_BITMAP_WORDS], st;
	struct nfs_attr at;
	struct rd d;
	bool eof = false;
	int err;

	xdr_get_fixed(a, verf, sizeof(verf));
	dircount = xdr_get_u32(a);
	maxcount = xdr_get_u32(a);
	nfs_get_bitmap(a, bm, NFS4_BITMAP_WORDS);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	(void)dircount;
	st = cur_dir(c, &at);
	if (st)
		return st;
	if (cookie == 1 || cookie == 2)
		return NFS4ERR_BAD_COOKIE;
	if (bm[1] & ((1u << (FATTR4_TIME_ACCESS_SET - 32)) |
		     (1u << (FATTR4_TIME_MODIFY_SET - 32))))
		return NFS4ERR_INVAL;
	memset(&d, 0, sizeof(d));
	d.c = c;
	d.r = r;
	d.bm = bm;
	d.start = xdr_enc_len(r);
	d.limit = maxcount > 16 ? maxcount - 16 : 0;
	if (d.limit > NFS_MAX_REPLY / 2)
		d.limit = NFS_MAX_REPLY / 2;
	memset(verf, 0, sizeof(verf));
	xdr_put_fixed(r, verf, sizeof(verf));
	err = c->srv->be.ops->readdir(&c->srv->be, &c->cfh, cookie, rd_entry,
				      &d, &eof);
	if (err)
		return nfs_errno(err);
	if (d.err)
		return d.err;
	if (!d.n && d.full)
		return NFS4ERR_TOOSMALL;
	xdr_put_bool(r, false);
	xdr_put_bool(r, eof && !d.full);
	return NFS4_OK;
}

/* ---- ACCESS -------------------------------------------------------------- */

uint32_t nfs_op_access(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	uint32_t want = xdr_get_u32(a), supp, ok = 0, st, bits;
	struct nfs_attr at;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = nfs_cur_attr(c, &at);
	if (st)
		return st;
	if (want & ~0x3fu)
		return NFS4ERR_INVAL;
	supp = want;
	if (c->cred.uid == 0) {
		ok = supp;
		if (at.type != NF4DIR && !(at.mode & 0111))
			ok &= ~ACCESS4_EXECUTE;
	} else {
		bits = c->cred.uid == at.uid ? at.mode >> 6 :
		       c->cred.gid == at.gid ? at.mode >> 3 : at.mode;
		if (bits & 4)
			ok |= ACCESS4_READ;
		if (bits & 2)
			ok |= ACCESS4_MODIFY | ACCESS4_EXTEND | ACCESS4_DELETE;
		if (bits & 1)
			ok |= at.type == NF4DIR ? ACCESS4_LOOKUP :
			      ACCESS4_EXECUTE;
		ok &= supp;
	}
	if (at.type != NF4DIR)
		ok &= ~(ACCESS4_LOOKUP | ACCESS4_DELETE);
	xdr_put_u32(r, supp);
	xdr_put_u32(r, ok);
	return NFS4_OK;
}

/* ---- CREATE, REMOVE, RENAME, LINK, READLINK ------------------------------ */

uint32_t nfs_op_create(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	uint32_t type = xdr_get_u32(a), major = 0, minor = 0, st, len;
	uint32_t set[NFS4_BITMAP_WORDS];
	char name[NFS_NAME_MAX + 1];
	char *link = NULL;
	const uint8_t *lp;
	struct nfs_sattr sa;
	struct nfs_attr dir, after;
	struct nfs_fh fh;
	int err;

	switch (type) {
	case NF4LNK:
		lp = xdr_get_opaque_ref(a, &len, XDR_NOMAX);
		if (!lp)
			return NFS4ERR_BADXDR;
		link = strndup((const char *)lp, len);
		if (!link)
			return NFS4ERR_SERVERFAULT;
		if (!len || memchr(lp, 0, len)) {
			free(link);
			return NFS4ERR_INVAL;
		}
		break;
	case NF4BLK:
	case NF4CHR:
		major = xdr_get_u32(a);
		minor = xdr_get_u32(a);
		break;
	case NF4SOCK:
	case NF4FIFO:
	case NF4DIR:
		break;
	default:
		return xdr_dec_err(a) ? NFS4ERR_BADXDR : NFS4ERR_BADTYPE;
	}
	st = nfs_get_name(a, name);
	if (st == NFS4ERR_BADXDR) {
		free(link);
		return st;
	}
	if (!st)
		st = nfs_decode_sattr(c, a, &sa, set);
	if (st == NFS4_OK)
		st = cur_dir(c, &dir);
	else if (st != NFS4ERR_BADXDR) {
		uint32_t s2 = cur_dir(c, &dir);

		if (s2)
			st = s2;
	}
	/* `devices = 0`: nodev (server.c) */
	if (!st && (type == NF4BLK || type == NF4CHR) && !c->srv->devices_ok)
		st = NFS4ERR_PERM;
	if (st) {
		free(link);
		return st;
	}
	err = be->ops->create(be, &c->cfh, name, type,
			      (sa.mask & NFS_SA_MODE) ? sa.mode :
			      type == NF4DIR ? 0755 : 0644, link, major, minor,
			      true, &fh);
	free(link);
	if (err)
		return nfs_errno(err);
	sa.mask &= ~NFS_SA_MODE;
	if (sa.mask && type != NF4LNK)
		be->ops->setattr(be, &fh, &sa);
	if (be->ops->getattr(be, &c->cfh, &after))
		after.change = dir.change + 1;
	set_cfh(c, &fh);
	nfs_put_change_info(r, dir.change, after.change);
	nfs_put_bitmap(r, set, NFS4_BITMAP_WORDS);
	return NFS4_OK;
}

uint32_t nfs_op_remove(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	char name[NFS_NAME_MAX + 1];
	struct nfs_attr dir, after;
	uint32_t st = nfs_get_name(a, name), st2;
	int err;

	if (st == NFS4ERR_BADXDR)
		return st;
	st2 = cur_dir(c, &dir);
	if (st2)
		return st2 == NFS4ERR_SYMLINK ? NFS4ERR_NOTDIR : st2;
	if (st)
		return st;
	if (nfs_in_grace(c->srv))
		return NFS4ERR_GRACE;
	st = nfs_deleg_break_name(c, &c->cfh, name);
	if (st)
		return st;
	err = c->srv->be.ops->remove(&c->srv->be, &c->cfh, name);
	if (err)
		return nfs_errno(err);
	if (c->srv->be.ops->getattr(&c->srv->be, &c->cfh, &after))
		after.change = dir.change + 1;
	nfs_put_change_info(r, dir.change, after.change);
	return NFS4_OK;
}

uint32_t nfs_op_rename(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	char on[NFS_NAME_MAX + 1], nn[NFS_NAME_MAX + 1];
	struct nfs_attr sd, td, sd2, td2;
	uint32_t st1 = nfs_get_name(a, on), st2 = nfs_get_name(a, nn), st;
	int err;

	if (st1 == NFS4ERR_BADXDR || st2 == NFS4ERR_BADXDR)
		return NFS4ERR_BADXDR;
	if (!c->has_cfh || !c->has_sfh)
		return NFS4ERR_NOFILEHANDLE;
	if (be->ops->getattr(be, &c->sfh, &sd))
		return NFS4ERR_STALE;
	if (sd.type != NF4DIR)
		return NFS4ERR_NOTDIR;
	st = cur_dir(c, &td);
	if (st)
		return st == NFS4ERR_SYMLINK ? NFS4ERR_NOTDIR : st;
	if (st1)
		return st1;
	if (st2)
		return st2;
	if (nfs_in_grace(c->srv))
		return NFS4ERR_GRACE;
	st = nfs_deleg_break_name(c, &c->sfh, on);
	if (!st)
		st = nfs_deleg_break_name(c, &c->cfh, nn);
	if (st)
		return st;
	err = be->ops->rename(be, &c->sfh, on, &c->cfh, nn);
	if (err)
		return nfs_errno(err);
	if (be->ops->getattr(be, &c->sfh, &sd2))
		sd2.change = sd.change + 1;
	if (be->ops->getattr(be, &c->cfh, &td2))
		td2.change = td.change + 1;
	nfs_put_change_info(r, sd.change, sd2.change);
	nfs_put_change_info(r, td.change, td2.change);
	return NFS4_OK;
}

uint32_t nfs_op_link(struct nfs_compound *c, struct xdr_dec *a,
		     struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	char name[NFS_NAME_MAX + 1];
	struct nfs_attr dir, after, src;
	uint32_t st = nfs_get_name(a, name), st2;
	int err;

	if (st == NFS4ERR_BADXDR)
		return st;
	if (!c->has_cfh || !c->has_sfh)
		return NFS4ERR_NOFILEHANDLE;
	st2 = cur_dir(c, &dir);
	if (st2)
		return st2 == NFS4ERR_SYMLINK ? NFS4ERR_NOTDIR : st2;
	if (st)
		return st;
	if (be->ops->getattr(be, &c->sfh, &src))
		return NFS4ERR_STALE;
	if (src.type == NF4DIR)
		return NFS4ERR_ISDIR;
	err = be->ops->link(be, &c->sfh, &c->cfh, name);
	if (err)
		return nfs_errno(err);
	if (be->ops->getattr(be, &c->cfh, &after))
		after.change = dir.change + 1;
	nfs_put_change_info(r, dir.change, after.change);
	return NFS4_OK;
}

uint32_t nfs_op_readlink(struct nfs_compound *c, struct xdr_dec *a,
			 struct xdr_enc *r)
{
	char buf[4096];
	struct nfs_attr at;
	size_t len;
	uint32_t st = nfs_cur_attr(c, &at);
	int err;

	if (st)
		return st;
	if (at.type != NF4LNK)
		return at.type == NF4DIR ? NFS4ERR_ISDIR : NFS4ERR_INVAL;
	err = c->srv->be.ops->readlink(&c->srv->be, &c->cfh, buf, sizeof(buf),
				       &len);
	if (err)
		return nfs_errno(err);
	xdr_put_opaque(r, buf, len, XDR_NOMAX);
	return NFS4_OK;
}

/* ---- SECINFO ------------------------------------------------------------- */

static void put_secinfo(struct xdr_enc *r)
{
	xdr_put_u32(r, 2);
	xdr_put_u32(r, RPC_AUTH_SYS);
	xdr_put_u32(r, RPC_AUTH_NONE);
}

uint32_t nfs_op_secinfo(struct nfs_compound *c, struct xdr_dec *a,
			struct xdr_enc *r)
{
	char name[NFS_NAME_MAX + 1];
	struct nfs_attr at;
	struct nfs_fh fh;
	uint32_t st = nfs_get_name(a, name), st2;
	int err;

	if (st == NFS4ERR_BADXDR)
		return st;
	st2 = cur_dir(c, &at);
	if (st2)
		return st2;
	if (st)
		return st;
	err = c->srv->be.ops->lookup(&c->srv->be, &c->cfh, name, &fh);
	if (err)
		return nfs_errno(err);
	if (c->minor)
		c->has_cfh = false;	/* 4.1: SECINFO consumes the fh */
	put_secinfo(r);
	return NFS4_OK;
}

uint32_t nfs_op_secinfo_no_name(struct nfs_compound *c, struct xdr_dec *a,
				struct xdr_enc *r)
{
	uint32_t style = xdr_get_u32(a), st;
	struct nfs_attr at;
	struct nfs_fh fh;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (style > SECINFO_STYLE4_PARENT)
		return NFS4ERR_INVAL;
	st = nfs_cur_attr(c, &at);
	if (st)
		return st;
	if (style == SECINFO_STYLE4_PARENT) {
		if (at.type != NF4DIR)
			return NFS4ERR_NOTDIR;
		if (c->srv->be.ops->parent(&c->srv->be, &c->cfh, &fh))
			return NFS4ERR_NOENT;
	}
	c->has_cfh = false;
	put_secinfo(r);
	return NFS4_OK;
}
