/* SPDX-License-Identifier: MIT */
/* State shared by the files of the SCSI target core (not a public API). */
#ifndef BLKSTACK_SCSI_INTERNAL_H
#define BLKSTACK_SCSI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>
#include <blkstack/loop.h>
#include <blkstack/scsi.h>

/* ---- sense keys and additional sense codes (SPC-4 annex) ----------------- */

enum {
	SK_NO_SENSE = 0x0,
	SK_NOT_READY = 0x2,
	SK_MEDIUM_ERROR = 0x3,
	SK_HARDWARE_ERROR = 0x4,
	SK_ILLEGAL_REQUEST = 0x5,
	SK_UNIT_ATTENTION = 0x6,
	SK_DATA_PROTECT = 0x7,
	SK_ABORTED_COMMAND = 0xb,
	SK_MISCOMPARE = 0xe,
};

/* asc << 8 | ascq */
#define ASC(a, q) ((uint16_t)((a) << 8 | (q)))
enum {
	A_NONE = ASC(0x00, 0x00),
	A_BECOMING_READY = ASC(0x04, 0x01),
	A_NOT_READY_MANUAL = ASC(0x04, 0x03),
	A_WRITE_ERROR = ASC(0x0c, 0x00),
	A_UNRECOVERED_READ = ASC(0x11, 0x00),
	A_INVALID_FIELD_IU = ASC(0x0e, 0x03),
	A_PARAM_LIST_LENGTH = ASC(0x1a, 0x00),
	A_INVALID_OPCODE = ASC(0x20, 0x00),
	A_LBA_OUT_OF_RANGE = ASC(0x21, 0x00),
	A_INVALID_FIELD_CDB = ASC(0x24, 0x00),
	A_LU_NOT_SUPPORTED = ASC(0x25, 0x00),
	A_INVALID_FIELD_PARAM = ASC(0x26, 0x00),
	A_INVALID_RELEASE_PR = ASC(0x26, 0x04),
	A_WRITE_PROTECTED = ASC(0x27, 0x00),
	A_SPACE_ALLOC_FAILED = ASC(0x27, 0x07),
	A_POWER_ON_RESET = ASC(0x29, 0x00),
	A_BUS_RESET = ASC(0x29, 0x02),
	A_LU_RESET = ASC(0x29, 0x03),
	A_MODE_CHANGED = ASC(0x2a, 0x01),
	A_RESERVATIONS_RELEASED = ASC(0x2a, 0x04),
	A_REGISTRATIONS_PREEMPTED = ASC(0x2a, 0x05),
	A_CAPACITY_CHANGED = ASC(0x2a, 0x09),
	A_SAVING_NOT_SUPPORTED = ASC(0x39, 0x00),
	A_INQUIRY_CHANGED = ASC(0x3f, 0x03),
	A_LUNS_CHANGED = ASC(0x3f, 0x0e),
	A_INTERNAL_FAILURE = ASC(0x44, 0x00),
	A_INSUFFICIENT_REG_RESOURCES = ASC(0x55, 0x04),
	A_MISCOMPARE_VERIFY = ASC(0x1d, 0x00),
};

/* ---- big-endian fields --------------------------------------------------- */

static inline uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

static inline void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

/* ---- objects ------------------------------------------------------------- */

/* Unit attentions queued for one LU on one nexus (oldest first). */
#define SCSI_UA_MAX 8
struct scsi_ua {
	uint64_t lun;
	unsigned n;
	uint16_t asc[SCSI_UA_MAX];
	struct scsi_ua *next;
};

/* One persistent reservation registration (an I_T nexus identity). */
struct scsi_pr_reg {
	char *iport;		/* initiator port name */
	uint16_t rel_port;	/* relative target port */
	uint64_t key;
	struct scsi_pr_reg *next;
};

/*
 * Registrations per unit at most: they outlive the I_T nexus that made
 * them, so an initiator logging in again and again under new ISIDs could
 * else grow the list (and PR IN's answer) without bound.
 */
