/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the iSCSI session (PDU assembly, digests, login and
 * negotiation, CHAP, Text, NOP, Logout, TMF, SCSI Command / Data-Out / R2T
 * / Data-In) over the SCSI target core and a mem device. One session per
 * input.
 *
 * Input layout:
 *   byte 0   configuration: bit 0 the target requires CHAP (user "u",
 *            secret "fuzz-secret-12"); bit 1 log in first with a canned
 *            valid login (None, no digests) so the rest lands in the
 *            full feature phase; bit 2 the canned login asks for header
 *            and data digests CRC32C; bit 3 keep output unread until the
 *            session stalls; bit 4 free the session with commands in
 *            flight instead of waiting; bits 5-6 LUN 0's device (mem with
 *            unmap, zeroes=write, 4K blocks, zeroes=none); bit 7
 *            time passes between feeds (pings of an idle initiator)
 *   byte 1   feed granularity: bytes per feed is 1 + byte * 61
 *   rest     the initiator's byte stream
 *
 * Between feeds the loop runs and output is drained (a short send now and
 * then); at the end the initiator hangs up, commands in flight complete
 * and everything is freed (LeakSanitizer checks nothing outlives it).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>
#include <blkstack/scsi.h>

#include "core/crc32c.h"
#include "export/iscsi/pdu.h"
#include "export/iscsi/session.h"
#include "helpers/fz_dev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TGT "iqn.2026-12.org.blkstack:fuzz"

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

struct fz {
	bool chap;
	struct bs_scsi_tgt *scsi;
	uint32_t lbs;
	uint8_t rnd;
};

static void fz_kick(void *arg)
{
	(void)arg;
}

