/* SPDX-License-Identifier: MIT */
/*
 * WRITE_SAME (bs_write_same): every malformed description and its
 * nfsstat4, the byte layout of patterns and block numbers, the zero fast
 * path and its fallback, bounded memory for huge counts, and the host-file
 * and ext4 sinks.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/fs.h>
#include <blkstack/write_same.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* ---- a memory sink --------------------------------------------------- */

struct msink {
	uint8_t *data;
	size_t size;
	int zeroes_result;	/* what write_zeroes says (0 = it zeroes) */
	unsigned zeroes_calls;
	unsigned writes;
	unsigned fail_after;	/* write number that fails with -ENOSPC; 0 never */
	size_t max_len;		/* longest write seen */
	const void *first_buf;	/* the buffer of the first write */
	bool same_buf;		/* every write used it */
	bool discard;		/* do not store (huge ranges) */
	unsigned commits;
};

static int m_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct msink *m = arg;

	m->writes++;
	if (m->fail_after && m->writes >= m->fail_after)
		return -ENOSPC;
	if (len > m->max_len)
		m->max_len = len;
	if (!m->first_buf) {
		m->first_buf = buf;
		m->same_buf = true;
	} else if (buf != m->first_buf) {
		m->same_buf = false;
	}
	if (m->discard)
		return 0;
	assert_true(off + len <= m->size);
	memcpy(m->data + off, buf, len);
	return 0;
}

static int m_write_zeroes(void *arg, uint64_t off, uint64_t len)
{
	struct msink *m = arg;

	m->zeroes_calls++;
	if (m->zeroes_result)
		return m->zeroes_result;
	if (!m->discard) {
		assert_true(off + len <= m->size);
		memset(m->data + off, 0, len);
	}
	return 0;
}

static int m_commit(void *arg)
{
	struct msink *m = arg;

	m->commits++;
	return 0;
}

static const struct bs_ws_sink_ops m_ops = {
	.write = m_write,
	.write_zeroes = m_write_zeroes,
	.commit = m_commit,
};

static struct bs_ws_sink msink_init(struct msink *m, size_t size,
				    uint64_t max_size)
{
	memset(m, 0, sizeof(*m));
	m->size = size;
	if (size) {
		m->data = malloc(size);
		assert_non_null(m->data);
		memset(m->data, 0xee, size);
	}
	return (struct bs_ws_sink){ .ops = &m_ops, .arg = m,
				    .max_size = max_size };
}

static struct bs_ws_adb adb_of(uint64_t off, uint64_t bs, uint64_t count,
			       const void *pat, uint32_t plen)
{
	return (struct bs_ws_adb){
		.offset = off, .block_size = bs, .block_count = count,
		.reloff_blocknum = BS_WS_NO_BLOCKNUM, .pattern = pat,
		.pattern_len = plen,
	};
}

