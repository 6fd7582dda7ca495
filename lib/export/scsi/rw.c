/* SPDX-License-Identifier: MIT */
/*
 * The data commands: READ and WRITE 6/10/12/16, WRITE AND VERIFY, VERIFY,
 * COMPARE AND WRITE, ORWRITE, PRE-FETCH, SYNCHRONIZE CACHE, READ DEFECT
 * DATA.
 *
 * Ranges are checked in 64-bit arithmetic (scsi_check_range). A READ or
 * WRITE longer than VPD B0's MAXIMUM TRANSFER LENGTH is refused; VERIFY
 * of any length the unit holds is served in chunks of at most CHUNK bytes
 * of memory.
 */
#include <errno.h>
#include <string.h>

#include <blkstack/bufpool.h>

#include "export/scsi/internal.h"

#define CHUNK (1u << 20)

void scsi_cdb_range(const uint8_t *cdb, uint64_t *lba, uint64_t *n)
{
	switch (cdb[0] >> 5) {
	case 0:	/* 6-byte: 21-bit LBA, 0 blocks means 256 */
		*lba = (uint64_t)(cdb[1] & 0x1f) << 16 | get16(cdb + 2);
		*n = cdb[4] ? cdb[4] : 256;
		break;
	case 1:
	case 2:
		*lba = get32(cdb + 2);
		*n = get16(cdb + 7);
		break;
	case 5:
		*lba = get32(cdb + 2);
		*n = get32(cdb + 6);
		break;
	default:
		*lba = get64(cdb + 2);
		*n = get32(cdb + 10);
		break;
	}
}

/* The CDB byte where the transfer length starts (field pointers). */
static unsigned len_byte(uint8_t opcode)
{
	static const uint8_t at[8] = { 4, 7, 7, 0, 10, 6, 0, 0 };

	return at[opcode >> 5];
}

static uint32_t max_xfer(const struct bs_scsi_lu *lu)
{
	const struct bs_dev_snap *s = bs_dev_snap(lu->dev);
	struct bs_caps c;

	if (s)
		return scsi_max_xfer_blocks(&s->caps);
	bs_dev_caps(lu->dev, &c);
	return scsi_max_xfer_blocks(&c);
}

/* RDPROTECT / WRPROTECT / VRPROTECT: no protection information here. */
static bool protect_set(const uint8_t *cdb)
{
	return cdb[0] >> 5 != 0 && (cdb[1] & 0xe0);
}

/* ---- READ ---------------------------------------------------------------- */

static void read_done(struct scsi_io *io)
{
	struct bs_scsi_cmd *cmd = io->cmd;

	scsi_good(cmd);
	cmd->din_len = (uint32_t)(io->nblocks * io->bs);
	if (cmd->din_len > cmd->din_max)
		cmd->din_len = cmd->din_max;
	scsi_io_end(io);
}

int scsi_read(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	struct scsi_core *c = scsi_core(cmd);
	struct scsi_io *io;
	uint64_t lba, n;
	int rc;

	if (protect_set(cmd->cdb))
		return scsi_bad_cdb(cmd, 1, 7);
	scsi_cdb_range(cmd->cdb, &lba, &n);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	if (!n)
		return scsi_good(cmd);
	if (n > max_xfer(lu))
		return scsi_bad_cdb(cmd, len_byte(cmd->cdb[0]), -1);
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->lba = lba;
	io->nblocks = n;
	cmd->din = bs_buf_get(n * io->bs);
	if (!cmd->din) {
		scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
		scsi_io_end(io);
		return SCSI_ASYNC;
	}
	c->din_cap = (uint32_t)(n * io->bs);
	scsi_io_submit(io, BS_OP_READ, 0, lba, n, cmd->din, read_done);
	return SCSI_ASYNC;
}

/* ---- WRITE, WRITE AND VERIFY --------------------------------------------- */

static void io_good_end(struct scsi_io *io)
{
	scsi_good(io->cmd);
	scsi_io_end(io);
}

/* WRITE AND VERIFY with BYTCHK 01b: read back what was written, compare. */
static void wav_compare(struct scsi_io *io)
{
	size_t len = io->nblocks * io->bs, i;

	for (i = 0; i < len && io->buf[i] == io->data[i]; i++)
		;
	if (i < len)
		scsi_check_info(io->cmd, SK_MISCOMPARE, A_MISCOMPARE_VERIFY, i);
	else
		scsi_good(io->cmd);
	scsi_io_end(io);
}

static void wav_readback(struct scsi_io *io)
{
	io->write = false;
	scsi_io_submit(io, BS_OP_READ, 0, io->lba, io->nblocks, io->buf,
		       wav_compare);
}

static void write_go(struct scsi_io *io)
{
	scsi_io_submit(io, BS_OP_WRITE, io->flags, io->lba, io->nblocks,
		       (void *)io->data, io->buf ? wav_readback : io_good_end);
}

