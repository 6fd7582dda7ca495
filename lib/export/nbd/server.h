/* SPDX-License-Identifier: MIT */
/* The NBD server's listeners and connections (not a public API). */
#ifndef BLKSTACK_NBD_SERVER_H
#define BLKSTACK_NBD_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#include <blkstack/bdev.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>

#include "export/nbd/session.h"

/* Input buffer of one connection. */
#define NBD_CONN_INBUF (256u << 10)
/* Payload still missing from which a write is received in place. */
#define NBD_CONN_DIRECT_MIN (16u << 10)
/* Connections per listening socket; more are refused. */
#define NBD_MAX_CONNS 512

struct nbd_conn;

struct nbd_server {
	struct bs_exports *set;
	struct bs_ctx *ctx;
	struct bs_loop *loop;
	struct nbd_listener *listeners;
	unsigned nexports;
	uint64_t next_id;
};

struct nbd_listener {
	struct nbd_server *srv;
	char addr[160];		/* as configured: "127.0.0.1:10809" */
	char path[108];		/* UNIX socket path, "" for TCP */
	int fd;			/* -1 once it stopped accepting */
	int retry_timer;	/* > 0 while accepting is paused (EMFILE...) */
	bool pause_logged;	/* said so once for this episode */
	struct bs_export **exps;
	unsigned nexps;
	struct nbd_conn *conns;
	unsigned nconns;
	struct nbd_listener *next;
};

struct nbd_export {
	bool shutdown;
	struct nbd_listener *ls[16];
	unsigned nls;
};

/* conn.c */
int nbd_conn_start(struct nbd_listener *l, int fd, const char *peer);
/* Close now (requests in flight finish in the device, unanswered). */
void nbd_conn_close(struct nbd_conn *c, const char *why);
void nbd_conn_shutdown(struct nbd_conn *c);
/* Export the connection is bound to, or NULL during the handshake. */
const char *nbd_conn_export(const struct nbd_conn *c);
struct nbd_conn *nbd_conn_next(const struct nbd_conn *c);

/* server.c */
bool nbd_export_active(const struct bs_export *exp);

#endif
