/* SPDX-License-Identifier: MIT */
/*
 * The NFS server's state tables (lib/export/nfs/tables.c): with
 * thousands of opens every stateid still finds its own state (TEST_STATEID,
 * WRITE on its file and not on another), an owner's second OPEN of a file
 * finds its open and a deny sees every open of the file; CLOSE, LOCKU and
 * RELEASE_LOCKOWNER take states out of the tables (BAD_STATEID after,
 * OLD_STATEID for an older seqid of a live one); the bounds on states per
 * client and per export hold; a client's end empties every bucket; a
 * lease checked once a second still runs out at its second.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

struct cl {
	uint64_t id;
	uint8_t sess[NFS4_SESSIONID_SIZE];
	uint32_t seq;			/* slot 0's next sequence id */
};

static uint8_t out[1 << 16];

/*
 * Run the COMPOUND in @e at @minor: the status of its last result, @d
 * after it (where that result's body starts). Results before the last
 * have no body but SEQUENCE's.
 */
static uint32_t run(struct nfs_th_fix *f, uint32_t minor, struct xdr_enc *e,
		    struct xdr_dec *d)
{
	struct nfs_cred cred = { .flavor = RPC_AUTH_SYS };
	struct xdr_dec a;
	struct xdr_enc r;
	uint32_t l, n, i, op, st = NFS4_OK;

	(void)minor;
	assert_int_equal(xdr_enc_err(e), 0);
	xdr_dec_init(&a, e->buf, xdr_enc_len(e));
	xdr_enc_init(&r, out, sizeof(out));
	assert_int_equal(nfs_compound(f->srv, &cred, 1, &a, &r), 0);
	xdr_dec_init(d, out, xdr_enc_len(&r));
	xdr_get_u32(d);				/* status */
	xdr_get_opaque_ref(d, &l, 64);		/* tag */
	n = xdr_get_u32(d);
	for (i = 0; i < n; i++) {
		op = xdr_get_u32(d);
		st = xdr_get_u32(d);
		if (st || i + 1 == n)
			break;
		if (op == OP_SEQUENCE)
			xdr_skip(d, 36);
	}
	assert_int_equal(xdr_dec_err(d), 0);
	return st;
}

static void head(struct xdr_enc *e, uint8_t *b, size_t cap, uint32_t minor,
		 uint32_t nops)
{
	xdr_enc_init(e, b, cap);
	xdr_put_u32(e, 0);			/* tag */
	xdr_put_u32(e, minor);
	xdr_put_u32(e, nops);
}

/* a 4.1 COMPOUND of @nops ops after SEQUENCE on @c's slot 0 */
static void seq_head(struct xdr_enc *e, uint8_t *b, size_t cap,
		     struct cl *c, uint32_t nops)
{
	head(e, b, cap, 1, nops + 1);
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, c->sess, NFS4_SESSIONID_SIZE);
	xdr_put_u32(e, c->seq++);
	xdr_put_u32(e, 0);			/* slot */
	xdr_put_u32(e, 0);			/* highest slot */
	xdr_put_bool(e, false);
}

/* PUTROOTFH, LOOKUP @name */
static void put_file(struct xdr_enc *e, const char *name)
{
	xdr_put_u32(e, OP_PUTROOTFH);
	xdr_put_u32(e, OP_LOOKUP);
	xdr_put_cstring(e, name, NFS_NAME_MAX);
}

static void put_sid(struct xdr_enc *e, const struct nfs_stateid *sid)
{
	xdr_put_u32(e, sid->seqid);
	xdr_put_fixed(e, sid->other, NFS4_OTHER_SIZE);
}

static void get_sid(struct xdr_dec *d, struct nfs_stateid *sid)
{
	sid->seqid = xdr_get_u32(d);
	xdr_get_fixed(d, sid->other, NFS4_OTHER_SIZE);
}