static void fz_log(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

static int fz_find(void *arg, const char *name, struct iscsi_login_target *t)
{
	struct fz *x = arg;

	if (strcmp(name, TGT))
		return -1;
	memset(t, 0, sizeof(*t));
	t->name = TGT;
	t->tp = &tp;
	t->priv = x;
	if (x->chap) {
		t->chap_user = "u";
		t->chap_secret = "fuzz-secret-12";
		t->mutual_user = "t";
		t->mutual_secret = "fuzz-mutual-34";
	}
	return 0;
}

static const struct iscsi_target_params *fz_dparams(void *arg)
{
	(void)arg;
	return &tp;
}

static uint16_t fz_tsih(void *arg)
{
	(void)arg;
	return 1;
}

static int fz_random(void *arg, void *buf, size_t len)
{
	struct fz *x = arg;
	uint8_t *p = buf;

	while (len--)
		*p++ = x->rnd++;
	return 0;
}

static void fz_each(void *arg, void (*fn)(void *fa, const char *name,
					  const char *portal),
		    void *fa)
{
	(void)arg;
	fn(fa, TGT, "127.0.0.1:3260,1");
}

static int fz_attach(void *arg, const struct iscsi_login_target *t,
		     struct iscsi_session_target *st)
{
	struct fz *x = arg;

	(void)t;
	st->scsi = x->scsi;
	st->queue_depth = 16;
	return 0;
}

static void fz_detach(const struct iscsi_login_target *t)
{
	(void)t;
}

static uint32_t fz_block_size(void *arg, const struct iscsi_login_target *t,
			      uint64_t lun)
{
	struct fz *x = arg;

	(void)t;
	return lun == 0 ? x->lbs : 0;
}

static const struct iscsi_session_ops fz_ops = {
	.kick = fz_kick,
	.log = fz_log,
	.find = fz_find,
	.discovery_params = fz_dparams,
	.tsih = fz_tsih,
	.random = fz_random,
	.each_target = fz_each,
	.attach = fz_attach,
	.detach = fz_detach,
	.release = fz_detach,
	.block_size = fz_block_size,
};

static const char *const dev_specs[] = {
	"size=1M;chunk=4K",
	"size=1M;chunk=64K;zeroes=write",
	"size=1M;logical_block_size=4096;write_cache=1",
	"size=1M;zeroes=none;max_discard=0",
};

static void drain(struct iscsi_session *s)
{
	unsigned rounds = 0;

	while (iscsi_session_out_bytes(s) && rounds++ < 100000) {
		struct iovec iov[16];
		int n = iscsi_session_out_iov(s, iov, 16);
		size_t total = fz_out_iov_check(iov, n);

		if (total > 5 && (rounds & 1))
			total -= 5;
		iscsi_session_out_advance(s, total);
	}
}

static void run(struct bs_loop *loop, struct iscsi_session *s)
{
	unsigned i, idle = 0;

	for (i = 0; i < 100000 && idle < 2; i++) {
		bs_loop_run_once(loop, 0);
		idle = iscsi_session_inflight(s) ? 0 : idle + 1;
	}
}

/* A login request PDU with @keys (NUL-separated, @klen bytes). */
static size_t login_pdu(uint8_t *buf, uint8_t flags, uint32_t cmdsn,
			const char *keys, size_t klen)
{
	memset(buf, 0, ISCSI_BHS_LEN);
	buf[0] = ISCSI_OP_LOGIN_REQ | ISCSI_FLAG_IMMEDIATE;
	buf[1] = flags;
	buf[8] = 0x40;
	iscsi_put24(buf + 5, (uint32_t)klen);
	iscsi_put32(buf + 16, 1);
	iscsi_put32(buf + 24, cmdsn);
	memcpy(buf + ISCSI_BHS_LEN, keys, klen);
	memset(buf + ISCSI_BHS_LEN + klen, 0, iscsi_pad4((uint32_t)klen));
	return ISCSI_BHS_LEN + klen + iscsi_pad4((uint32_t)klen);
}

static void canned_login(struct iscsi_session *s, struct bs_loop *loop,
			 bool digests)
{
	static const char sec[] = "InitiatorName=iqn.fuzz\0SessionType=Normal\0"
				  "TargetName=" TGT "\0AuthMethod=None\0";
	static const char op_plain[] = "HeaderDigest=None\0DataDigest=None\0"
				       "MaxRecvDataSegmentLength=8192\0";
	static const char op_dig[] = "HeaderDigest=CRC32C\0DataDigest=CRC32C\0"
				     "MaxRecvDataSegmentLength=8192\0";
	uint8_t buf[512];
	size_t n;

	n = login_pdu(buf, ISCSI_LOGIN_TRANSIT | (0 << 2) | 1, 1, sec,
		      sizeof(sec) - 1);
	iscsi_session_feed(s, buf, n);
	drain(s);
	n = digests ? login_pdu(buf, ISCSI_LOGIN_TRANSIT | (1 << 2) | 3, 1,
				op_dig, sizeof(op_dig) - 1) :
		      login_pdu(buf, ISCSI_LOGIN_TRANSIT | (1 << 2) | 3, 1,
				op_plain, sizeof(op_plain) - 1);
	iscsi_session_feed(s, buf, n);
	run(loop, s);
	drain(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bs_ctx *ctx = NULL;
	struct bs_dev *dev = NULL;
	struct iscsi_session *s = NULL;
	struct bs_scsi_lu *lu = NULL;
	struct bs_loop *loop;
	struct fz fz = { 0 };
	struct bs_scsi_tgt_cfg tc = { .name = TGT, .vendor = "BLKSTACK",
				      .product = "fuzz", .revision = "0" };
	struct bs_scsi_lu_cfg lc = { .lun = 0, .name = "lun0" };
	uint8_t cfg, gran;
	size_t step, pos, stalls = 0;
	bool lazy, drop;

	if (size < 2)
		return 0;
	cfg = data[0];
	gran = data[1];
	data += 2;
	size -= 2;
	lazy = cfg & 8;
	drop = cfg & 16;
	step = 1 + (size_t)gran * 61;
	fz.chap = cfg & 1;

	if (bs_ctx_new(&ctx))
		return 0;
	loop = bs_ctx_loop(ctx);
	if (fz_mem_dev(ctx, dev_specs[(cfg >> 5) & 3], &dev))
		goto out;
	fz.lbs = bs_dev_limits(dev)->logical_block_size;
	lc.dev = dev;
	if (bs_scsi_tgt_new(&tc, &fz.scsi) ||
	    bs_scsi_lu_add(fz.scsi, &lc, &lu) ||
	    iscsi_session_new(ctx, NULL, &fz_ops, &fz, &s))
		goto out;
	if ((cfg & 2) && !fz.chap)
		canned_login(s, loop, cfg & 4);

	for (pos = 0; pos < size && stalls < 64;) {
		size_t n = size - pos, used, room;
		uint8_t *dst;

		if (n > step)
			n = step;
		/* as the connection does: a Data-Out's data in place */
		room = iscsi_session_in_direct(s, &dst);
		if (room) {
			if (n > room)
				n = room;
			memcpy(dst, data + pos, n);
			iscsi_session_in_direct_done(s, n);
			pos += n;
			run(loop, s);
			if (!lazy)
				drain(s);
			stalls = 0;
			continue;
		}
		used = iscsi_session_feed(s, data + pos, n);
		if (used > n)
			abort();
		pos += used;
		run(loop, s);
		if (!lazy || used < n)
			drain(s);
		if (iscsi_session_finished(s) && !iscsi_session_out_bytes(s))
			break;
		if (cfg & 128)	/* time flies: pings, then their timeout */
			iscsi_session_tick(s, bs_now_ns() +
					   (uint64_t)pos * 1000000000);
		stalls = used ? 0 : stalls + 1;
	}
	iscsi_session_eof(s);
	if (!drop) {
		run(loop, s);
		drain(s);
		if (iscsi_session_inflight(s) || !iscsi_session_finished(s))
			abort();	/* an ended session must close */
	}
	(void)iscsi_session_end_reason(s);
	(void)iscsi_session_stats(s);
out:
	if (s) {
		iscsi_session_free(s);
		/* commands still in the core finish, then the session goes */
		for (int i = 0; i < 1000; i++)
			bs_loop_run_once(loop, 0);
	}
	if (lu)
		bs_scsi_lu_remove(lu);
	if (fz.scsi)
		bs_scsi_tgt_free(fz.scsi);
	if (dev)
		bs_dev_destroy(dev);
	bs_ctx_free(ctx);
	return 0;
}
