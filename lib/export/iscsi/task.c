/* SPDX-License-Identifier: MIT */
/*
 * iSCSI tasks: a SCSI Command with its write data (immediate data,
 * unsolicited Data-Out up to FirstBurstLength, R2T for the rest within
 * MaxBurstLength and MaxOutstandingR2T), execution in the SCSI target
 * core, Data-In up to the initiator's MaxRecvDataSegmentLength with the
 * status in the last PDU, residual counts, the SCSI Response with sense,
 * and task management (abort, LUN and target reset).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bufpool.h>

#include "export/iscsi/internal.h"

static uint32_t new_ttt(struct iscsi_session *s)
{
	if (++s->next_ttt == ISCSI_RSVD_TAG)
		++s->next_ttt;
	return s->next_ttt;
}

static struct iscsi_task *find_task(struct iscsi_session *s, uint32_t itt)
{
	struct iscsi_task *t;

	for (t = s->tasks; t; t = t->next)
		if (t->itt == itt && !t->aborted)
			return t;
	return NULL;
}

static void link_task(struct iscsi_session *s, struct iscsi_task *t)
{
	t->next = s->tasks;
	t->prev = NULL;
	if (s->tasks)
		s->tasks->prev = t;
	s->tasks = t;
	t->linked = true;
	s->ntasks++;
	s->live++;
}

static void unlink_task(struct iscsi_task *t)
{
	struct iscsi_session *s = t->s;

	if (!t->linked)
		return;
	if (t->prev)
		t->prev->next = t->next;
	else
		s->tasks = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->linked = false;
	s->ntasks--;
}

void iscsi_task_put(struct iscsi_task *t)
{
	struct iscsi_session *s = t->s;

	if (--t->refs)
		return;
	unlink_task(t);
	if (t->completed)
		bs_scsi_cmd_release(&t->cmd);
	if (t->buf)
		bs_buf_put(t->buf, t->edtl);
	iscsi_budget_give(s, t->budget);
	s->live--;
	free(t);
}

/* ---- responses ----------------------------------------------------------- */

static uint8_t sam_attr(uint8_t iscsi_attr)
{
	switch (iscsi_attr) {
	case 2:
		return 2;	/* ordered */
	case 3:
		return 1;	/* head of queue */
	case 4:
		return 4;	/* ACA */
	default:
		return 0;	/* untagged, simple */
	}
}

static void scsi_response(struct iscsi_session *s, struct iscsi_task *t,
			  uint8_t status, const uint8_t *sense,
			  uint8_t sense_len, uint8_t res_flags,
			  uint32_t residual, uint32_t data_sn)
{
	uint8_t rsp[ISCSI_BHS_LEN], data[2 + BS_SCSI_SENSE_MAX];

	iscsi_bhs_init(rsp, ISCSI_OP_SCSI_RSP, 0, t->itt);
	rsp[1] |= res_flags;
	rsp[2] = 0;	/* command completed at target */
	rsp[3] = status;
	iscsi_put_sn(s, rsp, true);
	iscsi_put32(rsp + 36, data_sn);
	iscsi_put32(rsp + 44, residual);
	if (sense_len) {
		iscsi_put16(data, sense_len);
		memcpy(data + 2, sense, sense_len);
	}
	if (status != BS_SCSI_GOOD)
		s->stats.errors++;
	iscsi_out_pdu(s, rsp, data, sense_len ? 2u + sense_len : 0, NULL);
}

/* A status without sense and without the core (TASK SET FULL). */
static void status_only(struct iscsi_session *s, uint32_t itt,
			uint8_t status)
{
	struct iscsi_task t = { .itt = itt };

	scsi_response(s, &t, status, NULL, 0, 0, 0, 0);
}

/* CHECK CONDITION without the core (a transfer we cannot take). */
static void check_condition(struct iscsi_session *s, uint32_t itt,
			    uint8_t key, uint8_t asc, uint8_t ascq)
{
	struct iscsi_task t = { .itt = itt };
	uint8_t sense[BS_SCSI_SENSE_MAX];
	uint8_t n = bs_scsi_sense_build(sense, false, key, asc, ascq);

	scsi_response(s, &t, BS_SCSI_CHECK_CONDITION, sense, n, 0, 0, 0);
}

