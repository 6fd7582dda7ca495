/* SPDX-License-Identifier: MIT */
/*
 * Listeners: bind a TCP address or a UNIX socket, accept connections in
 * bounded bursts, pause accepting for a moment when descriptors or memory
 * run out (instead of spinning on a level-triggered EMFILE), and enforce
 * the connection limits before a protocol sees a connection. See
 * include/blkstack/net.h for the model.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/bdev.h>

#include "export/net/internal.h"

/* Out of descriptors or memory: stop accepting for a moment, not spin. */
#define ACCEPT_RETRY_MS 100
/* Refusals are logged at most this often per listener. */
#define REFUSE_LOG_NS 1000000000ull

void bs_net_limits_default(struct bs_net_limits *l)
{
	memset(l, 0, sizeof(*l));
	l->max_conns = BS_NET_MAX_CONNS;
	l->max_per_peer = BS_NET_MAX_PER_PEER;
	l->handshake_ms = BS_NET_HANDSHAKE_MS;
	l->idle_ms = 0;
	l->out_max = BS_NET_OUT_MAX;
	l->socket_mode = BS_NET_SOCKET_MODE;
	l->sndbuf = BS_NET_SNDBUF_DEFAULT;
}

void bs_net_log(struct bs_net_listener *l, const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	if (!l->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	l->log(l->log_arg, msg);
}

static const char *proto_name(const struct bs_net_listener *l)
{
	return l->name;
}

/* ---- accepting ----------------------------------------------------------- */

static void accept_resume(void *arg)
{
	struct bs_net_listener *l = arg;

	l->retry_timer = 0;
	if (l->fd >= 0)
		bs_loop_mod_fd(l->loop, l->fd, EPOLLIN);
}

static void accept_pause(struct bs_net_listener *l, int err)
{
	if (!l->pause_logged)
		bs_net_log(l, "%s %s: accept: %s: not accepting new clients "
			   "until descriptors free up", proto_name(l), l->addr,
			   strerror(err));
	l->pause_logged = true;
	bs_loop_mod_fd(l->loop, l->fd, 0);
	l->retry_timer = bs_loop_add_timer(l->loop, ACCEPT_RETRY_MS,
					   accept_resume, l);
	if (l->retry_timer < 0) {
		l->retry_timer = 0;
		bs_loop_mod_fd(l->loop, l->fd, EPOLLIN);
	}
}

/* Peer name for logs and the key the per-peer limit counts. */
static void peer_of(struct bs_net_listener *l, int fd,
		    const struct sockaddr_storage *ss, socklen_t len,
		    char *peer, size_t psize, char *key, size_t ksize)
{
	if (l->is_unix) {
		struct ucred cr;
		socklen_t cl = sizeof(cr);

		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl)) {
			snprintf(peer, psize, "unix:%.100s (uid %u pid %d)",
				 l->addr, (unsigned)cr.uid, (int)cr.pid);
			snprintf(key, ksize, "uid %u", (unsigned)cr.uid);
		} else {
			snprintf(peer, psize, "unix:%.100s", l->addr);
			snprintf(key, ksize, "unix");
		}
		return;
	}
	bs_net_format_addr((const struct sockaddr *)ss, len, peer, psize);
	/* the address without the port */
	bs_net_format_addr((const struct sockaddr *)ss, len, key, ksize);
	{
		char *colon = strrchr(key, ':');
		if (colon)
			*colon = '\0';
	}
}

static unsigned peer_count(const struct bs_net_listener *l, const char *key)
{
	const struct bs_net_conn *c;
	unsigned n = 0;

	for (c = l->conns; c; c = c->next)
		if (!strcmp(c->peer_key, key))
			n++;
	return n;
}

