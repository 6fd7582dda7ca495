/* SPDX-License-Identifier: MIT */
/*
 * Names: path lookup, stat, create, mkdir, mknod, symlink, readlink,
 * link, unlink, rename and readdir on the ext4 of lib/fs/, with the
 * errors of the POSIX calls they stand for.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>

#include "core/random.h"
#include "fs/internal.h"

#define NAME_MAX_EXT4 255

static __u32 now32(void)
{
	return (__u32)time(NULL);
}

static int check_name(struct bs_fs *fs, const char *name)
{
	size_t n = strlen(name);

	if (!n)
		return fs_err(fs, -ENOENT, "empty name");
	if (n > NAME_MAX_EXT4)
		return fs_err(fs, -ENAMETOOLONG, "name '%.32s...' is longer "
			      "than %d bytes", name, NAME_MAX_EXT4);
	if (strchr(name, '/'))
		return fs_err(fs, -EINVAL, "name '%s' contains '/'", name);
	return 0;
}

static int check_dir(struct bs_fs *fs, uint32_t dir)
{
	struct ext2_inode inode;
	int err = fs_read_inode(fs, dir, &inode);

	if (err)
		return err;
	if (!LINUX_S_ISDIR(inode.i_mode))
		return fs_err(fs, -ENOTDIR, "inode %u is not a directory", dir);
	if (!inode.i_links_count)
		return fs_err(fs, -ENOENT, "directory inode %u was removed", dir);
	return 0;
}

int bs_fs_lookup_at(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t *ino)
{
	ext2_ino_t found;
	errcode_t ret;
	int err;

	if ((err = check_name(fs, name)) || (err = check_dir(fs, dir)))
		return err;
	ret = ext2fs_lookup(fs->e2, dir, name, (int)strlen(name), NULL, &found);
	if (ret == EXT2_ET_FILE_NOT_FOUND)
		return fs_err(fs, -ENOENT, "'%s': no such file or directory",
			      name);
	if (ret)
		return fs_fail(fs, ret, "looking up '%s'", name);
	*ino = found;
	return 0;
}

/*
 * Walk @path; with @last set, stop before the last component and return
 * it there (for create/unlink/rename), else resolve all of it. *@slash
 * (when not NULL) says whether the path ends in '/' after a component:
 * then, as in the kernel, the last component must be a directory.
 */
static int walk(struct bs_fs *fs, const char *path, uint32_t *ino,
		char *last, size_t lastlen, bool *slash)
{
	const char *p = path, *end;
	uint32_t cur = BS_FS_ROOT_INO;
	char name[NAME_MAX_EXT4 + 1];
	bool trailing = false;
	int err;

	if (!path || path[0] != '/')
		return fs_err(fs, -EINVAL, "path '%s' is not absolute",
			      path ? path : "(null)");
	for (;;) {
		while (*p == '/')
			p++;
		if (!*p)
			break;
		end = strchr(p, '/');
		if (!end)
			end = p + strlen(p);
		if ((size_t)(end - p) > NAME_MAX_EXT4)
			return fs_err(fs, -ENAMETOOLONG, "%s: a component is "
				      "longer than %d bytes", path,
				      NAME_MAX_EXT4);
		memcpy(name, p, (size_t)(end - p));
		name[end - p] = '\0';
		p = end;
		trailing = *p == '/';
		if (last) {
			const char *q = p;
			while (*q == '/')
				q++;
			if (!*q) {
				if ((size_t)snprintf(last, lastlen, "%s", name) >=
				    lastlen)
					return fs_err(fs, -ENAMETOOLONG,
						      "%s: name too long", path);
				*ino = cur;
				if (slash)
					*slash = trailing;
				return 0;
			}
		}
		err = bs_fs_lookup_at(fs, cur, name, &cur);
		if (err == -ENOENT)
			return fs_err(fs, -ENOENT, "%s: '%s' not found", path,
				      name);
		if (err == -ENOTDIR)
			return fs_err(fs, -ENOTDIR, "%s: a component before "
				      "'%s' is not a directory", path, name);
		if (err)
			return err;
	}
	if (last)
		return fs_err(fs, -EINVAL, "%s: the root has no name to "
			      "create or remove", path);
	if (trailing) {
		/* "/d/f/": f must be a directory, as path resolution wants */
		struct ext2_inode inode;

		if ((err = fs_read_inode(fs, cur, &inode)))
			return err;
		if (!LINUX_S_ISDIR(inode.i_mode))
			return fs_err(fs, -ENOTDIR, "%s: '%s' is not a "
				      "directory", path, name);
	}
	*ino = cur;
	return 0;
}

/* @name in @dir must be a directory (a path named it with a trailing '/'). */
static int want_dir(struct bs_fs *fs, uint32_t dir, const char *name,
		    const char *path)
{
	struct ext2_inode inode;
	uint32_t ino;
	int err;

	if ((err = bs_fs_lookup_at(fs, dir, name, &ino)) ||
	    (err = fs_read_inode(fs, ino, &inode)))
		return err;
	if (!LINUX_S_ISDIR(inode.i_mode))
		return fs_err(fs, -ENOTDIR, "%s: '%s' is not a directory", path,
			      name);
	return 0;
}

int bs_fs_lookup(struct bs_fs *fs, const char *path, uint32_t *ino)
{
	return walk(fs, path, ino, NULL, 0, NULL);
}

bool bs_fs_ino_reserved(struct bs_fs *fs, uint32_t ino)
{
	/* fs_check: the journal's inode is among them */
	return ino != EXT2_ROOT_INO && ino < EXT2_FIRST_INO(fs->e2->super);
}