#define SCSI_PR_REGS_MAX 256u

struct scsi_pr {
	uint32_t generation;
	struct scsi_pr_reg *regs;
	unsigned nregs;
	struct scsi_pr_reg *holder;	/* NULL: no reservation; for the
					 * all-registrants types any reg */
	uint8_t type;			/* PR_* when holder */
};

/* PERSISTENT RESERVE types */
enum {
	PR_WE = 1,
	PR_EA = 3,
	PR_WERO = 5,
	PR_EARO = 6,
	PR_WEAR = 7,
	PR_EAAR = 8,
};

struct scsi_io;

/*
 * The LU's write gate (COMPARE AND WRITE atomicity): writes run side by
 * side; a COMPARE AND WRITE runs alone, after the writes admitted before
 * it, and the writes that arrive while it waits or runs wait for it. One
 * FIFO of waiters, under the target's lock.
 */
struct scsi_gate {
	unsigned writes;	/* plain writes admitted and running */
	bool excl;		/* a COMPARE AND WRITE is running */
	struct scsi_io *head, *tail;
};

/*
 * A command of another unit reading or writing this one (EXTENDED COPY's
 * sources and destinations): task management that aborts this unit's
 * task set aborts the visit too and waits for it to leave, like for a
 * task of the set. Linked in the unit's list under the target's lock.
 */
struct scsi_visit {
	struct bs_scsi_lu *lu;		/* NULL: not visiting */
	struct scsi_visit *prev, *next;
	bool aborted;			/* read without the lock between steps */
};

struct bs_scsi_lu {
	struct bs_scsi_tgt *tgt;
	uint64_t lun;
	struct bs_dev *dev;
	bool readonly;
	char *name;
	char serial[41];
	uint64_t naa;		/* NAA 3 (locally assigned) identifier */
	uint64_t eui;		/* EUI-64 */
	/* mode parameters: control page D_SENSE (read with scsi_lu_dsense) */
	bool d_sense;
	/* RESERVE(6/10) holder, NULL when none */
	struct bs_scsi_nexus *res_holder;
	struct scsi_pr pr;
	struct scsi_gate gate;
	/* the task set (one for all nexuses, TST 000b): commands in the
	 * core, newest first; @aborting of them aborted by task management */
	struct bs_scsi_cmd *tasks;
	unsigned aborting;	/* tasks and visits */
	struct scsi_visit *visits;
	uint32_t epoch;		/* task set aborts so far (bs_scsi_cmd_arrived) */
	struct bs_scsi_lu *next;
};

/* The held results of one EXTENDED COPY (LIST ID USAGE 00b / 10b). */
#define SCSI_COPIES_HELD 4
struct scsi_copy_result {
	bool used;
	uint8_t list_id;
	uint8_t status;		/* COPY MANAGER STATUS: 0 good, 1 error */
	uint16_t segments;	/* segments processed */
	uint32_t kib;		/* KiB copied */
};

struct bs_scsi_nexus {
	struct bs_scsi_tgt *tgt;
	struct scsi_copy_result copies[SCSI_COPIES_HELD]; /* target lock */
	unsigned copies_next;
	char *iport;
	char *tport;
	uint16_t rel_port;
	uint16_t tpg;
	struct scsi_ua *ua;
	struct bs_scsi_nexus *next;
};

struct bs_scsi_tgt {
	pthread_mutex_t lock;
	char *name;
	char vendor[9], product[17], revision[5];
	struct bs_scsi_lu *lus;		/* ascending LUN */
	struct bs_scsi_nexus *nexuses;
	struct scsi_tmf_wait *waits;	/* task management waiting */
};

/* A task management function waiting for the tasks it aborted. */
struct scsi_tmf_wait {
	struct bs_work work;
	struct bs_loop *loop;		/* where fn runs (NULL: in place) */
	bs_scsi_tmf_fn fn;
	void *arg;
	bool all;			/* every LU, else @lun */
	uint64_t lun;
	struct scsi_tmf_wait *next;
};

