/* SPDX-License-Identifier: MIT */
/*
 * iSCSI text keys: the key=value\0 format and the negotiation rules of the
 * operational keys (RFC 7143 sections 6 and 13).
 *
 * Each operational key has one rule:
 *   list       the responder picks the first offered value it supports
 *   and / or   booleans: Yes only if both say Yes / Yes if either does
 *   min / max  numbers: the lesser / greater of offer and our value
 *   declare    each side states its own value (MaxRecvDataSegmentLength)
 * A value out of its range is answered "Reject" (6.2), a key that does
 * not apply to the session type "Irrelevant", an unknown key
 * "NotUnderstood" (the caller's, -ENOENT).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/iscsi/text.h"

/* ---- format ------------------------------------------------------------- */

static bool long_value_key(const char *key)
{
	return !strcmp(key, "CHAP_C") || !strcmp(key, "CHAP_R");
}

int iscsi_text_parse(char *buf, size_t len, struct iscsi_kv *kv, int max)
{
	size_t off = 0;
	int n = 0;

	buf[len] = '\0';
	while (off < len) {
		char *pair = buf + off, *eq;
		size_t plen = strlen(pair), klen, vlen;

		off += plen + 1;
		if (!plen)
			continue;	/* padding */
		eq = memchr(pair, '=', plen);
		if (!eq)
			return -EINVAL;
		klen = (size_t)(eq - pair);
		vlen = plen - klen - 1;
		if (!klen || klen > ISCSI_KEY_MAX)
			return -EINVAL;
		*eq = '\0';
		if (vlen > (long_value_key(pair) ? ISCSI_VALUE_LONG_MAX :
						   ISCSI_VALUE_MAX))
			return -EINVAL;
		if (n == max)
			return -E2BIG;
		kv[n].key = pair;
		kv[n].val = eq + 1;
		n++;
	}
	return n;
}

void iscsi_text_add(struct iscsi_text_out *o, const char *key,
		    const char *fmt, ...)
{
	char val[ISCSI_VALUE_LONG_MAX + 8];
	size_t klen = strlen(key), vlen, need;
	va_list ap;
	int r;

	if (o->overflow)
		return;
	va_start(ap, fmt);
	r = vsnprintf(val, sizeof(val), fmt, ap);
	va_end(ap);
	if (r < 0 || (size_t)r >= sizeof(val)) {
		o->overflow = true;
		return;
	}
	vlen = (size_t)r;
	need = o->len + klen + 1 + vlen + 1;
	if (need > ISCSI_TEXT_MAX) {
		o->overflow = true;
		return;
	}
	if (need > o->cap) {
		size_t cap = o->cap ? o->cap * 2 : 512;
		char *b;

		while (cap < need)
			cap *= 2;
		b = realloc(o->buf, cap);
		if (!b) {
			o->overflow = true;
			return;
		}
		o->buf = b;
		o->cap = cap;
	}
	memcpy(o->buf + o->len, key, klen);
	o->buf[o->len + klen] = '=';
	memcpy(o->buf + o->len + klen + 1, val, vlen);
	o->buf[o->len + klen + 1 + vlen] = '\0';
	o->len = need;
}

void iscsi_text_free(struct iscsi_text_out *o)
{
	free(o->buf);
	memset(o, 0, sizeof(*o));
}

const char *iscsi_text_find(const char *buf, size_t len, const char *key)
{
	size_t off = 0, klen = strlen(key);

	while (off < len) {
		const char *pair = buf + off;
		size_t plen = strnlen(pair, len - off);

		if (plen > klen && !memcmp(pair, key, klen) &&
		    pair[klen] == '=')
			return pair + klen + 1;
		off += plen + 1;
	}
	return NULL;
}

