/* SPDX-License-Identifier: MIT */
/*
 * A fixture for the ext4 layer's tests: a 64 MiB image file in a fresh
 * directory under /var/tmp, made by bs_fs_mkfs and open read-write, with
 * e2fsck -fn and debugfs on the closed image.
 */
#ifndef BLKSTACK_TEST_FSTH_H
#define BLKSTACK_TEST_FSTH_H

#include <stddef.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>

struct fsth {
	struct bs_ctx *ctx;
	struct bs_dev *dev;
	struct bs_fs *fs;	/* NULL while closed */
	char dir[64], path[128];	/* the directory, the image */
};

/* cmocka fixtures: *state is a struct fsth */
int fsth_setup(void **state);
int fsth_teardown(void **state);
/* bs_fs_close() (failing the test on an error) / bs_fs_open() */
void fsth_close(struct fsth *x);
void fsth_open(struct fsth *x, unsigned flags);
/* Close, e2fsck -fn (its output shown on failure), open read-write. */
void fsth_fsck_reopen(struct fsth *x);
/* debugfs -R @cmd on the closed image: its output in @out */
void fsth_debugfs(struct fsth *x, const char *cmd, char *out, size_t cap);

#endif
