/* SPDX-License-Identifier: MIT */
/*
 * Shared listeners (not a public API): several exports of one type may
 * name the same address (NBD export names, iSCSI target names on one
 * portal); one network listener then serves them all. This is the part
 * every such export type has in common: one record per type and export
 * set (through bs_exports_type_slot()), listeners found by address and
 * opened once with the same connection settings, and an export's
 * shutdown, close and client count, which reach only the connections
 * that belong to it.
 *
 * A member is what an export puts on listeners (NBD: the bs_export,
 * iSCSI: its target), through a bs_share_ref kept in its own record. The
 * type says through bs_share_ops whether a connection's label is one of
 * a member's clients and whether two members may share an address.
 *
 * Threads: open, close and shutdown run on the main loop; members[] of a
 * listener changes only there, before its connections could see the new
 * member (open) or after they were closed (close). I/O threads read
 * members[] during a login or handshake, and bs_share_active().
 */
#ifndef BLKSTACK_NET_SHARE_H
#define BLKSTACK_NET_SHARE_H

#include <stdbool.h>

#include <blkstack/export.h>
#include <blkstack/net.h>

#define BS_SHARE_MAX_LISTEN 16

struct bs_share_listener;

struct bs_share_ops {
	const char *name;			/* "nbd": log lines */
	const struct bs_net_proto *proto;
	/* A connection labelled @label (never "") is a client of @member. */
	bool (*has_conn)(const void *member, const char *label);
	/*
	 * @member may not join @l, where @other already is: return a
	 * bs_error() naming @where (file:line, may be "") and why; 0 = fine.
	 * @arg is bs_share_listen()'s.
	 */
	int (*clash)(const void *member, const void *other,
		     const struct bs_share_listener *l, const char *where,
		     void *arg);
};

/* One export type's listeners in one export set. */
struct bs_share {
	const struct bs_share_ops *ops;
	struct bs_exports *set;
	struct bs_ctx *ctx;
	struct bs_loop *loop;
	struct bs_share_listener *listeners;
	unsigned nexports;
};

/* A member and where it listens; kept in the member's own record. */
struct bs_share_ref {
	void *member;
	const char *name;			/* the export's */
	struct bs_share *sh;
	const struct bs_export_type *type;
	bool shutdown;				/* atomic */
	struct bs_share_listener *ls[BS_SHARE_MAX_LISTEN];
	unsigned nls;
};

/* A listener and the members it serves, the first one first. */
struct bs_share_listener {
	struct bs_share *sh;
	struct bs_net_listener *nl;
	struct bs_share_ref **refs;
	unsigned n;
	struct bs_share_listener *next;
};

/*
 * Join the type's shared record of @exp's set (made on first use) as
 * @member; @ref is the member's own record, zeroed. bs_share_leave()
 * undoes it, also after a failed bs_share_listen().
 */
int bs_share_join(struct bs_share_ref *ref, struct bs_export *exp,
		  const struct bs_export_type *type,
		  const struct bs_share_ops *ops, void *member);
/*
 * Serve the member on @addr (a path when @is_unix): the listener already
 * there (same connection settings required) or a new one, whose
 * connections are spread over the export context's I/O loops and whose
 * owner (bs_net_conn_owner) is the bs_share_listener. Errors name @where
 * and the export; @arg goes to ops->clash.
 */
int bs_share_listen(struct bs_share_ref *ref, const char *where,
		    const char *addr, bool is_unix,
		    const struct bs_net_limits *lim, void *arg);
/*
 * Stop taking clients: a listener no active member is left on stops
 * accepting (and its connections still negotiating are shut down), the
 * member's clients are shut down gracefully.
 */
void bs_share_shutdown(struct bs_share_ref *ref);
/* The member takes new clients: joined and not shutting down. */
bool bs_share_active(const struct bs_share_ref *ref);
/* Clients of the member; one still negotiating counts for the first. */
unsigned bs_share_clients(const struct bs_share_ref *ref);
/*
 * Leave every listener (its clients closed, waited for; a listener left
 * empty goes), then the shared record (freed with the last member).
 */
void bs_share_leave(struct bs_share_ref *ref);
/* "listen" / "socket" lines for describe. */
void bs_share_describe(const struct bs_share_ref *ref, bs_kv_fn kv,
		       void *arg);

#endif
