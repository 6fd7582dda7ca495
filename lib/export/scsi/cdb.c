/* SPDX-License-Identifier: MIT */
/*
 * The CDB decoder and dispatch table, and the commands that are answered
 * from the table or the target's state alone: REPORT SUPPORTED OPERATION
 * CODES (from the same table), TEST UNIT READY, REPORT LUNS, REQUEST
 * SENSE, START STOP UNIT, PREVENT ALLOW MEDIUM REMOVAL.
 *
 * Order of checks (SAM-5 / SPC-4): LUN, then a pending unit attention
 * (except INQUIRY, REPORT LUNS, REQUEST SENSE), then the operation code
 * and CDB, then reservations, then the command's own checks.
 */
#include <errno.h>
#include <string.h>

#include <blkstack/bufpool.h>

#include "export/scsi/internal.h"

static int tur(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
static int report_luns(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
static int request_sense(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
static int start_stop(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
static int prevent_allow(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
static int rsoc(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);

#define NOLU_NOUA (F_NO_LU | F_NO_UA | F_RES2_OK)

/*
 * CDB usage data (SPC-4 REPORT SUPPORTED OPERATION CODES): a bit set for
 * every CDB bit the command examines; the operation code and service
 * action as themselves; the control byte 0 (no NACA, no LINK).
 */
#define USAGE(...) ((const uint8_t[]){ __VA_ARGS__ })
/* READ/WRITE-like CDBs: byte 1 flags, LBA, group number, length */
#define RW10(op, b1) op, b1, 0xff, 0xff, 0xff, 0xff, 0x3f, 0xff, 0xff, 0
#define RW12(op, b1) op, b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, \
	0x3f, 0
#define RW16(op, b1) op, b1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, \
	0xff, 0xff, 0xff, 0xff, 0x3f, 0

static const struct scsi_op ops[] = {
	{ 0x00, -1, 6, 0, RC_ALLOW, "TEST UNIT READY",
	  tur, USAGE(0x00, 0, 0, 0, 0, 0) },
	{ 0x03, -1, 6, NOLU_NOUA, RC_ALLOW, "REQUEST SENSE",
	  request_sense, USAGE(0x03, 0x01, 0, 0, 0xff, 0) },
	{ 0x08, -1, 6, 0, RC_READ, "READ(6)",
	  scsi_read, USAGE(0x08, 0x1f, 0xff, 0xff, 0xff, 0) },
	{ 0x0a, -1, 6, F_WRITE, RC_WRITE, "WRITE(6)",
	  scsi_write, USAGE(0x0a, 0x1f, 0xff, 0xff, 0xff, 0) },
	{ 0x12, -1, 6, NOLU_NOUA, RC_ALLOW, "INQUIRY",
	  scsi_inquiry, USAGE(0x12, 0x01, 0xff, 0xff, 0xff, 0) },
	{ 0x15, -1, 6, 0, RC_WRITE, "MODE SELECT(6)",
	  scsi_mode_select, USAGE(0x15, 0x11, 0, 0, 0xff, 0) },
	{ 0x16, -1, 6, 0, RC_WRITE, "RESERVE(6)",
	  scsi_reserve, USAGE(0x16, 0, 0, 0, 0, 0) },
	{ 0x17, -1, 6, F_RES2_OK, RC_WRITE, "RELEASE(6)",
	  scsi_release, USAGE(0x17, 0, 0, 0, 0, 0) },
	{ 0x1a, -1, 6, 0, RC_READ, "MODE SENSE(6)",
	  scsi_mode_sense, USAGE(0x1a, 0x08, 0xff, 0xff, 0xff, 0) },
	{ 0x1b, -1, 6, 0, RC_WRITE, "START STOP UNIT",
	  start_stop, USAGE(0x1b, 0x01, 0, 0x0f, 0xf7, 0) },
	{ 0x1e, -1, 6, 0, RC_READ, "PREVENT ALLOW MEDIUM REMOVAL",
	  prevent_allow, USAGE(0x1e, 0, 0, 0, 0x03, 0) },
	{ 0x25, -1, 10, F_RES2_OK, RC_ALLOW, "READ CAPACITY(10)",
	  scsi_read_capacity10, USAGE(0x25, 0, 0xff, 0xff, 0xff, 0xff, 0, 0,
		0x01, 0) },
	{ 0x28, -1, 10, 0, RC_READ, "READ(10)",
	  scsi_read, USAGE(RW10(0x28, 0xfa)) },
	{ 0x2a, -1, 10, F_WRITE, RC_WRITE, "WRITE(10)",
	  scsi_write, USAGE(RW10(0x2a, 0xfa)) },
	{ 0x2e, -1, 10, F_WRITE, RC_WRITE, "WRITE AND VERIFY(10)",
	  scsi_write, USAGE(RW10(0x2e, 0xf6)) },
	{ 0x2f, -1, 10, 0, RC_READ, "VERIFY(10)",
	  scsi_verify, USAGE(RW10(0x2f, 0xf6)) },
	{ 0x34, -1, 10, 0, RC_READ, "PRE-FETCH(10)",
	  scsi_prefetch, USAGE(RW10(0x34, 0x02)) },
	{ 0x35, -1, 10, 0, RC_WRITE, "SYNCHRONIZE CACHE(10)",
	  scsi_sync_cache, USAGE(RW10(0x35, 0x02)) },
	{ 0x37, -1, 10, 0, RC_READ, "READ DEFECT DATA(10)",
	  scsi_read_defect_data, USAGE(0x37, 0, 0x1f, 0, 0, 0, 0, 0xff, 0xff,
		0) },
	{ 0x41, -1, 10, F_WRITE, RC_WRITE, "WRITE SAME(10)",
	  scsi_write_same, USAGE(RW10(0x41, 0xf8)) },
	{ 0x42, -1, 10, F_WRITE, RC_WRITE, "UNMAP",
	  scsi_unmap, USAGE(0x42, 0x01, 0, 0, 0, 0, 0x3f, 0xff, 0xff, 0) },
	{ 0x55, -1, 10, 0, RC_WRITE, "MODE SELECT(10)",
	  scsi_mode_select, USAGE(0x55, 0x11, 0, 0, 0, 0, 0, 0xff, 0xff, 0) },
	{ 0x56, -1, 10, 0, RC_WRITE, "RESERVE(10)",
	  scsi_reserve, USAGE(0x56, 0x12, 0, 0, 0, 0, 0, 0, 0, 0) },
	{ 0x57, -1, 10, F_RES2_OK, RC_WRITE, "RELEASE(10)",
	  scsi_release, USAGE(0x57, 0, 0, 0, 0, 0, 0, 0, 0, 0) },
	{ 0x5a, -1, 10, 0, RC_READ, "MODE SENSE(10)",
	  scsi_mode_sense, USAGE(0x5a, 0x18, 0xff, 0xff, 0, 0, 0, 0xff, 0xff,
		0) },
	{ 0x5e, 0x00, 10, 0, RC_ALLOW, "PERSISTENT RESERVE IN (READ KEYS)",
	  scsi_pr_in, USAGE(0x5e, 0x00, 0, 0, 0, 0, 0, 0xff, 0xff, 0) },
	{ 0x5e, 0x01, 10, 0, RC_ALLOW,
	  "PERSISTENT RESERVE IN (READ RESERVATION)",
	  scsi_pr_in, USAGE(0x5e, 0x01, 0, 0, 0, 0, 0, 0xff, 0xff, 0) },
	{ 0x5e, 0x02, 10, 0, RC_ALLOW,
	  "PERSISTENT RESERVE IN (REPORT CAPABILITIES)",
	  scsi_pr_in, USAGE(0x5e, 0x02, 0, 0, 0, 0, 0, 0xff, 0xff, 0) },
	{ 0x5e, 0x03, 10, 0, RC_ALLOW,
	  "PERSISTENT RESERVE IN (READ FULL STATUS)",
	  scsi_pr_in, USAGE(0x5e, 0x03, 0, 0, 0, 0, 0, 0xff, 0xff, 0) },
	{ 0x5f, 0x00, 10, 0, RC_ALLOW, "PERSISTENT RESERVE OUT (REGISTER)",
	  scsi_pr_out, USAGE(0x5f, 0x00, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0) },
	{ 0x5f, 0x01, 10, 0, RC_ALLOW, "PERSISTENT RESERVE OUT (RESERVE)",
	  scsi_pr_out, USAGE(0x5f, 0x01, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0) },
	{ 0x5f, 0x02, 10, 0, RC_ALLOW, "PERSISTENT RESERVE OUT (RELEASE)",
	  scsi_pr_out, USAGE(0x5f, 0x02, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0) },
	{ 0x5f, 0x03, 10, 0, RC_ALLOW, "PERSISTENT RESERVE OUT (CLEAR)",
	  scsi_pr_out, USAGE(0x5f, 0x03, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0) },
	{ 0x5f, 0x04, 10, 0, RC_ALLOW, "PERSISTENT RESERVE OUT (PREEMPT)",
	  scsi_pr_out, USAGE(0x5f, 0x04, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0) },
	{ 0x5f, 0x05, 10, 0, RC_ALLOW,
	  "PERSISTENT RESERVE OUT (PREEMPT AND ABORT)",
	  scsi_pr_out, USAGE(0x5f, 0x05, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0) },
	{ 0x5f, 0x06, 10, 0, RC_ALLOW,
	  "PERSISTENT RESERVE OUT (REGISTER AND IGNORE EXISTING KEY)",
	  scsi_pr_out, USAGE(0x5f, 0x06, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff,
		0) },
	{ 0x83, 0x00, 16, F_WRITE, RC_WRITE, "EXTENDED COPY(LID1)",
	  scsi_extended_copy, USAGE(0x83, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
		0xff, 0xff, 0xff, 0, 0) },
	{ 0x84, 0x00, 16, 0, RC_ALLOW, "RECEIVE COPY RESULTS (COPY STATUS)",
	  scsi_receive_copy_results, USAGE(0x84, 0x00, 0xff, 0, 0, 0, 0, 0, 0,
		0, 0xff, 0xff, 0xff, 0xff, 0, 0) },
	{ 0x84, 0x03, 16, 0, RC_ALLOW,
	  "RECEIVE COPY RESULTS (OPERATING PARAMETERS)",
	  scsi_receive_copy_results, USAGE(0x84, 0x03, 0xff, 0, 0, 0, 0, 0, 0,
		0, 0xff, 0xff, 0xff, 0xff, 0, 0) },
	{ 0x88, -1, 16, 0, RC_READ, "READ(16)",
	  scsi_read, USAGE(RW16(0x88, 0xfa)) },
	{ 0x89, -1, 16, F_WRITE, RC_WRITE, "COMPARE AND WRITE",
	  scsi_compare_and_write, USAGE(0x89, 0xfa, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0xff, 0x3f, 0) },
	{ 0x8a, -1, 16, F_WRITE, RC_WRITE, "WRITE(16)",
	  scsi_write, USAGE(RW16(0x8a, 0xfa)) },
	{ 0x8b, -1, 16, F_WRITE, RC_WRITE, "ORWRITE(16)",
	  scsi_orwrite, USAGE(RW16(0x8b, 0xfa)) },
	{ 0x8e, -1, 16, F_WRITE, RC_WRITE, "WRITE AND VERIFY(16)",
	  scsi_write, USAGE(RW16(0x8e, 0xf6)) },
	{ 0x8f, -1, 16, 0, RC_READ, "VERIFY(16)",
	  scsi_verify, USAGE(RW16(0x8f, 0xf6)) },
	{ 0x90, -1, 16, 0, RC_READ, "PRE-FETCH(16)",
	  scsi_prefetch, USAGE(RW16(0x90, 0x02)) },
	{ 0x91, -1, 16, 0, RC_WRITE, "SYNCHRONIZE CACHE(16)",
	  scsi_sync_cache, USAGE(RW16(0x91, 0x02)) },
	{ 0x93, -1, 16, F_WRITE, RC_WRITE, "WRITE SAME(16)",
	  scsi_write_same, USAGE(RW16(0x93, 0xf9)) },
	{ 0x9e, 0x10, 16, F_RES2_OK, RC_ALLOW, "READ CAPACITY(16)",
	  scsi_read_capacity16, USAGE(0x9e, 0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
		0xff, 0xff, 0xff, 0, 0) },
	{ 0x9e, 0x12, 16, 0, RC_READ, "GET LBA STATUS",
	  scsi_get_lba_status, USAGE(0x9e, 0x12, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0) },
	{ 0xa0, -1, 12, NOLU_NOUA, RC_ALLOW, "REPORT LUNS",
	  report_luns, USAGE(0xa0, 0, 0xff, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0,
		0) },
	{ 0xa3, 0x0c, 12, F_RES2_OK, RC_ALLOW,
	  "REPORT SUPPORTED OPERATION CODES",
	  rsoc, USAGE(0xa3, 0x0c, 0x87, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0, 0) },
	{ 0xa8, -1, 12, 0, RC_READ, "READ(12)",
	  scsi_read, USAGE(RW12(0xa8, 0xfa)) },
	{ 0xaa, -1, 12, F_WRITE, RC_WRITE, "WRITE(12)",
	  scsi_write, USAGE(RW12(0xaa, 0xfa)) },
	{ 0xae, -1, 12, F_WRITE, RC_WRITE, "WRITE AND VERIFY(12)",
	  scsi_write, USAGE(RW12(0xae, 0xf6)) },
	{ 0xaf, -1, 12, 0, RC_READ, "VERIFY(12)",
	  scsi_verify, USAGE(RW12(0xaf, 0xf6)) },
	{ 0xb7, -1, 12, 0, RC_READ, "READ DEFECT DATA(12)",
	  scsi_read_defect_data, USAGE(0xb7, 0x1f, 0, 0, 0, 0, 0xff, 0xff, 0xff,
		0xff, 0, 0) },
};

#define NOPS (sizeof(ops) / sizeof(ops[0]))

/* Operation codes whose CDB byte 1 carries a service action. */
static bool has_sa(uint8_t opcode)
{
	return opcode == 0x5e || opcode == 0x5f || opcode == 0x83 ||
	       opcode == 0x84 || opcode == 0x9e || opcode == 0xa3;
}

const struct scsi_op *scsi_op_find(uint8_t opcode, int sa)
{
	unsigned i;

	for (i = 0; i < NOPS; i++)
		if (ops[i].opcode == opcode &&
		    (ops[i].sa < 0 || ops[i].sa == sa))
			return &ops[i];
	return NULL;
}

const struct scsi_op *scsi_op_at(unsigned i)
{
	return i < NOPS ? &ops[i] : NULL;
}

static bool opcode_known(uint8_t opcode)
{
	unsigned i;

	for (i = 0; i < NOPS; i++)
		if (ops[i].opcode == opcode)
			return true;
	return false;
}

/* ---- completion ---------------------------------------------------------- */

_Static_assert(sizeof(struct scsi_core) <= sizeof(((struct bs_scsi_cmd *)0)->core),
	       "struct scsi_core outgrew bs_scsi_cmd.core");

static void finish_work(void *arg)
{
	struct bs_scsi_cmd *cmd = arg;
	struct scsi_tmf_wait *ready = scsi_set_remove(cmd);

	cmd->done(cmd);
	scsi_waits_run(ready);
}

void scsi_finish(struct bs_scsi_cmd *cmd)
{
	struct scsi_core *c = scsi_core(cmd);
	struct bs_loop *loop = bs_loop_current();

	c->work.fn = finish_work;
	c->work.arg = cmd;
	c->work.next = NULL;
	if (loop)
		bs_loop_defer(loop, &c->work);
	else
		/* no loop on this thread: nothing to defer to */
		finish_work(cmd);
}

uint8_t *scsi_din(struct bs_scsi_cmd *cmd, uint32_t len)
{
	struct scsi_core *c = scsi_core(cmd);

	if (cmd->din)
		bs_buf_put(cmd->din, c->din_cap);
	cmd->din = NULL;
	c->din_cap = 0;
	cmd->din = bs_buf_get(len ? len : 1);
	if (!cmd->din)
		return NULL;
	c->din_cap = len ? len : 1;
	memset(cmd->din, 0, c->din_cap);
	return cmd->din;
}

int scsi_din_done(struct bs_scsi_cmd *cmd, uint32_t len, uint32_t alloc)
{
	cmd->din_len = len < alloc ? len : alloc;
	if (cmd->din_len > cmd->din_max)
		cmd->din_len = cmd->din_max;
	return scsi_good(cmd);
}

void bs_scsi_cmd_release(struct bs_scsi_cmd *cmd)
{
	struct scsi_core *c = scsi_core(cmd);

	if (cmd->din)
		bs_buf_put(cmd->din, c->din_cap);
	cmd->din = NULL;
	cmd->din_len = 0;
	c->din_cap = 0;
}

/* ---- the decoder --------------------------------------------------------- */

/* CDB length by group code (SPC-4 4.2.5.1); 0 = variable / vendor. */
static unsigned group_len(uint8_t opcode)
{
	static const uint8_t len[8] = { 6, 10, 10, 0, 16, 12, 0, 0 };

	return len[opcode >> 5];
}

void bs_scsi_exec(struct bs_scsi_cmd *cmd)
{
	struct scsi_core *c = scsi_core(cmd);
	struct bs_scsi_nexus *n = cmd->nexus;
	struct bs_scsi_tgt *t = n->tgt;
	const struct scsi_op *op = NULL;
	struct bs_scsi_lu *lu;
	uint8_t opcode = cmd->cdb[0];
	int sa = -1;
	uint16_t ua = 0;
	bool conflict = false, held_abort = false;
	int rc;

	memset(c, 0, sizeof(*c));
	cmd->status = BS_SCSI_GOOD;
	cmd->sense_len = 0;
	cmd->din = NULL;
	cmd->din_len = 0;
	if (cmd->cdb_len > BS_SCSI_CDB_MAX)
		cmd->cdb_len = BS_SCSI_CDB_MAX;
	if (has_sa(opcode))
		sa = cmd->cdb[1] & 0x1f;
	if (cmd->cdb_len >= group_len(opcode) && group_len(opcode))
		op = scsi_op_find(opcode, sa);

	pthread_mutex_lock(&t->lock);
	for (lu = t->lus; lu && lu->lun != cmd->lun; lu = lu->next)
		;
	c->lu = lu;
	c->dsense = lu && lu->d_sense;
	if (lu)
		scsi_set_add(lu, cmd);
	if (lu && cmd->arrived && cmd->epoch != lu->epoch) {
		/* aborted while the transport held it: never runs */
		c->aborted = true;
		lu->aborting++;
		held_abort = true;
	}
	if (lu && !held_abort && !(op && op->flags & F_NO_UA))
		ua = scsi_ua_take(n, lu->lun);
	if (lu && op && !ua && !held_abort)
		conflict = scsi_res_conflict(lu, n, op, cmd->cdb);
	pthread_mutex_unlock(&t->lock);

	/* (c->aborted is another thread's to set from here: not read) */
	if (held_abort) {
		rc = SCSI_DONE;	/* TASK ABORTED as it leaves the set */
	} else if (!lu) {
		if (op && op->flags & F_NO_LU)
			rc = op->fn(cmd, NULL);
		else
			rc = scsi_check(cmd, SK_ILLEGAL_REQUEST,
					A_LU_NOT_SUPPORTED);
	} else if (ua) {
		rc = scsi_check(cmd, SK_UNIT_ATTENTION, ua);
	} else if (!op) {
		if (sa >= 0 && opcode_known(opcode))
			rc = scsi_bad_cdb(cmd, 1, 4);
		else
			rc = scsi_check(cmd, SK_ILLEGAL_REQUEST,
					A_INVALID_OPCODE);
	} else if (cmd->cdb[op->cdb_len - 1] & 0x04) {
		/* NACA: auto contingent allegiance is not supported */
		rc = scsi_bad_cdb(cmd, op->cdb_len - 1, 2);
	} else if (conflict) {
		cmd->status = BS_SCSI_RESERVATION_CONFLICT;
		rc = SCSI_DONE;
	} else if (op->flags & F_WRITE && lu->readonly) {
		rc = scsi_check(cmd, SK_DATA_PROTECT, A_WRITE_PROTECTED);
	} else {
		rc = op->fn(cmd, lu);
	}
	if (rc == SCSI_DONE)
		scsi_finish(cmd);
}

/* ---- simple commands ----------------------------------------------------- */

static int tur(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	int err = bs_dev_check_live(lu->dev);

	return err ? scsi_check_errno(cmd, err, false) : scsi_good(cmd);
}

static int start_stop(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	/* no medium to load or spin: the unit is always ready */
	return scsi_good(cmd);
}

static int prevent_allow(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	return scsi_good(cmd);
}

static int report_luns(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *unused)
{
	struct bs_scsi_tgt *t = cmd->nexus->tgt;
	uint32_t alloc = get32(cmd->cdb + 6), count = 0, i;
	uint8_t sel = cmd->cdb[2], *d;
	struct bs_scsi_lu *lu;

	if (sel != 0x00 && sel != 0x01 && sel != 0x02)
		return scsi_bad_cdb(cmd, 2, -1);
	if (alloc < 16)
		return scsi_bad_cdb(cmd, 6, -1);
	pthread_mutex_lock(&t->lock);
	if (sel != 0x01)	/* 01h: well-known LUs only, we have none */
		for (lu = t->lus; lu; lu = lu->next)
			count++;
	d = scsi_din(cmd, 8 + 8 * count);
	if (d) {
		put32(d, 8 * count);
		for (i = 0, lu = sel != 0x01 ? t->lus : NULL; lu && i < count;
		     lu = lu->next, i++)
			bs_scsi_lun_encode(lu->lun, d + 8 + 8 * i);
	}
	pthread_mutex_unlock(&t->lock);
	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	return scsi_din_done(cmd, 8 + 8 * count, alloc);
}

static int request_sense(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	bool desc = cmd->cdb[1] & 0x01;
	uint8_t key = SK_NO_SENSE, *d;
	uint16_t asc = A_NONE;
	uint8_t len;

	if (!lu) {
		key = SK_ILLEGAL_REQUEST;
		asc = A_LU_NOT_SUPPORTED;
	} else {
		/* SPC-4: a pending unit attention is reported, and cleared */
		pthread_mutex_lock(&lu->tgt->lock);
		asc = scsi_ua_take(cmd->nexus, lu->lun);
		pthread_mutex_unlock(&lu->tgt->lock);
		if (asc)
			key = SK_UNIT_ATTENTION;
	}
	d = scsi_din(cmd, BS_SCSI_SENSE_MAX);
	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	len = scsi_sense_fill(d, desc, key, asc, false, 0, NULL);
	return scsi_din_done(cmd, len, cmd->cdb[4]);
}

/* ---- REPORT SUPPORTED OPERATION CODES ------------------------------------ */

/* The CDB usage map of the table entry. */
static void usage_map(const struct scsi_op *op, uint8_t *u)
{
	memcpy(u, op->usage, op->cdb_len);
}

static void timeouts(uint8_t *d)
{
	put16(d, 0x0a);		/* descriptor length */
	put32(d + 4, 0);	/* nominal command processing timeout: none */
	put32(d + 8, 0);	/* recommended timeout: none */
}

static int rsoc(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint8_t opts = cmd->cdb[2] & 0x07, rctd = cmd->cdb[2] & 0x80;
	uint8_t req_op = cmd->cdb[3];
	uint16_t req_sa = get16(cmd->cdb + 4);
	uint32_t alloc = get32(cmd->cdb + 6), len = 0, dlen;
	const struct scsi_op *op;
	unsigned i;
	uint8_t *d;

	if (opts == 0) {
		dlen = 8 + (rctd ? 12 : 0);
		d = scsi_din(cmd, 4 + NOPS * dlen);
		if (!d)
			return scsi_check(cmd, SK_HARDWARE_ERROR,
					  A_INTERNAL_FAILURE);
		for (i = 0; i < NOPS; i++) {
			uint8_t *e = d + 4 + i * dlen;

			op = &ops[i];
			e[0] = op->opcode;
			put16(e + 2, op->sa >= 0 ? (uint16_t)op->sa : 0);
			e[5] = (rctd ? 0x02 : 0) | (op->sa >= 0 ? 0x01 : 0);
			put16(e + 6, op->cdb_len);
			if (rctd)
				timeouts(e + 8);
		}
		len = 4 + NOPS * dlen;
		put32(d, len - 4);
		return scsi_din_done(cmd, len, alloc);
	}
	if (opts > 3)
		return scsi_bad_cdb(cmd, 2, 0);
	if (opts == 1 && has_sa(req_op))
		return scsi_bad_cdb(cmd, 3, -1);
	if (opts == 2 && !has_sa(req_op) && opcode_known(req_op))
		return scsi_bad_cdb(cmd, 3, -1);
	op = scsi_op_find(req_op, has_sa(req_op) ? req_sa : -1);
	if (op && has_sa(req_op) && op->sa != req_sa)
		op = NULL;
	if (has_sa(req_op) && opts == 3 && !op)
		op = NULL;
	d = scsi_din(cmd, 4 + 32 + 12);
	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	if (!op) {
		d[1] = 0x01;	/* SUPPORT: not supported */
		return scsi_din_done(cmd, 4, alloc);
	}
	d[1] = (rctd ? 0x80 : 0) | 0x03;	/* CTDP, SUPPORT: supported */
	put16(d + 2, op->cdb_len);
	usage_map(op, d + 4);
	len = 4 + op->cdb_len;
	if (rctd) {
		timeouts(d + len);
		len += 12;
	}
	return scsi_din_done(cmd, len, alloc);
}
