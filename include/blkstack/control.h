/* SPDX-License-Identifier: MIT */
/*
 * The control protocol between `blkstack -s SOCKET` and blkstackd: one
 * command per connection over a UNIX stream socket. The client sends the
 * command's argv, the daemon runs it through the same command table as
 * the CLI (lib/cmd/) against its live devices and streams back what the
 * command writes to its output and error streams, then its exit code:
 *
 *   request:  "BSC1"  u32 length  argv[0] NUL argv[1] NUL ...
 *   reply:    "BSR2"  frame ...
 *   frame:    u8 kind  u32 length  payload
 *             kind 'o': bytes of the output stream (length 1..64 KiB)
 *             kind 'e': bytes of the error stream (length 1..64 KiB)
 *             kind 'x': the end; payload is the i32 exit code (length 4)
 *
 * Integers are big-endian. Requests are at most BS_CTL_MAX_REQUEST bytes
 * and BS_CTL_MAX_ARGS arguments. A reply has no size limit: the daemon
 * sends frames as the command writes and stops the command while the
 * client does not read (bounded memory on both sides). A reply that ends
 * without its 'x' frame is cut short, and the client says so and fails.
 */
#ifndef BLKSTACK_CONTROL_H
#define BLKSTACK_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#define BS_CTL_MAX_REQUEST (64u << 10)
#define BS_CTL_MAX_ARGS 256
#define BS_CTL_HDR 8		/* magic + length of a request */
#define BS_CTL_REPLY_MAGIC 4	/* "BSR2" before the first frame */
#define BS_CTL_FRAME_HDR 5	/* kind + length */
#define BS_CTL_MAX_FRAME (64u << 10)	/* payload of an 'o' / 'e' frame */

/* The frame kinds of a reply. */
#define BS_CTL_OUT 'o'
#define BS_CTL_ERR 'e'
#define BS_CTL_EXIT 'x'

/* The 4 bytes that begin every reply. */
extern const uint8_t bs_ctl_reply_magic[BS_CTL_REPLY_MAGIC];

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

/* Write the header of a frame of @kind with @len payload bytes to @hdr. */
void bs_ctl_frame_hdr(uint8_t hdr[BS_CTL_FRAME_HDR], int kind, uint32_t len);

/*
 * Check the frame header at @hdr: 0 with *kind and *len filled, or
 * -EPROTO (unknown kind, a payload over BS_CTL_MAX_FRAME, an empty data
 * frame, an exit frame whose length is not 4).
 */
int bs_ctl_parse_frame(const uint8_t hdr[BS_CTL_FRAME_HDR], int *kind,
		       uint32_t *len);

/*
 * Client side: connect to @sock, run argv there, copy the daemon's output
 * to @out and @err as it comes (nothing is held back). Returns the
 * command's exit code (>= 0), or -errno with bs_error() saying what failed (no daemon, protocol error, a reply
 * cut short, @out_fd not writable).
 */
int bs_ctl_call(const char *sock, int argc, char **argv, int out_fd,
		int err_fd);

#endif
