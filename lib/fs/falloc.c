/* SPDX-License-Identifier: MIT */
/*
 * fallocate(2) on files, with the semantics of the kernel's ext4:
 *
 *   0, KEEP_SIZE          holes in the range become unwritten extents
 *                         (covering blocks of partial edges included);
 *                         0 grows the size to the end of the range.
 *   PUNCH_HOLE|KEEP_SIZE  whole blocks are freed, partial edge blocks are
 *                         zeroed by writing; clipped at EOF (to the end of
 *                         the block holding it, as ext4).
 *   ZERO_RANGE [|KEEP..]  partial edges zeroed by writing, whole blocks
 *                         freed and allocated again unwritten (reads zero).
 *   WRITE_ZEROES          ZERO_RANGE's steps, then the whole blocks are
 *                         zeroed by the device (may-unmap zeroout) and
 *                         turned into written extents: later overwrites
 *                         need no unwritten-to-written conversion.
 *
 * WRITE_ZEROES ordering, the rule of the seed's ext4 patch: the extents
 * are unwritten and that metadata is durable (ext2fs_flush + device
 * flush) before the device zeroes them; the zeroes are durable (device
 * flush) before any extent is marked written. A crash at any point leaves
 * the range reading zeroes: unwritten extents read zero, written ones
 * were zeroed and flushed first.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/fs.h>
#include <blkstack/zero.h>

#include "fs/internal.h"

int fs_alloc_unwritten(struct bs_fs *fs, uint32_t ino,
			   struct ext2_inode *inode, blk64_t lblk, blk64_t n)
{
	errcode_t ret;

	if (!n)
		return 0;
	fs_op_note(fs, ino);
	ret = ext2fs_fallocate(fs->e2, EXT2_FALLOCATE_FORCE_UNINIT, ino, inode,
			       ~0ULL, lblk, n);
	if (ret)
		return fs_fail(fs, ret, "allocating blocks %llu+%llu of inode "
			       "%u", (unsigned long long)lblk,
			       (unsigned long long)n, ino);
	return 0;
}

/*
 * libext2fs before 1.47.4 refuses to free a run of blocks that ends at the
 * filesystem's last block (EXT2_ET_BAD_BLOCK_NUM from its punch), so a file
 * holding that block could never be truncated or removed. When file blocks
 * [start, end] map it, the extent holding it is shortened by that block (or
 * dropped) first, then the block is freed: the tree never points at a free
 * block.
 */
static errcode_t unmap_last_block(ext2_filsys e2, uint32_t ino,
				  struct ext2_inode *inode, blk64_t start,
				  blk64_t end)
{
	blk64_t last = ext2fs_blocks_count(e2->super) - 1;
	ext2_extent_handle_t h;
	struct ext2fs_extent ex;
	errcode_t ret;
	bool found = false;

	if (!(inode->i_flags & EXT4_EXTENTS_FL))
		return 0;
	ret = ext2fs_extent_open2(e2, ino, inode, &h);
	if (ret)
		return ret;
	ret = ext2fs_extent_get(h, EXT2_EXTENT_ROOT, &ex);
	while (!ret) {
		if ((ex.e_flags & EXT2_EXTENT_FLAGS_LEAF) && ex.e_len &&
		    !(ex.e_flags & EXT2_EXTENT_FLAGS_SECOND_VISIT) &&
		    ex.e_pblk + ex.e_len - 1 == last) {
			found = true;
			break;
		}
		ret = ext2fs_extent_get(h, EXT2_EXTENT_NEXT, &ex);
	}
	if (!found) {
		ext2fs_extent_free(h);
		return ret == EXT2_ET_EXTENT_NO_NEXT ||
		       ret == EXT2_ET_NO_CURRENT_NODE ? 0 : ret;
	}
	ret = 0;
	if (ex.e_lblk + ex.e_len - 1 < start || ex.e_lblk + ex.e_len - 1 > end)
		goto out; /* not being freed */
	if (ex.e_len == 1) {
		ret = ext2fs_extent_delete(h, 0);
	} else {
		ex.e_len--;
		ret = ext2fs_extent_replace(h, 0, &ex);
	}
	if (!ret)
		ret = ext2fs_extent_fix_parents(h);
	if (ret)
		goto out;
	ext2fs_block_alloc_stats2(e2, last, -1);
	ret = ext2fs_iblk_sub_blocks(e2, inode, 1);
out:
	ext2fs_extent_free(h);
	return ret;
}

