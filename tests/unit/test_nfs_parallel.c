/* SPDX-License-Identifier: MIT */
/*
 * The I/O of a backend with parallel_io (READ, READ_PLUS, WRITE, COMMIT,
 * WRITE_SAME) runs without the server's lock (nfs_unlock / nfs_relock), through nfs_compound() on the
 * directory backend, whose write is wrapped to stop until the test lets
 * it go: meanwhile the lock is free, another client's COMPOUND is served,
 * a retry on the busy slot gets NFS4ERR_DELAY (not the previous reply,
 * not RETRY_UNCACHED_REP), the slot's next request too; the stopped
 * WRITE then ends with its reply cached for a retry. A session destroyed
 * while its WRITE runs ends that COMPOUND with BADSESSION, nothing
 * touched of the freed session. A backend without parallel_io keeps the
 * lock over its I/O.
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

struct cl {
	uint64_t clid;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint32_t seq;
};

/* the write that stops: entered, then waits for go */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, entered, go;
	bool held;		/* srv->lock was held in the call */
	struct nfs_server *srv;
	int (*write)(struct nfs_backend *, const struct nfs_fh *, uint64_t,
		     const void *, size_t, bool);
} gate = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static struct nfs_backend_ops ops, orig;

/* whether this thread holds srv->lock: trylock says EBUSY then */
static void note_lock(void)
{
	if (pthread_mutex_trylock(&gate.srv->lock))
		gate.held = true;
	else
		pthread_mutex_unlock(&gate.srv->lock);
}

static int noted_read(struct nfs_backend *b, const struct nfs_fh *fh,
		      uint64_t off, void *buf, size_t len, size_t *n,
		      bool *eof)
{
	note_lock();
	return orig.read(b, fh, off, buf, len, n, eof);
}

static int noted_seek(struct nfs_backend *b, const struct nfs_fh *fh,
		      uint64_t off, int whence, uint64_t *out)
{
	note_lock();
	return orig.seek(b, fh, off, whence, out);
}

static int noted_commit(struct nfs_backend *b, const struct nfs_fh *fh)
{
	note_lock();
	return orig.commit(b, fh);
}

static int noted_ws(struct nfs_backend *b, const struct nfs_fh *fh,
		    int (*fn)(void *arg, const struct bs_ws_sink *sink),
		    void *arg)
{
	note_lock();
	return orig.with_ws_sink(b, fh, fn, arg);
}

static int gated_write(struct nfs_backend *b, const struct nfs_fh *fh,
		       uint64_t off, const void *buf, size_t len, bool sync)
{
	note_lock();
	pthread_mutex_lock(&gate.mu);
	if (gate.stop) {
		gate.entered = true;
		pthread_cond_broadcast(&gate.cv);
		while (!gate.go)
			pthread_cond_wait(&gate.cv, &gate.mu);
	}
	pthread_mutex_unlock(&gate.mu);
	return gate.write(b, fh, off, buf, len, sync);
}

struct fix {
	struct nfs_th_fix th;
	struct cl a, b;
};

static int setup(void **state)
{
	struct fix *f = NFS_TH_FIX_NEW(struct fix, "/tmp");
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/f", f->th.dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	close(fd);
	ops = orig = *f->th.srv->be.ops;
	gate.write = ops.write;
	ops.write = gated_write;
	ops.read = noted_read;
	ops.seek = noted_seek;
	ops.commit = noted_commit;
	ops.with_ws_sink = noted_ws;
	f->th.srv->be.ops = &ops;
	gate.srv = f->th.srv;
	gate.stop = gate.entered = gate.go = gate.held = false;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	nfs_th_fix_free(*state);
	return 0;
}

static void head(struct xdr_enc *e, uint8_t *b, size_t cap, uint32_t nops)
{
	xdr_enc_init(e, b, cap);
	xdr_put_u32(e, 0);			/* tag */
	xdr_put_u32(e, 1);			/* minor */
	xdr_put_u32(e, nops);
}

/* SEQUENCE of @c at @seq on slot 0, and @nops ops the caller appends */
static void seq_head(struct cl *c, uint32_t seq, struct xdr_enc *e,
		     uint8_t *b, size_t cap, uint32_t nops)
{
	head(e, b, cap, 1 + nops);
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, c->sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(e, seq);
	xdr_put_u32(e, 0);			/* slot */
	xdr_put_u32(e, 0);
	xdr_put_bool(e, true);			/* cache this */
}

static uint32_t run(struct fix *f, struct xdr_enc *e, uint8_t *out,
		    size_t cap)
{
	struct xdr_dec d;

	return nfs_th_run(f->th.srv, 1, e, &d, out, cap);
}

