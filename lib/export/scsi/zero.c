/* SPDX-License-Identifier: MIT */
/*
 * Zeroing and provisioning: WRITE SAME 10/16, UNMAP, GET LBA STATUS.
 *
 *   WRITE SAME, UNMAP bit, zero block (or NDOB)  zeroout that may unmap
 *   WRITE SAME, zero block without UNMAP         zeroout BS_ZERO_NOUNMAP
 *   WRITE SAME, another block                    written out, a buffer of
 *                                                at most PATTERN_MAX
 *                                                repeating it, in a loop
 *   UNMAP on an LBPRZ unit                       zeroout that may unmap
 *                                                (reads back zeroes)
 *   UNMAP otherwise                              DISCARD (advisory)
 *
 * Any length the unit holds is served whole: the core's zeroout splits by
 * the device's limits with bounded memory, and pattern writes loop.
 */
#include <errno.h>
#include <string.h>

#include <blkstack/bufpool.h>
#include <blkstack/zero.h>

#include "export/scsi/internal.h"

#define PATTERN_MAX (1u << 20)

static bool all_zero(const uint8_t *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

static void zero_done(void *arg, int result)
{
	struct scsi_io *io = arg;

	if (result < 0) {
		scsi_io_fail(io, result);
		return;
	}
	io->step(io);
}

/* Zero [lba, lba+n) with @flags, then @step. */
static void zero_range(struct scsi_io *io, uint64_t lba, uint64_t n,
		       unsigned flags, scsi_io_fn step)
{
	int err;

	io->step = step;
	err = bs_zeroout(io->lu->dev, lba * io->bs, n * io->bs, flags, NULL,
			 zero_done, io);
	if (err < 0)
		scsi_io_fail(io, err);
}

static void good_end(struct scsi_io *io)
{
	scsi_good(io->cmd);
	scsi_io_end(io);
}

/* ---- WRITE SAME ---------------------------------------------------------- */

static void ws_zero_go(struct scsi_io *io)
{
	zero_range(io, io->lba, io->nblocks, io->flags, good_end);
}

static void ws_pattern_next(struct scsi_io *io)
{
	uint64_t n = io->nblocks - io->pos, chunk = io->buf_len / io->bs;

	if (!n) {
		good_end(io);
		return;
	}
	if (n > chunk)
		n = chunk;
	io->pos += n;
	scsi_io_submit(io, BS_OP_WRITE, 0, io->lba + io->pos - n, n, io->buf,
		       ws_pattern_next);
}

int scsi_write_same(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	bool ws16 = cmd->cdb[0] == 0x93;
	uint8_t f = cmd->cdb[1];
	bool unmap = f & 0x08, ndob = ws16 && (f & 0x01);
	uint64_t lba, n, nblocks, max_ws;
	struct scsi_io *io;
	struct bs_caps c;
	uint32_t bs;
	size_t i, len;
	int rc;

	if (f & 0xe0)		/* WRPROTECT: no protection information */
		return scsi_bad_cdb(cmd, 1, 7);
	if (f & 0x10)		/* ANCHOR: anchored blocks are not supported */
		return scsi_bad_cdb(cmd, 1, 4);
	if (f & 0x06)		/* PBDATA, LBDATA (obsolete) */
		return scsi_bad_cdb(cmd, 1, 2);
	scsi_cdb_range(cmd->cdb, &lba, &n);
	scsi_lu_geometry(lu, &nblocks, &bs);
	scsi_lu_caps(lu, &c);
	max_ws = scsi_max_ws_blocks(&c);
	if (lba > nblocks)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_LBA_OUT_OF_RANGE);
	if (!n)			/* WSNZ = 0: to the last LBA (SBC-4) */
		n = nblocks - lba;
	if (max_ws && n > max_ws)
		return scsi_bad_cdb(cmd, ws16 ? 10 : 7, -1);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	/* exactly one block of Data-Out (none with NDOB) */
	if (!ndob && (!cmd->dout || cmd->dout_len != bs))
		return scsi_short_dout(cmd);
	if (!n)
		return scsi_good(cmd);
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->lba = lba;
	io->nblocks = n;
	io->write = true;
	if (ndob || all_zero(cmd->dout, bs)) {
		io->flags = unmap ? 0 : BS_ZERO_NOUNMAP;
		scsi_gate_enter(io, false, ws_zero_go);
		return SCSI_ASYNC;
	}
	len = PATTERN_MAX / bs ? PATTERN_MAX / bs * bs : bs;
	if (len > n * bs)
		len = n * bs;
	if (scsi_io_buf(io, len))
		return SCSI_ASYNC;
	for (i = 0; i < io->buf_len; i += bs)
		memcpy(io->buf + i, cmd->dout, bs);
	scsi_gate_enter(io, false, ws_pattern_next);
	return SCSI_ASYNC;
}

/* ---- UNMAP --------------------------------------------------------------- */

/* io->data: the descriptors; io->nblocks: their count; io->pos: next. */
static void unmap_next(struct scsi_io *io);

static void unmap_discard_done(struct bs_req *req)
{
	struct scsi_io *io = req->priv;

	/* a discard is advisory: a device that cannot is not an error */
	if (req->result < 0 && req->result != -EOPNOTSUPP) {
		scsi_io_fail(io, req->result);
		return;
	}
	unmap_next(io);
}