errcode_t fs_punch(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		   blk64_t start, blk64_t end)
{
	errcode_t ret;

	fs_op_note(fs, ino);
	ret = unmap_last_block(fs->e2, ino, inode, start, end);
	if (!ret)
		ret = ext2fs_punch(fs->e2, ino, inode, NULL, start, end);
	return ret;
}

/* Free file blocks [lblk, lblk+n). */
static int punch(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		 blk64_t lblk, blk64_t n)
{
	errcode_t ret;

	if (!n)
		return 0;
	ret = fs_punch(fs, ino, inode, lblk, lblk + n - 1);
	if (ret)
		return fs_fail(fs, ret, "freeing blocks %llu+%llu of inode %u",
			       (unsigned long long)lblk, (unsigned long long)n,
			       ino);
	return 0;
}

/* Zero the parts of [off, end) that do not cover whole blocks, by writing. */
static int zero_edges(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		      uint64_t off, uint64_t end)
{
	uint32_t bs = fs->e2->blocksize;
	uint64_t head_end = (off / bs + 1) * bs;
	int err;

	if (off % bs) {
		if ((err = fs_zero_partial(fs, ino, inode, off,
					   (end < head_end ? end : head_end) -
						   off)))
			return err;
	}
	if (end % bs && (end / bs > off / bs || !(off % bs)))
		return fs_zero_partial(fs, ino, inode, end / bs * bs, end % bs);
	return 0;
}

/* The new size; the times to stamp in *@which (ctime; mtime when data changes) */
static int set_size(struct bs_fs *fs, struct ext2_inode *inode, uint64_t end,
		    int mode, unsigned *which)
{
	errcode_t ret;

	if (!(mode & BS_FALLOC_KEEP_SIZE) && end > EXT2_I_SIZE(inode)) {
		ret = ext2fs_inode_size_set(fs->e2, inode, end);
		if (ret)
			return fs_fail(fs, ret, "setting the size to %" PRIu64,
				       end);
	}
	*which = FS_CTIME;
	if (mode & (BS_FALLOC_PUNCH_HOLE | BS_FALLOC_ZERO_RANGE |
		    BS_FALLOC_WRITE_ZEROES))
		*which |= FS_MTIME;
	return 0;
}

/*
 * Zero the physical blocks under file blocks [start, end) through the
 * device, with may-unmap zeroout, contiguous runs in one request each.
 */
static int zero_mapped(struct bs_fs *fs, uint32_t ino,
		       struct ext2_inode *inode, blk64_t start, blk64_t end)
{
	uint64_t bs = fs->e2->blocksize;
	ext2_extent_handle_t h;
	blk64_t lblk = start, pblk, run, zstart = 0, zlen = 0;
	bool uninit;
	errcode_t ret;
	int err = 0;

	ret = ext2fs_extent_open2(fs->e2, ino, inode, &h);
	if (ret)
		return fs_fail(fs, ret, "reading the extents of inode %u", ino);
	while (lblk < end) {
		if ((err = fs_map_run(fs, h, lblk, end - lblk, &pblk, &run,
				      &uninit)))
			break;
		if (pblk && zlen && zstart + zlen == pblk) {
			zlen += run;
		} else if (pblk) {
			if (zlen && (err = bs_zeroout_sync(fs->dev, zstart * bs,
							   zlen * bs, 0, NULL,
							   NULL)))
				break;
			zstart = pblk;
			zlen = run;
		}
		lblk += run;
	}
	if (!err && zlen)
		err = bs_zeroout_sync(fs->dev, zstart * bs, zlen * bs, 0, NULL,
				      NULL);
	ext2fs_extent_free(h);
	if (err && *bs_last_error() == '\0')
		fs_err(fs, err, "write zeroes: zeroing the device failed");
	else if (err)
		fs_err(fs, err, "write zeroes: zeroing the device: %s",
		       bs_last_error());
	return err;
}