static void client(struct fix *f, struct cl *c, const char *owner)
{
	const struct nfs_th_chan fore = { 1 << 20, 1 << 20, 8192, 16, 4 };
	const struct nfs_th_chan back = { 8192, 8192, 0, 2, 1 };
	static uint8_t out[4096];
	uint8_t b[512], verf[8] = { 2 };
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t seq;

	head(&e, b, sizeof(b), 1);
	nfs_th_put_exchange_id(&e, verf, owner);
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e, &d, out, sizeof(out)),
			 NFS4_OK);
	c->clid = xdr_get_u64(&d);
	seq = xdr_get_u32(&d);
	head(&e, b, sizeof(b), 1);
	nfs_th_put_create_session(&e, c->clid, seq, &fore, &back, 0x40000123);
	assert_int_equal(nfs_th_run(f->th.srv, 1, &e, &d, out, sizeof(out)),
			 NFS4_OK);
	xdr_get_fixed(&d, c->sid, NFS4_SESSIONID_SIZE);
	c->seq = 0;
	seq_head(c, ++c->seq, &e, b, sizeof(b), 1);
	xdr_put_u32(&e, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&e, false);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4_OK);
}

/* SEQUENCE, PUTROOTFH, LOOKUP "f", then @op (WRITE of 4 KiB at 0 with
 * the anonymous stateid, or GETATTR of the size) */
static void file_op(struct cl *c, uint32_t seq, struct xdr_enc *e,
		    uint8_t *b, size_t cap, uint32_t op)
{
	static const uint8_t data[4096] = { 0x5a };

	seq_head(c, seq, e, b, cap, 3);
	xdr_put_u32(e, OP_PUTROOTFH);
	xdr_put_u32(e, OP_LOOKUP);
	xdr_put_opaque(e, "f", 1, NFS_NAME_MAX);
	xdr_put_u32(e, op);
	if (op == OP_WRITE) {
		xdr_put_u32(e, 0);		/* stateid: anonymous */
		xdr_put_fixed(e, (const uint8_t[NFS4_OTHER_SIZE]){ 0 },
			      NFS4_OTHER_SIZE);
		xdr_put_u64(e, 0);
		xdr_put_u32(e, FILE_SYNC4);
		xdr_put_opaque(e, data, sizeof(data), XDR_NOMAX);
	} else {
		xdr_put_u32(e, 1);		/* bitmap: size (word 0) */
		xdr_put_u32(e, 1u << FATTR4_SIZE);
	}
}

struct bg {
	struct fix *f;
	struct cl *c;
	uint32_t seq;
	uint32_t status;
	pthread_t t;
};

static uint8_t bg_out[1 << 16];

static void *bg_write(void *arg)
{
	struct bg *g = arg;
	uint8_t b[8192];
	struct xdr_enc e;

	file_op(g->c, g->seq, &e, b, sizeof(b), OP_WRITE);
	g->status = run(g->f, &e, bg_out, sizeof(bg_out));
	return NULL;
}

/* start @c's WRITE at @seq on a thread and wait until it is stopped in
 * the backend */
static void start_stopped_write(struct fix *f, struct cl *c, uint32_t seq,
				struct bg *g)
{
	g->f = f;
	g->c = c;
	g->seq = seq;
	pthread_mutex_lock(&gate.mu);
	gate.stop = true;
	gate.go = false;
	gate.entered = false;
	pthread_mutex_unlock(&gate.mu);
	assert_int_equal(pthread_create(&g->t, NULL, bg_write, g), 0);
	pthread_mutex_lock(&gate.mu);
	while (!gate.entered)
		pthread_cond_wait(&gate.cv, &gate.mu);
	pthread_mutex_unlock(&gate.mu);
}

static void let_go(struct bg *g)
{
	pthread_mutex_lock(&gate.mu);
	gate.go = true;
	gate.stop = false;
	pthread_cond_broadcast(&gate.cv);
	pthread_mutex_unlock(&gate.mu);
	assert_int_equal(pthread_join(g->t, NULL), 0);
}

static void write_without_lock(void **state)
{
	struct fix *f = *state;
	static uint8_t out[1 << 16];
	uint8_t b[8192];
	struct xdr_enc e;
	struct bg g;

	client(f, &f->a, "a");
	client(f, &f->b, "b");
	start_stopped_write(f, &f->a, ++f->a.seq, &g);
	/* the lock is free while the backend writes */
	assert_false(gate.held);
	assert_int_equal(pthread_mutex_trylock(&f->th.srv->lock), 0);
	pthread_mutex_unlock(&f->th.srv->lock);
	/* another client is served meanwhile */
	file_op(&f->b, ++f->b.seq, &e, b, sizeof(b), OP_GETATTR);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4_OK);
	/* a retry of the running request, and a request too early on its
	 * slot, wait: the slot has no reply yet */
	file_op(&f->a, f->a.seq, &e, b, sizeof(b), OP_WRITE);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4ERR_DELAY);
	file_op(&f->a, f->a.seq + 1, &e, b, sizeof(b), OP_GETATTR);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4ERR_DELAY);
	let_go(&g);
	assert_int_equal(g.status, NFS4_OK);
	/* now the retry gets the cached reply, and the slot moves on */
	file_op(&f->a, f->a.seq, &e, b, sizeof(b), OP_WRITE);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4_OK);
	file_op(&f->a, ++f->a.seq, &e, b, sizeof(b), OP_GETATTR);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4_OK);
}

