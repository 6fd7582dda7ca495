/* SPDX-License-Identifier: MIT */
/*
 * mirror: RAID 1 over two or more legs. Writes, write-zeroes, discards and
 * flushes go to every live leg and complete when all of them have; a read
 * goes to one live leg, chosen round robin.
 *
 * A leg whose request fails is marked faulty and gets no more requests:
 * a failed read is retried on another live leg, a failed write counts as
 * done when another leg took it. The device goes on degraded and says so
 * in `info`; losing a leg restacks the limits from the live legs only and
 * re-evaluates every device above. As md's RAID 1 does, the last live leg
 * is never failed: its errors go to the caller, and it keeps serving.
 *
 * Not leg faults: -EOPNOTSUPP on write-zeroes or discard (the leg lacks
 * the command; for write-zeroes the core's rule turns it off for the leg
 * and everything above, and the caller's zeroout falls back to writing
 * zeroes on every leg) and -ENOMEM (our own shortage, not the leg's).
 *
 * Options: devices = A B ...; legs of different sizes are allowed: the
 * mirror takes the smallest and `info` says which leg set it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

#include "mapper/mapper.h"

#define MAX_LEGS 64	/* a read remembers the legs it tried in 64 bits */

struct leg_fault {
	int err;		/* negative errno */
	enum bs_op op;
	uint64_t offset;
};

struct mirror {
	/*
	 * Leg state is shared by every I/O thread submitting to the mirror:
	 * changed and read under @lock. A leg lost on an I/O thread
	 * restacks through the main loop (bs_dev_limits_changed()).
	 */
	pthread_mutex_t lock;
	bool *live;		/* per leg */
	struct leg_fault *fault;
	unsigned nlive;
	unsigned next_read;	/* round robin cursor */
	unsigned smallest;	/* leg that set the size */
	uint64_t reads_retried;
	uint64_t writes_degraded; /* writes acknowledged with a leg lost */
};

/* What the mirror keeps per request. */
struct mirror_req {
	uint64_t tried;		/* READ: legs tried (bit per component) */
};

static const char *errno_name(int err)
{
	switch (-err) {
	case EIO: return "EIO";
	case ENOSPC: return "ENOSPC";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EINVAL: return "EINVAL";
	case EROFS: return "EROFS";
	case ENXIO: return "ENXIO";
	case ENODEV: return "ENODEV";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case EBADMSG: return "EBADMSG";
	case EILSEQ: return "EILSEQ";
	case EREMOTEIO: return "EREMOTEIO";
	default: return NULL;
	}
}

static int mirror_stack(struct bs_dev *dev, struct bs_limits *lim)
{
	struct mirror *m = dev->priv;
	bool live[MAX_LEGS];
	unsigned i, nlive;
	size_t o;
	int err;

	pthread_mutex_lock(&m->lock);	/* I/O threads may lose a leg */
	nlive = m->nlive;
	for (i = 0; i < dev->ncomponents; i++)
		live[i] = m->live[i];
	pthread_mutex_unlock(&m->lock);
	/* only live legs count: a faulty leg takes nothing away */
	err = mp_stack_components(dev, lim, live, NULL);
	if (err)
		return err;
	if (nlive == dev->ncomponents)
		return 0;
	o = strlen(dev->wz_reason);
	for (i = 0; i < dev->ncomponents; i++) {
		if (live[i] || o >= sizeof(dev->wz_reason))
			continue;
		o += (size_t)snprintf(dev->wz_reason + o,
				      sizeof(dev->wz_reason) - o,
				      " (faulty leg %s not counted)",
				      dev->components[i]->name);
	}
	return 0;
}

static void mirror_free(struct mirror *m)
{
	if (!m)
		return;
	free(m->live);
	free(m->fault);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

static int mirror_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct bs_limits lim;
	struct mirror *m;
	unsigned i, j, n = dev->ncomponents;
	int err;

	(void)opts;
	if (n < 2)
		return bs_error(-EINVAL, "%s: mirror needs two legs or more, "
				"'devices = A B ...'", dev->name);
	if (n > MAX_LEGS)
		return bs_error(-EINVAL, "%s: mirror: %u legs, at most %d",
				dev->name, n, MAX_LEGS);
	for (i = 0; i < n; i++)
		for (j = 0; j < i; j++)
			if (dev->components[j] == dev->components[i])
				return bs_error(-EINVAL, "%s: mirror: leg %s is "
						"listed twice", dev->name,
						dev->components[i]->name);
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	pthread_mutex_init(&m->lock, NULL);
	m->live = calloc(n, sizeof(*m->live));
	m->fault = calloc(n, sizeof(*m->fault));
	if (!m->live || !m->fault) {
		mirror_free(m);
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		m->live[i] = true;
		if (dev->components[i]->size < dev->components[m->smallest]->size)
			m->smallest = i;
	}
	m->nlive = n;
	dev->priv = m;
	dev->size = dev->components[m->smallest]->size;
	bs_limits_init_stacking(&lim);
	err = mirror_stack(dev, &lim);
	if (err) {
		mirror_free(m);
		dev->priv = NULL;
		return err;
	}
	/* the size must be whole blocks of the stack */
	dev->size -= dev->size % lim.logical_block_size;
	return 0;
}