/* What the core keeps in cmd->core[]. */
struct scsi_core {
	struct bs_work work;	/* the deferred completion */
	struct bs_scsi_lu *lu;	/* NULL: unknown LUN */
	struct scsi_io *io;	/* I/O in progress */
	uint32_t din_cap;	/* bytes of cmd->din (bs_buf_get size) */
	bool dsense;		/* sense format chosen at start */
	bool in_set;		/* linked in lu->tasks (target lock) */
	bool aborted;		/* by task management: TASK ABORTED */
	struct bs_scsi_cmd *set_next, *set_prev;	/* lu->tasks */
};

static inline struct scsi_core *scsi_core(struct bs_scsi_cmd *cmd)
{
	return (struct scsi_core *)(void *)cmd->core;
}

/* ---- the command table (cdb.c) ------------------------------------------- */

/* Reservation class of a command (which reservations let it through). */
enum scsi_rclass {
	RC_ALLOW,	/* always (INQUIRY, REPORT LUNS, PR IN/OUT, ...) */
	RC_READ,	/* conflicts under exclusive-access types */
	RC_WRITE,	/* conflicts under every type */
};

#define F_NO_LU 0x01	/* served for an unknown LUN */
#define F_NO_UA 0x02	/* does not report or clear unit attentions */
#define F_RES2_OK 0x04	/* allowed under another nexus's RESERVE(6/10) */
#define F_WRITE 0x08	/* refused on a read-only LU */

/* 1 = answered, the core completes it; 0 = I/O started, it completes later. */
typedef int (*scsi_handler)(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);

struct scsi_op {
	uint8_t opcode;
	int16_t sa;		/* service action, -1 when none */
	uint8_t cdb_len;
	uint8_t flags;
	uint8_t rclass;
	const char *name;
	scsi_handler fn;
	const uint8_t *usage;	/* CDB usage bits, cdb_len bytes */
};

const struct scsi_op *scsi_op_find(uint8_t opcode, int sa);
/* Iterate the table (REPORT SUPPORTED OPERATION CODES). */
const struct scsi_op *scsi_op_at(unsigned i);

/* ---- results (sense.c) --------------------------------------------------- */

#define SCSI_DONE 1
#define SCSI_ASYNC 0

/* CHECK CONDITION with @key/@asc in the command's sense format. */
int scsi_check(struct bs_scsi_cmd *cmd, uint8_t key, uint16_t asc);
/* ILLEGAL REQUEST / INVALID FIELD IN CDB pointing at @byte (bit @bit, -1). */
int scsi_bad_cdb(struct bs_scsi_cmd *cmd, unsigned byte, int bit);
/* ILLEGAL REQUEST / INVALID FIELD IN PARAMETER LIST pointing at @byte. */
int scsi_bad_param(struct bs_scsi_cmd *cmd, unsigned byte, int bit);
/* CHECK CONDITION with the INFORMATION field. */
int scsi_check_info(struct bs_scsi_cmd *cmd, uint8_t key, uint16_t asc,
		    uint64_t info);
/* A device error (-errno) as sense; @write picks WRITE vs READ ERROR. */
int scsi_check_errno(struct bs_scsi_cmd *cmd, int err, bool write);
int scsi_good(struct bs_scsi_cmd *cmd);
/* The Data-Out is not what the CDB asks for: INVALID FIELD IN
 * INFORMATION UNIT (ILLEGAL REQUEST 0Eh/03h). */
int scsi_short_dout(struct bs_scsi_cmd *cmd);
/* Full sense builder: @info_valid/@info, @sks (3 bytes) when non-NULL. */
uint8_t scsi_sense_fill(uint8_t *buf, bool desc, uint8_t key, uint16_t asc,
			bool info_valid, uint64_t info, const uint8_t *sks);

/* ---- Data-In (cdb.c) ----------------------------------------------------- */

