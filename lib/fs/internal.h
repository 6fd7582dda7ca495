/* SPDX-License-Identifier: MIT */
/* The filesystem layer's internals (not a public API). */
#ifndef BLKSTACK_FS_INTERNAL_H
#define BLKSTACK_FS_INTERNAL_H

#include <stddef.h>

#include <ext2fs/ext2fs.h>

struct bs_dev;

/* The io_manager of io_blkstack.c. */
extern io_manager bs_fs_io_manager;

/*
 * Make @dev openable by bs_fs_io_manager under a new name ("blkstack:N",
 * written to @name); bs_fs_io_unregister() forgets it.
 */
int bs_fs_io_register(struct bs_dev *dev, char *name, size_t len);
void bs_fs_io_unregister(const char *name);

#endif
