/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the ext4 layer (lib/fs/) on a hostile image. The
 * input is an image held in a mem device; it is opened read-only (info,
 * a bounded walk of the tree with stat, map and the first bytes of every
 * file, readlink of every symbolic link, the xattrs of every inode) and
 * then read-write (put, mkdir, rename, truncate, fallocate of every mode,
 * symlink, link, mknod, setattr, setxattr/removexattr, rm); either open
 * may refuse. Nothing may crash, hang or leak, whatever the image says.
 *
 * Input layout:
 *   byte 0   configuration: bit 0 a 8 MiB device (else 2 MiB: 1 KiB
 *            blocks only); bit 1 skip the read-write pass; bit 2 make the
 *            checksums of the superblock, the group descriptors and the
 *            bitmaps match the image first (else nearly every mutation of
 *            them stops at a checksum); bit 3 (with bit 2) also drop
 *            metadata_csum, so that mutated inodes, extent blocks and
 *            directories are read rather than refused by their checksums;
 *            bits 4-7 seed the choice of names the read-write pass works
 *            on
 *   rest     records of 2 + 512 bytes: a little-endian sector number
 *            (modulo the device's sectors) and that sector's bytes; all
 *            other sectors are zero. A short last record is zero-padded.
 *
 * The seed corpus is not kept in the tree: `BLKSTACK_FUZZ_WRITE_SEEDS=DIR
 * fuzz_fs_image` writes images made by bs_fs_mkfs() and a few files into
 * DIR and exits (tests/fuzz/seeds_fs_image.sh; run.sh calls it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/fs.h>
#include <blkstack/opts.h>
#include <blkstack/zero.h>

#include <ext2fs/ext2fs.h>

#include "fs/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define SECTOR 512u
#define REC (2 + SECTOR)
#define SMALL (2u << 20)
#define LARGE (8u << 20)
#define CHUNK (64u << 10)

/* Bounds of the read-only walk. */
#define MAX_DEPTH 4
#define MAX_ENTRIES 48	/* per directory */
#define MAX_VISITS 160	/* in all */
#define MAX_EXTENTS 64
#define READ_BYTES (16u << 10)

static uint8_t *image;	/* LARGE bytes */
static uint8_t *iobuf;	/* READ_BYTES */

static int make_mem(struct bs_ctx *ctx, uint64_t bytes, struct bs_dev **out)
{
	struct bs_opts *o = NULL;
	char sz[32];
	int err;

	snprintf(sz, sizeof(sz), "%llu", (unsigned long long)bytes);
	err = bs_opts_new(&o);
	if (!err)
		err = bs_opts_set(o, "size", sz, "fuzz");
	if (!err)
		err = bs_dev_create(ctx, "img", "mem", o, out);
	bs_opts_free(o);
	return err;
}

/* ---- the read-only pass -------------------------------------------------- */

struct walk {
	struct bs_fs *fs;
	unsigned visits;
	unsigned n;
	uint32_t ino[MAX_ENTRIES];
	uint32_t mode[MAX_ENTRIES];
};

static int collect(void *arg, const char *name, uint32_t ino, uint32_t mode)
{
	struct walk *w = arg;

	if (strlen(name) > 255 || strchr(name, '/'))
		abort(); /* a name the API handed out must be a valid one */
	if (w->n >= MAX_ENTRIES)
		return 1;
	w->ino[w->n] = ino;
	w->mode[w->n] = mode;
	w->n++;
	return 0;
}

static int count_extent(void *arg, const struct bs_fs_extent *e)
{
	unsigned *n = arg;

	(void)e;
	return ++*n >= MAX_EXTENTS;
}

/* Every xattr name of @ino and (some of) their values, within bounds. */
static void read_xattrs(struct bs_fs *fs, uint32_t ino)
{
	static char names[4096];
	size_t len = 0, i, n, got = 0;

	if (bs_fs_listxattr(fs, ino, names, sizeof(names), &len))
		return;
	if (len > sizeof(names) || (len && names[len - 1]))
		abort();
	for (i = 0, n = 0; i < len && n < 8; i += strlen(names + i) + 1, n++)
		if (!bs_fs_getxattr(fs, ino, names + i, iobuf, READ_BYTES,
				    &got) && got > READ_BYTES)
			abort();
}

static void visit(struct walk *top, uint32_t ino, unsigned depth)
{
	struct walk w = { .fs = top->fs };
	struct bs_fs_stat st;
	unsigned i, n = 0;
	int64_t got;

	if (top->visits++ >= MAX_VISITS || bs_fs_stat(top->fs, ino, &st))
		return;
	read_xattrs(top->fs, ino);
	if (S_ISREG(st.mode)) {
		(void)bs_fs_map(top->fs, ino, count_extent, &n);
		got = bs_fs_read(top->fs, ino, iobuf, READ_BYTES, 0);
		if (got > (int64_t)READ_BYTES || (got >= 0 && (uint64_t)got >
						   st.size))
			abort();
		if (st.size > READ_BYTES)
			(void)bs_fs_read(top->fs, ino, iobuf, 100,
					 st.size - 50);
		return;
	}
	if (S_ISLNK(st.mode)) {
		size_t len = 0;

		/* a short buffer: the length is told, the copy is not */
		if (!bs_fs_readlink(top->fs, ino, (char *)iobuf, 100, &len) &&
		    (!len || len > BS_FS_SYMLINK_MAX || len != st.size))
			abort();
		return;
	}
	if (!S_ISDIR(st.mode) || depth >= MAX_DEPTH)
		return;
	if (bs_fs_readdir(top->fs, ino, collect, &w) < 0)
		return;
	for (i = 0; i < w.n; i++) {
		w.visits = top->visits;
		visit(&w, w.ino[i], depth + 1);
		top->visits = w.visits;
	}
}

static void pass_ro(struct bs_dev *dev)
{
	static const char *const paths[] = {
		"/", "/lost+found", "/lost+found/", "/a", "/a/", "/d/f",
		"/d/f/", "/d/./f", "/d/../a", "/.."
	};
	struct bs_fs *fs;
	struct bs_fs_info info;
	struct walk w = { 0 };
	uint32_t ino;
	size_t i;

	if (bs_fs_open(dev, BS_FS_RDONLY, &fs))
		return;
	w.fs = fs;
	(void)bs_fs_info(fs, &info);
	for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		(void)bs_fs_lookup(fs, paths[i], &ino);
	visit(&w, BS_FS_ROOT_INO, 0);
	/* every change refused */
	if (bs_fs_create(fs, "/ro", 0644, &ino) != -EROFS ||
	    bs_fs_mkdir(fs, "/ro", 0755, &ino) != -EROFS)
		abort();
	(void)bs_fs_close(fs);
}

/* ---- the read-write pass ---------------------------------------------- */

struct names {
	unsigned n;
	char name[8][64];
};

static int collect_names(void *arg, const char *name, uint32_t ino,
			 uint32_t mode)
{
	struct names *nm = arg;

	(void)ino;
	(void)mode;
	if (strlen(name) < sizeof(nm->name[0]))
		snprintf(nm->name[nm->n++], sizeof(nm->name[0]), "/%s", name);
	return nm->n >= 8;
}

static void pass_rw(struct bs_dev *dev, unsigned pick)
{
	struct bs_fs *fs;
	struct names nm = { 0 };
	uint32_t ino, dir;
	char path[80];
	unsigned i;

	if (bs_fs_open(dev, 0, &fs))
		return;
	(void)bs_fs_readdir(fs, BS_FS_ROOT_INO, collect_names, &nm);
	memset(iobuf, 0x5a, READ_BYTES);

	/* put: create, write across blocks, overwrite, read back */
	if (!bs_fs_create(fs, "/new", 0644, &ino)) {
		(void)bs_fs_write(fs, ino, iobuf, 5000, 0);
		(void)bs_fs_write(fs, ino, iobuf, 3, 4094);
		(void)bs_fs_read(fs, ino, iobuf, READ_BYTES, 0);
		(void)bs_fs_fallocate(fs, ino, 0, 8192, 8192);
		(void)bs_fs_fallocate(fs, ino, BS_FALLOC_PUNCH_HOLE |
				      BS_FALLOC_KEEP_SIZE, 1024, 2048);
		(void)bs_fs_fallocate(fs, ino, BS_FALLOC_ZERO_RANGE, 100, 9000);
		(void)bs_fs_truncate(fs, ino, 1500);
	}
	if (!bs_fs_mkdir(fs, "/nd", 0755, &dir) &&
	    !bs_fs_create(fs, "/nd/x", 0644, &ino)) {
		(void)bs_fs_write(fs, ino, iobuf, 100, 0);
		/* the mem device zeroes by unmapping: written extents */
		(void)bs_fs_fallocate(fs, ino, BS_FALLOC_WRITE_ZEROES, 4096,
				      3 * 4096 + 5);
		(void)bs_fs_truncate(fs, ino, 20000);
	}
	(void)bs_fs_rename(fs, "/new", "/nd/y");
	/* links, nodes and attributes, on whatever the image has */
	memset(iobuf, 'l', 300);
	iobuf[300] = 0;
	(void)bs_fs_symlink(fs, "/nd/sl", "y", NULL);
	(void)bs_fs_symlink(fs, "/sl2", (const char *)iobuf, NULL);
	(void)bs_fs_link(fs, "/nd/y", "/hl");
	(void)bs_fs_mknod(fs, "/nd/c", S_IFCHR | 0600, 300, 70000, NULL);
	if (!bs_fs_lookup(fs, "/hl", &ino)) {
		struct bs_fs_setattr sa = {
			.mask = BS_FS_SET_MODE | BS_FS_SET_UID |
				BS_FS_SET_MTIME | BS_FS_SET_ATIME_NOW,
			.mode = 04755, .uid = 70000, .mtime = 5000000000ll,
			.mtime_ns = 1,
		};
		(void)bs_fs_setattr(fs, ino, &sa);
	}
	/* xattrs: in the inode, in a block, replaced, removed */
	if (!bs_fs_lookup(fs, "/hl", &ino)) {
		(void)bs_fs_setxattr(fs, ino, "user.s", "v", 1, 0);
		(void)bs_fs_setxattr(fs, ino, "trusted.big", iobuf, 1500, 0);
		(void)bs_fs_setxattr(fs, ino, "user.s", "vv", 2,
				     BS_FS_XATTR_REPLACE);
		(void)bs_fs_removexattr(fs, ino, "trusted.big");
		(void)bs_fs_setxattr(fs, ino, "security.b", iobuf, 800, 0);
	}
	(void)bs_fs_unlink(fs, "/sl2");
	(void)bs_fs_unlink(fs, "/nd/c");
	/* the image's own entries, as found: write, move, remove */
	for (i = 0; i < nm.n && i < 3; i++) {
		const char *p = nm.name[(pick + i) % nm.n];

		if (!bs_fs_lookup(fs, p, &ino)) {
			(void)bs_fs_write(fs, ino, iobuf, 10, 10);
			(void)bs_fs_setxattr(fs, ino, "user.f", iobuf, 300, 0);
			(void)bs_fs_removexattr(fs, ino, "user.x");
		}
		snprintf(path, sizeof(path), "/nd%s", p);
		if ((pick >> i) & 1)
			(void)bs_fs_rename(fs, p, path);
		else
			(void)bs_fs_unlink(fs, p);
	}
	(void)bs_fs_unlink(fs, "/nd/y");
	(void)bs_fs_unlink(fs, "/hl");
	(void)bs_fs_unlink(fs, "/nd/sl");
	(void)bs_fs_unlink(fs, "/nd/x");
	(void)bs_fs_fsync(fs, BS_FS_ROOT_INO);
	(void)bs_fs_close(fs);
}

/* ---- the input ---------------------------------------------------------- */

static int load(struct bs_dev *dev, const uint8_t *data, size_t size)
{
	uint64_t nsect = dev->size / SECTOR, off;
	bool touched[LARGE / CHUNK] = { false };

	memset(image, 0, dev->size);
	while (size > 2) {
		uint64_t s = (uint64_t)(data[0] | data[1] << 8) % nsect;
		size_t n = size - 2 < SECTOR ? size - 2 : SECTOR;

		memcpy(image + s * SECTOR, data + 2, n);
		touched[s * SECTOR / CHUNK] = true;
		data += 2 + n;
		size -= 2 + n;
	}
	/* (no byte-wise scan: under coverage tracing it would dominate) */
	for (off = 0; off < dev->size; off += CHUNK)
		if (touched[off / CHUNK] &&
		    bs_write_sync(dev, image + off, CHUNK, off))
			return -1;
	return 0;
}

/*
 * Rewrite the primary superblock, group descriptors and bitmaps with
 * checksums that match what they say (libext2fs computes them on flush).
 */
static void fix_csums(struct bs_dev *dev, bool drop_csum)
{
	char name[32];
	ext2_filsys e2;
	dgrp_t g;

	if (bs_fs_io_register(dev, name, sizeof(name)))
		return;
	if (!ext2fs_open2(name, NULL, EXT2_FLAG_64BITS | EXT2_FLAG_RW |
			  EXT2_FLAG_IGNORE_CSUM_ERRORS |
			  EXT2_FLAG_MASTER_SB_ONLY, 0, 0, bs_fs_io_manager,
			  &e2)) {
		if (drop_csum) {
			ext2fs_clear_feature_metadata_csum(e2->super);
			ext2fs_clear_feature_gdt_csum(e2->super);
		}
		struct bs_fs tmp = { .dev = dev, .e2 = e2 };
		struct fs_check c = { 0 };

		/* bs_fs_open() reads no bitmaps of a geometry this refuses */
		if (!fs_check_super(&tmp, &c) && !ext2fs_read_bitmaps(e2)) {
			ext2fs_mark_bb_dirty(e2);
			ext2fs_mark_ib_dirty(e2);
		}
		for (g = 0; g < e2->group_desc_count; g++)
			ext2fs_group_desc_csum_set(e2, g);
		ext2fs_mark_super_dirty(e2);
		(void)ext2fs_flush(e2);
		ext2fs_free(e2);
	}
	bs_fs_io_unregister(name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bs_ctx *ctx;
	struct bs_dev *dev;
	uint8_t cfg;

	if (size < 1)
		return 0;
	cfg = data[0];
	if (bs_ctx_new(&ctx))
		return 0;
	if (!make_mem(ctx, cfg & 1 ? LARGE : SMALL, &dev) &&
	    !load(dev, data + 1, size - 1)) {
		if (cfg & 4)
			fix_csums(dev, cfg & 8);
		pass_ro(dev);
		if (!(cfg & 2))
			pass_rw(dev, cfg >> 4);
	}
	bs_ctx_free(ctx);
	return 0;
}

/* ---- seeds ------------------------------------------------------------ */

/* The non-zero sectors of @dev as one input, in @dir/@name. */
static int write_seed(struct bs_dev *dev, unsigned cfg, const char *dir,
		      const char *name)
{
	char path[512];
	uint64_t s;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || bs_read_sync(dev, image, dev->size, 0))
		return -1;
	fputc((int)cfg, f);
	for (s = 0; s < dev->size / SECTOR; s++) {
		const uint8_t *p = image + s * SECTOR;
		size_t i;

		for (i = 0; i < SECTOR && !p[i]; i++)
			;
		if (i == SECTOR)
			continue;
		fputc((int)(s & 0xff), f);
		fputc((int)(s >> 8), f);
		fwrite(p, 1, SECTOR, f);
	}
	return fclose(f) ? -1 : 0;
}

static int put(struct bs_fs *fs, const char *path, uint64_t len, int fill)
{
	uint32_t ino;

	memset(iobuf, fill, READ_BYTES);
	if (bs_fs_create(fs, path, 0644, &ino))
		return -1;
	while (len) {
		uint64_t n = len < READ_BYTES ? len : READ_BYTES;
		uint64_t off = 0;
		struct bs_fs_stat st;

		if (bs_fs_stat(fs, ino, &st))
			return -1;
		off = st.size;
		if (bs_fs_write(fs, ino, iobuf, n, off) != (int64_t)n)
			return -1;
		len -= n;
	}
	return 0;
}

/* An image of @bytes with block size @bs; @files: 0 none, 1 some, 2 more. */
static int make_seed(const char *dir, const char *name, uint64_t bytes,
		     uint32_t bs, int files, bool leave_dirty, unsigned cfg)
{
	struct bs_fs_mkfs_opts o = { .block_size = bs, .inode_ratio = 4096 };
	struct bs_ctx *ctx;
	struct bs_dev *dev;
	struct bs_fs *fs;
	uint32_t ino;
	int err = -1;

	if (bs_ctx_new(&ctx))
		return -1;
	if (make_mem(ctx, bytes, &dev) || bs_fs_mkfs(dev, &o) ||
	    bs_fs_open(dev, 0, &fs))
		goto out;
	if (files >= 1 &&
	    (put(fs, "/a", 100, 'a') || bs_fs_mkdir(fs, "/d", 0755, NULL) ||
	     put(fs, "/d/f", 3 * bs + 17, 'f') ||
	     bs_fs_mkdir(fs, "/d/e", 0700, NULL) ||
	     bs_fs_symlink(fs, "/d/s", "f", NULL) ||
	     bs_fs_symlink(fs, "/d/slow", "/0123456789/0123456789/0123456789/"
			   "0123456789/0123456789/0123456789", NULL) ||
	     bs_fs_link(fs, "/a", "/d/a2") ||
	     bs_fs_lookup(fs, "/d/f", &ino) ||
	     bs_fs_setxattr(fs, ino, "user.x", "in the inode", 12, 0) ||
	     bs_fs_setxattr(fs, ino, "user.big", iobuf, 1000, 0) ||
	     bs_fs_setxattr(fs, BS_FS_ROOT_INO, "trusted.t", "t", 1, 0)))
		goto close;
	if (files >= 2) {
		char p[32];
		int i;

		/* a sparse file with an unwritten range, a fuller directory */
		if (bs_fs_create(fs, "/sparse", 0600, &ino) ||
		    bs_fs_write(fs, ino, "x", 1, 40 * bs) != 1 ||
		    bs_fs_fallocate(fs, ino, BS_FALLOC_KEEP_SIZE, 4 * bs,
				    8 * bs))
			goto close;
		for (i = 0; i < 40; i++) {
			snprintf(p, sizeof(p), "/d/entry-with-a-long-name-%02d",
				 i);
			if (put(fs, p, (uint64_t)i * 37, 'A' + i % 26))
				goto close;
		}
		for (i = 0; i < 30; i += 3) {
			snprintf(p, sizeof(p), "/d/entry-with-a-long-name-%02d",
				 i);
			if (bs_fs_unlink(fs, p))
				goto close;
		}
	}
	if (leave_dirty) {
		/* as a crash leaves it: not clean (read-only still opens) */
		err = bs_fs_fsync(fs, BS_FS_ROOT_INO);
		if (!err)
			err = write_seed(dev, cfg | (bytes == LARGE), dir,
					 name);
		bs_fs_close(fs);
		goto out;
	}
close:
	if (bs_fs_close(fs))
		goto out;
	err = write_seed(dev, cfg | (bytes == LARGE), dir, name);
out:
	bs_ctx_free(ctx);
	return err;
}

static int write_seeds(const char *dir)
{
	if (mkdir(dir, 0755) && errno != EEXIST)
		return -1;
	if (make_seed(dir, "empty-1k", SMALL, 1024, 0, false, 4) ||
	    make_seed(dir, "files-1k", SMALL, 1024, 1, false, 4) ||
	    make_seed(dir, "files-1k-csum", SMALL, 1024, 1, false, 0) ||
	    make_seed(dir, "files-1k-nocsum", SMALL, 1024, 1, false, 4 | 8) ||
	    make_seed(dir, "more-1k", SMALL, 1024, 2, false, 4 | 16) ||
	    make_seed(dir, "more-1k-nocsum", SMALL, 1024, 2, false, 12 | 32) ||
	    make_seed(dir, "dirty-1k", SMALL, 1024, 1, true, 4) ||
	    make_seed(dir, "files-4k", LARGE, 4096, 1, false, 4 | 48) ||
	    make_seed(dir, "more-2k", LARGE, 2048, 2, false, 12 | 64))
		return -1;
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *seeds = getenv("BLKSTACK_FUZZ_WRITE_SEEDS");

	(void)argc;
	(void)argv;
	image = malloc(LARGE);
	iobuf = malloc(READ_BYTES);
	if (!image || !iobuf)
		abort();
	if (seeds) {
		int rc = write_seeds(seeds);

		if (rc)
			fprintf(stderr, "fuzz_fs_image: writing seeds to %s: "
				"%s\n", seeds, bs_last_error());
		exit(rc ? 1 : 0);
	}
	return 0;
}
