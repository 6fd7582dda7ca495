/* SPDX-License-Identifier: MIT */
/*
 * The NFS server's RPC layers without a socket: record marking
 * (fragments, byte-at-a-time input, the size cap, admission of each
 * fragment at its header), the RPC refusals
 * (RPC_MISMATCH, AUTH_ERROR, PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL,
 * GARBAGE_ARGS), COMPOUND decoding (minor version, unknown op numbers,
 * a count promising more ops than sent, SEQUENCE rules) and the slot
 * table's reply cache, on a server over a temporary host directory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

static uint8_t out[NFS_MAX_REPLY];
static size_t out_len;

/* ---- record marking ------------------------------------------------------ */

/* 16 bytes: "abc" in a first fragment (at 0), "defgh" in the last (at 7) */
static void two_fragments(uint8_t *in)
{
	xdr_set_be32(in, 3);
	memcpy(in + 4, "abc", 3);
	xdr_set_be32(in + 7, RPC_LAST_FRAG | 5);
	memcpy(in + 11, "defgh", 5);
}

static void rm_fragments(void **state)
{
	uint8_t in[32];
	struct nfs_rm rm;
	size_t i;

	(void)state;
	two_fragments(in);
	nfs_rm_init(&rm, 1024);
	assert_int_equal(nfs_rm_feed(&rm, in, 16), 16);
	assert_true(rm.ready);
	assert_int_equal(rm.len, 8);
	assert_memory_equal(rm.buf, "abcdefgh", 8);
	nfs_rm_next(&rm);
	/* the same, one byte at a time; a ready record stops the feed */
	for (i = 0; i < 16; i++) {
		assert_false(rm.ready);
		assert_int_equal(nfs_rm_feed(&rm, in + i, 1), 1);
	}
	assert_true(rm.ready);
	assert_int_equal(nfs_rm_feed(&rm, in, 4), 0);
	assert_memory_equal(rm.buf, "abcdefgh", 8);
	nfs_rm_free(&rm);
}

/* a fragment's body received in place: nothing before its header, the
 * rest of it at once, in pieces, and then the next fragment by feed */
static void rm_direct(void **state)
{
	static const uint8_t h1[4] = { 0x00, 0x00, 0x00, 0x06 };
	static const uint8_t h2[4] = { 0x80, 0x00, 0x00, 0x03 };
	struct nfs_rm rm;
	uint8_t *dst;

	(void)state;
	nfs_rm_init(&rm, 1024);
	assert_int_equal(nfs_rm_direct(&rm, &dst), 0);
	assert_int_equal(nfs_rm_feed(&rm, h1, 4), 4);
	assert_int_equal(nfs_rm_feed(&rm, (const uint8_t *)"ab", 2), 2);
	assert_int_equal(nfs_rm_direct(&rm, &dst), 4);
	memcpy(dst, "cd", 2);
	nfs_rm_direct_done(&rm, 2);
	assert_int_equal(nfs_rm_direct(&rm, &dst), 2);
	memcpy(dst, "ef", 2);
	nfs_rm_direct_done(&rm, 2);
	/* between fragments: nothing in place, the header comes by feed */
	assert_false(rm.ready);
	assert_int_equal(nfs_rm_direct(&rm, &dst), 0);
	assert_int_equal(nfs_rm_feed(&rm, h2, 4), 4);
	assert_int_equal(nfs_rm_direct(&rm, &dst), 3);
	memcpy(dst, "ghi", 3);
	nfs_rm_direct_done(&rm, 3);
	assert_true(rm.ready);
	assert_int_equal(rm.len, 9);
	assert_memory_equal(rm.buf, "abcdefghi", 9);
	/* a ready record takes nothing more until it is gone */
	assert_int_equal(nfs_rm_direct(&rm, &dst), 0);
	nfs_rm_free(&rm);
}

