/* SPDX-License-Identifier: MIT */
/*
 * Reservations: RESERVE/RELEASE 6/10 (SPC-2, held by one nexus, dropped
 * when it goes) and PERSISTENT RESERVE IN/OUT (SPC-4: register, register
 * and ignore existing key, reserve, release, clear, preempt, preempt and
 * abort; read keys, read reservation, report capabilities, read full
 * status) with the types
 * Write Exclusive, Exclusive Access and their Registrants Only and All
 * Registrants forms. Registrations belong to I_T nexus identities
 * (initiator port name + relative target port) and outlive the nexus;
 * nothing is persisted across restarts: APTPL is refused, and REPORT
 * CAPABILITIES says PTPL_C = 0. All under the target's lock.
 */
#include <stdlib.h>
#include <string.h>

#include "export/scsi/internal.h"

static bool all_reg_type(uint8_t type)
{
	return type == PR_WEAR || type == PR_EAAR;
}

static bool type_ok(uint8_t type)
{
	return type == PR_WE || type == PR_EA || type == PR_WERO ||
	       type == PR_EARO || type == PR_WEAR || type == PR_EAAR;
}

static bool reg_is(const struct scsi_pr_reg *r, const struct bs_scsi_nexus *n)
{
	return r->rel_port == n->rel_port && !strcmp(r->iport, n->iport);
}

static struct scsi_pr_reg *reg_find(struct bs_scsi_lu *lu,
				    const struct bs_scsi_nexus *n)
{
	struct scsi_pr_reg *r;

	for (r = lu->pr.regs; r && !reg_is(r, n); r = r->next)
		;
	return r;
}

/* Queue @asc for every nexus of registration @r. */
static void ua_reg(struct bs_scsi_lu *lu, const struct scsi_pr_reg *r,
		   uint16_t asc)
{
	struct bs_scsi_nexus *n;

	for (n = lu->tgt->nexuses; n; n = n->next)
		if (reg_is(r, n))
			scsi_ua_queue(n, lu->lun, asc);
}

/* Release the reservation; RO/AR types tell the other registrants. */
static void pr_release(struct bs_scsi_lu *lu, const struct scsi_pr_reg *by)
{
	struct scsi_pr_reg *r;
	uint8_t type = lu->pr.type;

	lu->pr.holder = NULL;
	lu->pr.type = 0;
	if (type == PR_WE || type == PR_EA)
		return;
	for (r = lu->pr.regs; r; r = r->next)
		if (r != by)
			ua_reg(lu, r, A_RESERVATIONS_RELEASED);
}

/* Remove registration @r (and what it held). */
static void reg_remove(struct bs_scsi_lu *lu, struct scsi_pr_reg *r)
{
	struct scsi_pr_reg **pp;

	for (pp = &lu->pr.regs; *pp && *pp != r; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = r->next;
		lu->pr.nregs--;
	}
	if (lu->pr.holder == r) {
		if (all_reg_type(lu->pr.type) && lu->pr.regs)
			lu->pr.holder = lu->pr.regs;	/* still held by all */
		else
			pr_release(lu, r);
	}
	free(r->iport);
	free(r);
}

void scsi_pr_free(struct scsi_pr *pr)
{
	struct scsi_pr_reg *r;

	while ((r = pr->regs)) {
		pr->regs = r->next;
		free(r->iport);
		free(r);
	}
	pr->nregs = 0;
	pr->holder = NULL;
}

void scsi_res_drop(struct bs_scsi_lu *lu, struct bs_scsi_nexus *n)
{
	if (lu->res_holder == n)
		lu->res_holder = NULL;
}

bool scsi_res_conflict(struct bs_scsi_lu *lu, struct bs_scsi_nexus *n,
		       const struct scsi_op *op, const uint8_t *cdb)
{
	struct scsi_pr_reg *reg;
	uint8_t type = lu->pr.type;
	bool excl;

	if (lu->res_holder && lu->res_holder != n)
		return !(op->flags & F_RES2_OK);
	if (!lu->pr.holder || op->rclass == RC_ALLOW)
		return false;
	reg = reg_find(lu, n);
	if (reg == lu->pr.holder)
		return false;
	/* Registrants Only and All Registrants: every registrant has access */
	if (reg && type != PR_WE && type != PR_EA)
		return false;
	excl = type == PR_EA || type == PR_EARO || type == PR_EAAR;
	return op->rclass == RC_WRITE || excl;
}

