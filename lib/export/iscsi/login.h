/* SPDX-License-Identifier: MIT */
/*
 * iSCSI login of one connection (RFC 7143 section 6.3 and 11.12-13): the
 * stages security -> operational -> full feature with their T/C bits and
 * CSG/NSG checks, AuthMethod None or CHAP (mutual when the initiator
 * asks and the target has a secret for it), operational negotiation
 * (text.c), and a status class / detail for every refusal. Pure: request
 * PDUs in, response BHS and text out; no sockets (not a public API).
 */
#ifndef BLKSTACK_ISCSI_LOGIN_H
#define BLKSTACK_ISCSI_LOGIN_H

#include <stdbool.h>
#include <stdint.h>

#include "export/iscsi/chap.h"
#include "export/iscsi/text.h"

#define ISCSI_NAME_MAX 224	/* iSCSI names: 223 bytes (RFC 7143 4.2.7.1) */
#define ISCSI_TPGT 1		/* our one portal group */

/* A target as login sees it. */
struct iscsi_login_target {
	const char *name;		/* its IQN */
	const char *chap_user, *chap_secret;	/* NULL: no CHAP */
	const char *mutual_user, *mutual_secret;	/* NULL: no mutual */
	const struct iscsi_target_params *tp;
	void *priv;			/* the caller's target */
};

struct iscsi_login_ops {
	/* The target called @name reachable here: 0, or -ENOENT. */
	int (*find)(void *arg, const char *name, struct iscsi_login_target *t);
	/* The parameters of a discovery session. */
	const struct iscsi_target_params *(*discovery_params)(void *arg);
	/* Fill @buf with random bytes (CHAP challenges): 0 or -errno. */
	int (*random)(void *arg, void *buf, size_t len);
	/* A new session identifying handle, non-zero. */
	uint16_t (*tsih)(void *arg);
};

enum iscsi_auth_state {
	AUTH_START,		/* no AuthMethod yet */
	AUTH_CHAP_WAIT_A,	/* CHAP chosen: waiting for CHAP_A */
	AUTH_CHAP_WAIT_R,	/* challenge sent: waiting for CHAP_N/R */
	AUTH_DONE,		/* None chosen or CHAP verified */
};

struct iscsi_login {
	const struct iscsi_login_ops *ops;
	void *arg;

	/* state */
	bool started;			/* first request seen */
	uint8_t stage;			/* current stage (CSG we expect) */
	uint8_t isid[6];
	uint32_t itt;
	char initiator[ISCSI_NAME_MAX];
	char target[ISCSI_NAME_MAX];
	bool discovery;
	bool resolved;			/* resolve(): session type, target
					 * and rules fixed for the login */
	bool has_target;
	struct iscsi_login_target tgt;
	enum iscsi_auth_state auth;
	bool chap;			/* CHAP chosen */
	uint8_t chap_id;
	uint8_t chap_chal[ISCSI_CHAP_CHALLENGE_LEN];
	struct iscsi_target_params dparams;	/* discovery's, copied */
	struct iscsi_neg neg;
	struct iscsi_params params;
	/* continued request (C bit): its pieces joined */
	char *cbuf;
	size_t clen;

	/* results */
	uint16_t tsih;			/* set when full feature is reached */
	uint16_t status;		/* class << 8 | detail of a refusal */
	char why[160];			/* the refusal, for the log */
};

void iscsi_login_init(struct iscsi_login *l, const struct iscsi_login_ops *ops,
		      void *arg);
void iscsi_login_free(struct iscsi_login *l);

/*
 * One Login Request: @bhs (48 bytes) and its data segment. Builds the
 * response header in @rsp (the caller sets StatSN, ExpCmdSN and MaxCmdSN)
 * and its text in @out. Returns 0 (login goes on), 1 (full feature phase
 * reached: l->params, l->tgt, l->tsih are valid) or -EACCES (refused: the
 * response carries l->status; send it and close).
 */
int iscsi_login_pdu(struct iscsi_login *l, const uint8_t *bhs,
		    const uint8_t *data, uint32_t dsl, uint8_t *rsp,
		    struct iscsi_text_out *out);

#endif
