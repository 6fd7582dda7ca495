/* SPDX-License-Identifier: MIT */
/*
 * File data: read, write, truncate, fsync and the extent map.
 *
 * Reads walk the extent tree themselves: holes and unwritten extents are
 * zeroes without touching the device, written runs are read in chunks of
 * at most FS_CHUNK bytes. Whole blocks are written the same way, run by
 * run (holes allocated unwritten first, marked written once the data is
 * durable); partial blocks at the edges go through libext2fs' file I/O,
 * which allocates and turns unwritten blocks written to into written ones.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>

#include "fs/internal.h"

#define FS_CHUNK (1u << 20) /* bytes read from the device per request */

int fs_map_run(struct bs_fs *fs, ext2_extent_handle_t h, blk64_t lblk,
	       blk64_t max, blk64_t *pblk, blk64_t *len, bool *uninit)
{
	struct ext2fs_extent ex;
	blk64_t end = lblk + max;
	errcode_t ret;

	*pblk = 0;
	*uninit = false;
	ret = ext2fs_extent_goto(h, lblk);
	if (!ret) {
		ret = ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &ex);
		if (ret)
			return fs_fail(fs, ret, "reading extents");
		if (lblk >= ex.e_lblk && lblk < ex.e_lblk + ex.e_len) {
			blk64_t e = ex.e_lblk + ex.e_len;
			*pblk = ex.e_pblk + (lblk - ex.e_lblk);
			*len = (e < end ? e : end) - lblk;
			*uninit = ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT;
			return 0;
		}
	} else if (ret != EXT2_ET_EXTENT_NOT_FOUND &&
		   ret != EXT2_ET_EXTENT_NO_NEXT &&
		   ret != EXT2_ET_NO_CURRENT_NODE) {
		return fs_fail(fs, ret, "reading extents");
	}
	/* a hole: it ends where the next extent starts */
	if (!ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &ex)) {
		if (ex.e_lblk > lblk) {
			if (ex.e_lblk < end)
				end = ex.e_lblk;
		} else if (!ext2fs_extent_get(h, EXT2_EXTENT_NEXT_LEAF, &ex) &&
			   ex.e_lblk > lblk && ex.e_lblk < end) {
			end = ex.e_lblk;
		}
	}
	*len = end - lblk;
	return 0;
}

/* The limits below are the kernel's (s_maxbytes, s_bitmap_maxbytes). */
static uint64_t blocks_limit(const struct bs_fs *fs)
{
	unsigned bits = (unsigned)fs->e2->super->s_log_block_size + 10;

	/* i_blocks: 48 bits of blocks with huge_file, else 32 of sectors */
	if (ext2fs_has_feature_huge_file(fs->e2->super))
		return ((uint64_t)1 << 48) - 1;
	return (((uint64_t)1 << 32) - 1) >> (bits - 9);
}

static uint64_t cap_bytes(uint64_t blocks, unsigned bits)
{
	if (blocks > (uint64_t)INT64_MAX >> bits)
		return (uint64_t)INT64_MAX;
	return blocks << bits;
}

uint64_t fs_max_bytes(const struct bs_fs *fs)
{
	unsigned bits = (unsigned)fs->e2->super->s_log_block_size + 10;
	uint64_t blocks = ((uint64_t)1 << 32) - 1; /* 32-bit ee_block */

	if (blocks > blocks_limit(fs))
		blocks = blocks_limit(fs);
	return cap_bytes(blocks, bits);
}

static uint64_t div_up(uint64_t a, uint64_t b)
{
	return (a + b - 1) / b;
}

/*
 * A block-mapped file: 12 direct blocks, then single, double and triple
 * indirect trees of p = blocksize / 4 pointers each, unless i_blocks
 * (which counts the indirect blocks too) runs out first; then the limit
 * is that count less the indirect blocks needed to map it.
 */
static uint64_t bitmap_max_bytes(const struct bs_fs *fs)
{
	unsigned bits = (unsigned)fs->e2->super->s_log_block_size + 10;
	uint64_t p = fs->e2->blocksize / 4, limit = blocks_limit(fs);
	uint64_t tree = EXT2_NDIR_BLOCKS + p + p * p + p * p * p;
	uint64_t meta = 1 + (1 + p) + (1 + p + p * p), rest, res;

	if (tree + meta <= limit) {
		res = tree;
	} else {
		res = limit;
		rest = limit - EXT2_NDIR_BLOCKS - p;
		meta = 1;
		if (rest < p * p) {
			meta += 1 + div_up(rest, p);
		} else {
			meta += 1 + p;
			rest -= p * p;
			meta += 1 + div_up(rest, p) + div_up(rest, p * p);
		}
		res -= meta;
	}
	/* logical block numbers are 32 bits here too */
	if (res > ((uint64_t)1 << 32) - 1)
		res = ((uint64_t)1 << 32) - 1;
	return cap_bytes(res, bits);
}

