/* SPDX-License-Identifier: MIT */
/*
 * rbd: a Ceph RBD image as a blkstack device, on librbd's asynchronous
 * API (rbd_aio_*).
 *
 * Opening blocks (connecting to the monitors, opening or creating the
 * image), so open() returns BS_OPEN_PENDING and does it on the context's
 * worker pool; the job's done() runs on the main loop and finishes the
 * open with the limits of rbd_config_decide() (drivers/rbd_config.c).
 *
 * Requests: a librbd image handle is thread-safe, so a request is given to
 * librbd on the loop that submitted it, whichever I/O thread that is, with
 * no hand-over; many are in flight at once. librbd completes on its own
 * threads: the completion callback reads the result, releases the
 * completion and calls bs_req_complete(), which sends the request back to
 * its loop (bs_loop_send: an intrusive work item and the loop's eventfd);
 * the submitter's callback runs there.
 *
 * Zeroing (why, in rbd_config.h): write-zeroes is rbd_aio_write_zeroes
 * without flags (whole objects removed, the rest zeroed), or with
 * RBD_WRITE_ZEROES_FLAG_THICK_PROVISION for NOUNMAP or when the user
 * turned unmap zeroing off (zeroes written, objects stay). Discard is
 * rbd_aio_discard (the image's discard granularity applies). FLUSH is
 * rbd_aio_flush; there is no native FUA (the core flushes after).
 * Block status and `allocated` come from rbd_diff_iterate2 over whole
 * objects (the object map when the image has fast-diff), which blocks the
 * calling loop. Block status walks in pieces of STATUS_CHUNK_OBJS objects
 * and stops after the piece that used up status_budget (100 ms): what was
 * found is reported, the rest is left undescribed, which the core reports
 * as data (always a true answer: a client reads it, or asks again);
 * `block_status_cut` in info counts such calls. Without fast-diff every
 * object is a round trip, and a big image's map could hold an I/O thread
 * for seconds.
 */
#if __has_include(<rbd/librbd.h>)

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/net.h>
#include <blkstack/opts.h>
#include <blkstack/workers.h>

#include "drivers/rbd_config.h"
#include "drivers/rbd_lib.h"

struct rbdd {
	struct bs_dev *dev;
	char pool[RBD_NAME_MAX], image[RBD_NAME_MAX];
	char *conf, *id;
	uint64_t create_size;		/* 0: the image must exist */
	uint32_t timeout_s;
	uint32_t max_io;
	unsigned status_budget_ms;	/* 0: no bound */
	bool readonly;

	rados_t cluster;
	rados_ioctx_t io;
	rbd_image_t img;

	/* the open, on a worker */
	struct bs_job job;
	bool job_running;
	bool closing;
	bool created;
	char err[1024];

	uint64_t features, flags;
	struct rbd_facts facts;
	struct rbd_config cfg;
	uint64_t inflight;		/* atomic */
	uint64_t inflight_peak;		/* atomic: the most at once */
	uint64_t wz_thick;		/* atomic: write-zeroes sent thick */
	uint64_t wz_unmap;		/* atomic: write-zeroes that may unmap */
	uint64_t status_calls;		/* atomic: block status calls */
	uint64_t status_cut;		/* atomic: stopped by the budget */
	bool wt_until_flush;		/* rbd_cache_writethrough_until_flush */
	int open_flush;			/* 1: flushed at open; <= 0: see info */
};

struct rbdd_req {
	struct bs_req *req;
	struct rbdd *s;
};

/* ---- requests ------------------------------------------------------------ */

/* On a librbd thread. */
static void aio_done(rbd_completion_t c, void *arg)
{
	struct rbdd_req *r = arg;
	struct rbdd *s = r->s;
	struct bs_req *req = r->req;
	ssize_t ret = rbd_lib.rbd_aio_get_return_value(c);

	rbd_lib.rbd_aio_release(c);
	__atomic_fetch_sub(&s->inflight, 1, __ATOMIC_RELAXED);
	bs_req_complete(req, ret < 0 ? (int)ret : 0);
}

