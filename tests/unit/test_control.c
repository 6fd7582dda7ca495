/* SPDX-License-Identifier: MIT */
/*
 * The control protocol's reply stream, client side (bs_ctl_call()): frames
 * are written out as they come, the exit frame gives the exit code, and a
 * reply that is cut short, malformed or from the old one-block protocol
 * fails loudly instead of passing for a complete answer. A scripted server
 * thread plays the daemon.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <blkstack/control.h>

#include "helpers/th.h"

struct server {
	int lfd;
	const uint8_t *reply;	/* sent after the request, then close */
	size_t len;
};

static void *serve(void *arg)
{
	struct server *s = arg;
	uint8_t in[4096];
	size_t have = 0;
	int fd = accept(s->lfd, NULL, NULL), argc;
	char **argv;

	if (fd < 0)
		return NULL;
	for (;;) {
		ssize_t n = read(fd, in + have, sizeof(in) - have);
		int err;

		if (n <= 0)
			break;
		have += (size_t)n;
		err = bs_ctl_parse_request(in, have, &argc, &argv);
		if (err == -EAGAIN)
			continue;
		if (!err)
			free(argv);
		break;
	}
	if (s->len && write(fd, s->reply, s->len) != (ssize_t)s->len) {
		/* the client may have given up: the test sees it */
	}
	close(fd);
	return NULL;
}

/* Run "ls" against a server answering @reply; output in @out / @err. */
static int call(const uint8_t *reply, size_t len, char *out, size_t outsz,
		char *err, size_t errsz)
{
	char dir[] = "/tmp/bs-ctl-test.XXXXXX", path[128];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct server s = { .reply = reply, .len = len };
	FILE *fo = tmpfile(), *fe = tmpfile();
	char *argv[] = { "ls", NULL };
	pthread_t t;
	size_t n;
	int rc;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s", dir);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	s.lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	assert_true(s.lfd >= 0);
	assert_int_equal(bind(s.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s.lfd, 1), 0);
	assert_int_equal(pthread_create(&t, NULL, serve, &s), 0);
	rc = bs_ctl_call(path, 1, argv, fileno(fo), fileno(fe));
	pthread_join(t, NULL);
	close(s.lfd);
	unlink(path);
	rmdir(dir);
	rewind(fo);
	rewind(fe);
	n = fread(out, 1, outsz - 1, fo);
	out[n] = '\0';
	n = fread(err, 1, errsz - 1, fe);
	err[n] = '\0';
	fclose(fo);
	fclose(fe);
	return rc;
}

/* Append a frame to @buf at *@off. */
static void frame(uint8_t *buf, size_t *off, int kind, const void *p,
		  uint32_t len)
{
	bs_ctl_frame_hdr(buf + *off, kind, len);
	memcpy(buf + *off + BS_CTL_FRAME_HDR, p, len);
	*off += BS_CTL_FRAME_HDR + len;
}

static size_t begin(uint8_t *buf)
{
	memcpy(buf, bs_ctl_reply_magic, BS_CTL_REPLY_MAGIC);
	return BS_CTL_REPLY_MAGIC;
}

static const uint8_t exit3[4] = { 0, 0, 0, 3 };
static const uint8_t exit0[4] = { 0, 0, 0, 0 };

static void frames_parse(void **state)
{
	uint8_t h[BS_CTL_FRAME_HDR];
	uint32_t len;
	int kind;

	(void)state;
	bs_ctl_frame_hdr(h, BS_CTL_OUT, 100);
	assert_int_equal(bs_ctl_parse_frame(h, &kind, &len), 0);
	assert_int_equal(kind, BS_CTL_OUT);
	assert_int_equal(len, 100);
	bs_ctl_frame_hdr(h, BS_CTL_ERR, BS_CTL_MAX_FRAME);
	assert_int_equal(bs_ctl_parse_frame(h, &kind, &len), 0);
	bs_ctl_frame_hdr(h, BS_CTL_EXIT, 4);
	assert_int_equal(bs_ctl_parse_frame(h, &kind, &len), 0);
	/* an empty data frame, an oversized one, a bad exit, a bad kind */
	bs_ctl_frame_hdr(h, BS_CTL_OUT, 0);
	assert_int_equal(bs_ctl_parse_frame(h, &kind, &len), -EPROTO);
	bs_ctl_frame_hdr(h, BS_CTL_OUT, BS_CTL_MAX_FRAME + 1);
	assert_int_equal(bs_ctl_parse_frame(h, &kind, &len), -EPROTO);
	bs_ctl_frame_hdr(h, BS_CTL_EXIT, 5);
	assert_int_equal(bs_ctl_parse_frame(h, &kind, &len), -EPROTO);
	bs_ctl_frame_hdr(h, 'z', 4);
	assert_int_equal(bs_ctl_parse_frame(h, &kind, &len), -EPROTO);
}

