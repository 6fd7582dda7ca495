/* SPDX-License-Identifier: MIT */
/*
 * The filesystem layer: making, opening and closing ext4 on a blkstack
 * device through libext2fs, and the error plumbing of lib/fs/.
 *
 * mkfs follows what mke2fs does for "-t ext4" (features, flex_bg of 16,
 * 256-byte inodes, reserved inodes written, root and a 16 KiB lost+found,
 * a journal of the default size), with every inode table and the journal
 * zeroed through the device's zeroout so that a thin device stays thin and
 * no stale bytes of the device ever look like metadata.
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>

#include "core/random.h"
#include "fs/internal.h"

/* ---- errors --------------------------------------------------------------- */

static pthread_once_t et_once = PTHREAD_ONCE_INIT;

/*
 * libext2fs reports some oddities of damaged images (a bitmap asked to
 * mark block 2^64 - 1, say) through com_err(), which prints to stderr. A
 * library prints nothing: those lines are dropped, and what failed comes
 * back as this layer's error. (Process-wide: no other user of libext2fs
 * lives in blkstack.)
 */
static void quiet_com_err(const char *whoami, long code, const char *fmt,
			  va_list ap)
{
	(void)whoami;
	(void)code;
	(void)fmt;
	(void)ap;
}

static void et_init(void)
{
	initialize_ext2_error_table();
	set_com_err_hook(quiet_com_err);
}

void fs_lib_init(void)
{
	pthread_once(&et_once, et_init);
}

int fs_errno(errcode_t code)
{
	if (!code)
		return 0;
	/* errno values pass through libext2fs unchanged */
	if (code > 0 && code < 256)
		return -(int)code;
	switch (code) {
	case EXT2_ET_FILE_NOT_FOUND:
		return -ENOENT;
	case EXT2_ET_NO_DIRECTORY:
		return -ENOTDIR;
	case EXT2_ET_DIR_EXISTS:
	case EXT2_ET_FILE_EXISTS:
		return -EEXIST;
	case EXT2_ET_DIR_NO_SPACE:
	case EXT2_ET_BLOCK_ALLOC_FAIL:
	case EXT2_ET_INODE_ALLOC_FAIL:
	case EXT2_ET_DIR_NO_SPACE_FOR_CSUM:
	case EXT2_ET_RES_GDT_BLOCKS:
	case EXT2_ET_TOOSMALL:
		return -ENOSPC;
	case EXT2_ET_NO_MEMORY:
		return -ENOMEM;
	case EXT2_ET_RO_FILSYS:
	case EXT2_ET_FILE_RO:
		return -EROFS;
	case EXT2_ET_FILE_TOO_BIG:
	case EXT2_ET_EXTENT_INVALID_LENGTH:
		return -EFBIG;
	case EXT2_ET_UNSUPP_FEATURE:
	case EXT2_ET_RO_UNSUPP_FEATURE:
	case EXT2_ET_UNIMPLEMENTED:
	case EXT2_ET_OP_NOT_SUPPORTED:
	case EXT2_ET_INLINE_DATA_CANT_ITERATE:
		return -EOPNOTSUPP;
	case EXT2_ET_INVALID_ARGUMENT:
	case EXT2_ET_BAD_INODE_NUM:
		return -EINVAL;
	case EXT2_ET_SHORT_READ:
	case EXT2_ET_SHORT_WRITE:
	case EXT2_ET_LLSEEK_FAILED:
		return -EIO;
	case EXT2_ET_BAD_MAGIC:
	case EXT2_ET_SB_CSUM_INVALID:
	case EXT2_ET_BLOCK_BITMAP_CSUM_INVALID:
	case EXT2_ET_INODE_BITMAP_CSUM_INVALID:
	case EXT2_ET_INODE_CSUM_INVALID:
	case EXT2_ET_EXTENT_CSUM_INVALID:
	case EXT2_ET_DIR_CSUM_INVALID:
	case EXT2_ET_BAD_DESC_SIZE:
	case EXT2_ET_DIR_CORRUPTED:
	case EXT2_ET_CORRUPT_SUPERBLOCK:
	case EXT2_ET_EXTENT_HEADER_BAD:
	case EXT2_ET_EXTENT_INDEX_BAD:
	case EXT2_ET_GDESC_BAD_BLOCK_MAP:
	case EXT2_ET_GDESC_BAD_INODE_MAP:
	case EXT2_ET_GDESC_BAD_INODE_TABLE:
	case EXT2_ET_UNEXPECTED_BLOCK_SIZE:
		return -EUCLEAN;
	default:
		return -EIO;
	}
}

const char *fs_strerror(errcode_t code)
{
	fs_lib_init();
	return error_message(code);
}

static int fs_vfail(struct bs_fs *fs, int err, errcode_t code,
		    const char *fmt, va_list ap)
{
	char what[256];

	vsnprintf(what, sizeof(what), fmt, ap);
	if (code)
		return bs_error(err, "%s: ext4: %s: %s", fs->dev->name, what,
				fs_strerror(code));
	return bs_error(err, "%s: ext4: %s", fs->dev->name, what);
}

