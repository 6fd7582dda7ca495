/* SPDX-License-Identifier: MIT */
/*
 * The iscsi driver's own declarations, shared by its two files (not a
 * public API): iscsi.c (the device type, requests) and iscsi_session.c
 * (sessions, reconnects, the probe that reads the target and decides).
 * Everything here runs on the context's main loop (see iscsi.c).
 */
#ifndef BLKSTACK_DRIVERS_ISCSI_H
#define BLKSTACK_DRIVERS_ISCSI_H

#include <stdbool.h>
#include <stdint.h>


#include <blkstack/bdev.h>
#include <blkstack/fdpump.h>
#include <blkstack/loop.h>

#include "drivers/iscsi_lib.h"
#include "drivers/sd_config.h"

#define ISD_TICK_MS 100
#define ISD_IOV_INLINE 8
#define ISD_ZERO_BLOCK 65536	/* the largest logical block */

struct isd;

/* Per request (the core's per-request context). */
struct isd_req {
	struct isd_req *prev, *next;	/* s->reqs: owned by the driver */
	struct bs_req *req;
	struct isd *s;
	struct bs_work work;		/* hand-over to the main loop */
	struct scsi_task *task;		/* in flight, else NULL */
	int timer;			/* retry timer, else 0 */
	bool waiting;			/* for a session */
	bool expired;			/* cancelled by the deadline */
	unsigned tries;
	uint64_t deadline_ns;
	uint8_t opcode;			/* the command last sent */
	bool ws_unmap;			/* ... a WRITE SAME with UNMAP */
	struct scsi_iovec iov_inline[ISD_IOV_INLINE];
	struct scsi_iovec *iov;
	struct unmap_list ul;
};

enum isd_step {
	P_RC16, P_RC10, P_VPD00, P_B0, P_B1, P_B2, P_RSOC, P_MODE, P_DONE
};

struct isd {
	struct bs_dev *dev;
	struct bs_loop *loop;		/* the main loop: everything runs here */
	struct iscsi_context *iscsi;
	struct bs_fdpump *pump;

	/* configuration */
	char *portal, *target, *initiator;
	char *chap_user, *chap_secret, *tchap_user, *tchap_secret;
	int lun;
	uint32_t max_io;
	unsigned timeout_s, max_retries, reconnect_ms;
	unsigned poll_ms;		/* TEST UNIT READY when idle, 0 = off */

	/* session */
	bool logged_in;
	bool closing;
	int reset_timer;		/* a new session after reconnect_ms */
	unsigned connects;		/* sessions made (1 = the first) */
	unsigned failed_connects;	/* in a row */
	char last_error[256];

	/* the probe (open and rescans) */
	bool opening;			/* the device waits for the first probe */
	bool probing, probe_again;
	enum isd_step step;
	unsigned step_tries;
	bool vpd_offered[3];		/* B0, B1, B2 */
	struct sd_facts nf;		/* facts being read */
	uint64_t nblocks_new;
	struct bs_work open_work;	/* bs_dev_open_done(), deferred */
	int open_err;
	int open_timer;

	/* what was decided */
	struct sd_facts facts;
	struct sd_config cfg;
	uint64_t nblocks;
	uint8_t *zero;			/* a zero block for WRITE SAME */

	/* the idle poll: a TEST UNIT READY so a unit attention (or a dead
	 * connection) is seen without waiting for a client's command */
	uint64_t last_activity_ns;	/* a command last completed */
	bool tur_busy;
	uint64_t polls;

	/* requests owned by the driver */
	struct isd_req *reqs;
	unsigned nreqs;

	/* counters for describe() */
	uint64_t unit_attentions, rescans, retries, expired, reconnects;
	uint64_t session_resets_deadline; /* a write past its deadline */
};

/* "GOOD", "CHECK CONDITION", "timeout", ... */
const char *isd_status_str(int status);

/* iscsi_session.c */
/* Open: the first session, and the open's deadline. */
void isd_session_begin(struct isd *s);
/* Watch what libiscsi wants now (after queuing a command). */
void isd_kick(struct isd *s);
/* The session is lost (or must go): a new one after reconnect_ms. */
void isd_reset_session(struct isd *s, const char *why);
/* Read the target again (a unit attention, a new session). */
void isd_probe_start(struct isd *s);
/* A command completed: the session is alive (for the idle poll). */
static inline void isd_note_activity(struct isd *s)
{
	s->last_activity_ns = bs_now_ns();
}

/* iscsi.c */
/* Send @r's command, or park it until there is a session. */
void isd_issue(struct isd_req *r);

#endif
