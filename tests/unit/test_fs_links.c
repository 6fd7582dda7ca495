/* SPDX-License-Identifier: MIT */
/*
 * The ext4 layer's symbolic links, hard links and attributes: fast and
 * block symlinks up to 4095 bytes, readlink, link counts, a link to a
 * directory refused, unlink of a linked file and of a symlink, chmod
 * keeping the type, chown's set-ID rule, times with nanoseconds, device
 * nodes (old and new number encodings), fifos and sockets, e2fsck
 * -fn clean after each, and the kernel's view of the same through
 * debugfs (fast or block symlink, nanoseconds on disk).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/fs.h>

#include "helpers/fsth.h"
#include "helpers/th.h"

static void expect_link(struct bs_fs *fs, const char *path, const char *want)
{
	char buf[4096];
	uint32_t ino;
	size_t len = 0;

	assert_int_equal(bs_fs_lookup(fs, path, &ino), 0);
	assert_int_equal(bs_fs_readlink(fs, ino, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(buf, want, len);
}

static uint32_t nlink_of(struct bs_fs *fs, const char *path)
{
	struct bs_fs_stat st;
	uint32_t ino;

	assert_int_equal(bs_fs_lookup(fs, path, &ino), 0);
	assert_int_equal(bs_fs_stat(fs, ino, &st), 0);
	return st.nlink;
}

/* 4095 bytes of a path, NUL-terminated */
static void fill_long(char *s)
{
	int i;

	for (i = 0; i < 4095; i++)
		s[i] = i % 8 == 7 ? '/' : (char)('a' + i % 7);
	s[4095] = '\0';
}

