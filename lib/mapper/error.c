/* SPDX-License-Identifier: MIT */
/*
 * error: fails requests on purpose, for fault tests (the dm-error
 * analogue, with dm-flakey's "after" in a simple form). Either standalone
 * (size = SIZE; requests that pass act as on a zero device: reads return
 * zeroes, writes are dropped) or over one component (devices = X;
 * requests that pass go to X unchanged).
 *
 * Requests of the chosen ops fail with the chosen errno once `after` of
 * them have passed; requests of other ops always pass. The attribute
 * error/after re-arms the counter at run time.
 *
 * The type is not "stacked" in the core's sense because its component is
 * optional: it resolves "devices" itself and otherwise behaves as a
 * mapper (holders, restacking from the component, explain).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "mapper/mapper.h"

#define ALL_OPS ((1u << BS_OP__COUNT) - 1)
#define STANDALONE_MAX_SECTORS (UINT32_MAX >> 1 & ~7u)

struct errdev {
	/* after/passed/failed: I/O threads count, the main loop re-arms */
	pthread_mutex_t lock;
	int err;		/* negative errno */
	unsigned ops;		/* mask of 1 << BS_OP_* that may fail */
	uint64_t after;		/* requests of those ops that pass first */
	uint64_t passed;	/* ... counted so far */
	uint64_t failed;
	struct bs_limits leaf;	/* standalone: its fixed limits */
	uint32_t open_delay;	/* ms the open takes (asynchronous open) */
	int open_err;		/* ... and then fails with, or 0 */
	int open_timer;		/* > 0 while the open goes on */
};

static const struct {
	const char *name;
	int err;
} errnos[] = {
	{ "EIO", EIO }, { "ENOSPC", ENOSPC }, { "EOPNOTSUPP", EOPNOTSUPP },
	{ "ENOTSUP", ENOTSUP }, { "EINVAL", EINVAL }, { "EROFS", EROFS },
	{ "ENXIO", ENXIO }, { "ENODEV", ENODEV }, { "ENOMEM", ENOMEM },
	{ "EAGAIN", EAGAIN }, { "EBUSY", EBUSY }, { "ETIMEDOUT", ETIMEDOUT },
	{ "ECONNRESET", ECONNRESET }, { "EPIPE", EPIPE },
	{ "EREMOTEIO", EREMOTEIO }, { "EBADMSG", EBADMSG },
	{ "EILSEQ", EILSEQ }, { "ENOLINK", ENOLINK }, { "EPROTO", EPROTO },
	{ "EPERM", EPERM }, { "EACCES", EACCES }, { "ENODATA", ENODATA },
	{ "EDQUOT", EDQUOT }, { "EFBIG", EFBIG },
};

static const char *const op_words[BS_OP__COUNT] = {
	[BS_OP_READ] = "read",
	[BS_OP_WRITE] = "write",
	[BS_OP_FLUSH] = "flush",
	[BS_OP_DISCARD] = "discard",
	[BS_OP_WRITE_ZEROES] = "write_zeroes",
};

static const char *errno_str(int err, char *buf, size_t len)
{
	size_t i;

	for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (errnos[i].err == -err)
			return errnos[i].name;
	snprintf(buf, len, "%d", -err);
	return buf;
}

static int parse_errno(struct bs_dev *dev, const char *s, int *out)
{
	char *end;
	long v;
	size_t i;

	for (i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
		if (!strcasecmp(s, errnos[i].name)) {
			*out = -errnos[i].err;
			return 0;
		}
	}
	v = strtol(s, &end, 10);
	if (end == s || *end || v < 1 || v > 4095)
		return bs_error(-EINVAL, "%s: error: errno '%s' is neither a "
				"name (EIO, ENOSPC, EOPNOTSUPP, ...) nor a number "
				"from 1 to 4095", dev->name, s);
	*out = (int)-v;
	return 0;
}

static int parse_ops(struct bs_dev *dev, const char *s, unsigned *out)
{
	char *copy = strdup(s), *tok, *save = NULL;
	unsigned mask = 0;
	int err = 0;

	if (!copy)
		return -ENOMEM;
	for (tok = strtok_r(copy, ", \t", &save); tok;
	     tok = strtok_r(NULL, ", \t", &save)) {
		unsigned op;

		if (!strcmp(tok, "all")) {
			mask = ALL_OPS;
			continue;
		}
		for (op = 0; op < BS_OP__COUNT; op++)
			if (!strcmp(tok, op_words[op]) ||
			    !strcmp(tok, bs_op_name((enum bs_op)op)))
				break;
		if (op == BS_OP__COUNT) {
			err = bs_error(-EINVAL, "%s: error: ops: '%s' is not one "
				       "of read, write, flush, discard, "
				       "write_zeroes, all", dev->name, tok);
			goto out;
		}
		mask |= 1u << op;
	}
	if (!mask)
		err = bs_error(-EINVAL, "%s: error: ops is empty", dev->name);
	*out = mask;
out:
	free(copy);
	return err;
}

