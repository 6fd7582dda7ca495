/* SPDX-License-Identifier: MIT */
/* State shared by session.c and task.c (not a public API). */
#ifndef BLKSTACK_ISCSI_INTERNAL_H
#define BLKSTACK_ISCSI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/budget.h>
#include <blkstack/scsi.h>

#include "export/iscsi/login.h"
#include "export/iscsi/pdu.h"
#include "export/iscsi/session.h"

/* The largest AHS a BHS can announce (TotalAHSLength is one byte). */
#define ISCSI_AHS_MAX (255u * 4)
#define ISCSI_R2T_MAX 16

/* One queued PDU: header (and its digest), data, padding + data digest. */
struct iscsi_out {
	struct iscsi_out *next;
	uint8_t hdr[ISCSI_BHS_LEN + ISCSI_DIGEST_LEN];
	size_t hdr_len;
	const uint8_t *data;	/* owned (malloc) or the task's Data-In */
	size_t data_len;
	uint8_t trail[3 + ISCSI_DIGEST_LEN];
	size_t trail_len;
	void *owned;		/* freed once sent */
	struct iscsi_task *task;	/* reference dropped once sent */
	size_t sent;
};

struct iscsi_r2t {
	bool used;
	uint32_t ttt, off, len, got, data_sn;
};

struct iscsi_task {
	struct bs_scsi_cmd cmd;
	struct iscsi_session *s;
	struct iscsi_task *next, *prev;
	uint32_t itt, cmd_sn, edtl;
	uint8_t lun_raw[8];
	bool read, write;
	bool immediate;
	/* Data-Out */
	uint8_t *buf;		/* bs_buf_get(edtl) for a write */
	uint32_t received;
	uint32_t unsol_end;	/* unsolicited data: [0, unsol_end) */
	uint32_t unsol_next;	/* next unsolicited offset expected */
	uint32_t unsol_data_sn;
	uint32_t r2t_next;	/* next offset to solicit */
	uint32_t r2t_sn;
	struct iscsi_r2t r2t[ISCSI_R2T_MAX];
	unsigned r2t_out;
	/* life */
	size_t budget;		/* bytes taken from the server budget */
	bool executing;		/* in the core (set by task_core()) */
	size_t dev_bytes;	/* of budget, counted in the device meanwhile */
	bool completed;		/* done() ran */
	bool aborted;		/* answer dropped (task management) */
	bool res_fixed;		/* residual from the CDB (rw_residual) */
	uint8_t res_flags;
	uint32_t residual;
	unsigned refs;		/* output items pointing at cmd.din */
	bool linked;		/* in s->tasks */
};

enum iscsi_in {
	IN_BHS,
	IN_REST,
	IN_NONE,
};

struct iscsi_tmf {
	bool pending;
	uint32_t itt;
	uint8_t function;
	uint64_t lun;
	uint8_t response;
	bool core_wait;		/* the core's reset waits for other
				 * sessions' aborted tasks (s->live held) */
};

struct iscsi_session {
	struct bs_ctx *ctx;
	struct bs_exports *set;
	const struct iscsi_session_ops *ops;	/* NULL once orphaned */
	void *arg;

	/* input */
	enum iscsi_in in;
	uint8_t bhs[ISCSI_BHS_LEN];
	size_t have;
	uint8_t *rbuf;		/* AHS, header digest, data, pad, digest */
	size_t rlen, rhave;
	bool held;		/* a complete PDU waits (budget, TMF) */
	size_t dstart;		/* where the data segment starts in rest */
	uint8_t *ddst;		/* zero-copy: a Data-Out's data goes here */
	bool ddecided;		/* ddst chosen for this PDU */