/* a 4.1 client @owner with one session, RECLAIM_COMPLETE done */
static void client(struct nfs_th_fix *f, struct cl *c, const char *owner)
{
	static const struct nfs_th_chan fore = { 65536, 65536, 8192, 16, 1 };
	static const struct nfs_th_chan back = { 8192, 8192, 8192, 2, 1 };
	uint8_t b[512], verf[8] = { 1 };
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t seq;

	head(&e, b, sizeof(b), 1, 1);
	nfs_th_put_exchange_id(&e, verf, owner);
	assert_int_equal(run(f, 1, &e, &d), NFS4_OK);
	c->id = xdr_get_u64(&d);
	seq = xdr_get_u32(&d);
	head(&e, b, sizeof(b), 1, 1);
	nfs_th_put_create_session(&e, c->id, seq, &fore, &back, 0x40000000);
	assert_int_equal(run(f, 1, &e, &d), NFS4_OK);
	xdr_get_fixed(&d, c->sess, NFS4_SESSIONID_SIZE);
	c->seq = 1;
	seq_head(&e, b, sizeof(b), c, 1);
	xdr_put_u32(&e, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&e, false);
	assert_int_equal(run(f, 1, &e, &d), NFS4_OK);
}

/* DESTROY_SESSION and DESTROY_CLIENTID of @c */
static void client_end(struct nfs_th_fix *f, struct cl *c)
{
	uint8_t b[128];
	struct xdr_enc e;
	struct xdr_dec d;

	head(&e, b, sizeof(b), 1, 1);
	xdr_put_u32(&e, OP_DESTROY_SESSION);
	xdr_put_fixed(&e, c->sess, NFS4_SESSIONID_SIZE);
	assert_int_equal(run(f, 1, &e, &d), NFS4_OK);
	head(&e, b, sizeof(b), 1, 1);
	xdr_put_u32(&e, OP_DESTROY_CLIENTID);
	xdr_put_u64(&e, c->id);
	assert_int_equal(run(f, 1, &e, &d), NFS4_OK);
}

/* OPEN @name (created when missing) by @owner: its status, *@sid */
static uint32_t open_file(struct nfs_th_fix *f, struct cl *c, const char *name,
			  const char *owner, uint32_t access, uint32_t deny,
			  struct nfs_stateid *sid)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st;

	seq_head(&e, b, sizeof(b), c, 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_OPEN);
	xdr_put_u32(&e, 0);			/* seqid */
	xdr_put_u32(&e, access);
	xdr_put_u32(&e, deny);
	xdr_put_u64(&e, 0);			/* clientid: the session's */
	xdr_put_opaque(&e, owner, (uint32_t)strlen(owner), NFS4_OPAQUE_LIMIT);
	xdr_put_u32(&e, OPEN4_CREATE);
	xdr_put_u32(&e, UNCHECKED4);
	xdr_put_u32(&e, 0);			/* no attributes */
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, CLAIM_NULL);
	xdr_put_cstring(&e, name, NFS_NAME_MAX);
	st = run(f, 1, &e, &d);
	if (!st && sid)
		get_sid(&d, sid);
	return st;
}

/* WRITE one byte to @name with @sid */
static uint32_t write_file(struct nfs_th_fix *f, struct cl *c, const char *name,
			   const struct nfs_stateid *sid)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	seq_head(&e, b, sizeof(b), c, 3);
	put_file(&e, name);
	xdr_put_u32(&e, OP_WRITE);
	put_sid(&e, sid);
	xdr_put_u64(&e, 0);
	xdr_put_u32(&e, UNSTABLE4);
	xdr_put_opaque(&e, "x", 1, 1);
	return run(f, 1, &e, &d);
}

static uint32_t close_file(struct nfs_th_fix *f, struct cl *c, const char *name,
			   const struct nfs_stateid *sid)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	seq_head(&e, b, sizeof(b), c, 3);
	put_file(&e, name);
	xdr_put_u32(&e, OP_CLOSE);
	xdr_put_u32(&e, 0);			/* seqid */
	put_sid(&e, sid);
	return run(f, 1, &e, &d);
}

/* TEST_STATEID of @n stateids: their statuses in @st */
static void test_sids(struct nfs_th_fix *f, struct cl *c,
		      const struct nfs_stateid *sid, uint32_t n, uint32_t *st)
{
	static uint8_t b[32768];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t i;

	assert_true(n <= 1024);
	seq_head(&e, b, sizeof(b), c, 1);
	xdr_put_u32(&e, OP_TEST_STATEID);
	xdr_put_u32(&e, n);
	for (i = 0; i < n; i++)
		put_sid(&e, &sid[i]);
	assert_int_equal(run(f, 1, &e, &d), NFS4_OK);
	assert_int_equal(xdr_get_u32(&d), n);
	for (i = 0; i < n; i++)
		st[i] = xdr_get_u32(&d);
	assert_int_equal(xdr_dec_err(&d), 0);
}