/* admission (what conn.c takes from the budget by): each fragment's
 * length is asked for at its header, before its room exists; refused,
 * the feed stops right after the header, takes nothing more (neither by
 * feed nor in place) and goes on once nfs_rm_retry() is admitted */
struct admit_log {
	bool allow;
	unsigned asked;
	uint32_t lens[4];
};

static bool admit_fake(void *arg, uint32_t len)
{
	struct admit_log *a = arg;

	if (a->asked < 4)
		a->lens[a->asked] = len;
	a->asked++;
	return a->allow;
}

static void rm_admission(void **state)
{
	uint8_t in[32], *dst;
	struct admit_log a = { 0 };
	struct nfs_rm rm;

	(void)state;
	two_fragments(in);
	nfs_rm_init(&rm, 1024);
	rm.admit = admit_fake;
	rm.admit_arg = &a;
	/* refused at the first header: 4 bytes consumed, no room made */
	assert_int_equal(nfs_rm_feed(&rm, in, 16), 4);
	assert_true(rm.held);
	assert_null(rm.buf);
	assert_int_equal(a.asked, 1);
	assert_int_equal(a.lens[0], 3);
	assert_int_equal(nfs_rm_direct(&rm, &dst), 0);
	/* still refused: nothing taken, asked once more */
	assert_int_equal(nfs_rm_retry(&rm), 0);
	assert_int_equal(nfs_rm_feed(&rm, in + 4, 12), 0);
	assert_int_equal(a.asked, 3);
	/* admitted: the room is made and the body goes in place */
	a.allow = true;
	assert_int_equal(nfs_rm_retry(&rm), 1);
	assert_false(rm.held);
	assert_int_equal(nfs_rm_direct(&rm, &dst), 3);
	memcpy(dst, "abc", 3);
	nfs_rm_direct_done(&rm, 3);
	assert_int_equal(a.asked, 4);
	/* the second fragment is asked for on its own */
	a.allow = false;
	a.asked = 0;
	assert_int_equal(nfs_rm_feed(&rm, in + 7, 9), 4);
	assert_true(rm.held);
	assert_int_equal(a.asked, 1);
	assert_int_equal(a.lens[0], 5);
	a.allow = true;
	assert_int_equal(nfs_rm_feed(&rm, in + 11, 5), 5);
	assert_true(rm.ready);
	assert_memory_equal(rm.buf, "abcdefgh", 8);
	/* a ready record asks nothing; the next one starts over */
	nfs_rm_next(&rm);
	assert_int_equal(nfs_rm_retry(&rm), 1);
	a.asked = 0;
	xdr_set_be32(in, RPC_LAST_FRAG | 0);
	assert_int_equal(nfs_rm_feed(&rm, in, 4), 4);
	assert_int_equal(a.asked, 1);
	assert_int_equal(a.lens[0], 0);
	assert_true(rm.ready);
	assert_int_equal(rm.len, 0);
	nfs_rm_free(&rm);
}

static void rm_oversize(void **state)
{
	uint8_t in[8];
	struct nfs_rm rm;

	(void)state;
	nfs_rm_init(&rm, 100);
	xdr_set_be32(in, RPC_LAST_FRAG | 101);
	assert_int_equal(nfs_rm_feed(&rm, in, 4), -EMSGSIZE);
	nfs_rm_free(&rm);
	/* fragments adding up over the cap */
	nfs_rm_init(&rm, 100);
	xdr_set_be32(in, 60);
	assert_int_equal(nfs_rm_feed(&rm, in, 4), 4);
	{
		uint8_t pad[60] = { 0 };

		assert_int_equal(nfs_rm_feed(&rm, pad, 60), 60);
	}
	xdr_set_be32(in, RPC_LAST_FRAG | 41);
	assert_int_equal(nfs_rm_feed(&rm, in, 4), -EMSGSIZE);
	nfs_rm_free(&rm);
}

/* ---- a server over a temporary directory --------------------------------- */

/* the fixture: nfs_th_fix (helpers/nfs_th.h) */

