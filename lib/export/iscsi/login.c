/* SPDX-License-Identifier: MIT */
/*
 * iSCSI login, one connection (RFC 7143 6.3, 11.12, 11.13, 12.1.3).
 *
 * Every refusal answers a status class and detail and ends the login:
 *   02/00 initiator error      T and C together, a stage out of order, a
 *                              bad NSG, a malformed key, a key offered
 *                              twice, a security key outside security
 *   02/01 authentication       CHAP required and not offered, a wrong
 *         failure              user or response, mutual CHAP without a
 *                              mutual secret, a reflected challenge
 *   02/03 not found            no target of that TargetName here
 *   02/05 unsupported version  Version-min above 0
 *   02/07 missing parameter    no InitiatorName, no TargetName (Normal)
 *   02/09 session type         SessionType neither Normal nor Discovery
 *   02/0a no such session      a TSIH != 0 (we never add connections)
 * Discovery sessions need no authentication (they only list names).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/iscsi/login.h"
#include "export/iscsi/pdu.h"

void iscsi_login_init(struct iscsi_login *l, const struct iscsi_login_ops *ops,
		      void *arg)
{
	memset(l, 0, sizeof(*l));
	l->ops = ops;
	l->arg = arg;
}

void iscsi_login_free(struct iscsi_login *l)
{
	free(l->cbuf);
	l->cbuf = NULL;
	l->clen = 0;
}

static int refuse(struct iscsi_login *l, uint8_t *rsp,
		  struct iscsi_text_out *out, uint16_t status,
		  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static int refuse(struct iscsi_login *l, uint8_t *rsp,
		  struct iscsi_text_out *out, uint16_t status,
		  const char *fmt, ...)
{
	va_list ap;

	l->status = status;
	va_start(ap, fmt);
	vsnprintf(l->why, sizeof(l->why), fmt, ap);
	va_end(ap);
	rsp[1] &= (uint8_t)~(ISCSI_LOGIN_TRANSIT | 3);
	rsp[36] = (uint8_t)(status >> 8);
	rsp[37] = (uint8_t)status;
	out->len = 0;	/* a refusal carries no keys */
	return -EACCES;
}

/* Is @word one of the comma-separated values of @list? */
static bool list_has(const char *list, const char *word)
{
	size_t n = strlen(word);
	const char *p = list;

	while (p && *p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && !memcmp(p, word, n))
			return true;
		p = e ? e + 1 : NULL;
	}
	return false;
}

static bool same_bytes(const uint8_t *a, const uint8_t *b, size_t n)
{
	uint8_t d = 0;
	size_t i;

	for (i = 0; i < n; i++)
		d |= a[i] ^ b[i];
	return !d;
}

struct chap_keys {
	const char *a, *n, *r, *i, *c;
};

static bool is_security_key(const char *k)
{
	return !strcmp(k, "AuthMethod") || !strncmp(k, "CHAP_", 5);
}

/* InitiatorName, SessionType, TargetName...: pass one. */
static int identity_keys(struct iscsi_login *l, const struct iscsi_kv *kv,
			 int n, uint8_t *rsp, struct iscsi_text_out *out)
{
	int i;

	for (i = 0; i < n; i++) {
		const char *k = kv[i].key, *v = kv[i].val;

		if (!strcmp(k, "InitiatorName")) {
			if (!*v || strlen(v) >= ISCSI_NAME_MAX)
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_INITIATOR_ERROR,
					      "InitiatorName of %zu bytes",
					      strlen(v));
			if (l->initiator[0] && strcmp(l->initiator, v))
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_INITIATOR_ERROR,
					      "InitiatorName changed during "
					      "login");
			snprintf(l->initiator, sizeof(l->initiator), "%s", v);
		} else if (!strcmp(k, "TargetName")) {
			if (!*v || strlen(v) >= ISCSI_NAME_MAX)
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_NOT_FOUND,
					      "TargetName of %zu bytes",
					      strlen(v));
			if (l->started && l->target[0] && strcmp(l->target, v))
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_INITIATOR_ERROR,
					      "TargetName changed during "
					      "login");
			snprintf(l->target, sizeof(l->target), "%s", v);
		} else if (!strcmp(k, "SessionType")) {
			bool disc = !strcmp(v, "Discovery");

			if (!disc && strcmp(v, "Normal"))
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_NO_SESSION_TYPE,
					      "SessionType '%s'", v);
			/* the target and its rules (CHAP) were chosen
			 * by the first request: no switching later */
			if (l->resolved && disc != l->discovery)
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_INITIATOR_ERROR,
					      "SessionType changed during "
					      "login");
			l->discovery = disc;
		}
	}
	return 0;
}

