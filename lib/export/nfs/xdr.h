/* SPDX-License-Identifier: MIT */
/*
 * A small hand-written XDR codec (RFC 4506) for the NFS server and client:
 * a bounds-checked cursor over a caller's buffer, no allocation, no rpcgen
 * and no libtirpc streams (docs/nfs.md says why).
 *
 * The error is sticky: the first failure is kept in ->err and every later
 * call is a no-op (getters return 0 / NULL), so a caller decodes or encodes
 * a whole structure and checks once at the end:
 *
 *   -EBADMSG  decoding: input too short, a length over its maximum, a bool
 *             other than 0/1
 *   -ENOSPC   encoding: the output buffer is full
 *   -EMSGSIZE encoding: a variable-length item over its maximum (a bug of
 *             the caller, not of the peer)
 *
 * Padding bytes are written as zeroes and skipped (not checked) on input,
 * as RFC 4506 allows readers to.
 */
#ifndef BLKSTACK_NFS_XDR_H
#define BLKSTACK_NFS_XDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XDR_UNIT 4u
/* Bytes of @n rounded up to the XDR unit. */
#define XDR_PAD(n) (((size_t)(n) + 3u) & ~(size_t)3u)
/* No maximum on a variable-length item (the buffer still bounds it). */
#define XDR_NOMAX UINT32_MAX

struct xdr_dec {
	const uint8_t *buf;
	size_t len;
	size_t pos;
	int err;
};

struct xdr_enc {
	uint8_t *buf;
	size_t cap;
	size_t pos;
	int err;
};

/* ---- decoding ------------------------------------------------------------ */

void xdr_dec_init(struct xdr_dec *d, const void *buf, size_t len);
static inline int xdr_dec_err(const struct xdr_dec *d) { return d->err; }
static inline size_t xdr_dec_left(const struct xdr_dec *d)
{
	return d->err ? 0 : d->len - d->pos;
}
/* Set the sticky error (first one wins); returns it. */
int xdr_dec_fail(struct xdr_dec *d, int err);

uint32_t xdr_get_u32(struct xdr_dec *d);
int32_t xdr_get_i32(struct xdr_dec *d);
uint64_t xdr_get_u64(struct xdr_dec *d);
int64_t xdr_get_i64(struct xdr_dec *d);
bool xdr_get_bool(struct xdr_dec *d);
static inline uint32_t xdr_get_enum(struct xdr_dec *d)
{
	return xdr_get_u32(d);
}
/* Fixed-length opaque[@len], copied to @out (may be NULL: skipped). */
void xdr_get_fixed(struct xdr_dec *d, void *out, size_t len);
/* Fixed-length opaque[@len] in place; NULL on error. */
const uint8_t *xdr_get_fixed_ref(struct xdr_dec *d, size_t len);
/*
 * Variable-length opaque<@max> in place: pointer to its bytes (non-NULL
 * even when *@len is 0, unless an error), length in *@len.
 */
const uint8_t *xdr_get_opaque_ref(struct xdr_dec *d, uint32_t *len,
				  uint32_t max);
/* Variable-length opaque<@max> copied to @out of @cap bytes (> cap: error). */
uint32_t xdr_get_opaque(struct xdr_dec *d, void *out, size_t cap,
			uint32_t max);
/* string<@max> in place, like xdr_get_opaque_ref (not NUL-terminated). */
static inline const char *xdr_get_string_ref(struct xdr_dec *d,
					     uint32_t *len, uint32_t max)
{
	return (const char *)xdr_get_opaque_ref(d, len, max);
}
/*
 * string<@max> copied NUL-terminated to @out of @cap bytes; a string that
 * does not fit (len >= cap) or holds a NUL byte is -EBADMSG.
 */
void xdr_get_cstring(struct xdr_dec *d, char *out, size_t cap, uint32_t max);
/* Skip @n bytes plus padding. */
void xdr_skip(struct xdr_dec *d, size_t n);

/* ---- encoding ------------------------------------------------------------ */

void xdr_enc_init(struct xdr_enc *e, void *buf, size_t cap);
static inline int xdr_enc_err(const struct xdr_enc *e) { return e->err; }
static inline size_t xdr_enc_len(const struct xdr_enc *e) { return e->pos; }
int xdr_enc_fail(struct xdr_enc *e, int err);

void xdr_put_u32(struct xdr_enc *e, uint32_t v);
void xdr_put_i32(struct xdr_enc *e, int32_t v);
void xdr_put_u64(struct xdr_enc *e, uint64_t v);
void xdr_put_i64(struct xdr_enc *e, int64_t v);
void xdr_put_bool(struct xdr_enc *e, bool v);
static inline void xdr_put_enum(struct xdr_enc *e, uint32_t v)
{
	xdr_put_u32(e, v);
}
/* Fixed-length opaque[@len] with zero padding. */
void xdr_put_fixed(struct xdr_enc *e, const void *p, size_t len);
/* Variable-length opaque<@max>: length, bytes, zero padding. */
void xdr_put_opaque(struct xdr_enc *e, const void *p, size_t len,
		    uint32_t max);
/* string<@max> of @len bytes; xdr_put_cstring takes a C string. */
static inline void xdr_put_string(struct xdr_enc *e, const char *s,
				  size_t len, uint32_t max)
{
	xdr_put_opaque(e, s, len, max);
}
void xdr_put_cstring(struct xdr_enc *e, const char *s, uint32_t max);
/*
 * Reserve @n bytes (rounded up to the unit, padding zeroed) and return
 * where they start, for the caller to fill (READ data) or to patch later
 * (a count known at the end); NULL on error.
 */
uint8_t *xdr_reserve(struct xdr_enc *e, size_t n);
/* Overwrite the u32 at byte @pos, already encoded. */
void xdr_patch_u32(struct xdr_enc *e, size_t pos, uint32_t v);
/* Forget everything after byte @pos, and the error (an op's reply that
 * did not fit is replaced by a shorter one). */
void xdr_enc_truncate(struct xdr_enc *e, size_t pos);

/* Big-endian loads and stores without a cursor. */
static inline uint32_t xdr_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}
static inline void xdr_set_be32(uint8_t *p, uint32_t v)
{
	p[0] = v >> 24;
	p[1] = v >> 16;
	p[2] = v >> 8;
	p[3] = v;
}

#endif