static void symlinks(void **state)
{
	struct fsth *x = *state;
	struct bs_fs_info before, after;
	struct bs_fs_stat st;
	char lng[4097], out[8192], small[8];
	uint32_t ino, f;
	size_t len;

	assert_int_equal(bs_fs_info(x->fs, &before), 0);
	assert_int_equal(bs_fs_create(x->fs, "/f", 0644, &f), 0);
	/* short: in the inode, no block */
	assert_int_equal(bs_fs_symlink(x->fs, "/s", "f", &ino), 0);
	assert_int_equal(bs_fs_stat(x->fs, ino, &st), 0);
	assert_int_equal(st.mode, S_IFLNK | 0777);
	assert_int_equal(st.size, 1);
	assert_int_equal(st.blocks, 0);
	assert_int_equal(st.nlink, 1);
	expect_link(x->fs, "/s", "f");
	/* 59 bytes still fast, 60 takes a block */
	memset(lng, 'a', sizeof(lng));
	lng[59] = '\0';
	assert_int_equal(bs_fs_symlink(x->fs, "/s59", lng, &ino), 0);
	assert_int_equal(bs_fs_stat(x->fs, ino, &st), 0);
	assert_int_equal(st.blocks, 0);
	expect_link(x->fs, "/s59", lng);
	memset(lng, 'b', sizeof(lng));
	lng[60] = '\0';
	assert_int_equal(bs_fs_symlink(x->fs, "/s60", lng, &ino), 0);
	assert_int_equal(bs_fs_stat(x->fs, ino, &st), 0);
	assert_int_equal(st.blocks, 8);
	assert_int_equal(st.size, 60);
	expect_link(x->fs, "/s60", lng);
	/* the longest: PATH_MAX - 1, a path of many components */
	fill_long(lng);
	assert_int_equal(bs_fs_symlink(x->fs, "/slong", lng, &ino), 0);
	expect_link(x->fs, "/slong", lng);
	/* readlink into a short buffer: truncated, whole length told */
	len = 0;
	assert_int_equal(bs_fs_readlink(x->fs, ino, small, sizeof(small), &len),
			 0);
	assert_int_equal(len, 4095);
	assert_memory_equal(small, lng, sizeof(small));
	/* refusals */
	lng[4095] = 'x';
	lng[4096] = '\0';
	assert_int_equal(bs_fs_symlink(x->fs, "/toolong", lng, NULL),
			 -ENAMETOOLONG);
	assert_int_equal(bs_fs_symlink(x->fs, "/empty", "", NULL), -ENOENT);
	assert_int_equal(bs_fs_symlink(x->fs, "/s", "x", NULL), -EEXIST);
	assert_int_equal(bs_fs_symlink(x->fs, "/f/x", "x", NULL), -ENOTDIR);
	assert_int_equal(bs_fs_readlink(x->fs, f, out, sizeof(out), &len),
			 -EINVAL);
	assert_int_equal(bs_fs_readlink(x->fs, BS_FS_ROOT_INO, out,
					sizeof(out), &len), -EINVAL);
	/* no symlink is followed: a path through one is ENOTDIR */
	assert_int_equal(bs_fs_mkdir(x->fs, "/d", 0755, NULL), 0);
	assert_int_equal(bs_fs_symlink(x->fs, "/ld", "d", NULL), 0);
	assert_int_equal(bs_fs_lookup(x->fs, "/ld/x", &ino), -ENOTDIR);
	/* reads and writes are for regular files */
	assert_int_equal(bs_fs_lookup(x->fs, "/s60", &ino), 0);
	assert_int_equal(bs_fs_read(x->fs, ino, out, 10, 0), -EINVAL);
	assert_int_equal(bs_fs_truncate(x->fs, ino, 0), -EINVAL);
	/* a symlink renamed stays one */
	assert_int_equal(bs_fs_rename(x->fs, "/s60", "/d/s60"), 0);
	memset(lng, 'b', 60);
	lng[60] = '\0';
	expect_link(x->fs, "/d/s60", lng);
	fsth_fsck_reopen(x);
	/* what the kernel reads: a fast link in the inode, a block one */
	fsth_close(x);
	fsth_debugfs(x, "stat /s", out, sizeof(out));
	assert_non_null(strstr(out, "Fast link dest: \"f\""));
	fsth_debugfs(x, "stat /d/s60", out, sizeof(out));
	assert_non_null(strstr(out, "Type: symlink"));
	assert_null(strstr(out, "Fast link dest"));
	assert_non_null(strstr(out, "EXTENTS"));
	fsth_open(x, 0);
	fill_long(lng);
	expect_link(x->fs, "/slong", lng);
	/* unlink: the block of a long one comes back */
	assert_int_equal(bs_fs_unlink(x->fs, "/slong"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/d/s60"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/s59"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/s"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/ld"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/d"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/f"), 0);
	assert_int_equal(bs_fs_lookup(x->fs, "/s", &ino), -ENOENT);
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_info(x->fs, &after), 0);
	assert_int_equal(after.free_blocks, before.free_blocks);
	assert_int_equal(after.free_inodes, before.free_inodes);
}