/* LOCK [0, 10) of @name for write: by new lock owner @owner of the open
 * @osid when @owner is given, else with the lock stateid *@lsid */
static uint32_t lock_file(struct nfs_th_fix *f, uint32_t minor, struct cl *c,
			  const char *name, const struct nfs_stateid *osid,
			  const char *owner, struct nfs_stateid *lsid)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st;

	if (minor) {
		seq_head(&e, b, sizeof(b), c, 3);
	} else {
		head(&e, b, sizeof(b), 0, 3);
	}
	put_file(&e, name);
	xdr_put_u32(&e, OP_LOCK);
	xdr_put_u32(&e, WRITE_LT);
	xdr_put_bool(&e, false);		/* reclaim */
	xdr_put_u64(&e, 0);
	xdr_put_u64(&e, 10);
	xdr_put_bool(&e, owner != NULL);
	if (owner) {
		xdr_put_u32(&e, 0);		/* open seqid */
		put_sid(&e, osid);
		xdr_put_u32(&e, 0);		/* lock seqid */
		xdr_put_u64(&e, c->id);
		xdr_put_opaque(&e, owner, (uint32_t)strlen(owner),
			       NFS4_OPAQUE_LIMIT);
	} else {
		put_sid(&e, lsid);
		xdr_put_u32(&e, 0);
	}
	st = run(f, minor, &e, &d);
	if (!st)
		get_sid(&d, lsid);
	return st;
}

static uint32_t unlock_file(struct nfs_th_fix *f, uint32_t minor, struct cl *c,
			    const char *name, struct nfs_stateid *lsid)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st;

	if (minor)
		seq_head(&e, b, sizeof(b), c, 3);
	else
		head(&e, b, sizeof(b), 0, 3);
	put_file(&e, name);
	xdr_put_u32(&e, OP_LOCKU);
	xdr_put_u32(&e, WRITE_LT);
	xdr_put_u32(&e, 0);			/* seqid */
	put_sid(&e, lsid);
	xdr_put_u64(&e, 0);
	xdr_put_u64(&e, 10);
	st = run(f, minor, &e, &d);
	if (!st)
		get_sid(&d, lsid);
	return st;
}

/* every bucket of every table empty (after all state went) */
static void tables_empty(struct nfs_th_fix *f)
{
	struct nfs_tables *t = f->srv->tab;
	unsigned i;

	assert_non_null(t);
	for (i = 0; i < NFS_STATE_BUCKETS; i++) {
		assert_null(t->sid[i]);
		assert_null(t->file[i]);
		assert_null(t->deleg[i]);
	}
	for (i = 0; i < NFS_CLIENT_BUCKETS; i++) {
		assert_null(t->clientid[i]);
		assert_null(t->owner[i]);
	}
	for (i = 0; i < NFS_SESSION_BUCKETS; i++)
		assert_null(t->sessid[i]);
}

#define NFILES 3000
#define NOWNERS 1000

/*
 * One client, 3000 files opened by one owner and 1000 owners of one file:
 * every stateid finds its own state, CLOSE takes it out of the tables
 */
