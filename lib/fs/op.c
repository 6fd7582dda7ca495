/* SPDX-License-Identifier: MIT */
/*
 * What a modifying operation leaves when it fails midway.
 *
 * libext2fs writes inodes and extent-tree blocks as it goes but keeps the
 * block bitmap, the group descriptors and the superblock's counts in
 * memory until ext2fs_flush(); its extent code updates the caller's inode
 * (i_blocks, the tree root) and leaves writing it to the caller. A call
 * that fails in the middle (ENOSPC when an extent needs one more tree
 * block, a read error) thus leaves an inode whose i_blocks, extent tree and
 * the bitmap disagree, and the close after it would write them out that
 * way (the report of issue 10 item 1: a 0-byte file holding all free
 * blocks, e2fsck exit 4, then EIO on rm).
 *
 * So every public call that changes the filesystem runs as an "op":
 *
 *   - fs_op_begin() keeps a copy of the block bitmap, and installs
 *     libext2fs' block alloc-stats callbacks, which write each allocation
 *     to disk (bitmap, descriptor) before the blocks are linked
 *     (persist_alloc());
 *   - the helpers that change an inode's blocks name it (fs_op_note());
 *   - fs_op_end() on failure, if no metadata write failed, puts the noted
 *     inodes right as they are on disk: the blocks their extent trees
 *     reference (data and tree blocks) are counted into i_blocks, a block
 *     allocated during the op (set now, clear in the copy) that nothing
 *     references is freed again, a block freed during the op that is
 *     still referenced is taken back.
 *     The filesystem is then consistent (e2fsck -fn clean) and stays
 *     usable; what the op had done before failing is kept.
 *   - if a metadata write or flush failed, the disk holds a mix of old
 *     and new metadata (as after a crash without a journal): the
 *     filesystem is marked broken, nothing more is written, the superblock
 *     stays "not clean" (written so at open), and the message says to run
 *     e2fsck -f, which the next read-write open insists on. Thanks to the
 *     write-ahead of allocations that mix leaks blocks at worst, never
 *     shows a linked block free (docs/fs.md lists what e2fsck may find).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>

#include "fs/internal.h"

/*
 * Write-ahead of an allocation: the block bitmap of each group that
 * [blk, blk+num) touches, and the descriptor blocks holding those groups,
 * are written now, before libext2fs writes the extent tree (or directory)
 * that references the blocks (it counts an allocation before it links
 * it). A metadata write failing later in the operation then leaves these
 * blocks in use on disk: leaked at worst, never referenced and free. The
 * in-memory bitmap can be written as it is: libext2fs frees a block only
 * after the tree no longer points at it. Other groups' descriptors in the
 * same block go out too, with the checksum of their bitmaps as last
 * written. Little-endian hosts only (the descriptors are written as they
 * are in memory; elsewhere the close writes them, as before).
 */
static void persist_alloc(struct bs_fs *fs, blk64_t blk, blk64_t num)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	ext2_filsys e2 = fs->e2;
	uint32_t cpg = EXT2_CLUSTERS_PER_GROUP(e2->super);
	uint32_t nbytes = cpg / 8, per = EXT2_DESC_PER_BLOCK(e2->super);
	blk64_t first = e2->super->s_first_data_block;
	blk64_t tail = (ext2fs_blocks_count(e2->super) - first) % cpg;
	dgrp_t g, g0, g1, d;
	char *buf = NULL;
	errcode_t ret = 0;

	if (fs->broken || !num || EXT2FS_CLUSTER_RATIO(e2) > 1 ||
	    !e2->block_map || blk < first ||
	    blk + num > ext2fs_blocks_count(e2->super))
		return;
	g0 = ext2fs_group_of_blk2(e2, blk);
	g1 = ext2fs_group_of_blk2(e2, blk + num - 1);
	if (ext2fs_get_mem(e2->blocksize, &buf))
		return;
	for (g = g0; g <= g1 && !ret; g++) {
		/* as ext2fs_write_bitmaps(): padding bits set */
		uint64_t nbits = nbytes * 8, b;

		if (g == e2->group_desc_count - 1 && tail)
			nbits = tail;
		memset(buf, 0xff, e2->blocksize);
		ret = ext2fs_get_block_bitmap_range2(e2->block_map,
						     first + (blk64_t)g * cpg,
						     nbits, buf);
		for (b = nbits; !ret && b < (uint64_t)nbytes * 8; b++)
			ext2fs_set_bit((unsigned)b, buf);
		if (!ret)
			ret = ext2fs_block_bitmap_csum_set(e2, g, buf, nbytes);
		if (ret)
			break;
		ext2fs_group_desc_csum_set(e2, g);
		ret = io_channel_write_blk64(e2->io,
					     ext2fs_block_bitmap_loc(e2, g), 1,
					     buf);
	}
	for (d = g0 / per; !ret && d <= g1 / per; d++)
		ret = io_channel_write_blk64(
			e2->io, ext2fs_descriptor_block_loc2(e2, first, d), 1,
			(char *)e2->group_desc + (size_t)d * e2->blocksize);
	/* a failed write is counted by the channel: the op ends broken */
	ext2fs_free_mem(&buf);