int bs_fs_stat(struct bs_fs *fs, uint32_t ino, struct bs_fs_stat *st)
{
	struct ext2_inode_large li;
	struct ext2_inode inode;
	struct timespec at, mt, ct;
	errcode_t ret;

	if (!ino || ino > fs->e2->super->s_inodes_count)
		return fs_err(fs, -EINVAL, "inode %u: no such inode number", ino);
	memset(&li, 0, sizeof(li));
	ret = ext2fs_read_inode_full(fs->e2, ino, (struct ext2_inode *)&li,
				     sizeof(li));
	if (ret)
		return fs_fail(fs, ret, "reading inode %u", ino);
	memcpy(&inode, &li, sizeof(inode));
	if (!ext2fs_test_inode_bitmap2(fs->e2->inode_map, ino))
		return fs_err(fs, -ENOENT, "inode %u is not in use", ino);
	memset(st, 0, sizeof(*st));
	st->ino = ino;
	st->mode = inode.i_mode;
	st->nlink = inode.i_links_count;
	st->uid = inode_uid(inode);
	st->gid = inode_gid(inode);
	st->size = EXT2_I_SIZE(&inode);
	st->blocks = ext2fs_get_stat_i_blocks(fs->e2, &inode);
	fs_inode_times(fs, &li, &at, &mt, &ct);
	st->atime = at.tv_sec;
	st->atime_ns = (uint32_t)at.tv_nsec;
	st->mtime = mt.tv_sec;
	st->mtime_ns = (uint32_t)mt.tv_nsec;
	st->ctime = ct.tv_sec;
	st->ctime_ns = (uint32_t)ct.tv_nsec;
	st->generation = inode.i_generation;
	if (LINUX_S_ISCHR(inode.i_mode) || LINUX_S_ISBLK(inode.i_mode)) {
		/* the kernel's old_decode_dev / new_decode_dev */
		if (inode.i_block[0]) {
			st->rdev_major = (inode.i_block[0] >> 8) & 0xff;
			st->rdev_minor = inode.i_block[0] & 0xff;
		} else {
			st->rdev_major = (inode.i_block[1] & 0xfff00) >> 8;
			st->rdev_minor = (inode.i_block[1] & 0xff) |
					 ((inode.i_block[1] >> 12) & 0xfff00);
		}
	}
	return 0;
}

/* Set mtime and ctime of a directory whose entries changed. */
static int touch(struct bs_fs *fs, uint32_t ino, int links_delta)
{
	struct ext2_inode inode;
	int err = fs_read_inode(fs, ino, &inode);

	if (err)
		return err;
	if (links_delta < 0 && inode.i_links_count > 1)
		inode.i_links_count--;
	else if (links_delta > 0 && inode.i_links_count < EXT2_LINK_MAX)
		inode.i_links_count++;
	/* dir_nlink: past the limit a directory counts 1, "many" */
	else if (links_delta > 0)
		inode.i_links_count = 1;
	return fs_write_inode_times(fs, ino, &inode, FS_MTIME | FS_CTIME, NULL);
}

/* Link @name -> @ino in @dir, growing the directory when it is full. */
static int dir_link(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t ino, int ftype)
{
	errcode_t ret;

	fs_op_note(fs, dir);
	ret = ext2fs_link(fs->e2, dir, name, ino, ftype);
	if (ret == EXT2_ET_DIR_NO_SPACE) {
		ret = ext2fs_expand_dir(fs->e2, dir);
		if (ret)
			return fs_fail(fs, ret, "growing directory %u", dir);
		ret = ext2fs_link(fs->e2, dir, name, ino, ftype);
	}
	if (ret)
		return fs_fail(fs, ret, "adding '%s' to directory %u", name,
			      dir);
	return 0;
}

struct room {
	unsigned need;
	bool found;
};

static int room_cb(struct ext2_dir_entry *de, int offset, int blocksize,
		   char *buf, void *priv)
{
	struct room *r = priv;
	unsigned namelen = ext2fs_dirent_name_len(de);
	unsigned rec_len = de->rec_len, used;

	/* the checksum tail of a block is no room */
	if (!de->inode && !namelen && ext2fs_dirent_file_type(de) ==
	    EXT2_DIR_NAME_LEN_CSUM >> 8)
		return 0;
	used = de->inode ? (unsigned)EXT2_DIR_REC_LEN(namelen) : 0;
	if (rec_len >= used + r->need) {
		r->found = true;
		return DIRENT_ABORT;
	}
	return 0;
}

/*
 * ext2fs_mkdir() leaves a half-made inode behind when the parent has no
 * room for the name; give the parent room first, as a kernel would.
 */
static int make_room(struct bs_fs *fs, uint32_t dir, const char *name)
{
	struct room r = { .need = EXT2_DIR_REC_LEN(strlen(name)) };
	errcode_t ret;

	ret = ext2fs_dir_iterate(fs->e2, dir, DIRENT_FLAG_INCLUDE_EMPTY, NULL,
				 room_cb, &r);
	if (ret)
		return fs_fail(fs, ret, "reading directory %u", dir);
	if (r.found)
		return 0;
	fs_op_note(fs, dir);
	ret = ext2fs_expand_dir(fs->e2, dir);
	if (ret)
		return fs_fail(fs, ret, "growing directory %u", dir);
	return 0;
}

static int exists(struct bs_fs *fs, uint32_t dir, const char *name)
{
	ext2_ino_t found;
	errcode_t ret;

	ret = ext2fs_lookup(fs->e2, dir, name, (int)strlen(name), NULL, &found);
	if (!ret)
		return fs_err(fs, -EEXIST, "'%s' exists", name);
	if (ret != EXT2_ET_FILE_NOT_FOUND)
		return fs_fail(fs, ret, "looking up '%s'", name);
	return 0;
}

