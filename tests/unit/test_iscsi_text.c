/* SPDX-License-Identifier: MIT */
/*
 * iSCSI text keys: the key=value\0 format with every length bounded, and
 * the negotiation rule of each operational key (RFC 7143 section 13):
 * list, boolean AND / OR, numerical min / max, declarative, Reject for a
 * value out of range, Irrelevant in discovery sessions, a key offered
 * twice refused, unknown keys left to the caller (NotUnderstood).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "export/iscsi/text.h"
#include "helpers/th.h"

static int parse(const char *s, size_t len, struct iscsi_kv *kv, int max,
		 char *buf)
{
	memcpy(buf, s, len);
	return iscsi_text_parse(buf, len, kv, max);
}

static void parse_pairs_and_bounds(void **state)
{
	struct iscsi_kv kv[4];
	char buf[600], big[600];
	int n;

	(void)state;
	n = parse("A=1\0B=two\0", 10, kv, 4, buf);
	assert_int_equal(n, 2);
	assert_string_equal(kv[0].key, "A");
	assert_string_equal(kv[1].val, "two");
	/* no final NUL, and NUL padding to 4 bytes */
	assert_int_equal(parse("A=1", 3, kv, 4, buf), 1);
	assert_int_equal(parse("A=1\0\0\0\0", 7, kv, 4, buf), 1);
	/* empty value is a value */
	assert_int_equal(parse("A=\0", 3, kv, 4, buf), 1);
	assert_string_equal(kv[0].val, "");
	/* malformed */
	assert_int_equal(parse("A1\0", 3, kv, 4, buf), -EINVAL);
	assert_int_equal(parse("=1\0", 3, kv, 4, buf), -EINVAL);
	/* too many pairs */
	assert_int_equal(parse("A=1\0B=1\0C=1\0", 12, kv, 2, buf), -E2BIG);
	/* a 64-byte key, a 256-byte value: over the limits */
	memset(big, 'K', 64);
	memcpy(big + 64, "=1", 2);
	assert_int_equal(parse(big, 66, kv, 4, buf), -EINVAL);
	memcpy(big + 63, "=1", 2);
	assert_int_equal(parse(big, 65, kv, 4, buf), 1);
	memcpy(big, "A=", 2);
	memset(big + 2, 'v', 256);
	assert_int_equal(parse(big, 258, kv, 4, buf), -EINVAL);
	/* CHAP_C may be long */
	memcpy(big, "CHAP_C=0x", 9);
	memset(big + 9, 'a', 500);
	assert_int_equal(parse(big, 509, kv, 4, buf), 1);
}

static void out_builder_and_find(void **state)
{
	struct iscsi_text_out o = { 0 };
	int i;

	(void)state;
	iscsi_text_add(&o, "A", "%d", 5);
	iscsi_text_add(&o, "Bee", "%s", "x");
	assert_int_equal(o.len, 10);
	assert_memory_equal(o.buf, "A=5\0Bee=x\0", 10);
	assert_string_equal(iscsi_text_find(o.buf, o.len, "Bee"), "x");
	assert_null(iscsi_text_find(o.buf, o.len, "Be"));
	for (i = 0; i < 10000 && !o.overflow; i++)
		iscsi_text_add(&o, "Key", "%0200d", i);
	assert_true(o.overflow);
	assert_true(o.len <= ISCSI_TEXT_MAX);
	iscsi_text_free(&o);
}

static void numbers(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(iscsi_text_number("8192", &v), 0);
	assert_int_equal(v, 8192);
	assert_int_equal(iscsi_text_number("0x2000", &v), 0);
	assert_int_equal(v, 8192);
	assert_int_equal(iscsi_text_number("", &v), -EINVAL);
	assert_int_equal(iscsi_text_number("0x", &v), -EINVAL);
	assert_int_equal(iscsi_text_number("12a", &v), -EINVAL);
	assert_int_equal(iscsi_text_number("-1", &v), -EINVAL);
	assert_int_equal(iscsi_text_number("99999999999999999999999", &v),
			 -ERANGE);
}

static const struct iscsi_target_params tp = {
	.header_digests = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C,
	.data_digests = ISCSI_DIGEST_NONE,
	.max_recv_dsl = 262144,
	.max_burst = 1048576,
	.first_burst = 65536,
	.max_outstanding_r2t = 4,
	.immediate_data = true,
	.initial_r2t = false,
};

struct neg {
	struct iscsi_params p;
	struct iscsi_neg n;
	struct iscsi_text_out out;
};

static void neg_init(struct neg *x, bool discovery)
{
	memset(x, 0, sizeof(*x));
	iscsi_params_default(&x->p, &tp);
	x->n.tp = &tp;
	x->n.p = &x->p;
	x->n.discovery = discovery;
}