int fs_fail(struct bs_fs *fs, errcode_t code, const char *fmt, ...)
{
	va_list ap;
	int err = fs_errno(code);

	va_start(ap, fmt);
	fs_vfail(fs, err, code, fmt, ap);
	va_end(ap);
	return err;
}

int fs_err(struct bs_fs *fs, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fs_vfail(fs, err, 0, fmt, ap);
	va_end(ap);
	return err;
}

void fs_free_zero_buf(void)
{
	/*
	 * ext2fs_zero_blocks2() keeps a static buffer when it has to write
	 * zeroes itself; a NULL filesystem frees it (else ASan sees a leak).
	 */
	ext2fs_zero_blocks2(NULL, 0, 0, NULL, NULL);
}

int fs_read_inode(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode)
{
	errcode_t ret;

	if (!ino || ino > fs->e2->super->s_inodes_count)
		return fs_err(fs, -EINVAL, "inode %u: no such inode number", ino);
	ret = ext2fs_read_inode(fs->e2, ino, inode);
	if (ret)
		return fs_fail(fs, ret, "reading inode %u", ino);
	return 0;
}

int fs_write_inode(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode)
{
	errcode_t ret = ext2fs_write_inode(fs->e2, ino, inode);

	if (ret)
		return fs_fail(fs, ret, "writing inode %u", ino);
	return 0;
}

void fs_now(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
}

/* The extra word (nanoseconds << 2 | epoch) of @ts; the base is its low 32 */
static __u32 time_extra(const struct timespec *ts)
{
	int64_t epoch = ((int64_t)ts->tv_sec - (int32_t)ts->tv_sec) >> 32;

	return (__u32)(((uint32_t)ts->tv_nsec << 2) | ((uint32_t)epoch & 3));
}

static struct timespec time_of(__u32 base, __u32 extra, bool has_extra)
{
	struct timespec ts = { .tv_sec = (int32_t)base };

	if (has_extra) {
		/* as the kernel decodes it: epoch bits added to the signed base */
		ts.tv_sec += (int64_t)(extra & 3) << 32;
		ts.tv_nsec = extra >> 2;
		if (ts.tv_nsec >= 1000000000)
			ts.tv_nsec = 0;
	}
	return ts;
}

/* Does the large inode have room for the extra word ending at @end? */
static bool fits(const struct ext2_inode_large *li, size_t isize, size_t end)
{
	return isize > EXT2_GOOD_OLD_INODE_SIZE &&
	       EXT2_GOOD_OLD_INODE_SIZE + (size_t)li->i_extra_isize >= end &&
	       end <= isize;
}

#define XEND(f) (offsetof(struct ext2_inode_large, f) + sizeof(__u32))

void fs_inode_times(struct bs_fs *fs, const struct ext2_inode_large *li,
		    struct timespec *atime, struct timespec *mtime,
		    struct timespec *ctime)
{
	size_t isize = EXT2_INODE_SIZE(fs->e2->super);

	*atime = time_of(li->i_atime, li->i_atime_extra,
			 fits(li, isize, XEND(i_atime_extra)));
	*mtime = time_of(li->i_mtime, li->i_mtime_extra,
			 fits(li, isize, XEND(i_mtime_extra)));
	*ctime = time_of(li->i_ctime, li->i_ctime_extra,
			 fits(li, isize, XEND(i_ctime_extra)));
}

static void set_one(struct ext2_inode_large *li, size_t isize, __u32 *base,
		    __u32 *extra, size_t end, const struct timespec *ts)
{
	*base = (__u32)ts->tv_sec;
	if (fits(li, isize, end))
		*extra = time_extra(ts);
}

static void set_times3(struct bs_fs *fs, struct ext2_inode_large *li,
		       const struct timespec *a, const struct timespec *m,
		       const struct timespec *c)
{
	size_t isize = EXT2_INODE_SIZE(fs->e2->super);

	if (a)
		set_one(li, isize, &li->i_atime, &li->i_atime_extra,
			XEND(i_atime_extra), a);
	if (m)
		set_one(li, isize, &li->i_mtime, &li->i_mtime_extra,
			XEND(i_mtime_extra), m);
	if (c)
		set_one(li, isize, &li->i_ctime, &li->i_ctime_extra,
			XEND(i_ctime_extra), c);
}

int fs_write_inode_ts(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		      const struct timespec *a, const struct timespec *m,
		      const struct timespec *c)
{
	struct ext2_inode_large li;
	errcode_t ret;

	memset(&li, 0, sizeof(li));
	ret = ext2fs_read_inode_full(fs->e2, ino, (struct ext2_inode *)&li,
				     sizeof(li));
	if (ret)
		return fs_fail(fs, ret, "reading inode %u", ino);
	memcpy(&li, inode, sizeof(*inode));
	set_times3(fs, &li, a, m, c);
	/* the caller's copy carries the new seconds on */
	inode->i_atime = li.i_atime;
	inode->i_mtime = li.i_mtime;
	inode->i_ctime = li.i_ctime;
	/* a shorter buffer: libext2fs keeps the rest of the on-disk inode */
	ret = ext2fs_write_inode_full(fs->e2, ino, (struct ext2_inode *)&li,
				      sizeof(li));
	if (ret)
		return fs_fail(fs, ret, "writing inode %u", ino);
	return 0;
}

