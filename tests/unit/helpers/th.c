/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "th.h"

int th_dev_try(struct bs_ctx *ctx, const char *name, const char *spec,
	       struct bs_dev **out)
{
	struct bs_opts *o = NULL;
	char *type = NULL;
	int err;

	err = bs_opts_parse_spec(spec, &type, &o);
	if (!err)
		err = bs_dev_create(ctx, name, type, o, out);
	bs_opts_free(o);
	free(type);
	return err;
}

struct bs_dev *th_dev(struct bs_ctx *ctx, const char *name, const char *spec)
{
	struct bs_dev *d = NULL;
	int err = th_dev_try(ctx, name, spec, &d);

	if (err)
		fail_msg("%s (%s): %d %s", name, spec, err, bs_last_error());
	return d;
}

int th_dev_kv_try(struct bs_ctx *ctx, const char *name, const char *kv,
		  struct bs_dev **out)
{
	struct bs_opts *o;
	char *copy = strdup(kv), *tok, *save = NULL;
	int err = bs_opts_new(&o);

	for (tok = strtok_r(copy, ";", &save); tok && !err;
	     tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');
		if (!eq)
			continue;
		*eq = '\0';
		err = bs_opts_set(o, tok, eq + 1, "test");
	}
	if (!err)
		err = bs_dev_create(ctx, name, NULL, o, out);
	bs_opts_free(o);
	free(copy);
	return err;
}

struct bs_dev *th_dev_kv(struct bs_ctx *ctx, const char *name, const char *kv)
{
	struct bs_dev *d = NULL;
	int err = th_dev_kv_try(ctx, name, kv, &d);

	if (err)
		fail_msg("%s (%s): %d %s", name, kv, err, bs_last_error());
	return d;
}

uint64_t th_rand(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void th_loop_ring(struct bs_loop *loop, unsigned entries)
{
	int err = bs_loop_use_ring(loop, entries);

	if (err == -ENOSYS || err == -EOPNOTSUPP || err == -EINVAL ||
	    err == -EPERM) {
		bs_loop_free(loop);
		print_message("SKIP: no io_uring loop here: %s\n",
			      strerror(-err));
		skip();
	}
	assert_int_equal(err, 0);
	assert_true(bs_loop_has_ring(loop));
}

void th_write_file(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(len ? pwrite(fd, buf, len, 0) : 0, (ssize_t)len);
	assert_int_equal(close(fd), 0);
}

void th_fill(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	size_t i;

	for (i = 0; i + 8 <= len; i += 8) {
		uint64_t v = th_rand(&seed);
		memcpy(p + i, &v, 8);
	}
	for (; i < len; i++)
		p[i] = (uint8_t)th_rand(&seed);
}

int th_is_zero(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return 0;
	return 1;
}

unsigned long long th_attr_u64(struct bs_dev *dev, const char *name)
{
	char buf[64];
	unsigned long long v = 0;
	int n = bs_attr_show(dev, name, buf, sizeof(buf));

	if (n < 0)
		fail_msg("%s: %s: %d", dev->name, name, n);
	if (bs_attr_parse_u64(buf, &v))
		fail_msg("%s: %s: not a number: %s", dev->name, name, buf);
	return v;
}

uint64_t th_peak_rss(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (uint64_t)ru.ru_maxrss * 1024;
}

int th_ctx_setup(void **state)
{
	struct bs_ctx *ctx;

	assert_int_equal(bs_ctx_new(&ctx), 0);
	*state = ctx;
	return 0;
}

int th_ctx_teardown(void **state)
{
	bs_ctx_free(*state);
	return 0;
}

static void desc_kv(void *arg, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void desc_kv(void *arg, const char *key, const char *fmt, ...)
{
	struct th_desc *d = arg;
	va_list ap;

	if (d->len >= sizeof(d->text))
		return;
	d->len += (size_t)snprintf(d->text + d->len, sizeof(d->text) - d->len,
				   "%s: ", key);
	if (d->len >= sizeof(d->text))
		return;
	va_start(ap, fmt);
	d->len += (size_t)vsnprintf(d->text + d->len, sizeof(d->text) - d->len,
				    fmt, ap);
	va_end(ap);
	if (d->len < sizeof(d->text))
		d->text[d->len++] = '\n', d->text[d->len] = 0;
}

const char *th_describe(struct bs_dev *dev, struct th_desc *d)
{
	d->len = 0;
	d->text[0] = 0;
	bs_dev_describe(dev, desc_kv, d);
	return d->text;
}

unsigned th_free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

void th_run_for(struct bs_loop *loop, unsigned ms)
{
	uint64_t end = bs_now_ns() + ms * 1000000ull;

	while (bs_now_ns() < end)
		bs_loop_run_once(loop, 5);
}
