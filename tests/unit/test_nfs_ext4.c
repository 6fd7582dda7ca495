/* SPDX-License-Identifier: MIT */
/*
 * The ext4 backend through nfs_compound() (minor version 2, a session):
 * CREATE of a symbolic link (short and 4095 bytes), READLINK, LINK with
 * numlinks, CREATE of device nodes with rawdev, SETATTR of mode, owner
 * and client/server times with GETATTR reading them back to the
 * nanosecond, and EXCLUSIVE4 OPEN (the verifier kept in the times: the
 * same verifier opens again, another is EXIST), and RFC 8276 xattrs
 * (ext4's user.* names; XATTR2BIG past one block; xattr_support), and
 * SEEK over written extents and holes (RFC 7862: data in a trailing
 * hole not found is NFS4_OK with sr_eof; NXIO at and past EOF). The
 * image is e2fsck -fn clean after each.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/fs.h>

#include "export/nfs/nfs.h"
#include "helpers/nfs_th.h"
#include "helpers/th.h"

struct fix {
	char dir[64], img[128];
	struct bs_ctx *ctx;
	struct bs_dev *dev;
	struct nfs_server *srv;
	uint8_t sid[NFS4_SESSIONID_SIZE];
	uint32_t seq;
};

static uint8_t out[NFS_MAX_REPLY];

/* the last op's status; @d after its status */
static uint32_t run(struct fix *f, struct xdr_enc *e, struct xdr_dec *d)
{
	return nfs_th_run(f->srv, 2, e, d, out, sizeof(out));
}

/* SEQUENCE and @nops ops the caller appends */
static void head(struct fix *f, struct xdr_enc *e, uint8_t *b, size_t cap,
		 uint32_t nops)
{
	xdr_enc_init(e, b, cap);
	xdr_put_u32(e, 0);
	xdr_put_u32(e, 2);
	xdr_put_u32(e, 1 + nops);
	xdr_put_u32(e, OP_SEQUENCE);
	xdr_put_fixed(e, f->sid, sizeof(f->sid));
	xdr_put_u32(e, ++f->seq);
	xdr_put_u32(e, 0);
	xdr_put_u32(e, 0);
	xdr_put_bool(e, false);
}

/* PUTROOTFH and LOOKUP of each component of @path ("a/b"; "" = root) */
static uint32_t nops_of(const char *path)
{
	uint32_t n = 1;

	if (*path)
		for (n = 2; *path; path++)
			n += *path == '/';
	return n;
}