int fs_write_inode_times(struct bs_fs *fs, uint32_t ino,
			 struct ext2_inode *inode, unsigned which,
			 const struct timespec *ts)
{
	struct timespec now;

	if (!ts) {
		fs_now(&now);
		ts = &now;
	}
	return fs_write_inode_ts(fs, ino, inode,
				 which & FS_ATIME ? ts : NULL,
				 which & FS_MTIME ? ts : NULL,
				 which & FS_CTIME ? ts : NULL);
}

int fs_write_new_inode(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		       const struct timespec *ts)
{
	size_t isize = EXT2_INODE_SIZE(fs->e2->super);
	struct ext2_inode_large *li;
	errcode_t ret;

	if (isize <= EXT2_GOOD_OLD_INODE_SIZE) {
		inode->i_atime = inode->i_mtime = inode->i_ctime =
			(__u32)ts->tv_sec;
		ret = ext2fs_write_new_inode(fs->e2, ino, inode);
		goto out;
	}
	ret = ext2fs_get_memzero(isize, &li);
	if (ret)
		return fs_fail(fs, ret, "writing inode %u", ino);
	memcpy(li, inode, sizeof(*inode));
	li->i_extra_isize = sizeof(struct ext2_inode_large) -
			    EXT2_GOOD_OLD_INODE_SIZE;
	if ((size_t)EXT2_GOOD_OLD_INODE_SIZE + li->i_extra_isize > isize)
		li->i_extra_isize = (__u16)(isize - EXT2_GOOD_OLD_INODE_SIZE);
	if (fs->e2->super->s_want_extra_isize > li->i_extra_isize &&
	    (size_t)EXT2_GOOD_OLD_INODE_SIZE +
			    fs->e2->super->s_want_extra_isize <= isize)
		li->i_extra_isize = fs->e2->super->s_want_extra_isize;
	set_times3(fs, li, ts, ts, ts);
	if (fits(li, isize, XEND(i_crtime_extra))) {
		li->i_crtime = (__u32)ts->tv_sec;
		li->i_crtime_extra = time_extra(ts);
	}
	inode->i_atime = inode->i_mtime = inode->i_ctime = li->i_ctime;
	ret = ext2fs_write_inode_full(fs->e2, ino, (struct ext2_inode *)li,
				      (int)isize);
	ext2fs_free_mem(&li);
out:
	if (ret)
		return fs_fail(fs, ret, "writing inode %u", ino);
	return 0;
}

int fs_check_rw(struct bs_fs *fs, const char *what)
{
	if (fs->broken)
		return fs_err(fs, -EIO, "%s: an earlier metadata write failed: "
			      "the filesystem is left not clean, run e2fsck -f",
			      what);
	if (fs->rw)
		return 0;
	return fs_err(fs, -EROFS, "%s: the filesystem is open read-only", what);
}

int fs_sync(struct bs_fs *fs)
{
	errcode_t ret;
	int err;

	if (!fs->rw)
		return 0;
	if (fs->broken)
		return fs_check_rw(fs, "sync");
	ret = ext2fs_flush(fs->e2);
	if (ret) {
		/* part of the bitmaps, descriptors, superblock may be out */
		fs_set_broken(fs);
		return fs_fail(fs, ret, "writing metadata (the filesystem is "
			       "left not clean, run e2fsck -f)");
	}
	err = bs_flush_sync(fs->dev);
	if (err) {
		fs_set_broken(fs);
		return fs_err(fs, err, "flushing the device: %s (the "
			      "filesystem is left not clean, run e2fsck -f)",
			      bs_last_error());
	}
	return 0;
}

struct bs_dev *bs_fs_dev(const struct bs_fs *fs)
{
	return fs->dev;
}

uint32_t bs_fs_block_size(const struct bs_fs *fs)
{
	return fs->e2->blocksize;
}

/* ---- mkfs ----------------------------------------------------------------- */

static void make_uuid(uint8_t uuid[16])
{
	if (bs_random_bytes(uuid, 16)) {
		/* no entropy source: time and address, still unique enough */
		uint64_t t = (uint64_t)time(NULL) ^ (uint64_t)(uintptr_t)uuid;
		memcpy(uuid, &t, 8);
		memcpy(uuid + 8, &t, 8);
	}
	uuid[6] = (uuid[6] & 0x0f) | 0x40; /* version 4: random */
	uuid[8] = (uuid[8] & 0x3f) | 0x80; /* RFC 4122 variant */
}

static int log2_of(uint32_t v)
{
	int n = 0;

	while (v > 1) {
		v >>= 1;
		n++;
	}
	return n;
}