static uint64_t be64_at(const uint8_t *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* ---- checks ---------------------------------------------------------- */

/* Each malformed description: its errno, its nfsstat4, nothing written. */
static void error_rows(void **state)
{
	static const uint8_t pat[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	struct {
		struct bs_ws_adb adb;
		int err;
		uint32_t nfsstat;
	} rows[] = {
		/* block size 0 */
		{ adb_of(0, 0, 1, pat, 4), -EINVAL, 22 },
		{ adb_of(0, 0, 0, NULL, 0), -EINVAL, 22 },
		/* pattern longer than the block */
		{ adb_of(0, 8, 1, pat, 9), -EINVAL, 22 },
		/* pattern offset outside the block */
		{ { .block_size = 16, .block_count = 1,
		    .reloff_blocknum = BS_WS_NO_BLOCKNUM, .reloff_pattern = 16,
		    .pattern = pat, .pattern_len = 1 }, -EINVAL, 22 },
		/* block number not inside the block */
		{ { .block_size = 16, .block_count = 1, .reloff_blocknum = 9 },
		  -EINVAL, 22 },
		{ { .block_size = 4, .block_count = 1, .reloff_blocknum = 0 },
		  -EINVAL, 22 },
		/* size overflows */
		{ adb_of(0, 1ull << 32, 1ull << 32, NULL, 0), -EINVAL, 22 },
		/* offset + size overflows */
		{ adb_of(UINT64_MAX - 4095, 4096, 1, NULL, 0), -EINVAL, 22 },
		/* past the largest file size (1 GiB here) */
		{ adb_of(GiB - 4096, 4096, 2, NULL, 0), -EFBIG, 27 },
		{ adb_of(GiB, 1, 1, pat, 1), -EFBIG, 27 },
	};
	struct msink m;
	struct bs_ws_sink sink = msink_init(&m, 0, GiB);
	struct bs_ws_result res;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int err = bs_write_same(&rows[i].adb, &sink, true, &res);

		assert_int_equal(err, rows[i].err);
		assert_int_equal(bs_ws_nfsstat(err), rows[i].nfsstat);
		assert_int_equal(bs_ws_check(&rows[i].adb, GiB), rows[i].err);
		assert_true(*bs_last_error());
	}
	assert_int_equal(m.writes, 0);
	assert_int_equal(m.zeroes_calls, 0);
	assert_int_equal(m.commits, 0);

	/* in range: the last byte of the largest file, a zero count */
	{
		struct bs_ws_adb ok = adb_of(GiB - 4096, 4096, 0, NULL, 0);

		assert_int_equal(bs_ws_check(&ok, GiB), 0);
		m.discard = true;
		ok.block_count = 1;
		assert_int_equal(bs_ws_check(&ok, GiB), 0);
		assert_int_equal(bs_write_same(&ok, &sink, false, &res), 0);
		assert_int_equal(res.path, BS_WS_PATH_WRITE_ZEROES);
		ok.block_count = 0;
		assert_int_equal(bs_write_same(&ok, &sink, false, &res), 0);
		assert_int_equal(res.path, BS_WS_PATH_NONE);
	}
	/* the mapping of other errors */
	assert_int_equal(bs_ws_nfsstat(0), 0);
	assert_int_equal(bs_ws_nfsstat(-ENOSPC), 28);
	assert_int_equal(bs_ws_nfsstat(-EIO), 5);
	assert_int_equal(bs_ws_nfsstat(-EROFS), 30);
	assert_int_equal(bs_ws_nfsstat(-EDQUOT), 69);
	assert_int_equal(bs_ws_nfsstat(-EOPNOTSUPP), 10004);
	assert_int_equal(bs_ws_nfsstat(-ENOMEM), 10006);
}

/* ---- layout ---------------------------------------------------------- */

/* The pattern repeated from reloff_pattern, zeroes before it. */
static void pattern_layout(void **state)
{
	static const uint8_t pat[3] = { 0xa1, 0xb2, 0xc3 };
	struct bs_ws_adb adb = adb_of(100, 16, 5, pat, 3);
	struct bs_ws_result res;
	struct msink m;
	struct bs_ws_sink sink = msink_init(&m, 4096, 0);
	uint64_t i;

	(void)state;
	adb.reloff_pattern = 4;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_PATTERN);
	assert_int_equal(res.bytes, 80);
	assert_false(res.committed);
	assert_int_equal(m.zeroes_calls, 0);
	assert_int_equal(m.commits, 0);
	for (i = 0; i < 100; i++)
		assert_int_equal(m.data[i], 0xee);
	for (i = 0; i < 80; i++) {
		uint64_t o = i % 16;
		uint8_t want = o < 4 ? 0 : pat[(o - 4) % 3];

		assert_int_equal(m.data[100 + i], want);
	}
	assert_int_equal(m.data[180], 0xee);
	free(m.data);

	/* a pattern as long as the block is the block */
	{
		uint8_t blk[8] = { 9, 8, 7, 6, 5, 4, 3, 2 };

		adb = adb_of(0, 8, 3, blk, 8);
		sink = msink_init(&m, 64, 0);
		assert_int_equal(bs_write_same(&adb, &sink, true, &res), 0);
		assert_true(res.committed);
		assert_int_equal(m.commits, 1);
		for (i = 0; i < 24; i++)
			assert_int_equal(m.data[i], blk[i % 8]);
		assert_int_equal(m.data[24], 0xee);
		free(m.data);
	}
}