uint64_t fs_max_bytes_of(const struct bs_fs *fs,
			 const struct ext2_inode *inode)
{
	if (inode->i_flags & EXT4_EXTENTS_FL)
		return fs_max_bytes(fs);
	return bitmap_max_bytes(fs);
}

int fs_check_reg(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode)
{
	int err = fs_read_inode(fs, ino, inode);

	if (err)
		return err;
	if (LINUX_S_ISDIR(inode->i_mode))
		return fs_err(fs, -EISDIR, "inode %u is a directory", ino);
	if (!LINUX_S_ISREG(inode->i_mode))
		return fs_err(fs, -EINVAL, "inode %u is not a regular file",
			      ino);
	if (!inode->i_links_count)
		return fs_err(fs, -ENOENT, "inode %u was removed", ino);
	if (EXT2_I_SIZE(inode) > fs_max_bytes_of(fs, inode))
		return fs_err(fs, -EFBIG, "inode %u claims %llu bytes, past "
			      "the largest file size %" PRIu64 " (filesystem "
			      "needs checking, run e2fsck)", ino,
			      (unsigned long long)EXT2_I_SIZE(inode),
			      fs_max_bytes_of(fs, inode));
	return 0;
}

/* Read [off, off+n) of physical block run at @pblk (byte offset @inner). */
static int read_phys(struct bs_fs *fs, uint8_t *bounce, uint8_t *dst,
		     blk64_t pblk, uint64_t inner, uint64_t n)
{
	uint32_t bs = fs->e2->blocksize;

	while (n) {
		uint64_t first = inner / bs, skip = inner % bs;
		uint64_t nblk = (skip + n + bs - 1) / bs, take;
		errcode_t ret;

		if (nblk > FS_CHUNK / bs)
			nblk = FS_CHUNK / bs;
		ret = io_channel_read_blk64(fs->e2->io, pblk + first, (int)nblk,
					    bounce);
		if (ret)
			return fs_fail(fs, ret, "reading block %llu",
				      (unsigned long long)(pblk + first));
		take = nblk * bs - skip;
		if (take > n)
			take = n;
		memcpy(dst, bounce + skip, take);
		dst += take;
		inner += take;
		n -= take;
	}
	return 0;
}

int64_t bs_fs_read(struct bs_fs *fs, uint32_t ino, void *buf, uint64_t len,
		   uint64_t off)
{
	struct ext2_inode inode;
	ext2_extent_handle_t h = NULL;
	uint32_t bs = fs->e2->blocksize;
	uint8_t *bounce = NULL, *dst = buf;
	uint64_t size, done = 0;
	errcode_t ret;
	int err;

	if ((err = fs_check_reg(fs, ino, &inode)))
		return err;
	size = EXT2_I_SIZE(&inode);
	if (off >= size || !len)
		return 0;
	if (len > size - off)
		len = size - off;
	if (len > INT64_MAX)
		len = INT64_MAX;
	if (!(inode.i_flags & EXT4_EXTENTS_FL)) {
		/* block-mapped (ext2/3) files: libext2fs' file reader */
		ext2_file_t f;
		unsigned int got;

		ret = ext2fs_file_open2(fs->e2, ino, &inode, 0, &f);
		if (ret)
			return fs_fail(fs, ret, "opening inode %u", ino);
		ret = ext2fs_file_llseek(f, off, EXT2_SEEK_SET, NULL);
		while (!ret && done < len) {
			uint64_t n = len - done < FS_CHUNK ? len - done : FS_CHUNK;
			ret = ext2fs_file_read(f, dst + done, (unsigned)n, &got);
			if (!ret && !got)
				break;
			done += got;
		}
		ext2fs_file_close(f);
		if (ret)
			return fs_fail(fs, ret, "reading inode %u", ino);
		return (int64_t)done;
	}
	ret = ext2fs_get_memalign(FS_CHUNK, 4096, &bounce);
	if (ret)
		return fs_fail(fs, ret, "read buffer");
	ret = ext2fs_extent_open2(fs->e2, ino, &inode, &h);
	if (ret) {
		err = fs_fail(fs, ret, "reading the extents of inode %u", ino);
		goto out;
	}
	while (done < len) {
		uint64_t pos = off + done;
		blk64_t lblk = pos / bs, pblk, run;
		uint64_t inner = pos % bs, n;
		bool uninit;
		blk64_t want = (pos + (len - done) + bs - 1) / bs - lblk;

		err = fs_map_run(fs, h, lblk, want, &pblk, &run, &uninit);
		if (err)
			goto out;
		n = run * bs - inner;
		if (n > len - done)
			n = len - done;
		if (!pblk || uninit)
			memset(dst + done, 0, n);
		else if ((err = read_phys(fs, bounce, dst + done, pblk, inner, n)))
			goto out;
		done += n;
	}
	err = 0;
out:
	if (h)
		ext2fs_extent_free(h);
	ext2fs_free_mem(&bounce);
	return err ? err : (int64_t)done;
}