/* Write zeroed inodes 1 .. first_ino-1 with valid checksums, as mke2fs. */
static errcode_t write_reserved_inodes(ext2_filsys e2)
{
	struct ext2_inode_large *inode;
	size_t size = EXT2_INODE_SIZE(e2->super);
	errcode_t ret;
	ext2_ino_t ino;

	ret = ext2fs_get_memzero(size, &inode);
	if (ret)
		return ret;
	for (ino = 1; ino < EXT2_FIRST_INO(e2->super); ino++) {
		memset(inode, 0, size);
		if (size > EXT2_GOOD_OLD_INODE_SIZE)
			inode->i_extra_isize = sizeof(struct ext2_inode_large) -
					       EXT2_GOOD_OLD_INODE_SIZE;
		ret = ext2fs_write_inode_full(e2, ino, (struct ext2_inode *)inode,
					      (int)size);
		if (ret)
			break;
	}
	ext2fs_free_mem(&inode);
	return ret;
}

static errcode_t make_lost_found(ext2_filsys e2)
{
	const char *name = "lost+found";
	struct ext2_inode inode;
	ext2_ino_t ino;
	errcode_t ret;
	int i;

	ret = ext2fs_mkdir(e2, EXT2_ROOT_INO, 0, name);
	if (ret)
		return ret;
	ret = ext2fs_lookup(e2, EXT2_ROOT_INO, name, (int)strlen(name), NULL,
			    &ino);
	if (ret)
		return ret;
	/* e2fsck wants room in lost+found without allocating: 16 KiB */
	for (i = 1; i < EXT2_NDIR_BLOCKS; i++) {
		ret = ext2fs_read_inode(e2, ino, &inode);
		if (ret)
			return ret;
		if (EXT2_I_SIZE(&inode) >= 16384 &&
		    EXT2_I_SIZE(&inode) >= 2 * e2->blocksize)
			break;
		ret = ext2fs_expand_dir(e2, ino);
		if (ret)
			return ret;
	}
	return 0;
}

/* The bad-block inode, empty but marked in use as mke2fs leaves it. */
static errcode_t make_bad_block_inode(ext2_filsys e2)
{
	ext2fs_mark_inode_bitmap2(e2->inode_map, EXT2_BAD_INO);
	ext2fs_inode_alloc_stats2(e2, EXT2_BAD_INO, +1, 0);
	return ext2fs_update_bb_inode(e2, NULL);
}

