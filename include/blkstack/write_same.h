/* SPDX-License-Identifier: MIT */
/*
 * WRITE_SAME: NFS v4.2's application data block (RFC 7862, section 15.12
 * for the operation, section 8 for the ADB) turned into the cheapest
 * correct action on a "sink" (a file, an ext4 inode, a remote file written
 * by NFS WRITEs). One function, used by the NFS server for WRITE_SAME and
 * by the NFS client as its fallback when a server lacks the operation, so
 * both sides lay out the same bytes.
 *
 * How a description is read (the RFC leaves the layout of the parts that
 * are not pattern or block number open; this is blkstack's reading, also
 * in docs/nfs.md):
 *
 *   block i (0 <= i < block_count) covers
 *       [offset + i * block_size, offset + (i + 1) * block_size)
 *   its bytes before reloff_pattern are zero; from reloff_pattern to the
 *   end of the block the pattern is repeated (a pattern as long as the
 *   block from reloff_pattern 0 is the block itself); an empty pattern
 *   makes the block all zeroes and reloff_pattern is then not looked at;
 *   when reloff_blocknum is not BS_WS_NO_BLOCKNUM, the number
 *   block_num + i is stamped over that, as a 64-bit big-endian value at
 *   reloff_blocknum (block_num is a count4 on the wire; the stamp is 64
 *   bits wide so that numbers past 2^32 blocks do not wrap).
 *
 * Checks, in this order, before anything is written (the nfsstat4 that
 * bs_ws_nfsstat() gives in brackets):
 *   block_size 0                                    -EINVAL  [INVAL]
 *   pattern longer than block_size                  -EINVAL  [INVAL]
 *   pattern not empty and reloff_pattern >= block_size -EINVAL [INVAL]
 *   block number stamp not inside the block         -EINVAL  [INVAL]
 *   block_size * block_count or offset + that overflows 64 bits
 *                                                   -EINVAL  [INVAL]
 *   offset + size past the sink's max_size          -EFBIG   [FBIG]
 * A block_count of 0 (after the checks) writes nothing and returns 0.
 */
#ifndef BLKSTACK_WRITE_SAME_H
#define BLKSTACK_WRITE_SAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bs_fs;

/* adb_reloff_blocknum meaning "stamp no block number" (NFS4_UINT64_MAX). */
#define BS_WS_NO_BLOCKNUM UINT64_MAX
/* Width of the stamped block number, bytes. */
#define BS_WS_BLOCKNUM_SIZE 8u
/* The largest buffer bs_write_same() allocates, and its largest write. */
#define BS_WS_BUF_MAX (1u << 20)

/* app_data_block4, decoded. */
struct bs_ws_adb {
	uint64_t offset;		/* adb_offset */
	uint64_t block_size;		/* adb_block_size */
	uint64_t block_count;		/* adb_block_count */
	uint64_t reloff_blocknum;	/* adb_reloff_blocknum */
	uint64_t block_num;		/* adb_block_num */
	uint64_t reloff_pattern;	/* adb_reloff_pattern */
	const uint8_t *pattern;		/* adb_pattern */
	uint32_t pattern_len;
};

/* Where the bytes go. Every op returns 0 or -errno. */
struct bs_ws_sink_ops {
	/* Write all of [off, off + len). */
	int (*write)(void *arg, uint64_t off, const void *buf, size_t len);
	/*
	 * Make [off, off + len) written extents of zeroes at metadata cost
	 * (the file grows to off + len if shorter), or -EOPNOTSUPP when
	 * that cannot be done cheaply here; bs_write_same() then writes
	 * zeroes. NULL = always -EOPNOTSUPP.
	 */
	int (*write_zeroes)(void *arg, uint64_t off, uint64_t len);
	/* Make what was written durable; NULL when writes already are. */
	int (*commit)(void *arg);
};