int scsi_write(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint8_t opc = cmd->cdb[0];
	bool wav = opc == 0x2e || opc == 0xae || opc == 0x8e;
	unsigned bytchk = wav ? (cmd->cdb[1] >> 1) & 3 : 0;
	struct scsi_io *io;
	uint64_t lba, n, nblocks;
	uint32_t bs;
	int rc;

	if (protect_set(cmd->cdb))
		return scsi_bad_cdb(cmd, 1, 7);
	if (bytchk > 1)
		return scsi_bad_cdb(cmd, 1, 2);
	scsi_cdb_range(cmd->cdb, &lba, &n);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	if (!n)
		return scsi_good(cmd);
	if (n > max_xfer(lu))
		return scsi_bad_cdb(cmd, len_byte(opc), -1);
	scsi_lu_geometry(lu, &nblocks, &bs);
	if ((uint64_t)cmd->dout_len < n * bs || !cmd->dout)
		return scsi_short_dout(cmd);
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->lba = lba;
	io->nblocks = n;
	io->data = cmd->dout;
	io->write = true;
	/* FUA (not in the 6-byte form); WRITE AND VERIFY is durable too */
	if (wav || (opc >> 5 && cmd->cdb[1] & 0x08))
		io->flags = BS_REQ_FUA;
	if (bytchk) {
		if (scsi_io_buf(io, n * bs))
			return SCSI_ASYNC;
	}
	scsi_gate_enter(io, false, write_go);
	return SCSI_ASYNC;
}

/* ---- VERIFY -------------------------------------------------------------- */

static void verify_next(struct scsi_io *io);

static void verify_chunk_done(struct scsi_io *io)
{
	uint64_t n = io->nblocks - io->pos, chunk = io->buf_len / io->bs, i;
	size_t len;

	if (n > chunk)
		n = chunk;
	len = n * io->bs;
	if (io->flags == 1) {		/* BYTCHK 01b: the Data-Out, in order */
		const uint8_t *want = io->data + io->pos * io->bs;

		for (i = 0; i < len && io->buf[i] == want[i]; i++)
			;
		if (i < len) {
			scsi_check_info(io->cmd, SK_MISCOMPARE,
					A_MISCOMPARE_VERIFY,
					io->pos * io->bs + i);
			scsi_io_end(io);
			return;
		}
	} else if (io->flags == 3) {	/* BYTCHK 11b: one block, each */
		for (i = 0; i < len; i++)
			if (io->buf[i] != io->data[i % io->bs])
				break;
		if (i < len) {
			scsi_check_info(io->cmd, SK_MISCOMPARE,
					A_MISCOMPARE_VERIFY,
					(io->pos * io->bs + i) % io->bs);
			scsi_io_end(io);
			return;
		}
	}
	io->pos += n;
	verify_next(io);
}

static void verify_next(struct scsi_io *io)
{
	uint64_t n = io->nblocks - io->pos, chunk = io->buf_len / io->bs;

	if (!n) {
		io_good_end(io);
		return;
	}
	if (n > chunk)
		n = chunk;
	scsi_io_submit(io, BS_OP_READ, 0, io->lba + io->pos, n, io->buf,
		       verify_chunk_done);
}

int scsi_verify(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	unsigned bytchk = (cmd->cdb[1] >> 1) & 3;
	struct scsi_io *io;
	uint64_t lba, n, nblocks;
	uint32_t bs;
	int rc;

	if (protect_set(cmd->cdb))
		return scsi_bad_cdb(cmd, 1, 7);
	if (bytchk == 2)
		return scsi_bad_cdb(cmd, 1, 2);
	scsi_cdb_range(cmd->cdb, &lba, &n);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	if (!n)
		return scsi_good(cmd);
	scsi_lu_geometry(lu, &nblocks, &bs);
	if (bytchk == 1) {
		if (n > max_xfer(lu))
			return scsi_bad_cdb(cmd, len_byte(cmd->cdb[0]), -1);
		if (!cmd->dout || (uint64_t)cmd->dout_len < n * bs)
			return scsi_short_dout(cmd);
	} else if (bytchk == 3) {
		if (!cmd->dout || cmd->dout_len < bs)
			return scsi_short_dout(cmd);
	}
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->lba = lba;
	io->nblocks = n;
	io->flags = bytchk;
	io->data = cmd->dout;
	if (scsi_io_buf(io, n * bs < CHUNK ? n * bs
				: (CHUNK / bs ? CHUNK / bs : 1) * bs))
		return SCSI_ASYNC;
	verify_next(io);
	return SCSI_ASYNC;
}

/* ---- COMPARE AND WRITE --------------------------------------------------- */

static void caw_compare(struct scsi_io *io)
{
	size_t len = io->nblocks * io->bs, i;

	for (i = 0; i < len && io->buf[i] == io->data[i]; i++)
		;
	if (i < len) {
		/* SBC-4: INFORMATION = offset of the first byte that differs */
		scsi_check_info(io->cmd, SK_MISCOMPARE, A_MISCOMPARE_VERIFY, i);
		scsi_io_end(io);
		return;
	}
	io->write = true;
	scsi_io_submit(io, BS_OP_WRITE, io->flags, io->lba, io->nblocks,
		       (void *)(io->data + len), io_good_end);
}

