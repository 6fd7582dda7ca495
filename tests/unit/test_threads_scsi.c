/* SPDX-License-Identifier: MIT */
/*
 * The SCSI target core on several I/O loops: two nexuses, each on its own
 * I/O thread, increment one counter block with COMPARE AND WRITE (reading
 * it again after a miscompare) and write blocks of their own between,
 * while the main loop flips the write-zeroes knob and raises unit
 * attentions. Every increment must count (COMPARE AND WRITE is atomic
 * across threads), every completion must come on the nexus's own loop.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/scsi.h>
#include <blkstack/threads.h>

#include "helpers/th.h"

#define NCLIENTS 2
#define INCS 2000
#define BS 512

struct client {
	struct bs_scsi_cmd cmd;
	struct bs_scsi_nexus *nexus;
	struct bs_loop *loop;
	struct bs_work start;
	unsigned index;
	uint64_t cur;		/* the counter as last read */
	unsigned incs;		/* increments that succeeded */
	unsigned miscompares, uas;
	int phase;		/* 0 read, 1 compare and write, 2 write own */
	uint8_t buf[2 * BS];
	unsigned wrong_loop, errors;
	int finished;		/* atomic */
};

static void issue(struct client *c);

static void put_be(uint8_t *p, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static void counter_block(uint8_t *b, uint64_t v)
{
	memset(b, 0, BS);
	memcpy(b, &v, sizeof(v));
}

static void done(struct bs_scsi_cmd *cmd)
{
	struct client *c = cmd->priv;
	uint8_t key = cmd->sense_len >= 14 ? cmd->sense[2] & 0x0f : 0;

	if (bs_loop_current() != c->loop)
		c->wrong_loop++;
	if (cmd->status == BS_SCSI_CHECK_CONDITION && key == 0x6) {
		c->uas++;		/* a unit attention: send it again */
		bs_scsi_cmd_release(cmd);
		issue(c);
		return;
	}
	switch (c->phase) {
	case 0:
		if (cmd->status != BS_SCSI_GOOD || cmd->din_len != BS) {
			c->errors++;
			break;
		}
		memcpy(&c->cur, cmd->din, sizeof(c->cur));
		c->phase = 1;
		break;
	case 1:
		if (cmd->status == BS_SCSI_GOOD) {
			c->cur++;
			c->incs++;
			c->phase = 2;
		} else if (cmd->status == BS_SCSI_CHECK_CONDITION &&
			   key == 0xe) {
			c->miscompares++;
			c->phase = 0;
		} else {
			c->errors++;
		}
		break;
	default:
		if (cmd->status != BS_SCSI_GOOD)
			c->errors++;
		c->phase = 1;
		break;
	}
	bs_scsi_cmd_release(cmd);
	if (c->errors || c->incs == INCS) {
		__atomic_store_n(&c->finished, 1, __ATOMIC_RELEASE);
		return;
	}
	issue(c);
}

/* On the client's loop: send the command of its phase. */
static void issue(struct client *c)
{
	struct bs_scsi_cmd *cmd = &c->cmd;

	memset(cmd, 0, sizeof(*cmd));
	cmd->nexus = c->nexus;
	cmd->lun = 0;
	cmd->cdb_len = 16;
	cmd->done = done;
	cmd->priv = c;
	switch (c->phase) {
	case 0:		/* READ(10) of the counter */
		cmd->cdb[0] = 0x28;
		cmd->cdb[8] = 1;
		cmd->din_max = BS;
		break;
	case 1:		/* COMPARE AND WRITE: cur -> cur + 1 */
		cmd->cdb[0] = 0x89;
		cmd->cdb[13] = 1;
		counter_block(c->buf, c->cur);
		counter_block(c->buf + BS, c->cur + 1);
		cmd->dout = c->buf;
		cmd->dout_len = 2 * BS;
		break;
	default:	/* WRITE(16) of a block of our own */
		cmd->cdb[0] = 0x8a;
		put_be(cmd->cdb + 2, 16 + c->index * 64 + c->incs % 64, 8);
		cmd->cdb[13] = 1;
		memset(c->buf, 0x40 + c->index, BS);
		cmd->dout = c->buf;
		cmd->dout_len = BS;
		break;
	}
	bs_scsi_exec(cmd);
}

static void start(void *arg)
{
	issue(arg);
}

static void caw_across_threads(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "m", "mem:16M");
	struct bs_scsi_tgt_cfg tc = { .name = "iqn.2026-01.test:mt" };
	struct bs_scsi_lu_cfg lc = { .lun = 0, .dev = d, .name = "m" };
	struct client *cl = calloc(NCLIENTS, sizeof(*cl));
	struct bs_scsi_tgt *t;
	struct bs_scsi_lu *lu;
	uint8_t blk[BS];
	uint64_t v, deadline;
	bool knob = true;
	unsigned i, flips = 0;

	assert_int_equal(bs_ctx_start_threads(ctx, NCLIENTS), 0);
	assert_int_equal(bs_scsi_tgt_new(&tc, &t), 0);
	assert_int_equal(bs_scsi_lu_add(t, &lc, &lu), 0);
	for (i = 0; i < NCLIENTS; i++) {
		char port[64];
		struct bs_scsi_nexus_cfg nc = { port, "iqn.2026-01.test:mt,t,0x1",
						1, 1 };

		snprintf(port, sizeof(port), "iqn.2026-01.test:c%u,i,0x%u", i,
			 i);
		assert_int_equal(bs_scsi_nexus_new(t, &nc, &cl[i].nexus), 0);
		cl[i].index = i;
		cl[i].loop = bs_ctx_loop_at(ctx, i + 1);
		cl[i].start.fn = start;
		cl[i].start.arg = &cl[i];
	}
	for (i = 0; i < NCLIENTS; i++)
		bs_loop_send(cl[i].loop, &cl[i].start);

	deadline = bs_now_ns() + 60ull * 1000000000ull;
	for (;;) {
		struct bs_caps old, now;
		unsigned fin = 0;

		for (i = 0; i < NCLIENTS; i++)
			fin += __atomic_load_n(&cl[i].finished,
					       __ATOMIC_ACQUIRE);
		if (fin == NCLIENTS)
			break;
		assert_true(bs_now_ns() < deadline);
		if (flips < 200) {
			bs_dev_caps(d, &old);
			knob = !knob;
			assert_int_equal(bs_attr_store(d,
					 "queue/write_zeroes_unmap",
					 knob ? "1" : "0"), 0);
			bs_dev_caps(d, &now);
			bs_scsi_lu_caps_changed(lu, &old, &now);
			flips++;
		}
		bs_loop_run_once(bs_ctx_loop(ctx), 2);
	}
	for (i = 0; i < NCLIENTS; i++) {
		assert_int_equal(cl[i].errors, 0);
		assert_int_equal(cl[i].wrong_loop, 0);
		assert_int_equal(cl[i].incs, INCS);
	}
	for (i = 0; i < NCLIENTS; i++)
		print_message("client %u: %u miscompares, %u unit attentions\n",
			      i, cl[i].miscompares, cl[i].uas);
	assert_int_equal(bs_read_sync(d, blk, BS, 0), 0);
	memcpy(&v, blk, sizeof(v));
	assert_int_equal(v, NCLIENTS * INCS);
	for (i = 0; i < NCLIENTS; i++)
		bs_scsi_nexus_free(cl[i].nexus);
	bs_scsi_lu_remove(lu);
	bs_scsi_tgt_free(t);
	free(cl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(caw_across_threads,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
