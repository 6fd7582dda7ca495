/* SPDX-License-Identifier: MIT */
/*
 * Is this image safe to write? The checks the kernel's ext4 makes before
 * it mounts a filesystem (superblock geometry, group descriptors, each
 * group's own metadata marked in use), done before a read-write open
 * changes anything: libext2fs trusts what it reads, so a descriptor that
 * points its block bitmap outside the device makes every block look free
 * and the next allocation lands on the superblock.
 *
 Three passes: fs_check_super() on the superblock's geometry, which
 * libext2fs needs right even to read (a read-only open stops there too);
 * fs_check_desc() on its counters and the group descriptors, before the
 * bitmaps are read (a bitmap location that is wrong would be read as a
 * bitmap); fs_check_bitmaps() after, on what the bitmaps say about the
 * metadata. Each returns 0, 1 with a reason in the struct fs_check when
 * the image needs e2fsck, or a negative errno when the check itself
 * could not run.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>

#include "fs/internal.h"

__attribute__((format(printf, 2, 3)))
static int bad(struct fs_check *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
	return 1;
}

static bool pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

int fs_check_super(struct bs_fs *fs, struct fs_check *c)
{
	ext2_filsys e2 = fs->e2;
	struct ext2_super_block *sb = e2->super;
	uint64_t blocks = ext2fs_blocks_count(sb);
	uint32_t bs = e2->blocksize;

	/*
	 * e2fsck's rule: with 1 KiB blocks (and no bigalloc) block 0 is the
	 * boot block and the superblock block 1, else the superblock is in
	 * block 0. (libext2fs reads past its bitmaps on other values.)
	 */
	if (sb->s_first_data_block !=
	    (bs == 1024 && EXT2FS_CLUSTER_RATIO(e2) == 1 ? 1u : 0u))
		return bad(c, "first data block %u with %u-byte blocks",
			   sb->s_first_data_block, bs);
	if (sb->s_first_data_block >= blocks)
		return bad(c, "first data block %u is past the last block",
			   sb->s_first_data_block);
	if (!sb->s_blocks_per_group || sb->s_blocks_per_group > 8 * bs)
		return bad(c, "%u blocks per group (1 to %u)",
			   sb->s_blocks_per_group, 8 * bs);
	if (!sb->s_inodes_per_group || sb->s_inodes_per_group > 8 * bs)
		return bad(c, "%u inodes per group (1 to %u)",
			   sb->s_inodes_per_group, 8 * bs);
	if ((uint64_t)sb->s_inodes_per_group * e2->group_desc_count !=
	    sb->s_inodes_count)
		return bad(c, "inode count %u is not %u groups of %u inodes",
			   sb->s_inodes_count, e2->group_desc_count,
			   sb->s_inodes_per_group);
	if (EXT2_INODE_SIZE(sb) < EXT2_GOOD_OLD_INODE_SIZE ||
	    EXT2_INODE_SIZE(sb) > bs || !pow2(EXT2_INODE_SIZE(sb)))
		return bad(c, "inode size %u", EXT2_INODE_SIZE(sb));
	if (sb->s_rev_level > EXT2_GOOD_OLD_REV &&
	    (sb->s_first_ino < EXT2_GOOD_OLD_FIRST_INO ||
	     sb->s_first_ino > sb->s_inodes_count))
		return bad(c, "first non-reserved inode %u (%u to %u)",
			   sb->s_first_ino, EXT2_GOOD_OLD_FIRST_INO,
			   sb->s_inodes_count);
	if (sb->s_reserved_gdt_blocks > bs / 4)
		return bad(c, "%u reserved descriptor blocks (at most %u)",
			   sb->s_reserved_gdt_blocks, bs / 4);
	if (ext2fs_has_feature_flex_bg(sb) && sb->s_log_groups_per_flex > 31)
		return bad(c, "flex_bg of 2^%u groups",
			   sb->s_log_groups_per_flex);
	if (ext2fs_has_feature_meta_bg(sb) &&
	    sb->s_first_meta_bg > e2->desc_blocks)
		return bad(c, "first meta_bg %u is past the %lu descriptor "
			   "blocks", sb->s_first_meta_bg,
			   (unsigned long)e2->desc_blocks);
	if (ext2fs_has_feature_journal(sb) && sb->s_journal_inum &&
	    (sb->s_journal_inum >= EXT2_FIRST_INO(sb) ||
	     sb->s_journal_inum == EXT2_ROOT_INO))
		return bad(c, "journal inode %u is not a reserved inode",
			   sb->s_journal_inum);
	return 0;
}

/* The superblock's counters: within the totals. */
static int check_counts(struct bs_fs *fs, struct fs_check *c)
{
	struct ext2_super_block *sb = fs->e2->super;
	uint64_t blocks = ext2fs_blocks_count(sb);

	if (ext2fs_free_blocks_count(sb) > blocks)
		return bad(c, "%" PRIu64 " free blocks of %" PRIu64,
			   (uint64_t)ext2fs_free_blocks_count(sb), blocks);
	if (ext2fs_r_blocks_count(sb) > blocks)
		return bad(c, "%" PRIu64 " reserved blocks of %" PRIu64,
			   (uint64_t)ext2fs_r_blocks_count(sb), blocks);
	if (sb->s_free_inodes_count > sb->s_inodes_count)
		return bad(c, "%u free inodes of %u", sb->s_free_inodes_count,
			   sb->s_inodes_count);
	return 0;
}

/*
 * One block-range of group @g's metadata: inside [@lo, @hi], clear of
 * everything marked so far, then marked.
 */