/* One more in flight; the peak shows that requests overlap (info). */
static void note_inflight(struct rbdd *s)
{
	uint64_t n = __atomic_add_fetch(&s->inflight, 1, __ATOMIC_RELAXED);
	uint64_t peak = __atomic_load_n(&s->inflight_peak, __ATOMIC_RELAXED);

	while (n > peak &&
	       !__atomic_compare_exchange_n(&s->inflight_peak, &peak, n, true,
					    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
}

static void rbdd_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct rbdd *s = dev->priv;
	struct rbdd_req *r = bs_req_drv(req);
	rbd_completion_t c;
	int flags, err;

	r->req = req;
	r->s = s;
	err = rbd_lib.rbd_aio_create_completion(r, aio_done, &c);
	if (err < 0) {
		bs_req_complete(req, err);
		return;
	}
	note_inflight(s);
	switch (req->op) {
	case BS_OP_READ:
		err = rbd_lib.rbd_aio_readv(s->img, req->iov, req->iovcnt,
				    req->offset, c);
		break;
	case BS_OP_WRITE:
		err = rbd_lib.rbd_aio_writev(s->img, req->iov, req->iovcnt,
				     req->offset, c);
		break;
	case BS_OP_FLUSH:
		err = rbd_lib.rbd_aio_flush(s->img, c);
		break;
	case BS_OP_DISCARD:
		err = rbd_lib.rbd_aio_discard(s->img, req->offset, req->len, c);
		break;
	case BS_OP_WRITE_ZEROES:
		/* may unmap only when the request and the knob allow it */
		flags = 0;
		if ((req->flags & BS_REQ_NOUNMAP) ||
		    !bs_dev_write_zeroes_unmap(dev))
			flags = RBD_WRITE_ZEROES_FLAG_THICK_PROVISION;
		__atomic_fetch_add(flags ? &s->wz_thick : &s->wz_unmap, 1,
				   __ATOMIC_RELAXED);
		err = rbd_lib.rbd_aio_write_zeroes(s->img, req->offset,
						   req->len, c, flags, 0);
		break;
	default:
		err = -EOPNOTSUPP;
		break;
	}
	if (err < 0) {
		rbd_lib.rbd_aio_release(c);
		__atomic_fetch_sub(&s->inflight, 1, __ATOMIC_RELAXED);
		bs_req_complete(req, err);
	}
}

/* ---- allocation map ------------------------------------------------------ */

struct ext_list {
	pthread_mutex_t lock;
	struct { uint64_t off, len; } *v;
	size_t n, cap;
	int err;
};

static int ext_add(uint64_t off, size_t len, int exists, void *arg)
{
	struct ext_list *l = arg;
	int err = 0;

	if (!exists || !len)
		return 0;
	pthread_mutex_lock(&l->lock);
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		void *v = realloc(l->v, cap * sizeof(*l->v));

		if (!v) {
			l->err = err = -ENOMEM;
			goto out;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n].off = off;
	l->v[l->n].len = len;
	l->n++;
out:
	pthread_mutex_unlock(&l->lock);
	return err;
}

static int ext_cmp(const void *a, const void *b)
{
	const uint64_t *x = a, *y = b;

	return *x < *y ? -1 : *x > *y;
}

/* The allocated extents of [off, off+len), sorted; -errno. */
static int diff_extents(struct rbdd *s, uint64_t off, uint64_t len,
			struct ext_list *l)
{
	int err;

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	err = rbd_lib.rbd_diff_iterate2(s->img, NULL, off, len, 1, 1, ext_add, l);
	pthread_mutex_destroy(&l->lock);
	if (!err)
		err = l->err;
	if (err) {
		free(l->v);
		l->v = NULL;
		return bs_error(err, "%s: rbd %s/%s: rbd_diff_iterate2: %s",
				s->dev->name, s->pool, s->image,
				strerror(-err));
	}
	if (l->n > 1)
		qsort(l->v, l->n, sizeof(*l->v), ext_cmp);
	return 0;
}

/* Objects per rbd_diff_iterate2 call of block status (a budget check). */
#define STATUS_CHUNK_OBJS 64

/*
 * The allocated extents of [offset, offset+len) found within the budget:
 * whole pieces from @offset; *covered is where the walk stopped.
 */
static int status_extents(struct rbdd *s, uint64_t offset, uint64_t len,
			  struct ext_list *l, uint64_t *covered)
{
	uint64_t end = offset + len, cur = offset, piece, n;
	uint64_t until = bs_now_ns() +
			 (uint64_t)s->status_budget_ms * 1000000;
	struct ext_list part;
	size_t i;
	int err;

	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->lock, NULL);
	piece = (s->facts.obj_size ? s->facts.obj_size : (4u << 20)) *
		STATUS_CHUNK_OBJS;
	while (cur < end) {
		/* pieces on object-group boundaries */
		n = piece - cur % piece;
		if (n > end - cur)
			n = end - cur;
		err = diff_extents(s, cur, n, &part);
		for (i = 0; !err && i < part.n; i++)
			err = ext_add(part.v[i].off, part.v[i].len, 1, l);
		if (!err)
			free(part.v);
		if (err) {
			pthread_mutex_destroy(&l->lock);
			free(l->v);
			return err;
		}
		cur += n;
		if (cur < end && s->status_budget_ms && bs_now_ns() >= until) {
			__atomic_fetch_add(&s->status_cut, 1, __ATOMIC_RELAXED);
			break;
		}
	}
	pthread_mutex_destroy(&l->lock);
	*covered = cur;
	return 0;
}

