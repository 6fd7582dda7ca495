/* SPDX-License-Identifier: MIT */
/*
 * The iSCSI session state machine: PDU assembly from the byte stream
 * (BHS, AHS, digests, padded data), login, the command numbering window,
 * Text (SendTargets), NOP-Out / NOP-In and target pings, Logout, Reject,
 * and the output queue. SCSI commands, Data-Out, R2T and task management
 * are in task.c.
 *
 * Unrecoverable input closes the connection (ErrorRecoveryLevel 0): a
 * header digest error, a data segment over our MaxRecvDataSegmentLength,
 * a PDU other than Login before the full feature phase. A bad PDU whose
 * framing can be trusted gets a Reject with the reason RFC 7143 11.17.1
 * gives.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>

#include <blkstack/bufpool.h>
#include <blkstack/export.h>
#include <blkstack/loop.h>

#include "core/crc32c.h"
#include "export/iscsi/internal.h"

#define SESSION_OF(h) \
	((struct iscsi_session *)((char *)(h) - \
				  offsetof(struct iscsi_session, bh)))

#define RBUF_LEN (ISCSI_AHS_MAX + ISCSI_DIGEST_LEN + ISCSI_MAX_RECV_DSL + 3 + \
		  ISCSI_DIGEST_LEN)

/*
 * No more input (ended, EOF, freed): the PDU held for the budget is
 * dropped, so the session waits no more; its turn goes on now, not when
 * the session is freed after its commands in the core.
 */
static void drop_held(struct iscsi_session *s)
{
	s->held = false;
	if (s->budget)
		bs_budget_cancel(s->budget, &s->bh);
}

void iscsi_log(struct iscsi_session *s, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!s->ops || !s->ops->log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	s->ops->log(s->arg, msg);
}

void iscsi_end(struct iscsi_session *s, const char *fmt, ...)
{
	va_list ap;

	if (!s->ended && !s->reason[0]) {
		va_start(ap, fmt);
		vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
		va_end(ap);
	}
	s->ended = true;
	s->in = IN_NONE;
	drop_held(s);
	iscsi_tasks_drop(s);
	iscsi_kick(s);
}

void iscsi_kick(struct iscsi_session *s)
{
	if (s->ops && s->ops->kick)
		s->ops->kick(s->arg);
}

/* ---- output -------------------------------------------------------------- */

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

int iscsi_out_pdu(struct iscsi_session *s, const uint8_t *bhs,
		  const void *data, size_t len, struct iscsi_task *task)
{
	struct iscsi_out *o;
	uint32_t pad = iscsi_pad4((uint32_t)len);

	if (s->orphan || s->evicted)
		return 0;
	o = calloc(1, sizeof(*o));
	if (!o) {
		iscsi_end(s, "out of memory queueing a PDU");
		return -ENOMEM;
	}
	memcpy(o->hdr, bhs, ISCSI_BHS_LEN);
	iscsi_put24(o->hdr + 5, (uint32_t)len);
	o->hdr_len = ISCSI_BHS_LEN;
	if (s->ffp && s->p.header_digest) {
		put_le32(o->hdr + ISCSI_BHS_LEN,
			 bs_crc32c(o->hdr, ISCSI_BHS_LEN));
		o->hdr_len += ISCSI_DIGEST_LEN;
	}
	if (len) {
		if (task) {
			o->data = data;
			o->task = task;
			task->refs++;
		} else {
			o->owned = malloc(len);
			if (!o->owned) {
				free(o);
				iscsi_end(s, "out of memory queueing a PDU");
				return -ENOMEM;
			}
			memcpy(o->owned, data, len);
			o->data = o->owned;
		}
		o->data_len = len;
		o->trail_len = pad;	/* zeroes */
		if (s->ffp && s->p.data_digest) {
			uint32_t crc = bs_crc32c_update(~0u, o->data, len);

			crc = ~bs_crc32c_update(crc, o->trail, pad);
			put_le32(o->trail + pad, crc);
			o->trail_len += ISCSI_DIGEST_LEN;
		}
	}
	s->out_bytes += o->hdr_len + o->data_len + o->trail_len;
	if (s->out_tail)
		s->out_tail->next = o;
	else
		s->out_head = o;
	s->out_tail = o;
	iscsi_kick(s);
	return 0;
}

static void out_pop(struct iscsi_session *s)
{
	struct iscsi_out *o = s->out_head;

	s->out_head = o->next;
	if (!s->out_head)
		s->out_tail = NULL;
	s->out_bytes -= o->hdr_len + o->data_len + o->trail_len - o->sent;
	free(o->owned);
	if (o->task)
		iscsi_task_put(o->task);
	free(o);
}

