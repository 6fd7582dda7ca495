/* SPDX-License-Identifier: MIT */
/*
 * The iSCSI session without sockets, over the SCSI target core and a mem
 * device: PDUs in through iscsi_session_feed(), PDUs out parsed from
 * iscsi_session_out_iov(). What no real initiator here exercises: data
 * digests both ways (libiscsi never offers DataDigest), header and data
 * digest errors, the R2T sequence with DataSN / R2TSN / offsets, Data-In
 * split at the initiator's MaxRecvDataSegmentLength with F at each
 * MaxBurstLength, the CmdSN window, NOP, SendTargets, task management of
 * a write waiting for its data, and logout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/loop.h>
#include <blkstack/scsi.h>

#include "core/crc32c.h"
#include "export/iscsi/internal.h"
#include "export/iscsi/pdu.h"
#include "export/iscsi/session.h"
#include "helpers/slowdev.h"
#include "helpers/th.h"

#define TGT "iqn.2026-12.org.blkstack:s"
#define KiB 1024u

static const struct iscsi_target_params tp = {
	.header_digests = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C,
	.data_digests = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C,
	.max_recv_dsl = ISCSI_MAX_RECV_DSL,
	.max_burst = 1u << 20,
	.first_burst = 65536,
	.max_outstanding_r2t = 4,
	.immediate_data = true,
	.initial_r2t = false,
};

struct h {
	struct bs_ctx *ctx;
	struct bs_dev *dev;
	struct bs_scsi_tgt *scsi;
	struct bs_scsi_lu *lu;
	struct iscsi_session *s;
	bool hd, dd;		/* digests in use (after login) */
	uint8_t *out;		/* output collected, not yet parsed */
	size_t out_len, out_off;
	uint32_t cmdsn, itt;
	char keys[2048];	/* the final login response's */
	uint32_t keys_len;
};

/* ---- the session's surroundings ---------------------------------------- */

static void o_kick(void *arg) { (void)arg; }
static void o_log(void *arg, const char *msg) { (void)arg; (void)msg; }

static int o_find(void *arg, const char *name, struct iscsi_login_target *t)
{
	if (strcmp(name, TGT))
		return -ENOENT;
	memset(t, 0, sizeof(*t));
	t->name = TGT;
	t->tp = &tp;
	t->priv = arg;
	return 0;
}

static const struct iscsi_target_params *o_dparams(void *arg)
{
	(void)arg;
	return &tp;
}

static uint16_t o_tsih(void *arg) { (void)arg; return 3; }

static int o_random(void *arg, void *buf, size_t len)
{
	(void)arg;
	memset(buf, 0x5a, len);
	return 0;
}

static void o_each(void *arg, void (*fn)(void *, const char *, const char *),
		   void *fa)
{
	(void)arg;
	fn(fa, TGT, "127.0.0.1:3260,1");
	fn(fa, "iqn.2026-12.org.blkstack:other", NULL);
}

/* sessions attached and not yet detached (max_sessions bookkeeping) */
static int n_attached;

static int o_attach(void *arg, const struct iscsi_login_target *t,
		    struct iscsi_session_target *st)
{
	struct h *h = arg;

	(void)t;
	st->scsi = h->scsi;
	st->queue_depth = 8;
	n_attached++;
	return 0;
}

static void o_detach(const struct iscsi_login_target *t)
{
	(void)t;
	n_attached--;
}

static void o_release(const struct iscsi_login_target *t) { (void)t; }

/* logouts told to the connection (it drops its initiator-port label) */
static int n_logged_out;

static void o_logged_out(void *arg, const struct iscsi_login_target *t)
{
	(void)arg;
	(void)t;
	n_logged_out++;
}

static uint32_t o_bs(void *arg, const struct iscsi_login_target *t,
		     uint64_t lun)
{
	(void)arg;
	(void)t;
	return lun ? 0 : 512;
}

static const struct iscsi_session_ops ops = {
	.kick = o_kick, .log = o_log, .find = o_find,
	.discovery_params = o_dparams, .tsih = o_tsih, .random = o_random,
	.each_target = o_each, .attach = o_attach, .detach = o_detach,
	.release = o_release, .logged_out = o_logged_out,
	.block_size = o_bs,
};

/* ---- harness ------------------------------------------------------------- */

static void settle(struct h *h)
{
	int i;

	for (i = 0; i < 200; i++)
		bs_loop_run_once(bs_ctx_loop(h->ctx), 0);
	for (;;) {
		struct iovec iov[8];
		int n = iscsi_session_out_iov(h->s, iov, 8), k;
		size_t total = 0;

		if (n <= 0)
			break;
		for (k = 0; k < n; k++) {
			h->out = realloc(h->out, h->out_len + iov[k].iov_len);
			memcpy(h->out + h->out_len, iov[k].iov_base,
			       iov[k].iov_len);
			h->out_len += iov[k].iov_len;
			total += iov[k].iov_len;
		}
		iscsi_session_out_advance(h->s, total);
	}
}

static void feed(struct h *h, const uint8_t *buf, size_t len)
{
	assert_int_equal(iscsi_session_feed(h->s, buf, len), len);
	settle(h);
}

static void le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

/* Send a PDU: @bhs (DSL set here) and @data, with the digests in use;
 * @bad_hd / @bad_dd corrupt one. */
static void send_pdu(struct h *h, uint8_t *bhs, const void *data,
		     uint32_t len, bool bad_hd, bool bad_dd)
{
	uint8_t *buf = calloc(1, 48 + 4 + len + 3 + 4);
	size_t n = 0;
	uint32_t pad = iscsi_pad4(len);

	iscsi_put24(bhs + 5, len);
	memcpy(buf, bhs, 48);
	n = 48;
	if (h->hd) {
		le32(buf + n, bs_crc32c(bhs, 48) ^ (bad_hd ? 1 : 0));
		n += 4;
	}
	if (len) {
		memcpy(buf + n, data, len);
		n += len + pad;
		if (h->dd) {
			le32(buf + n, bs_crc32c(buf + n - len - pad,
						   len + pad) ^
					      (bad_dd ? 1 : 0));
			n += 4;
		}
	}
	feed(h, buf, n);
	free(buf);
}

struct rx {
	uint8_t bhs[48];
	uint8_t *data;
	uint32_t len;
};

