/* SPDX-License-Identifier: MIT */
/*
 * The NFS client's pieces that need no server: nfs:// URLs, nfsstat4
 * names and errnos, and what a connection attempt to nothing says.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/nfsclient.h>

#include "helpers/th.h"

static void urls(void **state)
{
	struct bs_nfs_url u;

	(void)state;
	assert_int_equal(bs_nfs_url_parse("nfs://127.0.0.1:2050/a/b", &u), 0);
	assert_string_equal(u.host, "127.0.0.1");
	assert_int_equal(u.port, 2050);
	assert_string_equal(u.path, "a/b");
	assert_int_equal(bs_nfs_url_parse("nfs://host", &u), 0);
	assert_string_equal(u.host, "host");
	assert_int_equal(u.port, 2049);
	assert_string_equal(u.path, "");
	assert_int_equal(bs_nfs_url_parse("nfs://h///x/", &u), 0);
	assert_string_equal(u.path, "x/");
	assert_int_equal(bs_nfs_url_parse("nfs://[::1]:7/e", &u), 0);
	assert_string_equal(u.host, "::1");
	assert_int_equal(u.port, 7);
	assert_string_equal(u.path, "e");
	assert_int_equal(bs_nfs_url_parse("http://h/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs:///x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://h:0/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://h:65536/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://h:12a/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://[::1/x", &u), -EINVAL);
	assert_int_equal(bs_nfs_url_parse("nfs://[::1]x/y", &u), -EINVAL);
}

static void statuses(void **state)
{
	(void)state;
	assert_string_equal(bs_nfs_status_name(10004), "NFS4ERR_NOTSUPP");
	assert_string_equal(bs_nfs_status_name(10044), "NFS4ERR_OP_ILLEGAL");
	assert_string_equal(bs_nfs_status_name(2), "NFS4ERR_NOENT");
	assert_string_equal(bs_nfs_status_name(99999), "nfsstat4 99999");
	assert_int_equal(bs_nfs_status_errno(0), 0);
	assert_int_equal(bs_nfs_status_errno(2), -ENOENT);
	assert_int_equal(bs_nfs_status_errno(10004), -EOPNOTSUPP);
	assert_int_equal(bs_nfs_status_errno(10044), -EOPNOTSUPP);
	assert_int_equal(bs_nfs_status_errno(10090), -EOPNOTSUPP);
	assert_int_equal(bs_nfs_status_errno(10021), -EPROTONOSUPPORT);
	assert_int_equal(bs_nfs_status_errno(27), -EFBIG);
	assert_int_equal(bs_nfs_status_errno(99999), -EREMOTEIO);
}

/* Nobody listens: ECONNREFUSED, a message naming the peer, nothing leaked. */
static void refused(void **state)
{
	struct bs_nfs *nfs = (struct bs_nfs *)1;

	(void)state;
	/* a port that was free a moment ago */
	assert_int_equal(bs_nfs_connect("127.0.0.1",
					(uint16_t)th_free_port(), NULL, &nfs),
			 -ECONNREFUSED);
	assert_null(nfs);
	assert_non_null(strstr(bs_last_error(), "nfs 127.0.0.1:"));
	bs_nfs_disconnect(NULL);
}

/* ---- a scripted server ---------------------------------------------------- */

#include <pthread.h>

#include "export/nfs/nfs4_const.h"
#include "export/nfs/xdr.h"

/* What the server saw of one call. */
struct seen {
	uint32_t minor;
	uint32_t nops;
	uint32_t first_op;
	uint32_t seqid;		/* SEQUENCE's, when first */
};

/* One scripted reply: compound status, then (op, status) results. */
struct reply {
	uint32_t status;
	uint32_t nres;
	uint32_t ops[6], st[6];
};

struct fake {
	int lfd;
	uint16_t port;
	const struct reply *script;
	unsigned n;
	struct seen seen[16];
	unsigned calls;
	bool stale_first;	/* send a reply with a wrong xid first */
};

static bool recv_n(int fd, void *p, size_t n)
{
	while (n) {
		ssize_t r = recv(fd, p, n, 0);

		if (r <= 0)
			return false;
		p = (uint8_t *)p + r;
		n -= (size_t)r;
	}
	return true;
}