static int do_create(struct bs_fs *fs, uint32_t dir, const char *name,
		     uint32_t mode, uint32_t *ino)
{
	struct ext2_inode inode;
	ext2_extent_handle_t h;
	struct timespec now;
	ext2_ino_t child;
	errcode_t ret;
	int err;

	if ((err = fs_check_rw(fs, "create")) || (err = check_name(fs, name)) ||
	    (err = check_dir(fs, dir)) || (err = exists(fs, dir, name)))
		return err;
	ret = ext2fs_new_inode(fs->e2, dir, LINUX_S_IFREG | 0600, NULL, &child);
	if (ret)
		return fs_fail(fs, ret, "creating '%s': no free inode", name);
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = LINUX_S_IFREG | (mode & 07777);
	inode.i_links_count = 1;
	fs_now(&now);
	if (bs_random_bytes(&inode.i_generation, sizeof(inode.i_generation)))
		inode.i_generation = (__u32)now.tv_nsec ^ (__u32)now.tv_sec;
	/* an empty extent tree in i_block, EXTENTS_FL set */
	ret = ext2fs_extent_open2(fs->e2, child, &inode, &h);
	if (ret)
		return fs_fail(fs, ret, "creating '%s': extent tree", name);
	ext2fs_extent_free(h);
	if ((err = fs_write_new_inode(fs, child, &inode, &now)))
		return err;
	ext2fs_inode_alloc_stats2(fs->e2, child, +1, 0);
	fs_op_persist_inode(fs, child);
	/*
	 * The name last, once the inode it points to is on disk; a directory
	 * that cannot grow (ENOSPC) leaves the inode free again.
	 */
	err = dir_link(fs, dir, name, child, EXT2_FT_REG_FILE);
	if (err) {
		inode.i_links_count = 0;
		inode.i_dtime = now32();
		if (!ext2fs_write_inode(fs->e2, child, &inode))
			ext2fs_inode_alloc_stats2(fs->e2, child, -1, 0);
		return err;
	}
	err = touch(fs, dir, 0);
	if (err)
		return err;
	if (ino)
		*ino = child;
	return 0;
}

int bs_fs_create_at(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t mode, uint32_t *ino)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_create(fs, dir, name, mode, ino));
}

int bs_fs_create(struct bs_fs *fs, const char *path, uint32_t mode,
		 uint32_t *ino)
{
	char name[NAME_MAX_EXT4 + 1];
	uint32_t dir;
	bool slash;
	int err = walk(fs, path, &dir, name, sizeof(name), &slash);

	if (err)
		return err;
	/* open(O_CREAT) of "f/": the kernel says EISDIR */
	if (slash)
		return fs_err(fs, -EISDIR, "%s: a regular file cannot be named "
			      "with a trailing '/'", path);
	return bs_fs_create_at(fs, dir, name, mode, ino);
}

/*
 * ext2fs_mkdir() failed: an inode it wrote before linking the name (not
 * yet counted in the bitmap) is written back as removed, so that e2fsck
 * finds no unattached directory.
 */
static void unmake_dir(struct bs_fs *fs, uint32_t child)
{
	struct ext2_inode inode;

	if (fs->broken || ext2fs_test_inode_bitmap2(fs->e2->inode_map, child) ||
	    ext2fs_read_inode(fs->e2, child, &inode) ||
	    !LINUX_S_ISDIR(inode.i_mode) || !inode.i_links_count)
		return;
	inode.i_links_count = 0;
	inode.i_dtime = now32();
	ext2fs_write_inode(fs->e2, child, &inode);
}

static int do_mkdir(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t mode, uint32_t *ino)
{
	struct ext2_inode inode;
	ext2_ino_t child;
	errcode_t ret;
	int err;

	if ((err = fs_check_rw(fs, "mkdir")) || (err = check_name(fs, name)) ||
	    (err = check_dir(fs, dir)) || (err = exists(fs, dir, name)) ||
	    (err = make_room(fs, dir, name)))
		return err;
	/* the inode number first, so that the op knows whose block it is */
	ret = ext2fs_new_inode(fs->e2, dir, LINUX_S_IFDIR | 0755, NULL, &child);
	if (ret)
		return fs_fail(fs, ret, "mkdir '%s': no free inode", name);
	fs_op_note(fs, child);
	ret = ext2fs_mkdir(fs->e2, dir, child, name);
	if (ret == EXT2_ET_DIR_NO_SPACE) {
		/* our room check was wrong: the half-made inode is reused */
		ret = ext2fs_expand_dir(fs->e2, dir);
		if (!ret)
			ret = ext2fs_mkdir(fs->e2, dir, child, name);
	}
	if (ret) {
		unmake_dir(fs, child);
		return fs_fail(fs, ret, "mkdir '%s'", name);
	}
	if ((err = fs_read_inode(fs, child, &inode)))
		return err;
	inode.i_mode = LINUX_S_IFDIR | (mode & 07777);
	/* not i_generation: it seeds the checksum of the block just written */
	if ((err = fs_write_inode_times(fs, child, &inode,
					FS_ATIME | FS_MTIME | FS_CTIME, NULL)) ||
	    (err = touch(fs, dir, 0)))
		return err;
	if (ino)
		*ino = child;
	return 0;
}

int bs_fs_mkdir_at(struct bs_fs *fs, uint32_t dir, const char *name,
		   uint32_t mode, uint32_t *ino)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_mkdir(fs, dir, name, mode, ino));
}

