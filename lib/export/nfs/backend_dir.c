/* SPDX-License-Identifier: MIT */
/*
 * The host-directory backend (`path = DIR`): every object is reached by
 * its kernel file handle (name_to_handle_at / open_by_handle_at on the
 * directory's filesystem), so NFS handles stay valid across a restart of
 * the daemon; every call is an *at() syscall on a descriptor opened from
 * a handle. open_by_handle_at needs CAP_DAC_READ_SEARCH (the daemon runs
 * as root). A handle names a file of the directory's filesystem: clients
 * that forge handles could reach files outside DIR on that filesystem,
 * as with a kernel server exporting a subdirectory without subtree
 * checking.
 *
 * Backend handle bytes: the kernel's handle_type (4, big endian) and its
 * f_handle bytes.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <blkstack/write_same.h>

#include <blkstack/loop.h>
#include <blkstack/workers.h>

#include "export/nfs/nfs.h"

/*
 * A cached O_RDWR descriptor of a regular file, by handle bytes. @refs
 * counts the calls using it; a @dead entry (its file gone) matches no
 * handle and is closed by its last user. fd < 0: a free slot.
 */
struct fdc_ent {
	struct nfs_fh fh;
	int fd;
	unsigned refs;
	bool dead;
	uint64_t used;		/* LRU clock */
	uint64_t last_ns;	/* last taken or given back */
};

struct dirbe {
	int root;		/* O_PATH|O_DIRECTORY of DIR */
	dev_t dev;
	ino_t ino;
	pthread_mutex_t lock;	/* the cache: I/O threads and workers */
	uint64_t clock;
	bool no_rdwr;		/* EROFS once: do not try O_RDWR again */
	struct fdc_ent fdc[NFS_DIR_FD_CACHE];
};

#define KH_MAX (NFS_BACKEND_FH_MAX - 4)

static int to_fh(int dirfd, const char *name, int flags, struct nfs_fh *out)
{
	union {
		struct file_handle fh;
		uint8_t buf[sizeof(struct file_handle) + KH_MAX];
	} u;
	int mnt;

	u.fh.handle_bytes = KH_MAX;
	if (name_to_handle_at(dirfd, name, &u.fh, &mnt, flags) < 0)
		return errno == EOVERFLOW ? -EOPNOTSUPP : -errno;
	xdr_set_be32(out->data, (uint32_t)u.fh.handle_type);
	memcpy(out->data + 4, u.fh.f_handle, u.fh.handle_bytes);
	out->len = 4 + u.fh.handle_bytes;
	return 0;
}