int iscsi_session_out_iov(struct iscsi_session *s, struct iovec *iov, int max)
{
	struct iscsi_out *o;
	int n = 0;

	for (o = s->out_head; o && n < max; o = o->next) {
		const uint8_t *part[3] = { o->hdr, o->data, o->trail };
		size_t plen[3] = { o->hdr_len, o->data_len, o->trail_len };
		size_t off = o->sent;
		int i;

		for (i = 0; i < 3 && n < max; i++) {
			if (off >= plen[i]) {
				off -= plen[i];
				continue;
			}
			iov[n].iov_base = (void *)(part[i] + off);
			iov[n].iov_len = plen[i] - off;
			n++;
			off = 0;
		}
		if (i < 3)
			break;
	}
	return n;
}

size_t iscsi_session_out_bytes(const struct iscsi_session *s)
{
	return s->out_bytes;
}

void iscsi_session_out_advance(struct iscsi_session *s, size_t n)
{
	bool freed = false;

	/* progress before the bytes go back: the watchdog must not see
	 * fewer held bytes with the old clock */
	if (s->budget)
		bs_budget_progress(&s->bh);
	while (n && s->out_head) {
		struct iscsi_out *o = s->out_head;
		size_t left = o->hdr_len + o->data_len + o->trail_len - o->sent;

		if (n < left) {
			o->sent += n;
			s->out_bytes -= n;
			break;
		}
		n -= left;
		out_pop(s);
		freed = true;
	}
	if (freed)
		iscsi_kick(s);
}

/* ---- numbering ----------------------------------------------------------- */

uint32_t iscsi_depth(const struct iscsi_session *s)
{
	/* during login one slot: the target's depth is known once the
	 * session is attached (the final login response carries it) */
	return s->st.queue_depth ? s->st.queue_depth :
	       s->ffp ? ISCSI_QUEUE_DEPTH : 1;
}

void iscsi_window_update(struct iscsi_session *s)
{
	uint32_t depth = iscsi_depth(s);
	uint32_t room = depth > s->ntasks ? depth - s->ntasks : 0;
	uint32_t max = s->exp_cmd_sn + room - 1;

	/* MaxCmdSN never goes back (RFC 7143 4.2.2.1) */
	if (iscsi_sn_lt(s->max_cmd_sn, max))
		s->max_cmd_sn = max;
}

void iscsi_put_sn(struct iscsi_session *s, uint8_t *bhs, bool advance)
{
	iscsi_window_update(s);
	iscsi_put32(bhs + 24, advance ? s->stat_sn++ : s->stat_sn);
	iscsi_put32(bhs + 28, s->exp_cmd_sn);
	iscsi_put32(bhs + 32, s->max_cmd_sn);
}

void iscsi_reject(struct iscsi_session *s, const uint8_t *bhs, uint8_t reason)
{
	uint8_t rsp[ISCSI_BHS_LEN];
	char name[24];

	iscsi_bhs_init(rsp, ISCSI_OP_REJECT, 0, ISCSI_RSVD_TAG);
	rsp[2] = reason;
	iscsi_put_sn(s, rsp, true);
	s->stats.errors++;
	iscsi_log(s, "reject %s (ITT 0x%08x): reason 0x%02x",
		  iscsi_opcode_name(iscsi_opcode(bhs), name, sizeof(name)),
		  iscsi_itt(bhs), reason);
	iscsi_out_pdu(s, rsp, bhs, ISCSI_BHS_LEN, NULL);
}

/*
 * CmdSN of a non-immediate request: inside [ExpCmdSN, MaxCmdSN] it is
 * taken and ExpCmdSN moves past it; outside it is ignored silently
 * (RFC 7143 4.2.2.1).
 */
static bool cmd_sn_take(struct iscsi_session *s, const uint8_t *bhs)
{
	uint32_t sn = iscsi_get32(bhs + 24);

	if (iscsi_immediate(bhs))
		return true;
	if (iscsi_sn_lt(sn, s->exp_cmd_sn) || iscsi_sn_lt(s->max_cmd_sn, sn)) {
		iscsi_log(s, "CmdSN %u outside the window [%u, %u]: ignored",
			  sn, s->exp_cmd_sn, s->max_cmd_sn);
		return false;
	}
	s->exp_cmd_sn = sn + 1;
	return true;
}

/* ---- budget -------------------------------------------------------------- */

bool iscsi_budget_take(struct iscsi_session *s, size_t n)
{
	return !n || !s->budget || bs_budget_take(s->budget, &s->bh, n);
}

void iscsi_budget_give(struct iscsi_session *s, size_t n)
{
	if (n && s->budget)
		bs_budget_give(s->budget, &s->bh, n);
}

static void budget_wake_fn(struct bs_budget_holder *h)
{
	struct iscsi_session *s = SESSION_OF(h);

	/* the held PDU is retried without new bytes */
	if (!s->orphan)
		iscsi_session_feed(s, NULL, 0);
	iscsi_kick(s);
}

static void budget_evict(struct bs_budget_holder *h, const char *why)
{
	struct iscsi_session *s = SESSION_OF(h);

	iscsi_log(s, "closing: %s", why);
	iscsi_end(s, "%s", why);
	s->evicted = true;
	if (s->ops && s->ops->drop_output)
		s->ops->drop_output(s->arg);
	while (s->out_head)
		out_pop(s);
	iscsi_kick(s);
}

