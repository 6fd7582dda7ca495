/* SPDX-License-Identifier: MIT */
/*
 * The ext4 backend (`device = NAME`): the filesystem on a blkstack device
 * through the fs layer (include/blkstack/fs.h), opened read-write (the
 * export's shared claim on the device is handed over to the fs layer's
 * exclusive one) or read-only for a read-only unit. Calls come from
 * workers under the server's lock, one at a time, as fs.h requires; the
 * fs layer's I/O goes through the synchronous wrappers to the device's
 * loop.
 *
 * Backend handle bytes: inode number and generation (4 + 4, big endian):
 * stable across restarts; a reused inode has a new generation (STALE).
 *
 * Symbolic links, hard links, SETATTR of size, mode, owner and times are
 * the fs layer's; times have nanoseconds (ext4's large inodes), `change`
 * is the ctime in nanoseconds. Device nodes, sockets and fifos are
 * made by bs_fs_mknod (a device number over 12:20 bits is INVAL).
 * RFC 8276 xattrs are ext4's user.* ones (bs_fs_*xattr).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blkstack/fs.h>
#include <blkstack/write_same.h>

#include "export/nfs/nfs.h"

struct e4 {
	struct bs_fs *fs;
	uint32_t fsid;
};

static struct bs_fs *FS(struct nfs_backend *b)
{
	return ((struct e4 *)b->priv)->fs;
}

static void mkfh(uint32_t ino, uint32_t gen, struct nfs_fh *out)
{
	xdr_set_be32(out->data, ino);
	xdr_set_be32(out->data + 4, gen);
	out->len = 8;
}

/* the inode of @fh, still the one the handle named */
static int ino_of(struct nfs_backend *b, const struct nfs_fh *fh,
		  struct bs_fs_stat *st)
{
	uint32_t ino;
	int err;

	if (fh->len != 8)
		return -ESTALE;
	ino = xdr_be32(fh->data);
	/* a forged handle of the journal (inode 8) would read and write
	 * it as a file */
	if (ino < BS_FS_ROOT_INO || bs_fs_ino_reserved(FS(b), ino))
		return -ESTALE;
	err = bs_fs_stat(FS(b), ino, st);
	if (err)
		return err == -ENOENT || err == -EINVAL ? -ESTALE : err;
	if (!st->mode || !st->nlink || st->generation != xdr_be32(fh->data + 4))
		return -ESTALE;
	return 0;
}

static int fh_of(struct nfs_backend *b, uint32_t ino, struct nfs_fh *out,
		 struct bs_fs_stat *st)
{
	int err = bs_fs_stat(FS(b), ino, st);

	if (!err)
		mkfh(ino, st->generation, out);
	return err;
}

static void fill(const struct bs_fs_stat *st, struct nfs_attr *a)
{
	memset(a, 0, sizeof(*a));
	switch (st->mode & S_IFMT) {
	case S_IFREG: a->type = NF4REG; break;
	case S_IFDIR: a->type = NF4DIR; break;
	case S_IFLNK: a->type = NF4LNK; break;
	case S_IFBLK: a->type = NF4BLK; break;
	case S_IFCHR: a->type = NF4CHR; break;
	case S_IFSOCK: a->type = NF4SOCK; break;
	default: a->type = NF4FIFO; break;
	}
	a->mode = st->mode & 07777;
	a->nlink = st->nlink;
	a->uid = st->uid;
	a->gid = st->gid;
	a->size = st->size;
	a->used = st->blocks * 512;
	a->fileid = st->ino;
	a->change = (uint64_t)st->ctime * 1000000000ull + st->ctime_ns;
	a->atime.tv_sec = st->atime;
	a->atime.tv_nsec = st->atime_ns;
	a->mtime.tv_sec = st->mtime;
	a->mtime.tv_nsec = st->mtime_ns;
	a->ctime.tv_sec = st->ctime;
	a->ctime.tv_nsec = st->ctime_ns;
	a->rdev_major = st->rdev_major;
	a->rdev_minor = st->rdev_minor;
}