static int open_fh(struct nfs_backend *b, const struct nfs_fh *fh, int flags)
{
	struct dirbe *d = b->priv;
	union {
		struct file_handle fh;
		uint8_t buf[sizeof(struct file_handle) + KH_MAX];
	} u;
	int fd;

	if (fh->len < 4 || fh->len - 4 > KH_MAX)
		return -ESTALE;
	u.fh.handle_type = (int)xdr_be32(fh->data);
	u.fh.handle_bytes = fh->len - 4;
	memcpy(u.fh.f_handle, fh->data + 4, fh->len - 4);
	fd = open_by_handle_at(d->root, &u.fh, flags | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT || errno == EINVAL ? -ESTALE : -errno;
	return fd;
}

/*
 * The descriptor cache. READ, WRITE, COMMIT, ALLOCATE, SEEK and
 * WRITE_SAME take an O_RDWR fd of the file from it rather than paying
 * open_by_handle_at + close per call; they run on I/O threads and
 * workers at once, hence the lock (never held across a syscall). What
 * cannot be opened O_RDWR (EISDIR, EACCES, EROFS, ETXTBSY, ...) or
 * finds every slot in use is opened per call, with the caller's flags,
 * as before.
 */
struct dfd {
	int fd;
	struct fdc_ent *e;	/* NULL: not cached, closed by fd_put */
};

static struct fdc_ent *fdc_find(struct dirbe *d, const struct nfs_fh *fh)
{
	for (unsigned i = 0; i < NFS_DIR_FD_CACHE; i++) {
		struct fdc_ent *e = &d->fdc[i];

		if (e->fd >= 0 && !e->dead && e->fh.len == fh->len &&
		    !memcmp(e->fh.data, fh->data, fh->len))
			return e;
	}
	return NULL;
}

/* A cache entry's fd, closed on a worker (fd_release) */
struct late_close {
	struct bs_job job;
	int fd;
};

static int late_close_run(struct bs_job *job)
{
	close(BS_CONTAINER_OF(job, struct late_close, job)->fd);
	return 0;
}

static void late_close_done(struct bs_job *job)
{
	free(BS_CONTAINER_OF(job, struct late_close, job));
}

/*
 * Close @fd, which leaves the cache. The last close of a file unlinked
 * meanwhile frees its blocks, which takes the filesystem long for a
 * large file (ext4: about a second for tens of GiB); on a loop's thread
 * (a READ answered inline, the LRU eviction of an open there, the idle
 * trim on the main loop) every client of that loop would wait, so a
 * worker does it. Anything else, and where no job can be had, closes
 * here.
 */
static void fd_release(struct nfs_backend *b, int fd)
{
	struct bs_workers *w;
	struct late_close *lc;
	struct stat st;

	if (b->ctx && bs_loop_current() && fstat(fd, &st) == 0 &&
	    !st.st_nlink && st.st_blocks && (w = bs_ctx_workers(b->ctx)) &&
	    (lc = calloc(1, sizeof(*lc)))) {
		lc->fd = fd;
		lc->job.run = late_close_run;
		lc->job.done = late_close_done;
		bs_workers_submit(w, &lc->job);
		return;
	}
	close(fd);
}

/* @fh's entry, if cached: true, with a reference in @f */
static bool fd_cached(struct dirbe *d, const struct nfs_fh *fh, struct dfd *f)
{
	struct fdc_ent *e;

	pthread_mutex_lock(&d->lock);
	e = fdc_find(d, fh);
	if (e) {
		e->refs++;
		e->used = ++d->clock;
		e->last_ns = bs_now_ns();
		*f = (struct dfd){ e->fd, e };
	}
	pthread_mutex_unlock(&d->lock);
	return e;
}

static int fd_get(struct nfs_backend *b, const struct nfs_fh *fh, int flags,
		  struct dfd *f)
{
	struct dirbe *d = b->priv;
	struct fdc_ent *e, *slot = NULL;
	struct stat st;
	int fd, old = -1;

	if (fd_cached(d, fh, f))
		return 0;
	fd = __atomic_load_n(&d->no_rdwr, __ATOMIC_RELAXED) ? -EROFS :
	     open_fh(b, fh, O_RDWR);
	if (fd == -EROFS)
		__atomic_store_n(&d->no_rdwr, true, __ATOMIC_RELAXED);
	/* only regular files: a device or fifo is not kept open */
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -EINVAL;
	}
	if (fd < 0) {
		if (fd == -ESTALE)
			return fd;
		fd = open_fh(b, fh, flags);
		*f = (struct dfd){ fd, NULL };
		return fd < 0 ? fd : 0;
	}
	pthread_mutex_lock(&d->lock);
	e = fdc_find(d, fh);		/* another thread's, opened meanwhile */
	if (e) {
		old = fd;
	} else {
		/* a free slot, else the least recently used unused one */
		for (unsigned i = 0; i < NFS_DIR_FD_CACHE; i++) {
			struct fdc_ent *c = &d->fdc[i];

			if (c->fd < 0) {
				slot = c;
				break;
			}
			if (!c->refs && (!slot || c->used < slot->used))
				slot = c;
		}
		if (slot) {
			old = slot->fd;
			slot->fd = fd;
			slot->fh.len = fh->len;
			memcpy(slot->fh.data, fh->data, fh->len);
			e = slot;
		}
	}
	if (e) {
		e->refs++;
		e->used = ++d->clock;
		e->last_ns = bs_now_ns();
		fd = e->fd;
	}
	pthread_mutex_unlock(&d->lock);
	if (old >= 0)
		fd_release(b, old);
	*f = (struct dfd){ fd, e };
	return 0;
}

/*
 * The end of a call with @f. @gone (the file has no link left: unlinked
 * on the host, say) answers -ESTALE, as open_by_handle_at would have on
 * the next call without the cache, and drops the entry.
 */
