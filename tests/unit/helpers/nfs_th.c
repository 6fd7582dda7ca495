/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <blkstack/export.h>

#include "export/nfs/nfs.h"
#include "nfs_th.h"

static struct nfs_server *new_server(void)
{
	struct nfs_server *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return NULL;
	pthread_mutex_init(&srv->lock, NULL);
	nfs_cb_init(srv);
	srv->refs = 1;
	srv->lease = 60;
	srv->grace = 0;
	srv->boot = nfs_now() - 1;
	srv->export_id = 7;
	srv->boot_tag = 0x1234;
	/* the tests exercise every mode bit and device nodes; the export's
	 * defaults (both off) have their own test (test_nfs_ext4) */
	srv->setuid_ok = srv->devices_ok = true;
	return srv;
}

static void drop(struct nfs_server *srv)
{
	nfs_cb_fini(srv);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

struct nfs_server *nfs_th_dir_server(const char *dir)
{
	struct nfs_server *srv = new_server();

	if (srv && nfs_backend_dir_open(&srv->be, dir)) {
		drop(srv);
		return NULL;
	}
	return srv;
}

struct nfs_server *nfs_th_tmp_server(char *dir)
{
	struct nfs_server *srv;

	assert_non_null(mkdtemp(dir));
	srv = nfs_th_dir_server(dir);
	if (!srv)
		rmdir(dir);
	return srv;
}

void nfs_th_tmp_drop(struct nfs_server *srv, const char *dir)
{
	char cmd[128];

	nfs_server_put(srv);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

void *nfs_th_fix_alloc(size_t size, const char *base)
{
	struct nfs_th_fix *f = calloc(1, size);

	assert_non_null(f);
	assert_in_range(snprintf(f->dir, sizeof(f->dir), "%s/%s.XXXXXX", base,
				 program_invocation_short_name),
			1, sizeof(f->dir) - 1);
	f->srv = nfs_th_tmp_server(f->dir);
	if (!f->srv) {
		free(f);
		skip();
	}
	return f;
}

void nfs_th_fix_free(void *fix)
{
	struct nfs_th_fix *f = fix;

	nfs_th_tmp_drop(f->srv, f->dir);
	free(f);
}

int nfs_th_fix_setup(void **state)
{
	*state = nfs_th_fix_alloc(sizeof(struct nfs_th_fix), "/tmp");
	return 0;
}

int nfs_th_fix_teardown(void **state)
{
	nfs_th_fix_free(*state);
	return 0;
}

struct nfs_server *nfs_th_ext4_server(struct bs_dev *dev)
{
	struct nfs_server *srv = new_server();
	struct bs_export_unit u;

	if (!srv)
		return NULL;
	/* only the device and the mode are read; no claim to hand over */
	memset(&u, 0, sizeof(u));
	u.dev = dev;
	if (nfs_backend_ext4_open(&srv->be, &u)) {
		drop(srv);
		return NULL;
	}
	return srv;
}

void nfs_th_put_exchange_id(struct xdr_enc *e, const void *verf,
			    const char *owner)
{
	xdr_put_u32(e, OP_EXCHANGE_ID);
	xdr_put_fixed(e, verf, 8);
	xdr_put_cstring(e, owner, 1024);
	xdr_put_u32(e, 0);			/* flags */
	xdr_put_u32(e, SP4_NONE);
	xdr_put_u32(e, 0);			/* no implementation id */
}

void nfs_th_call(struct xdr_enc *e, void *buf, size_t cap, uint32_t proc)
{
	xdr_enc_init(e, buf, cap);
	xdr_put_u32(e, 0xabcd);
	xdr_put_u32(e, RPC_CALL);
	xdr_put_u32(e, RPC_VERSION);
	xdr_put_u32(e, NFS4_PROGRAM);
	xdr_put_u32(e, NFS4_VERSION);
	xdr_put_u32(e, proc);
	xdr_put_u32(e, RPC_AUTH_SYS);
	xdr_put_u32(e, 24);
	xdr_put_u32(e, 1);			/* stamp */
	xdr_put_cstring(e, "host", 255);
	xdr_put_u32(e, 0);			/* uid, gid, no more gids */
	xdr_put_u32(e, 0);
	xdr_put_u32(e, 0);
	xdr_put_u32(e, RPC_AUTH_NONE);
	xdr_put_u32(e, 0);
}

void nfs_th_compound(struct xdr_enc *e, void *buf, size_t cap,
		     uint32_t minor, uint32_t nops)
{
	nfs_th_call(e, buf, cap, NFS4_PROC_COMPOUND);
	xdr_put_cstring(e, "t", 16);
	xdr_put_u32(e, minor);
	xdr_put_u32(e, nops);
}

static void put_chan(struct xdr_enc *e, const struct nfs_th_chan *c)
{
	xdr_put_u32(e, 0);			/* header pad */
	xdr_put_u32(e, c->maxreq);
	xdr_put_u32(e, c->maxresp);
	xdr_put_u32(e, c->maxresp_cached);
	xdr_put_u32(e, c->maxops);
	xdr_put_u32(e, c->slots);
	xdr_put_u32(e, 0);			/* no RDMA ird */
}

void nfs_th_put_create_session_cb(struct xdr_enc *e, uint64_t clid,
				  uint32_t seq,
				  const struct nfs_th_chan *fore,
				  const struct nfs_th_chan *back,
				  uint32_t cb_prog, uint32_t flags,
				  uint32_t sys_uid)
{
	xdr_put_u32(e, OP_CREATE_SESSION);
	xdr_put_u64(e, clid);
	xdr_put_u32(e, seq);
	xdr_put_u32(e, flags);
	put_chan(e, fore);
	put_chan(e, back);
	xdr_put_u32(e, cb_prog);
	if (sys_uid == UINT32_MAX) {
		xdr_put_u32(e, 0);		/* no callback security */
		return;
	}
	xdr_put_u32(e, 1);
	xdr_put_u32(e, RPC_AUTH_SYS);
	xdr_put_u32(e, 13);			/* stamp */
	xdr_put_cstring(e, "cb", 255);
	xdr_put_u32(e, sys_uid);
	xdr_put_u32(e, sys_uid + 1);		/* gid */
	xdr_put_u32(e, 0);
}

void nfs_th_put_create_session(struct xdr_enc *e, uint64_t clid,
			       uint32_t seq, const struct nfs_th_chan *fore,
			       const struct nfs_th_chan *back,
			       uint32_t cb_prog)
{
	nfs_th_put_create_session_cb(e, clid, seq, fore, back, cb_prog, 0,
				     UINT32_MAX);
}

void nfs_th_session(struct nfs_server *srv, uint64_t conn_id,
		    const void *verf, const char *owner,
		    const struct nfs_th_chan *chan, uint8_t *sid)
{
	uint8_t b[256], *out = malloc(NFS_MAX_REPLY);
	struct xdr_enc e;
	struct xdr_dec d;
	uint64_t id;
	uint32_t seq;

	assert_non_null(out);
	xdr_enc_init(&e, b, sizeof(b));
	xdr_put_u32(&e, 0);			/* no tag */
	xdr_put_u32(&e, 2);			/* minor version */
	xdr_put_u32(&e, 1);			/* ops */
	nfs_th_put_exchange_id(&e, verf, owner);
	assert_int_equal(nfs_th_run_on(srv, 2, conn_id, &e, &d, out,
				       NFS_MAX_REPLY), NFS4_OK);
	id = xdr_get_u64(&d);
	seq = xdr_get_u32(&d);
	xdr_enc_init(&e, b, sizeof(b));
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 2);
	xdr_put_u32(&e, 1);
	nfs_th_put_create_session(&e, id, seq, chan, chan, 0x40000000);
	assert_int_equal(nfs_th_run_on(srv, 2, conn_id, &e, &d, out,
				       NFS_MAX_REPLY), NFS4_OK);
	xdr_get_fixed(&d, sid, NFS4_SESSIONID_SIZE);
	free(out);
}

uint32_t nfs_th_run(struct nfs_server *srv, uint32_t minor,
		    struct xdr_enc *e, struct xdr_dec *d, uint8_t *out,
		    size_t cap)
{
	return nfs_th_run_on(srv, minor, minor, e, d, out, cap);
}

uint32_t nfs_th_run_on(struct nfs_server *srv, uint32_t minor,
		       uint64_t conn_id, struct xdr_enc *e, struct xdr_dec *d,
		       uint8_t *out, size_t cap)
{
	struct nfs_cred cred = { .flavor = RPC_AUTH_SYS };
	struct xdr_dec a;
	struct xdr_enc r;
	uint32_t l, n, st = NFS4_OK, i;

	assert_int_equal(xdr_enc_err(e), 0);
	xdr_dec_init(&a, e->buf, xdr_enc_len(e));
	xdr_enc_init(&r, out, cap);
	assert_int_equal(nfs_compound(srv, &cred, conn_id, &a, &r), 0);
	xdr_dec_init(d, out, xdr_enc_len(&r));
	xdr_get_u32(d);				/* status */
	xdr_get_opaque_ref(d, &l, 64);		/* tag */
	n = xdr_get_u32(d);
	/* a failing op is the last result: processing stops there */
	for (i = 0; i < n; i++) {
		xdr_get_u32(d);			/* op */
		st = xdr_get_u32(d);
		if (i == 0 && n > 1 && st == NFS4_OK)
			xdr_skip(d, 36);	/* SEQUENCE's body */
		if (st)
			break;
	}
	return st;
}