static int mkfs_claimed(struct bs_dev *dev, const struct bs_fs_mkfs_opts *opts)
{
	struct bs_fs_mkfs_opts o = { 0 };
	struct ext2_super_block param;
	struct ext2fs_journal_params jparams;
	struct bs_fs fsb = { .dev = dev };
	struct bs_limits lim;
	ext2_filsys e2 = NULL;
	uint64_t blocks, inodes;
	const char *step = "initializing";
	errcode_t ret = 0;
	dgrp_t g;
	ext2_ino_t ino;
	int err;

	fs_lib_init();
	if (opts)
		o = *opts;
	if (!o.block_size)
		o.block_size = 4096;
	if (!o.inode_ratio)
		o.inode_ratio = 16384;
	if (o.block_size != 1024 && o.block_size != 2048 && o.block_size != 4096)
		return bs_error(-EINVAL, "%s: ext4: block size %u: use 1024, "
				"2048 or 4096", dev->name, o.block_size);
	bs_dev_limits_copy(dev, &lim);	/* off the main loop: a copy */
	if (o.block_size < lim.logical_block_size)
		return bs_error(-EINVAL, "%s: ext4: block size %u is below the "
				"device's logical block size %u", dev->name,
				o.block_size, lim.logical_block_size);
	if (o.inode_ratio < o.block_size || o.inode_ratio > (64u << 20))
		return bs_error(-EINVAL, "%s: ext4: bytes per inode %u: use "
				"%u to 64M", dev->name, o.inode_ratio,
				o.block_size);
	if (o.label && strlen(o.label) > 16)
		return bs_error(-EINVAL, "%s: ext4: label '%s' is longer than "
				"16 bytes", dev->name, o.label);
	if (dev->readonly)
		return bs_error(-EROFS, "%s: ext4: mkfs: device is read-only",
				dev->name);
	blocks = dev->size / o.block_size;
	if (blocks < 2048)
		return bs_error(-ENOSPC, "%s: ext4: device too small for ext4 "
				"with a journal (%" PRIu64 " bytes; at least "
				"%u needed)", dev->name, dev->size,
				2048 * o.block_size);
	if (blocks > ((uint64_t)1 << 48))
		return bs_error(-EFBIG, "%s: ext4: device too large (%" PRIu64
				" blocks)", dev->name, blocks);
	inodes = dev->size / o.inode_ratio;
	if (inodes > UINT32_MAX - 1024)
		inodes = UINT32_MAX - 1024;
	if (inodes < 64)
		inodes = 64;

	err = bs_fs_io_register(dev, fsb.ioname, sizeof(fsb.ioname));
	if (err)
		return err;

	memset(&param, 0, sizeof(param));
	ext2fs_blocks_count_set(&param, blocks);
	param.s_log_block_size = (uint32_t)(log2_of(o.block_size) - 10);
	param.s_rev_level = EXT2_DYNAMIC_REV;
	param.s_inodes_count = (uint32_t)inodes;
	param.s_inode_size = 256;
	param.s_desc_size = EXT2_MIN_DESC_SIZE_64BIT;
	param.s_log_groups_per_flex = 4;
	param.s_min_extra_isize = sizeof(struct ext2_inode_large) -
				  EXT2_GOOD_OLD_INODE_SIZE;
	param.s_want_extra_isize = param.s_min_extra_isize;
	ext2fs_r_blocks_count_set(&param, blocks * 5 / 100);
	param.s_feature_compat = EXT3_FEATURE_COMPAT_HAS_JOURNAL |
				 EXT2_FEATURE_COMPAT_EXT_ATTR |
				 EXT2_FEATURE_COMPAT_DIR_INDEX;
	param.s_feature_incompat = EXT2_FEATURE_INCOMPAT_FILETYPE |
				   EXT3_FEATURE_INCOMPAT_EXTENTS |
				   EXT4_FEATURE_INCOMPAT_64BIT |
				   EXT4_FEATURE_INCOMPAT_FLEX_BG;
	param.s_feature_ro_compat = EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER |
				    EXT2_FEATURE_RO_COMPAT_LARGE_FILE |
				    EXT4_FEATURE_RO_COMPAT_HUGE_FILE |
				    EXT4_FEATURE_RO_COMPAT_DIR_NLINK |
				    EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE |
				    EXT4_FEATURE_RO_COMPAT_METADATA_CSUM;
	/* the journal is added below, once the tables exist */
	param.s_feature_compat &= ~EXT3_FEATURE_COMPAT_HAS_JOURNAL;

	ret = ext2fs_initialize(fsb.ioname, EXT2_FLAG_64BITS, &param,
				bs_fs_io_manager, &e2);
	if (ret)
		goto fail;
	fsb.e2 = e2;

	step = "setting up the superblock";
	make_uuid(e2->super->s_uuid);
	make_uuid((uint8_t *)e2->super->s_hash_seed);
	e2->super->s_def_hash_version = EXT2_HASH_HALF_MD4;
	/* the hash of names with high-bit bytes follows char's signedness */
	if ((char)0xff < 0)
		e2->super->s_flags |= EXT2_FLAGS_SIGNED_HASH;
	else
		e2->super->s_flags |= EXT2_FLAGS_UNSIGNED_HASH;
	e2->super->s_max_mnt_count = (__u16)-1;
	e2->super->s_checkinterval = 0;
	e2->super->s_checksum_type = EXT2_CRC32C_CHKSUM;
	if (o.label)
		strncpy((char *)e2->super->s_volume_name, o.label,
			sizeof(e2->super->s_volume_name));
	/* every inode checksum depends on the UUID: seed before writing */
	ext2fs_init_csum_seed(e2);

	step = "allocating group tables";
	ret = ext2fs_allocate_tables(e2);
	if (ret)
		goto fail;

	step = "zeroing inode tables";
	for (g = 0; g < e2->group_desc_count; g++) {
		ret = ext2fs_zero_blocks2(e2, ext2fs_inode_table_loc(e2, g),
					  (int)e2->inode_blocks_per_group,
					  NULL, NULL);
		if (ret)
			goto fail;
		ext2fs_bg_flags_set(e2, g, EXT2_BG_INODE_ZEROED);
		ext2fs_group_desc_csum_set(e2, g);
	}

	step = "writing reserved inodes";
	ret = write_reserved_inodes(e2);
	if (ret)
		goto fail;
	step = "creating the root directory";
	ret = ext2fs_mkdir(e2, EXT2_ROOT_INO, EXT2_ROOT_INO, NULL);
	if (ret)
		goto fail;
	step = "creating lost+found";
	ret = make_lost_found(e2);
	if (ret)
		goto fail;
	for (ino = EXT2_ROOT_INO + 1; ino < EXT2_FIRST_INO(e2->super); ino++)
		ext2fs_inode_alloc_stats2(e2, ino, +1, 0);
	step = "creating the bad-block inode";
	ret = make_bad_block_inode(e2);
	if (ret)
		goto fail;

	step = "creating the journal";
	ext2fs_get_journal_params(&jparams, e2);
	if (o.journal_blocks) {
		jparams.num_journal_blocks = o.journal_blocks;
		jparams.num_fc_blocks = 0;
	}
	if (jparams.num_journal_blocks) {
		ret = ext2fs_add_journal_inode3(e2, &jparams, ~0ULL, 0);
		if (ret)
			goto fail;
	}

	step = "writing the filesystem";
	e2->super->s_state = EXT2_VALID_FS;
	ext2fs_mark_super_dirty(e2);
	ret = ext2fs_flush(e2);
	if (ret)
		goto fail;
	fs_free_zero_buf();
	ret = ext2fs_close_free(&e2);
	if (ret)
		goto fail;
	bs_fs_io_unregister(fsb.ioname);
	err = bs_flush_sync(dev);
	if (err)
		return bs_error(err, "%s: ext4: mkfs: flushing the device: %s",
				dev->name, bs_last_error());
	return 0;

fail:
	err = fs_fail(&fsb, ret, "mkfs: %s", step);
	fs_free_zero_buf();
	if (e2)
		ext2fs_free(e2);
	bs_fs_io_unregister(fsb.ioname);
	return err;
}