static void hard_links(void **state)
{
	struct fsth *x = *state;
	struct bs_fs_info before, after;
	struct bs_fs_stat st, dst;
	uint32_t f, d, ino, dirino;
	char buf[16];

	assert_int_equal(bs_fs_mkdir(x->fs, "/d", 0755, &d), 0);
	assert_int_equal(bs_fs_info(x->fs, &before), 0);
	assert_int_equal(bs_fs_create(x->fs, "/f", 0644, &f), 0);
	assert_int_equal(bs_fs_write(x->fs, f, "hello, links", 12, 0), 12);
	assert_int_equal(bs_fs_stat(x->fs, d, &dst), 0);
	assert_int_equal(bs_fs_link(x->fs, "/f", "/d/g"), 0);
	assert_int_equal(bs_fs_lookup(x->fs, "/d/g", &ino), 0);
	assert_int_equal(ino, f);
	assert_int_equal(nlink_of(x->fs, "/f"), 2);
	assert_int_equal(bs_fs_link_at(x->fs, f, BS_FS_ROOT_INO, "h"), 0);
	assert_int_equal(nlink_of(x->fs, "/h"), 3);
	/* the directory's own count is not the file's business */
	assert_int_equal(bs_fs_stat(x->fs, d, &st), 0);
	assert_int_equal(st.nlink, dst.nlink);
	/* refusals */
	assert_int_equal(bs_fs_link(x->fs, "/d", "/d2"), -EPERM);
	assert_int_equal(bs_fs_link(x->fs, "/", "/r"), -EPERM);
	assert_int_equal(bs_fs_link(x->fs, "/f", "/h"), -EEXIST);
	assert_int_equal(bs_fs_link(x->fs, "/nope", "/n"), -ENOENT);
	assert_int_equal(bs_fs_link(x->fs, "/f", "/nodir/n"), -ENOENT);
	assert_int_equal(nlink_of(x->fs, "/f"), 3);
	fsth_fsck_reopen(x);
	/* unlink one name: the inode and its data stay */
	assert_int_equal(bs_fs_unlink(x->fs, "/f"), 0);
	assert_int_equal(nlink_of(x->fs, "/h"), 2);
	assert_int_equal(bs_fs_read(x->fs, f, buf, 12, 0), 12);
	assert_memory_equal(buf, "hello, links", 12);
	fsth_fsck_reopen(x);
	/* rename over another name of the same inode: nothing happens */
	assert_int_equal(bs_fs_rename(x->fs, "/h", "/d/g"), 0);
	assert_int_equal(nlink_of(x->fs, "/h"), 2);
	/* rename a link over a different file: that one is freed */
	assert_int_equal(bs_fs_create(x->fs, "/other", 0644, NULL), 0);
	assert_int_equal(bs_fs_rename(x->fs, "/h", "/other"), 0);
	assert_int_equal(nlink_of(x->fs, "/other"), 2);
	fsth_fsck_reopen(x);
	/* links of a symlink count too */
	assert_int_equal(bs_fs_symlink(x->fs, "/d/sl", "other", &ino), 0);
	assert_int_equal(bs_fs_link(x->fs, "/d/sl", "/sl2"), 0);
	assert_int_equal(nlink_of(x->fs, "/sl2"), 2);
	assert_int_equal(bs_fs_unlink(x->fs, "/d/sl"), 0);
	expect_link(x->fs, "/sl2", "other");
	assert_int_equal(bs_fs_unlink(x->fs, "/sl2"), 0);
	/* the last names: the inode and its block are freed */
	assert_int_equal(bs_fs_unlink(x->fs, "/d/g"), 0);
	assert_int_equal(nlink_of(x->fs, "/other"), 1);
	assert_int_equal(bs_fs_unlink(x->fs, "/other"), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), -ENOENT);
	dirino = 0;
	assert_int_equal(bs_fs_lookup(x->fs, "/d", &dirino), 0);
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_info(x->fs, &after), 0);
	assert_int_equal(after.free_blocks, before.free_blocks);
	assert_int_equal(after.free_inodes, before.free_inodes);
}