static int x_root(struct nfs_backend *b, struct nfs_fh *out)
{
	struct bs_fs_stat st;

	return fh_of(b, BS_FS_ROOT_INO, out, &st);
}

static int x_getattr(struct nfs_backend *b, const struct nfs_fh *fh,
		     struct nfs_attr *out)
{
	struct bs_fs_stat st;
	int err = ino_of(b, fh, &st);

	if (!err)
		fill(&st, out);
	return err;
}

static int x_lookup(struct nfs_backend *b, const struct nfs_fh *dir,
		    const char *name, struct nfs_fh *out)
{
	struct bs_fs_stat st;
	uint32_t ino;
	int err = ino_of(b, dir, &st);

	if (!err)
		err = bs_fs_lookup_at(FS(b), st.ino, name, &ino);
	if (!err)
		err = fh_of(b, ino, out, &st);
	return err;
}

static int x_parent(struct nfs_backend *b, const struct nfs_fh *dir,
		    struct nfs_fh *out)
{
	struct bs_fs_stat st;
	uint32_t ino;
	int err = ino_of(b, dir, &st);

	if (err)
		return err;
	if (st.ino == BS_FS_ROOT_INO)
		return -ENOENT;
	err = bs_fs_lookup_at(FS(b), st.ino, "..", &ino);
	if (!err)
		err = fh_of(b, ino, out, &st);
	return err;
}

struct rd {
	struct nfs_backend *b;
	uint64_t skip, index;
	nfs_dirent_fn fn;
	void *arg;
	bool stopped;
};

static int rd_one(void *arg, const char *name, uint32_t ino, uint32_t mode)
{
	struct rd *r = arg;
	struct bs_fs_stat st;
	struct nfs_attr at;
	struct nfs_fh fh;

	if (r->index++ < r->skip)
		return 0;
	if (fh_of(r->b, ino, &fh, &st))
		return 0;
	fill(&st, &at);
	if (r->fn(r->arg, name, r->index + 2, &fh, &at)) {
		r->stopped = true;
		return 1;
	}
	return 0;
}

/* cookies: the entry's place + 3 (0, 1, 2 stay the protocol's) */
static int x_readdir(struct nfs_backend *b, const struct nfs_fh *dir,
		     uint64_t cookie, nfs_dirent_fn fn, void *arg, bool *eof)
{
	struct bs_fs_stat st;
	struct rd r = { .b = b, .skip = cookie ? cookie - 2 : 0, .fn = fn,
			.arg = arg };
	int err = ino_of(b, dir, &st);

	if (!err)
		err = bs_fs_readdir(FS(b), st.ino, rd_one, &r);
	*eof = !r.stopped;
	return err;
}

static int x_create(struct nfs_backend *b, const struct nfs_fh *dir,
		    const char *name, uint32_t type, uint32_t mode,
		    const char *link, uint32_t maj, uint32_t min, bool excl,
		    struct nfs_fh *out)
{
	struct bs_fs_stat st;
	uint32_t ino;
	int err = ino_of(b, dir, &st);

	if (err)
		return err;
	if (type == NF4REG)
		err = bs_fs_create_at(FS(b), st.ino, name, mode & 07777, &ino);
	else if (type == NF4DIR)
		err = bs_fs_mkdir_at(FS(b), st.ino, name, mode & 07777, &ino);
	else if (type == NF4LNK && link)
		err = bs_fs_symlink_at(FS(b), st.ino, name, link, &ino);
	else if (type == NF4BLK || type == NF4CHR)
		err = bs_fs_mknod_at(FS(b), st.ino, name, (type == NF4BLK ?
				     S_IFBLK : S_IFCHR) | (mode & 07777), maj,
				     min, &ino);
	else if (type == NF4SOCK || type == NF4FIFO)
		err = bs_fs_mknod_at(FS(b), st.ino, name, (type == NF4SOCK ?
				     S_IFSOCK : S_IFIFO) | (mode & 07777), 0, 0,
				     &ino);
	else
		return -EINVAL;
	if (!err)
		err = fh_of(b, ino, out, &st);
	return err;
}