	/* login */
	struct iscsi_login login;
	bool ffp, discovery;
	uint16_t cid;
	struct iscsi_params p;
	struct iscsi_login_target tgt;
	bool attached;
	void (*detach)(const struct iscsi_login_target *t);
	void (*release)(const struct iscsi_login_target *t);
	struct iscsi_session_target st;
	struct bs_scsi_nexus *nexus;
	uint32_t stat_sn, exp_cmd_sn, max_cmd_sn;

	/* text exchange in progress (continued response) */
	struct iscsi_text_out text;
	size_t text_off;
	uint32_t text_itt, text_ttt;
	char *text_in;		/* continued request */
	size_t text_in_len;

	/* tasks */
	struct iscsi_task *tasks;	/* newest first */
	unsigned ntasks;		/* linked */
	unsigned live;			/* allocated, incl. finishing ones */
	uint32_t next_ttt;
	struct iscsi_tmf tmf;
	bool logout;			/* logout response waits for tasks */
	uint32_t logout_itt;
	uint8_t logout_rsp;

	/* pings */
	uint64_t last_rx_ns;
	bool ping_out;
	uint64_t ping_ns;

	/* output */
	struct iscsi_out *out_head, *out_tail;
	size_t out_bytes;

	/* budget */
	struct bs_budget *budget;
	struct bs_budget_holder bh;

	bool ended, eof, shutdown, orphan, evicted;
	char reason[200];
	struct iscsi_session_stats stats;
};

/* session.c */
void iscsi_log(struct iscsi_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void iscsi_end(struct iscsi_session *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void iscsi_kick(struct iscsi_session *s);
/*
 * Queue a PDU: @bhs (48 bytes; StatSN/ExpCmdSN/MaxCmdSN filled by the
 * caller), data @data/@len either copied (@task NULL) or the task's
 * Data-In (a reference on @task, dropped once sent).
 */
int iscsi_out_pdu(struct iscsi_session *s, const uint8_t *bhs,
		  const void *data, size_t len, struct iscsi_task *task);
/* StatSN (post-incremented when @advance), ExpCmdSN, MaxCmdSN at 24..35. */
void iscsi_put_sn(struct iscsi_session *s, uint8_t *bhs, bool advance);
void iscsi_reject(struct iscsi_session *s, const uint8_t *bhs, uint8_t reason);
/* Commands the session's CmdSN window admits at once (queue_depth). */
uint32_t iscsi_depth(const struct iscsi_session *s);
/*
 * Immediate commands are outside the CmdSN window: this many may be in
 * flight beyond iscsi_depth(); past that a command is answered TASK SET
 * FULL, so that no initiator holds tasks without bound.
 */
#define ISCSI_IMMEDIATE_EXTRA 8
void iscsi_window_update(struct iscsi_session *s);
bool iscsi_budget_take(struct iscsi_session *s, size_t n);
void iscsi_budget_give(struct iscsi_session *s, size_t n);
/* The session has no more tasks: answer a waiting logout / TMF. */
void iscsi_tasks_idle(struct iscsi_session *s);

/* task.c */
/* A SCSI Command PDU (s->bhs, s->rbuf): false = hold it (budget). */
bool iscsi_task_command(struct iscsi_session *s, const uint8_t *ahs,
			const uint8_t *data, uint32_t dsl);
void iscsi_task_data_out(struct iscsi_session *s, const uint8_t *data,
			 uint32_t dsl);
/* Where the data of the Data-Out in s->bhs goes, if it will be taken. */
uint8_t *iscsi_task_data_out_dst(struct iscsi_session *s, uint32_t dsl);
void iscsi_task_tmf(struct iscsi_session *s);
/* Drop a task's reference (output sent) and free it when the last goes. */
void iscsi_task_put(struct iscsi_task *t);
/* Free every task not in the core; mark the rest aborted. */
void iscsi_tasks_drop(struct iscsi_session *s);
/* The TMF waiting for aborted tasks can be answered now? */
void iscsi_tmf_check(struct iscsi_session *s);
void iscsi_session_destroy(struct iscsi_session *s);

#endif
