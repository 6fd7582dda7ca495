/* SPDX-License-Identifier: MIT */
/*
 * The XDR cursor (lib/export/nfs/xdr.c): byte layout of every type,
 * padding, maxima, and the sticky errors (-EBADMSG on short or oversized
 * input, -ENOSPC on a full output, -EMSGSIZE on an oversized item).
 */
#include <errno.h>
#include <string.h>

#include "export/nfs/nfs4_const.h"
#include "export/nfs/xdr.h"
#include "helpers/th.h"

static void roundtrip_scalars(void **state)
{
	uint8_t b[64];
	struct xdr_enc e;
	struct xdr_dec d;
	static const uint8_t want[] = {
		0x12, 0x34, 0x56, 0x78,			/* u32 */
		0xff, 0xff, 0xff, 0xfe,			/* i32 -2 */
		0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* u64 */
		0, 0, 0, 1,				/* true */
		0, 0, 0, 0,				/* false */
		0, 0, 0x27, 0x14,			/* enum 10004 */
	};

	(void)state;
	xdr_enc_init(&e, b, sizeof(b));
	xdr_put_u32(&e, 0x12345678);
	xdr_put_i32(&e, -2);
	xdr_put_u64(&e, 0x0102030405060708ull);
	xdr_put_bool(&e, true);
	xdr_put_bool(&e, false);
	xdr_put_enum(&e, NFS4ERR_NOTSUPP);
	assert_int_equal(xdr_enc_err(&e), 0);
	assert_int_equal(xdr_enc_len(&e), sizeof(want));
	assert_memory_equal(b, want, sizeof(want));

	xdr_dec_init(&d, b, xdr_enc_len(&e));
	assert_int_equal(xdr_get_u32(&d), 0x12345678);
	assert_int_equal(xdr_get_i32(&d), -2);
	assert_true(xdr_get_u64(&d) == 0x0102030405060708ull);
	assert_true(xdr_get_bool(&d));
	assert_false(xdr_get_bool(&d));
	assert_int_equal(xdr_get_enum(&d), 10004);
	assert_int_equal(xdr_dec_err(&d), 0);
	assert_int_equal(xdr_dec_left(&d), 0);
	/* reading past the end: sticky -EBADMSG, zero values */
	assert_int_equal(xdr_get_u32(&d), 0);
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);
	assert_true(xdr_get_u64(&d) == 0);
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);
}

static void opaque_and_padding(void **state)
{
	uint8_t b[64];
	char s[16];
	uint8_t fix[5];
	struct xdr_enc e;
	struct xdr_dec d;
	const uint8_t *p;
	uint32_t n;
	static const uint8_t want[] = {
		0, 0, 0, 3, 'a', 'b', 'c', 0,		/* string<> "abc" */
		1, 2, 3, 4, 5, 0, 0, 0,			/* opaque[5] */
		0, 0, 0, 0,				/* opaque<> empty */
		0, 0, 0, 4, 'w', 'x', 'y', 'z',		/* no padding */
	};

	(void)state;
	memset(b, 0xee, sizeof(b));
	xdr_enc_init(&e, b, sizeof(b));
	xdr_put_cstring(&e, "abc", 8);
	xdr_put_fixed(&e, "\1\2\3\4\5", 5);
	xdr_put_opaque(&e, NULL, 0, 8);
	xdr_put_string(&e, "wxyz", 4, 4);
	assert_int_equal(xdr_enc_err(&e), 0);
	assert_int_equal(xdr_enc_len(&e), sizeof(want));
	assert_memory_equal(b, want, sizeof(want));

	xdr_dec_init(&d, b, sizeof(want));
	xdr_get_cstring(&d, s, sizeof(s), 8);
	assert_string_equal(s, "abc");
	xdr_get_fixed(&d, fix, 5);
	assert_memory_equal(fix, "\1\2\3\4\5", 5);
	p = xdr_get_opaque_ref(&d, &n, 8);
	assert_non_null(p);
	assert_int_equal(n, 0);
	p = (const uint8_t *)xdr_get_string_ref(&d, &n, 4);
	assert_int_equal(n, 4);
	assert_memory_equal(p, "wxyz", 4);
	assert_int_equal(xdr_dec_err(&d), 0);

	/* over the maximum: -EBADMSG, NULL */
	xdr_dec_init(&d, b, sizeof(want));
	p = xdr_get_opaque_ref(&d, &n, 2);
	assert_null(p);
	assert_int_equal(n, 0);
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);

	/* length larger than the input */
	xdr_dec_init(&d, b, 6);
	assert_null(xdr_get_opaque_ref(&d, &n, XDR_NOMAX));
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);

	/* padding missing at the end of the input */
	xdr_dec_init(&d, b, 7);
	assert_null(xdr_get_opaque_ref(&d, &n, XDR_NOMAX));
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);

	/* a C string that does not fit, or holds a NUL */
	xdr_dec_init(&d, b, sizeof(want));
	xdr_get_cstring(&d, s, 3, 8);
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);
	assert_string_equal(s, "");
	b[5] = 0;
	xdr_dec_init(&d, b, sizeof(want));
	xdr_get_cstring(&d, s, sizeof(s), 8);
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);
}