static int fd_put(struct nfs_backend *b, struct dfd *f, int err, bool gone)
{
	struct dirbe *d = b->priv;
	int fd = f->fd;

	if (!f->e) {
		close(fd);	/* opened for this call alone */
		return gone ? -ESTALE : err;
	}
	pthread_mutex_lock(&d->lock);
	f->e->dead |= gone;
	f->e->last_ns = bs_now_ns();
	fd = -1;
	if (!--f->e->refs && f->e->dead) {	/* closed by its last user */
		fd = f->e->fd;
		f->e->fd = -1;
		f->e->dead = false;
	}
	pthread_mutex_unlock(&d->lock);
	if (fd >= 0)
		fd_release(b, fd);
	return gone ? -ESTALE : err;
}

/* fd_put() for a call that did not stat the file itself: a call that
 * succeeded checks the link count now */
static int fd_done(struct nfs_backend *b, struct dfd *f, int err)
{
	struct stat st;

	return fd_put(b, f, err, !err && fstat(f->fd, &st) == 0 &&
				      st.st_nlink == 0);
}

/* the backend removes or renames over @fh's name: close it now (or when
 * its last user is done), the space of a file removed is freed only then */
static void fdc_drop(struct nfs_backend *b, const struct nfs_fh *fh)
{
	struct dfd f;

	if (fd_cached(b->priv, fh, &f))
		fd_put(b, &f, 0, true);
}

static void fill(const struct stat *st, struct nfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	switch (st->st_mode & S_IFMT) {
	case S_IFREG: a->type = NF4REG; break;
	case S_IFDIR: a->type = NF4DIR; break;
	case S_IFLNK: a->type = NF4LNK; break;
	case S_IFBLK: a->type = NF4BLK; break;
	case S_IFCHR: a->type = NF4CHR; break;
	case S_IFSOCK: a->type = NF4SOCK; break;
	default: a->type = NF4FIFO; break;
	}
	a->mode = st->st_mode & 07777;
	a->nlink = (uint32_t)st->st_nlink;
	a->uid = st->st_uid;
	a->gid = st->st_gid;
	a->size = (uint64_t)st->st_size;
	a->used = (uint64_t)st->st_blocks * 512;
	a->fileid = st->st_ino;
	a->change = (uint64_t)st->st_ctim.tv_sec * 1000000000ull +
		    (uint64_t)st->st_ctim.tv_nsec;
	a->rdev_major = major(st->st_rdev);
	a->rdev_minor = minor(st->st_rdev);
	a->atime = st->st_atim;
	a->mtime = st->st_mtim;
	a->ctime = st->st_ctim;
}

static int d_root(struct nfs_backend *b, struct nfs_fh *out)
{
	struct dirbe *d = b->priv;

	return to_fh(d->root, "", AT_EMPTY_PATH, out);
}

static int d_getattr(struct nfs_backend *b, const struct nfs_fh *fh,
		     struct nfs_attr *out)
{
	struct stat st;
	struct dfd f;
	int fd, err = 0;

	/*
	 * A cached file (PUTFH and GETATTR around each READ and WRITE): one
	 * fstat, no open. One that lost its last link is dropped and asked
	 * for by handle below, as before the cache.
	 */
	if (fd_cached(b->priv, fh, &f)) {
		bool ok = fstat(f.fd, &st) == 0 && st.st_nlink;

		fd_put(b, &f, 0, !ok);
		if (ok) {
			fill(&st, out);
			return 0;
		}
	}
	fd = open_fh(b, fh, O_PATH);
	if (fd < 0)
		return fd;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH) < 0)
		err = -errno;
	else if (!st.st_nlink)
		/* unlinked, still open somewhere (a dropped entry's close
		 * on a worker, another process): gone all the same */
		err = -ESTALE;
	else
		fill(&st, out);
	close(fd);
	return err;
}

static int d_lookup(struct nfs_backend *b, const struct nfs_fh *dir,
		    const char *name, struct nfs_fh *out)
{
	int fd = open_fh(b, dir, O_PATH | O_DIRECTORY), err;

	if (fd < 0)
		return fd;
	err = to_fh(fd, name, 0, out);
	close(fd);
	return err;
}

