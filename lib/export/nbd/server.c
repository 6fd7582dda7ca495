/* SPDX-License-Identifier: MIT */
/*
 * The `nbd` export type: listening sockets (TCP and UNIX) shared by the
 * exports of one set, accepting connections that each run one session
 * (conn.c). Several exports may name the same address; a client picks one
 * by name during the handshake, and "" picks the first.
 *
 *   [export vol0]
 *   type = nbd
 *   device = vol0
 *   listen = 127.0.0.1:10809 [::1]:10809   TCP, one or more HOST:PORT
 *   socket = /run/blkstack/nbd.sock        UNIX socket
 *
 * With neither listen nor socket the export listens on 127.0.0.1:10809.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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

	return ne && !ne->shutdown;
}

/* ---- accepting ----------------------------------------------------------- */

static void peer_name(const struct sockaddr_storage *ss, socklen_t len,
		      const struct nbd_listener *l, char *buf, size_t size)
{
	char host[INET6_ADDRSTRLEN + 8], port[16];

	if (ss->ss_family == AF_UNIX) {
		snprintf(buf, size, "unix:%s", l->path);
		return;
	}
	if (getnameinfo((const struct sockaddr *)ss, len, host, sizeof(host),
			port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV)) {
		snprintf(buf, size, "?");
		return;
	}
	if (ss->ss_family == AF_INET6)
		snprintf(buf, size, "[%s]:%s", host, port);
	else
		snprintf(buf, size, "%s:%s", host, port);
}

/* Out of descriptors or memory: stop accepting for a moment, not spin. */
#define NBD_ACCEPT_RETRY_MS 100

static void accept_resume(void *arg)
{
	struct nbd_listener *l = arg;

	l->retry_timer = 0;
	if (l->fd >= 0)
		bs_loop_mod_fd(l->srv->loop, l->fd, EPOLLIN);
}

static void accept_pause(struct nbd_listener *l, int err)
{
	if (!l->pause_logged)
		bs_exports_log(l->srv->set, "nbd %s: accept: %s: not accepting "
			       "new clients until descriptors free up", l->addr,
			       strerror(err));
	l->pause_logged = true;
	bs_loop_mod_fd(l->srv->loop, l->fd, 0);
	l->retry_timer = bs_loop_add_timer(l->srv->loop, NBD_ACCEPT_RETRY_MS,
					   accept_resume, l);
	if (l->retry_timer < 0) {
		l->retry_timer = 0;
		bs_loop_mod_fd(l->srv->loop, l->fd, EPOLLIN);
	}
}

static void on_accept(void *arg, uint32_t events)
{
	struct nbd_listener *l = arg;
	unsigned burst;

	(void)events;
	/* bounded per wakeup so one busy listener cannot starve the loop */
	for (burst = 0; burst < 64 && l->fd >= 0; burst++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		char peer[160];
		int fd, err, one = 1;

		fd = accept4(l->fd, (struct sockaddr *)&ss, &len,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			err = errno;
			if (err == EINTR)
				continue;
			if (err == EMFILE || err == ENFILE || err == ENOBUFS ||
			    err == ENOMEM)
				accept_pause(l, err);
			else if (err != EAGAIN && err != EWOULDBLOCK &&
				 err != ECONNABORTED)
				bs_exports_log(l->srv->set, "nbd %s: accept: %s",
					       l->addr, strerror(err));
			return;
		}
		if (l->pause_logged) {
			bs_exports_log(l->srv->set, "nbd %s: accepting again",
				       l->addr);
			l->pause_logged = false;
		}
		peer_name(&ss, len, l, peer, sizeof(peer));
		if (l->nconns >= NBD_MAX_CONNS) {
			bs_exports_log(l->srv->set, "nbd %s: refused %s: %u "
				       "connections already open", l->addr,
				       peer, l->nconns);
			close(fd);
			continue;
		}
		if (ss.ss_family != AF_UNIX)
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
		err = nbd_conn_start(l, fd, peer);
		if (err) {
			bs_exports_log(l->srv->set, "nbd %s: dropped %s: %s",
				       l->addr, peer, strerror(-err));
			close(fd);
		}
	}
}

/* ---- listeners ----------------------------------------------------------- */

/* Split "HOST:PORT" / "[V6]:PORT" in place. */
static int split_hostport(char *s, char **host, char **port)
{
	char *colon;

	if (*s == '[') {
		char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		*end = '\0';
		*host = s + 1;
		*port = end + 2;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return -EINVAL;
		*colon = '\0';
		*host = s;
		*port = colon + 1;
	}
	return **port ? 0 : -EINVAL;
}