/* ---- open / close --------------------------------------------------------- */

/* What this layer can write safely; anything else opens read-only only. */
#define FS_INCOMPAT_RW                                                        \
	(EXT2_FEATURE_INCOMPAT_FILETYPE | EXT3_FEATURE_INCOMPAT_EXTENTS |     \
	 EXT4_FEATURE_INCOMPAT_64BIT | EXT4_FEATURE_INCOMPAT_FLEX_BG |       \
	 EXT2_FEATURE_INCOMPAT_META_BG | EXT4_FEATURE_INCOMPAT_CSUM_SEED |   \
	 EXT4_FEATURE_INCOMPAT_LARGEDIR)
#define FS_RO_COMPAT_RW                                                       \
	(EXT2_FEATURE_RO_COMPAT_SPARSE_SUPER |                                \
	 EXT2_FEATURE_RO_COMPAT_LARGE_FILE | EXT4_FEATURE_RO_COMPAT_HUGE_FILE | \
	 EXT4_FEATURE_RO_COMPAT_GDT_CSUM | EXT4_FEATURE_RO_COMPAT_DIR_NLINK |  \
	 EXT4_FEATURE_RO_COMPAT_EXTRA_ISIZE |                                 \
	 EXT4_FEATURE_RO_COMPAT_METADATA_CSUM)
/* Readable: the read path handles extents and block maps, not inline data. */
#define FS_INCOMPAT_RO                                                        \
	(FS_INCOMPAT_RW | EXT3_FEATURE_INCOMPAT_RECOVER |                     \
	 EXT4_FEATURE_INCOMPAT_MMP | EXT4_FEATURE_INCOMPAT_EA_INODE |         \
	 EXT4_FEATURE_INCOMPAT_DIRDATA)

static int check_features(struct bs_fs *fs, bool rw)
{
	struct ext2_super_block *sb = fs->e2->super;
	uint32_t bad;

	bad = sb->s_feature_incompat & ~(rw ? FS_INCOMPAT_RW : FS_INCOMPAT_RO);
	if (rw)
		bad &= ~EXT3_FEATURE_INCOMPAT_RECOVER; /* a state: see below */
	if (bad)
		return fs_err(fs, -EOPNOTSUPP, "incompatible features 0x%x not "
			      "supported%s", bad, rw ? " for writing (open "
			      "read-only)" : "");
	bad = sb->s_feature_ro_compat & ~FS_RO_COMPAT_RW &
	      ~EXT4_FEATURE_RO_COMPAT_ORPHAN_PRESENT;
	if (rw && bad)
		return fs_err(fs, -EOPNOTSUPP, "read-only-compatible features "
			      "0x%x not supported for writing (open read-only)",
			      bad);
	if (rw && !ext2fs_has_feature_extents(sb))
		return fs_err(fs, -EOPNOTSUPP, "no extents feature: this layer "
			      "writes ext4 with extents only (open read-only)");
	if (EXT2FS_CLUSTER_RATIO(fs->e2) > 1)
		return fs_err(fs, -EOPNOTSUPP, "bigalloc is not supported");
	return 0;
}

/*
 * States only e2fsck (or the kernel's journal replay and orphan cleanup)
 * can resolve: 1 with the reason in fs->damage, else 0.
 */
static int check_state(struct bs_fs *fs)
{
	struct ext2_super_block *sb = fs->e2->super;
	const char *why = NULL;

	if (ext2fs_has_feature_journal_needs_recovery(sb))
		why = "the journal needs recovery";
	else if (sb->s_state & EXT2_ERROR_FS)
		why = "errors recorded in the superblock";
	else if (!(sb->s_state & EXT2_VALID_FS))
		why = "not cleanly unmounted";
	else if (sb->s_last_orphan)
		why = "orphan inodes to be freed";
	else if (ext2fs_has_feature_orphan_present(sb))
		why = "the orphan file lists inodes to be freed";
	if (!why)
		return 0;
	snprintf(fs->damage, sizeof(fs->damage), "%s", why);
	return 1;
}

/*
 * The image needs e2fsck for the reason in fs->damage: -EUCLEAN for a
 * read-write open; read-only opens go on (they never write).
 */
static int needs_check(struct bs_fs *fs, bool rw)
{
	if (!rw)
		return 0;
	return bs_error(-EUCLEAN, "%s: filesystem needs checking (run "
			"e2fsck): %s", fs->dev->name, fs->damage);
}

