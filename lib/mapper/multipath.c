/* SPDX-License-Identifier: MIT */
/*
 * multipath: several paths (components) to ONE volume, dm-multipath's job
 * for remote leaves (two sd devices = two iSCSI sessions to one LUN).
 * Every request goes whole to one live path: the first live one, kept
 * until it fails (failover, the default), or the next live one in turn
 * (round-robin).
 *
 * A request that fails on a path with an error that may be the path's
 * (the block layer's blk_path_error(): anything but a target, medium,
 * protection, reservation, no-space or not-supported status; here also
 * EINVAL, EROFS and our own ENOMEM) marks the path failed and is sent to
 * another live path. With no live path the request waits in a queue for
 * up to queue_if_no_path (0: it fails at once with EIO), then fails with
 * EIO. Failed paths are tried again in the background, one read of block
 * 0 every retry_interval; the path rejoins when it succeeds and the queue
 * is sent out again.
 *
 * FLUSH goes to EVERY live path, not one: a write acknowledged by path
 * a may sit in a cache only a's connection or server flushes (a client
 * cache, one server process of several), so a flush routed to b alone
 * would make nothing durable. The flush succeeds when every live path
 * flushed; a path that fails it with a path error is marked failed (its
 * connection is gone; the volume's own cache was flushed through the
 * others) and the flush still succeeds if at least one path flushed;
 * with none, it is retried on whatever is live or queues like any
 * request. An error of the request itself (not a path's) is returned.
 *
 * Limits come from the live paths only (with none live, from every
 * path), so a path without unmap zeroing takes WRITE_ZEROES_UNMAP away
 * while it is live and gives it back when it fails; every state change
 * restacks here and above (bs_dev_limits_changed()).
 *
 * Threads: path state and the queue are under m->lock, read and changed
 * by every I/O thread; the checker's timer and its reads run on the main
 * loop; a request is always resubmitted and completed on the loop it was
 * submitted on (a queued one is sent home with bs_loop_send()).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/net.h>
#include <blkstack/opts.h>

#include "mapper/mapper.h"

#define MAX_PATHS 64
#define TICK_MS 200		/* the checker's and the queue's clock */
#define CLOSE_WAIT_NS 2000000000ull

enum policy { POLICY_FAILOVER, POLICY_ROUND_ROBIN };

static const char *const policy_names[] = { "failover", "round-robin", NULL };

struct mpath;

struct path {
	struct mpath *m;
	unsigned idx;
	bool live;		/* under m->lock */
	uint64_t failures;	/* times it was marked failed (m->lock) */
	int last_err;		/* the error that failed it last (m->lock) */
	enum bs_op last_op;
	uint64_t last_off;
	uint64_t failed_ns;	/* when it was failed (m->lock) */
	uint64_t ios;		/* requests sent to it (atomic) */
	/* the background check: main loop only */
	bool checking;
	uint64_t last_check_ns;
	uint64_t checks_failed;
	int check_err;
	struct bs_req check;
	void *check_buf;
};

/* What multipath keeps per request (the type's req_ctx). */
struct mreq {
	struct bs_req kid;	/* the request on the chosen path */
	struct bs_req *parent;
	struct mpath *m;
	unsigned path;
	uint64_t queued_ns;	/* first time it queued; 0 = never */
	struct mreq *qnext;
	struct bs_work work;	/* sends it home from the queue */
	int fail;		/* when sent home: finish with this */
};

struct mpath {
	struct bs_dev *dev;
	pthread_mutex_t lock;
	struct path *paths;
	unsigned n, nlive;
	unsigned cur;		/* failover: the path in use; rr: the next */
	enum policy policy;
	unsigned queue_ms;	/* queue_if_no_path */
	unsigned retry_ms;	/* retry_interval */
	struct mreq *qhead, *qtail;	/* waiting for a live path */
	unsigned nqueued;
	/* main loop */
	int timer;
	bool closing;		/* written under @lock */
	/* counters (atomic) */
	uint64_t retried, queued, queue_timeouts;
};

