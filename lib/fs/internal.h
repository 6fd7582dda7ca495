/* SPDX-License-Identifier: MIT */
/* The filesystem layer's internals (not a public API). */
#ifndef BLKSTACK_FS_INTERNAL_H
#define BLKSTACK_FS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <ext2fs/ext2fs.h>

struct bs_dev;

/* The io_manager of io_blkstack.c. */
extern io_manager bs_fs_io_manager;

/*
 * Make @dev openable by bs_fs_io_manager under a new name ("blkstack:N",
 * written to @name); bs_fs_io_unregister() forgets it.
 */
int bs_fs_io_register(struct bs_dev *dev, char *name, size_t len);
void bs_fs_io_unregister(const char *name);

struct fs_op;

struct bs_fs {
	struct bs_dev *dev;
	ext2_filsys e2;
	char ioname[32];
	bool rw;
	bool was_clean;		/* s_state at open */
	char damage[160];	/* why e2fsck is needed ("" = it is not) */
	/*
	 * A metadata write (or flush) failed, or a failed operation could
	 * not be put right: nothing more is written, close leaves the
	 * superblock "not clean" (op.c).
	 */
	bool broken;
	struct fs_op *op;	/* the modifying operation under way */
	struct bs_claim *claim;	/* on dev, open to close (fs.c) */
};

/* fs/check.c: is the image safe to write? */
struct fs_check {
	ext2fs_block_bitmap meta; /* sbs, descriptors, bitmaps, tables */
	char why[144];		/* the reason, when a check returns 1 */
};
/*
 * The superblock's geometry (block and group sizes, inode counts and
 * sizes...), which libext2fs must be able to trust even to read: 0 sane,
 * 1 needs e2fsck (reason in @c->why).
 */
int fs_check_super(struct bs_fs *fs, struct fs_check *c);
/*
 * The superblock's counters and the group descriptors, before the
 * bitmaps are read: 0 sane, 1 needs e2fsck, or a negative errno.
 */
int fs_check_desc(struct bs_fs *fs, struct fs_check *c);
/* The bitmaps (read) against the metadata found by fs_check_desc(). */
int fs_check_bitmaps(struct bs_fs *fs, struct fs_check *c);
void fs_check_free(struct fs_check *c);

/*
 * ext4's largest size of a file with extents for this block size and
 * features (the kernel's s_maxbytes): 2^32 - 1 blocks, less without
 * huge_file (i_blocks then counts 2^32 - 1 sectors).
 */
uint64_t fs_max_bytes(const struct bs_fs *fs);
/* The same for @inode: block-mapped files have their own limit. */
uint64_t fs_max_bytes_of(const struct bs_fs *fs,
			 const struct ext2_inode *inode);

/* Once per process: libext2fs' error table, its com_err() output off. */
void fs_lib_init(void);
/* libext2fs' message for @code. */
const char *fs_strerror(errcode_t code);

/*
 * Failure handling of modifying operations (op.c). Each public call that
 * changes the filesystem runs between fs_op_begin() and fs_op_end(); the
 * helpers that change an inode's blocks name it with fs_op_note(). The
 * block ranges handed out during the op are logged (libext2fs' new_range
 * and alloc-stats hooks), and each is written to disk (bitmap, descriptor)
 * before libext2fs links it. When the call fails, fs_op_end() puts the
 * noted inodes right (i_blocks from their extent trees, logged blocks left
 * in use and unreferenced freed, referenced blocks that are free taken
 * back) or, when a metadata write failed, marks the filesystem broken. It
 * returns @err with the message kept ("run e2fsck -f" added when broken).
 */
#define FS_OP_INOS 4
struct fs_alloc_run {
	blk64_t blk;
	blk64_t num;
};
struct fs_op {
	struct bs_fs *fs;
	uint32_t ino[FS_OP_INOS];
	unsigned nino;
	bool too_many;		/* more inodes than FS_OP_INOS, or log full */
	unsigned long meta_errors;
	struct fs_alloc_run *log;	/* ranges handed out during the op */
	size_t n, cap;
	void (*old_stats)(ext2_filsys, blk64_t, int);
	void (*old_range)(ext2_filsys, blk64_t, blk_t, int);
	errcode_t (*old_new_range)(ext2_filsys, int, blk64_t, blk64_t,
				   blk64_t *, blk64_t *);
};
void fs_op_begin(struct fs_op *op, struct bs_fs *fs);
void fs_op_note(struct bs_fs *fs, uint32_t ino);
int fs_op_end(struct fs_op *op, int err);
/*
 * Put the noted inodes right now, in the middle of a failed op, before a
 * cleanup step that relies on i_blocks (the op goes on). Does
 * nothing once broken; else 0 or a negative errno (then broken).
 */