/* Block numbers: 64-bit big-endian at reloff_blocknum, from block_num. */
static void blocknum_layout(void **state)
{
	static const uint8_t pat[1] = { 0x5a };
	struct bs_ws_adb adb = adb_of(0, 512, 3000, pat, 1);
	struct bs_ws_result res;
	struct msink m;
	struct bs_ws_sink sink = msink_init(&m, 512 * 3000, 0);
	uint64_t b, i;

	(void)state;
	adb.reloff_blocknum = 504;	/* the last 8 bytes of each block */
	adb.block_num = 0xfffffffeu;	/* crosses 2^32: no wrap */
	sink.max_write = 64 * KiB;	/* several pieces, restamped */
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_PATTERN);
	assert_true(m.writes > 1);
	assert_true(m.max_len <= 64 * KiB);
	for (b = 0; b < 3000; b++) {
		const uint8_t *blk = m.data + b * 512;

		for (i = 0; i < 504; i++)
			if (blk[i] != 0x5a)
				fail_msg("block %llu byte %llu",
					 (unsigned long long)b,
					 (unsigned long long)i);
		assert_int_equal(be64_at(blk + 504), 0xfffffffeull + b);
	}
	free(m.data);

	/* a block number alone (empty pattern): zero blocks, numbered */
	adb = adb_of(8, 16, 4, NULL, 0);
	adb.reloff_blocknum = 2;
	adb.block_num = 7;
	sink = msink_init(&m, 128, 0);
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_PATTERN);
	assert_int_equal(m.zeroes_calls, 0);
	for (b = 0; b < 4; b++) {
		const uint8_t *blk = m.data + 8 + b * 16;

		assert_int_equal(blk[0] | blk[1], 0);
		assert_int_equal(be64_at(blk + 2), 7 + b);
		for (i = 10; i < 16; i++)
			assert_int_equal(blk[i], 0);
	}
	free(m.data);

	/* blocks larger than the buffer: pieces inside a block */
	adb = adb_of(0, 3 * MiB, 2, pat, 1);
	adb.reloff_blocknum = 2 * MiB - 4;	/* straddles a piece boundary */
	adb.block_num = 40;
	sink = msink_init(&m, 6 * MiB, 0);
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_true(res.buf_size <= BS_WS_BUF_MAX);
	assert_int_equal(be64_at(m.data + 2 * MiB - 4), 40);
	assert_int_equal(be64_at(m.data + 5 * MiB - 4), 41);
	assert_int_equal(m.data[0], 0x5a);
	assert_int_equal(m.data[2 * MiB - 5], 0x5a);
	assert_int_equal(m.data[2 * MiB + 4], 0x5a);
	assert_int_equal(m.data[6 * MiB - 1], 0x5a);
	free(m.data);
}

/* ---- zeroes ---------------------------------------------------------- */

