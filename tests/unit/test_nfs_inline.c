/* SPDX-License-Identifier: MIT */
/*
 * A COMPOUND tried on a connection's I/O thread (nfs_compound_run with
 * nowait) and, from the op that would block, run on by a worker: on the
 * directory backend, whose nowait read and write the test can make say
 * "would block" (-EAGAIN) and counts.
 *
 * What must hold: a READ of cached data runs whole inline; a WRITE that
 * would block stops the run with SEQUENCE applied once (the slot's seqid
 * moved once, the slot busy: a retry meanwhile is DELAY), the lock free;
 * the run then goes on from the WRITE (which is written once) and the
 * reply is cached once, a retry getting those bytes; a synced WRITE
 * never tries inline; a taken lock stops the run before anything
 * happened; a session destroyed while the run is stopped ends it with
 * BADSESSION; a backend without nowait ops hands off at READ; 4.0
 * COMPOUNDs (no SEQUENCE) run inline too.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

static struct nfs_backend_ops ops, orig;

/* what the wrapped backend calls did */
static struct {
	unsigned reads, writes, nowait_reads, nowait_writes;
	bool read_block, write_block;	/* nowait calls say -EAGAIN */
} be;

static int w_read(struct nfs_backend *b, const struct nfs_fh *fh,
		  uint64_t off, void *buf, size_t len, size_t *n, bool *eof)
{
	be.reads++;
	return orig.read(b, fh, off, buf, len, n, eof);
}

static int w_write(struct nfs_backend *b, const struct nfs_fh *fh,
		   uint64_t off, const void *buf, size_t len, bool sync)
{
	be.writes++;
	return orig.write(b, fh, off, buf, len, sync);
}

static int w_read_nowait(struct nfs_backend *b, const struct nfs_fh *fh,
			 uint64_t off, void *buf, size_t len, size_t *n,
			 bool *eof)
{
	be.nowait_reads++;
	if (be.read_block)
		return -EAGAIN;
	return orig.read_nowait(b, fh, off, buf, len, n, eof);
}

/* a filesystem that takes writes without waiting: a plain write */
static int w_write_nowait(struct nfs_backend *b, const struct nfs_fh *fh,
			  uint64_t off, const void *buf, size_t len)
{
	be.nowait_writes++;
	if (be.write_block)
		return -EAGAIN;
	return orig.write(b, fh, off, buf, len, false);
}

struct fix {
	struct nfs_th_fix th;
	uint64_t clid;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint32_t seq;
	struct nfs_fh fh;	/* the wire handle of "f" */
};

static uint8_t pattern[4096];

static int setup(void **state)
{
	struct fix *f = NFS_TH_FIX_NEW(struct fix, "/tmp");
	char path[128];
	unsigned i;

	for (i = 0; i < sizeof(pattern); i++)
		pattern[i] = (uint8_t)(i * 7 + 1);
	snprintf(path, sizeof(path), "%s/f", f->th.dir);
	th_write_file(path, pattern, sizeof(pattern));
	ops = orig = *f->th.srv->be.ops;
	ops.read = w_read;
	ops.write = w_write;
	ops.read_nowait = w_read_nowait;
	ops.write_nowait = w_write_nowait;
	f->th.srv->be.ops = &ops;
	memset(&be, 0, sizeof(be));
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	nfs_th_fix_free(*state);
	return 0;
}

static void head(struct xdr_enc *e, uint8_t *b, size_t cap, uint32_t minor,
		 uint32_t nops)
{
	xdr_enc_init(e, b, cap);
	xdr_put_u32(e, 0);			/* tag */
	xdr_put_u32(e, minor);
	xdr_put_u32(e, nops);
}