/* The next PDU the target sent (digests checked); false when none. */
static bool next_pdu(struct h *h, struct rx *r)
{
	size_t avail = h->out_len - h->out_off, need;
	const uint8_t *p = h->out + h->out_off;

	if (avail < 48)
		return false;
	memcpy(r->bhs, p, 48);
	r->len = iscsi_dsl(p);
	need = iscsi_pdu_rest_len(p, h->hd, h->dd);
	assert_true(avail >= 48 + need);
	p += 48;
	if (h->hd) {
		uint8_t d[4];

		le32(d, bs_crc32c(r->bhs, 48));
		assert_memory_equal(p, d, 4);
		p += 4;
	}
	r->data = (uint8_t *)p;
	if (r->len && h->dd) {
		uint32_t pl = r->len + iscsi_pad4(r->len);
		uint8_t d[4];

		le32(d, bs_crc32c(p, pl));
		assert_memory_equal(p + pl, d, 4);
	}
	h->out_off += 48 + need;
	return true;
}

static void expect_none(struct h *h)
{
	assert_int_equal(h->out_len - h->out_off, 0);
}

static void login_req(struct h *h, uint8_t flags, const char *keys,
		      size_t klen)
{
	uint8_t bhs[48] = { 0 };

	bhs[0] = ISCSI_OP_LOGIN_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = flags;
	bhs[8] = 0x40;
	iscsi_put32(bhs + 16, h->itt++);
	iscsi_put32(bhs + 24, h->cmdsn);
	send_pdu(h, bhs, keys, (uint32_t)klen, false, false);
}

static void login(struct h *h, const char *ops_keys, size_t klen,
		  bool hd, bool dd)
{
	static const char sec[] = "InitiatorName=iqn.t\0SessionType=Normal\0"
				  "TargetName=" TGT "\0AuthMethod=None\0";
	struct rx r;

	login_req(h, 0x81, sec, sizeof(sec) - 1);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[36], 0);
	login_req(h, 0x87, ops_keys, klen);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_LOGIN_RSP);
	assert_int_equal(r.bhs[36], 0);
	assert_int_equal(r.bhs[1], 0x87);
	assert_true(r.len <= sizeof(h->keys));
	memcpy(h->keys, r.data, r.len);
	h->keys_len = r.len;
	assert_true(iscsi_session_full_feature(h->s));
	h->hd = hd;
	h->dd = dd;
}

#define LOGIN(h, k, hd, dd) login(h, k, sizeof(k) - 1, hd, dd)

static void cmd(struct h *h, uint32_t itt, const uint8_t *cdb, uint8_t flags,
		uint32_t edtl, const void *data, uint32_t len)
{
	uint8_t bhs[48] = { 0 };

	bhs[0] = ISCSI_OP_SCSI_CMD;
	bhs[1] = flags | 1;
	iscsi_put32(bhs + 16, itt);
	iscsi_put32(bhs + 20, edtl);
	iscsi_put32(bhs + 24, h->cmdsn++);
	memcpy(bhs + 32, cdb, 16);
	send_pdu(h, bhs, data, len, false, false);
}

static void cdb10(uint8_t *cdb, uint8_t op, uint32_t lba, uint16_t n)
{
	memset(cdb, 0, 16);
	cdb[0] = op;
	iscsi_put32(cdb + 2, lba);
	iscsi_put16(cdb + 7, n);
}

/* TEST UNIT READY until GOOD (the new nexus starts with a unit attention) */
static void clear_ua(struct h *h)
{
	uint8_t cdb[16] = { 0 };
	struct rx r;
	int i;

	for (i = 0; i < 4; i++) {
		cmd(h, 0x100 + (uint32_t)i, cdb, ISCSI_FLAG_FINAL, 0, NULL, 0);
		assert_true(next_pdu(h, &r));
		assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
		if (r.bhs[3] == BS_SCSI_GOOD)
			return;
	}
	fail_msg("unit attention did not clear");
}

static int setup(void **state)
{
	struct h *h = calloc(1, sizeof(*h));
	struct bs_scsi_tgt_cfg tc = { .name = TGT, .vendor = "BLKSTACK",
				      .product = "t", .revision = "0" };
	struct bs_scsi_lu_cfg lc = { .lun = 0, .name = "l0" };

	n_logged_out = 0;
	assert_int_equal(bs_ctx_new(&h->ctx), 0);
	h->dev = th_dev(h->ctx, "d", "mem:1M");
	lc.dev = h->dev;
	assert_int_equal(bs_scsi_tgt_new(&tc, &h->scsi), 0);
	assert_int_equal(bs_scsi_lu_add(h->scsi, &lc, &h->lu), 0);
	assert_int_equal(iscsi_session_new(h->ctx, NULL, &ops, h, &h->s), 0);
	h->cmdsn = 10;
	h->itt = 1;
	*state = h;
	return 0;
}

static int teardown(void **state)
{
	struct h *h = *state;
	int i;

	iscsi_session_free(h->s);
	for (i = 0; i < 200; i++)
		bs_loop_run_once(bs_ctx_loop(h->ctx), 0);
	/* every session detached exactly once, by logout or by its end */
	assert_int_equal(n_attached, 0);
	bs_scsi_lu_remove(h->lu);
	bs_scsi_tgt_free(h->scsi);
	bs_dev_destroy(h->dev);
	bs_ctx_free(h->ctx);
	free(h->out);
	free(h);
	return 0;
}

/* ---- tests --------------------------------------------------------------- */

static void data_digests_both_ways(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], w[2048], bhs[48];
	struct rx r;

	LOGIN(h, "HeaderDigest=CRC32C\0DataDigest=CRC32C\0"
		 "MaxRecvDataSegmentLength=8192\0", true, true);
	clear_ua(h);
	th_fill(w, sizeof(w), 1);
	cdb10(cdb, 0x2a, 0, 4);
	cmd(h, 1, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, 2048, w, 2048);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);

	cdb10(cdb, 0x28, 0, 4);
	cmd(h, 2, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, 2048, NULL, 0);
	assert_true(next_pdu(h, &r));	/* its digest checked there */
	assert_int_equal(r.bhs[0], ISCSI_OP_DATA_IN);
	assert_int_equal(r.bhs[1] & (ISCSI_FLAG_FINAL | ISCSI_DATA_STATUS),
			 ISCSI_FLAG_FINAL | ISCSI_DATA_STATUS);
	assert_int_equal(r.len, 2048);
	assert_memory_equal(r.data, w, 2048);

	/* a data digest error: Reject 02h, nothing written */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_SCSI_CMD;
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE | 1;
	iscsi_put32(bhs + 16, 3);
	iscsi_put32(bhs + 20, 512);
	iscsi_put32(bhs + 24, h->cmdsn);
	cdb10(bhs + 32, 0x2a, 0, 1);
	memset(w, 0xee, 512);
	send_pdu(h, bhs, w, 512, false, true);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_REJECT);
	assert_int_equal(r.bhs[2], ISCSI_REJECT_DIGEST);
	assert_int_equal(r.len, 48);
	assert_int_equal(iscsi_itt(r.data), 3);
	expect_none(h);

	/* a header digest error: the connection ends */
	send_pdu(h, bhs, w, 512, true, false);
	expect_none(h);
	assert_true(iscsi_session_finished(h->s));
}