static void many_opens(void **state)
{
	struct nfs_th_fix *f = *state;
	static struct nfs_stateid sid[NFILES], shared[NOWNERS];
	static uint32_t st[NFILES];
	struct nfs_stateid again, old, lsid;
	char name[32], owner[32];
	struct cl c;
	unsigned i, j;

	client(f, &c, "many");
	for (i = 0; i < NFILES; i++) {
		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(open_file(f, &c, name, "o",
					   OPEN4_SHARE_ACCESS_BOTH, 0,
					   &sid[i]), NFS4_OK);
		assert_int_equal(sid[i].seqid, 1);
	}
	for (i = 0; i < NOWNERS; i++) {
		snprintf(owner, sizeof(owner), "owner%u", i);
		assert_int_equal(open_file(f, &c, "shared", owner,
					   OPEN4_SHARE_ACCESS_READ, 0,
					   &shared[i]), NFS4_OK);
	}
	assert_int_equal(f->srv->nstates, NFILES + NOWNERS);
	/* all different, all found */
	for (i = 1; i < NOWNERS; i++)
		assert_memory_not_equal(shared[i].other, shared[i - 1].other,
					NFS4_OTHER_SIZE);
	for (i = 0; i < NFILES; i += 1000) {
		test_sids(f, &c, sid + i, 1000, st);
		for (j = 0; j < 1000; j++)
			assert_int_equal(st[j], NFS4_OK);
	}
	test_sids(f, &c, shared, NOWNERS, st);
	for (j = 0; j < NOWNERS; j++)
		assert_int_equal(st[j], NFS4_OK);
	/* a stateid is its own file's: on another file BAD_STATEID */
	for (i = 0; i < NFILES; i += 7) {
		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(write_file(f, &c, name, &sid[i]), NFS4_OK);
		assert_int_equal(write_file(f, &c, name,
					    &sid[(i + 1) % NFILES]),
				 NFS4ERR_BAD_STATEID);
	}
	/* the owner's second OPEN finds its open: the same state, seqid 2 */
	assert_int_equal(open_file(f, &c, "f1234", "o",
				   OPEN4_SHARE_ACCESS_READ, 0, &again),
			 NFS4_OK);
	assert_memory_equal(again.other, sid[1234].other, NFS4_OTHER_SIZE);
	assert_int_equal(again.seqid, 2);
	assert_int_equal(f->srv->nstates, NFILES + NOWNERS);
	old = sid[1234];
	sid[1234] = again;
	assert_int_equal(write_file(f, &c, "f1234", &old),
			 NFS4ERR_OLD_STATEID);
	/* a deny of reading sees every reader of the shared file */
	assert_int_equal(open_file(f, &c, "shared", "denier",
				   OPEN4_SHARE_ACCESS_READ,
				   OPEN4_SHARE_DENY_READ, NULL),
			 NFS4ERR_SHARE_DENIED);
	assert_int_equal(open_file(f, &c, "shared", "denier",
				   OPEN4_SHARE_ACCESS_READ,
				   OPEN4_SHARE_DENY_WRITE, NULL), NFS4_OK);
	/* ... and keeps another owner from writing */
	assert_int_equal(open_file(f, &c, "shared", "writer",
				   OPEN4_SHARE_ACCESS_WRITE, 0, NULL),
			 NFS4ERR_SHARE_DENIED);

	/* a lock state: CLOSE with it held is LOCKS_HELD; it goes with
	 * its open */
	assert_int_equal(lock_file(f, 1, &c, "f2", &sid[2], "locker", &lsid),
			 NFS4_OK);
	assert_int_equal(close_file(f, &c, "f2", &sid[2]),
			 NFS4ERR_LOCKS_HELD);
	assert_int_equal(unlock_file(f, 1, &c, "f2", &lsid), NFS4_OK);

	/* CLOSE every other file */
	for (i = 0; i < NFILES; i += 2) {
		snprintf(name, sizeof(name), "f%u", i);
		assert_int_equal(close_file(f, &c, name, &sid[i]), NFS4_OK);
	}
	assert_int_equal(f->srv->nstates, NFILES / 2 + NOWNERS + 1);
	test_sids(f, &c, &lsid, 1, st);
	assert_int_equal(st[0], NFS4ERR_BAD_STATEID);
	for (i = 0; i < NFILES; i += 1000) {
		test_sids(f, &c, sid + i, 1000, st);
		for (j = 0; j < 1000; j++)
			assert_int_equal(st[j], (i + j) % 2 ?
					 NFS4_OK : NFS4ERR_BAD_STATEID);
	}
	assert_int_equal(write_file(f, &c, "f10", &sid[10]),
			 NFS4ERR_BAD_STATEID);
	assert_int_equal(close_file(f, &c, "f10", &sid[10]),
			 NFS4ERR_BAD_STATEID);
	assert_int_equal(write_file(f, &c, "f11", &sid[11]), NFS4_OK);
	/* a new open of a closed file is a new state */
	assert_int_equal(open_file(f, &c, "f10", "o",
				   OPEN4_SHARE_ACCESS_BOTH, 0, &again),
			 NFS4_OK);
	assert_int_equal(again.seqid, 1);
	assert_memory_not_equal(again.other, sid[10].other, NFS4_OTHER_SIZE);

	/* the client's end frees everything, from every table */
	client_end(f, &c);
	assert_int_equal(f->srv->nstates, 0);
	assert_int_equal(f->srv->nclients, 0);
	tables_empty(f);
}

