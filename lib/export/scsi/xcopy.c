/* SPDX-License-Identifier: MIT */
/*
 * EXTENDED COPY (LID1) and RECEIVE COPY RESULTS (operating parameters,
 * copy status): the copy manager of SPC-4 for the one case block storage
 * needs, a block device to block device copy (segment descriptor 02h)
 * between logical units of this target named by identification
 * descriptors (E4h with the NAA or EUI-64 designator of VPD 83h). The data
 * goes through a bounce buffer of at most CHUNK bytes, read then written,
 * segment by segment; no inline or held data. The results of a copy whose
 * LIST ID USAGE says "hold" (00b, 10b) are kept per nexus (the last four)
 * for RECEIVE COPY RESULTS COPY STATUS.
 *
 * A segment's CSCD descriptor ID FFFFh names the LU the EXTENDED COPY
 * was sent to, with no identification descriptor. VPD 8Fh (Third-party
 * Copy) and RECEIVE COPY RESULTS OPERATING PARAMETERS report the same
 * limits (the constants below; lengths from the LU's block size), and
 * standard INQUIRY sets 3PC.
 *
 * Another unit a segment reads or writes is visited (scsi_visit_join()):
 * task management that aborts that unit's task set (LOGICAL UNIT RESET,
 * ABORT/CLEAR TASK SET) waits for the copy's request in flight there and
 * ends the copy with COPY ABORTED, THIRD PARTY DEVICE FAILURE: no write of
 * the copy lands after the reset has answered. Each segment writes inside
 * its destination's write gate, so a COMPARE AND WRITE there is atomic
 * against the copy as against any write.
 *
 * Errors in the parameter list are ILLEGAL REQUEST before anything is
 * copied; a segment that cannot be done (a target index not in the list,
 * an unknown unit, a range past the end, different block sizes) ends the
 * copy with COPY ABORTED, segments before it done.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bufpool.h>

#include "export/scsi/internal.h"

#define CHUNK (1u << 20)
#define MAX_TARGETS 2
#define MAX_SEGMENTS 8
#define MAX_LIST (1024u)
#define TD_LEN 32
#define SEG_B2B_LEN 28
#define CSCD_SELF 0xffffu	/* the LU that received the command */

enum {
	A_TOO_MANY_TARGETS = ASC(0x26, 0x06),
	A_UNSUPP_TARGET = ASC(0x26, 0x07),
	A_TOO_MANY_SEGMENTS = ASC(0x26, 0x08),
	A_UNSUPP_SEGMENT = ASC(0x26, 0x09),
	A_THIRD_PARTY_FAILURE = ASC(0x0d, 0x01),
	A_TARGET_UNREACHABLE = ASC(0x0d, 0x02),
	SK_COPY_ABORTED = 0x0a,
};

struct xcopy {
	struct bs_scsi_lu *td[MAX_TARGETS];	/* NULL: no such unit here */
	unsigned ntd;
	const uint8_t *seg;	/* the segment descriptors */
	unsigned nseg, iseg;
	struct bs_scsi_lu *src, *dst;
	uint64_t src_lba, dst_lba, left;	/* the segment in progress */
	uint32_t chunk;		/* blocks in the current chunk */
	uint64_t copied;	/* bytes */
	uint8_t list_id;
	bool hold;		/* LIST ID USAGE 00b or 10b: keep the results */
	struct scsi_visit visit[2];	/* the segment's other units */
};

/* Stop visiting the last segment's units (and as the I/O ends). */
static void xc_leave(struct scsi_io *io)
{
	struct xcopy *x = io->ext;

	scsi_visit_leave(&x->visit[0]);
	scsi_visit_leave(&x->visit[1]);
}

/* Was a unit of the segment reset or its task set aborted? */
static bool xc_visit_aborted(const struct xcopy *x)
{
	return (x->visit[0].lu && scsi_visit_aborted(&x->visit[0])) ||
	       (x->visit[1].lu && scsi_visit_aborted(&x->visit[1]));
}

/* Keep the results of the copy for RECEIVE COPY RESULTS COPY STATUS. */
static void xc_record(struct scsi_io *io, uint8_t status)
{
	struct xcopy *x = io->ext;
	struct bs_scsi_nexus *n = io->cmd->nexus;
	struct scsi_copy_result *r = NULL;
	unsigned i;

	if (!x->hold)
		return;
	pthread_mutex_lock(&io->lu->tgt->lock);
	for (i = 0; i < SCSI_COPIES_HELD; i++)
		if (n->copies[i].used && n->copies[i].list_id == x->list_id)
			r = &n->copies[i];
	if (!r)
		r = &n->copies[n->copies_next++ % SCSI_COPIES_HELD];
	r->used = true;
	r->list_id = x->list_id;
	r->status = status;
	r->segments = (uint16_t)(x->iseg - (status ? 1 : 0));
	r->kib = (uint32_t)(x->copied >> 10);
	pthread_mutex_unlock(&io->lu->tgt->lock);
}

