/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: blkstackd's control socket as a whole (daemon/control.c,
 * compiled in): accepting clients, requests arriving in pieces, several
 * clients queued behind one another, commands on the loop and on the
 * control thread, replies streamed with flow control, clients that stop
 * reading, half-close or hang up mid-reply. The input is a little script
 * of client actions against a real socket; every reply is checked as the
 * client parses it: the magic, then well-formed frames, nothing after the
 * exit frame, and the daemon closes once it has sent it.
 *
 * Script: a byte per action, (client << 4) | action, with its argument
 * bytes after it:
 *   0 connect          1 N: send N raw bytes     2 I: send request I whole
 *   3 I S: send request I in pieces of S + 1    4 N: read up to 64 N bytes
 *   5 B: shut writing (B even) or close          6 N: N + 1 turns of the loop
 *   7 N: send a request of N + 1 strings taken from the input (the command
 *        name from a harmless list)
 * At the end every client shuts its writing side and reads to the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/fs.h>
#include <blkstack/opts.h>

#include "../../daemon/control.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* daemon/main.c's logger: quiet here */
void bsd_log(const char *fmt, ...)
{
	(void)fmt;
}

#define MAX_CLIENTS 4
#define BIG_SIZE (1u << 20)

static const char *const requests[][6] = {
	{ "ls" },
	{ "info", "m" },
	{ "explain", "m" },
	{ "help" },
	{ "help", "fs" },
	{ "fs", "cat", "f", "/big" },	/* 1 MiB: streams, waits for the reader */
	{ "fs", "ls", "-l", "f", "/" },
	{ "fs", "stat", "f", "/big" },
	{ "fs", "cat", "f", "/nonexist" },
	{ "zeroout", "-l", "1M", "m" },
	{ "zeroout", "-l", "3M" },	/* usage error: no DEV */
	{ "zeroout", "--no-unmap", "-l", "8M", "m" },
	{ "fallocate", "-z", "-l", "64K", "m" },
	{ "attr", "m", "queue/write_zeroes_unmap", "0" },
	{ "attr", "m", "queue/write_zeroes_unmap", "1" },
	{ "nosuch" },
	{ "info", "nosuch" },
};
#define NREQ (sizeof(requests) / sizeof(requests[0]))

/* commands a fuzzed argv may name: none reads host files or formats */
static const char *const safe_cmds[] = { "ls", "info", "explain", "help",
					 "attr" };

struct client {
	int fd;			/* -1: none */
	bool wr_shut;
	/* the reply as parsed so far */
	uint8_t hdr[BS_CTL_FRAME_HDR];
	size_t got;		/* bytes of magic / header */
	uint32_t payload_left;
	int kind;
	bool magic_ok, in_payload, exited;
};

static struct bsd d;
static char sock_path[108];
static struct client clients[MAX_CLIENTS];

static void fail_init(const char *what)
{
	fprintf(stderr, "fuzz_control_conn: setup: %s: %s\n", what,
		bs_last_error());
	abort();
}

static struct bs_dev *make_dev(const char *name, const char *spec)
{
	struct bs_opts *opts = NULL;
	struct bs_dev *dev = NULL;
	char *type = NULL;

	if (bs_opts_parse_spec(spec, &type, &opts) ||
	    bs_dev_create(d.ctx, name, type, opts, &dev))
		fail_init(spec);
	bs_opts_free(opts);
	free(type);
	return dev;
}

static void cleanup(void)
{
	if (d.ctl)
		ctl_stop(d.ctl);
}

static void setup(void)
{
	struct bs_dev *f;
	struct bs_fs *fs;
	uint8_t *buf;
	uint32_t ino, i;

	if (bs_ctx_new(&d.ctx))
		fail_init("context");
	d.loop = bs_ctx_loop(d.ctx);
	make_dev("m", "mem:64M,max_write_zeroes=1M");
	f = make_dev("f", "mem:32M");
	/* a file to stream back */
	buf = malloc(BIG_SIZE);
	for (i = 0; i < BIG_SIZE; i++)
		buf[i] = (uint8_t)(i * 7 + (i >> 13));
	if (bs_fs_mkfs(f, NULL) || bs_fs_open(f, 0, &fs) ||
	    bs_fs_create(fs, "/big", 0644, &ino) ||
	    bs_fs_write(fs, ino, buf, BIG_SIZE, 0) != BIG_SIZE ||
	    bs_fs_close(fs))
		fail_init("filesystem");
	free(buf);
	snprintf(sock_path, sizeof(sock_path), "/tmp/blkstack-fuzz-ctl-%ld.sock",
		 (long)getpid());
	unlink(sock_path);
	if (ctl_start(&d, sock_path))
		fail_init("control socket");
	atexit(cleanup);
	for (i = 0; i < MAX_CLIENTS; i++)
		clients[i].fd = -1;
}

/* Check the reply bytes as a client parses them. */
static void check_reply(struct client *c, const uint8_t *p, size_t n)
{
	while (n) {
		if (c->exited)
			abort();	/* bytes after the exit frame */
		if (!c->magic_ok) {
			if (*p != bs_ctl_reply_magic[c->got])
				abort();
			if (++c->got == BS_CTL_REPLY_MAGIC) {
				c->magic_ok = true;
				c->got = 0;
			}
			p++, n--;
			continue;
		}
		if (c->in_payload) {
			size_t k = n < c->payload_left ? n : c->payload_left;

			c->payload_left -= (uint32_t)k;
			p += k;
			n -= k;
			if (!c->payload_left) {
				c->in_payload = false;
				if (c->kind == BS_CTL_EXIT)
					c->exited = true;
			}
			continue;
		}
		c->hdr[c->got++] = *p++;
		n--;
		if (c->got == BS_CTL_FRAME_HDR) {
			uint32_t len;

			if (bs_ctl_parse_frame(c->hdr, &c->kind, &len))
				abort();	/* the daemon sent a bad frame */
			c->got = 0;
			c->payload_left = len;
			c->in_payload = true;
		}
	}
}