int bs_fs_mkdir(struct bs_fs *fs, const char *path, uint32_t mode,
		uint32_t *ino)
{
	char name[NAME_MAX_EXT4 + 1];
	uint32_t dir;
	int err = walk(fs, path, &dir, name, sizeof(name), NULL);

	return err ? err : bs_fs_mkdir_at(fs, dir, name, mode, ino);
}

static int mode_ftype(uint32_t mode)
{
	switch (mode & LINUX_S_IFMT) {
	case LINUX_S_IFREG: return EXT2_FT_REG_FILE;
	case LINUX_S_IFDIR: return EXT2_FT_DIR;
	case LINUX_S_IFCHR: return EXT2_FT_CHRDEV;
	case LINUX_S_IFBLK: return EXT2_FT_BLKDEV;
	case LINUX_S_IFIFO: return EXT2_FT_FIFO;
	case LINUX_S_IFSOCK: return EXT2_FT_SOCK;
	case LINUX_S_IFLNK: return EXT2_FT_SYMLINK;
	default: return EXT2_FT_UNKNOWN;
	}
}

/* ---- device nodes, fifos and sockets --------------------------------------- */

static int do_mknod(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t mode, uint32_t major, uint32_t minor,
		    uint32_t *ino)
{
	uint32_t type = mode & LINUX_S_IFMT;
	struct ext2_inode inode;
	struct timespec now;
	ext2_ino_t child;
	errcode_t ret;
	int err;

	if ((err = fs_check_rw(fs, "mknod")) || (err = check_name(fs, name)))
		return err;
	if (type != LINUX_S_IFCHR && type != LINUX_S_IFBLK &&
	    type != LINUX_S_IFIFO && type != LINUX_S_IFSOCK)
		return fs_err(fs, -EINVAL, "mknod '%s': type 0%o is not a "
			      "device, fifo or socket", name, type);
	if ((type == LINUX_S_IFCHR || type == LINUX_S_IFBLK) &&
	    (major > 0xfff || minor > 0xfffff))
		return fs_err(fs, -EINVAL, "mknod '%s': device %u:%u does not "
			      "fit 12:20 bits", name, major, minor);
	if ((err = check_dir(fs, dir)) || (err = exists(fs, dir, name)))
		return err;
	ret = ext2fs_new_inode(fs->e2, dir, type | 0600, NULL, &child);
	if (ret)
		return fs_fail(fs, ret, "mknod '%s': no free inode", name);
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = (__u16)(type | (mode & 07777));
	inode.i_links_count = 1;
	fs_now(&now);
	if (bs_random_bytes(&inode.i_generation, sizeof(inode.i_generation)))
		inode.i_generation = (__u32)now.tv_nsec ^ (__u32)now.tv_sec;
	if (type == LINUX_S_IFCHR || type == LINUX_S_IFBLK) {
		/* the kernel's old_encode_dev / new_encode_dev */
		if (major < 256 && minor < 256)
			inode.i_block[0] = major << 8 | minor;
		else
			inode.i_block[1] = (minor & 0xff) | major << 8 |
					   (minor & ~0xffu) << 12;
	}
	if ((err = fs_write_new_inode(fs, child, &inode, &now)))
		return err;
	ext2fs_inode_alloc_stats2(fs->e2, child, +1, 0);
	fs_op_persist_inode(fs, child);
	err = dir_link(fs, dir, name, child, mode_ftype(inode.i_mode));
	if (err) {
		inode.i_links_count = 0;
		inode.i_dtime = now32();
		if (!ext2fs_write_inode(fs->e2, child, &inode))
			ext2fs_inode_alloc_stats2(fs->e2, child, -1, 0);
		return err;
	}
	if ((err = touch(fs, dir, 0)))
		return err;
	if (ino)
		*ino = child;
	return 0;
}

int bs_fs_mknod_at(struct bs_fs *fs, uint32_t dir, const char *name,
		   uint32_t mode, uint32_t major, uint32_t minor, uint32_t *ino)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_mknod(fs, dir, name, mode, major, minor, ino));
}

int bs_fs_mknod(struct bs_fs *fs, const char *path, uint32_t mode,
		uint32_t major, uint32_t minor, uint32_t *ino)
{
	char name[NAME_MAX_EXT4 + 1];
	uint32_t dir;
	bool slash;
	int err = walk(fs, path, &dir, name, sizeof(name), &slash);

	if (err)
		return err;
	if (slash)
		return fs_err(fs, -ENOENT, "%s: a node cannot be named with a "
			      "trailing '/'", path);
	return bs_fs_mknod_at(fs, dir, name, mode, major, minor, ino);
}

/* ---- symbolic links and hard links ----------------------------------------- */

/* ext4 keeps a target shorter than i_block (60 bytes) in i_block itself */
#define FAST_LINK_MAX (sizeof(((struct ext2_inode *)0)->i_block) - 1)

/*
 * The inode is written before its name, as create does; a slow link's
 * block is counted (and so written ahead by the op) and filled before the
 * extent tree maps it. A failure before the name is linked leaves the
 * inode free again; the op frees a block nothing maps.
 */