static void mirror_close(struct bs_dev *dev)
{
	mirror_free(dev->priv);
}

/* Is @err on @op a fault of the leg (rather than a missing command)? */
static bool is_leg_fault(enum bs_op op, int err)
{
	if (err == -ENOMEM)
		return false;
	if (err == -EOPNOTSUPP &&
	    (op == BS_OP_WRITE_ZEROES || op == BS_OP_DISCARD))
		return false;
	return true;
}

/*
 * Mark leg @i faulty after @err on @op at @offset, unless it is the last
 * live one. Returns true if it was marked.
 */
static bool fail_leg(struct bs_dev *dev, unsigned i, enum bs_op op, int err,
		     uint64_t offset)
{
	struct mirror *m = dev->priv;

	pthread_mutex_lock(&m->lock);
	if (!m->live[i] || m->nlive <= 1) {
		pthread_mutex_unlock(&m->lock);
		return false;
	}
	m->live[i] = false;
	m->nlive--;
	m->fault[i] = (struct leg_fault){ err, op, offset };
	pthread_mutex_unlock(&m->lock);
	/* restack from the live legs, here and everything above */
	bs_dev_limits_changed(dev);
	return true;
}

static bool write_kid_done(struct mp_kid *kid)
{
	struct bs_dev *dev = kid->io->dev;
	struct bs_req *r = &kid->req;

	if (!r->result || !is_leg_fault(r->op, r->result))
		return false;
	fail_leg(dev, kid->comp, r->op, r->result, r->offset);
	/* the other legs decide: done if any of them took it */
	kid->excused = true;
	return false;
}

