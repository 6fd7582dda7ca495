/* SPDX-License-Identifier: MIT */
/*
 * The reply room read from a call's arguments (room.c), against the
 * replies the server really makes: for COMPOUNDs of the data path's ops
 * (every attribute GETATTR knows, a READ larger than the file, one
 * larger than the largest READ, WRITE and COMMIT, ACCESS, the handle
 * ops) the reply is never longer than the room, and the room is near
 * the reply rather than the largest reply; an op outside the list, a
 * procedure other than NULL and COMPOUND, and arguments cut short get
 * the largest reply. The fattr4 of every supported attribute fits
 * NFS_FATTR_MAX.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

static uint8_t out[NFS_MAX_REPLY];
static uint8_t req[NFS_MAX_RECORD];

#define FILE_LEN 12000u

/* nfs_th_fix (helpers/nfs_th.h) with a file "f" of FILE_LEN bytes */
static int setup(void **state)
{
	struct nfs_th_fix *f = nfs_th_fix_alloc(sizeof(*f), "/tmp");
	char path[128];
	uint8_t buf[FILE_LEN];

	snprintf(path, sizeof(path), "%s/f", f->dir);
	memset(buf, 'r', sizeof(buf));
	th_write_file(path, buf, sizeof(buf));
	*state = f;
	return 0;
}

/* a call of @proc; for COMPOUND, a 4.0 one of @nops ops */
static void begin(struct xdr_enc *e, uint32_t proc, uint32_t nops)
{
	if (proc == NFS4_PROC_COMPOUND)
		nfs_th_compound(e, req, sizeof(req), 0, nops);
	else
		nfs_th_call(e, req, sizeof(req), proc);
}

/* PUTROOTFH, LOOKUP "f" */
static void file_f(struct xdr_enc *e)
{
	xdr_put_u32(e, OP_PUTROOTFH);
	xdr_put_u32(e, OP_LOOKUP);
	xdr_put_cstring(e, "f", 255);
}

static void anon_stateid(struct xdr_enc *e)
{
	static const uint8_t zero[NFS4_STATEID_SIZE];

	xdr_put_fixed(e, zero, sizeof(zero));
}

/* run the call; the room it got and the reply's length; the COMPOUND's
 * status in *@st (when it is one) */
static size_t run(struct nfs_th_fix *f, struct xdr_enc *e, size_t *reply,
		  uint32_t *st)
{
	size_t room = nfs_reply_room(req, xdr_enc_len(e));
	struct xdr_dec d;
	uint32_t l;

	assert_int_equal(xdr_enc_err(e), 0);
	assert_int_equal(nfs_rpc_process(f->srv, 1, req, xdr_enc_len(e), out,
					 sizeof(out), reply), 0);
	assert_true(*reply <= room);
	if (st) {
		xdr_dec_init(&d, out, *reply);
		xdr_skip(&d, 6 * 4);	/* xid .. accept status */
		*st = xdr_get_u32(&d);
		xdr_get_opaque_ref(&d, &l, 16);	/* the tag */
	}
	return room;
}