static const char *err_name(int err, char *buf, size_t len)
{
	switch (-err) {
	case EIO: return "EIO";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNRESET: return "ECONNRESET";
	case ENXIO: return "ENXIO";
	case ENODEV: return "ENODEV";
	case EAGAIN: return "EAGAIN";
	case EPIPE: return "EPIPE";
	case ENOLINK: return "ENOLINK";
	case EBADMSG: return "EBADMSG";
	case EPROTO: return "EPROTO";
	default:
		snprintf(buf, len, "errno %d", -err);
		return buf;
	}
}

/*
 * Is @err a failure of the path rather than of the request? As the block
 * layer's blk_path_error(): not for not-supported (EOPNOTSUPP), no space
 * (ENOSPC, EDQUOT, EFBIG), a target error (EREMOTEIO), a medium error
 * (ENODATA), protection (EILSEQ) or a reservation conflict (EBADE). Also
 * not for a request the path refused as invalid or read-only (EINVAL,
 * EROFS: every path would) or our own ENOMEM. Anything else may be the
 * path, so it is retried on another one.
 */
static bool is_path_error(int err)
{
	switch (-err) {
	case 0:
	case EOPNOTSUPP:
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
	case EREMOTEIO:
	case ENODATA:
	case EILSEQ:
	case EBADE:
	case EINVAL:
	case EROFS:
	case ENOMEM:
		return false;
	default:
		return true;
	}
}

/* ---- limits -------------------------------------------------------------- */

static int mpath_stack(struct bs_dev *dev, struct bs_limits *lim)
{
	struct mpath *m = dev->priv;
	bool live[MAX_PATHS];
	struct {
		uint64_t failures;
		int err;
		enum bs_op op;
	} ps[MAX_PATHS];
	unsigned i, nlive;
	size_t o;
	int err;

	pthread_mutex_lock(&m->lock);	/* I/O threads may fail a path */
	nlive = m->nlive;
	for (i = 0; i < m->n; i++) {
		live[i] = m->paths[i].live;
		ps[i].failures = m->paths[i].failures;
		ps[i].err = m->paths[i].last_err;
		ps[i].op = m->paths[i].last_op;
	}
	pthread_mutex_unlock(&m->lock);
	/* only live paths count; with none live, every path (nothing else
	 * to go by until one comes back) */
	err = mp_stack_components(dev, lim, nlive ? live : NULL, NULL);
	if (err)
		return err;
	if (nlive && bs_limits_write_zeroes_unmap(lim))
		snprintf(dev->wz_reason, sizeof(dev->wz_reason),
			 "multipath: every live path has it (%u live)", nlive);
	else if (!nlive)
		snprintf(dev->wz_reason, sizeof(dev->wz_reason),
			 "multipath: no live path: limits from every path");
	/* the paths and their states, in the rule explain prints */
	o = strlen(dev->wz_reason);
	for (i = 0; i < m->n && o < sizeof(dev->wz_reason); i++) {
		char b[24];

		if (live[i] && !ps[i].failures)
			o += (size_t)snprintf(dev->wz_reason + o,
					      sizeof(dev->wz_reason) - o,
					      "%s%s live", i ? ", " : "; paths ",
					      dev->components[i]->name);
		else
			o += (size_t)snprintf(dev->wz_reason + o,
					      sizeof(dev->wz_reason) - o,
					      "%s%s %s (failures %llu, last %s on %s)",
					      i ? ", " : "; paths ",
					      dev->components[i]->name,
					      live[i] ? "live" : "failed",
					      (unsigned long long)ps[i].failures,
					      err_name(ps[i].err, b, sizeof(b)),
					      bs_op_name(ps[i].op));
	}
	return 0;
}

/* ---- choosing a path ----------------------------------------------------- */