static void refuse(struct bs_net_listener *l, const char *peer,
		   const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void refuse(struct bs_net_listener *l, const char *peer,
		   const char *fmt, ...)
{
	uint64_t now = bs_now_ns();
	char why[200];
	va_list ap;

	if (l->refuse_logged_ns && now - l->refuse_logged_ns < REFUSE_LOG_NS) {
		l->refuse_quiet++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (l->refuse_quiet)
		bs_net_log(l, "%s %s: refused %s: %s (and %u more refused "
			   "without a log line)", proto_name(l), l->addr, peer,
			   why, l->refuse_quiet);
	else
		bs_net_log(l, "%s %s: refused %s: %s", proto_name(l), l->addr,
			   peer, why);
	l->refuse_logged_ns = now;
	l->refuse_quiet = 0;
}

static void on_accept(void *arg, uint32_t events)
{
	struct bs_net_listener *l = arg;
	unsigned burst;

	(void)events;
	/* bounded per wakeup so one busy listener cannot starve the loop */
	for (burst = 0; burst < 64 && l->fd >= 0; burst++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		char peer[160], key[64];
		int fd, err, one = 1;
		unsigned per_peer, nconns, npeer;

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
				bs_net_log(l, "%s %s: accept: %s", proto_name(l),
					   l->addr, strerror(err));
			return;
		}
		if (l->pause_logged) {
			bs_net_log(l, "%s %s: accepting again", proto_name(l),
				   l->addr);
			l->pause_logged = false;
		}
		peer_of(l, fd, &ss, len, peer, sizeof(peer), key, sizeof(key));
		if (!l->proto) {
			/* raw: the owner keeps its own accounting */
			l->accept(l->owner, fd, peer);
			continue;
		}
		pthread_mutex_lock(&l->lock);
		nconns = l->nconns;
		npeer = peer_count(l, key);
		pthread_mutex_unlock(&l->lock);
		if (nconns >= l->limits.max_conns) {
			refuse(l, peer, "%u connections already open (limit "
			       "max_connections = %u)", nconns,
			       l->limits.max_conns);
			close(fd);
			continue;
		}
		per_peer = l->limits.max_per_peer ? l->limits.max_per_peer :
			   l->limits.max_conns;
		if (npeer >= per_peer) {
			refuse(l, peer, "%u connections from %s already open "
			       "(limit max_connections_per_peer = %u)",
			       per_peer, key, per_peer);
			close(fd);
			continue;
		}
		if (!l->is_unix) {
			int sb = (int)l->limits.sndbuf;

			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
			/*
			 * Best effort, as TCP_NODELAY: a refusal only costs
			 * speed. FORCE (CAP_NET_ADMIN) goes past the
			 * net.core.wmem_max cap (212992 on a stock kernel),
			 * so that the size asked for is the size served.
			 */
			if (sb && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE,
					     &sb, sizeof(sb)))
				setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb,
					   sizeof(sb));
		}
		err = bs_net_conn_start(l, fd, peer, key);
		if (err) {
			bs_net_log(l, "%s %s: dropped %s: %s", proto_name(l),
				   l->addr, peer, strerror(-err));
			close(fd);
		}
	}
}

/* ---- listening ----------------------------------------------------------- */

static int open_tcp(const char *addr, int backlog, int *out)
{
	struct bs_net_addr a;
	char why[160];
	int fd, one = 1, err;

	if (bs_net_parse_addr(addr, &a, why, sizeof(why)))
		return bs_error(-EINVAL, "listen '%s': %s", addr, why);
	fd = socket(a.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		goto fail;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (a.ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a.ss, a.len) || listen(fd, backlog))
		goto fail;
	*out = fd;
	return 0;
fail:
	err = -errno;
	if (fd >= 0)
		close(fd);
	return bs_error(err, "listen on %s: %s", addr, strerror(-err));
}

static int open_unix(const char *path, int backlog, mode_t mode, int *out)
{
	int err = bs_net_listen_unix(path, backlog, mode, out);

	switch (err) {
	case 0:
		return 0;
	case -ENAMETOOLONG:
		return bs_error(err, "socket '%s': path too long for a UNIX "
				"socket", path);
	case -EEXIST:
		return bs_error(err, "socket '%s' exists and is not a socket",
				path);
	case -EADDRINUSE:
		return bs_error(err, "socket '%s' is in use by a running "
				"server", path);
	default:
		return bs_error(err, "listen on %s: %s", path, strerror(-err));
	}
}

int bs_net_listen(struct bs_loop *loop, const struct bs_net_listen_cfg *cfg,
		  struct bs_net_listener **out)
{
	struct bs_net_listener *l;
	int backlog = cfg->backlog > 0 ? cfg->backlog : 128;
	int fd, err;

