/* SPDX-License-Identifier: MIT */
/*
 * File attributes (RFC 8881 5): the bitmaps, the fattr4 encoding of the
 * mandatory and recommended attributes this server supports (in bit
 * order, from the backend's nfs_attr and statfs), the attributes a
 * client may set (size, mode, owner, owner_group, times), GETATTR,
 * SETATTR, VERIFY and NVERIFY.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/nfs/nfs.h"

#define B(n) (1u << ((n) % 32))

const uint32_t nfs_supported_attrs[NFS4_BITMAP_WORDS] = {
	B(FATTR4_SUPPORTED_ATTRS) | B(FATTR4_TYPE) | B(FATTR4_FH_EXPIRE_TYPE) |
	B(FATTR4_CHANGE) | B(FATTR4_SIZE) | B(FATTR4_LINK_SUPPORT) |
	B(FATTR4_SYMLINK_SUPPORT) | B(FATTR4_NAMED_ATTR) | B(FATTR4_FSID) |
	B(FATTR4_UNIQUE_HANDLES) | B(FATTR4_LEASE_TIME) |
	B(FATTR4_RDATTR_ERROR) | B(FATTR4_CANSETTIME) |
	B(FATTR4_CASE_INSENSITIVE) | B(FATTR4_CASE_PRESERVING) |
	B(FATTR4_CHOWN_RESTRICTED) | B(FATTR4_FILEHANDLE) |
	B(FATTR4_FILEID) | B(FATTR4_FILES_AVAIL) | B(FATTR4_FILES_FREE) |
	B(FATTR4_FILES_TOTAL) | B(FATTR4_HOMOGENEOUS) |
	B(FATTR4_MAXFILESIZE) | B(FATTR4_MAXLINK) | B(FATTR4_MAXNAME) |
	B(FATTR4_MAXREAD) | B(FATTR4_MAXWRITE),
	B(FATTR4_MODE) | B(FATTR4_NO_TRUNC) | B(FATTR4_NUMLINKS) |
	B(FATTR4_OWNER) | B(FATTR4_OWNER_GROUP) | B(FATTR4_RAWDEV) |
	B(FATTR4_SPACE_AVAIL) | B(FATTR4_SPACE_FREE) |
	B(FATTR4_SPACE_TOTAL) | B(FATTR4_SPACE_USED) |
	B(FATTR4_TIME_ACCESS) | B(FATTR4_TIME_ACCESS_SET) |
	B(FATTR4_TIME_DELTA) | B(FATTR4_TIME_METADATA) |
	B(FATTR4_TIME_MODIFY) | B(FATTR4_TIME_MODIFY_SET) |
	B(FATTR4_MOUNTED_ON_FILEID),
	B(FATTR4_SUPPATTR_EXCLCREAT) | B(FATTR4_XATTR_SUPPORT) |
	B(FATTR4_OPEN_ARGUMENTS),
};

/* attributes a client may set */
static const uint32_t settable[NFS4_BITMAP_WORDS] = {
	B(FATTR4_SIZE),
	B(FATTR4_MODE) | B(FATTR4_OWNER) | B(FATTR4_OWNER_GROUP) |
	B(FATTR4_TIME_ACCESS_SET) | B(FATTR4_TIME_MODIFY_SET),
	0,
};

/* write-only attributes: GETATTR of them is INVAL */
static const uint32_t writeonly[NFS4_BITMAP_WORDS] = {
	0, B(FATTR4_TIME_ACCESS_SET) | B(FATTR4_TIME_MODIFY_SET), 0,
};

static bool has(const uint32_t *bm, unsigned n)
{
	return n / 32 < NFS4_BITMAP_WORDS && (bm[n / 32] & B(n));
}

void nfs_get_bitmap(struct xdr_dec *a, uint32_t *bm, unsigned words)
{
	uint32_t n = xdr_get_u32(a), i;

	memset(bm, 0, words * sizeof(*bm));
	if (n > 64) {
		xdr_dec_fail(a, -EBADMSG);
		return;
	}
	for (i = 0; i < n; i++) {
		uint32_t w = xdr_get_u32(a);

		if (i < words)
			bm[i] = w;
	}
}

