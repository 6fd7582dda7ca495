/* SPDX-License-Identifier: MIT */
/*
 * The ext4 layer's extended attributes: set, get, list, replace and
 * remove with the system calls' flags and errors; small values in the
 * inode and larger ones in the xattr block (i_blocks, debugfs); the
 * largest value one block holds and -ENOSPC past it (no ea_inode); a
 * full inode and block; the namespaces and name rules; user. names on a
 * symbolic link; a read-only open; and an xattr block SHARED by two
 * inodes (refcount 2, as the kernel makes them): unlink of one keeps it
 * for the other, a change copies it, the last reference frees it.
 * e2fsck -fn clean after each.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ext2fs/ext2fs.h>

#include <blkstack/fs.h>

#include "helpers/fsth.h"
#include "helpers/th.h"

static void want_value(struct bs_fs *fs, uint32_t ino, const char *name,
			 const void *want, size_t wlen)
{
	char buf[4096];
	size_t len = 0;

	if (bs_fs_getxattr(fs, ino, name, buf, sizeof(buf), &len))
		fail_msg("getxattr %s: %s", name, bs_last_error());
	assert_int_equal(len, wlen);
	assert_memory_equal(buf, want, wlen);
}

/* The names of @ino, joined by ',' (sorted as libext2fs keeps them). */
static void names_of(struct bs_fs *fs, uint32_t ino, char *out, size_t cap)
{
	char buf[4096];
	size_t len = 0, i;

	assert_int_equal(bs_fs_listxattr(fs, ino, buf, sizeof(buf), &len), 0);
	out[0] = '\0';
	for (i = 0; i < len; i += strlen(buf + i) + 1) {
		if (out[0])
			strncat(out, ",", cap - strlen(out) - 1);
		strncat(out, buf + i, cap - strlen(out) - 1);
	}
}

static bool has_name(struct bs_fs *fs, uint32_t ino, const char *name)
{
	char buf[4096];
	size_t len = 0, i;

	assert_int_equal(bs_fs_listxattr(fs, ino, buf, sizeof(buf), &len), 0);
	for (i = 0; i < len; i += strlen(buf + i) + 1)
		if (!strcmp(buf + i, name))
			return true;
	return false;
}

