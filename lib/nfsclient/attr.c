/* SPDX-License-Identifier: MIT */
/*
 * Attributes the NFS client asks for (type, size, fileid, mode, numlinks,
 * space used, modify time) and the fattr4 decoder: the values come in
 * the order of their bit numbers, and every one of these is of fixed
 * size, so any other bit the server sets is a reply this client cannot
 * read (-EBADMSG).
 */
#include <errno.h>
#include <string.h>

#include "nfsclient/internal.h"

#define BIT(n) (1u << ((n) % 32))

static const uint32_t wanted[2] = {
	BIT(FATTR4_TYPE) | BIT(FATTR4_SIZE) | BIT(FATTR4_FILEID),
	BIT(FATTR4_MODE) | BIT(FATTR4_NUMLINKS) | BIT(FATTR4_SPACE_USED) |
		BIT(FATTR4_TIME_MODIFY),
};

void nfsc_put_bitmap(struct xdr_enc *e, const uint32_t *w, uint32_t n)
{
	uint32_t i;

	xdr_put_u32(e, n);
	for (i = 0; i < n; i++)
		xdr_put_u32(e, w[i]);
}

void nfsc_get_bitmap(struct xdr_dec *d, uint32_t *w, uint32_t n)
{
	uint32_t len = xdr_get_u32(d), i;

	if (len > 8) {
		xdr_dec_fail(d, -EBADMSG);
		return;
	}
	memset(w, 0, n * sizeof(*w));
	for (i = 0; i < len; i++) {
		uint32_t v = xdr_get_u32(d);

		if (i < n)
			w[i] = v;
		else if (v)
			xdr_dec_fail(d, -EBADMSG);
	}
}

void nfsc_put_attr_request(struct xdr_enc *e)
{
	nfsc_put_bitmap(e, wanted, 2);
}

void nfsc_get_fattr(struct xdr_dec *d, struct bs_nfs_attr *a)
{
	uint32_t w[2], len;
	const uint8_t *vals;
	struct xdr_dec v;

	memset(a, 0, sizeof(*a));
	nfsc_get_bitmap(d, w, 2);
	vals = xdr_get_opaque_ref(d, &len, XDR_NOMAX);
	if (xdr_dec_err(d))
		return;
	if ((w[0] & ~wanted[0]) || (w[1] & ~wanted[1])) {
		xdr_dec_fail(d, -EBADMSG);
		return;
	}
	xdr_dec_init(&v, vals, len);
	if (w[0] & BIT(FATTR4_TYPE))
		a->type = xdr_get_u32(&v);
	if (w[0] & BIT(FATTR4_SIZE))
		a->size = xdr_get_u64(&v);
	if (w[0] & BIT(FATTR4_FILEID))
		a->fileid = xdr_get_u64(&v);
	if (w[1] & BIT(FATTR4_MODE))
		a->mode = xdr_get_u32(&v);
	if (w[1] & BIT(FATTR4_NUMLINKS))
		a->nlink = xdr_get_u32(&v);
	if (w[1] & BIT(FATTR4_SPACE_USED))
		a->space_used = xdr_get_u64(&v);
	if (w[1] & BIT(FATTR4_TIME_MODIFY)) {
		a->mtime = xdr_get_i64(&v);
		xdr_get_u32(&v);	/* nanoseconds */
	}
	if (xdr_dec_err(&v))
		xdr_dec_fail(d, -EBADMSG);
}