static void session_destroyed_meanwhile(void **state)
{
	struct fix *f = *state;
	static uint8_t out[4096];
	uint8_t b[512];
	struct xdr_enc e;
	struct bg g;

	client(f, &f->a, "a");
	start_stopped_write(f, &f->a, ++f->a.seq, &g);
	head(&e, b, sizeof(b), 1);
	xdr_put_u32(&e, OP_DESTROY_SESSION);
	xdr_put_fixed(&e, f->a.sid, NFS4_SESSIONID_SIZE);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4_OK);
	let_go(&g);
	assert_int_equal(g.status, NFS4ERR_BADSESSION);
	assert_null(f->th.srv->sessions);
}

/* SEQUENCE, PUTROOTFH, LOOKUP "f", then READ, READ_PLUS, COMMIT or
 * WRITE_SAME of 64 KiB of zeroes at 0 (minor version 2) */
static void io_op(struct cl *c, uint32_t op, struct xdr_enc *e, uint8_t *b,
		  size_t cap)
{
	seq_head(c, ++c->seq, e, b, cap, 3);
	xdr_patch_u32(e, 4, 2);			/* minor version 2 */
	xdr_put_u32(e, OP_PUTROOTFH);
	xdr_put_u32(e, OP_LOOKUP);
	xdr_put_opaque(e, "f", 1, NFS_NAME_MAX);
	xdr_put_u32(e, op);
	if (op == OP_COMMIT) {
		xdr_put_u64(e, 0);
		xdr_put_u32(e, 0);
		return;
	}
	xdr_put_u32(e, 0);			/* stateid: anonymous */
	xdr_put_fixed(e, (const uint8_t[NFS4_OTHER_SIZE]){ 0 },
		      NFS4_OTHER_SIZE);
	if (op == OP_WRITE_SAME) {
		static const uint8_t zero[512];

		xdr_put_u32(e, FILE_SYNC4);
		xdr_put_u64(e, 0);		/* offset */
		xdr_put_u64(e, 512);		/* block size */
		xdr_put_u64(e, 128);		/* block count */
		xdr_put_u64(e, 0);		/* reloff_blocknum */
		xdr_put_u32(e, 0);		/* block_num */
		xdr_put_u64(e, 0);		/* reloff_pattern */
		xdr_put_opaque(e, zero, sizeof(zero), XDR_NOMAX);
		return;
	}
	xdr_put_u64(e, 0);
	xdr_put_u32(e, 4096);
}

static void io_ops_without_lock(void **state)
{
	static const uint32_t opsl[] = { OP_READ, OP_READ_PLUS, OP_COMMIT,
					 OP_WRITE_SAME };
	struct fix *f = *state;
	static uint8_t out[1 << 16];
	uint8_t b[8192];
	struct xdr_enc e;
	struct xdr_dec d;
	unsigned i;

	client(f, &f->a, "a");
	/* data to read first, then each op on its own */
	file_op(&f->a, ++f->a.seq, &e, b, sizeof(b), OP_WRITE);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4_OK);
	for (i = 0; i < sizeof(opsl) / sizeof(opsl[0]); i++) {
		gate.held = false;
		io_op(&f->a, opsl[i], &e, b, sizeof(b));
		/* WRITE_SAME is 4.2 */
		assert_int_equal(nfs_th_run(f->th.srv, 2, &e, &d, out,
					    sizeof(out)), NFS4_OK);
		assert_false(gate.held);
	}
	/* and the ext4 backend's way: with the lock */
	ops.parallel_io = false;
	for (i = 0; i < sizeof(opsl) / sizeof(opsl[0]); i++) {
		gate.held = false;
		io_op(&f->a, opsl[i], &e, b, sizeof(b));
		assert_int_equal(nfs_th_run(f->th.srv, 2, &e, &d, out,
					    sizeof(out)), NFS4_OK);
		assert_true(gate.held);
	}
}

static void serial_backend_keeps_lock(void **state)
{
	struct fix *f = *state;
	static uint8_t out[4096];
	uint8_t b[8192];
	struct xdr_enc e;

	ops.parallel_io = false;
	client(f, &f->a, "a");
	file_op(&f->a, ++f->a.seq, &e, b, sizeof(b), OP_WRITE);
	assert_int_equal(run(f, &e, out, sizeof(out)), NFS4_OK);
	assert_true(gate.held);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(write_without_lock, setup,
						teardown),
		cmocka_unit_test_setup_teardown(session_destroyed_meanwhile,
						setup, teardown),
		cmocka_unit_test_setup_teardown(io_ops_without_lock, setup,
						teardown),
		cmocka_unit_test_setup_teardown(serial_backend_keeps_lock,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
