/* SPDX-License-Identifier: MIT */
/*
 * The WRITE_SAME sink of a host file (a directory export, tests): zeroes by
 * fallocate(FALLOC_FL_WRITE_ZEROES) where the host kernel and filesystem
 * offer it, which leaves written extents; never ZERO_RANGE or a punched
 * hole, whose blocks would be unwritten or gone, so without it the zeroes
 * are written.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/write_same.h>
#include <blkstack/zero.h>

static int file_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct bs_ws_file_sink *f = arg;
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(f->fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return bs_error(-errno, "write same: write of %zu "
					"bytes at %llu: %m", len,
					(unsigned long long)off);
		}
		if (n == 0)
			return bs_error(-EIO, "write same: write at %llu "
					"wrote nothing",
					(unsigned long long)off);
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

static int file_write_zeroes(void *arg, uint64_t off, uint64_t len)
{
	struct bs_ws_file_sink *f = arg;

	if (off > INT64_MAX || len > INT64_MAX)
		return bs_error(-EFBIG, "write same: range past off_t");
	if (fallocate(f->fd, BS_FALLOC_WRITE_ZEROES, (off_t)off,
		      (off_t)len) == 0)
		return 0;
	/* an older kernel says EINVAL or EOPNOTSUPP for the unknown bit */
	if (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS)
		return -EOPNOTSUPP;
	return bs_error(-errno, "write same: fallocate(WRITE_ZEROES) of "
			"%llu bytes at %llu: %m", (unsigned long long)len,
			(unsigned long long)off);
}

static int file_commit(void *arg)
{
	struct bs_ws_file_sink *f = arg;

	if (fdatasync(f->fd))
		return bs_error(-errno, "write same: fdatasync: %m");
	return 0;
}

static const struct bs_ws_sink_ops file_sink_ops = {
	.write = file_write,
	.write_zeroes = file_write_zeroes,
	.commit = file_commit,
};

void bs_ws_file_sink_init(struct bs_ws_sink *sink, struct bs_ws_file_sink *f,
			  int fd)
{
	f->fd = fd;
	*sink = (struct bs_ws_sink){
		.ops = &file_sink_ops,
		.arg = f,
		.max_size = (uint64_t)INT64_MAX,
	};
}