static int d_parent(struct nfs_backend *b, const struct nfs_fh *dir,
		    struct nfs_fh *out)
{
	struct dirbe *d = b->priv;
	struct stat st;
	int fd = open_fh(b, dir, O_PATH | O_DIRECTORY), err;

	if (fd < 0)
		return fd;
	if (fstatat(fd, "", &st, AT_EMPTY_PATH) == 0 && st.st_dev == d->dev &&
	    st.st_ino == d->ino)
		err = -ENOENT;		/* the root has no parent here */
	else
		err = to_fh(fd, "..", 0, out);
	close(fd);
	return err;
}

/* cookies: d_off + 3, so that 0, 1, 2 stay the protocol's */
static int d_readdir(struct nfs_backend *b, const struct nfs_fh *dir,
		     uint64_t cookie, nfs_dirent_fn fn, void *arg, bool *eof)
{
	int fd = open_fh(b, dir, O_RDONLY | O_DIRECTORY), err = 0;
	struct dirent *e;
	DIR *dp;

	if (fd < 0)
		return fd;
	dp = fdopendir(fd);
	if (!dp) {
		close(fd);
		return -errno;
	}
	if (cookie)
		seekdir(dp, (long)(cookie - 3));
	*eof = false;
	for (;;) {
		struct nfs_fh fh;
		struct nfs_attr at;
		struct stat st;

		errno = 0;
		e = readdir(dp);
		if (!e) {
			if (errno)
				err = -errno;
			else
				*eof = true;
			break;
		}
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(dp), e->d_name, &st,
			    AT_SYMLINK_NOFOLLOW) < 0 ||
		    to_fh(dirfd(dp), e->d_name, 0, &fh))
			continue;	/* gone meanwhile */
		fill(&st, &at);
		if (fn(arg, e->d_name, (uint64_t)e->d_off + 3, &fh, &at))
			break;
	}
	closedir(dp);
	return err;
}

static int d_create(struct nfs_backend *b, const struct nfs_fh *dir,
		    const char *name, uint32_t type, uint32_t mode,
		    const char *link, uint32_t maj, uint32_t min, bool excl,
		    struct nfs_fh *out)
{
	int fd = open_fh(b, dir, O_PATH | O_DIRECTORY), err = 0, f;
	char proc[64];

	if (fd < 0)
		return fd;
	switch (type) {
	case NF4REG:
		f = openat(fd, name, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC,
			   mode);
		if (f < 0)
			err = -errno;
		else
			close(f);
		break;
	case NF4DIR:
		if (mkdirat(fd, name, mode) < 0)
			err = -errno;
		break;
	case NF4LNK:
		if (symlinkat(link, fd, name) < 0)
			err = -errno;
		break;
	case NF4BLK:
	case NF4CHR:
		if (mknodat(fd, name, (type == NF4BLK ? S_IFBLK : S_IFCHR) |
			    mode, makedev(maj, min)) < 0)
			err = -errno;
		break;
	case NF4SOCK:
		if (mknodat(fd, name, S_IFSOCK | mode, 0) < 0)
			err = -errno;
		break;
	case NF4FIFO:
		if (mkfifoat(fd, name, mode) < 0)
			err = -errno;
		break;
	default:
		err = -EINVAL;
	}
	if (!err)
		err = to_fh(fd, name, 0, out);
	if (!err && type != NF4LNK) {
		/* the mode asked for, whatever the daemon's umask */
		int o = open_fh(b, out, O_PATH);

		if (o >= 0) {
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", o);
			chmod(proc, mode & 07777);
			close(o);
		}
	}
	close(fd);
	return err;
}

static int d_remove(struct nfs_backend *b, const struct nfs_fh *dir,
		    const char *name)
{
	int fd = open_fh(b, dir, O_PATH | O_DIRECTORY), err = 0;
	struct nfs_fh fh;
	bool known;

	if (fd < 0)
		return fd;
	known = !to_fh(fd, name, 0, &fh);
	if (unlinkat(fd, name, 0) < 0) {
		err = -errno;
		if (err == -EISDIR && unlinkat(fd, name, AT_REMOVEDIR) == 0)
			err = 0;
		else if (err == -EISDIR)
			err = -errno;
	}
	close(fd);
	if (!err && known)
		fdc_drop(b, &fh);
	return err == -EEXIST ? -ENOTEMPTY : err;
}