/* A result body the client reads for @op with NFS4_OK. */
static void put_body(struct xdr_enc *e, uint32_t op)
{
	static const uint8_t zero[16];

	switch (op) {
	case OP_EXCHANGE_ID:
		xdr_put_u64(e, 0x1234);		/* clientid */
		xdr_put_u32(e, 1);		/* sequenceid */
		xdr_put_u32(e, 0);		/* flags */
		xdr_put_u32(e, SP4_NONE);
		xdr_put_u64(e, 0);		/* server owner */
		xdr_put_opaque(e, "fake", 4, 1024);
		xdr_put_opaque(e, "fake", 4, 1024);	/* scope */
		xdr_put_u32(e, 0);		/* no impl id */
		break;
	case OP_CREATE_SESSION:
		xdr_put_fixed(e, zero, 16);
		xdr_put_u32(e, 1);
		xdr_put_u32(e, 0);
		for (int ch = 0; ch < 2; ch++) {
			xdr_put_u32(e, 0);
			xdr_put_u32(e, 1 << 20);
			xdr_put_u32(e, 1 << 20);
			xdr_put_u32(e, 4096);
			xdr_put_u32(e, 16);
			xdr_put_u32(e, 1);
			xdr_put_u32(e, 0);
		}
		break;
	case OP_SEQUENCE:
		xdr_put_fixed(e, zero, 16);
		for (int i = 0; i < 5; i++)
			xdr_put_u32(e, 0);
		break;
	case OP_REMOVE:
		xdr_put_bool(e, false);
		xdr_put_u64(e, 0);
		xdr_put_u64(e, 0);
		break;
	}
}

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	static uint8_t in[1 << 16], out[1 << 16];
	int fd = accept(f->lfd, NULL, NULL);

	while (fd >= 0 && f->calls < f->n) {
		const struct reply *r = &f->script[f->calls];
		struct seen *sn = &f->seen[f->calls];
		struct xdr_dec d;
		struct xdr_enc e;
		uint8_t mark[4];
		uint32_t len, xid, i;

		if (!recv_n(fd, mark, 4))
			break;
		len = xdr_be32(mark) & RPC_FRAG_LEN;
		if (len > sizeof(in) || !recv_n(fd, in, len))
			break;
		xdr_dec_init(&d, in, len);
		xid = xdr_get_u32(&d);
		xdr_skip(&d, 20);		/* call, rpcvers, prog, vers, proc */
		xdr_get_u32(&d);
		xdr_get_opaque_ref(&d, &len, 400);	/* cred */
		xdr_get_u32(&d);
		xdr_get_opaque_ref(&d, &len, 400);	/* verf */
		xdr_get_opaque_ref(&d, &len, 1024);	/* tag */
		sn->minor = xdr_get_u32(&d);
		sn->nops = xdr_get_u32(&d);
		sn->first_op = xdr_get_u32(&d);
		if (sn->first_op == OP_SEQUENCE) {
			xdr_skip(&d, 16);
			sn->seqid = xdr_get_u32(&d);
		}
		f->calls++;
		for (int pass = f->stale_first ? 0 : 1; pass < 2; pass++) {
			xdr_enc_init(&e, out, sizeof(out));
			xdr_put_u32(&e, 0);
			xdr_put_u32(&e, pass ? xid : xid - 1);
			xdr_put_u32(&e, RPC_REPLY);
			xdr_put_u32(&e, RPC_MSG_ACCEPTED);
			xdr_put_u32(&e, RPC_AUTH_NONE);
			xdr_put_u32(&e, 0);
			xdr_put_u32(&e, RPC_SUCCESS);
			xdr_put_u32(&e, r->status);
			xdr_put_opaque(&e, "", 0, 1024);
			xdr_put_u32(&e, r->nres);
			for (i = 0; i < r->nres; i++) {
				xdr_put_u32(&e, r->ops[i]);
				xdr_put_u32(&e, r->st[i]);
				if (r->st[i] == NFS4_OK)
					put_body(&e, r->ops[i]);
			}
			xdr_set_be32(out, RPC_LAST_FRAG |
					  (uint32_t)(xdr_enc_len(&e) - 4));
			if (send(fd, out, xdr_enc_len(&e), MSG_NOSIGNAL) < 0)
				break;
		}
		f->stale_first = false;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void fake_start(struct fake *f, pthread_t *t)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);

	f->lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(f->lfd >= 0);
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(f->lfd, 1), 0);
	assert_int_equal(getsockname(f->lfd, (struct sockaddr *)&a, &len), 0);
	f->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(t, NULL, fake_main, f), 0);
}

