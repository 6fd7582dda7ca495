/* SPDX-License-Identifier: MIT */
/*
 * The SCSI target core (lib/export/scsi/): the SPC-4 / SBC-4 commands that
 * initiators use, served from blkstack devices, for any SCSI transport
 * (iSCSI in lib/export/iscsi/). The transport moves bytes and PDUs; this
 * core decodes CDBs, checks ranges, runs the I/O, builds sense data and
 * keeps the state SCSI defines per logical unit and per I_T nexus: unit
 * attentions, reservations (RESERVE/RELEASE and PERSISTENT RESERVE), mode
 * parameters.
 *
 * Objects:
 *   bs_scsi_tgt    one SCSI target device: its logical units and nexuses.
 *   bs_scsi_lu     one logical unit over a bs_dev (an export unit).
 *   bs_scsi_nexus  one I_T nexus (iSCSI: one session), made by the
 *                  transport at login and freed at logout / session loss.
 *   bs_scsi_cmd    one command, embedded in the transport's task.
 *
 * Threads: a target is shared by sessions on several I/O loops. Its state
 * (LU list, unit attentions, reservations, mode pages) is under a mutex
 * inside the target. bs_scsi_exec() is called on the loop of the session's
 * connection; cmd->done runs on that same loop, never nested inside
 * bs_scsi_exec() (completions are deferred). bs_scsi_lu_caps_changed()
 * runs on the main loop (the export type's caps_changed op).
 *
 * Capability mapping (the point): LBPME when the device discards; LBPRZ
 * and VPD B2 LBPWS/LBPWS10 exactly when write_zeroes_unmap(dev) (from
 * struct bs_caps); VPD B0 limits from the device's limits; WRITE SAME with
 * UNMAP of a zero block (or NDOB) is a zeroout that may unmap, without
 * UNMAP a zeroout with BS_REQ_NOUNMAP; UNMAP on an LBPRZ unit leaves
 * zeroes. A change of capabilities queues a unit attention for every
 * nexus (INQUIRY DATA HAS CHANGED, CAPACITY DATA HAS CHANGED, MODE
 * PARAMETERS CHANGED as fits), reported on each nexus's next command.
 */
#ifndef BLKSTACK_SCSI_H
#define BLKSTACK_SCSI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/caps.h>

struct bs_dev;
struct bs_scsi_tgt;
struct bs_scsi_lu;
struct bs_scsi_nexus;

/* SAM status codes. */
enum {
	BS_SCSI_GOOD = 0x00,
	BS_SCSI_CHECK_CONDITION = 0x02,
	BS_SCSI_CONDITION_MET = 0x04,
	BS_SCSI_BUSY = 0x08,
	BS_SCSI_RESERVATION_CONFLICT = 0x18,
	BS_SCSI_TASK_SET_FULL = 0x28,
	BS_SCSI_TASK_ABORTED = 0x40,
};

#define BS_SCSI_SENSE_MAX 252
#define BS_SCSI_CDB_MAX 32

/* ---- targets ------------------------------------------------------------ */

struct bs_scsi_tgt_cfg {
	const char *name;	/* the target's name (iSCSI: its IQN); used in
				 * VPD 83h and to derive stable identifiers */
	const char *vendor;	/* T10 vendor id, up to 8 chars ("BLKSTACK") */
	const char *product;	/* up to 16 chars */
	const char *revision;	/* up to 4 chars */
};

/* 0 or -errno (-EINVAL with bs_error() on a bad field). */
int bs_scsi_tgt_new(const struct bs_scsi_tgt_cfg *cfg,
		    struct bs_scsi_tgt **out);
/* Free the target: its nexuses and LUs must be gone. */
void bs_scsi_tgt_free(struct bs_scsi_tgt *t);

/* ---- logical units -------------------------------------------------------- */

struct bs_scsi_lu_cfg {
	uint64_t lun;		/* 0..16383 */
	struct bs_dev *dev;	/* claimed by the caller */
	bool readonly;
	const char *name;	/* the unit's name: logs, and with the target's
				 * name the seed of its stable identifiers */
	const char *serial;	/* VPD 80h; NULL = derived from the name */
};