/* an RPC call header; the caller appends the arguments */
static void call(struct xdr_enc *e, uint8_t *buf, size_t cap, uint32_t rpcv,
		 uint32_t prog, uint32_t vers, uint32_t proc, uint32_t flavor)
{
	xdr_enc_init(e, buf, cap);
	xdr_put_u32(e, 0xabcd);
	xdr_put_u32(e, RPC_CALL);
	xdr_put_u32(e, rpcv);
	xdr_put_u32(e, prog);
	xdr_put_u32(e, vers);
	xdr_put_u32(e, proc);
	xdr_put_u32(e, flavor);
	if (flavor == RPC_AUTH_SYS) {
		xdr_put_u32(e, 24);
		xdr_put_u32(e, 1);		/* stamp */
		xdr_put_cstring(e, "host", 255);
		xdr_put_u32(e, 0);
		xdr_put_u32(e, 0);
		xdr_put_u32(e, 0);
	} else {
		xdr_put_u32(e, 0);
	}
	xdr_put_u32(e, RPC_AUTH_NONE);
	xdr_put_u32(e, 0);
}

static struct xdr_dec run(struct nfs_th_fix *f, struct xdr_enc *e)
{
	struct xdr_dec d;

	assert_int_equal(xdr_enc_err(e), 0);
	assert_int_equal(nfs_rpc_process(f->srv, 1, e->buf, xdr_enc_len(e),
					 out, sizeof(out), &out_len), 0);
	xdr_dec_init(&d, out, out_len);
	assert_int_equal(xdr_get_u32(&d), 0xabcd);
	assert_int_equal(xdr_get_u32(&d), RPC_REPLY);
	return d;
}

/* an accepted reply's accept_stat */
static uint32_t accepted(struct xdr_dec *d)
{
	assert_int_equal(xdr_get_u32(d), RPC_MSG_ACCEPTED);
	xdr_get_u32(d);
	assert_int_equal(xdr_get_u32(d), 0);
	return xdr_get_u32(d);
}

static void rpc_refusals(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;

	call(&e, b, sizeof(b), 3, NFS4_PROGRAM, 4, 0, RPC_AUTH_NONE);
	d = run(f, &e);
	assert_int_equal(xdr_get_u32(&d), RPC_MSG_DENIED);
	assert_int_equal(xdr_get_u32(&d), RPC_MISMATCH);
	assert_int_equal(xdr_get_u32(&d), 2);
	assert_int_equal(xdr_get_u32(&d), 2);

	call(&e, b, sizeof(b), 2, NFS4_PROGRAM, 4, 0, RPC_RPCSEC_GSS);
	d = run(f, &e);
	assert_int_equal(xdr_get_u32(&d), RPC_MSG_DENIED);
	assert_int_equal(xdr_get_u32(&d), RPC_AUTH_ERROR);
	assert_int_equal(xdr_get_u32(&d), RPC_AUTH_REJECTEDCRED);

	call(&e, b, sizeof(b), 2, 100005, 4, 0, RPC_AUTH_NONE);
	d = run(f, &e);
	assert_int_equal(accepted(&d), RPC_PROG_UNAVAIL);

	call(&e, b, sizeof(b), 2, NFS4_PROGRAM, 3, 0, RPC_AUTH_SYS);
	d = run(f, &e);
	assert_int_equal(accepted(&d), RPC_PROG_MISMATCH);
	assert_int_equal(xdr_get_u32(&d), 4);
	assert_int_equal(xdr_get_u32(&d), 4);

	call(&e, b, sizeof(b), 2, NFS4_PROGRAM, 4, 2, RPC_AUTH_SYS);
	d = run(f, &e);
	assert_int_equal(accepted(&d), RPC_PROC_UNAVAIL);

	call(&e, b, sizeof(b), 2, NFS4_PROGRAM, 4, 0, RPC_AUTH_SYS);
	d = run(f, &e);
	assert_int_equal(accepted(&d), RPC_SUCCESS);
	assert_int_equal(xdr_dec_left(&d), 0);

	/* COMPOUND with its arguments cut short */
	call(&e, b, sizeof(b), 2, NFS4_PROGRAM, 4, 1, RPC_AUTH_SYS);
	xdr_put_u32(&e, 0);		/* tag */
	d = run(f, &e);
	assert_int_equal(accepted(&d), RPC_GARBAGE_ARGS);

	/* a reply is not a call: nothing to answer */
	call(&e, b, sizeof(b), 2, NFS4_PROGRAM, 4, 0, RPC_AUTH_NONE);
	xdr_set_be32(b + 4, RPC_REPLY);
	assert_int_equal(nfs_rpc_process(f->srv, 1, b, xdr_enc_len(&e), out,
					 sizeof(out), &out_len), -EBADMSG);
}

