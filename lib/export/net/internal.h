/* SPDX-License-Identifier: MIT */
/* State shared by listener.c and conn.c (not a public API). */
#ifndef BLKSTACK_NET_INTERNAL_H
#define BLKSTACK_NET_INTERNAL_H

#include <pthread.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <blkstack/loop.h>
#include <blkstack/net.h>

/*
 * Threads: the listener accepts on its loop (the main loop); each
 * connection then lives on one loop (an I/O loop of cfg.ctx, else the
 * listener's), where all its callbacks run. @lock guards the connection
 * list, the count and the labels; the main loop reaches a connection only
 * by sending it a work item under @lock (shut_work, close_work), which the
 * connection takes back under @lock when it goes.
 */
struct bs_net_listener {
	struct bs_loop *loop;
	struct bs_ctx *ctx;		/* spread connections over its loops */
	pthread_mutex_t lock;
	char addr[160];		/* as configured */
	char name[32];		/* log prefix */
	bool is_unix;
	int fd;			/* -1 once it stopped accepting */
	int retry_timer;	/* > 0 while accepting is paused (EMFILE...) */
	bool pause_logged;
	struct bs_net_limits limits;
	const struct bs_net_proto *proto;
	bs_net_accept_fn accept;
	void *owner;
	bs_net_log_fn log;
	void *log_arg;
	/* refusals: one log line a second at most */
	uint64_t refuse_logged_ns;
	unsigned refuse_quiet;
	struct bs_net_conn *conns;
	unsigned nconns;
	/*
	 * Connections unlinked from conns that still run their close (which
	 * reads the listener and calls the protocol's close): the listener
	 * is not freed until it is back to 0.
	 */
	unsigned nclosing;
};

struct bs_net_conn {
	struct bs_net_listener *l;
	struct bs_loop *loop;	/* where it lives */
	int fd;
	char label[64];		/* what the protocol names it by (export) */
	struct bs_work shut_work, close_work;
	bool shut_sent, close_sent;	/* under l->lock */
	const char *close_why;
	char peer[128];		/* "127.0.0.1:4711", "unix:PATH uid 1000" */
	char peer_key[64];	/* what the per-peer limit counts */
	uint64_t id;
	void *sess;
	uint8_t *in;
	size_t in_off, in_len;
	uint32_t events;
	bool rd_eof, eof_told;
	bool after_direct;	/* last input went zero-copy: read a header */
	/*
	 * The last read found the socket empty (EAGAIN, or fewer bytes than
	 * asked): do not read again before epoll reports it readable (it is
	 * level-triggered, so nothing that arrives meanwhile is missed). Saves
	 * the recv() that would fail with EAGAIN after each reply.
	 */
	bool rd_empty;
	bool handshake;		/* still negotiating */
	bool queued, dead;
	/* pump() levels running: a close from inside the session leaves
	 * the freeing of the connection to the outermost, which still uses
	 * it */
	unsigned in_pump;
	/*
	 * Ring mode (the loop waits in io_uring): no fd watch; one receive
	 * (or, when a payload is to go zero-copy, a poll: the kernel never
	 * writes into a session's buffers behind its back) and one send at
	 * most in flight, queued with the loop's wait. A closing connection
	 * cancels them synchronously and is freed once both came back.
	 */
	bool ring;
	bool rx_busy, tx_busy, rx_poll;
	/* the session dropped the output of the send in flight (cancelled):
	 * its completion is not the session's to hear */
	bool tx_dropped;
	size_t rx_want;
	struct bs_ring_op rx_op, tx_op;
	struct msghdr tx_mh;
	struct iovec tx_iov[64];
	struct bs_work work;
	int timer;		/* handshake or idle deadline, > 0 armed */
	uint64_t start_ns, last_ns;
	struct bs_net_conn *next;
};

void bs_net_log(struct bs_net_listener *l, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* conn.c */
int bs_net_conn_start(struct bs_net_listener *l, int fd, const char *peer,
		      const char *key);
/* under l->lock */
void unlink_conn(struct bs_net_listener *l, struct bs_net_conn *c);

#endif
