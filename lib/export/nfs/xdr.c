/* SPDX-License-Identifier: MIT */
/* The XDR cursor of xdr.h: every access bounds-checked, errors sticky. */
#include <errno.h>
#include <string.h>

#include "export/nfs/xdr.h"

void xdr_dec_init(struct xdr_dec *d, const void *buf, size_t len)
{
	d->buf = buf;
	d->len = len;
	d->pos = 0;
	d->err = 0;
}

int xdr_dec_fail(struct xdr_dec *d, int err)
{
	if (!d->err)
		d->err = err;
	return d->err;
}

/* @n bytes plus padding at the cursor, or NULL (error set). */
static const uint8_t *take(struct xdr_dec *d, size_t n)
{
	const uint8_t *p;
	size_t padded;

	if (d->err)
		return NULL;
	padded = XDR_PAD(n);
	if (padded < n || padded > d->len - d->pos) {
		xdr_dec_fail(d, -EBADMSG);
		return NULL;
	}
	p = d->buf + d->pos;
	d->pos += padded;
	return p;
}

uint32_t xdr_get_u32(struct xdr_dec *d)
{
	const uint8_t *p = take(d, 4);

	return p ? xdr_be32(p) : 0;
}

int32_t xdr_get_i32(struct xdr_dec *d)
{
	return (int32_t)xdr_get_u32(d);
}

uint64_t xdr_get_u64(struct xdr_dec *d)
{
	const uint8_t *p = take(d, 8);

	return p ? (uint64_t)xdr_be32(p) << 32 | xdr_be32(p + 4) : 0;
}

int64_t xdr_get_i64(struct xdr_dec *d)
{
	return (int64_t)xdr_get_u64(d);
}

bool xdr_get_bool(struct xdr_dec *d)
{
	uint32_t v = xdr_get_u32(d);

	if (v > 1) {
		xdr_dec_fail(d, -EBADMSG);
		return false;
	}
	return v;
}

void xdr_get_fixed(struct xdr_dec *d, void *out, size_t len)
{
	const uint8_t *p = take(d, len);

	if (p && out && len)
		memcpy(out, p, len);
}

const uint8_t *xdr_get_fixed_ref(struct xdr_dec *d, size_t len)
{
	return take(d, len);
}

const uint8_t *xdr_get_opaque_ref(struct xdr_dec *d, uint32_t *len,
				  uint32_t max)
{
	uint32_t n = xdr_get_u32(d);
	const uint8_t *p;

	*len = 0;
	if (d->err)
		return NULL;
	if (n > max) {
		xdr_dec_fail(d, -EBADMSG);
		return NULL;
	}
	p = take(d, n);
	if (p)
		*len = n;
	return p;
}

uint32_t xdr_get_opaque(struct xdr_dec *d, void *out, size_t cap,
			uint32_t max)
{
	uint32_t n;
	const uint8_t *p = xdr_get_opaque_ref(d, &n, max);

	if (!p)
		return 0;
	if (n > cap) {
		xdr_dec_fail(d, -EBADMSG);
		return 0;
	}
	if (n)
		memcpy(out, p, n);
	return n;
}

void xdr_get_cstring(struct xdr_dec *d, char *out, size_t cap, uint32_t max)
{
	uint32_t n;
	const uint8_t *p = xdr_get_opaque_ref(d, &n, max);

	if (cap)
		out[0] = 0;
	if (!p)
		return;
	if (n >= cap || memchr(p, 0, n)) {
		xdr_dec_fail(d, -EBADMSG);
		return;
	}
	memcpy(out, p, n);
	out[n] = 0;
}

void xdr_skip(struct xdr_dec *d, size_t n)
{
	take(d, n);
}

/* ---- encoding ------------------------------------------------------------ */

void xdr_enc_init(struct xdr_enc *e, void *buf, size_t cap)
{
	e->buf = buf;
	e->cap = cap;
	e->pos = 0;
	e->err = 0;
}

int xdr_enc_fail(struct xdr_enc *e, int err)
{
	if (!e->err)
		e->err = err;
	return e->err;
}

uint8_t *xdr_reserve(struct xdr_enc *e, size_t n)
{
	size_t padded;
	uint8_t *p;

	if (e->err)
		return NULL;
	padded = XDR_PAD(n);
	if (padded < n || padded > e->cap - e->pos) {
		xdr_enc_fail(e, -ENOSPC);
		return NULL;
	}
	p = e->buf + e->pos;
	if (padded > n)
		memset(p + n, 0, padded - n);
	e->pos += padded;
	return p;
}

void xdr_put_u32(struct xdr_enc *e, uint32_t v)
{
	uint8_t *p = xdr_reserve(e, 4);

	if (p)
		xdr_set_be32(p, v);
}

void xdr_put_i32(struct xdr_enc *e, int32_t v)
{
	xdr_put_u32(e, (uint32_t)v);
}

void xdr_put_u64(struct xdr_enc *e, uint64_t v)
{
	uint8_t *p = xdr_reserve(e, 8);

	if (p) {
		xdr_set_be32(p, v >> 32);
		xdr_set_be32(p + 4, (uint32_t)v);
	}
}

void xdr_put_i64(struct xdr_enc *e, int64_t v)
{
	xdr_put_u64(e, (uint64_t)v);
}

void xdr_put_bool(struct xdr_enc *e, bool v)
{
	xdr_put_u32(e, v ? 1 : 0);
}

void xdr_put_fixed(struct xdr_enc *e, const void *src, size_t len)
{
	uint8_t *p = xdr_reserve(e, len);

	if (p && len)
		memcpy(p, src, len);
}

void xdr_put_opaque(struct xdr_enc *e, const void *src, size_t len,
		    uint32_t max)
{
	if (e->err)
		return;
	if (len > max) {
		xdr_enc_fail(e, -EMSGSIZE);
		return;
	}
	xdr_put_u32(e, (uint32_t)len);
	xdr_put_fixed(e, src, len);
}

void xdr_put_cstring(struct xdr_enc *e, const char *s, uint32_t max)
{
	xdr_put_opaque(e, s, strlen(s), max);
}

void xdr_patch_u32(struct xdr_enc *e, size_t pos, uint32_t v)
{
	if (pos + 4 <= e->pos)
		xdr_set_be32(e->buf + pos, v);
}

void xdr_enc_truncate(struct xdr_enc *e, size_t pos)
{
	if (pos <= e->pos) {
		e->pos = pos;
		e->err = 0;
	}
}
