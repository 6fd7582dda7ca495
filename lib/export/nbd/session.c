/* SPDX-License-Identifier: MIT */
/*
 * The NBD session state machine: input dispatch by state, the output queue
 * and the per-session memory accounting. Handshake options live in
 * handshake.c, transmission requests in transmit.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include <blkstack/bufpool.h>

#include "export/nbd/internal.h"

static void out_pop(struct nbd_session *s);
static void budget_stop_waiting(struct nbd_session *s);

#define SESSION_OF(h) \
	((struct nbd_session *)((char *)(h) - offsetof(struct nbd_session, bh)))

void nbd_log(struct nbd_session *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!s->ops || !s->ops->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->ops->log(s->arg, msg);
}

void nbd_end(struct nbd_session *s, const char *fmt, ...)
{
	va_list ap;

	if (!s->ended && !s->reason[0]) {
		va_start(ap, fmt);
		vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
		va_end(ap);
	}
	s->ended = true;
	s->in = IN_NONE;
	/* a write still receiving its payload never reaches the device */
	nbd_tx_drop_partial(s);
	budget_stop_waiting(s);
	nbd_kick(s);
}

void nbd_kick(struct nbd_session *s)
{
	if (s->ops && s->ops->kick)
		s->ops->kick(s->arg);
}

bool nbd_has_room(const struct nbd_session *s, size_t need)
{
	if (s->inflight_reqs >= NBD_INFLIGHT_REQS)
		return false;
	/* one request always fits, however big (<= NBD_MAX_PAYLOAD) */
	return !s->inflight_bytes || s->inflight_bytes + need <= NBD_INFLIGHT_BYTES;
}

int nbd_out_push(struct nbd_session *s, const void *hdr, size_t hdr_len,
		 void *data, size_t data_len, size_t data_acct)
{
	struct nbd_out *o;

	/* data_acct bytes of @data were taken from the budget: they move */
	if (s->orphan || s->evicted) {
		bs_buf_put(data, data_acct);
		nbd_budget_give(s, data_acct);
		return 0;
	}
	o = malloc(sizeof(*o) + hdr_len);
	if (!o) {
		bs_buf_put(data, data_acct);
		nbd_budget_give(s, data_acct);
		nbd_end(s, "out of memory queueing a reply");
		return -ENOMEM;
	}
	o->next = NULL;
	o->hdr_len = hdr_len;
	memcpy(o->hdr, hdr, hdr_len);
	o->data = data;
	o->data_len = data ? data_len : 0;
	o->sent = 0;
	o->acct = sizeof(*o) + hdr_len + data_acct;
	o->budget = data_acct;
	s->inflight_bytes += o->acct;
	s->meta_bytes += o->acct - data_acct;
	s->out_bytes += hdr_len + o->data_len;
	if (s->out_tail)
		s->out_tail->next = o;
	else
		s->out_head = o;
	s->out_tail = o;
	nbd_kick(s);
	return 0;
}

bool nbd_budget_take(struct nbd_session *s, size_t n)
{
	return !n || !s->budget || bs_budget_take(s->budget, &s->bh, n);
}

void nbd_budget_give(struct nbd_session *s, size_t n)
{
	if (n && s->budget)
		bs_budget_give(s->budget, &s->bh, n);
}

/*
 * No more input (ended, EOF, freed): a header that waited for the budget
 * is dropped, so the session waits no more; its turn goes on now, not
 * when the session is freed after its requests in the devices.
 */
static void budget_stop_waiting(struct nbd_session *s)
{
	if (s->budget)
		bs_budget_cancel(s->budget, &s->bh);
}

static void budget_wake(struct bs_budget_holder *h)
{
	nbd_kick(SESSION_OF(h));
}

/* Stalled while others wait: end now, and drop what it cannot send. */
static void budget_evict(struct bs_budget_holder *h, const char *why)
{
	struct nbd_session *s = SESSION_OF(h);

	nbd_log(s, "closing: %s", why);
	nbd_end(s, "%s", why);
	s->evicted = true;
	if (s->ops && s->ops->drop_output)
		s->ops->drop_output(s->arg);
	while (s->out_head)
		out_pop(s);
	nbd_kick(s);
}

int nbd_session_new(struct bs_ctx *ctx, struct bs_exports *set,
		    const struct nbd_session_ops *ops, void *arg,
		    struct nbd_session **out)
{
	struct nbd_session *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->ctx = ctx;
	s->set = set;
	s->ops = ops;
	s->arg = arg;
	s->budget = bs_ctx_budget(ctx);
	s->bh.wake = budget_wake;
	s->bh.evict = budget_evict;
	s->in = IN_CLIENT_FLAGS;
	nbd_hs_greeting(s);
	*out = s;
	return 0;
}