static void basics(void **state)
{
	struct fsth *x = *state;
	struct bs_fs_stat st0, st1;
	char buf[64], name[300];
	uint32_t f, d;
	size_t len = 0;

	assert_int_equal(bs_fs_create(x->fs, "/f", 0644, &f), 0);
	assert_int_equal(bs_fs_mkdir(x->fs, "/d", 0755, &d), 0);
	/* nothing yet */
	assert_int_equal(bs_fs_listxattr(x->fs, f, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 0);
	assert_int_equal(bs_fs_getxattr(x->fs, f, "user.a", buf, sizeof(buf),
					&len), -ENODATA);
	/* set moves the ctime */
	assert_int_equal(bs_fs_stat(x->fs, f, &st0), 0);
	usleep(2000);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.a", "one", 3, 0), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st1), 0);
	assert_true(st1.ctime > st0.ctime || (st1.ctime == st0.ctime &&
					      st1.ctime_ns > st0.ctime_ns));
	want_value(x->fs, f, "user.a", "one", 3);
	/* create / replace */
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.a", "two", 3,
					BS_FS_XATTR_CREATE), -EEXIST);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.b", "two", 3,
					BS_FS_XATTR_REPLACE), -ENODATA);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.a", "three", 5,
					BS_FS_XATTR_REPLACE), 0);
	want_value(x->fs, f, "user.a", "three", 5);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.b", "", 0,
					BS_FS_XATTR_CREATE), 0);
	want_value(x->fs, f, "user.b", "", 0);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.a", "x", 1,
					BS_FS_XATTR_CREATE |
					BS_FS_XATTR_REPLACE), -EINVAL);
	/* the other namespaces, and a directory */
	assert_int_equal(bs_fs_setxattr(x->fs, f, "trusted.t", "tv", 2, 0), 0);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "security.s", "sv", 2, 0), 0);
	assert_int_equal(bs_fs_setxattr(x->fs, d, "user.dir", "dv", 2, 0), 0);
	names_of(x->fs, f, name, sizeof(name));
	assert_true(has_name(x->fs, f, "user.a"));
	assert_true(has_name(x->fs, f, "user.b"));
	assert_true(has_name(x->fs, f, "trusted.t"));
	assert_true(has_name(x->fs, f, "security.s"));
	assert_int_equal(strlen(name), strlen("user.a,user.b,trusted.t,"
					      "security.s"));
	/* lengths only, and a short buffer */
	assert_int_equal(bs_fs_getxattr(x->fs, f, "user.a", NULL, 0, &len), 0);
	assert_int_equal(len, 5);
	assert_int_equal(bs_fs_getxattr(x->fs, f, "user.a", buf, 4, &len),
			 -ERANGE);
	assert_int_equal(len, 5);
	assert_int_equal(bs_fs_listxattr(x->fs, f, NULL, 0, &len), 0);
	assert_int_equal(len, strlen(name) + 1);
	assert_int_equal(bs_fs_listxattr(x->fs, f, buf, 8, &len), -ERANGE);
	/* names */
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.", "v", 1, 0), -EINVAL);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "other.x", "v", 1, 0),
			 -EOPNOTSUPP);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "system.posix_acl_access",
					"v", 1, 0), -EOPNOTSUPP);
	assert_int_equal(bs_fs_getxattr(x->fs, f, "nons", buf, sizeof(buf),
					&len), -EOPNOTSUPP);
	memset(name, 'n', sizeof(name));
	memcpy(name, "user.", 5);
	name[255] = '\0';
	assert_int_equal(bs_fs_setxattr(x->fs, f, name, "v", 1, 0), 0);
	want_value(x->fs, f, name, "v", 1);
	assert_int_equal(bs_fs_removexattr(x->fs, f, name), 0);
	name[255] = 'n';
	name[256] = '\0';
	assert_int_equal(bs_fs_setxattr(x->fs, f, name, "v", 1, 0), -ERANGE);
	/* persisted, e2fsck clean */
	fsth_fsck_reopen(x);
	want_value(x->fs, f, "user.a", "three", 5);
	want_value(x->fs, f, "trusted.t", "tv", 2);
	want_value(x->fs, f, "security.s", "sv", 2);
	want_value(x->fs, d, "user.dir", "dv", 2);
	/* remove */
	assert_int_equal(bs_fs_removexattr(x->fs, f, "user.a"), 0);
	assert_int_equal(bs_fs_removexattr(x->fs, f, "user.a"), -ENODATA);
	assert_int_equal(bs_fs_getxattr(x->fs, f, "user.a", buf, sizeof(buf),
					&len), -ENODATA);
	assert_false(has_name(x->fs, f, "user.a"));
	assert_true(has_name(x->fs, f, "user.b"));
	fsth_fsck_reopen(x);
	/* read-only: reads, no changes */
	fsth_close(x);
	fsth_open(x, BS_FS_RDONLY);
	want_value(x->fs, f, "trusted.t", "tv", 2);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.c", "v", 1, 0), -EROFS);
	assert_int_equal(bs_fs_removexattr(x->fs, f, "user.b"), -EROFS);
	fsth_close(x);
	fsth_open(x, 0);
	/* a removed inode */
	assert_int_equal(bs_fs_unlink(x->fs, "/f"), 0);
	assert_int_equal(bs_fs_getxattr(x->fs, f, "user.b", buf, sizeof(buf),
					&len), -ENOENT);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.b", "v", 1, 0),
			 -ENOENT);
	fsth_fsck_reopen(x);
}

/* user. names are for regular files and directories (the kernel's rule) */
static void symlink_user(void **state)
{
	struct fsth *x = *state;
	uint32_t s;
	char buf[8];
	size_t len;

	assert_int_equal(bs_fs_symlink(x->fs, "/s", "target", &s), 0);
	assert_int_equal(bs_fs_setxattr(x->fs, s, "user.x", "v", 1, 0), -EPERM);
	assert_int_equal(bs_fs_removexattr(x->fs, s, "user.x"), -EPERM);
	assert_int_equal(bs_fs_getxattr(x->fs, s, "user.x", buf, sizeof(buf),
					&len), -ENODATA);
	assert_int_equal(bs_fs_setxattr(x->fs, s, "trusted.x", "v", 1, 0), 0);
	want_value(x->fs, s, "trusted.x", "v", 1);
	fsth_fsck_reopen(x);
}

/* debugfs "stat" of @path on the closed image: its "File ACL:" block */
static unsigned long long acl_block(struct fsth *x, const char *path)
{
	char cmd[256], out[8192], *p;

	snprintf(cmd, sizeof(cmd), "stat %s", path);
	fsth_debugfs(x, cmd, out, sizeof(out));
	p = strstr(out, "File ACL: ");
	assert_non_null(p);
	return strtoull(p + 10, NULL, 10);
}

