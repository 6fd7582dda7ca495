/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes (RFC 8276, NFS v4.2 ops 72-75): GETXATTR,
 * SETXATTR, LISTXATTRS, REMOVEXATTR on the current filehandle, through
 * the backend's xattr ops (the user namespace: a protocol name "k" is
 * the host's "user.k" on the directory backend). A backend without them
 * answers NFS4ERR_NOTSUPP and reports xattr_support false (attr.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "export/nfs/nfs.h"

/* the largest value (Linux's XATTR_SIZE_MAX) and list this server moves */
#define XATTR_VAL_MAX 65536u
#define XATTR_LIST_MAX 65536u

size_t nfs_xattr_user_names(char *buf, size_t n)
{
	size_t i, o = 0;

	for (i = 0; i < n; i += strlen(buf + i) + 1) {
		size_t l = strlen(buf + i);

		if (l > 5 && !strncmp(buf + i, "user.", 5)) {
			memmove(buf + o, buf + i + 5, l - 4);
			o += l - 4;
		}
	}
	return o;
}

static uint32_t xattr_errno(int err)
{
	switch (-err) {
	case ENODATA: return NFS4ERR_NOXATTR;
	case E2BIG:
	case ERANGE: return NFS4ERR_XATTR2BIG;
	case ENOTSUP: return NFS4ERR_NOTSUPP;
	default: return nfs_errno(err);
	}
}

/* the current fh, the backend's support and the key (NUL-terminated) */
static uint32_t xattr_start(struct nfs_compound *c, struct xdr_dec *a,
			    char *key)
{
	const uint8_t *p;
	uint32_t n;

	p = xdr_get_opaque_ref(a, &n, XDR_NOMAX);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (!c->has_cfh)
		return NFS4ERR_NOFILEHANDLE;
	if (!c->srv->be.ops->getxattr)
		return NFS4ERR_NOTSUPP;
	if (!n || memchr(p, 0, n))
		return NFS4ERR_INVAL;
	if (n > NFS_NAME_MAX)
		return NFS4ERR_NAMETOOLONG;
	memcpy(key, p, n);
	key[n] = 0;
	return NFS4_OK;
}

uint32_t nfs_op_getxattr(struct nfs_compound *c, struct xdr_dec *a,
			 struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	char key[NFS_NAME_MAX + 1];
	uint8_t *buf;
	size_t len = 0;
	uint32_t st = xattr_start(c, a, key);
	int err;

	if (st)
		return st;
	buf = malloc(XATTR_VAL_MAX);
	if (!buf)
		return NFS4ERR_SERVERFAULT;
	err = be->ops->getxattr(be, &c->cfh, key, buf, XATTR_VAL_MAX, &len);
	if (!err)
		xdr_put_opaque(r, buf, (uint32_t)len, XDR_NOMAX);
	free(buf);
	return err ? xattr_errno(err) : NFS4_OK;
}

uint32_t nfs_op_setxattr(struct nfs_compound *c, struct xdr_dec *a,
			 struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	char key[NFS_NAME_MAX + 1];
	struct nfs_attr before, after;
	const uint8_t *val;
	uint32_t how = xdr_get_u32(a), st, vlen;
	int err, flags;

	st = xattr_start(c, a, key);
	val = xdr_get_opaque_ref(a, &vlen, XDR_NOMAX);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (st)
		return st;
	switch (how) {
	case SETXATTR4_EITHER: flags = 0; break;
	case SETXATTR4_CREATE: flags = XATTR_CREATE; break;
	case SETXATTR4_REPLACE: flags = XATTR_REPLACE; break;
	default: return NFS4ERR_INVAL;
	}
	if (vlen > XATTR_VAL_MAX)
		return NFS4ERR_XATTR2BIG;
	st = nfs_cur_attr(c, &before);
	if (st)
		return st;
	err = be->ops->setxattr(be, &c->cfh, key, val, vlen, flags);
	if (err)
		return xattr_errno(err);
	if (be->ops->getattr(be, &c->cfh, &after))
		after.change = before.change + 1;
	nfs_put_change_info(r, before.change, after.change);
	return NFS4_OK;
}

uint32_t nfs_op_removexattr(struct nfs_compound *c, struct xdr_dec *a,
			    struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	char key[NFS_NAME_MAX + 1];
	struct nfs_attr before, after;
	uint32_t st = xattr_start(c, a, key);
	int err;

	if (st)
		return st;
	st = nfs_cur_attr(c, &before);
	if (st)
		return st;
	err = be->ops->removexattr(be, &c->cfh, key);
	if (err)
		return xattr_errno(err);
	if (be->ops->getattr(be, &c->cfh, &after))
		after.change = before.change + 1;
	nfs_put_change_info(r, before.change, after.change);
	return NFS4_OK;
}

/*
 * LISTXATTRS: the cookie is the index of the next name; names are
 * added while the reply body stays within lxa_maxcount (TOOSMALL when
 * not even one fits).
 */
uint32_t nfs_op_listxattrs(struct nfs_compound *c, struct xdr_dec *a,
			   struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	uint64_t cookie = xdr_get_u64(a), idx = 0, next;
	uint32_t maxcount = xdr_get_u32(a), n = 0;
	size_t len = 0, i, used = 8 + 4 + 4, cookie_at, count_at;
	char *buf;
	int err;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	if (!c->has_cfh)
		return NFS4ERR_NOFILEHANDLE;
	if (!be->ops->listxattr)
		return NFS4ERR_NOTSUPP;
	buf = malloc(XATTR_LIST_MAX);
	if (!buf)
		return NFS4ERR_SERVERFAULT;
	err = be->ops->listxattr(be, &c->cfh, buf, XATTR_LIST_MAX, &len);
	if (err) {
		free(buf);
		return xattr_errno(err);
	}
	cookie_at = xdr_enc_len(r);
	xdr_put_u64(r, 0);			/* cookie, patched */
	count_at = xdr_enc_len(r);
	xdr_put_u32(r, 0);			/* names, patched */
	next = cookie;
	for (i = 0; i < len; i += strlen(buf + i) + 1, idx++) {
		size_t l = strlen(buf + i), need = 4 + ((l + 3) & ~(size_t)3);

		if (idx < cookie)
			continue;
		if (used + need > maxcount)
			break;
		xdr_put_opaque(r, buf + i, (uint32_t)l, XDR_NOMAX);
		used += need;
		n++;
		next = idx + 1;
	}
	free(buf);
	if (!n && i < len)
		return NFS4ERR_TOOSMALL;
	xdr_put_bool(r, i >= len);
	xdr_patch_u32(r, cookie_at, (uint32_t)(next >> 32));
	xdr_patch_u32(r, cookie_at + 4, (uint32_t)next);
	xdr_patch_u32(r, count_at, n);
	return NFS4_OK;
}
