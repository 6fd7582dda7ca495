/* SPDX-License-Identifier: MIT */
/*
 * nbd: an export of a remote NBD server as a blkstack device (blkstack as
 * an NBD client), on libnbd's asynchronous API.
 *
 * This file: the device type (options, open, close, describe) and the
 * requests; nbd_conn.c: connections, reconnects, the open; nbd_status.c:
 * block status; nbd_config.c: the options and the capability decision.
 *
 * Connections live on the context's main loop, each libnbd handle's
 * socket watched through bs_fdpump (nbd_aio_get_fd, nbd_aio_get_direction,
 * nbd_aio_notify_read/write). Requests submitted on an I/O thread are
 * handed to the main loop (bs_loop_send, no allocation) and complete back
 * on their own loop through bs_req_complete(). With multi-conn, requests
 * go round-robin over the ready connections; without it there is one.
 *
 * libnbd calls a completion callback with its handle locked, so the
 * callback only records the result and defers the rest (completing,
 * retrying) to the loop: nothing is sent on a handle from inside it.
 *
 * Reconnect: a lost connection is closed and made anew every
 * reconnect_ms, for as long as the device lives, but bounded: with no
 * connection ready for down_after seconds the device is down (log line,
 * explain, info) and requests fail at once with EIO instead of each
 * waiting its timeout, until a connection is ready again. Its requests in flight
 * are sent again on another connection or on the new one: reads, writes,
 * zeroes and trims are idempotent, and a request not completed to its
 * submitter has no order to keep with later ones. The one thing a
 * reconnect can lose is a server's write cache: see struct nbdc
 * (wseq/lost_seq) for the FLUSH that then fails with EIO. No request
 * lives longer than `timeout`: then -EIO; one unanswered that long on a
 * live connection takes the connection down (the server hangs).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>

#include "drivers/nbd.h"

/* ---- requests ------------------------------------------------------------ */

void nbdc_finish(struct nbdc_req *r, int res)
{
	struct nbdc *s = r->s;

	if (r->prev)
		r->prev->next = r->next;
	else
		s->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	s->nreqs--;
	free(r->bounce);
	r->bounce = NULL;
	bs_req_complete(r->req, res);
}

static bool modifies(const struct bs_req *req)
{
	return req->op == BS_OP_WRITE || req->op == BS_OP_WRITE_ZEROES ||
	       req->op == BS_OP_DISCARD;
}

static void copy_out(struct nbdc_req *r)
{
	const struct bs_req *req = r->req;
	const uint8_t *p = r->bounce;
	int i;

	for (i = 0; i < req->iovcnt; i++) {
		memcpy(req->iov[i].iov_base, p, req->iov[i].iov_len);
		p += req->iov[i].iov_len;
	}
}

static void copy_in(struct nbdc_req *r)
{
	const struct bs_req *req = r->req;
	uint8_t *p = r->bounce;
	int i;

	for (i = 0; i < req->iovcnt; i++) {
		memcpy(p, req->iov[i].iov_base, req->iov[i].iov_len);
		p += req->iov[i].iov_len;
	}
}

/* On the loop, after the completion callback. */
static void after_cb(void *arg)
{
	struct nbdc_req *r = arg;
	struct nbdc *s = r->s;
	struct bs_req *req = r->req;
	int res = r->res;

	r->work.fn = NULL;
	if (r->retry) {
		r->retry = false;
		s->retries++;
		nbdc_issue(r);
		return;
	}
	if (!res) {
		if (modifies(req) && !(req->flags & BS_REQ_FUA))
			s->wseq++;
		if (req->op == BS_OP_FLUSH && r->flush_seq > s->flushed_seq)
			s->flushed_seq = r->flush_seq;
		if (req->op == BS_OP_READ && r->bounce)
			copy_out(r);
		nbdc_finish(r, 0);
		return;
	}
	if (res == -ENOTSUP)
		res = -EOPNOTSUPP;
	if (req->op == BS_OP_WRITE_ZEROES && res == -EOPNOTSUPP) {
		/* the core turns write-zeroes off here and above; the next
		 * decision (a reconnect) keeps it off */
		s->facts.zero_broken = true;
	}
	bs_error(res, "%s: nbd %s: %s at %llu+%llu: %s", s->dev->name,
		 s->o.uri, bs_op_name(req->op),
		 (unsigned long long)req->offset, (unsigned long long)req->len,
		 strerror(-res));
	nbdc_finish(r, res);
}

