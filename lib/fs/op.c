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
 *   - fs_op_begin() installs libext2fs' block alloc-stats callbacks, which
 *     log every block range allocated or freed until fs_op_end();
 *   - the helpers that change an inode's blocks name it (fs_op_note());
 *   - fs_op_end() on failure, if no metadata write failed, puts the noted
 *     inodes right as they are on disk: the blocks their extent trees
 *     reference (data and tree blocks) are counted into i_blocks, a block
 *     allocated during the op that nothing references is freed again, a
 *     block freed during the op that is still referenced is taken back.
 *     The filesystem is then consistent (e2fsck -fn clean) and stays
 *     usable; what the op had done before failing is kept.
 *   - if a metadata write or flush failed, the disk holds an unknown mix
 *     of old and new metadata (as after a crash without a journal): the
 *     filesystem is marked broken, nothing more is written, the superblock
 *     stays "not clean" (written so at open), and the message says to run
 *     e2fsck -f, which the next read-write open insists on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/bdev.h>

#include "fs/internal.h"

#define FS_OP_LOG_MAX (1u << 20) /* logged runs; past it, no repair */

static void op_log(ext2_filsys e2, blk64_t blk, blk64_t num, int inuse)
{
	struct bs_fs *fs = e2->priv_data;
	struct fs_op *op = fs ? fs->op : NULL;
	struct fs_alloc_run *last;

	if (!op || op->quiet || !num)
		return;
	last = op->n ? &op->log[op->n - 1] : NULL;
	if (last && last->inuse == inuse && last->blk + last->num == blk) {
		last->num += num;
		return;
	}
	if (op->n == op->cap) {
		size_t cap = op->cap ? op->cap * 2 : 64;
		struct fs_alloc_run *l;

		if (cap > FS_OP_LOG_MAX ||
		    !(l = realloc(op->log, cap * sizeof(*l)))) {
			op->too_many = true;
			return;
		}
		op->log = l;
		op->cap = cap;
	}
	op->log[op->n++] = (struct fs_alloc_run){ blk, num, inuse };
}

static void op_stats(ext2_filsys e2, blk64_t blk, int inuse)
{
	struct bs_fs *fs = e2->priv_data;

	op_log(e2, blk, 1, inuse);
	if (fs && fs->op && fs->op->old_stats)
		fs->op->old_stats(e2, blk, inuse);
}

static void op_range(ext2_filsys e2, blk64_t blk, blk_t num, int inuse)
{
	struct bs_fs *fs = e2->priv_data;

	op_log(e2, blk, num, inuse);
	if (fs && fs->op && fs->op->old_range)
		fs->op->old_range(e2, blk, num, inuse);
}

void fs_op_begin(struct fs_op *op, struct bs_fs *fs)
{
	memset(op, 0, sizeof(*op));
	op->fs = fs;
	if (!fs->rw || fs->broken || fs->op)
		return; /* refused below, or nested: the outer op logs */
	op->meta_errors = fs_io_meta_errors(fs);
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

/* The repair of fs_op_end() when no metadata write failed. */
static errcode_t repair(struct fs_op *op)
{
	struct bs_fs *fs = op->fs;
	ext2fs_block_bitmap ref = NULL;
	errcode_t ret;
	unsigned i;
	size_t k;

	if (op->too_many)
		return EXT2_ET_NO_MEMORY;
	if (fs_io_meta_errors(fs) != op->meta_errors)
		return EXT2_ET_SHORT_WRITE; /* not ours to put right */
	ret = ext2fs_allocate_block_bitmap(fs->e2, "referenced", &ref);
	if (ret)
		return ret;
	op->quiet = true;
	for (i = 0; i < op->nino && !ret; i++)
		ret = ref_inode(fs, op->ino[i], ref);
	for (k = 0; k < op->n && !ret; k++) {
		const struct fs_alloc_run *a = &op->log[k];
		blk64_t b;

		for (b = a->blk; b < a->blk + a->num; b++) {
			bool used = ext2fs_test_block_bitmap2(fs->e2->block_map,
							      b);
			bool refd = ext2fs_test_block_bitmap2(ref, b);

			/* taken during the op: only the noted inodes use it */
			if (a->inuse > 0 && used && !refd)
				ext2fs_block_alloc_stats2(fs->e2, b, -1);
			else if (a->inuse < 0 && !used && refd)
				ext2fs_block_alloc_stats2(fs->e2, b, +1);
		}
	}
	ext2fs_free_block_bitmap(ref);
	op->quiet = false;
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
	/* the log is complete: no more logging, repair's own stats included */
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
	free(op->log);
	op->log = NULL;
	return err;
}
