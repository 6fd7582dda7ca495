/* SPDX-License-Identifier: MIT */
/*
 * The ext4 layer: mkfs on mem and file devices, every name and data
 * operation, fallocate with ext4's mode rules, WRITE_ZEROES never showing
 * stale bytes, and e2fsck -fn clean on the image after every scenario.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/fs.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define KiB 1024ull
#define MiB (1024 * KiB)
#define SIZE (64 * MiB)
#define BS 4096u

struct fx {
	struct bs_ctx *ctx;
	char dir[64], path[128], dump[128];
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));

	/* a disk filesystem: the file driver's unmap is punch-hole */
	snprintf(x->dir, sizeof(x->dir), "/var/tmp/bs-fs.XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(x->path, sizeof(x->path), "%s/fs.img", x->dir);
	snprintf(x->dump, sizeof(x->dump), "%s/dump.img", x->dir);
	assert_int_equal(bs_ctx_new(&x->ctx), 0);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;

	bs_ctx_free(x->ctx);
	unlink(x->path);
	unlink(x->dump);
	rmdir(x->dir);
	free(x);
	return 0;
}

static struct bs_dev *file_dev(struct fx *x, const char *extra)
{
	char spec[256];

	snprintf(spec, sizeof(spec), "file:%s,size=64M%s", x->path, extra);
	return th_dev(x->ctx, "f", spec);
}

/* Fill the whole device with a recognisable stale pattern. */
static const uint8_t stale[8] = { 'S', 'T', 'A', 'L', 'E', '!', 0xa5, 0x5a };

static void fill_stale(struct bs_dev *dev)
{
	uint8_t *buf = malloc(MiB);
	uint64_t off;
	size_t i;

	assert_non_null(buf);
	for (i = 0; i < MiB; i++)
		buf[i] = stale[i % sizeof(stale)];
	for (off = 0; off < dev->size; off += MiB)
		assert_int_equal(bs_write_sync(dev, buf, MiB, off), 0);
	free(buf);
}

static bool has_stale(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i + sizeof(stale) <= len; i++)
		if (p[i] == 'S' && !memcmp(p + i, stale, sizeof(stale)))
			return true;
	return false;
}

/*
 * e2fsck -fn on the device's bytes: a file device is checked in place, a
 * mem device is copied out (sparse) first. The filesystem must be closed.
 */
static void fsck_clean(struct fx *x, struct bs_dev *dev)
{
	const char *img = x->path;
	char cmd[512];
	int rc;

	if (strcmp(dev->type->name, "file")) {
		uint8_t *buf = malloc(MiB);
		uint64_t off;
		int fd = open(x->dump, O_RDWR | O_CREAT | O_TRUNC, 0600);

		assert_non_null(buf);
		assert_true(fd >= 0);
		assert_int_equal(ftruncate(fd, (off_t)dev->size), 0);
		for (off = 0; off < dev->size; off += MiB) {
			assert_int_equal(bs_read_sync(dev, buf, MiB, off), 0);
			if (!th_is_zero(buf, MiB))
				assert_int_equal(pwrite(fd, buf, MiB, (off_t)off),
						 (ssize_t)MiB);
		}
		close(fd);
		free(buf);
		img = x->dump;
	} else {
		assert_int_equal(bs_flush_sync(dev), 0);
	}
	snprintf(cmd, sizeof(cmd), "e2fsck -fn '%s' >'%s.log' 2>&1", img,
		 x->dir);
	rc = system(cmd);
	if (rc) {
		snprintf(cmd, sizeof(cmd), "cat '%s.log' >&2", x->dir);
		if (system(cmd)) {}
	}
	snprintf(cmd, sizeof(cmd), "%s.log", x->dir);
	unlink(cmd);
	assert_int_equal(rc, 0);
}

static struct bs_fs *mkfs_open(struct bs_dev *dev)
{
	struct bs_fs *fs = NULL;
	int err = bs_fs_mkfs(dev, NULL);

	if (err)
		fail_msg("mkfs: %s", bs_last_error());
	err = bs_fs_open(dev, 0, &fs);
	if (err)
		fail_msg("open: %s", bs_last_error());
	return fs;
}

static void close_ok(struct bs_fs *fs)
{
	int err = bs_fs_close(fs);

	if (err)
		fail_msg("close: %s", bs_last_error());
}

/* s_state of the primary superblock, as on the device. */
static unsigned sb_state(struct bs_dev *dev)
{
	uint8_t sb[1024];

	assert_int_equal(bs_read_sync(dev, sb, sizeof(sb), 1024), 0);
	assert_int_equal(sb[56] | sb[57] << 8, 0xef53); /* s_magic */
	return sb[58] | sb[59] << 8;			/* s_state */
}

/* ---- extents --------------------------------------------------------------- */

struct emap {
	unsigned n, written, unwritten;
	struct bs_fs_extent e[64];
};