static int rbdd_block_status(struct bs_dev *dev, uint64_t offset,
			     uint64_t len, bs_extent_fn fn, void *arg)
{
	struct rbdd *s = dev->priv;
	uint64_t cur = offset, end, a, b;
	struct ext_list l;
	size_t i;
	int err;

	__atomic_fetch_add(&s->status_calls, 1, __ATOMIC_RELAXED);
	err = status_extents(s, offset, len, &l, &end);
	if (err)
		return err;
	for (i = 0; i < l.n && cur < end; i++) {
		a = l.v[i].off;
		b = a + l.v[i].len;
		if (a < cur)
			a = cur;	/* overlapping or before: the rest */
		if (b > end)
			b = end;
		if (b <= a)
			continue;
		if (a > cur && fn(arg, cur, a - cur, BS_EXT_HOLE | BS_EXT_ZERO))
			goto out;
		if (fn(arg, a, b - a, 0))
			goto out;
		cur = b;
	}
	if (cur < end)
		fn(arg, cur, end - cur, BS_EXT_HOLE | BS_EXT_ZERO);
out:
	free(l.v);
	return 0;
}

/* What `rbd du` counts: the bytes of the objects that exist. */
static int64_t rbdd_allocated(struct bs_dev *dev)
{
	struct rbdd *s = dev->priv;
	uint64_t sum = 0, cur = 0, a, b;
	struct ext_list l;
	size_t i;
	int err;

	if (!s || !s->img)
		return -EOPNOTSUPP;
	err = diff_extents(s, 0, s->facts.size, &l);
	if (err)
		return err;
	for (i = 0; i < l.n; i++) {
		a = l.v[i].off > cur ? l.v[i].off : cur;
		b = l.v[i].off + l.v[i].len;
		if (b > a) {
			sum += b - a;
			cur = b;
		}
	}
	free(l.v);
	return (int64_t)sum;
}

/* ---- the open, on a worker ------------------------------------------------ */

static int fail_at(struct rbdd *s, int err, const char *what)
{
	snprintf(s->err, sizeof(s->err), "rbd %s/%s: %s: %s", s->pool,
		 s->image, what, strerror(err < 0 ? -err : err));
	return err < 0 ? err : -EIO;
}

/* A boolean or size option as librbd will see it: the image's own
 * metadata override (conf_NAME) first, then the cluster configuration. */
