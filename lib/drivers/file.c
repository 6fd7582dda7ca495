/* SPDX-License-Identifier: MIT */
/*
 * file: a regular file as a block device, I/O through io_uring.
 *
 * At open the host filesystem is probed on a temporary file in the same
 * directory (never on the user's data): punch hole gives unmap zeroing
 * (WRITE_ZEROES_UNMAP); NOUNMAP zeroing uses the host's
 * FALLOC_FL_WRITE_ZEROES where it works, else ZERO_RANGE, else punch hole
 * followed by a re-allocating fallocate.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

#include "drivers/flock.h"
#include "drivers/uring.h"

#ifndef FALLOC_FL_WRITE_ZEROES
#define FALLOC_FL_WRITE_ZEROES 0x80
#endif

enum zeroes_mode { Z_UNMAP, Z_WRITE, Z_NONE };
static const char *const zeroes_modes[] = { "unmap", "write", "none", NULL };

/* how NOUNMAP zeroing is done on this filesystem */
enum nounmap_how { NU_WRITE_ZEROES, NU_ZERO_RANGE, NU_PUNCH_ALLOC, NU_NONE };

struct file_dev {
	int fd;
	char *path;
	char fstype[16];
	bool direct;
	int zeroes;
	bool can_punch, can_zero_range, can_write_zeroes;
	int nounmap;
	uint32_t dio_mem_align;	/* direct=1: buffer alignment (0 = not direct) */
	const char *dio_align_from; /* which fact gave the alignments */
	struct drv_uring uring;
	struct drv_lock lock;		/* OFD lock on the image (flock.h) */
	/* punches in the kernel now, any thread (atomic) */
	unsigned punching;
	/* punches not sent: the range was a hole already (atomic) */
	uint64_t holes_skipped;
};

static const char *fs_name(long type)
{
	switch (type) {
	case EXT4_SUPER_MAGIC: return "ext4";
	case XFS_SUPER_MAGIC: return "xfs";
	case TMPFS_MAGIC: return "tmpfs";
	case BTRFS_SUPER_MAGIC: return "btrfs";
	case 0x6969: return "nfs";
	case 0x65735546: return "fuse";
	case OVERLAYFS_SUPER_MAGIC: return "overlay";
	default: return "unknown fs";
	}
}

static void probe(struct file_dev *f)
{
	char *dir = strdup(f->path), *slash;
	int fd;

	if (!dir)
		return;
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		strcpy(dir, ".");
	fd = open(dir, O_TMPFILE | O_RDWR, 0600);
	if (fd < 0) {
		char tmpl[4096];
		snprintf(tmpl, sizeof(tmpl), "%s/.blkstack-probe-XXXXXX", dir);
		fd = mkstemp(tmpl);
		if (fd >= 0)
			unlink(tmpl);
	}
	free(dir);
	if (fd < 0)
		return;
	if (ftruncate(fd, 1 << 20) == 0) {
		char buf[65536];
		memset(buf, 1, sizeof(buf));
		if (pwrite(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf)) {
			f->can_punch = !fallocate(fd, FALLOC_FL_PUNCH_HOLE |
						  FALLOC_FL_KEEP_SIZE, 0, 4096);
			f->can_zero_range = !fallocate(fd, FALLOC_FL_ZERO_RANGE |
						       FALLOC_FL_KEEP_SIZE, 4096, 4096);
			f->can_write_zeroes = !fallocate(fd, FALLOC_FL_WRITE_ZEROES,
							 8192, 4096);
		}
	}
	close(fd);
}

static const struct drv_uring_ops file_uring_ops;

/*
 * O_DIRECT alignment: statx(STATX_DIOALIGN) where the kernel and the
 * filesystem tell it (offset alignment raises the logical block size,
 * memory alignment decides which user buffers are bounced); else the
 * st_blksize rule (logical block size up to 4K) for both.
 */
static void dio_align(struct file_dev *f, const struct stat *st, uint32_t *lbs)
{
	struct statx stx;

	if (statx(f->fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &stx) == 0 &&
	    (stx.stx_mask & STATX_DIOALIGN) && stx.stx_dio_offset_align &&
	    stx.stx_dio_offset_align <= 65536 && stx.stx_dio_mem_align) {
		if (*lbs < stx.stx_dio_offset_align)
			*lbs = stx.stx_dio_offset_align;
		f->dio_mem_align = stx.stx_dio_mem_align;
		f->dio_align_from = "statx";
		return;
	}
	if (*lbs < st->st_blksize && st->st_blksize <= 65536)
		*lbs = (uint32_t)st->st_blksize < 4096 ?
			       (uint32_t)st->st_blksize : 4096;
	f->dio_mem_align = *lbs;
	f->dio_align_from = "st_blksize";
}