static int claim(struct fs_check *c, dgrp_t g, const char *what, blk64_t blk,
		 blk64_t n, blk64_t lo, blk64_t hi)
{
	blk64_t b;

	if (!n || blk < lo || blk > hi || n - 1 > hi - blk)
		return bad(c, "group %u: %s at block %llu is outside blocks "
			   "%llu-%llu", g, what, (unsigned long long)blk,
			   (unsigned long long)lo, (unsigned long long)hi);
	if (!ext2fs_test_block_bitmap_range2(c->meta, blk, (unsigned)n)) {
		b = blk;
		ext2fs_find_first_set_block_bitmap2(c->meta, blk, blk + n - 1,
						    &b);
		return bad(c, "group %u: %s at block %llu overlaps the "
			   "superblock, descriptors or other bitmaps or inode "
			   "tables", g, what, (unsigned long long)b);
	}
	ext2fs_mark_block_bitmap_range2(c->meta, blk, (unsigned)n);
	return 0;
}

int fs_check_desc(struct bs_fs *fs, struct fs_check *c)
{
	ext2_filsys e2 = fs->e2;
	struct ext2_super_block *sb = e2->super;
	blk64_t lo = sb->s_first_data_block, hi = ext2fs_blocks_count(sb) - 1;
	bool flex = ext2fs_has_feature_flex_bg(sb);
	errcode_t ret;
	dgrp_t g;
	int rc;

	c->why[0] = '\0';
	if ((rc = check_counts(fs, c)))
		return rc;
	if (!c->meta) {
		ret = ext2fs_allocate_block_bitmap(e2, "metadata", &c->meta);
		if (ret)
			return fs_fail(fs, ret, "checking the group "
				       "descriptors");
	}
	ext2fs_clear_block_bitmap(c->meta);
	for (g = 0; g < e2->group_desc_count; g++)
		ext2fs_reserve_super_and_bgd(e2, g, c->meta);
	for (g = 0; g < e2->group_desc_count; g++) {
		uint32_t nblocks = (uint32_t)ext2fs_group_blocks_count(e2, g);

		if (ext2fs_has_group_desc_csum(e2) &&
		    !ext2fs_group_desc_csum_verify(e2, g))
			return bad(c, "group %u: descriptor checksum mismatch",
				   g);
		/* without flex_bg a group's metadata lives in the group */
		if (!flex) {
			lo = ext2fs_group_first_block2(e2, g);
			hi = ext2fs_group_last_block2(e2, g);
		}
		if ((rc = claim(c, g, "block bitmap",
				ext2fs_block_bitmap_loc(e2, g), 1, lo, hi)) ||
		    (rc = claim(c, g, "inode bitmap",
				ext2fs_inode_bitmap_loc(e2, g), 1, lo, hi)) ||
		    (rc = claim(c, g, "inode table",
				ext2fs_inode_table_loc(e2, g),
				e2->inode_blocks_per_group, lo, hi)))
			return rc;
		if (ext2fs_bg_free_blocks_count(e2, g) > nblocks)
			return bad(c, "group %u: %u free blocks of %u", g,
				   ext2fs_bg_free_blocks_count(e2, g), nblocks);
		if (ext2fs_bg_free_inodes_count(e2, g) > sb->s_inodes_per_group)
			return bad(c, "group %u: %u free inodes of %u", g,
				   ext2fs_bg_free_inodes_count(e2, g),
				   sb->s_inodes_per_group);
		if (ext2fs_has_group_desc_csum(e2) &&
		    ext2fs_bg_itable_unused(e2, g) > sb->s_inodes_per_group)
			return bad(c, "group %u: %u unused inodes of %u", g,
				   ext2fs_bg_itable_unused(e2, g),
				   sb->s_inodes_per_group);
	}
	return 0;
}

int fs_check_bitmaps(struct bs_fs *fs, struct fs_check *c)
{
	ext2_filsys e2 = fs->e2;
	blk64_t b = e2->super->s_first_data_block;
	blk64_t last = ext2fs_blocks_count(e2->super) - 1;
	struct ext2_inode inode;
	errcode_t ret;

	c->why[0] = '\0';
	/*
	 * Every metadata block must be in use in the block bitmap, or the
	 * allocator hands it out (the kernel checks a group's own bitmaps
	 * and table; with the whole map in memory, all of them are checked).
	 */
	while (b <= last &&
	       !ext2fs_find_first_set_block_bitmap2(c->meta, b, last, &b)) {
		blk64_t end = last, fr;

		/* one run of metadata blocks: [b, end] */
		if (!ext2fs_find_first_zero_block_bitmap2(c->meta, b, last,
							  &end))
			end--;
		if (!ext2fs_find_first_zero_block_bitmap2(e2->block_map, b, end,
							  &fr))
			return bad(c, "metadata block %llu (group %u) is free in "
				   "the block bitmap", (unsigned long long)fr,
				   ext2fs_group_of_blk2(e2, fr));
		b = end + 1;
	}
	if (!ext2fs_test_inode_bitmap2(e2->inode_map, EXT2_ROOT_INO))
		return bad(c, "the root inode is free in the inode bitmap");
	ret = ext2fs_read_inode(e2, EXT2_ROOT_INO, &inode);
	if (ret)
		return bad(c, "the root inode: %s", fs_strerror(ret));
	if (!LINUX_S_ISDIR(inode.i_mode) || !inode.i_links_count)
		return bad(c, "the root inode is not a directory (mode 0%o, "
			   "%u links)", inode.i_mode, inode.i_links_count);
	return 0;
}

void fs_check_free(struct fs_check *c)
{
	if (c->meta)
		ext2fs_free_block_bitmap(c->meta);
	c->meta = NULL;
}
