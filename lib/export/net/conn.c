/* SPDX-License-Identifier: MIT */
/*
 * Connections: a non-blocking socket on the loop feeding one protocol
 * session (struct bs_net_proto). Input is read only while the session
 * takes it and its unsent output is under the listener's out_max, so
 * memory per connection stays bounded whatever the peer does; output goes
 * out with sendmsg in the order the session queued it. One timer per
 * connection carries its deadline: the end of the handshake allowance,
 * then (if set) the idle allowance, re-armed lazily instead of on every
 * byte.
 */
#include <errno.h>
#include <liburing.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <blkstack/bufpool.h>
#include <blkstack/threads.h>

#include "export/net/internal.h"

static uint64_t next_id;

static bool pump(struct bs_net_conn *c);
static void on_event(void *arg, uint32_t events);
static void rx_done(struct bs_ring_op *op, int res, uint32_t flags);
static void tx_done(struct bs_ring_op *op, int res, uint32_t flags);

/* A closed connection goes when nothing uses it any more: no pump() on
 * the stack, no deferred service queued, no ring operation in flight. */
static void maybe_free(struct bs_net_conn *c)
{
	if (c->dead && !c->queued && !c->in_pump && !c->rx_busy &&
	    !c->tx_busy)
		free(c);
}
static void arm_timer(struct bs_net_conn *c);