/* All-zero blocks go to write_zeroes once; a zero pattern counts as zero. */
static void zero_fast_path(void **state)
{
	static const uint8_t zpat[4];
	struct bs_ws_adb adb = adb_of(4096, 4096, 256, zpat, 4);
	struct bs_ws_result res;
	struct msink m;
	struct bs_ws_sink sink = msink_init(&m, 2 * MiB, 0);

	(void)state;
	sink.stable = true;
	assert_true(bs_ws_is_zero(&adb));
	assert_int_equal(bs_write_same(&adb, &sink, true, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_WRITE_ZEROES);
	assert_string_equal(bs_ws_path_name(res.path), "write-zeroes");
	assert_int_equal(res.bytes, MiB);
	assert_true(res.committed);
	assert_int_equal(m.zeroes_calls, 1);
	assert_int_equal(m.writes, 0);
	assert_int_equal(m.commits, 0);	/* a stable sink needs none */
	assert_int_equal(res.buf_size, 0);
	assert_int_equal(m.data[4095], 0xee);
	assert_true(th_is_zero(m.data + 4096, MiB));
	assert_int_equal(m.data[4096 + MiB], 0xee);
	free(m.data);

	/* a pattern with one non-zero byte is not zero */
	{
		static const uint8_t p1[4] = { 0, 0, 1, 0 };

		adb = adb_of(0, 4, 1, p1, 4);
		assert_false(bs_ws_is_zero(&adb));
	}
}

/* write_zeroes says EOPNOTSUPP (or is missing): zeroes are written. */
static void zero_fallback(void **state)
{
	struct bs_ws_adb adb = adb_of(0, 4096, 1024 + 3, NULL, 0);
	struct bs_ws_result res;
	struct msink m;
	struct bs_ws_sink sink = msink_init(&m, 5 * MiB, 0);
	static const struct bs_ws_sink_ops no_wz = { .write = m_write };

	(void)state;
	m.zeroes_result = -EOPNOTSUPP;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_ZERO_WRITES);
	assert_string_equal(bs_ws_path_name(res.path), "zero-writes");
	assert_int_equal(res.bytes, (1024 + 3) * 4096ull);
	assert_int_equal(m.zeroes_calls, 1);
	assert_int_equal(m.writes, 5);	/* 4 MiB + 12 KiB in 1 MiB pieces */
	assert_int_equal(m.max_len, BS_WS_BUF_MAX);
	assert_true(m.same_buf);	/* one shared zero buffer */
	assert_int_equal(res.buf_size, 0);	/* nothing allocated */
	assert_true(th_is_zero(m.data, (1024 + 3) * 4096));
	assert_int_equal(m.data[(1024 + 3) * 4096], 0xee);

	/* another error of write_zeroes is the answer, nothing written */
	memset(m.data, 0xee, m.size);
	m.writes = 0;
	m.zeroes_result = -EIO;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), -EIO);
	assert_int_equal(m.writes, 0);

	/* no write_zeroes op at all */
	sink.ops = &no_wz;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_ZERO_WRITES);
	assert_true(th_is_zero(m.data, (1024 + 3) * 4096));
	free(m.data);
}

/* ---- memory ---------------------------------------------------------- */

/*
 * A huge count never allocates more than the cap: 1 TiB of a pattern with
 * block numbers; the sink stops it after 20 writes (-ENOSPC, the answer).
 */
static void bounded_memory(void **state)
{
	static const uint8_t pat[5] = { 1, 2, 3, 4, 5 };
	struct bs_ws_adb adb = adb_of(0, 4096, 1ull << 28, pat, 5);
	struct bs_ws_result res;
	struct msink m;
	struct bs_ws_sink sink = msink_init(&m, 0, 0);
	uint64_t rss0 = th_peak_rss();

	(void)state;
	m.discard = true;
	m.fail_after = 20;
	adb.reloff_blocknum = 0;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), -ENOSPC);
	assert_int_equal(bs_ws_nfsstat(-ENOSPC), 28);
	assert_int_equal(res.path, BS_WS_PATH_PATTERN);
	assert_true(res.buf_size <= BS_WS_BUF_MAX);
	assert_true(m.max_len <= BS_WS_BUF_MAX);
	assert_true(m.same_buf);
	assert_int_equal(res.writes, 20);
	assert_int_equal(res.bytes, 19 * (uint64_t)BS_WS_BUF_MAX);
	assert_false(res.committed);
	/* blocks of odd sizes: the piece is whole blocks under the cap */
	adb.block_size = 3000;
	m.writes = 0;
	m.max_len = 0;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), -ENOSPC);
	assert_int_equal(res.buf_size, (BS_WS_BUF_MAX / 3000) * 3000);
	/* a sink with a smaller write limit gets a smaller buffer */
	sink.max_write = 64 * KiB;
	adb.block_size = 4096;
	m.writes = 0;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), -ENOSPC);
	assert_int_equal(res.buf_size, 64 * KiB);
	/* 1 TiB of zeroes by writing: nothing allocated at all */
	adb = adb_of(0, 1ull << 20, 1ull << 20, NULL, 0);
	m.zeroes_result = -EOPNOTSUPP;
	m.writes = 0;
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), -ENOSPC);
	assert_int_equal(res.path, BS_WS_PATH_ZERO_WRITES);
	assert_int_equal(res.buf_size, 0);
	assert_true(th_peak_rss() < rss0 + 16 * MiB);
}

