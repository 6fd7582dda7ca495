/* SPDX-License-Identifier: MIT */
/*
 * iSCSI login without sockets: request PDUs into iscsi_login_pdu(), the
 * response header and keys checked. The stages and their T/C/CSG/NSG
 * rules, the status class and detail of every refusal (RFC 7143
 * 11.13.5), AuthMethod None and CHAP with MD5 responses checked against
 * vectors computed independently (Python's hashlib), mutual CHAP, a
 * reflected challenge, and continued (C bit) requests.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "export/iscsi/chap.h"
#include "export/iscsi/login.h"
#include "export/iscsi/pdu.h"
#include "helpers/th.h"

#define TGT "iqn.2026-12.org.blkstack:t0"

static const struct iscsi_target_params tp = {
	.header_digests = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C,
	.data_digests = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C,
	.max_recv_dsl = 262144,
	.max_burst = 1048576,
	.first_burst = 262144,
	.max_outstanding_r2t = 4,
	.immediate_data = true,
	.initial_r2t = false,
};

struct fx {
	bool chap, mutual;
	uint8_t rnd;
	int rnd_err;		/* what the random op fails with (0: none) */
	struct iscsi_login l;
	uint8_t rsp[ISCSI_BHS_LEN];
	struct iscsi_text_out out;
};

static int f_find(void *arg, const char *name, struct iscsi_login_target *t)
{
	struct fx *x = arg;

	if (strcmp(name, TGT))
		return -ENOENT;
	memset(t, 0, sizeof(*t));
	t->name = TGT;
	t->tp = &tp;
	if (x->chap) {
		t->chap_user = "alice";
		t->chap_secret = "alice-secret-123";
	}
	if (x->mutual) {
		t->mutual_user = "target0";
		t->mutual_secret = "target-secret-456";
	}
	return 0;
}

static const struct iscsi_target_params *f_dparams(void *arg)
{
	(void)arg;
	return &tp;
}

/* Deterministic "random": 0, 1, 2, ... (CHAP_I 0, challenge 01..10). */
static int f_random(void *arg, void *buf, size_t len)
{
	struct fx *x = arg;
	uint8_t *p = buf;

	if (x->rnd_err)
		return x->rnd_err;
	while (len--)
		*p++ = x->rnd++;
	return 0;
}

static uint16_t f_tsih(void *arg)
{
	(void)arg;
	return 7;
}

static const struct iscsi_login_ops ops = {
	.find = f_find,
	.discovery_params = f_dparams,
	.random = f_random,
	.tsih = f_tsih,
};

static void fx_init(struct fx *x, bool chap, bool mutual)
{
	memset(x, 0, sizeof(*x));
	x->chap = chap;
	x->mutual = mutual;
	iscsi_login_init(&x->l, &ops, x);
}

static void fx_free(struct fx *x)
{
	iscsi_login_free(&x->l);
	iscsi_text_free(&x->out);
}

/* Send one login request: flags byte 1, keys as "k=v\0k=v\0". */
static int req(struct fx *x, uint8_t flags, const char *keys, size_t klen)
{
	uint8_t bhs[ISCSI_BHS_LEN] = { 0 };
	static const uint8_t isid[6] = { 0x40, 0, 0, 1, 0, 0 };

	bhs[0] = ISCSI_OP_LOGIN_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = flags;
	memcpy(bhs + 8, isid, 6);
	iscsi_put32(bhs + 16, 0x1000);
	iscsi_put24(bhs + 5, (uint32_t)klen);
	return iscsi_login_pdu(&x->l, bhs, (const uint8_t *)keys,
			       (uint32_t)klen, x->rsp, &x->out);
}

#define REQ(x, flags, s) req(x, flags, s, sizeof(s) - 1)
#define T ISCSI_LOGIN_TRANSIT
#define C ISCSI_FLAG_CONTINUE
#define STAGE(csg, nsg) (uint8_t)((csg) << 2 | (nsg))

static const char *key(struct fx *x, const char *k)
{
	return iscsi_text_find(x->out.buf, x->out.len, k);
}

static uint16_t status(struct fx *x)
{
	return (uint16_t)(x->rsp[36] << 8 | x->rsp[37]);
}

