/* SPDX-License-Identifier: MIT */
/*
 * hostbdev: a host block device or partition as a blkstack device.
 *
 * Limits come from the host's sysfs queue directory (a partition reads its
 * disk's), so the device offers exactly what the host's block layer offers:
 * write-zeroes where write_zeroes_max_bytes > 0, WRITE_ZEROES_UNMAP where
 * the host says unmap zeroing is enabled (queue/write_zeroes_unmap_max_bytes
 * > 0 on kernels with the merged form, queue/write_zeroes_unmap = 1 on those
 * with the boolean form; absent = no), discard where discard_max_bytes > 0.
 *
 * READ, WRITE and FLUSH go through io_uring (drivers/uring.c). Zeroing and
 * discard are system calls that block until the device is done: unmap
 * zeroing is fallocate(FALLOC_FL_WRITE_ZEROES), NOUNMAP zeroing the
 * BLKZEROOUT ioctl, discard BLKDISCARD. They run on the context's worker
 * threads (bs_ctx_workers(), include/blkstack/workers.h) and complete on
 * the loop's thread: the loop never blocks.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>
#include <blkstack/workers.h>

#include "drivers/flock.h"
#include "drivers/uring.h"

#ifndef FALLOC_FL_WRITE_ZEROES
#define FALLOC_FL_WRITE_ZEROES 0x80
#endif

/* what a worker does for a request */
enum hb_how { HB_WZ_UNMAP = 1, HB_ZEROOUT, HB_DISCARD };

static const char *how_name(enum hb_how how)
{
	switch (how) {
	case HB_WZ_UNMAP: return "fallocate(FALLOC_FL_WRITE_ZEROES)";
	case HB_ZEROOUT: return "BLKZEROOUT";
	default: return "BLKDISCARD";
	}
}

struct hostbdev {
	struct bs_dev *dev;
	int fd;
	char *path;
	char host[NAME_MAX + 1];	/* "loop3", "sda1" */
	char parent[NAME_MAX + 1];	/* the disk of a partition, else "" */
	char queue_dir[PATH_MAX];	/* where the limits were read */
	char wzu_from[128];		/* the host attribute that decided unmap */
	bool direct, exclusive;
	bool unmap;			/* host offers unmap zeroing */
	uint32_t mem_align;
	const char *align_from;
	struct drv_uring uring;
	struct drv_lock lock;		/* OFD lock on the node (flock.h) */

	unsigned busy;			/* jobs on the workers, not completed */
};

/* ---- sysfs ------------------------------------------------------------- */

/* Read a sysfs attribute as one line; -errno (-ENOENT when absent). */
static int sysfs_read(const char *dir, const char *name, char *buf,
		      size_t len)
{
	char p[PATH_MAX + 64];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return 0;
}