int iscsi_text_number(const char *v, uint64_t *out)
{
	uint64_t x = 0;
	const char *p = v;
	int base = 10, digits = 0;

	if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		p += 2;
	}
	for (; *p; p++, digits++) {
		int d;

		if (*p >= '0' && *p <= '9')
			d = *p - '0';
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = *p - 'a' + 10;
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = *p - 'A' + 10;
		else
			return -EINVAL;
		if (x > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -ERANGE;
		x = x * (uint64_t)base + (uint64_t)d;
	}
	if (!digits)
		return -EINVAL;
	*out = x;
	return 0;
}

/* ---- negotiation --------------------------------------------------------- */

enum rule { R_LIST, R_AND, R_OR, R_MIN, R_MAX, R_DECLARE };

enum key_id {
	K_HEADER_DIGEST, K_DATA_DIGEST, K_MAX_CONNECTIONS, K_INITIAL_R2T,
	K_IMMEDIATE_DATA, K_MRDSL, K_MAX_BURST, K_FIRST_BURST,
	K_TIME2WAIT, K_TIME2RETAIN, K_MAX_OUTSTANDING_R2T, K_DATA_PDU_ORDER,
	K_DATA_SEQ_ORDER, K_ERL, K_IFMARKER, K_OFMARKER, K_IFMARKINT,
	K_OFMARKINT, K_PROTOCOL_LEVEL, K_TASK_REPORTING,
};

static const struct key_def {
	const char *name;
	enum rule rule;
	uint64_t lo, hi;	/* numbers */
	bool discovery_irrelevant;
} keys[] = {
	[K_HEADER_DIGEST] = { "HeaderDigest", R_LIST, 0, 0, false },
	[K_DATA_DIGEST] = { "DataDigest", R_LIST, 0, 0, false },
	[K_MAX_CONNECTIONS] = { "MaxConnections", R_MIN, 1, 65535, true },
	[K_INITIAL_R2T] = { "InitialR2T", R_OR, 0, 0, true },
	[K_IMMEDIATE_DATA] = { "ImmediateData", R_AND, 0, 0, true },
	[K_MRDSL] = { "MaxRecvDataSegmentLength", R_DECLARE, 512, 16777215,
		      false },
	[K_MAX_BURST] = { "MaxBurstLength", R_MIN, 512, 16777215, true },
	[K_FIRST_BURST] = { "FirstBurstLength", R_MIN, 512, 16777215, true },
	[K_TIME2WAIT] = { "DefaultTime2Wait", R_MAX, 0, 3600, false },
	[K_TIME2RETAIN] = { "DefaultTime2Retain", R_MIN, 0, 3600, false },
	[K_MAX_OUTSTANDING_R2T] = { "MaxOutstandingR2T", R_MIN, 1, 65535,
				    true },
	[K_DATA_PDU_ORDER] = { "DataPDUInOrder", R_OR, 0, 0, true },
	[K_DATA_SEQ_ORDER] = { "DataSequenceInOrder", R_OR, 0, 0, true },
	[K_ERL] = { "ErrorRecoveryLevel", R_MIN, 0, 2, false },
	/* markers: obsolete in RFC 7143; we never use them */
	[K_IFMARKER] = { "IFMarker", R_AND, 0, 0, false },
	[K_OFMARKER] = { "OFMarker", R_AND, 0, 0, false },
	[K_IFMARKINT] = { "IFMarkInt", R_LIST, 0, 0, false },
	[K_OFMARKINT] = { "OFMarkInt", R_LIST, 0, 0, false },
	[K_PROTOCOL_LEVEL] = { "iSCSIProtocolLevel", R_MIN, 0, 31, false },
	[K_TASK_REPORTING] = { "TaskReporting", R_LIST, 0, 0, true },
};

void iscsi_params_default(struct iscsi_params *p,
			  const struct iscsi_target_params *tp)
{
	memset(p, 0, sizeof(*p));
	p->max_xmit_dsl = 8192;
	p->max_recv_dsl = tp->max_recv_dsl;
	p->max_burst = 262144;
	p->first_burst = 65536;
	p->max_outstanding_r2t = 1;
	p->immediate_data = true;
	p->initial_r2t = true;
	p->data_pdu_in_order = true;
	p->data_seq_in_order = true;
	p->default_time2wait = 2;
	p->default_time2retain = 20;
	p->erl = 0;
	p->max_connections = 1;
}

