/* SPDX-License-Identifier: MIT */
/*
 * NBD connection I/O: a non-blocking socket on the context's loop feeding
 * one session. Reads stop while the session is at its caps (bounded
 * memory per connection); replies go out with sendmsg in the order the
 * session queued them (completion order).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "export/nbd/server.h"

struct nbd_conn {
	struct nbd_listener *l;
	int fd;
	char peer[128];
	uint64_t id;
	struct nbd_session *s;
	uint8_t *in;
	size_t in_off, in_len;
	uint32_t events;
	bool rd_eof;		/* the client closed its sending side */
	bool eof_told;
	struct bs_work work;
	bool queued, dead;
	uint64_t start_ns;
	struct nbd_conn *next;
};

static bool pump(struct nbd_conn *c);
static void on_event(void *arg, uint32_t events);

static void conn_log(struct nbd_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void conn_log(struct nbd_conn *c, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bs_exports_log(c->l->srv->set, "nbd #%llu %s: %s",
		       (unsigned long long)c->id, c->peer, msg);
}

static void service(void *arg)
{
	struct nbd_conn *c = arg;

	c->queued = false;
	if (c->dead) {
		free(c);
		return;
	}
	pump(c);
}

static void ops_kick(void *arg)
{
	struct nbd_conn *c = arg;

	if (c->queued || c->dead)
		return;
	c->queued = true;
	c->work.fn = service;
	c->work.arg = c;
	bs_loop_defer(c->l->srv->loop, &c->work);
}

static struct bs_export *ops_find(void *arg, const char *name)
{
	struct nbd_conn *c = arg;
	unsigned i;

	for (i = 0; i < c->l->nexps; i++) {
		struct bs_export *e = c->l->exps[i];
		if (!nbd_export_active(e))
			continue;
		/* "" is the default export: the first one here */
		if (!*name || !strcmp(e->name, name))
			return e;
	}
	return NULL;
}

static struct bs_export *ops_next(void *arg, struct bs_export *prev)
{
	struct nbd_conn *c = arg;
	unsigned i = 0;

	if (prev) {
		while (i < c->l->nexps && c->l->exps[i] != prev)
			i++;
		i++;
	}
	for (; i < c->l->nexps; i++)
		if (nbd_export_active(c->l->exps[i]))
			return c->l->exps[i];
	return NULL;
}

static void ops_log(void *arg, const char *msg)
{
	conn_log(arg, "%s", msg);
}

static const struct nbd_session_ops conn_ops = {
	.kick = ops_kick,
	.find = ops_find,
	.next = ops_next,
	.log = ops_log,
};

int nbd_conn_start(struct nbd_listener *l, int fd, const char *peer)
{
	struct nbd_conn *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	c->in = malloc(NBD_CONN_INBUF);
	if (!c->in) {
		free(c);
		return -ENOMEM;
	}
	c->l = l;
	c->fd = fd;
	c->id = ++l->srv->next_id;
	c->start_ns = bs_now_ns();
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	err = nbd_session_new(l->srv->ctx, l->srv->set, &conn_ops, c, &c->s);
	if (!err) {
		c->events = EPOLLIN | EPOLLOUT;
		err = bs_loop_add_fd(l->srv->loop, fd, c->events, on_event, c);
		if (err)
			nbd_session_free(c->s);
	}
	if (err) {
		/* the greeting may already have queued c->work: free it there */
		free(c->in);
		c->in = NULL;
		c->dead = true;
		if (!c->queued)
			free(c);
		return err;
	}
	c->next = l->conns;
	l->conns = c;
	l->nconns++;
	return 0;
}

const char *nbd_conn_export(const struct nbd_conn *c)
{
	return nbd_session_export_name(c->s);
}

struct nbd_conn *nbd_conn_next(const struct nbd_conn *c)
{
	return c->next;
}

void nbd_conn_close(struct nbd_conn *c, const char *why)
{
	struct nbd_listener *l = c->l;
	const struct nbd_session_stats *st = nbd_session_stats(c->s);
	const char *exp = nbd_session_export_name(c->s);
	struct nbd_conn **pp;
	char rd[32], wr[32];

	conn_log(c, "close%s%s: %llu requests, %s read, %s written, %llu "
		 "errors, %.1f s: %s", exp ? " export " : " (no export chosen)",
		 exp ? exp : "", (unsigned long long)st->requests,
		 bs_fmt_size(st->bytes_read, rd, sizeof(rd)),
		 bs_fmt_size(st->bytes_written, wr, sizeof(wr)),
		 (unsigned long long)st->errors,
		 (double)(bs_now_ns() - c->start_ns) / 1e9,
		 why ? why : nbd_session_end_reason(c->s));
	for (pp = &l->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			l->nconns--;
			break;
		}
	}
	bs_loop_del_fd(l->srv->loop, c->fd);
	if (!why) {
		/*
		 * A clean end (DISC, or the server stopping) may leave requests
		 * the session did not read: closing over unread input would
		 * send RST, which can discard replies still on their way. Send
		 * FIN after the replies, drop what the client already sent.
		 */
		char junk[4096];
		unsigned i;

		shutdown(c->fd, SHUT_WR);
		for (i = 0; i < 256; i++)
			if (recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT) <= 0)
				break;
	}
	close(c->fd);
	nbd_session_free(c->s);
	free(c->in);
	c->dead = true;
	if (!c->queued)
		free(c);
}

