/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include <blkstack/export.h>

#include "export/nfs/nfs.h"
#include "nfs_th.h"

static struct nfs_server *new_server(void)
{
	struct nfs_server *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return NULL;
	pthread_mutex_init(&srv->lock, NULL);
	srv->refs = 1;
	srv->lease = 60;
	srv->grace = 0;
	srv->boot = nfs_now() - 1;
	srv->export_id = 7;
	srv->boot_tag = 0x1234;
	return srv;
}

static void drop(struct nfs_server *srv)
{
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

void nfs_th_put_create_session(struct xdr_enc *e, uint64_t clid,
			       uint32_t seq, const struct nfs_th_chan *fore,
			       const struct nfs_th_chan *back,
			       uint32_t cb_prog)
{
	xdr_put_u32(e, OP_CREATE_SESSION);
	xdr_put_u64(e, clid);
	xdr_put_u32(e, seq);
	xdr_put_u32(e, 0);			/* flags */
	put_chan(e, fore);
	put_chan(e, back);
	xdr_put_u32(e, cb_prog);
	xdr_put_u32(e, 0);			/* no callback security */
}