/* libnbd's completion callback: its handle is locked, record and defer. */
static int nbd_done_cb(void *user_data, int *error)
{
	struct nbdc_req *r = user_data;
	struct nbdc_conn *c = r->conn;
	struct nbdc *s = r->s;
	int err = *error;

	r->conn = NULL;
	if (c)
		c->inflight--;
	if (s->closing) {
		r->res = -EIO;
		return 1;
	}
	r->retry = false;
	r->res = 0;
	if (err) {
		if ((c && c->tearing) || err == ENOTCONN || err == ESHUTDOWN) {
			/* the connection went (or the server is going):
			 * again on another one */
			r->retry = true;
			if (c && !c->tearing && err == ESHUTDOWN)
				nbdc_conn_lost(c, "server is shutting down "
					       "(ESHUTDOWN)");
		} else {
			r->res = -err;
		}
	}
	r->work.fn = after_cb;
	r->work.arg = r;
	bs_loop_defer(s->loop, &r->work);
	return 1;
}

static struct nbdc_conn *pick_conn(struct nbdc *s)
{
	unsigned n = s->cfg.conns ? s->cfg.conns : 1, i;

	for (i = 0; i < n; i++) {
		struct nbdc_conn *c = &s->conns[(s->rr + i) % n];

		if (c->state == NC_READY && !c->tearing) {
			s->rr = (s->rr + i + 1) % n;
			return c;
		}
	}
	return NULL;
}

