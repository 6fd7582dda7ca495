/* SPDX-License-Identifier: MIT */
/* State shared by the files of the NBD server (not a public API). */
#ifndef BLKSTACK_NBD_INTERNAL_H
#define BLKSTACK_NBD_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/export.h>

#include "export/nbd/proto.h"
#include "export/nbd/session.h"

/* Output queued during the handshake before input stops being read. */
#define NBD_HS_OUT_MAX (256u << 10)
/* Options answered NBD_REP_ERR_SHUTDOWN before a session is closed. */
#define NBD_HS_SHUTDOWN_OPTS 16

/* One queued message: inline header bytes, then optional payload data. */
struct nbd_out {
	struct nbd_out *next;
	size_t hdr_len;
	void *data;		/* pool buffer of `budget` bytes, put once sent */
	size_t data_len;
	size_t sent;		/* bytes of hdr+data already sent */
	size_t acct;		/* bytes counted against the session cap */
	size_t budget;		/* of which taken from the server budget */
	uint8_t hdr[];
};

enum nbd_in {
	IN_CLIENT_FLAGS,	/* 4 bytes of client flags */
	IN_OPT_HDR,		/* 16-byte option header */
	IN_OPT_DATA,		/* option payload into optbuf */
	IN_OPT_SKIP,		/* oversized option payload, discarded */
	IN_REQ_HDR,		/* 28-byte request header */
	IN_REQ_PAYLOAD,		/* write payload into the request's buffer */
	IN_REQ_SKIP,		/* payload of a refused write, discarded */
	IN_NONE,		/* no more input */
};

struct nbd_req;

/*
 * What a successful NBD_OPT_INFO answered, kept until the next option: a
 * GO with the same data right after it gets the same information.
 */
struct nbd_info_memo {
	uint64_t size;
	uint16_t flags;
	uint32_t bmin, bpref, bmax;
	uint32_t len;			/* option data, compared with GO's */
	uint8_t data[];
};

struct nbd_session {
	struct bs_ctx *ctx;
	struct bs_exports *set;
	const struct nbd_session_ops *ops;	/* NULL once orphaned */
	void *arg;

	enum nbd_in in;
	uint8_t hdr[NBD_REQ_HDR_SIZE];
	size_t have;			/* bytes of hdr collected */
	uint64_t skip_left;		/* IN_*_SKIP */

	/* handshake */
	uint32_t opt, optlen;
	uint8_t *optbuf;
	size_t opthave;
	bool fixed, no_zeroes, structured;
	bool meta_alloc;		/* base:allocation selected ... */
	char *meta_export;		/* ... for this export name */
	struct nbd_info_memo *info_memo; /* the option just before: INFO */
	unsigned shut_opts;		/* options refused while shutting down */

	/* transmission */
	bool transmission;
	struct bs_dev *dev;
	bool ro;
	uint16_t tflags;		/* transmission flags sent */
	uint32_t min_block;
	char export_name[BS_EXPORT_NAME_MAX];
	struct nbd_req *cur;		/* write receiving its payload */
	uint64_t skip_cookie;		/* refused write: reply after skip */
	uint16_t skip_type;
	uint32_t skip_err;
	char skip_msg[96];

	/* accounting */
	size_t inflight_bytes;		/* buffers held: payloads, replies */
	size_t meta_bytes;		/* queued replies but their payloads */
	unsigned inflight_reqs;		/* requests not yet answered */
	struct nbd_out *out_head, *out_tail;
	struct bs_budget *budget;	/* server-wide payload budget */
	struct bs_budget_holder bh;
	size_t out_bytes;		/* queued output not yet sent */

	bool ended;			/* protocol end: no more input */
	bool disc, eof, shutdown, orphan;
	bool evicted;			/* stalled on the budget: drop output */
	char reason[160];
	struct nbd_session_stats stats;
};

/* session.c */
void nbd_log(struct nbd_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* End the session (no more input) with a reason for the log. */
void nbd_end(struct nbd_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/*
 * Queue hdr (copied) + data (may be NULL: else a bufpool.h buffer of
 * data_acct bytes, owned from here and given back once sent).
 */
int nbd_out_push(struct nbd_session *s, const void *hdr, size_t hdr_len,
		 void *data, size_t data_len, size_t data_acct);
bool nbd_has_room(const struct nbd_session *s, size_t need);
/* Server-wide budget for payload buffers: false = wait for a kick. */
bool nbd_budget_take(struct nbd_session *s, size_t n);
void nbd_budget_give(struct nbd_session *s, size_t n);
void nbd_kick(struct nbd_session *s);

/* handshake.c */
void nbd_hs_greeting(struct nbd_session *s);
void nbd_hs_client_flags(struct nbd_session *s);
/* A 16-byte option header is in s->hdr: set up payload or skip. */
void nbd_hs_option_header(struct nbd_session *s);
/* The option's payload is complete (s->optbuf, s->optlen). */
void nbd_hs_option(struct nbd_session *s);
/* An oversized option's payload has been skipped. */
void nbd_hs_option_skipped(struct nbd_session *s);
/* Between two options: nothing received that wants an answer. */
bool nbd_hs_idle(const struct nbd_session *s);

/* transmit.c */
/* A request header is in s->hdr: false when blocked on the caps. */
bool nbd_tx_header(struct nbd_session *s);
/* The write in s->cur has its payload: submit it. */
void nbd_tx_payload_done(struct nbd_session *s);
/* The payload of a refused write was skipped: send the error. */
void nbd_tx_skipped(struct nbd_session *s);
/* Free the partial write of a session that lost its client. */
void nbd_tx_drop_partial(struct nbd_session *s);
size_t nbd_tx_payload_room(struct nbd_session *s, uint8_t **dst);
void nbd_tx_payload_add(struct nbd_session *s, size_t n);
/* Transmission flags and block sizes for unit @u on this session now. */
uint16_t nbd_tx_flags(const struct nbd_session *s,
		      const struct bs_export_unit *u);
void nbd_tx_block_sizes(const struct bs_export_unit *u, uint32_t *min,
			uint32_t *pref, uint32_t *max);
/* Free the session once its last request completed (orphan). */
void nbd_session_destroy(struct nbd_session *s);

#endif