static void r2t_sequences_and_data_in_split(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], w[16 * KiB], bhs[48];
	uint32_t ttt, i;
	struct rx r;

	LOGIN(h, "InitialR2T=Yes\0ImmediateData=No\0MaxBurstLength=8192\0"
		 "FirstBurstLength=8192\0MaxOutstandingR2T=1\0"
		 "MaxRecvDataSegmentLength=4096\0", false, false);
	clear_ua(h);
	th_fill(w, sizeof(w), 2);
	cdb10(cdb, 0x2a, 8, 32);
	cmd(h, 7, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(w), NULL, 0);
	for (i = 0; i < 2; i++) {
		assert_true(next_pdu(h, &r));
		assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
		assert_int_equal(iscsi_itt(r.bhs), 7);
		assert_int_equal(iscsi_get32(r.bhs + 36), i);	/* R2TSN */
		assert_int_equal(iscsi_get32(r.bhs + 40), i * 8192);
		assert_int_equal(iscsi_get32(r.bhs + 44), 8192);
		expect_none(h);	/* one outstanding R2T at a time */
		ttt = iscsi_get32(r.bhs + 20);
		assert_int_not_equal(ttt, ISCSI_RSVD_TAG);
		/* a wrong DataSN is a protocol error */
		memset(bhs, 0, sizeof(bhs));
		bhs[0] = ISCSI_OP_DATA_OUT;
		iscsi_put32(bhs + 16, 7);
		iscsi_put32(bhs + 20, ttt);
		iscsi_put32(bhs + 36, 5);
		iscsi_put32(bhs + 40, i * 8192);
		send_pdu(h, bhs, w + i * 8192, 4096, false, false);
		assert_true(next_pdu(h, &r));
		assert_int_equal(r.bhs[0], ISCSI_OP_REJECT);
		assert_int_equal(r.bhs[2], ISCSI_REJECT_PROTOCOL);
		/* the sequence in two PDUs */
		iscsi_put32(bhs + 36, 0);
		send_pdu(h, bhs, w + i * 8192, 4096, false, false);
		expect_none(h);
		bhs[1] = ISCSI_FLAG_FINAL;
		iscsi_put32(bhs + 36, 1);
		iscsi_put32(bhs + 40, i * 8192 + 4096);
		send_pdu(h, bhs, w + i * 8192 + 4096, 4096, false, false);
	}
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);
	assert_int_equal(iscsi_get32(r.bhs + 36), 2);	/* ExpDataSN: 2 R2T */

	/* read back: 4 Data-In of 4 KiB, F at each 8 KiB burst, S last */
	cdb10(cdb, 0x28, 8, 32);
	cmd(h, 8, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, sizeof(w), NULL, 0);
	for (i = 0; i < 4; i++) {
		assert_true(next_pdu(h, &r));
		assert_int_equal(r.bhs[0], ISCSI_OP_DATA_IN);
		assert_int_equal(iscsi_get32(r.bhs + 36), i);	/* DataSN */
		assert_int_equal(iscsi_get32(r.bhs + 40), i * 4096);
		assert_int_equal(r.len, 4096);
		assert_int_equal(!!(r.bhs[1] & ISCSI_FLAG_FINAL), i & 1);
		assert_int_equal(!!(r.bhs[1] & ISCSI_DATA_STATUS), i == 3);
		assert_memory_equal(r.data, w + i * 4096, 4096);
	}
	expect_none(h);
}

static void short_unsolicited_burst(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], w[16 * KiB], bhs[48];
	uint32_t off[2], len[2], ttt[2], i;
	struct rx r;

	LOGIN(h, "InitialR2T=No\0ImmediateData=No\0MaxBurstLength=8192\0"
		 "FirstBurstLength=8192\0MaxOutstandingR2T=4\0", false, false);
	clear_ua(h);
	th_fill(w, sizeof(w), 3);
	cdb10(cdb, 0x2a, 0, 32);
	/* F clear: unsolicited Data-Out follows, [0, 8192) */
	cmd(h, 0x40, cdb, ISCSI_CMD_WRITE, sizeof(w), NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	assert_int_equal(iscsi_get32(r.bhs + 40), 8192);
	off[0] = 8192;
	len[0] = iscsi_get32(r.bhs + 44);
	ttt[0] = iscsi_get32(r.bhs + 20);
	expect_none(h);
	/* the initiator stops its unsolicited burst at 4 KiB */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_DATA_OUT;
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put32(bhs + 16, 0x40);
	iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
	send_pdu(h, bhs, w, 4096, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	assert_int_equal(iscsi_get32(r.bhs + 40), 4096);
	off[1] = 4096;
	len[1] = iscsi_get32(r.bhs + 44);
	ttt[1] = iscsi_get32(r.bhs + 20);
	assert_int_equal(len[1], 4096);
	for (i = 0; i < 2; i++) {
		memset(bhs, 0, sizeof(bhs));
		bhs[0] = ISCSI_OP_DATA_OUT;
		bhs[1] = ISCSI_FLAG_FINAL;
		iscsi_put32(bhs + 16, 0x40);
		iscsi_put32(bhs + 20, ttt[i]);
		iscsi_put32(bhs + 40, off[i]);
		send_pdu(h, bhs, w + off[i], len[i], false, false);
	}
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);
	cdb10(cdb, 0x28, 0, 32);
	cmd(h, 0x41, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, sizeof(w), NULL,
	    0);
	for (i = 0; i < 2; i++) {	/* MaxRecvDataSegmentLength 8192 */
		assert_true(next_pdu(h, &r));
		assert_int_equal(r.len, 8192);
		assert_memory_equal(r.data, w + i * 8192, 8192);
	}
}

