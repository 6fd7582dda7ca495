/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include <blkstack/export.h>

#include "export/nfs/nfs.h"
#include "nfs_th.h"

static struct nfs_server *new_server(void)
{
	struct nfs_server *srv = calloc(1, sizeof(*srv));

	if (!srv)
		return NULL;
	pthread_mutex_init(&srv->lock, NULL);
	srv->refs = 1;
	srv->lease = 60;
	srv->grace = 0;
	srv->boot = nfs_now() - 1;
	srv->export_id = 7;
	srv->boot_tag = 0x1234;
	return srv;
}

static void drop(struct nfs_server *srv)
{
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

struct nfs_server *nfs_th_dir_server(const char *dir)
{
	struct nfs_server *srv = new_server();

	if (srv && nfs_backend_dir_open(&srv->be, dir)) {
		drop(srv);
		return NULL;
	}
	return srv;
}

struct nfs_server *nfs_th_ext4_server(struct bs_dev *dev)
{
	struct nfs_server *srv = new_server();
	struct bs_export_unit u;

	if (!srv)
		return NULL;
	/* only the device and the mode are read; no claim to hand over */
	memset(&u, 0, sizeof(u));
	u.dev = dev;
	if (nfs_backend_ext4_open(&srv->be, &u)) {
		drop(srv);
		return NULL;
	}
	return srv;
}
