/* SPDX-License-Identifier: MIT */
/*
 * WRITE_SAME: an application data block description made into bytes on a
 * sink (see <blkstack/write_same.h> for the layout and the checks).
 *
 *   all-zero blocks        the sink's write_zeroes (written extents at
 *                          metadata cost); -EOPNOTSUPP there: zeroes
 *                          written from one static buffer, in pieces
 *   any other block        the blocks laid out in one reused buffer of at
 *                          most BS_WS_BUF_MAX bytes and written in pieces;
 *                          with blocks no larger than a piece the buffer is
 *                          filled once and only the block numbers (if any)
 *                          are stamped again for each piece
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/write_same.h>

#include "export/nfs/nfs4_const.h"

/* Never written: the source of every zero write. */
static uint8_t ws_zeroes[BS_WS_BUF_MAX];

static bool has_pattern(const struct bs_ws_adb *adb)
{
	return adb->pattern_len > 0;
}

static bool has_blocknum(const struct bs_ws_adb *adb)
{
	return adb->reloff_blocknum != BS_WS_NO_BLOCKNUM;
}

static uint64_t max_size_of(uint64_t max_size)
{
	return max_size ? max_size : (uint64_t)INT64_MAX;
}

int bs_ws_check(const struct bs_ws_adb *adb, uint64_t max_size)
{
	uint64_t size;

	if (adb->block_size == 0)
		return bs_error(-EINVAL, "write same: block size 0");
	if (adb->pattern_len > adb->block_size)
		return bs_error(-EINVAL, "write same: pattern of %u bytes is "
				"longer than the block (%llu)",
				adb->pattern_len,
				(unsigned long long)adb->block_size);
	if (has_pattern(adb) && adb->reloff_pattern >= adb->block_size)
		return bs_error(-EINVAL, "write same: pattern offset %llu is "
				"outside the block (%llu bytes)",
				(unsigned long long)adb->reloff_pattern,
				(unsigned long long)adb->block_size);
	if (has_blocknum(adb) &&
	    (adb->block_size < BS_WS_BLOCKNUM_SIZE ||
	     adb->reloff_blocknum > adb->block_size - BS_WS_BLOCKNUM_SIZE))
		return bs_error(-EINVAL, "write same: block number at %llu "
				"does not fit in the block (%llu bytes, the "
				"number takes %u)",
				(unsigned long long)adb->reloff_blocknum,
				(unsigned long long)adb->block_size,
				BS_WS_BLOCKNUM_SIZE);
	if (__builtin_mul_overflow(adb->block_size, adb->block_count, &size) ||
	    adb->offset > UINT64_MAX - size)
		return bs_error(-EINVAL, "write same: offset %llu + %llu "
				"blocks of %llu bytes overflows",
				(unsigned long long)adb->offset,
				(unsigned long long)adb->block_count,
				(unsigned long long)adb->block_size);
	if (size && adb->offset + size > max_size_of(max_size))
		return bs_error(-EFBIG, "write same: end %llu is past the "
				"largest file size %llu",
				(unsigned long long)(adb->offset + size),
				(unsigned long long)max_size_of(max_size));
	return 0;
}

bool bs_ws_is_zero(const struct bs_ws_adb *adb)
{
	uint32_t i;

	if (has_blocknum(adb))
		return false;
	for (i = 0; i < adb->pattern_len; i++)
		if (adb->pattern[i])
			return false;
	return true;
}

const char *bs_ws_path_name(enum bs_ws_path path)
{
	switch (path) {
	case BS_WS_PATH_WRITE_ZEROES: return "write-zeroes";
	case BS_WS_PATH_ZERO_WRITES: return "zero-writes";
	case BS_WS_PATH_PATTERN: return "pattern";
	case BS_WS_PATH_NONE: break;
	}
	return "none";
}

uint32_t bs_ws_nfsstat(int err)
{
	switch (err) {
	case 0: return NFS4_OK;
	case -EINVAL: return NFS4ERR_INVAL;
	case -EFBIG: return NFS4ERR_FBIG;
	case -ENOSPC: return NFS4ERR_NOSPC;
	case -EDQUOT: return NFS4ERR_DQUOT;
	case -EROFS: return NFS4ERR_ROFS;
	case -EACCES: return NFS4ERR_ACCESS;
	case -EPERM: return NFS4ERR_ACCESS;
	case -EISDIR: return NFS4ERR_ISDIR;
	case -EIO: return NFS4ERR_IO;
	case -EOPNOTSUPP: return NFS4ERR_NOTSUPP;
	case -ESTALE: return NFS4ERR_STALE;
	}
	return NFS4ERR_SERVERFAULT;
}