static void respond(struct iscsi_session *s, struct iscsi_task *t)
{
	struct bs_scsi_cmd *c = &t->cmd;
	uint32_t want = t->read ? t->edtl : 0;
	uint32_t send = c->din && c->din_len < want ? c->din_len : want;
	uint32_t off = 0, data_sn = 0, burst = 0, residual = 0;
	uint8_t res = 0;
	bool good = c->status == BS_SCSI_GOOD && !c->sense_len;

	if (!c->din)
		send = 0;
	if (t->res_fixed) {
		res = t->res_flags;
		residual = t->residual;
	} else if (t->read) {
		if (c->din_len < t->edtl) {
			res = ISCSI_RSP_UNDERFLOW;
			residual = t->edtl - c->din_len;
		} else if (c->din_len > t->edtl) {
			res = ISCSI_RSP_OVERFLOW;
			residual = c->din_len - t->edtl;
		}
	} else if (c->din_len) {
		res = ISCSI_RSP_OVERFLOW;
		residual = c->din_len;
	} else if (!t->write && t->edtl) {
		res = ISCSI_RSP_UNDERFLOW;
		residual = t->edtl;
	}
	while (off < send) {
		uint8_t bhs[ISCSI_BHS_LEN];
		uint32_t n = send - off;
		bool last;

		if (n > s->p.max_xmit_dsl)
			n = s->p.max_xmit_dsl;
		if (n > s->p.max_burst - burst)
			n = s->p.max_burst - burst;
		last = off + n == send;
		burst += n;
		iscsi_bhs_init(bhs, ISCSI_OP_DATA_IN, 0, t->itt);
		bhs[1] = 0;
		if (last || burst == s->p.max_burst) {
			bhs[1] |= ISCSI_FLAG_FINAL;
			burst = 0;
		}
		iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
		iscsi_put32(bhs + 36, data_sn++);
		iscsi_put32(bhs + 40, off);
		if (last && good) {
			/* phase collapse: the status rides on the last one */
			bhs[1] |= ISCSI_FLAG_FINAL | ISCSI_DATA_STATUS | res;
			bhs[3] = c->status;
			iscsi_put_sn(s, bhs, true);
			iscsi_put32(bhs + 44, residual);
		} else {
			iscsi_put_sn(s, bhs, false);
			iscsi_put32(bhs + 24, 0);
		}
		iscsi_out_pdu(s, bhs, c->din + off, n, t);
		off += n;
	}
	s->stats.bytes_read += send;
	if (t->write && c->status == BS_SCSI_GOOD)
		s->stats.bytes_written += t->edtl;
	if (send && good)
		return;
	/* ExpDataSN: the R2T and Data-In PDUs sent for the command */
	scsi_response(s, t, c->status, c->sense, c->sense_len, res, residual,
		      data_sn + t->r2t_sn);
}

/*
 * @t goes to the SCSI core (@in) or is back from it: t->executing, with
 * the budget bytes it holds (t->budget). Those wait for the device, not
 * for the initiator, and while all the session holds is in the core the
 * budget's watchdog does not take it for stalled. Bytes outside (Data-In
 * not taken, Data-Out that stops) are the initiator's whatever else is
 * in the core: commands it goes on sending (a TEST UNIT READY) do not
 * keep them alive (budget.h). Per task, not per device request: every
 * step the core runs for one command (a COMPARE AND WRITE's read and
 * write, a WRITE SAME's pieces, an EXTENDED COPY's reads and writes, on
 * whichever LU) is one task in the device until done() comes.
 */
static void task_core(struct iscsi_task *t, bool in)
{
	struct iscsi_session *s = t->s;

	if (t->executing == in)
		return;
	t->executing = in;
	if (!s->budget)
		return;
	if (in) {
		t->dev_bytes = t->budget;
		bs_budget_dev_begin(&s->bh, t->dev_bytes);
	} else {
		bs_budget_dev_end(&s->bh, t->dev_bytes);
	}
}

static void task_done(struct bs_scsi_cmd *cmd)
{
	struct iscsi_task *t = cmd->priv;
	struct iscsi_session *s = t->s;

	/* first: an orphan's session may go with its last task below */
	task_core(t, false);
	t->completed = true;
	if (s->orphan) {
		iscsi_task_put(t);
		if (!s->live)
			iscsi_session_destroy(s);
		return;
	}
	/* held: a response that cannot be queued (no memory) ends the
	 * session, which drops every task, this one included */
	t->refs++;
	if (!t->aborted)
		respond(s, t);
	/* the window opens as the task leaves the list (advertised with the
	 * next PDU: a CmdSN above what the initiator was told stays out) */
	if (t->linked) {
		unlink_task(t);
		iscsi_task_put(t);
	}
	iscsi_task_put(t);
	iscsi_tmf_check(s);
	iscsi_tasks_idle(s);
	iscsi_kick(s);
}