static int map_cb(void *arg, const struct bs_fs_extent *e)
{
	struct emap *m = arg;

	if (m->n < 64)
		m->e[m->n] = *e;
	m->n++;
	if (e->unwritten)
		m->unwritten += (unsigned)e->len;
	else
		m->written += (unsigned)e->len;
	return 0;
}

static struct emap get_map(struct bs_fs *fs, uint32_t ino)
{
	struct emap m;

	memset(&m, 0, sizeof(m));
	assert_int_equal(bs_fs_map(fs, ino, map_cb, &m), 0);
	return m;
}

static uint64_t fsize(struct bs_fs *fs, uint32_t ino)
{
	struct bs_fs_stat st;

	assert_int_equal(bs_fs_stat(fs, ino, &st), 0);
	return st.size;
}

/* Read the whole file and compare with @want (@len bytes). */
static void expect_bytes(struct bs_fs *fs, uint32_t ino, const uint8_t *want,
			 uint64_t len)
{
	uint8_t *got = malloc(len + 1);

	assert_non_null(got);
	assert_int_equal(bs_fs_read(fs, ino, got, len + 1, 0), (int64_t)len);
	assert_memory_equal(got, want, len);
	free(got);
}

/* ---- tests ----------------------------------------------------------------- */

static void mkfs_state_mem_and_file(void **state)
{
	struct fx *x = *state;
	struct bs_dev *devs[2];
	struct bs_fs *fs;
	struct bs_fs_info info;
	int i;

	devs[0] = th_dev(x->ctx, "m", "mem:64M");
	devs[1] = file_dev(x, "");
	for (i = 0; i < 2; i++) {
		struct bs_dev *dev = devs[i];

		fill_stale(dev);
		assert_int_equal(bs_fs_mkfs(dev, NULL), 0);
		assert_int_equal(sb_state(dev) & 1, 1); /* EXT2_VALID_FS */
		fsck_clean(x, dev);
		assert_int_equal(bs_fs_open(dev, 0, &fs), 0);
		assert_int_equal(sb_state(dev) & 1, 0); /* not clean while open */
		assert_int_equal(bs_fs_info(fs, &info), 0);
		assert_int_equal(info.block_size, BS);
		assert_int_equal(info.blocks, SIZE / BS);
		assert_true(info.journal_blocks >= 1024);
		assert_true(info.clean);
		close_ok(fs);
		assert_int_equal(sb_state(dev) & 1, 1);
		fsck_clean(x, dev);
	}
}

static void open_refusals(void **state)
{
	struct fx *x = *state;
	struct bs_dev *dev = th_dev(x->ctx, "m", "mem:64M");
	struct bs_fs *fs, *ro;
	uint8_t sb[1024];
	uint32_t ino;

	assert_int_equal(bs_fs_open(dev, 0, &fs), -EINVAL); /* no ext4 yet */
	assert_non_null(strstr(bs_last_error(), "no ext2/3/4"));
	fs = mkfs_open(dev);
	/* the superblock as a crash would leave it: not clean, valid csum */
	assert_int_equal(bs_read_sync(dev, sb, sizeof(sb), 1024), 0);
	close_ok(fs);
	assert_int_equal(bs_write_sync(dev, sb, sizeof(sb), 1024), 0);
	assert_int_equal(bs_fs_open(dev, 0, &fs), -EUCLEAN);
	assert_non_null(strstr(bs_last_error(), "e2fsck"));
	/* read-only still works, and refuses every change */
	assert_int_equal(bs_fs_open(dev, BS_FS_RDONLY, &ro), 0);
	assert_int_equal(bs_fs_create(ro, "/x", 0644, &ino), -EROFS);
	assert_int_equal(bs_fs_mkdir(ro, "/x", 0755, &ino), -EROFS);
	assert_int_equal(bs_fs_fallocate(ro, BS_FS_ROOT_INO, 0, 0, 4096),
			 -EROFS);
	close_ok(ro);
	assert_int_equal(sb_state(dev) & 1, 0); /* a read-only close wrote nothing */
	assert_int_equal(bs_fs_open(dev, 7, &ro), -EINVAL);
}

struct names {
	unsigned n;
	char seen[8][32];
};

static int names_cb(void *arg, const char *name, uint32_t ino, uint32_t mode)
{
	struct names *nm = arg;

	if (nm->n < 8)
		snprintf(nm->seen[nm->n], sizeof(nm->seen[0]), "%s%s", name,
			 S_ISDIR(mode) ? "/" : "");
	nm->n++;
	return 0;
}

static bool seen(const struct names *nm, const char *s)
{
	unsigned i;

	for (i = 0; i < nm->n && i < 8; i++)
		if (!strcmp(nm->seen[i], s))
			return true;
	return false;
}

