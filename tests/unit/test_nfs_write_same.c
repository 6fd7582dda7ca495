/* SPDX-License-Identifier: MIT */
/*
 * The NFS server's WRITE_SAME (RFC 7862 15.12) without a socket, on a
 * server over a temporary host directory (4.2 session, anonymous
 * stateid): zero blocks and a pattern with block numbers land as
 * bs_write_same() lays them out; malformed descriptions are INVAL (block
 * size 0, pattern longer than the block, pattern offset outside it, block
 * number stamp outside it, overflow); a range past the maximum file size
 * is FBIG; a stable_how4 out of range is BADXDR; a bad stateid is refused
 * before anything is written; a directory is ISDIR; wr_committed is
 * FILE_SYNC4 for a FILE_SYNC4 request and UNSTABLE4 for UNSTABLE4.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blkstack/write_same.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

static uint8_t out[NFS_MAX_REPLY];
static size_t out_len;

struct fix {
	struct nfs_th_fix th;
	char file[96];
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint32_t seq;
};

/* ---- RPC plumbing -------------------------------------------------------- */

/* a 4.2 COMPOUND of @nops ops */
static void compound(struct xdr_enc *e, uint8_t *buf, size_t cap,
		     uint32_t nops)
{
	nfs_th_compound(e, buf, cap, 2, nops);
}

static struct xdr_dec run(struct fix *f, struct xdr_enc *e, uint32_t *st,
			  uint32_t *n)
{
	struct xdr_dec d;
	uint32_t l;

	assert_int_equal(xdr_enc_err(e), 0);
	assert_int_equal(nfs_rpc_process(f->th.srv, 1, e->buf, xdr_enc_len(e),
					 out, sizeof(out), &out_len), 0);
	xdr_dec_init(&d, out, out_len);
	assert_int_equal(xdr_get_u32(&d), 0xabcd);
	assert_int_equal(xdr_get_u32(&d), RPC_REPLY);
	assert_int_equal(xdr_get_u32(&d), RPC_MSG_ACCEPTED);
	xdr_get_u32(&d);
	assert_int_equal(xdr_get_u32(&d), 0);
	assert_int_equal(xdr_get_u32(&d), RPC_SUCCESS);
	*st = xdr_get_u32(&d);
	xdr_get_opaque_ref(&d, &l, 16);
	*n = xdr_get_u32(&d);
	return d;
}

static void session(struct fix *f)
{
	static const struct nfs_th_chan chan = { 65536, 65536, 4096, 8, 1 };
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint64_t clid;
	uint32_t st, n, seq;

	compound(&e, b, sizeof(b), 1);
	nfs_th_put_exchange_id(&e, "verifier", "ws-unit-test");
	d = run(f, &e, &st, &n);
	assert_int_equal(st, NFS4_OK);
	xdr_get_u32(&d);
	xdr_get_u32(&d);
	clid = xdr_get_u64(&d);
	seq = xdr_get_u32(&d);

	compound(&e, b, sizeof(b), 1);
	nfs_th_put_create_session(&e, clid, seq, &chan, &chan, NFS4_CB_PROGRAM);
	d = run(f, &e, &st, &n);
	assert_int_equal(st, NFS4_OK);
	xdr_get_u32(&d);
	xdr_get_u32(&d);
	xdr_get_fixed(&d, f->sid, NFS4_SESSIONID_SIZE);
	f->seq = 1;
}

static int setup(void **state)
{
	struct fix *f = NFS_TH_FIX_NEW(struct fix, "/tmp");

	snprintf(f->file, sizeof(f->file), "%s/f", f->th.dir);
	th_write_file(f->file, NULL, 0);
	memcpy(f->th.srv->boot_verf, "bootverf", 8);
	*state = f;
	session(f);
	return 0;
}

static int teardown(void **state)
{
	nfs_th_fix_free(*state);
	return 0;
}

/* ---- WRITE_SAME ---------------------------------------------------------- */

struct ws {
	uint32_t sid_seq;
	uint8_t sid_other[NFS4_OTHER_SIZE];
	uint32_t stable;
	uint64_t offset, bsize, bcount, reloff_bn;
	uint32_t bn;
	uint64_t reloff_pat;
	const void *pat;
	uint32_t plen;
	bool dir;		/* on the root directory, not the file */
};

struct ws_res {
	uint32_t status;	/* WRITE_SAME's */
	uint64_t count;
	uint32_t committed;
	uint8_t verf[8];
};

static struct ws_res write_same(struct fix *f, const struct ws *w)
{
	static uint8_t b[8192];
	struct ws_res res = { 0 };
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st, n, i, cb;

