/* SPDX-License-Identifier: MIT */
/*
 * The data ops (RFC 8881 18.22, 18.32, 18.3; RFC 7862 15): READ, WRITE
 * (UNSTABLE4 writes are written without sync and the write verifier, new
 * at every start, tells a client to resend after a restart; DATA_SYNC4 /
 * FILE_SYNC4 writes are synced), COMMIT, and the v4.2 ALLOCATE,
 * DEALLOCATE (a punched hole), SEEK and READ_PLUS (data and hole
 * segments from the backend's SEEK_DATA/SEEK_HOLE) and WRITE_SAME
 * (bs_write_same() on the backend's sink).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/bdev.h>
#include <blkstack/write_same.h>

#include "export/nfs/nfs.h"

/* the current fh is a regular file for I/O */
static uint32_t io_file(struct nfs_compound *c, struct nfs_attr *at)
{
	uint32_t st = nfs_cur_attr(c, at);

	if (st)
		return st;
	if (at->type == NF4DIR)
		return NFS4ERR_ISDIR;
	if (at->type == NF4LNK)
		return c->minor ? NFS4ERR_SYMLINK : NFS4ERR_INVAL;
	if (at->type != NF4REG)
		return c->minor ? NFS4ERR_WRONG_TYPE : NFS4ERR_INVAL;
	return NFS4_OK;
}

static uint32_t io_start(struct nfs_compound *c, struct xdr_dec *a,
			 struct nfs_stateid *sid, struct nfs_attr *at,
			 uint32_t access)
{
	uint32_t st;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = io_file(c, at);
	if (!st)
		st = nfs_state_check_io(c, sid, access);
	return st;
}

/*
 * Around a backend's I/O call: a backend with parallel_io runs it
 * without the server's lock (nfs_unlock); io_relock() then says whether
 * the COMPOUND may go on (NFS4_OK, or BADSESSION).
 */
static void io_unlock(struct nfs_compound *c)
{
	if (c->srv->be.ops->parallel_io)
		nfs_unlock(c);
}

static uint32_t io_relock(struct nfs_compound *c)
{
	return c->srv->be.ops->parallel_io ? nfs_relock(c) : NFS4_OK;
}

/*
 * On a connection's I/O thread (c->nowait): whether the backend may try
 * @what (NFS_NOWAIT_READ / _WRITE) of @len bytes without waiting; if not,
 * the op says NFS_OP_BLOCK before it does anything.
 */
static bool nowait_ok(struct nfs_compound *c, unsigned what, size_t len)
{
	const struct nfs_backend *be = &c->srv->be;
	bool op = what == NFS_NOWAIT_READ ? be->ops->read_nowait != NULL :
		  be->ops->write_nowait != NULL;

	return op && len <= NFS_INLINE_IO_MAX &&
	       !(__atomic_load_n(&be->nowait_off, __ATOMIC_RELAXED) & what);
}

uint32_t nfs_op_read(struct nfs_compound *c, struct xdr_dec *a,
		     struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_attr at;
	uint64_t off;
	uint32_t count, st;
	size_t data_at, n = 0, room;
	uint8_t *p;
	bool eof = false;
	int err;

	nfs_get_stateid(c, a, &sid);
	off = xdr_get_u64(a);
	count = xdr_get_u32(a);
	if (c->nowait && !xdr_dec_err(a) &&
	    !nowait_ok(c, NFS_NOWAIT_READ, count))
		return NFS_OP_BLOCK;
	st = io_start(c, a, &sid, &at, OPEN4_SHARE_ACCESS_READ);
	if (st)
		return st;
	if (count > NFS_MAX_IO)
		count = NFS_MAX_IO;
	room = r->cap - r->pos;
	room = room > 64 ? (room - 64) & ~(size_t)3 : 0;
	if (count > room)
		count = (uint32_t)room;
	xdr_put_bool(r, false);			/* eof, patched */
	data_at = xdr_enc_len(r);
	xdr_put_u32(r, 0);
	p = xdr_reserve(r, count);
	if (!p)
		return NFS4ERR_SERVERFAULT;
	if (count && c->nowait) {
		/* a copy from the page cache: the lock stays */
		err = c->srv->be.ops->read_nowait(&c->srv->be, &c->cfh, off,
						  p, count, &n, &eof);
		if (err == -EAGAIN)
			return NFS_OP_BLOCK;
		if (err)
			return nfs_errno(err);
	} else if (count) {
		io_unlock(c);
		err = c->srv->be.ops->read(&c->srv->be, &c->cfh, off, p,
					   count, &n, &eof);
		if ((st = io_relock(c)))
			return st;
		if (err)
			return nfs_errno(err);
	} else {
		eof = off >= at.size;
	}
	xdr_enc_truncate(r, data_at + 4);
	xdr_reserve(r, n);
	xdr_patch_u32(r, data_at, (uint32_t)n);
	xdr_patch_u32(r, data_at - 4, eof);
	return NFS4_OK;
}