static void none_login_to_full_feature(void **state)
{
	struct fx x;

	(void)state;
	fx_init(&x, false, false);
	assert_int_equal(REQ(&x, T | STAGE(0, 1),
			     "InitiatorName=iqn.i\0SessionType=Normal\0"
			     "TargetName=" TGT "\0AuthMethod=None\0"), 0);
	assert_int_equal(x.rsp[0], ISCSI_OP_LOGIN_RSP);
	assert_int_equal(x.rsp[1], T | STAGE(0, 1));
	assert_int_equal(status(&x), 0);
	assert_string_equal(key(&x, "AuthMethod"), "None");
	assert_string_equal(key(&x, "TargetPortalGroupTag"), "1");
	assert_int_equal(iscsi_get16(x.rsp + 14), 0);

	assert_int_equal(REQ(&x, T | STAGE(1, 3),
			     "HeaderDigest=CRC32C,None\0DataDigest=None\0"
			     "MaxRecvDataSegmentLength=65536\0"
			     "MaxBurstLength=262144\0FirstBurstLength=65536\0"
			     "ImmediateData=Yes\0InitialR2T=No\0"
			     "X-com.example.Vendor=1\0"), 1);
	assert_int_equal(x.rsp[1], T | STAGE(1, 3));
	assert_int_equal(iscsi_get16(x.rsp + 14), 7);
	assert_string_equal(key(&x, "HeaderDigest"), "CRC32C");
	assert_string_equal(key(&x, "MaxRecvDataSegmentLength"), "262144");
	assert_string_equal(key(&x, "X-com.example.Vendor"), "NotUnderstood");
	assert_null(key(&x, "TargetPortalGroupTag"));
	assert_true(x.l.params.header_digest);
	assert_false(x.l.params.data_digest);
	assert_int_equal(x.l.params.max_xmit_dsl, 65536);
	assert_int_equal(x.l.params.max_burst, 262144);
	assert_int_equal(x.l.params.first_burst, 65536);
	assert_false(x.l.params.initial_r2t);
	fx_free(&x);
}

static void discovery_straight_to_full_feature(void **state)
{
	struct fx x;

	(void)state;
	fx_init(&x, true, false);	/* discovery needs no CHAP */
	assert_int_equal(REQ(&x, T | STAGE(1, 3),
			     "InitiatorName=iqn.i\0SessionType=Discovery\0"
			     "MaxBurstLength=4096\0"), 1);
	assert_true(x.l.discovery);
	assert_string_equal(key(&x, "MaxBurstLength"), "Irrelevant");
	fx_free(&x);
}

struct refusal {
	const char *what;
	uint8_t flags;
	uint8_t version_min;
	uint16_t tsih;
	const char *keys;
	size_t klen;
	uint16_t status;
};

#define R(what, flags, vmin, tsih, keys, st) \
	{ what, flags, vmin, tsih, keys, sizeof(keys) - 1, st }

static const struct refusal refusals[] = {
	R("no InitiatorName", T | STAGE(0, 1), 0, 0,
	  "TargetName=" TGT "\0AuthMethod=None\0", ISCSI_LOGIN_MISSING_PARAM),
	R("unknown target", T | STAGE(0, 1), 0, 0,
	  "InitiatorName=i\0TargetName=iqn.x:none\0", ISCSI_LOGIN_NOT_FOUND),
	R("normal without TargetName", T | STAGE(0, 1), 0, 0,
	  "InitiatorName=i\0", ISCSI_LOGIN_MISSING_PARAM),
	R("T and C", T | C | STAGE(0, 1), 0, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0",
	  ISCSI_LOGIN_INITIATOR_ERROR),
	R("version", T | STAGE(0, 1), 1, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0", ISCSI_LOGIN_BAD_VERSION),
	R("TSIH of no session", T | STAGE(0, 1), 0, 9,
	  "InitiatorName=i\0TargetName=" TGT "\0", ISCSI_LOGIN_NO_SESSION),
	R("session type", T | STAGE(0, 1), 0, 0,
	  "InitiatorName=i\0SessionType=Other\0", ISCSI_LOGIN_NO_SESSION_TYPE),
	R("NSG 2", T | STAGE(0, 2), 0, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0",
	  ISCSI_LOGIN_INITIATOR_ERROR),
	R("backwards", T | STAGE(1, 0), 0, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0",
	  ISCSI_LOGIN_INITIATOR_ERROR),
	R("first in full feature", T | STAGE(3, 3), 0, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0",
	  ISCSI_LOGIN_INITIATOR_ERROR),
	R("malformed text", T | STAGE(0, 1), 0, 0,
	  "InitiatorName=i\0garbage\0", ISCSI_LOGIN_INITIATOR_ERROR),
	R("key twice", T | STAGE(1, 3), 0, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0ImmediateData=Yes\0"
	  "ImmediateData=No\0", ISCSI_LOGIN_INITIATOR_ERROR),
	R("AuthMethod in operational", T | STAGE(1, 3), 0, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0AuthMethod=None\0",
	  ISCSI_LOGIN_INITIATOR_ERROR),
	R("no common AuthMethod", T | STAGE(0, 1), 0, 0,
	  "InitiatorName=i\0TargetName=" TGT "\0AuthMethod=SRP\0",
	  ISCSI_LOGIN_AUTH_FAILED),
};

static void refusals_have_their_status(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(refusals) / sizeof(refusals[0]); i++) {
		const struct refusal *r = &refusals[i];
		uint8_t bhs[ISCSI_BHS_LEN] = { 0 };
		struct fx x;

		fx_init(&x, false, false);
		bhs[0] = ISCSI_OP_LOGIN_REQ | ISCSI_FLAG_IMMEDIATE;
		bhs[1] = r->flags;
		bhs[3] = r->version_min;
		iscsi_put16(bhs + 14, r->tsih);
		iscsi_put24(bhs + 5, (uint32_t)r->klen);
		print_message("refusal: %s\n", r->what);
		assert_int_equal(iscsi_login_pdu(&x.l, bhs,
						 (const uint8_t *)r->keys,
						 (uint32_t)r->klen, x.rsp,
						 &x.out), -EACCES);
		assert_int_equal(status(&x), r->status);
		assert_int_equal(x.rsp[1] & T, 0);
		assert_int_equal(x.out.len, 0);	/* no keys with a refusal */
		assert_true(x.l.why[0]);
		fx_free(&x);
	}
}