static void exec(struct iscsi_session *s, struct iscsi_task *t)
{
	task_core(t, true);
	t->cmd.dout = t->buf;
	t->cmd.dout_len = t->write ? t->edtl : 0;
	t->cmd.din_max = t->read ? t->edtl : 0;
	s->stats.commands++;
	bs_scsi_exec(&t->cmd);
}

/* ---- SCSI transfer length versus EDTL ------------------------------------ */

/*
 * The transfer length of a READ / WRITE / WRITE AND VERIFY CDB in blocks
 * and whether it writes; false for other opcodes (their residuals come
 * from the data the core produced).
 */
static bool rw_blocks(const uint8_t *cdb, uint64_t *blocks, bool *write)
{
	switch (cdb[0]) {
	case 0x08: /* READ(6) */
	case 0x0a: /* WRITE(6) */
		*blocks = cdb[4] ? cdb[4] : 256;
		*write = cdb[0] == 0x0a;
		return true;
	case 0x28: /* READ(10) */
	case 0x2a: /* WRITE(10) */
	case 0x2e: /* WRITE AND VERIFY(10) */
		*blocks = iscsi_get16(cdb + 7);
		*write = cdb[0] != 0x28;
		return true;
	case 0xa8: /* READ(12) */
	case 0xaa: /* WRITE(12) */
	case 0xae: /* WRITE AND VERIFY(12) */
		*blocks = iscsi_get32(cdb + 6);
		*write = cdb[0] != 0xa8;
		return true;
	case 0x88: /* READ(16) */
	case 0x8a: /* WRITE(16) */
	case 0x8e: /* WRITE AND VERIFY(16) */
		*blocks = iscsi_get32(cdb + 10);
		*write = cdb[0] != 0x88;
		return true;
	default:
		return false;
	}
}

/* Write @blocks into the transfer length field (fewer than before). */
static void rw_set_blocks(uint8_t *cdb, uint32_t blocks)
{
	switch (cdb[0]) {
	case 0x08:
	case 0x0a:
		cdb[4] = (uint8_t)blocks;
		break;
	case 0x28:
	case 0x2a:
	case 0x2e:
		iscsi_put16(cdb + 7, (uint16_t)blocks);
		break;
	case 0xa8:
	case 0xaa:
	case 0xae:
		iscsi_put32(cdb + 6, blocks);
		break;
	default:
		iscsi_put32(cdb + 10, blocks);
		break;
	}
}

/*
 * RFC 7143 11.4.5.1: when the SCSI transfer length and the Expected Data
 * Transfer Length differ, the target moves at most EDTL bytes and reports
 * the difference as a residual overflow or underflow. A write whose EDTL
 * is short is cut to the whole blocks EDTL holds; a read is cut by the
 * Data-In length (din_max).
 */
static void rw_residual(struct iscsi_task *t, uint32_t bs)
{
	uint64_t blocks, tl;
	bool wr;

	if (!bs || !rw_blocks(t->cmd.cdb, &blocks, &wr) || wr != t->write ||
	    (!wr && !t->read))
		return;
	tl = blocks * bs;
	t->res_fixed = true;
	if (tl > t->edtl) {
		t->res_flags = ISCSI_RSP_OVERFLOW;
		t->residual = (uint32_t)(tl - t->edtl > UINT32_MAX ?
					 UINT32_MAX : tl - t->edtl);
		if (wr && (!(t->cmd.cdb[0] == 0x0a) || t->edtl / bs))
			rw_set_blocks(t->cmd.cdb, t->edtl / bs);
	} else if (tl < t->edtl) {
		t->res_flags = ISCSI_RSP_UNDERFLOW;
		t->residual = (uint32_t)(t->edtl - tl);
	}
}

/*
 * What a command holds in memory, charged to the budget: its EDTL, or,
 * for a READ whose CDB asks for more (or that has no R flag, EDTL then
 * counting for nothing), what the core reads for it; the initiator gets
 * at most EDTL of that, the rest as a residual. Past ISCSI_MAX_TRANSFER
 * the core refuses the CDB.
 */
