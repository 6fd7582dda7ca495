/* SPDX-License-Identifier: MIT */
/* `blkstack -s SOCKET ...`: the one point where commands go to blkstackd. */
#ifndef BLKSTACK_CLI_REMOTE_H
#define BLKSTACK_CLI_REMOTE_H

/*
 * Send the command argv[0..argc) to the daemon listening on the control
 * socket @sock, copy its output to stdout/stderr and return its exit code
 * (0 ok, 1 failed, 2 usage).
 */
int run_remote(const char *sock, int argc, char **argv);

#endif