static int conf_value(struct rbdd *s, const char *name, char *buf, size_t len)
{
	char key[96];
	size_t n = len;

	snprintf(key, sizeof(key), "conf_%s", name);
	if (s->img && rbd_lib.rbd_metadata_get(s->img, key, buf, &n) == 0)
		return 0;
	return rbd_lib.rados_conf_get(s->cluster, name, buf, len);
}

static bool conf_bool(struct rbdd *s, const char *name, bool dflt)
{
	char buf[32];

	if (conf_value(s, name, buf, sizeof(buf)))
		return dflt;
	return !strcmp(buf, "true") || !strcmp(buf, "1");
}

static uint64_t conf_u64(struct rbdd *s, const char *name, uint64_t dflt)
{
	char buf[32], *end;
	unsigned long long v;

	if (conf_value(s, name, buf, sizeof(buf)))
		return dflt;
	v = strtoull(buf, &end, 10);
	return end == buf ? dflt : v;
}

static void close_handles(struct rbdd *s)
{
	if (s->img)
		rbd_lib.rbd_close(s->img);
	s->img = NULL;
	if (s->io)
		rbd_lib.rados_ioctx_destroy(s->io);
	s->io = NULL;
	if (s->cluster)
		rbd_lib.rados_shutdown(s->cluster);
	s->cluster = NULL;
}

static int open_image(struct rbdd *s)
{
	return s->readonly
	       ? rbd_lib.rbd_open_read_only(s->io, s->image, &s->img, NULL)
	       : rbd_lib.rbd_open(s->io, s->image, &s->img, NULL);
}

static int open_run(struct bs_job *job)
{
	struct rbdd *s = (struct rbdd *)((char *)job - offsetof(struct rbdd, job));
	rbd_image_info_t info;
	char tmo[16];
	int err;

	/* the Ceph libraries, loaded by the first open (rbd_lib.h) */
	err = rbd_lib_load(s->err, sizeof(s->err));
	if (err)
		return err;
	err = rbd_lib.rados_create(&s->cluster, s->id);
	if (err < 0)
		return fail_at(s, err, "rados_create");
	err = rbd_lib.rados_conf_read_file(s->cluster, s->conf);
	if (err < 0) {
		snprintf(s->err, sizeof(s->err), "rbd: reading %s: %s",
			 s->conf ? s->conf : "the default ceph.conf "
			 "($CEPH_CONF, /etc/ceph/ceph.conf)", strerror(-err));
		goto fail;
	}
	rbd_lib.rados_conf_parse_env(s->cluster, NULL);	/* CEPH_ARGS */
	snprintf(tmo, sizeof(tmo), "%u", s->timeout_s);
	rbd_lib.rados_conf_set(s->cluster, "client_mount_timeout", tmo);
	err = rbd_lib.rados_connect(s->cluster);
	if (err < 0) {
		fail_at(s, err, "connecting to the cluster");
		goto fail;
	}
	err = rbd_lib.rados_ioctx_create(s->cluster, s->pool, &s->io);
	if (err < 0) {
		fail_at(s, err, err == -ENOENT ? "no such pool" : "pool");
		goto fail;
	}
	err = open_image(s);
	if (err == -ENOENT && s->create_size && !s->readonly) {
		rbd_image_options_t o;

		rbd_lib.rbd_image_options_create(&o);
		err = rbd_lib.rbd_create4(s->io, s->image, s->create_size, o);
		rbd_lib.rbd_image_options_destroy(o);
		if (err < 0) {
			fail_at(s, err, "rbd_create4");
			goto fail;
		}
		s->created = true;
		err = open_image(s);
	}
	if (err < 0) {
		fail_at(s, err, err == -ENOENT ? "no such image (create = "
			"SIZE makes it)" : "rbd_open");
		goto fail;
	}
	if ((err = rbd_lib.rbd_stat(s->img, &info, sizeof(info))) < 0 ||
	    (err = rbd_lib.rbd_get_features(s->img, &s->features)) < 0 ||
	    (err = rbd_lib.rbd_get_flags(s->img, &s->flags)) < 0) {
		fail_at(s, err, "reading the image's facts");
		goto fail;
	}
	if (s->create_size && !s->created && info.size != s->create_size) {
		snprintf(s->err, sizeof(s->err), "rbd %s/%s: the image has "
			 "%llu bytes, create = %llu (an image is never "
			 "resized here)", s->pool, s->image,
			 (unsigned long long)info.size,
			 (unsigned long long)s->create_size);
		err = -EINVAL;
		goto fail;
	}
	s->facts.size = info.size;
	s->facts.obj_size = info.obj_size;
#ifdef LIBRBD_SUPPORTS_WRITE_ZEROES
	s->facts.write_zeroes = rbd_lib.rbd_aio_write_zeroes != NULL;
#endif
	s->facts.skip_partial_discard =
		conf_bool(s, "rbd_skip_partial_discard", true);
	s->facts.discard_gran =
		conf_u64(s, "rbd_discard_granularity_bytes", 65536);
	s->facts.cache = conf_bool(s, "rbd_cache", true);
	s->facts.max_io = s->max_io;
	err = rbd_config_decide(&s->facts, &s->cfg);
	if (err) {
		snprintf(s->err, sizeof(s->err), "rbd %s/%s: object size %llu "
			 "not supported", s->pool, s->image,
			 (unsigned long long)info.obj_size);
		goto fail;
	}
	/*
	 * librbd keeps its cache write-through until the image's first
	 * flush (rbd_cache_writethrough_until_flush, on by default), for
	 * users that never flush. This device declares a volatile cache and
	 * passes every FLUSH from above to rbd_aio_flush, so one flush now
	 * puts the cache in write-back from the start: without it, 1 MiB
	 * sequential writes waited for the OSD until a client happened to
	 * flush (half qemu-nbd's speed in bench/rbd.sh). A failed flush
	 * only leaves the cache write-through: not an open failure.
	 */
	s->wt_until_flush =
		conf_bool(s, "rbd_cache_writethrough_until_flush", true);
	if (!s->readonly && s->facts.cache && s->wt_until_flush)
		s->open_flush = rbd_lib.rbd_flush(s->img) < 0 ? -1 : 1;
	return 0;
fail:
	close_handles(s);
	return err < 0 ? err : -EIO;
}