/* A Data-Out whose data is read straight into the task's buffer. */
static void zero_copy_data_out(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], w[32 * KiB], bhs[48], tail[8], *dst;
	uint32_t ttt, i;
	size_t room;
	struct rx r;

	LOGIN(h, "InitialR2T=Yes\0ImmediateData=No\0MaxBurstLength=65536\0"
		 "DataDigest=CRC32C\0MaxRecvDataSegmentLength=65536\0",
	      false, true);
	clear_ua(h);
	th_fill(w, sizeof(w), 5);
	cdb10(cdb, 0x2a, 64, 64);
	cmd(h, 0x50, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(w), NULL,
	    0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	ttt = iscsi_get32(r.bhs + 20);
	/* nothing to take in place before a Data-Out header */
	assert_int_equal(iscsi_session_in_direct(h->s, &dst), 0);
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_DATA_OUT;
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put24(bhs + 5, sizeof(w));
	iscsi_put32(bhs + 16, 0x50);
	iscsi_put32(bhs + 20, ttt);
	feed(h, bhs, sizeof(bhs));
	/* the data, in two reads straight into place */
	for (i = 0; i < 2; i++) {
		room = iscsi_session_in_direct(h->s, &dst);
		assert_int_equal(room, sizeof(w) - i * 16 * KiB);
		memcpy(dst, w + i * 16 * KiB, 16 * KiB);
		iscsi_session_in_direct_done(h->s, 16 * KiB);
	}
	assert_int_equal(iscsi_session_in_direct(h->s, &dst), 0);
	/* the data digest comes through the input buffer */
	le32(tail, bs_crc32c(w, sizeof(w)));
	feed(h, tail, 4);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);
	cdb10(cdb, 0x28, 64, 64);
	cmd(h, 0x51, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, sizeof(w), NULL,
	    0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.len, sizeof(w));
	assert_memory_equal(r.data, w, sizeof(w));
}

static void window_nop_text_logout(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16] = { 0 }, bhs[48];
	uint32_t max, exp;
	struct rx r;
	const char *k;

	LOGIN(h, "MaxRecvDataSegmentLength=8192\0", false, false);
	clear_ua(h);
	/* a command above MaxCmdSN is ignored */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_NOP_OUT | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put32(bhs + 16, 0x55);
	iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
	iscsi_put32(bhs + 24, h->cmdsn);
	send_pdu(h, bhs, "ping", 4, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_NOP_IN);
	assert_int_equal(iscsi_itt(r.bhs), 0x55);
	assert_int_equal(r.len, 4);
	assert_memory_equal(r.data, "ping", 4);
	exp = iscsi_get32(r.bhs + 28);
	max = iscsi_get32(r.bhs + 32);
	assert_int_equal(exp, h->cmdsn);
	assert_int_equal(max, exp + 8 - 1);	/* queue_depth 8 */
	h->cmdsn = max + 1;
	cmd(h, 0x60, cdb, ISCSI_FLAG_FINAL, 0, NULL, 0);
	expect_none(h);
	h->cmdsn = exp;
	cmd(h, 0x61, cdb, ISCSI_FLAG_FINAL, 0, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(iscsi_itt(r.bhs), 0x61);

	/* SendTargets in a normal session: its own target */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_TEXT_REQ;
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put32(bhs + 16, 0x70);
	iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
	iscsi_put32(bhs + 24, h->cmdsn++);
	send_pdu(h, bhs, "SendTargets=All", 16, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_TEXT_RSP);
	k = iscsi_text_find((char *)r.data, r.len, "TargetName");
	assert_non_null(k);
	assert_string_equal(k, TGT);
	assert_string_equal(iscsi_text_find((char *)r.data, r.len,
					    "TargetAddress"),
			    "127.0.0.1:3260,1");
	assert_null(strstr((char *)r.data, "other"));

	/* logout: answered, then the session is over */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_LOGOUT_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_LOGOUT_CLOSE_SESSION;
	iscsi_put32(bhs + 16, 0x80);
	iscsi_put32(bhs + 24, h->cmdsn);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_LOGOUT_RSP);
	assert_int_equal(r.bhs[2], ISCSI_LOGOUT_RSP_OK);
	assert_int_equal(iscsi_get16(r.bhs + 40), 0);	/* Time2Wait */
	/* its place in max_sessions is free when the answer is out, before
	 * the connection is torn down: a new login may follow at once */
	assert_int_equal(n_attached, 0);
	assert_int_equal(n_logged_out, 1);
	assert_true(iscsi_session_finished(h->s));
}

static void abort_a_write_waiting_for_data(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], bhs[48], w[4096];
	uint32_t ref_sn;
	struct rx r;

	LOGIN(h, "InitialR2T=Yes\0ImmediateData=No\0"
		 "MaxRecvDataSegmentLength=8192\0", false, false);
	clear_ua(h);
	cdb10(cdb, 0x2a, 0, 8);
	ref_sn = h->cmdsn;
	cmd(h, 0x90, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, 4096, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	/* ABORT TASK */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_TMF_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_TMF_ABORT_TASK;
	iscsi_put32(bhs + 16, 0x91);
	iscsi_put32(bhs + 20, 0x90);
	iscsi_put32(bhs + 24, h->cmdsn);
	iscsi_put32(bhs + 32, ref_sn);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_TMF_RSP);
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_COMPLETE);
	expect_none(h);	/* no SCSI Response for the aborted task */
	/* the same abort again: the task no longer exists */
	iscsi_put32(bhs + 16, 0x92);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_NO_TASK);
	/* unsolicited data for it is dropped silently */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_DATA_OUT;
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put32(bhs + 16, 0x90);
	iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
	memset(w, 1, sizeof(w));
	send_pdu(h, bhs, w, sizeof(w), false, false);
	expect_none(h);
	/* CLEAR ACA: not supported */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_TMF_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_TMF_CLEAR_ACA;
	iscsi_put32(bhs + 16, 0x93);
	iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
	iscsi_put32(bhs + 24, h->cmdsn);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_NOT_SUPPORTED);
	/* LUN RESET: complete */
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_TMF_LUN_RESET;
	iscsi_put32(bhs + 16, 0x94);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_COMPLETE);
}

/* ABORT TASK SET: every task of this session on the LUN ends without a
 * SCSI Response; the session goes on (a next command is GOOD, no unit
 * attention for the nexus that asked). */
static void abort_task_set(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], tur[16] = { 0 }, bhs[48];
	uint32_t ref_sn;
	struct rx r;

	LOGIN(h, "InitialR2T=Yes\0ImmediateData=No\0"
		 "MaxRecvDataSegmentLength=8192\0", false, false);
	clear_ua(h);
	ref_sn = h->cmdsn;
	cdb10(cdb, 0x2a, 0, 8);
	cmd(h, 0xb0, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, 4096, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	cdb10(cdb, 0x2a, 64, 8);
	cmd(h, 0xb1, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, 4096, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_TMF_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_TMF_ABORT_TASK_SET;
	iscsi_put32(bhs + 16, 0xb2);
	iscsi_put32(bhs + 20, ISCSI_RSVD_TAG);
	iscsi_put32(bhs + 24, h->cmdsn);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_TMF_RSP);
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_COMPLETE);
	expect_none(h);	/* no SCSI Response for either task */
	/* both are gone: ABORT TASK of one finds nothing */
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_TMF_ABORT_TASK;
	iscsi_put32(bhs + 16, 0xb3);
	iscsi_put32(bhs + 20, 0xb1);
	iscsi_put32(bhs + 32, ref_sn + 1);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_NO_TASK);
	/* the session serves on, without a unit attention for this nexus */
	cmd(h, 0xb4, tur, ISCSI_FLAG_FINAL, 0, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);
}