/* The unit whose VPD 83h designator @d (4-byte header) names; lock held. */
static struct bs_scsi_lu *find_unit(struct bs_scsi_tgt *t, const uint8_t *d)
{
	uint8_t type = d[1] & 0x0f, len = d[3];
	struct bs_scsi_lu *lu;

	if ((d[1] >> 4 & 3) != 0 || len != 8 || (type != 2 && type != 3))
		return NULL;	/* only the unit's NAA or EUI-64 */
	for (lu = t->lus; lu; lu = lu->next)
		if (get64(d + 4) == (type == 3 ? lu->naa : lu->eui))
			return lu;
	return NULL;
}

static void xc_next_segment(struct scsi_io *io);
static void xc_chunk(struct scsi_io *io);

static void xc_abort(struct scsi_io *io, uint16_t asc)
{
	xc_record(io, 1);
	scsi_check(io->cmd, SK_COPY_ABORTED, asc);
	scsi_io_end(io);
}

static void xc_written(struct bs_req *req)
{
	struct scsi_io *io = req->priv;
	struct xcopy *x = io->ext;

	if (req->result < 0) {
		io->write = true;
		scsi_io_fail(io, req->result);
		return;
	}
	x->src_lba += x->chunk;
	x->dst_lba += x->chunk;
	x->left -= x->chunk;
	x->copied += (uint64_t)x->chunk * io->bs;
	xc_chunk(io);		/* which stops an aborted task */
}

static void xc_read(struct bs_req *req)
{
	struct scsi_io *io = req->priv;
	struct xcopy *x = io->ext;

	if (req->result < 0) {
		scsi_io_fail(io, req->result);
		return;
	}
	if (xc_visit_aborted(x)) {
		xc_abort(io, A_THIRD_PARTY_FAILURE);
		return;
	}
	bs_req_init(&io->req, BS_OP_WRITE, 0, x->dst_lba * io->bs,
		    (uint64_t)x->chunk * io->bs, io->buf, xc_written, io);
	bs_submit(x->dst->dev, &io->req);
}

static void xc_chunk(struct scsi_io *io)
{
	struct xcopy *x = io->ext;
	uint64_t max = io->buf_len / io->bs;

	/* task management aborted it (during the last chunk, or while it
	 * waited for a gate): TASK ABORTED */
	if (__atomic_load_n(&scsi_core(io->cmd)->aborted, __ATOMIC_RELAXED)) {
		scsi_io_end(io);
		return;
	}
	if (xc_visit_aborted(x)) {
		xc_abort(io, A_THIRD_PARTY_FAILURE);
		return;
	}
	if (!x->left) {
		xc_next_segment(io);
		return;
	}
	x->chunk = (uint32_t)(x->left < max ? x->left : max);
	bs_req_init(&io->req, BS_OP_READ, 0, x->src_lba * io->bs,
		    (uint64_t)x->chunk * io->bs, io->buf, xc_read, io);
	bs_submit(x->src->dev, &io->req);
}