static int do_symlink(struct bs_fs *fs, uint32_t dir, const char *name,
		      const char *target, uint32_t *ino)
{
	size_t len = strlen(target);
	uint32_t bs = fs->e2->blocksize;
	struct ext2_inode inode;
	ext2_extent_handle_t h;
	struct timespec now;
	ext2_ino_t child;
	blk64_t blk = 0;
	char *buf = NULL;
	errcode_t ret;
	int err;

	if ((err = fs_check_rw(fs, "symlink")) || (err = check_name(fs, name)))
		return err;
	if (!len)
		return fs_err(fs, -ENOENT, "symlink '%s': empty target", name);
	if (len > BS_FS_SYMLINK_MAX || len >= bs)
		return fs_err(fs, -ENAMETOOLONG, "symlink '%s': a target of %zu "
			      "bytes; at most %u", name, len,
			      (unsigned)(bs - 1 < BS_FS_SYMLINK_MAX ?
					 bs - 1 : BS_FS_SYMLINK_MAX));
	if ((err = check_dir(fs, dir)) || (err = exists(fs, dir, name)))
		return err;
	ret = ext2fs_new_inode(fs->e2, dir, LINUX_S_IFLNK | 0777, NULL, &child);
	if (ret)
		return fs_fail(fs, ret, "symlink '%s': no free inode", name);
	fs_op_note(fs, child);
	memset(&inode, 0, sizeof(inode));
	inode.i_mode = LINUX_S_IFLNK | 0777;
	inode.i_links_count = 1;
	fs_now(&now);
	if (bs_random_bytes(&inode.i_generation, sizeof(inode.i_generation)))
		inode.i_generation = (__u32)now.tv_nsec ^ (__u32)now.tv_sec;
	ret = ext2fs_inode_size_set(fs->e2, &inode, len);
	if (ret)
		return fs_fail(fs, ret, "symlink '%s': size", name);
	if (len <= FAST_LINK_MAX) {
		memcpy(inode.i_block, target, len);
	} else {
		/* an empty extent tree now, one block mapped below */
		ret = ext2fs_extent_open2(fs->e2, child, &inode, &h);
		if (ret)
			return fs_fail(fs, ret, "symlink '%s': extent tree", name);
		ext2fs_extent_free(h);
	}
	if ((err = fs_write_new_inode(fs, child, &inode, &now)))
		return err;
	ext2fs_inode_alloc_stats2(fs->e2, child, +1, 0);
	fs_op_persist_inode(fs, child);
	if (len > FAST_LINK_MAX) {
		ret = ext2fs_new_block2(fs->e2, ext2fs_find_inode_goal(
						fs->e2, child, &inode, 0),
					NULL, &blk);
		if (ret) {
			err = fs_fail(fs, ret, "symlink '%s': no free block",
				      name);
			goto undo;
		}
		ext2fs_block_alloc_stats2(fs->e2, blk, +1);
		ret = ext2fs_get_memzero(bs, &buf);
		if (!ret) {
			memcpy(buf, target, len);
			ret = io_channel_write_blk64(fs->e2->io, blk, 1, buf);
		}
		ext2fs_free_mem(&buf);
		if (!ret)
			ret = ext2fs_extent_open2(fs->e2, child, &inode, &h);
		if (!ret) {
			ret = ext2fs_extent_set_bmap(h, 0, blk, 0);
			ext2fs_extent_free(h);
		}
		if (!ret)
			ret = ext2fs_read_inode(fs->e2, child, &inode);
		if (!ret)
			ret = ext2fs_iblk_set(fs->e2, &inode, 1);
		if (!ret)
			ret = ext2fs_write_inode(fs->e2, child, &inode);
		if (ret) {
			err = fs_fail(fs, ret, "symlink '%s': writing the "
				      "target", name);
			goto undo;
		}
	}
	/* the name last, once the inode and its target are on disk */
	err = dir_link(fs, dir, name, child, EXT2_FT_SYMLINK);
	if (err)
		goto undo;
	if ((err = touch(fs, dir, 0)))
		return err;
	if (ino)
		*ino = child;
	return 0;
undo:
	/* unnamed: free again (the op frees the block nothing maps then) */
	if (!ext2fs_read_inode(fs->e2, child, &inode)) {
		inode.i_links_count = 0;
		inode.i_dtime = now32();
		if (!ext2fs_write_inode(fs->e2, child, &inode))
			ext2fs_inode_alloc_stats2(fs->e2, child, -1, 0);
	}
	return err;
}

int bs_fs_symlink_at(struct bs_fs *fs, uint32_t dir, const char *name,
		     const char *target, uint32_t *ino)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_symlink(fs, dir, name, target, ino));
}

int bs_fs_symlink(struct bs_fs *fs, const char *path, const char *target,
		  uint32_t *ino)
{
	char name[NAME_MAX_EXT4 + 1];
	uint32_t dir;
	bool slash;
	int err = walk(fs, path, &dir, name, sizeof(name), &slash);

	if (err)
		return err;
	/* symlink(2) of "l/": the name exists or it is ENOENT */
	if (slash)
		return fs_err(fs, -ENOENT, "%s: a symbolic link cannot be "
			      "named with a trailing '/'", path);
	return bs_fs_symlink_at(fs, dir, name, target, ino);
}

