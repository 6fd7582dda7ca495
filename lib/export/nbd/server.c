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

static struct nbd_server **server_slot(struct bs_exports *set)
{
	return (struct nbd_server **)bs_exports_type_slot(set,
							  &nbd_export_type);
}

bool nbd_export_active(const struct bs_export *exp)
{
	const struct nbd_export *ne = exp->priv;

	/* read by I/O threads during negotiation, set by the main loop */
	return ne && !__atomic_load_n(&ne->shutdown, __ATOMIC_ACQUIRE);
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

static const char *sep(const char *where)
{
	return *where ? ": " : "";
}

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

static int get_count(const char *name, struct bs_opts *opts, const char *key,
		     unsigned *out)
{
	uint32_t v;
	int err = bs_opts_get_u32(opts, key, &v);

	if (err < 0)
		return err;
	if (err == 0) {
		const char *w = bs_opts_where(opts, key);

		if (v < 1 || v > 65536)
			return bs_error(-EINVAL, "%s%sexport %s: %s: give 1 to "
					"65536", w, sep(w), name, key);
		*out = v;
	}
	return 0;
}

static int get_ms(const char *name, struct bs_opts *opts, const char *key,
		  unsigned *out)
{
	const char *v = bs_opts_get(opts, key);
	const char *w = bs_opts_where(opts, key);

	if (v && bs_net_parse_ms(v, out))
		return bs_error(-EINVAL, "%s%sexport %s: %s '%s': give seconds "
				"(10, 2.5, 500ms; 0 = none), at most a day", w,
				sep(w), name, key, v);
	return 0;
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
	int i, err;

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
					o->listen_where, sep(o->listen_where),
					name, NBD_MAX_LISTEN_ARGS);
	}
	for (i = 0; i < o->n; i++) {
		struct bs_net_addr a;

		if (bs_net_parse_addr(o->v[i], &a, why, sizeof(why)))
			return bs_error(-EINVAL, "%s%sexport %s: listen '%s': "
					"%s", o->listen_where,
					sep(o->listen_where), name, o->v[i],
					why);
	}
	if (o->sock && !*o->sock)
		return bs_error(-EINVAL, "%s%sexport %s: socket: empty path",
				o->sock_where, sep(o->sock_where), name);
	if (mode) {
		const char *w = bs_opts_where(opts, "socket_mode");

		if (bs_net_parse_mode(mode, &o->lim.socket_mode) ||
		    (o->lim.socket_mode & 0600) != 0600)
			return bs_error(-EINVAL, "%s%sexport %s: socket_mode "
					"'%s': give an octal mode with rw for "
					"the owner (0600, 0660, 0666)", w,
					sep(w), name, mode);
	}
	err = get_count(name, opts, "max_connections", &o->lim.max_conns);
	if (!err)
		err = get_count(name, opts, "max_connections_per_peer",
				&o->lim.max_per_peer);
	if (!err)
		err = get_ms(name, opts, "handshake_timeout",
			     &o->lim.handshake_ms);
	if (!err)
		err = get_ms(name, opts, "idle_timeout", &o->lim.idle_ms);
	if (err)
		return err;
	if (o->lim.max_per_peer > o->lim.max_conns) {
		const char *w = bs_opts_where(opts, "max_connections_per_peer");

		/* the default per-peer limit follows a smaller listener one */
		if (*w)
			return bs_error(-EINVAL, "%s: export %s: "
					"max_connections_per_peer %u is above "
					"max_connections %u", w, name,
					o->lim.max_per_peer, o->lim.max_conns);
		o->lim.max_per_peer = o->lim.max_conns;
	}
	return 0;
}

static int nbd_check(const char *name, struct bs_opts *opts)
{
	struct nbd_opts o;
	int err = read_opts(name, opts, &o);

	free(o.words);
	return err;
}

/* ---- listeners ----------------------------------------------------------- */

static struct nbd_listener *find_listener(struct nbd_server *srv,
					  const char *addr, bool is_unix)
{
	struct nbd_listener *l;

	for (l = srv->listeners; l; l = l->next)
		if (bs_net_listener_accepting(l->nl) &&
		    !strcmp(bs_net_listener_addr(l->nl), addr) &&
		    bs_net_listener_is_unix(l->nl) == is_unix)
			return l;
	return NULL;
}

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

/* An NBD export name of @exp that another export on @l already uses. */
static int check_clash(struct nbd_listener *l, struct bs_export *exp,
		       struct bs_opts *opts)
{
	unsigned i, j;

	for (i = 0; i < exp->nunits; i++) {
		const struct bs_export_unit *u = &exp->units[i];

		for (j = 0; j < l->nexps; j++) {
			const char *w;

			if (l->exps[j] == exp ||
			    !bs_export_unit_find(l->exps[j], u->name))
				continue;
			w = unit_where(opts, u);
			return bs_error(-EEXIST, "%s%sexport %s: NBD export "
					"name '%s' is already served on %s%s "
					"by export %s: names on one address "
					"must differ", w, sep(w), exp->name,
					u->name,
					bs_net_listener_is_unix(l->nl) ?
					"unix:" : "",
					bs_net_listener_addr(l->nl),
					l->exps[j]->name);
		}
	}
	return 0;
}

