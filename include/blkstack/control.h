/* SPDX-License-Identifier: MIT */
/*
 * The control protocol between `blkstack -s SOCKET` and blkstackd: one
 * command per connection over a UNIX stream socket. The client sends the
 * command's argv, the daemon runs it through the same command table as
 * the CLI (lib/cmd/) against its live devices and answers with the exit
 * code and what the command wrote to its output and error streams.
 *
 *   request:  "BSC1"  u32 length  argv[0] NUL argv[1] NUL ...
 *   reply:    "BSR1"  i32 exit code  u32 out length  u32 err length
 *             out bytes  err bytes
 *
 * Integers are big-endian. Requests are at most BS_CTL_MAX_REQUEST bytes
 * and BS_CTL_MAX_ARGS arguments; replies at most BS_CTL_MAX_REPLY.
 */
#ifndef BLKSTACK_CONTROL_H
#define BLKSTACK_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#define BS_CTL_MAX_REQUEST (64u << 10)
#define BS_CTL_MAX_ARGS 256
#define BS_CTL_MAX_REPLY (16u << 20)
#define BS_CTL_HDR 8		/* magic + length of a request */
#define BS_CTL_REPLY_HDR 16

/*
 * Encode argv into a request; *out is malloc'ed. -E2BIG when over the
 * limits.
 */
int bs_ctl_encode_request(int argc, char **argv, uint8_t **out,
			  size_t *len);

/*
 * Parse a request from @buf (@len bytes received so far). Returns 0 and
 * fills *argc and *argv (pointers into a malloc'ed copy; free(*argv)),
 * -EAGAIN when more bytes are needed, or -EPROTO / -E2BIG on bad input.
 */
int bs_ctl_parse_request(const uint8_t *buf, size_t len, int *argc,
			 char ***argv);

/* Encode a reply; *out is malloc'ed. */
int bs_ctl_encode_reply(int rc, const char *out, size_t outlen,
			const char *err, size_t errlen, uint8_t **buf,
			size_t *len);

/*
 * Client side: connect to @sock, run argv there, copy the daemon's output
 * to @out and @err. Returns the command's exit code (>= 0), or -errno
 * with bs_error() saying what failed (no daemon, protocol error).
 */
int bs_ctl_call(const char *sock, int argc, char **argv, int out_fd,
		int err_fd);

#endif