static void attributes(void **state)
{
	struct fsth *x = *state;
	struct bs_fs_setattr sa;
	struct bs_fs_stat st, st2;
	struct timespec t0;
	uint32_t f, d, l;
	char out[8192];

	assert_int_equal(bs_fs_create(x->fs, "/f", 0644, &f), 0);
	assert_int_equal(bs_fs_mkdir(x->fs, "/d", 0755, &d), 0);
	assert_int_equal(bs_fs_symlink(x->fs, "/l", "f", &l), 0);
	/* chmod keeps the type */
	memset(&sa, 0, sizeof(sa));
	sa.mask = BS_FS_SET_MODE;
	sa.mode = 04751;
	assert_int_equal(bs_fs_setattr(x->fs, f, &sa), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), 0);
	assert_int_equal(st.mode, S_IFREG | 04751);
	sa.mode = 0170700;	/* type bits given: ignored */
	assert_int_equal(bs_fs_setattr(x->fs, d, &sa), 0);
	assert_int_equal(bs_fs_stat(x->fs, d, &st), 0);
	assert_int_equal(st.mode, S_IFDIR | 0700);
	assert_int_equal(bs_fs_setattr(x->fs, l, &sa), -EOPNOTSUPP);
	/* chown: 32-bit ids; a non-directory loses set-user-ID */
	sa.mask = BS_FS_SET_UID | BS_FS_SET_GID;
	sa.uid = 100000;
	sa.gid = 70001;
	assert_int_equal(bs_fs_setattr(x->fs, f, &sa), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), 0);
	assert_int_equal(st.uid, 100000);
	assert_int_equal(st.gid, 70001);
	assert_int_equal(st.mode, S_IFREG | 0751);
	assert_int_equal(bs_fs_setattr(x->fs, l, &sa), 0);
	assert_int_equal(bs_fs_stat(x->fs, l, &st), 0);
	assert_int_equal(st.uid, 100000);
	/* times with nanoseconds; the ctime moves to now */
	clock_gettime(CLOCK_REALTIME, &t0);
	sa.mask = BS_FS_SET_ATIME | BS_FS_SET_MTIME;
	sa.atime = 1000000000;
	sa.atime_ns = 123456789;
	sa.mtime = 1234567890;
	sa.mtime_ns = 987654321;
	assert_int_equal(bs_fs_setattr(x->fs, f, &sa), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), 0);
	assert_int_equal(st.atime, 1000000000);
	assert_int_equal(st.atime_ns, 123456789);
	assert_int_equal(st.mtime, 1234567890);
	assert_int_equal(st.mtime_ns, 987654321);
	assert_true(st.ctime >= t0.tv_sec && st.ctime <= t0.tv_sec + 5);
	/* past 2038 (the epoch bits) and before 1970 */
	sa.mask = BS_FS_SET_MTIME;
	sa.mtime = 4000000000ll;
	sa.mtime_ns = 5;
	assert_int_equal(bs_fs_setattr(x->fs, d, &sa), 0);
	sa.mask = BS_FS_SET_ATIME;
	sa.atime = -1000;
	sa.atime_ns = 0;
	assert_int_equal(bs_fs_setattr(x->fs, d, &sa), 0);
	assert_int_equal(bs_fs_stat(x->fs, d, &st), 0);
	assert_int_equal(st.mtime, 4000000000ll);
	assert_int_equal(st.mtime_ns, 5);
	assert_int_equal(st.atime, -1000);
	/* refusals: nanoseconds and seconds out of range, nothing changed */
	sa.mask = BS_FS_SET_MTIME;
	sa.mtime = 1;
	sa.mtime_ns = 1000000000;
	assert_int_equal(bs_fs_setattr(x->fs, f, &sa), -EINVAL);
	sa.mtime_ns = 0;
	sa.mtime = (int64_t)1 << 40;
	assert_int_equal(bs_fs_setattr(x->fs, f, &sa), -EINVAL);
	assert_int_equal(bs_fs_stat(x->fs, f, &st2), 0);
	assert_int_equal(st2.mtime, 1234567890);
	/* "now": the server's time, atime only */
	sa.mask = BS_FS_SET_ATIME | BS_FS_SET_ATIME_NOW;
	assert_int_equal(bs_fs_setattr(x->fs, f, &sa), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st2), 0);
	assert_true(st2.atime >= t0.tv_sec && st2.atime <= t0.tv_sec + 5);
	assert_int_equal(st2.mtime, 1234567890);
	assert_int_equal(st2.mtime_ns, 987654321);
	/* every change moves the ctime, to the nanosecond */
	assert_true(st2.ctime > st.ctime ||
		    (st2.ctime == st.ctime && st2.ctime_ns > st.ctime_ns));
	assert_int_equal(bs_fs_write(x->fs, f, "x", 1, 0), 1);
	assert_int_equal(bs_fs_stat(x->fs, f, &st), 0);
	assert_true(st.ctime > st2.ctime ||
		    (st.ctime == st2.ctime && st.ctime_ns > st2.ctime_ns));
	assert_true(st.mtime >= t0.tv_sec);
	assert_int_equal(bs_fs_link(x->fs, "/f", "/f2"), 0);
	assert_int_equal(bs_fs_stat(x->fs, f, &st2), 0);
	assert_true(st2.ctime > st.ctime ||
		    (st2.ctime == st.ctime && st2.ctime_ns > st.ctime_ns));
	fsth_fsck_reopen(x);
	assert_int_equal(bs_fs_stat(x->fs, d, &st), 0);
	assert_int_equal(st.mtime, 4000000000ll);
	fsth_close(x);
	/* the on-disk fields, as the kernel will read them */
	fsth_debugfs(x, "stat /d", out, sizeof(out));
	assert_non_null(strstr(out, "Mode:  0700"));
	/* 4000000000 s: base 0xee6b2800, epoch 1; 5 ns: 5 << 2 | 1 */
	assert_non_null(strstr(out, "mtime: 0xee6b2800:00000015"));
	fsth_debugfs(x, "stat /f", out, sizeof(out));
	assert_non_null(strstr(out, "User: 100000   Group: 70001"));
	/* read-only: refused */
	assert_int_equal(bs_fs_open(x->dev, BS_FS_RDONLY, &x->fs), 0);
	sa.mask = BS_FS_SET_MODE;
	sa.mode = 0600;
	assert_int_equal(bs_fs_setattr(x->fs, f, &sa), -EROFS);
	assert_int_equal(bs_fs_symlink(x->fs, "/l2", "x", NULL), -EROFS);
	assert_int_equal(bs_fs_link(x->fs, "/f", "/f3"), -EROFS);
}