void bs_net_conn_log(struct bs_net_conn *c, const char *fmt, ...)
{
	char msg[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bs_net_log(c->l, "%s #%llu %s: %s", c->l->proto->name,
		   (unsigned long long)c->id, c->peer, msg);
}

void *bs_net_conn_session(const struct bs_net_conn *c)
{
	return c->sess;
}

void *bs_net_conn_owner(const struct bs_net_conn *c)
{
	return c->l->owner;
}

struct bs_net_listener *bs_net_conn_listener(const struct bs_net_conn *c)
{
	return c->l;
}

const char *bs_net_conn_peer(const struct bs_net_conn *c)
{
	return c->peer;
}

uint64_t bs_net_conn_id(const struct bs_net_conn *c)
{
	return c->id;
}

bool bs_net_conn_in_handshake(const struct bs_net_conn *c)
{
	return c->handshake;
}

void bs_net_conn_set_label(struct bs_net_conn *c, const char *label)
{
	pthread_mutex_lock(&c->l->lock);
	snprintf(c->label, sizeof(c->label), "%s", label ? label : "");
	pthread_mutex_unlock(&c->l->lock);
}

const char *bs_net_conn_label(const struct bs_net_conn *c)
{
	return c->label;
}

/* ---- deferred service ---------------------------------------------------- */

static void service(void *arg)
{
	struct bs_net_conn *c = arg;

	c->queued = false;
	if (c->dead) {
		maybe_free(c);
		return;
	}
	pump(c);
}

void bs_net_conn_kick(struct bs_net_conn *c)
{
	if (c->queued || c->dead)
		return;
	c->queued = true;
	c->work.fn = service;
	c->work.arg = c;
	bs_loop_defer(c->loop, &c->work);
}

/* ---- timeouts ------------------------------------------------------------ */

static void on_timer(void *arg)
{
	struct bs_net_conn *c = arg;
	const struct bs_net_limits *lim = &c->l->limits;
	uint64_t now = bs_now_ns();

	c->timer = 0;
	if (c->handshake && lim->handshake_ms &&
	    now - c->start_ns >= (uint64_t)lim->handshake_ms * 1000000) {
		char why[96];

		snprintf(why, sizeof(why), "handshake not finished in %.1f s "
			 "(handshake_timeout)", lim->handshake_ms / 1000.0);
		bs_net_conn_close(c, why);
		return;
	}
	if (!c->handshake && lim->idle_ms &&
	    now - c->last_ns >= (uint64_t)lim->idle_ms * 1000000) {
		if (c->l->proto->busy && c->l->proto->busy(c->sess)) {
			/* requests in flight are activity: look again later */
			c->last_ns = now;
		} else {
			char why[96];

			snprintf(why, sizeof(why), "idle for %.1f s "
				 "(idle_timeout)", lim->idle_ms / 1000.0);
			bs_net_conn_close(c, why);
			return;
		}
	}
	arm_timer(c);
}

/* Arm the timer for the current deadline (none armed yet). */
static void arm_timer(struct bs_net_conn *c)
{
	const struct bs_net_limits *lim = &c->l->limits;
	uint64_t now = bs_now_ns(), deadline, ms;
	int id;

	if (c->timer > 0 || c->dead)
		return;
	if (c->handshake && lim->handshake_ms)
		deadline = c->start_ns + (uint64_t)lim->handshake_ms * 1000000;
	else if (!c->handshake && lim->idle_ms)
		deadline = c->last_ns + (uint64_t)lim->idle_ms * 1000000;
	else
		return;
	ms = deadline > now ? (deadline - now + 999999) / 1000000 : 1;
	id = bs_loop_add_timer(c->loop, ms, on_timer, c);
	if (id > 0)
		c->timer = id;
}

static void disarm_timer(struct bs_net_conn *c)
{
	if (c->timer > 0)
		bs_loop_cancel_timer(c->loop, c->timer);
	c->timer = 0;
}

void bs_net_conn_handshake_done(struct bs_net_conn *c)
{
	if (!c->handshake)
		return;
	c->handshake = false;
	c->last_ns = bs_now_ns();
	disarm_timer(c);
	arm_timer(c);
}

/* ---- life ---------------------------------------------------------------- */

/* On the connection's loop: the protocol starts, the socket is watched. */
static void start_here(void *arg)
{
	struct bs_net_conn *c = arg;
	struct bs_net_listener *l = c->l;
	int err;

	err = l->proto->start(l->owner, c, &c->sess);
	if (!err && bs_loop_has_ring(c->loop)) {
		/* no watch: receives and sends go through the loop's ring */
		c->ring = true;
		c->rd_empty = true;	/* the first receive is the ring's */
		c->rx_op.fn = rx_done;
		c->tx_op.fn = tx_done;
		bs_net_conn_kick(c);
	} else if (!err) {
		c->events = EPOLLIN | EPOLLOUT;
		err = bs_loop_add_fd(c->loop, c->fd, c->events, on_event, c);
		if (err) {
			l->proto->close(c->sess, "out of memory");
			c->sess = NULL;
		}
	}
	if (err) {
		bs_net_log(l, "%s: dropped %s: %s", l->addr, c->peer,
			   strerror(-err));
		pthread_mutex_lock(&l->lock);
		unlink_conn(l, c);
		pthread_mutex_unlock(&l->lock);
		close(c->fd);
		free(c->in);
		c->in = NULL;
		c->dead = true;
		/* the greeting may already have queued c->work: free it there */
		if (!c->queued)
			free(c);
		return;
	}
	/* this thread now serves payloads: its buffer pool trims on its loop */
	bs_bufpool_bind(c->loop);
	arm_timer(c);
}

int bs_net_conn_start(struct bs_net_listener *l, int fd, const char *peer,
		      const char *key)
{
	struct bs_net_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->in = malloc(l->proto->inbuf ? l->proto->inbuf : 4096);
	if (!c->in) {
		free(c);
		return -ENOMEM;
	}
	c->l = l;
	c->fd = fd;
	c->id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED);
	c->start_ns = c->last_ns = bs_now_ns();
	c->handshake = true;
	c->loop = l->ctx ? bs_ctx_io_loop(l->ctx) : l->loop;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	snprintf(c->peer_key, sizeof(c->peer_key), "%s", key);
	/* counted now, so that the limits hold while it starts over there */
	pthread_mutex_lock(&l->lock);
	c->next = l->conns;
	l->conns = c;
	l->nconns++;
	pthread_mutex_unlock(&l->lock);
	c->work.fn = start_here;
	c->work.arg = c;
	c->queued = false;
	bs_loop_send(c->loop, &c->work);
	return 0;
}

static void shut_here(void *arg)
{
	struct bs_net_conn *c = arg;

	pthread_mutex_lock(&c->l->lock);
	c->shut_sent = false;
	pthread_mutex_unlock(&c->l->lock);
	if (c->sess && c->l->proto->shutdown)
		c->l->proto->shutdown(c->sess);
}

static void close_here(void *arg)
{
	struct bs_net_conn *c = arg;

	pthread_mutex_lock(&c->l->lock);
	c->close_sent = false;
	pthread_mutex_unlock(&c->l->lock);
	bs_net_conn_close(c, c->close_why);
}