/* After the first request's identity keys: which target, which rules. */
static int resolve(struct iscsi_login *l, uint8_t *rsp,
		   struct iscsi_text_out *out)
{
	const struct iscsi_target_params *tp;

	if (!l->initiator[0])
		return refuse(l, rsp, out, ISCSI_LOGIN_MISSING_PARAM,
			      "no InitiatorName");
	if (l->discovery) {
		tp = l->ops->discovery_params(l->arg);
		l->dparams = *tp;
		tp = &l->dparams;
	} else {
		if (!l->target[0])
			return refuse(l, rsp, out, ISCSI_LOGIN_MISSING_PARAM,
				      "no TargetName in a normal session");
		if (l->ops->find(l->arg, l->target, &l->tgt))
			return refuse(l, rsp, out, ISCSI_LOGIN_NOT_FOUND,
				      "no target '%s' here", l->target);
		l->has_target = true;
		tp = l->tgt.tp;
	}
	iscsi_params_default(&l->params, tp);
	l->neg.tp = tp;
	l->neg.p = &l->params;
	l->neg.discovery = l->discovery;
	l->resolved = true;
	return 0;
}

static bool chap_required(const struct iscsi_login *l)
{
	return !l->discovery && l->has_target && l->tgt.chap_user &&
	       l->tgt.chap_secret;
}

static int auth_method(struct iscsi_login *l, const char *v, uint8_t *rsp,
		       struct iscsi_text_out *out)
{
	if (l->auth != AUTH_START)
		return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
			      "AuthMethod offered twice");
	if (chap_required(l)) {
		if (!list_has(v, "CHAP"))
			return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
				      "CHAP is required; AuthMethod=%s", v);
		iscsi_text_add(out, "AuthMethod", "CHAP");
		l->chap = true;
		l->auth = AUTH_CHAP_WAIT_A;
		return 0;
	}
	if (!list_has(v, "None"))
		return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
			      "no CHAP secret for this target; AuthMethod=%s",
			      v);
	iscsi_text_add(out, "AuthMethod", "None");
	l->auth = AUTH_DONE;
	return 0;
}

static int chap_step(struct iscsi_login *l, const struct chap_keys *ck,
		     uint8_t *rsp, struct iscsi_text_out *out)
{
	uint8_t resp[ISCSI_CHAP_BIN_MAX], want[ISCSI_CHAP_DIGEST_LEN];
	char hex[2 + 2 * ISCSI_CHAP_DIGEST_LEN + 1];
	char chal[2 + 2 * ISCSI_CHAP_CHALLENGE_LEN + 1];
	uint64_t id;
	int n, err;

	if (ck->a) {
		if (l->auth != AUTH_CHAP_WAIT_A)
			return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
				      "CHAP_A out of turn");
		if (!list_has(ck->a, "5")) {
			iscsi_text_add(out, "CHAP_A", "Reject");
			return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
				      "CHAP_A=%s: only MD5 (5) is offered",
				      ck->a);
		}
		if ((err = l->ops->random(l->arg, &l->chap_id, 1)) ||
		    (err = l->ops->random(l->arg, l->chap_chal,
					  sizeof(l->chap_chal))))
			return refuse(l, rsp, out, ISCSI_LOGIN_TARGET_ERROR,
				      "no random bytes for the CHAP challenge: "
				      "%s", strerror(-err));
		iscsi_chap_hex(l->chap_chal, sizeof(l->chap_chal), chal);
		iscsi_text_add(out, "CHAP_A", "%d", ISCSI_CHAP_MD5);
		iscsi_text_add(out, "CHAP_I", "%u", l->chap_id);
		iscsi_text_add(out, "CHAP_C", "%s", chal);
		l->auth = AUTH_CHAP_WAIT_R;
		return 0;
	}
	if (!ck->n && !ck->r && !ck->i && !ck->c)
		return 0;
	if (l->auth != AUTH_CHAP_WAIT_R || !ck->n || !ck->r)
		return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
			      "CHAP_N/CHAP_R missing or out of turn");
	n = iscsi_chap_decode(ck->r, resp, sizeof(resp));
	iscsi_chap_response(l->chap_id, l->tgt.chap_secret, l->chap_chal,
			    sizeof(l->chap_chal), want);
	if (strcmp(ck->n, l->tgt.chap_user) || n != ISCSI_CHAP_DIGEST_LEN ||
	    !same_bytes(resp, want, sizeof(want)))
		return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
			      "CHAP: wrong user or secret for user '%.64s'",
			      ck->n);
	if (!ck->i != !ck->c)
		return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
			      "mutual CHAP needs both CHAP_I and CHAP_C");
	if (ck->i) {
		if (!l->tgt.mutual_user || !l->tgt.mutual_secret)
			return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
				      "mutual CHAP asked; the target has no "
				      "mutual secret");
		if (iscsi_text_number(ck->i, &id) || id > 255)
			return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
				      "CHAP_I '%.32s'", ck->i);
		n = iscsi_chap_decode(ck->c, resp, sizeof(resp));
		if (n <= 0)
			return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
				      "CHAP_C malformed");
		/* a challenge that is our own, reflected, is an attack */
		if (n == ISCSI_CHAP_CHALLENGE_LEN &&
		    same_bytes(resp, l->chap_chal, (size_t)n))
			return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
				      "CHAP_C reflects the target's "
				      "challenge");
		iscsi_chap_response((uint8_t)id, l->tgt.mutual_secret, resp,
				    (size_t)n, want);
		iscsi_chap_hex(want, sizeof(want), hex);
		iscsi_text_add(out, "CHAP_N", "%s", l->tgt.mutual_user);
		iscsi_text_add(out, "CHAP_R", "%s", hex);
	}
	l->auth = AUTH_DONE;
	return 0;
}