static int error_stack(struct bs_dev *dev, struct bs_limits *lim)
{
	struct errdev *e = dev->priv;

	if (!dev->ncomponents) {
		*lim = e->leaf;
		return 0;
	}
	return mp_stack_components(dev, lim, NULL, NULL);
}

/* "devices = X": the one component, resolved here (it is optional). */
static int take_component(struct bs_dev *dev, struct bs_opts *opts)
{
	const char *list = bs_opts_get(opts, "devices");
	char name[BS_NAME_MAX + 1];
	struct bs_dev *c;
	size_t n;

	if (!list)
		return 0;
	list += strspn(list, " \t,");
	n = strcspn(list, " \t,");
	if (!n || list[n + strspn(list + n, " \t,")])
		return bs_error(-EINVAL, "%s: error takes one component, "
				"'devices = X' (got '%s')", dev->name, list);
	if (n > BS_NAME_MAX)
		n = BS_NAME_MAX;
	memcpy(name, list, n);
	name[n] = 0;
	c = bs_dev_find(dev->ctx, name);
	if (!c) {
		const char *w = bs_opts_where(opts, "devices");

		return bs_error(-ENOENT, "%s%s%s: component '%s' does not exist",
				w, bs_sep(w), dev->name, name);
	}
	/* not a core-stacked type: it cannot wait for an opening one */
	if (c->state != BS_DEV_LIVE)
		return bs_dev_check_live(c);
	dev->components = malloc(sizeof(*dev->components));
	if (!dev->components)
		return -ENOMEM;
	dev->components[0] = c;
	dev->ncomponents = 1;
	return 0;
}

/* open_delay: finish the open from a timer, as a remote driver would. */
static void open_timer(void *arg)
{
	struct bs_dev *dev = arg;
	struct errdev *e = dev->priv;
	char b[16];

	e->open_timer = 0;
	if (e->open_err) {
		bs_error(e->open_err, "%s: error: open failed on purpose (%s)",
			 dev->name, errno_str(e->open_err, b, sizeof(b)));
		bs_dev_open_done(dev, e->open_err);
		return;
	}
	bs_dev_open_done(dev, 0);
}

static int open_later(struct bs_dev *dev, struct errdev *e)
{
	int id;

	if (!e->open_delay)
		return 0;
	id = bs_loop_add_timer(bs_ctx_loop(dev->ctx), e->open_delay,
			       open_timer, dev);
	if (id < 0) {
		dev->priv = NULL;
		free(e);
		return bs_error(id, "%s: error: open_delay: %s", dev->name,
				strerror(-id));
	}
	e->open_timer = id;
	snprintf(dev->state_reason, sizeof(dev->state_reason),
		 "error: open_delay = %u ms", e->open_delay);
	return BS_OPEN_PENDING;
}

static int error_open(struct bs_dev *dev, struct bs_opts *opts)
{
	const char *s;
	struct errdev *e;
	struct bs_limits lim;
	uint64_t size = 0;
	bool wc = false;
	int err;

	e = calloc(1, sizeof(*e));
	if (e)
		pthread_mutex_init(&e->lock, NULL);
	if (!e)
		return -ENOMEM;
	e->err = -EIO;
	e->ops = ALL_OPS;
	if ((s = bs_opts_get(opts, "errno")) && (err = parse_errno(dev, s, &e->err)))
		goto fail;
	if ((s = bs_opts_get(opts, "ops")) && (err = parse_ops(dev, s, &e->ops)))
		goto fail;
	if ((err = bs_opts_get_size(opts, "after", &e->after)) < 0 ||
	    (err = bs_opts_get_size(opts, "size", &size)) < 0 ||
	    (err = bs_opts_get_bool(opts, "write_cache", &wc)) < 0 ||
	    (err = bs_opts_get_u32(opts, "open_delay", &e->open_delay)) < 0)
		goto fail;
	if ((s = bs_opts_get(opts, "open_error")) &&
	    (err = parse_errno(dev, s, &e->open_err)))
		goto fail;
	if (e->open_err && !e->open_delay) {
		err = bs_error(-EINVAL, "%s: error: open_error needs "
			       "open_delay = MS", dev->name);
		goto fail;
	}
	err = take_component(dev, opts);
	if (err)
		goto fail;
	if (dev->ncomponents && (size || wc)) {
		err = bs_error(-EINVAL, "%s: error: over a component, size and "
			       "write_cache are the component's", dev->name);
		goto fail;
	}
	if (!dev->ncomponents && !size) {
		err = bs_error(-EINVAL, "%s: error needs size = SIZE (standalone) "
			       "or devices = X (over a component)", dev->name);
		goto fail;
	}
	if (size % BS_SECTOR_SIZE) {
		err = bs_error(-EINVAL, "%s: error: size %llu is not a multiple "
			       "of 512", dev->name, (unsigned long long)size);
		goto fail;
	}
	dev->priv = e;
	if (!dev->ncomponents) {
		bs_limits_init(&e->leaf);
		e->leaf.max_write_zeroes_sectors = STANDALONE_MAX_SECTORS;
		e->leaf.max_discard_sectors = STANDALONE_MAX_SECTORS;
		e->leaf.features |= BS_FEAT_WRITE_ZEROES_UNMAP;
		/* a volatile cache: the core sends flushes (to fail) only then */
		if (wc)
			e->leaf.features |= BS_FEAT_WRITE_CACHE;
		bs_limits_finish(&e->leaf);
		dev->limits = e->leaf;
		dev->size = size;
		bs_dev_set_reason(dev, "error: standalone: requests that pass "
				  "act as on a zero device (zeroing is free)");
		return open_later(dev, e);
	}
	dev->size = dev->components[0]->size;
	bs_limits_init_stacking(&lim);
	err = error_stack(dev, &lim);
	if (err)
		goto fail;
	bs_limits_finish(&lim);
	dev->limits = lim;
	return open_later(dev, e);
fail:
	dev->priv = NULL;
	free(e);
	return err;
}