static void names_ops(void **state)
{
	struct fx *x = *state;
	struct bs_dev *dev = file_dev(x, "");
	struct bs_fs *fs = mkfs_open(dev);
	struct bs_fs_stat st;
	struct names nm = { 0 };
	uint32_t a, d, e, ino, root_links;

	assert_int_equal(bs_fs_stat(fs, BS_FS_ROOT_INO, &st), 0);
	root_links = st.nlink;
	assert_int_equal(bs_fs_create(fs, "/a", 0640, &a), 0);
	assert_int_equal(bs_fs_create(fs, "/a", 0640, &ino), -EEXIST);
	assert_int_equal(bs_fs_mkdir(fs, "/d", 0750, &d), 0);
	assert_int_equal(bs_fs_mkdir(fs, "/d/e", 0755, &e), 0);
	assert_int_equal(bs_fs_lookup(fs, "/d/e", &ino), 0);
	assert_int_equal(ino, e);
	assert_int_equal(bs_fs_lookup(fs, "//d//e/", &ino), 0);
	assert_int_equal(bs_fs_lookup(fs, "/nope", &ino), -ENOENT);
	assert_int_equal(bs_fs_lookup(fs, "/a/b", &ino), -ENOTDIR);
	assert_int_equal(bs_fs_lookup(fs, "rel", &ino), -EINVAL);
	assert_int_equal(bs_fs_create(fs, "/nope/x", 0644, &ino), -ENOENT);
	assert_int_equal(bs_fs_stat(fs, a, &st), 0);
	assert_int_equal(st.mode, S_IFREG | 0640);
	assert_int_equal(st.nlink, 1);
	assert_int_equal(bs_fs_stat(fs, d, &st), 0);
	assert_int_equal(st.mode, S_IFDIR | 0750);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(bs_fs_stat(fs, BS_FS_ROOT_INO, &st), 0);
	assert_int_equal(st.nlink, root_links + 1);

	assert_int_equal(bs_fs_readdir(fs, BS_FS_ROOT_INO, names_cb, &nm), 0);
	assert_int_equal(nm.n, 3);
	assert_true(seen(&nm, "a") && seen(&nm, "d/") && seen(&nm, "lost+found/"));

	/* rename rules */
	assert_int_equal(bs_fs_rename(fs, "/d", "/d/e/f"), -EINVAL);
	assert_int_equal(bs_fs_rename(fs, "/a", "/d"), -EISDIR);
	assert_int_equal(bs_fs_rename(fs, "/d", "/a"), -ENOTDIR);
	assert_int_equal(bs_fs_create(fs, "/d/e/g", 0644, &ino), 0);
	assert_int_equal(bs_fs_mkdir(fs, "/x", 0755, NULL), 0);
	assert_int_equal(bs_fs_rename(fs, "/x", "/d/e"), -ENOTEMPTY);
	assert_int_equal(bs_fs_unlink(fs, "/d/e"), -ENOTEMPTY);
	assert_int_equal(bs_fs_rename(fs, "/a", "/a"), 0);
	/* a file over a file: the old target is freed */
	assert_int_equal(bs_fs_rename(fs, "/a", "/d/e/g"), 0);
	assert_int_equal(bs_fs_lookup(fs, "/d/e/g", &ino), 0);
	assert_int_equal(ino, a);
	assert_int_equal(bs_fs_lookup(fs, "/a", &ino), -ENOENT);
	/* a directory to another parent, then over an empty directory */
	assert_int_equal(bs_fs_rename(fs, "/d/e", "/e"), 0);
	assert_int_equal(bs_fs_lookup(fs, "/e/..", &ino), 0);
	assert_int_equal(ino, BS_FS_ROOT_INO);
	assert_int_equal(bs_fs_stat(fs, d, &st), 0);
	assert_int_equal(st.nlink, 2);
	assert_int_equal(bs_fs_rename(fs, "/x", "/d/y"), 0);
	assert_int_equal(bs_fs_mkdir(fs, "/z", 0755, NULL), 0);
	assert_int_equal(bs_fs_rename(fs, "/z", "/d/y"), 0);
	assert_int_equal(bs_fs_stat(fs, d, &st), 0);
	assert_int_equal(st.nlink, 3);
	assert_int_equal(bs_fs_unlink(fs, "/d/y"), 0);
	assert_int_equal(bs_fs_unlink(fs, "/d"), 0);
	assert_int_equal(bs_fs_unlink(fs, "/e/g"), 0);
	assert_int_equal(bs_fs_unlink(fs, "/e"), 0);
	assert_int_equal(bs_fs_unlink(fs, "/"), -EINVAL);
	assert_int_equal(bs_fs_stat(fs, BS_FS_ROOT_INO, &st), 0);
	assert_int_equal(st.nlink, root_links);
	close_ok(fs);
	fsck_clean(x, dev);
}

static void full_directory(void **state)
{
	struct fx *x = *state;
	struct bs_dev *dev = th_dev(x->ctx, "m", "mem:64M");
	struct bs_fs *fs = mkfs_open(dev);
	char name[300];
	uint32_t d, ino;
	int i;

	/* long names fill blocks fast: mkdir and create must grow the dir */
	assert_int_equal(bs_fs_mkdir(fs, "/d", 0755, &d), 0);
	for (i = 0; i < 120; i++) {
		snprintf(name, sizeof(name), "%0200d", i);
		if (i % 3)
			assert_int_equal(bs_fs_create_at(fs, d, name, 0644, &ino), 0);
		else
			assert_int_equal(bs_fs_mkdir_at(fs, d, name, 0755, &ino), 0);
	}
	memset(name, 'n', 256);
	name[256] = '\0';
	assert_int_equal(bs_fs_create_at(fs, d, name, 0644, &ino), -ENAMETOOLONG);
	close_ok(fs);
	fsck_clean(x, dev);
}