/* Everything but the identity keys: pass two. */
static int other_keys(struct iscsi_login *l, const struct iscsi_kv *kv, int n,
		      uint8_t *rsp, struct iscsi_text_out *out)
{
	struct chap_keys ck = { 0 };
	const char **slot;
	int i, err;

	for (i = 0; i < n; i++) {
		const char *k = kv[i].key, *v = kv[i].val;

		if (!strcmp(k, "InitiatorName") || !strcmp(k, "TargetName") ||
		    !strcmp(k, "SessionType") || !strcmp(k, "InitiatorAlias"))
			continue;
		if (is_security_key(k)) {
			if (l->stage != ISCSI_STAGE_SECURITY)
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_INITIATOR_ERROR,
					      "%s outside the security stage",
					      k);
			if (!strcmp(k, "AuthMethod")) {
				err = auth_method(l, v, rsp, out);
				if (err)
					return err;
				continue;
			}
			slot = !strcmp(k, "CHAP_A") ? &ck.a :
			       !strcmp(k, "CHAP_N") ? &ck.n :
			       !strcmp(k, "CHAP_R") ? &ck.r :
			       !strcmp(k, "CHAP_I") ? &ck.i :
			       !strcmp(k, "CHAP_C") ? &ck.c : NULL;
			if (!slot) {
				iscsi_text_add(out, k, "NotUnderstood");
				continue;
			}
			if (!l->chap || *slot)
				return refuse(l, rsp, out,
					      ISCSI_LOGIN_INITIATOR_ERROR,
					      "%s without CHAP chosen, or "
					      "twice", k);
			*slot = v;
			continue;
		}
		err = iscsi_neg_key(&l->neg, k, v, out);
		if (err == -EPROTO)
			return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
				      "key %s offered twice", k);
		if (err == -ENOENT)
			iscsi_text_add(out, k, "NotUnderstood");
	}
	if (l->chap)
		return chap_step(l, &ck, rsp, out);
	return 0;
}

static int join_continued(struct iscsi_login *l, const uint8_t *data,
			  uint32_t dsl)
{
	char *b;

	if (l->clen + dsl > ISCSI_TEXT_MAX)
		return -E2BIG;
	b = realloc(l->cbuf, l->clen + dsl + 1);
	if (!b)
		return -ENOMEM;
	memcpy(b + l->clen, data, dsl);
	l->cbuf = b;
	l->clen += dsl;
	return 0;
}

int iscsi_login_pdu(struct iscsi_login *l, const uint8_t *bhs,
		    const uint8_t *data, uint32_t dsl, uint8_t *rsp,
		    struct iscsi_text_out *out)
{
	uint8_t flags = bhs[1], csg = ISCSI_LOGIN_CSG(flags);
	uint8_t nsg = ISCSI_LOGIN_NSG(flags);
	bool transit = flags & ISCSI_LOGIN_TRANSIT;
	struct iscsi_kv kv[ISCSI_TEXT_PAIRS_MAX];
	bool first = !l->started;
	int n, err;