#else
	(void)fs;
	(void)blk;
	(void)num;
#endif
}

void fs_op_persist_inode(struct bs_fs *fs, uint32_t ino)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	ext2_filsys e2 = fs->e2;
	uint32_t ipg = e2->super->s_inodes_per_group;
	uint32_t per = EXT2_DESC_PER_BLOCK(e2->super);
	dgrp_t g;
	char *buf = NULL;
	errcode_t ret;

	if (!fs->op || fs->broken || !ino || !ipg || ipg % 8 ||
	    !e2->inode_map || ext2fs_get_mem(e2->blocksize, &buf))
		return;
	g = (ino - 1) / ipg;
	/* as ext2fs_write_bitmaps(): the rest of the block set */
	memset(buf, 0xff, e2->blocksize);
	ret = ext2fs_get_inode_bitmap_range2(e2->inode_map,
					     (uint64_t)g * ipg + 1, ipg, buf);
	if (!ret)
		ret = ext2fs_inode_bitmap_csum_set(e2, g, buf, ipg / 8);
	if (!ret) {
		ext2fs_group_desc_csum_set(e2, g);
		ret = io_channel_write_blk64(e2->io,
					     ext2fs_inode_bitmap_loc(e2, g), 1,
					     buf);
	}
	if (!ret)
		io_channel_write_blk64(
			e2->io,
			ext2fs_descriptor_block_loc2(
				e2, e2->super->s_first_data_block, g / per),
			1, (char *)e2->group_desc + (size_t)(g / per) *
							    e2->blocksize);
	ext2fs_free_mem(&buf);
#else
	(void)fs;
	(void)ino;
#endif
}

static void op_stats(ext2_filsys e2, blk64_t blk, int inuse)
{
	struct bs_fs *fs = e2->priv_data;

	if (!fs || !fs->op)
		return;
	if (inuse > 0)
		persist_alloc(fs, blk, 1);
	if (fs->op->old_stats)
		fs->op->old_stats(e2, blk, inuse);
}

static void op_range(ext2_filsys e2, blk64_t blk, blk_t num, int inuse)
{
	struct bs_fs *fs = e2->priv_data;
	blk64_t first = e2->super->s_first_data_block, back;

	if (!fs || !fs->op)
		return;
	if (inuse > 0 && num) {
		persist_alloc(fs, blk, num);
	} else if (inuse > 0 && blk > first) {
		/*
		 * libext2fs before 1.47.1 passes the end of the range and 0
		 * (its loop used them up): the range ends at blk - 1 and is
		 * at most an extent long (claim_range() of ext2fs_fallocate,
		 * EXT_INIT_MAX_LEN); the groups of the 64 Ki blocks before
		 * the end cover it.
		 */
		back = blk - first < 65536 ? blk - first : 65536;
		persist_alloc(fs, blk - back, back);
	}
	if (fs->op->old_range)
		fs->op->old_range(e2, blk, num, inuse);
}

void fs_op_begin(struct fs_op *op, struct bs_fs *fs)
{
	memset(op, 0, sizeof(*op));
	op->fs = fs;
	if (!fs->rw || fs->broken || fs->op)
		return; /* refused below, or nested: the outer op logs */
	op->meta_errors = fs_io_meta_errors(fs);
	if (ext2fs_copy_bitmap(fs->e2->block_map, &op->before))
		op->too_many = true; /* a failure then cannot be put right */
	fs->e2->priv_data = fs;
	ext2fs_set_block_alloc_stats_callback(fs->e2, op_stats,
					      &op->old_stats);
	ext2fs_set_block_alloc_stats_range_callback(fs->e2, op_range,
						    &op->old_range);
	fs->op = op;
}