static int parse_bool(const char *v, bool *out)
{
	if (!strcmp(v, "Yes"))
		*out = true;
	else if (!strcmp(v, "No"))
		*out = false;
	else
		return -EINVAL;
	return 0;
}

/* The first value of the offered list @v that @ok accepts, or NULL. */
static const char *pick(const char *v, bool (*ok)(const char *w, void *arg),
			void *arg, char *buf, size_t len)
{
	const char *p = v;

	while (*p) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);

		if (n && n < len) {
			memcpy(buf, p, n);
			buf[n] = '\0';
			if (ok(buf, arg))
				return buf;
		}
		if (!e)
			break;
		p = e + 1;
	}
	return NULL;
}

static bool digest_ok(const char *w, void *arg)
{
	unsigned allowed = *(unsigned *)arg;

	return (!strcmp(w, "None") && (allowed & ISCSI_DIGEST_NONE)) ||
	       (!strcmp(w, "CRC32C") && (allowed & ISCSI_DIGEST_CRC32C));
}

static bool reporting_ok(const char *w, void *arg)
{
	(void)arg;
	return !strcmp(w, "RFC3720");
}

static int find_key(const char *key)
{
	size_t i;

	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i].name, key))
			return (int)i;
	return -1;
}

static void answer_list(struct iscsi_neg *n, enum key_id id, const char *val,
			struct iscsi_text_out *out)
{
	const struct key_def *k = &keys[id];
	char buf[ISCSI_VALUE_MAX + 1];
	const char *r = NULL;
	unsigned allowed;

	switch (id) {
	case K_HEADER_DIGEST:
	case K_DATA_DIGEST:
		allowed = id == K_HEADER_DIGEST ? n->tp->header_digests :
						  n->tp->data_digests;
		r = pick(val, digest_ok, &allowed, buf, sizeof(buf));
		if (r && id == K_HEADER_DIGEST)
			n->p->header_digest = !strcmp(r, "CRC32C");
		else if (r)
			n->p->data_digest = !strcmp(r, "CRC32C");
		break;
	case K_TASK_REPORTING:
		r = pick(val, reporting_ok, NULL, buf, sizeof(buf));
		break;
	default:
		/* IFMarkInt / OFMarkInt: markers are never used */
		iscsi_text_add(out, k->name, "Irrelevant");
		return;
	}
	iscsi_text_add(out, k->name, "%s", r ? r : "Reject");
}

static void apply_bool(struct iscsi_neg *n, enum key_id id, bool v)
{
	switch (id) {
	case K_INITIAL_R2T:
		n->p->initial_r2t = v;
		break;
	case K_IMMEDIATE_DATA:
		n->p->immediate_data = v;
		break;
	case K_DATA_PDU_ORDER:
		n->p->data_pdu_in_order = v;
		break;
	case K_DATA_SEQ_ORDER:
		n->p->data_seq_in_order = v;
		break;
	default:
		break;
	}
}

static bool our_bool(const struct iscsi_neg *n, enum key_id id)
{
	switch (id) {
	case K_INITIAL_R2T:
		return n->tp->initial_r2t;
	case K_IMMEDIATE_DATA:
		return n->tp->immediate_data;
	case K_DATA_PDU_ORDER:
	case K_DATA_SEQ_ORDER:
		/*
		 * Yes (the result is the OR of both sides: always Yes): a
		 * write's data must come in order, each PDU where the one
		 * before ended, so that the bytes counted are the bytes
		 * written. Out of order, overlapping PDUs would count twice
		 * and a write could go out with parts never sent.
		 */
		return true;
	default:
		return false;	/* markers: No */
	}
}