static void huge_length(void **state)
{
	/* a length of 0xfffffffd must not wrap the padding arithmetic */
	uint8_t b[8] = { 0xff, 0xff, 0xff, 0xfd, 1, 2, 3, 4 };
	struct xdr_dec d;
	uint32_t n;

	(void)state;
	xdr_dec_init(&d, b, sizeof(b));
	assert_null(xdr_get_opaque_ref(&d, &n, XDR_NOMAX));
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);
	xdr_dec_init(&d, b, sizeof(b));
	xdr_skip(&d, SIZE_MAX - 1);
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);
}

static void bad_bool(void **state)
{
	uint8_t b[4] = { 0, 0, 0, 2 };
	struct xdr_dec d;

	(void)state;
	xdr_dec_init(&d, b, sizeof(b));
	assert_false(xdr_get_bool(&d));
	assert_int_equal(xdr_dec_err(&d), -EBADMSG);
}

static void full_output(void **state)
{
	uint8_t b[12];
	struct xdr_enc e;
	uint8_t *p;

	(void)state;
	xdr_enc_init(&e, b, sizeof(b));
	xdr_put_u64(&e, 1);
	xdr_put_u64(&e, 2);	/* does not fit */
	assert_int_equal(xdr_enc_err(&e), -ENOSPC);
	assert_int_equal(xdr_enc_len(&e), 8);
	xdr_put_u32(&e, 3);	/* sticky: nothing more is written */
	assert_int_equal(xdr_enc_len(&e), 8);
	assert_int_equal(xdr_enc_err(&e), -ENOSPC);

	/* truncate forgets the error, then reserve + patch */
	xdr_enc_truncate(&e, 4);
	assert_int_equal(xdr_enc_err(&e), 0);
	p = xdr_reserve(&e, 3);
	assert_non_null(p);
	assert_int_equal(xdr_enc_len(&e), 8);
	assert_int_equal(p[3], 0);	/* padding zeroed */
	xdr_patch_u32(&e, 4, 0xa1b2c3d4);
	assert_int_equal(xdr_be32(b + 4), 0xa1b2c3d4);

	/* an item over its maximum is the caller's bug: -EMSGSIZE */
	xdr_enc_init(&e, b, sizeof(b));
	xdr_put_opaque(&e, "abcdef", 6, 4);
	assert_int_equal(xdr_enc_err(&e), -EMSGSIZE);
	assert_int_equal(xdr_enc_len(&e), 0);
}

static void constants(void **state)
{
	(void)state;
	/* spot checks against the RFCs' tables */
	assert_int_equal(NFS4_PROGRAM, 100003);
	assert_int_equal(OP_ALLOCATE, 59);
	assert_int_equal(OP_COPY, 60);
	assert_int_equal(OP_DEALLOCATE, 62);
	assert_int_equal(OP_READ_PLUS, 68);
	assert_int_equal(OP_SEEK, 69);
	assert_int_equal(OP_WRITE_SAME, 70);
	assert_int_equal(OP_SEQUENCE, 53);
	assert_int_equal(OP_ILLEGAL, 10044);
	assert_int_equal(NFS4ERR_NOTSUPP, 10004);
	assert_int_equal(NFS4ERR_UNION_NOTSUPP, 10090);
	assert_int_equal(NFS4ERR_FBIG, 27);
	assert_int_equal(NFS4ERR_INVAL, 22);
	assert_int_equal(FATTR4_SUPPATTR_EXCLCREAT, 75);
	assert_int_equal(FATTR4_SEC_LABEL, 80);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(roundtrip_scalars),
		cmocka_unit_test(opaque_and_padding),
		cmocka_unit_test(huge_length),
		cmocka_unit_test(bad_bool),
		cmocka_unit_test(full_output),
		cmocka_unit_test(constants),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