/* Under l->lock, from the listener's loop: ask @c's loop to act. */
void bs_net_conn_send_shutdown(struct bs_net_conn *c)
{
	if (c->shut_sent)
		return;
	c->shut_sent = true;
	c->shut_work.fn = shut_here;
	c->shut_work.arg = c;
	bs_loop_send(c->loop, &c->shut_work);
}

void bs_net_conn_send_close(struct bs_net_conn *c, const char *why)
{
	if (c->close_sent)
		return;
	c->close_sent = true;
	c->close_why = why;
	c->close_work.fn = close_here;
	c->close_work.arg = c;
	bs_loop_send(c->loop, &c->close_work);
}

void bs_net_conn_shutdown(struct bs_net_conn *c)
{
	if (c->sess && c->l->proto->shutdown)
		c->l->proto->shutdown(c->sess);
}

void unlink_conn(struct bs_net_listener *l, struct bs_net_conn *c)
{
	struct bs_net_conn **pp;

	for (pp = &l->conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			l->nconns--;
			break;
		}
	}
}

void bs_net_conn_close(struct bs_net_conn *c, const char *why)
{
	struct bs_net_listener *l = c->l;

	if (c->dead)	/* closed from inside the session already */
		return;
	pthread_mutex_lock(&l->lock);
	unlink_conn(l, c);
	l->nclosing++;
	pthread_mutex_unlock(&l->lock);
	/* nothing sends to it any more: take back what was sent */
	bs_loop_cancel_work(c->loop, &c->shut_work);
	bs_loop_cancel_work(c->loop, &c->close_work);
	disarm_timer(c);
	if (c->ring) {
		/*
		 * The kernel lets go of the input buffer and the session's
		 * output before they are freed below; the completions still
		 * come (rx_done/tx_done), c is freed after them.
		 */
		if (c->rx_busy)
			bs_loop_ring_cancel(c->loop, &c->rx_op);
		if (c->tx_busy)
			bs_loop_ring_cancel(c->loop, &c->tx_op);
	} else {
		bs_loop_del_fd(c->loop, c->fd);
	}
	/* the last connection of this thread gone: its pool empties */
	bs_bufpool_unbind(c->loop);
	if (!why) {
		/*
		 * A clean end (the protocol said goodbye, or the server is
		 * stopping) may leave input the session did not read: closing
		 * over unread input would send RST, which can discard replies
		 * still on their way. Send FIN after the replies, drop what
		 * the peer already sent.
		 */
		char junk[4096];
		unsigned i;

		shutdown(c->fd, SHUT_WR);
		for (i = 0; i < 256; i++)
			if (recv(c->fd, junk, sizeof(junk), MSG_DONTWAIT) <= 0)
				break;
	}
	close(c->fd);
	c->dead = true;
	if (c->sess)
		l->proto->close(c->sess, why);
	c->sess = NULL;
	/* the last touch of l: bs_net_listener_free() may free it now */
	pthread_mutex_lock(&l->lock);
	l->nclosing--;
	pthread_mutex_unlock(&l->lock);
	free(c->in);
	c->in = NULL;
	maybe_free(c);
}

/* ---- moving bytes -------------------------------------------------------- */

static bool out_full(struct bs_net_conn *c)
{
	const struct bs_net_proto *p = c->l->proto;

	return p->out_bytes && p->out_bytes(c->sess) > c->l->limits.out_max;
}

static bool wants_input(struct bs_net_conn *c)
{
	return !c->rd_eof && c->l->proto->wants_input(c->sess) && !out_full(c);
}

/* Give the session what the input buffer holds; false if the session
 * closed the connection meanwhile (c is dead, freed by pump()). */
static bool feed(struct bs_net_conn *c)
{
	const struct bs_net_proto *p = c->l->proto;

	if (c->in_off < c->in_len)
		c->in_off += p->input(c->sess, c->in + c->in_off,
				      c->in_len - c->in_off);
	else
		/* input parked on the session's caps may go on now */
		p->input(c->sess, NULL, 0);
	if (c->dead)
		return false;
	if (c->in_off == c->in_len)
		c->in_off = c->in_len = 0;
	return true;
}

static void activity(struct bs_net_conn *c)
{
	if (c->l->limits.idle_ms)
		c->last_ns = bs_now_ns();
}