/* Bytes [o, o + n) of block @blk's image into @dst (o + n <= block_size). */
static void block_bytes(const struct bs_ws_adb *adb, uint64_t blk,
			uint8_t *dst, uint64_t o, uint64_t n)
{
	uint64_t end = o + n, x;

	if (!has_pattern(adb) || end <= adb->reloff_pattern) {
		memset(dst, 0, n);
	} else {
		x = o;
		if (x < adb->reloff_pattern) {
			memset(dst, 0, adb->reloff_pattern - x);
			x = adb->reloff_pattern;
		}
		while (x < end) {
			uint64_t p = (x - adb->reloff_pattern) %
				     adb->pattern_len;
			uint64_t take = adb->pattern_len - p;

			if (take > end - x)
				take = end - x;
			memcpy(dst + (x - o), adb->pattern + p, take);
			x += take;
		}
	}
	if (has_blocknum(adb)) {
		uint64_t num = adb->block_num + blk;
		uint64_t s = adb->reloff_blocknum;
		uint64_t e = s + BS_WS_BLOCKNUM_SIZE;
		uint8_t be[BS_WS_BLOCKNUM_SIZE];
		unsigned i;

		for (i = 0; i < BS_WS_BLOCKNUM_SIZE; i++)
			be[i] = (uint8_t)(num >> (8 * (BS_WS_BLOCKNUM_SIZE - 1 -
							  i)));
		if (s < o)
			s = o;
		if (e > end)
			e = end;
		if (s < e)
			memcpy(dst + (s - o), be + (s - adb->reloff_blocknum),
			       e - s);
	}
}

/* Bytes [pos, pos + len) of the whole description (pos from adb->offset). */
static void fill(const struct bs_ws_adb *adb, uint8_t *buf, uint64_t pos,
		 uint64_t len)
{
	while (len) {
		uint64_t blk = pos / adb->block_size;
		uint64_t o = pos % adb->block_size;
		uint64_t n = adb->block_size - o;

		if (n > len)
			n = len;
		block_bytes(adb, blk, buf, o, n);
		buf += n;
		pos += n;
		len -= n;
	}
}

static size_t piece_max(const struct bs_ws_sink *sink)
{
	if (sink->max_write && sink->max_write < BS_WS_BUF_MAX)
		return sink->max_write;
	return BS_WS_BUF_MAX;
}

static int write_zero_buffers(const struct bs_ws_sink *sink, uint64_t off,
			      uint64_t len, struct bs_ws_result *res)
{
	size_t piece = piece_max(sink);
	int err;

	while (len) {
		size_t n = len < piece ? (size_t)len : piece;

		err = sink->ops->write(sink->arg, off, ws_zeroes, n);
		res->writes++;
		if (err)
			return err;
		off += n;
		len -= n;
		res->bytes += n;
	}
	return 0;
}

static int write_pattern(const struct bs_ws_adb *adb,
			 const struct bs_ws_sink *sink, uint64_t size,
			 struct bs_ws_result *res)
{
	uint64_t piece = piece_max(sink), pos = 0;
	bool once = false;	/* the buffer holds the same bytes each time */
	uint8_t *buf;
	int err = 0;

	/* pieces of whole blocks when a block fits */
	if (adb->block_size <= piece) {
		piece -= piece % adb->block_size;
		once = true;
	}
	if (piece > size)
		piece = size;
	buf = malloc(piece);
	if (!buf)
		return bs_error(-ENOMEM, "write same: no memory for a %llu "
				"byte buffer", (unsigned long long)piece);
	res->buf_size = piece;
	if (once)
		fill(adb, buf, 0, piece);
	while (pos < size) {
		uint64_t n = size - pos < piece ? size - pos : piece;

		if (!once) {
			fill(adb, buf, pos, n);
		} else if (has_blocknum(adb) && pos) {
			uint64_t b, first = pos / adb->block_size;

			for (b = 0; b < n / adb->block_size; b++)
				block_bytes(adb, first + b,
					    buf + b * adb->block_size +
						    adb->reloff_blocknum,
					    adb->reloff_blocknum,
					    BS_WS_BLOCKNUM_SIZE);
		}
		err = sink->ops->write(sink->arg, adb->offset + pos, buf,
				       (size_t)n);
		res->writes++;
		if (err)
			break;
		pos += n;
		res->bytes += n;
	}
	free(buf);
	return err;
}

int bs_write_same(const struct bs_ws_adb *adb, const struct bs_ws_sink *sink,
		  bool stable, struct bs_ws_result *res)
{
	struct bs_ws_result local;
	uint64_t size;
	int err;

	if (!res)
		res = &local;
	memset(res, 0, sizeof(*res));
	err = bs_ws_check(adb, sink->max_size);
	if (err)
		return err;
	size = adb->block_size * adb->block_count;
	if (!size) {
		res->committed = true;	/* nothing is outstanding */
		return 0;
	}
	if (bs_ws_is_zero(adb)) {
		err = -EOPNOTSUPP;
		if (sink->ops->write_zeroes)
			err = sink->ops->write_zeroes(sink->arg, adb->offset,
						      size);
		if (!err) {
			res->path = BS_WS_PATH_WRITE_ZEROES;
			res->bytes = size;
		} else if (err == -EOPNOTSUPP) {
			res->path = BS_WS_PATH_ZERO_WRITES;
			err = write_zero_buffers(sink, adb->offset, size, res);
		}
	} else {
		res->path = BS_WS_PATH_PATTERN;
		err = write_pattern(adb, sink, size, res);
	}
	if (err)
		return err;
	res->committed = sink->stable;
	if (stable && !sink->stable) {
		if (sink->ops->commit) {
			err = sink->ops->commit(sink->arg);
			if (err)
				return err;
		}
		res->committed = true;
	}
	return 0;
}