static void data_ops(void **state)
{
	struct fx *x = *state;
	struct bs_dev *dev = file_dev(x, "");
	struct bs_fs *fs;
	uint8_t *want = calloc(1, 3 * MiB), *buf = malloc(MiB);
	uint32_t ino, d;
	struct bs_fs_stat st;

	assert_non_null(want);
	assert_non_null(buf);
	fill_stale(dev);
	fs = mkfs_open(dev);
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &ino), 0);
	assert_int_equal(bs_fs_read(fs, ino, buf, 100, 0), 0);
	/* unaligned writes with a hole between them */
	th_fill(want + 1000, 5000, 1);
	assert_int_equal(bs_fs_write(fs, ino, want + 1000, 5000, 1000), 5000);
	th_fill(want + 2 * MiB + 123, 300000, 2);
	assert_int_equal(bs_fs_write(fs, ino, want + 2 * MiB + 123, 300000,
				     2 * MiB + 123), 300000);
	assert_int_equal(fsize(fs, ino), 2 * MiB + 123 + 300000);
	expect_bytes(fs, ino, want, 2 * MiB + 123 + 300000);
	/* a read that starts in the hole and ends past EOF */
	assert_int_equal(bs_fs_read(fs, ino, buf, MiB, 2 * MiB - 10),
			 10 + 123 + 300000);
	assert_true(th_is_zero(buf, 10 + 123));
	/* overwrite inside */
	th_fill(want + 3000, 10000, 3);
	assert_int_equal(bs_fs_write(fs, ino, want + 3000, 10000, 3000), 10000);
	expect_bytes(fs, ino, want, 2 * MiB + 123 + 300000);
	/* shrink mid-block, grow again: the tail reads zeroes */
	assert_int_equal(bs_fs_truncate(fs, ino, 4097), 0);
	memset(want + 4097, 0, 3 * MiB - 4097);
	assert_int_equal(bs_fs_truncate(fs, ino, 3 * MiB), 0);
	expect_bytes(fs, ino, want, 3 * MiB);
	assert_int_equal(bs_fs_stat(fs, ino, &st), 0);
	assert_true(st.blocks <= 2 * BS / 512); /* only blocks 0 and 1 */
	assert_int_equal(bs_fs_fsync(fs, ino), 0);
	/* errors */
	assert_int_equal(bs_fs_mkdir(fs, "/d", 0755, &d), 0);
	assert_int_equal(bs_fs_write(fs, d, buf, 10, 0), -EISDIR);
	assert_int_equal(bs_fs_read(fs, d, buf, 10, 0), -EISDIR);
	assert_int_equal(bs_fs_write(fs, ino, buf, 10, 1ull << 50), -EFBIG);
	close_ok(fs);
	fsck_clean(x, dev);
	/* and again after reopening */
	assert_int_equal(bs_fs_open(dev, BS_FS_RDONLY, &fs), 0);
	expect_bytes(fs, ino, want, 3 * MiB);
	assert_int_equal(bs_fs_write(fs, ino, buf, 10, 0), -EROFS);
	close_ok(fs);
	free(want);
	free(buf);
}