static void put_path(struct xdr_enc *e, const char *path)
{
	char buf[256], *p, *save = NULL;

	xdr_put_u32(e, OP_PUTROOTFH);
	snprintf(buf, sizeof(buf), "%s", path);
	for (p = strtok_r(buf, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
		xdr_put_u32(e, OP_LOOKUP);
		xdr_put_cstring(e, p, 255);
	}
}

static int sh(const char *cmd)
{
	int rc = system(cmd);

	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static void start(struct fix *f)
{
	static const struct nfs_th_chan chan = { 65536, 65536, 8192, 16, 4 };
	const uint8_t verf[8] = { 2 };
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;

	f->srv = nfs_th_ext4_server(f->dev);
	if (!f->srv)
		fail_msg("ext4 server: %s", bs_last_error());
	f->seq = 0;
	/* on connection 2, the one run() uses */
	nfs_th_session(f->srv, 2, verf, "ext4", &chan, f->sid);
	head(f, &e, b, sizeof(b), 1);
	xdr_put_u32(&e, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&e, false);
	assert_int_equal(run(f, &e, &d), NFS4_OK);
}

/* Stop the server (the filesystem closed clean) and e2fsck -fn. */
static void stop_fsck(struct fix *f)
{
	char cmd[512];
	int rc;

	nfs_server_put(f->srv);
	f->srv = NULL;
	assert_int_equal(bs_flush_sync(f->dev), 0);
	snprintf(cmd, sizeof(cmd), "e2fsck -fn '%s' >'%s/fsck' 2>&1", f->img,
		 f->dir);
	rc = sh(cmd);
	if (rc) {
		snprintf(cmd, sizeof(cmd), "cat '%s/fsck' >&2", f->dir);
		sh(cmd);
	}
	assert_int_equal(rc, 0);
}

static int setup(void **state)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct bs_fs *fs;
	uint32_t ino;
	char spec[200];

	strcpy(f->dir, "/var/tmp/test_nfs_ext4.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->img, sizeof(f->img), "%s/fs.img", f->dir);
	assert_int_equal(bs_ctx_new(&f->ctx), 0);
	snprintf(spec, sizeof(spec), "file:%s,size=64M", f->img);
	f->dev = th_dev(f->ctx, "e", spec);
	if (bs_fs_mkfs(f->dev, NULL) || bs_fs_open(f->dev, 0, &fs))
		fail_msg("mkfs: %s", bs_last_error());
	/* a regular file to link and set: CREATE makes no regular files */
	assert_int_equal(bs_fs_create(fs, "/f", 0644, &ino), 0);
	assert_int_equal(bs_fs_write(fs, ino, "data", 4, 0), 4);
	/* /sp: data [0, 64K) and [192K, 256K), holes to its size 512K */
	{
		static char a[65536];

		memset(a, 'a', sizeof(a));
		assert_int_equal(bs_fs_create(fs, "/sp", 0644, &ino), 0);
		assert_int_equal(bs_fs_write(fs, ino, a, sizeof(a), 0),
				 sizeof(a));
		assert_int_equal(bs_fs_write(fs, ino, a, sizeof(a), 192 << 10),
				 sizeof(a));
		assert_int_equal(bs_fs_truncate(fs, ino, 512 << 10), 0);
	}
	assert_int_equal(bs_fs_close(fs), 0);
	start(f);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fix *f = *state;
	char p[160];

	if (f->srv)
		nfs_server_put(f->srv);
	bs_dev_destroy(f->dev);
	bs_ctx_free(f->ctx);
	unlink(f->img);
	snprintf(p, sizeof(p), "%s/fsck", f->dir);
	unlink(p);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* ---- attributes ----------------------------------------------------------- */

struct at {
	uint32_t type, mode, nlink, rmaj, rmin;
	char owner[32];
	int64_t asec, msec;
	uint32_t ansec, mnsec;
};

#define W1(a) (1u << ((a) - 32))

static uint32_t getattr(struct fix *f, const char *path, struct at *at)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st, n, w0, w1, l;
	const uint8_t *p;

	head(f, &e, b, sizeof(b), nops_of(path) + 1);
	put_path(&e, path);
	xdr_put_u32(&e, OP_GETATTR);
	xdr_put_u32(&e, 2);
	xdr_put_u32(&e, 1u << FATTR4_TYPE);
	xdr_put_u32(&e, W1(FATTR4_MODE) | W1(FATTR4_NUMLINKS) |
			W1(FATTR4_OWNER) | W1(FATTR4_RAWDEV) |
			W1(FATTR4_TIME_ACCESS) | W1(FATTR4_TIME_MODIFY));
	st = run(f, &e, &d);
	if (st)
		return st;
	n = xdr_get_u32(&d);
	assert_int_equal(n, 2);
	w0 = xdr_get_u32(&d);
	w1 = xdr_get_u32(&d);
	assert_int_equal(w0, 1u << FATTR4_TYPE);
	assert_int_equal(w1, W1(FATTR4_MODE) | W1(FATTR4_NUMLINKS) |
				     W1(FATTR4_OWNER) | W1(FATTR4_RAWDEV) |
				     W1(FATTR4_TIME_ACCESS) |
				     W1(FATTR4_TIME_MODIFY));
	xdr_get_u32(&d);	/* the attrlist's length */
	at->type = xdr_get_u32(&d);
	at->mode = xdr_get_u32(&d);
	at->nlink = xdr_get_u32(&d);
	p = xdr_get_opaque_ref(&d, &l, sizeof(at->owner) - 1);
	assert_non_null(p);
	memcpy(at->owner, p, l);
	at->owner[l] = 0;
	at->rmaj = xdr_get_u32(&d);
	at->rmin = xdr_get_u32(&d);
	at->asec = xdr_get_i64(&d);
	at->ansec = xdr_get_u32(&d);
	at->msec = xdr_get_i64(&d);
	at->mnsec = xdr_get_u32(&d);
	assert_int_equal(xdr_dec_err(&d), 0);
	return NFS4_OK;
}

static uint32_t readlink_of(struct fix *f, const char *path, char *buf,
			    size_t cap)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	const uint8_t *p;
	uint32_t st, l;

	head(f, &e, b, sizeof(b), nops_of(path) + 1);
	put_path(&e, path);
	xdr_put_u32(&e, OP_READLINK);
	st = run(f, &e, &d);
	if (st)
		return st;
	p = xdr_get_opaque_ref(&d, &l, (uint32_t)cap - 1);
	assert_non_null(p);
	memcpy(buf, p, l);
	buf[l] = 0;
	return NFS4_OK;
}

/* CREATE @name in the root: type NF4LNK (@data the target) or a node */
static uint32_t create(struct fix *f, uint32_t type, const char *name,
		       const char *data, uint32_t maj, uint32_t min)
{
	static uint8_t b[8192];
	struct xdr_enc e;
	struct xdr_dec d;

	head(f, &e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_CREATE);
	xdr_put_u32(&e, type);
	if (type == NF4LNK)
		xdr_put_cstring(&e, data, 8192);
	if (type == NF4BLK || type == NF4CHR) {
		xdr_put_u32(&e, maj);
		xdr_put_u32(&e, min);
	}
	xdr_put_cstring(&e, name, 255);
	/* mode 0640 */
	xdr_put_u32(&e, 2);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, W1(FATTR4_MODE));
	xdr_put_u32(&e, 4);
	xdr_put_u32(&e, 0640);
	return run(f, &e, &d);
}