uint32_t nfs_op_write(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_attr at;
	uint64_t off;
	uint32_t stable, len, st;
	const uint8_t *data;
	int err;

	nfs_get_stateid(c, a, &sid);
	off = xdr_get_u64(a);
	stable = xdr_get_u32(a);
	data = xdr_get_opaque_ref(a, &len, XDR_NOMAX);
	if (stable > FILE_SYNC4)
		return NFS4ERR_BADXDR;
	/* a synced write waits for the disk */
	if (c->nowait && !xdr_dec_err(a) &&
	    (stable != UNSTABLE4 || !nowait_ok(c, NFS_NOWAIT_WRITE, len)))
		return NFS_OP_BLOCK;
	st = io_start(c, a, &sid, &at, OPEN4_SHARE_ACCESS_WRITE);
	if (st)
		return st;
	if (off + len < off || off + len > (uint64_t)INT64_MAX)
		return NFS4ERR_FBIG;
	if (c->nowait) {
		err = c->srv->be.ops->write_nowait(&c->srv->be, &c->cfh, off,
						   data, len);
		if (err == -EAGAIN)
			return NFS_OP_BLOCK;
		goto done;
	}
	io_unlock(c);
	err = c->srv->be.ops->write(&c->srv->be, &c->cfh, off, data, len,
				    stable != UNSTABLE4);
	if ((st = io_relock(c)))
		return st;
done:
	if (err)
		return nfs_errno(err);
	xdr_put_u32(r, len);
	xdr_put_u32(r, stable == UNSTABLE4 ? UNSTABLE4 : FILE_SYNC4);
	xdr_put_fixed(r, c->srv->boot_verf, NFS4_VERIFIER_SIZE);
	return NFS4_OK;
}

uint32_t nfs_op_commit(struct nfs_compound *c, struct xdr_dec *a,
		       struct xdr_enc *r)
{
	uint64_t off = xdr_get_u64(a);
	uint32_t count = xdr_get_u32(a), st;
	struct nfs_attr at;
	int err;

	if (xdr_dec_err(a))
		return NFS4ERR_BADXDR;
	st = io_file(c, &at);
	if (st)
		return st;
	if (count && off + count < off)
		return NFS4ERR_INVAL;
	/* an fsync: the longest wait of them all */
	io_unlock(c);
	err = c->srv->be.ops->commit(&c->srv->be, &c->cfh);
	if ((st = io_relock(c)))
		return st;
	if (err)
		return nfs_errno(err);
	xdr_put_fixed(r, c->srv->boot_verf, NFS4_VERIFIER_SIZE);
	return NFS4_OK;
}

/* ---- v4.2 ---------------------------------------------------------------- */

static uint32_t falloc_op(struct nfs_compound *c, struct xdr_dec *a,
			  int mode)
{
	struct nfs_stateid sid;
	struct nfs_attr at;
	uint64_t off, len;
	uint32_t st;
	int err;

	nfs_get_stateid(c, a, &sid);
	off = xdr_get_u64(a);
	len = xdr_get_u64(a);
	st = io_start(c, a, &sid, &at, OPEN4_SHARE_ACCESS_WRITE);
	if (st)
		return st;
	if (!len)
		return NFS4ERR_INVAL;
	if (off + len < off || off + len > (uint64_t)INT64_MAX)
		return NFS4ERR_FBIG;
	err = c->srv->be.ops->fallocate(&c->srv->be, &c->cfh, mode, off, len);
	return err ? nfs_errno(err) : NFS4_OK;
}

uint32_t nfs_op_allocate(struct nfs_compound *c, struct xdr_dec *a,
			 struct xdr_enc *r)
{
	return falloc_op(c, a, 0);
}

uint32_t nfs_op_deallocate(struct nfs_compound *c, struct xdr_dec *a,
			   struct xdr_enc *r)
{
	return falloc_op(c, a, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE);
}

