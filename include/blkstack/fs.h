/* SPDX-License-Identifier: MIT */
/*
 * The filesystem layer: real ext4 (through libext2fs) on a blkstack
 * device, for the CLI and the NFS server. Images made here are checked by
 * e2fsck and mounted by the kernel's ext4.
 *
 * A struct bs_fs is used by one thread at a time (the caller serialises).
 * Every function returns 0 (or a byte count) or a negative errno, with a
 * one-line reason in bs_last_error() naming the device and the layer.
 * Paths are absolute ("/a/b"); components are looked up one by one, with
 * no symlinks followed. Inode numbers are ext4's (the root is 2).
 *
 * libext2fs keeps no journal: each call writes its metadata in place and
 * the superblock says "not clean" from bs_fs_open() (read-write) to
 * bs_fs_close(), so a crash in between is repaired by e2fsck, which the
 * next read-write open insists on (-EUCLEAN). Data and metadata are
 * durable after bs_fs_fsync() or bs_fs_close(); bs_fs_fallocate() with
 * WRITE_ZEROES flushes by itself, as its ordering needs.
 */
#ifndef BLKSTACK_FS_H
#define BLKSTACK_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bs_dev;
struct bs_fs;

#define BS_FS_ROOT_INO 2u

struct bs_fs_mkfs_opts {
	uint32_t block_size;	/* 1024, 2048 or 4096; 0 = 4096 */
	uint32_t inode_ratio;	/* bytes per inode; 0 = 16384 */
	uint32_t journal_blocks; /* 0 = the size mke2fs would choose */
	const char *label;	/* volume name, up to 16 bytes; NULL = none */
};

/*
 * Make an ext4 filesystem on @dev: extents, 64bit, flex_bg, dir_index,
 * metadata_csum, huge_file, dir_nlink, extra_isize and a journal; inode
 * tables and the journal are zeroed through the device's zeroout. @opts
 * may be NULL. Claims @dev exclusively meanwhile ("fs mkfs"): -EBUSY
 * naming the holder when anyone else uses it, and nothing is written. It
 * replaces whatever is there: callers ask first (bs_fs_probe()).
 */
int bs_fs_mkfs(struct bs_dev *dev, const struct bs_fs_mkfs_opts *opts);

/*
 * What is on @dev already, as mke2fs asks before it overwrites: 1 with
 * @what set ("an ext4 filesystem (label 'x')", "an xfs filesystem", "a
 * btrfs filesystem", "a LUKS encrypted volume", "a swap area", "an LVM
 * physical volume", "a GPT partition table", "a vfat filesystem", "a DOS
 * partition table or boot sector"), 0 when none of these signatures is
 * there, or -errno. Reads the first 68 KiB; writes nothing.
 */
int bs_fs_probe(struct bs_dev *dev, char *what, size_t len);

#define BS_FS_RDONLY (1u << 0)	/* open read-only; the image is not written */

/*
 * Open the filesystem on @dev. Read-write opens write the superblock as
 * not cleanly unmounted at once; bs_fs_close() marks it clean again.
 * Refuses features this layer does not know (-EOPNOTSUPP). A read-write
 * open first checks the image as the kernel does before mounting (state:
 * journal recovery, errors, not clean, orphans; superblock geometry and
 * counters; every group descriptor's checksum, bitmap and inode table
 * locations and free counts; each metadata block in use in the block
 * bitmap; the root a directory) and refuses a damaged one with -EUCLEAN,
 * "DEV: filesystem needs checking (run e2fsck): REASON", having written
 * nothing. A read-only open never writes; it records the reason in
 * bs_fs_info().damage and goes on, unless the superblock's block count
 * does not fit the device or its geometry cannot be read safely (then
 * -EUCLEAN with the same line, as the kernel refuses to mount it).
 * Claims @dev until bs_fs_close(): exclusively when read-write ("fs ext4
 * (read-write)"), shared read when read-only; -EBUSY naming the holder.
 */
int bs_fs_open(struct bs_dev *dev, unsigned flags, struct bs_fs **out);
/*
 * Write everything back, mark clean, flush the device, free. @fs is freed
 * even when an error is returned (the image then stays "not clean").
 */