/*
 * Merge the written extent starting at @lblk into a written extent just
 * before it, logically and physically contiguous, so that sequential
 * writes end up in long extents. The left one grows first, then the right
 * one goes: a crash in between leaves two extents mapping the same blocks
 * the same way (e2fsck repairs it), never a hole where data was.
 */
static errcode_t merge_left(ext2_extent_handle_t h, blk64_t lblk)
{
	struct ext2fs_extent cur, prev;
	errcode_t ret;

	if ((ret = ext2fs_extent_goto(h, lblk)) ||
	    (ret = ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &cur)))
		return ret;
	if (cur.e_lblk != lblk || (cur.e_flags & EXT2_EXTENT_FLAGS_UNINIT))
		return 0;
	if (ext2fs_extent_get(h, EXT2_EXTENT_PREV_LEAF, &prev))
		return 0; /* the first extent */
	if (prev.e_lblk + prev.e_len != cur.e_lblk ||
	    prev.e_pblk + prev.e_len != cur.e_pblk ||
	    (prev.e_flags & EXT2_EXTENT_FLAGS_UNINIT) ||
	    (uint64_t)prev.e_len + cur.e_len > EXT_INIT_MAX_LEN)
		return 0;
	prev.e_len += cur.e_len;
	prev.e_flags = 0;
	if ((ret = ext2fs_extent_replace(h, 0, &prev)) ||
	    (ret = ext2fs_extent_get(h, EXT2_EXTENT_NEXT_LEAF, &cur)))
		return ret;
	if (cur.e_lblk != lblk)
		return EXT2_ET_EXTENT_NOT_FOUND; /* the tree moved under us */
	if ((ret = ext2fs_extent_delete(h, 0)))
		return ret;
	return ext2fs_extent_fix_parents(h);
}

int fs_mark_written(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		    blk64_t start, blk64_t end)
{
	ext2_extent_handle_t h;
	struct ext2fs_extent ex, piece;
	blk64_t lblk = start;
	errcode_t ret;
	int err = 0;

	fs_op_note(fs, ino);
	ret = ext2fs_extent_open2(fs->e2, ino, inode, &h);
	if (ret)
		return fs_fail(fs, ret, "reading the extents of inode %u", ino);
	while (lblk < end) {
		blk64_t ex_end, b;

		ret = ext2fs_extent_goto(h, lblk);
		if (ret == EXT2_ET_EXTENT_NOT_FOUND) {
			blk64_t pblk, run;
			bool uninit;

			/* a hole cannot be here, but skip it if it is */
			if ((err = fs_map_run(fs, h, lblk, end - lblk, &pblk,
					      &run, &uninit)))
				break;
			lblk += run;
			continue;
		}
		if (!ret)
			ret = ext2fs_extent_get(h, EXT2_EXTENT_CURRENT, &ex);
		if (ret)
			goto fail;
		ex_end = ex.e_lblk + ex.e_len;
		b = end < ex_end ? end : ex_end;
		if (!(ex.e_flags & EXT2_EXTENT_FLAGS_UNINIT)) {
			lblk = b;
			continue;
		}
		if (lblk > ex.e_lblk) {
			/* keep the part before the range unwritten */
			piece = ex;
			piece.e_len = (__u32)(lblk - ex.e_lblk);
			piece.e_flags = EXT2_EXTENT_FLAGS_UNINIT;
			if ((ret = ext2fs_extent_replace(h, 0, &piece)))
				goto fail;
			piece.e_lblk = lblk;
			piece.e_pblk = ex.e_pblk + (lblk - ex.e_lblk);
			piece.e_len = (__u32)(b - lblk);
			piece.e_flags = 0;
			if ((ret = ext2fs_extent_insert(h, EXT2_EXTENT_INSERT_AFTER,
							&piece)) ||
			    (ret = ext2fs_extent_fix_parents(h)))
				goto fail;
		} else {
			piece = ex;
			piece.e_len = (__u32)(b - lblk);
			piece.e_flags = 0;
			if ((ret = ext2fs_extent_replace(h, 0, &piece)))
				goto fail;
		}
		if (b < ex_end) {
			/* and the part after it */
			if ((ret = ext2fs_extent_goto(h, lblk)))
				goto fail;
			piece.e_lblk = b;
			piece.e_pblk = ex.e_pblk + (b - ex.e_lblk);
			piece.e_len = (__u32)(ex_end - b);
			piece.e_flags = EXT2_EXTENT_FLAGS_UNINIT;
			if ((ret = ext2fs_extent_insert(h, EXT2_EXTENT_INSERT_AFTER,
							&piece)) ||
			    (ret = ext2fs_extent_fix_parents(h)))
				goto fail;
		}
		if ((ret = merge_left(h, lblk)))
			goto fail;
		lblk = b;
	}
	ext2fs_extent_free(h);
	return err;
fail:
	ext2fs_extent_free(h);
	return fs_fail(fs, ret, "marking blocks %llu.. of inode %u written", (unsigned long long)lblk, ino);
}