/*
 * Add a logical unit; its identifiers (VPD 83h NAA and EUI-64, VPD 80h
 * serial) are derived from the target's and unit's names, so they stay
 * the same across restarts. 0, -EEXIST (LUN taken), -EINVAL, -ENOMEM.
 */
int bs_scsi_lu_add(struct bs_scsi_tgt *t, const struct bs_scsi_lu_cfg *cfg,
		   struct bs_scsi_lu **out);
/* Remove and free (no command of it may be in flight). */
void bs_scsi_lu_remove(struct bs_scsi_lu *lu);
/*
 * The device's capabilities went from @old to @now: queue the fitting
 * unit attention on every nexus; the next VPD / READ CAPACITY / MODE
 * SENSE answers follow @now.
 */
void bs_scsi_lu_caps_changed(struct bs_scsi_lu *lu, const struct bs_caps *old,
			     const struct bs_caps *now);

/* ---- I_T nexuses ---------------------------------------------------------- */

struct bs_scsi_nexus_cfg {
	/* initiator port name: iSCSI "iqn...,i,0x<ISID hex>" */
	const char *initiator_port;
	/* target port name: iSCSI "iqn...,t,0x<TPGT hex>" */
	const char *target_port;
	uint16_t rel_port_id;	/* relative target port identifier, >= 1 */
	uint16_t tpg;		/* target portal group tag */
};

/*
 * A new I_T nexus; it starts with a POWER ON, RESET OR BUS DEVICE RESET
 * OCCURRED unit attention on every LU. 0 or -ENOMEM.
 */
int bs_scsi_nexus_new(struct bs_scsi_tgt *t, const struct bs_scsi_nexus_cfg *cfg,
		      struct bs_scsi_nexus **out);
/*
 * The nexus is lost (logout, session end): RESERVE/RELEASE reservations it
 * held are released; persistent reservations stay. No command of it may
 * be in flight.
 */
void bs_scsi_nexus_free(struct bs_scsi_nexus *n);

/* ---- commands ------------------------------------------------------------- */

struct bs_scsi_cmd;
typedef void (*bs_scsi_done_fn)(struct bs_scsi_cmd *cmd);

struct bs_scsi_cmd {
	/* --- set by the transport ------------------------------------------ */
	struct bs_scsi_nexus *nexus;
	uint64_t lun;		/* decoded (bs_scsi_lun_decode) */
	uint8_t cdb[BS_SCSI_CDB_MAX];
	uint8_t cdb_len;
	uint8_t task_attr;	/* SAM: 0 simple, 1 head of queue, 2 ordered,
				 * 4 ACA */
	uint64_t tag;		/* the transport's task tag (logs, aborts) */
	/*
	 * Data-Out: the whole payload, gathered by the transport before
	 * bs_scsi_exec() (iSCSI: immediate data, unsolicited and R2T'd
	 * Data-Out up to the Expected Data Transfer Length). The core reads
	 * what the CDB asks for; a shorter buffer is a CHECK CONDITION.
	 */
	const uint8_t *dout;
	uint32_t dout_len;
	/*
	 * The initiator's expected Data-In length (iSCSI: EDTL of a read).
	 * The core never produces more than it needs; the transport sends
	 * min(din_len, din_max) and reports the residual.
	 */
	uint32_t din_max;
	bs_scsi_done_fn done;
	void *priv;
	/*
	 * Set by bs_scsi_cmd_arrived() for a command that waits in the
	 * transport (a write gathering Data-Out) before bs_scsi_exec():
	 * a reset or CLEAR TASK SET of its LU in between aborts it.
	 */
	bool arrived;
	uint32_t epoch;

	/* --- results, valid in done() ---------------------------------------- */
	uint8_t status;		/* BS_SCSI_* */
	uint8_t sense_len;	/* 0 unless CHECK CONDITION */
	uint8_t sense[BS_SCSI_SENSE_MAX];	/* fixed or descriptor format,
						 * per the LU's D_SENSE */
	uint8_t *din;		/* Data-In, owned by the core until
				 * bs_scsi_cmd_release() */
	uint32_t din_len;