static void falloc_modes(void **state)
{
	struct fx *x = *state;
	struct bs_dev *dev = file_dev(x, "");
	struct bs_fs *fs;
	uint8_t *want = malloc(4 * MiB);
	struct emap m;
	uint32_t ino;

	assert_non_null(want);
	fill_stale(dev);
	fs = mkfs_open(dev);

	/* mode 0: unwritten, size grows, reads zeroes (never stale) */
	assert_int_equal(bs_fs_create(fs, "/a", 0644, &ino), 0);
	assert_int_equal(bs_fs_fallocate(fs, ino, 0, 100, MiB), 0);
	assert_int_equal(fsize(fs, ino), MiB + 100);
	m = get_map(fs, ino);
	assert_int_equal(m.written, 0);
	assert_int_equal(m.unwritten, (MiB + 100 + BS - 1) / BS);
	memset(want, 0, 4 * MiB);
	expect_bytes(fs, ino, want, MiB + 100);
	/* KEEP_SIZE: blocks past EOF, size stays */
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_KEEP_SIZE, 2 * MiB,
					 MiB), 0);
	assert_int_equal(fsize(fs, ino), MiB + 100);
	m = get_map(fs, ino);
	assert_int_equal(m.unwritten, (MiB + 100 + BS - 1) / BS + MiB / BS);

	/* punch and zero range over written data, misaligned */
	assert_int_equal(bs_fs_create(fs, "/b", 0644, &ino), 0);
	th_fill(want, 4 * MiB, 9);
	assert_int_equal(bs_fs_write(fs, ino, want, 4 * MiB, 0), 4 * MiB);
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_PUNCH_HOLE, 1000,
					 MiB), -EOPNOTSUPP);
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_PUNCH_HOLE |
					 BS_FALLOC_KEEP_SIZE, 1000, 3 * BS),
			 0);
	memset(want + 1000, 0, 3 * BS);
	expect_bytes(fs, ino, want, 4 * MiB);
	m = get_map(fs, ino);
	assert_int_equal(m.written, 4 * MiB / BS - 2); /* blocks 1, 2 freed */
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_ZERO_RANGE,
					 MiB + 10, MiB), 0);
	memset(want + MiB + 10, 0, MiB);
	expect_bytes(fs, ino, want, 4 * MiB);
	m = get_map(fs, ino);
	/* whole blocks 257..511 unwritten; the edge blocks stay written */
	assert_int_equal(m.unwritten, MiB / BS - 1);
	assert_int_equal(fsize(fs, ino), 4 * MiB);
	/* punch past EOF clips; zero range past EOF grows */
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_PUNCH_HOLE |
					 BS_FALLOC_KEEP_SIZE, 4 * MiB - 5, MiB),
			 0);
	memset(want + 4 * MiB - 5, 0, 5);
	expect_bytes(fs, ino, want, 4 * MiB);
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_ZERO_RANGE,
					 4 * MiB, 5), 0);
	assert_int_equal(fsize(fs, ino), 4 * MiB + 5);

	/* the refused modes */
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_WRITE_ZEROES |
					 BS_FALLOC_KEEP_SIZE, 0, MiB),
			 -EOPNOTSUPP);
	assert_non_null(strstr(bs_last_error(), "keep"));
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_COLLAPSE_RANGE, 0,
					 MiB), -EOPNOTSUPP);
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_INSERT_RANGE, 0,
					 MiB), -EOPNOTSUPP);
	assert_int_equal(bs_fs_fallocate(fs, ino, 0, -1, MiB), -EINVAL);
	assert_int_equal(bs_fs_fallocate(fs, ino, 0, 0, 0), -EINVAL);
	assert_int_equal(bs_fs_fallocate(fs, ino, 0, 1ll << 50, MiB), -EFBIG);
	assert_int_equal(bs_fs_fallocate(fs, BS_FS_ROOT_INO, 0, 0, MiB),
			 -EISDIR);
	close_ok(fs);
	fsck_clean(x, dev);
	free(want);
}

/* Writes into unwritten extents turn just those blocks written. */
static void write_into_unwritten(void **state)
{
	struct fx *x = *state;
	struct bs_dev *dev = th_dev(x->ctx, "m", "mem:64M");
	struct bs_fs *fs;
	uint8_t *want = calloc(1, 2 * MiB);
	struct emap m;
	uint32_t ino;

	assert_non_null(want);
	fill_stale(dev);
	fs = mkfs_open(dev);
	assert_int_equal(bs_fs_create(fs, "/u", 0644, &ino), 0);
	assert_int_equal(bs_fs_fallocate(fs, ino, 0, 0, 2 * MiB), 0);
	th_fill(want + 5000, 100, 21);		/* partial block 1 */
	assert_int_equal(bs_fs_write(fs, ino, want + 5000, 100, 5000), 100);
	th_fill(want + MiB, 3 * BS, 22);	/* whole blocks 256..258 */
	assert_int_equal(bs_fs_write(fs, ino, want + MiB, 3 * BS, MiB),
			 3 * BS);
	expect_bytes(fs, ino, want, 2 * MiB);
	m = get_map(fs, ino);
	assert_int_equal(m.written, 4);
	assert_int_equal(m.unwritten, 2 * MiB / BS - 4);
	assert_int_equal(fsize(fs, ino), 2 * MiB);
	close_ok(fs);
	fsck_clean(x, dev);
	assert_int_equal(bs_fs_open(dev, BS_FS_RDONLY, &fs), 0);
	expect_bytes(fs, ino, want, 2 * MiB);
	close_ok(fs);
	free(want);
}

/* Every physical block of the file's extents reads zero on the device. */
static void device_zero_under(struct bs_dev *dev, const struct emap *m)
{
	uint8_t *buf = malloc(BS);
	unsigned i;
	uint64_t b;

	assert_non_null(buf);
	for (i = 0; i < m->n && i < 64; i++) {
		if (m->e[i].unwritten)
			continue;
		for (b = 0; b < m->e[i].len; b++) {
			assert_int_equal(bs_read_sync(dev, buf, BS,
						      (m->e[i].physical + b) * BS),
					 0);
			assert_true(th_is_zero(buf, BS));
		}
	}
	free(buf);
}