static void unmap_next(struct scsi_io *io)
{
	const uint8_t *d;
	uint64_t lba;
	uint32_t n;

	do {
		if (io->pos == io->nblocks) {
			good_end(io);
			return;
		}
		d = io->data + 16 * io->pos++;
		lba = get64(d);
		n = get32(d + 8);
	} while (!n);
	if (io->flags) {	/* LBPRZ: the blocks must read back as zeroes */
		zero_range(io, lba, n, 0, unmap_next);
		return;
	}
	bs_req_init(&io->req, BS_OP_DISCARD, 0, lba * io->bs,
		    (uint64_t)n * io->bs, NULL, unmap_discard_done, io);
	bs_submit(io->lu->dev, &io->req);
}

static void unmap_go(struct scsi_io *io)
{
	unmap_next(io);
}

int scsi_unmap(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint16_t plen = get16(cmd->cdb + 7), bdl;
	uint64_t nblocks, lba, max_lbas;
	const uint8_t *p = cmd->dout;
	struct scsi_io *io;
	struct bs_caps c;
	unsigned count, i;
	uint32_t bs, n;

	if (cmd->cdb[1] & 0x01)		/* ANCHOR */
		return scsi_bad_cdb(cmd, 1, 0);
	scsi_lu_caps(lu, &c);
	/* served exactly when VPD B2 says LBPU (the device discards) */
	if (!c.discard)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_INVALID_OPCODE);
	if (!plen)
		return scsi_good(cmd);
	if (plen < 8)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_PARAM_LIST_LENGTH);
	if (!p || cmd->dout_len < plen)
		return scsi_short_dout(cmd);
	bdl = get16(p + 2);
	if (get16(p) < 6 || (uint32_t)get16(p) + 2 > plen)
		return scsi_bad_param(cmd, 0, -1);
	if (bdl > plen - 8)
		return scsi_bad_param(cmd, 2, -1);
	count = bdl / 16;	/* a partial last descriptor is ignored */
	if (count > SCSI_MAX_UNMAP_DESC)
		return scsi_bad_param(cmd, 2, -1);
	scsi_lu_geometry(lu, &nblocks, &bs);
	max_lbas = scsi_max_unmap_blocks(&c);
	for (i = 0; i < count; i++) {
		const uint8_t *d = p + 8 + 16 * i;

		lba = get64(d);
		n = get32(d + 8);
		if (lba > nblocks || n > nblocks - lba)
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  A_LBA_OUT_OF_RANGE);
		if (max_lbas && n > max_lbas)
			return scsi_bad_param(cmd, 8 + 16 * i + 8, -1);
	}
	if (!count)
		return scsi_good(cmd);
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->data = p + 8;
	io->nblocks = count;
	io->write = true;
	io->flags = scsi_lbprz(&c);
	scsi_gate_enter(io, false, unmap_go);
	return SCSI_ASYNC;
}

/* ---- GET LBA STATUS ------------------------------------------------------ */

struct lba_walk {
	uint8_t *d;
	unsigned max, n;
	uint32_t bs;
	uint64_t cur_start, cur_end;	/* bytes, the descriptor being built */
	int cur_hole;			/* -1: none yet */
};

static bool walk_emit(struct lba_walk *w)
{
	uint64_t start, blocks;
	uint8_t *e;

	if (w->cur_hole < 0)
		return true;
	start = w->cur_start / w->bs;
	blocks = (w->cur_end - w->cur_start) / w->bs;
	while (blocks) {
		uint32_t b = blocks > UINT32_MAX ? UINT32_MAX
						 : (uint32_t)blocks;

		if (w->n == w->max)
			return false;
		e = w->d + 8 + 16 * w->n++;
		put64(e, start);
		put32(e + 8, b);
		/* deallocated : mapped */
		e[12] = w->cur_hole ? 0x01 : 0x00;
		start += b;
		blocks -= b;
	}
	return true;
}

static int walk_extent(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	struct lba_walk *w = arg;
	int hole = !!(flags & BS_EXT_HOLE);

	if (w->cur_hole == hole && off == w->cur_end) {
		w->cur_end = off + len;
		return 0;
	}
	if (!walk_emit(w))
		return 1;
	w->cur_hole = hole;
	w->cur_start = off;
	w->cur_end = off + len;
	return w->n == w->max;
}

int scsi_get_lba_status(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint64_t lba = get64(cmd->cdb + 2), nblocks, span;
	uint32_t alloc = get32(cmd->cdb + 10), cap;
	struct lba_walk w = { .cur_hole = -1 };
	int err;

	scsi_lu_geometry(lu, &nblocks, &w.bs);
	if (lba >= nblocks)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_LBA_OUT_OF_RANGE);
	cap = alloc < 8 + 16 * 64 ? alloc : 8 + 16 * 64;
	w.max = cap > 24 ? (cap - 8) / 16 : 1;
	w.d = scsi_din(cmd, 8 + 16 * w.max);
	if (!w.d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	span = nblocks - lba;
	if (span > UINT32_MAX)
		span = UINT32_MAX;
	err = bs_block_status(lu->dev, lba * w.bs, span * w.bs, walk_extent,
			      &w);
	if (err < 0)
		return scsi_check_errno(cmd, err, false);
	if (w.n < w.max) {
		/* the walk may end past the range: clip the last extent */
		if (w.cur_end > (lba + span) * w.bs)
			w.cur_end = (lba + span) * w.bs;
		walk_emit(&w);
	}
	if (!w.n) {	/* nothing reported: one mapped descriptor */
		put64(w.d + 8, lba);
		put32(w.d + 16, (uint32_t)span);
		w.n = 1;
	}
	put32(w.d, 4 + 16 * w.n);
	return scsi_din_done(cmd, 8 + 16 * w.n, alloc);
}