/*
 * The peer is gone (reset, hung up, a read error; what it sent before is
 * in): the session hears of the end once, then the connection closes
 * with @why, or for a hang-up (NULL) quietly unless requests were in
 * flight. Frees c unless a pump() below holds it.
 */
static void peer_gone(struct bs_net_conn *c, const char *why)
{
	const struct bs_net_proto *p = c->l->proto;

	c->in_pump++;
	if (!c->eof_told) {
		c->eof_told = true;
		p->eof(c->sess);
	}
	if (!c->dead)
		bs_net_conn_close(c, why ? why : p->busy && p->busy(c->sess) ?
				  "connection reset (requests in flight "
				  "finish unanswered)" : NULL);
	c->in_pump--;
	maybe_free(c);
}

/* A send failed with @err: the connection closes saying so. */
static void write_failed(struct bs_net_conn *c, int err)
{
	const struct bs_net_proto *p = c->l->proto;
	char why[96];

	snprintf(why, sizeof(why), "write: %s%s", strerror(err),
		 p->busy && p->busy(c->sess) ?
		 " (requests in flight finish unanswered)" : "");
	bs_net_conn_close(c, why);
}

/* Room of the payload the session takes zero-copy next (into *@dst),
 * asked only when the input buffer is empty; 0: none now. */
static size_t direct_room(struct bs_net_conn *c, uint8_t **dst)
{
	const struct bs_net_proto *p = c->l->proto;

	if (c->in_off != c->in_len || !p->in_direct || !p->direct_min)
		return 0;
	return p->in_direct(c->sess, dst);
}

/*
 * How many bytes to read into the input buffer next (compacted first
 * when full of consumed bytes); 0 while it is full. @room: the zero-copy
 * room found (smaller than direct_min: its tail comes through here).
 */
static size_t in_want(struct bs_net_conn *c, size_t room)
{
	const struct bs_net_proto *p = c->l->proto;
	size_t cap = p->inbuf ? p->inbuf : 4096, want;

	if (c->in_off && c->in_len == cap) {
		memmove(c->in, c->in + c->in_off, c->in_len - c->in_off);
		c->in_len -= c->in_off;
		c->in_off = 0;
	}
	if (c->in_len == cap)
		return 0;
	want = cap - c->in_len;
	/*
	 * After a zero-copy payload: its short tail (if any) and one header
	 * only, so that a big payload behind that header goes zero-copy too
	 * instead of being copied out of c->in.
	 */
	if (c->after_direct && p->direct_hdr && want > room + p->direct_hdr)
		want = room + p->direct_hdr;
	return want;
}

/* Read while the session takes input; false if the connection closed. */
static bool read_input(struct bs_net_conn *c)
{
	const struct bs_net_proto *p = c->l->proto;
	size_t cap = p->inbuf ? p->inbuf : 4096;

	while (wants_input(c) && !c->rd_empty) {
		ssize_t n;
		size_t want;
		uint8_t *dst;
		size_t room = direct_room(c, &dst);

		/*
		 * A big payload: straight into the request's buffer,
		 * and the next header (direct_hdr) in the same call
		 * into the input buffer: no second recv that would
		 * mostly find nothing (a request at queue depth 1).
		 */
		if (room && room >= p->direct_min) {
			struct iovec iov[2] = {
				{ .iov_base = dst, .iov_len = room },
				{ .iov_base = c->in,
				  .iov_len = p->direct_hdr < cap ?
					     p->direct_hdr : cap },
			};
			struct msghdr mh = {
				.msg_iov = iov,
				.msg_iovlen = p->direct_hdr ? 2 : 1,
			};
			size_t full = room + (p->direct_hdr ?
					      iov[1].iov_len : 0);

			c->in_off = c->in_len = 0;
			n = recvmsg(c->fd, &mh, MSG_DONTWAIT);
			if (n > 0) {
				size_t d = (size_t)n < room ?
					   (size_t)n : room;

				activity(c);
				c->after_direct = true;
				c->rd_empty = (size_t)n < full;
				c->in_len = (size_t)n - d;
				p->in_direct_done(c->sess, d);
				if (c->dead ||
				    (c->in_len && !feed(c)))
					return false;
				continue;
			}
			goto got;
		}
		want = in_want(c, room);
		if (!want)
			break;
		n = recv(c->fd, c->in + c->in_len, want, MSG_DONTWAIT);
got:
		if (n > 0) {
			activity(c);
			/* the header is in (or this was a full-size read) */
			if ((size_t)n == want)
				c->after_direct = false;
			else
				c->rd_empty = true;
			c->in_len += (size_t)n;
			if (!feed(c))
				return false;
			continue;
		}
		if (n == 0) {
			c->rd_eof = true;
			break;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			c->rd_empty = true;
			break;
		}
		{
			char why[96];

			snprintf(why, sizeof(why), "read: %s", strerror(errno));
			peer_gone(c, why);
			return false;
		}
	}
	return true;
}