/*
 * Refuse up front (-ENOSPC, nothing changed) a range whose holes outnumber
 * the free blocks: blocks that ZERO_RANGE and WRITE_ZEROES free first are
 * mapped now and need no new block, so the count is the same for every
 * allocating mode. The extent tree may still need a block or two more;
 * such a failure midway is put right by fs_op_end() (op.c).
 */
static int check_space(struct bs_fs *fs, uint32_t ino, struct ext2_inode *inode,
		       blk64_t first, blk64_t last)
{
	ext2_extent_handle_t h;
	blk64_t lblk = first, pblk, run, holes = 0, avail;
	bool uninit;
	errcode_t ret;
	int err = 0;

	ret = ext2fs_extent_open2(fs->e2, ino, inode, &h);
	if (ret)
		return fs_fail(fs, ret, "reading the extents of inode %u", ino);
	while (lblk < last) {
		if ((err = fs_map_run(fs, h, lblk, last - lblk, &pblk, &run,
				      &uninit)))
			break;
		if (!pblk)
			holes += run;
		lblk += run;
	}
	ext2fs_extent_free(h);
	if (err)
		return err;
	avail = ext2fs_free_blocks_count(fs->e2->super);
	if (holes > avail)
		return fs_err(fs, -ENOSPC, "fallocate: %llu blocks to allocate, "
			      "%llu free", (unsigned long long)holes,
			      (unsigned long long)avail);
	return 0;
}

static const char *mode_name(int mode)
{
	switch (mode & BS_FALLOC_MODE_MASK) {
	case 0: return "allocate";
	case BS_FALLOC_PUNCH_HOLE: return "punch hole";
	case BS_FALLOC_ZERO_RANGE: return "zero range";
	case BS_FALLOC_WRITE_ZEROES: return "write zeroes";
	case BS_FALLOC_COLLAPSE_RANGE: return "collapse range";
	case BS_FALLOC_INSERT_RANGE: return "insert range";
	case BS_FALLOC_UNSHARE_RANGE: return "unshare range";
	default: return "fallocate";
	}
}