static int x_remove(struct nfs_backend *b, const struct nfs_fh *dir,
		    const char *name)
{
	struct bs_fs_stat st;
	int err = ino_of(b, dir, &st);

	return err ? err : bs_fs_unlink_at(FS(b), st.ino, name);
}

static int x_rename(struct nfs_backend *b, const struct nfs_fh *sdir,
		    const char *sname, const struct nfs_fh *tdir,
		    const char *tname)
{
	struct bs_fs_stat s, t;
	int err = ino_of(b, sdir, &s);

	if (!err)
		err = ino_of(b, tdir, &t);
	if (!err)
		err = bs_fs_rename_at(FS(b), s.ino, sname, t.ino, tname);
	if (err == -EISDIR || err == -ENOTDIR || err == -ENOTEMPTY)
		err = -EEXIST;
	return err;
}

static int x_link(struct nfs_backend *b, const struct nfs_fh *fh,
		  const struct nfs_fh *dir, const char *name)
{
	struct bs_fs_stat s, d;
	int err = ino_of(b, fh, &s);

	if (!err)
		err = ino_of(b, dir, &d);
	if (!err)
		err = bs_fs_link_at(FS(b), s.ino, d.ino, name);
	return err;
}

static int x_readlink(struct nfs_backend *b, const struct nfs_fh *fh,
		      char *buf, size_t cap, size_t *len)
{
	struct bs_fs_stat st;
	int err = ino_of(b, fh, &st);

	if (!err)
		err = bs_fs_readlink(FS(b), st.ino, buf, cap, len);
	/* readlink(2) truncates; the reply must not */
	if (!err && *len > cap)
		err = -ENAMETOOLONG;
	return err;
}

static int x_setattr(struct nfs_backend *b, const struct nfs_fh *fh,
		     const struct nfs_sattr *sa)
{
	struct bs_fs_setattr fa = { 0 };
	struct bs_fs_stat st;
	int err = ino_of(b, fh, &st);

	if (err)
		return err;
	if (sa->mask & NFS_SA_SIZE) {
		err = bs_fs_truncate(FS(b), st.ino, sa->size);
		if (err)
			return err;
	}
	/* a symbolic link's mode is not changed, as on the directory backend */
	if ((sa->mask & NFS_SA_MODE) && !S_ISLNK(st.mode)) {
		fa.mask |= BS_FS_SET_MODE;
		fa.mode = sa->mode;
	}
	if (sa->mask & NFS_SA_UID) {
		fa.mask |= BS_FS_SET_UID;
		fa.uid = sa->uid;
	}
	if (sa->mask & NFS_SA_GID) {
		fa.mask |= BS_FS_SET_GID;
		fa.gid = sa->gid;
	}
	if (sa->mask & NFS_SA_ATIME_NOW) {
		fa.mask |= BS_FS_SET_ATIME_NOW;
	} else if (sa->mask & NFS_SA_ATIME) {
		fa.mask |= BS_FS_SET_ATIME;
		fa.atime = sa->atime.tv_sec;
		fa.atime_ns = (uint32_t)sa->atime.tv_nsec;
	}
	if (sa->mask & NFS_SA_MTIME_NOW) {
		fa.mask |= BS_FS_SET_MTIME_NOW;
	} else if (sa->mask & NFS_SA_MTIME) {
		fa.mask |= BS_FS_SET_MTIME;
		fa.mtime = sa->mtime.tv_sec;
		fa.mtime_ns = (uint32_t)sa->mtime.tv_nsec;
	}
	return fa.mask ? bs_fs_setattr(FS(b), st.ino, &fa) : 0;
}

static int x_read(struct nfs_backend *b, const struct nfs_fh *fh,
		  uint64_t off, void *buf, size_t len, size_t *n, bool *eof)
{
	struct bs_fs_stat st;
	int64_t r;
	int err = ino_of(b, fh, &st);

	if (err)
		return err;
	r = off >= st.size ? 0 : bs_fs_read(FS(b), st.ino, buf, len, off);
	if (r < 0)
		return (int)r;
	*n = (size_t)r;
	*eof = off + (uint64_t)r >= st.size;
	return 0;
}