static void write_zeroes_on(struct fx *x, struct bs_dev *dev)
{
	struct bs_fs *fs;
	uint8_t *want = malloc(8 * MiB), *got = malloc(8 * MiB + 1);
	struct emap m;
	uint32_t f, g;

	assert_non_null(want);
	assert_non_null(got);
	fill_stale(dev);
	fs = mkfs_open(dev);

	/* a new file: written extents of zeroes, never the stale bytes */
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &f), 0);
	assert_int_equal(bs_fs_fallocate(fs, f, BS_FALLOC_WRITE_ZEROES, 0,
					 8 * MiB), 0);
	assert_int_equal(fsize(fs, f), 8 * MiB);
	m = get_map(fs, f);
	assert_int_equal(m.written, 8 * MiB / BS);
	assert_int_equal(m.unwritten, 0);
	assert_int_equal(bs_fs_read(fs, f, got, 8 * MiB + 1, 0), 8 * MiB);
	assert_true(th_is_zero(got, 8 * MiB));
	device_zero_under(dev, &m);

	/* over data, misaligned: edges zeroed by writing, the rest kept */
	assert_int_equal(bs_fs_create(fs, "/g", 0644, &g), 0);
	th_fill(want, 4 * MiB, 5);
	assert_int_equal(bs_fs_write(fs, g, want, 4 * MiB, 0), 4 * MiB);
	assert_int_equal(bs_fs_fallocate(fs, g, BS_FALLOC_WRITE_ZEROES,
					 MiB + 100, 2 * MiB), 0);
	memset(want + MiB + 100, 0, 2 * MiB);
	expect_bytes(fs, g, want, 4 * MiB);
	m = get_map(fs, g);
	assert_int_equal(m.unwritten, 0);
	assert_int_equal(m.written, 4 * MiB / BS);
	/* past EOF: grows, the new part written zeroes */
	assert_int_equal(bs_fs_fallocate(fs, g, BS_FALLOC_WRITE_ZEROES,
					 4 * MiB - 10, 2 * MiB + 20), 0);
	assert_int_equal(fsize(fs, g), 6 * MiB + 10);
	memset(want + 4 * MiB - 10, 0, 10);
	assert_int_equal(bs_fs_read(fs, g, got, 8 * MiB, 0), 6 * MiB + 10);
	assert_memory_equal(got, want, 4 * MiB);
	assert_true(th_is_zero(got + 4 * MiB, 2 * MiB + 10));
	assert_false(has_stale(got, 6 * MiB + 10));
	m = get_map(fs, g);
	assert_int_equal(m.written, 6 * MiB / BS);
	/* the block holding the last 10 bytes: allocated unwritten */
	assert_int_equal(m.unwritten, 1);
	/* within one block: only written zeroes by writing */
	assert_int_equal(bs_fs_fallocate(fs, g, BS_FALLOC_WRITE_ZEROES, 10, 20),
			 0);
	memset(want + 10, 0, 20);
	assert_int_equal(bs_fs_read(fs, g, got, 4 * MiB, 0), 4 * MiB);
	assert_memory_equal(got, want, 4 * MiB);

	/* plain allocation and zero range over stale blocks read zero too */
	assert_int_equal(bs_fs_create(fs, "/h", 0644, &g), 0);
	assert_int_equal(bs_fs_fallocate(fs, g, 0, 0, 4 * MiB), 0);
	assert_int_equal(bs_fs_fallocate(fs, g, BS_FALLOC_ZERO_RANGE, 4 * MiB,
					 MiB), 0);
	assert_int_equal(bs_fs_read(fs, g, got, 8 * MiB, 0), 5 * MiB);
	assert_true(th_is_zero(got, 5 * MiB));
	close_ok(fs);
	fsck_clean(x, dev);
	free(want);
	free(got);
}

/*
 * The device's zeroing fails (EIO from an error mapper between the
 * filesystem and the mem device): fallocate fails, and nothing was marked
 * written, so the range reads zeroes, never the stale bytes below.
 */
static void write_zeroes_zeroout_fails(void **state)
{
	struct fx *x = *state;
	struct bs_dev *m = th_dev(x->ctx, "m", "mem:64M"), *e;
	struct bs_fs *fs;
	uint8_t *buf = malloc(4 * MiB + 1);
	struct emap map;
	uint32_t ino;

	assert_non_null(buf);
	fill_stale(m);
	assert_int_equal(bs_fs_mkfs(m, NULL), 0);
	e = th_dev_kv(x->ctx, "e", "type=error;devices=m;ops=write_zeroes;"
		      "errno=EIO");
	assert_true(bs_dev_write_zeroes_unmap(e));
	assert_int_equal(bs_fs_open(e, 0, &fs), 0);
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &ino), 0);
	th_fill(buf, MiB, 31);
	assert_int_equal(bs_fs_write(fs, ino, buf, MiB, 0), MiB);
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_WRITE_ZEROES, 0,
					 4 * MiB), -EIO);
	map = get_map(fs, ino);
	assert_int_equal(map.written, 0);
	assert_int_equal(map.unwritten, 4 * MiB / BS);
	assert_int_equal(bs_fs_read(fs, ino, buf, 4 * MiB + 1, 0), 4 * MiB);
	assert_true(th_is_zero(buf, 4 * MiB));
	close_ok(fs);
	fsck_clean(x, m);
	free(buf);
}

