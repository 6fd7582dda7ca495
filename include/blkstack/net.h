/* SPDX-License-Identifier: MIT */
/*
 * The protocol-neutral network server (lib/export/net/): listeners on TCP
 * addresses and UNIX sockets, accepting with a pause when descriptors run
 * out, connection limits per listener and per peer, handshake and idle
 * timeouts, a bounded output queue and a graceful drain. A protocol (NBD,
 * later iSCSI, NVMe/TCP, NFS) supplies only a session-operations table.
 *
 * Everything runs on one bs_loop thread.
 *
 * A connection's life, as the server drives a protocol's session:
 *
 *   accept ── limits ─► start(owner, conn, &sess)   the session may queue a
 *                                                   greeting (output op)
 *   readable ─► input(sess, bytes) while wants_input(sess) and the queued
 *               output is under the listener's out_max (a peer that does
 *               not read stops being read from)
 *   writable ─► output(sess, iov) / sent(sess, n)
 *   the session calls bs_net_conn_kick() when it has new output or can
 *   take input again (completions), bs_net_conn_handshake_done() once its
 *   protocol's negotiation is over (the handshake timer stops; the idle
 *   timer, if any, starts).
 *   peer closed its side ─► eof(sess); when finished(sess) and no output
 *   is left the server closes the connection cleanly (FIN after the last
 *   reply).
 *   timeouts, errors, resets, bs_net_conn_close() ─► close(sess, why)
 *   logs and frees the session; the socket is closed by the server.
 *
 * Timeouts: a connection that has not called handshake_done within
 * handshake_ms is closed ("handshake not finished in N s"); after the
 * handshake, one that neither sent nor received a byte for idle_ms and has
 * nothing in flight (busy(sess) false) is closed. 0 turns either off.
 *
 * Limits: max_conns per listener, max_per_peer per peer address (the IP
 * for TCP, the peer's uid for UNIX sockets). A connection over a limit is
 * accepted and closed at once; the refusals are logged at most once a
 * second per listener, with a count of the ones not logged.
 */
#ifndef BLKSTACK_NET_H
#define BLKSTACK_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

struct bs_loop;
struct bs_ctx;
struct bs_net_listener;
struct bs_net_conn;

/* ---- addresses ----------------------------------------------------------- */

struct bs_net_addr {
	struct sockaddr_storage ss;
	socklen_t len;
	bool wildcard;		/* 0.0.0.0 or [::]: every address */
};

/*
 * Parse "IPV4:PORT" or "[IPV6]:PORT" (numeric only). The port is decimal,
 * 1..65535; an empty host is refused (give 0.0.0.0 or [::] to mean every
 * address). 0 or -EINVAL with the reason in @why ("port 99999 is out of
 * range (1-65535)").
 */
int bs_net_parse_addr(const char *s, struct bs_net_addr *out, char *why,
		      size_t whylen);

/* "1.2.3.4:5" / "[::1]:5" of a TCP address; "?" when it is not one. */
void bs_net_format_addr(const struct sockaddr *sa, socklen_t len, char *buf,
			size_t size);

/*
 * Parse a duration for a timeout key: "10" or "10s" (seconds, a decimal
 * fraction allowed: "0.5"), "250ms"; "0" = off. At most 1 day.
 */
int bs_net_parse_ms(const char *s, unsigned *out);

/* Parse an octal mode "0660": 0..0777, octal digits only. */
int bs_net_parse_mode(const char *s, mode_t *out);

/* ---- listeners ----------------------------------------------------------- */

struct bs_net_limits {
	unsigned max_conns;	/* per listener */
	unsigned max_per_peer;	/* per peer address; 0 = max_conns */
	unsigned handshake_ms;	/* 0 = no handshake timeout */
	unsigned idle_ms;	/* 0 = no idle timeout */
	size_t out_max;		/* unsent output above which input stops */
	mode_t socket_mode;	/* UNIX sockets */
	/*
	 * TCP connections' send buffer (SO_SNDBUF, which the kernel
	 * doubles and caps at net.core.wmem_max); 0 = the kernel's
	 * autotuning. A bounded buffer keeps a reply's bytes in the CPU
	 * caches until the receiver takes them (docs/net.md).
	 */
	size_t sndbuf;
};

#define BS_NET_MAX_CONNS 512
#define BS_NET_MAX_PER_PEER 64
#define BS_NET_HANDSHAKE_MS 10000
#define BS_NET_OUT_MAX (16u << 20)
#define BS_NET_SOCKET_MODE 0600
/*
 * Default send buffer of TCP connections: about one 1 MiB read reply in
 * flight (the kernel doubles it). Measured on loopback with 1 MiB reads
 * against the autotuned buffer (up to 4 MiB, whose bytes go cold in the
 * caches before the receiver copies them): NBD +6-36 %, iSCSI +29-43 %,
 * NVMe/TCP +39 %, NFS READ +30 %, and CPU per GiB down at both ends.
 */