/* SEQUENCE at @seq on slot 0 (cache this), and @nops ops to append */
static void seq_head(struct fix *f, uint32_t seq, struct xdr_enc *e,
		     uint8_t *b, size_t cap, uint32_t nops)
{
	head(e, b, cap, 1, 1 + nops);
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, f->sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(e, seq);
	xdr_put_u32(e, 0);			/* slot */
	xdr_put_u32(e, 0);
	xdr_put_bool(e, true);
}

static void put_anon_stateid(struct xdr_enc *e)
{
	xdr_put_u32(e, 0);
	xdr_put_fixed(e, (const uint8_t[NFS4_OTHER_SIZE]){ 0 },
		      NFS4_OTHER_SIZE);
}

static void put_putfh(struct fix *f, struct xdr_enc *e)
{
	xdr_put_u32(e, OP_PUTFH);
	xdr_put_opaque(e, f->fh.data, f->fh.len, NFS4_FHSIZE);
}

static void put_read(struct xdr_enc *e, uint64_t off, uint32_t count)
{
	xdr_put_u32(e, OP_READ);
	put_anon_stateid(e);
	xdr_put_u64(e, off);
	xdr_put_u32(e, count);
}

static void put_write(struct xdr_enc *e, uint64_t off, uint32_t stable,
		      const void *data, uint32_t len)
{
	xdr_put_u32(e, OP_WRITE);
	put_anon_stateid(e);
	xdr_put_u64(e, off);
	xdr_put_u32(e, stable);
	xdr_put_opaque(e, data, len, XDR_NOMAX);
}

/* a client with a session (4 slots), done, and the handle of "f" */
static void client(struct fix *f)
{
	const struct nfs_th_chan fore = { 1 << 20, 1 << 20, 1 << 16, 16, 4 };
	const struct nfs_th_chan back = { 8192, 8192, 0, 2, 1 };
	static uint8_t out[8192];
	uint8_t b[512], verf[8] = { 3 };
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t seq;

	head(&e, b, sizeof(b), 1, 1);
	nfs_th_put_exchange_id(&e, verf, "inline");
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e, &d, out, sizeof(out)),
			 NFS4_OK);
	f->clid = xdr_get_u64(&d);
	seq = xdr_get_u32(&d);
	head(&e, b, sizeof(b), 1, 1);
	nfs_th_put_create_session(&e, f->clid, seq, &fore, &back, 0x40000123);
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e, &d, out, sizeof(out)),
			 NFS4_OK);
	xdr_get_fixed(&d, f->sid, NFS4_SESSIONID_SIZE);
	f->seq = 0;
	seq_head(f, ++f->seq, &e, b, sizeof(b), 1);
	xdr_put_u32(&e, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&e, false);
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e, &d, out, sizeof(out)),
			 NFS4_OK);
	seq_head(f, ++f->seq, &e, b, sizeof(b), 3);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_LOOKUP);
	xdr_put_opaque(&e, "f", 1, NFS_NAME_MAX);
	xdr_put_u32(&e, OP_GETFH);
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e, &d, out, sizeof(out)),
			 NFS4_OK);
	f->fh.len = xdr_get_opaque(&d, f->fh.data, sizeof(f->fh.data),
				   NFS4_FHSIZE);
	assert_int_equal(xdr_dec_err(&d), 0);
	memset(&be, 0, sizeof(be));
}

/* one COMPOUND in steps, as conn.c runs it */
struct step {
	struct nfs_cred cred;
	struct xdr_dec a;
	struct xdr_enc r;
	struct nfs_run p;
	uint8_t out[1 << 16];
	uint8_t req[512];
};

static void step_begin(struct fix *f, struct step *s, struct xdr_enc *e)
{
	s->cred.flavor = RPC_AUTH_SYS;
	xdr_dec_init(&s->a, e->buf, xdr_enc_len(e));
	xdr_enc_init(&s->r, s->out, sizeof(s->out));
	assert_int_equal(nfs_compound_begin(&s->p, f->th.srv, &s->cred, 1,
					    &s->a, &s->r), 0);
}