/* Under m->lock: the path for the next request, or -1 when none is live. */
static int pick_locked(struct mpath *m)
{
	unsigned k, i;

	if (!m->nlive)
		return -1;
	if (m->policy == POLICY_FAILOVER && m->paths[m->cur].live)
		return (int)m->cur;
	for (k = 0; k < m->n; k++) {
		i = (m->cur + k) % m->n;
		if (!m->paths[i].live)
			continue;
		m->cur = m->policy == POLICY_FAILOVER ? i : (i + 1) % m->n;
		return (int)i;
	}
	return -1;
}

static void kid_done(struct bs_req *kid);
static void dispatch(struct mreq *mr);
static void fail_path(struct mpath *m, unsigned i, const struct bs_req *r);

/* A FLUSH fanned out to every live path. */
struct fan {
	struct mreq *mr;
	unsigned pending;	/* atomic */
	unsigned nok;		/* atomic: paths that flushed */
	int err;		/* atomic: first error of the request itself */
	unsigned path[MAX_PATHS];
	struct bs_req kids[];
};

static void fan_done(struct bs_req *kid)
{
	struct fan *f = kid->priv;
	struct mreq *mr = f->mr;
	struct mpath *m = mr->m;
	unsigned k = (unsigned)(kid - f->kids);
	int res = kid->result, zero = 0, err;

	if (!res)
		__atomic_fetch_add(&f->nok, 1, __ATOMIC_RELAXED);
	else if (is_path_error(res))
		fail_path(m, f->path[k], kid);
	else
		__atomic_compare_exchange_n(&f->err, &zero, res, false,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&f->pending, 1, __ATOMIC_ACQ_REL))
		return;
	err = __atomic_load_n(&f->err, __ATOMIC_RELAXED);
	if (!err && !__atomic_load_n(&f->nok, __ATOMIC_RELAXED)) {
		/* every path it reached failed: again on what is live */
		free(f);
		__atomic_fetch_add(&m->retried, 1, __ATOMIC_RELAXED);
		dispatch(mr);
		return;
	}
	free(f);
	bs_req_complete(mr->parent, err);
}

/* Send the FLUSH in @mr to the @n live paths in @live. */
static void flush_all(struct mreq *mr, const unsigned *live, unsigned n)
{
	struct bs_req *parent = mr->parent;
	struct mpath *m = mr->m;
	struct fan *f;
	unsigned k;

	f = calloc(1, sizeof(*f) + n * sizeof(f->kids[0]));
	if (!f) {
		bs_req_complete(parent, -ENOMEM);
		return;
	}
	f->mr = mr;
	f->pending = n;
	for (k = 0; k < n; k++) {
		f->path[k] = live[k];
		bs_req_init(&f->kids[k], BS_OP_FLUSH, parent->flags, 0, 0,
			    NULL, fan_done, f);
	}
	/* the last completion frees f: read nothing of it after that */
	for (k = 0; k < n; k++) {
		__atomic_fetch_add(&m->paths[live[k]].ios, 1,
				   __ATOMIC_RELAXED);
		bs_submit(m->dev->components[live[k]], &f->kids[k]);
	}
}

static void send_to(struct mreq *mr, unsigned p)
{
	struct bs_req *parent = mr->parent;
	struct mpath *m = mr->m;

	mr->path = p;
	__atomic_fetch_add(&m->paths[p].ios, 1, __ATOMIC_RELAXED);
	bs_req_init(&mr->kid, parent->op, parent->flags, parent->offset,
		    parent->len, NULL, kid_done, mr);
	mr->kid.iov = parent->iov;
	mr->kid.iovcnt = parent->iovcnt;
	bs_submit(m->dev->components[p], &mr->kid);
}