static void inode_and_block(void **state)
{
	struct fsth *x = *state;
	struct bs_fs_info before, after;
	struct bs_fs_stat st;
	char big[4096], small[40], n[32];
	uint32_t f;
	size_t max = 4096 - 32 - 4 - 16 - 4; /* header, end, entry "big" */
	int i, err;

	th_fill(big, sizeof(big), 7);
	memset(small, 's', sizeof(small));
	assert_int_equal(bs_fs_create(x->fs, "/f", 0644, &f), 0);
	assert_int_equal(bs_fs_info(x->fs, &before), 0);
	/* a small one stays in the inode: no block */
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.s", small, 20, 0), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), 0);
	assert_int_equal(st.blocks, 0);
	fsth_close(x);
	assert_int_equal(acl_block(x, "/f"), 0);
	fsth_fsck_reopen(x);
	/* a larger one goes to the block */
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.big", big, 1000, 0), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), 0);
	assert_int_equal(st.blocks, 8);
	fsth_close(x);
	assert_true(acl_block(x, "/f") != 0);
	fsth_fsck_reopen(x);
	want_value(x->fs, f, "user.big", big, 1000);
	want_value(x->fs, f, "user.s", small, 20);
	/* the largest value one block holds, and one word more */
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.big", big, max, 0), 0);
	want_value(x->fs, f, "user.big", big, max);
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.big", big, max + 1, 0),
			 -ENOSPC);
	assert_non_null(strstr(bs_last_error(), "ea_inode"));
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.huge", big, 65536, 0),
			 -ENOSPC);
	want_value(x->fs, f, "user.big", big, max);
	/* the block is full now: another that fits neither is -ENOSPC */
	assert_int_equal(bs_fs_setxattr(x->fs, f, "user.more", big, 200, 0),
			 -ENOSPC);
	assert_null(strstr(bs_last_error(), "ea_inode"));
	fsth_fsck_reopen(x);
	/* removing the block's last one frees the block */
	assert_int_equal(bs_fs_removexattr(x->fs, f, "user.big"), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), 0);
	assert_int_equal(st.blocks, 0);
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_info(x->fs, &after), 0);
	assert_int_equal(after.free_blocks, before.free_blocks);
	/* many names: the inode fills, then the block, then -ENOSPC */
	for (i = 0, err = 0; i < 200 && !err; i++) {
		snprintf(n, sizeof(n), "user.n%03d", i);
		err = bs_fs_setxattr(x->fs, f, n, big, 64, 0);
	}
	assert_int_equal(err, -ENOSPC);
	assert_true(i > 20);
	fsth_fsck_reopen(x);
	want_value(x->fs, f, "user.n000", big, 64);
	snprintf(n, sizeof(n), "user.n%03d", i - 2);
	want_value(x->fs, f, n, big, 64);
	/* the file goes, its block with it */
	assert_int_equal(bs_fs_unlink(x->fs, "/f"), 0);
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_info(x->fs, &after), 0);
	assert_int_equal(after.free_blocks, before.free_blocks);
}

/*
 * Make @b share @a's xattr block, as the kernel does for identical
 * ones: @b's i_file_acl = the block, its i_blocks one block more, the
 * block's refcount + 1. On the closed image, through libext2fs.
 */
static void share_block(struct fsth *x, uint32_t a, uint32_t b)
{
	ext2_filsys e2;
	struct ext2_inode ia, ib;
	blk64_t blk;
	__u32 refs = 0;

	assert_int_equal(ext2fs_open(x->path, EXT2_FLAG_RW | EXT2_FLAG_64BITS,
				     0, 0, unix_io_manager, &e2), 0);
	assert_int_equal(ext2fs_read_inode(e2, a, &ia), 0);
	assert_int_equal(ext2fs_read_inode(e2, b, &ib), 0);
	blk = ext2fs_file_acl_block(e2, &ia);
	assert_true(blk != 0);
	assert_int_equal(ext2fs_file_acl_block(e2, &ib), 0);
	assert_int_equal(ext2fs_adjust_ea_refcount3(e2, blk, NULL, 1, &refs,
						    b), 0);
	assert_int_equal(refs, 2);
	ext2fs_file_acl_block_set(e2, &ib, blk);
	assert_int_equal(ext2fs_iblk_add_blocks(e2, &ib, 1), 0);
	assert_int_equal(ext2fs_write_inode(e2, b, &ib), 0);
	assert_int_equal(ext2fs_close_free(&e2), 0);
}