/* Send queued output; false if the connection closed. */
static bool write_output(struct bs_net_conn *c)
{
	const struct bs_net_proto *p = c->l->proto;

	for (;;) {
		struct iovec iov[64];
		struct msghdr mh = { .msg_iov = iov };
		ssize_t n;
		int cnt = p->output(c->sess, iov, 64);

		if (cnt <= 0)
			break;
		mh.msg_iovlen = (size_t)cnt;
		n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n >= 0) {
			activity(c);
			p->sent(c->sess, (size_t)n);
			if (c->dead)
				return false;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		write_failed(c, errno);
		return false;
	}
	return true;
}

static bool has_output(struct bs_net_conn *c)
{
	struct iovec iov;

	return c->l->proto->output(c->sess, &iov, 1) > 0;
}

/* ---- ring mode: receives and sends queued with the loop's wait ----------- */

/* Queue a send of what the session has for the peer (one at a time). */
static bool ring_write(struct bs_net_conn *c)
{
	const struct bs_net_proto *p = c->l->proto;
	struct io_uring_sqe *sqe;
	int cnt;

	if (c->tx_busy)
		return true;
	cnt = p->output(c->sess, c->tx_iov, 64);
	if (cnt <= 0)
		return true;
	sqe = bs_loop_sqe(c->loop);
	if (!sqe)
		return write_output(c);
	c->tx_mh = (struct msghdr){ .msg_iov = c->tx_iov,
				    .msg_iovlen = (size_t)cnt };
	io_uring_prep_sendmsg(sqe, c->fd, &c->tx_mh, MSG_NOSIGNAL);
	io_uring_sqe_set_data(sqe, &c->tx_op);
	c->tx_busy = true;
	return true;
}

static void tx_done(struct bs_ring_op *op, int res, uint32_t flags)
{
	struct bs_net_conn *c = BS_CONTAINER_OF(op, struct bs_net_conn, tx_op);
	const struct bs_net_proto *p;

	(void)flags;
	c->tx_busy = false;
	if (c->dead) {		/* its listener may be gone: touch nothing */
		maybe_free(c);
		return;
	}
	if (c->tx_dropped) {
		/* cancelled (or done) under output the session dropped: what
		 * went out of it is none of the session's business now */
		c->tx_dropped = false;
		pump(c);
		return;
	}
	p = c->l->proto;
	if (res >= 0) {
		activity(c);
		c->in_pump++;
		p->sent(c->sess, (size_t)res);
		c->in_pump--;
		if (c->dead) {
			maybe_free(c);
			return;
		}
		pump(c);
		return;
	}
	write_failed(c, -res);
}

void bs_net_conn_drop_output(struct bs_net_conn *c)
{
	if (c->dead || !c->ring || !c->tx_busy || c->tx_dropped)
		return;
	/* synchronous: the kernel no longer reads c->tx_iov's buffers;
	 * tx_done() still comes */
	bs_loop_ring_cancel(c->loop, &c->tx_op);
	c->tx_dropped = true;
}

/*
 * Nothing to read without waiting: queue the wait. Into the input buffer
 * a receive; for a payload the session takes zero-copy, a poll, then the
 * payload is read synchronously by read_input() into its buffer.
 */