/* On the request's own loop: to a live path, else queue or fail. */
static void dispatch(struct mreq *mr)
{
	struct mpath *m = mr->m;
	unsigned live[MAX_PATHS], nlive = 0, i;
	int p;

	pthread_mutex_lock(&m->lock);
	p = pick_locked(m);
	if (p >= 0 && mr->parent->op == BS_OP_FLUSH)
		for (i = 0; i < m->n; i++)
			if (m->paths[i].live)
				live[nlive++] = i;
	if (p < 0 && m->queue_ms && !m->closing) {
		/* one step with the pick: a path rejoining flushes the queue
		 * under this lock, so nothing is left behind */
		if (!mr->queued_ns) {
			mr->queued_ns = bs_now_ns();
			__atomic_fetch_add(&m->queued, 1, __ATOMIC_RELAXED);
		}
		mr->qnext = NULL;
		if (m->qtail)
			m->qtail->qnext = mr;
		else
			m->qhead = mr;
		m->qtail = mr;
		m->nqueued++;
		pthread_mutex_unlock(&m->lock);
		return;
	}
	pthread_mutex_unlock(&m->lock);
	if (p < 0) {
		bs_req_complete(mr->parent, -EIO);
		return;
	}
	if (nlive) {
		flush_all(mr, live, nlive);
		return;
	}
	send_to(mr, (unsigned)p);
}

static void fail_path(struct mpath *m, unsigned i, const struct bs_req *r)
{
	struct path *p = &m->paths[i];
	bool changed = false;

	pthread_mutex_lock(&m->lock);
	if (p->live) {
		p->live = false;
		m->nlive--;
		p->failures++;
		p->last_err = r->result;
		p->last_op = r->op;
		p->last_off = r->offset;
		p->failed_ns = bs_now_ns();
		changed = true;
	}
	pthread_mutex_unlock(&m->lock);
	/* restack from the live paths, here and above (on the main loop) */
	if (changed)
		bs_dev_limits_changed(m->dev);
}

static void kid_done(struct bs_req *kid)
{
	struct mreq *mr = kid->priv;

	if (!is_path_error(kid->result)) {
		bs_req_complete(mr->parent, kid->result);
		return;
	}
	fail_path(mr->m, mr->path, kid);
	__atomic_fetch_add(&mr->m->retried, 1, __ATOMIC_RELAXED);
	dispatch(mr);
}

static void mpath_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct mreq *mr = bs_req_drv(req);

	mr->parent = req;
	mr->m = dev->priv;
	dispatch(mr);
}

/* ---- the queue (taken apart on the main loop, run at home) -------------- */

static void home(void *arg)
{
	struct mreq *mr = arg;

	if (mr->fail)
		bs_req_complete(mr->parent, mr->fail);
	else
		dispatch(mr);
}

static void send_home(struct mreq *mr, int fail)
{
	mr->fail = fail;
	mr->work.fn = home;
	mr->work.arg = mr;
	bs_loop_send(mr->parent->loop, &mr->work);
}

/*
 * Take from the queue every request when a path is live (they go out
 * again) and those older than queue_if_no_path (they fail with EIO), or
 * every one with @all (closing). Main loop.
 */
static void run_queue(struct mpath *m, bool all)
{
	struct mreq *go = NULL, *fail = NULL, **pp, *mr;
	uint64_t now = bs_now_ns(), max = (uint64_t)m->queue_ms * 1000000;

	pthread_mutex_lock(&m->lock);
	for (pp = &m->qhead; (mr = *pp);) {
		bool expired = all || now - mr->queued_ns >= max;

		if (!expired && !m->nlive) {
			pp = &mr->qnext;
			continue;
		}
		*pp = mr->qnext;
		m->nqueued--;
		if (expired) {
			mr->qnext = fail;
			fail = mr;
		} else {
			mr->qnext = go;
			go = mr;
		}
	}
	m->qtail = NULL;
	for (mr = m->qhead; mr; mr = mr->qnext)
		m->qtail = mr;
	pthread_mutex_unlock(&m->lock);
	while ((mr = fail)) {
		fail = mr->qnext;
		__atomic_fetch_add(&m->queue_timeouts, 1, __ATOMIC_RELAXED);
		send_home(mr, -EIO);
	}
	while ((mr = go)) {
		go = mr->qnext;
		send_home(mr, 0);
	}
}

