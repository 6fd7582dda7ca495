/* SPDX-License-Identifier: MIT */
/*
 * The nbd driver's connections (see nbd.c for the whole).
 *
 * A connection: a libnbd handle connected with nbd_aio_connect_uri(), its
 * socket pumped by bs_fdpump. Connection 1 is made at open; when it is
 * ready the server's facts are read and decided (nbd_config.c), the open
 * finishes, and with multi-conn the others are made. A lost connection is
 * closed (outside libnbd's callbacks) and made anew after reconnect_ms,
 * for as long as the device lives. Every ready connection reads the facts
 * again; a change (size, flags) goes to bs_dev_limits_changed(), so every
 * device and export above hears of it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "drivers/nbd.h"

const char *nbdc_conn_state_name(enum nbdc_conn_state st)
{
	switch (st) {
	case NC_CONNECTING: return "connecting";
	case NC_READY: return "ready";
	default: return "down";
	}
}

static unsigned wanted(const struct nbdc *s)
{
	return s->cfg.conns ? s->cfg.conns : 1;
}

/* ---- the pump ------------------------------------------------------------ */

static void conn_ready(struct nbdc_conn *c);

static int pump_get_fd(void *lib)
{
	struct nbdc_conn *c = lib;

	return c->h && !c->tearing ? nbd_lib.nbd_aio_get_fd(c->h) : -1;
}

static uint32_t pump_events(void *lib)
{
	struct nbdc_conn *c = lib;
	unsigned dir;
	uint32_t ev = 0;

	if (!c->h || c->tearing)
		return 0;
	dir = nbd_lib.nbd_aio_get_direction(c->h);
	if (dir & LIBNBD_AIO_DIRECTION_READ)
		ev |= EPOLLIN;
	if (dir & LIBNBD_AIO_DIRECTION_WRITE)
		ev |= EPOLLOUT;
	return ev;
}

static int pump_service(void *lib, uint32_t revents)
{
	struct nbdc_conn *c = lib;
	int rc = 0;

	if (!c->h || c->tearing)
		return 0;
	if (revents & (EPOLLIN | EPOLLERR | EPOLLHUP))
		rc = nbd_lib.nbd_aio_notify_read(c->h);
	if (rc == 0 && (revents & EPOLLOUT) && !c->tearing &&
	    (nbd_lib.nbd_aio_get_direction(c->h) & LIBNBD_AIO_DIRECTION_WRITE))
		rc = nbd_lib.nbd_aio_notify_write(c->h);
	if (rc < 0 || nbd_lib.nbd_aio_is_dead(c->h) || nbd_lib.nbd_aio_is_closed(c->h))
		return -EIO;
	if (c->state == NC_CONNECTING && nbd_lib.nbd_aio_is_ready(c->h))
		conn_ready(c);
	return 0;
}

static void pump_error(void *lib, int err)
{
	struct nbdc_conn *c = lib;
	const char *e = c->h ? nbd_lib.nbd_get_error() : NULL;

	(void)err;
	nbdc_conn_lost(c, e && *e ? e : "connection lost");
}

static const struct bs_fdpump_ops nbdc_pump_ops = {
	.get_fd = pump_get_fd,
	.events = pump_events,
	.service = pump_service,
	.on_error = pump_error,
};

void nbdc_kick(struct nbdc_conn *c)
{
	if (c->pump)
		bs_fdpump_update(c->pump);
}

/* ---- the open ------------------------------------------------------------ */

static void open_done_deferred(void *arg)
{
	struct nbdc *s = arg;

	s->open_work.fn = NULL;
	if (s->open_timer)
		bs_loop_cancel_timer(s->loop, s->open_timer);
	s->open_timer = 0;
	s->opening = false;
	bs_dev_open_done(s->dev, s->open_err);
}

/* The first connection was read (or the open gave up): tell the core. */
static void open_finish(struct nbdc *s, int err)
{
	if (!s->opening || s->open_work.fn)
		return;
	s->open_err = err;
	if (err)
		bs_error(err, "%s: nbd %s: %s", s->dev->name, s->o.uri,
			 s->last_error[0] ? s->last_error : strerror(-err));
	s->open_work.fn = open_done_deferred;
	s->open_work.arg = s;
	bs_loop_defer(s->loop, &s->open_work);
}

