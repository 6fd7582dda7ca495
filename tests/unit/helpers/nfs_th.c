/* SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "export/nfs/nfs.h"
#include "nfs_th.h"

struct nfs_server *nfs_th_dir_server(const char *dir)
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
	if (nfs_backend_dir_open(&srv->be, dir)) {
		pthread_mutex_destroy(&srv->lock);
		free(srv);
		return NULL;
	}
	return srv;
}