static void error_close(struct bs_dev *dev)
{
	struct errdev *e = dev->priv;

	if (e && e->open_timer > 0)
		bs_loop_cancel_timer(bs_ctx_loop(dev->ctx), e->open_timer);
	free(e);
	dev->priv = NULL;
}

static void error_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct errdev *e = dev->priv;
	struct mp_io *io;
	int i;

	if (e->ops & (1u << req->op)) {
		bool fail;

		pthread_mutex_lock(&e->lock);
		fail = e->passed >= e->after;
		if (fail)
			e->failed++;
		else
			e->passed++;
		pthread_mutex_unlock(&e->lock);
		if (fail) {
			bs_req_complete(req, e->err);
			return;
		}
	}
	if (!dev->ncomponents) {
		if (req->op == BS_OP_READ)
			for (i = 0; i < req->iovcnt; i++)
				memset(req->iov[i].iov_base, 0,
				       req->iov[i].iov_len);
		bs_req_complete(req, 0);
		return;
	}
	io = mp_io_new(dev, req, 1);
	if (!io) {
		bs_req_complete(req, -ENOMEM);
		return;
	}
	mp_kid_init(io, 0, 0, req->op, req->flags, req->offset, req->len);
	if (req->iov && mp_kid_add_iov(&io->kids[0], req, 0, req->len)) {
		io->result = -ENOMEM;
		mp_io_submit(io, 0);
		return;
	}
	mp_io_submit(io, 1);
}

static int error_block_status(struct bs_dev *dev, uint64_t offset,
			      uint64_t len, bs_extent_fn fn, void *arg)
{
	if (dev->ncomponents)
		return bs_block_status(dev->components[0], offset, len, fn, arg);
	fn(arg, offset, len, BS_EXT_HOLE | BS_EXT_ZERO);
	return 0;
}

static int64_t error_allocated(struct bs_dev *dev)
{
	return dev->ncomponents ? bs_dev_allocated(dev->components[0]) : 0;
}

static void ops_text(unsigned ops, char *buf, size_t len)
{
	size_t o = 0;
	unsigned op;

	buf[0] = 0;
	if (ops == ALL_OPS) {
		snprintf(buf, len, "all");
		return;
	}
	for (op = 0; op < BS_OP__COUNT && o < len; op++)
		if (ops & (1u << op))
			o += (size_t)snprintf(buf + o, len - o, "%s%s",
					      o ? "," : "", op_words[op]);
}

static void error_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct errdev *e = dev->priv;
	char num[16], ops[96];

	ops_text(e->ops, ops, sizeof(ops));
	kv(arg, "over", "%s", dev->ncomponents ? dev->components[0]->name
					       : "(standalone)");
	kv(arg, "errno", "%s", errno_str(e->err, num, sizeof(num)));
	kv(arg, "ops", "%s", ops);
	pthread_mutex_lock(&e->lock);
	kv(arg, "after", "%llu", (unsigned long long)e->after);
	kv(arg, "passed", "%llu", (unsigned long long)e->passed);
	kv(arg, "failed", "%llu", (unsigned long long)e->failed);
	kv(arg, "state", "%s", e->passed >= e->after ? "failing" : "armed");
	pthread_mutex_unlock(&e->lock);
}