static void open_done(struct bs_job *job)
{
	struct rbdd *s = (struct rbdd *)((char *)job - offsetof(struct rbdd, job));
	struct bs_dev *dev = s->dev;
	int err = job->result;

	s->job_running = false;
	if (s->closing)
		return;
	if (err) {
		bs_error(err, "%s: %s", dev->name, s->err);
		bs_dev_open_done(dev, err);
		return;
	}
	/* whole logical blocks: a tail below 512 bytes is not served */
	dev->size = s->facts.size - s->facts.size % BS_SECTOR_SIZE;
	dev->limits = s->cfg.limits;
	bs_dev_set_reason(dev, "rbd %s/%s: %s", s->pool, s->image, s->cfg.why);
	bs_dev_open_done(dev, 0);
}

/* ---- the device type ------------------------------------------------------ */

static void rbdd_free(struct rbdd *s)
{
	free(s->conf);
	free(s->id);
	free(s);
}

static char *dup_opt(struct bs_opts *opts, const char *key)
{
	const char *v = bs_opts_get(opts, key);

	return v && *v ? strdup(v) : NULL;
}

static int rbdd_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct rbdd *s = calloc(1, sizeof(*s));
	const char *image, *pool;
	uint64_t max_io = 4u << 20;
	uint32_t timeout = 30;
	const char *budget;
	struct bs_workers *w;
	char why[320];
	int err;

	if (!s)
		return -ENOMEM;
	s->dev = dev;
	s->readonly = dev->readonly;
	image = bs_opts_get(opts, "image");
	pool = bs_opts_get(opts, "pool");
	if (rbd_parse_name(image, pool && *pool ? pool : NULL, s->pool,
			   s->image, why, sizeof(why))) {
		err = bs_error(-EINVAL, "%s: rbd: %s", dev->name, why);
		goto fail;
	}
	if ((err = bs_opts_get_u32(opts, "timeout", &timeout)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_io", &max_io)) < 0 ||
	    (err = bs_opts_get_size(opts, "create", &s->create_size)) < 0)
		goto fail;
	if (timeout < 1 || timeout > 3600 || max_io < 4096 ||
	    max_io > (64u << 20) || max_io % BS_SECTOR_SIZE) {
		err = bs_error(-EINVAL, "%s: rbd: timeout 1..3600 s, max_io "
			       "4K..64M in whole sectors", dev->name);
		goto fail;
	}
	if (err == 0 && (!s->create_size || s->create_size % BS_SECTOR_SIZE)) {
		err = bs_error(-EINVAL, "%s: rbd: create = %llu: a positive "
			       "multiple of 512 bytes", dev->name,
			       (unsigned long long)s->create_size);
		goto fail;
	}
	s->status_budget_ms = 100;
	budget = bs_opts_get(opts, "status_budget");
	if (budget && bs_net_parse_ms(budget, &s->status_budget_ms)) {
		err = bs_error(-EINVAL, "%s: rbd: status_budget = '%s': not a "
			       "duration (0.1, 100ms; 0 = no bound)", dev->name,
			       budget);
		goto fail;
	}
	s->timeout_s = timeout;
	s->max_io = (uint32_t)max_io;
	s->conf = dup_opt(opts, "conf");
	s->id = dup_opt(opts, "id");
	w = bs_ctx_workers(dev->ctx);
	if (!w) {
		err = -ENOMEM;
		goto fail;
	}
	dev->priv = s;
	snprintf(dev->state_reason, sizeof(dev->state_reason),
		 "connecting to the cluster (%.50s) for %.40s/%.40s",
		 s->conf ? s->conf : "default ceph.conf", s->pool, s->image);
	s->job.run = open_run;
	s->job.done = open_done;
	s->job_running = true;
	bs_workers_submit(w, &s->job);
	return BS_OPEN_PENDING;
fail:
	rbdd_free(s);
	return err;
}