uint32_t nfs_op_seek(struct nfs_compound *c, struct xdr_dec *a,
		     struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_attr at;
	uint64_t off, res;
	uint32_t what, st;
	int err;

	nfs_get_stateid(c, a, &sid);
	off = xdr_get_u64(a);
	what = xdr_get_u32(a);
	if (what > NFS4_CONTENT_HOLE)
		return xdr_dec_err(a) ? NFS4ERR_BADXDR : NFS4ERR_UNION_NOTSUPP;
	st = io_start(c, a, &sid, &at, OPEN4_SHARE_ACCESS_READ);
	if (st)
		return st;
	err = c->srv->be.ops->seek(&c->srv->be, &c->cfh, off,
				   what == NFS4_CONTENT_DATA ? SEEK_DATA :
				   SEEK_HOLE, &res);
	/*
	 * RFC 7862 15.11.3: NXIO is for an offset past the end; from inside
	 * the file, content not found (no data after a trailing hole) is
	 * NFS4_OK with sr_eof. lseek and the backends say ENXIO for both.
	 */
	if (err == -ENXIO && off < at.size) {
		err = 0;
		res = at.size;
	}
	if (err)
		return nfs_errno(err);
	xdr_put_bool(r, res >= at.size);
	xdr_put_u64(r, res);
	return NFS4_OK;
}

/*
 * READ_PLUS's segments of [*@at, @end): holes as HOLE, data as DATA with
 * its bytes, into @r; *@nseg counted, *@at where they ended. Backend calls only (no protocol
 * state): run without the server's lock for a parallel_io backend.
 */
static uint32_t read_plus_segments(struct nfs_compound *c,
				   struct xdr_enc *r, uint64_t *at,
				   uint64_t end, uint64_t size,
				   uint32_t *nseg)
{
	struct nfs_backend *be = &c->srv->be;
	uint64_t data, hole, pos = *at;
	uint32_t st = NFS4_OK;
	int err;

	while (pos < end) {
		err = be->ops->seek(be, &c->cfh, pos, SEEK_DATA, &data);
		if (err == -ENXIO) {
			data = size;
		} else if (err) {
			st = nfs_errno(err);
			break;
		}
		if (data > pos) {
			hole = (data < end ? data : end) - pos;
			xdr_put_u32(r, NFS4_CONTENT_HOLE);
			xdr_put_u64(r, pos);
			xdr_put_u64(r, hole);
			(*nseg)++;
			pos += hole;
			continue;
		}
		err = be->ops->seek(be, &c->cfh, pos, SEEK_HOLE, &hole);
		if (err)
			hole = end;
		if (hole > end)
			hole = end;
		{
			size_t len = hole - pos, got = 0, at_len;
			uint8_t *p;
			bool feof = false;

			xdr_put_u32(r, NFS4_CONTENT_DATA);
			xdr_put_u64(r, pos);
			at_len = xdr_enc_len(r);
			xdr_put_u32(r, 0);
			p = xdr_reserve(r, len);
			if (!p) {
				st = NFS4ERR_SERVERFAULT;
				break;
			}
			err = be->ops->read(be, &c->cfh, pos, p, len, &got,
					    &feof);
			if (err) {
				st = nfs_errno(err);
				break;
			}
			xdr_enc_truncate(r, at_len + 4);
			xdr_reserve(r, got);
			xdr_patch_u32(r, at_len, (uint32_t)got);
			(*nseg)++;
			if (!got)
				break;
			pos += got;
		}
	}
	*at = pos;
	return st;
}

uint32_t nfs_op_read_plus(struct nfs_compound *c, struct xdr_dec *a,
			  struct xdr_enc *r)
{
	struct nfs_stateid sid;
	struct nfs_attr at;
	uint64_t off, end, pos;
	uint32_t count, st, st2, nseg = 0;
	size_t eof_at, n_at, room;