/* Offer @key=@val; the answer (or NULL when none was given). */
static const char *offer(struct neg *x, const char *key, const char *val,
			 int want_rc)
{
	size_t before = x->out.len;

	assert_int_equal(iscsi_neg_key(&x->n, key, val, &x->out), want_rc);
	if (x->out.len == before)
		return NULL;
	return iscsi_text_find(x->out.buf + before, x->out.len - before, key);
}

static void negotiation_rules(void **state)
{
	struct neg x;

	(void)state;
	neg_init(&x, false);
	/* list: the first offered value we support */
	assert_string_equal(offer(&x, "HeaderDigest", "CRC32C,None", 0),
			    "CRC32C");
	assert_true(x.p.header_digest);
	assert_string_equal(offer(&x, "DataDigest", "CRC32C,None", 0), "None");
	assert_false(x.p.data_digest);
	/* AND: ImmediateData Yes only if both */
	assert_string_equal(offer(&x, "ImmediateData", "No", 0), "No");
	assert_false(x.p.immediate_data);
	/* OR: InitialR2T Yes if either */
	assert_string_equal(offer(&x, "InitialR2T", "Yes", 0), "Yes");
	assert_true(x.p.initial_r2t);
	/* min: the lesser of offer and ours */
	assert_string_equal(offer(&x, "MaxBurstLength", "16776192", 0),
			    "1048576");
	assert_int_equal(x.p.max_burst, 1048576);
	assert_string_equal(offer(&x, "FirstBurstLength", "262144", 0),
			    "65536");
	assert_string_equal(offer(&x, "MaxOutstandingR2T", "1", 0), "1");
	assert_string_equal(offer(&x, "MaxConnections", "8", 0), "1");
	assert_string_equal(offer(&x, "ErrorRecoveryLevel", "2", 0), "0");
	assert_string_equal(offer(&x, "DefaultTime2Retain", "20", 0), "0");
	/* max: the greater */
	assert_string_equal(offer(&x, "DefaultTime2Wait", "2", 0), "2");
	/* declarative: stored, not answered */
	assert_null(offer(&x, "MaxRecvDataSegmentLength", "65536", 0));
	assert_int_equal(x.p.max_xmit_dsl, 65536);
	/* out of range / malformed: Reject */
	assert_null(offer(&x, "MaxBurstLength", "100", -EPROTO));
	iscsi_text_free(&x.out);
	neg_init(&x, false);
	assert_string_equal(offer(&x, "MaxBurstLength", "100", 0), "Reject");
	assert_string_equal(offer(&x, "ImmediateData", "Maybe", 0), "Reject");
	assert_string_equal(offer(&x, "DataDigest", "MD5", 0), "Reject");
	assert_string_equal(offer(&x, "ErrorRecoveryLevel", "3", 0), "Reject");
	/* twice in one negotiation */
	assert_null(offer(&x, "ImmediateData", "Yes", -EPROTO));
	/* unknown and vendor keys: the caller says NotUnderstood */
	assert_null(offer(&x, "X-com.example.Foo", "1", -ENOENT));
	assert_null(offer(&x, "NoSuchKey", "1", -ENOENT));
	/* markers: never used */
	assert_string_equal(offer(&x, "OFMarker", "Yes", 0), "No");
	assert_string_equal(offer(&x, "OFMarkInt", "2048~8192", 0),
			    "Irrelevant");
	iscsi_text_free(&x.out);
}

static void discovery_irrelevant_and_finish(void **state)
{
	struct neg x;

	(void)state;
	neg_init(&x, true);
	assert_string_equal(offer(&x, "MaxBurstLength", "262144", 0),
			    "Irrelevant");
	assert_string_equal(offer(&x, "InitialR2T", "No", 0), "Irrelevant");
	assert_string_equal(offer(&x, "HeaderDigest", "None", 0), "None");
	/* FirstBurstLength never above MaxBurstLength; MRDSL declared once */
	x.p.first_burst = 8192;
	x.p.max_burst = 4096;
	iscsi_neg_finish(&x.n, &x.out);
	assert_int_equal(x.p.first_burst, 4096);
	assert_string_equal(iscsi_text_find(x.out.buf, x.out.len,
					    "MaxRecvDataSegmentLength"),
			    "262144");
	{
		size_t len = x.out.len;

		iscsi_neg_finish(&x.n, &x.out);
		assert_int_equal(x.out.len, len);
	}
	iscsi_text_free(&x.out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_pairs_and_bounds),
		cmocka_unit_test(out_builder_and_find),
		cmocka_unit_test(numbers),
		cmocka_unit_test(negotiation_rules),
		cmocka_unit_test(discovery_irrelevant_and_finish),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