/* Taking input now? (Not at a request boundary blocked on the caps.) */
static bool accepting(const struct nbd_session *s)
{
	if (s->ended || s->disc || s->eof || s->orphan || s->in == IN_NONE)
		return false;
	/* a client that does not read its replies gets no more served */
	if (s->inflight_bytes > NBD_INFLIGHT_BYTES ||
	    s->meta_bytes > NBD_REPLY_META_MAX)
		return false;
	/* option replies are small: a client that does not read them stops */
	if (!s->transmission && s->inflight_bytes > NBD_HS_OUT_MAX)
		return false;
	if (s->shutdown && s->in == IN_REQ_HDR && s->have == 0)
		return false;
	return true;
}

bool nbd_session_wants_input(const struct nbd_session *s)
{
	if (!accepting(s))
		return false;
	return !(s->in == IN_REQ_HDR && s->have == NBD_REQ_HDR_SIZE);
}

/* Copy into s->hdr until it holds @want bytes; returns bytes taken. */
static size_t collect(struct nbd_session *s, const uint8_t *p, size_t n,
		      size_t want)
{
	size_t take = want - s->have;

	if (take > n)
		take = n;
	memcpy(s->hdr + s->have, p, take);
	s->have += take;
	return take;
}

size_t nbd_session_feed(struct nbd_session *s, const uint8_t *buf, size_t len)
{
	size_t used = 0, n;

	for (;;) {
		if (!accepting(s))
			break;
		if (s->in == IN_REQ_HDR && s->have == NBD_REQ_HDR_SIZE) {
			if (!nbd_tx_header(s))
				break; /* blocked on the caps: kick resumes */
			continue;
		}
		if (used == len)
			break;
		switch (s->in) {
		case IN_CLIENT_FLAGS:
			used += collect(s, buf + used, len - used, 4);
			if (s->have == 4)
				nbd_hs_client_flags(s);
			break;
		case IN_OPT_HDR:
			used += collect(s, buf + used, len - used,
					NBD_OPT_HDR_SIZE);
			if (s->have == NBD_OPT_HDR_SIZE)
				nbd_hs_option_header(s);
			break;
		case IN_OPT_DATA:
			n = s->optlen - s->opthave;
			if (n > len - used)
				n = len - used;
			memcpy(s->optbuf + s->opthave, buf + used, n);
			s->opthave += n;
			used += n;
			if (s->opthave == s->optlen)
				nbd_hs_option(s);
			break;
		case IN_OPT_SKIP:
		case IN_REQ_SKIP:
			n = len - used;
			if (n > s->skip_left)
				n = (size_t)s->skip_left;
			s->skip_left -= n;
			used += n;
			if (!s->skip_left) {
				if (s->in == IN_OPT_SKIP)
					nbd_hs_option_skipped(s);
				else
					nbd_tx_skipped(s);
			}
			break;
		case IN_REQ_HDR:
			used += collect(s, buf + used, len - used,
					NBD_REQ_HDR_SIZE);
			break;
		case IN_REQ_PAYLOAD: {
			uint8_t *dst;
			n = nbd_tx_payload_room(s, &dst);
			if (n > len - used)
				n = len - used;
			memcpy(dst, buf + used, n);
			used += n;
			nbd_tx_payload_add(s, n);
			break;
		}
		case IN_NONE:
			return used;
		}
	}
	return used;
}

size_t nbd_session_in_direct(struct nbd_session *s, uint8_t **dst)
{
	if (!accepting(s) || s->in != IN_REQ_PAYLOAD || !s->cur)
		return 0;
	return nbd_tx_payload_room(s, dst);
}

void nbd_session_in_direct_done(struct nbd_session *s, size_t n)
{
	if (n)
		nbd_tx_payload_add(s, n);
}

int nbd_session_out_iov(struct nbd_session *s, struct iovec *iov, int max)
{
	struct nbd_out *o;
	int n = 0;

	for (o = s->out_head; o && n < max; o = o->next) {
		size_t off = o->sent;
		if (off < o->hdr_len) {
			iov[n].iov_base = o->hdr + off;
			iov[n].iov_len = o->hdr_len - off;
			n++;
			off = 0;
		} else {
			off -= o->hdr_len;
		}
		if (o->data_len && n < max) {
			iov[n].iov_base = (uint8_t *)o->data + off;
			iov[n].iov_len = o->data_len - off;
			n++;
		} else if (o->data_len) {
			break;
		}
	}
	return n;
}

bool nbd_session_has_output(const struct nbd_session *s)
{
	return s->out_head != NULL;
}