	nfs_get_stateid(c, a, &sid);
	off = xdr_get_u64(a);
	count = xdr_get_u32(a);
	st = io_start(c, a, &sid, &at, OPEN4_SHARE_ACCESS_READ);
	if (st)
		return st;
	if (count > NFS_MAX_IO)
		count = NFS_MAX_IO;
	room = r->cap - r->pos;
	room = room > 256 ? (room - 256) & ~(size_t)3 : 0;
	if (count > room)
		count = (uint32_t)room;
	end = off + count < off || off + count > at.size ? at.size :
	      off + count;
	eof_at = xdr_enc_len(r);
	xdr_put_bool(r, false);
	n_at = xdr_enc_len(r);
	xdr_put_u32(r, 0);
	io_unlock(c);
	pos = off;
	st = read_plus_segments(c, r, &pos, end, at.size, &nseg);
	if ((st2 = io_relock(c)))
		return st2;
	if (st)
		return st;
	xdr_patch_u32(r, eof_at, pos >= at.size);
	xdr_patch_u32(r, n_at, nseg);
	return NFS4_OK;
}

/*
 * WRITE_SAME4args (RFC 7862 15.12.1): stateid, stable_how4, then the
 * app_data_block4: offset, block size, block count, reloff_blocknum,
 * block_num (a count4), reloff_pattern, pattern<>. After the stateid and
 * file checks the description goes to bs_write_same() (the function the
 * client fallback runs too) on the backend's sink: its checks give INVAL
 * and FBIG, a block of zeroes becomes the sink's write_zeroes (written
 * extents at metadata cost where the storage zeroes by unmapping), else
 * the blocks are written from one bounded buffer. wr_committed is
 * FILE_SYNC4 only when the result was made durable (a stable request);
 * UNSTABLE4 results need a COMMIT. The caller's lease is renewed when it
 * ends, since a large request can take longer than the lease.
 */
struct ws_call {
	const struct bs_ws_adb *adb;
	bool stable;
	struct bs_ws_result res;
	int err;
	bool ran;
};

static int ws_run(void *arg, const struct bs_ws_sink *sink)
{
	struct ws_call *w = arg;

	w->ran = true;
	w->err = bs_write_same(w->adb, sink, w->stable, &w->res);
	return w->err;
}

uint32_t nfs_op_write_same(struct nfs_compound *c, struct xdr_dec *a,
			   struct xdr_enc *r)
{
	struct nfs_backend *be = &c->srv->be;
	struct bs_ws_adb adb = { 0 };
	struct ws_call w = { .adb = &adb };
	struct nfs_stateid sid;
	struct nfs_attr at;
	uint32_t stable, st;
	int err;

	nfs_get_stateid(c, a, &sid);
	stable = xdr_get_u32(a);
	adb.offset = xdr_get_u64(a);
	adb.block_size = xdr_get_u64(a);
	adb.block_count = xdr_get_u64(a);
	adb.reloff_blocknum = xdr_get_u64(a);
	adb.block_num = xdr_get_u32(a);
	adb.reloff_pattern = xdr_get_u64(a);
	adb.pattern = xdr_get_opaque_ref(a, &adb.pattern_len, XDR_NOMAX);
	if (xdr_dec_err(a) || stable > FILE_SYNC4)
		return NFS4ERR_BADXDR;
	/* a request the checks refuse is answered whole (INVAL, FBIG) */
	if (!bs_ws_check(&adb, 0) &&
	    adb.block_count > NFS_WS_PATTERN_MAX / adb.block_size &&
	    !bs_ws_is_zero(&adb))
		adb.block_count = NFS_WS_PATTERN_MAX / adb.block_size ?
				  NFS_WS_PATTERN_MAX / adb.block_size : 1;
	bs_error_clear();
	st = io_start(c, a, &sid, &at, OPEN4_SHARE_ACCESS_WRITE);
	if (st)
		return st;
	if (!be->ops->with_ws_sink)
		return NFS4ERR_NOTSUPP;
	w.stable = stable != UNSTABLE4;
	io_unlock(c);
	err = be->ops->with_ws_sink(be, &c->cfh, ws_run, &w);
	if ((st = io_relock(c)))
		return st;
	/* written zeroes of many GiB can outlast the lease that SEQUENCE
	 * renewed: the client was busy with us, so its lease runs from now */
	if (c->sess)
		c->sess->clp->renewed = nfs_now();
	if (!w.ran && err)
		return nfs_errno(err);
	bs_error_clear();
	if (w.err)
		return bs_ws_nfsstat(w.err);
	xdr_put_u32(r, 0);			/* wr_callback_id<1>: none */
	xdr_put_u64(r, w.res.bytes);
	xdr_put_u32(r, w.res.committed ? FILE_SYNC4 : UNSTABLE4);
	xdr_put_fixed(r, c->srv->boot_verf, NFS4_VERIFIER_SIZE);
	return NFS4_OK;
}