static int x_write(struct nfs_backend *b, const struct nfs_fh *fh,
		   uint64_t off, const void *buf, size_t len, bool sync)
{
	struct bs_fs_stat st;
	int64_t r;
	int err = ino_of(b, fh, &st);

	if (err)
		return err;
	r = bs_fs_write(FS(b), st.ino, buf, len, off);
	if (r < 0)
		return (int)r;
	if ((size_t)r != len)
		return -ENOSPC;
	return sync ? bs_fs_fsync(FS(b), st.ino) : 0;
}

static int x_commit(struct nfs_backend *b, const struct nfs_fh *fh)
{
	struct bs_fs_stat st;
	int err = ino_of(b, fh, &st);

	return err ? err : bs_fs_fsync(FS(b), st.ino);
}

static int x_fallocate(struct nfs_backend *b, const struct nfs_fh *fh,
		       int mode, uint64_t off, uint64_t len)
{
	struct bs_fs_stat st;
	int err = ino_of(b, fh, &st);

	return err ? err : bs_fs_fallocate(FS(b), st.ino, mode, (int64_t)off,
					   (int64_t)len);
}

/* the inode sink: zeroes by the fs layer's WRITE_ZEROES when the device
 * has unmap zeroing, else written */
static int x_with_ws_sink(struct nfs_backend *b, const struct nfs_fh *fh,
			  int (*fn)(void *arg, const struct bs_ws_sink *sink),
			  void *arg)
{
	struct bs_ws_fs_sink f;
	struct bs_ws_sink sink;
	struct bs_fs_stat st;
	int err = ino_of(b, fh, &st);

	if (!err)
		err = bs_ws_fs_sink_init(&sink, &f, FS(b), st.ino);
	return err ? err : fn(arg, &sink);
}

struct sk {
	uint64_t pos;		/* bytes */
	uint32_t bs;
	int whence;
	bool found;
};

/* written extents are data; holes and unwritten extents read zero */
static int sk_one(void *arg, const struct bs_fs_extent *e)
{
	struct sk *s = arg;
	uint64_t start = e->logical * s->bs, end = (e->logical + e->len) *
						   s->bs;

	if (e->unwritten || end <= s->pos)
		return 0;
	if (s->whence == SEEK_DATA) {
		if (start > s->pos)
			s->pos = start;
		s->found = true;
		return 1;
	}
	if (start > s->pos)
		return 1;		/* a hole before this extent */
	s->pos = end;
	return 0;
}

static int x_seek(struct nfs_backend *b, const struct nfs_fh *fh,
		  uint64_t off, int whence, uint64_t *out)
{
	struct bs_fs_stat st;
	struct sk s = { .pos = off, .whence = whence };
	int err = ino_of(b, fh, &st);

	if (err)
		return err;
	if (off >= st.size)
		return -ENXIO;
	s.bs = bs_fs_block_size(FS(b));
	/* sk_one's 1 (found, stop) comes back from bs_fs_map: not an error */
	err = bs_fs_map(FS(b), st.ino, sk_one, &s);
	if (err < 0)
		return err;
	if (whence == SEEK_DATA && (!s.found || s.pos >= st.size))
		return -ENXIO;
	*out = s.pos < st.size ? s.pos : st.size;
	return 0;
}

/*
 * RFC 8276 xattrs: the protocol's names are the user namespace's
 * ("k" is ext4's "user.k"), through the fs layer. A value larger than one
 * xattr block holds is XATTR2BIG (E2BIG), not NOSPC: no ea_inode here.
 */