/*
 * Out of space midway (issue 10 item 1): a fallocate of exactly the free
 * blocks passes the up-front check, then ext2fs_fallocate() runs out when
 * the extent tree needs its leaf block. The inode is put right (i_blocks,
 * nothing leaked), the filesystem stays usable and e2fsck -fn clean, and
 * unlinking the file returns every block, the last one of the
 * filesystem included (libext2fs 1.47.0 cannot free it by itself).
 */
static void enospc_midway(void **state)
{
	struct fx *x = *state;
	struct bs_dev *m = th_dev(x->ctx, "m", "mem:64M");
	struct bs_fs *fs = mkfs_open(m);
	struct bs_fs_info info;
	uint64_t free0;
	uint32_t a, b;
	int i;

	assert_int_equal(bs_fs_create(fs, "/a", 0644, &a), 0);
	/* fragment the free space so that /b needs more than 4 extents */
	assert_int_equal(bs_fs_fallocate(fs, a, 0, 0, 40 * MiB), 0);
	for (i = 0; i < 8; i++)
		assert_int_equal(bs_fs_fallocate(fs, a, BS_FALLOC_PUNCH_HOLE |
						 BS_FALLOC_KEEP_SIZE,
						 (int64_t)(i * 64 + 1) * BS, BS),
				 0);
	assert_int_equal(bs_fs_info(fs, &info), 0);
	free0 = info.free_blocks;
	assert_int_equal(bs_fs_create(fs, "/b", 0644, &b), 0);
	assert_int_equal(bs_fs_fallocate(fs, b, 0, 0,
					 (int64_t)(info.free_blocks + 1) * BS),
			 -ENOSPC);
	assert_non_null(strstr(bs_last_error(), "blocks to allocate"));
	assert_int_equal(bs_fs_fallocate(fs, b, 0, 0,
					 (int64_t)info.free_blocks * BS),
			 -ENOSPC);
	assert_null(strstr(bs_last_error(), "e2fsck"));
	/* still usable: what was allocated is kept, unwritten */
	assert_int_equal(bs_fs_info(fs, &info), 0);
	assert_true(info.free_blocks <= 1);
	assert_int_equal(get_map(fs, b).written, 0);
	assert_int_equal(bs_fs_create(fs, "/c", 0644, NULL), 0);
	close_ok(fs);
	fsck_clean(x, m);
	assert_int_equal(bs_fs_open(m, 0, &fs), 0);
	assert_int_equal(bs_fs_unlink(fs, "/b"), 0);
	assert_int_equal(bs_fs_info(fs, &info), 0);
	assert_int_equal(info.free_blocks, free0);
	close_ok(fs);
	fsck_clean(x, m);
}

/*
 * A metadata write fails midway: the error says "run e2fsck -f", nothing
 * more is written or allowed, close leaves the superblock not clean and a
 * read-write open refuses it; e2fsck -fy would repair it.
 */
static void metadata_write_fails(void **state)
{
	struct fx *x = *state;
	struct bs_dev *m = th_dev(x->ctx, "m", "mem:64M"), *e;
	struct bs_fs *fs;
	uint8_t *buf = malloc(MiB);
	uint32_t ino;

	assert_non_null(buf);
	assert_int_equal(bs_fs_mkfs(m, NULL), 0);
	e = th_dev_kv(x->ctx, "e", "type=error;devices=m;ops=write;"
		      "errno=EIO;after=1000000");
	assert_int_equal(bs_fs_open(e, 0, &fs), 0);
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &ino), 0);
	assert_int_equal(bs_attr_store(e, "error/after", "0"), 0);
	th_fill(buf, MiB, 7);
	assert_int_equal(bs_fs_write(fs, ino, buf, MiB, 0), -EIO);
	assert_non_null(strstr(bs_last_error(), "run e2fsck -f"));
	assert_int_equal(bs_attr_store(e, "error/after", "1000000"), 0);
	/* nothing more is written, even once the device works again */
	assert_int_equal(bs_fs_mkdir(fs, "/d", 0755, NULL), -EIO);
	assert_non_null(strstr(bs_last_error(), "run e2fsck -f"));
	assert_int_equal(bs_fs_truncate(fs, ino, 0), -EIO);
	assert_int_not_equal(bs_fs_close(fs), 0);
	assert_int_equal(sb_state(m) & 1, 0);
	/* the error device claims m exclusively: let go of it first */
	assert_int_equal(bs_dev_destroy(e), 0);
	assert_int_equal(bs_fs_open(m, 0, &fs), -EUCLEAN);
	free(buf);
}

static void write_zeroes_mem(void **state)
{
	struct fx *x = *state;

	write_zeroes_on(x, th_dev(x->ctx, "m", "mem:64M"));
}

