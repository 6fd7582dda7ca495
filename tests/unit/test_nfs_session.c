/* SPDX-License-Identifier: MIT */
/*
 * The NFS server's client and session rules (RFC 8881 18.35.4, 18.36,
 * 18.46.3), one COMPOUND at a time through nfs_compound() with AUTH_SYS
 * principals: the CREATE_SESSION that confirms a record must come from
 * the EXCHANGE_ID's principal, later ones from any; a confirmed record
 * of another principal is CLID_INUSE while it has state, replaced when
 * it has none; a back channel too small is TOOSMALL and leaves the
 * sequence id; a cachethis reply over ca_maxresponsesize_cached is
 * REP_TOO_BIG_TO_CACHE.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

static uint8_t out[NFS_MAX_REPLY];

/* run the COMPOUND args in @e as @uid; the reply's first op status */
static uint32_t run(struct nfs_th_fix *f, struct xdr_enc *e, uint32_t uid,
		    struct xdr_dec *d)
{
	struct nfs_cred cred = { .flavor = RPC_AUTH_SYS, .uid = uid };
	struct xdr_dec a;
	struct xdr_enc r;
	uint32_t l;

	assert_int_equal(xdr_enc_err(e), 0);
	xdr_dec_init(&a, e->buf, xdr_enc_len(e));
	xdr_enc_init(&r, out, sizeof(out));
	assert_int_equal(nfs_compound(f->srv, &cred, 1, &a, &r), 0);
	xdr_dec_init(d, out, xdr_enc_len(&r));
	xdr_get_u32(d);				/* status */
	xdr_get_opaque_ref(d, &l, 64);		/* tag */
	if (!xdr_get_u32(d))
		return NFS4_OK;
	xdr_get_u32(d);				/* op */
	return xdr_get_u32(d);
}

static void head(struct xdr_enc *e, uint8_t *b, size_t cap, uint32_t nops)
{
	xdr_enc_init(e, b, cap);
	xdr_put_u32(e, 0);			/* tag */
	xdr_put_u32(e, 1);			/* minor */
	xdr_put_u32(e, nops);
}

static uint32_t exchange_id(struct nfs_th_fix *f, const char *owner, uint8_t v,
			    uint32_t uid, uint64_t *id, uint32_t *seq)
{
	uint8_t b[256], verf[8];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st;

	memset(verf, v, sizeof(verf));
	head(&e, b, sizeof(b), 1);
	nfs_th_put_exchange_id(&e, verf, owner);
	st = run(f, &e, uid, &d);
	if (!st) {
		*id = xdr_get_u64(&d);
		*seq = xdr_get_u32(&d);
	}
	return st;
}

static uint32_t create_session(struct nfs_th_fix *f, uint64_t id, uint32_t seq,
			       uint32_t uid, uint32_t back_maxreq,
			       uint32_t cached, uint8_t *sid)
{
	const struct nfs_th_chan fore = { 8192, 8192, cached, 16, 8 };
	const struct nfs_th_chan back = { back_maxreq, 8192, 8192, 2, 8 };
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st;

	head(&e, b, sizeof(b), 1);
	nfs_th_put_create_session(&e, id, seq, &fore, &back, 0x40000000);
	st = run(f, &e, uid, &d);
	if (!st && sid)
		xdr_get_fixed(&d, sid, NFS4_SESSIONID_SIZE);
	return st;
}

/* SEQUENCE on slot 0 of @sid */
static void put_sequence(struct xdr_enc *e, const uint8_t *sid, uint32_t seq,
			 bool cachethis)
{
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, sid, NFS4_SESSIONID_SIZE);
	xdr_put_u32(e, seq);
	xdr_put_u32(e, 0);			/* slot */
	xdr_put_u32(e, 0);			/* highest slot */
	xdr_put_bool(e, cachethis);
}

/* [DESTROY_SESSION(@sid)] alone: its status */
static uint32_t destroy_session(struct nfs_th_fix *f, const uint8_t *sid)
{
	uint8_t b[64];
	struct xdr_enc e;
	struct xdr_dec d;

	head(&e, b, sizeof(b), 1);
	xdr_put_u32(&e, OP_DESTROY_SESSION);
	xdr_put_fixed(&e, sid, NFS4_SESSIONID_SIZE);
	return run(f, &e, 10, &d);
}