static uint32_t budget_bytes(const uint8_t *cdb, uint32_t bs, uint32_t edtl,
			     bool rd, bool wr)
{
	uint64_t blocks, n = rd || wr ? edtl : 0;
	bool w;

	if (bs && rw_blocks(cdb, &blocks, &w) && !w && blocks * bs > n)
		n = blocks * bs > ISCSI_MAX_TRANSFER ? ISCSI_MAX_TRANSFER
						      : blocks * bs;
	return (uint32_t)n;
}

/* The logical block size of @lun for a READ / WRITE CDB, else 0 (asked
 * once per command: the budget and the residual both need it). */
static uint32_t rw_block_size(struct iscsi_session *s, const uint8_t *cdb,
			      uint64_t lun)
{
	uint64_t blocks;
	bool w;

	if (!rw_blocks(cdb, &blocks, &w) || !s->ops || !s->ops->block_size)
		return 0;
	return s->ops->block_size(s->arg, &s->tgt, lun);
}

/* ---- R2T ----------------------------------------------------------------- */

/*
 * Ask for [@off, @off + @len) in one R2T; false when no slot is free, or
 * when the R2T could not be queued: the session ended then, and @t may
 * be gone with its tasks.
 */
static bool send_r2t(struct iscsi_session *s, struct iscsi_task *t,
		     uint32_t off, uint32_t len)
{
	uint8_t bhs[ISCSI_BHS_LEN];
	struct iscsi_r2t *r = NULL;
	unsigned i;

	for (i = 0; i < ISCSI_R2T_MAX && !r; i++)
		if (!t->r2t[i].used)
			r = &t->r2t[i];
	if (!r)
		return false;
	memset(r, 0, sizeof(*r));
	r->used = true;
	r->ttt = new_ttt(s);
	r->off = off;
	r->len = len;
	t->r2t_out++;
	iscsi_bhs_init(bhs, ISCSI_OP_R2T, 0, t->itt);
	memcpy(bhs + 8, t->lun_raw, 8);
	iscsi_put32(bhs + 20, r->ttt);
	iscsi_put_sn(s, bhs, false);
	iscsi_put32(bhs + 36, t->r2t_sn++);
	iscsi_put32(bhs + 40, r->off);
	iscsi_put32(bhs + 44, r->len);
	return iscsi_out_pdu(s, bhs, NULL, 0, NULL) == 0;
}

static void send_r2ts(struct iscsi_session *s, struct iscsi_task *t)
{
	unsigned max = s->p.max_outstanding_r2t;

	if (max > ISCSI_R2T_MAX)
		max = ISCSI_R2T_MAX;
	while (t->r2t_out < max && t->r2t_next < t->edtl) {
		uint32_t len = t->edtl - t->r2t_next;

		if (len > s->p.max_burst)
			len = s->p.max_burst;
		if (!send_r2t(s, t, t->r2t_next, len))
			return;
		t->r2t_next += len;
	}
}

/* ---- SCSI Command -------------------------------------------------------- */