/* ---- login --------------------------------------------------------------- */

static int l_find(void *arg, const char *name, struct iscsi_login_target *t)
{
	struct iscsi_session *s = arg;
	int err = s->ops ? s->ops->find(s->arg, name, t) : -ENOENT;

	if (!err)
		s->release = s->ops->release;	/* the session holds it */
	return err;
}

static const struct iscsi_target_params *l_dparams(void *arg)
{
	struct iscsi_session *s = arg;

	return s->ops->discovery_params(s->arg);
}

static int l_random(void *arg, void *buf, size_t len)
{
	struct iscsi_session *s = arg;

	return s->ops->random(s->arg, buf, len);
}

static uint16_t l_tsih(void *arg)
{
	struct iscsi_session *s = arg;

	return s->ops->tsih(s->arg);
}

static const struct iscsi_login_ops login_ops = {
	.find = l_find,
	.discovery_params = l_dparams,
	.random = l_random,
	.tsih = l_tsih,
};

static void hex_isid(const uint8_t *isid, char *buf)
{
	snprintf(buf, 16, "%02x%02x%02x%02x%02x%02x", isid[0], isid[1],
		 isid[2], isid[3], isid[4], isid[5]);
}

/* Full feature phase on a normal session: count it, make the nexus. */
static int enter_full_feature(struct iscsi_session *s)
{
	struct iscsi_login *l = &s->login;
	char iport[ISCSI_NAME_MAX + 32], tport[ISCSI_NAME_MAX + 32], isid[16];
	struct bs_scsi_nexus_cfg nc;
	int err;

	s->p = l->params;
	if (l->discovery)
		return 0;
	s->tgt = l->tgt;
	err = s->ops->attach(s->arg, &s->tgt, &s->st);
	if (err)
		return err;
	s->attached = true;
	s->detach = s->ops->detach;
	hex_isid(l->isid, isid);
	snprintf(iport, sizeof(iport), "%s,i,0x%s", l->initiator, isid);
	snprintf(tport, sizeof(tport), "%s,t,0x%04x", s->tgt.name, ISCSI_TPGT);
	nc.initiator_port = iport;
	nc.target_port = tport;
	nc.rel_port_id = 1;
	nc.tpg = ISCSI_TPGT;
	return bs_scsi_nexus_new(s->st.scsi, &nc, &s->nexus);
}

static void do_login(struct iscsi_session *s, const uint8_t *data,
		     uint32_t dsl)
{
	struct iscsi_text_out out = { 0 };
	uint8_t rsp[ISCSI_BHS_LEN];
	int r;

	if (!s->login.started) {
		/* the first request fixes the numbering */
		s->exp_cmd_sn = iscsi_get32(s->bhs + 24);
		s->max_cmd_sn = s->exp_cmd_sn - 1;
		s->stat_sn = iscsi_get32(s->bhs + 28);
		s->cid = iscsi_get16(s->bhs + 20);
	}
	r = iscsi_login_pdu(&s->login, s->bhs, data, dsl, rsp, &out);
	if (r == 1) {
		int err = enter_full_feature(s);

		if (err) {
			r = -EACCES;
			rsp[1] &= (uint8_t)~(ISCSI_LOGIN_TRANSIT | 3);
			iscsi_put16(rsp + 14, 0);
			rsp[36] = 0x03;
			rsp[37] = err == -EBUSY ? 0x01 : 0x02;
			out.len = 0;
			snprintf(s->login.why, sizeof(s->login.why),
				 err == -EBUSY ? "target %s: max_sessions "
				 "reached" : "target %s: no resources",
				 s->login.target);
		}
	}
	iscsi_put_sn(s, rsp, true);
	iscsi_out_pdu(s, rsp, out.buf, out.len, NULL);
	iscsi_text_free(&out);
	if (r < 0) {
		iscsi_log(s, "login refused (status %02x/%02x): %s", rsp[36],
			  rsp[37], s->login.why);
		iscsi_end(s, "login refused: %s", s->login.why);
		return;
	}
	if (r == 1) {
		s->ffp = true;	/* digests start with the next PDU */
		s->discovery = s->login.discovery;
		iscsi_log(s, "login: %s session%s%s from %s, digests %s/%s, "
			  "MaxRecvDataSegmentLength %u/%u, burst %u/%u, "
			  "ImmediateData %s, InitialR2T %s",
			  s->discovery ? "discovery" : "normal",
			  s->discovery ? "" : " to ",
			  s->discovery ? "" : s->tgt.name, s->login.initiator,
			  s->p.header_digest ? "CRC32C" : "None",
			  s->p.data_digest ? "CRC32C" : "None",
			  s->p.max_xmit_dsl, s->p.max_recv_dsl,
			  s->p.first_burst, s->p.max_burst,
			  s->p.immediate_data ? "Yes" : "No",
			  s->p.initial_r2t ? "Yes" : "No");
		iscsi_login_free(&s->login);
	}
}

