/* SPDX-License-Identifier: MIT */
/*
 * One NBD client session as a pure, buffer-driven state machine: bytes in
 * (nbd_session_feed), replies out (nbd_session_out_iov / _out_advance),
 * requests executed on the device through the context's loop. No sockets
 * here, so the fuzzer drives it exactly as the connection code does.
 *
 * Memory is bounded per session: payload and reply buffers in flight are
 * counted, and the session stops consuming input (feed returns short and
 * nbd_session_wants_input() is false) while over NBD_INFLIGHT_BYTES or
 * NBD_INFLIGHT_REQS, until completions and sent replies free room.
 */
#ifndef BLKSTACK_NBD_SESSION_H
#define BLKSTACK_NBD_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct bs_export;
struct bs_export_unit;
struct bs_exports;
struct bs_ctx;
struct nbd_session;

/* Largest READ/WRITE payload advertised (NBD_INFO_BLOCK_SIZE maximum). */
#define NBD_MAX_PAYLOAD (32u << 20)
/* Largest option payload accepted; bigger ones get NBD_REP_ERR_TOO_BIG. */
#define NBD_MAX_OPTION (64u << 10)
/* Per-session caps on work in flight (payloads, read data, replies). */
#define NBD_INFLIGHT_BYTES (64u << 20)
/*
 * Replies queued unsent, counted by what they cost besides a payload
 * (the budget counts payloads): past this a session takes no more
 * requests until its client reads. Without it a client sending READs of
 * length 0 and reading nothing held ~72 bytes per 28 sent, up to
 * NBD_INFLIGHT_BYTES per connection, outside the server-wide budget.
 */
#define NBD_REPLY_META_MAX (1u << 20)
#define NBD_INFLIGHT_REQS 256

struct nbd_session_ops {
	/* Output queued, input possible again, or the session ended. */
	void (*kick)(void *arg);
	/*
	 * The unit whose NBD export name is @name ("" = the default)
	 * reachable here, or NULL.
	 */
	struct bs_export_unit *(*find)(void *arg, const char *name);
	/* Units reachable here, for NBD_OPT_LIST: pass NULL first. */
	struct bs_export_unit *(*next)(void *arg,
				       struct bs_export_unit *prev);
	/* One log line (a protocol error, the export chosen). */
	void (*log)(void *arg, const char *msg);
	/* Queued output is about to be freed unsent: nothing may still
	 * be sending from it (bs_net_conn_drop_output()). Optional. */
	void (*drop_output)(void *arg);
};

struct nbd_session_stats {
	uint64_t requests, errors, bytes_read, bytes_written;
};

/*
 * Start a session: the server greeting is queued at once. @set (may be
 * NULL) is held while requests of the session are in flight.
 */
int nbd_session_new(struct bs_ctx *ctx, struct bs_exports *set,
		    const struct nbd_session_ops *ops, void *arg,
		    struct nbd_session **out);

/*
 * Consume up to @len bytes of client input; returns how many were taken.
 * Fewer than @len means the session cannot take more now (at its caps,
 * after NBD_CMD_DISC, or ended): call again after the next kick.
 */
size_t nbd_session_feed(struct nbd_session *s, const uint8_t *buf, size_t len);
bool nbd_session_wants_input(const struct nbd_session *s);

/*
 * Zero-copy input: while a write payload is being received, where its next
 * bytes go and how many are still missing (0 at any other time). The
 * caller reads straight into it and reports with _in_direct_done(); only
 * valid when it holds no input of its own that came earlier.
 */
size_t nbd_session_in_direct(struct nbd_session *s, uint8_t **dst);
void nbd_session_in_direct_done(struct nbd_session *s, size_t n);

/* Pending output as iovecs (at most @max); returns the count. */
int nbd_session_out_iov(struct nbd_session *s, struct iovec *iov, int max);
bool nbd_session_has_output(const struct nbd_session *s);
/* Bytes of queued output not sent yet. */
size_t nbd_session_out_bytes(const struct nbd_session *s);
/* @n bytes of the pending output were sent. */
void nbd_session_out_advance(struct nbd_session *s, size_t n);

/* The client closed its side: no more input will come. */
void nbd_session_eof(struct nbd_session *s);
/* Graceful stop: take no new requests, finish the ones in flight. */
void nbd_session_shutdown(struct nbd_session *s);
/* Nothing more to do: the connection may close (after sending output). */
bool nbd_session_finished(const struct nbd_session *s);
/* Requests in the device right now. */
unsigned nbd_session_inflight(const struct nbd_session *s);

/* Export chosen (NULL during the handshake) and why the session ended. */
const char *nbd_session_export_name(const struct nbd_session *s);
const char *nbd_session_end_reason(const struct nbd_session *s);
const struct nbd_session_stats *nbd_session_stats(const struct nbd_session *s);

/*
 * Drop the session. Requests still in flight finish in the device first;
 * their replies are discarded and no callback of @ops runs any more.
 */
void nbd_session_free(struct nbd_session *s);

#endif