void nfs_put_bitmap(struct xdr_enc *r, const uint32_t *bm, unsigned words)
{
	unsigned n = words, i;

	while (n && !bm[n - 1])
		n--;
	xdr_put_u32(r, n);
	for (i = 0; i < n; i++)
		xdr_put_u32(r, bm[i]);
}

static void put_time(struct xdr_enc *r, const struct timespec *ts)
{
	xdr_put_i64(r, ts->tv_sec);
	xdr_put_u32(r, (uint32_t)ts->tv_nsec);
}

static void put_id(struct xdr_enc *r, uint32_t id)
{
	char s[16];

	snprintf(s, sizeof(s), "%u", id);
	xdr_put_cstring(r, s, NFS4_OPAQUE_LIMIT);
}

/*
 * RFC 9754's open_arguments4: what OPEN takes here, each a bitmap of
 * values: share access 1-3, deny 0-3, the wants ANY_DELEG (3), NO_DELEG
 * (4), CANCEL (5), claims NULL (0) and FH (4), all four create modes
 */
static void put_open_arguments(struct xdr_enc *r)
{
	static const uint32_t v[] = { 0xe, 0xf, 0x38, 0x11, 0xf };
	unsigned i;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		xdr_put_u32(r, 1);
		xdr_put_u32(r, v[i]);
	}
}