/* [SEQUENCE(@sid, @seq), RECLAIM_COMPLETE]: new opens may follow */
static void reclaim_complete(struct nfs_th_fix *f, const uint8_t *sid,
			     uint32_t seq)
{
	uint8_t b[128];
	struct xdr_enc e;
	struct xdr_dec d;

	head(&e, b, sizeof(b), 2);
	put_sequence(&e, sid, seq, false);
	xdr_put_u32(&e, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&e, false);
	assert_int_equal(run(f, &e, 10, &d), NFS4_OK);
}

static void principals(void **state)
{
	struct nfs_th_fix *f = *state;
	uint64_t id, id2;
	uint32_t seq, seq2;

	/* confirming from another principal: CLID_INUSE (CSESS9) */
	assert_int_equal(exchange_id(f, "a", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 11, 8192, 8192, NULL),
			 NFS4ERR_CLID_INUSE);
	/* from its own: fine; then another principal may add (CSESS10) */
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, NULL),
			 NFS4_OK);
	assert_int_equal(create_session(f, id, seq + 1, 11, 8192, 8192,
					NULL), NFS4_OK);

	/* another principal's EXCHANGE_ID while sessions live */
	assert_int_equal(exchange_id(f, "a", 2, 12, &id2, &seq2),
			 NFS4ERR_CLID_INUSE);
}

static void replace_stateless(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint64_t id, id2;
	uint32_t seq, seq2;

	assert_int_equal(exchange_id(f, "b", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, sid),
			 NFS4_OK);
	assert_int_equal(destroy_session(f, sid), NFS4_OK);
	/* no state left: another principal replaces the record, even
	 * with the same verifier (EID5g) and the old id is stale (EID5e) */
	assert_int_equal(exchange_id(f, "b", 1, 11, &id2, &seq2), NFS4_OK);
	assert_true(id2 != id);
	assert_int_equal(create_session(f, id, seq + 1, 10, 8192, 8192,
					NULL), NFS4ERR_STALE_CLIENTID);
}

/*
 * Ops that may come without a SEQUENCE (BIND_CONN_TO_SESSION,
 * DESTROY_SESSION, ...) come alone (RFC 8881 18.34.3, 18.37.3): what
 * followed them ran with no session, and RECLAIM_COMPLETE, OPEN or
 * LOCKT read through its NULL pointer (a crash of the daemon).
 */
static void solo_ops_alone(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE], b[256];
	struct xdr_enc e;
	struct xdr_dec d;
	uint64_t id;
	uint32_t seq;

	assert_int_equal(exchange_id(f, "s", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, sid),
			 NFS4_OK);
	head(&e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_BIND_CONN_TO_SESSION);
	xdr_put_fixed(&e, sid, sizeof(sid));
	xdr_put_u32(&e, CDFC4_FORE);
	xdr_put_bool(&e, false);
	xdr_put_u32(&e, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&e, false);
	assert_int_equal(run(f, &e, 10, &d), NFS4ERR_NOT_ONLY_OP);

	head(&e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_DESTROY_SESSION);
	xdr_put_fixed(&e, sid, sizeof(sid));
	xdr_put_u32(&e, OP_PUTROOTFH);
	assert_int_equal(run(f, &e, 10, &d), NFS4ERR_NOT_ONLY_OP);

	/* alone, both still work: the session was not destroyed above */
	assert_int_equal(destroy_session(f, sid), NFS4_OK);
}

/*
 * CREATE_SESSION after SEQUENCE that confirms a new record of the same
 * owner would free the older record with the session this compound runs
 * in (its slot then stored the reply into freed memory): refused, and
 * the old session goes on working.
 */
static void confirm_not_under_own_session(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE], b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint64_t id, id2;
	uint32_t seq, seq2;

	assert_int_equal(exchange_id(f, "r", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, sid),
			 NFS4_OK);
	/* the client restarted: a new verifier, a new unconfirmed record */
	assert_int_equal(exchange_id(f, "r", 2, 10, &id2, &seq2), NFS4_OK);
	assert_true(id2 != id);
	head(&e, b, sizeof(b), 2);
	put_sequence(&e, sid, 1, false);
	{
		const struct nfs_th_chan fore = { 8192, 8192, 8192, 16, 8 };
		const struct nfs_th_chan back = { 8192, 8192, 8192, 2, 8 };

		nfs_th_put_create_session(&e, id2, seq2, &fore, &back,
					  0x40000000);
	}
	assert_int_equal(run(f, &e, 10, &d), NFS4_OK);	/* SEQUENCE */
	xdr_get_fixed(&d, b, 36);		/* its result */
	assert_int_equal(xdr_get_u32(&d), OP_CREATE_SESSION);
	assert_int_equal(xdr_get_u32(&d), NFS4ERR_NOT_ONLY_OP);
	/* the session lives on; alone, the confirmation goes through */
	head(&e, b, sizeof(b), 1);
	put_sequence(&e, sid, 2, false);
	assert_int_equal(run(f, &e, 10, &d), NFS4_OK);
	assert_int_equal(create_session(f, id2, seq2, 10, 8192, 8192, NULL),
			 NFS4_OK);
}