void nbdc_issue(struct nbdc_req *r)
{
	struct nbdc *s = r->s;
	struct bs_req *req = r->req;
	nbd_completion_callback cb = { .callback = nbd_done_cb, .user_data = r };
	struct nbdc_conn *c;
	uint32_t fua = (req->flags & BS_REQ_FUA) && s->facts.can_fua
		       ? LIBNBD_CMD_FLAG_FUA : 0;
	uint32_t flags;
	int64_t cookie = -1;
	void *buf;

	if (r->expired) {
		bs_error(-EIO, "%s: nbd %s: %s not done within %u s (%s)",
			 s->dev->name, s->o.uri, bs_op_name(req->op),
			 s->o.timeout_s, s->last_error[0] ? s->last_error
							  : "no answer");
		nbdc_finish(r, -EIO);
		return;
	}
	c = pick_conn(s);
	if (!c && s->reach.down) {
		/* bounded reconnect: no waiting while the server is gone */
		nbdc_finish(r, reach_fail(&s->reach, bs_op_name(req->op)));
		return;
	}
	if (!c) {
		r->waiting = true;
		return;
	}
	r->waiting = false;
	buf = req->iovcnt == 1 ? req->iov[0].iov_base : r->bounce;
	if ((req->op == BS_OP_READ || req->op == BS_OP_WRITE) &&
	    req->iovcnt != 1 && !r->bounce) {
		/* libnbd takes one buffer: gather / scatter through a bounce */
		r->bounce = malloc(req->len);
		if (!r->bounce) {
			nbdc_finish(r, -ENOMEM);
			return;
		}
		buf = r->bounce;
		if (req->op == BS_OP_WRITE)
			copy_in(r);
	}
	switch (req->op) {
	case BS_OP_READ:
		cookie = nbd_lib.nbd_aio_pread(c->h, buf, req->len, req->offset,
					       cb, 0);
		break;
	case BS_OP_WRITE:
		cookie = nbd_lib.nbd_aio_pwrite(c->h, buf, req->len,
						req->offset, cb, fua);
		break;
	case BS_OP_FLUSH:
		if (s->lost_seq > s->flushed_seq) {
			/* acknowledged writes went with a lost connection
			 * before any FLUSH covered them: say so, once */
			s->flushed_seq = s->lost_seq;
			s->flush_lost++;
			bs_error(-EIO, "%s: nbd %s: FLUSH: writes acknowledged "
				 "on a lost connection were never flushed; "
				 "the server may have lost them", s->dev->name,
				 s->o.uri);
			nbdc_finish(r, -EIO);
			return;
		}
		r->flush_seq = s->wseq;
		cookie = nbd_lib.nbd_aio_flush(c->h, cb, 0);
		break;
	case BS_OP_DISCARD:
		cookie = nbd_lib.nbd_aio_trim(c->h, req->len, req->offset, cb,
					      fua);
		break;
	case BS_OP_WRITE_ZEROES:
		if (!s->facts.can_zero || s->facts.zero_broken) {
			nbdc_finish(r, -EOPNOTSUPP);	/* the core writes */
			return;
		}
		flags = fua;
		if (nbdc_zero_no_hole(req->flags & BS_REQ_NOUNMAP,
				      bs_dev_write_zeroes_unmap(s->dev)))
			flags |= LIBNBD_CMD_FLAG_NO_HOLE;
		cookie = nbd_lib.nbd_aio_zero(c->h, req->len, req->offset, cb,
					      flags);
		break;
	default:
		nbdc_finish(r, -EOPNOTSUPP);
		return;
	}
	if (cookie < 0) {
		int e = nbd_lib.nbd_get_errno();

		if (!nbd_lib.nbd_aio_is_ready(c->h)) {
			/* the connection is going: wait for another */
			snprintf(s->last_error, sizeof(s->last_error), "%s",
				 nbd_lib.nbd_get_error() ? nbd_lib.nbd_get_error() : "");
			r->waiting = true;
			nbdc_conn_lost(c, s->last_error);
			return;
		}
		bs_error(-(e ? e : EIO), "%s: nbd %s: %s: %s", s->dev->name,
			 s->o.uri, bs_op_name(req->op), nbd_lib.nbd_get_error());
		nbdc_finish(r, e == ENOTSUP ? -EOPNOTSUPP : -(e ? e : EIO));
		return;
	}
	r->conn = c;
	c->inflight++;
	c->requests++;
	nbdc_kick(c);
}

void nbdc_issue_waiting(struct nbdc *s)
{
	struct nbdc_req *r, *next;

	/* nbdc_issue() may finish @r: take next first */
	for (r = s->reqs; r; r = next) {
		next = r->next;
		if (r->waiting)
			nbdc_issue(r);
	}
}

void nbdc_watchdog(struct nbdc *s)
{
	uint64_t now = bs_now_ns();
	struct nbdc_req *r, *next;

	nbdc_check_down(s);
	for (r = s->reqs; r; r = next) {
		next = r->next;
		if (r->expired || now < r->deadline_ns)
			continue;
		r->expired = true;
		s->expired++;
		if (r->conn) {
			/* no answer on a live connection: the server hangs.
			 * Taking the connection down is the only cancel NBD
			 * has; the request comes back and fails. */
			if (!r->conn->tearing)
				nbdc_conn_lost(r->conn, "a request unanswered "
					       "within the timeout");
			continue;
		}
		if (r->work.fn)
			continue;	/* its completion is on the way */
		nbdc_issue(r);		/* expired: fails with -EIO */
	}
}

/* On the main loop: take @r into the driver's list and send it. */
static void start_req(void *arg)
{
	struct nbdc_req *r = arg;
	struct nbdc *s = r->s;

	r->work.fn = NULL;
	r->deadline_ns = bs_now_ns() + s->o.timeout_s * 1000000000ull;
	r->prev = NULL;
	r->next = s->reqs;
	if (s->reqs)
		s->reqs->prev = r;
	s->reqs = r;
	s->nreqs++;
	nbdc_issue(r);
}

