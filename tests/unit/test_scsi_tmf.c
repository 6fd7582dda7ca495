/* SPDX-License-Identifier: MIT */
/*
 * Task management in the SCSI core: one task set per LU for all I_T
 * nexuses. LOGICAL UNIT RESET, TARGET WARM RESET and CLEAR TASK SET abort
 * the tasks of every nexus on the LU (TASK ABORTED, TAS 1), the resets
 * queue their unit attention everywhere, and the _wait forms answer only
 * once the aborted tasks are gone.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/sth.h"
#include "helpers/th.h"

#define A (s->n[0])
#define B (s->n[1])

static struct sth_res R;

struct inflight {
	struct bs_scsi_cmd cmd;
	bool done;
	uint8_t status;
};

static void inflight_done(struct bs_scsi_cmd *cmd)
{
	struct inflight *f = cmd->priv;

	f->done = true;
	f->status = cmd->status;
}

/* Start a READ(10) of 8 blocks on (@n, @lun) and leave it in flight. */
static struct inflight *start_read(struct bs_scsi_nexus *n, uint64_t lun)
{
	struct inflight *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->cmd.nexus = n;
	f->cmd.lun = lun;
	sth_cdb_rw(f->cmd.cdb, 10, false, 0, 8);
	f->cmd.cdb_len = 10;
	f->cmd.din_max = 8 * 512;
	f->cmd.done = inflight_done;
	f->cmd.priv = f;
	bs_scsi_exec(&f->cmd);
	assert_false(f->done);
	return f;
}

static void inflight_free(struct inflight *f)
{
	assert_true(f->done);
	bs_scsi_cmd_release(&f->cmd);
	free(f);
}

/* In-flight commands that must have been answered before a waiter fires. */
static struct inflight *watch[2];

static void fired_cb(void *arg)
{
	bool *fired = arg;
	unsigned i;

	assert_false(*fired);	/* once */
	for (i = 0; i < 2; i++)
		if (watch[i])
			assert_true(watch[i]->done);
	*fired = true;
}

static void tur(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun)
{
	static const uint8_t cdb[6];

	sth_cmd(s, n, lun, cdb, 6, NULL, 0, 0, &R);
}

static void setup(struct sth *s, unsigned nlu)
{
	unsigned i;

	for (i = 0; i < nlu; i++) {
		char name[16];

		snprintf(name, sizeof(name), "m%u", i);
		sth_lu(s, i, th_dev(s->ctx, name, "mem:1M"), false);
	}
	for (i = 0; i < nlu; i++) {
		sth_clear_ua(s, A, i);
		sth_clear_ua(s, B, i);
	}
}

/* A LU reset from A aborts B's task too; the reset waits for it. */
static void lu_reset_aborts_all_nexuses(void **state)
{
	struct sth *s = *state;
	struct inflight *fa, *fb;
	bool fired = false;

	setup(s, 1);
	fa = start_read(A, 0);
	fb = start_read(B, 0);
	watch[0] = fa;
	watch[1] = fb;
	assert_int_equal(bs_scsi_lu_reset_wait(s->tgt, 0, A, fired_cb, &fired),
			 1);
	assert_false(fired);	/* never inside the call */
	assert_int_equal(bs_ctx_wait(s->ctx, &fb->done), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fa->done), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fired), 0);
	assert_true(fired);
	assert_int_equal(fb->status, BS_SCSI_TASK_ABORTED);
	assert_int_equal(fa->status, BS_SCSI_TASK_ABORTED);
	assert_int_equal(fb->cmd.din_len, 0);
	watch[0] = watch[1] = NULL;
	inflight_free(fa);
	inflight_free(fb);
	/* then a unit attention for both nexuses, once */
	tur(s, B, 0);
	sth_assert_check(&R, 0x6, 0x2903);
	tur(s, A, 0);
	sth_assert_check(&R, 0x6, 0x2903);
	tur(s, B, 0);
	assert_int_equal(R.status, BS_SCSI_GOOD);
	/* nothing in flight: nothing to wait for */
	fired = false;
	assert_int_equal(bs_scsi_lu_reset_wait(s->tgt, 0, A, fired_cb, &fired),
			 0);
	assert_int_equal(bs_scsi_lu_reset_wait(s->tgt, 7, A, fired_cb, &fired),
			 -ENODEV);
	assert_false(fired);
}

