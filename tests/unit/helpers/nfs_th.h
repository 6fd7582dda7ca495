/* SPDX-License-Identifier: MIT */
/*
 * An NFS server for unit tests: the directory backend over an existing
 * host directory, or the ext4 backend on a device, with the settings the NFS unit tests share (60 s
 * lease, no grace period, export 7, boot tag 0x1234, booted a second
 * ago). Released with nfs_server_put().
 */
#ifndef BLKSTACK_TEST_NFS_TH_H
#define BLKSTACK_TEST_NFS_TH_H

struct bs_dev;
struct nfs_server;

/* NULL when @dir cannot be opened as a directory export. */
struct nfs_server *nfs_th_dir_server(const char *dir);
/* The ext4 on @dev (made by bs_fs_mkfs), read-write; NULL on failure. */
struct nfs_server *nfs_th_ext4_server(struct bs_dev *dev);

#endif