/* A zeroed Data-In buffer of @len bytes (NULL: out of memory). */
uint8_t *scsi_din(struct bs_scsi_cmd *cmd, uint32_t len);
/* Answer @len bytes of @cmd->din, cut at the allocation length @alloc. */
int scsi_din_done(struct bs_scsi_cmd *cmd, uint32_t len, uint32_t alloc);
/* Finish a command whose I/O ran (from a completion): defer done(). */
void scsi_finish(struct bs_scsi_cmd *cmd);

/* ---- target state (tgt.c) ------------------------------------------------ */

/* Queue @asc on (@n, @lu); caller holds the target's lock. */
void scsi_ua_queue(struct bs_scsi_nexus *n, uint64_t lun, uint16_t asc);
/* Queue on every nexus but @except (NULL: all); lock held. */
void scsi_ua_queue_all(struct bs_scsi_tgt *t, uint64_t lun, uint16_t asc,
		       const struct bs_scsi_nexus *except);
/* Take the oldest UA of (@n, @lun); 0 when none; lock held. */
uint16_t scsi_ua_take(struct bs_scsi_nexus *n, uint64_t lun);
bool scsi_lu_dsense(const struct bs_scsi_lu *lu);
/* Link @cmd into @lu's task set / take it out; lock held. */
void scsi_set_add(struct bs_scsi_lu *lu, struct bs_scsi_cmd *cmd);
/* Out of the set (takes the lock): an aborted task gets TASK ABORTED;
 * returns the task management functions that may now answer, to pass to
 * scsi_waits_run() after the task's done() (its answer goes first). */
struct scsi_tmf_wait *scsi_set_remove(struct bs_scsi_cmd *cmd);
void scsi_waits_run(struct scsi_tmf_wait *ready);
/* Start visiting @lu (takes the lock); @v must not be visiting. */
void scsi_visit_join(struct scsi_visit *v, struct bs_scsi_lu *lu);
/* Stop visiting (no-op when not): the task management functions waiting
 * for an aborted visit answer. */
void scsi_visit_leave(struct scsi_visit *v);
/* Was the visited unit's task set aborted since the visit began? */
bool scsi_visit_aborted(const struct scsi_visit *v);

/* Capacity in blocks and block size, from the published snapshot. */
void scsi_lu_geometry(const struct bs_scsi_lu *lu, uint64_t *nblocks,
		      uint32_t *bs);
/* The device's capabilities as this unit offers them (read-only applied). */
void scsi_lu_caps(const struct bs_scsi_lu *lu, struct bs_caps *c);
/* VPD B0 MAXIMUM TRANSFER LENGTH, blocks. */
uint32_t scsi_max_xfer_blocks(const struct bs_caps *c);
/* VPD B0 MAXIMUM WRITE SAME LENGTH, blocks (0 = not reported). */
uint64_t scsi_max_ws_blocks(const struct bs_caps *c);
uint32_t scsi_max_unmap_blocks(const struct bs_caps *c);
#define SCSI_MAX_UNMAP_DESC 256u
#define SCSI_MAX_CAW_BLOCKS 255u
bool scsi_lbprz(const struct bs_caps *c);
bool scsi_lbpme(const struct bs_caps *c);

/* ---- reservations (pr.c) ------------------------------------------------- */

/* Does a reservation stop @op from @n? Lock held. */
bool scsi_res_conflict(struct bs_scsi_lu *lu, struct bs_scsi_nexus *n,
		       const struct scsi_op *op, const uint8_t *cdb);
/*
 * Whether @n's reading (RC_READ) or writing (RC_WRITE) of @lu conflicts
 * with a reservation, taking the target's lock: for the units a command
 * reaches beyond its own (EXTENDED COPY's sources and destinations).
 */
bool scsi_res_conflict_access(struct bs_scsi_lu *lu, struct bs_scsi_nexus *n,
			      uint8_t rclass);
/* Drop RESERVE(6/10) reservations of @n (nexus loss, resets); lock held. */
void scsi_res_drop(struct bs_scsi_lu *lu, struct bs_scsi_nexus *n);
void scsi_pr_free(struct scsi_pr *pr);

