/* SPDX-License-Identifier: MIT */
/*
 * The ext4 layer on damaged images and odd paths (issue 10 items 2 and
 * 15): a read-write open refuses corrupted group descriptors and
 * superblocks without writing a byte, read-only opens never write;
 * trailing slashes need directories (ENOTDIR / EISDIR as the kernel);
 * an inode claiming a size past ext4's largest file is EFBIG; the largest
 * sizes are the kernel's for the block size and features; a refused
 * WRITE_ZEROES gives the core's reason (bs_caps_why_no_unmap).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/caps.h>
#include <blkstack/fs.h>
#include <blkstack/zero.h>

#include "fs/internal.h"
#include "helpers/th.h"

#define MiB (1024ull * 1024)

/* A digest of every byte of @dev (FNV-1a), to prove nothing was written. */
static uint64_t dev_digest(struct bs_dev *dev)
{
	uint8_t *buf = malloc(MiB);
	uint64_t h = 0xcbf29ce484222325ull, off;
	size_t i;

	assert_non_null(buf);
	for (off = 0; off < dev->size; off += MiB) {
		assert_int_equal(bs_read_sync(dev, buf, MiB, off), 0);
		for (i = 0; i < MiB; i++)
			h = (h ^ buf[i]) * 0x100000001b3ull;
	}
	free(buf);
	return h;
}

static struct bs_fs *open_rw(struct bs_dev *dev)
{
	struct bs_fs *fs = NULL;

	if (bs_fs_open(dev, 0, &fs))
		fail_msg("open: %s", bs_last_error());
	return fs;
}

static void close_ok(struct bs_fs *fs)
{
	if (bs_fs_close(fs))
		fail_msg("close: %s", bs_last_error());
}

/* A 1 KiB-block filesystem (4 groups) with /d/f holding a few bytes. */
static struct bs_dev *made(struct bs_ctx *ctx, uint32_t *f)
{
	struct bs_dev *dev = th_dev(ctx, "m", "mem:32M");
	struct bs_fs_mkfs_opts o = { .block_size = 1024 };
	struct bs_fs *fs;

	assert_int_equal(bs_fs_mkfs(dev, &o), 0);
	fs = open_rw(dev);
	assert_int_equal(bs_fs_mkdir(fs, "/d", 0755, NULL), 0);
	assert_int_equal(bs_fs_create(fs, "/d/f", 0644, f), 0);
	assert_int_equal(bs_fs_write(fs, *f, "hello", 5, 0), 5);
	close_ok(fs);
	return dev;
}

/*
 * Damage the image through libext2fs with valid checksums (the checks
 * themselves must refuse, not a checksum): @edit changes the open
 * filesystem, which is then written back and closed clean.
 */
static void damage(struct bs_dev *dev, void (*edit)(ext2_filsys e2))
{
	struct bs_fs *fs = open_rw(dev);
	dgrp_t g;

	edit(fs->e2);
	for (g = 0; g < fs->e2->group_desc_count; g++)
		ext2fs_group_desc_csum_set(fs->e2, g);
	ext2fs_mark_super_dirty(fs->e2);
	ext2fs_mark_bb_dirty(fs->e2);
	close_ok(fs);
}

static void ed_bitmap_far(ext2_filsys e2)
{
	/* the byte: block bitmap location bit 31 */
	ext2fs_block_bitmap_loc_set(e2, 0, ext2fs_block_bitmap_loc(e2, 0) |
					   0x80000000u);
}

static void ed_table_overlap(ext2_filsys e2)
{
	ext2fs_inode_table_loc_set(e2, 2, ext2fs_inode_table_loc(e2, 1));
}

static void ed_bitmap_on_gdt(ext2_filsys e2)
{
	ext2fs_inode_bitmap_loc_set(e2, 1, e2->super->s_first_data_block + 1);
}

static void ed_free_count(ext2_filsys e2)
{
	ext2fs_bg_free_inodes_count_set(e2, 3, e2->super->s_inodes_per_group + 1);
}

static void ed_free_table(ext2_filsys e2)
{
	ext2fs_unmark_block_bitmap2(e2->block_map,
				    ext2fs_inode_table_loc(e2, 0) + 3);
}

static void ed_orphan(ext2_filsys e2)
{
	e2->super->s_last_orphan = 12;
}