bool scsi_res_conflict_access(struct bs_scsi_lu *lu, struct bs_scsi_nexus *n,
			      uint8_t rclass)
{
	const struct scsi_op op = { .rclass = rclass };
	bool conflict;

	pthread_mutex_lock(&lu->tgt->lock);
	conflict = scsi_res_conflict(lu, n, &op, NULL);
	pthread_mutex_unlock(&lu->tgt->lock);
	return conflict;
}

/* ---- RESERVE / RELEASE (6 and 10) ---------------------------------------- */

int scsi_reserve(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	bool conflict;

	if (cmd->cdb[0] == 0x56 && cmd->cdb[1] & 0x12)	/* 3RDPTY, LONGID */
		return scsi_bad_cdb(cmd, 1, 4);
	pthread_mutex_lock(&lu->tgt->lock);
	/* a persistent reservation rules out the SPC-2 kind */
	conflict = lu->pr.holder ||
		   (lu->res_holder && lu->res_holder != cmd->nexus);
	if (!conflict)
		lu->res_holder = cmd->nexus;
	pthread_mutex_unlock(&lu->tgt->lock);
	if (conflict) {
		cmd->status = BS_SCSI_RESERVATION_CONFLICT;
		return SCSI_DONE;
	}
	return scsi_good(cmd);
}

int scsi_release(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	bool conflict;

	pthread_mutex_lock(&lu->tgt->lock);
	conflict = lu->pr.holder != NULL;
	/* releasing what another nexus holds does nothing (SPC-2) */
	if (!conflict && lu->res_holder == cmd->nexus)
		lu->res_holder = NULL;
	pthread_mutex_unlock(&lu->tgt->lock);
	if (conflict) {
		cmd->status = BS_SCSI_RESERVATION_CONFLICT;
		return SCSI_DONE;
	}
	return scsi_good(cmd);
}

/* ---- PERSISTENT RESERVE IN ----------------------------------------------- */

/* An iSCSI TransportID (SPC-4 7.6.4.6) of @iport; its length (x4, >= 20). */
static uint32_t transport_id(const char *iport, uint8_t *d)
{
	uint32_t l = (uint32_t)strlen(iport), n;

	if (l > 220)
		l = 220;
	n = (l + 1 + 3) & ~3u;
	if (n < 16)
		n = 16;
	if (d) {
		/* format 01b (name with ISID) when the port says ",i,0x" */
		d[0] = (strstr(iport, ",i,0x") ? 0x40 : 0x00) | 0x05;
		put16(d + 2, (uint16_t)n);
		memset(d + 4, 0, n);
		memcpy(d + 4, iport, l);
	}
	return 4 + n;
}

/* READ FULL STATUS: one descriptor per registration. */
static uint32_t full_status(struct bs_scsi_lu *lu, uint8_t *d)
{
	struct scsi_pr_reg *r;
	uint32_t len = 8, tl;

	put32(d, lu->pr.generation);
	for (r = lu->pr.regs; r; r = r->next) {
		uint8_t *e = d + len;
		bool holds = lu->pr.holder &&
			     (r == lu->pr.holder || all_reg_type(lu->pr.type));

		put64(e, r->key);
		if (holds) {
			e[12] = 0x01;			/* R_HOLDER */
			e[13] = lu->pr.type;		/* scope 0 */
		}
		put16(e + 18, r->rel_port);
		tl = transport_id(r->iport, e + 24);
		put32(e + 20, tl);
		len += 24 + tl;
	}
	put32(d + 4, len - 8);
	return len;
}

