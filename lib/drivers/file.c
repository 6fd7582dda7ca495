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
#include <liburing.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

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
	struct io_uring ring;
	unsigned depth;
	unsigned inflight;
	struct bs_req *wait_head, *wait_tail; /* waiting for a free SQE */
	bool dirty;			      /* SQEs queued, not submitted */
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

static void file_prepoll(void *arg);
static void file_reap(void *arg, uint32_t events);

static int file_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct file_dev *f;
	const char *path = bs_opts_get(opts, "path");
	uint64_t size = 0;
	uint32_t lbs = 512, depth = 128;
	bool have_size, direct = false;
	struct statfs sfs;
	struct stat st;
	int err, flags;

	if (!path || !*path)
		return bs_error(-EINVAL, "%s: file needs path = PATH", dev->name);
	if ((err = bs_opts_get_size(opts, "size", &size)) < 0 ||
	    (err = bs_opts_get_u32(opts, "logical_block_size", &lbs)) < 0 ||
	    (err = bs_opts_get_u32(opts, "queue_depth", &depth)) < 0 ||
	    (err = bs_opts_get_bool(opts, "direct", &direct)) < 0)
		return err;
	have_size = err == 0 || size;
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
		f->fd = open(path, flags | O_CREAT | O_EXCL, 0644);
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
	if (have_size && size && (uint64_t)st.st_size != size) {
		err = bs_error(-EINVAL, "%s: file: %s is %llu bytes, the config "
			       "says size = %llu; not resizing", dev->name, path,
			       (unsigned long long)st.st_size,
			       (unsigned long long)size);
		goto fail_close;
	}
	if (direct && lbs < st.st_blksize && st.st_blksize <= 65536)
		lbs = (uint32_t)st.st_blksize < 4096 ? (uint32_t)st.st_blksize :
						       4096;
	dev->size = (uint64_t)st.st_size & ~((uint64_t)lbs - 1);
	if (!dev->size) {
		err = bs_error(-EINVAL, "%s: file: %s is empty", dev->name, path);
		goto fail_close;
	}
	if (fstatfs(f->fd, &sfs) == 0)
		snprintf(f->fstype, sizeof(f->fstype), "%s", fs_name(sfs.f_type));
	probe(f);

	f->depth = depth;
	err = io_uring_queue_init(depth, &f->ring, 0);
	if (err < 0) {
		bs_error(err, "%s: file: io_uring setup: %s", dev->name,
			 strerror(-err));
		goto fail_close;
	}
	err = bs_loop_add_fd(bs_ctx_loop(dev->ctx), f->ring.ring_fd, EPOLLIN,
			     file_reap, dev);
	if (!err)
		err = bs_loop_add_prepoll(bs_ctx_loop(dev->ctx), file_prepoll,
					  dev);
	if (err) {
		io_uring_queue_exit(&f->ring);
		goto fail_close;
	}

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
	close(f->fd);
fail_free:
	free(f->path);
	free(f);
	return err;
}

static void file_close(struct bs_dev *dev)
{
	struct file_dev *f = dev->priv;
	struct bs_loop *loop = bs_ctx_loop(dev->ctx);

	/* let what is in flight finish before the ring goes */
	while (f->inflight || f->wait_head)
		if (bs_loop_run_once(loop, 100))
			break;
	bs_loop_del_prepoll(loop, file_prepoll, dev);
	bs_loop_del_fd(loop, f->ring.ring_fd);
	io_uring_queue_exit(&f->ring);
	close(f->fd);
	free(f->path);
	free(f);
}

/*
 * Each request becomes one SQE; drv_u64 counts bytes done (short I/O),
 * drv holds the phase of two-step NOUNMAP zeroing.
 */
static bool queue_sqe(struct bs_dev *dev, struct bs_req *req)
{
	struct file_dev *f = dev->priv;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&f->ring);
	uint64_t off = req->offset + req->drv_u64;
	uint64_t len = req->len - req->drv_u64;
	int mode;

	if (!sqe)
		return false;
	switch (req->op) {
	case BS_OP_READ:
	case BS_OP_WRITE:
		if (req->drv_u64 || req->iovcnt != 1) {
			/* resume a short transfer: one piece at a time */
			uint64_t skip = req->drv_u64;
			int i;
			for (i = 0; i < req->iovcnt && skip >= req->iov[i].iov_len; i++)
				skip -= req->iov[i].iov_len;
			if (req->drv_u64 || i) {
				void *p = (char *)req->iov[i].iov_base + skip;
				unsigned n = (unsigned)(req->iov[i].iov_len - skip);
				if (req->op == BS_OP_READ)
					io_uring_prep_read(sqe, f->fd, p, n, off);
				else
					io_uring_prep_write(sqe, f->fd, p, n, off);
				break;
			}
			if (req->op == BS_OP_READ)
				io_uring_prep_readv(sqe, f->fd, req->iov,
						    (unsigned)req->iovcnt, off);
			else
				io_uring_prep_writev(sqe, f->fd, req->iov,
						     (unsigned)req->iovcnt, off);
			break;
		}
		if (req->op == BS_OP_READ)
			io_uring_prep_read(sqe, f->fd, req->iov[0].iov_base,
					   (unsigned)len, off);
		else
			io_uring_prep_write(sqe, f->fd, req->iov[0].iov_base,
					    (unsigned)len, off);
		break;
	case BS_OP_FLUSH:
		io_uring_prep_fsync(sqe, f->fd, IORING_FSYNC_DATASYNC);
		break;
	case BS_OP_DISCARD:
		io_uring_prep_fallocate(sqe, f->fd, FALLOC_FL_PUNCH_HOLE |
					FALLOC_FL_KEEP_SIZE, off, len);
		break;
	case BS_OP_WRITE_ZEROES:
		if (!(req->flags & BS_REQ_NOUNMAP) && f->zeroes == Z_UNMAP &&
		    f->can_punch)
			mode = FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		else if (f->nounmap == NU_WRITE_ZEROES)
			mode = FALLOC_FL_WRITE_ZEROES;
		else if (f->nounmap == NU_ZERO_RANGE)
			mode = FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE;
		else if (f->nounmap == NU_PUNCH_ALLOC)
			/* punch, then allocate again: allocated zeroes */
			mode = req->drv ? FALLOC_FL_KEEP_SIZE :
					  FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;
		else
			mode = -1;
		if (mode < 0) {
			io_uring_prep_nop(sqe);
			req->drv = (void *)-1;
			break;
		}
		io_uring_prep_fallocate(sqe, f->fd, mode, off, len);
		break;
	default:
		io_uring_prep_nop(sqe);
	}
	io_uring_sqe_set_data(sqe, req);
	f->inflight++;
	f->dirty = true;
	return true;
}