static void rbdd_close(struct bs_dev *dev)
{
	struct rbdd *s = dev->priv;
	struct bs_loop *loop = bs_ctx_loop(dev->ctx);

	if (!s)
		return;
	s->closing = true;
	/* the open job holds s: let it finish (bounded by timeout) */
	while (s->job_running)
		if (bs_loop_run_once(loop, 100))
			break;
	/* rbd_close flushes and waits for what librbd still holds */
	close_handles(s);
	rbdd_free(s);
	dev->priv = NULL;
}

static void feature_names(uint64_t f, char *buf, size_t len)
{
	static const struct { uint64_t bit; const char *name; } names[] = {
		{ RBD_FEATURE_LAYERING, "layering" },
		{ RBD_FEATURE_STRIPINGV2, "striping" },
		{ RBD_FEATURE_EXCLUSIVE_LOCK, "exclusive-lock" },
		{ RBD_FEATURE_OBJECT_MAP, "object-map" },
		{ RBD_FEATURE_FAST_DIFF, "fast-diff" },
		{ RBD_FEATURE_DEEP_FLATTEN, "deep-flatten" },
		{ RBD_FEATURE_JOURNALING, "journaling" },
		{ RBD_FEATURE_DATA_POOL, "data-pool" },
		{ RBD_FEATURE_OPERATIONS, "operations" },
		{ RBD_FEATURE_MIGRATING, "migrating" },
		{ RBD_FEATURE_NON_PRIMARY, "non-primary" },
		{ RBD_FEATURE_DIRTY_CACHE, "dirty-cache" },
	};
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if ((f & names[i].bit) && n < len)
			n += (size_t)snprintf(buf + n, len - n, "%s%s",
					      n ? "," : "", names[i].name);
	if (!n)
		snprintf(buf, len, "none");
}