/* ---- text ---------------------------------------------------------------- */

struct st_ctx {
	struct iscsi_text_out *out;
	const char *only;	/* one target's name, or NULL: all */
};

static void add_target(void *fa, const char *name, const char *portal)
{
	struct st_ctx *c = fa;

	if (c->only && strcmp(c->only, name))
		return;
	iscsi_text_add(c->out, "TargetName", "%s", name);
	if (portal)
		iscsi_text_add(c->out, "TargetAddress", "%s", portal);
}

/* Send the next piece of s->text (continued when over MRDSL). */
static void text_send(struct iscsi_session *s)
{
	uint8_t rsp[ISCSI_BHS_LEN];
	size_t left = s->text.len - s->text_off, n = left;

	iscsi_bhs_init(rsp, ISCSI_OP_TEXT_RSP, 0, s->text_itt);
	if (n > s->p.max_xmit_dsl) {
		n = s->p.max_xmit_dsl;
		rsp[1] = ISCSI_FLAG_CONTINUE;	/* F = 0, C = 1 */
		s->text_ttt = ++s->next_ttt;
		if (s->text_ttt == ISCSI_RSVD_TAG)
			s->text_ttt = ++s->next_ttt;
		iscsi_put32(rsp + 20, s->text_ttt);
	} else {
		iscsi_put32(rsp + 20, ISCSI_RSVD_TAG);
	}
	iscsi_put_sn(s, rsp, true);
	iscsi_out_pdu(s, rsp, s->text.buf ? s->text.buf + s->text_off : NULL,
		      n, NULL);
	s->text_off += n;
	if (s->text_off >= s->text.len) {
		iscsi_text_free(&s->text);
		s->text_off = 0;
		s->text_ttt = 0;
	}
}

static void do_text(struct iscsi_session *s, const uint8_t *data,
		    uint32_t dsl)
{
	const uint8_t *bhs = s->bhs;
	uint32_t itt = iscsi_itt(bhs), ttt = iscsi_get32(bhs + 20);
	struct iscsi_kv kv[ISCSI_TEXT_PAIRS_MAX];
	char *b;
	int i, n;

	if (ttt != ISCSI_RSVD_TAG) {
		/* the initiator asks for the rest of a long answer */
		if (!s->text.len || ttt != s->text_ttt || itt != s->text_itt) {
			iscsi_reject(s, bhs, ISCSI_REJECT_INVALID_FIELD);
			return;
		}
		text_send(s);
		return;
	}
	/* a new exchange drops what was left of an old one */
	iscsi_text_free(&s->text);
	s->text_off = 0;
	if (s->text_in_len + dsl > ISCSI_TEXT_MAX) {
		iscsi_reject(s, bhs, ISCSI_REJECT_PROTOCOL);
		free(s->text_in);
		s->text_in = NULL;
		s->text_in_len = 0;
		return;
	}
	b = realloc(s->text_in, s->text_in_len + dsl + 1);
	if (!b) {
		iscsi_end(s, "out of memory in a Text request");
		return;
	}
	s->text_in = b;
	memcpy(b + s->text_in_len, data, dsl);
	s->text_in_len += dsl;
	s->text_itt = itt;
	if (bhs[1] & ISCSI_FLAG_CONTINUE) {
		/* more of the request comes: an empty answer */
		text_send(s);
		return;
	}
	n = iscsi_text_parse(s->text_in, s->text_in_len, kv,
			     ISCSI_TEXT_PAIRS_MAX);
	if (n < 0) {
		iscsi_reject(s, bhs, ISCSI_REJECT_PROTOCOL);
		n = -1;
	}
	for (i = 0; i < n; i++) {
		if (!strcmp(kv[i].key, "SendTargets")) {
			struct st_ctx c = { &s->text, NULL };
			const char *v = kv[i].val;

			if (!strcmp(v, "All")) {
				/* a normal session sees its own target */
				if (!s->discovery)
					c.only = s->tgt.name;
			} else if (!*v) {
				c.only = s->discovery ? "" : s->tgt.name;
			} else {
				c.only = v;
			}
			s->ops->each_target(s->arg, add_target, &c);
		} else if (!strcmp(kv[i].key, "MaxRecvDataSegmentLength")) {
			uint64_t v;

			if (iscsi_text_number(kv[i].val, &v) || v < 512 ||
			    v > ISCSI_DSL_MAX)
				iscsi_text_add(&s->text, kv[i].key, "Reject");
			else
				s->p.max_xmit_dsl = (uint32_t)v;
		} else {
			iscsi_text_add(&s->text, kv[i].key, "NotUnderstood");
		}
	}
	free(s->text_in);
	s->text_in = NULL;
	s->text_in_len = 0;
	if (n < 0)
		return;
	if (s->text.overflow) {
		iscsi_text_free(&s->text);
		iscsi_reject(s, bhs, ISCSI_REJECT_OUT_OF_RESOURCES);
		return;
	}
	text_send(s);
}