struct bs_ws_sink {
	const struct bs_ws_sink_ops *ops;
	void *arg;
	uint64_t max_size;	/* largest file size; 0 = INT64_MAX */
	size_t max_write;	/* largest write; 0 or above = BS_WS_BUF_MAX */
	bool stable;		/* writes and write_zeroes are durable on return */
};

enum bs_ws_path {
	BS_WS_PATH_NONE,		/* block_count 0: nothing to do */
	BS_WS_PATH_WRITE_ZEROES,	/* the sink's write_zeroes */
	BS_WS_PATH_ZERO_WRITES,		/* zeroes written from a shared buffer */
	BS_WS_PATH_PATTERN,		/* the blocks written out */
};

struct bs_ws_result {
	enum bs_ws_path path;
	uint64_t bytes;		/* bytes made (all of them on success) */
	bool committed;		/* durable: FILE_SYNC4, else UNSTABLE4 */
	size_t buf_size;	/* the buffer allocated (0: none) */
	uint64_t writes;	/* calls of the sink's write */
};

/* The checks above only: 0, -EINVAL or -EFBIG (with bs_error() set). */
int bs_ws_check(const struct bs_ws_adb *adb, uint64_t max_size);

/* True when every block is all zeroes (so write_zeroes may serve it). */
bool bs_ws_is_zero(const struct bs_ws_adb *adb);

/*
 * Carry out @adb on @sink. @stable: the caller wants the result durable
 * (FILE_SYNC4 / DATA_SYNC4): the sink's commit runs at the end unless the
 * sink is stable. Memory: at most one buffer of BS_WS_BUF_MAX (or the
 * sink's max_write, if smaller), reused for every write, whatever the
 * count; zeroes come from one static buffer. @res (may be NULL) says which
 * path was taken and how far it got, also on failure. Returns 0 or -errno
 * (bs_error() set); on failure some blocks may have been written.
 */
int bs_write_same(const struct bs_ws_adb *adb, const struct bs_ws_sink *sink,
		  bool stable, struct bs_ws_result *res);

/* "write-zeroes", "zero-writes", "pattern", "none". */
const char *bs_ws_path_name(enum bs_ws_path path);

/*
 * The nfsstat4 for a bs_write_same() result (RFC 7862's error list for
 * WRITE_SAME): 0 NFS4_OK; -EINVAL NFS4ERR_INVAL; -EFBIG NFS4ERR_FBIG;
 * -ENOSPC NFS4ERR_NOSPC; -EDQUOT NFS4ERR_DQUOT; -EROFS NFS4ERR_ROFS;
 * -EACCES / -EPERM NFS4ERR_ACCESS; -EISDIR NFS4ERR_ISDIR; -EIO
 * NFS4ERR_IO; -EOPNOTSUPP NFS4ERR_NOTSUPP; -ESTALE NFS4ERR_STALE;
 * anything else NFS4ERR_SERVERFAULT.
 */
uint32_t bs_ws_nfsstat(int err);

/*
 * Sinks. A host file: write = pwrite; write_zeroes =
 * fallocate(FALLOC_FL_WRITE_ZEROES) where the kernel and the filesystem
 * have it (else -EOPNOTSUPP: zero *ranges* or holes would not be written
 * extents, so bs_write_same() writes the zeroes); commit = fdatasync.
 */
struct bs_ws_file_sink {
	int fd;
};
void bs_ws_file_sink_init(struct bs_ws_sink *sink, struct bs_ws_file_sink *f,
			  int fd);

/*
 * An inode of blkstack's ext4 layer: write = bs_fs_write; write_zeroes =
 * bs_fs_fallocate(WRITE_ZEROES), which the fs layer serves only when the
 * device below has unmap zeroing (flushed before it returns); commit =
 * bs_fs_fsync; max_size = the inode's largest size.
 */
struct bs_ws_fs_sink {
	struct bs_fs *fs;
	uint32_t ino;
};
int bs_ws_fs_sink_init(struct bs_ws_sink *sink, struct bs_ws_fs_sink *f,
		       struct bs_fs *fs, uint32_t ino);

#endif