/* ---- I/O (io.c) ---------------------------------------------------------- */

struct scsi_io;
typedef void (*scsi_io_fn)(struct scsi_io *io);

struct scsi_io {
	struct bs_scsi_cmd *cmd;
	struct bs_scsi_lu *lu;
	struct bs_loop *loop;
	struct bs_req req;
	uint32_t bs;		/* logical block size */
	uint64_t lba, nblocks;	/* the command's range */
	uint64_t pos;		/* blocks done (chunk loops) */
	uint8_t *buf;		/* bounce / pattern buffer (bs_buf_get) */
	size_t buf_len;
	unsigned flags;		/* the command's options (per handler) */
	const uint8_t *data;	/* Data-Out in use */
	void *ext;		/* a handler's own state, freed at the end */
	scsi_io_fn step;	/* next step, on completion */
	bool write;		/* errors are WRITE errors */
	scsi_io_fn fini;	/* a handler's own cleanup, as the I/O ends */
	/* the write gate */
	int gate;		/* 0 not in, 1 write, 2 exclusive */
	struct bs_scsi_lu *gate_lu;	/* whose gate */
	struct scsi_io *gate_next;
	struct bs_work work;
	scsi_io_fn gate_go;
};

/* A new I/O context for @cmd (NULL: out of memory, sense set). */
struct scsi_io *scsi_io_new(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
/* Give @io a bounce buffer of @len bytes (io->buf, io->buf_len). 0, or
 * -ENOMEM with the command failed (HARDWARE ERROR) and @io ended: the
 * handler then returns SCSI_ASYNC. */
int scsi_io_buf(struct scsi_io *io, size_t len);
/* Finish the I/O's command with what the handler put in it; frees @io. */
void scsi_io_end(struct scsi_io *io);
/* Submit @op for blocks [lba, lba+n) with @buf; @step runs on completion. */
void scsi_io_submit(struct scsi_io *io, enum bs_op op, uint32_t flags,
		    uint64_t lba, uint64_t n, void *buf, scsi_io_fn step);
/* A failed request: sense from @err, end. */
void scsi_io_fail(struct scsi_io *io, int err);
/* Enter the write gate (@excl for COMPARE AND WRITE), then run @go. */
void scsi_gate_enter(struct scsi_io *io, bool excl, scsi_io_fn go);
/* The same for the gate of @lu, a unit other than the command's (one gate
 * per I/O at a time: leave the last one first). */
void scsi_gate_enter_unit(struct scsi_io *io, struct bs_scsi_lu *lu,
			  bool excl, scsi_io_fn go);
/* Leave the gate (scsi_io_end() does it for an I/O still in one). */
void scsi_gate_leave(struct scsi_io *io);

/* ---- handlers ------------------------------------------------------------ */

int scsi_inquiry(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_read_capacity10(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_read_capacity16(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_read(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_write(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_verify(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_compare_and_write(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_orwrite(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_read_defect_data(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_prefetch(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_sync_cache(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_write_same(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_unmap(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_get_lba_status(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_extended_copy(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_receive_copy_results(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
/* VPD 8Fh (Third-party Copy) into @d (header bytes 0..3 left to the
 * caller); its length with the header. */
uint32_t scsi_vpd_tpc(struct bs_scsi_lu *lu, uint8_t *d);
int scsi_mode_sense(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_mode_select(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_reserve(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_release(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_pr_in(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);
int scsi_pr_out(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu);

/* The LBA and block count of a READ/WRITE-family CDB (6/10/12/16). */
void scsi_cdb_range(const uint8_t *cdb, uint64_t *lba, uint64_t *n);
/*
 * Range check in 64-bit arithmetic: LBA OUT OF RANGE when lba + n passes
 * the capacity (or overflows). Returns SCSI_DONE with sense set, or 0.
 */
int scsi_check_range(struct bs_scsi_cmd *cmd, const struct bs_scsi_lu *lu,
		     uint64_t lba, uint64_t n);

#endif