static void nbdc_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct nbdc *s = dev->priv;
	struct nbdc_req *r = bs_req_drv(req);

	memset(r, 0, sizeof(*r));
	r->req = req;
	r->s = s;
	if (bs_loop_is_current(s->loop)) {
		start_req(r);
		return;
	}
	/* libnbd's handles belong to the main loop */
	r->work.fn = start_req;
	r->work.arg = r;
	bs_loop_send(s->loop, &r->work);
}

/* ---- the device type ---------------------------------------------------- */

static void nbdc_free(struct nbdc *s)
{
	pthread_mutex_destroy(&s->st_lock);
	nbdc_opts_free(&s->o);
	free(s);
}

static int nbdc_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct nbdc *s = calloc(1, sizeof(*s));
	char why[256];
	unsigned i;
	int err;

	if (!s)
		return -ENOMEM;
	pthread_mutex_init(&s->st_lock, NULL);
	s->dev = dev;
	s->loop = bs_ctx_loop(dev->ctx);
	s->user_readonly = dev->readonly;	/* the core set it from opts */
	if ((err = nbdc_opts_parse(opts, dev->name, &s->o))) {
		nbdc_free(s);
		return err;
	}
	snprintf(why, sizeof(why), "nbd %s", s->o.uri);
	reach_init(&s->reach, dev, &nbdc_reach_words, why, s->o.down_after_s,
		   s->o.reconnect_ms);
	/* libnbd, loaded by the first open (nbd_lib.h) */
	if ((err = nbd_lib_load(why, sizeof(why)))) {
		nbdc_free(s);
		return bs_error(err, "%s: %s", dev->name, why);
	}
	for (i = 0; i < NBDC_MAX_CONNS; i++) {
		s->conns[i].s = s;
		s->conns[i].idx = i;
	}
	dev->priv = s;
	s->opening = true;
	snprintf(dev->state_reason, sizeof(dev->state_reason),
		 "connecting to %s", s->o.uri);
	nbdc_conn_begin(s);
	return BS_OPEN_PENDING;
}

static void nbdc_close(struct bs_dev *dev)
{
	struct nbdc *s = dev->priv;
	uint64_t until = bs_now_ns() + 2000000000ull;
	struct nbdc_req *r;

	if (!s)
		return;
	/* let what is in flight finish, a little */
	while (s->nreqs && pick_conn(s) && bs_now_ns() < until)
		if (bs_loop_run_once(s->loop, 50))
			break;
	s->closing = true;
	nbdc_conn_close_all(s);
	while ((r = s->reqs)) {
		if (r->work.fn)
			bs_loop_cancel_work(s->loop, &r->work);
		r->work.fn = NULL;
		nbdc_finish(r, -EIO);
	}
	nbdc_status_close(s);
	nbdc_free(s);
	dev->priv = NULL;
}