static int open_tcp(const char *where, const char *name, const char *addr,
		    int *out)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	};
	struct addrinfo *res, *ai;
	char copy[160], *host, *port;
	int fd = -1, rc, one = 1, saved = 0;

	snprintf(copy, sizeof(copy), "%s", addr);
	if (split_hostport(copy, &host, &port))
		return bs_error(-EINVAL, "%s%sexport %s: listen '%s': give "
				"HOST:PORT (127.0.0.1:10809, [::1]:10809)",
				where, *where ? ": " : "", name, addr);
	rc = getaddrinfo(*host ? host : NULL, port, &hints, &res);
	if (rc)
		return bs_error(-EINVAL, "%s%sexport %s: listen '%s': %s",
				where, *where ? ": " : "", name, addr,
				gai_strerror(rc));
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK |
			    SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0) {
			saved = errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ai->ai_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one,
				   sizeof(one));
		if (!bind(fd, ai->ai_addr, ai->ai_addrlen) &&
		    !listen(fd, 128))
			break;
		saved = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	if (fd < 0)
		return bs_error(-saved, "%s%sexport %s: listen on %s: %s",
				where, *where ? ": " : "", name, addr,
				strerror(saved));
	*out = fd;
	return 0;
}

static int open_unix(const char *where, const char *name, const char *path,
		     int *out)
{
	const char *sep = *where ? ": " : "";
	int err = bs_listen_unix(path, 128, 0, out);

	switch (err) {
	case 0:
		return 0;
	case -ENAMETOOLONG:
		return bs_error(err, "%s%sexport %s: socket '%s': path too "
				"long for a UNIX socket", where, sep, name,
				path);
	case -EEXIST:
		return bs_error(err, "%s%sexport %s: socket '%s' exists and is "
				"not a socket", where, sep, name, path);
	case -EADDRINUSE:
		return bs_error(err, "%s%sexport %s: socket '%s' is in use by a "
				"running server", where, sep, name, path);
	default:
		return bs_error(err, "%s%sexport %s: listen on %s: %s", where,
				sep, name, path, strerror(-err));
	}
}

static struct nbd_listener *find_listener(struct nbd_server *srv,
					  const char *addr, bool is_unix)
{
	struct nbd_listener *l;

	for (l = srv->listeners; l; l = l->next)
		if (l->fd >= 0 && !strcmp(l->addr, addr) &&
		    (*l->path != '\0') == is_unix)
			return l;
	return NULL;
}