#define BS_NET_SNDBUF_DEFAULT (512u << 10)
/* send_buffer keys: 0, or this range */
#define BS_NET_SNDBUF_MIN (4u << 10)
#define BS_NET_SNDBUF_MAX (64u << 20)

/* The defaults above; idle off. */
void bs_net_limits_default(struct bs_net_limits *l);

/* max_connections and max_connections_per_peer: 1 to this */
#define BS_NET_CONNS_MAX 65536u

/* Which listener keys an export's section has (bs_net_read_limits). */
enum {
	BS_NET_KEY_MAX_CONNS = 1u << 0,	/* max_connections = N */
	BS_NET_KEY_MAX_PER_PEER = 1u << 1, /* max_connections_per_peer = N */
	BS_NET_KEY_HANDSHAKE = 1u << 2,	/* handshake_timeout = SECONDS */
	BS_NET_KEY_IDLE = 1u << 3,	/* idle_timeout = SECONDS */
	BS_NET_KEY_SEND_BUFFER = 1u << 4, /* send_buffer = SIZE (0 = auto) */
	BS_NET_KEYS_ALL = (1u << 5) - 1,
};

struct bs_opts;

/*
 * Read the listener keys in @keys from an export's section into @l, which
 * holds the export's defaults (kept for absent keys); out of range:
 * -EINVAL and one line "FILE:LINE: export NAME: KEY VALUE: give ...".
 * Then a default per-peer limit above max_connections follows it down; a
 * given one above it is an error.
 */
int bs_net_read_limits(const char *name, struct bs_opts *opts, unsigned keys,
		       struct bs_net_limits *l);

typedef void (*bs_net_log_fn)(void *arg, const char *msg);

struct bs_net_proto {
	const char *name;	/* log prefix: "nbd" */
	size_t inbuf;		/* input buffer bytes per connection */
	/* Zero-copy input from this many missing bytes (0 = never). */
	size_t direct_min;
	/*
	 * After a payload taken zero-copy, read at most this many bytes into
	 * the input buffer (one request header), so that the payload of a
	 * next big request goes zero-copy too instead of being copied out of
	 * the input buffer (0 = no limit).
	 */
	size_t direct_hdr;

	/* New connection: create its session in *@sess (0 or -errno). */
	int (*start)(void *owner, struct bs_net_conn *c, void **sess);
	/* Consume up to @len bytes; fewer = cannot take more now. */
	size_t (*input)(void *sess, const uint8_t *buf, size_t len);
	bool (*wants_input)(void *sess);
	/* Optional zero-copy: where the next input bytes may go, and room. */
	size_t (*in_direct)(void *sess, uint8_t **dst);
	void (*in_direct_done)(void *sess, size_t n);
	/* Pending output: fill up to @max iovecs; bytes queued; n sent. */
	int (*output)(void *sess, struct iovec *iov, int max);
	size_t (*out_bytes)(void *sess);
	void (*sent)(void *sess, size_t n);
	/* The peer closed its sending side. */
	void (*eof)(void *sess);
	/* Graceful stop: no new requests, finish what is in flight. */
	void (*shutdown)(void *sess);
	/* Nothing left to do: close once the output is sent. */
	bool (*finished)(void *sess);
	/* Requests in flight (the idle timer waits for them). */
	bool (*busy)(void *sess);
	/*
	 * The connection closes: log (@why NULL = a clean end, the session
	 * knows why) and free the session. No other op runs after it.
	 */
	void (*close)(void *sess, const char *why);
};

/*
 * A raw listener: the owner takes each accepted descriptor (and its own
 * connection accounting); the listener still binds, pauses on EMFILE and
 * stops. For sockets whose connections are not sessions (the control
 * socket's one request, one reply).
 */
typedef void (*bs_net_accept_fn)(void *owner, int fd, const char *peer);

struct bs_net_listen_cfg {
	const char *addr;	/* "127.0.0.1:10809", or a path when is_unix */
	const char *name;	/* log prefix of a raw listener ("control") */
	bool is_unix;
	int backlog;		/* 0 = 128 */
	struct bs_net_limits limits;
	const struct bs_net_proto *proto;	/* or raw: */
	bs_net_accept_fn accept;
	void *owner;
	bs_net_log_fn log;
	void *log_arg;
	/* optional: spread connections over this context's I/O loops
	 * (bs_ctx_io_loop()); else they live on the listener's loop */
	struct bs_ctx *ctx;
};