static void symlinks(void **state)
{
	struct fix *f = *state;
	char lng[4096], buf[4200];
	struct at at;
	int i;

	assert_int_equal(create(f, NF4LNK, "l", "f", 0, 0), NFS4_OK);
	assert_int_equal(getattr(f, "l", &at), NFS4_OK);
	assert_int_equal(at.type, NF4LNK);
	assert_int_equal(at.mode, 0777);
	assert_int_equal(at.nlink, 1);
	assert_int_equal(readlink_of(f, "l", buf, sizeof(buf)), NFS4_OK);
	assert_string_equal(buf, "f");
	for (i = 0; i < 4095; i++)
		lng[i] = i % 10 == 9 ? '/' : 'x';
	lng[4095] = 0;
	assert_int_equal(create(f, NF4LNK, "long", lng, 0, 0), NFS4_OK);
	assert_int_equal(readlink_of(f, "long", buf, sizeof(buf)), NFS4_OK);
	assert_string_equal(buf, lng);
	assert_int_equal(create(f, NF4LNK, "l", "g", 0, 0), NFS4ERR_EXIST);
	assert_int_equal(readlink_of(f, "f", buf, sizeof(buf)), NFS4ERR_INVAL);
	assert_int_equal(readlink_of(f, "", buf, sizeof(buf)), NFS4ERR_ISDIR);
	/* device nodes, a fifo and a socket with their numbers */
	assert_int_equal(create(f, NF4CHR, "c", NULL, 1, 3), NFS4_OK);
	assert_int_equal(create(f, NF4BLK, "b", NULL, 300, 70000), NFS4_OK);
	assert_int_equal(create(f, NF4FIFO, "p", NULL, 0, 0), NFS4_OK);
	assert_int_equal(create(f, NF4SOCK, "s", NULL, 0, 0), NFS4_OK);
	assert_int_equal(getattr(f, "b", &at), NFS4_OK);
	assert_int_equal(at.type, NF4BLK);
	assert_int_equal(at.mode, 0640);
	assert_int_equal(at.rmaj, 300);
	assert_int_equal(at.rmin, 70000);
	assert_int_equal(getattr(f, "p", &at), NFS4_OK);
	assert_int_equal(at.type, NF4FIFO);
	stop_fsck(f);
}