static int do_fallocate(struct bs_fs *fs, uint32_t ino, int mode,
			int64_t offset, int64_t len)
{
	struct ext2_inode inode;
	uint32_t bs;
	uint64_t off, end;
	blk64_t first, last, s, e;
	unsigned which = FS_CTIME;
	int err;

	if ((err = fs_check_rw(fs, "fallocate")))
		return err;
	bs = fs->e2->blocksize;
	err = bs_falloc_check(mode, offset, len, (int64_t)fs_max_bytes(fs));
	if (err) {
		if (err == -EOPNOTSUPP && (mode & BS_FALLOC_WRITE_ZEROES) &&
		    (mode & BS_FALLOC_KEEP_SIZE))
			return fs_err(fs, err, "fallocate: write zeroes cannot "
				      "keep the size (written extents past EOF "
				      "do not exist)");
		if (err == -EOPNOTSUPP && (mode & BS_FALLOC_PUNCH_HOLE))
			return fs_err(fs, err, "fallocate: punch hole needs "
				      "keep size");
		if (err == -EFBIG)
			return fs_err(fs, err, "fallocate: %lld+%lld is past the "
				      "largest file size (%" PRIu64 ")",
				      (long long)offset, (long long)len,
				      fs_max_bytes(fs));
		return fs_err(fs, err, "fallocate: invalid mode 0x%x or range "
			      "%lld+%lld", mode, (long long)offset,
			      (long long)len);
	}
	/* ext4's own order: the device capability before the mode mask */
	if (mode & BS_FALLOC_WRITE_ZEROES) {
		/* off the main loop: the published capabilities */
		struct bs_caps caps;

		bs_dev_caps(fs->dev, &caps);
		if (!caps.write_zeroes_unmap)
			return fs_err(fs, -EOPNOTSUPP, "fallocate: write "
				      "zeroes: %s", caps.why_no_unmap);
	}
	switch (mode & BS_FALLOC_MODE_MASK) {
	case 0:
	case BS_FALLOC_PUNCH_HOLE:
	case BS_FALLOC_ZERO_RANGE:
	case BS_FALLOC_WRITE_ZEROES:
		break;
	default:
		return fs_err(fs, -EOPNOTSUPP, "fallocate: %s is not supported "
			      "by this ext4 layer", mode_name(mode));
	}
	if ((err = fs_check_reg(fs, ino, &inode)))
		return err;
	if (!(inode.i_flags & EXT4_EXTENTS_FL))
		return fs_err(fs, -EOPNOTSUPP, "fallocate: inode %u is "
			      "block-mapped (no extents), as ext4 refuses", ino);

	off = (uint64_t)offset;
	end = off + (uint64_t)len;
	first = off / bs;			/* blocks touched */
	last = (end + bs - 1) / bs;
	s = (off + bs - 1) / bs;		/* whole blocks */
	e = end / bs;
	if (e < s)
		e = s;

	if (!(mode & BS_FALLOC_PUNCH_HOLE) &&
	    (err = check_space(fs, ino, &inode, first, last)))
		return err;

	switch (mode & BS_FALLOC_MODE_MASK) {
	case 0:
		if ((err = fs_alloc_unwritten(fs, ino, &inode, first, last - first)))
			return err;
		break;
	case BS_FALLOC_PUNCH_HOLE: {
		uint64_t size = EXT2_I_SIZE(&inode);

		if (off >= size)
			return 0;
		if (end > size) {
			/* up to the end of the block that holds EOF */
			end = (size + bs - 1) / bs * bs;
			e = end / bs;
			if (e < s)
				e = s;
		}
		if ((err = zero_edges(fs, ino, &inode, off, end)) ||
		    (err = punch(fs, ino, &inode, s, e - s)))
			return err;
		break;
	}
	case BS_FALLOC_ZERO_RANGE:
	case BS_FALLOC_WRITE_ZEROES:
		if ((err = zero_edges(fs, ino, &inode, off, end)) ||
		    (err = punch(fs, ino, &inode, s, e - s)) ||
		    (err = fs_alloc_unwritten(fs, ino, &inode, first, last - first)))
			return err;
		break;
	}
	if ((err = set_size(fs, &inode, end, mode, &which)) ||
	    (err = fs_write_inode_times(fs, ino, &inode, which, NULL)))
		return err;
	if (!(mode & BS_FALLOC_WRITE_ZEROES) || e == s)
		return 0;

	/* 1: the unwritten extents (and the size) durable */
	if ((err = fs_sync(fs)))
		return err;
	/* 2: zeroes by the device, then durable */
	if ((err = zero_mapped(fs, ino, &inode, s, e)))
		return err;
	err = bs_flush_sync(fs->dev);
	if (err)
		return fs_err(fs, err, "write zeroes: flushing the zeroes: %s",
			      bs_last_error());
	/* 3: only now written */
	if ((err = fs_mark_written(fs, ino, &inode, s, e)) ||
	    (err = fs_write_inode(fs, ino, &inode)))
		return err;
	return fs_sync(fs);
}

int bs_fs_fallocate(struct bs_fs *fs, uint32_t ino, int mode, int64_t offset,
		    int64_t len)
{
	struct fs_op op;

	fs_op_begin(&op, fs);
	return fs_op_end(&op, do_fallocate(fs, ino, mode, offset, len));
}