static const struct {
	void (*edit)(ext2_filsys e2);
	const char *reason;
} damages[] = {
	{ ed_bitmap_far, "group 0: block bitmap at block" },
	{ ed_table_overlap, "group 2: inode table at block" },
	{ ed_bitmap_on_gdt, "group 1: inode bitmap at block 2 overlaps" },
	{ ed_free_count, "group 3: 513 free inodes of 512" },
	{ ed_free_table, "is free in the block bitmap" },
	{ ed_orphan, "orphan inodes to be freed" },
};

static void damaged_images(void **state)
{
	struct bs_ctx *ctx = *state;
	size_t i;

	for (i = 0; i < sizeof(damages) / sizeof(damages[0]); i++) {
		struct bs_fs *fs = NULL;
		struct bs_fs_info info;
		uint32_t f, ino;
		uint64_t before;
		struct bs_dev *dev = made(ctx, &f);
		char buf[8];

		damage(dev, damages[i].edit);
		before = dev_digest(dev);
		assert_int_equal(bs_fs_open(dev, 0, &fs), -EUCLEAN);
		if (!strstr(bs_last_error(), "m: filesystem needs checking (run "
			    "e2fsck): ") ||
		    !strstr(bs_last_error(), damages[i].reason))
			fail_msg("case %zu: %s", i, bs_last_error());
		assert_int_equal(dev_digest(dev), before);
		/* read-only: opens, reads, says why, writes nothing */
		assert_int_equal(bs_fs_open(dev, BS_FS_RDONLY, &fs), 0);
		assert_int_equal(bs_fs_info(fs, &info), 0);
		assert_non_null(strstr(info.damage, damages[i].reason));
		if (!bs_fs_lookup(fs, "/d/f", &ino))
			(void)bs_fs_read(fs, ino, buf, sizeof(buf), 0);
		close_ok(fs);
		assert_int_equal(dev_digest(dev), before);
		assert_int_equal(bs_dev_destroy(dev), 0);
	}
}

static void clean_image_has_no_damage(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_fs_info info;
	struct bs_fs *fs;
	uint32_t f;
	struct bs_dev *dev = made(ctx, &f);

	fs = open_rw(dev);
	assert_int_equal(bs_fs_info(fs, &info), 0);
	assert_string_equal(info.damage, "");
	close_ok(fs);
}

/*
 * A superblock geometry libext2fs cannot even read (found by
 * fuzz_fs_image: first data block 96 with 1 KiB blocks overflowed a heap
 * buffer in ext2fs_read_bitmaps): refused read-only too, nothing written.
 */
static void bad_geometry_refused_ro(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_fs *fs = NULL;
	uint64_t before;
	uint32_t f;
	struct bs_dev *dev = made(ctx, &f);

	fs = open_rw(dev);
	fs->e2->super->s_first_data_block = 96;
	fs->e2->flags |= EXT2_FLAG_SUPER_ONLY | EXT2_FLAG_MASTER_SB_ONLY;
	close_ok(fs);
	before = dev_digest(dev);
	assert_int_equal(bs_fs_open(dev, BS_FS_RDONLY, &fs), -EUCLEAN);
	assert_non_null(strstr(bs_last_error(), "m: filesystem needs checking "
			       "(run e2fsck): first data block 96"));
	assert_int_equal(bs_fs_open(dev, 0, &fs), -EUCLEAN);
	assert_int_equal(dev_digest(dev), before);
}

/*
 * A block count past the device (fuzz_fs_image: ext2fs_open2() then
 * allocates descriptors for it): refused before libext2fs opens it.
 */
static void blocks_past_device(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_fs *fs = NULL;
	uint64_t before;
	uint32_t f;
	struct bs_dev *dev = made(ctx, &f);

	fs = open_rw(dev);
	ext2fs_blocks_count_set(fs->e2->super, (uint64_t)1 << 40);
	fs->e2->flags |= EXT2_FLAG_SUPER_ONLY | EXT2_FLAG_MASTER_SB_ONLY;
	close_ok(fs);
	before = dev_digest(dev);
	assert_int_equal(bs_fs_open(dev, BS_FS_RDONLY, &fs), -EUCLEAN);
	assert_non_null(strstr(bs_last_error(), "m: filesystem needs checking "
			       "(run e2fsck): the superblock says 1099511627776 "
			       "blocks of 1024 bytes, the device holds 32768"));
	assert_int_equal(bs_fs_open(dev, 0, &fs), -EUCLEAN);
	assert_int_equal(dev_digest(dev), before);
}