static uint32_t link_to(struct fix *f, const char *src, const char *name)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	head(f, &e, b, sizeof(b), nops_of(src) + 3);
	put_path(&e, src);
	xdr_put_u32(&e, OP_SAVEFH);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_LINK);
	xdr_put_cstring(&e, name, 255);
	return run(f, &e, &d);
}

static uint32_t remove_name(struct fix *f, const char *name)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	head(f, &e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_REMOVE);
	xdr_put_cstring(&e, name, 255);
	return run(f, &e, &d);
}

static void links(void **state)
{
	struct fix *f = *state;
	char buf[64];
	struct at at;

	assert_int_equal(link_to(f, "f", "g"), NFS4_OK);
	assert_int_equal(link_to(f, "f", "h"), NFS4_OK);
	assert_int_equal(getattr(f, "g", &at), NFS4_OK);
	assert_int_equal(at.nlink, 3);
	assert_int_equal(link_to(f, "f", "g"), NFS4ERR_EXIST);
	assert_int_equal(link_to(f, "lost+found", "d"), NFS4ERR_ISDIR);
	assert_int_equal(create(f, NF4LNK, "l", "f", 0, 0), NFS4_OK);
	assert_int_equal(link_to(f, "l", "l2"), NFS4_OK);
	assert_int_equal(readlink_of(f, "l2", buf, sizeof(buf)), NFS4_OK);
	assert_string_equal(buf, "f");
	assert_int_equal(remove_name(f, "f"), NFS4_OK);
	assert_int_equal(getattr(f, "h", &at), NFS4_OK);
	assert_int_equal(at.nlink, 2);
	assert_int_equal(remove_name(f, "l"), NFS4_OK);
	stop_fsck(f);
}

/* SETATTR on @path: mode, owner, atime (server time or given), mtime */
static uint32_t setattr(struct fix *f, const char *path, uint32_t mode,
			const char *owner, bool atime_now, int64_t msec,
			uint32_t mnsec)
{
	uint8_t b[512], stateid[16] = { 0 };
	struct xdr_enc e, v;
	struct xdr_dec d;
	uint8_t vals[128];

	xdr_enc_init(&v, vals, sizeof(vals));
	xdr_put_u32(&v, mode);
	xdr_put_cstring(&v, owner, 64);
	xdr_put_u32(&v, atime_now ? SET_TO_SERVER_TIME4 : SET_TO_CLIENT_TIME4);
	if (!atime_now) {
		xdr_put_i64(&v, 1000);
		xdr_put_u32(&v, 1);
	}
	xdr_put_u32(&v, SET_TO_CLIENT_TIME4);
	xdr_put_i64(&v, msec);
	xdr_put_u32(&v, mnsec);
	head(f, &e, b, sizeof(b), nops_of(path) + 1);
	put_path(&e, path);
	xdr_put_u32(&e, OP_SETATTR);
	xdr_put_fixed(&e, stateid, sizeof(stateid));
	xdr_put_u32(&e, 2);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, W1(FATTR4_MODE) | W1(FATTR4_OWNER) |
			W1(FATTR4_TIME_ACCESS_SET) | W1(FATTR4_TIME_MODIFY_SET));
	xdr_put_opaque(&e, vals, xdr_enc_len(&v), 128);
	return run(f, &e, &d);
}