/* [SEQUENCE, PUTROOTFH, OPEN(CREATE UNCHECKED4 "f")]: OPEN's status.
 * @trunc: with size 0 in the create attributes. */
static uint32_t open_f(struct nfs_th_fix *f, const uint8_t *sid, uint32_t seq,
		       const char *owner, uint32_t access, uint32_t deny,
		       bool trunc)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	head(&e, b, sizeof(b), 3);
	put_sequence(&e, sid, seq, false);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_OPEN);
	xdr_put_u32(&e, 0);			/* seqid */
	xdr_put_u32(&e, access);
	xdr_put_u32(&e, deny);
	xdr_put_u64(&e, 0);			/* clientid (the session's) */
	xdr_put_opaque(&e, owner, (uint32_t)strlen(owner), 1024);
	xdr_put_u32(&e, OPEN4_CREATE);
	xdr_put_u32(&e, UNCHECKED4);
	if (trunc) {
		xdr_put_u32(&e, 1);		/* bitmap: size */
		xdr_put_u32(&e, 1u << FATTR4_SIZE);
		xdr_put_u32(&e, 8);
		xdr_put_u64(&e, 0);
	} else {
		xdr_put_u32(&e, 0);
		xdr_put_u32(&e, 0);
	}
	xdr_put_u32(&e, CLAIM_NULL);
	xdr_put_cstring(&e, "f", 255);
	assert_int_equal(run(f, &e, 10, &d), NFS4_OK);	/* SEQUENCE */
	xdr_skip(&d, 36);
	assert_int_equal(xdr_get_u32(&d), OP_PUTROOTFH);
	assert_int_equal(xdr_get_u32(&d), NFS4_OK);
	assert_int_equal(xdr_get_u32(&d), OP_OPEN);
	return xdr_get_u32(&d);
}

/*
 * An OPEN that another owner's deny refuses changes nothing: with size 0
 * in its create attributes it truncated the file first, then answered
 * SHARE_DENIED.
 */
static void denied_open_truncates_nothing(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	char path[128];
	struct stat st;
	uint64_t id;
	uint32_t seq;

	assert_int_equal(exchange_id(f, "o", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, sid),
			 NFS4_OK);
	reclaim_complete(f, sid, 1);
	assert_int_equal(open_f(f, sid, 2, "writer", OPEN4_SHARE_ACCESS_BOTH,
				OPEN4_SHARE_DENY_WRITE, false), NFS4_OK);
	snprintf(path, sizeof(path), "%s/f", f->dir);
	assert_int_equal(truncate(path, 100), 0);
	assert_int_equal(open_f(f, sid, 3, "other", OPEN4_SHARE_ACCESS_BOTH,
				0, true), NFS4ERR_SHARE_DENIED);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 100);
	unlink(path);
}

/*
 * Session ids carry 64 random bits: two sessions made one after the
 * other differ there in many bits (they differed by one: a counter any
 * client could step through to destroy or replay others' sessions).
 */
static void session_ids_unguessable(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t a[NFS4_SESSIONID_SIZE], b[NFS4_SESSIONID_SIZE];
	unsigned bits = 0, i;
	uint64_t id;
	uint32_t seq;

	assert_int_equal(exchange_id(f, "u", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, a),
			 NFS4_OK);
	assert_int_equal(create_session(f, id, seq + 1, 10, 8192, 8192, b),
			 NFS4_OK);
	for (i = 4; i < 12; i++)
		bits += (unsigned)__builtin_popcount(a[i] ^ b[i]);
	/* 64 random bits each: 32 differ on average, under 8 about never */
	assert_true(bits >= 8);
	assert_memory_equal(a, b, 4);		/* the boot */
	assert_memory_equal(a + 12, b + 12, 4);	/* the export */
}