static int d_rename(struct nfs_backend *b, const struct nfs_fh *sdir,
		    const char *sname, const struct nfs_fh *tdir,
		    const char *tname)
{
	int s = open_fh(b, sdir, O_PATH | O_DIRECTORY), t, err = 0;
	struct nfs_fh fh;
	bool known;

	if (s < 0)
		return s;
	t = open_fh(b, tdir, O_PATH | O_DIRECTORY);
	if (t < 0) {
		close(s);
		return t;
	}
	known = !to_fh(t, tname, 0, &fh);	/* the file renamed over */
	if (renameat(s, sname, t, tname) < 0)
		err = -errno;
	close(s);
	close(t);
	if (!err && known)
		fdc_drop(b, &fh);
	/* RFC 8881 18.26.4: a target that cannot be replaced is EXIST */
	if (err == -EISDIR || err == -ENOTDIR || err == -ENOTEMPTY)
		err = -EEXIST;
	return err;
}

static int d_link(struct nfs_backend *b, const struct nfs_fh *fh,
		  const struct nfs_fh *dir, const char *name)
{
	int f = open_fh(b, fh, O_PATH), d, err = 0;

	if (f < 0)
		return f;
	d = open_fh(b, dir, O_PATH | O_DIRECTORY);
	if (d < 0) {
		close(f);
		return d;
	}
	if (linkat(f, "", d, name, AT_EMPTY_PATH) < 0)
		err = -errno;
	close(f);
	close(d);
	return err;
}

static int d_readlink(struct nfs_backend *b, const struct nfs_fh *fh,
		      char *buf, size_t cap, size_t *len)
{
	int fd = open_fh(b, fh, O_PATH), err = 0;
	ssize_t n;

	if (fd < 0)
		return fd;
	n = readlinkat(fd, "", buf, cap);
	if (n < 0)
		err = -errno;
	else
		*len = (size_t)n;
	close(fd);
	return err;
}

static int d_setattr(struct nfs_backend *b, const struct nfs_fh *fh,
		     const struct nfs_sattr *sa)
{
	int fd = open_fh(b, fh, O_PATH), err = 0;
	struct stat st;
	char proc[64];

	if (fd < 0)
		return fd;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (fstatat(fd, "", &st, AT_EMPTY_PATH) < 0) {
		err = -errno;
		goto out;
	}
	if (sa->mask & NFS_SA_SIZE) {
		int w = open_fh(b, fh, O_WRONLY);

		if (w < 0) {
			err = w;
			goto out;
		}
		if (ftruncate(w, (off_t)sa->size) < 0)
			err = -errno;
		close(w);
		if (err)
			goto out;
	}
	if ((sa->mask & (NFS_SA_UID | NFS_SA_GID)) &&
	    fchownat(fd, "", sa->mask & NFS_SA_UID ? sa->uid : (uid_t)-1,
		     sa->mask & NFS_SA_GID ? sa->gid : (gid_t)-1,
		     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		err = -errno;
		goto out;
	}
	if ((sa->mask & NFS_SA_MODE) && !S_ISLNK(st.st_mode) &&
	    chmod(proc, sa->mode) < 0) {
		err = -errno;
		goto out;
	}
	if ((sa->mask & (NFS_SA_ATIME | NFS_SA_MTIME)) &&
	    !S_ISLNK(st.st_mode)) {
		struct timespec ts[2] = { { 0, UTIME_OMIT },
					  { 0, UTIME_OMIT } };

		if (sa->mask & NFS_SA_ATIME_NOW)
			ts[0].tv_nsec = UTIME_NOW;
		else if (sa->mask & NFS_SA_ATIME)
			ts[0] = sa->atime;
		if (sa->mask & NFS_SA_MTIME_NOW)
			ts[1].tv_nsec = UTIME_NOW;
		else if (sa->mask & NFS_SA_MTIME)
			ts[1] = sa->mtime;
		if (utimensat(AT_FDCWD, proc, ts, 0) < 0)
			err = -errno;
	}
out:
	close(fd);
	return err;
}

/*
 * A read or write by handle; with @rwf RWF_NOWAIT (a COMPOUND on a
 * connection's I/O thread) it reads only what the page cache holds and
 * writes only what the filesystem takes without blocking, else -EAGAIN,
 * and the caller does it again without it on a worker (a write cut short
 * is written again whole: same bytes, same place). A filesystem that
 * refuses RWF_NOWAIT (EOPNOTSUPP: ext4's buffered writes, tmpfs) is not
 * asked again: b->nowait_off.
 */
static int io_err(struct nfs_backend *b, int rwf, unsigned what)
{
	if (!rwf)
		return -errno;
	if (errno == EOPNOTSUPP)
		__atomic_or_fetch(&b->nowait_off, what, __ATOMIC_RELAXED);
	return errno == EAGAIN || errno == EOPNOTSUPP ? -EAGAIN : -errno;
}

static int read_at(struct nfs_backend *b, const struct nfs_fh *fh,
		   uint64_t off, void *buf, size_t len, size_t *n, bool *eof,
		   int rwf)
{
	struct stat st;
	struct dfd f;
	size_t got = 0;
	int err = fd_get(b, fh, O_RDONLY, &f);
	bool ok;

	if (err)
		return err;
	while (got < len) {
		struct iovec v = { (uint8_t *)buf + got, len - got };
		ssize_t k = preadv2(f.fd, &v, 1, (off_t)(off + got), rwf);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			err = io_err(b, rwf, NFS_NOWAIT_READ);
			break;
		}
		if (!k)
			break;
		got += (size_t)k;
	}
	*n = got;
	ok = fstat(f.fd, &st) == 0;
	*eof = ok && off + got >= (uint64_t)st.st_size;
	return fd_put(b, &f, err, ok && st.st_nlink == 0);
}