static void open_timeout(void *arg)
{
	struct nbdc *s = arg;

	s->open_timer = 0;
	if (!s->last_error[0])
		snprintf(s->last_error, sizeof(s->last_error),
			 "not connected within %u s", s->o.timeout_s);
	open_finish(s, -ETIMEDOUT);
}

static void tick(void *arg)
{
	struct nbdc *s = arg;

	s->tick_timer = bs_loop_add_timer(s->loop, NBDC_TICK_MS, tick, s);
	if (s->tick_timer < 0)
		s->tick_timer = 0;
	nbdc_watchdog(s);
}

void nbdc_conn_begin(struct nbdc *s)
{
	s->open_timer = bs_loop_add_timer(s->loop,
					  (uint64_t)s->o.timeout_s * 1000,
					  open_timeout, s);
	if (s->open_timer < 0)
		s->open_timer = 0;
	s->tick_timer = bs_loop_add_timer(s->loop, NBDC_TICK_MS, tick, s);
	if (s->tick_timer < 0)
		s->tick_timer = 0;
	nbdc_conn_start(&s->conns[0]);
}

/* ---- facts and the decision ---------------------------------------------- */

static int64_t bsize(struct nbd_handle *h, int which)
{
	int64_t v = nbd_lib.nbd_get_block_size(h, which);

	return v > 0 && v <= UINT32_MAX ? v : 0;
}

static void read_facts(struct nbd_handle *h, struct nbdc_facts *f,
		       bool zero_broken)
{
	int64_t size = nbd_lib.nbd_get_size(h);

	memset(f, 0, sizeof(*f));
	f->size = size > 0 ? (uint64_t)size : 0;
	f->read_only = nbd_lib.nbd_is_read_only(h) == 1;
	f->can_flush = nbd_lib.nbd_can_flush(h) == 1;
	f->can_fua = nbd_lib.nbd_can_fua(h) == 1;
	f->can_trim = nbd_lib.nbd_can_trim(h) == 1;
	f->can_zero = nbd_lib.nbd_can_zero(h) == 1;
	f->can_fast_zero = nbd_lib.nbd_can_fast_zero(h) == 1;
	f->can_multi_conn = nbd_lib.nbd_can_multi_conn(h) == 1;
	f->rotational = nbd_lib.nbd_is_rotational(h) == 1;
	f->base_allocation =
		nbd_lib.nbd_can_meta_context(h,
					     LIBNBD_CONTEXT_BASE_ALLOCATION) == 1;
	f->bs_min = (uint32_t)bsize(h, LIBNBD_SIZE_MINIMUM);
	f->bs_pref = (uint32_t)bsize(h, LIBNBD_SIZE_PREFERRED);
	f->bs_max = (uint32_t)bsize(h, LIBNBD_SIZE_MAXIMUM);
	f->zero_broken = zero_broken;
}

/* Apply @f's decision to the device. 0, or -EINVAL (the open fails). */
static int apply(struct nbdc *s, const struct nbdc_facts *f)
{
	struct bs_dev *dev = s->dev;
	struct bs_limits *l = &dev->limits;
	uint32_t flags = l->flags, user = l->max_user_sectors;
	struct nbdc_config cfg;

	if (nbdc_config_decide(f, &s->o, &cfg)) {
		snprintf(s->last_error, sizeof(s->last_error), "%s", cfg.why);
		return -EINVAL;
	}
	s->facts = *f;
	s->cfg = cfg;
	s->have_facts = true;
	__atomic_store_n(&s->st_offered, f->base_allocation, __ATOMIC_RELAXED);
	*l = cfg.limits;
	l->flags = flags;
	l->max_user_sectors = user;
	bs_limits_finish(l);
	if (dev->wz_broken) {
		l->max_write_zeroes_sectors = 0;
		l->features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
	}
	dev->size = cfg.size;
	/* follow the server both ways (it may restart read-only, then
	 * read-write again), but never undo the user's "readonly = 1" */
	dev->readonly = s->user_readonly || cfg.readonly;
	nbdc_set_reason(s);
	return 0;
}

void nbdc_set_reason(struct nbdc *s)
{
	const struct nbdc_facts *f = &s->facts;

	if (s->dev->wz_broken)
		return;		/* the core's reason stands */
	if (s->reach.down)
		reach_set_reason(&s->reach);
	else
		bs_dev_set_reason(s->dev, "nbd can_zero=%d can_fast_zero=%d "
				  "can_trim=%d: %s", f->can_zero,
				  f->can_fast_zero, f->can_trim, s->cfg.why);
}