int bs_fs_readlink(struct bs_fs *fs, uint32_t ino, char *buf, size_t cap,
		   size_t *len)
{
	uint32_t bs = fs->e2->blocksize;
	struct ext2_inode inode;
	uint64_t size;
	blk64_t blk = 0;
	char *b = NULL;
	errcode_t ret;
	int err;

	if ((err = fs_read_inode(fs, ino, &inode)))
		return err;
	if (!LINUX_S_ISLNK(inode.i_mode))
		return fs_err(fs, -EINVAL, "inode %u is not a symbolic link",
			      ino);
	if (!inode.i_links_count)
		return fs_err(fs, -ENOENT, "inode %u was removed", ino);
	size = EXT2_I_SIZE(&inode);
	if (inode.i_flags & (EXT4_INLINE_DATA_FL | EXT4_ENCRYPT_FL))
		return fs_err(fs, -EOPNOTSUPP, "symbolic link %u: inline data "
			      "or encrypted target", ino);
	if (!size || size >= bs || size > BS_FS_SYMLINK_MAX)
		return fs_err(fs, -EUCLEAN, "symbolic link %u: a target of "
			      "%llu bytes (filesystem needs checking, run "
			      "e2fsck)", ino, (unsigned long long)size);
	/* fast when it holds no block (the kernel's rule), whatever size */
	if (!ext2fs_inode_data_blocks2(fs->e2, &inode)) {
		if (size > FAST_LINK_MAX)
			return fs_err(fs, -EUCLEAN, "symbolic link %u: %llu "
				      "bytes and no block (filesystem needs "
				      "checking, run e2fsck)", ino,
				      (unsigned long long)size);
		memcpy(buf, inode.i_block, size < cap ? size : cap);
		*len = size;
		return 0;
	}
	ret = ext2fs_bmap2(fs->e2, ino, &inode, NULL, 0, 0, NULL, &blk);
	if (!ret && !blk)
		return fs_err(fs, -EUCLEAN, "symbolic link %u has no block "
			      "(filesystem needs checking, run e2fsck)", ino);
	if (!ret)
		ret = ext2fs_get_mem(bs, &b);
	if (!ret)
		ret = io_channel_read_blk64(fs->e2->io, blk, 1, b);
	if (!ret) {
		memcpy(buf, b, size < cap ? size : cap);
		*len = size;
	}
	ext2fs_free_mem(&b);
	if (ret)
		return fs_fail(fs, ret, "reading symbolic link %u", ino);
	return 0;
}

/*
 * The count first, then the name: a failure between them leaves one link
 * too many (e2fsck lowers it), never a name the count misses.
 */
static int do_link(struct bs_fs *fs, uint32_t ino, uint32_t dir,
		   const char *name)
{
	struct ext2_inode inode;
	int err;

	if ((err = fs_check_rw(fs, "link")) || (err = check_name(fs, name)) ||
	    (err = check_dir(fs, dir)) || (err = exists(fs, dir, name)) ||
	    (err = fs_read_inode(fs, ino, &inode)))
		return err;
	if (!inode.i_links_count || !inode.i_mode ||
	    !ext2fs_test_inode_bitmap2(fs->e2->inode_map, ino))
		return fs_err(fs, -ENOENT, "inode %u was removed", ino);
	if (LINUX_S_ISDIR(inode.i_mode))
		return fs_err(fs, -EPERM, "'%s': hard links to directories "
			      "are not allowed", name);
	if (ino < EXT2_FIRST_INO(fs->e2->super))
		return fs_err(fs, -EPERM, "inode %u is reserved", ino);
	if (inode.i_links_count >= EXT2_LINK_MAX)
		return fs_err(fs, -EMLINK, "inode %u has %u links already", ino,
			      inode.i_links_count);
	inode.i_links_count++;
	if ((err = fs_write_inode_times(fs, ino, &inode, FS_CTIME, NULL)))
		return err;
	err = dir_link(fs, dir, name, ino, mode_ftype(inode.i_mode));
	if (err) {
		/* no new name: the count back (the op repairs the rest) */
		if (!ext2fs_read_inode(fs->e2, ino, &inode)) {
			inode.i_links_count--;
			ext2fs_write_inode(fs->e2, ino, &inode);
		}
		return err;
	}
	return touch(fs, dir, 0);
}

int bs_fs_link_at(struct bs_fs *fs, uint32_t ino, uint32_t dir,
		  const char *name)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_link(fs, ino, dir, name));
}

int bs_fs_link(struct bs_fs *fs, const char *from, const char *to)
{
	char name[NAME_MAX_EXT4 + 1];
	uint32_t ino, dir;
	bool slash;
	int err;

	if ((err = walk(fs, from, &ino, NULL, 0, NULL)) ||
	    (err = walk(fs, to, &dir, name, sizeof(name), &slash)))
		return err;
	if (slash)
		return fs_err(fs, -ENOENT, "%s: a link cannot be named with a "
			      "trailing '/'", to);
	return bs_fs_link_at(fs, ino, dir, name);
}

/* ---- removing -------------------------------------------------------------- */

static int empty_cb(ext2_ino_t dir, int entry, struct ext2_dir_entry *de,
		    int offset, int blocksize, char *buf, void *priv)
{
	bool *empty = priv;

	if (entry == DIRENT_DOT_FILE || entry == DIRENT_DOT_DOT_FILE ||
	    !de->inode)
		return 0;
	*empty = false;
	return DIRENT_ABORT;
}

static int dir_empty(struct bs_fs *fs, uint32_t dir, bool *empty)
{
	errcode_t ret;

	*empty = true;
	ret = ext2fs_dir_iterate2(fs->e2, dir, 0, NULL, empty_cb, empty);
	if (ret)
		return fs_fail(fs, ret, "reading directory %u", dir);
	return 0;
}

/*
 * Drop one name of @ino (its entry is already gone). At zero links the
 * blocks and the inode are freed.
 */