uint32_t nfs_encode_fattr(struct nfs_compound *c, struct xdr_enc *r,
			  const uint32_t *req, const struct nfs_fh *fh,
			  const struct nfs_attr *at)
{
	struct nfs_server *srv = c->srv;
	uint32_t bm[NFS4_BITMAP_WORDS];
	struct nfs_statfs sf;
	bool have_sf = false;
	size_t bm_at, len_at, start;
	unsigned i, n;

	for (i = 0; i < NFS4_BITMAP_WORDS; i++)
		bm[i] = req[i] & nfs_supported_attrs[i];
	if ((req[1] & writeonly[1]))
		return NFS4ERR_INVAL;
	if (has(bm, FATTR4_FILES_AVAIL) || has(bm, FATTR4_FILES_FREE) ||
	    has(bm, FATTR4_FILES_TOTAL) || has(bm, FATTR4_SPACE_AVAIL) ||
	    has(bm, FATTR4_SPACE_FREE) || has(bm, FATTR4_SPACE_TOTAL) ||
	    has(bm, FATTR4_FSID) || has(bm, FATTR4_MAXNAME)) {
		int err = srv->be.ops->statfs(&srv->be, &sf);

		if (err)
			return nfs_errno(err);
		have_sf = true;
	}
	bm_at = xdr_enc_len(r);
	nfs_put_bitmap(r, bm, NFS4_BITMAP_WORDS);
	len_at = xdr_enc_len(r);
	xdr_put_u32(r, 0);
	start = xdr_enc_len(r);
	(void)bm_at;
	for (n = 0; n < 32 * NFS4_BITMAP_WORDS; n++) {
		if (!has(bm, n))
			continue;
		switch (n) {
		case FATTR4_SUPPORTED_ATTRS:
			nfs_put_bitmap(r, nfs_supported_attrs,
				       NFS4_BITMAP_WORDS);
			break;
		case FATTR4_TYPE:
			xdr_put_u32(r, at->type);
			break;
		case FATTR4_FH_EXPIRE_TYPE:
			xdr_put_u32(r, FH4_PERSISTENT);
			break;
		case FATTR4_CHANGE:
			xdr_put_u64(r, at->change);
			break;
		case FATTR4_SIZE:
			xdr_put_u64(r, at->size);
			break;
		case FATTR4_LINK_SUPPORT:
		case FATTR4_SYMLINK_SUPPORT:
		case FATTR4_UNIQUE_HANDLES:
		case FATTR4_CANSETTIME:
		case FATTR4_CASE_PRESERVING:
		case FATTR4_CHOWN_RESTRICTED:
		case FATTR4_HOMOGENEOUS:
		case FATTR4_NO_TRUNC:
			xdr_put_bool(r, true);
			break;
		case FATTR4_NAMED_ATTR:
		case FATTR4_CASE_INSENSITIVE:
			xdr_put_bool(r, false);
			break;
		case FATTR4_FSID:
			xdr_put_u64(r, sf.fsid_major);
			xdr_put_u64(r, sf.fsid_minor);
			break;
		case FATTR4_LEASE_TIME:
			xdr_put_u32(r, srv->lease);
			break;
		case FATTR4_RDATTR_ERROR:
			xdr_put_u32(r, NFS4_OK);
			break;
		case FATTR4_FILEHANDLE: {
			struct nfs_fh w;

			nfs_fh_wrap(srv, fh, &w);
			xdr_put_opaque(r, w.data, w.len, NFS4_FHSIZE);
			break;
		}
		case FATTR4_FILEID:
		case FATTR4_MOUNTED_ON_FILEID:
			xdr_put_u64(r, at->fileid);
			break;
		case FATTR4_FILES_AVAIL:
			xdr_put_u64(r, sf.files_avail);
			break;
		case FATTR4_FILES_FREE:
			xdr_put_u64(r, sf.files_free);
			break;
		case FATTR4_FILES_TOTAL:
			xdr_put_u64(r, sf.files_total);
			break;
		case FATTR4_MAXFILESIZE:
			xdr_put_u64(r, INT64_MAX);
			break;
		case FATTR4_MAXLINK:
			xdr_put_u32(r, 65000);
			break;
		case FATTR4_MAXNAME:
			xdr_put_u32(r, have_sf ? sf.name_max : NFS_NAME_MAX);
			break;
		case FATTR4_MAXREAD:
		case FATTR4_MAXWRITE:
			xdr_put_u64(r, NFS_MAX_IO);
			break;
		case FATTR4_MODE:
			xdr_put_u32(r, at->mode & 07777);
			break;
		case FATTR4_NUMLINKS:
			xdr_put_u32(r, at->nlink);
			break;
		case FATTR4_OWNER:
			put_id(r, at->uid);
			break;
		case FATTR4_OWNER_GROUP:
			put_id(r, at->gid);
			break;
		case FATTR4_RAWDEV:
			xdr_put_u32(r, at->rdev_major);
			xdr_put_u32(r, at->rdev_minor);
			break;
		case FATTR4_SPACE_AVAIL:
			xdr_put_u64(r, sf.bytes_avail);
			break;
		case FATTR4_SPACE_FREE:
			xdr_put_u64(r, sf.bytes_free);
			break;
		case FATTR4_SPACE_TOTAL:
			xdr_put_u64(r, sf.bytes_total);
			break;
		case FATTR4_SPACE_USED:
			xdr_put_u64(r, at->used);
			break;
		case FATTR4_TIME_ACCESS:
			put_time(r, &at->atime);
			break;
		case FATTR4_TIME_DELTA: {
			struct timespec d = { 0, 1 };

			put_time(r, &d);
			break;
		}
		case FATTR4_TIME_METADATA:
			put_time(r, &at->ctime);
			break;
		case FATTR4_TIME_MODIFY:
			put_time(r, &at->mtime);
			break;
		case FATTR4_SUPPATTR_EXCLCREAT:
			nfs_put_bitmap(r, settable, NFS4_BITMAP_WORDS);
			break;
		case FATTR4_XATTR_SUPPORT:
			xdr_put_bool(r, srv->be.ops->getxattr != NULL);
			break;
		case FATTR4_OPEN_ARGUMENTS:
			put_open_arguments(r);
			break;
		}
	}
	xdr_patch_u32(r, len_at, (uint32_t)(xdr_enc_len(r) - start));
	return NFS4_OK;
}

