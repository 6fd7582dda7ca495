/* SPDX-License-Identifier: MIT */
/*
 * A small synchronous NFS v4.1 / v4.2 client, for `blkstack nfs` and the
 * tests: one TCP connection, one session with one slot, AUTH_SYS, one
 * request at a time. It speaks to any v4.1+ server (nfs-ganesha, Linux
 * nfsd, blkstack's own); v4.2 operations (ALLOCATE, DEALLOCATE,
 * WRITE_SAME) are sent only when the server took minor version 2.
 *
 * Every call returns 0 (or a byte count) or a negative errno, with a
 * one-line reason in bs_last_error() ("nfs 127.0.0.1:2049: OPEN /a/b:
 * NFS4ERR_NOENT"). When a server answered with an error, its nfsstat4
 * and the operation are kept: bs_nfs_last_status(). NFS4ERR_GRACE and
 * NFS4ERR_DELAY are retried, once a second, for up to the retry time.
 */
#ifndef BLKSTACK_NFSCLIENT_H
#define BLKSTACK_NFSCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/write_same.h>

struct bs_nfs;

#define BS_NFS_PORT 2049
#define BS_NFS_FH_MAX 128

/* nfs://HOST[:PORT]/PATH; HOST may be [v6addr]. PATH "" = the root. */
struct bs_nfs_url {
	char host[256];
	uint16_t port;
	char path[1024];	/* without the leading '/' */
};
int bs_nfs_url_parse(const char *url, struct bs_nfs_url *u);

struct bs_nfs_opts {
	uint32_t minor;		/* highest minor version to try (2 or 1); 0 = 2 */
	unsigned retry_secs;	/* GRACE / DELAY retried this long; 0 = 120 */
	/* one call, from sending it to its whole reply (replies to other
	 * calls skipped meanwhile), at most this long; 0 = 60 */
	unsigned timeout_secs;
};

/*
 * Connect, EXCHANGE_ID (minor 2, else 1 when the server refuses 2),
 * CREATE_SESSION, RECLAIM_COMPLETE. @opts may be NULL.
 */
int bs_nfs_connect(const char *host, uint16_t port,
		   const struct bs_nfs_opts *opts, struct bs_nfs **out);
/* DESTROY_SESSION, DESTROY_CLIENTID, close; NULL is fine. */
void bs_nfs_disconnect(struct bs_nfs *nfs);

uint32_t bs_nfs_minor(const struct bs_nfs *nfs);
/* The largest READ / WRITE this session allows, bytes. */
uint32_t bs_nfs_io_max(const struct bs_nfs *nfs);
/* nfsstat4 of the last operation that failed at the server (0: none). */
uint32_t bs_nfs_last_status(const struct bs_nfs *nfs);
/* Its name: "NFS4ERR_NOTSUPP"; a number for ones without a name here. */
const char *bs_nfs_status_name(uint32_t status);
/* An nfsstat4 as an errno (positive status in, negative errno out). */
int bs_nfs_status_errno(uint32_t status);

struct bs_nfs_fh {
	uint32_t len;
	uint8_t data[BS_NFS_FH_MAX];
};

enum bs_nfs_type { BS_NFS_REG = 1, BS_NFS_DIR = 2, BS_NFS_LNK = 5 };

struct bs_nfs_attr {
	uint32_t type;		/* nfs_ftype4 (enum bs_nfs_type and others) */
	uint64_t size;
	uint64_t fileid;
	uint32_t mode;
	uint32_t nlink;
	uint64_t space_used;	/* bytes allocated */
	int64_t mtime;		/* seconds */
};

/* PUTROOTFH + LOOKUP of each component of @path ("a/b" or "/a/b"). */
int bs_nfs_lookup(struct bs_nfs *nfs, const char *path, struct bs_nfs_fh *fh,
		  struct bs_nfs_attr *attr);
int bs_nfs_getattr(struct bs_nfs *nfs, const struct bs_nfs_fh *fh,
		   struct bs_nfs_attr *attr);