static bool ring_read(struct bs_net_conn *c)
{
	struct io_uring_sqe *sqe;
	size_t room, want;
	uint8_t *dst;

	if (c->rx_busy || c->rd_eof || !wants_input(c))
		return true;
	room = direct_room(c, &dst);
	if (room && room >= c->l->proto->direct_min) {
		if (!c->rd_empty)
			return true;	/* read_input() will */
		sqe = bs_loop_sqe(c->loop);
		if (!sqe)
			return true;
		io_uring_prep_poll_add(sqe, c->fd, EPOLLIN);
		io_uring_sqe_set_data(sqe, &c->rx_op);
		c->rx_busy = c->rx_poll = true;
		return true;
	}
	want = in_want(c, room);
	if (!want)
		return true;	/* the session takes some first */
	sqe = bs_loop_sqe(c->loop);
	if (!sqe)
		return true;
	io_uring_prep_recv(sqe, c->fd, c->in + c->in_len, want, 0);
	io_uring_sqe_set_data(sqe, &c->rx_op);
	c->rx_busy = true;
	c->rx_poll = false;
	c->rx_want = want;
	return true;
}

static void rx_done(struct bs_ring_op *op, int res, uint32_t flags)
{
	struct bs_net_conn *c = BS_CONTAINER_OF(op, struct bs_net_conn, rx_op);

	(void)flags;
	c->rx_busy = false;
	if (c->dead) {		/* its listener may be gone: touch nothing */
		maybe_free(c);
		return;
	}
	if (c->rx_poll) {
		/* readable (or hung up): the payload is read synchronously */
		c->rd_empty = false;
		pump(c);
		return;
	}
	if (res > 0) {
		activity(c);
		if ((size_t)res == c->rx_want)
			c->after_direct = false;
		c->in_len += (size_t)res;
		/*
		 * Short: more comes through the next receive, not a recv()
		 * that would mostly find nothing. Full (a header asked for
		 * alone, after a zero-copy payload): its payload is most
		 * likely there, read_input() takes it straight away.
		 */
		c->rd_empty = (size_t)res < c->rx_want;
		pump(c);
		return;
	}
	if (res == 0 || res == -EINTR || res == -EAGAIN) {
		c->rd_eof |= res == 0;
		pump(c);
		return;
	}
	if (res == -ECONNRESET) {
		c->rd_eof = true;
		peer_gone(c, NULL);
		return;
	}
	{
		char why[96];

		snprintf(why, sizeof(why), "read: %s", strerror(-res));
		peer_gone(c, why);
	}
}

static bool pump_here(struct bs_net_conn *c)
{
	const struct bs_net_proto *p = c->l->proto;
	uint32_t want = 0;

	if (!out_full(c) && !feed(c))
		return false;
	if (!read_input(c))
		return false;
	if (c->rd_eof && !c->eof_told && c->in_off == c->in_len) {
		c->eof_told = true;
		p->eof(c->sess);
		if (c->dead)
			return false;
	}
	if (c->ring ? !ring_write(c) : !write_output(c))
		return false;
	/* sending made room under out_max: read what waited */
	if (wants_input(c) && c->in_off < c->in_len && !feed(c))
		return false;
	if (p->finished(c->sess) && !has_output(c) && !c->tx_busy) {
		bs_net_conn_close(c, NULL);
		return false;
	}
	if (c->ring)
		return ring_read(c);
	if (wants_input(c))
		want |= EPOLLIN;
	if (has_output(c))
		want |= EPOLLOUT;
	if (want != c->events) {
		c->events = want;
		bs_loop_mod_fd(c->loop, c->fd, want);
	}
	return true;
}

/*
 * Move bytes both ways; false when the connection was closed (c freed).
 * The session may close it from inside any of its callbacks (a record
 * over its limit, out of memory): c stays allocated until here.
 */
static bool pump(struct bs_net_conn *c)
{
	bool ok;

	c->in_pump++;
	ok = pump_here(c);
	c->in_pump--;
	if (c->dead) {
		maybe_free(c);
		return false;
	}
	return ok;
}

static void on_event(void *arg, uint32_t events)
{
	struct bs_net_conn *c = arg;

	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP | EPOLLRDHUP))
		c->rd_empty = false;
	if (!(events & (EPOLLERR | EPOLLHUP))) {
		pump(c);
		return;
	}
	/*
	 * The peer is gone (hung up or reset). What it sent before going is
	 * still readable: take it first, so that a write followed by a
	 * goodbye and close() still reaches the device.
	 */
	if ((events & EPOLLIN) && !pump(c))
		return;
	peer_gone(c, NULL);
}