int bs_fs_close(struct bs_fs *fs);

struct bs_dev *bs_fs_dev(const struct bs_fs *fs);
uint32_t bs_fs_block_size(const struct bs_fs *fs);

/* The filesystem as a whole, for `blkstack fs stat DEV`. */
struct bs_fs_info {
	uint32_t block_size;
	uint64_t blocks, free_blocks;
	uint32_t inodes, free_inodes;
	uint32_t journal_blocks;	/* 0: no journal */
	bool clean;			/* as found at open */
	char damage[160];		/* why e2fsck is needed; "" if not */
	char label[17];
	char uuid[37];
};
int bs_fs_info(struct bs_fs *fs, struct bs_fs_info *info);

struct bs_fs_stat {
	uint32_t ino;
	uint32_t mode;		/* S_IFREG | 0644 ... */
	uint32_t nlink;
	uint32_t uid, gid;
	uint64_t size;
	uint64_t blocks;	/* 512-byte units allocated, as st_blocks */
	int64_t atime, mtime, ctime;	/* seconds */
	uint32_t atime_ns, mtime_ns, ctime_ns;	/* and nanoseconds */
	uint32_t generation;
	uint32_t rdev_major, rdev_minor;	/* device nodes */
};

/*
 * Lookup: @path absolute; -ENOENT, -ENOTDIR on a file in the middle or
 * before a trailing '/' ("/d/f/"). The path calls below follow the same
 * rule: a trailing '/' names a directory (bs_fs_create: -EISDIR).
 */
int bs_fs_lookup(struct bs_fs *fs, const char *path, uint32_t *ino);
/* One component @name in directory @dir. */
int bs_fs_lookup_at(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t *ino);
int bs_fs_stat(struct bs_fs *fs, uint32_t ino, struct bs_fs_stat *st);
/*
 * True for the filesystem's reserved inodes (1 .. first_ino - 1 but the
 * root: the journal, the resize inode, ...): stat works on them, but
 * they are no file a client may be given or name by number.
 */
bool bs_fs_ino_reserved(struct bs_fs *fs, uint32_t ino);

/* Create a regular file (-EEXIST if the name exists). @mode: permissions. */
int bs_fs_create(struct bs_fs *fs, const char *path, uint32_t mode,
		 uint32_t *ino);
int bs_fs_create_at(struct bs_fs *fs, uint32_t dir, const char *name,
		    uint32_t mode, uint32_t *ino);
int bs_fs_mkdir(struct bs_fs *fs, const char *path, uint32_t mode,
		uint32_t *ino);
int bs_fs_mkdir_at(struct bs_fs *fs, uint32_t dir, const char *name,
		   uint32_t mode, uint32_t *ino);
/*
 * Remove a name: a file, a symbolic link or an empty directory
 * (-ENOTEMPTY otherwise). The inode and its blocks are freed when its
 * last name goes.
 */
int bs_fs_unlink(struct bs_fs *fs, const char *path);
int bs_fs_unlink_at(struct bs_fs *fs, uint32_t dir, const char *name);
/*
 * mknod(2): a character or block device (@mode S_IFCHR / S_IFBLK with
 * @major, @minor), a fifo (S_IFIFO) or a socket (S_IFSOCK); the number
 * is stored as the kernel's ext4 does (old 16-bit form when both fit in
 * 8 bits, else the new 32-bit form). -EINVAL for other types.
 */
int bs_fs_mknod_at(struct bs_fs *fs, uint32_t dir, const char *name,
		   uint32_t mode, uint32_t major, uint32_t minor, uint32_t *ino);
int bs_fs_mknod(struct bs_fs *fs, const char *path, uint32_t mode,
		uint32_t major, uint32_t minor, uint32_t *ino);

/*
 * symlink(2): a symbolic link @name -> @target (1 to 4095 bytes, less
 * than a block; -ENOENT when empty, -ENAMETOOLONG when longer). Targets
 * under 60 bytes are kept in the inode ("fast"), longer ones in one data
 * block, as the kernel's ext4 stores them. Mode 0777, owner 0:0.
 */