	compound(&e, b, sizeof(b), w->dir ? 3 : 4);
	xdr_put_u32(&e, OP_SEQUENCE);
	xdr_put_fixed(&e, f->sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(&e, f->seq++);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 0);
	xdr_put_bool(&e, false);
	xdr_put_u32(&e, OP_PUTROOTFH);
	if (!w->dir) {
		xdr_put_u32(&e, OP_LOOKUP);
		xdr_put_cstring(&e, "f", 255);
	}
	xdr_put_u32(&e, OP_WRITE_SAME);
	xdr_put_u32(&e, w->sid_seq);
	xdr_put_fixed(&e, w->sid_other, NFS4_OTHER_SIZE);
	xdr_put_u32(&e, w->stable);
	xdr_put_u64(&e, w->offset);
	xdr_put_u64(&e, w->bsize);
	xdr_put_u64(&e, w->bcount);
	xdr_put_u64(&e, w->reloff_bn);
	xdr_put_u32(&e, w->bn);
	xdr_put_u64(&e, w->reloff_pat);
	xdr_put_opaque(&e, w->pat, w->plen, XDR_NOMAX);
	d = run(f, &e, &st, &n);
	assert_int_equal(n, w->dir ? 3 : 4);
	/* skip to the last result: SEQUENCE's, PUTROOTFH's, LOOKUP's */
	assert_int_equal(xdr_get_u32(&d), OP_SEQUENCE);
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	xdr_skip(&d, NFS4_SESSIONID_SIZE + 5 * 4);
	for (i = 0; i < (w->dir ? 1u : 2u); i++) {
		xdr_get_u32(&d);
		assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	}
	assert_int_equal(xdr_get_u32(&d), OP_WRITE_SAME);
	res.status = xdr_get_u32(&d);
	assert_int_equal(res.status, st);
	if (res.status == NFS4_OK) {
		cb = xdr_get_u32(&d);
		assert_int_equal(cb, 0);
		res.count = xdr_get_u64(&d);
		res.committed = xdr_get_u32(&d);
		xdr_get_fixed(&d, res.verf, 8);
		assert_int_equal(xdr_dec_err(&d), 0);
	}
	return res;
}

static uint8_t *slurp(struct fix *f, size_t *len)
{
	struct stat s;
	uint8_t *p;
	int fd = open(f->file, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &s), 0);
	p = malloc((size_t)s.st_size + 1);
	assert_int_equal(pread(fd, p, (size_t)s.st_size, 0), s.st_size);
	close(fd);
	*len = (size_t)s.st_size;
	return p;
}

static void ws_zero_and_pattern(void **state)
{
	struct fix *f = *state;
	struct ws w = { .stable = FILE_SYNC4, .bsize = 4096, .bcount = 8,
			.reloff_bn = BS_WS_NO_BLOCKNUM };
	struct ws_res r;
	uint8_t *p, blk[512];
	size_t len, i, j;

	/* zero blocks: 32 KiB of zeroes, durable */
	r = write_same(f, &w);
	assert_int_equal(r.status, NFS4_OK);
	assert_int_equal(r.count, 32768);
	assert_int_equal(r.committed, FILE_SYNC4);
	assert_memory_equal(r.verf, "bootverf", 8);
	p = slurp(f, &len);
	assert_int_equal(len, 32768);
	for (i = 0; i < len; i++)
		assert_int_equal(p[i], 0);
	free(p);

	/* a 3-byte pattern from byte 8, block numbers at 0 from 40 */
	w = (struct ws){ .stable = UNSTABLE4, .offset = 1024, .bsize = 512,
			 .bcount = 4, .reloff_bn = 0, .bn = 40,
			 .reloff_pat = 8, .pat = "abc", .plen = 3 };
	r = write_same(f, &w);
	assert_int_equal(r.status, NFS4_OK);
	assert_int_equal(r.count, 2048);
	assert_int_equal(r.committed, UNSTABLE4);
	p = slurp(f, &len);
	assert_int_equal(len, 32768);
	for (i = 0; i < 4; i++) {
		memset(blk, 0, sizeof(blk));
		for (j = 8; j < 512; j++)
			blk[j] = (uint8_t)"abc"[(j - 8) % 3];
		xdr_set_be32(blk, 0);
		xdr_set_be32(blk + 4, (uint32_t)(40 + i));
		assert_memory_equal(p + 1024 + i * 512, blk, 512);
	}
	for (i = 0; i < 1024; i++)
		assert_int_equal(p[i], 0);
	for (i = 1024 + 2048; i < len; i++)
		assert_int_equal(p[i], 0);
	free(p);

	/* a count of 0 writes nothing and succeeds */
	w = (struct ws){ .stable = FILE_SYNC4, .offset = 1 << 20,
			 .bsize = 4096, .reloff_bn = BS_WS_NO_BLOCKNUM };
	r = write_same(f, &w);
	assert_int_equal(r.status, NFS4_OK);
	assert_int_equal(r.count, 0);
	p = slurp(f, &len);
	assert_int_equal(len, 32768);
	free(p);
}