static void write_zeroes_file(void **state)
{
	struct fx *x = *state;
	struct bs_dev *dev = file_dev(x, "");
	int64_t before, after;

	if (!bs_dev_write_zeroes_unmap(dev))
		skip();
	write_zeroes_on(x, dev);
	/* the zeroes were made by punching the image, not by writing */
	before = bs_dev_allocated(dev);
	{
		struct bs_fs *fs;
		uint32_t ino;

		assert_int_equal(bs_fs_open(dev, 0, &fs), 0);
		assert_int_equal(bs_fs_create(fs, "/big", 0644, &ino), 0);
		assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_WRITE_ZEROES,
						 0, 32 * MiB), 0);
		close_ok(fs);
	}
	after = bs_dev_allocated(dev);
	assert_true(after <= before); /* stale blocks under it were freed */
	fsck_clean(x, dev);
}

/* On a stack: linear over two mem devices, and the knob below one leg. */
static void on_a_stack(void **state)
{
	struct fx *x = *state;
	struct bs_dev *lin, *b;
	struct bs_fs *fs;
	uint8_t *buf = malloc(48 * MiB);
	struct emap m;
	uint32_t ino;

	assert_non_null(buf);
	th_dev(x->ctx, "a", "mem:32M");
	b = th_dev(x->ctx, "b", "mem:32M");
	lin = th_dev_kv(x->ctx, "lin", "type=linear;devices=a b");
	assert_true(bs_dev_write_zeroes_unmap(lin));
	fill_stale(lin);
	fs = mkfs_open(lin);
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &ino), 0);
	/* 48 MiB: the extents cross from leg a into leg b */
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_WRITE_ZEROES, 0,
					 48 * MiB), 0);
	m = get_map(fs, ino);
	assert_int_equal(m.written, 48 * MiB / BS);
	assert_int_equal(bs_fs_read(fs, ino, buf, 48 * MiB, 0), 48 * MiB);
	assert_true(th_is_zero(buf, 48 * MiB));
	device_zero_under(lin, &m);
	/* one leg loses unmap zeroing: the stack above refuses at once */
	assert_int_equal(bs_attr_store(b, "queue/write_zeroes_unmap", "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(lin));
	assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_WRITE_ZEROES, 0,
					 MiB), -EOPNOTSUPP);
	close_ok(fs);
	fsck_clean(x, lin);
	free(buf);
}

/* The knob off (or no unmap at all): EOPNOTSUPP, the file unchanged. */
static void write_zeroes_refused(void **state)
{
	struct fx *x = *state;
	const char *specs[] = { "mem:64M,write_zeroes_unmap=0",
				"mem:64M,zeroes=write", "mem:64M,zeroes=none" };
	uint8_t *want = malloc(MiB);
	unsigned i;

	assert_non_null(want);
	th_fill(want, MiB, 11);
	for (i = 0; i < 3; i++) {
		char name[8];
		struct bs_dev *dev;
		struct bs_fs *fs;
		struct emap before, after;
		uint32_t ino;

		snprintf(name, sizeof(name), "m%u", i);
		dev = th_dev(x->ctx, name, specs[i]);
		fs = mkfs_open(dev);
		assert_int_equal(bs_fs_create(fs, "/f", 0644, &ino), 0);
		assert_int_equal(bs_fs_write(fs, ino, want, MiB, 0), MiB);
		before = get_map(fs, ino);
		assert_int_equal(bs_fs_fallocate(fs, ino, BS_FALLOC_WRITE_ZEROES,
						 0, 2 * MiB), -EOPNOTSUPP);
		assert_non_null(strstr(bs_last_error(), "write zeroes"));
		after = get_map(fs, ino);
		assert_int_equal(before.n, after.n);
		for (unsigned j = 0; j < before.n && j < 64; j++) {
			assert_int_equal(before.e[j].logical, after.e[j].logical);
			assert_int_equal(before.e[j].physical,
					 after.e[j].physical);
			assert_int_equal(before.e[j].len, after.e[j].len);
			assert_int_equal(before.e[j].unwritten,
					 after.e[j].unwritten);
		}
		assert_int_equal(fsize(fs, ino), MiB);
		expect_bytes(fs, ino, want, MiB);
		close_ok(fs);
		fsck_clean(x, dev);
		assert_int_equal(bs_dev_destroy(dev), 0);
	}
	free(want);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(mkfs_state_mem_and_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(open_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(names_ops, setup, teardown),
		cmocka_unit_test_setup_teardown(full_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(data_ops, setup, teardown),
		cmocka_unit_test_setup_teardown(write_into_unwritten, setup,
						teardown),
		cmocka_unit_test_setup_teardown(falloc_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(write_zeroes_mem, setup,
						teardown),
		cmocka_unit_test_setup_teardown(write_zeroes_file, setup,
						teardown),
		cmocka_unit_test_setup_teardown(write_zeroes_zeroout_fails,
						setup, teardown),
		cmocka_unit_test_setup_teardown(write_zeroes_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(enospc_midway, setup,
						teardown),
		cmocka_unit_test_setup_teardown(metadata_write_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(on_a_stack, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
