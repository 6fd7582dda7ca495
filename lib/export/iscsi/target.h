/* SPDX-License-Identifier: MIT */
/*
 * The `iscsi` export type over the network server (not a public API):
 * listeners shared by targets (one address, several IQNs: share.h), each
 * target a
 * SCSI target device of the core whose LUNs are the export's units, and
 * the session-operations table (conn.c) that runs a session per
 * connection.
 */
#ifndef BLKSTACK_ISCSI_TARGET_H
#define BLKSTACK_ISCSI_TARGET_H

#include <stdbool.h>
#include <stdint.h>

#include <blkstack/export.h>
#include <blkstack/net.h>
#include <blkstack/scsi.h>

#include "export/iscsi/login.h"
#include "export/iscsi/session.h"
#include "export/net/share.h"

#define ISCSI_CONN_INBUF (256u << 10)
/* Data-Out data still missing from which it is received in place. */
#define ISCSI_CONN_DIRECT_MIN (16u << 10)

struct iscsi_target {
	struct bs_export *exp;
	char iqn[ISCSI_NAME_MAX];
	char label[16];			/* its connections' label: "tN" */
	char *chap_user, *chap_secret, *mutual_user, *mutual_secret;
	struct iscsi_target_params tp;
	uint32_t queue_depth, max_sessions;
	unsigned sessions;		/* atomic */
	unsigned refs;			/* atomic: the export + each session
					 * that found it at login */
	struct bs_scsi_tgt *scsi;
	struct bs_scsi_lu **lus;	/* per unit */
	unsigned nlus;
	struct bs_share_ref ref;	/* where it listens; member: itself */
};

/* conn.c */
extern const struct bs_net_proto iscsi_net_proto;

/* target.c */
bool iscsi_target_active(const struct iscsi_target *t);
/* Fill @lt for login from @t. */
void iscsi_target_login_view(struct iscsi_target *t,
			     struct iscsi_login_target *lt);
/* References: the export holds one, each session that found it one. */
void iscsi_target_get(struct iscsi_target *t);
void iscsi_target_put(struct iscsi_target *t);
/*
 * Count a session in full feature (-EBUSY over max_sessions; @replaced
 * sessions being reinstated do not count against it).
 */
int iscsi_target_attach(struct iscsi_target *t,
			struct iscsi_session_target *st, unsigned replaced);
/* Is connection label @e one of @t's ("tN" or "tN KEY")? */
bool iscsi_target_label_is(const struct iscsi_target *t, const char *e);
void iscsi_target_detach(struct iscsi_target *t);
/* Logical block size of LUN @lun (0: no such LUN); any thread. */
uint32_t iscsi_target_block_size(struct iscsi_target *t, uint64_t lun);

#endif