/* COMPOUND header; returns with the ops to append */
static void compound(struct xdr_enc *e, uint8_t *b, size_t cap,
		     uint32_t minor, uint32_t nops)
{
	call(e, b, cap, 2, NFS4_PROGRAM, 4, 1, RPC_AUTH_SYS);
	xdr_put_cstring(e, "t", 16);
	xdr_put_u32(e, minor);
	xdr_put_u32(e, nops);
}

/* the COMPOUND4res header: status, and the number of results */
static uint32_t res_head(struct xdr_dec *d, uint32_t *n)
{
	uint32_t st, l;

	assert_int_equal(accepted(d), RPC_SUCCESS);
	st = xdr_get_u32(d);
	xdr_get_opaque_ref(d, &l, 16);
	*n = xdr_get_u32(d);
	return st;
}

static void compound_decode(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t n;

	compound(&e, b, sizeof(b), 3, 1);
	xdr_put_u32(&e, OP_PUTROOTFH);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_MINOR_VERS_MISMATCH);
	assert_int_equal(n, 0);

	/* op 2 and 10044 are no ops: OP_ILLEGAL */
	compound(&e, b, sizeof(b), 0, 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, 2);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_OP_ILLEGAL);
	assert_int_equal(n, 2);
	assert_int_equal(xdr_get_u32(&d), OP_PUTROOTFH);
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	assert_int_equal(xdr_get_u32(&d), OP_ILLEGAL);
	assert_int_equal(xdr_get_u32(&d), NFS4ERR_OP_ILLEGAL);

	/* a 4.2 op in 4.1 is no op either */
	compound(&e, b, sizeof(b), 1, 1);
	xdr_put_u32(&e, OP_SEEK);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_OP_ILLEGAL);

	/* 4.0: no session needed; GETFH gives a handle */
	compound(&e, b, sizeof(b), 0, 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_GETFH);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4_OK);
	assert_int_equal(n, 2);

	/* a count of 3 with one op sent */
	compound(&e, b, sizeof(b), 0, 3);
	xdr_put_u32(&e, OP_PUTROOTFH);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_BADXDR);
	assert_int_equal(n, 2);

	/* 4.1: SEQUENCE first, or an op that may come alone */
	compound(&e, b, sizeof(b), 1, 1);
	xdr_put_u32(&e, OP_PUTROOTFH);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_OP_NOT_IN_SESSION);

	/* 4.0-only ops in 4.1 */
	compound(&e, b, sizeof(b), 1, 1);
	xdr_put_u32(&e, OP_RENEW);
	xdr_put_u64(&e, 1);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_NOTSUPP);

	/* PUTFH of garbage: BADHANDLE; of another export: STALE */
	compound(&e, b, sizeof(b), 0, 1);
	xdr_put_u32(&e, OP_PUTFH);
	xdr_put_opaque(&e, "\1\2", 2, NFS4_FHSIZE);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_BADHANDLE);
	compound(&e, b, sizeof(b), 0, 1);
	xdr_put_u32(&e, OP_PUTFH);
	xdr_put_opaque(&e, "\1\0\0\0\x08zzzzzzzz", 13, NFS4_FHSIZE);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_STALE);
}