/* ---- attributes -------------------------------------------------------- */

static int after_show(struct bs_dev *dev, char *buf, size_t len)
{
	struct errdev *e = dev->priv;

	return snprintf(buf, len, "%llu\n", (unsigned long long)e->after);
}

static int after_store(struct bs_dev *dev, const char *buf)
{
	struct errdev *e = dev->priv;
	unsigned long long v;

	if (bs_attr_parse_u64(buf, &v))
		return -EINVAL;
	/* re-arm: N more requests of the chosen ops pass, then they fail */
	pthread_mutex_lock(&e->lock);
	e->after = v;
	e->passed = 0;
	pthread_mutex_unlock(&e->lock);
	return 0;
}

static int passed_show(struct bs_dev *dev, char *buf, size_t len)
{
	struct errdev *e = dev->priv;

	unsigned long long v;

	pthread_mutex_lock(&e->lock);
	v = e->passed;
	pthread_mutex_unlock(&e->lock);
	return snprintf(buf, len, "%llu\n", v);
}

static int failed_show(struct bs_dev *dev, char *buf, size_t len)
{
	struct errdev *e = dev->priv;

	unsigned long long v;

	pthread_mutex_lock(&e->lock);
	v = e->failed;
	pthread_mutex_unlock(&e->lock);
	return snprintf(buf, len, "%llu\n", v);
}

/* error/open: "opening" or "done"; writing "done" or "fail" ends the
 * open now (tests need not race a timer) */
static int open_show(struct bs_dev *dev, char *buf, size_t len)
{
	struct errdev *e = dev->priv;

	return snprintf(buf, len, "%s\n", e->open_timer > 0 ? "opening"
							    : "done");
}

static int open_store(struct bs_dev *dev, const char *buf)
{
	struct errdev *e = dev->priv;
	size_t n = strcspn(buf, "\n");
	bool fail;

	if (n == 4 && !strncmp(buf, "done", 4))
		fail = false;
	else if (n == 4 && !strncmp(buf, "fail", 4))
		fail = true;
	else
		return -EINVAL;
	if (e->open_timer <= 0)
		return -EALREADY;
	bs_loop_cancel_timer(bs_ctx_loop(dev->ctx), e->open_timer);
	if (fail && !e->open_err)
		e->open_err = -EIO;
	if (!fail)
		e->open_err = 0;
	open_timer(dev);
	return 0;
}

static const struct bs_attr error_attrs[] = {
	{ "error/open", BS_ATTR_RW, open_show, open_store,
	  "with open_delay: 'opening' until the open ends, then 'done'; "
	  "writing 'done' (or 'fail') ends it now" },
	{ "error/after", BS_ATTR_RW, after_show, after_store,
	  "requests of the chosen ops that pass before they fail; writing N "
	  "re-arms the counter (0 = fail from now on)" },
	{ "error/passed", BS_ATTR_RO, passed_show, NULL,
	  "requests of the chosen ops passed since the last arming" },
	{ "error/failed", BS_ATTR_RO, failed_show, NULL,
	  "requests failed on purpose" },
	{ 0 },
};

static const struct bs_dev_type error_type = {
	.name = "error",
	.spec_key = "size",
	.summary = "fails requests on purpose, for fault tests (like dm-error)",
	.options =
		"size=SIZE            standalone: capacity; requests that pass\n"
		"                     read zeroes and drop writes\n"
		"devices=X            or over one component: requests that pass\n"
		"                     go to X (give size or devices, not both)\n"
		"write_cache=0|1      standalone: claim a volatile cache, so that\n"
		"                     flushes reach it and can fail (0)\n"
		"errno=ERR            error returned: a name (EIO, ENOSPC,\n"
		"                     EOPNOTSUPP, ETIMEDOUT, ...) or a number (EIO)\n"
		"ops=OP,...           ops that fail: read, write, flush, discard,\n"
		"                     write_zeroes, all (all); others always pass\n"
		"after=N              let N requests of those ops pass first, then\n"
		"                     fail every one (0); attribute error/after\n"
		"                     re-arms it at run time\n"
		"open_delay=MS        the open finishes MS later, asynchronously:\n"
		"                     the device is 'opening' until then (0)\n"
		"open_error=ERR       with open_delay: the open then fails with\n"
		"                     ERR, and the device is 'failed'\n",
	.open = error_open,
	.close = error_close,
	.submit = error_submit,
	.stack_limits = error_stack,
	.block_status = error_block_status,
	.allocated = error_allocated,
	.describe = error_describe,
	.attrs = error_attrs,
};

BS_DEV_TYPE(error_type)