/* ---- host file sink --------------------------------------------------- */

static void file_sink(void **state)
{
	static const uint8_t pat[2] = { 0x12, 0x34 };
	char path[] = "/tmp/test_write_same.XXXXXX";
	struct bs_ws_file_sink f;
	struct bs_ws_sink sink;
	struct bs_ws_result res;
	struct bs_ws_adb adb;
	uint8_t buf[8192];
	struct stat st;
	int fd = mkstemp(path);
	uint64_t i;

	(void)state;
	assert_true(fd >= 0);
	unlink(path);
	bs_ws_file_sink_init(&sink, &f, fd);
	/* a pattern with block numbers */
	adb = adb_of(4096, 1024, 4, pat, 2);
	adb.reloff_pattern = 8;
	adb.reloff_blocknum = 0;
	adb.block_num = 1;
	assert_int_equal(bs_write_same(&adb, &sink, true, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_PATTERN);
	assert_true(res.committed);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 8192);
	assert_int_equal(pread(fd, buf, sizeof(buf), 0), 8192);
	assert_true(th_is_zero(buf, 4096));
	for (i = 0; i < 4; i++) {
		const uint8_t *blk = buf + 4096 + i * 1024;

		assert_int_equal(be64_at(blk), 1 + i);
		assert_int_equal(blk[8], 0x12);
		assert_int_equal(blk[9], 0x34);
		assert_int_equal(blk[1023], (1023 - 8) % 2 ? 0x34 : 0x12);
	}
	/* zeroes over it: written extents either way, and they read zero */
	adb = adb_of(0, 4096, 16, NULL, 0);
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_true(res.path == BS_WS_PATH_WRITE_ZEROES ||
		    res.path == BS_WS_PATH_ZERO_WRITES);
	assert_int_equal(fstat(fd, &st), 0);
	assert_int_equal(st.st_size, 65536);
	/* fully allocated: written zeroes, never holes */
	assert_true(st.st_blocks * 512 >= 65536);
	assert_int_equal(lseek(fd, 0, SEEK_HOLE), 65536);
	for (i = 0; i < 8; i++) {
		assert_int_equal(pread(fd, buf, sizeof(buf), i * 8192), 8192);
		assert_true(th_is_zero(buf, sizeof(buf)));
	}
	close(fd);
}

/* ---- ext4 sink ------------------------------------------------------- */

static struct bs_fs *mkfs_open(struct bs_dev *dev)
{
	struct bs_fs *fs;

	assert_int_equal(bs_fs_mkfs(dev, NULL), 0);
	assert_int_equal(bs_fs_open(dev, 0, &fs), 0);
	return fs;
}

struct ext_count {
	uint64_t written, unwritten;
};

static int count_ext(void *arg, const struct bs_fs_extent *e)
{
	struct ext_count *c = arg;

	if (e->unwritten)
		c->unwritten += e->len;
	else
		c->written += e->len;
	return 0;
}