/* Tasks that start after the reset are not aborted: they meet the UA. */
static void later_tasks_not_aborted(void **state)
{
	struct sth *s = *state;
	struct inflight *fb, *late;
	bool fired = false;

	setup(s, 1);
	fb = start_read(B, 0);
	assert_int_equal(bs_scsi_lu_reset_wait(s->tgt, 0, A, fired_cb, &fired),
			 1);
	late = start_read(B, 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &late->done), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fb->done), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fired), 0);
	assert_int_equal(fb->status, BS_SCSI_TASK_ABORTED);
	assert_int_equal(late->status, BS_SCSI_CHECK_CONDITION);
	inflight_free(fb);
	inflight_free(late);
}

/* CLEAR TASK SET: every nexus's tasks end TASK ABORTED, no unit attention
 * (TAS 1), and the control mode page says TAS. */
static void clear_task_set(void **state)
{
	struct sth *s = *state;
	static const uint8_t ms[6] = { 0x1a, 0, 0x0a, 0, 255, 0 };
	struct inflight *fb;
	const uint8_t *pg;
	bool fired = false;

	setup(s, 2);
	fb = start_read(B, 0);
	assert_int_equal(bs_scsi_clear_task_set_wait(s->tgt, 0, A, fired_cb,
						     &fired), 1);
	assert_int_equal(bs_ctx_wait(s->ctx, &fb->done), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fired), 0);
	assert_int_equal(fb->status, BS_SCSI_TASK_ABORTED);
	inflight_free(fb);
	tur(s, B, 0);
	assert_int_equal(R.status, BS_SCSI_GOOD);
	tur(s, A, 0);
	assert_int_equal(R.status, BS_SCSI_GOOD);
	assert_int_equal(bs_scsi_clear_task_set_wait(s->tgt, 9, A, NULL, NULL),
			 -ENODEV);
	/* another LU's tasks are not touched */
	fb = start_read(B, 1);
	assert_int_equal(bs_scsi_clear_task_set_wait(s->tgt, 0, A, fired_cb,
						     &fired), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fb->done), 0);
	assert_int_equal(fb->status, BS_SCSI_GOOD);
	inflight_free(fb);
	/* control mode page: TAS = 1, TST = 000b */
	assert_int_equal(sth_cmd(s, A, 0, ms, 6, NULL, 0, 255, &R),
			 BS_SCSI_GOOD);
	pg = R.din + 4 + R.din[3];	/* after the block descriptors */
	assert_int_equal(pg[0], 0x0a);
	assert_int_equal(pg[5] & 0x40, 0x40);
	assert_int_equal(pg[2] & 0xe0, 0);
}

/* TARGET WARM RESET: the tasks of every LU and nexus; 29h/02h. */
static void target_reset(void **state)
{
	struct sth *s = *state;
	struct inflight *f0, *f1;
	bool fired = false;

	setup(s, 2);
	f0 = start_read(B, 0);
	f1 = start_read(A, 1);
	assert_int_equal(bs_scsi_tgt_reset_wait(s->tgt, A, fired_cb, &fired),
			 1);
	assert_int_equal(bs_ctx_wait(s->ctx, &f0->done), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &f1->done), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fired), 0);
	assert_true(fired);
	assert_int_equal(f0->status, BS_SCSI_TASK_ABORTED);
	assert_int_equal(f1->status, BS_SCSI_TASK_ABORTED);
	inflight_free(f0);
	inflight_free(f1);
	tur(s, B, 1);
	sth_assert_check(&R, 0x6, 0x2902);
	tur(s, A, 0);
	sth_assert_check(&R, 0x6, 0x2902);
	/* the old forms do not wait and do not need a callback */
	f0 = start_read(B, 0);
	bs_scsi_tgt_reset(s->tgt, A);
	assert_int_equal(bs_ctx_wait(s->ctx, &f0->done), 0);
	assert_int_equal(f0->status, BS_SCSI_TASK_ABORTED);
	inflight_free(f0);
}