static void attributes(void **state)
{
	struct fix *f = *state;
	struct timespec t0;
	struct at at;

	clock_gettime(CLOCK_REALTIME, &t0);
	assert_int_equal(setattr(f, "f", 04600, "1000", true, 1234567890,
				 987654321), NFS4_OK);
	assert_int_equal(getattr(f, "f", &at), NFS4_OK);
	assert_int_equal(at.type, NF4REG);
	assert_int_equal(at.mode, 04600);
	assert_string_equal(at.owner, "1000");
	assert_int_equal(at.msec, 1234567890);
	assert_int_equal(at.mnsec, 987654321);
	assert_true(at.asec >= t0.tv_sec && at.asec <= t0.tv_sec + 5);
	/* a client atime, an mtime after 2038 */
	assert_int_equal(setattr(f, "f", 0755, "0", false, 5000000000ll, 7),
			 NFS4_OK);
	assert_int_equal(getattr(f, "f", &at), NFS4_OK);
	assert_int_equal(at.mode, 0755);
	assert_string_equal(at.owner, "0");
	assert_int_equal(at.asec, 1000);
	assert_int_equal(at.ansec, 1);
	assert_int_equal(at.msec, 5000000000ll);
	assert_int_equal(at.mnsec, 7);
	/* past what ext4 holds: INVAL, nothing changed */
	assert_int_equal(setattr(f, "f", 0700, "0", false, (int64_t)1 << 40,
				 0), NFS4ERR_INVAL);
	assert_int_equal(getattr(f, "f", &at), NFS4_OK);
	assert_int_equal(at.mode, 0755);
	/* a directory's mode */
	assert_int_equal(setattr(f, "lost+found", 0711, "0", true, 1, 0),
			 NFS4_OK);
	assert_int_equal(getattr(f, "lost+found", &at), NFS4_OK);
	assert_int_equal(at.type, NF4DIR);
	assert_int_equal(at.mode, 0711);
	stop_fsck(f);
}

static uint32_t open_excl(struct fix *f, const char *name, uint64_t verf)
{
	uint8_t b[512], v[8];
	struct xdr_enc e;
	struct xdr_dec d;
	int i;

	for (i = 0; i < 8; i++)
		v[i] = (uint8_t)(verf >> (56 - 8 * i));
	head(f, &e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_OPEN);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, OPEN4_SHARE_ACCESS_BOTH);
	xdr_put_u32(&e, OPEN4_SHARE_DENY_NONE);
	xdr_put_u64(&e, 0);
	xdr_put_cstring(&e, "owner", 64);
	xdr_put_u32(&e, OPEN4_CREATE);
	xdr_put_u32(&e, EXCLUSIVE4);
	xdr_put_fixed(&e, v, sizeof(v));
	xdr_put_u32(&e, CLAIM_NULL);
	xdr_put_cstring(&e, name, 255);
	return run(f, &e, &d);
}

static void exclusive_open(void **state)
{
	struct fix *f = *state;
	struct at at;

	assert_int_equal(open_excl(f, "x", 0x89abcdef01234567ull), NFS4_OK);
	assert_int_equal(getattr(f, "x", &at), NFS4_OK);
	assert_int_equal(at.type, NF4REG);
	/* a retransmission of the same create finds its verifier */
	assert_int_equal(open_excl(f, "x", 0x89abcdef01234567ull), NFS4_OK);
	assert_int_equal(open_excl(f, "x", 0x89abcdef01234568ull),
			 NFS4ERR_EXIST);
	assert_int_equal(open_excl(f, "f", 1), NFS4ERR_EXIST);
	stop_fsck(f);
}

/* ---- RFC 8276 xattrs ------------------------------------------------------- */

static uint32_t xset(struct fix *f, const char *path, uint32_t how,
		     const char *k, const void *v, uint32_t len)
{
	static uint8_t b[8192];
	struct xdr_enc e;
	struct xdr_dec d;

	head(f, &e, b, sizeof(b), nops_of(path) + 1);
	put_path(&e, path);
	xdr_put_u32(&e, OP_SETXATTR);
	xdr_put_u32(&e, how);
	xdr_put_cstring(&e, k, 255);
	xdr_put_opaque(&e, v, len, XDR_NOMAX);
	return run(f, &e, &d);
}