/* ---- NOP, logout --------------------------------------------------------- */

static void do_nop(struct iscsi_session *s, const uint8_t *data, uint32_t dsl)
{
	const uint8_t *bhs = s->bhs;
	uint32_t itt = iscsi_itt(bhs);
	uint8_t rsp[ISCSI_BHS_LEN];

	if (itt == ISCSI_RSVD_TAG) {
		/* an answer to our ping, or a one-way ping: no reply */
		if (!iscsi_immediate(bhs))
			iscsi_reject(s, bhs, ISCSI_REJECT_PROTOCOL);
		return;
	}
	if (dsl > s->p.max_xmit_dsl) {
		iscsi_reject(s, bhs, ISCSI_REJECT_PROTOCOL);
		return;
	}
	iscsi_bhs_init(rsp, ISCSI_OP_NOP_IN, 0, itt);
	memcpy(rsp + 8, bhs + 8, 8);	/* LUN */
	iscsi_put32(rsp + 20, ISCSI_RSVD_TAG);
	iscsi_put_sn(s, rsp, true);
	iscsi_out_pdu(s, rsp, data, dsl, NULL);
}

static void logout_answer(struct iscsi_session *s)
{
	uint8_t rsp[ISCSI_BHS_LEN];

	/* the session is gone once its Logout Response is out: an
	 * initiator may log in again at once, so its place in the target's
	 * max_sessions goes now, not when the connection is torn down */
	if (s->logout_rsp == ISCSI_LOGOUT_RSP_OK && s->attached &&
	    s->detach) {
		s->detach(&s->tgt);
		s->attached = false;
		if (s->ops && s->ops->logged_out)
			s->ops->logged_out(s->arg, &s->tgt);
	}
	iscsi_bhs_init(rsp, ISCSI_OP_LOGOUT_RSP, 0, s->logout_itt);
	rsp[2] = s->logout_rsp;
	iscsi_put_sn(s, rsp, true);
	/* Time2Wait and Time2Retain 0: nothing is kept at ERL 0 */
	iscsi_out_pdu(s, rsp, NULL, 0, NULL);
	s->logout = false;
	if (s->logout_rsp == ISCSI_LOGOUT_RSP_OK) {
		snprintf(s->reason, sizeof(s->reason), "logout");
		iscsi_end(s, "logout");
	}
}

static void do_logout(struct iscsi_session *s)
{
	uint8_t reason = s->bhs[1] & 0x7f;

	s->logout_itt = iscsi_itt(s->bhs);
	if (reason == ISCSI_LOGOUT_REMOVE_FOR_RECOVERY)
		s->logout_rsp = ISCSI_LOGOUT_RSP_NO_RECOVERY;
	else if (reason == ISCSI_LOGOUT_CLOSE_CONNECTION &&
		 iscsi_get16(s->bhs + 20) != s->cid)
		s->logout_rsp = ISCSI_LOGOUT_RSP_NO_CID;
	else if (reason <= ISCSI_LOGOUT_CLOSE_CONNECTION)
		s->logout_rsp = ISCSI_LOGOUT_RSP_OK;
	else {
		iscsi_reject(s, s->bhs, ISCSI_REJECT_INVALID_FIELD);
		return;
	}
	if (s->logout_rsp != ISCSI_LOGOUT_RSP_OK) {
		s->logout = true;
		logout_answer(s);
		return;
	}
	/* the session's tasks end with it (RFC 7143 11.14): a write still
	 * waiting for its data goes now, commands in the core are waited
	 * for and their answers dropped */
	iscsi_tasks_drop(s);
	s->logout = true;
	if (!s->ntasks)
		logout_answer(s);
}

void iscsi_tasks_idle(struct iscsi_session *s)
{
	if (s->logout && !s->ntasks)
		logout_answer(s);
}

/* ---- dispatch ------------------------------------------------------------ */

/* Refuse anything but Login before the full feature phase. */
static void login_only(struct iscsi_session *s)
{
	uint8_t rsp[ISCSI_BHS_LEN];
	char name[24];

	iscsi_bhs_init(rsp, ISCSI_OP_LOGIN_RSP, 0, iscsi_itt(s->bhs));
	rsp[1] = 0;
	rsp[36] = 0x02;
	rsp[37] = 0x0b;
	iscsi_put_sn(s, rsp, true);
	iscsi_out_pdu(s, rsp, NULL, 0, NULL);
	iscsi_end(s, "%s before login completed",
		  iscsi_opcode_name(iscsi_opcode(s->bhs), name, sizeof(name)));
}

