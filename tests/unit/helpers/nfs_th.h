/* SPDX-License-Identifier: MIT */
/*
 * An NFS server for unit tests: the directory backend over an existing
 * host directory, with the settings the NFS unit tests share (60 s
 * lease, no grace period, export 7, boot tag 0x1234, booted a second
 * ago). Released with nfs_server_put().
 */
#ifndef BLKSTACK_TEST_NFS_TH_H
#define BLKSTACK_TEST_NFS_TH_H

struct nfs_server;

/* NULL when @dir cannot be opened as a directory export. */
struct nfs_server *nfs_th_dir_server(const char *dir);

#endif