/*
 * Buffered writes up to this size are written on the serving thread: on
 * ext4, io_uring hands every buffered write to a worker thread (no
 * non-blocking buffered writes there), which for a 4 KiB write costs more
 * than the copy. Measured on the 2-core VM (fio nbd, 4 KiB random
 * writes): depth 1 from 37-46 to 23 us of daemon CPU per write and 1.3-1.7x
 * the IOPS; depth 32 over 4 connections 8-9 instead of 11-16 us. Bigger
 * writes still go to the workers, so a 1 MiB copy does not hold up the
 * other clients of the thread. The cost: a write that the kernel throttles
 * (dirty page limits) blocks the thread's loop while it waits.
 */
#define FILE_INLINE_WRITE_MAX (64u << 10)

static int file_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct file_dev *f;
	const char *path = bs_opts_get(opts, "path");
	uint64_t size = 0;
	uint32_t lbs = 512, depth = 128;
	uint64_t inline_max = FILE_INLINE_WRITE_MAX;
	bool direct = false, lock = true;
	struct statfs sfs;
	struct stat st;
	bool created = false;
	int err, flags;

	if (!path || !*path)
		return bs_error(-EINVAL, "%s: file needs path = PATH", dev->name);
	err = bs_opts_get_size(opts, "size", &size);
	if (err < 0)
		return err;
	/* an explicit 0 is a mistake, not "absent": say so */
	if (err == 0 && !size)
		return bs_error(-EINVAL, "%s: file: size must be > 0 (leave it "
				"out to use the size of an existing file)",
				dev->name);
	if ((err = bs_opts_get_u32(opts, "logical_block_size", &lbs)) < 0 ||
	    (err = bs_opts_get_u32(opts, "queue_depth", &depth)) < 0 ||
	    (err = bs_opts_get_bool(opts, "direct", &direct)) < 0 ||
	    (err = bs_opts_get_bool(opts, "lock", &lock)) < 0 ||
	    (err = bs_opts_get_size(opts, "inline_write_max", &inline_max)) < 0)
		return err;
	if (inline_max > (1u << 20))
		return bs_error(-EINVAL, "%s: inline_write_max %llu: at most 1M "
				"(a bigger copy would hold up the loop thread's "
				"other clients)", dev->name,
				(unsigned long long)inline_max);
	if (lbs < 512 || lbs > 65536 || (lbs & (lbs - 1)))
		return bs_error(-EINVAL, "%s: logical_block_size %u is not a "
				"power of two from 512 to 64K", dev->name, lbs);
	if (depth < 4 || depth > 4096)
		return bs_error(-EINVAL, "%s: queue_depth %u: 4..4096", dev->name,
				depth);
	f = calloc(1, sizeof(*f));
	if (!f || !(f->path = strdup(path))) {
		free(f);
		return -ENOMEM;
	}
	f->zeroes = Z_UNMAP;
	if ((err = bs_opts_get_enum(opts, "zeroes", zeroes_modes,
				    &f->zeroes)) < 0)
		goto fail_free;
	f->direct = direct;
	flags = (dev->readonly ? O_RDONLY : O_RDWR) | O_CLOEXEC |
		(direct ? O_DIRECT : 0);
	f->fd = open(path, flags);
	if (f->fd < 0 && errno == ENOENT && !dev->readonly) {
		if (!size) {
			err = bs_error(-ENOENT, "%s: file: %s does not exist "
				       "(give size = SIZE to create it)",
				       dev->name, path);
			goto fail_free;
		}
		if (size % lbs) {
			err = bs_error(-EINVAL, "%s: file: size = %llu is not a "
				       "multiple of the logical block size %u; "
				       "not creating %s", dev->name,
				       (unsigned long long)size, lbs, path);
			goto fail_free;
		}
		/* a volume is its owner's data: no other user reads it */
		f->fd = open(path, flags | O_CREAT | O_EXCL, 0600);
		created = f->fd >= 0;
		if (f->fd >= 0 && ftruncate(f->fd, (off_t)size) < 0) {
			err = bs_error(-errno, "%s: file: %s: cannot size: %s",
				       dev->name, path, strerror(errno));
			close(f->fd);
			unlink(path);
			goto fail_free;
		}
	}
	if (f->fd < 0) {
		err = bs_error(-errno, "%s: file: %s: open: %s", dev->name, path,
			       strerror(errno));
		goto fail_free;
	}
	if (fstat(f->fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		err = bs_error(-EINVAL, "%s: file: %s is not a regular file "
			       "(use hostbdev for block devices)", dev->name,
			       path);
		goto fail_close;
	}
	if (size && (uint64_t)st.st_size != size) {
		err = bs_error(-EINVAL, "%s: file: %s is %llu bytes, the config "
			       "says size = %llu; not resizing", dev->name, path,
			       (unsigned long long)st.st_size,
			       (unsigned long long)size);
		goto fail_close;
	}
	if (direct)
		dio_align(f, &st, &lbs);
	dev->size = (uint64_t)st.st_size & ~((uint64_t)lbs - 1);
	if (!dev->size) {
		err = bs_error(-EINVAL, "%s: file: %s is empty", dev->name, path);
		goto fail_close;
	}
	/* no second writer, in this process or another (flock.h) */
	if (lock && (err = drv_lock(&f->lock, f->fd, path, !dev->readonly, dev,
				    "file")))
		goto fail_close;
	if (fstatfs(f->fd, &sfs) == 0)
		snprintf(f->fstype, sizeof(f->fstype), "%s", fs_name(sfs.f_type));
	probe(f);

	/* O_DIRECT writes are not buffered: they go through the ring */
	f->uring.inline_write_max = direct ? 0 : (uint32_t)inline_max;
	err = drv_uring_init(&f->uring, dev, f->fd, depth, &file_uring_ops,
			     "file");
	if (err)
		goto fail_close;
	f->uring.mem_align = f->dio_mem_align;
	f->uring.eof_zeroes = true;

	dev->priv = f;
	dev->limits.logical_block_size = lbs;
	dev->limits.physical_block_size = st.st_blksize > lbs &&
						  st.st_blksize <= 65536 ?
						  (uint32_t)st.st_blksize : lbs;
	dev->limits.max_hw_sectors = 2048;
	dev->limits.features |= BS_FEAT_WRITE_CACHE;
	if (f->can_punch) {
		dev->limits.max_discard_sectors = UINT32_MAX;
		dev->limits.discard_granularity = dev->limits.physical_block_size;
	}
	f->nounmap = f->can_write_zeroes ? NU_WRITE_ZEROES :
		     f->can_zero_range	 ? NU_ZERO_RANGE :
		     f->can_punch	 ? NU_PUNCH_ALLOC : NU_NONE;
	if (f->zeroes == Z_NONE) {
		bs_dev_set_reason(dev, "file on %s: zeroes = none set by the "
				  "user: no write-zeroes", f->fstype);
	} else if (f->zeroes == Z_WRITE) {
		if (f->nounmap != NU_NONE)
			dev->limits.max_write_zeroes_sectors = UINT32_MAX;
		bs_dev_set_reason(dev, "file on %s: zeroes = write set by the "
				  "user: no unmap", f->fstype);
	} else if (f->can_punch) {
		dev->limits.max_write_zeroes_sectors = UINT32_MAX;
		dev->limits.features |= BS_FEAT_WRITE_ZEROES_UNMAP;
		bs_dev_set_reason(dev, "file on %s: punch hole works -> unmap "
				  "zeroing", f->fstype);
	} else {
		if (f->nounmap != NU_NONE)
			dev->limits.max_write_zeroes_sectors = UINT32_MAX;
		bs_dev_set_reason(dev, "file on %s: no punch hole -> no unmap",
				  f->fstype);
	}
	return 0;
fail_close:
	drv_unlock(&f->lock);
	close(f->fd);
	if (created)
		unlink(path);	/* ours, made a moment ago: leave no trace */
fail_free:
	free(f->path);
	free(f);
	return err;
}

