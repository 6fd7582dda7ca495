/* SPDX-License-Identifier: MIT */
/*
 * The WRITE_SAME sink of an inode of blkstack's ext4 layer: zeroes by
 * bs_fs_fallocate(WRITE_ZEROES), which the fs layer serves only when the
 * device below zeroes by unmapping (written extents, no data written, and
 * flushed before they are marked written); otherwise it says -EOPNOTSUPP
 * and bs_write_same() writes the zeroes through bs_fs_write().
 */
#include <errno.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>
#include <blkstack/write_same.h>
#include <blkstack/zero.h>

static int fs_sink_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct bs_ws_fs_sink *f = arg;
	int64_t n = bs_fs_write(f->fs, f->ino, buf, len, off);

	if (n < 0)
		return (int)n;
	if ((uint64_t)n != len)
		return bs_error(-EIO, "write same: short write at %llu",
				(unsigned long long)off);
	return 0;
}

static int fs_sink_write_zeroes(void *arg, uint64_t off, uint64_t len)
{
	struct bs_ws_fs_sink *f = arg;

	if (off > INT64_MAX || len > INT64_MAX)
		return bs_error(-EFBIG, "write same: range past off_t");
	return bs_fs_fallocate(f->fs, f->ino, BS_FALLOC_WRITE_ZEROES,
			       (int64_t)off, (int64_t)len);
}

static int fs_sink_commit(void *arg)
{
	struct bs_ws_fs_sink *f = arg;

	return bs_fs_fsync(f->fs, f->ino);
}

static const struct bs_ws_sink_ops fs_sink_ops = {
	.write = fs_sink_write,
	.write_zeroes = fs_sink_write_zeroes,
	.commit = fs_sink_commit,
};

int bs_ws_fs_sink_init(struct bs_ws_sink *sink, struct bs_ws_fs_sink *f,
		       struct bs_fs *fs, uint32_t ino)
{
	uint64_t max;
	int err = bs_fs_max_file_size(fs, ino, &max);

	if (err)
		return err;
	f->fs = fs;
	f->ino = ino;
	*sink = (struct bs_ws_sink){
		.ops = &fs_sink_ops,
		.arg = f,
		.max_size = max,
	};
	return 0;
}