/*
 * The checks the kernel makes before mounting, before anything is
 * written: state, superblock, group descriptors (fs/check.c), the bitmaps
 * against the metadata, the root. A read-only open only records what it
 * found, for bs_fs_info(), except a superblock geometry that libext2fs
 * cannot even read safely (refused as for read-write).
 */
static int validate(struct bs_fs *fs, bool rw)
{
	struct fs_check c = { 0 };
	errcode_t ret;
	int rc;

	if (check_state(fs) && (rc = needs_check(fs, rw)))
		return rc;
	/* a geometry libext2fs cannot read safely: refused read-only too */
	if (fs_check_super(fs, &c)) {
		snprintf(fs->damage, sizeof(fs->damage), "%s", c.why);
		return needs_check(fs, true);
	}
	rc = fs_check_desc(fs, &c);
	if (rc < 0)
		goto out;
	if (rc > 0) {
		if (!fs->damage[0])
			snprintf(fs->damage, sizeof(fs->damage), "%s", c.why);
		if ((rc = needs_check(fs, rw)))
			goto out;
	}
	ret = ext2fs_read_bitmaps(fs->e2);
	if (ret) {
		rc = fs_errno(ret);
		if (rw && rc == -EUCLEAN) {
			snprintf(fs->damage, sizeof(fs->damage), "reading the "
				 "allocation bitmaps: %s", fs_strerror(ret));
			rc = needs_check(fs, rw);
		} else {
			rc = fs_fail(fs, ret, "reading the allocation bitmaps");
		}
		goto out;
	}
	if (!c.why[0]) {
		rc = fs_check_bitmaps(fs, &c);
		if (rc < 0)
			goto out;
		if (rc > 0 && !fs->damage[0])
			snprintf(fs->damage, sizeof(fs->damage), "%s", c.why);
		rc = rc > 0 ? needs_check(fs, rw) : 0;
	}
out:
	fs_check_free(&c);
	return rc;
}

/*
 * Before libext2fs sizes anything from it: the block count of the
 * superblock must fit the device (the kernel's first geometry check);
 * else ext2fs_open2() allocates descriptors, and later bitmaps, for
 * whatever count a damaged superblock claims. 1: reason in fs->damage.
 */
static int check_size(struct bs_fs *fs)
{
	struct ext2_super_block sb;
	uint8_t buf[4096];
	uint64_t blocks;
	uint32_t log;

	if (fs->dev->size < sizeof(buf) ||
	    bs_read_sync(fs->dev, buf, sizeof(buf), 0))
		return 0; /* ext2fs_open2() says what is wrong */
	memcpy(&sb, buf + SUPERBLOCK_OFFSET, sizeof(sb));
	log = le32toh(sb.s_log_block_size);
	if (le16toh(sb.s_magic) != EXT2_SUPER_MAGIC ||
	    log > EXT2_MAX_BLOCK_LOG_SIZE - EXT2_MIN_BLOCK_LOG_SIZE)
		return 0;
	blocks = le32toh(sb.s_blocks_count);
	if (le32toh(sb.s_feature_incompat) & EXT4_FEATURE_INCOMPAT_64BIT)
		blocks |= (uint64_t)le32toh(sb.s_blocks_count_hi) << 32;
	if (blocks <= fs->dev->size >> (log + EXT2_MIN_BLOCK_LOG_SIZE))
		return 0;
	snprintf(fs->damage, sizeof(fs->damage), "the superblock says %"
		 PRIu64 " blocks of %u bytes, the device holds %" PRIu64,
		 blocks, 1024u << log,
		 fs->dev->size >> (log + EXT2_MIN_BLOCK_LOG_SIZE));
	return 1;
}

static int open_claimed(struct bs_dev *dev, unsigned flags, struct bs_fs **out)
{
	bool rw = !(flags & BS_FS_RDONLY);
	struct bs_fs *fs;
	errcode_t ret;
	int err;

	if (flags & ~BS_FS_RDONLY)
		return bs_error(-EINVAL, "%s: ext4: open: unknown flags 0x%x",
				dev->name, flags);
	fs_lib_init();
	if (rw && dev->readonly)
		return bs_error(-EROFS, "%s: ext4: open: device is read-only "
				"(open the filesystem read-only)", dev->name);
	fs = calloc(1, sizeof(*fs));
	if (!fs)
		return bs_error(-ENOMEM, "%s: ext4: open: out of memory",
				dev->name);
	fs->dev = dev;
	if (check_size(fs)) {
		err = needs_check(fs, true);
		goto out_free;
	}
	err = bs_fs_io_register(dev, fs->ioname, sizeof(fs->ioname));
	if (err)
		goto out_free;
	ret = ext2fs_open2(fs->ioname, NULL,
			   EXT2_FLAG_64BITS | (rw ? EXT2_FLAG_RW : 0),
			   0, 0, bs_fs_io_manager, &fs->e2);
	if (ret) {
		fs->e2 = NULL;
		if (ret == EXT2_ET_BAD_MAGIC)
			err = fs_err(fs, -EINVAL, "no ext2/3/4 filesystem on the "
				     "device (make one with `blkstack fs mkfs`)");
		else if (rw && fs_errno(ret) == -EUCLEAN)
			err = bs_error(-EUCLEAN, "%s: filesystem needs checking "
				       "(run e2fsck): %s", dev->name,
				       fs_strerror(ret));
		else
			err = fs_fail(fs, ret, "open");
		goto out_unreg;
	}
	if ((err = check_features(fs, rw)) || (err = validate(fs, rw)))
		goto out_close;
	fs->rw = rw;
	fs->was_clean = fs->e2->super->s_state & EXT2_VALID_FS;
	if (rw) {
		/* "not clean" on disk before the first change */
		fs->e2->super->s_state &= ~EXT2_VALID_FS;
		fs->e2->super->s_mnt_count++;
		fs->e2->super->s_mtime = (__u32)time(NULL);
		ext2fs_mark_super_dirty(fs->e2);
		err = fs_sync(fs);
		if (err) {
			fs->rw = false;
			goto out_close;
		}
	}
	*out = fs;
	return 0;

out_close:
	ext2fs_free(fs->e2);
out_unreg:
	bs_fs_io_unregister(fs->ioname);
out_free:
	free(fs);
	return err;
}