	iscsi_bhs_init(rsp, ISCSI_OP_LOGIN_RSP, 0, iscsi_itt(bhs));
	rsp[1] = (uint8_t)(csg << 2);
	memcpy(rsp + 8, bhs + 8, 6);	/* ISID */
	l->itt = iscsi_itt(bhs);
	out->len = 0;

	if (transit && (flags & ISCSI_FLAG_CONTINUE))
		return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
			      "T and C bits both set");
	if (bhs[3] > 0)
		return refuse(l, rsp, out, ISCSI_LOGIN_BAD_VERSION,
			      "Version-min %u (we speak 0)", bhs[3]);
	if (first) {
		memcpy(l->isid, bhs + 8, 6);
		if (iscsi_get16(bhs + 14))
			return refuse(l, rsp, out, ISCSI_LOGIN_NO_SESSION,
				      "TSIH %u: no such session (one "
				      "connection per session)",
				      iscsi_get16(bhs + 14));
		if (csg != ISCSI_STAGE_SECURITY &&
		    csg != ISCSI_STAGE_OPERATIONAL)
			return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
				      "first login request in stage %u", csg);
		l->stage = csg;
		l->started = true;
	} else {
		if (csg != l->stage)
			return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
				      "stage %u where %u was expected", csg,
				      l->stage);
		if (memcmp(l->isid, bhs + 8, 6))
			return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
				      "ISID changed during login");
	}
	if (transit && (nsg <= csg || nsg == 2))
		return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
			      "transit from stage %u to %u", csg, nsg);

	/* a continued request: acknowledge, answer once it is whole */
	if (dsl && join_continued(l, data, dsl))
		return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
			      "login text over %u bytes", ISCSI_TEXT_MAX);
	if (flags & ISCSI_FLAG_CONTINUE)
		return 0;
	n = 0;
	if (l->clen) {
		n = iscsi_text_parse(l->cbuf, l->clen, kv,
				     ISCSI_TEXT_PAIRS_MAX);
		l->clen = 0;
	}
	if (n < 0)
		return refuse(l, rsp, out, ISCSI_LOGIN_INITIATOR_ERROR,
			      "malformed login text");

	/*
	 * The first whole request (a first PDU with the C bit set is only
	 * its beginning) names the session type and target: everything
	 * below needs the rules resolve() picks.
	 */
	first = !l->resolved;
	err = identity_keys(l, kv, n, rsp, out);
	if (!err && first)
		err = resolve(l, rsp, out);
	if (err)
		return err;
	if (l->stage == ISCSI_STAGE_OPERATIONAL && chap_required(l) &&
	    l->auth != AUTH_DONE)
		return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
			      "CHAP is required: login skipped the security "
			      "stage");
	if (first)
		iscsi_text_add(out, "TargetPortalGroupTag", "%u", ISCSI_TPGT);
	err = other_keys(l, kv, n, rsp, out);
	if (err)
		return err;
	if (l->stage == ISCSI_STAGE_SECURITY && l->auth == AUTH_START &&
	    transit) {
		/* no AuthMethod offered: only a target without CHAP lets
		 * the initiator through */
		if (chap_required(l))
			return refuse(l, rsp, out, ISCSI_LOGIN_AUTH_FAILED,
				      "CHAP is required; no AuthMethod "
				      "offered");
		l->auth = AUTH_DONE;
	}
	if (l->stage == ISCSI_STAGE_OPERATIONAL || nsg == ISCSI_STAGE_FULL)
		iscsi_neg_finish(&l->neg, out);
	if (out->overflow)
		return refuse(l, rsp, out, ISCSI_LOGIN_TARGET_ERROR,
			      "login response too long");
	if (!transit)
		return 0;
	if (l->stage == ISCSI_STAGE_SECURITY && l->auth != AUTH_DONE)
		return 0;	/* the exchange goes on in this stage */
	rsp[1] = (uint8_t)(ISCSI_LOGIN_TRANSIT | csg << 2 | nsg);
	l->stage = nsg;
	if (nsg != ISCSI_STAGE_FULL)
		return 0;
	l->tsih = l->ops->tsih(l->arg);
	iscsi_put16(rsp + 14, l->tsih);
	return 1;
}