bool iscsi_task_command(struct iscsi_session *s, const uint8_t *ahs,
			const uint8_t *data, uint32_t dsl)
{
	const uint8_t *bhs = s->bhs;
	uint8_t flags = bhs[1];
	uint32_t itt = iscsi_itt(bhs), edtl = iscsi_get32(bhs + 20);
	bool rd = flags & ISCSI_CMD_READ, wr = flags & ISCSI_CMD_WRITE;
	struct iscsi_task *t;
	uint8_t cdb[BS_SCSI_CDB_MAX], lun_raw[8];
	uint32_t imm, charge, bs;
	uint64_t lun;
	bool bidi;
	int n;

	if (find_task(s, itt)) {
		iscsi_reject(s, bhs, ISCSI_REJECT_TASK_IN_PROGRESS);
		return true;
	}
	if (s->ntasks >= iscsi_depth(s) + ISCSI_IMMEDIATE_EXTRA) {
		/* immediate commands past the window: the task set is full
		 * (its data, if any, is dropped with the PDU) */
		status_only(s, itt, BS_SCSI_TASK_SET_FULL);
		return true;
	}
	n = iscsi_pdu_cdb(bhs, ahs, iscsi_ahs_len(bhs), cdb, sizeof(cdb),
			  &bidi);
	if (n < 0) {
		iscsi_reject(s, bhs, ISCSI_REJECT_INVALID_FIELD);
		return true;
	}
	if (dsl && (!wr || !s->p.immediate_data || dsl > s->p.first_burst)) {
		/* data the negotiation does not allow with the command */
		iscsi_reject(s, bhs, ISCSI_REJECT_PROTOCOL);
		return true;
	}
	if ((rd && wr) || bidi) {
		/* bidirectional commands: none served */
		check_condition(s, itt, 0x05, 0x24, 0x00);
		return true;
	}
	if ((rd || wr) && edtl > ISCSI_MAX_TRANSFER) {
		/* INVALID FIELD IN CDB: over the largest transfer served
		 * (the unsolicited data of a write is dropped on arrival) */
		check_condition(s, itt, 0x05, 0x24, 0x00);
		return true;
	}
	memcpy(lun_raw, bhs + 8, 8);
	lun = bs_scsi_lun_decode(lun_raw);
	bs = rw_block_size(s, cdb, lun);
	charge = budget_bytes(cdb, bs, edtl, rd, wr);
	if (!iscsi_budget_take(s, charge))
		return false;	/* held until the budget has room */

	t = calloc(1, sizeof(*t));
	if (!t) {
		iscsi_budget_give(s, charge);
		iscsi_end(s, "out of memory for a task");
		return true;
	}
	t->s = s;
	t->refs = 1;
	t->itt = itt;
	t->cmd_sn = iscsi_get32(bhs + 24);
	t->edtl = edtl;
	t->read = rd;
	t->write = wr;
	t->immediate = iscsi_immediate(bhs);
	t->budget = charge;
	memcpy(t->lun_raw, lun_raw, 8);
	t->cmd.nexus = s->nexus;
	t->cmd.lun = lun;
	memcpy(t->cmd.cdb, cdb, (size_t)n);
	t->cmd.cdb_len = (uint8_t)n;
	t->cmd.task_attr = sam_attr(flags & ISCSI_CMD_ATTR_MASK);
	t->cmd.tag = itt;
	t->cmd.done = task_done;
	t->cmd.priv = t;
	link_task(s, t);
	rw_residual(t, bs);

	if (!wr || !edtl) {
		if (wr)
			t->write = false;
		exec(s, t);
		return true;
	}
	t->buf = bs_buf_get(edtl);
	if (!t->buf) {
		iscsi_end(s, "out of memory for %u bytes of write data", edtl);
		return true;
	}
	imm = dsl < edtl ? dsl : edtl;
	memcpy(t->buf, data, imm);
	t->received = imm;
	t->unsol_next = imm;
	t->unsol_end = imm;
	if (!s->p.initial_r2t) {
		uint32_t fb = s->p.first_burst < edtl ? s->p.first_burst : edtl;

		/* the F bit of the command says whether Data-Out follows */
		if (!(flags & ISCSI_FLAG_FINAL) && fb > imm)
			t->unsol_end = fb;
	}
	t->r2t_next = t->unsol_end;
	if (t->received == edtl) {
		exec(s, t);
		return true;
	}
	/* waits for Data-Out: another session's reset aborts it meanwhile */
	bs_scsi_cmd_arrived(&t->cmd);
	send_r2ts(s, t);
	return true;
}

/* ---- Data-Out ------------------------------------------------------------ */

/*
 * Check the Data-Out in s->bhs against its task: 0 (*@tp, *@rp set; @rp
 * NULL for unsolicited data), a Reject reason, or -1 to drop it silently.
 * No state changes here (the zero-copy path asks before the data comes).
 */
static int data_out_check(struct iscsi_session *s, uint32_t dsl,
			  struct iscsi_task **tp, struct iscsi_r2t **rp)
{
	const uint8_t *bhs = s->bhs;
	uint32_t ttt = iscsi_get32(bhs + 20);
	uint32_t data_sn = iscsi_get32(bhs + 36), off = iscsi_get32(bhs + 40);
	struct iscsi_task *t = find_task(s, iscsi_itt(bhs));
	struct iscsi_r2t *r = NULL;
	unsigned i;

