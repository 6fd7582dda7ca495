/* SPDX-License-Identifier: MIT */
/*
 * The NBD export type over the network server (not a public API): the
 * listeners come from lib/export/net/ and are shared by the exports that
 * name one address (share.h); NBD adds the session-operations table
 * (conn.c) that runs an NBD session on a connection.
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
#include "export/net/share.h"

/* Input buffer of one connection. */
#define NBD_CONN_INBUF (256u << 10)
/* Payload still missing from which a write is received in place. */
#define NBD_CONN_DIRECT_MIN (16u << 10)

/* An NBD export: its units are NBD export names, unique per address. */
struct nbd_export {
	struct bs_share_ref ref;	/* member: the bs_export */
};

/* conn.c: the session-operations table NBD gives the network server. */
extern const struct bs_net_proto nbd_net_proto;
/* Unit name a connection is bound to, or NULL during the handshake. */
const char *nbd_conn_export(const struct bs_net_conn *c);

/* server.c */
bool nbd_export_active(const struct bs_export *exp);

#endif