void fs_op_note(struct bs_fs *fs, uint32_t ino)
{
	struct fs_op *op = fs->op;
	unsigned i;

	if (!op)
		return;
	for (i = 0; i < op->nino; i++)
		if (op->ino[i] == ino)
			return;
	if (op->nino == FS_OP_INOS)
		op->too_many = true;
	else
		op->ino[op->nino++] = ino;
}

void fs_set_broken(struct bs_fs *fs)
{
	fs->broken = true;
}

struct refs {
	ext2fs_block_bitmap map;
	blk64_t count;
};

static int ref_block(ext2_filsys e2, blk64_t *blocknr, e2_blkcnt_t blockcnt,
		     blk64_t ref_blk, int ref_offset, void *priv)
{
	struct refs *r = priv;

	(void)blockcnt;
	(void)ref_blk;
	(void)ref_offset;
	if (*blocknr >= ext2fs_blocks_count(e2->super))
		return BLOCK_ABORT;
	ext2fs_mark_block_bitmap2(r->map, *blocknr);
	r->count++;
	return 0;
}

/* An extent tree, extent by extent: leaves are runs, index entries nodes. */
static errcode_t ref_extents(ext2_filsys e2, uint32_t ino,
			     struct ext2_inode *inode, struct refs *r)
{
	blk64_t nblocks = ext2fs_blocks_count(e2->super);
	ext2_extent_handle_t h;
	struct ext2fs_extent ex;
	errcode_t ret;

	ret = ext2fs_extent_open2(e2, ino, inode, &h);
	if (ret)
		return ret;
	ret = ext2fs_extent_get(h, EXT2_EXTENT_ROOT, &ex);
	while (!ret) {
		if (ex.e_flags & EXT2_EXTENT_FLAGS_SECOND_VISIT) {
			/* an index entry seen on the way back up */
		} else if (ex.e_flags & EXT2_EXTENT_FLAGS_LEAF) {
			if (ex.e_len && ex.e_pblk < nblocks &&
			    ex.e_len <= nblocks - ex.e_pblk) {
				ext2fs_mark_block_bitmap_range2(r->map,
								ex.e_pblk,
								ex.e_len);
				r->count += ex.e_len;
			}
		} else if (ex.e_pblk < nblocks) {
			/* the node this index entry points to */
			ext2fs_mark_block_bitmap2(r->map, ex.e_pblk);
			r->count++;
		}
		ret = ext2fs_extent_get(h, EXT2_EXTENT_NEXT, &ex);
	}
	ext2fs_extent_free(h);
	if (ret == EXT2_ET_EXTENT_NO_NEXT || ret == EXT2_ET_NO_CURRENT_NODE)
		ret = 0;
	return ret;
}

/*
 * Mark the blocks inode @ino references (data, extent tree, xattr block)
 * in @map and set its i_blocks from them. A removed inode (no links)
 * references nothing: e2fsck ignores its blocks.
 */
static errcode_t ref_inode(struct bs_fs *fs, uint32_t ino,
			   ext2fs_block_bitmap map)
{
	struct ext2_inode inode;
	struct refs r = { .map = map };
	blk64_t acl;
	errcode_t ret;

	ret = ext2fs_read_inode(fs->e2, ino, &inode);
	if (ret)
		return ret;
	if (!inode.i_links_count)
		return 0;
	if (!ext2fs_inode_has_valid_blocks2(fs->e2, &inode))
		ret = 0;
	else if (inode.i_flags & EXT4_EXTENTS_FL)
		ret = ref_extents(fs->e2, ino, &inode, &r);
	else
		ret = ext2fs_block_iterate3(fs->e2, ino, BLOCK_FLAG_READ_ONLY,
					    NULL, ref_block, &r);
	if (ret)
		return ret;
	acl = ext2fs_file_acl_block(fs->e2, &inode);
	if (acl && acl < ext2fs_blocks_count(fs->e2->super)) {
		ext2fs_mark_block_bitmap2(map, acl);
		r.count++;
	}
	if (ext2fs_get_stat_i_blocks(fs->e2, &inode) ==
	    r.count * (fs->e2->blocksize / 512))
		return 0;
	ret = ext2fs_iblk_set(fs->e2, &inode, r.count);
	if (!ret)
		ret = ext2fs_write_inode(fs->e2, ino, &inode);
	return ret;
}