int fs_op_repair(struct bs_fs *fs);
/*
 * Write the inode bitmap and descriptor of @ino's group now (an inode just
 * allocated, before its name is linked), as op.c does for blocks.
 */
void fs_op_persist_inode(struct bs_fs *fs, uint32_t ino);
/* Mark @fs broken (a metadata write or flush failed). */
void fs_set_broken(struct bs_fs *fs);

/*
 * io_blkstack.c: failed writes, flushes, discards and zeroouts of the
 * channel, not counting those made while fs_io_data(fs, true) (file data,
 * whose failure leaves the metadata as it was).
 */
unsigned long fs_io_meta_errors(struct bs_fs *fs);
void fs_io_data(struct bs_fs *fs, bool on);

/* A libext2fs error code as a negative errno. */
int fs_errno(errcode_t code);
/*
 * bs_error() "DEV: ext4: WHAT: libext2fs message" for @code; returns the
 * errno. @fmt describes what was being done.
 */
int fs_fail(struct bs_fs *fs, errcode_t code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* bs_error() "DEV: ext4: message" with @err. */
int fs_err(struct bs_fs *fs, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Free libext2fs' static zeroing buffer (after anything that zeroes). */
void fs_free_zero_buf(void);

int fs_read_inode(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode);
int fs_write_inode(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode);

/*
 * Times. ext4 keeps each of atime, mtime and ctime as 32 seconds in the
 * base inode and, in a large inode (extra_isize >= 12 bytes, mkfs makes
 * 32), an extra word: nanoseconds << 2 | two epoch bits (seconds >> 32,
 * so times after 2038 fit). Every "now" of this layer goes through these,
 * so the nanoseconds always belong to the seconds beside them.
 */
#define FS_ATIME (1u << 0)
#define FS_MTIME (1u << 1)
#define FS_CTIME (1u << 2)
void fs_now(struct timespec *ts);
/*
 * Write @inode (the base 128 bytes) with the times in @which set to @ts
 * (NULL: now), seconds in @inode too and nanoseconds in the extra words.
 */
int fs_write_inode_times(struct bs_fs *fs, uint32_t ino,
			 struct ext2_inode *inode, unsigned which,
			 const struct timespec *ts);
/* The same with a time each (NULL: kept). */
int fs_write_inode_ts(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		      const struct timespec *a, const struct timespec *m,
		      const struct timespec *c);
/*
 * Write a new inode: @inode's base bytes, the rest of the on-disk inode
 * zeroed, extra_isize set, atime/mtime/ctime and crtime = @ts.
 */
int fs_write_new_inode(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		       const struct timespec *ts);
/* Read @ino's times (seconds with the epoch bits, nanoseconds). */
void fs_inode_times(struct bs_fs *fs, const struct ext2_inode_large *li,
		    struct timespec *atime, struct timespec *mtime,
		    struct timespec *ctime);
/*
 * Read inode @ino of a regular file: -EISDIR, -EINVAL, -ENOENT else;
 * -EFBIG when its size is past fs_max_bytes_of() (a damaged inode).
 */
int fs_check_reg(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode);
/* Refuse writes on a read-only open: -EROFS with a reason. */
int fs_check_rw(struct bs_fs *fs, const char *what);
/* Write bitmaps, group descriptors and superblock, then flush the device. */
int fs_sync(struct bs_fs *fs);

/*
 * The mapping of file block @lblk: *@pblk (0 for a hole), *@len blocks
 * (at most @max) with the same state, *@uninit for unwritten extents.
 */
int fs_map_run(struct bs_fs *fs, ext2_extent_handle_t h, blk64_t lblk,
	       blk64_t max, blk64_t *pblk, blk64_t *len, bool *uninit);
/* Fill holes in file blocks [@lblk, @lblk+@n) with unwritten extents. */
int fs_alloc_unwritten(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		       blk64_t lblk, blk64_t n);
/*
 * ext2fs_punch() of file blocks [@start, @end] (inclusive; ~0ULL: to the
 * end), working around libext2fs' refusal to free the filesystem's last
 * block; notes @ino in the op.
 */
errcode_t fs_punch(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		   blk64_t start, blk64_t end);
/*
 * Mark the unwritten extents over file blocks [@start, @end) written,
 * splitting those that stick out of the range. Only for blocks whose
 * contents are already on the device.
 */
int fs_mark_written(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		    blk64_t start, blk64_t end);
/*
 * Make bytes [@off, @off+@len) of one block of file @ino read as zeroes by
 * writing, where the block is mapped and written (holes and unwritten
 * blocks read zeroes already).
 */
int fs_zero_partial(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		    uint64_t off, uint64_t len);

#endif
