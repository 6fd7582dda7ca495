/* SPDX-License-Identifier: MIT */
/* State shared by listener.c and conn.c (not a public API). */
#ifndef BLKSTACK_NET_INTERNAL_H
#define BLKSTACK_NET_INTERNAL_H

#include <blkstack/loop.h>
#include <blkstack/net.h>

struct bs_net_listener {
	struct bs_loop *loop;
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
};

struct bs_net_conn {
	struct bs_net_listener *l;
	int fd;
	char peer[128];		/* "127.0.0.1:4711", "unix:PATH uid 1000" */
	char peer_key[64];	/* what the per-peer limit counts */
	uint64_t id;
	void *sess;
	uint8_t *in;
	size_t in_off, in_len;
	uint32_t events;
	bool rd_eof, eof_told;
	bool after_direct;	/* last input went zero-copy: read a header */
	bool handshake;		/* still negotiating */
	bool queued, dead;
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

#endif