/* Two waiters, one per LU: each answers when its own LU is clear. */
static void two_waiters(void **state)
{
	struct sth *s = *state;
	struct inflight *f0, *f1;
	bool fired0 = false, fired1 = false;

	setup(s, 2);
	f0 = start_read(A, 0);
	f1 = start_read(B, 1);
	assert_int_equal(bs_scsi_lu_reset_wait(s->tgt, 0, B, fired_cb,
					       &fired0), 1);
	assert_int_equal(bs_scsi_lu_reset_wait(s->tgt, 1, A, fired_cb,
					       &fired1), 1);
	assert_int_equal(bs_ctx_wait(s->ctx, &fired0), 0);
	assert_int_equal(bs_ctx_wait(s->ctx, &fired1), 0);
	assert_true(f0->done && f1->done);
	assert_int_equal(f0->status, BS_SCSI_TASK_ABORTED);
	assert_int_equal(f1->status, BS_SCSI_TASK_ABORTED);
	inflight_free(f0);
	inflight_free(f1);
}

/* A command the transport held (a write gathering Data-Out) when another
 * nexus reset the LU ends TASK ABORTED, unexecuted, and leaves the unit
 * attention for the next command; one held across no reset runs. */
static void held_by_transport(void **state)
{
	struct sth *s = *state;
	struct bs_scsi_cmd *cmd = calloc(1, sizeof(*cmd));
	static uint8_t data[512];

	setup(s, 1);
	assert_non_null(cmd);
	cmd->nexus = B;
	cmd->lun = 0;
	sth_cdb_rw(cmd->cdb, 10, true, 0, 1);
	cmd->cdb_len = 10;
	cmd->dout = data;
	cmd->dout_len = sizeof(data);
	bs_scsi_cmd_arrived(cmd);
	assert_true(cmd->arrived);
	assert_int_equal(bs_scsi_lu_reset_wait(s->tgt, 0, A, NULL, NULL), 0);
	{
		struct inflight *f = calloc(1, sizeof(*f));

		assert_non_null(f);
		f->cmd = *cmd;
		f->cmd.done = inflight_done;
		f->cmd.priv = f;
		bs_scsi_exec(&f->cmd);
		assert_int_equal(bs_ctx_wait(s->ctx, &f->done), 0);
		assert_int_equal(f->status, BS_SCSI_TASK_ABORTED);
		inflight_free(f);
	}
	tur(s, B, 0);
	sth_assert_check(&R, 0x6, 0x2903);
	sth_clear_ua(s, A, 0);
	/* no reset in between: it runs */
	bs_scsi_cmd_arrived(cmd);
	{
		struct inflight *f = calloc(1, sizeof(*f));

		assert_non_null(f);
		f->cmd = *cmd;
		f->cmd.done = inflight_done;
		f->cmd.priv = f;
		bs_scsi_exec(&f->cmd);
		assert_int_equal(bs_ctx_wait(s->ctx, &f->done), 0);
		assert_int_equal(f->status, BS_SCSI_GOOD);
		inflight_free(f);
	}
	free(cmd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(lu_reset_aborts_all_nexuses,
						sth_setup, sth_teardown),
		cmocka_unit_test_setup_teardown(later_tasks_not_aborted,
						sth_setup, sth_teardown),
		cmocka_unit_test_setup_teardown(clear_task_set, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(target_reset, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(two_waiters, sth_setup,
						sth_teardown),
		cmocka_unit_test_setup_teardown(held_by_transport, sth_setup,
						sth_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