/* "123" or "123@domain" -> 123; else -EINVAL */
static int parse_id(const char *s, uint32_t len, uint32_t *out)
{
	uint64_t v = 0;
	uint32_t i;

	if (!len)
		return -EINVAL;
	for (i = 0; i < len && s[i] != '@'; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > UINT32_MAX)
			return -EINVAL;
	}
	if (!i)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static void get_settime(struct xdr_dec *v, struct nfs_sattr *sa,
			uint32_t now_bit, uint32_t set_bit,
			struct timespec *ts)
{
	uint32_t how = xdr_get_u32(v);

	if (how == SET_TO_SERVER_TIME4) {
		sa->mask |= now_bit | set_bit;
	} else if (how == SET_TO_CLIENT_TIME4) {
		ts->tv_sec = xdr_get_i64(v);
		ts->tv_nsec = xdr_get_u32(v);
		if (ts->tv_nsec >= 1000000000)
			xdr_dec_fail(v, -EINVAL);
		sa->mask |= set_bit;
	} else {
		xdr_dec_fail(v, -EBADMSG);
	}
}

uint32_t nfs_decode_sattr(struct nfs_compound *c, struct xdr_dec *a,
			  struct nfs_sattr *sa, uint32_t *set)
{
	uint32_t bm[NFS4_BITMAP_WORDS], len, n, i, l;
	const uint8_t *vals;
	struct xdr_dec v;
	const char *s;

	memset(sa, 0, sizeof(*sa));
	nfs_get_bitmap(a, bm, NFS4_BITMAP_WORDS);
	vals = xdr_get_opaque_ref(a, &len, XDR_NOMAX);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	for (i = 0; i < NFS4_BITMAP_WORDS; i++) {
		if (bm[i] & ~nfs_supported_attrs[i])
			return NFS4ERR_ATTRNOTSUPP;
	}
	for (i = 0; i < NFS4_BITMAP_WORDS; i++)
		if (bm[i] & ~settable[i])
			return NFS4ERR_INVAL;
	if (set)
		memcpy(set, bm, sizeof(bm));
	xdr_dec_init(&v, vals, len);
	for (n = 0; n < 32 * NFS4_BITMAP_WORDS; n++) {
		if (!has(bm, n))
			continue;
		switch (n) {
		case FATTR4_SIZE:
			sa->size = xdr_get_u64(&v);
			sa->mask |= NFS_SA_SIZE;
			break;
		case FATTR4_MODE:
			sa->mode = xdr_get_u32(&v) & 07777;
			/* `setuid = 0`: nosuid (server.c) */
			if (!c->srv->setuid_ok)
				sa->mode &= ~(uint32_t)06000;
			sa->mask |= NFS_SA_MODE;
			break;
		case FATTR4_OWNER:
		case FATTR4_OWNER_GROUP:
			s = xdr_get_string_ref(&v, &l, NFS4_OPAQUE_LIMIT);
			if (!s)
				break;
			if (parse_id(s, l, n == FATTR4_OWNER ? &sa->uid :
				     &sa->gid))
				return NFS4ERR_BADOWNER;
			sa->mask |= n == FATTR4_OWNER ? NFS_SA_UID :
				    NFS_SA_GID;
			break;
		case FATTR4_TIME_ACCESS_SET:
			get_settime(&v, sa, NFS_SA_ATIME_NOW, NFS_SA_ATIME,
				    &sa->atime);
			break;
		case FATTR4_TIME_MODIFY_SET:
			get_settime(&v, sa, NFS_SA_MTIME_NOW, NFS_SA_MTIME,
				    &sa->mtime);
			break;
		}
	}
	if (xdr_dec_err(&v) == -EINVAL)
		return NFS4ERR_INVAL;
	if (xdr_dec_err(&v) || xdr_dec_left(&v))
		return NFS4ERR_BADXDR;
	return NFS4_OK;
}

uint32_t nfs_op_getattr(struct nfs_compound *c, struct xdr_dec *a,
			struct xdr_enc *r)
{
	uint32_t bm[NFS4_BITMAP_WORDS], st;
	struct nfs_attr at;

