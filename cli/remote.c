/* SPDX-License-Identifier: MIT */
/*
 * The forwarding point of `blkstack -s SOCKET COMMAND ...`: blkstackd runs
 * the very same command table (lib/cmd/) against its live devices; the
 * command's output and exit code come back over the control socket.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/control.h>

#include "remote.h"

int run_remote(const char *sock, int argc, char **argv)
{
	int rc;

	fflush(stdout);
	rc = bs_ctl_call(sock, argc, argv, STDOUT_FILENO, STDERR_FILENO);
	if (rc < 0) {
		const char *msg = bs_last_error();
		fprintf(stderr, "blkstack: %s\n", *msg ? msg : strerror(-rc));
		return 1;
	}
	return rc;
}
