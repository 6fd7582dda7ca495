/* SPDX-License-Identifier: MIT */
/*
 * The `nbd` export type: which exports each network listener serves.
 * Listeners (TCP and UNIX), accepting, limits and timeouts are the network
 * server's (lib/export/net/); a connection runs one NBD session through
 * nbd_net_proto (conn.c). Each unit of an export is an NBD export name
 * (the export's own name for `device =`); several exports may name the
 * same address, and the unit names on one address must differ. A client
 * picks one by name during the handshake, and "" picks the first.
 *
 *   [export vol0]
 *   type = nbd
 *   device = vol0                          or unit.NAME = DEV lines
 *   listen = 127.0.0.1:10809 [::1]:10809   TCP, one or more HOST:PORT
 *   socket = /run/blkstack/nbd.sock        UNIX socket
 *   socket_mode = 0600                     its mode, set from the start
 *   max_connections = 512                  per listener
 *   max_connections_per_peer = 64          per client address (uid: UNIX)
 *   handshake_timeout = 10                 seconds ("500ms"); 0 = none
 *   idle_timeout = 0                       seconds after the handshake
 *   send_buffer = 512K                     TCP send buffer; 0 = autotuned
 *
 * With neither listen nor socket the export listens on 127.0.0.1:10809.
 * The connection settings belong to the listener: exports sharing an
 * address must give the same ones.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>

#include "export/nbd/server.h"

#define NBD_DEFAULT_LISTEN "127.0.0.1:10809"
#define NBD_MAX_LISTEN_ARGS 16

extern const struct bs_export_type nbd_export_type;

bool nbd_export_active(const struct bs_export *exp)
{
	const struct nbd_export *ne = exp->priv;

	return ne && bs_share_active(&ne->ref);
}

/* ---- options ------------------------------------------------------------- */

struct nbd_opts {
	char *words;			/* listen, split in place into v[] */
	char *v[NBD_MAX_LISTEN_ARGS];
	int n;
	const char *sock;
	struct bs_net_limits lim;
	const char *listen_where, *sock_where;
};

/* Split a list of words ("a b,c") into @v; returns the count or -E2BIG. */
static int split_words(char *s, char **v, int max)
{
	int n = 0;
	char *save = NULL, *w;

	for (w = strtok_r(s, " \t,", &save); w;
	     w = strtok_r(NULL, " \t,", &save)) {
		if (n == max)
			return -E2BIG;
		v[n++] = w;
	}
	return n;
}

/*
 * Read and check every nbd option (without binding anything): addresses
 * well formed with a port in 1..65535 and a host, a socket path, limits
 * and timeouts in range. Errors name file:line.
 */
static int read_opts(const char *name, struct bs_opts *opts,
		     struct nbd_opts *o)
{
	const char *listen = bs_opts_get(opts, "listen");
	const char *mode = bs_opts_get(opts, "socket_mode");
	char why[200];
	int i;

	memset(o, 0, sizeof(*o));
	bs_net_limits_default(&o->lim);
	o->sock = bs_opts_get(opts, "socket");
	o->listen_where = bs_opts_where(opts, "listen");
	o->sock_where = bs_opts_where(opts, "socket");
	if (!listen && !o->sock)
		listen = NBD_DEFAULT_LISTEN;
	if (listen) {
		o->words = strdup(listen);
		if (!o->words)
			return -ENOMEM;
		o->n = split_words(o->words, o->v, NBD_MAX_LISTEN_ARGS);
		if (o->n <= 0)
			return bs_error(-EINVAL, "%s%sexport %s: listen: give "
					"1 to %d HOST:PORT addresses",
					o->listen_where,
					bs_sep(o->listen_where), name,
					NBD_MAX_LISTEN_ARGS);
	}
	for (i = 0; i < o->n; i++) {
		struct bs_net_addr a;

		if (bs_net_parse_addr(o->v[i], &a, why, sizeof(why)))
			return bs_error(-EINVAL, "%s%sexport %s: listen '%s': "
					"%s", o->listen_where,
					bs_sep(o->listen_where), name, o->v[i],
					why);
	}
	if (o->sock && !*o->sock)
		return bs_error(-EINVAL, "%s%sexport %s: socket: empty path",
				o->sock_where, bs_sep(o->sock_where), name);
	if (mode) {
		const char *w = bs_opts_where(opts, "socket_mode");

		if (bs_net_parse_mode(mode, &o->lim.socket_mode) ||
		    (o->lim.socket_mode & 0600) != 0600)
			return bs_error(-EINVAL, "%s%sexport %s: socket_mode "
					"'%s': give an octal mode with rw for "
					"the owner (0600, 0660, 0666)", w,
					bs_sep(w), name, mode);
	}
	return bs_net_read_limits(name, opts, BS_NET_KEYS_ALL, &o->lim);
}

static int nbd_check(const char *name, struct bs_opts *opts)
{
	struct nbd_opts o;
	int err = read_opts(name, opts, &o);

	free(o.words);
	return err;
}

/* ---- listeners (shared: lib/export/net/share.c) ------------------------- */