static int write_at(struct nfs_backend *b, const struct nfs_fh *fh,
		    uint64_t off, const void *buf, size_t len, bool sync,
		    int rwf)
{
	struct dfd f;
	size_t put = 0;
	int err = fd_get(b, fh, O_WRONLY, &f);

	if (err)
		return err;
	while (put < len) {
		struct iovec v = { (uint8_t *)buf + put, len - put };
		ssize_t k = pwritev2(f.fd, &v, 1, (off_t)(off + put), rwf);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			err = io_err(b, rwf, NFS_NOWAIT_WRITE);
			break;
		}
		put += (size_t)k;
	}
	if (!err && sync && fdatasync(f.fd) < 0)
		err = -errno;
	/*
	 * Checked after the write, not before: a write that ends after the
	 * file lost its last link went nowhere, and is then not acknowledged
	 * (checked before, an unlink in between would slip through).
	 */
	return fd_done(b, &f, err);
}

static int d_read(struct nfs_backend *b, const struct nfs_fh *fh,
		  uint64_t off, void *buf, size_t len, size_t *n, bool *eof)
{
	return read_at(b, fh, off, buf, len, n, eof, 0);
}

static int d_write(struct nfs_backend *b, const struct nfs_fh *fh,
		   uint64_t off, const void *buf, size_t len, bool sync)
{
	return write_at(b, fh, off, buf, len, sync, 0);
}

static int d_read_nowait(struct nfs_backend *b, const struct nfs_fh *fh,
			 uint64_t off, void *buf, size_t len, size_t *n,
			 bool *eof)
{
	return read_at(b, fh, off, buf, len, n, eof, RWF_NOWAIT);
}

static int d_write_nowait(struct nfs_backend *b, const struct nfs_fh *fh,
			  uint64_t off, const void *buf, size_t len)
{
	return write_at(b, fh, off, buf, len, false, RWF_NOWAIT);
}

static int d_commit(struct nfs_backend *b, const struct nfs_fh *fh)
{
	struct dfd f;
	int err = fd_get(b, fh, O_RDONLY, &f);

	if (err)
		return err;
	if (fsync(f.fd) < 0)
		err = -errno;
	return fd_done(b, &f, err);
}

static int d_fallocate(struct nfs_backend *b, const struct nfs_fh *fh,
		       int mode, uint64_t off, uint64_t len)
{
	struct dfd f;
	int err = fd_get(b, fh, O_WRONLY, &f);

	if (err)
		return err;
	if (fallocate(f.fd, mode, (off_t)off, (off_t)len) < 0)
		err = -errno;
	return fd_done(b, &f, err);
}