static void logout_with_a_write_waiting(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], bhs[48];
	struct rx r;

	LOGIN(h, "InitialR2T=Yes\0ImmediateData=No\0", false, false);
	clear_ua(h);
	cdb10(cdb, 0x2a, 0, 8);
	cmd(h, 0xa0, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, 4096, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_LOGOUT_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL | ISCSI_LOGOUT_CLOSE_SESSION;
	iscsi_put32(bhs + 16, 0xa1);
	iscsi_put32(bhs + 24, h->cmdsn);
	send_pdu(h, bhs, NULL, 0, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_LOGOUT_RSP);
	assert_int_equal(r.bhs[2], ISCSI_LOGOUT_RSP_OK);
	expect_none(h);
	assert_true(iscsi_session_finished(h->s));
}

static void pings_of_an_idle_initiator(void **state)
{
	struct h *h = *state;
	uint64_t now = bs_now_ns(), sec = 1000000000ull;
	uint8_t bhs[48];
	uint32_t ttt;
	struct rx r;

	LOGIN(h, "MaxRecvDataSegmentLength=8192\0", false, false);
	/* busy or recently heard from: no ping */
	iscsi_session_tick(h->s, now + 10 * sec);
	settle(h);
	expect_none(h);
	iscsi_session_tick(h->s, now + 31 * sec);
	settle(h);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_NOP_IN);
	assert_int_equal(iscsi_itt(r.bhs), ISCSI_RSVD_TAG);
	ttt = iscsi_get32(r.bhs + 20);
	assert_int_not_equal(ttt, ISCSI_RSVD_TAG);
	/* one ping at a time */
	iscsi_session_tick(h->s, now + 40 * sec);
	settle(h);
	expect_none(h);
	/* the answer: NOP-Out, ITT reserved, the TTT, immediate */
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_NOP_OUT | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put32(bhs + 16, ISCSI_RSVD_TAG);
	iscsi_put32(bhs + 20, ttt);
	iscsi_put32(bhs + 24, h->cmdsn);
	send_pdu(h, bhs, NULL, 0, false, false);
	expect_none(h);
	/* past the first ping's timeout: still alive, pinged again */
	iscsi_session_tick(h->s, now + 62 * sec);
	settle(h);
	assert_false(iscsi_session_finished(h->s));
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_NOP_IN);
	assert_int_not_equal(iscsi_get32(r.bhs + 20), ttt);
	/* that ping is not answered: 30 s later the session ends */
	iscsi_session_tick(h->s, now + 91 * sec);
	settle(h);
	assert_false(iscsi_session_finished(h->s));
	iscsi_session_tick(h->s, now + 93 * sec);
	settle(h);
	assert_true(iscsi_session_finished(h->s));
	assert_string_equal(iscsi_session_end_reason(h->s),
			    "no answer to a NOP-In ping in 30 s");
}

static void login_first_then_nothing_else(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16] = { 0 };
	struct rx r;

	/* a SCSI command before login: Login Response 02/0b, then closed */
	cmd(h, 1, cdb, ISCSI_FLAG_FINAL, 0, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_LOGIN_RSP);
	assert_int_equal(r.bhs[36], 0x02);
	assert_int_equal(r.bhs[37], 0x0b);
	assert_true(iscsi_session_finished(h->s));
}

/*
 * Out of order, two Data-Out PDUs at one offset counted twice: the write
 * went to the core with bytes never sent (a reused buffer's, another
 * client's data). DataPDUInOrder is Yes whatever is offered, and a
 * Data-Out must start where the data so far ends.
 */
static void overlapping_data_out_refused(void **state)
{
	struct h *h = *state;
	uint8_t cdb[16], w[8192], rb[8192], bhs[48];
	uint32_t ttt;
	struct rx r;

	static const char keys[] = "InitialR2T=Yes\0ImmediateData=No\0"
				   "DataPDUInOrder=No\0DataSequenceInOrder=No\0";

	/* an initiator that offers No gets Yes (the OR of both sides) */
	LOGIN(h, keys, false, false);
	assert_string_equal(iscsi_text_find(h->keys, h->keys_len,
					    "DataPDUInOrder"), "Yes");
	assert_string_equal(iscsi_text_find(h->keys, h->keys_len,
					    "DataSequenceInOrder"), "Yes");
	clear_ua(h);

	th_fill(w, sizeof(w), 9);
	cdb10(cdb, 0x2a, 0, 16);
	cmd(h, 7, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(w), NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_R2T);
	ttt = iscsi_get32(r.bhs + 20);
	memset(bhs, 0, sizeof(bhs));
	bhs[0] = ISCSI_OP_DATA_OUT;
	iscsi_put32(bhs + 16, 7);
	iscsi_put32(bhs + 20, ttt);
	send_pdu(h, bhs, w, 4096, false, false);
	expect_none(h);
	/* the same offset again, next DataSN: refused, not counted */
	iscsi_put32(bhs + 36, 1);
	send_pdu(h, bhs, w, 4096, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_REJECT);
	assert_int_equal(r.bhs[2], ISCSI_REJECT_PROTOCOL);
	expect_none(h);		/* the write did not run */
	/* ahead of where the data ends: refused too */
	iscsi_put32(bhs + 40, 6144);
	send_pdu(h, bhs, w + 6144, 2048, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_REJECT);
	expect_none(h);
	/* the rest, in order */
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put32(bhs + 40, 4096);
	send_pdu(h, bhs, w + 4096, 4096, false, false);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);
	assert_int_equal(bs_read_sync(h->dev, rb, sizeof(rb), 0), 0);
	assert_memory_equal(rb, w, sizeof(w));
}

/* An immediate SCSI Command (I bit): outside the CmdSN window */
static void immediate_cmd(struct h *h, uint32_t itt, const uint8_t *cdb,
			  uint8_t flags, uint32_t edtl)
{
	uint8_t bhs[48] = { 0 };

	bhs[0] = ISCSI_OP_SCSI_CMD | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = flags | 1;
	iscsi_put32(bhs + 16, itt);
	iscsi_put32(bhs + 20, edtl);
	iscsi_put32(bhs + 24, h->cmdsn);
	memcpy(bhs + 32, cdb, 16);
	send_pdu(h, bhs, NULL, 0, false, false);
}

/*
 * Immediate commands do not take CmdSN window places: past queue_depth
 * (8 here) and ISCSI_IMMEDIATE_EXTRA in flight they are answered TASK
 * SET FULL, not held (writes that never get their data held a task and
 * a buffer each, without bound).
 */