/* A whole PDU is in s->bhs / s->rbuf: false = hold it, retry later. */
static bool dispatch(struct iscsi_session *s)
{
	const uint8_t *bhs = s->bhs;
	uint32_t ahs_len = iscsi_ahs_len(bhs), dsl = iscsi_dsl(bhs);
	bool hd = s->ffp && s->p.header_digest;
	bool dd = s->ffp && s->p.data_digest;
	/* the data segment's place in rbuf; its bytes may be in ddst */
	const uint8_t *seg = s->rbuf + ahs_len + (hd ? ISCSI_DIGEST_LEN : 0);
	const uint8_t *data = s->ddst ? s->ddst : seg;
	uint8_t op = iscsi_opcode(bhs);

	if (hd) {
		uint32_t crc = bs_crc32c_update(~0u, bhs, ISCSI_BHS_LEN);

		crc = ~bs_crc32c_update(crc, s->rbuf, ahs_len);
		if (crc != get_le32(s->rbuf + ahs_len)) {
			s->stats.errors++;
			iscsi_end(s, "header digest error");
			return true;
		}
	}
	if (dd && dsl) {
		uint32_t pad = iscsi_pad4(dsl);
		uint32_t crc = bs_crc32c_update(~0u, data, dsl);

		crc = ~bs_crc32c_update(crc, seg + dsl, pad);
		if (crc != get_le32(seg + dsl + pad)) {
			iscsi_reject(s, bhs, ISCSI_REJECT_DIGEST);
			return true;
		}
	}
	s->ping_out = false;
	if (!s->ffp) {
		if (op != ISCSI_OP_LOGIN_REQ)
			login_only(s);
		else
			do_login(s, data, dsl);
		return true;
	}
	if (s->discovery && op != ISCSI_OP_TEXT_REQ &&
	    op != ISCSI_OP_LOGOUT_REQ && op != ISCSI_OP_NOP_OUT) {
		iscsi_reject(s, bhs, ISCSI_REJECT_PROTOCOL);
		return true;
	}
	switch (op) {
	case ISCSI_OP_NOP_OUT:
		if (iscsi_itt(bhs) != ISCSI_RSVD_TAG && !cmd_sn_take(s, bhs))
			return true;
		do_nop(s, data, dsl);
		return true;
	case ISCSI_OP_SCSI_CMD: {
		uint32_t sn = s->exp_cmd_sn;

		if (!cmd_sn_take(s, bhs))
			return true;
		if (!iscsi_task_command(s, s->rbuf, data, dsl)) {
			s->exp_cmd_sn = sn;	/* taken again on the retry */
			return false;
		}
		return true;
	}
	case ISCSI_OP_TMF_REQ:
		if (cmd_sn_take(s, bhs))
			iscsi_task_tmf(s);
		return true;
	case ISCSI_OP_TEXT_REQ:
		if (cmd_sn_take(s, bhs))
			do_text(s, data, dsl);
		return true;
	case ISCSI_OP_DATA_OUT:
		iscsi_task_data_out(s, data, dsl);
		return true;
	case ISCSI_OP_LOGOUT_REQ:
		if (cmd_sn_take(s, bhs))
			do_logout(s);
		return true;
	case ISCSI_OP_LOGIN_REQ:
		iscsi_reject(s, bhs, ISCSI_REJECT_PROTOCOL);
		return true;
	case ISCSI_OP_SNACK_REQ:
		/* ErrorRecoveryLevel 0: nothing to resend */
		iscsi_reject(s, bhs, ISCSI_REJECT_SNACK);
		return true;
	default:
		iscsi_reject(s, bhs, ISCSI_REJECT_UNSUPPORTED);
		return true;
	}
}

/* A BHS is complete: check what it announces, set up the rest. */
static void header_done(struct iscsi_session *s)
{
	uint32_t dsl = iscsi_dsl(s->bhs);
	uint32_t max = s->ffp ? s->p.max_recv_dsl : ISCSI_MAX_RECV_DSL;

	if (dsl > max || dsl > ISCSI_MAX_RECV_DSL) {
		s->stats.errors++;
		iscsi_end(s, "data segment of %u bytes over our "
			  "MaxRecvDataSegmentLength %u", dsl, max);
		return;
	}
	s->rlen = iscsi_pdu_rest_len(s->bhs, s->ffp && s->p.header_digest,
				     s->ffp && s->p.data_digest);
	s->rhave = 0;
	s->dstart = iscsi_ahs_len(s->bhs) +
		    (s->ffp && s->p.header_digest ? ISCSI_DIGEST_LEN : 0);
	s->ddst = NULL;
	s->ddecided = false;
	s->in = IN_REST;
}

/*
 * At the start of a data segment: does a Data-Out's data go straight to
 * its task's buffer? Only when the header is trusted (its digest checked
 * here) and the task will take the data (the same checks as later).
 */
static void decide_direct(struct iscsi_session *s)
{
	uint32_t dsl = iscsi_dsl(s->bhs);

	s->ddecided = true;
	if (!s->ffp || iscsi_opcode(s->bhs) != ISCSI_OP_DATA_OUT || !dsl ||
	    iscsi_ahs_len(s->bhs))
		return;
	if (s->p.header_digest &&
	    bs_crc32c(s->bhs, ISCSI_BHS_LEN) != get_le32(s->rbuf))
		return;
	s->ddst = iscsi_task_data_out_dst(s, dsl);
}