/* The refcount of xattr block @blk on the closed image. */
static unsigned refcount_of(struct fsth *x, blk64_t blk, bool *in_use)
{
	struct ext2_ext_attr_header *h;
	ext2_filsys e2;
	char *buf;
	unsigned r;

	assert_int_equal(ext2fs_open(x->path, EXT2_FLAG_64BITS, 0, 0,
				     unix_io_manager, &e2), 0);
	assert_int_equal(ext2fs_read_block_bitmap(e2), 0);
	*in_use = ext2fs_test_block_bitmap2(e2->block_map, blk);
	buf = malloc(e2->blocksize);
	assert_int_equal(ext2fs_read_ext_attr3(e2, blk, buf, 0), 0);
	h = (struct ext2_ext_attr_header *)buf;
	r = h->h_refcount;
	free(buf);
	ext2fs_close_free(&e2);
	return r;
}

static void shared_block(void **state)
{
	struct fsth *x = *state;
	struct bs_fs_info before, after;
	char big[1000];
	uint32_t a, b, c;
	unsigned long long blk, blk2;
	bool used;

	th_fill(big, sizeof(big), 11);
	assert_int_equal(bs_fs_info(x->fs, &before), 0);
	assert_int_equal(bs_fs_create(x->fs, "/a", 0644, &a), 0);
	assert_int_equal(bs_fs_create(x->fs, "/b", 0644, &b), 0);
	assert_int_equal(bs_fs_create(x->fs, "/c", 0644, &c), 0);
	assert_int_equal(bs_fs_setxattr(x->fs, a, "user.big", big, sizeof(big),
					0), 0);
	fsth_close(x);
	blk = acl_block(x, "/a");
	share_block(x, a, b);
	/* the sharing is valid ext4 */
	fsth_fsck_reopen(x);
	want_value(x->fs, b, "user.big", big, sizeof(big));
	/* unlink of one name keeps the block for the other */
	assert_int_equal(bs_fs_unlink(x->fs, "/a"), 0);
	fsth_close(x);
	assert_int_equal(refcount_of(x, blk, &used), 1);
	assert_true(used);
	assert_int_equal(acl_block(x, "/b"), blk);
	fsth_fsck_reopen(x);
	want_value(x->fs, b, "user.big", big, sizeof(big));
	/* shared again: a change copies the block (b keeps its own) */
	fsth_close(x);
	share_block(x, b, c);
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_setxattr(x->fs, c, "user.more", "m", 1, 0), 0);
	fsth_close(x);
	blk2 = acl_block(x, "/c");
	assert_true(blk2 != 0 && blk2 != blk);
	assert_int_equal(acl_block(x, "/b"), blk);
	assert_int_equal(refcount_of(x, blk, &used), 1);
	assert_int_equal(refcount_of(x, blk2, &used), 1);
	fsth_fsck_reopen(x);
	want_value(x->fs, b, "user.big", big, sizeof(big));
	want_value(x->fs, c, "user.big", big, sizeof(big));
	want_value(x->fs, c, "user.more", "m", 1);
	assert_int_equal(bs_fs_getxattr(x->fs, b, "user.more", big, 1,
					&(size_t){ 0 }), -ENODATA);
	/* shared a third time: removing the last name of one drops its ref */
	assert_int_equal(bs_fs_removexattr(x->fs, c, "user.more"), 0);
	assert_int_equal(bs_fs_removexattr(x->fs, c, "user.big"), 0);
	fsth_close(x);
	assert_int_equal(acl_block(x, "/c"), 0);
	share_block(x, b, c);
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_removexattr(x->fs, c, "user.big"), 0);
	fsth_close(x);
	assert_int_equal(acl_block(x, "/c"), 0);
	assert_int_equal(refcount_of(x, blk, &used), 1);
	assert_true(used);
	fsth_fsck_reopen(x);
	want_value(x->fs, b, "user.big", big, sizeof(big));
	/* the last reference frees it */
	assert_int_equal(bs_fs_unlink(x->fs, "/b"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/c"), 0);
	fsth_close(x);
	refcount_of(x, blk, &used);
	assert_false(used);
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_info(x->fs, &after), 0);
	assert_int_equal(after.free_blocks, before.free_blocks);
	assert_int_equal(after.free_inodes, before.free_inodes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(basics, fsth_setup, fsth_teardown),
		cmocka_unit_test_setup_teardown(symlink_user, fsth_setup, fsth_teardown),
		cmocka_unit_test_setup_teardown(inode_and_block, fsth_setup, fsth_teardown),
		cmocka_unit_test_setup_teardown(shared_block, fsth_setup, fsth_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