static void xc_next_segment(struct scsi_io *io)
{
	struct xcopy *x = io->ext;
	const uint8_t *s;
	uint16_t si, di;
	uint64_t nsrc, ndst;
	uint32_t bsrc, bdst;

	xc_leave(io);
	if (io->gate)
		scsi_gate_leave(io);
	if (x->iseg == x->nseg) {
		xc_record(io, 0);
		scsi_good(io->cmd);
		scsi_io_end(io);
		return;
	}
	s = x->seg + SEG_B2B_LEN * x->iseg++;
	si = get16(s + 4);
	di = get16(s + 6);
	x->src = si == CSCD_SELF ? io->lu : si < x->ntd ? x->td[si] : NULL;
	x->dst = di == CSCD_SELF ? io->lu : di < x->ntd ? x->td[di] : NULL;
	if (!x->src || !x->dst) {
		xc_abort(io, A_TARGET_UNREACHABLE);
		return;
	}
	if (x->dst->readonly) {
		scsi_check(io->cmd, SK_DATA_PROTECT, A_WRITE_PROTECTED);
		scsi_io_end(io);
		return;
	}
	/* the command's own unit was checked as it arrived; another one
	 * answers to its reservations as a READ or WRITE sent to it would
	 * (the copy runs with the sender's nexus) */
	if ((x->src != io->lu &&
	     scsi_res_conflict_access(x->src, io->cmd->nexus, RC_READ)) ||
	    (x->dst != io->lu &&
	     scsi_res_conflict_access(x->dst, io->cmd->nexus, RC_WRITE))) {
		xc_record(io, 1);
		io->cmd->status = BS_SCSI_RESERVATION_CONFLICT;
		io->cmd->sense_len = 0;
		scsi_io_end(io);
		return;
	}
	scsi_lu_geometry(x->src, &nsrc, &bsrc);
	scsi_lu_geometry(x->dst, &ndst, &bdst);
	x->left = get16(s + 10);
	x->src_lba = get64(s + 12);
	x->dst_lba = get64(s + 20);
	/* a range past the end: COPY ABORTED (what copy managers answer) */
	if (bsrc != bdst || bsrc != io->bs || x->src_lba > nsrc ||
	    x->left > nsrc - x->src_lba || x->dst_lba > ndst ||
	    x->left > ndst - x->dst_lba) {
		xc_abort(io, A_NONE);
		return;
	}
	if (x->src != io->lu)
		scsi_visit_join(&x->visit[0], x->src);
	if (x->dst != io->lu && x->dst != x->src)
		scsi_visit_join(&x->visit[1], x->dst);
	scsi_gate_enter_unit(io, x->dst, false, xc_chunk);
}

int scsi_extended_copy(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint32_t plen = get32(cmd->cdb + 10), tdl, sdl, off, i;
	const uint8_t *p = cmd->dout;
	struct xcopy *x;
	struct scsi_io *io;

	if (!plen)
		return scsi_good(cmd);
	if (!p || cmd->dout_len < plen)
		return scsi_short_dout(cmd);
	if (plen < 16)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_PARAM_LIST_LENGTH);
	tdl = get16(p + 2);
	sdl = get32(p + 8);
	if (get32(p + 12))		/* inline data: none held here */
		return scsi_bad_param(cmd, 12, -1);
	if ((uint64_t)16 + tdl + sdl > plen || tdl + sdl > MAX_LIST)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_PARAM_LIST_LENGTH);
	if (tdl % TD_LEN)
		return scsi_bad_param(cmd, 2, -1);
	if (tdl / TD_LEN > MAX_TARGETS)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_TOO_MANY_TARGETS);
	x = calloc(1, sizeof(*x));
	if (!x)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	x->ntd = tdl / TD_LEN;
	x->list_id = p[0];
	x->hold = !(p[1] & 0x08);	/* LIST ID USAGE 00b, 10b */
	pthread_mutex_lock(&lu->tgt->lock);
	for (i = 0; i < x->ntd; i++) {
		const uint8_t *d = p + 16 + TD_LEN * i;

		if (d[0] != 0xe4) {
			pthread_mutex_unlock(&lu->tgt->lock);
			free(x);
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  A_UNSUPP_TARGET);
		}
		/* LU ID TYPE and NUL are ignored (SPC-4) */
		x->td[i] = find_unit(lu->tgt, d + 4);
	}
	pthread_mutex_unlock(&lu->tgt->lock);
	/* the segments: block to block only, each its fixed length */
	for (off = 0; off < sdl; off += SEG_B2B_LEN) {
		const uint8_t *s = p + 16 + tdl + off;

		if (sdl - off < 4 || s[0] != 0x02) {
			free(x);
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  sdl - off < 4 ? A_PARAM_LIST_LENGTH
							: A_UNSUPP_SEGMENT);
		}
		if (get16(s + 2) != SEG_B2B_LEN - 4 ||
		    sdl - off < SEG_B2B_LEN) {
			free(x);
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  A_PARAM_LIST_LENGTH);
		}
		if (++x->nseg > MAX_SEGMENTS) {
			free(x);
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  A_TOO_MANY_SEGMENTS);
		}
	}
	x->seg = p + 16 + tdl;
	if (!x->nseg) {
		free(x);
		return scsi_good(cmd);
	}
	if (!(io = scsi_io_new(cmd, lu))) {
		free(x);
		return SCSI_DONE;
	}
	io->ext = x;		/* freed with the I/O context */
	io->fini = xc_leave;
	if (scsi_io_buf(io, (CHUNK / io->bs ? CHUNK / io->bs : 1) * io->bs))
		return SCSI_ASYNC;
	xc_next_segment(io);
	return SCSI_ASYNC;
}