static void file_close(struct bs_dev *dev)
{
	struct file_dev *f = dev->priv;

	drv_uring_exit(&f->uring);
	drv_unlock(&f->lock);
	close(f->fd);
	free(f->path);
	free(f);
}

/* What the file driver keeps per request. */
struct file_req {
	struct drv_uring_req u;		/* first: the io_uring path's */
	bool allocate_again;		/* NOUNMAP by punch: second step */
	bool punching;			/* counted in file_dev.punching */
};

/*
 * A punch (discard, or zeroing that may unmap) of [@off, @end): where it
 * has to start, or -1 when no block of the range is allocated and there is
 * nothing to do. Punching a hole costs as much as punching data on ext4
 * (the inode lock taken exclusively, direct I/O in flight drained), so
 * zeroing a never-written range in a loop slowed every writer of the file.
 * FIEMAP, not SEEK_DATA: unwritten extents read as zeroes but hold space,
 * and a punch must free them. It waits on a punch in the kernel (the
 * extent tree is locked), so while one is there the punch is sent as
 * asked rather than block this thread. A filesystem without FIEMAP: as
 * asked.
 */
static off_t punch_start(struct file_dev *f, off_t off, off_t end)
{
	/* a struct fiemap and room for one extent after it */
	uint64_t m[(sizeof(struct fiemap) + sizeof(struct fiemap_extent)) / 8];
	struct fiemap *fm = (struct fiemap *)m;

	if (__atomic_load_n(&f->punching, __ATOMIC_ACQUIRE))
		return off;
	memset(m, 0, sizeof(m));
	fm->fm_start = (uint64_t)off;
	fm->fm_length = (uint64_t)(end - off);
	fm->fm_extent_count = 1;
	if (ioctl(f->fd, FS_IOC_FIEMAP, fm) < 0)
		return off;
	if (fm->fm_mapped_extents == 0)
		return -1;
	if ((off_t)fm->fm_extents[0].fe_logical > off)
		off = (off_t)fm->fm_extents[0].fe_logical;
	return off < end ? off : -1;
}