static void chap_vectors_and_values(void **state)
{
	uint8_t chal[16], out[16], bin[64];
	char hex[40];
	int i;

	(void)state;
	for (i = 0; i < 16; i++)
		chal[i] = (uint8_t)i;
	/* md5(01 || "alice-secret-123" || 00..0f), from hashlib */
	iscsi_chap_response(1, "alice-secret-123", chal, 16, out);
	iscsi_chap_hex(out, 16, hex);
	assert_string_equal(hex, "0xd046e8a0a7e54ffc809ad1085791acce");
	assert_int_equal(iscsi_chap_decode("0xABC", bin, sizeof(bin)), 2);
	assert_int_equal(bin[0], 0x0a);
	assert_int_equal(bin[1], 0xbc);
	assert_int_equal(iscsi_chap_decode("0b3q2+7w==", bin, sizeof(bin)), 4);
	assert_memory_equal(bin, "\xde\xad\xbe\xef", 4);
	assert_int_equal(iscsi_chap_decode("0x", bin, sizeof(bin)), -EINVAL);
	assert_int_equal(iscsi_chap_decode("0xzz", bin, sizeof(bin)), -EINVAL);
	assert_int_equal(iscsi_chap_decode("1234", bin, sizeof(bin)), -EINVAL);
	assert_int_equal(iscsi_chap_decode("0x0102030405", bin, 4), -E2BIG);
	assert_int_equal(iscsi_chap_decode("0b!!!!", bin, sizeof(bin)),
			 -EINVAL);
}

/* Security stage up to the challenge; returns the expected response. */
static void chap_until_challenge(struct fx *x, char *resp_hex)
{
	uint8_t chal[16], want[16];
	int i;

	assert_int_equal(REQ(x, T | STAGE(0, 1),
			     "InitiatorName=iqn.i\0TargetName=" TGT "\0"
			     "AuthMethod=CHAP,None\0"), 0);
	assert_string_equal(key(x, "AuthMethod"), "CHAP");
	assert_int_equal(x->rsp[1] & T, 0);	/* not through yet */
	assert_int_equal(REQ(x, STAGE(0, 1), "CHAP_A=7,5\0"), 0);
	assert_string_equal(key(x, "CHAP_A"), "5");
	assert_string_equal(key(x, "CHAP_I"), "0");
	assert_string_equal(key(x, "CHAP_C"),
			    "0x0102030405060708090a0b0c0d0e0f10");
	for (i = 0; i < 16; i++)
		chal[i] = (uint8_t)(i + 1);
	iscsi_chap_response(0, "alice-secret-123", chal, 16, want);
	iscsi_chap_hex(want, 16, resp_hex);
}