/* the reply's status and number of results; @d after the count */
static uint32_t reply(struct step *s, struct xdr_dec *d, uint32_t *n)
{
	uint32_t st, l;

	xdr_dec_init(d, s->out, xdr_enc_len(&s->r));
	st = xdr_get_u32(d);
	xdr_get_opaque_ref(d, &l, 64);
	*n = xdr_get_u32(d);
	return st;
}

static struct nfs_slot *slot0(struct fix *f)
{
	struct nfs_session *s = nfs_session_find(f->th.srv, f->sid);

	assert_non_null(s);
	return &s->slots[0];
}

static void lock_is_free(struct fix *f)
{
	assert_int_equal(pthread_mutex_trylock(&f->th.srv->lock), 0);
	pthread_mutex_unlock(&f->th.srv->lock);
}

/* SEQUENCE (the next seqid), PUTFH "f", READ of its 4 KiB, begun */
static void read_step(struct fix *f, struct step *s)
{
	struct xdr_enc e;

	seq_head(f, ++f->seq, &e, s->req, sizeof(s->req), 2);
	put_putfh(f, &e);
	put_read(&e, 0, 4096);
	step_begin(f, s, &e);
}

/* its reply: all three ops done, the file's bytes read */
static void read_reply_right(struct step *s)
{
	struct xdr_dec d;
	uint32_t n, len;
	const uint8_t *data;

	assert_int_equal(reply(s, &d, &n), NFS4_OK);
	assert_int_equal(n, 3);
	xdr_skip(&d, 8 + 36 + 8);		/* SEQUENCE, PUTFH */
	assert_int_equal(xdr_get_u32(&d), OP_READ);
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	assert_true(xdr_get_bool(&d));		/* eof */
	data = xdr_get_opaque_ref(&d, &len, XDR_NOMAX);
	assert_int_equal(len, 4096);
	assert_memory_equal(data, pattern, 4096);
}

static void read_runs_inline(void **state)
{
	struct fix *f = *state;
	static struct step s;

	client(f);
	read_step(f, &s);
	assert_int_equal(nfs_compound_run(&s.p, true), 0);
	read_reply_right(&s);
	assert_int_equal(be.nowait_reads, 1);
	assert_int_equal(be.reads, 0);
	assert_int_equal(slot0(f)->seqid, f->seq);
	assert_false(slot0(f)->busy);
	lock_is_free(f);
}

/* SEQUENCE, PUTFH, WRITE of 4 KiB of 0xa5 at 8192 (@stable), GETATTR */
static void write_compound(struct fix *f, struct xdr_enc *e, uint8_t *b,
			   size_t cap, uint32_t stable)
{
	static uint8_t data[4096];

	memset(data, 0xa5, sizeof(data));
	seq_head(f, ++f->seq, e, b, cap, 3);
	put_putfh(f, e);
	put_write(e, 8192, stable, data, sizeof(data));
	xdr_put_u32(e, OP_GETATTR);
	xdr_put_u32(e, 1);
	xdr_put_u32(e, 1u << FATTR4_SIZE);
}