/*
 * DISCARD and WRITE_ZEROES become one fallocate SQE each; two-step NOUNMAP
 * zeroing (punch, then allocate again) keeps its phase in struct file_req.
 */
static int file_prep(struct bs_dev *dev, struct bs_req *req,
		     struct io_uring_sqe *sqe)
{
	struct file_dev *f = dev->priv;
	struct file_req *fr = bs_req_drv(req);
	off_t off = (off_t)req->offset, end = off + (off_t)req->len;
	bool punch_only = false;	/* a hole is the whole answer */
	int mode;

	switch (req->op) {
	case BS_OP_DISCARD:
		mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		punch_only = true;
		break;
	case BS_OP_WRITE_ZEROES:
		if (!(req->flags & BS_REQ_NOUNMAP) && f->zeroes == Z_UNMAP &&
		    f->can_punch) {
			mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
			punch_only = true;
		} else if (f->nounmap == NU_WRITE_ZEROES)
			mode = FALLOC_FL_WRITE_ZEROES;
		else if (f->nounmap == NU_ZERO_RANGE)
			mode = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
		else if (f->nounmap == NU_PUNCH_ALLOC)
			/* punch, then allocate again: allocated zeroes */
			mode = fr->allocate_again
				       ? FALLOC_FL_KEEP_SIZE
				       : FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		else
			return -EOPNOTSUPP;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (punch_only) {
		off = punch_start(f, off, end);
		if (off < 0) {
			__atomic_fetch_add(&f->holes_skipped, 1, __ATOMIC_RELAXED);
			return DRV_URING_DONE;
		}
		fr->punching = true;
		__atomic_fetch_add(&f->punching, 1, __ATOMIC_RELEASE);
	}
	io_uring_prep_fallocate(sqe, f->fd, mode, off, end - off);
	return 0;
}

static void file_reaped(struct bs_dev *dev, struct bs_req *req)
{
	struct file_dev *f = dev->priv;
	struct file_req *fr = bs_req_drv(req);

	if (fr->punching) {
		fr->punching = false;
		__atomic_fetch_sub(&f->punching, 1, __ATOMIC_RELEASE);
	}
}

static bool file_again(struct bs_dev *dev, struct bs_req *req)
{
	struct file_dev *f = dev->priv;
	struct file_req *fr = bs_req_drv(req);

	if (req->op == BS_OP_WRITE_ZEROES && f->nounmap == NU_PUNCH_ALLOC &&
	    !fr->allocate_again &&
	    ((req->flags & BS_REQ_NOUNMAP) || f->zeroes != Z_UNMAP)) {
		fr->allocate_again = true; /* now allocate again */
		return true;
	}
	return false;
}

static const struct drv_uring_ops file_uring_ops = {
	.prep = file_prep,
	.reaped = file_reaped,
	.again = file_again,
};

static void file_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct file_dev *f = dev->priv;

