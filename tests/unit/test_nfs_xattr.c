/* SPDX-License-Identifier: MIT */
/*
 * RFC 8276 extended attributes through nfs_compound() (minor version 2,
 * a session) on the directory backend: SETXATTR's CREATE / REPLACE /
 * EITHER, GETXATTR, NOXATTR, LISTXATTRS with its cookie and maxcount,
 * REMOVEXATTR; the host sees user.NAME. Skips when the temporary
 * directory's filesystem has no user xattrs.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

struct fix {
	struct nfs_th_fix th;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint32_t seq;
};

static uint8_t out[NFS_MAX_REPLY];

static uint32_t run(struct fix *f, struct xdr_enc *e, struct xdr_dec *d)
{
	return nfs_th_run(f->th.srv, 1, e, d, out, sizeof(out));
}

/* a COMPOUND of SEQUENCE, PUTROOTFH and one op the caller appends */
static void head(struct fix *f, struct xdr_enc *e, uint8_t *b, size_t cap)
{
	xdr_enc_init(e, b, cap);
	xdr_put_u32(e, 0);
	xdr_put_u32(e, 2);
	xdr_put_u32(e, 3);
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, f->sid, sizeof(f->sid));
	xdr_put_u32(e, ++f->seq);
	xdr_put_u32(e, 0);
	xdr_put_u32(e, 0);
	xdr_put_bool(e, false);
	xdr_put_u32(e, OP_PUTROOTFH);
}

static int setup(void **state)
{
	struct fix *f = NFS_TH_FIX_NEW(struct fix, "/var/tmp");
	static const struct nfs_th_chan chan = { 8192, 8192, 8192, 16, 4 };
	const uint8_t verf[8] = { 1 };

	if (setxattr(f->th.dir, "user.probe", "x", 1, 0) < 0 ||
	    removexattr(f->th.dir, "user.probe") < 0) {
		nfs_th_fix_free(f);
		skip();
	}
	/* on connection 1, the one run() uses */
	nfs_th_session(f->th.srv, 1, verf, "x", &chan, f->sid);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	nfs_th_fix_free(*state);
	return 0;
}

static uint32_t set(struct fix *f, uint32_t how, const char *k,
		    const char *v)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	head(f, &e, b, sizeof(b));
	xdr_put_u32(&e, OP_SETXATTR);
	xdr_put_u32(&e, how);
	xdr_put_cstring(&e, k, 255);
	xdr_put_cstring(&e, v, 255);
	return run(f, &e, &d);
}

static uint32_t get(struct fix *f, const char *k, char *v, size_t cap)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	const uint8_t *p;
	uint32_t st, l;

	head(f, &e, b, sizeof(b));
	xdr_put_u32(&e, OP_GETXATTR);
	xdr_put_cstring(&e, k, 255);
	st = run(f, &e, &d);
	if (!st) {
		p = xdr_get_opaque_ref(&d, &l, (uint32_t)cap - 1);
		assert_non_null(p);
		memcpy(v, p, l);
		v[l] = 0;
	}
	return st;
}

static void set_get_remove(void **state)
{
	struct fix *f = *state;
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	char v[64];

	assert_int_equal(get(f, "a", v, sizeof(v)), NFS4ERR_NOXATTR);
	assert_int_equal(set(f, SETXATTR4_REPLACE, "a", "1"), NFS4ERR_NOXATTR);
	assert_int_equal(set(f, SETXATTR4_CREATE, "a", "1"), NFS4_OK);
	assert_int_equal(set(f, SETXATTR4_CREATE, "a", "2"), NFS4ERR_EXIST);
	assert_int_equal(set(f, SETXATTR4_REPLACE, "a", "22"), NFS4_OK);
	assert_int_equal(get(f, "a", v, sizeof(v)), NFS4_OK);
	assert_string_equal(v, "22");
	assert_int_equal(set(f, SETXATTR4_EITHER, "b", "3"), NFS4_OK);
	assert_int_equal(set(f, 7, "b", "3"), NFS4ERR_INVAL);
	assert_int_equal(set(f, SETXATTR4_EITHER, "", "3"), NFS4ERR_INVAL);
	/* the host's name */
	assert_int_equal(getxattr(f->th.dir, "user.a", v, sizeof(v)), 2);

	head(f, &e, b, sizeof(b));
	xdr_put_u32(&e, OP_REMOVEXATTR);
	xdr_put_cstring(&e, "a", 255);
	assert_int_equal(run(f, &e, &d), NFS4_OK);
	head(f, &e, b, sizeof(b));
	xdr_put_u32(&e, OP_REMOVEXATTR);
	xdr_put_cstring(&e, "a", 255);
	assert_int_equal(run(f, &e, &d), NFS4ERR_NOXATTR);
	removexattr(f->th.dir, "user.b");
}

/* LISTXATTRS from @cookie: names in @names ("k1,k2,"), *next, *eof */
static uint32_t list(struct fix *f, uint64_t cookie, uint32_t max,
		     char *names, uint64_t *next, bool *eof)
{
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st, n, l;

	head(f, &e, b, sizeof(b));
	xdr_put_u32(&e, OP_LISTXATTRS);
	xdr_put_u64(&e, cookie);
	xdr_put_u32(&e, max);
	st = run(f, &e, &d);
	names[0] = 0;
	if (st)
		return st;
	*next = xdr_get_u64(&d);
	n = xdr_get_u32(&d);
	while (n--) {
		const uint8_t *p = xdr_get_opaque_ref(&d, &l, 255);

		assert_non_null(p);
		strncat(names, (const char *)p, l);
		strcat(names, ",");
	}
	*eof = xdr_get_bool(&d);
	assert_int_equal(xdr_dec_err(&d), 0);
	return NFS4_OK;
}

static void listing(void **state)
{
	struct fix *f = *state;
	char names[256];
	uint64_t next;
	bool eof;

	assert_int_equal(list(f, 0, 8192, names, &next, &eof), NFS4_OK);
	assert_string_equal(names, "");
	assert_true(eof);
	assert_int_equal(set(f, SETXATTR4_CREATE, "k1", "v"), NFS4_OK);
	assert_int_equal(set(f, SETXATTR4_CREATE, "k2", "v"), NFS4_OK);
	/* a name in another namespace (when root may set it) is not listed */
	(void)setxattr(f->th.dir, "trusted.t", "v", 1, 0);
	assert_int_equal(list(f, 0, 8192, names, &next, &eof), NFS4_OK);
	assert_true(!strcmp(names, "k1,k2,") || !strcmp(names, "k2,k1,"));
	assert_true(eof);
	/* room for one name (8 + 4 + 8 + 4): the cookie goes on */
	assert_int_equal(list(f, 0, 24, names, &next, &eof), NFS4_OK);
	assert_int_equal(strlen(names), 3);
	assert_false(eof);
	assert_int_equal(next, 1);
	assert_int_equal(list(f, next, 24, names, &next, &eof), NFS4_OK);
	assert_int_equal(strlen(names), 3);
	assert_true(eof);
	assert_int_equal(list(f, 0, 16, names, &next, &eof),
			 NFS4ERR_TOOSMALL);
	removexattr(f->th.dir, "user.k1");
	removexattr(f->th.dir, "user.k2");
	removexattr(f->th.dir, "trusted.t");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(set_get_remove, setup,
						teardown),
		cmocka_unit_test_setup_teardown(listing, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
