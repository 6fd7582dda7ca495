/* SPDX-License-Identifier: MIT */
/*
 * One iSCSI connection and its session (MaxConnections is 1, so they are
 * one object) as a buffer-driven state machine: bytes in
 * (iscsi_session_feed), PDUs out (iscsi_session_out_iov / _out_advance),
 * SCSI commands run through the SCSI target core (scsi.h) on the loop of
 * the caller. No sockets here: the fuzzer drives it as the connection
 * code does (not a public API).
 */
#ifndef BLKSTACK_ISCSI_SESSION_H
#define BLKSTACK_ISCSI_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "export/iscsi/login.h"

struct bs_ctx;
struct bs_exports;
struct bs_scsi_tgt;
struct iscsi_session;

/* Our MaxRecvDataSegmentLength (declared), and the largest EDTL served. */
#define ISCSI_MAX_RECV_DSL (256u << 10)
#define ISCSI_MAX_TRANSFER (32u << 20)
/* Default commands in flight per session (the CmdSN window). */
#define ISCSI_QUEUE_DEPTH 128
/* Unsent output above which a session stops reading requests. */
#define ISCSI_OUT_MAX (64u << 20)
/* Idle time after which the target pings with a NOP-In, and how long
 * the initiator has to answer before the connection closes. */
#define ISCSI_PING_IDLE_MS 30000u
#define ISCSI_PING_TIMEOUT_MS 30000u

/* A target reachable on a connection, beyond what login needs. */
struct iscsi_session_target {
	struct bs_scsi_tgt *scsi;
	uint32_t queue_depth;
};

struct iscsi_session_ops {
	/* Output queued, input possible again, or the session ended. */
	void (*kick)(void *arg);
	void (*log)(void *arg, const char *msg);
	/* Queued output is about to be freed unsent: nothing may still
	 * be sending from it (bs_net_conn_drop_output()). Optional. */
	void (*drop_output)(void *arg);
	/*
	 * Login: the target of @name here (login.h). A target found is held
	 * for the session until release() (called once, when the session is
	 * destroyed; it may run after the connection is gone: no @arg), so
	 * an export closed during a login never frees it under the session.
	 */
	int (*find)(void *arg, const char *name, struct iscsi_login_target *t);
	void (*release)(const struct iscsi_login_target *t);
	const struct iscsi_target_params *(*discovery_params)(void *arg);
	uint16_t (*tsih)(void *arg);
	int (*random)(void *arg, void *buf, size_t len);
	/*
	 * SendTargets: call @fn for each target reachable here with its
	 * portal "ADDR:PORT,TPGT" (NULL: the one the initiator is on).
	 */
	void (*each_target)(void *arg,
			    void (*fn)(void *fa, const char *name,
				       const char *portal),
			    void *fa);
	/*
	 * Full feature phase on target @t (t->priv): count the session (0,
	 * or -EBUSY over the target's max_sessions) and say what to serve.
	 * detach() undoes it once the session's last command is done (it
	 * may run after the connection is gone: it gets no @arg).
	 */
	int (*attach)(void *arg, const struct iscsi_login_target *t,
		      struct iscsi_session_target *st);
	void (*detach)(const struct iscsi_login_target *t);
	/*
	 * Optional: the session logged out; detach() ran already (its place
	 * under max_sessions is free at once), the connection is closing:
	 * it no longer counts as a session of its initiator port (one that
	 * logs in again before it is gone reinstates nothing).
	 */
	void (*logged_out)(void *arg, const struct iscsi_login_target *t);
	/* Logical block size of @lun of target @t, 0 when there is none. */
	uint32_t (*block_size)(void *arg, const struct iscsi_login_target *t,
			       uint64_t lun);
};

struct iscsi_session_stats {
	uint64_t commands, errors, bytes_read, bytes_written;
};

int iscsi_session_new(struct bs_ctx *ctx, struct bs_exports *set,
		      const struct iscsi_session_ops *ops, void *arg,
		      struct iscsi_session **out);

/* Consume up to @len bytes; fewer = cannot take more now (wait a kick). */
size_t iscsi_session_feed(struct iscsi_session *s, const uint8_t *buf,
			  size_t len);
bool iscsi_session_wants_input(const struct iscsi_session *s);
/*
 * Zero-copy input: while a Data-Out's data segment is being received and
 * its task will take it, where the next bytes go (the task's buffer) and
 * how many; 0 at any other time. Report what was read with
 * _in_direct_done(); only valid with no earlier input held elsewhere.
 */
size_t iscsi_session_in_direct(struct iscsi_session *s, uint8_t **dst);
void iscsi_session_in_direct_done(struct iscsi_session *s, size_t n);

int iscsi_session_out_iov(struct iscsi_session *s, struct iovec *iov, int max);
size_t iscsi_session_out_bytes(const struct iscsi_session *s);
void iscsi_session_out_advance(struct iscsi_session *s, size_t n);

/* Time passes (@now_ns): pings of an idle initiator, their timeout. */
void iscsi_session_tick(struct iscsi_session *s, uint64_t now_ns);

void iscsi_session_eof(struct iscsi_session *s);
void iscsi_session_shutdown(struct iscsi_session *s);
bool iscsi_session_finished(const struct iscsi_session *s);
/* Commands in the SCSI core now. */
unsigned iscsi_session_inflight(const struct iscsi_session *s);

/* The target logged in to (NULL before full feature / discovery). */
const char *iscsi_session_target(const struct iscsi_session *s);
/* The target the login found (also during login), or NULL. */
const struct iscsi_login_target *iscsi_session_login_target(
	const struct iscsi_session *s);
const char *iscsi_session_initiator(const struct iscsi_session *s);
/* "INITIATOR,i,0xISID" once the login has both, else "". */
const char *iscsi_session_initiator_port(const struct iscsi_session *s,
					 char *buf, size_t len);
bool iscsi_session_full_feature(const struct iscsi_session *s);
const char *iscsi_session_end_reason(const struct iscsi_session *s);
const struct iscsi_session_stats *iscsi_session_stats(
	const struct iscsi_session *s);

/* Drop the session; commands in the core finish first, unanswered. */
void iscsi_session_free(struct iscsi_session *s);

#endif