/* NFS_MAX_CLIENT_SESSIONS per client, then NOSPC until one goes */
static void sessions_bounded(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint64_t id;
	uint32_t seq, i;

	assert_int_equal(exchange_id(f, "m", 1, 10, &id, &seq), NFS4_OK);
	for (i = 0; i < NFS_MAX_CLIENT_SESSIONS; i++)
		assert_int_equal(create_session(f, id, seq + i, 10, 8192,
						8192, sid), NFS4_OK);
	assert_int_equal(create_session(f, id, seq + i, 10, 8192, 8192, NULL),
			 NFS4ERR_NOSPC);
	assert_int_equal(destroy_session(f, sid), NFS4_OK);
	assert_int_equal(create_session(f, id, seq + i, 10, 8192, 8192, NULL),
			 NFS4_OK);
}

/* [SEQUENCE(slot 0, @seq, @cachethis), PUTROOTFH, LOOKUP "r", READ 4 KiB] */
static uint32_t read_r(struct nfs_th_fix *f, const uint8_t *sid, uint32_t seq,
		       bool cachethis, struct xdr_dec *d)
{
	uint8_t b[256];
	struct xdr_enc e;

	head(&e, b, sizeof(b), 4);
	put_sequence(&e, sid, seq, cachethis);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_LOOKUP);
	xdr_put_cstring(&e, "r", 255);
	xdr_put_u32(&e, OP_READ);
	xdr_put_u32(&e, 0);			/* the anonymous stateid */
	xdr_put_fixed(&e, (uint8_t[NFS4_OTHER_SIZE]){ 0 }, NFS4_OTHER_SIZE);
	xdr_put_u64(&e, 0);
	xdr_put_u32(&e, 4096);
	return run(f, &e, 10, d);
}

/*
 * A slot keeps a reply the client asked to cache or a small one; a
 * large one not asked for is not kept (every slot kept every reply, up to
 * 1 MiB each, with no bound on sessions), and its retry is
 * RETRY_UNCACHED_REP. ca_maxresponsesize_cached is cut to NFS_MAX_CACHED.
 */
static void slot_cache_bounded(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE], b[256];
	struct xdr_enc e;
	struct xdr_dec d;
	char path[128];
	uint64_t id;
	uint32_t seq, cached;
	int fd;

	snprintf(path, sizeof(path), "%s/r", f->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0644);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 8192), 0);
	close(fd);
	assert_int_equal(exchange_id(f, "k", 1, 10, &id, &seq), NFS4_OK);
	{
		const struct nfs_th_chan fore = { 8192, 1 << 20, 1 << 20, 16,
						  8 };
		const struct nfs_th_chan back = { 8192, 8192, 8192, 2, 8 };

		head(&e, b, sizeof(b), 1);
		nfs_th_put_create_session(&e, id, seq, &fore, &back,
					  0x40000000);
		assert_int_equal(run(f, &e, 10, &d), NFS4_OK);
		xdr_get_fixed(&d, sid, NFS4_SESSIONID_SIZE);
		xdr_get_u32(&d);		/* seq */
		xdr_get_u32(&d);		/* flags */
		xdr_get_u32(&d);		/* headerpadsize */
		xdr_get_u32(&d);		/* maxrequestsize */
		xdr_get_u32(&d);		/* maxresponsesize */
		cached = xdr_get_u32(&d);
		assert_int_equal(cached, NFS_MAX_CACHED);
	}
	/* 4 KiB read, not asked to cache: its retry is uncached */
	assert_int_equal(read_r(f, sid, 1, false, &d), NFS4_OK);
	assert_int_equal(read_r(f, sid, 1, false, &d),
			 NFS4ERR_RETRY_UNCACHED_REP);
	/* asked to cache (it fits 8 KiB): the retry is the reply again */
	assert_int_equal(read_r(f, sid, 2, true, &d), NFS4_OK);
	assert_int_equal(read_r(f, sid, 2, true, &d), NFS4_OK);
	/* a small reply is kept whatever cachethis said */
	head(&e, b, sizeof(b), 1);
	put_sequence(&e, sid, 3, false);
	assert_int_equal(run(f, &e, 10, &d), NFS4_OK);
	assert_int_equal(run(f, &e, 10, &d), NFS4_OK);
	unlink(path);
}

/*
 * Client records are bounded: with NFS_MAX_CLIENTS of them, a new
 * EXCHANGE_ID takes the place of the oldest unconfirmed record (whose
 * CREATE_SESSION is then stale); confirmed records stay.
 */