/* Where the next input byte of the rest of the PDU goes, and how many
 * may go there in one piece. */
static uint8_t *rest_dst(struct iscsi_session *s, size_t *room)
{
	size_t dend = s->dstart + iscsi_dsl(s->bhs);

	if (!s->ddecided && s->rhave == s->dstart)
		decide_direct(s);
	if (s->ddst && s->rhave >= s->dstart && s->rhave < dend) {
		*room = dend - s->rhave;
		return s->ddst + (s->rhave - s->dstart);
	}
	/* stop at the data segment's start: the choice is made there */
	*room = (s->rhave < s->dstart ? s->dstart : s->rlen) - s->rhave;
	return s->rbuf + s->rhave;
}

static bool waiting_data(const struct iscsi_session *s)
{
	const struct iscsi_task *t;

	for (t = s->tasks; t; t = t->next)
		if (t->write && !t->executing && !t->completed && !t->aborted)
			return true;
	return false;
}

static bool accepting(const struct iscsi_session *s)
{
	if (s->ended || s->eof || s->orphan || s->in == IN_NONE)
		return false;
	if (s->out_bytes > ISCSI_OUT_MAX || s->tmf.pending || s->logout)
		return false;
	/* shutting down: no new PDU, unless a write waits for its data */
	if (s->shutdown && s->in == IN_BHS && !s->have && !waiting_data(s))
		return false;
	return true;
}

bool iscsi_session_wants_input(const struct iscsi_session *s)
{
	return accepting(s) && !s->held;
}

size_t iscsi_session_in_direct(struct iscsi_session *s, uint8_t **dst)
{
	size_t room;
	uint8_t *p;

	if (!accepting(s) || s->held || s->in != IN_REST ||
	    s->rhave == s->rlen)
		return 0;
	p = rest_dst(s, &room);
	if (!s->ddst || p < s->ddst ||
	    p >= s->ddst + iscsi_dsl(s->bhs))
		return 0;	/* only a Data-Out's data goes zero-copy */
	*dst = p;
	return room;
}

void iscsi_session_in_direct_done(struct iscsi_session *s, size_t n)
{
	if (!n)
		return;
	s->rhave += n;
	s->last_rx_ns = bs_now_ns();
	/* a PDU complete without a tail (no padding, no digest) is taken
	 * now: no more bytes may come until it is answered */
	iscsi_session_feed(s, NULL, 0);
}

size_t iscsi_session_feed(struct iscsi_session *s, const uint8_t *buf,
			  size_t len)
{
	size_t used = 0, n;

	if (len)
		s->last_rx_ns = bs_now_ns();
	for (;;) {
		if (!accepting(s))
			break;
		if (s->in == IN_REST && s->rhave == s->rlen) {
			if (!dispatch(s)) {
				s->held = true;
				break;
			}
			s->held = false;
			if (s->in == IN_REST) {
				s->in = IN_BHS;
				s->have = 0;
			}
			continue;
		}
		if (used == len)
			break;
		if (s->in == IN_BHS) {
			n = ISCSI_BHS_LEN - s->have;
			if (n > len - used)
				n = len - used;
			memcpy(s->bhs + s->have, buf + used, n);
			s->have += n;
			used += n;
			if (s->have == ISCSI_BHS_LEN)
				header_done(s);
		} else if (s->in == IN_REST) {
			uint8_t *dst = rest_dst(s, &n);

			if (n > len - used)
				n = len - used;
			memcpy(dst, buf + used, n);
			s->rhave += n;
			used += n;
		}
	}
	return used;
}

/* ---- life ---------------------------------------------------------------- */

void iscsi_session_tick(struct iscsi_session *s, uint64_t now_ns)
{
	uint8_t nop[ISCSI_BHS_LEN];

	if (!s->ffp || s->ended || s->eof || s->orphan)
		return;
	if (s->ping_out) {
		if (now_ns - s->ping_ns >= ISCSI_PING_TIMEOUT_MS * 1000000ull)
			iscsi_end(s, "no answer to a NOP-In ping in %u s",
				  ISCSI_PING_TIMEOUT_MS / 1000);
		return;
	}
	if (s->ntasks ||
	    now_ns - s->last_rx_ns < ISCSI_PING_IDLE_MS * 1000000ull)
		return;
	/* NOP-In with a TTT: the initiator must answer with a NOP-Out */
	iscsi_bhs_init(nop, ISCSI_OP_NOP_IN, 0, ISCSI_RSVD_TAG);
	if (++s->next_ttt == ISCSI_RSVD_TAG)
		++s->next_ttt;
	iscsi_put32(nop + 20, s->next_ttt);
	iscsi_put_sn(s, nop, false);
	s->ping_out = true;
	s->ping_ns = now_ns;
	iscsi_out_pdu(s, nop, NULL, 0, NULL);
}