static int drop_link(struct bs_fs *fs, uint32_t ino)
{
	struct ext2_inode inode;
	bool dir;
	errcode_t ret;
	int err;

	if ((err = fs_read_inode(fs, ino, &inode)))
		return err;
	dir = LINUX_S_ISDIR(inode.i_mode);
	if (!dir && inode.i_links_count > 1) {
		inode.i_links_count--;
		return fs_write_inode_times(fs, ino, &inode, FS_CTIME, NULL);
	}
	inode.i_links_count = 0;
	inode.i_ctime = inode.i_dtime = now32();
	fs_op_note(fs, ino);
	if (ext2fs_inode_has_valid_blocks2(fs->e2, &inode)) {
		ret = fs_punch(fs, ino, &inode, 0, ~0ULL);
		if (ret)
			return fs_fail(fs, ret, "freeing the blocks of inode %u",
				      ino);
	}
	if (ext2fs_file_acl_block(fs->e2, &inode)) {
		blk64_t blk = ext2fs_file_acl_block(fs->e2, &inode);
		__u32 refs = 0;

		/*
		 * The xattr block may be shared (the kernel shares identical
		 * ones): one reference less, freed only with the last. One
		 * that cannot be read (damaged) stays in use, for e2fsck.
		 */
		ret = ext2fs_adjust_ea_refcount3(fs->e2, blk, NULL, -1, &refs,
						 ino);
		if (!ret && !refs)
			ext2fs_block_alloc_stats2(fs->e2, blk, -1);
		ext2fs_file_acl_block_set(fs->e2, &inode, 0);
	}
	if ((err = fs_write_inode(fs, ino, &inode)))
		return err;
	ext2fs_inode_alloc_stats2(fs->e2, ino, -1, dir);
	return 0;
}

static int get_kind2(struct bs_fs *fs, uint32_t ino, bool *dir, int *ftype)
{
	struct ext2_inode inode;
	int err = fs_read_inode(fs, ino, &inode);

	if (!err) {
		*dir = LINUX_S_ISDIR(inode.i_mode);
		if (ftype)
			*ftype = mode_ftype(inode.i_mode);
	}
	return err;
}

static int get_kind(struct bs_fs *fs, uint32_t ino, bool *dir)
{
	return get_kind2(fs, ino, dir, NULL);
}

static int do_unlink(struct bs_fs *fs, uint32_t dir, const char *name)
{
	uint32_t ino;
	bool isdir, empty;
	errcode_t ret;
	int err;

	if ((err = fs_check_rw(fs, "unlink")))
		return err;
	if (!strcmp(name, ".") || !strcmp(name, ".."))
		return fs_err(fs, -EINVAL, "cannot remove '%s'", name);
	if ((err = bs_fs_lookup_at(fs, dir, name, &ino)) ||
	    (err = get_kind(fs, ino, &isdir)))
		return err;
	if (isdir) {
		if ((err = dir_empty(fs, ino, &empty)))
			return err;
		if (!empty)
			return fs_err(fs, -ENOTEMPTY, "'%s': directory not "
				      "empty", name);
	}
	ret = ext2fs_unlink(fs->e2, dir, name, ino, 0);
	if (ret)
		return fs_fail(fs, ret, "removing '%s'", name);
	if ((err = drop_link(fs, ino)))
		return err;
	/* a directory's ".." counted in its parent */
	return touch(fs, dir, isdir ? -1 : 0);
}

int bs_fs_unlink_at(struct bs_fs *fs, uint32_t dir, const char *name)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_unlink(fs, dir, name));
}

int bs_fs_unlink(struct bs_fs *fs, const char *path)
{
	char name[NAME_MAX_EXT4 + 1];
	uint32_t dir;
	bool slash;
	int err = walk(fs, path, &dir, name, sizeof(name), &slash);

	if (!err && slash && strcmp(name, ".") && strcmp(name, ".."))
		err = want_dir(fs, dir, name, path);
	return err ? err : bs_fs_unlink_at(fs, dir, name);
}

/* ---- rename ---------------------------------------------------------------- */

struct retarget {
	const char *name;	/* entry to change, or NULL for ".." */
	uint32_t ino;
	int ftype;
	bool done;
};

static int retarget_cb(ext2_ino_t dir, int entry, struct ext2_dir_entry *de,
		       int offset, int blocksize, char *buf, void *priv)
{
	struct retarget *r = priv;
	unsigned n = ext2fs_dirent_name_len(de);

	if (!de->inode)
		return 0;
	if (r->name ? (n != strlen(r->name) || memcmp(de->name, r->name, n))
		    : entry != DIRENT_DOT_DOT_FILE)
		return 0;
	de->inode = r->ino;
	if (r->ftype >= 0)
		ext2fs_dirent_set_file_type(de, r->ftype);
	r->done = true;
	return DIRENT_CHANGED | DIRENT_ABORT;
}

/* Point entry @name (NULL: "..") of @dir at @ino, in place. */
static int retarget(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t ino, int ftype)
{
	struct retarget r = { name, ino, ftype, false };
	errcode_t ret;

	ret = ext2fs_dir_iterate2(fs->e2, dir, 0, NULL, retarget_cb, &r);
	if (ret)
		return fs_fail(fs, ret, "updating directory %u", dir);
	if (!r.done)
		return fs_err(fs, -EUCLEAN, "directory %u has no entry '%s'",
			      dir, name ? name : "..");
	return 0;
}

/* Is @dir @anc or below it? Walks ".." up to the root, bounded. */
static int is_below(struct bs_fs *fs, uint32_t dir, uint32_t anc, bool *below)
{
	uint32_t cur = dir, up;
	unsigned depth;
	int err;

	*below = false;
	for (depth = 0; depth < 4096; depth++) {
		if (cur == anc) {
			*below = true;
			return 0;
		}
		if (cur == BS_FS_ROOT_INO)
			return 0;
		if ((err = bs_fs_lookup_at(fs, cur, "..", &up)))
			return err;
		cur = up;
	}
	return fs_err(fs, -ELOOP, "directory %u is more than 4096 levels "
		      "deep or loops", dir);
}