static int pick_read_leg(struct bs_dev *dev, uint64_t tried)
{
	struct mirror *m = dev->priv;
	unsigned n = dev->ncomponents, k;
	int leg = -1;

	pthread_mutex_lock(&m->lock);
	for (k = 0; k < n; k++) {
		unsigned i = (m->next_read + k) % n;

		if (m->live[i] && !(tried & (1ull << i))) {
			m->next_read = (i + 1) % n;
			leg = (int)i;
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return leg;
}

static bool read_kid_done(struct mp_kid *kid)
{
	struct bs_dev *dev = kid->io->dev;
	struct mirror *m = dev->priv;
	struct bs_req *r = &kid->req;
	struct bs_req *parent = kid->io->parent;
	struct mirror_req *mr;
	int leg;

	if (!r->result)
		return false;
	if (is_leg_fault(r->op, r->result))
		fail_leg(dev, kid->comp, r->op, r->result, r->offset);
	/* the mirror's context of the parent: legs this read has tried */
	mr = bs_req_drv(parent);
	mr->tried |= 1ull << kid->comp;
	leg = pick_read_leg(dev, mr->tried);
	if (leg < 0)
		return false; /* no other copy: the error goes up */
	__atomic_fetch_add(&m->reads_retried, 1, __ATOMIC_RELAXED);
	mp_kid_resubmit(kid, (unsigned)leg);
	return true;
}

static void mirror_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct mirror *m = dev->priv;
	unsigned n = dev->ncomponents, i, k = 0, nlive;
	bool live[MAX_LEGS];
	struct mp_io *io;

	if (req->op == BS_OP_READ) {
		int leg;

		io = mp_io_new(dev, req, 1);
		if (!io) {
			bs_req_complete(req, -ENOMEM);
			return;
		}
		io->kid_done = read_kid_done;
		leg = pick_read_leg(dev, 0);
		mp_kid_init(io, 0, (unsigned)leg, req->op, req->flags,
			    req->offset, req->len);
		if (mp_kid_add_iov(&io->kids[0], req, 0, req->len)) {
			io->result = -ENOMEM;
			mp_io_submit(io, 0);
			return;
		}
		mp_io_submit(io, 1);
		return;
	}
	/* the legs live now (a leg lost meanwhile excuses its error) */
	pthread_mutex_lock(&m->lock);
	nlive = m->nlive;
	for (i = 0; i < n; i++)
		live[i] = m->live[i];
	pthread_mutex_unlock(&m->lock);
	io = mp_io_new(dev, req, nlive);
	if (!io) {
		bs_req_complete(req, -ENOMEM);
		return;
	}
	io->kid_done = write_kid_done;
	for (i = 0; i < n; i++) {
		if (!live[i])
			continue;
		mp_kid_init(io, k, i, req->op, req->flags, req->offset,
			    req->len);
		if (req->iov && mp_kid_add_iov(&io->kids[k], req, 0, req->len)) {
			io->result = -ENOMEM;
			mp_io_submit(io, 0);
			return;
		}
		k++;
	}
	if (nlive < n && req->op == BS_OP_WRITE)
		__atomic_fetch_add(&m->writes_degraded, 1, __ATOMIC_RELAXED);
	mp_io_submit(io, k);
}

static int mirror_block_status(struct bs_dev *dev, uint64_t offset,
			       uint64_t len, bs_extent_fn fn, void *arg)
{
	int leg = pick_read_leg(dev, 0);

	/* every live leg holds the same data; ask one of them */
	return bs_block_status(dev->components[leg], offset, len, fn, arg);
}

static void fault_text(const struct leg_fault *f, char *buf, size_t len)
{
	const char *name = errno_name(f->err);
	char num[24];

	if (!name) {
		snprintf(num, sizeof(num), "errno %d", -f->err);
		name = num;
	}
	snprintf(buf, len, "%s on %s at %llu", name, bs_op_name(f->op),
		 (unsigned long long)f->offset);
}

static void mirror_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct mirror *m = dev->priv;
	unsigned i, n = dev->ncomponents;
	char why[96];

	pthread_mutex_lock(&m->lock);	/* I/O threads may lose a leg */
	kv(arg, "legs", "%u (%u live)", n, m->nlive);
	if (m->nlive == n) {
		kv(arg, "state", "optimal");
	} else {
		char all[512];
		size_t o = 0;

		kv(arg, "state", "degraded");
		all[0] = 0;
		for (i = 0; i < n && o < sizeof(all); i++) {
			if (m->live[i])
				continue;
			fault_text(&m->fault[i], why, sizeof(why));
			o += (size_t)snprintf(all + o, sizeof(all) - o,
					      "%sleg %s faulty (%s)",
					      o ? "; " : "",
					      dev->components[i]->name, why);
		}
		kv(arg, "degraded", "%s", all);
	}
	for (i = 0; i < n; i++) {
		char key[32];

		snprintf(key, sizeof(key), "leg%u", i);
		if (m->live[i]) {
			kv(arg, key, "%s live", dev->components[i]->name);
		} else {
			fault_text(&m->fault[i], why, sizeof(why));
			kv(arg, key, "%s faulty: %s", dev->components[i]->name,
			   why);
		}
	}
	pthread_mutex_unlock(&m->lock);
	for (i = 0; i < n; i++) {
		if (dev->components[i]->size != dev->size) {
			kv(arg, "size_from", "leg %s, the smallest (%llu bytes); "
			   "the rest of the larger legs is unused",
			   dev->components[m->smallest]->name,
			   (unsigned long long)dev->components[m->smallest]->size);
			break;
		}
	}
	kv(arg, "reads_retried", "%llu", (unsigned long long)m->reads_retried);
	kv(arg, "writes_degraded", "%llu",
	   (unsigned long long)m->writes_degraded);
}

static const struct bs_dev_type mirror_type = {
	.name = "mirror",
	.summary = "RAID 1: every write to every live leg, reads round robin",
	.options =
		"devices=A B ...      the legs, two or more (required); legs of\n"
		"                     different sizes: the smallest sets the size\n"
		"                     A leg whose request fails (any error but\n"
		"                     EOPNOTSUPP on write-zeroes/discard) is marked\n"
		"                     faulty and dropped: reads retry on another\n"
		"                     leg, writes complete on the others, `info`\n"
		"                     says degraded. The last live leg is never\n"
		"                     dropped; its errors reach the caller.\n",
	.stacked = true,
	.req_ctx_size = sizeof(struct mirror_req),
	.open = mirror_open,
	.close = mirror_close,
	.submit = mirror_submit,
	.stack_limits = mirror_stack,
	.block_status = mirror_block_status,
	.allocated = mp_components_allocated,
	.describe = mirror_describe,
};

BS_DEV_TYPE(mirror_type)