/* Where the unit @u was configured: its unit.NAME line, or "device". */
static const char *unit_where(struct bs_opts *opts,
			      const struct bs_export_unit *u)
{
	char key[BS_EXPORT_NAME_MAX + 8];

	if (!strcmp(u->name, u->exp->name) && *bs_opts_where(opts, "device"))
		return bs_opts_where(opts, "device");
	snprintf(key, sizeof(key), "unit.%s", u->name);
	return bs_opts_where(opts, key);
}

/* An NBD export name of @member that @other already uses on @l. */
static int nbd_clash(const void *member, const void *other,
		     const struct bs_share_listener *l, const char *where,
		     void *opts)
{
	const struct bs_export *exp = member, *o = other;
	unsigned i;

	(void)where;
	for (i = 0; i < exp->nunits; i++) {
		const struct bs_export_unit *u = &exp->units[i];
		const char *w;

		if (!bs_export_unit_find((struct bs_export *)o, u->name))
			continue;
		w = unit_where(opts, u);
		return bs_error(-EEXIST, "%s%sexport %s: NBD export name '%s' "
				"is already served on %s%s by export %s: names "
				"on one address must differ", w, bs_sep(w),
				exp->name, u->name,
				bs_net_listener_is_unix(l->nl) ? "unix:" : "",
				bs_net_listener_addr(l->nl), o->name);
	}
	return 0;
}

/* A connection bound to unit @label is a client of export @member. */
static bool nbd_has_conn(const void *member, const char *label)
{
	return bs_export_unit_find((struct bs_export *)member, label);
}

static const struct bs_share_ops nbd_share_ops = {
	.name = "nbd",
	.proto = &nbd_net_proto,
	.has_conn = nbd_has_conn,
	.clash = nbd_clash,
};

/* ---- the export type ----------------------------------------------------- */

static void nbd_close(struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;

	if (!ne)
		return;
	bs_share_leave(&ne->ref);
	free(ne);
	exp->priv = NULL;
}

static int nbd_open(struct bs_export *exp, struct bs_opts *opts)
{
	struct nbd_export *ne;
	struct nbd_opts o;
	int i, err;

	ne = calloc(1, sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	exp->priv = ne;
	err = bs_share_join(&ne->ref, exp, &nbd_export_type, &nbd_share_ops,
			    exp);
	if (err) {
		free(ne);
		exp->priv = NULL;
		return err;
	}
	err = read_opts(exp->name, opts, &o);
	for (i = 0; !err && i < o.n; i++)
		err = bs_share_listen(&ne->ref, o.listen_where, o.v[i], false,
				      &o.lim, opts);
	if (!err && o.sock)
		err = bs_share_listen(&ne->ref, o.sock_where, o.sock, true,
				      &o.lim, opts);
	free(o.words);
	if (err)
		nbd_close(exp);
	return err;
}

static void nbd_shutdown(struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;

	if (ne)
		bs_share_shutdown(&ne->ref);
}

static unsigned nbd_clients(struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;

	return ne ? bs_share_clients(&ne->ref) : 0;
}

static void nbd_describe(struct bs_export *exp, bs_kv_fn kv, void *arg)
{
	struct nbd_export *ne = exp->priv;
	unsigned i;

	if (!ne)
		return;
	for (i = 0; i < exp->nunits; i++)
		kv(arg, "unit", "%s: device %s%s", exp->units[i].name,
		   exp->units[i].dev->name,
		   exp->units[i].readonly ? ", read-only" : "");
	bs_share_describe(&ne->ref, kv, arg);
	kv(arg, "clients", "%u", nbd_clients(exp));
	if (ne->ref.shutdown)
		kv(arg, "state", "stopping");
}

const struct bs_export_type nbd_export_type = {
	.name = "nbd",
	.summary = "Network Block Device server (fixed newstyle, structured "
		   "replies, base:allocation)",
	.options =
		"listen=HOST:PORT ...  TCP addresses (default 127.0.0.1:10809;"
		" [::1]:10809 for IPv6)\n"
		"socket=PATH          a UNIX socket (a stale one is replaced)\n"
		"socket_mode=MODE     its mode, octal (default 0600)\n"
		"max_connections=N    per listener (default 512)\n"
		"max_connections_per_peer=N  per client address; per uid on a "
		"UNIX socket (default 64)\n"
		"handshake_timeout=S  close clients that have not chosen an "
		"export after S seconds (default 10; 0 = never)\n"
		"idle_timeout=S       close clients idle for S seconds after "
		"the handshake (default 0 = never)\n"
		"send_buffer=SIZE     TCP send buffer of each connection "
		"(SO_SNDBUF; default 512K, about one 1 MiB read in flight; "
		"0 = the kernel's autotuning, for long round trips)\n",
	.check = nbd_check,
	.open = nbd_open,
	.shutdown = nbd_shutdown,
	.clients = nbd_clients,
	.close = nbd_close,
	.describe = nbd_describe,
};
BS_EXPORT_TYPE(nbd_export_type);