/* ---- background checks (main loop) -------------------------------------- */

static void check_done(struct bs_req *r)
{
	struct path *p = r->priv;
	struct mpath *m = p->m;
	bool rejoined = false;

	p->checking = false;
	p->last_check_ns = bs_now_ns();
	if (m->closing)
		return;
	if (r->result) {
		p->checks_failed++;
		p->check_err = r->result;
		return;
	}
	pthread_mutex_lock(&m->lock);
	if (!p->live) {
		p->live = true;
		m->nlive++;
		rejoined = true;
	}
	pthread_mutex_unlock(&m->lock);
	if (rejoined) {
		bs_dev_limits_changed(m->dev);
		run_queue(m, false);
	}
}

static void start_check(struct mpath *m, struct path *p)
{
	struct bs_dev *c = m->dev->components[p->idx];

	p->checking = true;
	bs_req_init(&p->check, BS_OP_READ, 0, 0, c->limits.logical_block_size,
		    p->check_buf, check_done, p);
	bs_submit(c, &p->check);
}

static void tick(void *arg)
{
	struct mpath *m = arg;
	uint64_t now = bs_now_ns(), every = (uint64_t)m->retry_ms * 1000000;
	unsigned i;

	m->timer = 0;
	for (i = 0; i < m->n; i++) {
		struct path *p = &m->paths[i];
		bool due;

		if (p->checking)
			continue;
		pthread_mutex_lock(&m->lock);
		due = !p->live && now - p->failed_ns >= every &&
		      now - p->last_check_ns >= every;
		pthread_mutex_unlock(&m->lock);
		if (due)
			start_check(m, p);
	}
	run_queue(m, false);
	m->timer = bs_loop_add_timer(bs_ctx_loop(m->dev->ctx),
				     m->retry_ms < TICK_MS ? m->retry_ms
							   : TICK_MS,
				     tick, m);
	if (m->timer < 0)
		m->timer = 0;	/* no timer: checks stop; said in info */
}

/* ---- open / close -------------------------------------------------------- */

