/* SPDX-License-Identifier: MIT */
/*
 * The NBD export type over the network server (not a public API): the
 * listeners come from lib/export/net/; NBD adds which exports each one
 * serves and the session-operations table (conn.c) that runs an NBD
 * session on a connection.
 */
#ifndef BLKSTACK_NBD_SERVER_H
#define BLKSTACK_NBD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <blkstack/bdev.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>
#include <blkstack/net.h>

#include "export/nbd/session.h"

/* Input buffer of one connection. */
#define NBD_CONN_INBUF (256u << 10)
/* Payload still missing from which a write is received in place. */
#define NBD_CONN_DIRECT_MIN (16u << 10)

struct nbd_server {
	struct bs_exports *set;
	struct bs_ctx *ctx;
	struct bs_loop *loop;
	struct nbd_listener *listeners;
	unsigned nexports;
};

/* A network listener and the NBD exports reachable on it. */
struct nbd_listener {
	struct nbd_server *srv;
	struct bs_net_listener *nl;
	struct bs_export **exps;
	unsigned nexps;
	struct nbd_listener *next;
};

struct nbd_export {
	bool shutdown;
	struct nbd_listener *ls[16];
	unsigned nls;
};

/* conn.c: the session-operations table NBD gives the network server. */
extern const struct bs_net_proto nbd_net_proto;
/* Export a connection is bound to, or NULL during the handshake. */
const char *nbd_conn_export(const struct bs_net_conn *c);

/* server.c */
bool nbd_export_active(const struct bs_export *exp);

#endif