static int close_free(struct bs_fs *fs)
{
	errcode_t ret = 0;
	int err = 0;

	if (!fs)
		return 0;
	if (fs->rw && fs->broken) {
		/* as after a crash: the superblock stays "not clean" */
		err = fs_check_rw(fs, "close");
	} else if (fs->rw) {
		/* everything durable while still "not clean", then clean */
		err = fs_sync(fs);
		if (!err) {
			fs->e2->super->s_state |= EXT2_VALID_FS;
			ext2fs_mark_super_dirty(fs->e2);
		}
	}
	fs_free_zero_buf();
	if (err) {
		ext2fs_free(fs->e2);
	} else {
		ret = ext2fs_close_free(&fs->e2);
		if (ret)
			err = fs_fail(fs, ret, "close: writing the superblock");
		if (ret && fs->e2)
			ext2fs_free(fs->e2);
	}
	if (!err && fs->rw) {
		err = bs_flush_sync(fs->dev);
		if (err)
			fs_err(fs, err, "close: flushing the device: %s",
			       bs_last_error());
	}
	bs_fs_io_unregister(fs->ioname);
	free(fs);
	return err;
}

/*
 * Claims (docs/core.md): mkfs and a read-write open take the device
 * exclusively (nobody serves or changes it meanwhile), a read-only open
 * shares it with readers and writers. Held from open to close.
 */
int bs_fs_mkfs(struct bs_dev *dev, const struct bs_fs_mkfs_opts *opts)
{
	struct bs_claim *claim;
	int err;

	err = bs_dev_claim(dev, BS_CLAIM_EXCL, "fs mkfs", &claim);
	if (err)
		return err;
	err = mkfs_claimed(dev, opts);
	bs_claim_release(claim);
	return err;
}

int bs_fs_open(struct bs_dev *dev, unsigned flags, struct bs_fs **out)
{
	bool rw = !(flags & BS_FS_RDONLY);
	struct bs_claim *claim;
	int err;

	err = bs_dev_claim(dev, rw ? BS_CLAIM_EXCL : BS_CLAIM_READ,
			   rw ? "fs ext4 (read-write)" : "fs ext4 (read-only)",
			   &claim);
	if (err)
		return err;
	err = open_claimed(dev, flags, out);
	if (err)
		bs_claim_release(claim);
	else
		(*out)->claim = claim;
	return err;
}

int bs_fs_close(struct bs_fs *fs)
{
	struct bs_claim *claim = fs ? fs->claim : NULL;
	int err = close_free(fs);

	bs_claim_release(claim);
	return err;
}

int bs_fs_info(struct bs_fs *fs, struct bs_fs_info *info)
{
	struct ext2_super_block *sb = fs->e2->super;
	const uint8_t *u = sb->s_uuid;

	memset(info, 0, sizeof(*info));
	info->block_size = fs->e2->blocksize;
	info->blocks = ext2fs_blocks_count(sb);
	info->free_blocks = ext2fs_free_blocks_count(sb);
	info->inodes = sb->s_inodes_count;
	info->free_inodes = sb->s_free_inodes_count;
	info->clean = fs->was_clean;
	snprintf(info->damage, sizeof(info->damage), "%s", fs->damage);
	if (ext2fs_has_feature_journal(sb) && sb->s_journal_inum) {
		struct ext2_inode inode;

		if (!ext2fs_read_inode(fs->e2, sb->s_journal_inum, &inode))
			info->journal_blocks =
				(uint32_t)(EXT2_I_SIZE(&inode) /
					   fs->e2->blocksize);
	}
	memcpy(info->label, sb->s_volume_name, 16);
	info->label[16] = '\0';
	snprintf(info->uuid, sizeof(info->uuid),
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
		 "%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		 u[10], u[11], u[12], u[13], u[14], u[15]);
	return 0;
}