/*
 * The bitmap against the copy taken at the start: blocks in use now, free
 * in the copy and referenced by no noted inode were taken during the op
 * (only the noted inodes got blocks) and are freed again; blocks a noted
 * inode references that are free now are taken back.
 */
static void fix_bitmap(struct fs_op *op, ext2fs_block_bitmap ref)
{
	ext2_filsys e2 = op->fs->e2;
	blk64_t end = ext2fs_blocks_count(e2->super) - 1;
	blk64_t a = e2->super->s_first_data_block, b, c, d, x;

	while (a <= end &&
	       !ext2fs_find_first_set_block_bitmap2(e2->block_map, a, end, &a)) {
		if (ext2fs_find_first_zero_block_bitmap2(e2->block_map, a, end,
							 &b))
			b = end + 1;
		for (c = a; c < b; c = d) {
			if (ext2fs_find_first_zero_block_bitmap2(op->before, c,
								 b - 1, &c))
				break;
			if (ext2fs_find_first_set_block_bitmap2(op->before, c,
								b - 1, &d))
				d = b;
			for (x = c; x < d; x++)
				if (!ext2fs_test_block_bitmap2(ref, x))
					ext2fs_block_alloc_stats2(e2, x, -1);
		}
		a = b;
	}
	a = e2->super->s_first_data_block;
	while (a <= end && !ext2fs_find_first_set_block_bitmap2(ref, a, end, &a)) {
		if (ext2fs_find_first_zero_block_bitmap2(ref, a, end, &b))
			b = end + 1;
		for (x = a; x < b; x++)
			if (!ext2fs_test_block_bitmap2(e2->block_map, x))
				ext2fs_block_alloc_stats2(e2, x, +1);
		a = b;
	}
}

/* The repair of fs_op_end() when no metadata write failed. */
static errcode_t repair(struct fs_op *op)
{
	struct bs_fs *fs = op->fs;
	ext2fs_block_bitmap ref = NULL;
	errcode_t ret;
	unsigned i;

	if (op->too_many)
		return EXT2_ET_NO_MEMORY;
	if (fs_io_meta_errors(fs) != op->meta_errors)
		return EXT2_ET_SHORT_WRITE; /* not ours to put right */
	ret = ext2fs_allocate_block_bitmap(fs->e2, "referenced", &ref);
	if (ret)
		return ret;
	for (i = 0; i < op->nino && !ret; i++)
		ret = ref_inode(fs, op->ino[i], ref);
	if (!ret)
		fix_bitmap(op, ref);
	ext2fs_free_block_bitmap(ref);
	if (!ret && fs_io_meta_errors(fs) != op->meta_errors)
		ret = EXT2_ET_SHORT_WRITE; /* writing an inode failed */
	return ret;
}

int fs_op_repair(struct bs_fs *fs)
{
	errcode_t ret;

	if (!fs->op || fs->broken)
		return 0;
	ret = repair(fs->op);
	if (!ret)
		return 0;
	fs->broken = true;
	return fs_fail(fs, ret, "putting the failed operation right");
}

int fs_op_end(struct fs_op *op, int err)
{
	struct bs_fs *fs = op->fs;
	char why[768];
	errcode_t ret = 0;

	if (fs->op != op)
		return err; /* not started (refused) or nested */
	/* no more write-ahead: the repair's own frees and take-backs go out
	 * with the next sync */
	fs->op = NULL;
	ext2fs_set_block_alloc_stats_callback(fs->e2, op->old_stats, NULL);
	ext2fs_set_block_alloc_stats_range_callback(fs->e2, op->old_range,
						    NULL);
	if (fs_io_meta_errors(fs) != op->meta_errors)
		fs->broken = true;
	if (err && !fs->broken) {
		snprintf(why, sizeof(why), "%s", bs_last_error());
		ret = repair(op);
		if (ret)
			fs->broken = true;
		bs_error(err, "%s", why);
	}
	if (fs->broken) {
		/* (an op starts only on a filesystem not broken yet) */
		snprintf(why, sizeof(why), "%s", bs_last_error());
		if (!err)
			err = -EIO;
		if (ret)
			bs_error(err, "%s; putting it right failed (%s): the "
				 "filesystem is left not clean, run e2fsck -f",
				 why, strerror(-fs_errno(ret)));
		else
			bs_error(err, "%s; a metadata write failed: the "
				 "filesystem is left not clean, run e2fsck -f",
				 why);
	}
	if (op->before)
		ext2fs_free_block_bitmap(op->before);
	op->before = NULL;
	return err;
}