/*
 * Pattern blocks are bounded per request (NFS_WS_PATTERN_MAX, a short
 * wr_count: the client sends the rest); zero blocks are not. Before, one
 * ~100-byte request could write terabytes, holding a worker (or the
 * export's lock on ext4) until done.
 */
static void ws_pattern_bounded(void **state)
{
	struct fix *f = *state;
	uint64_t blocks = NFS_WS_PATTERN_MAX / 65536;
	struct ws w = { .stable = UNSTABLE4, .bsize = 65536,
			.bcount = blocks + 3, .reloff_bn = BS_WS_NO_BLOCKNUM,
			.pat = "x", .plen = 1 };
	struct ws_res r;
	struct stat st;

	r = write_same(f, &w);
	assert_int_equal(r.status, NFS4_OK);
	assert_int_equal(r.count, NFS_WS_PATTERN_MAX);
	assert_int_equal(stat(f->file, &st), 0);
	assert_int_equal(st.st_size, NFS_WS_PATTERN_MAX);
	/* zeroes: the whole request, however large */
	w = (struct ws){ .stable = UNSTABLE4, .bsize = 65536,
			 .bcount = 4 * blocks,
			 .reloff_bn = BS_WS_NO_BLOCKNUM };
	r = write_same(f, &w);
	assert_int_equal(r.status, NFS4_OK);
	assert_int_equal(r.count, 4ull * NFS_WS_PATTERN_MAX);
	/* a request its checks refuse is refused whole, not cut short */
	w = (struct ws){ .stable = UNSTABLE4, .offset = UINT64_MAX - 65535,
			 .bsize = 65536, .bcount = 2 * blocks,
			 .reloff_bn = BS_WS_NO_BLOCKNUM, .pat = "x",
			 .plen = 1 };
	r = write_same(f, &w);
	assert_int_equal(r.status, NFS4ERR_INVAL);
}

static void ws_errors(void **state)
{
	struct fix *f = *state;
	const struct ws ok = { .stable = FILE_SYNC4, .bsize = 4096,
			       .bcount = 2, .reloff_bn = BS_WS_NO_BLOCKNUM };
	static const uint8_t big[8] = "12345678";
	struct ws w;
	size_t len;
	uint8_t *p;

	/* block size 0 */
	w = ok;
	w.bsize = 0;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_INVAL);
	/* a pattern longer than the block */
	w = ok;
	w.bsize = 4;
	w.pat = big;
	w.plen = 8;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_INVAL);
	/* the pattern starting outside the block */
	w = ok;
	w.pat = big;
	w.plen = 8;
	w.reloff_pat = 4096;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_INVAL);
	/* the block number stamp not inside the block */
	w = ok;
	w.reloff_bn = 4089;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_INVAL);
	/* block size x count overflows; offset + size overflows */
	w = ok;
	w.bsize = 1ull << 40;
	w.bcount = 1ull << 30;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_INVAL);
	w = ok;
	w.offset = UINT64_MAX - 4096;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_INVAL);
	/* past the maximum file size */
	w = ok;
	w.offset = (uint64_t)INT64_MAX - 4096;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_FBIG);
	/* stable_how4 out of range */
	w = ok;
	w.stable = 3;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_BADXDR);
	/* a special stateid with a seqid other than 0 / all ones */
	w = ok;
	w.sid_seq = 5;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_BAD_STATEID);
	/* a stateid this server never gave */
	w = ok;
	w.sid_seq = 1;
	memset(w.sid_other, 0x5a, sizeof(w.sid_other));
	{
		uint32_t st = write_same(f, &w).status;

		assert_true(st == NFS4ERR_BAD_STATEID ||
			    st == NFS4ERR_STALE_STATEID);
	}
	/* a directory */
	w = ok;
	w.dir = true;
	assert_int_equal(write_same(f, &w).status, NFS4ERR_ISDIR);
	/* none of it wrote a byte */
	p = slurp(f, &len);
	assert_int_equal(len, 0);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(ws_zero_and_pattern, setup,
						teardown),
		cmocka_unit_test_setup_teardown(ws_errors, setup, teardown),
		cmocka_unit_test_setup_teardown(ws_pattern_bounded, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