static uint64_t our_number(const struct iscsi_neg *n, enum key_id id)
{
	switch (id) {
	case K_MAX_CONNECTIONS:
		return 1;
	case K_MAX_BURST:
		return n->tp->max_burst;
	case K_FIRST_BURST:
		return n->tp->first_burst;
	case K_TIME2WAIT:
	case K_TIME2RETAIN:
		return 0;	/* ERL 0: nothing to wait for or retain */
	case K_MAX_OUTSTANDING_R2T:
		return n->tp->max_outstanding_r2t;
	case K_ERL:
		return 0;
	case K_PROTOCOL_LEVEL:
		return 1;	/* RFC 7143 */
	default:
		return 0;
	}
}

static void apply_number(struct iscsi_neg *n, enum key_id id, uint32_t v)
{
	switch (id) {
	case K_MAX_CONNECTIONS:
		n->p->max_connections = v;
		break;
	case K_MAX_BURST:
		n->p->max_burst = v;
		break;
	case K_FIRST_BURST:
		n->p->first_burst = v;
		break;
	case K_TIME2WAIT:
		n->p->default_time2wait = v;
		break;
	case K_TIME2RETAIN:
		n->p->default_time2retain = v;
		break;
	case K_MAX_OUTSTANDING_R2T:
		n->p->max_outstanding_r2t = v;
		break;
	case K_ERL:
		n->p->erl = v;
		break;
	case K_MRDSL:
		n->p->max_xmit_dsl = v;
		break;
	default:
		break;
	}
}

int iscsi_neg_key(struct iscsi_neg *n, const char *key, const char *val,
		  struct iscsi_text_out *out)
{
	int id = find_key(key);
	const struct key_def *k;
	uint64_t v, ours;
	bool b;

	if (id < 0)
		return -ENOENT;
	k = &keys[id];
	if (n->seen & (1ull << id))
		return -EPROTO;	/* offered twice in one negotiation */
	n->seen |= 1ull << id;
	/* an answer of the initiator's to a key we offered: nothing to do */
	if (!strcmp(val, "Reject") || !strcmp(val, "Irrelevant") ||
	    !strcmp(val, "NotUnderstood"))
		return 0;
	if (n->discovery && k->discovery_irrelevant) {
		iscsi_text_add(out, k->name, "Irrelevant");
		return 0;
	}
	switch (k->rule) {
	case R_LIST:
		answer_list(n, (enum key_id)id, val, out);
		return 0;
	case R_AND:
	case R_OR:
		if (parse_bool(val, &b)) {
			iscsi_text_add(out, k->name, "Reject");
			return 0;
		}
		b = k->rule == R_AND ? b && our_bool(n, (enum key_id)id) :
				       b || our_bool(n, (enum key_id)id);
		apply_bool(n, (enum key_id)id, b);
		iscsi_text_add(out, k->name, "%s", b ? "Yes" : "No");
		return 0;
	case R_MIN:
	case R_MAX:
	case R_DECLARE:
		if (iscsi_text_number(val, &v) || v < k->lo || v > k->hi) {
			iscsi_text_add(out, k->name, "Reject");
			return 0;
		}
		if (k->rule == R_DECLARE) {
			/* the initiator's own receive limit: no answer due */
			apply_number(n, (enum key_id)id, (uint32_t)v);
			return 0;
		}
		ours = our_number(n, (enum key_id)id);
		if (k->rule == R_MIN ? ours < v : ours > v)
			v = ours;
		apply_number(n, (enum key_id)id, (uint32_t)v);
		iscsi_text_add(out, k->name, "%llu", (unsigned long long)v);
		return 0;
	}
	return 0;
}

void iscsi_neg_finish(struct iscsi_neg *n, struct iscsi_text_out *out)
{
	if (!n->declared_mrdsl) {
		iscsi_text_add(out, "MaxRecvDataSegmentLength", "%u",
			       n->tp->max_recv_dsl);
		n->declared_mrdsl = true;
	}
	/* 13.14: FirstBurstLength MUST NOT exceed MaxBurstLength */
	if (n->p->first_burst > n->p->max_burst)
		n->p->first_burst = n->p->max_burst;
}
