/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's wire format (see include/blkstack/control.h) and
 * its blocking client, used by `blkstack -s`.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/control.h>

static const uint8_t req_magic[4] = { 'B', 'S', 'C', '1' };
const uint8_t bs_ctl_reply_magic[BS_CTL_REPLY_MAGIC] = { 'B', 'S', 'R', '2' };
/* the reply of blkstackd before streaming: one block, at most 16 MiB */
static const uint8_t old_magic[4] = { 'B', 'S', 'R', '1' };

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

int bs_ctl_encode_request(int argc, char **argv, uint8_t **out, size_t *len)
{
	size_t n = 0, off;
	uint8_t *buf;
	int i;

	if (argc < 1 || argc > (int)BS_CTL_MAX_ARGS)
		return -E2BIG;
	for (i = 0; i < argc; i++) {
		n += strlen(argv[i]) + 1;
		if (n > BS_CTL_MAX_REQUEST)
			return -E2BIG;
	}
	buf = malloc(BS_CTL_HDR + n);
	if (!buf)
		return -ENOMEM;
	memcpy(buf, req_magic, 4);
	put32(buf + 4, (uint32_t)n);
	off = BS_CTL_HDR;
	for (i = 0; i < argc; i++) {
		size_t l = strlen(argv[i]) + 1;
		memcpy(buf + off, argv[i], l);
		off += l;
	}
	*out = buf;
	*len = off;
	return 0;
}

int bs_ctl_parse_request(const uint8_t *buf, size_t len, int *argc,
			 char ***argv)
{
	uint32_t n;
	char *copy, **v;
	size_t i, start;
	int count = 0;

	if (len < BS_CTL_HDR)
		return len && memcmp(buf, req_magic, len < 4 ? len : 4) ?
		       -EPROTO : -EAGAIN;
	if (memcmp(buf, req_magic, 4))
		return -EPROTO;
	n = get32(buf + 4);
	if (n > BS_CTL_MAX_REQUEST)
		return -E2BIG;
	if (len < BS_CTL_HDR + (size_t)n)
		return -EAGAIN;
	if (!n || buf[BS_CTL_HDR + n - 1] != '\0')
		return -EPROTO;
	for (i = 0; i < n; i++)
		if (!buf[BS_CTL_HDR + i])
			count++;
	if (count > (int)BS_CTL_MAX_ARGS)
		return -E2BIG;
	/* one block: the pointer array, then the strings */
	v = malloc((size_t)(count + 1) * sizeof(*v) + n);
	if (!v)
		return -ENOMEM;
	copy = (char *)(v + count + 1);
	memcpy(copy, buf + BS_CTL_HDR, n);
	count = 0;
	for (i = 0, start = 0; i < n; i++) {
		if (!copy[i]) {
			v[count++] = copy + start;
			start = i + 1;
		}
	}
	v[count] = NULL;
	*argc = count;
	*argv = v;
	return 0;
}

void bs_ctl_frame_hdr(uint8_t hdr[BS_CTL_FRAME_HDR], int kind, uint32_t len)
{
	hdr[0] = (uint8_t)kind;
	put32(hdr + 1, len);
}

int bs_ctl_parse_frame(const uint8_t hdr[BS_CTL_FRAME_HDR], int *kind,
		       uint32_t *len)
{
	uint32_t n = get32(hdr + 1);

	switch (hdr[0]) {
	case BS_CTL_OUT:
	case BS_CTL_ERR:
		if (!n || n > BS_CTL_MAX_FRAME)
			return -EPROTO;
		break;
	case BS_CTL_EXIT:
		if (n != 4)
			return -EPROTO;
		break;
	default:
		return -EPROTO;
	}
	*kind = hdr[0];
	*len = n;
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

static int read_all(int fd, void *p, size_t n)
{
	uint8_t *b = p;

	while (n) {
		ssize_t r = read(fd, b, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0)
			return -ECONNRESET;
		b += r;
		n -= (size_t)r;
	}
	return 0;
}

/* Write all of @buf to @fd: 0, or -errno. */
static int put_all(int fd, const uint8_t *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -errno;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Read the reply's frames, writing each as it comes. */
static int read_frames(const char *sock, int fd, int out_fd, int err_fd,
		       uint8_t *buf)
{
	uint8_t magic[BS_CTL_REPLY_MAGIC], hdr[BS_CTL_FRAME_HDR];
	int err, kind;
	uint32_t len;

	err = read_all(fd, magic, sizeof(magic));
	if (err)
		return bs_error(err, "%s: blkstackd closed the connection "
				"before answering: %s", sock, strerror(-err));
	if (!memcmp(magic, old_magic, sizeof(magic)))
		return bs_error(-EPROTO, "%s: blkstackd speaks an older "
				"control protocol (restart it with this "
				"version)", sock);
	if (memcmp(magic, bs_ctl_reply_magic, sizeof(magic)))
		return bs_error(-EPROTO, "%s: not a blkstackd control socket "
				"(bad reply)", sock);
	for (;;) {
		err = read_all(fd, hdr, sizeof(hdr));
		if (err)
			break;
		if (bs_ctl_parse_frame(hdr, &kind, &len))
			return bs_error(-EPROTO, "%s: malformed reply from "
					"blkstackd", sock);
		err = read_all(fd, buf, len);
		if (err)
			break;
		if (kind == BS_CTL_EXIT) {
			int rc = (int)get32(buf);

			if (rc < 0)
				return bs_error(-EPROTO, "%s: malformed reply "
						"from blkstackd", sock);
			return rc;
		}
		if (kind == BS_CTL_OUT) {
			/* a lost output is a failure, never a silent cut */
			err = put_all(out_fd, buf, len);
			if (err)
				return bs_error(err, "writing the output: %s",
						strerror(-err));
		} else {
			(void)put_all(err_fd, buf, len);
		}
	}
	return bs_error(err, "%s: reply cut short (blkstackd closed the "
			"connection before the command's end): %s", sock,
			strerror(-err));
}

static int read_reply(const char *sock, int fd, int out_fd, int err_fd)
{
	uint8_t *buf = malloc(BS_CTL_MAX_FRAME);
	int rc;

	if (!buf)
		return bs_error(-ENOMEM, "out of memory");
	rc = read_frames(sock, fd, out_fd, err_fd, buf);
	free(buf);
	return rc;
}

int bs_ctl_call(const char *sock, int argc, char **argv, int out_fd,
		int err_fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint8_t *req = NULL;
	size_t len;
	int fd, err, rc;

	if (strlen(sock) >= sizeof(sa.sun_path))
		return bs_error(-ENAMETOOLONG, "%s: socket path too long",
				sock);
	memcpy(sa.sun_path, sock, strlen(sock) + 1);
	err = bs_ctl_encode_request(argc, argv, &req, &len);
	if (err)
		return bs_error(err, "command too long for the control "
				"socket (at most %u arguments, %u bytes)",
				BS_CTL_MAX_ARGS, BS_CTL_MAX_REQUEST);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		err = -errno;
		free(req);
		return bs_error(err, "socket: %s", strerror(-err));
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		err = -errno;
		free(req);
		close(fd);
		return bs_error(err, "%s: cannot reach blkstackd: %s%s", sock,
				strerror(-err), err == -ENOENT ||
				err == -ECONNREFUSED ? " (is it running?)" :
				"");
	}
	err = write_all(fd, req, len);
	free(req);
	if (err) {
		close(fd);
		return bs_error(err, "%s: blkstackd closed the connection "
				"before answering: %s", sock, strerror(-err));
	}
	rc = read_reply(sock, fd, out_fd, err_fd);
	close(fd);
	return rc;
}