int scsi_pr_in(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	uint16_t alloc = get16(cmd->cdb + 7);
	struct scsi_pr_reg *r;
	uint32_t len, nregs = 0;
	uint8_t *d;

	pthread_mutex_lock(&lu->tgt->lock);
	for (r = lu->pr.regs; r; r = r->next)
		nregs += 24 + transport_id(r->iport, NULL);
	d = scsi_din(cmd, 8 + nregs + 16);
	if (!d) {
		pthread_mutex_unlock(&lu->tgt->lock);
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	}
	switch (cmd->cdb[1] & 0x1f) {
	case 0x00:	/* READ KEYS */
		put32(d, lu->pr.generation);
		len = 8;
		for (r = lu->pr.regs; r; r = r->next, len += 8)
			put64(d + len, r->key);
		put32(d + 4, len - 8);
		break;
	case 0x01:	/* READ RESERVATION */
		put32(d, lu->pr.generation);
		len = 8;
		if (lu->pr.holder) {
			put32(d + 4, 16);
			if (!all_reg_type(lu->pr.type))
				put64(d + 8, lu->pr.holder->key);
			d[21] = lu->pr.type;	/* scope 0: logical unit */
			len += 16;
		}
		break;
	case 0x03:
		len = full_status(lu, d);
		break;
	default:	/* REPORT CAPABILITIES */
		put16(d, 8);
		d[2] = 0x00;	/* CRH, SIP_C, ATP_C, PTPL_C: none */
		d[3] = 0x80;	/* TMV: the type mask is valid; PTPL_A 0 */
		d[4] = 0x80 | 0x40 | 0x20 | 0x08 | 0x02;
		d[5] = 0x01;
		len = 8;
		break;
	}
	pthread_mutex_unlock(&lu->tgt->lock);
	return scsi_din_done(cmd, len, alloc);
}

/* ---- PERSISTENT RESERVE OUT ---------------------------------------------- */

enum { PRO_REGISTER, PRO_RESERVE, PRO_RELEASE, PRO_CLEAR, PRO_PREEMPT,
       PRO_PREEMPT_ABORT, PRO_REGISTER_IGNORE };

static int conflict(struct bs_scsi_cmd *cmd)
{
	cmd->status = BS_SCSI_RESERVATION_CONFLICT;
	cmd->sense_len = 0;
	return SCSI_DONE;
}

static int do_register(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu,
		       struct scsi_pr_reg *reg, unsigned sa, uint64_t key,
		       uint64_t sakey)
{
	struct scsi_pr_reg *r;

	if (sa == PRO_REGISTER && (reg ? reg->key != key : key != 0))
		return conflict(cmd);
	if (!reg) {
		if (!sakey)
			return scsi_good(cmd);
		if (lu->pr.nregs >= SCSI_PR_REGS_MAX)
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  A_INSUFFICIENT_REG_RESOURCES);
		r = calloc(1, sizeof(*r));
		if (!r || !(r->iport = strdup(cmd->nexus->iport))) {
			free(r);
			return scsi_check(cmd, SK_HARDWARE_ERROR,
					  A_INTERNAL_FAILURE);
		}
		r->rel_port = cmd->nexus->rel_port;
		r->key = sakey;
		r->next = lu->pr.regs;
		lu->pr.regs = r;
		lu->pr.nregs++;
	} else if (!sakey) {
		reg_remove(lu, reg);
	} else {
		reg->key = sakey;
	}
	lu->pr.generation++;
	return scsi_good(cmd);
}

static int do_preempt(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu,
		      struct scsi_pr_reg *reg, uint8_t type, uint64_t sakey)
{
	struct scsi_pr_reg *r, *next, *holder = lu->pr.holder;
	bool all = holder && all_reg_type(lu->pr.type);
	bool take = all ? sakey == 0 : holder && holder->key == sakey;
	unsigned removed = 0;