static void chap_login(void **state)
{
	char r[40], keys[200];
	struct fx x;
	int n;

	(void)state;
	fx_init(&x, true, false);
	chap_until_challenge(&x, r);
	n = snprintf(keys, sizeof(keys), "CHAP_N=alice%cCHAP_R=%s%c", 0, r, 0);
	assert_int_equal(req(&x, T | STAGE(0, 1), keys, (size_t)n), 0);
	assert_int_equal(x.rsp[1], T | STAGE(0, 1));
	assert_int_equal(REQ(&x, T | STAGE(1, 3), "ImmediateData=Yes\0"), 1);
	fx_free(&x);

	/* a wrong response, a wrong user */
	fx_init(&x, true, false);
	chap_until_challenge(&x, r);
	r[5] = r[5] == '0' ? '1' : '0';
	n = snprintf(keys, sizeof(keys), "CHAP_N=alice%cCHAP_R=%s%c", 0, r, 0);
	assert_int_equal(req(&x, T | STAGE(0, 1), keys, (size_t)n), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_AUTH_FAILED);
	fx_free(&x);
	fx_init(&x, true, false);
	chap_until_challenge(&x, r);
	n = snprintf(keys, sizeof(keys), "CHAP_N=bob%cCHAP_R=%s%c", 0, r, 0);
	assert_int_equal(req(&x, T | STAGE(0, 1), keys, (size_t)n), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_AUTH_FAILED);
	fx_free(&x);

	/* CHAP required: None alone, or skipping the security stage */
	fx_init(&x, true, false);
	assert_int_equal(REQ(&x, T | STAGE(0, 1),
			     "InitiatorName=iqn.i\0TargetName=" TGT "\0"
			     "AuthMethod=None\0"), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_AUTH_FAILED);
	fx_free(&x);
	fx_init(&x, true, false);
	assert_int_equal(REQ(&x, T | STAGE(1, 3),
			     "InitiatorName=iqn.i\0TargetName=" TGT "\0"),
			 -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_AUTH_FAILED);
	fx_free(&x);
	/* MD5 not offered */
	fx_init(&x, true, false);
	assert_int_equal(REQ(&x, STAGE(0, 1),
			     "InitiatorName=iqn.i\0TargetName=" TGT "\0"
			     "AuthMethod=CHAP\0"), 0);
	assert_int_equal(REQ(&x, STAGE(0, 1), "CHAP_A=6\0"), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_AUTH_FAILED);
	fx_free(&x);
}

/* No random bytes for the challenge (no getrandom(), a seccomp filter):
 * the login is refused with a target error, not retried for ever on the
 * I/O thread nor sent a predictable challenge. */
static void chap_without_random_bytes(void **state)
{
	struct fx x;

	(void)state;
	fx_init(&x, true, false);
	x.rnd_err = -ENOSYS;
	assert_int_equal(REQ(&x, T | STAGE(0, 1),
			     "InitiatorName=iqn.i\0TargetName=" TGT "\0"
			     "AuthMethod=CHAP,None\0"), 0);
	assert_string_equal(key(&x, "AuthMethod"), "CHAP");
	assert_int_equal(REQ(&x, STAGE(0, 1), "CHAP_A=5\0"), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_TARGET_ERROR);
	assert_null(key(&x, "CHAP_C"));
	assert_non_null(strstr(x.l.why, "no random bytes"));
	fx_free(&x);
}

static void mutual_chap(void **state)
{
	char r[40], keys[300];
	struct fx x;
	int n;

	(void)state;
	fx_init(&x, true, true);
	chap_until_challenge(&x, r);
	n = snprintf(keys, sizeof(keys),
		     "CHAP_N=alice%cCHAP_R=%s%cCHAP_I=42%cCHAP_C=0xdeadbeef%c",
		     0, r, 0, 0, 0);
	assert_int_equal(req(&x, T | STAGE(0, 1), keys, (size_t)n), 0);
	assert_string_equal(key(&x, "CHAP_N"), "target0");
	/* md5(2a || "target-secret-456" || deadbeef), from hashlib */
	assert_string_equal(key(&x, "CHAP_R"),
			    "0x21180880c2616e0bd202a7e94cb90dbf");
	fx_free(&x);

	/* our own challenge sent back: refused */
	fx_init(&x, true, true);
	chap_until_challenge(&x, r);
	n = snprintf(keys, sizeof(keys),
		     "CHAP_N=alice%cCHAP_R=%s%cCHAP_I=1%c"
		     "CHAP_C=0x0102030405060708090a0b0c0d0e0f10%c",
		     0, r, 0, 0, 0);
	assert_int_equal(req(&x, T | STAGE(0, 1), keys, (size_t)n), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_AUTH_FAILED);
	fx_free(&x);

	/* mutual asked of a target without a mutual secret */
	fx_init(&x, true, false);
	chap_until_challenge(&x, r);
	n = snprintf(keys, sizeof(keys),
		     "CHAP_N=alice%cCHAP_R=%s%cCHAP_I=1%cCHAP_C=0x99%c",
		     0, r, 0, 0, 0);
	assert_int_equal(req(&x, T | STAGE(0, 1), keys, (size_t)n), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_AUTH_FAILED);
	fx_free(&x);
}