static void whole_reply(void **state)
{
	uint8_t buf[256];
	char out[64], err[64];
	size_t off = begin(buf);

	(void)state;
	frame(buf, &off, BS_CTL_OUT, "hel", 3);
	frame(buf, &off, BS_CTL_ERR, "warn\n", 5);
	frame(buf, &off, BS_CTL_OUT, "lo\n", 3);
	frame(buf, &off, BS_CTL_EXIT, exit3, 4);
	assert_int_equal(call(buf, off, out, sizeof(out), err, sizeof(err)), 3);
	assert_string_equal(out, "hello\n");
	assert_string_equal(err, "warn\n");
}

/* More than the old 16 MiB cap would matter for: many frames, all kept. */
static void long_reply(void **state)
{
	size_t nframes = 300, off, size = nframes * (BS_CTL_FRAME_HDR +
		BS_CTL_MAX_FRAME) + 64, i;
	uint8_t *buf = malloc(size), *chunk = malloc(BS_CTL_MAX_FRAME);
	char *out = malloc(nframes * BS_CTL_MAX_FRAME + 1), err[64];

	(void)state;
	off = begin(buf);
	for (i = 0; i < nframes; i++) {
		memset(chunk, 'a' + (int)(i % 26), BS_CTL_MAX_FRAME);
		frame(buf, &off, BS_CTL_OUT, chunk, BS_CTL_MAX_FRAME);
	}
	frame(buf, &off, BS_CTL_EXIT, exit0, 4);
	assert_int_equal(call(buf, off, out, nframes * BS_CTL_MAX_FRAME + 1,
			      err, sizeof(err)), 0);
	assert_int_equal(strlen(out), nframes * BS_CTL_MAX_FRAME);
	assert_int_equal(out[(nframes - 1) * BS_CTL_MAX_FRAME], 'a' +
			 (int)((nframes - 1) % 26));
	free(buf);
	free(chunk);
	free(out);
}

/* No exit frame: an error, never exit 0 with what came so far. */
static void cut_short(void **state)
{
	uint8_t buf[64];
	char out[64], err[64];
	size_t off = begin(buf);
	int rc;

	(void)state;
	frame(buf, &off, BS_CTL_OUT, "abc", 3);
	rc = call(buf, off, out, sizeof(out), err, sizeof(err));
	assert_true(rc < 0);
	assert_non_null(strstr(bs_last_error(), "cut short"));
	assert_string_equal(out, "abc");
	/* cut inside a frame's payload */
	off = begin(buf);
	frame(buf, &off, BS_CTL_OUT, "abcdef", 6);
	rc = call(buf, off - 2, out, sizeof(out), err, sizeof(err));
	assert_true(rc < 0);
	assert_non_null(strstr(bs_last_error(), "cut short"));
	/* nothing at all */
	rc = call(buf, 0, out, sizeof(out), err, sizeof(err));
	assert_true(rc < 0);
	assert_non_null(strstr(bs_last_error(), "before answering"));
}

static void bad_replies(void **state)
{
	static const uint8_t old[] = { 'B', 'S', 'R', '1', 0, 0, 0, 0,
				       0, 0, 0, 2, 0, 0, 0, 0, 'h', 'i' };
	uint8_t buf[64];
	char out[64], err[64];
	size_t off;
	int rc;

	(void)state;
	rc = call(old, sizeof(old), out, sizeof(out), err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(bs_last_error(), "older"));
	off = begin(buf);
	bs_ctl_frame_hdr(buf + off, 'z', 1);
	off += BS_CTL_FRAME_HDR + 1;
	rc = call(buf, off, out, sizeof(out), err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(bs_last_error(), "malformed"));
	memcpy(buf, "HTTP", 4);
	rc = call(buf, 4, out, sizeof(out), err, sizeof(err));
	assert_int_equal(rc, -EPROTO);
	assert_non_null(strstr(bs_last_error(), "not a blkstackd"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(frames_parse),
		cmocka_unit_test(whole_reply),
		cmocka_unit_test(long_reply),
		cmocka_unit_test(cut_short),
		cmocka_unit_test(bad_replies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