static void immediate_commands_bounded(void **state)
{
	struct h *h = *state;
	unsigned held = 8 + ISCSI_IMMEDIATE_EXTRA, i, r2t = 0, full = 0;
	uint8_t cdb[16];
	struct rx r;

	LOGIN(h, "InitialR2T=Yes\0ImmediateData=No\0", false, false);
	clear_ua(h);
	cdb10(cdb, 0x2a, 0, 1);
	for (i = 0; i < held + 5; i++)
		immediate_cmd(h, 0x200 + i, cdb,
			      ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, 512);
	while (next_pdu(h, &r)) {
		if (r.bhs[0] == ISCSI_OP_R2T) {
			r2t++;
		} else {
			assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
			assert_int_equal(r.bhs[3], BS_SCSI_TASK_SET_FULL);
			assert_true(iscsi_itt(r.bhs) >= 0x200 + held);
			full++;
		}
	}
	assert_int_equal(r2t, held);
	assert_int_equal(full, 5);
}

/*
 * A READ is charged to the budget by what the core reads for it, not by
 * EDTL alone: READ(10) of 64 blocks without the R flag (EDTL 0) held 32
 * KiB that no budget counted.
 */
static void read_charged_by_cdb(void **state)
{
	struct h *h = *state;
	struct bs_budget *b = bs_ctx_budget(h->ctx);
	uint8_t cdb[16];
	struct rx r;

	LOGIN(h, "InitialR2T=Yes\0", false, false);
	clear_ua(h);
	assert_int_equal(bs_budget_peak(b), 0);
	cdb10(cdb, 0x28, 0, 64);
	cmd(h, 9, cdb, ISCSI_FLAG_FINAL, 0, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);
	expect_none(h);		/* no Data-In: no R flag */
	assert_true(bs_budget_peak(b) >= 64 * 512);
	assert_int_equal(bs_budget_used(b), 0);
}

struct waiter {
	struct bs_budget_holder h;	/* first */
	int woken;
};

static void waiter_wake(struct bs_budget_holder *h)
{
	((struct waiter *)h)->woken++;
}

/*
 * A session holding a command for the budget, woken for its turn, that
 * sees the initiator's EOF before its wake ran (or ends, or is freed
 * with commands still in the core) waits no more: the next waiter is
 * woken then, not a second later nor when the session is gone.
 */
static void budget_turn_passed_on_at_eof(void **state)
{
	struct h *h = *state;
	struct bs_budget *b = bs_ctx_budget(h->ctx);
	uint64_t held = BS_BUDGET_MIN - 16 * KiB;
	struct bs_budget_holder other;
	struct waiter next;
	uint8_t cdb[16];

	LOGIN(h, "InitialR2T=Yes\0", false, false);
	clear_ua(h);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, held));
	/* READ(10) of 32 KiB does not fit: the command is held */
	cdb10(cdb, 0x28, 0, 64);
	cmd(h, 9, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, 64 * 512, NULL, 0);
	expect_none(h);
	assert_int_equal(bs_budget_waits(b), 1);
	memset(&next, 0, sizeof(next));
	next.h.wake = waiter_wake;
	assert_false(bs_budget_take(b, &next.h, 8u << 20));
	/* room for both: the session's turn (the smaller); EOF comes
	 * before its wake runs */
	bs_budget_give(b, &other, 16u << 20);
	iscsi_session_eof(h->s);
	bs_loop_run_once(bs_ctx_loop(h->ctx), 0);
	assert_int_equal(next.woken, 1);
	assert_true(bs_budget_take(b, &next.h, 8u << 20));
	bs_budget_leave(b, &next.h);
	bs_budget_leave(b, &other);
	assert_int_equal(bs_budget_used(b), 0);
}

/* ---- a slow device: its requests wait until the test lets them go ------- */

/* Tasks of the session the budget counts in a device right now. */
static unsigned in_dev(const struct h *h)
{
	return __atomic_load_n(&h->s->bh.in_dev, __ATOMIC_ACQUIRE);
}

/*
 * The task just sent reaches the device @steps times, one request after
 * the other (a COMPARE AND WRITE's read, then its write); the device
 * holds each for @ms milliseconds, the watchdog running and another
 * holder waiting: the session is not ended meanwhile, and the task is
 * counted in the device from the first step to its answer.
 */
static void slow_steps(struct h *h, unsigned steps, unsigned ms)
{
	unsigned i;

	for (i = 0; i < steps; i++) {
		th_slow_wait(bs_ctx_loop(h->ctx), 1);
		th_run_for(bs_ctx_loop(h->ctx), ms);
		assert_false(h->s->ended);
		assert_int_equal(in_dev(h), 1);
		th_slow_release();
		settle(h);
	}
	assert_int_equal(th_slow_count(), 0);
	assert_int_equal(in_dev(h), 0);
}

/* The SCSI Response of @itt: its status. */
static uint8_t status_of(struct h *h, uint32_t itt)
{
	struct rx r;

	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_SCSI_RSP);
	assert_int_equal(iscsi_itt(r.bhs), itt);
	return r.bhs[3];
}

/* A SCSI Command without data, fed without running the loop after it */
static void cmd_unsettled(struct h *h, uint32_t itt, const uint8_t *cdb,
			  uint8_t flags, uint32_t edtl)
{
	uint8_t bhs[48] = { 0 };

	bhs[0] = ISCSI_OP_SCSI_CMD;
	bhs[1] = flags | 1;
	iscsi_put32(bhs + 16, itt);
	iscsi_put32(bhs + 20, edtl);
	iscsi_put32(bhs + 24, h->cmdsn++);
	memcpy(bhs + 32, cdb, 16);
	assert_int_equal(iscsi_session_feed(h->s, bhs, 48), 48);
}