static int set_size_times(struct bs_fs *fs, uint32_t ino, uint64_t size,
			  bool grow_only)
{
	struct ext2_inode inode;
	errcode_t ret;
	int err;

	if ((err = fs_read_inode(fs, ino, &inode)))
		return err;
	if (!grow_only || size > EXT2_I_SIZE(&inode)) {
		ret = ext2fs_inode_size_set(fs->e2, &inode, size);
		if (ret)
			return fs_fail(fs, ret, "setting the size of inode %u",
				      ino);
	}
	return fs_write_inode_times(fs, ino, &inode, FS_MTIME | FS_CTIME, NULL);
}

/* Through libext2fs' file I/O: partial blocks, block by block. */
static int write_slow(struct bs_fs *fs, uint32_t ino, const uint8_t *src,
		      uint64_t len, uint64_t off, uint64_t *done)
{
	ext2_file_t f;
	errcode_t ret, ret2;

	*done = 0;
	ret = ext2fs_file_open2(fs->e2, ino, NULL, EXT2_FILE_WRITE, &f);
	if (ret)
		return fs_fail(fs, ret, "opening inode %u", ino);
	ret = ext2fs_file_llseek(f, off, EXT2_SEEK_SET, NULL);
	while (!ret && *done < len) {
		uint64_t n = len - *done < FS_CHUNK ? len - *done : FS_CHUNK;
		unsigned int wrote = 0;

		ret = ext2fs_file_write(f, src + *done, (unsigned)n, &wrote);
		*done += wrote;
		if (!ret && !wrote)
			ret = EXT2_ET_SHORT_WRITE;
	}
	ret2 = ext2fs_file_close(f);
	if (!ret)
		ret = ret2;
	if (ret)
		return fs_fail(fs, ret, "writing inode %u at %" PRIu64, ino,
			       off + *done);
	return 0;
}

/*
 * Whole blocks [lblk, lblk+n): holes are allocated as unwritten extents,
 * the data goes straight to the device one run at a time, and blocks that
 * were unwritten are marked written only after a device flush has made
 * their data durable, so a crash never shows stale bytes (the order
 * ext4's ordered mode keeps).
 */
static int write_blocks(struct bs_fs *fs, uint32_t ino, const uint8_t *src,
			blk64_t lblk, blk64_t n)
{
	uint32_t bs = fs->e2->blocksize;
	struct ext2_inode inode;
	ext2_extent_handle_t h;
	blk64_t cur = lblk, pblk, run;
	bool uninit, mark = false;
	errcode_t ret;
	int err;

	if ((err = fs_read_inode(fs, ino, &inode)) ||
	    (err = fs_alloc_unwritten(fs, ino, &inode, lblk, n)))
		return err;
	ret = ext2fs_extent_open2(fs->e2, ino, &inode, &h);
	if (ret)
		return fs_fail(fs, ret, "reading the extents of inode %u", ino);
	while (cur < lblk + n) {
		if ((err = fs_map_run(fs, h, cur, lblk + n - cur, &pblk, &run,
				      &uninit)))
			break;
		if (!pblk) {
			err = fs_err(fs, -EIO, "inode %u: block %llu unmapped "
				     "after allocation", ino,
				     (unsigned long long)cur);
			break;
		}
		fs_io_data(fs, true);
		ret = io_channel_write_blk64(fs->e2->io, pblk, (int)run,
					     src + (cur - lblk) * bs);
		fs_io_data(fs, false);
		if (ret) {
			err = fs_fail(fs, ret, "writing blocks %llu+%llu",
				      (unsigned long long)pblk,
				      (unsigned long long)run);
			break;
		}
		mark |= uninit;
		cur += run;
	}
	ext2fs_extent_free(h);
	if (!err && mark) {
		err = bs_flush_sync(fs->dev);
		if (err)
			fs_err(fs, err, "flushing data: %s", bs_last_error());
		else
			err = fs_mark_written(fs, ino, &inode, lblk, lblk + n);
	}
	if (!err)
		err = fs_write_inode(fs, ino, &inode);
	return err;
}

