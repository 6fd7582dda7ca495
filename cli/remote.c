/* SPDX-License-Identifier: MIT */
/*
 * The forwarding point of `blkstack -s SOCKET COMMAND ...`. blkstackd runs
 * the very same command table (lib/cmd/) against its live devices; this
 * function is where the CLI hands argv to it over the control socket.
 * Until the daemon's control protocol exists it refuses clearly.
 */
#include <stdio.h>

#include "remote.h"

int run_remote(const char *sock, int argc, char **argv)
{
	(void)sock;
	(void)argc;
	(void)argv;
	fprintf(stderr, "blkstack: -s: no daemon support yet\n");
	return 1;
}