static void put_be(uint8_t *p, uint64_t v, unsigned n)
{
	unsigned i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

/*
 * A slow device is not a stalled initiator. With a stall timeout of 20
 * ms and another holder waiting for the budget, a session whose commands
 * wait in the device keeps its bytes however long that takes: the device
 * holds each request for 100 ms, and a 32 KiB WRITE(10) (its data in as
 * immediate data, its bytes held), a READ(10) of it, a COMPARE AND WRITE
 * (its read, then its write, each held), a WRITE SAME(16) of zeroes and
 * an EXTENDED COPY (its chunk read, then its write) all complete, the
 * task counted in the device from its first step to its answer. Before,
 * the session was evicted ("no progress for ...") a stall timeout after
 * the WRITE reached the device, though its initiator was the one
 * waiting. Once the device is done the initiator's part counts again: a
 * READ's Data-In it never takes gets the session evicted.
 */
static void slow_device_is_not_a_stall(void **state)
{
	struct h *h = *state;
	struct bs_budget *b = bs_ctx_budget(h->ctx);
	struct bs_budget_holder other;
	uint8_t cdb[16], w[32 * KiB], caw[1024], blk[512], pl[64];
	struct rx r;
	int i;

	LOGIN(h, "MaxRecvDataSegmentLength=65536\0", false, false);
	clear_ua(h);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 20), 0);
	th_fill(w, sizeof(w), 91);
	th_slow_begin(h->dev);

	/* WRITE(10) of 32 KiB, all of it immediate data: in the device at
	 * once, its bytes held; then the other holder waits */
	cdb10(cdb, 0x2a, 0, 64);
	cmd(h, 1, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(w), w,
	    sizeof(w));
	memset(&other, 0, sizeof(other));
	assert_false(bs_budget_take(b, &other, BS_BUDGET_MIN));
	slow_steps(h, 1, 100);
	assert_int_equal(status_of(h, 1), BS_SCSI_GOOD);

	/* READ(10) of it */
	cdb10(cdb, 0x28, 0, 64);
	cmd(h, 2, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, sizeof(w), NULL, 0);
	slow_steps(h, 1, 100);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_DATA_IN);
	assert_int_equal(r.bhs[3], BS_SCSI_GOOD);
	assert_int_equal(r.len, sizeof(w));
	assert_memory_equal(r.data, w, sizeof(w));

	/* COMPARE AND WRITE of block 0: a read, then a write */
	memset(cdb, 0, 16);
	cdb[0] = 0x89;
	cdb[13] = 1;
	memcpy(caw, w, 512);
	memset(caw + 512, 0xc3, 512);
	cmd(h, 3, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(caw), caw,
	    sizeof(caw));
	slow_steps(h, 2, 100);
	assert_int_equal(status_of(h, 3), BS_SCSI_GOOD);

	/* WRITE SAME(16) of a zero block over blocks 64..127: one zeroout */
	memset(cdb, 0, 16);
	cdb[0] = 0x93;
	put_be(cdb + 2, 64, 8);
	put_be(cdb + 10, 64, 4);
	memset(blk, 0, sizeof(blk));
	cmd(h, 4, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(blk), blk,
	    sizeof(blk));
	slow_steps(h, 1, 100);
	assert_int_equal(status_of(h, 4), BS_SCSI_GOOD);

	/* EXTENDED COPY of blocks 0..7 to 200..207 within the unit (CSCD
	 * descriptor ID FFFFh): a chunk read, then its write */
	memset(pl, 0, sizeof(pl));
	pl[1] = 0x18;			/* LIST ID USAGE 11b */
	put_be(pl + 8, 28, 4);		/* one segment, no target */
	pl[16] = 0x02;			/* block to block */
	put_be(pl + 18, 0x18, 2);
	put_be(pl + 20, 0xffff, 2);
	put_be(pl + 22, 0xffff, 2);
	put_be(pl + 26, 8, 2);
	put_be(pl + 28, 0, 8);
	put_be(pl + 36, 200, 8);
	memset(cdb, 0, 16);
	cdb[0] = 0x83;
	put_be(cdb + 10, 44, 4);
	cmd(h, 5, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, 44, pl, 44);
	slow_steps(h, 2, 100);
	assert_int_equal(status_of(h, 5), BS_SCSI_GOOD);
	th_slow_end();
	assert_false(h->s->ended);

	/* what the device holds now: block 0 from the COMPARE AND WRITE,
	 * 64.. zeroes, 200.. the copy */
	cdb10(cdb, 0x28, 200, 8);
	cmd(h, 6, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, 4096, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.len, 4096);
	assert_memory_equal(r.data, caw + 512, 512);
	assert_memory_equal(r.data + 512, w + 512, 4096 - 512);
	cdb10(cdb, 0x28, 64, 1);
	cmd(h, 7, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, 512, NULL, 0);
	assert_true(next_pdu(h, &r));
	assert_memory_equal(r.data, blk, 512);

	/* the device done, a READ whose Data-In is never taken: evicted */
	cdb10(cdb, 0x28, 0, 64);
	cmd_unsettled(h, 8, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ,
		      sizeof(w));
	for (i = 0; i < 500 && !h->s->ended; i++)
		bs_loop_run_once(bs_ctx_loop(h->ctx), 10);
	assert_true(h->s->evicted);
	assert_non_null(strstr(iscsi_session_end_reason(h->s),
			       "no progress for"));
	assert_int_equal(in_dev(h), 0);
	iscsi_session_free(h->s);
	h->s = NULL;
	assert_int_equal(bs_budget_used(b), 0);
	bs_budget_leave(b, &other);
}

/*
 * An initiator that does not take a READ's 32 KiB Data-In but sends a
 * TEST UNIT READY every 5 ms (each goes to the core and is answered at
 * once): with a 20 ms stall timeout and another holder waiting, evicted
 * within a few stall timeouts. When a task coming back counted as
 * progress (the first version of the device-time rule), it kept the
 * Data-In's bytes for as long as it went on pinging.
 */
static void unread_data_in_not_kept_by_pings(void **state)
{
	struct h *h = *state;
	struct bs_budget *b = bs_ctx_budget(h->ctx);
	struct bs_budget_holder other;
	uint8_t cdb[16];
	int i;

	LOGIN(h, "MaxRecvDataSegmentLength=65536\0", false, false);
	clear_ua(h);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 20), 0);
	cdb10(cdb, 0x28, 0, 64);
	cmd_unsettled(h, 1, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ,
		      32 * KiB);
	th_run_for(bs_ctx_loop(h->ctx), 2);
	memset(&other, 0, sizeof(other));
	assert_false(bs_budget_take(b, &other, BS_BUDGET_MIN));
	memset(cdb, 0, sizeof(cdb));		/* TEST UNIT READY */
	for (i = 0; i < 200 && !h->s->ended; i++) {
		cmd_unsettled(h, 100 + i, cdb, ISCSI_FLAG_FINAL, 0);
		th_run_for(bs_ctx_loop(h->ctx), 5);
	}
	assert_true(h->s->evicted);
	assert_true(i < 40);
	assert_non_null(strstr(iscsi_session_end_reason(h->s),
			       "no progress for"));
	assert_int_equal(in_dev(h), 0);
	iscsi_session_free(h->s);
	h->s = NULL;
	assert_int_equal(bs_budget_used(b), 0);
	bs_budget_leave(b, &other);
}

/* The budget bytes the session counts in a device right now. */
static uint64_t in_dev_bytes(const struct h *h)
{
	return __atomic_load_n(&h->s->bh.in_dev_bytes, __ATOMIC_ACQUIRE);
}