/*
 * After a failed write that reached past EOF: free the blocks of its range
 * past the new EOF (allocated unwritten for data that never came), as the
 * kernel truncates after a failed write. Errors are left to the op.
 */
static void trim_failed(struct bs_fs *fs, uint32_t ino, uint64_t end)
{
	struct ext2_inode inode;
	uint32_t bs = fs->e2->blocksize;
	blk64_t from, to;

	if (fs_op_repair(fs) || fs_read_inode(fs, ino, &inode))
		return;
	from = (EXT2_I_SIZE(&inode) + bs - 1) / bs;
	to = (end + bs - 1) / bs;
	if (to <= from)
		return;
	fs_punch(fs, ino, &inode, from, to - 1);
}

static int64_t do_write(struct bs_fs *fs, uint32_t ino, const void *buf,
			uint64_t len, uint64_t off, int *failed)
{
	struct ext2_inode inode;
	const uint8_t *src = buf;
	uint32_t bs;
	uint64_t done = 0, n, s, e;
	int err;

	if ((err = fs_check_rw(fs, "write")) ||
	    (err = fs_check_reg(fs, ino, &inode)))
		return err;
	if (!len)
		return 0;
	if (off > fs_max_bytes_of(fs, &inode) ||
	    len > fs_max_bytes_of(fs, &inode) - off)
		return fs_err(fs, -EFBIG, "write at %" PRIu64 "+%" PRIu64
			      " is past the largest file size (%" PRIu64 ")",
			      off, len, fs_max_bytes_of(fs, &inode));
	if (len > INT64_MAX)
		len = INT64_MAX;
	bs = fs->e2->blocksize;
	s = (off + bs - 1) / bs * bs;	/* the whole blocks inside */
	e = (off + len) / bs * bs;
	if (!(inode.i_flags & EXT4_EXTENTS_FL) || e <= s) {
		err = write_slow(fs, ino, src, len, off, &done);
		goto out;
	}
	if (s > off) {
		err = write_slow(fs, ino, src, s - off, off, &n);
		done += n;
		if (err)
			goto out;
	}
	while (done < e - off) {
		/* bounded runs: at most 32768 blocks per call */
		uint64_t chunk = e - off - done;

		if (chunk > (uint64_t)32768 * bs)
			chunk = (uint64_t)32768 * bs;
		err = write_blocks(fs, ino, src + done, (off + done) / bs,
				   chunk / bs);
		if (err)
			goto out;
		done += chunk;
	}
	if (done < len) {
		err = write_slow(fs, ino, src + done, len - done, off + done, &n);
		done += n;
	}
out:
	if (err) {
		/* what reached the file counts, as write(2) */
		char why[512];

		snprintf(why, sizeof(why), "%s", bs_last_error());
		*failed = err;
		if (done && set_size_times(fs, ino, off + done, true))
			return err;
		trim_failed(fs, ino, off + len);
		bs_error(err, "%s", why);
		return done ? (int64_t)done : err;
	}
	err = set_size_times(fs, ino, off + len, true);
	*failed = err;
	return err ? err : (int64_t)len;
}

int64_t bs_fs_write(struct bs_fs *fs, uint32_t ino, const void *buf,
		    uint64_t len, uint64_t off)
{
	struct fs_op op;
	int64_t n;
	int failed = 0, err;

	fs_op_begin(&op, fs);
	fs_op_note(fs, ino);
	n = do_write(fs, ino, buf, len, off, &failed);
	/* a short count is a failure for the op, not for the caller */
	err = fs_op_end(&op, n < 0 ? (int)n : failed);
	return n < 0 ? err : n;
}