/* Read what is there; true at the end of the stream (or an error). */
static bool client_read(struct client *c, size_t max)
{
	uint8_t buf[4096];

	while (max) {
		ssize_t n = recv(c->fd, buf, max < sizeof(buf) ? max :
				 sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return false;
		if (n <= 0)
			return true;
		check_reply(c, buf, (size_t)n);
		max -= (size_t)n;
	}
	return false;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	memset(c, 0, sizeof(*c));
	c->fd = -1;
}

static void client_send(struct client *c, const void *p, size_t n)
{
	if (c->fd < 0 || c->wr_shut)
		return;
	/* bounded: what the socket does not take now is dropped */
	if (send(c->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) {
		/* the daemon may have answered and closed already */
	}
}

static void turn(int timeout_ms)
{
	bs_loop_run_once(d.loop, timeout_ms);
}

static void send_request(struct client *c, unsigned idx, size_t piece)
{
	const char *const *r = requests[idx % NREQ];
	char *argv[6];
	uint8_t *req;
	size_t len, off;
	int argc = 0;

	while (argc < 6 && r[argc]) {
		argv[argc] = (char *)r[argc];
		argc++;
	}
	if (bs_ctl_encode_request(argc, argv, &req, &len))
		abort();
	for (off = 0; off < len; off += piece) {
		client_send(c, req + off, len - off < piece ? len - off : piece);
		turn(0);
	}
	free(req);
}

/* A request of @n strings from the input; the command from safe_cmds. */
static size_t send_fuzzed(struct client *c, unsigned n, const uint8_t *p,
			  size_t left)
{
	char *argv[17], *copy = malloc(left + 1);
	size_t used = 0;
	uint8_t *req;
	size_t len;
	unsigned argc = 1, i;

	if (!copy)
		return left;
	memcpy(copy, p, left);
	copy[left] = '\0';
	argv[0] = (char *)safe_cmds[(left ? p[0] : 0) %
				    (sizeof(safe_cmds) / sizeof(*safe_cmds))];
	used = left ? 1 : 0;
	for (i = 1; i <= n && i < 17 && used < left; i++) {
		argv[argc++] = copy + used;
		used += strlen(copy + used) + 1;
	}
	if (used > left)
		used = left;
	if (!bs_ctl_encode_request((int)argc, argv, &req, &len)) {
		client_send(c, req, len);
		free(req);
	}
	free(copy);
	return used;
}

static void client_connect(struct client *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (c->fd >= 0)
		return;
	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		abort();
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)))
		abort();
	turn(0);	/* accept it */
}

/* Every client reads to the end; the server is idle again after. */
static void drain(void)
{
	unsigned i, rounds;

	for (i = 0; i < MAX_CLIENTS; i++)
		if (clients[i].fd >= 0 && !clients[i].wr_shut)
			shutdown(clients[i].fd, SHUT_WR);
	for (rounds = 0; rounds < 10000; rounds++) {
		bool open = false;

		for (i = 0; i < MAX_CLIENTS; i++) {
			struct client *c = &clients[i];

			if (c->fd < 0)
				continue;
			if (client_read(c, SIZE_MAX))
				client_close(c);
			else
				open = true;
		}
		if (!open && !d.ctl->nconns)
			return;
		turn(1);
	}
	abort();	/* a client never got its reply or its close */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t i = 0;

	if (!d.ctx)
		setup();
	while (i < size) {
		uint8_t op = data[i++];
		struct client *c = &clients[(op >> 4) % MAX_CLIENTS];
		unsigned arg = 0, arg2 = 0;
		size_t n;

		if ((op & 7) && i < size)
			arg = data[i++];
		if ((op & 7) == 3 && i < size)
			arg2 = data[i++];
		switch (op & 7) {
		case 0:
			client_connect(c);
			break;
		case 1:
			n = arg < size - i ? arg : size - i;
			if (c->fd >= 0)
				client_send(c, data + i, n);
			i += n;
			turn(0);
			break;
		case 2:
			if (c->fd >= 0)
				send_request(c, arg, SIZE_MAX);
			turn(0);
			break;
		case 3:
			if (c->fd >= 0)
				send_request(c, arg, (size_t)arg2 + 1);
			break;
		case 4:
			if (c->fd >= 0 && client_read(c, (size_t)arg * 64 + 1))
				client_close(c);
			turn(0);
			break;
		case 5:
			if (c->fd >= 0 && !(arg & 1)) {
				shutdown(c->fd, SHUT_WR);
				c->wr_shut = true;
			} else {
				client_close(c);
			}
			turn(0);
			break;
		case 6:
			for (unsigned k = 0; k <= arg % 16; k++)
				turn(0);
			break;
		case 7:
			if (c->fd >= 0 && i < size)
				i += send_fuzzed(c, arg % 16, data + i,
						 size - i);
			turn(0);
			break;
		}
	}
	drain();
	return 0;
}