static uint32_t xget(struct fix *f, const char *path, const char *k,
		     void *v, uint32_t cap, uint32_t *len)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	const uint8_t *p;
	uint32_t st;

	head(f, &e, b, sizeof(b), nops_of(path) + 1);
	put_path(&e, path);
	xdr_put_u32(&e, OP_GETXATTR);
	xdr_put_cstring(&e, k, 255);
	st = run(f, &e, &d);
	if (!st) {
		p = xdr_get_opaque_ref(&d, len, cap);
		assert_non_null(p);
		memcpy(v, p, *len);
	}
	return st;
}

static uint32_t xremove(struct fix *f, const char *path, const char *k)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;

	head(f, &e, b, sizeof(b), nops_of(path) + 1);
	put_path(&e, path);
	xdr_put_u32(&e, OP_REMOVEXATTR);
	xdr_put_cstring(&e, k, 255);
	return run(f, &e, &d);
}

/* LISTXATTRS of @path from cookie 0: the names joined by ',' */
static uint32_t xlist(struct fix *f, const char *path, char *names)
{
	uint8_t b[512];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st, n, l;

	head(f, &e, b, sizeof(b), nops_of(path) + 1);
	put_path(&e, path);
	xdr_put_u32(&e, OP_LISTXATTRS);
	xdr_put_u64(&e, 0);
	xdr_put_u32(&e, 8192);
	names[0] = 0;
	st = run(f, &e, &d);
	if (st)
		return st;
	xdr_get_u64(&d);
	n = xdr_get_u32(&d);
	while (n--) {
		const uint8_t *p = xdr_get_opaque_ref(&d, &l, 255);

		assert_non_null(p);
		if (names[0])
			strcat(names, ",");
		strncat(names, (const char *)p, l);
	}
	assert_true(xdr_get_bool(&d));
	assert_int_equal(xdr_dec_err(&d), 0);
	return NFS4_OK;
}

static bool xattr_support(struct fix *f)
{
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;

	head(f, &e, b, sizeof(b), 2);
	xdr_put_u32(&e, OP_PUTROOTFH);
	xdr_put_u32(&e, OP_GETATTR);
	xdr_put_u32(&e, 3);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 0);
	xdr_put_u32(&e, 1u << (FATTR4_XATTR_SUPPORT - 64));
	assert_int_equal(run(f, &e, &d), NFS4_OK);
	assert_int_equal(xdr_get_u32(&d), 3);
	xdr_get_u32(&d);
	xdr_get_u32(&d);
	assert_int_equal(xdr_get_u32(&d), 1u << (FATTR4_XATTR_SUPPORT - 64));
	assert_int_equal(xdr_get_u32(&d), 4);
	return xdr_get_bool(&d);
}