static int listener_add_export(struct nbd_listener *l, struct bs_export *exp,
			       struct bs_opts *opts)
{
	struct nbd_export *ne = exp->priv;
	struct bs_export **exps;
	unsigned i;
	int err;

	for (i = 0; i < ne->nls; i++)
		if (ne->ls[i] == l)
			return 0;	/* named twice: once is enough */
	err = check_clash(l, exp, opts);
	if (err)
		return err;
	if (ne->nls == sizeof(ne->ls) / sizeof(ne->ls[0]))
		return bs_error(-E2BIG, "export %s: more than %zu listen "
				"addresses", exp->name,
				sizeof(ne->ls) / sizeof(ne->ls[0]));
	exps = realloc(l->exps, (l->nexps + 1) * sizeof(*exps));
	if (!exps)
		return -ENOMEM;
	l->exps = exps;
	l->exps[l->nexps++] = exp;
	ne->ls[ne->nls++] = l;
	return 0;
}

static bool same_limits(const struct bs_net_limits *a,
			const struct bs_net_limits *b)
{
	return a->max_conns == b->max_conns &&
	       a->max_per_peer == b->max_per_peer &&
	       a->handshake_ms == b->handshake_ms &&
	       a->idle_ms == b->idle_ms && a->out_max == b->out_max &&
	       a->socket_mode == b->socket_mode;
}

static void set_log(void *arg, const char *msg)
{
	bs_exports_log(arg, "%s", msg);
}