	drv_uring_submit(&f->uring, req);
}

static int file_block_status(struct bs_dev *dev, uint64_t offset, uint64_t len,
			     bs_extent_fn fn, void *arg)
{
	struct file_dev *f = dev->priv;
	off_t pos = (off_t)offset, end = (off_t)(offset + len);

	while (pos < end) {
		off_t data = lseek(f->fd, pos, SEEK_DATA), hole;
		if (data < 0) {
			if (errno != ENXIO)
				return -errno;
			data = end; /* only a hole remains */
		}
		if (data > pos) {
			off_t e = data < end ? data : end;
			if (fn(arg, (uint64_t)pos, (uint64_t)(e - pos),
			       BS_EXT_HOLE | BS_EXT_ZERO))
				return 0;
			pos = e;
			continue;
		}
		hole = lseek(f->fd, pos, SEEK_HOLE);
		if (hole < 0)
			return -errno;
		if (hole > end)
			hole = end;
		if (fn(arg, (uint64_t)pos, (uint64_t)(hole - pos), 0))
			return 0;
		pos = hole;
	}
	return 0;
}

static int64_t file_allocated(struct bs_dev *dev)
{
	struct file_dev *f = dev->priv;
	struct stat st;

	if (fstat(f->fd, &st) < 0)
		return -errno;
	return (int64_t)st.st_blocks * 512;
}

static void file_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct file_dev *f = dev->priv;
	static const char *const nu[] = { "host write-zeroes", "zero range",
					  "punch + allocate", "none" };

	kv(arg, "path", "%s", f->path);
	kv(arg, "filesystem", "%s", f->fstype);
	if (f->direct)
		kv(arg, "direct", "1 (buffers aligned to %u bytes, by %s; "
		   "others bounced: %llu so far)", f->dio_mem_align,
		   f->dio_align_from, (unsigned long long)__atomic_load_n(&f->uring.bounced, __ATOMIC_RELAXED));
	else
		kv(arg, "direct", "0");
	kv(arg, "zeroes", "%s", zeroes_modes[f->zeroes]);
	kv(arg, "inline_write_max", "%u", f->uring.inline_write_max);
	kv(arg, "probe", "punch_hole=%s zero_range=%s write_zeroes=%s",
	   f->can_punch ? "yes" : "no", f->can_zero_range ? "yes" : "no",
	   f->can_write_zeroes ? "yes" : "no");
	kv(arg, "nounmap_zeroing", "%s", nu[f->nounmap]);
	kv(arg, "punches_skipped", "%llu (no block of the range was allocated)",
	   (unsigned long long)__atomic_load_n(&f->holes_skipped,
					       __ATOMIC_RELAXED));
}

static const struct bs_dev_type file_type = {
	.name = "file",
	.req_ctx_size = sizeof(struct file_req),
	.summary = "a regular file (created sparse if missing), io_uring",
	.options =
		"path=PATH            the file (required; file:PATH)\n"
		"size=SIZE            create it sparse at SIZE if missing; must match if present (> 0)\n"
		"direct=0|1           O_DIRECT (0); unaligned buffers are bounced\n"
		"logical_block_size=N 512..65536 (512)\n"
		"zeroes=unmap|write|none  what zeroing may do (unmap)\n"
		"queue_depth=N        io_uring entries (128)\n"
		"inline_write_max=SIZE  buffered writes up to SIZE are written on the\n"
		"                     serving thread (pwritev), larger ones through\n"
		"                     io_uring workers; 0 = all through io_uring (64K)\n"
		"lock=0|1             OFD-lock the file: write lock read-write, read\n"
		"                     lock readonly; in use elsewhere -> EBUSY (1)\n",
	.open = file_open,
	.close = file_close,
	.submit = file_submit,
	.block_status = file_block_status,
	.allocated = file_allocated,
	.describe = file_describe,
};

BS_DEV_TYPE(file_type)