/* Returns the data bytes the device wrote for 4 MiB of zeroes. */
static uint64_t fs_sink_on(struct bs_dev *dev, enum bs_ws_path want)
{
	static const uint8_t pat[1] = { 0x77 };
	struct bs_ws_fs_sink f;
	struct bs_ws_sink sink;
	struct bs_ws_result res;
	struct ext_count c = { 0, 0 };
	struct bs_ws_adb adb;
	struct bs_fs_stat st;
	struct bs_fs *fs = mkfs_open(dev);
	uint8_t *buf = malloc(4 * MiB);
	uint64_t max, before, zero_bytes;
	uint32_t ino;

	assert_non_null(buf);
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &ino), 0);
	assert_int_equal(bs_ws_fs_sink_init(&sink, &f, fs, ino), 0);
	assert_int_equal(bs_fs_max_file_size(fs, ino, &max), 0);
	assert_int_equal(sink.max_size, max);
	/* stale data first, to see the zeroes replace it */
	memset(buf, 0x99, 4 * MiB);
	assert_int_equal(bs_fs_write(fs, ino, buf, 4 * MiB, 0), 4 * MiB);
	adb = adb_of(0, 4096, 1024, NULL, 0);
	before = dev->stats.bytes[BS_OP_WRITE];
	assert_int_equal(bs_write_same(&adb, &sink, true, &res), 0);
	zero_bytes = dev->stats.bytes[BS_OP_WRITE] - before;
	assert_int_equal(res.path, want);
	assert_true(res.committed);
	assert_int_equal(bs_fs_read(fs, ino, buf, 4 * MiB, 0), 4 * MiB);
	assert_true(th_is_zero(buf, 4 * MiB));
	assert_int_equal(bs_fs_map(fs, ino, count_ext, &c), 0);
	assert_int_equal(c.unwritten, 0);
	assert_int_equal(c.written, 1024);
	/* a pattern past the end grows the file */
	adb = adb_of(4 * MiB, 4096, 2, pat, 1);
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), 0);
	assert_int_equal(res.path, BS_WS_PATH_PATTERN);
	assert_int_equal(bs_fs_stat(fs, ino, &st), 0);
	assert_int_equal(st.size, 4 * MiB + 8192);
	assert_int_equal(bs_fs_read(fs, ino, buf, 8192, 4 * MiB), 8192);
	assert_int_equal(buf[0], 0x77);
	assert_int_equal(buf[8191], 0x77);
	/* past the inode's largest size: FBIG, nothing done */
	adb = adb_of(max - 4096, 4096, 2, NULL, 0);
	assert_int_equal(bs_write_same(&adb, &sink, false, &res), -EFBIG);
	/* a directory is no sink */
	assert_int_equal(bs_ws_fs_sink_init(&sink, &f, fs, BS_FS_ROOT_INO),
			 -EISDIR);
	assert_int_equal(bs_fs_close(fs), 0);
	free(buf);
	return zero_bytes;
}

/* The device zeroes by unmapping: WRITE_ZEROES, no data written. */
static void fs_sink_unmap(void **state)
{
	struct bs_dev *d = th_dev(*state, "m", "mem:64M");

	assert_true(bs_dev_write_zeroes_unmap(d));
	/* metadata only: far less than the 4 MiB of zeroes */
	assert_true(fs_sink_on(d, BS_WS_PATH_WRITE_ZEROES) < 256 * KiB);
}

/* The knob at 0: the fs layer says EOPNOTSUPP, zeroes are written. */
static void fs_sink_knob_off(void **state)
{
	struct bs_dev *d = th_dev(*state, "m", "mem:64M");

	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(d));
	assert_true(fs_sink_on(d, BS_WS_PATH_ZERO_WRITES) >= 4 * MiB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(error_rows),
		cmocka_unit_test(pattern_layout),
		cmocka_unit_test(blocknum_layout),
		cmocka_unit_test(zero_fast_path),
		cmocka_unit_test(zero_fallback),
		cmocka_unit_test(bounded_memory),
		cmocka_unit_test(file_sink),
		cmocka_unit_test_setup_teardown(fs_sink_unmap, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(fs_sink_knob_off, th_ctx_setup,
						th_ctx_teardown),
	};

	return cmocka_run_group_tests_name("write_same", tests, NULL, NULL);
}