#define BS_FS_SYMLINK_MAX 4095
int bs_fs_symlink(struct bs_fs *fs, const char *path, const char *target,
		  uint32_t *ino);
int bs_fs_symlink_at(struct bs_fs *fs, uint32_t dir, const char *name,
		     const char *target, uint32_t *ino);
/*
 * readlink(2) of inode @ino: the target's bytes in @buf (no NUL added),
 * at most @cap of them, the whole length in *@len (> @cap: truncated, as
 * readlink(2) does). -EINVAL when @ino is not a symbolic link.
 */
int bs_fs_readlink(struct bs_fs *fs, uint32_t ino, char *buf, size_t cap,
		   size_t *len);
/*
 * link(2): a new name @name in @dir for inode @ino (links + 1, its ctime
 * moves). -EPERM for a directory, -EMLINK at 65000 links, -EEXIST.
 */
int bs_fs_link(struct bs_fs *fs, const char *from, const char *to);
int bs_fs_link_at(struct bs_fs *fs, uint32_t ino, uint32_t dir,
		  const char *name);

/* What bs_fs_setattr() changes (chmod, chown, utimensat). */
#define BS_FS_SET_MODE (1u << 0)	/* the 07777 bits; the type stays */
#define BS_FS_SET_UID (1u << 1)
#define BS_FS_SET_GID (1u << 2)
#define BS_FS_SET_ATIME (1u << 3)	/* to atime / atime_ns */
#define BS_FS_SET_MTIME (1u << 4)
#define BS_FS_SET_ATIME_NOW (1u << 5)	/* to the current time */
#define BS_FS_SET_MTIME_NOW (1u << 6)
struct bs_fs_setattr {
	uint32_t mask;
	uint32_t mode, uid, gid;
	int64_t atime, mtime;		/* seconds (1901 to 2446) */
	uint32_t atime_ns, mtime_ns;	/* < 1000000000 */
};
/*
 * Change what @sa->mask names, in one inode write, and set the ctime to
 * now (an empty mask changes nothing). A new owner or group of a non-directory
 * clears set-user-ID, and set-group-ID when group-executable, unless the
 * mode is set too (as chown(2)). -EOPNOTSUPP for a mode on a symbolic
 * link (as fchmodat(AT_SYMLINK_NOFOLLOW)), -EINVAL for nanoseconds out of
 * range or seconds ext4 cannot hold.
 */
int bs_fs_setattr(struct bs_fs *fs, uint32_t ino,
		  const struct bs_fs_setattr *sa);

/*
 * rename(2): replaces an existing target of the same kind (a directory
 * only when empty); -EISDIR / -ENOTDIR on a kind mismatch, -EINVAL when
 * moving a directory below itself.
 */
int bs_fs_rename(struct bs_fs *fs, const char *from, const char *to);
int bs_fs_rename_at(struct bs_fs *fs, uint32_t fdir, const char *fname,
		    uint32_t tdir, const char *tname);

/* Bytes read (short at EOF) or -errno; holes and unwritten extents read 0. */
int64_t bs_fs_read(struct bs_fs *fs, uint32_t ino, void *buf, uint64_t len,
		   uint64_t off);
/* Bytes written or -errno; allocates blocks, grows the size. */
int64_t bs_fs_write(struct bs_fs *fs, uint32_t ino, const void *buf,
		    uint64_t len, uint64_t off);
int bs_fs_truncate(struct bs_fs *fs, uint32_t ino, uint64_t size);
/*
 * The largest size regular file @ino may have (the kernel's s_maxbytes:
 * block-mapped files have a smaller limit); -EISDIR, -EINVAL (not a
 * regular file), -ENOENT.
 */
int bs_fs_max_file_size(struct bs_fs *fs, uint32_t ino, uint64_t *max);
/* Make data and all metadata durable (metadata written, device flushed). */
int bs_fs_fsync(struct bs_fs *fs, uint32_t ino);

/* Directory entries other than "." and ".."; return non-zero to stop. */
typedef int (*bs_fs_dirent_fn)(void *arg, const char *name, uint32_t ino,
			       uint32_t mode);