	if (!cfg->proto == !cfg->accept || !cfg->addr ||
	    strlen(cfg->addr) >= sizeof(l->addr) ||
	    (cfg->proto && !cfg->limits.max_conns))
		return -EINVAL;
	err = cfg->is_unix ? open_unix(cfg->addr, backlog,
				       cfg->limits.socket_mode, &fd)
			   : open_tcp(cfg->addr, backlog, &fd);
	if (err)
		return err;
	l = calloc(1, sizeof(*l));
	if (!l) {
		err = -ENOMEM;
		goto fail;
	}
	l->loop = loop;
	l->ctx = cfg->ctx;
	pthread_mutex_init(&l->lock, NULL);
	l->fd = fd;
	l->is_unix = cfg->is_unix;
	snprintf(l->addr, sizeof(l->addr), "%s", cfg->addr);
	snprintf(l->name, sizeof(l->name), "%s", cfg->proto ? cfg->proto->name :
		 cfg->name ? cfg->name : "net");
	l->limits = cfg->limits;
	l->proto = cfg->proto;
	l->accept = cfg->accept;
	l->owner = cfg->owner;
	l->log = cfg->log;
	l->log_arg = cfg->log_arg;
	err = bs_loop_add_fd(loop, fd, EPOLLIN, on_accept, l);
	if (err)
		goto fail;
	*out = l;
	return 0;
fail:
	free(l);
	close(fd);
	if (cfg->is_unix)
		unlink(cfg->addr);
	return err;
}

void bs_net_listener_stop(struct bs_net_listener *l)
{
	if (l->retry_timer > 0)
		bs_loop_cancel_timer(l->loop, l->retry_timer);
	l->retry_timer = 0;
	if (l->fd < 0)
		return;
	bs_loop_del_fd(l->loop, l->fd);
	close(l->fd);
	l->fd = -1;
	if (l->is_unix)
		unlink(l->addr);
}

void bs_net_listener_drain(struct bs_net_listener *l)
{
	struct bs_net_conn *c;

	bs_net_listener_stop(l);
	pthread_mutex_lock(&l->lock);
	for (c = l->conns; c; c = c->next)
		bs_net_conn_send_shutdown(c);
	pthread_mutex_unlock(&l->lock);
}

void bs_net_listener_lock(struct bs_net_listener *l)
{
	pthread_mutex_lock(&l->lock);
}

void bs_net_listener_unlock(struct bs_net_listener *l)
{
	pthread_mutex_unlock(&l->lock);
}

void bs_net_listener_close_conns(struct bs_net_listener *l,
				 bool (*match)(struct bs_net_conn *c,
					       void *arg),
				 void *arg, const char *why)
{
	unsigned rounds;

	/* send, then wait for them to go (each on its own loop; ours runs
	 * meanwhile for those living here) */
	for (rounds = 0; rounds < 60000; rounds++) {
		struct bs_net_conn *c;
		bool left = false;

		pthread_mutex_lock(&l->lock);
		for (c = l->conns; c; c = c->next) {
			if (match && !match(c, arg))
				continue;
			bs_net_conn_send_close(c, why);
			left = true;
		}
		/* gone from the list is not done with l yet */
		if (l->nclosing)
			left = true;
		pthread_mutex_unlock(&l->lock);
		if (!left)
			return;
		if (bs_loop_is_current(l->loop))
			bs_loop_run_once(l->loop, 1);
		else
			usleep(1000);
	}
}

void bs_net_listener_free(struct bs_net_listener *l)
{
	if (!l)
		return;
	bs_net_listener_stop(l);
	bs_net_listener_close_conns(l, NULL, NULL, "listener closed");
	pthread_mutex_destroy(&l->lock);
	free(l);
}

const char *bs_net_listener_addr(const struct bs_net_listener *l)
{
	return l->addr;
}

bool bs_net_listener_is_unix(const struct bs_net_listener *l)
{
	return l->is_unix;
}

bool bs_net_listener_accepting(const struct bs_net_listener *l)
{
	return l->fd >= 0;
}

const struct bs_net_limits *bs_net_listener_limits(
	const struct bs_net_listener *l)
{
	return &l->limits;
}

unsigned bs_net_listener_conns(const struct bs_net_listener *l)
{
	unsigned n;

	pthread_mutex_lock((pthread_mutex_t *)&l->lock);
	n = l->nconns;
	pthread_mutex_unlock((pthread_mutex_t *)&l->lock);
	return n;
}

struct bs_net_conn *bs_net_conn_next(const struct bs_net_listener *l,
				     const struct bs_net_conn *prev)
{
	return prev ? prev->next : l->conns;
}