static void xattrs(void **state)
{
	struct fix *f = *state;
	static char big[5000], v[5000];
	char names[256];
	struct bs_fs *fs;
	uint32_t len, ino;
	size_t n;

	memset(big, 'x', sizeof(big));
	assert_true(xattr_support(f));
	assert_int_equal(xget(f, "f", "a", v, sizeof(v), &len),
			 NFS4ERR_NOXATTR);
	assert_int_equal(xset(f, "f", SETXATTR4_REPLACE, "a", "1", 1),
			 NFS4ERR_NOXATTR);
	assert_int_equal(xset(f, "f", SETXATTR4_CREATE, "a", "1", 1), NFS4_OK);
	assert_int_equal(xset(f, "f", SETXATTR4_CREATE, "a", "2", 1),
			 NFS4ERR_EXIST);
	assert_int_equal(xset(f, "f", SETXATTR4_REPLACE, "a", "22", 2),
			 NFS4_OK);
	assert_int_equal(xget(f, "f", "a", v, sizeof(v), &len), NFS4_OK);
	assert_int_equal(len, 2);
	assert_memory_equal(v, "22", 2);
	/* a directory; a value in the xattr block; one too big for it */
	assert_int_equal(xset(f, "", SETXATTR4_EITHER, "d", "dv", 2), NFS4_OK);
	assert_int_equal(xset(f, "f", SETXATTR4_EITHER, "big", big, 4000),
			 NFS4_OK);
	assert_int_equal(xget(f, "f", "big", v, sizeof(v), &len), NFS4_OK);
	assert_int_equal(len, 4000);
	assert_memory_equal(v, big, 4000);
	assert_int_equal(xset(f, "f", SETXATTR4_EITHER, "big", big, 5000),
			 NFS4ERR_XATTR2BIG);
	assert_int_equal(xlist(f, "f", names), NFS4_OK);
	assert_true(!strcmp(names, "a,big") || !strcmp(names, "big,a"));
	assert_int_equal(xremove(f, "f", "big"), NFS4_OK);
	assert_int_equal(xremove(f, "f", "big"), NFS4ERR_NOXATTR);
	assert_int_equal(xlist(f, "f", names), NFS4_OK);
	assert_string_equal(names, "a");
	stop_fsck(f);
	/* ext4's own names: user.* */
	if (bs_fs_open(f->dev, BS_FS_RDONLY, &fs))
		fail_msg("open: %s", bs_last_error());
	assert_int_equal(bs_fs_lookup(fs, "/f", &ino), 0);
	assert_int_equal(bs_fs_getxattr(fs, ino, "user.a", v, sizeof(v), &n),
			 0);
	assert_int_equal(n, 2);
	assert_int_equal(bs_fs_getxattr(fs, BS_FS_ROOT_INO, "user.d", v,
					sizeof(v), &n), 0);
	assert_int_equal(bs_fs_close(fs), 0);
}

/* ---- SEEK ------------------------------------------------------------------ */

/* SEEK @what from @off in /sp with the anonymous stateid */
static uint32_t seek(struct fix *f, uint32_t what, uint64_t off, bool *eof,
		     uint64_t *at)
{
	static const uint8_t zero[12];
	uint8_t b[256];
	struct xdr_enc e;
	struct xdr_dec d;
	uint32_t st;

	head(f, &e, b, sizeof(b), nops_of("sp") + 1);
	put_path(&e, "sp");
	xdr_put_u32(&e, OP_SEEK);
	xdr_put_u32(&e, 0);
	xdr_put_fixed(&e, zero, sizeof(zero));
	xdr_put_u64(&e, off);
	xdr_put_u32(&e, what);
	st = run(f, &e, &d);
	if (!st) {
		*eof = xdr_get_bool(&d);
		*at = xdr_get_u64(&d);
		assert_int_equal(xdr_dec_err(&d), 0);
	}
	return st;
}

static void seek_data_hole(void **state)
{
	struct fix *f = *state;
	static const struct {
		uint32_t what;
		uint64_t off, at;
		uint32_t st;
		bool eof;
	} c[] = {
		{ NFS4_CONTENT_DATA, 0, 0, NFS4_OK, false },
		{ NFS4_CONTENT_DATA, 4096, 4096, NFS4_OK, false },
		{ NFS4_CONTENT_DATA, 100 << 10, 192 << 10, NFS4_OK, false },
		{ NFS4_CONTENT_HOLE, 0, 64 << 10, NFS4_OK, false },
		{ NFS4_CONTENT_HOLE, 100 << 10, 100 << 10, NFS4_OK, false },
		{ NFS4_CONTENT_HOLE, 200 << 10, 256 << 10, NFS4_OK, false },
		/* no data after 300K: found nothing, the size and sr_eof */
		{ NFS4_CONTENT_DATA, 300 << 10, 512 << 10, NFS4_OK, true },
		{ NFS4_CONTENT_DATA, 512 << 10, 0, NFS4ERR_NXIO, false },
		{ NFS4_CONTENT_HOLE, 512 << 10, 0, NFS4ERR_NXIO, false },
		{ NFS4_CONTENT_HOLE, 1 << 20, 0, NFS4ERR_NXIO, false },
	};
	uint64_t at;
	bool eof;
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		eof = false;
		at = ~0ull;
		assert_int_equal(seek(f, c[i].what, c[i].off, &eof, &at),
				 c[i].st);
		if (c[i].st)
			continue;
		assert_int_equal(at, c[i].at);
		assert_int_equal(eof, c[i].eof);
	}
	stop_fsck(f);
}