static void ed_uninit_table_far(ext2_filsys e2)
{
	/* group 1 is BLOCK_UNINIT: libext2fs marks its table when reading */
	ext2fs_inode_table_loc_set(e2, 1, ext2fs_blocks_count(e2->super) + 7);
}

/*
 * libext2fs warns through com_err() (stderr) when reading the bitmaps of
 * such a group (found by fuzz_fs_image): a library prints nothing.
 */
static void damaged_read_only_prints_nothing(void **state)
{
	struct bs_ctx *ctx = *state;
	char path[] = "/tmp/bs-fs-check-stderr.XXXXXX";
	struct bs_fs *fs = NULL;
	struct bs_fs_info info;
	struct stat st;
	uint32_t f;
	struct bs_dev *dev = made(ctx, &f);
	int fd, saved;

	damage(dev, ed_uninit_table_far);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	assert_int_equal(bs_fs_open(dev, BS_FS_RDONLY, &fs), 0);
	bs_fs_info(fs, &info);
	close_ok(fs);
	fflush(stderr);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	unlink(path);
	assert_non_null(strstr(info.damage, "group 1: inode table"));
	assert_int_equal(st.st_size, 0);
}

/* ---- item 15: paths ------------------------------------------------------ */

static void trailing_slash(void **state)
{
	struct bs_ctx *ctx = *state;
	uint32_t f, ino, d;
	struct bs_dev *dev = made(ctx, &f);
	struct bs_fs *fs = open_rw(dev);

	assert_int_equal(bs_fs_lookup(fs, "/d", &d), 0);
	assert_int_equal(bs_fs_lookup(fs, "/d/", &ino), 0);
	assert_int_equal(ino, d);
	assert_int_equal(bs_fs_lookup(fs, "/d/f", &ino), 0);
	assert_int_equal(ino, f);
	/* a file named as a directory */
	assert_int_equal(bs_fs_lookup(fs, "/d/f/", &ino), -ENOTDIR);
	assert_int_equal(bs_fs_lookup(fs, "/d/f//", &ino), -ENOTDIR);
	assert_int_equal(bs_fs_lookup(fs, "/d/f/.", &ino), -ENOTDIR);
	assert_int_equal(bs_fs_lookup(fs, "/d/f/x", &ino), -ENOTDIR);
	assert_int_equal(bs_fs_create(fs, "/d/f/x", 0644, &ino), -ENOTDIR);
	/* creating "g/" as a file: EISDIR, as open(O_CREAT) */
	assert_int_equal(bs_fs_create(fs, "/d/g/", 0644, &ino), -EISDIR);
	assert_int_equal(bs_fs_lookup(fs, "/d/g", &ino), -ENOENT);
	/* unlink and rename of "f/" */
	assert_int_equal(bs_fs_unlink(fs, "/d/f/"), -ENOTDIR);
	assert_int_equal(bs_fs_rename(fs, "/d/f/", "/d/h"), -ENOTDIR);
	assert_int_equal(bs_fs_rename(fs, "/d/f", "/d/h/"), -ENOTDIR);
	assert_int_equal(bs_fs_lookup(fs, "/d/f", &ino), 0);
	assert_int_equal(bs_fs_lookup(fs, "/d/h", &ino), -ENOENT);
	/* directories take the slash */
	assert_int_equal(bs_fs_mkdir(fs, "/e/", 0755, NULL), 0);
	assert_int_equal(bs_fs_rename(fs, "/e/", "/e2/"), 0);
	assert_int_equal(bs_fs_lookup(fs, "/e2/", &ino), 0);
	assert_int_equal(bs_fs_unlink(fs, "/e2/"), 0);
	assert_int_equal(bs_fs_lookup(fs, "/e2", &ino), -ENOENT);
	close_ok(fs);
}

/* ---- item 15: sizes --------------------------------------------------------- */