static void nodes(void **state)
{
	struct fsth *x = *state;
	struct bs_fs_stat st;
	uint32_t ino;
	char out[8192];

	assert_int_equal(bs_fs_mknod(x->fs, "/c", S_IFCHR | 0620, 4, 64, &ino),
			 0);
	assert_int_equal(bs_fs_stat(x->fs, ino, &st), 0);
	assert_int_equal(st.mode, S_IFCHR | 0620);
	assert_int_equal(st.rdev_major, 4);
	assert_int_equal(st.rdev_minor, 64);
	assert_int_equal(st.blocks, 0);
	/* past 8 bits: the new encoding */
	assert_int_equal(bs_fs_mknod(x->fs, "/b", S_IFBLK | 0600, 300, 70000,
				     &ino), 0);
	assert_int_equal(bs_fs_stat(x->fs, ino, &st), 0);
	assert_int_equal(st.rdev_major, 300);
	assert_int_equal(st.rdev_minor, 70000);
	assert_int_equal(bs_fs_mknod(x->fs, "/p", S_IFIFO | 0644, 0, 0, NULL),
			 0);
	assert_int_equal(bs_fs_mknod(x->fs, "/s", S_IFSOCK | 0755, 0, 0, NULL),
			 0);
	assert_int_equal(bs_fs_mknod(x->fs, "/r", S_IFREG | 0644, 0, 0, NULL),
			 -EINVAL);
	assert_int_equal(bs_fs_mknod(x->fs, "/big", S_IFBLK, 4096, 0, NULL),
			 -EINVAL);
	assert_int_equal(bs_fs_mknod(x->fs, "/p", S_IFIFO, 0, 0, NULL), -EEXIST);
	assert_int_equal(bs_fs_link(x->fs, "/p", "/p2"), 0);
	fsth_fsck_reopen(x);
	fsth_close(x);
	fsth_debugfs(x, "stat /b", out, sizeof(out));
	assert_non_null(strstr(out, "Type: block special"));
	assert_non_null(strstr(out, "Device major/minor number: 300:70000"));
	fsth_debugfs(x, "stat /c", out, sizeof(out));
	assert_non_null(strstr(out, "Device major/minor number: 04:64"));
	fsth_open(x, 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/c"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/b"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/p"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/p2"), 0);
	assert_int_equal(bs_fs_unlink(x->fs, "/s"), 0);
	fsth_fsck_reopen(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(symlinks, fsth_setup, fsth_teardown),
		cmocka_unit_test_setup_teardown(hard_links, fsth_setup, fsth_teardown),
		cmocka_unit_test_setup_teardown(attributes, fsth_setup, fsth_teardown),
		cmocka_unit_test_setup_teardown(nodes, fsth_setup, fsth_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