int iscsi_session_new(struct bs_ctx *ctx, struct bs_exports *set,
		      const struct iscsi_session_ops *ops, void *arg,
		      struct iscsi_session **out)
{
	struct iscsi_session *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->rbuf = malloc(RBUF_LEN);
	if (!s->rbuf) {
		free(s);
		return -ENOMEM;
	}
	s->ctx = ctx;
	s->set = set;
	s->ops = ops;
	s->arg = arg;
	s->budget = ctx ? bs_ctx_budget(ctx) : NULL;
	s->bh.wake = budget_wake_fn;
	s->bh.evict = budget_evict;
	s->in = IN_BHS;
	s->last_rx_ns = bs_now_ns();
	iscsi_login_init(&s->login, &login_ops, s);
	*out = s;
	return 0;
}

void iscsi_session_eof(struct iscsi_session *s)
{
	if (s->eof)
		return;
	s->eof = true;
	if (!s->ended && !s->reason[0])
		snprintf(s->reason, sizeof(s->reason), "%s",
			 !s->ffp ? "initiator closed during login" :
			 s->in == IN_REST || s->have ?
			 "initiator vanished in the middle of a PDU" :
			 "initiator closed without logout");
	s->in = IN_NONE;
	drop_held(s);
	iscsi_tasks_drop(s);
	iscsi_kick(s);
}

void iscsi_session_shutdown(struct iscsi_session *s)
{
	s->shutdown = true;
	if (!s->ffp)
		iscsi_end(s, "server shutting down");
	else if (!s->reason[0])
		snprintf(s->reason, sizeof(s->reason), "server shutting down");
	iscsi_kick(s);
}

static unsigned executing(const struct iscsi_session *s)
{
	const struct iscsi_task *t;
	unsigned n = 0;

	for (t = s->tasks; t; t = t->next)
		if (t->executing)
			n++;
	return n;
}

bool iscsi_session_finished(const struct iscsi_session *s)
{
	if (executing(s) || s->tmf.core_wait)
		return false;
	if (s->ended || s->eof)
		return true;
	return s->shutdown && !s->ntasks && s->in == IN_BHS && !s->have;
}

unsigned iscsi_session_inflight(const struct iscsi_session *s)
{
	/* in the core; a write waiting for its Data-Out is the initiator's */
	return executing(s);
}

const char *iscsi_session_target(const struct iscsi_session *s)
{
	return s->ffp && !s->discovery ? s->tgt.name : NULL;
}

const struct iscsi_login_target *iscsi_session_login_target(
	const struct iscsi_session *s)
{
	return s->login.has_target ? &s->login.tgt : NULL;
}

const char *iscsi_session_initiator_port(const struct iscsi_session *s,
					 char *buf, size_t len)
{
	char isid[16];

	if (!s->login.initiator[0] || !s->login.started) {
		snprintf(buf, len, "%s", "");
		return buf;
	}
	hex_isid(s->login.isid, isid);
	snprintf(buf, len, "%s,i,0x%s", s->login.initiator, isid);
	return buf;
}

const char *iscsi_session_initiator(const struct iscsi_session *s)
{
	return s->login.initiator[0] ? s->login.initiator : NULL;
}

bool iscsi_session_full_feature(const struct iscsi_session *s)
{
	return s->ffp;
}

const char *iscsi_session_end_reason(const struct iscsi_session *s)
{
	return s->reason[0] ? s->reason : "closed";
}

const struct iscsi_session_stats *iscsi_session_stats(
	const struct iscsi_session *s)
{
	return &s->stats;
}

void iscsi_session_destroy(struct iscsi_session *s)
{
	struct bs_exports *set = s->set;
	bool held = s->orphan && s->set;

	while (s->out_head)
		out_pop(s);
	if (s->nexus)
		bs_scsi_nexus_free(s->nexus);
	/* the target (and its SCSI core) outlives every nexus of it */
	if (s->attached && s->detach)
		s->detach(&s->tgt);
	if (s->login.has_target && s->release)
		s->release(&s->login.tgt);
	if (s->budget)
		bs_budget_leave(s->budget, &s->bh);
	iscsi_login_free(&s->login);
	iscsi_text_free(&s->text);
	free(s->text_in);
	free(s->rbuf);
	free(s);
	if (held)
		bs_exports_release(set);
}

void iscsi_session_free(struct iscsi_session *s)
{
	if (!s)
		return;
	s->ops = NULL;
	s->arg = NULL;
	while (s->out_head)
		out_pop(s);
	s->in = IN_NONE;
	drop_held(s);
	iscsi_tasks_drop(s);
	if (executing(s) || s->tmf.core_wait) {
		/* the core still has commands (or a reset waits for other
		 * sessions' aborted ones): free on the last one */
		s->orphan = true;
		if (s->set)
			bs_exports_hold(s->set);
		return;
	}
	iscsi_session_destroy(s);
}