/* the host file sink (FALLOC_FL_WRITE_ZEROES where the host has it) */
static int d_with_ws_sink(struct nfs_backend *b, const struct nfs_fh *fh,
			  int (*fn)(void *arg, const struct bs_ws_sink *sink),
			  void *arg)
{
	struct bs_ws_file_sink f;
	struct bs_ws_sink sink;
	struct dfd df;
	int err = fd_get(b, fh, O_WRONLY, &df);

	if (err)
		return err;
	bs_ws_file_sink_init(&sink, &f, df.fd);
	err = fn(arg, &sink);
	return fd_done(b, &df, err);
}

static int d_seek(struct nfs_backend *b, const struct nfs_fh *fh,
		  uint64_t off, int whence, uint64_t *out)
{
	struct dfd f;
	int err = fd_get(b, fh, O_RDONLY, &f);
	off_t r;

	if (err)
		return err;
	r = lseek(f.fd, (off_t)off, whence);
	if (r < 0)
		err = -errno;
	else
		*out = (uint64_t)r;
	return fd_done(b, &f, err);
}

/*
 * Extended attributes: the protocol's names are the host's user.*
 * ones. The object is opened O_PATH (a fifo must not be opened for
 * real) and reached through /proc/self/fd, as f*xattr refuse O_PATH.
 */
static int xattr_path(struct nfs_backend *b, const struct nfs_fh *fh,
		      char *path, size_t cap)
{
	int fd = open_fh(b, fh, O_PATH);

	if (fd >= 0)
		snprintf(path, cap, "/proc/self/fd/%d", fd);
	return fd;
}