#define R1(s, o1, s1) { s, 1, { o1 }, { s1 } }
#define R2(s, o1, s1, o2, s2) { s, 2, { o1, o2 }, { s1, s2 } }
#define R3(s, o1, s1, o2, s2, o3, s3) { s, 3, { o1, o2, o3 }, { s1, s2, s3 } }

/*
 * Minor 2 refused -> 4.1; a stale reply skipped; GRACE retried with the
 * slot's next sequence id; WRITE_SAME not sent on 4.1; teardown.
 */
static void scripted(void **state)
{
	static const struct reply script[] = {
		{ NFS4ERR_MINOR_VERS_MISMATCH, 0, { 0 }, { 0 } },
		R1(NFS4_OK, OP_EXCHANGE_ID, NFS4_OK),
		R1(NFS4_OK, OP_CREATE_SESSION, NFS4_OK),
		R2(NFS4_OK, OP_SEQUENCE, NFS4_OK, OP_RECLAIM_COMPLETE, NFS4_OK),
		/* REMOVE: grace, then done */
		R3(NFS4ERR_GRACE, OP_SEQUENCE, NFS4_OK, OP_PUTROOTFH, NFS4_OK,
		   OP_REMOVE, NFS4ERR_GRACE),
		R3(NFS4_OK, OP_SEQUENCE, NFS4_OK, OP_PUTROOTFH, NFS4_OK,
		   OP_REMOVE, NFS4_OK),
		/* REMOVE of a missing name */
		R3(NFS4ERR_NOENT, OP_SEQUENCE, NFS4_OK, OP_PUTROOTFH, NFS4_OK,
		   OP_REMOVE, NFS4ERR_NOENT),
		R1(NFS4_OK, OP_DESTROY_SESSION, NFS4_OK),
		R1(NFS4_OK, OP_DESTROY_CLIENTID, NFS4_OK),
	};
	struct fake f = { .script = script,
			  .n = sizeof(script) / sizeof(script[0]) };
	struct bs_nfs_opts o = { .retry_secs = 10, .timeout_secs = 10 };
	struct bs_nfs_file file = { .open = true };
	struct bs_ws_adb adb = { .block_size = 4096, .block_count = 1,
				 .reloff_blocknum = BS_WS_NO_BLOCKNUM };
	struct bs_nfs *nfs;
	enum bs_nfs_stable committed;
	uint64_t count;
	uint8_t verf[8];
	pthread_t t;

	(void)state;
	fake_start(&f, &t);
	f.stale_first = true;
	assert_int_equal(bs_nfs_connect("127.0.0.1", f.port, &o, &nfs), 0);
	assert_int_equal(bs_nfs_minor(nfs), 1);
	assert_int_equal(f.seen[0].minor, 2);
	assert_int_equal(f.seen[1].minor, 1);
	assert_int_equal(f.seen[0].first_op, OP_EXCHANGE_ID);
	assert_int_equal(f.seen[2].first_op, OP_CREATE_SESSION);
	assert_int_equal(f.seen[3].first_op, OP_SEQUENCE);
	assert_int_equal(f.seen[3].seqid, 1);

	assert_int_equal(bs_nfs_remove(nfs, "/a"), 0);
	assert_int_equal(f.seen[4].seqid, 2);
	assert_int_equal(f.seen[5].seqid, 3);	/* the retry: the next id */
	assert_int_equal(f.seen[5].nops, 3);

	assert_int_equal(bs_nfs_remove(nfs, "/b"), -ENOENT);
	assert_int_equal(bs_nfs_last_status(nfs), NFS4ERR_NOENT);
	assert_non_null(strstr(bs_last_error(), "REMOVE /b: NFS4ERR_NOENT"));

	/* 4.1: nothing sent, EOPNOTSUPP, the reason kept */
	assert_int_equal(bs_nfs_write_same(nfs, &file, &adb, BS_NFS_FILE_SYNC,
					   &count, &committed, verf),
			 -EOPNOTSUPP);
	assert_int_equal(bs_nfs_last_status(nfs), NFS4ERR_MINOR_VERS_MISMATCH);
	assert_int_equal(bs_nfs_allocate(nfs, &file, 0, 4096), -EOPNOTSUPP);
	assert_int_equal(f.calls, 7);

	bs_nfs_disconnect(nfs);
	pthread_join(t, NULL);
	assert_int_equal(f.calls, 9);
	assert_int_equal(f.seen[7].first_op, OP_DESTROY_SESSION);
	assert_int_equal(f.seen[8].first_op, OP_DESTROY_CLIENTID);
	close(f.lfd);
}