static void set_size(struct bs_fs *fs, uint32_t ino, uint64_t size)
{
	struct ext2_inode inode;

	assert_int_equal(ext2fs_read_inode(fs->e2, ino, &inode), 0);
	assert_int_equal(ext2fs_inode_size_set(fs->e2, &inode, size), 0);
	assert_int_equal(ext2fs_write_inode(fs->e2, ino, &inode), 0);
}

static void huge_size(void **state)
{
	struct bs_ctx *ctx = *state;
	uint32_t f;
	struct bs_dev *dev = made(ctx, &f);
	struct bs_fs *fs = open_rw(dev);
	struct bs_fs_stat st;
	uint64_t max = fs_max_bytes(fs);
	char buf[8];

	/* 1 KiB blocks, huge_file: 2^32 - 1 blocks */
	assert_int_equal(max, (((uint64_t)1 << 32) - 1) * 1024);
	set_size(fs, f, (uint64_t)1 << 48);
	assert_int_equal(bs_fs_read(fs, f, buf, sizeof(buf), 0), -EFBIG);
	assert_non_null(strstr(bs_last_error(), "past the largest file size"));
	assert_int_equal(bs_fs_write(fs, f, "x", 1, 0), -EFBIG);
	assert_int_equal(bs_fs_truncate(fs, f, 0), -EFBIG);
	assert_int_equal(bs_fs_fallocate(fs, f, 0, 0, 4096), -EFBIG);
	/* stat reports it, as it is; rm still works */
	assert_int_equal(bs_fs_stat(fs, f, &st), 0);
	assert_int_equal(st.size, (uint64_t)1 << 48);
	/* exactly the largest size is a valid file */
	set_size(fs, f, max);
	assert_int_equal(bs_fs_read(fs, f, buf, 5, 0), 5);
	assert_memory_equal(buf, "hello", 5);
	set_size(fs, f, max + 1);
	assert_int_equal(bs_fs_read(fs, f, buf, 5, 0), -EFBIG);
	assert_int_equal(bs_fs_unlink(fs, "/d/f"), 0);
	close_ok(fs);
}

static void max_sizes(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *dev = th_dev(ctx, "m", "mem:64M");
	struct ext2_inode blockmap = { 0 }, extents = { 0 };
	struct bs_fs *fs;

	extents.i_flags = EXT4_EXTENTS_FL;
	assert_int_equal(bs_fs_mkfs(dev, NULL), 0);
	fs = open_rw(dev);
	/* 4 KiB blocks, huge_file: the kernel's s_maxbytes, s_bitmap_maxbytes */
	assert_int_equal(fs_max_bytes(fs), 17592186040320ull);
	assert_int_equal(fs_max_bytes_of(fs, &extents), 17592186040320ull);
	assert_int_equal(fs_max_bytes_of(fs, &blockmap), 4402345721856ull);
	/* without huge_file i_blocks counts 2^32 - 1 sectors: 2 TiB - 4 KiB */
	ext2fs_clear_feature_huge_file(fs->e2->super);
	assert_int_equal(fs_max_bytes(fs), 2199023251456ull);
	assert_true(fs_max_bytes_of(fs, &blockmap) < 2199023251456ull);
	ext2fs_set_feature_huge_file(fs->e2->super);
	close_ok(fs);
}

/* fallocate WRITE_ZEROES refused with the core's one reason (bs_caps). */
static void write_zeroes_reason(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *dev = th_dev(ctx, "m", "mem:32M,zeroes=write");
	char why[BS_CAPS_WHY], want[BS_CAPS_WHY + 64];
	struct bs_fs *fs;
	uint32_t f;

	assert_int_equal(bs_fs_mkfs(dev, NULL), 0);
	fs = open_rw(dev);
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &f), 0);
	assert_int_equal(bs_fs_fallocate(fs, f, BS_FALLOC_WRITE_ZEROES, 0,
					 4096), -EOPNOTSUPP);
	bs_caps_why_no_unmap(dev, why, sizeof(why));
	assert_true(why[0]);
	snprintf(want, sizeof(want), "m: ext4: fallocate: write zeroes: %s",
		 why);
	assert_string_equal(bs_last_error(), want);
	close_ok(fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(damaged_images, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(bad_geometry_refused_ro,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(blocks_past_device,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(damaged_read_only_prints_nothing,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(clean_image_has_no_damage,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(trailing_slash, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(huge_size, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(max_sizes, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(write_zeroes_reason,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