static void mpath_free(struct mpath *m)
{
	unsigned i;

	if (!m)
		return;
	for (i = 0; m->paths && i < m->n; i++)
		free(m->paths[i].check_buf);
	free(m->paths);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static int parse_ms(struct bs_dev *dev, struct bs_opts *opts, const char *key,
		    unsigned *out)
{
	const char *s = bs_opts_get(opts, key);

	if (!s)
		return 0;
	if (bs_net_parse_ms(s, out))
		return bs_error(-EINVAL, "%s: multipath: %s = '%s': not a "
				"duration (SECONDS, 0.5, 250ms)", dev->name,
				key, s);
	return 0;
}

static int check_paths(struct bs_dev *dev)
{
	struct bs_dev **c = dev->components;
	unsigned n = dev->ncomponents, i, j;

	if (n > MAX_PATHS)
		return bs_error(-EINVAL, "%s: multipath: %u paths, at most %d",
				dev->name, n, MAX_PATHS);
	for (i = 0; i < n; i++) {
		for (j = 0; j < i; j++)
			if (c[j] == c[i])
				return bs_error(-EINVAL, "%s: multipath: path %s "
						"is listed twice", dev->name,
						c[i]->name);
		if (c[i]->size != c[0]->size)
			return bs_error(-EINVAL, "%s: multipath: paths must "
					"agree on size: %s has %llu bytes, %s "
					"has %llu", dev->name, c[i]->name,
					(unsigned long long)c[i]->size,
					c[0]->name,
					(unsigned long long)c[0]->size);
		if (c[i]->limits.logical_block_size !=
		    c[0]->limits.logical_block_size)
			return bs_error(-EINVAL, "%s: multipath: paths must "
					"agree on logical_block_size: %s has %u, "
					"%s has %u", dev->name, c[i]->name,
					c[i]->limits.logical_block_size,
					c[0]->name,
					c[0]->limits.logical_block_size);
	}
	return 0;
}

static int mpath_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct bs_limits lim;
	struct mpath *m;
	unsigned i, n = dev->ncomponents;
	int pol = POLICY_FAILOVER, err;

	err = check_paths(dev);
	if (err)
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->dev = dev;
	m->n = n;
	m->queue_ms = 30000;
	m->retry_ms = 1000;
	err = bs_opts_get_enum(opts, "policy", policy_names, &pol);
	if (err < 0)
		goto fail;
	m->policy = (enum policy)pol;
	if ((err = parse_ms(dev, opts, "queue_if_no_path", &m->queue_ms)) ||
	    (err = parse_ms(dev, opts, "retry_interval", &m->retry_ms)))
		goto fail;
	if (!m->retry_ms) {
		err = bs_error(-EINVAL, "%s: multipath: retry_interval must "
			       "be above 0", dev->name);
		goto fail;
	}
	m->paths = calloc(n, sizeof(*m->paths));
	if (!m->paths) {
		err = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < n; i++) {
		struct path *p = &m->paths[i];
		uint32_t lbs = dev->components[i]->limits.logical_block_size;

		p->m = m;
		p->idx = i;
		p->live = true;
		if (posix_memalign(&p->check_buf, 4096, lbs)) {
			err = -ENOMEM;
			goto fail;
		}
	}
	m->nlive = n;
	dev->priv = m;
	dev->size = dev->components[0]->size;
	bs_limits_init_stacking(&lim);
	err = mpath_stack(dev, &lim);
	if (err)
		goto fail;
	m->timer = bs_loop_add_timer(bs_ctx_loop(dev->ctx),
				     m->retry_ms < TICK_MS ? m->retry_ms
							   : TICK_MS,
				     tick, m);
	if (m->timer < 0) {
		err = bs_error(m->timer, "%s: multipath: no timer for the "
			       "path checker", dev->name);
		goto fail;
	}
	return 0;
fail:
	dev->priv = NULL;
	mpath_free(m);
	return err;
}

static bool checks_busy(struct mpath *m)
{
	unsigned i;

	for (i = 0; i < m->n; i++)
		if (m->paths[i].checking)
			return true;
	return false;
}

static void mpath_close(struct bs_dev *dev)
{
	struct mpath *m = dev->priv;
	struct bs_loop *main_loop = bs_ctx_loop(dev->ctx);
	uint64_t until = bs_now_ns() + CLOSE_WAIT_NS;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);	/* dispatch() reads it */
	m->closing = true;
	pthread_mutex_unlock(&m->lock);
	if (m->timer > 0)
		bs_loop_cancel_timer(main_loop, m->timer);
	m->timer = 0;
	/* nothing should wait here (exports drain first): fail what does */
	run_queue(m, true);
	/* a background read still on a path: let it finish, a little */
	while (checks_busy(m) && bs_now_ns() < until)
		if (bs_loop_run_once(main_loop, 50))
			break;
	if (checks_busy(m))
		return;	/* its completion still points here: keep m */
	mpath_free(m);
	dev->priv = NULL;
}

/* ---- the rest ------------------------------------------------------------ */

static int mpath_block_status(struct bs_dev *dev, uint64_t offset,
			      uint64_t len, bs_extent_fn fn, void *arg)
{
	struct mpath *m = dev->priv;
	int p;

	pthread_mutex_lock(&m->lock);
	p = pick_locked(m);
	pthread_mutex_unlock(&m->lock);
	/* one volume: any path tells */
	return bs_block_status(dev->components[p < 0 ? 0 : p], offset, len,
			       fn, arg);
}