/*
 * A peer that answers every call with replies to other xids, one every
 * 10 ms for ever (until the client goes): each reply came well within
 * the socket's timeout, but the call never gets its own.
 */
struct babbler {
	int lfd;
	uint16_t port;
	unsigned sent;
};

static void *babbler_main(void *arg)
{
	struct babbler *b = arg;
	static uint8_t in[1 << 16];
	int fd = accept(b->lfd, NULL, NULL);
	uint8_t mark[4], out[32];
	uint32_t len, xid, n = 0;

	if (fd < 0 || !recv_n(fd, mark, 4))
		goto out;
	len = xdr_be32(mark) & RPC_FRAG_LEN;
	if (len < 4 || len > sizeof(in) || !recv_n(fd, in, len))
		goto out;
	xid = xdr_be32(in);
	for (;;) {
		struct xdr_enc e;

		xdr_enc_init(&e, out, sizeof(out));
		xdr_put_u32(&e, RPC_LAST_FRAG | 24);
		xdr_put_u32(&e, xid + 1 + n);	/* never the call's */
		xdr_put_u32(&e, RPC_REPLY);
		xdr_put_u32(&e, RPC_MSG_ACCEPTED);
		xdr_put_u32(&e, RPC_AUTH_NONE);
		xdr_put_u32(&e, 0);
		xdr_put_u32(&e, RPC_SUCCESS);
		if (send(fd, out, xdr_enc_len(&e), MSG_NOSIGNAL) < 0)
			break;			/* the client gave up */
		__atomic_store_n(&b->sent, ++n, __ATOMIC_RELAXED);
		usleep(10 * 1000);
	}
out:
	if (fd >= 0)
		close(fd);
	return NULL;
}

struct wrong_call {
	uint16_t port;
	int err;
	double secs;
	char msg[512];
};

static void *wrong_call_main(void *arg)
{
	struct wrong_call *w = arg;
	struct bs_nfs_opts o = { .retry_secs = 1, .timeout_secs = 1 };
	struct bs_nfs *nfs;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	w->err = bs_nfs_connect("127.0.0.1", w->port, &o, &nfs);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	w->secs = (double)(t1.tv_sec - t0.tv_sec) +
		  (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	snprintf(w->msg, sizeof(w->msg), "%s", bs_last_error());
	if (!w->err)
		bs_nfs_disconnect(nfs);
	return NULL;
}

/*
 * A call whose replies all carry other xids ends at its deadline (its
 * timeout, 1 s here) with ETIMEDOUT and the reason, however many
 * replies keep coming; the test waits for it at most 20 s
 */
static void wrong_xids_time_out(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	struct babbler b = { .sent = 0 };
	struct wrong_call w = { .err = 1 };
	struct timespec until;
	pthread_t bt, wt;

	(void)state;
	b.lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(b.lfd >= 0);
	assert_int_equal(bind(b.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(b.lfd, 1), 0);
	assert_int_equal(getsockname(b.lfd, (struct sockaddr *)&a, &alen), 0);
	w.port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&bt, NULL, babbler_main, &b), 0);
	assert_int_equal(pthread_create(&wt, NULL, wrong_call_main, &w), 0);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 20;
	if (pthread_timedjoin_np(wt, NULL, &until))
		fail_msg("the call still waits after 20 s (%u replies to "
			 "other xids)", __atomic_load_n(&b.sent,
							__ATOMIC_RELAXED));
	assert_int_equal(w.err, -ETIMEDOUT);
	assert_true(w.secs >= 0.9 && w.secs < 5);
	assert_non_null(strstr(w.msg, "no reply within 1 s ("));
	assert_non_null(strstr(w.msg, "replies to other calls skipped)"));
	/* the client closed the connection: the peer stops */
	pthread_join(bt, NULL);
	assert_true(b.sent >= 10);
	close(b.lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(urls),
		cmocka_unit_test(statuses),
		cmocka_unit_test(refused),
		cmocka_unit_test(scripted),
		cmocka_unit_test(wrong_xids_time_out),
	};

	return cmocka_run_group_tests_name("nfsclient", tests, NULL, NULL);
}