	if (!t || !t->write || t->executing || t->completed)
		/* unsolicited data of a command already answered: dropped */
		return ttt != ISCSI_RSVD_TAG ? ISCSI_REJECT_INVALID_FIELD : -1;
	if ((uint64_t)off + dsl > t->edtl)
		return ISCSI_REJECT_INVALID_FIELD;
	if (ttt == ISCSI_RSVD_TAG) {
		if ((uint64_t)off + dsl > t->unsol_end ||
		    data_sn != t->unsol_data_sn ||
		    off != t->unsol_next)
			return ISCSI_REJECT_PROTOCOL;
	} else {
		for (i = 0; i < ISCSI_R2T_MAX && !r; i++)
			if (t->r2t[i].used && t->r2t[i].ttt == ttt)
				r = &t->r2t[i];
		if (!r)
			return ISCSI_REJECT_INVALID_FIELD;
		if (off < r->off ||
		    (uint64_t)off + dsl > (uint64_t)r->off + r->len ||
		    data_sn != r->data_sn ||
		    off != r->off + r->got)
			return ISCSI_REJECT_PROTOCOL;
	}
	*tp = t;
	*rp = r;
	return 0;
}

uint8_t *iscsi_task_data_out_dst(struct iscsi_session *s, uint32_t dsl)
{
	struct iscsi_task *t;
	struct iscsi_r2t *r;

	if (data_out_check(s, dsl, &t, &r))
		return NULL;
	return t->buf + iscsi_get32(s->bhs + 40);
}

void iscsi_task_data_out(struct iscsi_session *s, const uint8_t *data,
			 uint32_t dsl)
{
	const uint8_t *bhs = s->bhs;
	uint32_t off = iscsi_get32(bhs + 40);
	bool final = bhs[1] & ISCSI_FLAG_FINAL;
	struct iscsi_task *t = NULL;
	struct iscsi_r2t *r = NULL;
	int rc = data_out_check(s, dsl, &t, &r);

	if (rc) {
		if (rc > 0)
			iscsi_reject(s, bhs, (uint8_t)rc);
		return;
	}
	if (!r) {
		t->unsol_data_sn++;
		t->unsol_next = off + dsl;
		if (final && t->unsol_next < t->unsol_end) {
			/* unsolicited data ended short: solicit the gap */
			uint32_t gap = t->unsol_end - t->unsol_next;

			t->unsol_end = t->unsol_next;
			if (!send_r2t(s, t, t->unsol_next, gap)) {
				iscsi_end(s, "no R2T slot for the rest of a "
					  "short unsolicited burst");
				return;
			}
		}
	} else {
		r->data_sn++;
		r->got += dsl;
	}
	/* zero-copy: the data may already be in place */
	if (data != t->buf + off)
		memcpy(t->buf + off, data, dsl);
	t->received += dsl;
	if (s->budget)
		bs_budget_progress(&s->bh);
	if (r && (r->got >= r->len || final)) {
		if (r->got < r->len) {
			iscsi_end(s, "Data-Out sequence for TTT 0x%08x ended "
				  "at %u of %u bytes", r->ttt, r->got, r->len);
			return;
		}
		r->used = false;
		t->r2t_out--;
	}
	if (t->received >= t->edtl && !t->r2t_out &&
	    t->r2t_next >= t->edtl) {
		exec(s, t);
		return;
	}
	if (r)
		send_r2ts(s, t);
}

/* ---- task management ----------------------------------------------------- */

static void abort_task(struct iscsi_task *t)
{
	if (t->executing) {
		t->aborted = true;	/* its answer is dropped in done() */
		return;
	}
	t->aborted = true;
	unlink_task(t);
	iscsi_task_put(t);
}

static bool tmf_waiting(struct iscsi_session *s)
{
	struct iscsi_task *t;

	for (t = s->tasks; t; t = t->next)
		if (t->aborted && t->executing)
			return true;
	return false;
}

void iscsi_tmf_check(struct iscsi_session *s)
{
	struct iscsi_tmf *m = &s->tmf;
	uint8_t rsp[ISCSI_BHS_LEN];

	if (!m->pending || m->core_wait || tmf_waiting(s))
		return;
	iscsi_bhs_init(rsp, ISCSI_OP_TMF_RSP, 0, m->itt);
	rsp[2] = m->response;
	iscsi_put_sn(s, rsp, true);
	iscsi_out_pdu(s, rsp, NULL, 0, NULL);
	m->pending = false;
	iscsi_log(s, "task management function %u: response %u",
		  m->function, m->response);
	/* RFC 7143 11.5.1: after a cold reset the connection closes (the
	 * response goes out first) */
	if (m->function == ISCSI_TMF_TARGET_COLD_RESET &&
	    m->response == ISCSI_TMF_RSP_COMPLETE)
		iscsi_end(s, "target cold reset");
	iscsi_kick(s);
}