static void rbdd_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct rbdd *s = dev->priv;
	char feat[256];

	if (!s)
		return;
	kv(arg, "pool", "%s", s->pool);
	kv(arg, "image", "%s%s", s->image, s->created ? " (created here)" : "");
	kv(arg, "conf", "%s", s->conf ? s->conf : "default");
	kv(arg, "client", "client.%s", s->id ? s->id : "admin");
	if (!s->img) {
		if (s->err[0])
			kv(arg, "last_error", "%s", s->err);
		return;
	}
	feature_names(s->features, feat, sizeof(feat));
	kv(arg, "features", "%s%s%s", feat,
	   (s->flags & RBD_FLAG_OBJECT_MAP_INVALID) ? " (object map invalid)" : "",
	   (s->flags & RBD_FLAG_FAST_DIFF_INVALID) ? " (fast diff invalid)" : "");
	kv(arg, "image_size", "%llu", (unsigned long long)s->facts.size);
	kv(arg, "object_size", "%llu", (unsigned long long)s->facts.obj_size);
	kv(arg, "discard", "rbd_skip_partial_discard %s, "
	   "rbd_discard_granularity_bytes %llu -> frees in %llu-byte pieces",
	   s->facts.skip_partial_discard ? "true" : "false",
	   (unsigned long long)s->facts.discard_gran,
	   (unsigned long long)s->cfg.discard_gran);
	if (!s->facts.cache)
		kv(arg, "cache", "rbd_cache false (no cache: writes go to "
		   "the OSDs)");
	else if (!s->wt_until_flush)
		kv(arg, "cache", "rbd_cache true, write-back "
		   "(rbd_cache_writethrough_until_flush false)");
	else
		kv(arg, "cache", "rbd_cache true, %s", s->open_flush > 0 ?
		   "write-back: flushed at open (ends "
		   "rbd_cache_writethrough_until_flush)" : s->readonly ?
		   "read-only" : "write-through until the first flush (the "
		   "flush at open failed)");
	kv(arg, "decision", "%s", s->cfg.why);
	kv(arg, "write_zeroes_sent", "%llu may unmap, %llu thick (NOUNMAP)",
	   (unsigned long long)__atomic_load_n(&s->wz_unmap, __ATOMIC_RELAXED),
	   (unsigned long long)__atomic_load_n(&s->wz_thick, __ATOMIC_RELAXED));
	kv(arg, "block_status_cut", "%llu of %llu calls (status_budget %u ms%s)",
	   (unsigned long long)__atomic_load_n(&s->status_cut, __ATOMIC_RELAXED),
	   (unsigned long long)__atomic_load_n(&s->status_calls,
					       __ATOMIC_RELAXED),
	   s->status_budget_ms, s->status_budget_ms ? "" : ": no bound");
	kv(arg, "inflight", "%llu (peak %llu)",
	   (unsigned long long)__atomic_load_n(&s->inflight, __ATOMIC_RELAXED),
	   (unsigned long long)__atomic_load_n(&s->inflight_peak,
					       __ATOMIC_RELAXED));
}

static const struct bs_dev_type rbd_type = {
	.name = "rbd",
	.summary = "a Ceph RBD image (librbd, asynchronous)",
	.spec_key = "image",
	.req_ctx_size = sizeof(struct rbdd_req),
	.options =
		"image=[POOL/]IMAGE   the image (rbd:POOL/IMAGE)\n"
		"pool=POOL            its pool when image has none (rbd)\n"
		"conf=PATH            ceph.conf ($CEPH_CONF, /etc/ceph/ceph.conf)\n"
		"id=NAME              the client id, client.NAME (admin)\n"
		"create=SIZE          make the image (librbd's default features)\n"
		"                     when missing; an existing one must have SIZE\n"
		"timeout=SECONDS      longest connecting may take (30)\n"
		"max_io=SIZE          largest read/write sent at once (4M)\n"
		"status_budget=SECONDS  block status stops after the piece\n"
		"                     (64 objects) that used this up and leaves\n"
		"                     the rest to be reported as data (0.1;\n"
		"                     100ms also works; 0 = no bound)\n",
	.open = rbdd_open,
	.close = rbdd_close,
	.submit = rbdd_submit,
	.block_status = rbdd_block_status,
	.allocated = rbdd_allocated,
	.describe = rbdd_describe,
};

BS_DEV_TYPE(rbd_type)

#endif /* librbd */