size_t nbd_session_out_bytes(const struct nbd_session *s)
{
	return s->out_bytes;
}

static void out_pop(struct nbd_session *s)
{
	struct nbd_out *o = s->out_head;

	s->out_head = o->next;
	if (!s->out_head)
		s->out_tail = NULL;
	s->inflight_bytes -= o->acct;
	s->meta_bytes -= o->acct - o->budget;
	nbd_budget_give(s, o->budget);
	s->out_bytes -= o->hdr_len + o->data_len - o->sent;
	bs_buf_put(o->data, o->budget);
	free(o);
}

void nbd_session_out_advance(struct nbd_session *s, size_t n)
{
	bool freed = false;

	/* progress before the bytes go back: the watchdog must not see
	 * fewer held bytes with the old clock */
	bs_budget_progress(&s->bh);
	while (n && s->out_head) {
		struct nbd_out *o = s->out_head;
		size_t left = o->hdr_len + o->data_len - o->sent;
		if (n < left) {
			o->sent += n;
			s->out_bytes -= n;
			break;
		}
		n -= left;
		out_pop(s);	/* takes its unsent bytes off out_bytes */
		freed = true;
	}
	if (freed)
		nbd_kick(s);
}

void nbd_session_eof(struct nbd_session *s)
{
	if (s->eof)
		return;
	s->eof = true;
	if (!s->ended && !s->disc && !s->reason[0]) {
		if (s->in == IN_REQ_PAYLOAD || s->in == IN_REQ_SKIP ||
		    (s->in == IN_REQ_HDR && s->have))
			snprintf(s->reason, sizeof(s->reason),
				 "client vanished in the middle of a request "
				 "(partial request dropped)");
		else if (!s->transmission)
			snprintf(s->reason, sizeof(s->reason),
				 "client closed during the handshake");
		else
			snprintf(s->reason, sizeof(s->reason),
				 "client closed without NBD_CMD_DISC");
	}
	/* a partial write is never submitted: nothing unacknowledged lands */
	nbd_tx_drop_partial(s);
	s->in = IN_NONE;
	budget_stop_waiting(s);
	nbd_kick(s);
}

void nbd_session_shutdown(struct nbd_session *s)
{
	/*
	 * Negotiating: options already sent are still read and answered
	 * NBD_REP_ERR_SHUTDOWN (handshake.c), so that the client can
	 * disconnect softly; the connection may close between two options.
	 */
	s->shutdown = true;
	if (!s->reason[0])
		snprintf(s->reason, sizeof(s->reason), "server shutting down");
	nbd_kick(s);
}

bool nbd_session_finished(const struct nbd_session *s)
{
	if (s->inflight_reqs)
		return false;
	if (s->ended || s->disc || s->eof)
		return true;
	if (!s->shutdown)
		return false;
	/* shutting down between two options, or at a request boundary with
	 * nothing in flight */
	if (!s->transmission)
		return nbd_hs_idle(s);
	return s->in == IN_REQ_HDR && s->have == 0;
}

unsigned nbd_session_inflight(const struct nbd_session *s)
{
	/* a write still receiving its payload is not in the device yet */
	return s->inflight_reqs - (s->cur ? 1u : 0u);
}

const char *nbd_session_export_name(const struct nbd_session *s)
{
	return s->transmission ? s->export_name : NULL;
}

const char *nbd_session_end_reason(const struct nbd_session *s)
{
	if (s->reason[0])
		return s->reason;
	return s->disc ? "client disconnected (NBD_CMD_DISC)" : "closed";
}

const struct nbd_session_stats *nbd_session_stats(const struct nbd_session *s)
{
	return &s->stats;
}

void nbd_session_destroy(struct nbd_session *s)
{
	struct bs_exports *set = s->set;
	bool held = s->orphan && s->set;

	while (s->out_head)
		out_pop(s);
	nbd_tx_drop_partial(s);
	if (s->budget)
		bs_budget_leave(s->budget, &s->bh);
	free(s->optbuf);
	free(s->meta_export);
	free(s->info_memo);
	free(s);
	if (held)
		bs_exports_release(set);
}

void nbd_session_free(struct nbd_session *s)
{
	if (!s)
		return;
	s->ops = NULL;
	s->arg = NULL;
	while (s->out_head)
		out_pop(s);
	nbd_tx_drop_partial(s);
	if (s->inflight_reqs) {
		/* the device still has requests: free on the last one */
		s->orphan = true;
		s->in = IN_NONE;
		budget_stop_waiting(s);
		if (s->set)
			bs_exports_hold(s->set);
		return;
	}
	nbd_session_destroy(s);
}