/* Park a request until the ring has room (FIFO through req->work.next). */
static void wait_push(struct file_dev *f, struct bs_req *req)
{
	req->work.next = NULL;
	if (f->wait_tail)
		f->wait_tail->work.next = (struct bs_work *)req;
	else
		f->wait_head = req;
	f->wait_tail = req;
}

static void file_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct file_dev *f = dev->priv;

	req->drv_u64 = 0;
	req->drv = NULL;
	if (f->wait_head || !queue_sqe(dev, req))
		wait_push(f, req);
}

static void file_prepoll(void *arg)
{
	struct bs_dev *dev = arg;
	struct file_dev *f = dev->priv;

	while (f->wait_head) {
		struct bs_req *r = f->wait_head;
		if (!queue_sqe(dev, r))
			break;
		f->wait_head = (struct bs_req *)r->work.next;
		if (!f->wait_head)
			f->wait_tail = NULL;
	}
	if (f->dirty) {
		f->dirty = false;
		io_uring_submit(&f->ring);
	}
}

static void file_reap(void *arg, uint32_t events)
{
	struct bs_dev *dev = arg;
	struct file_dev *f = dev->priv;
	struct io_uring_cqe *cqe;

	(void)events;
	while (io_uring_peek_cqe(&f->ring, &cqe) == 0) {
		struct bs_req *req = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&f->ring, cqe);
		f->inflight--;
		if (req->drv == (void *)-1) {
			bs_req_complete(req, -EOPNOTSUPP);
			continue;
		}
		if (res == -EAGAIN || res == -EINTR) {
			file_submit_again:
			if (!queue_sqe(dev, req))
				goto wait;
			continue;
		}
		if (res < 0) {
			bs_req_complete(req, res);
			continue;
		}
		if (req->op == BS_OP_READ || req->op == BS_OP_WRITE) {
			if (res == 0) {
				if (req->op == BS_OP_WRITE) {
					bs_req_complete(req, -EIO);
					continue;
				}
				/* past EOF of a shorter file: zeroes */
				uint64_t skip = req->drv_u64;
				int i;
				for (i = 0; i < req->iovcnt; i++) {
					struct iovec *v = &req->iov[i];
					if (skip >= v->iov_len) {
						skip -= v->iov_len;
						continue;
					}
					memset((char *)v->iov_base + skip, 0,
					       v->iov_len - skip);
					skip = 0;
				}
				bs_req_complete(req, 0);
				continue;
			}
			req->drv_u64 += (uint64_t)res;
			if (req->drv_u64 < req->len)
				goto file_submit_again;
		} else if (req->op == BS_OP_WRITE_ZEROES &&
			   f->nounmap == NU_PUNCH_ALLOC && !req->drv &&
			   ((req->flags & BS_REQ_NOUNMAP) || f->zeroes != Z_UNMAP)) {
			req->drv = (void *)1; /* now allocate again */
			goto file_submit_again;
		}
		bs_req_complete(req, 0);
		continue;
wait:
		wait_push(f, req);
	}
	if (f->dirty || f->wait_head)
		file_prepoll(dev);
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
	kv(arg, "direct", "%d", f->direct);
	kv(arg, "zeroes", "%s", zeroes_modes[f->zeroes]);
	kv(arg, "probe", "punch_hole=%s zero_range=%s write_zeroes=%s",
	   f->can_punch ? "yes" : "no", f->can_zero_range ? "yes" : "no",
	   f->can_write_zeroes ? "yes" : "no");
	kv(arg, "nounmap_zeroing", "%s", nu[f->nounmap]);
}

static const struct bs_dev_type file_type = {
	.name = "file",
	.summary = "a regular file (created sparse if missing), io_uring",
	.options =
		"path=PATH            the file (required; file:PATH)\n"
		"size=SIZE            create it sparse at SIZE if missing; must match if present\n"
		"direct=0|1           O_DIRECT (0)\n"
		"logical_block_size=N 512..65536 (512)\n"
		"zeroes=unmap|write|none  what zeroing may do (unmap)\n"
		"queue_depth=N        io_uring entries (128)\n",
	.open = file_open,
	.close = file_close,
	.submit = file_submit,
	.block_status = file_block_status,
	.allocated = file_allocated,
	.describe = file_describe,
};

BS_DEV_TYPE(file_type)