/*
 * 8 clients with 8192 states each fill the export (65536): the ninth's
 * OPEN and LOCK are refused, a client's own limit holds, and a CLOSE
 * makes room again
 */
static void limits_hold(void **state)
{
	struct nfs_th_fix *f = *state;
	const unsigned nc = NFS_MAX_STATES / NFS_MAX_CLIENT_STATES;
	struct nfs_stateid sid, first, lsid;
	struct cl c[9];
	char name[32], owner[32];
	unsigned i, k;

	for (i = 0; i < nc + 1; i++) {
		snprintf(owner, sizeof(owner), "client%u", i);
		client(f, &c[i], owner);
	}
	for (i = 0; i < nc; i++)
		for (k = 0; k < NFS_MAX_CLIENT_STATES; k++) {
			snprintf(name, sizeof(name), "g%u", k);
			assert_int_equal(open_file(f, &c[i], name, "o",
						   OPEN4_SHARE_ACCESS_BOTH, 0,
						   &sid), NFS4_OK);
			if (i == 1 && k == 0)
				first = sid;
		}
	assert_int_equal(f->srv->nstates, NFS_MAX_STATES);
	/* a client at its own bound */
	assert_int_equal(open_file(f, &c[0], "h", "o",
				   OPEN4_SHARE_ACCESS_BOTH, 0, NULL),
			 NFS4ERR_SERVERFAULT);
	/* the export at its bound: an OPEN, a LOCK's new lock state */
	assert_int_equal(open_file(f, &c[nc], "g1", "o",
				   OPEN4_SHARE_ACCESS_BOTH, 0, NULL),
			 NFS4ERR_SERVERFAULT);
	assert_int_equal(close_file(f, &c[1], "g0", &first), NFS4_OK);
	assert_int_equal(open_file(f, &c[nc], "g1", "o",
				   OPEN4_SHARE_ACCESS_BOTH, 0, &sid), NFS4_OK);
	assert_int_equal(f->srv->nstates, NFS_MAX_STATES);
	assert_int_equal(lock_file(f, 1, &c[nc], "g1", &sid, "l", &lsid),
			 NFS4ERR_SERVERFAULT);
	assert_int_equal(f->srv->nstates, NFS_MAX_STATES);
	/* every state still found: a WRITE with the last client's */
	assert_int_equal(write_file(f, &c[nc], "g1", &sid), NFS4_OK);

	for (i = 0; i < nc + 1; i++)
		client_end(f, &c[i]);
	assert_int_equal(f->srv->nstates, 0);
	tables_empty(f);
}

/*
 * 4.0: the clientid of SETCLIENTID found for OPEN and LOCK; the lock
 * owner's states found through the client by RELEASE_LOCKOWNER, refused
 * while a lock is held, freed after
 */