/* 0 with *out set, -ENOENT when absent, -EINVAL when not a number. */
static int sysfs_u64(const char *dir, const char *name, uint64_t *out)
{
	char buf[64], *end;
	unsigned long long v;
	int err = sysfs_read(dir, name, buf, sizeof(buf));

	if (err)
		return err;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

static uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

/*
 * Find the host's name of @rdev and its queue directory: a partition has
 * no queue of its own, its limits are the disk's (the parent directory).
 * BLKSTACK_SYSFS_ROOT (tests only) puts a fake sysfs tree in place of /sys.
 */
static int find_sysfs(struct hostbdev *h, dev_t rdev)
{
	char link[PATH_MAX], real[PATH_MAX], tmp[PATH_MAX], part[PATH_MAX + 16];
	const char *root = secure_getenv("BLKSTACK_SYSFS_ROOT");
	struct stat st;
	int n;

	snprintf(link, sizeof(link), "%.*s/dev/block/%u:%u", PATH_MAX - 64,
		 root && *root ? root : "/sys", major(rdev), minor(rdev));
	if (!realpath(link, real))
		return bs_error(-errno, "%s: hostbdev %s: %s: %s", h->dev->name,
				h->path, link, strerror(errno));
	snprintf(h->host, sizeof(h->host), "%s", basename(strcpy(tmp, real)));
	snprintf(part, sizeof(part), "%s/partition", real);
	if (stat(part, &st) == 0) {
		char *up = dirname(strcpy(tmp, real));

		snprintf(h->parent, sizeof(h->parent), "%s",
			 basename(strcpy(real, up)));
		n = snprintf(h->queue_dir, sizeof(h->queue_dir), "%.*s/queue",
			     PATH_MAX - 8, up);
	} else {
		n = snprintf(h->queue_dir, sizeof(h->queue_dir), "%.*s/queue",
			     PATH_MAX - 8, real);
	}
	if (n >= (int)sizeof(h->queue_dir))
		return bs_error(-ENAMETOOLONG, "%s: hostbdev %s: sysfs path too "
				"long", h->dev->name, h->path);
	if (stat(h->queue_dir, &st) < 0)
		return bs_error(-ENOENT, "%s: hostbdev %s: no queue directory "
				"%s", h->dev->name, h->path, h->queue_dir);
	return 0;
}

/* Limits and features from the host's queue directory. */
static int read_limits(struct hostbdev *h, struct bs_limits *l)
{
	const char *q = h->queue_dir;
	uint64_t v, hw_kb, kb, wz = 0;
	char buf[64];
	int err;

	if ((err = sysfs_u64(q, "logical_block_size", &v)) < 0 || v < 512 ||
	    v > 65536 || (v & (v - 1)))
		return bs_error(err ? err : -EINVAL, "%s: hostbdev %s: cannot "
				"use %s/logical_block_size", h->dev->name,
				h->path, q);
	l->logical_block_size = (uint32_t)v;
	l->physical_block_size = l->logical_block_size;
	if (!sysfs_u64(q, "physical_block_size", &v) &&
	    v >= l->logical_block_size)
		l->physical_block_size = clamp32(v);
	if (!sysfs_u64(q, "minimum_io_size", &v))
		l->io_min = clamp32(v);
	if (!sysfs_u64(q, "optimal_io_size", &v))
		l->io_opt = clamp32(v);
	if (!sysfs_u64(q, "max_hw_sectors_kb", &hw_kb) && hw_kb)
		l->max_hw_sectors = clamp32(hw_kb * 2);
	/* the host's own cap, as our user cap: same effective size */
	if (!sysfs_u64(q, "max_sectors_kb", &kb) && kb &&
	    kb * 2 < l->max_hw_sectors)
		l->max_user_sectors = clamp32(kb * 2);
	if (!sysfs_u64(q, "discard_max_bytes", &v) && v) {
		l->max_discard_sectors = clamp32(v >> BS_SECTOR_SHIFT);
		if (!sysfs_u64(q, "discard_granularity", &v))
			l->discard_granularity = clamp32(v);
	}
	if (!sysfs_u64(q, "write_zeroes_max_bytes", &wz))
		l->max_write_zeroes_sectors = clamp32(wz >> BS_SECTOR_SHIFT);
	if (!sysfs_u64(q, "rotational", &v) && v)
		l->features |= BS_FEAT_ROTATIONAL;
	if (!sysfs_read(q, "write_cache", buf, sizeof(buf)) &&
	    !strcmp(buf, "write back"))
		l->features |= BS_FEAT_WRITE_CACHE;
	if (!sysfs_u64(q, "fua", &v) && v)
		l->features |= BS_FEAT_FUA;

	/*
	 * Unmap zeroing: the merged form (bytes; 0 when the host's driver
	 * lacks it or the host's user turned it off), else the seed's
	 * boolean, else the host kernel predates both: no.
	 */
	err = sysfs_u64(q, "write_zeroes_unmap_max_bytes", &v);
	if (!err) {
		h->unmap = v > 0;
		snprintf(h->wzu_from, sizeof(h->wzu_from),
			 "host queue/write_zeroes_unmap_max_bytes = %llu",
			 (unsigned long long)v);
	} else if (!(err = sysfs_u64(q, "write_zeroes_unmap", &v))) {
		h->unmap = v == 1;
		snprintf(h->wzu_from, sizeof(h->wzu_from),
			 "host queue/write_zeroes_unmap = %llu",
			 (unsigned long long)v);
	} else {
		h->unmap = false;
		snprintf(h->wzu_from, sizeof(h->wzu_from),
			 "host kernel has no queue/write_zeroes_unmap_max_bytes "
			 "nor queue/write_zeroes_unmap");
	}
	if (!l->max_write_zeroes_sectors) {
		h->unmap = false;
		bs_dev_set_reason(h->dev, "hostbdev %s: host "
				  "queue/write_zeroes_max_bytes = 0 -> no "
				  "write-zeroes", h->host);
	} else if (h->unmap) {
		l->features |= BS_FEAT_WRITE_ZEROES_UNMAP;
		bs_dev_set_reason(h->dev, "hostbdev %s: %s -> unmap zeroing "
				  "(fallocate FALLOC_FL_WRITE_ZEROES)", h->host,
				  h->wzu_from);
	} else {
		bs_dev_set_reason(h->dev, "hostbdev %s: %s -> no unmap",
				  h->host, h->wzu_from);
	}
	return 0;
}

/* O_DIRECT buffer alignment: statx where the kernel tells it for block
 * devices, else the queue's dma_alignment, else the logical block size. */
static void direct_align(struct hostbdev *h, uint32_t lbs)
{
	struct statx stx;
	uint64_t v;

	if (statx(h->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_mem_align) {
		h->mem_align = stx.stx_dio_mem_align;
		h->align_from = "statx";
	} else if (!sysfs_u64(h->queue_dir, "dma_alignment", &v) &&
		   v < 65536) {
		h->mem_align = (uint32_t)v + 1;
		h->align_from = "queue/dma_alignment";
	} else {
		h->mem_align = lbs;
		h->align_from = "logical block size";
	}
	if (h->mem_align & (h->mem_align - 1) || h->mem_align < sizeof(void *))
		h->mem_align = lbs; /* posix_memalign wants a power of two */
}

/* ---- blocking calls on the context's workers ---------------------------- */

struct hb_job {
	struct bs_job job;
	struct hostbdev *h;
	struct bs_req *req;
	enum hb_how how;
};

/* What hostbdev keeps per request (the core's per-request context). */
struct hb_req {
	struct drv_uring_req u;		/* first: the io_uring path's */
	struct hb_job job;		/* zeroing and discard on a worker */
};

static int run_blocking(struct bs_job *job)
{
	struct hb_job *j = (struct hb_job *)job;
	struct bs_req *req = j->req;
	uint64_t range[2] = { req->offset, req->len };
	int r;

	do {
		switch (j->how) {
		case HB_WZ_UNMAP:
			r = fallocate(j->h->fd, FALLOC_FL_WRITE_ZEROES,
				      (off_t)req->offset, (off_t)req->len);
			break;
		case HB_ZEROOUT:
			r = ioctl(j->h->fd, BLKZEROOUT, range);
			break;
		default:
			r = ioctl(j->h->fd, BLKDISCARD, range);
		}
	} while (r < 0 && errno == EINTR);
	return r < 0 ? -errno : 0;
}

/* On the loop's thread: finish what a worker did. */
static void complete_blocking(struct bs_job *job)
{
	struct hb_job *j = (struct hb_job *)job;
	struct hostbdev *h = j->h;
	struct bs_req *req = j->req;
	enum hb_how how = j->how;
	int res = job->result;

	__atomic_fetch_sub(&h->busy, 1, __ATOMIC_RELAXED);
	if (res) {
		char why[NAME_MAX + 96];

		bs_error(res, "%s: hostbdev %s: %s: %s", h->dev->name, h->path,
			 how_name(how), strerror(-res));
		/*
		 * The core's rule for a write-zeroes refused at run time: stop
		 * offering it here and above. Done here first so that the
		 * reason names the call that failed.
		 */
		if (res == -EOPNOTSUPP && req->op == BS_OP_WRITE_ZEROES &&
		    bs_dev_limits(h->dev)->max_write_zeroes_sectors) {
			snprintf(why, sizeof(why), "hostbdev %s: %s failed with "
				 "EOPNOTSUPP at run time", h->host,
				 how_name(how));
			bs_dev_disable_write_zeroes(h->dev, why);
		}
	}
	bs_req_complete(req, res);
}

static void submit_blocking(struct hostbdev *h, struct bs_req *req,
			    enum hb_how how)
{
	struct bs_workers *w = bs_ctx_workers(h->dev->ctx);
	struct hb_job *j = &((struct hb_req *)bs_req_drv(req))->job;

	if (!w) {
		bs_req_complete(req, -ENOMEM);
		return;
	}
	j->job.run = run_blocking;
	j->job.done = complete_blocking;
	j->h = h;
	j->req = req;
	j->how = how;
	__atomic_fetch_add(&h->busy, 1, __ATOMIC_RELAXED);
	bs_workers_submit(w, &j->job);
}

/* Wait for this device's jobs (device closing). */
static void drain_blocking(struct hostbdev *h)
{
	struct bs_loop *loop = bs_ctx_loop(h->dev->ctx);

	while (__atomic_load_n(&h->busy, __ATOMIC_RELAXED))
		if (bs_loop_run_once(loop, 100))
			break;
}

/* ---- the device type --------------------------------------------------- */

static void hb_free(struct hostbdev *h)
{
	drv_unlock(&h->lock);
	if (h->fd >= 0)
		close(h->fd);
	free(h->path);
	free(h);
}

static int hb_open(struct bs_dev *dev, struct bs_opts *opts)
{
	const char *path = bs_opts_get(opts, "path");
	uint32_t depth = 128;
	bool direct = true, exclusive = true, lock = true;
	struct hostbdev *h;
	uint64_t size;
	struct stat st;
	int err, flags;

	if (!path || !*path)
		return bs_error(-EINVAL, "%s: hostbdev needs path = /dev/NAME",
				dev->name);
	if ((err = bs_opts_get_u32(opts, "queue_depth", &depth)) < 0 ||
	    (err = bs_opts_get_bool(opts, "direct", &direct)) < 0 ||
	    (err = bs_opts_get_bool(opts, "exclusive", &exclusive)) < 0 ||
	    (err = bs_opts_get_bool(opts, "lock", &lock)) < 0)
		return err;
	if (depth < 4 || depth > 4096)
		return bs_error(-EINVAL, "%s: queue_depth %u: 4..4096",
				dev->name, depth);
	h = calloc(1, sizeof(*h));
	if (!h || !(h->path = strdup(path))) {
		free(h);
		return -ENOMEM;
	}
	h->dev = dev;
	h->direct = direct;
	/* exclusive like the kernel's own users: not while mounted */
	h->exclusive = exclusive && !dev->readonly;
	flags = (dev->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC |
		(direct ? O_DIRECT : 0) | (h->exclusive ? O_EXCL : 0);
	h->fd = open(path, flags);
	if (h->fd < 0) {
		err = -errno;
		bs_error(err, "%s: hostbdev %s: open: %s%s", dev->name, path,
			 strerror(errno),
			 errno == EBUSY ? " (mounted or held by another user; "
					  "it is opened exclusively)" : "");
		goto fail;
	}
	if (fstat(h->fd, &st) < 0 || !S_ISBLK(st.st_mode)) {
		err = bs_error(-EINVAL, "%s: hostbdev %s is not a block device "
			       "(use file for regular files)", dev->name, path);
		goto fail;
	}
	/* also read-only opens and exclusive=0: no writer meanwhile */
	if (lock && (err = drv_lock(&h->lock, h->fd, path, !dev->readonly, dev,
				    "hostbdev")))
		goto fail;
	if ((err = find_sysfs(h, st.st_rdev)) ||
	    (err = read_limits(h, &dev->limits)))
		goto fail;
	if (ioctl(h->fd, BLKGETSIZE64, &size) < 0) {
		err = bs_error(-errno, "%s: hostbdev %s: BLKGETSIZE64: %s",
			       dev->name, path, strerror(errno));
		goto fail;
	}
	dev->size = size & ~((uint64_t)dev->limits.logical_block_size - 1);
	if (!dev->size) {
		err = bs_error(-EINVAL, "%s: hostbdev %s is empty (no medium?)",
			       dev->name, path);
		goto fail;
	}
	if (direct)
		direct_align(h, dev->limits.logical_block_size);
	err = drv_uring_init(&h->uring, dev, h->fd, depth, NULL, "hostbdev");
	if (err)
		goto fail;
	h->uring.mem_align = direct ? h->mem_align : 0;
	if (!bs_ctx_workers(dev->ctx)) {
		err = -EAGAIN;
		drv_uring_exit(&h->uring);
		bs_error(err, "%s: hostbdev %s: no worker threads for zeroing "
			 "and discard", dev->name, path);
		goto fail;
	}
	dev->priv = h;
	return 0;
fail:
	hb_free(h);
	return err;
}

static void hb_close(struct bs_dev *dev)
{
	struct hostbdev *h = dev->priv;

	drain_blocking(h);
	drv_uring_exit(&h->uring);
	hb_free(h);
}

static void hb_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct hostbdev *h = dev->priv;
	enum hb_how how;

	switch (req->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
	case BS_OP_FLUSH:
		drv_uring_submit(&h->uring, req);
		return;
	case BS_OP_WRITE_ZEROES:
		/* may unmap only when asked and the host and the user agree */
		how = !(req->flags & BS_REQ_NOUNMAP) && h->unmap &&
				      bs_dev_write_zeroes_unmap(dev)
			      ? HB_WZ_UNMAP : HB_ZEROOUT;
		break;
	case BS_OP_DISCARD:
		how = HB_DISCARD;
		break;
	default:
		bs_req_complete(req, -EOPNOTSUPP);
		return;
	}
	submit_blocking(h, req, how);
}

static void hb_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct hostbdev *h = dev->priv;

	kv(arg, "path", "%s", h->path);
	if (h->parent[0])
		kv(arg, "host", "%s (partition of %s)", h->host, h->parent);
	else
		kv(arg, "host", "%s", h->host);
	kv(arg, "sysfs", "%s", h->queue_dir);
	if (h->direct)
		kv(arg, "direct", "1 (buffers aligned to %u bytes, by %s; "
		   "others bounced: %llu so far)", h->mem_align, h->align_from,
		   (unsigned long long)__atomic_load_n(&h->uring.bounced, __ATOMIC_RELAXED));
	else
		kv(arg, "direct", "0");
	kv(arg, "exclusive", "%d", h->exclusive);
	kv(arg, "write_zeroes_unmap_from", "%s", h->wzu_from);
	kv(arg, "unmap_zeroing", "%s", h->unmap ? how_name(HB_WZ_UNMAP)
						 : "none");
	kv(arg, "nounmap_zeroing", "%s",
	   dev->limits.max_write_zeroes_sectors ? how_name(HB_ZEROOUT)
						: "none");
	kv(arg, "discard", "%s", dev->limits.max_discard_sectors
					 ? how_name(HB_DISCARD) : "none");
}

static const struct bs_dev_type hostbdev_type = {
	.name = "hostbdev",
	.req_ctx_size = sizeof(struct hb_req),
	.summary = "a host block device or partition (limits from its sysfs), io_uring",
	.options =
		"path=/dev/NAME       the device (required; hostbdev:PATH)\n"
		"direct=0|1           O_DIRECT (1); unaligned buffers are bounced\n"
		"exclusive=0|1        open with O_EXCL, refused while mounted (1;\n"
		"                     never for readonly)\n"
		"queue_depth=N        io_uring entries (128)\n"
		"lock=0|1             OFD-lock the device node: write lock read-write,\n"
		"                     read lock readonly; in use elsewhere -> EBUSY (1)\n",
	.open = hb_open,
	.close = hb_close,
	.submit = hb_submit,
	.describe = hb_describe,
};

BS_DEV_TYPE(hostbdev_type)