static int64_t mpath_allocated(struct bs_dev *dev)
{
	struct mpath *m = dev->priv;
	int p;

	pthread_mutex_lock(&m->lock);
	p = pick_locked(m);
	pthread_mutex_unlock(&m->lock);
	return bs_dev_allocated(dev->components[p < 0 ? 0 : p]);
}

static void mpath_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct mpath *m = dev->priv;
	unsigned i;

	pthread_mutex_lock(&m->lock);
	kv(arg, "paths", "%u (%u live)", m->n, m->nlive);
	kv(arg, "state", "%s", m->nlive == m->n ? "optimal"
			       : m->nlive ? "degraded"
			       : "no live path: requests queue");
	kv(arg, "policy", "%s", policy_names[m->policy]);
	kv(arg, "queue_if_no_path", "%u ms%s", m->queue_ms,
	   m->queue_ms ? "" : " (fail at once)");
	kv(arg, "retry_interval", "%u ms%s", m->retry_ms,
	   m->timer ? "" : " (checker stopped: no timer)");
	kv(arg, "queued_now", "%u", m->nqueued);
	for (i = 0; i < m->n; i++) {
		struct path *p = &m->paths[i];
		char key[32], b[24], c[24], last[96] = "";

		snprintf(key, sizeof(key), "path%u", i);
		if (p->failures)
			snprintf(last, sizeof(last), ", last %s on %s at %llu",
				 err_name(p->last_err, b, sizeof(b)),
				 bs_op_name(p->last_op),
				 (unsigned long long)p->last_off);
		kv(arg, key, "%s %s, ios %llu, failures %llu%s, checks failed "
		   "%llu%s%s", dev->components[i]->name,
		   p->live ? "live" : "failed",
		   (unsigned long long)__atomic_load_n(&p->ios, __ATOMIC_RELAXED),
		   (unsigned long long)p->failures, last,
		   (unsigned long long)p->checks_failed,
		   p->checks_failed ? ", last check " : "",
		   p->checks_failed ? err_name(p->check_err, c, sizeof(c)) : "");
	}
	pthread_mutex_unlock(&m->lock);
	kv(arg, "retried", "%llu", (unsigned long long)
	   __atomic_load_n(&m->retried, __ATOMIC_RELAXED));
	kv(arg, "queued", "%llu", (unsigned long long)
	   __atomic_load_n(&m->queued, __ATOMIC_RELAXED));
	kv(arg, "queue_timeouts", "%llu", (unsigned long long)
	   __atomic_load_n(&m->queue_timeouts, __ATOMIC_RELAXED));
}

static const struct bs_dev_type multipath_type = {
	.name = "multipath",
	.summary = "paths to one volume: failover or round robin, failed "
		   "paths retried in the background",
	.options =
		"devices=A B ...      the paths, one or more (required): devices\n"
		"                     reaching ONE volume; they must agree on\n"
		"                     size and logical block size\n"
		"policy=failover|round-robin  failover: the first live path until\n"
		"                     it fails (default); round-robin: each\n"
		"                     request to the next live path\n"
		"queue_if_no_path=SECONDS  with no live path requests wait this\n"
		"                     long for one, then fail with EIO; 0 = fail\n"
		"                     at once (default 30; 250ms also works)\n"
		"retry_interval=SECONDS  a failed path is checked (a read of\n"
		"                     block 0) this often and rejoins when it\n"
		"                     works (default 1)\n",
	.stacked = true,
	.req_ctx_size = sizeof(struct mreq),
	.open = mpath_open,
	.close = mpath_close,
	.submit = mpath_submit,
	.stack_limits = mpath_stack,
	.block_status = mpath_block_status,
	.allocated = mpath_allocated,
	.describe = mpath_describe,
};

BS_DEV_TYPE(multipath_type)