	if (!sakey && !all)
		return scsi_bad_param(cmd, 8, -1);
	if (take && !type_ok(type))
		return scsi_bad_cdb(cmd, 2, 3);
	for (r = lu->pr.regs; r; r = next) {
		next = r->next;
		if (r == reg || (sakey && r->key != sakey))
			continue;
		if (take && r == lu->pr.holder)
			lu->pr.holder = NULL;	/* replaced below, no UA */
		ua_reg(lu, r, A_REGISTRATIONS_PREEMPTED);
		reg_remove(lu, r);
		removed++;
	}
	if (!removed && !take)
		return conflict(cmd);
	if (take) {
		lu->pr.holder = reg;
		lu->pr.type = type;
	}
	lu->pr.generation++;
	return scsi_good(cmd);
}

int scsi_pr_out(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	unsigned sa = cmd->cdb[1] & 0x1f;
	uint8_t scope = cmd->cdb[2] >> 4, type = cmd->cdb[2] & 0x0f;
	uint32_t plen = get32(cmd->cdb + 5);
	const uint8_t *p = cmd->dout;
	struct scsi_pr_reg *reg, *r;
	uint64_t key, sakey;
	int rc;

	if (plen != 24)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_PARAM_LIST_LENGTH);
	if (!p || cmd->dout_len < 24)
		return scsi_short_dout(cmd);
	key = get64(p);
	sakey = get64(p + 8);
	if (sa == PRO_REGISTER || sa == PRO_REGISTER_IGNORE) {
		if (p[20] & 0x01)	/* APTPL: nothing persists here */
			return scsi_bad_param(cmd, 20, 0);
		if (p[20] & 0x04)	/* ALL_TG_PT: not supported */
			return scsi_bad_param(cmd, 20, 2);
		if (p[20] & 0x08)	/* SPEC_I_PT: not supported */
			return scsi_bad_param(cmd, 20, 3);
	}
	if ((sa == PRO_RESERVE || sa == PRO_RELEASE || sa == PRO_PREEMPT ||
	     sa == PRO_PREEMPT_ABORT) && scope != 0)
		return scsi_bad_cdb(cmd, 2, 7);

	pthread_mutex_lock(&lu->tgt->lock);
	reg = reg_find(lu, cmd->nexus);
	if (sa == PRO_REGISTER || sa == PRO_REGISTER_IGNORE) {
		rc = do_register(cmd, lu, reg, sa, key, sakey);
		goto out;
	}
	if (!reg || reg->key != key) {
		rc = conflict(cmd);
		goto out;
	}
	switch (sa) {
	case PRO_RESERVE:
		if (!type_ok(type)) {
			rc = scsi_bad_cdb(cmd, 2, 3);
		} else if (!lu->pr.holder) {
			lu->pr.holder = reg;
			lu->pr.type = type;
			rc = scsi_good(cmd);
		} else if ((lu->pr.holder == reg ||
			    all_reg_type(lu->pr.type)) &&
			   lu->pr.type == type) {
			rc = scsi_good(cmd);
		} else {
			rc = conflict(cmd);
		}
		break;
	case PRO_RELEASE:
		if (!lu->pr.holder ||
		    (lu->pr.holder != reg && !all_reg_type(lu->pr.type))) {
			rc = scsi_good(cmd);	/* not the holder: nothing */
		} else if (lu->pr.type != type) {
			rc = scsi_check(cmd, SK_ILLEGAL_REQUEST,
					A_INVALID_RELEASE_PR);
		} else {
			pr_release(lu, reg);
			rc = scsi_good(cmd);
		}
		break;
	case PRO_CLEAR:
		for (r = lu->pr.regs; r; r = r->next)
			if (r != reg)
				ua_reg(lu, r, ASC(0x2a, 0x03));
		lu->pr.holder = NULL;
		lu->pr.type = 0;
		scsi_pr_free(&lu->pr);
		lu->pr.generation++;
		rc = scsi_good(cmd);
		break;
	case PRO_PREEMPT:
	case PRO_PREEMPT_ABORT:
		rc = do_preempt(cmd, lu, reg, type, sakey);
		break;
	default:
		rc = scsi_bad_cdb(cmd, 1, 4);
		break;
	}
out:
	pthread_mutex_unlock(&lu->tgt->lock);
	return rc;
}