static int x_xname(const char *name, char *out, size_t cap)
{
	int n = snprintf(out, cap, "user.%s", name);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int x_getxattr(struct nfs_backend *b, const struct nfs_fh *fh,
		      const char *name, void *buf, size_t cap, size_t *len)
{
	char xn[BS_FS_XATTR_NAME_MAX + 1];
	struct bs_fs_stat st;
	int err = x_xname(name, xn, sizeof(xn));

	if (!err)
		err = ino_of(b, fh, &st);
	return err ? err : bs_fs_getxattr(FS(b), st.ino, xn, buf, cap, len);
}

static int x_setxattr(struct nfs_backend *b, const struct nfs_fh *fh,
		      const char *name, const void *val, size_t len,
		      int flags)
{
	char xn[BS_FS_XATTR_NAME_MAX + 1];
	struct bs_fs_stat st;
	int err = x_xname(name, xn, sizeof(xn));

	if (!err)
		err = ino_of(b, fh, &st);
	if (!err && len > bs_fs_xattr_value_max(FS(b), xn))
		err = -E2BIG;
	return err ? err : bs_fs_setxattr(FS(b), st.ino, xn, val, len,
					  (unsigned)flags);
}

static int x_listxattr(struct nfs_backend *b, const struct nfs_fh *fh,
		       char *buf, size_t cap, size_t *len)
{
	struct bs_fs_stat st;
	size_t n = 0;
	int err = ino_of(b, fh, &st);

	if (!err)
		err = bs_fs_listxattr(FS(b), st.ino, buf, cap, &n);
	if (!err)
		*len = nfs_xattr_user_names(buf, n);
	return err;
}

static int x_removexattr(struct nfs_backend *b, const struct nfs_fh *fh,
			 const char *name)
{
	char xn[BS_FS_XATTR_NAME_MAX + 1];
	struct bs_fs_stat st;
	int err = x_xname(name, xn, sizeof(xn));

	if (!err)
		err = ino_of(b, fh, &st);
	return err ? err : bs_fs_removexattr(FS(b), st.ino, xn);
}

static int x_statfs(struct nfs_backend *b, struct nfs_statfs *out)
{
	struct e4 *e = b->priv;
	struct bs_fs_info fi;
	int err = bs_fs_info(e->fs, &fi);

	if (err)
		return err;
	out->bytes_total = fi.blocks * fi.block_size;
	out->bytes_free = fi.free_blocks * fi.block_size;
	out->bytes_avail = out->bytes_free;
	out->files_total = fi.inodes;
	out->files_free = fi.free_inodes;
	out->files_avail = fi.free_inodes;
	out->name_max = NFS_NAME_MAX;
	out->fsid_major = e->fsid;
	out->fsid_minor = 0;
	return 0;
}

static void x_close(struct nfs_backend *b)
{
	struct e4 *e = b->priv;

	if (e) {
		bs_fs_close(e->fs);
		free(e);
	}
	b->priv = NULL;
}

static const struct nfs_backend_ops ext4_ops = {
	.name = "ext4",
	.root = x_root,
	.getattr = x_getattr,
	.lookup = x_lookup,
	.parent = x_parent,
	.readdir = x_readdir,
	.create = x_create,
	.remove = x_remove,
	.rename = x_rename,
	.link = x_link,
	.readlink = x_readlink,
	.setattr = x_setattr,
	.read = x_read,
	.write = x_write,
	.commit = x_commit,
	.fallocate = x_fallocate,
	.seek = x_seek,
	.getxattr = x_getxattr,
	.setxattr = x_setxattr,
	.listxattr = x_listxattr,
	.removexattr = x_removexattr,
	.statfs = x_statfs,
	.close = x_close,
	.with_ws_sink = x_with_ws_sink,
};

int nfs_backend_ext4_open(struct nfs_backend *b, struct bs_export_unit *u)
{
	struct e4 *e = calloc(1, sizeof(*e));
	const char *p;
	int err;

	if (!e)
		return -ENOMEM;
	/* the fs layer claims the device itself (exclusive read-write) */
	bs_claim_release(u->claim);
	u->claim = NULL;
	err = bs_fs_open(u->dev, u->readonly ? BS_FS_RDONLY : 0, &e->fs);
	if (err) {
		free(e);
		return err;
	}
	e->fsid = 2166136261u;
	for (p = u->dev->name; *p; p++)
		e->fsid = (e->fsid ^ (uint8_t)*p) * 16777619u;
	b->ops = &ext4_ops;
	b->priv = e;
	return 0;
}