/* Entries of directory @dir other than "." and ".."; non-zero stops. */
typedef int (*bs_nfs_dirent_fn)(void *arg, const char *name,
				const struct bs_nfs_attr *attr);
int bs_nfs_readdir(struct bs_nfs *nfs, const struct bs_nfs_fh *dir,
		   bs_nfs_dirent_fn fn, void *arg);

/* REMOVE the name at @path (a file, or an empty directory). */
int bs_nfs_remove(struct bs_nfs *nfs, const char *path);

/* An open file: its handle and the open stateid. */
struct bs_nfs_file {
	struct bs_nfs_fh fh;
	uint8_t stateid[16];
	bool open;
};

#define BS_NFS_OPEN_WRITE (1u << 0)	/* read and write access */
#define BS_NFS_OPEN_CREATE (1u << 1)	/* create if missing (mode 0644) */
#define BS_NFS_OPEN_TRUNC (1u << 2)	/* with CREATE: size 0 */
int bs_nfs_open(struct bs_nfs *nfs, const char *path, unsigned flags,
		struct bs_nfs_file *f);
/* CLOSE (the stateid); NULL or a closed file is fine. */
int bs_nfs_close(struct bs_nfs *nfs, struct bs_nfs_file *f);

/* One READ of up to bs_nfs_io_max(): bytes read, *@eof at the end. */
int64_t bs_nfs_read(struct bs_nfs *nfs, struct bs_nfs_file *f, void *buf,
		    uint32_t len, uint64_t off, bool *eof);

/* How durable a WRITE is (stable_how4). */
enum bs_nfs_stable { BS_NFS_UNSTABLE = 0, BS_NFS_DATA_SYNC = 1,
		     BS_NFS_FILE_SYNC = 2 };

/* One WRITE of up to bs_nfs_io_max(): bytes written (servers may short). */
int64_t bs_nfs_write(struct bs_nfs *nfs, struct bs_nfs_file *f,
		     const void *buf, uint32_t len, uint64_t off,
		     enum bs_nfs_stable stable, enum bs_nfs_stable *committed,
		     uint8_t verf[8]);
/* COMMIT [off, off + count) (0, 0 = the whole file). */
int bs_nfs_commit(struct bs_nfs *nfs, struct bs_nfs_file *f, uint64_t off,
		  uint32_t count, uint8_t verf[8]);

/* v4.2 ALLOCATE / DEALLOCATE; -EOPNOTSUPP on a 4.1 session. */
int bs_nfs_allocate(struct bs_nfs *nfs, struct bs_nfs_file *f, uint64_t off,
		    uint64_t len);
int bs_nfs_deallocate(struct bs_nfs *nfs, struct bs_nfs_file *f,
		      uint64_t off, uint64_t len);

/*
 * v4.2 WRITE_SAME of @adb. -EOPNOTSUPP when the session is 4.1 (nothing
 * sent) or the server answered NFS4ERR_NOTSUPP / NFS4ERR_OP_ILLEGAL /
 * NFS4ERR_UNION_NOTSUPP: bs_nfs_last_status() tells which. @count gets
 * wr_count, @committed wr_committed.
 */
int bs_nfs_write_same(struct bs_nfs *nfs, struct bs_nfs_file *f,
		      const struct bs_ws_adb *adb, enum bs_nfs_stable stable,
		      uint64_t *count, enum bs_nfs_stable *committed,
		      uint8_t verf[8]);

/*
 * A bs_write_same() sink that sends WRITEs (UNSTABLE) to an open file, and
 * COMMIT as its commit: the client's fallback for servers without
 * WRITE_SAME. The writes go in pieces of at most bs_nfs_io_max().
 */
struct bs_nfs_ws_sink {
	struct bs_nfs *nfs;
	struct bs_nfs_file *f;
	uint8_t verf[8];	/* write verifier of the first WRITE */
	bool have_verf;
	bool verf_changed;	/* the server restarted meanwhile */
};
void bs_nfs_ws_sink_init(struct bs_ws_sink *sink, struct bs_nfs_ws_sink *s,
			 struct bs_nfs *nfs, struct bs_nfs_file *f);

#endif
