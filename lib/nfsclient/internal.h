/* SPDX-License-Identifier: MIT */
/* The NFS client's rooms (not a public API): the connection, compounds. */
#ifndef BLKSTACK_NFSCLIENT_INTERNAL_H
#define BLKSTACK_NFSCLIENT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/nfsclient.h>

#include "export/nfs/nfs4_const.h"
#include "export/nfs/xdr.h"

/* Room for the RPC and COMPOUND headers and the small ops around data. */
#define NFSC_OVERHEAD 1024u
/* Data of one READ / WRITE, at most (the session may allow less). */
#define NFSC_IO_MAX (1u << 20)
#define NFSC_BUF_SIZE (NFSC_IO_MAX + NFSC_OVERHEAD)

struct bs_nfs {
	char peer[300];		/* "HOST:PORT", for messages */
	int fd;
	uint32_t xid;
	uint32_t minor;
	unsigned retry_secs;
	unsigned timeout_secs;
	/* AUTH_SYS */
	uint32_t uid, gid;
	char machine[64];
	/* client and session */
	uint64_t clientid;
	uint32_t cs_seq;		/* eir_sequenceid, for CREATE_SESSION */
	uint8_t sessionid[NFS4_SESSIONID_SIZE];
	bool have_client, have_session;
	uint32_t slot_seq;		/* slot 0's next sequence id */
	uint32_t max_req, max_resp;	/* the fore channel's sizes */
	uint8_t owner[32];		/* open_owner4's and client owner's name */
	size_t owner_len;
	/* the last error a server gave */
	uint32_t last_status;
	uint32_t last_op;
	/* buffers: one request, one reply */
	uint8_t *req;
	uint8_t *resp;
	size_t resp_len;
};

/* ---- rpc.c: the connection ---------------------------------------------- */

int nfsc_rpc_open(struct bs_nfs *nfs, const char *host, uint16_t port);
void nfsc_rpc_close(struct bs_nfs *nfs);
/*
 * Send the call in nfs->req[0, len) (an RPC call header at its start,
 * written by nfsc_rpc_call_header(), the xid patched here) and receive its
 * reply; on success @d is at the procedure's results.
 */
int nfsc_rpc_call(struct bs_nfs *nfs, size_t len, struct xdr_dec *d);
/* The call header of NFS4 procedure @proc, AUTH_SYS. */
void nfsc_rpc_call_header(struct bs_nfs *nfs, struct xdr_enc *e,
			  uint32_t proc);

/* ---- compound.c --------------------------------------------------------- */

struct nfsc_cpd {
	struct bs_nfs *nfs;
	struct xdr_enc e;
	struct xdr_dec d;
	size_t nops_pos;	/* where the op count goes */
	size_t seq_pos;		/* SEQUENCE's sequenceid; 0 = no SEQUENCE */
	uint32_t nops;
	uint32_t status;	/* the compound's status */
	uint32_t nres;		/* results left to read */
	const char *what;	/* "OPEN /a/b", for messages */
};

/*
 * Start a COMPOUND (minor version of the session) with SEQUENCE first when
 * a session exists; @what names it in error messages.
 */
void nfsc_cpd_begin(struct bs_nfs *nfs, struct nfsc_cpd *c, const char *what);
/* Begin an op: its number; its arguments follow on c->e. */
void nfsc_cpd_op(struct nfsc_cpd *c, uint32_t op);
/*
 * Send and receive; GRACE and DELAY are retried (a new SEQUENCE each
 * time). 0: c->d is at the first result after SEQUENCE's; -errno for
 * transport and RPC failures, and for a failed SEQUENCE.
 */
int nfsc_cpd_call(struct nfsc_cpd *c);
/*
 * Read the next result's op number and status: 0 when NFS4_OK (its body
 * follows on c->d), else -errno with the status kept and the message set.
 */
int nfsc_cpd_res(struct nfsc_cpd *c, uint32_t op);
/* After the last body: -EBADMSG (message set) if decoding failed. */
int nfsc_cpd_end(struct nfsc_cpd *c);
/* Fail with @status at op @op (message, last_status); returns -errno. */
int nfsc_fail_status(struct bs_nfs *nfs, const char *what, uint32_t op,
		     uint32_t status);
const char *nfsc_op_name(uint32_t op);

/* ---- attr.c ------------------------------------------------------------- */

/* Encode the bitmap4 of the attributes struct bs_nfs_attr holds. */
void nfsc_put_attr_request(struct xdr_enc *e);
/* Decode a fattr4 (bitmap + attrlist) into @a (fields absent stay 0). */
void nfsc_get_fattr(struct xdr_dec *d, struct bs_nfs_attr *a);
/* Encode a bitmap4 of @n words. */
void nfsc_put_bitmap(struct xdr_enc *e, const uint32_t *w, uint32_t n);
/* Decode a bitmap4 into @w (@n words kept, the rest must be 0). */
void nfsc_get_bitmap(struct xdr_dec *d, uint32_t *w, uint32_t n);

/* ---- misc decoders ------------------------------------------------------ */

static inline void nfsc_put_stateid(struct xdr_enc *e, const uint8_t *sid)
{
	xdr_put_fixed(e, sid, NFS4_STATEID_SIZE);
}

/* The longest path component, as most servers limit it. */
#define NFSC_NAME_MAX 255u

/* "a/b/c" -> "a/b/" and "c" (@name: NFSC_NAME_MAX + 1 bytes). */
int nfsc_split_path(struct bs_nfs *nfs, const char *path, char *parent,
		    size_t cap, char *name);

/* PUTROOTFH + LOOKUP of each component of @path, into compound @c. */
int nfsc_put_path(struct nfsc_cpd *c, const char *path, uint32_t *nlookups);

#endif