static void clients_bounded(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint64_t id, first = 0, idn;
	uint32_t seq, seq1 = 0, seqn, i;
	char owner[32];

	assert_int_equal(exchange_id(f, "kept", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, sid),
			 NFS4_OK);
	for (i = 1; i < NFS_MAX_CLIENTS; i++) {
		uint64_t x;
		uint32_t sx;

		snprintf(owner, sizeof(owner), "u%u", i);
		assert_int_equal(exchange_id(f, owner, 1, 10, &x, &sx),
				 NFS4_OK);
		if (i == 1) {
			first = x;
			seq1 = sx;
		}
	}
	assert_int_equal(f->srv->nclients, NFS_MAX_CLIENTS);
	assert_int_equal(exchange_id(f, "new", 1, 10, &idn, &seqn), NFS4_OK);
	assert_int_equal(f->srv->nclients, NFS_MAX_CLIENTS);
	assert_int_equal(create_session(f, first, seq1, 10, 8192, 8192, NULL),
			 NFS4ERR_STALE_CLIENTID);
	assert_int_equal(create_session(f, idn, seqn, 10, 8192, 8192, NULL),
			 NFS4_OK);
	/* the confirmed record of the start still adds sessions */
	assert_int_equal(create_session(f, id, seq + 1, 10, 8192, 8192, NULL),
			 NFS4_OK);
}

/* Open states per client are bounded (one per open owner of a file) */
static void states_bounded(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	char owner[32], path[128];
	uint64_t id;
	uint32_t seq, i;

	assert_int_equal(exchange_id(f, "s", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, sid),
			 NFS4_OK);
	reclaim_complete(f, sid, 1);
	for (i = 0; i < NFS_MAX_CLIENT_STATES; i++) {
		snprintf(owner, sizeof(owner), "o%u", i);
		assert_int_equal(open_f(f, sid, 2 + i, owner,
					OPEN4_SHARE_ACCESS_READ, 0, false),
				 NFS4_OK);
	}
	assert_int_equal(f->srv->nstates, NFS_MAX_CLIENT_STATES);
	/* one more is refused before it changes anything: no truncation */
	snprintf(path, sizeof(path), "%s/f", f->dir);
	assert_int_equal(truncate(path, 100), 0);
	assert_int_equal(open_f(f, sid, 2 + i, "one-more",
				OPEN4_SHARE_ACCESS_BOTH, 0, true),
			 NFS4ERR_SERVERFAULT);
	{
		struct stat st;

		assert_int_equal(stat(path, &st), 0);
		assert_int_equal(st.st_size, 100);
	}
	assert_int_equal(f->srv->nstates, NFS_MAX_CLIENT_STATES);
	unlink(path);
}

static void back_channel_too_small(void **state)
{
	struct nfs_th_fix *f = *state;
	uint64_t id;
	uint32_t seq;

	assert_int_equal(exchange_id(f, "c", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 10, 8192, NULL),
			 NFS4ERR_TOOSMALL);
	/* the refused one did not use the sequence id */
	assert_int_equal(create_session(f, id, seq, 10, 8192, 8192, NULL),
			 NFS4_OK);
}

static void too_big_to_cache(void **state)
{
	struct nfs_th_fix *f = *state;
	uint8_t sid[NFS4_SESSIONID_SIZE], b[128];
	struct xdr_enc e;
	struct xdr_dec d;
	uint64_t id;
	uint32_t seq, i;

	assert_int_equal(exchange_id(f, "d", 1, 10, &id, &seq), NFS4_OK);
	assert_int_equal(create_session(f, id, seq, 10, 8192, 10, sid),
			 NFS4_OK);
	for (i = 0; i < 2; i++) {
		head(&e, b, sizeof(b), 1);
		/* cachethis, then not */
		put_sequence(&e, sid, 1 + i, i == 0);
		assert_int_equal(run(f, &e, 10, &d),
				 i == 0 ? NFS4ERR_REP_TOO_BIG_TO_CACHE :
				 NFS4_OK);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		nfs_th_fix_test(principals),
		nfs_th_fix_test(solo_ops_alone),
		nfs_th_fix_test(confirm_not_under_own_session),
		nfs_th_fix_test(denied_open_truncates_nothing),
		nfs_th_fix_test(session_ids_unguessable),
		nfs_th_fix_test(sessions_bounded),
		nfs_th_fix_test(slot_cache_bounded),
		nfs_th_fix_test(clients_bounded),
		nfs_th_fix_test(states_bounded),
		nfs_th_fix_test(replace_stateless),
		nfs_th_fix_test(back_channel_too_small),
		nfs_th_fix_test(too_big_to_cache),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