/* A Task Management Function request (immediate). */
static void tmf(struct h *h, uint8_t fn, uint32_t itt, uint32_t ref_itt,
		uint32_t ref_sn)
{
	uint8_t bhs[48] = { 0 };

	bhs[0] = ISCSI_OP_TMF_REQ | ISCSI_FLAG_IMMEDIATE;
	bhs[1] = ISCSI_FLAG_FINAL | fn;
	iscsi_put32(bhs + 16, itt);
	iscsi_put32(bhs + 20, ref_itt);
	iscsi_put32(bhs + 24, h->cmdsn);
	iscsi_put32(bhs + 32, ref_sn);
	send_pdu(h, bhs, NULL, 0, false, false);
}

/*
 * Task management while tasks are in a slow device: an ABORT TASK of a
 * READ in the device, then a LOGICAL UNIT RESET with a WRITE and a READ
 * there. Each task stays counted in the device, with its bytes, until
 * the device gives it back, and nothing stays counted after: a task
 * counted twice, or its end lost, would shield the session from the
 * watchdog for good (or evict it too soon).
 */
static void task_management_with_tasks_in_a_slow_device(void **state)
{
	struct h *h = *state;
	struct bs_budget *b = bs_ctx_budget(h->ctx);
	uint8_t cdb[16], w[4 * KiB];
	uint32_t sn;
	struct rx r;

	LOGIN(h, "MaxRecvDataSegmentLength=65536\0", false, false);
	clear_ua(h);
	th_fill(w, sizeof(w), 93);
	th_slow_begin(h->dev);
	cdb10(cdb, 0x28, 0, 8);
	sn = h->cmdsn;
	cmd(h, 1, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, sizeof(w), NULL, 0);
	th_slow_wait(bs_ctx_loop(h->ctx), 1);
	assert_int_equal(in_dev(h), 1);
	assert_int_equal(in_dev_bytes(h), sizeof(w));
	tmf(h, ISCSI_TMF_ABORT_TASK, 0x50, 1, sn);
	settle(h);
	assert_int_equal(in_dev(h), 1);		/* still in the device */
	th_slow_release();
	settle(h);
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_TMF_RSP);
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_COMPLETE);
	expect_none(h);			/* no Data-In, no response */
	assert_int_equal(in_dev(h), 0);
	assert_int_equal(in_dev_bytes(h), 0);
	assert_int_equal(bs_budget_used(b), 0);

	/* a WRITE and a READ in the device, then LUN RESET */
	cdb10(cdb, 0x2a, 0, 8);
	cmd(h, 2, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(w), w,
	    sizeof(w));
	cdb10(cdb, 0x28, 8, 8);
	cmd(h, 3, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, sizeof(w), NULL, 0);
	th_slow_wait(bs_ctx_loop(h->ctx), 2);
	assert_int_equal(in_dev(h), 2);
	assert_int_equal(in_dev_bytes(h), 2 * sizeof(w));
	tmf(h, ISCSI_TMF_LUN_RESET, 0x51, ISCSI_RSVD_TAG, 0);
	settle(h);
	th_slow_release();
	th_slow_release();
	settle(h);
	th_slow_end();
	assert_true(next_pdu(h, &r));
	assert_int_equal(r.bhs[0], ISCSI_OP_TMF_RSP);
	assert_int_equal(r.bhs[2], ISCSI_TMF_RSP_COMPLETE);
	assert_int_equal(in_dev(h), 0);
	assert_int_equal(in_dev_bytes(h), 0);
	assert_int_equal(bs_budget_used(b), 0);
	assert_false(h->s->ended);
}

/*
 * A session freed with tasks in a slow device: each is counted in the
 * device until it is back, and the session goes (its budget with it)
 * only when the last one is.
 */
static void freed_with_tasks_in_a_slow_device(void **state)
{
	struct h *h = *state;
	struct bs_budget *b = bs_ctx_budget(h->ctx);
	uint8_t cdb[16], w[4 * KiB];
	int i;

	LOGIN(h, "MaxRecvDataSegmentLength=65536\0", false, false);
	clear_ua(h);
	th_fill(w, sizeof(w), 92);
	th_slow_begin(h->dev);
	cdb10(cdb, 0x2a, 0, 8);
	cmd(h, 1, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_WRITE, sizeof(w), w,
	    sizeof(w));
	cdb10(cdb, 0x28, 8, 8);
	cmd(h, 2, cdb, ISCSI_FLAG_FINAL | ISCSI_CMD_READ, sizeof(w), NULL, 0);
	th_slow_wait(bs_ctx_loop(h->ctx), 2);
	assert_int_equal(in_dev(h), 2);
	assert_int_equal(bs_budget_used(b), 2 * sizeof(w));
	iscsi_session_free(h->s);	/* orphaned until they are back */
	h->s = NULL;
	assert_int_equal(bs_budget_used(b), 2 * sizeof(w));
	th_slow_release();
	for (i = 0; i < 50; i++)
		bs_loop_run_once(bs_ctx_loop(h->ctx), 0);
	assert_int_equal(bs_budget_used(b), sizeof(w));
	th_slow_release();
	for (i = 0; i < 50; i++)
		bs_loop_run_once(bs_ctx_loop(h->ctx), 0);
	th_slow_end();
	assert_int_equal(bs_budget_used(b), 0);
	assert_int_equal(n_attached, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(data_digests_both_ways, setup,
						teardown),
		cmocka_unit_test_setup_teardown(r2t_sequences_and_data_in_split,
						setup, teardown),
		cmocka_unit_test_setup_teardown(short_unsolicited_burst, setup,
						teardown),
		cmocka_unit_test_setup_teardown(zero_copy_data_out, setup,
						teardown),
		cmocka_unit_test_setup_teardown(window_nop_text_logout, setup,
						teardown),
		cmocka_unit_test_setup_teardown(abort_a_write_waiting_for_data,
						setup, teardown),
		cmocka_unit_test_setup_teardown(abort_task_set, setup,
						teardown),
		cmocka_unit_test_setup_teardown(logout_with_a_write_waiting,
						setup, teardown),
		cmocka_unit_test_setup_teardown(pings_of_an_idle_initiator,
						setup, teardown),
		cmocka_unit_test_setup_teardown(overlapping_data_out_refused,
						setup, teardown),
		cmocka_unit_test_setup_teardown(immediate_commands_bounded,
						setup, teardown),
		cmocka_unit_test_setup_teardown(read_charged_by_cdb, setup,
						teardown),
		cmocka_unit_test_setup_teardown(budget_turn_passed_on_at_eof,
						setup, teardown),
		cmocka_unit_test_setup_teardown(unread_data_in_not_kept_by_pings,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			task_management_with_tasks_in_a_slow_device, setup,
			teardown),
		cmocka_unit_test_setup_teardown(slow_device_is_not_a_stall,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			freed_with_tasks_in_a_slow_device, setup, teardown),
		cmocka_unit_test_setup_teardown(login_first_then_nothing_else,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