static void write_continues_on_worker(void **state)
{
	struct fix *f = *state;
	static struct step s;
	static uint8_t again[1 << 16];
	uint8_t b[8192], got[4096];
	struct xdr_enc e;
	struct xdr_dec d;
	struct nfs_slot *sl;
	uint32_t n, seq;
	char path[128];
	int fd;

	client(f);
	be.write_block = true;
	write_compound(f, &e, b, sizeof(b), UNSTABLE4);
	seq = f->seq;
	step_begin(f, &s, &e);
	/* the I/O thread: SEQUENCE and PUTFH ran, WRITE would block */
	assert_int_equal(nfs_compound_run(&s.p, true), -EAGAIN);
	assert_int_equal(s.p.i, 2);
	assert_int_equal(be.nowait_writes, 1);
	assert_int_equal(be.writes, 0);
	sl = slot0(f);
	assert_int_equal(sl->seqid, seq);
	assert_true(sl->busy);
	assert_null(sl->reply);
	lock_is_free(f);
	/* a retry meanwhile waits, and takes nothing of the slot */
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e, &d, again, sizeof(again)),
			 NFS4ERR_DELAY);
	assert_int_equal(sl->seqid, seq);
	/* the worker goes on from the WRITE */
	assert_int_equal(nfs_compound_run(&s.p, false), 0);
	assert_int_equal(reply(&s, &d, &n), NFS4_OK);
	assert_int_equal(n, 4);
	assert_int_equal(be.writes, 1);
	assert_int_equal(be.nowait_writes, 1);
	xdr_skip(&d, 8 + 36 + 8);
	assert_int_equal(xdr_get_u32(&d), OP_WRITE);
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	assert_int_equal(xdr_get_u32(&d), 4096);
	/* SEQUENCE once: the same seqid, the reply cached once, whole */
	assert_int_equal(sl->seqid, seq);
	assert_false(sl->busy);
	assert_int_equal(sl->reply_len, xdr_enc_len(&s.r));
	assert_memory_equal(sl->reply, s.out, sl->reply_len);
	lock_is_free(f);
	/* the retry now gets those bytes, with nothing written again */
	memcpy(again, s.out, xdr_enc_len(&s.r));
	n = (uint32_t)xdr_enc_len(&s.r);
	step_begin(f, &s, &e);
	assert_int_equal(nfs_compound_run(&s.p, true), 0);
	assert_int_equal(xdr_enc_len(&s.r), n);
	assert_memory_equal(again, s.out, n);
	assert_int_equal(be.writes, 1);
	assert_int_equal(be.nowait_writes, 1);
	snprintf(path, sizeof(path), "%s/f", f->th.dir);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, sizeof(got), 8192), 4096);
	close(fd);
	assert_int_equal(got[0], 0xa5);
	assert_int_equal(got[4095], 0xa5);
	/* and the slot moves on */
	be.write_block = false;
	write_compound(f, &e, b, sizeof(b), UNSTABLE4);
	step_begin(f, &s, &e);
	assert_int_equal(nfs_compound_run(&s.p, true), 0);
	assert_int_equal(reply(&s, &d, &n), NFS4_OK);
	assert_int_equal(be.nowait_writes, 2);
	assert_int_equal(be.writes, 1);
	assert_int_equal(sl->seqid, f->seq);
}

static void synced_write_never_inline(void **state)
{
	struct fix *f = *state;
	static struct step s;
	uint8_t b[8192];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t n;

	client(f);
	write_compound(f, &e, b, sizeof(b), FILE_SYNC4);
	step_begin(f, &s, &e);
	assert_int_equal(nfs_compound_run(&s.p, true), -EAGAIN);
	assert_int_equal(s.p.i, 2);
	assert_int_equal(be.nowait_writes, 0);
	assert_int_equal(nfs_compound_run(&s.p, false), 0);
	assert_int_equal(reply(&s, &d, &n), NFS4_OK);
	assert_int_equal(n, 4);
	assert_int_equal(be.writes, 1);
}

static void uncached_read_continues(void **state)
{
	struct fix *f = *state;
	static struct step s;

	client(f);
	be.read_block = true;
	read_step(f, &s);
	assert_int_equal(nfs_compound_run(&s.p, true), -EAGAIN);
	assert_int_equal(nfs_compound_run(&s.p, false), 0);
	read_reply_right(&s);
	assert_int_equal(be.nowait_reads, 1);
	assert_int_equal(be.reads, 1);
	assert_int_equal(slot0(f)->seqid, f->seq);
}