static int listener_open(struct nbd_server *srv, struct bs_export *exp,
			 struct bs_opts *opts, const char *where,
			 const char *addr, bool is_unix,
			 const struct bs_net_limits *lim)
{
	struct nbd_listener *l = find_listener(srv, addr, is_unix);
	struct bs_net_listen_cfg cfg = {
		.addr = addr,
		.is_unix = is_unix,
		.limits = *lim,
		.proto = &nbd_net_proto,
		.log = set_log,
		.log_arg = srv->set,
	};
	struct bs_net_addr a;
	char why[160];
	int err;

	if (l) {
		if (!same_limits(bs_net_listener_limits(l->nl), lim))
			return bs_error(-EINVAL, "%s%sexport %s: %s is shared "
					"with export %s but with other "
					"connection settings (max_connections"
					"*, *_timeout, socket_mode): give the "
					"same ones", where, sep(where),
					exp->name, addr, l->exps[0]->name);
		return listener_add_export(l, exp, opts);
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->srv = srv;
	cfg.owner = l;
	cfg.ctx = srv->ctx;	/* clients go to the I/O threads */
	bs_error_clear();
	err = bs_net_listen(srv->loop, &cfg, &l->nl);
	if (!err)
		err = listener_add_export(l, exp, opts);
	if (err) {
		char msg[600];

		snprintf(msg, sizeof(msg), "%s", *bs_last_error() ?
			 bs_last_error() : strerror(-err));
		if (l->nl)
			bs_net_listener_free(l->nl);
		free(l->exps);
		free(l);
		return bs_error(err, "%s%sexport %s: %s", where, sep(where),
				exp->name, msg);
	}
	l->next = srv->listeners;
	srv->listeners = l;
	if (!is_unix && !bs_net_parse_addr(addr, &a, why, sizeof(why)) &&
	    a.wildcard)
		bs_exports_log(srv->set, "nbd: listening on %s: WARNING: every "
			       "address: export %s is reachable from the "
			       "network (give 127.0.0.1 or [::1] for this "
			       "machine only)", addr, exp->name);
	else
		bs_exports_log(srv->set, "nbd: listening on %s%s", is_unix ?
			       "unix:" : "", addr);
	return 0;
}

static void listener_free(struct nbd_listener *l)
{
	struct nbd_server *srv = l->srv;
	struct nbd_listener **pp;

	for (pp = &srv->listeners; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	/* the connections close (on their loops) while their sessions
	 * still see l */
	bs_net_listener_stop(l->nl);
	bs_net_listener_close_conns(l->nl, NULL, NULL, "export closed");
	bs_net_listener_free(l->nl);
	free(l->exps);
	free(l);
}

/* Under the listener's lock: is @c a client of export @arg? */
static bool conn_of_export(struct bs_net_conn *c, void *arg)
{
	const char *e = bs_net_conn_label(c);

	return *e && bs_export_unit_find(arg, e);
}

/* Drop @exp from @l; the listener goes when no export is left on it. */
static void listener_remove_export(struct nbd_listener *l,
				   struct bs_export *exp)
{
	unsigned i;

	for (i = 0; i < l->nexps; i++) {
		if (l->exps[i] == exp) {
			memmove(&l->exps[i], &l->exps[i + 1],
				(l->nexps - i - 1) * sizeof(*l->exps));
			l->nexps--;
			break;
		}
	}
	if (!l->nexps) {
		listener_free(l);
		return;
	}
	/* clients of this export lose it; the others go on */
	bs_net_listener_close_conns(l->nl, conn_of_export, exp,
				    "export closed");
}

/* ---- the export type ----------------------------------------------------- */

static int server_get(struct bs_export *exp, struct nbd_server **out)
{
	struct nbd_server **slot = server_slot(exp->set);
	struct nbd_server *srv;

	if (!slot)
		return -EINVAL;
	if (!*slot) {
		srv = calloc(1, sizeof(*srv));
		if (!srv)
			return -ENOMEM;
		srv->set = exp->set;
		srv->ctx = exp->ctx;
		srv->loop = bs_ctx_loop(exp->ctx);
		*slot = srv;
	}
	(*slot)->nexports++;
	*out = *slot;
	return 0;
}

static void server_put(struct bs_exports *set)
{
	struct nbd_server **slot = server_slot(set);
	struct nbd_server *srv = slot ? *slot : NULL;

	if (!srv || --srv->nexports)
		return;
	while (srv->listeners)
		listener_free(srv->listeners);
	free(srv);
	*slot = NULL;
}

static void nbd_close(struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;

	if (!ne)
		return;
	while (ne->nls) {
		struct nbd_listener *l = ne->ls[--ne->nls];
		listener_remove_export(l, exp);
	}
	free(ne);
	exp->priv = NULL;
	server_put(exp->set);
}

static int nbd_open(struct bs_export *exp, struct bs_opts *opts)
{
	struct nbd_server *srv;
	struct nbd_export *ne;
	struct nbd_opts o;
	int i, err;

	ne = calloc(1, sizeof(*ne));
	if (!ne)
		return -ENOMEM;
	exp->priv = ne;
	err = server_get(exp, &srv);
	if (err) {
		free(ne);
		exp->priv = NULL;
		return err;
	}
	err = read_opts(exp->name, opts, &o);
	for (i = 0; !err && i < o.n; i++)
		err = listener_open(srv, exp, opts, o.listen_where, o.v[i],
				    false, &o.lim);
	if (!err && o.sock)
		err = listener_open(srv, exp, opts, o.sock_where, o.sock,
				    true, &o.lim);
	free(o.words);
	if (err)
		nbd_close(exp);
	return err;
}

static void nbd_shutdown(struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;
	unsigned i, j;

	if (!ne || ne->shutdown)
		return;
	__atomic_store_n(&ne->shutdown, true, __ATOMIC_RELEASE);
	for (i = 0; i < ne->nls; i++) {
		struct nbd_listener *l = ne->ls[i];
		bool all = true;
		struct bs_net_conn *c;

		for (j = 0; j < l->nexps; j++)
			if (nbd_export_active(l->exps[j]))
				all = false;
		if (all)
			bs_net_listener_stop(l->nl);
		bs_net_listener_lock(l->nl);
		for (c = bs_net_conn_next(l->nl, NULL); c;
		     c = bs_net_conn_next(l->nl, c)) {
			const char *e = bs_net_conn_label(c);
			/* clients still negotiating go too once nothing is left */
			if ((*e && bs_export_unit_find(exp, e)) || (!*e && all))
				bs_net_conn_send_shutdown(c);
		}
		bs_net_listener_unlock(l->nl);
	}
}

static unsigned nbd_clients(struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;
	unsigned i, n = 0;

	if (!ne)
		return 0;
	for (i = 0; i < ne->nls; i++) {
		struct nbd_listener *l = ne->ls[i];
		struct bs_net_conn *c;

		bs_net_listener_lock(l->nl);
		for (c = bs_net_conn_next(l->nl, NULL); c;
		     c = bs_net_conn_next(l->nl, c)) {
			const char *e = bs_net_conn_label(c);
			/* a negotiating client counts for the listener's first */
			if (*e ? !!bs_export_unit_find(exp, e) :
				 l->exps[0] == exp)
				n++;
		}
		bs_net_listener_unlock(l->nl);
	}
	return n;
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
	for (i = 0; i < ne->nls; i++)
		kv(arg, bs_net_listener_is_unix(ne->ls[i]->nl) ? "socket" :
		   "listen", "%s", bs_net_listener_addr(ne->ls[i]->nl));
	kv(arg, "clients", "%u", nbd_clients(exp));
	if (ne->shutdown)
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
		"the handshake (default 0 = never)\n",
	.check = nbd_check,
	.open = nbd_open,
	.shutdown = nbd_shutdown,
	.clients = nbd_clients,
	.close = nbd_close,
	.describe = nbd_describe,
};
BS_EXPORT_TYPE(nbd_export_type);