static void continued_request(void **state)
{
	struct fx x;

	(void)state;
	fx_init(&x, false, false);
	/* a request in two pieces, split inside a value */
	assert_int_equal(REQ(&x, C | STAGE(0, 1),
			     "InitiatorName=iqn.i\0TargetName=iqn.2026"), 0);
	assert_int_equal(x.out.len, 0);
	assert_int_equal(x.rsp[1] & T, 0);
	assert_int_equal(REQ(&x, T | STAGE(0, 1),
			     "-12.org.blkstack:t0\0AuthMethod=None\0"), 0);
	assert_string_equal(key(&x, "AuthMethod"), "None");
	assert_int_equal(x.rsp[1], T | STAGE(0, 1));
	/* the wrong stage next */
	assert_int_equal(REQ(&x, T | STAGE(0, 1), "AuthMethod=None\0"),
			 -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_INITIATOR_ERROR);
	fx_free(&x);
}

/*
 * A first request sent in pieces picks its target and rules once it is
 * whole: the keys of the last piece are negotiated by those rules (the
 * rules were never picked, and the negotiation read through a NULL
 * pointer, when only a first PDU without the C bit picked them).
 */
static void continued_first_request_resolves(void **state)
{
	struct fx x;

	(void)state;
	fx_init(&x, false, false);
	assert_int_equal(REQ(&x, C | STAGE(1, 3),
			     "InitiatorName=iqn.i\0TargetName=iqn.2026"), 0);
	assert_int_equal(x.out.len, 0);
	assert_int_equal(REQ(&x, T | STAGE(1, 3),
			     "-12.org.blkstack:t0\0HeaderDigest=None\0"), 1);
	assert_string_equal(key(&x, "HeaderDigest"), "None");
	assert_non_null(key(&x, "TargetPortalGroupTag"));
	assert_true(x.l.has_target);
	fx_free(&x);

	/* the whole first request has no TargetName: refused, not read */
	fx_init(&x, false, false);
	assert_int_equal(REQ(&x, C | STAGE(1, 3), "InitiatorName=iqn.i\0"), 0);
	assert_int_equal(REQ(&x, T | STAGE(1, 3), "HeaderDigest=None\0"),
			 -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_MISSING_PARAM);
	fx_free(&x);

	/* nothing but pieces without keys: no InitiatorName */
	fx_init(&x, false, false);
	assert_int_equal(REQ(&x, C | STAGE(0, 1), ""), 0);
	assert_int_equal(REQ(&x, STAGE(0, 0), ""), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_MISSING_PARAM);
	fx_free(&x);
}

/* A discovery login cannot turn into a normal one past its rules (CHAP) */
static void session_type_fixed(void **state)
{
	struct fx x;

	(void)state;
	fx_init(&x, true, false);	/* the target wants CHAP */
	assert_int_equal(REQ(&x, T | STAGE(0, 1),
			     "InitiatorName=iqn.i\0SessionType=Discovery\0"
			     "AuthMethod=None\0"), 0);
	assert_int_equal(REQ(&x, T | STAGE(1, 3),
			     "SessionType=Normal\0TargetName="
			     "iqn.2026-12.org.blkstack:t0\0"), -EACCES);
	assert_int_equal(status(&x), ISCSI_LOGIN_INITIATOR_ERROR);
	assert_false(x.l.has_target);
	fx_free(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(none_login_to_full_feature),
		cmocka_unit_test(discovery_straight_to_full_feature),
		cmocka_unit_test(refusals_have_their_status),
		cmocka_unit_test(chap_vectors_and_values),
		cmocka_unit_test(chap_login),
		cmocka_unit_test(chap_without_random_bytes),
		cmocka_unit_test(mutual_chap),
		cmocka_unit_test(continued_request),
		cmocka_unit_test(continued_first_request_resolves),
		cmocka_unit_test(session_type_fixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