/* ---- bounded reconnect: down after down_after --------------------------- */

static bool any_ready(const struct nbdc *s)
{
	unsigned i;

	for (i = 0; i < NBDC_MAX_CONNS; i++)
		if (s->conns[i].state == NC_READY)
			return true;
	return false;
}

const struct reach_words nbdc_reach_words = {
	.drv = "nbd", .what = "server", .lack = "no connection",
	.back = "a connection is made again",
};

void nbdc_check_down(struct nbdc *s)
{
	if (!reach_check(&s->reach, s->last_error))
		return;
	nbdc_set_reason(s);
	/* what waits for a connection fails now (nbdc_issue sees down) */
	nbdc_issue_waiting(s);
}

/* A connection is ready: reachable again; up if the device was down. */
static void reachable(struct nbdc *s)
{
	if (reach_ok(&s->reach, "connected"))
		nbdc_set_reason(s);
}

static bool facts_differ(const struct nbdc_facts *a, const struct nbdc_facts *b)
{
	return memcmp(a, b, sizeof(*a)) != 0;
}

static void conn_ready(struct nbdc_conn *c)
{
	struct nbdc *s = c->s;
	struct nbdc_facts f;
	unsigned i;
	int err;

	c->state = NC_READY;
	c->connects++;
	if (c->connects > 1)
		s->reconnects++;
	c->last_error[0] = '\0';
	if (c->idx == 0)
		s->failed_connects = 0;
	read_facts(c->h, &f, s->facts.zero_broken);
	if (s->opening) {
		if (c->idx != 0)
			return;
		s->last_error[0] = '\0';
		err = apply(s, &f);
		open_finish(s, err);
		if (err)
			return;
	} else {
		reachable(s);
		if (s->have_facts && facts_differ(&f, &s->facts)) {
			/* the server changed (restarted with other flags,
			 * resized): decide again and tell everything above */
			if (apply(s, &f) == 0)
				bs_dev_limits_changed(s->dev);
		}
	}
	/* multi-conn: the others, once the first told us it may */
	for (i = 1; i < wanted(s); i++)
		if (s->conns[i].state == NC_DOWN && !s->conns[i].timer &&
		    !s->conns[i].h)
			nbdc_conn_start(&s->conns[i]);
	nbdc_issue_waiting(s);
}

/* ---- connecting, losing, reconnecting ------------------------------------ */

static void reconnect_timer(void *arg)
{
	struct nbdc_conn *c = arg;

	c->timer = 0;
	if (c->s->closing || (c->idx >= wanted(c->s) && !c->s->opening))
		return;
	nbdc_conn_start(c);
}

static void schedule_reconnect(struct nbdc_conn *c)
{
	struct nbdc *s = c->s;

	if (s->closing || c->timer)
		return;
	if (c->idx >= wanted(s))
		return;		/* no longer wanted (multi-conn went) */
	c->timer = bs_loop_add_timer(s->loop, s->o.reconnect_ms,
				     reconnect_timer, c);
	if (c->timer < 0)
		c->timer = 0;
}

/* Close @c's handle; its requests in flight go again (outside libnbd). */
static void teardown(struct nbdc_conn *c)
{
	struct nbdc *s = c->s;
	struct nbd_handle *h = c->h;
	struct nbdc_req *r, *next;

	if (!h)
		return;
	c->tearing = true;
	/* stop watching while the descriptor is still open */
	nbdc_kick(c);
	c->state = NC_DOWN;
	nbd_lib.nbd_close(h);	/* callbacks of what it held: retried (tearing) */
	c->h = NULL;
	c->tearing = false;
	c->inflight = 0;
	/* any request libnbd let go without a callback: again */
	for (r = s->reqs; r; r = next) {
		next = r->next;
		if (r->conn != c)
			continue;
		r->conn = NULL;
		if (s->closing)
			continue;
		s->retries++;
		nbdc_issue(r);
	}
}