static int do_rename(struct bs_fs *fs, uint32_t fdir, const char *fname,
		     uint32_t tdir, const char *tname)
{
	uint32_t ino, target = 0;
	bool isdir, tisdir = false, empty, below;
	errcode_t ret;
	int err, ftype;

	if ((err = fs_check_rw(fs, "rename")) || (err = check_name(fs, tname)))
		return err;
	if (!strcmp(fname, ".") || !strcmp(fname, "..") ||
	    !strcmp(tname, ".") || !strcmp(tname, ".."))
		return fs_err(fs, -EINVAL, "cannot rename '.' or '..'");
	if ((err = bs_fs_lookup_at(fs, fdir, fname, &ino)) ||
	    (err = get_kind2(fs, ino, &isdir, &ftype)) ||
	    (err = check_dir(fs, tdir)))
		return err;
	err = bs_fs_lookup_at(fs, tdir, tname, &target);
	if (err && err != -ENOENT)
		return err;
	if (err == -ENOENT)
		target = 0;
	if (target == ino)
		return 0; /* the same file: nothing to do, as rename(2) */
	if (target) {
		if ((err = get_kind(fs, target, &tisdir)))
			return err;
		if (isdir && !tisdir)
			return fs_err(fs, -ENOTDIR, "'%s' is not a directory",
				      tname);
		if (!isdir && tisdir)
			return fs_err(fs, -EISDIR, "'%s' is a directory", tname);
		if (tisdir) {
			if ((err = dir_empty(fs, target, &empty)))
				return err;
			if (!empty)
				return fs_err(fs, -ENOTEMPTY, "'%s': directory "
					      "not empty", tname);
		}
	}
	if (isdir) {
		if ((err = is_below(fs, tdir, ino, &below)))
			return err;
		if (below)
			return fs_err(fs, -EINVAL, "cannot move directory '%s' "
				      "below itself", fname);
	}

	/* the new name first: a crash leaves two names, never none */
	if (target)
		err = retarget(fs, tdir, tname, ino, ftype);
	else
		err = dir_link(fs, tdir, tname, ino, ftype);
	if (err)
		return err;
	ret = ext2fs_unlink(fs->e2, fdir, fname, ino, 0);
	if (ret)
		return fs_fail(fs, ret, "removing the old name '%s'", fname);
	if (target && (err = drop_link(fs, target)))
		return err;
	if (isdir && fdir != tdir) {
		if ((err = retarget(fs, ino, NULL, tdir, -1)) ||
		    (err = touch(fs, fdir, -1)) || (err = touch(fs, tdir, +1)))
			return err;
	} else if ((err = touch(fs, fdir, 0))) {
		return err;
	}
	/* a replaced directory's ".." counted in tdir */
	if (tisdir && (err = touch(fs, tdir, -1)))
		return err;
	if (fdir != tdir && !isdir && (err = touch(fs, tdir, 0)))
		return err;
	return 0;
}

int bs_fs_rename_at(struct bs_fs *fs, uint32_t fdir, const char *fname,
		    uint32_t tdir, const char *tname)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_rename(fs, fdir, fname, tdir, tname));
}

int bs_fs_rename(struct bs_fs *fs, const char *from, const char *to)
{
	char fname[NAME_MAX_EXT4 + 1], tname[NAME_MAX_EXT4 + 1];
	uint32_t fdir, tdir;
	bool fslash, tslash;
	int err;

	if ((err = walk(fs, from, &fdir, fname, sizeof(fname), &fslash)) ||
	    (err = walk(fs, to, &tdir, tname, sizeof(tname), &tslash)))
		return err;
	/* a trailing '/' on either name: only a directory may move */
	if ((fslash || tslash) && strcmp(fname, ".") && strcmp(fname, "..") &&
	    (err = want_dir(fs, fdir, fname, from)))
		return err;
	return bs_fs_rename_at(fs, fdir, fname, tdir, tname);
}

/* ---- readdir --------------------------------------------------------------- */

struct rd {
	bs_fs_dirent_fn fn;
	void *arg;
	int rc;
};

static uint32_t ftype_mode(int ft)
{
	switch (ft) {
	case EXT2_FT_REG_FILE: return S_IFREG;
	case EXT2_FT_DIR: return S_IFDIR;
	case EXT2_FT_CHRDEV: return S_IFCHR;
	case EXT2_FT_BLKDEV: return S_IFBLK;
	case EXT2_FT_FIFO: return S_IFIFO;
	case EXT2_FT_SOCK: return S_IFSOCK;
	case EXT2_FT_SYMLINK: return S_IFLNK;
	default: return 0;
	}
}

static int rd_cb(ext2_ino_t dir, int entry, struct ext2_dir_entry *de,
		 int offset, int blocksize, char *buf, void *priv)
{
	struct rd *r = priv;
	char name[NAME_MAX_EXT4 + 1];
	unsigned n = ext2fs_dirent_name_len(de);

	if (entry == DIRENT_DOT_FILE || entry == DIRENT_DOT_DOT_FILE ||
	    !de->inode)
		return 0;
	memcpy(name, de->name, n);
	name[n] = '\0';
	r->rc = r->fn(r->arg, name, de->inode,
		      ftype_mode(ext2fs_dirent_file_type(de)));
	return r->rc ? DIRENT_ABORT : 0;
}

int bs_fs_readdir(struct bs_fs *fs, uint32_t dir, bs_fs_dirent_fn fn,
		  void *arg)
{
	struct rd r = { fn, arg, 0 };
	errcode_t ret;
	int err;

	if ((err = check_dir(fs, dir)))
		return err;
	ret = ext2fs_dir_iterate2(fs->e2, dir, 0, NULL, rd_cb, &r);
	if (ret)
		return fs_fail(fs, ret, "reading directory %u", dir);
	return r.rc;
}
