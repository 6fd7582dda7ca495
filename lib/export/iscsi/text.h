/* SPDX-License-Identifier: MIT */
/*
 * iSCSI text keys (RFC 7143 sections 6 and 13): parsing a data segment of
 * key=value\0 pairs with every length bounded, building a response, and
 * the operational keys' negotiation rules (list, boolean AND / OR,
 * numerical min / max, declarative). Login and Text requests use it (not
 * a public API).
 */
#ifndef BLKSTACK_ISCSI_TEXT_H
#define BLKSTACK_ISCSI_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* RFC 7143 6.1: key names up to 63 bytes; values up to 255 bytes unless
 * the key allows more (CHAP challenges and responses: 8192 bytes of
 * binary as hex or base64). */
#define ISCSI_KEY_MAX 63
#define ISCSI_VALUE_MAX 255
#define ISCSI_VALUE_LONG_MAX 16384
/* Pairs in one request, at most. */
#define ISCSI_TEXT_PAIRS_MAX 128
/* A whole request or response (login/text, continuations joined). */
#define ISCSI_TEXT_MAX (64u << 10)

struct iscsi_kv {
	const char *key;
	const char *val;
};

/*
 * Split @buf (@len bytes; @buf[@len] must be writable: a missing final
 * NUL is added there) into pairs pointing into @buf. Returns the count,
 * or -EINVAL (a pair without '=', an empty or too long key, a too long
 * value) or -E2BIG (more than @max pairs). Trailing NUL padding is
 * ignored.
 */
int iscsi_text_parse(char *buf, size_t len, struct iscsi_kv *kv, int max);

/* A growing response: key=value\0 pairs. */
struct iscsi_text_out {
	char *buf;
	size_t len, cap;
	bool overflow;		/* over ISCSI_TEXT_MAX or out of memory */
};

void iscsi_text_add(struct iscsi_text_out *o, const char *key,
		    const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void iscsi_text_free(struct iscsi_text_out *o);
/* The value of @key in @buf/@len built by iscsi_text_add, or NULL. */
const char *iscsi_text_find(const char *buf, size_t len, const char *key);

/* Numbers: decimal, 0x hex (RFC 7143 5.1 numerical values). */
int iscsi_text_number(const char *v, uint64_t *out);

/* ---- operational parameters -------------------------------------------- */

/* The digests a target allows. */
#define ISCSI_DIGEST_NONE 1u
#define ISCSI_DIGEST_CRC32C 2u

/* What this target offers / accepts (its side of every rule). */
struct iscsi_target_params {
	unsigned header_digests, data_digests;	/* ISCSI_DIGEST_* bits */
	uint32_t max_recv_dsl;		/* declared: what we take per PDU */
	uint32_t max_burst;		/* numerical min: our largest */
	uint32_t first_burst;
	uint32_t max_outstanding_r2t;
	bool immediate_data;		/* AND */
	bool initial_r2t;		/* OR */
};

/* The negotiated values of one session / connection. */
struct iscsi_params {
	bool header_digest, data_digest;
	uint32_t max_xmit_dsl;		/* the initiator's
					 * MaxRecvDataSegmentLength */
	uint32_t max_recv_dsl;		/* ours, as declared */
	uint32_t max_burst, first_burst;
	uint32_t max_outstanding_r2t;
	bool immediate_data, initial_r2t;
	bool data_pdu_in_order, data_seq_in_order;
	uint32_t default_time2wait, default_time2retain;
	uint32_t erl, max_connections;
};

/* RFC 7143 defaults; the target's own receive length. */
void iscsi_params_default(struct iscsi_params *p,
			  const struct iscsi_target_params *tp);

/* Negotiation state of one login or text exchange. */
struct iscsi_neg {
	const struct iscsi_target_params *tp;
	struct iscsi_params *p;
	bool discovery;			/* session type Discovery */
	uint64_t seen;			/* operational keys seen, a bit each */
	bool declared_mrdsl;		/* our MaxRecvDataSegmentLength sent */
};

/*
 * Answer one operational key into @out. Returns 0 when answered (with the
 * result, Reject, Irrelevant), -ENOENT when @key is not an operational key
 * (the caller handles it or answers NotUnderstood), -EPROTO when the
 * initiator broke a rule (a key offered twice: the login fails with
 * initiator error).
 */
int iscsi_neg_key(struct iscsi_neg *n, const char *key, const char *val,
		  struct iscsi_text_out *out);
/*
 * After the operational keys of one request: declare what the target must
 * declare (MaxRecvDataSegmentLength, once) and apply the dependent rules
 * (FirstBurstLength <= MaxBurstLength).
 */
void iscsi_neg_finish(struct iscsi_neg *n, struct iscsi_text_out *out);

#endif