static void taken_lock_stops_first(void **state)
{
	struct fix *f = *state;
	static struct step s;
	uint32_t before;

	client(f);
	before = slot0(f)->seqid;
	read_step(f, &s);
	pthread_mutex_lock(&f->th.srv->lock);
	assert_int_equal(nfs_compound_run(&s.p, true), -EAGAIN);
	pthread_mutex_unlock(&f->th.srv->lock);
	/* nothing happened */
	assert_false(s.p.started);
	assert_int_equal(slot0(f)->seqid, before);
	assert_false(slot0(f)->busy);
	assert_int_equal(nfs_compound_run(&s.p, false), 0);
	read_reply_right(&s);
	assert_int_equal(slot0(f)->seqid, before + 1);
}

static void session_destroyed_while_stopped(void **state)
{
	struct fix *f = *state;
	static struct step s;
	static uint8_t out[4096];
	uint8_t b[8192];
	struct xdr_enc e, e2;
	struct xdr_dec d;
	uint32_t n;

	client(f);
	write_compound(f, &e, b, sizeof(b), FILE_SYNC4);
	step_begin(f, &s, &e);
	assert_int_equal(nfs_compound_run(&s.p, true), -EAGAIN);
	head(&e2, (uint8_t[64]){ 0 }, 64, 1, 1);
	xdr_put_u32(&e2, OP_DESTROY_SESSION);
	xdr_put_fixed(&e2, f->sid, NFS4_SESSIONID_SIZE);
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e2, &d, out, sizeof(out)),
			 NFS4_OK);
	assert_int_equal(nfs_compound_run(&s.p, false), 0);
	assert_int_equal(reply(&s, &d, &n), NFS4ERR_BADSESSION);
	assert_int_equal(n, 3);
	assert_int_equal(be.writes, 0);
	assert_null(f->th.srv->sessions);
	lock_is_free(f);
}

static void backend_without_nowait(void **state)
{
	struct fix *f = *state;
	static struct step s;

	client(f);
	ops.read_nowait = NULL;
	ops.write_nowait = NULL;
	read_step(f, &s);
	assert_int_equal(nfs_compound_run(&s.p, true), -EAGAIN);
	assert_int_equal(s.p.i, 2);
	assert_int_equal(nfs_compound_run(&s.p, false), 0);
	read_reply_right(&s);
	assert_int_equal(be.reads, 1);
}

static void v40_inline(void **state)
{
	struct fix *f = *state;
	static struct step s;
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t n;

	client(f);
	head(&e, b, sizeof(b), 0, 3);
	put_putfh(f, &e);
	put_read(&e, 0, 100);
	/* then one that blocks (a LOOKUP in a file: NOTDIR, from the
	 * worker): the run stops after the READ */
	xdr_put_u32(&e, OP_LOOKUP);
	xdr_put_opaque(&e, "x", 1, NFS_NAME_MAX);
	step_begin(f, &s, &e);
	assert_int_equal(nfs_compound_run(&s.p, true), -EAGAIN);
	assert_int_equal(s.p.i, 2);
	assert_int_equal(be.nowait_reads, 1);
	assert_int_equal(nfs_compound_run(&s.p, false), 0);
	assert_int_equal(reply(&s, &d, &n), NFS4ERR_NOTDIR);
	assert_int_equal(n, 3);
	assert_int_equal(be.reads, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(read_runs_inline, setup,
						teardown),
		cmocka_unit_test_setup_teardown(write_continues_on_worker,
						setup, teardown),
		cmocka_unit_test_setup_teardown(synced_write_never_inline,
						setup, teardown),
		cmocka_unit_test_setup_teardown(uncached_read_continues, setup,
						teardown),
		cmocka_unit_test_setup_teardown(taken_lock_stops_first, setup,
						teardown),
		cmocka_unit_test_setup_teardown(session_destroyed_while_stopped,
						setup, teardown),
		cmocka_unit_test_setup_teardown(backend_without_nowait, setup,
						teardown),
		cmocka_unit_test_setup_teardown(v40_inline, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