/* COPY STATUS of the copy with list identifier CDB byte 2, on this nexus. */
static int copy_status(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu,
		       uint8_t *d, uint32_t alloc)
{
	struct bs_scsi_nexus *n = cmd->nexus;
	struct scsi_copy_result r = { 0 };
	unsigned i;

	pthread_mutex_lock(&lu->tgt->lock);
	for (i = 0; i < SCSI_COPIES_HELD; i++)
		if (n->copies[i].used && n->copies[i].list_id == cmd->cdb[2])
			r = n->copies[i];
	pthread_mutex_unlock(&lu->tgt->lock);
	if (!r.used)
		return scsi_bad_cdb(cmd, 2, -1);
	put32(d, 8);
	d[4] = r.status;
	put16(d + 5, r.segments);
	d[7] = 0xf1;		/* transfer count in KiB */
	put32(d + 8, r.kib);
	return scsi_din_done(cmd, 12, alloc);
}

/* A segment moves at most 0xffff blocks (its 16-bit block count). */
static uint32_t max_segment_bytes(uint32_t bs)
{
	return 0xffffu * bs;
}

static uint8_t log2_bs(uint32_t bs)
{
	uint8_t l = 0;

	while ((1u << (l + 1)) <= bs)
		l++;
	return l;
}

/* One VPD 8Fh descriptor header at @d; returns the padded total length. */
static uint32_t tpc_desc(uint8_t *d, uint16_t type, uint32_t body)
{
	uint32_t len = (body + 3) & ~3u;

	put16(d, type);
	put16(d + 2, (uint16_t)len);
	return 4 + len;
}

uint32_t scsi_vpd_tpc(struct bs_scsi_lu *lu, uint8_t *d)
{
	uint32_t off = 4, bs;
	uint64_t nblocks;
	uint8_t *p;

	scsi_lu_geometry(lu, &nblocks, &bs);
	/* Supported Commands (0001h): EXTENDED COPY LID1, RECEIVE COPY
	 * RESULTS COPY STATUS and OPERATING PARAMETERS */
	p = d + off;
	p[4] = 7;			/* the list's length */
	p[5] = 0x83;
	p[6] = 1;
	p[7] = 0x00;
	p[8] = 0x84;
	p[9] = 2;
	p[10] = 0x00;
	p[11] = 0x03;
	off += tpc_desc(p, 0x0001, 8);
	/* Parameter Data (0004h) */
	p = d + off;
	put16(p + 8, MAX_TARGETS);
	put16(p + 10, MAX_SEGMENTS);
	put32(p + 12, MAX_LIST);
	put32(p + 16, 0);		/* no inline data */
	off += tpc_desc(p, 0x0004, 28);
	/* Supported Descriptors (0008h): block to block, identification */
	p = d + off;
	p[4] = 2;
	p[5] = 0x02;
	p[6] = 0xe4;
	off += tpc_desc(p, 0x0008, 3);
	/* Supported CSCD Descriptor IDs (000Ch): FFFFh, the LU itself */
	p = d + off;
	put16(p + 4, 2);
	put16(p + 6, CSCD_SELF);
	off += tpc_desc(p, 0x000c, 4);
	/* General Copy Operations (8001h) */
	p = d + off;
	put32(p + 4, 1);		/* total concurrent copies */
	put32(p + 8, 1);		/* maximum identified concurrent copies */
	put32(p + 12, max_segment_bytes(bs));
	p[16] = log2_bs(bs);		/* data segment granularity */
	p[17] = log2_bs(bs);		/* inline data granularity */
	off += tpc_desc(p, 0x8001, 32);
	return off;
}

int scsi_receive_copy_results(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint32_t alloc = get32(cmd->cdb + 10), bs;
	uint64_t nblocks;
	uint8_t *d = scsi_din(cmd, 48);

	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	if ((cmd->cdb[1] & 0x1f) == 0x00)
		return copy_status(cmd, lu, d, alloc);
	/* OPERATING PARAMETERS */
	scsi_lu_geometry(lu, &nblocks, &bs);
	put32(d, 46 - 4);
	put16(d + 8, MAX_TARGETS);
	put16(d + 10, MAX_SEGMENTS);
	put32(d + 12, MAX_LIST);
	put32(d + 16, max_segment_bytes(bs));
	put16(d + 34, 1);		/* total concurrent copies */
	d[36] = 1;			/* maximum concurrent copies */
	d[37] = log2_bs(bs);		/* data segment granularity */
	d[43] = 2;			/* implemented descriptor types */
	d[44] = 0x02;			/* block to block */
	d[45] = 0xe4;			/* identification descriptor */
	return scsi_din_done(cmd, 46, alloc);
}