static int xattr_name(const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "user.%s", name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int d_getxattr(struct nfs_backend *b, const struct nfs_fh *fh,
		      const char *name, void *buf, size_t cap, size_t *len)
{
	char path[64], xn[XATTR_NAME_MAX + 1];
	int fd, err = xattr_name(name, xn, sizeof(xn));
	ssize_t n;

	if (err)
		return err;
	fd = xattr_path(b, fh, path, sizeof(path));
	if (fd < 0)
		return fd;
	n = getxattr(path, xn, buf, cap);
	if (n < 0)
		err = -errno;
	else
		*len = (size_t)n;
	close(fd);
	return err;
}

static int d_setxattr(struct nfs_backend *b, const struct nfs_fh *fh,
		      const char *name, const void *val, size_t len,
		      int flags)
{
	char path[64], xn[XATTR_NAME_MAX + 1];
	int fd, err = xattr_name(name, xn, sizeof(xn));

	if (err)
		return err;
	fd = xattr_path(b, fh, path, sizeof(path));
	if (fd < 0)
		return fd;
	if (setxattr(path, xn, val, len, flags) < 0)
		err = -errno;
	close(fd);
	return err;
}

static int d_listxattr(struct nfs_backend *b, const struct nfs_fh *fh,
		       char *buf, size_t cap, size_t *len)
{
	char path[64];
	int fd = xattr_path(b, fh, path, sizeof(path)), err = 0;
	ssize_t n;

	if (fd < 0)
		return fd;
	n = listxattr(path, buf, cap);
	if (n < 0)
		err = -errno;
	close(fd);
	if (err)
		return err;
	*len = nfs_xattr_user_names(buf, (size_t)n);
	return 0;
}

static int d_removexattr(struct nfs_backend *b, const struct nfs_fh *fh,
			 const char *name)
{
	char path[64], xn[XATTR_NAME_MAX + 1];
	int fd, err = xattr_name(name, xn, sizeof(xn));

	if (err)
		return err;
	fd = xattr_path(b, fh, path, sizeof(path));
	if (fd < 0)
		return fd;
	if (removexattr(path, xn) < 0)
		err = -errno;
	close(fd);
	return err;
}

static int d_statfs(struct nfs_backend *b, struct nfs_statfs *out)
{
	struct dirbe *d = b->priv;
	struct statfs sf;

	if (fstatfs(d->root, &sf) < 0)
		return -errno;
	out->bytes_total = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
	out->bytes_free = (uint64_t)sf.f_bfree * (uint64_t)sf.f_bsize;
	out->bytes_avail = (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize;
	out->files_total = sf.f_files;
	out->files_free = sf.f_ffree;
	out->files_avail = sf.f_ffree;
	out->name_max = sf.f_namelen > NFS_NAME_MAX ? NFS_NAME_MAX :
			(uint32_t)sf.f_namelen;
	out->fsid_major = major(d->dev);
	out->fsid_minor = minor(d->dev);
	return 0;
}

/* Close the cached fds nobody has used for @idle_ms (not those in use). */
static void d_trim(struct nfs_backend *b, unsigned idle_ms)
{
	struct dirbe *d = b->priv;
	int fds[NFS_DIR_FD_CACHE];
	uint64_t now = bs_now_ns(), idle = (uint64_t)idle_ms * 1000000;
	unsigned i, n = 0;

	pthread_mutex_lock(&d->lock);
	for (i = 0; i < NFS_DIR_FD_CACHE; i++) {
		struct fdc_ent *e = &d->fdc[i];

		/* last_ns may be after now: taken and given back by another
		 * thread since now was read */
		if (e->fd >= 0 && !e->refs && e->last_ns + idle <= now) {
			fds[n++] = e->fd;
			e->fd = -1;
			e->dead = false;
		}
	}
	pthread_mutex_unlock(&d->lock);
	while (n)
		fd_release(b, fds[--n]);
}

static void d_close(struct nfs_backend *b)
{
	struct dirbe *d = b->priv;

	if (d) {
		for (unsigned i = 0; i < NFS_DIR_FD_CACHE; i++)
			if (d->fdc[i].fd >= 0)
				close(d->fdc[i].fd);
		pthread_mutex_destroy(&d->lock);
		close(d->root);
		free(d);
	}
	b->priv = NULL;
}

static const struct nfs_backend_ops dir_ops = {
	.name = "dir",
	/* d_read, d_write, d_commit, d_seek, d_with_ws_sink: an fd by
	 * handle (the cache, under its own lock), then one syscall's
	 * worth of work on that fd only */
	.parallel_io = true,
	.root = d_root,
	.getattr = d_getattr,
	.lookup = d_lookup,
	.parent = d_parent,
	.readdir = d_readdir,
	.create = d_create,
	.remove = d_remove,
	.rename = d_rename,
	.link = d_link,
	.readlink = d_readlink,
	.setattr = d_setattr,
	.read = d_read,
	.write = d_write,
	.read_nowait = d_read_nowait,
	.write_nowait = d_write_nowait,
	.commit = d_commit,
	.fallocate = d_fallocate,
	.seek = d_seek,
	.getxattr = d_getxattr,
	.setxattr = d_setxattr,
	.listxattr = d_listxattr,
	.removexattr = d_removexattr,
	.statfs = d_statfs,
	.close = d_close,
	.trim = d_trim,
	.with_ws_sink = d_with_ws_sink,
};

int nfs_backend_dir_open(struct nfs_backend *b, const char *path)
{
	struct dirbe *d = calloc(1, sizeof(*d));
	struct stat st;
	struct nfs_fh fh;
	int err;

	if (!d)
		return -ENOMEM;
	for (unsigned i = 0; i < NFS_DIR_FD_CACHE; i++)
		d->fdc[i].fd = -1;
	pthread_mutex_init(&d->lock, NULL);
	d->root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->root < 0) {
		err = -errno;
		pthread_mutex_destroy(&d->lock);
		free(d);
		return bs_error(err, "path %s: %s", path, strerror(-err));
	}
	fstat(d->root, &st);
	d->dev = st.st_dev;
	d->ino = st.st_ino;
	b->ops = &dir_ops;
	b->priv = d;
	err = to_fh(d->root, "", AT_EMPTY_PATH, &fh);
	if (!err) {
		int fd = open_fh(b, &fh, O_PATH);

		if (fd < 0)
			err = fd;
		else
			close(fd);
	}
	if (err) {
		d_close(b);
		return bs_error(err, "path %s: file handles: %s (the nfs "
				"export of a directory needs name_to_handle_at "
				"support and CAP_DAC_READ_SEARCH)", path,
				strerror(-err));
	}
	return 0;
}