void nbd_conn_shutdown(struct nbd_conn *c)
{
	nbd_session_shutdown(c->s);
}

static void feed(struct nbd_conn *c)
{
	size_t n;

	if (c->in_off < c->in_len) {
		n = nbd_session_feed(c->s, c->in + c->in_off,
				     c->in_len - c->in_off);
		c->in_off += n;
	} else {
		/* a request header parked on the caps may go on now */
		nbd_session_feed(c->s, NULL, 0);
	}
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
}

/* Read while the session takes input; false if the connection closed. */
static bool read_input(struct nbd_conn *c)
{
	while (!c->rd_eof && nbd_session_wants_input(c->s)) {
		ssize_t n;

		if (c->in_off == c->in_len) {
			uint8_t *dst;
			size_t room = nbd_session_in_direct(c->s, &dst);

			/* a big payload: straight into the request's buffer */
			if (room >= NBD_CONN_DIRECT_MIN) {
				c->in_off = c->in_len = 0;
				n = recv(c->fd, dst, room, MSG_DONTWAIT);
				if (n > 0) {
					nbd_session_in_direct_done(c->s,
								   (size_t)n);
					continue;
				}
				goto got;
			}
		}
		if (c->in_off && c->in_len == NBD_CONN_INBUF) {
			memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
			c->in_len -= c->in_off;
			c->in_off = 0;
		}
		if (c->in_len == NBD_CONN_INBUF)
			break;
		n = recv(c->fd, c->in + c->in_len, NBD_CONN_INBUF - c->in_len,
			 MSG_DONTWAIT);
got:
		if (n > 0) {
			c->in_len += (size_t)n;
			feed(c);
			continue;
		}
		if (n == 0) {
			c->rd_eof = true;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		{
			char why[96];
			snprintf(why, sizeof(why), "read: %s", strerror(errno));
			nbd_session_eof(c->s);
			nbd_conn_close(c, why);
			return false;
		}
	}
	return true;
}

/* Send queued replies; false if the connection closed. */
static bool write_output(struct nbd_conn *c)
{
	while (nbd_session_has_output(c->s)) {
		struct iovec iov[64];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t n;

		mh.msg_iovlen = (size_t)nbd_session_out_iov(c->s, iov, 64);
		n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n >= 0) {
			nbd_session_out_advance(c->s, (size_t)n);
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		{
			char why[96];
			snprintf(why, sizeof(why), "write: %s%s", strerror(errno),
				 nbd_session_inflight(c->s) ?
				 " (requests in flight finish unanswered)" : "");
			nbd_conn_close(c, why);
			return false;
		}
	}
	return true;
}

/* Move bytes both ways; false when the connection was closed (c freed). */
static bool pump(struct nbd_conn *c)
{
	uint32_t want = 0;

	feed(c);
	if (!read_input(c))
		return false;
	if (c->rd_eof && !c->eof_told && c->in_off == c->in_len) {
		c->eof_told = true;
		nbd_session_eof(c->s);
	}
	if (!write_output(c))
		return false;
	if (nbd_session_finished(c->s) && !nbd_session_has_output(c->s)) {
		nbd_conn_close(c, NULL);
		return false;
	}
	if (!c->rd_eof && nbd_session_wants_input(c->s))
		want |= EPOLLIN;
	if (nbd_session_has_output(c->s))
		want |= EPOLLOUT;
	if (want != c->events) {
		c->events = want;
		bs_loop_mod_fd(c->l->srv->loop, c->fd, want);
	}
	return true;
}

static void on_event(void *arg, uint32_t events)
{
	struct nbd_conn *c = arg;

	if (!(events & (EPOLLERR | EPOLLHUP))) {
		pump(c);
		return;
	}
	/*
	 * The client is gone (hung up or reset). What it sent before going
	 * is still readable: take it first, so that a WRITE followed by DISC
	 * and close() still reaches the device.
	 */
	if ((events & EPOLLIN) && !pump(c))
		return;
	if (!c->eof_told) {
		c->eof_told = true;
		nbd_session_eof(c->s);
	}
	nbd_conn_close(c, nbd_session_inflight(c->s) ?
		       "connection reset (requests in flight finish "
		       "unanswered)" : NULL);
}