static void lost_now(void *arg)
{
	struct nbdc_conn *c = arg;
	struct nbdc *s = c->s;

	c->lost_work.fn = NULL;
	if (s->closing)
		return;
	snprintf(c->last_error, sizeof(c->last_error), "%s", c->lost_why);
	snprintf(s->last_error, sizeof(s->last_error), "connection %u: %s",
		 c->idx + 1, c->lost_why);
	if (c->h && (c->state == NC_READY || c->was_ready)) {
		c->lost++;
		/* acknowledged writes no FLUSH has covered may be gone with
		 * a server that restarted */
		if (s->facts.can_flush && s->wseq > s->flushed_seq)
			s->lost_seq = s->wseq;
	}
	c->was_ready = false;
	teardown(c);
	if (!s->opening && !any_ready(s))
		reach_lost(&s->reach);
	if (c->idx == 0 && s->opening) {
		s->failed_connects++;
		if (s->failed_connects > s->o.max_retries) {
			open_finish(s, -EIO);
			return;
		}
	}
	schedule_reconnect(c);
}

void nbdc_conn_lost(struct nbdc_conn *c, const char *why)
{
	struct nbdc *s = c->s;

	if (s->closing)
		return;
	if (c->state == NC_READY) {
		c->state = NC_DOWN;	/* nothing new goes to it */
		c->was_ready = true;
	}
	if (c->lost_work.fn)
		return;
	snprintf(c->lost_why, sizeof(c->lost_why), "%s", why ? why : "lost");
	/* maybe inside a libnbd callback: tear down from the loop */
	c->lost_work.fn = lost_now;
	c->lost_work.arg = c;
	bs_loop_defer(s->loop, &c->lost_work);
}

void nbdc_conn_start(struct nbdc_conn *c)
{
	struct nbdc *s = c->s;
	struct nbd_handle *h;
	const char *e;
	int err;

	if (s->closing || c->h)
		return;
	h = nbd_lib.nbd_create();
	if (!h) {
		nbdc_conn_lost(c, nbd_lib.nbd_get_error());
		return;
	}
	nbd_lib.nbd_set_handle_name(h, s->dev->name);
	/* ask for base:allocation so nbd_can_meta_context() tells whether
	 * block status is there (it is asked on its own handle) */
	nbd_lib.nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION);
	c->h = h;
	c->state = NC_CONNECTING;
	if (nbd_lib.nbd_aio_connect_uri(h, s->o.uri) < 0) {
		e = nbd_lib.nbd_get_error();
		snprintf(c->last_error, sizeof(c->last_error), "%s",
			 e ? e : "connect failed");
		err = nbd_lib.nbd_get_errno();
		c->state = NC_DOWN;
		nbd_lib.nbd_close(h);
		c->h = NULL;
		if (s->opening && (err == EINVAL || err == ENOTSUP ||
				   err == EPROTONOSUPPORT)) {
			/* the URI itself is wrong: trying again will not help */
			snprintf(s->last_error, sizeof(s->last_error), "%s",
				 c->last_error);
			open_finish(s, -EINVAL);
			return;
		}
		nbdc_conn_lost(c, c->last_error);
		return;
	}
	if (!c->pump) {
		err = bs_fdpump_new(s->loop, &nbdc_pump_ops, c, 0, &c->pump);
		if (err) {
			c->pump = NULL;
			nbdc_conn_lost(c, "cannot watch the socket");
			return;
		}
	}
	nbdc_kick(c);
	/* a UNIX socket may be connected already */
	if (nbd_lib.nbd_aio_is_ready(h))
		conn_ready(c);
}

void nbdc_conn_close_all(struct nbdc *s)
{
	unsigned i;

	if (s->open_work.fn)
		bs_loop_cancel_work(s->loop, &s->open_work);
	s->open_work.fn = NULL;
	if (s->open_timer)
		bs_loop_cancel_timer(s->loop, s->open_timer);
	s->open_timer = 0;
	if (s->tick_timer)
		bs_loop_cancel_timer(s->loop, s->tick_timer);
	s->tick_timer = 0;
	for (i = 0; i < NBDC_MAX_CONNS; i++) {
		struct nbdc_conn *c = &s->conns[i];

		if (c->timer)
			bs_loop_cancel_timer(s->loop, c->timer);
		c->timer = 0;
		if (c->lost_work.fn)
			bs_loop_cancel_work(s->loop, &c->lost_work);
		c->lost_work.fn = NULL;
		if (c->h && c->state == NC_READY)
			nbd_lib.nbd_aio_disconnect(c->h, 0);
		teardown(c);
		bs_fdpump_free(c->pump);
		c->pump = NULL;
	}
}