/*
 * An export's defaults (setuid = 0, devices = 0): a mode a client sets
 * loses its setuid and setgid bits, a block or character device is
 * NFS4ERR_PERM (AUTH_SYS proves nothing, and the server writes as root:
 * a client left setuid-root programs and device nodes for the host's
 * users); with them on, both as asked.
 */
static void nosuid_nodev(void **state)
{
	struct fix *f = *state;
	struct at at;

	f->srv->setuid_ok = f->srv->devices_ok = false;
	assert_int_equal(setattr(f, "f", 06755, "0", true, 1, 0), NFS4_OK);
	assert_int_equal(getattr(f, "f", &at), NFS4_OK);
	assert_int_equal(at.mode, 0755);
	assert_int_equal(create(f, NF4BLK, "b", NULL, 8, 0), NFS4ERR_PERM);
	assert_int_equal(create(f, NF4CHR, "c", NULL, 1, 3), NFS4ERR_PERM);
	assert_int_equal(getattr(f, "b", &at), NFS4ERR_NOENT);
	assert_int_equal(create(f, NF4FIFO, "p", NULL, 0, 0), NFS4_OK);
	f->srv->setuid_ok = f->srv->devices_ok = true;
	assert_int_equal(setattr(f, "f", 06755, "0", true, 1, 0), NFS4_OK);
	assert_int_equal(getattr(f, "f", &at), NFS4_OK);
	assert_int_equal(at.mode, 06755);
	assert_int_equal(create(f, NF4BLK, "b", NULL, 8, 0), NFS4_OK);
	stop_fsck(f);
}

/*
 * The reserved inodes (the journal is 8) are no files: a handle forged
 * with their number is stale, whatever generation it names (mkfs gives
 * the journal generation 0: before, READ gave its contents and WRITE or
 * SETATTR size 0 corrupted or freed it).
 */
static void reserved_inodes_stale(void **state)
{
	struct fix *f = *state;
	struct nfs_backend *be = &f->srv->be;
	struct nfs_attr at;
	struct nfs_fh fh = { .len = 8 };
	uint8_t buf[512];
	size_t n;
	bool eof;

	for (uint32_t ino = 1; ino < 11; ino++) {
		if (ino == BS_FS_ROOT_INO)
			continue;
		xdr_set_be32(fh.data, ino);
		xdr_set_be32(fh.data + 4, 0);
		assert_int_equal(be->ops->getattr(be, &fh, &at), -ESTALE);
		assert_int_equal(be->ops->read(be, &fh, 0, buf, sizeof(buf),
					       &n, &eof), -ESTALE);
	}
	stop_fsck(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(symlinks, setup, teardown),
		cmocka_unit_test_setup_teardown(links, setup, teardown),
		cmocka_unit_test_setup_teardown(attributes, setup, teardown),
		cmocka_unit_test_setup_teardown(exclusive_open, setup,
						teardown),
		cmocka_unit_test_setup_teardown(xattrs, setup, teardown),
		cmocka_unit_test_setup_teardown(seek_data_hole, setup,
						teardown),
		cmocka_unit_test_setup_teardown(reserved_inodes_stale, setup,
						teardown),
		cmocka_unit_test_setup_teardown(nosuid_nodev, setup, teardown),
	};

	if (sh("command -v e2fsck >/dev/null"))
		return 77;
	return cmocka_run_group_tests(tests, NULL, NULL);
}