/* The core's task set has no aborted task left (on the session's loop). */
static void tmf_core_done(void *arg)
{
	struct iscsi_session *s = arg;

	s->tmf.core_wait = false;
	s->live--;	/* held while the core waited */
	if (s->orphan) {
		if (!s->live)
			iscsi_session_destroy(s);
		return;
	}
	iscsi_tmf_check(s);
	iscsi_tasks_idle(s);
	iscsi_kick(s);
}

/*
 * The part of a TMF that reaches the other sessions: the LU's task set in
 * the core (every I_T nexus's tasks there end with TASK ABORTED), the
 * unit attentions, and the wait for those tasks to end.
 */
static void tmf_core(struct iscsi_session *s)
{
	struct iscsi_tmf *m = &s->tmf;
	struct bs_scsi_tgt *tgt = s->st.scsi;
	int rc;

	switch (m->function) {
	case ISCSI_TMF_LUN_RESET:
		rc = bs_scsi_lu_reset_wait(tgt, m->lun, s->nexus,
					   tmf_core_done, s);
		break;
	case ISCSI_TMF_CLEAR_TASK_SET:
		rc = bs_scsi_clear_task_set_wait(tgt, m->lun, s->nexus,
						 tmf_core_done, s);
		break;
	case ISCSI_TMF_TARGET_WARM_RESET:
	case ISCSI_TMF_TARGET_COLD_RESET:
		rc = bs_scsi_tgt_reset_wait(tgt, s->nexus, tmf_core_done, s);
		break;
	default:
		return;
	}
	if (rc == -ENODEV) {
		m->response = ISCSI_TMF_RSP_NO_LUN;
	} else if (rc == -ENOMEM) {
		m->response = ISCSI_TMF_RSP_REJECTED;
	} else if (rc == 1) {
		m->core_wait = true;
		s->live++;
	}
}

void iscsi_task_tmf(struct iscsi_session *s)
{
	const uint8_t *bhs = s->bhs;
	struct iscsi_tmf *m = &s->tmf;
	struct iscsi_task *t, *next;
	uint32_t ref_itt = iscsi_get32(bhs + 20);
	uint32_t ref_sn = iscsi_get32(bhs + 32);

	memset(m, 0, sizeof(*m));
	m->pending = true;
	m->itt = iscsi_itt(bhs);
	m->function = bhs[1] & 0x7f;
	m->lun = bs_scsi_lun_decode(bhs + 8);
	m->response = ISCSI_TMF_RSP_COMPLETE;
	switch (m->function) {
	case ISCSI_TMF_ABORT_TASK:
		t = find_task(s, ref_itt);
		if (t)
			abort_task(t);
		else if (!iscsi_sn_le(s->exp_cmd_sn, ref_sn))
			/* received before and answered: nothing to abort */
			m->response = ISCSI_TMF_RSP_NO_TASK;
		break;
	case ISCSI_TMF_ABORT_TASK_SET:
	case ISCSI_TMF_CLEAR_TASK_SET:
	case ISCSI_TMF_LUN_RESET:
		for (t = s->tasks; t; t = next) {
			next = t->next;
			if (!t->aborted && t->cmd.lun == m->lun)
				abort_task(t);
		}
		break;
	case ISCSI_TMF_TARGET_WARM_RESET:
	case ISCSI_TMF_TARGET_COLD_RESET:
		for (t = s->tasks; t; t = next) {
			next = t->next;
			if (!t->aborted)
				abort_task(t);
		}
		break;
	case ISCSI_TMF_TASK_REASSIGN:
		/* ErrorRecoveryLevel 0: no allegiance to reassign */
		m->response = ISCSI_TMF_RSP_NO_REASSIGN;
		break;
	default:
		m->response = ISCSI_TMF_RSP_NOT_SUPPORTED;
		break;
	}
	if (m->response == ISCSI_TMF_RSP_COMPLETE)
		tmf_core(s);
	iscsi_tmf_check(s);
}

void iscsi_tasks_drop(struct iscsi_session *s)
{
	struct iscsi_task *t, *next;

	for (t = s->tasks; t; t = next) {
		next = t->next;
		if (!t->aborted)
			abort_task(t);
	}
}