static void nbdc_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct nbdc *s = dev->priv;
	const struct nbdc_facts *f;
	unsigned i, ready = 0;
	char key[32];

	if (!s)
		return;
	f = &s->facts;
	kv(arg, "uri", "%s", s->o.uri);
	for (i = 0; i < NBDC_MAX_CONNS; i++)
		ready += s->conns[i].state == NC_READY;
	kv(arg, "connections", "%u ready of %u (%s)", ready,
	   s->cfg.conns ? s->cfg.conns : 1,
	   s->cfg.conns_why[0] ? s->cfg.conns_why : "not connected yet");
	for (i = 0; i < NBDC_MAX_CONNS; i++) {
		const struct nbdc_conn *c = &s->conns[i];

		if (!c->connects && c->state == NC_DOWN && !c->last_error[0])
			continue;
		snprintf(key, sizeof(key), "conn.%u", i + 1);
		kv(arg, key, "%s (connects %llu, lost %llu, requests %llu, in "
		   "flight %u)%s%s", nbdc_conn_state_name(c->state),
		   (unsigned long long)c->connects,
		   (unsigned long long)c->lost,
		   (unsigned long long)c->requests, c->inflight,
		   c->last_error[0] ? ", last error: " : "", c->last_error);
	}
	kv(arg, "policy", "timeout %u s, reconnect_ms %u, max_retries %u, "
	   "down_after %u s%s, max_io %u", s->o.timeout_s, s->o.reconnect_ms,
	   s->o.max_retries, s->o.down_after_s,
	   s->o.down_after_s ? "" : " (never)", s->o.max_io);
	reach_describe(&s->reach, s->last_error, kv, arg);
	if (!s->have_facts)
		return;
	kv(arg, "server", "size %llu, read_only %d, can_flush %d, can_fua %d, "
	   "can_trim %d, can_zero %d, can_fast_zero %d, can_multi_conn %d, "
	   "rotational %d, base:allocation %d",
	   (unsigned long long)f->size, f->read_only, f->can_flush, f->can_fua,
	   f->can_trim, f->can_zero, f->can_fast_zero, f->can_multi_conn,
	   f->rotational, f->base_allocation);
	kv(arg, "block_size", "minimum %u, preferred %u, maximum %u (0: not "
	   "sent)", f->bs_min, f->bs_pref, f->bs_max);
	kv(arg, "size_from", "%s", s->cfg.size_why);
	kv(arg, "write_zeroes", "%s", s->cfg.zero_why);
	kv(arg, "decision", "%s", s->cfg.why);
	kv(arg, "discard", "%s", s->cfg.trim_why);
	kv(arg, "flush", "%s", s->cfg.flush_why);
	kv(arg, "fua", "%s", s->cfg.fua_why);
	pthread_mutex_lock(&s->st_lock);
	kv(arg, "block_status", "%s (asked %llu, failed %llu)%s%s",
	   s->cfg.status_why, (unsigned long long)s->st_calls,
	   (unsigned long long)s->st_failed, s->st_error[0] ? ": " : "",
	   s->st_error);
	pthread_mutex_unlock(&s->st_lock);
	kv(arg, "retries", "%llu (failed at the deadline %llu, reconnects "
	   "%llu, flushes failed after a lost connection %llu)",
	   (unsigned long long)s->retries, (unsigned long long)s->expired,
	   (unsigned long long)s->reconnects,
	   (unsigned long long)s->flush_lost);
	kv(arg, "durability", "writes acknowledged %llu, covered by a flush "
	   "%llu, up to %llu acknowledged on a lost connection",
	   (unsigned long long)s->wseq, (unsigned long long)s->flushed_seq,
	   (unsigned long long)s->lost_seq);
}

static const struct bs_dev_type nbd_type = {
	.name = "nbd",
	.req_ctx_size = sizeof(struct nbdc_req),
	.spec_key = "uri",
	.summary = "an export of a remote NBD server (libnbd)",
	.options =
		"uri=URI             the export: nbd://HOST[:PORT][/EXPORT],\n"
		"                    nbd+unix:///[EXPORT]?socket=PATH, nbds://...\n"
		"connections=N       connections when the server offers multi-conn\n"
		"                    (4, 1..16); else 1\n"
		"timeout=SECONDS     longest a request (reconnects included) or the\n"
		"                    open may take; then -EIO (30)\n"
		"reconnect_ms=MS     delay between connect attempts (1000)\n"
		"max_retries=N       failed connects before the open gives up (5)\n"
		"down_after=SECONDS  no connection this long: requests fail at\n"
		"                    once (EIO) until one is made again (60; 0 never)\n"
		"max_io=SIZE         largest READ/WRITE, below the server's (1M)\n",
	.open = nbdc_open,
	.close = nbdc_close,
	.submit = nbdc_submit,
	.block_status = nbdc_block_status,
	.describe = nbdc_describe,
};

BS_DEV_TYPE(nbd_type)