	nfs_get_bitmap(a, bm, NFS4_BITMAP_WORDS);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = nfs_cur_attr(c, &at);
	if (!st)
		st = nfs_deleg_getattr(c, bm, &at);
	if (st)
		return st;
	return nfs_encode_fattr(c, r, bm, &c->cfh, &at);
}

uint32_t nfs_op_setattr(struct nfs_compound *c, struct xdr_dec *a,
			struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_sattr sa;
	struct nfs_attr at;
	uint32_t set[NFS4_BITMAP_WORDS] = { 0 }, st;
	int err;

	nfs_get_stateid(c, a, &sid);
	st = nfs_decode_sattr(c, a, &sa, set);
	c->keep_body = true;
	if (!st)
		st = nfs_cur_attr(c, &at);
	if (!st && (sa.mask & NFS_SA_SIZE)) {
		if (at.type == NF4DIR)
			st = NFS4ERR_ISDIR;
		else if (at.type != NF4REG)
			st = NFS4ERR_INVAL;
		else
			st = nfs_state_check_io(c, &sid,
						OPEN4_SHARE_ACCESS_WRITE);
	}
	/* attributes a delegation holder caches change: recall it */
	if (!st)
		st = nfs_deleg_break_cur(c, true);
	if (!st) {
		err = c->srv->be.ops->setattr(&c->srv->be, &c->cfh, &sa);
		st = err ? nfs_errno(err) : NFS4_OK;
	}
	nfs_put_bitmap(r, st ? (uint32_t[NFS4_BITMAP_WORDS]){ 0 } : set,
		       NFS4_BITMAP_WORDS);
	return st;
}

/* VERIFY / NVERIFY: encode ours, compare bytes */
static uint32_t verify(struct nfs_compound *c, struct xdr_dec *a,
		       bool *same)
{
	uint32_t bm[NFS4_BITMAP_WORDS], len, st, i;
	const uint8_t *vals;
	struct nfs_attr at;
	struct xdr_enc e;
	uint8_t *buf;

	nfs_get_bitmap(a, bm, NFS4_BITMAP_WORDS);
	vals = xdr_get_opaque_ref(a, &len, XDR_NOMAX);
	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	for (i = 0; i < NFS4_BITMAP_WORDS; i++)
		if (bm[i] & ~nfs_supported_attrs[i])
			return NFS4ERR_ATTRNOTSUPP;
	if (has(bm, FATTR4_RDATTR_ERROR))
		return NFS4ERR_INVAL;
	st = nfs_cur_attr(c, &at);
	if (st)
		return st;
	buf = malloc(8192);
	if (!buf)
		return NFS4ERR_SERVERFAULT;
	xdr_enc_init(&e, buf, 8192);
	st = nfs_encode_fattr(c, &e, bm, &c->cfh, &at);
	if (!st && xdr_enc_err(&e))
		st = NFS4ERR_SERVERFAULT;
	if (!st) {
		/* skip our bitmap and length: compare the values */
		struct xdr_dec d;
		uint32_t mine_len;
		const uint8_t *mine;
		uint32_t tmp[NFS4_BITMAP_WORDS];

		xdr_dec_init(&d, buf, xdr_enc_len(&e));
		nfs_get_bitmap(&d, tmp, NFS4_BITMAP_WORDS);
		mine = xdr_get_opaque_ref(&d, &mine_len, XDR_NOMAX);
		*same = mine && mine_len == len && !memcmp(mine, vals, len);
	}
	free(buf);
	return st;
}

uint32_t nfs_op_verify(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	bool same = false;
	uint32_t st = verify(c, a, &same);

	return st ? st : same ? NFS4_OK : NFS4ERR_NOT_SAME;
}

uint32_t nfs_op_nverify(struct nfs_compound *c, struct xdr_dec *a,
			struct xdr_enc *r)
{
	bool same = false;
	uint32_t st = verify(c, a, &same);

	return st ? st : same ? NFS4ERR_SAME : NFS4_OK;
}