static void caw_go(struct scsi_io *io)
{
	scsi_io_submit(io, BS_OP_READ, 0, io->lba, io->nblocks, io->buf,
		       caw_compare);
}

int scsi_compare_and_write(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint64_t lba = get64(cmd->cdb + 2), n = cmd->cdb[13], nblocks;
	uint32_t bs, max = max_xfer(lu);
	struct scsi_io *io;
	int rc;

	if (protect_set(cmd->cdb))
		return scsi_bad_cdb(cmd, 1, 7);
	/*
	 * 0 blocks is nothing to do; with a Data-Out it is a count that did
	 * not fit its byte (256 blocks and more): too long, not nothing
	 */
	if (!n)
		return cmd->dout_len ? scsi_bad_cdb(cmd, 13, -1)
				     : scsi_good(cmd);
	if (n > (max < SCSI_MAX_CAW_BLOCKS ? max : SCSI_MAX_CAW_BLOCKS))
		return scsi_bad_cdb(cmd, 13, -1);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	scsi_lu_geometry(lu, &nblocks, &bs);
	/* the verify and the write data, exactly */
	if (!cmd->dout || (uint64_t)cmd->dout_len != 2 * n * bs)
		return scsi_short_dout(cmd);
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->lba = lba;
	io->nblocks = n;
	io->data = cmd->dout;
	io->flags = cmd->cdb[1] & 0x08 ? BS_REQ_FUA : 0;
	if (scsi_io_buf(io, n * bs))
		return SCSI_ASYNC;
	scsi_gate_enter(io, true, caw_go);
	return SCSI_ASYNC;
}

/* ---- ORWRITE(16) --------------------------------------------------------- */

/* Read, OR the Data-Out in, write back: alone in the gate, like CAW. */
static void orwrite_or(struct scsi_io *io)
{
	size_t len = io->nblocks * io->bs, i;

	for (i = 0; i < len; i++)
		io->buf[i] |= io->data[i];
	io->write = true;
	scsi_io_submit(io, BS_OP_WRITE, io->flags, io->lba, io->nblocks,
		       io->buf, io_good_end);
}

static void orwrite_go(struct scsi_io *io)
{
	scsi_io_submit(io, BS_OP_READ, 0, io->lba, io->nblocks, io->buf,
		       orwrite_or);
}

int scsi_orwrite(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	struct scsi_io *io;
	uint64_t lba, n, nblocks;
	uint32_t bs;
	int rc;

	if (protect_set(cmd->cdb))	/* ORPROTECT */
		return scsi_bad_cdb(cmd, 1, 7);
	scsi_cdb_range(cmd->cdb, &lba, &n);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	if (!n)
		return scsi_good(cmd);
	if (n > max_xfer(lu))
		return scsi_bad_cdb(cmd, 10, -1);
	scsi_lu_geometry(lu, &nblocks, &bs);
	if (!cmd->dout || (uint64_t)cmd->dout_len < n * bs)
		return scsi_short_dout(cmd);
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->lba = lba;
	io->nblocks = n;
	io->data = cmd->dout;
	io->flags = cmd->cdb[1] & 0x08 ? BS_REQ_FUA : 0;
	if (scsi_io_buf(io, n * bs))
		return SCSI_ASYNC;
	scsi_gate_enter(io, true, orwrite_go);
	return SCSI_ASYNC;
}

/* ---- READ DEFECT DATA ---------------------------------------------------- */

int scsi_read_defect_data(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	bool twelve = cmd->cdb[0] == 0xb7;
	uint8_t req = twelve ? cmd->cdb[1] : cmd->cdb[2];
	uint32_t alloc = twelve ? get32(cmd->cdb + 6) : get16(cmd->cdb + 7);
	uint8_t *d = scsi_din(cmd, 8);

	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	/* no medium defects are known: the lists asked for, empty */
	d[1] = req & 0x1f;
	return scsi_din_done(cmd, twelve ? 8 : 4, alloc);
}

/* ---- PRE-FETCH, SYNCHRONIZE CACHE ---------------------------------------- */

int scsi_prefetch(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint64_t lba, n;
	int rc;

	scsi_cdb_range(cmd->cdb, &lba, &n);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	/* no cache of ours to load: GOOD, not CONDITION MET (SBC-4) */
	return scsi_good(cmd);
}

int scsi_sync_cache(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	struct scsi_io *io;
	uint64_t lba, n;
	int rc;

	scsi_cdb_range(cmd->cdb, &lba, &n);
	if ((rc = scsi_check_range(cmd, lu, lba, n)))
		return rc;
	if (lu->readonly)
		return scsi_good(cmd);
	if (!(io = scsi_io_new(cmd, lu)))
		return SCSI_DONE;
	io->write = true;
	scsi_io_submit(io, BS_OP_FLUSH, 0, 0, 0, NULL, io_good_end);
	return SCSI_ASYNC;
}