/*
 * Bind and listen. A UNIX socket is created with limits.socket_mode
 * already set (no window with a looser mode); a stale socket file is
 * replaced, a live one is -EADDRINUSE, a non-socket -EEXIST. Errors are
 * -errno with bs_error() ("listen on ADDR: ...").
 */
int bs_net_listen(struct bs_loop *loop, const struct bs_net_listen_cfg *cfg,
		  struct bs_net_listener **out);
/*
 * Connections from the listener's loop. The list may be walked with
 * bs_net_conn_next() only between bs_net_listener_lock() and _unlock();
 * a connection is reached there only by bs_net_conn_send_shutdown() /
 * bs_net_conn_send_close() (run later on its own loop) and its label.
 */
void bs_net_listener_lock(struct bs_net_listener *l);
void bs_net_listener_unlock(struct bs_net_listener *l);
void bs_net_conn_send_shutdown(struct bs_net_conn *c);
void bs_net_conn_send_close(struct bs_net_conn *c, const char *why);
/* Close the connections @match accepts (all: NULL) and wait until gone. */
void bs_net_listener_close_conns(struct bs_net_listener *l,
				 bool (*match)(struct bs_net_conn *c,
					       void *arg),
				 void *arg, const char *why);
/* A name the protocol gives a connection (NBD: its export), "" unset;
 * set on the connection's loop, read under the listener's lock. */
void bs_net_conn_set_label(struct bs_net_conn *c, const char *label);
const char *bs_net_conn_label(const struct bs_net_conn *c);

/* Stop accepting (the UNIX socket file goes); connections go on. */
void bs_net_listener_stop(struct bs_net_listener *l);
/* Graceful drain: stop, then shutdown() every connection. */
void bs_net_listener_drain(struct bs_net_listener *l);
/* Close every connection now and free the listener. */
void bs_net_listener_free(struct bs_net_listener *l);
const char *bs_net_listener_addr(const struct bs_net_listener *l);
bool bs_net_listener_is_unix(const struct bs_net_listener *l);
bool bs_net_listener_accepting(const struct bs_net_listener *l);
const struct bs_net_limits *bs_net_listener_limits(
	const struct bs_net_listener *l);
unsigned bs_net_listener_conns(const struct bs_net_listener *l);
/* Iterate connections: NULL first. */
struct bs_net_conn *bs_net_conn_next(const struct bs_net_listener *l,
				     const struct bs_net_conn *prev);

/* ---- connections (for the protocol) -------------------------------------- */

void *bs_net_conn_session(const struct bs_net_conn *c);
/* The listener's owner (bs_net_listen_cfg.owner). */
void *bs_net_conn_owner(const struct bs_net_conn *c);
struct bs_net_listener *bs_net_conn_listener(const struct bs_net_conn *c);
const char *bs_net_conn_peer(const struct bs_net_conn *c);
uint64_t bs_net_conn_id(const struct bs_net_conn *c);
/* Output queued or input possible again: service soon (deferred). */
void bs_net_conn_kick(struct bs_net_conn *c);
/* The protocol's handshake is over: the handshake timeout stops. */
void bs_net_conn_handshake_done(struct bs_net_conn *c);
bool bs_net_conn_in_handshake(const struct bs_net_conn *c);
/* Ask the session to stop gracefully (its shutdown op). */
void bs_net_conn_shutdown(struct bs_net_conn *c);
/* Close now with a reason (the session's close op runs). */
void bs_net_conn_close(struct bs_net_conn *c, const char *why);
/*
 * The session is about to free output that output() gave and sent() has
 * not taken back (replies nobody reads, dropped on a budget eviction).
 * Call this first: the kernel may be sending from that memory (a ring
 * send in flight, event_loop = io_uring); it is cancelled and the kernel
 * is done with it on return, and sent() hears nothing of that send. The
 * session's output starts afresh; a stream cut in the middle of a reply
 * is the session's to end.
 */
void bs_net_conn_drop_output(struct bs_net_conn *c);
/* One log line "PROTO #ID PEER: msg". */
void bs_net_conn_log(struct bs_net_conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Listen on the UNIX socket @path with @mode set from the start (0 =
 * 0600). A stale socket file is replaced; -EADDRINUSE when a server
 * answers there, -EEXIST when @path is not a socket, -ENAMETOOLONG, else
 * -errno. The path is removed on failure only if this call created it.
 */
int bs_net_listen_unix(const char *path, int backlog, mode_t mode, int *out);

#endif