static void room_holds_the_reply(void **state)
{
	struct nfs_th_fix *f = *state;
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st, n, words, i, alen;
	size_t room, reply;
	static uint8_t data[8192];

	/* every attribute there is, and the handle */
	begin(&e, NFS4_PROC_COMPOUND, 3);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_GETATTR);
	xdr_put_u32(&e, NFS4_BITMAP_WORDS);
	for (i = 0; i < NFS4_BITMAP_WORDS; i++)	/* but the write-only */
		xdr_put_u32(&e, nfs_supported_attrs[i] &
				       ~(i == 1 ? 1u << (FATTR4_TIME_ACCESS_SET - 32) |
					1u << (FATTR4_TIME_MODIFY_SET - 32) : 0));
	xdr_put_u32(&e, OP_GETFH);
	room = run(f, &e, &reply, &st);
	assert_int_equal(st, NFS4_OK);
	assert_true(room < 4096);
	/* the fattr4 itself: under NFS_FATTR_MAX */
	xdr_dec_init(&d, out, reply);
	xdr_skip(&d, 6 * 4);		/* RPC reply header */
	xdr_skip(&d, 4 + 8 + 4);	/* status, tag "t", count */
	xdr_skip(&d, 8 + 8);		/* PUTROOTFH, GETATTR: op, status */
	words = xdr_get_u32(&d);
	xdr_skip(&d, (size_t)words * 4);
	alen = xdr_get_u32(&d);
	assert_int_equal(xdr_dec_err(&d), 0);
	assert_true(alen > 200);	/* really all of them */
	assert_true(alen <= NFS_FATTR_MAX);

	/* a READ of 4 KiB, then the attributes: 4 KiB and change */
	begin(&e, NFS4_PROC_COMPOUND, 4);
	file_f(&e);
	xdr_put_u32(&e, OP_READ);
	anon_stateid(&e);
	xdr_put_u64(&e, 0);
	xdr_put_u32(&e, 4096);
	xdr_put_u32(&e, OP_GETATTR);
	xdr_put_u32(&e, 1);
	xdr_put_u32(&e, nfs_supported_attrs[0]);
	room = run(f, &e, &reply, &st);
	assert_int_equal(st, NFS4_OK);
	assert_true(reply > 4096);
	assert_true(room < 4096 + 4096);

	/* READs larger than the file and than the largest READ */
	begin(&e, NFS4_PROC_COMPOUND, 3);
	file_f(&e);
	xdr_put_u32(&e, OP_READ);
	anon_stateid(&e);
	xdr_put_u64(&e, 0);
	xdr_put_u32(&e, 64u << 20);
	room = run(f, &e, &reply, &st);
	assert_int_equal(st, NFS4_OK);
	assert_true(reply > FILE_LEN);
	assert_true(room >= NFS_MAX_IO && room < NFS_MAX_IO + 1024);

	/* WRITE 8 KiB, COMMIT, ACCESS, SAVEFH / RESTOREFH: no data back */
	begin(&e, NFS4_PROC_COMPOUND, 7);
	file_f(&e);
	xdr_put_u32(&e, OP_SAVEFH);
	xdr_put_u32(&e, OP_RESTOREFH);
	xdr_put_u32(&e, OP_WRITE);
	anon_stateid(&e);
	xdr_put_u64(&e, 100);
	xdr_put_u32(&e, UNSTABLE4);
	memset(data, 'w', sizeof(data));
	xdr_put_opaque(&e, data, sizeof(data), XDR_NOMAX);
	xdr_put_u32(&e, OP_COMMIT);
	xdr_put_u64(&e, 0);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, OP_ACCESS);
	xdr_put_u32(&e, 0x3f);
	room = run(f, &e, &reply, &st);
	assert_int_equal(st, NFS4_OK);
	assert_true(room < 512);

	/* many small ops: the room grows with them, stays small */
	begin(&e, NFS4_PROC_COMPOUND, NFS_MAX_OPS);
	for (i = 0; i < NFS_MAX_OPS; i++)
		xdr_put_u32(&e, OP_PUTROOTFH);
	room = run(f, &e, &reply, &st);
	assert_int_equal(st, NFS4_OK);
	assert_true(room < 2048);

	/* NULL: the bare reply */
	begin(&e, NFS4_PROC_NULL, 0);
	room = run(f, &e, &reply, NULL);
	assert_true(room <= 64);
	(void)n;
}

static void anything_else_gets_the_largest(void **state)
{
	struct nfs_th_fix *f = *state;
	struct xdr_enc e;
	size_t reply, len;

	/* an op outside the list (READDIR) */
	begin(&e, NFS4_PROC_COMPOUND, 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_READDIR);
	xdr_put_u64(&e, 0);
	xdr_put_fixed(&e, "\0\0\0\0\0\0\0\0", 8);
	xdr_put_u32(&e, 4096);
	xdr_put_u32(&e, 65536);
	xdr_put_u32(&e, 0);
	assert_int_equal(run(f, &e, &reply, NULL), NFS_MAX_REPLY);

	/* a READ cut short; a count promising more ops than sent */
	begin(&e, NFS4_PROC_COMPOUND, 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_READ);
	anon_stateid(&e);
	len = xdr_enc_len(&e);
	assert_int_equal(nfs_reply_room(req, len), NFS_MAX_REPLY);
	begin(&e, NFS4_PROC_COMPOUND, 3);
	xdr_put_u32(&e, OP_PUTROOTFH);
	assert_int_equal(nfs_reply_room(req, xdr_enc_len(&e)), NFS_MAX_REPLY);
	/* more ops than a COMPOUND may have */
	begin(&e, NFS4_PROC_COMPOUND, NFS_MAX_OPS * 4 + 1);
	assert_int_equal(nfs_reply_room(req, xdr_enc_len(&e)), NFS_MAX_REPLY);

	/* another procedure; a header cut short; nothing at all */
	begin(&e, 7, 0);
	assert_int_equal(run(f, &e, &reply, NULL), NFS_MAX_REPLY);
	assert_int_equal(nfs_reply_room(req, 20), NFS_MAX_REPLY);
	assert_int_equal(nfs_reply_room(req, 0), NFS_MAX_REPLY);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(room_holds_the_reply, setup,
						nfs_th_fix_teardown),
		cmocka_unit_test_setup_teardown(anything_else_gets_the_largest,
						setup, nfs_th_fix_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