	/* --- the core's ------------------------------------------------------ */
	void *core[8];
};

/*
 * Run @cmd: decode, check (LUN, unit attention, reservation, range,
 * read-only), do the I/O, fill the results and call cmd->done later on
 * this loop. Unknown LUNs get the answers SPC gives (INQUIRY with
 * peripheral qualifier 3, REPORT LUNS and REQUEST SENSE served, anything
 * else LOGICAL UNIT NOT SUPPORTED).
 */
void bs_scsi_exec(struct bs_scsi_cmd *cmd);
/* Free what the core holds for @cmd (its Data-In buffer); after done(). */
void bs_scsi_cmd_release(struct bs_scsi_cmd *cmd);

/*
 * Task management, called by the transport. A LU has one task set for
 * all I_T nexuses (control mode page TST 000b, TAS 1). LOGICAL UNIT
 * RESET, TARGET WARM RESET and CLEAR TASK SET abort the tasks of every
 * nexus that are in the core (between bs_scsi_exec() and done()): each
 * still ends with done(), its status TASK ABORTED (the transport sends
 * that to the other nexuses and drops the answers of @from's own aborted
 * tasks). The resets also queue the unit attention SAM gives (29h/03h,
 * 29h/02h) for every nexus, @from's included (SAM-5 names all I_T
 * nexuses), and drop RESERVE/RELEASE reservations; CLEAR TASK SET queues
 * none (TAS 1 reports the aborts).
 *
 * The _wait forms: 0 when no aborted task is left, 1 when @fn(@arg)
 * will be called once they are all gone (on the calling thread's loop,
 * never inside the call; in place when the thread has no loop), or
 * -ENODEV (no such LUN), -ENOMEM. The caller keeps @arg alive until then
 * (a task's done() always comes, so does @fn). With @fn NULL they do not
 * wait. Tasks a transport has not yet passed to the core (a write still
 * gathering Data-Out) are the transport's to abort.
 */
typedef void (*bs_scsi_tmf_fn)(void *arg);

int bs_scsi_lu_reset_wait(struct bs_scsi_tgt *t, uint64_t lun,
			  struct bs_scsi_nexus *from, bs_scsi_tmf_fn fn,
			  void *arg);
int bs_scsi_tgt_reset_wait(struct bs_scsi_tgt *t, struct bs_scsi_nexus *from,
			   bs_scsi_tmf_fn fn, void *arg);
int bs_scsi_clear_task_set_wait(struct bs_scsi_tgt *t, uint64_t lun,
				struct bs_scsi_nexus *from, bs_scsi_tmf_fn fn,
				void *arg);
/* The same without waiting: 0, or -ENODEV (no such LUN). */
int bs_scsi_lu_reset(struct bs_scsi_tgt *t, uint64_t lun,
		     struct bs_scsi_nexus *from);
void bs_scsi_tgt_reset(struct bs_scsi_tgt *t, struct bs_scsi_nexus *from);

/*
 * The transport took @cmd (nexus, lun set) but will pass it to
 * bs_scsi_exec() only later (a write waiting for its Data-Out): a task
 * management function of any nexus that aborts the LU's task set
 * meanwhile makes it end with TASK ABORTED, unexecuted, when it comes.
 */
void bs_scsi_cmd_arrived(struct bs_scsi_cmd *cmd);

/* ---- helpers for transports ---------------------------------------------- */

/* The 8-byte SAM LUN field <-> a LUN number (peripheral or flat). */
uint64_t bs_scsi_lun_decode(const uint8_t raw[8]);
void bs_scsi_lun_encode(uint64_t lun, uint8_t raw[8]);

/*
 * Build sense data for @key/@asc/@ascq in fixed (@desc false) or
 * descriptor format into @buf (at least 18 bytes); returns its length.
 */
uint8_t bs_scsi_sense_build(uint8_t *buf, bool desc, uint8_t key, uint8_t asc,
			    uint8_t ascq);

#endif
