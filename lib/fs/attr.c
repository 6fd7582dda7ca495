/* SPDX-License-Identifier: MIT */
/*
 * Attributes: chmod, chown and utimensat on one inode (bs_fs_setattr),
 * with the rules of the POSIX calls they stand for.
 */
#include <errno.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/fs.h>

#include "fs/internal.h"

/* ext4's range: 32 signed bits of seconds and two epoch bits */
#define TIME_MIN (-((int64_t)1 << 31))
#define TIME_MAX (((int64_t)1 << 34) - ((int64_t)1 << 31) - 1)

static void set_id(struct ext2_inode *inode, bool gid, uint32_t id)
{
	if (gid) {
		inode->i_gid = (__u16)id;
		ext2fs_set_i_gid_high(*inode, id >> 16);
	} else {
		inode->i_uid = (__u16)id;
		ext2fs_set_i_uid_high(*inode, id >> 16);
	}
}

static int check_time(struct bs_fs *fs, const char *what, int64_t sec,
		      uint32_t ns)
{
	if (ns >= 1000000000u)
		return fs_err(fs, -EINVAL, "setattr: %s nanoseconds %u out of "
			      "range", what, ns);
	if (sec < TIME_MIN || sec > TIME_MAX)
		return fs_err(fs, -EINVAL, "setattr: %s %lld seconds is out of "
			      "ext4's range", what, (long long)sec);
	return 0;
}

static int do_setattr(struct bs_fs *fs, uint32_t ino,
		      const struct bs_fs_setattr *sa)
{
	struct ext2_inode inode;
	struct timespec now, at, mt;
	unsigned m = sa->mask;
	int err;

	if ((err = fs_check_rw(fs, "setattr")) ||
	    (err = fs_read_inode(fs, ino, &inode)))
		return err;
	if (!inode.i_links_count || !inode.i_mode ||
	    !ext2fs_test_inode_bitmap2(fs->e2->inode_map, ino))
		return fs_err(fs, -ENOENT, "inode %u was removed", ino);
	if (!m)
		return 0;
	if ((m & BS_FS_SET_MODE) && LINUX_S_ISLNK(inode.i_mode))
		return fs_err(fs, -EOPNOTSUPP, "setattr: the mode of a symbolic "
			      "link cannot be changed");
	if ((m & BS_FS_SET_ATIME) && !(m & BS_FS_SET_ATIME_NOW) &&
	    (err = check_time(fs, "atime", sa->atime, sa->atime_ns)))
		return err;
	if ((m & BS_FS_SET_MTIME) && !(m & BS_FS_SET_MTIME_NOW) &&
	    (err = check_time(fs, "mtime", sa->mtime, sa->mtime_ns)))
		return err;
	if (m & (BS_FS_SET_UID | BS_FS_SET_GID)) {
		if (m & BS_FS_SET_UID)
			set_id(&inode, false, sa->uid);
		if (m & BS_FS_SET_GID)
			set_id(&inode, true, sa->gid);
		/* chown(2) of a non-directory: no set-ID bits kept */
		if (!LINUX_S_ISDIR(inode.i_mode) && !(m & BS_FS_SET_MODE)) {
			inode.i_mode &= (__u16)~LINUX_S_ISUID;
			if (inode.i_mode & LINUX_S_IXGRP)
				inode.i_mode &= (__u16)~LINUX_S_ISGID;
		}
	}
	if (m & BS_FS_SET_MODE)
		inode.i_mode = (__u16)((inode.i_mode & LINUX_S_IFMT) |
				       (sa->mode & 07777));
	fs_now(&now);
	if (m & BS_FS_SET_ATIME_NOW)
		at = now;
	else if (m & BS_FS_SET_ATIME)
		at = (struct timespec){ sa->atime, sa->atime_ns };
	if (m & BS_FS_SET_MTIME_NOW)
		mt = now;
	else if (m & BS_FS_SET_MTIME)
		mt = (struct timespec){ sa->mtime, sa->mtime_ns };
	return fs_write_inode_ts(fs, ino, &inode,
				 m & (BS_FS_SET_ATIME | BS_FS_SET_ATIME_NOW) ?
				 &at : NULL,
				 m & (BS_FS_SET_MTIME | BS_FS_SET_MTIME_NOW) ?
				 &mt : NULL, &now);
}

int bs_fs_setattr(struct bs_fs *fs, uint32_t ino,
		  const struct bs_fs_setattr *sa)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_setattr(fs, ino, sa));
}