static void release_lockowner(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t b[512], confirm[NFS4_VERIFIER_SIZE];
	struct nfs_stateid osid, lsid, other;
	struct xdr_enc e;
	struct xdr_dec d;
	struct cl c;
	unsigned i;

	head(&e, b, sizeof(b), 0, 1);
	xdr_put_u32(&e, OP_SETCLIENTID);
	xdr_put_fixed(&e, "verifier", NFS4_VERIFIER_SIZE);
	xdr_put_cstring(&e, "v40", NFS4_OPAQUE_LIMIT);
	xdr_put_u32(&e, 0x40000000);		/* cb_program */
	xdr_put_cstring(&e, "tcp", 64);
	xdr_put_cstring(&e, "127.0.0.1.8.1", 64);
	xdr_put_u32(&e, 1);			/* callback_ident */
	assert_int_equal(run(f, 0, &e, &d), NFS4_OK);
	c.id = xdr_get_u64(&d);
	xdr_get_fixed(&d, confirm, sizeof(confirm));
	head(&e, b, sizeof(b), 0, 1);
	xdr_put_u32(&e, OP_SETCLIENTID_CONFIRM);
	xdr_put_u64(&e, c.id);
	xdr_put_fixed(&e, confirm, sizeof(confirm));
	assert_int_equal(run(f, 0, &e, &d), NFS4_OK);

	/* opens of 50 files, so the client has more than the lock owner's */
	for (i = 0; i < 50; i++) {
		char name[16];

		snprintf(name, sizeof(name), "v%u", i);
		head(&e, b, sizeof(b), 0, 2);
		xdr_put_u32(&e, OP_PUTROOTFH);
		xdr_put_u32(&e, OP_OPEN);
		xdr_put_u32(&e, i);		/* seqid */
		xdr_put_u32(&e, OPEN4_SHARE_ACCESS_BOTH);
		xdr_put_u32(&e, 0);
		xdr_put_u64(&e, c.id);
		xdr_put_opaque(&e, "o40", 3, NFS4_OPAQUE_LIMIT);
		xdr_put_u32(&e, OPEN4_CREATE);
		xdr_put_u32(&e, UNCHECKED4);
		xdr_put_u32(&e, 0);
		xdr_put_u32(&e, 0);
		xdr_put_u32(&e, CLAIM_NULL);
		xdr_put_cstring(&e, name, NFS_NAME_MAX);
		assert_int_equal(run(f, 0, &e, &d), NFS4_OK);
		get_sid(&d, i == 7 ? &osid : &other);
	}
	assert_int_equal(lock_file(f, 0, &c, "v7", &osid, "lo", &lsid),
			 NFS4_OK);
	assert_int_equal(f->srv->nstates, 51);

	head(&e, b, sizeof(b), 0, 1);
	xdr_put_u32(&e, OP_RELEASE_LOCKOWNER);
	xdr_put_u64(&e, c.id);
	xdr_put_opaque(&e, "lo", 2, NFS4_OPAQUE_LIMIT);
	assert_int_equal(run(f, 0, &e, &d), NFS4ERR_LOCKS_HELD);
	assert_int_equal(unlock_file(f, 0, &c, "v7", &lsid), NFS4_OK);
	assert_int_equal(run(f, 0, &e, &d), NFS4_OK);
	assert_int_equal(f->srv->nstates, 50);
	/* its stateid is gone; the open's is not */
	assert_int_equal(unlock_file(f, 0, &c, "v7", &lsid),
			 NFS4ERR_BAD_STATEID);
	assert_int_equal(lock_file(f, 0, &c, "v7", &osid, "lo2", &lsid),
			 NFS4_OK);
	/* another client's id releases nothing */
	head(&e, b, sizeof(b), 0, 1);
	xdr_put_u32(&e, OP_RELEASE_LOCKOWNER);
	xdr_put_u64(&e, c.id + 1);
	xdr_put_opaque(&e, "lo2", 3, NFS4_OPAQUE_LIMIT);
	assert_int_equal(run(f, 0, &e, &d), NFS4_OK);
	assert_int_equal(f->srv->nstates, 51);
}

/* [SEQUENCE] of @c: its status */
static uint32_t sequence(struct nfs_th_fix *f, struct cl *c)
{
	uint8_t b[128];
	struct xdr_enc e;
	struct xdr_dec d;

	seq_head(&e, b, sizeof(b), c, 0);
	return run(f, 1, &e, &d);
}

/*
 * A lease still runs out at its second (the check runs once a second): a
 * client quiet for more than the lease is gone, with its states, at the
 * first COMPOUND of another in the second after; one that renews stays
 */
static void lease_expiry(void **state)
{
	struct nfs_th_fix *f = *state;
	struct nfs_stateid sid;
	struct cl quiet, busy;
	time_t before, after, gone;

	f->srv->lease = 1;
	client(f, &busy, "busy");
	before = nfs_now();
	client(f, &quiet, "quiet");
	assert_int_equal(open_file(f, &quiet, "q", "o",
				   OPEN4_SHARE_ACCESS_READ, 0, &sid), NFS4_OK);
	after = nfs_now();
	/* a COMPOUND a millisecond until the quiet one is out */
	do {
		assert_int_equal(sequence(f, &busy), NFS4_OK);
		gone = nfs_now();
		usleep(1000);
	} while (f->srv->nclients == 2 && gone <= after + 3);
	assert_int_equal(f->srv->nclients, 1);
	assert_int_equal(f->srv->nstates, 0);
	/* renewed at a second in [before, after]: out when now > it + 1 */
	assert_true(gone >= before + 2 && gone <= after + 2);
	assert_int_equal(sequence(f, &quiet), NFS4ERR_BADSESSION);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		nfs_th_fix_test(many_opens),
		nfs_th_fix_test(limits_hold),
		nfs_th_fix_test(release_lockowner),
		nfs_th_fix_test(lease_expiry),
	};

	return cmocka_run_group_tests_name("nfs_state", tests, NULL, NULL);
}