static void exchange_and_session(struct nfs_th_fix *f, uint8_t *sid)
{
	static const struct nfs_th_chan chan = { 65536, 65536, 4096, 8, 4 };
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint64_t clid;
	uint32_t n, seq;

	compound(&e, b, sizeof(b), 1, 1);
	nfs_th_put_exchange_id(&e, "verifier", "unit-test-client");
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4_OK);
	assert_int_equal(xdr_get_u32(&d), OP_EXCHANGE_ID);
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	clid = xdr_get_u64(&d);
	seq = xdr_get_u32(&d);

	compound(&e, b, sizeof(b), 1, 1);
	nfs_th_put_create_session(&e, clid, seq, &chan, &chan, NFS4_CB_PROGRAM);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4_OK);
	xdr_get_u32(&d);
	xdr_get_u32(&d);
	xdr_get_fixed(&d, sid, NFS4_SESSIONID_SIZE);
	assert_int_equal(xdr_get_u32(&d), seq);
}

static void sequence(struct xdr_enc *e, uint8_t *b, size_t cap,
		     const uint8_t *sid, uint32_t seq, uint32_t slot)
{
	compound(e, b, cap, 1, 2);
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(e, seq);
	xdr_put_u32(e, slot);
	xdr_put_u32(e, slot);
	xdr_put_bool(e, true);
	xdr_put_u32(e, OP_PUTROOTFH);
}

static void slots_and_replay(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE], b[512], first[1024];
	size_t first_len;
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t n;

	exchange_and_session(f, sid);
	sequence(&e, b, sizeof(b), sid, 1, 0);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4_OK);
	assert_int_equal(n, 2);
	memcpy(first, out, out_len);
	first_len = out_len;

	/* the same seqid again: the cached reply, byte for byte */
	sequence(&e, b, sizeof(b), sid, 1, 0);
	d = run(f, &e);
	assert_int_equal(out_len, first_len);
	assert_memory_equal(out, first, first_len);

	/* a gap in the seqids, a slot past the table, a seqid 0 */
	sequence(&e, b, sizeof(b), sid, 3, 0);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_SEQ_MISORDERED);
	assert_int_equal(n, 1);
	sequence(&e, b, sizeof(b), sid, 1, 4);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_BADSLOT);
	sequence(&e, b, sizeof(b), sid, 0, 1);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_SEQ_MISORDERED);

	/* the next seqid goes on; another slot starts at 1 */
	sequence(&e, b, sizeof(b), sid, 2, 0);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4_OK);
	sequence(&e, b, sizeof(b), sid, 1, 3);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4_OK);

	/* SEQUENCE not first */
	compound(&e, b, sizeof(b), 1, 2);
	xdr_put_u32(&e, OP_SEQUENCE);
	xdr_put_fixed(&e, sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(&e, 2);
	xdr_put_u32(&e, 3);
	xdr_put_u32(&e, 3);
	xdr_put_bool(&e, false);
	xdr_put_u32(&e, OP_SEQUENCE);
	xdr_put_fixed(&e, sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(&e, 3);
	xdr_put_u32(&e, 3);
	xdr_put_u32(&e, 3);
	xdr_put_bool(&e, false);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_SEQUENCE_POS);

	/* an unknown session */
	memset(sid, 0x55, sizeof(sid));
	sequence(&e, b, sizeof(b), sid, 1, 0);
	d = run(f, &e);
	assert_int_equal(res_head(&d, &n), NFS4ERR_BADSESSION);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rm_fragments),
		cmocka_unit_test(rm_direct),
		cmocka_unit_test(rm_admission),
		cmocka_unit_test(rm_oversize),
		nfs_th_fix_test(rpc_refusals),
		nfs_th_fix_test(compound_decode),
		nfs_th_fix_test(slots_and_replay),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