int bs_fs_readdir(struct bs_fs *fs, uint32_t dir, bs_fs_dirent_fn fn,
		  void *arg);

struct bs_fs_extent {
	uint64_t logical;	/* file block */
	uint64_t physical;	/* filesystem block */
	uint64_t len;		/* blocks */
	bool unwritten;		/* allocated, reads as zeroes */
};
/* Leaf extents in logical order; return non-zero to stop. */
typedef int (*bs_fs_extent_fn)(void *arg, const struct bs_fs_extent *ext);
int bs_fs_map(struct bs_fs *fs, uint32_t ino, bs_fs_extent_fn fn, void *arg);

/*
 * Extended attributes of inode @ino, as getxattr(2) and friends on the
 * kernel's ext4, stored where it stores them: in the inode's extra space
 * (large inodes) and one external xattr block, which the kernel may share
 * between inodes (a reference count; a change copies it, the last
 * reference frees it). Names are whole ("user.k"): user., trusted. and
 * security. may be set and removed (other prefixes -EOPNOTSUPP, "user."
 * alone -EINVAL, more than 255 bytes -ERANGE); get also reads
 * system.posix_acl_access / _default in the xattr ACL format. user.
 * names only on regular files and directories: -EPERM to set or remove,
 * -ENODATA to get on other inodes (as the kernel). No permission checks.
 *
 * A value must fit one block with its entry (4096-byte blocks: 4052
 * bytes less the name rounded up to 4); larger values would need the
 * ea_inode feature, which this layer does not support: -ENOSPC, as when
 * the inode and its block are full. Changes move the ctime.
 */
#define BS_FS_XATTR_NAME_MAX 255	/* a whole name, as XATTR_NAME_MAX */
#define BS_FS_XATTR_CREATE 1	/* -EEXIST when present (XATTR_CREATE) */
#define BS_FS_XATTR_REPLACE 2	/* -ENODATA when missing (XATTR_REPLACE) */
/*
 * The value of @name in @buf and its length in *@len; -ENODATA when
 * missing. @cap 0: only the length; a value over @cap: -ERANGE with *@len
 * set (as getxattr(2)).
 */
int bs_fs_getxattr(struct bs_fs *fs, uint32_t ino, const char *name,
		   void *buf, size_t cap, size_t *len);
/* @flags: 0, BS_FS_XATTR_CREATE or BS_FS_XATTR_REPLACE. */
int bs_fs_setxattr(struct bs_fs *fs, uint32_t ino, const char *name,
		   const void *val, size_t len, unsigned flags);
/*
 * Every name, each NUL-terminated, one after another in @buf (*@len
 * bytes); @cap 0 and -ERANGE as bs_fs_getxattr().
 */
int bs_fs_listxattr(struct bs_fs *fs, uint32_t ino, char *buf, size_t cap,
		    size_t *len);
/* -ENODATA when missing. */
int bs_fs_removexattr(struct bs_fs *fs, uint32_t ino, const char *name);
/* The largest value named @name that one xattr block holds. */
size_t bs_fs_xattr_value_max(struct bs_fs *fs, const char *name);

/*
 * fallocate(2) on a regular file, as the kernel's ext4 does it (mode bits
 * of <blkstack/zero.h>): bs_falloc_check() first, then
 *   0 / KEEP_SIZE           allocate holes as unwritten extents; 0 grows
 *                           the size to offset + len
 *   PUNCH_HOLE|KEEP_SIZE    free whole blocks, zero partial ones by writing
 *   ZERO_RANGE [|KEEP_SIZE] the range reads zero: whole blocks become
 *                           unwritten extents, partial ones are written
 *   WRITE_ZEROES            -EOPNOTSUPP unless bs_dev_write_zeroes_unmap();
 *                           the range becomes written extents of zeroes,
 *                           made by the device's unmap zeroing; no block
 *                           is marked written before its zeroes are
 *                           durable
 * COLLAPSE_RANGE, INSERT_RANGE and UNSHARE_RANGE: -EOPNOTSUPP.
 */
int bs_fs_fallocate(struct bs_fs *fs, uint32_t ino, int mode, int64_t offset,
		    int64_t len);

#endif