int fs_zero_partial(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		    uint64_t off, uint64_t len)
{
	uint32_t bs = fs->e2->blocksize;
	ext2_extent_handle_t h;
	blk64_t pblk, run;
	bool uninit;
	uint8_t *blk = NULL;
	errcode_t ret;
	int err;

	if (!len)
		return 0;
	ret = ext2fs_extent_open2(fs->e2, ino, inode, &h);
	if (ret)
		return fs_fail(fs, ret, "reading the extents of inode %u", ino);
	err = fs_map_run(fs, h, off / bs, 1, &pblk, &run, &uninit);
	ext2fs_extent_free(h);
	if (err || !pblk || uninit)
		return err; /* reads zeroes already */
	ret = ext2fs_get_mem(bs, &blk);
	if (!ret)
		ret = io_channel_read_blk64(fs->e2->io, pblk, 1, blk);
	if (!ret) {
		memset(blk + off % bs, 0, len);
		fs_io_data(fs, true);
		ret = io_channel_write_blk64(fs->e2->io, pblk, 1, blk);
		fs_io_data(fs, false);
	}
	ext2fs_free_mem(&blk);
	if (ret)
		return fs_fail(fs, ret, "zeroing part of block %llu",
			      (unsigned long long)pblk);
	return 0;
}

static int do_truncate(struct bs_fs *fs, uint32_t ino, uint64_t size)
{
	struct ext2_inode inode;
	uint32_t bs = fs->e2->blocksize;
	uint64_t old;
	errcode_t ret;
	int err;

	if ((err = fs_check_rw(fs, "truncate")) ||
	    (err = fs_check_reg(fs, ino, &inode)))
		return err;
	if (size > fs_max_bytes_of(fs, &inode))
		return fs_err(fs, -EFBIG, "size %" PRIu64 " is past the largest "
			      "file size (%" PRIu64 ")", size,
			      fs_max_bytes_of(fs, &inode));
	old = EXT2_I_SIZE(&inode);
	if (size < old) {
		/* bytes past the new end must read zero if it grows again */
		if (size % bs &&
		    (err = fs_zero_partial(fs, ino, &inode, size,
					   bs - size % bs)))
			return err;
		ret = fs_punch(fs, ino, &inode, (size + bs - 1) / bs, ~0ULL);
		if (ret)
			return fs_fail(fs, ret, "freeing blocks past %" PRIu64,
				      size);
	}
	/* blocks kept past EOF by KEEP_SIZE stay, as in ext4 */
	ret = ext2fs_inode_size_set(fs->e2, &inode, size);
	if (ret)
		return fs_fail(fs, ret, "setting the size of inode %u", ino);
	return fs_write_inode_times(fs, ino, &inode, FS_MTIME | FS_CTIME, NULL);
}

int bs_fs_truncate(struct bs_fs *fs, uint32_t ino, uint64_t size)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_truncate(fs, ino, size));
}

int bs_fs_max_file_size(struct bs_fs *fs, uint32_t ino, uint64_t *max)
{
	struct ext2_inode inode;
	int err = fs_check_reg(fs, ino, &inode);

	if (!err)
		*max = fs_max_bytes_of(fs, &inode);
	return err;
}

int bs_fs_fsync(struct bs_fs *fs, uint32_t ino)
{
	/* no cache here: the metadata and the device flush are all there is */
	return fs_sync(fs);
}

int bs_fs_map(struct bs_fs *fs, uint32_t ino, bs_fs_extent_fn fn, void *arg)
{
	struct ext2_inode inode;
	struct ext2fs_extent ex;
	ext2_extent_handle_t h;
	struct bs_fs_extent e;
	errcode_t ret;
	int err, rc = 0;

	if ((err = fs_read_inode(fs, ino, &inode)))
		return err;
	if (!(inode.i_flags & EXT4_EXTENTS_FL))
		return fs_err(fs, -EOPNOTSUPP, "inode %u has no extent tree "
			      "(block-mapped file)", ino);
	ret = ext2fs_extent_open2(fs->e2, ino, &inode, &h);
	if (ret)
		return fs_fail(fs, ret, "reading the extents of inode %u", ino);
	ret = ext2fs_extent_get(h, EXT2_EXTENT_ROOT, &ex);
	while (!ret) {
		if ((ex.e_flags & EXT2_EXTENT_FLAGS_LEAF) && ex.e_len &&
		    !(ex.e_flags & EXT2_EXTENT_FLAGS_SECOND_VISIT)) {
			e.logical = ex.e_lblk;
			e.physical = ex.e_pblk;
			e.len = ex.e_len;
			e.unwritten = ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT;
			rc = fn(arg, &e);
			if (rc)
				break;
		}
		ret = ext2fs_extent_get(h, EXT2_EXTENT_NEXT, &ex);
	}
	ext2fs_extent_free(h);
	if (rc)
		return rc;
	if (ret && ret != EXT2_ET_EXTENT_NO_NEXT &&
	    ret != EXT2_ET_NO_CURRENT_NODE)
		return fs_fail(fs, ret, "reading the extents of inode %u", ino);
	return 0;
}