static int listener_add_export(struct nbd_listener *l, struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;
	struct bs_export **exps;
	unsigned i;

	for (i = 0; i < ne->nls; i++)
		if (ne->ls[i] == l)
			return 0;	/* named twice: once is enough */
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

static int listener_open(struct nbd_server *srv, struct bs_export *exp,
			 const char *where, const char *addr, bool is_unix)
{
	struct nbd_listener *l = find_listener(srv, addr, is_unix);
	int fd, err;

	if (l)
		return listener_add_export(l, exp);
	err = is_unix ? open_unix(where, exp->name, addr, &fd)
		      : open_tcp(where, exp->name, addr, &fd);
	if (err)
		return err;
	l = calloc(1, sizeof(*l));
	if (!l) {
		close(fd);
		return -ENOMEM;
	}
	l->srv = srv;
	l->fd = fd;
	snprintf(l->addr, sizeof(l->addr), "%s", addr);
	if (is_unix)
		snprintf(l->path, sizeof(l->path), "%s", addr);
	err = bs_loop_add_fd(srv->loop, fd, EPOLLIN, on_accept, l);
	if (!err)
		err = listener_add_export(l, exp);
	if (err) {
		bs_loop_del_fd(srv->loop, fd);
		close(fd);
		if (is_unix)
			unlink(addr);
		free(l->exps);
		free(l);
		return err;
	}
	l->next = srv->listeners;
	srv->listeners = l;
	bs_exports_log(srv->set, "nbd: listening on %s%s", is_unix ?
		       "unix:" : "", addr);
	return 0;
}

/* Stop accepting on @l (connections go on). */
static void listener_stop(struct nbd_listener *l)
{
	if (l->retry_timer > 0)
		bs_loop_cancel_timer(l->srv->loop, l->retry_timer);
	l->retry_timer = 0;
	if (l->fd < 0)
		return;
	bs_loop_del_fd(l->srv->loop, l->fd);
	close(l->fd);
	l->fd = -1;
	if (*l->path)
		unlink(l->path);
}

static void listener_free(struct nbd_listener *l)
{
	struct nbd_server *srv = l->srv;
	struct nbd_listener **pp;

	listener_stop(l);
	while (l->conns)
		nbd_conn_close(l->conns, "export closed");
	for (pp = &srv->listeners; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	free(l->exps);
	free(l);
}

/* Drop @exp from @l; the listener goes when no export is left on it. */
static void listener_remove_export(struct nbd_listener *l,
				   struct bs_export *exp)
{
	struct nbd_conn *c, *next;
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
	for (c = l->conns; c; c = next) {
		const char *e = nbd_conn_export(c);
		next = nbd_conn_next(c);
		if (e && !strcmp(e, exp->name))
			nbd_conn_close(c, "export closed");
	}
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

static int nbd_open(struct bs_export *exp, struct bs_opts *opts)
{
	const char *listen = bs_opts_get(opts, "listen");
	const char *sock = bs_opts_get(opts, "socket");
	struct nbd_server *srv;
	struct nbd_export *ne;
	char *words = NULL, *v[NBD_MAX_LISTEN_ARGS];
	int n = 0, i, err;

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
	if (!listen && !sock)
		listen = NBD_DEFAULT_LISTEN;
	if (listen) {
		words = strdup(listen);
		if (!words) {
			err = -ENOMEM;
			goto fail;
		}
		n = split_words(words, v, NBD_MAX_LISTEN_ARGS);
		if (n <= 0) {
			const char *w = bs_opts_where(opts, "listen");
			err = bs_error(-EINVAL, "%s%sexport %s: listen: give "
				       "1 to %d HOST:PORT addresses", w,
				       *w ? ": " : "", exp->name,
				       NBD_MAX_LISTEN_ARGS);
			goto fail;
		}
	}
	for (i = 0; i < n; i++) {
		err = listener_open(srv, exp, bs_opts_where(opts, "listen"),
				    v[i], false);
		if (err)
			goto fail;
	}
	if (sock && *sock) {
		err = listener_open(srv, exp, bs_opts_where(opts, "socket"),
				    sock, true);
		if (err)
			goto fail;
	} else if (sock) {
		const char *w = bs_opts_where(opts, "socket");
		err = bs_error(-EINVAL, "%s%sexport %s: socket: empty path", w,
			       *w ? ": " : "", exp->name);
		goto fail;
	}
	free(words);
	return 0;
fail:
	free(words);
	nbd_close(exp);
	return err;
}

static void nbd_shutdown(struct bs_export *exp)
{
	struct nbd_export *ne = exp->priv;
	unsigned i, j;

	if (!ne || ne->shutdown)
		return;
	ne->shutdown = true;
	for (i = 0; i < ne->nls; i++) {
		struct nbd_listener *l = ne->ls[i];
		bool all = true;
		struct nbd_conn *c, *next;

		for (j = 0; j < l->nexps; j++)
			if (nbd_export_active(l->exps[j]))
				all = false;
		if (all)
			listener_stop(l);
		for (c = l->conns; c; c = next) {
			const char *e = nbd_conn_export(c);
			next = nbd_conn_next(c);
			/* clients still negotiating go too once nothing is left */
			if ((e && !strcmp(e, exp->name)) || (!e && all))
				nbd_conn_shutdown(c);
		}
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
		struct nbd_conn *c;

		for (c = l->conns; c; c = nbd_conn_next(c)) {
			const char *e = nbd_conn_export(c);
			/* a negotiating client counts for the listener's first */
			if (e ? !strcmp(e, exp->name) : l->exps[0] == exp)
				n++;
		}
	}
	return n;
}

static void nbd_describe(struct bs_export *exp, bs_kv_fn kv, void *arg)
{
	struct nbd_export *ne = exp->priv;
	unsigned i;

	if (!ne)
		return;
	for (i = 0; i < ne->nls; i++)
		kv(arg, *ne->ls[i]->path ? "socket" : "listen", "%s",
		   ne->ls[i]->addr);
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
		"socket=PATH          a UNIX socket (a stale one is replaced)\n",
	.open = nbd_open,
	.shutdown = nbd_shutdown,
	.clients = nbd_clients,
	.close = nbd_close,
	.describe = nbd_describe,
};
BS_EXPORT_TYPE(nbd_export_type);
