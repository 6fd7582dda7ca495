/* SPDX-License-Identifier: MIT */
/*
 * The NFS client's client ID and session (RFC 8881 sections 18.35, 18.36,
 * 18.51): EXCHANGE_ID with minor version 2, else 1 when the server refuses
 * 2 (NFS4ERR_MINOR_VERS_MISMATCH); CREATE_SESSION with one fore-channel
 * slot and no back channel; RECLAIM_COMPLETE, as a new client with
 * nothing to reclaim; and their undoing at the end.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <blkstack/bdev.h>

#include "nfsclient/internal.h"

static int exchange_id(struct bs_nfs *nfs)
{
	struct nfsc_cpd c;
	uint8_t verf[NFS4_VERIFIER_SIZE];
	uint32_t how, n, len, i;
	uint64_t now = (uint64_t)time(NULL);
	int err;

	for (i = 0; i < sizeof(verf); i++)
		verf[i] = (uint8_t)(now >> (8 * (i % 8)));
	nfsc_cpd_begin(nfs, &c, "EXCHANGE_ID");
	nfsc_cpd_op(&c, OP_EXCHANGE_ID);
	xdr_put_fixed(&c.e, verf, sizeof(verf));
	xdr_put_opaque(&c.e, nfs->owner, nfs->owner_len, NFS4_OPAQUE_LIMIT);
	xdr_put_u32(&c.e, EXCHGID4_FLAG_USE_NON_PNFS);
	xdr_put_enum(&c.e, SP4_NONE);
	xdr_put_u32(&c.e, 0);		/* no implementation id */
	if ((err = nfsc_cpd_call(&c)))
		return err;
	if ((err = nfsc_cpd_res(&c, OP_EXCHANGE_ID)))
		return err;
	nfs->clientid = xdr_get_u64(&c.d);
	nfs->cs_seq = xdr_get_u32(&c.d);
	xdr_get_u32(&c.d);		/* flags */
	how = xdr_get_enum(&c.d);
	if (how != SP4_NONE)
		return bs_error(-EPROTO, "nfs %s: EXCHANGE_ID: the server "
				"insists on state protection %u", nfs->peer,
				how);
	xdr_get_u64(&c.d);		/* server owner minor id */
	xdr_get_opaque_ref(&c.d, &len, NFS4_OPAQUE_LIMIT);
	xdr_get_opaque_ref(&c.d, &len, NFS4_OPAQUE_LIMIT);	/* scope */
	n = xdr_get_u32(&c.d);		/* implementation id<1> */
	if (n > 1)
		xdr_dec_fail(&c.d, -EBADMSG);
	if (n) {
		xdr_get_opaque_ref(&c.d, &len, XDR_NOMAX);
		xdr_get_opaque_ref(&c.d, &len, XDR_NOMAX);
		xdr_get_i64(&c.d);
		xdr_get_u32(&c.d);
	}
	if ((err = nfsc_cpd_end(&c)))
		return err;
	nfs->have_client = true;
	return 0;
}

static void put_channel(struct xdr_enc *e, uint32_t req, uint32_t resp,
			uint32_t slots)
{
	xdr_put_u32(e, 0);		/* header pad */
	xdr_put_u32(e, req);
	xdr_put_u32(e, resp);
	xdr_put_u32(e, 4096);		/* cached reply size */
	xdr_put_u32(e, 16);		/* operations */
	xdr_put_u32(e, slots);
	xdr_put_u32(e, 0);		/* no RDMA */
}

static void get_channel(struct xdr_dec *d, uint32_t *req, uint32_t *resp)
{
	uint32_t n;

	xdr_get_u32(d);
	*req = xdr_get_u32(d);
	*resp = xdr_get_u32(d);
	xdr_get_u32(d);
	xdr_get_u32(d);
	xdr_get_u32(d);
	n = xdr_get_u32(d);
	if (n > 1)
		xdr_dec_fail(d, -EBADMSG);
	if (n)
		xdr_get_u32(d);
}

static int create_session(struct bs_nfs *nfs)
{
	struct nfsc_cpd c;
	uint32_t breq, bresp;
	int err;

	nfsc_cpd_begin(nfs, &c, "CREATE_SESSION");
	nfsc_cpd_op(&c, OP_CREATE_SESSION);
	xdr_put_u64(&c.e, nfs->clientid);
	xdr_put_u32(&c.e, nfs->cs_seq);
	xdr_put_u32(&c.e, 0);		/* no persistence, no back channel */
	put_channel(&c.e, NFSC_BUF_SIZE, NFSC_BUF_SIZE, 1);
	put_channel(&c.e, 4096, 4096, 1);
	xdr_put_u32(&c.e, NFS4_CB_PROGRAM);
	xdr_put_u32(&c.e, 1);		/* one callback security: AUTH_NONE */
	xdr_put_enum(&c.e, RPC_AUTH_NONE);
	if ((err = nfsc_cpd_call(&c)))
		return err;
	if ((err = nfsc_cpd_res(&c, OP_CREATE_SESSION)))
		return err;
	xdr_get_fixed(&c.d, nfs->sessionid, NFS4_SESSIONID_SIZE);
	xdr_get_u32(&c.d);		/* sequence */
	xdr_get_u32(&c.d);		/* flags */
	get_channel(&c.d, &nfs->max_req, &nfs->max_resp);
	get_channel(&c.d, &breq, &bresp);
	if ((err = nfsc_cpd_end(&c)))
		return err;
	if (nfs->max_req > NFSC_BUF_SIZE)
		nfs->max_req = NFSC_BUF_SIZE;
	if (nfs->max_resp > NFSC_BUF_SIZE)
		nfs->max_resp = NFSC_BUF_SIZE;
	if (nfs->max_req < NFSC_OVERHEAD + 4096 ||
	    nfs->max_resp < NFSC_OVERHEAD + 4096)
		return bs_error(-EPROTO, "nfs %s: the session's requests "
				"(%u bytes) or replies (%u) are too small",
				nfs->peer, nfs->max_req, nfs->max_resp);
	nfs->have_session = true;
	nfs->slot_seq = 1;
	return 0;
}

static int reclaim_complete(struct bs_nfs *nfs)
{
	struct nfsc_cpd c;
	int err;

	nfsc_cpd_begin(nfs, &c, "RECLAIM_COMPLETE");
	nfsc_cpd_op(&c, OP_RECLAIM_COMPLETE);
	xdr_put_bool(&c.e, false);	/* all file systems */
	if ((err = nfsc_cpd_call(&c)))
		return err;
	err = nfsc_cpd_res(&c, OP_RECLAIM_COMPLETE);
	if (err && nfs->last_status == NFS4ERR_COMPLETE_ALREADY)
		err = 0;
	return err;
}

int bs_nfs_connect(const char *host, uint16_t port,
		   const struct bs_nfs_opts *opts, struct bs_nfs **out)
{
	struct bs_nfs *nfs = calloc(1, sizeof(*nfs));
	uint32_t minor = opts && opts->minor ? opts->minor : 2;
	int err;

	*out = NULL;
	if (!nfs)
		return bs_error(-ENOMEM, "nfs: no memory");
	nfs->fd = -1;
	nfs->req = malloc(NFSC_BUF_SIZE);
	nfs->resp = malloc(NFSC_BUF_SIZE);
	if (!nfs->req || !nfs->resp) {
		err = bs_error(-ENOMEM, "nfs: no memory for buffers");
		goto fail;
	}
	if (minor > NFS4_MINOR_MAX || minor < 1) {
		err = bs_error(-EINVAL, "nfs: minor version %u: 1 or 2, "
			       "please", minor);
		goto fail;
	}
	snprintf(nfs->peer, sizeof(nfs->peer),
		 strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
	nfs->retry_secs = opts && opts->retry_secs ? opts->retry_secs : 120;
	nfs->timeout_secs = opts && opts->timeout_secs ? opts->timeout_secs
						       : 60;
	nfs->uid = getuid();
	nfs->gid = getgid();
	if (gethostname(nfs->machine, sizeof(nfs->machine) - 1))
		strcpy(nfs->machine, "blkstack");
	nfs->owner_len = (size_t)snprintf((char *)nfs->owner,
					  sizeof(nfs->owner),
					  "blkstack.%ld.%ld", (long)getpid(),
					  (long)time(NULL));
	nfs->xid = (uint32_t)time(NULL) ^ ((uint32_t)getpid() << 16);
	if ((err = nfsc_rpc_open(nfs, host, port)))
		goto fail;
	nfs->minor = minor;
	err = exchange_id(nfs);
	if (err == -EPROTONOSUPPORT && minor == 2 && nfs->fd >= 0) {
		nfs->minor = 1;
		err = exchange_id(nfs);
	}
	if (err)
		goto fail;
	if ((err = create_session(nfs)))
		goto fail;
	if ((err = reclaim_complete(nfs)))
		goto fail;
	nfs->last_status = 0;
	*out = nfs;
	return 0;
fail:
	bs_nfs_disconnect(nfs);
	return err;
}

void bs_nfs_disconnect(struct bs_nfs *nfs)
{
	struct nfsc_cpd c;

	if (!nfs)
		return;
	if (nfs->fd >= 0 && nfs->have_session) {
		nfs->have_session = false;	/* no SEQUENCE before it */
		nfsc_cpd_begin(nfs, &c, "DESTROY_SESSION");
		nfsc_cpd_op(&c, OP_DESTROY_SESSION);
		xdr_put_fixed(&c.e, nfs->sessionid, NFS4_SESSIONID_SIZE);
		nfs->retry_secs = 0;
		if (!nfsc_cpd_call(&c))
			nfsc_cpd_res(&c, OP_DESTROY_SESSION);
	}
	if (nfs->fd >= 0 && nfs->have_client) {
		nfsc_cpd_begin(nfs, &c, "DESTROY_CLIENTID");
		nfsc_cpd_op(&c, OP_DESTROY_CLIENTID);
		xdr_put_u64(&c.e, nfs->clientid);
		nfs->retry_secs = 0;
		if (!nfsc_cpd_call(&c))
			nfsc_cpd_res(&c, OP_DESTROY_CLIENTID);
	}
	nfsc_rpc_close(nfs);
	free(nfs->req);
	free(nfs->resp);
	free(nfs);
}

uint32_t bs_nfs_minor(const struct bs_nfs *nfs)
{
	return nfs->minor;
}

uint32_t bs_nfs_io_max(const struct bs_nfs *nfs)
{
	uint32_t m = NFSC_IO_MAX;

	if (nfs->max_req - NFSC_OVERHEAD < m)
		m = nfs->max_req - NFSC_OVERHEAD;
	if (nfs->max_resp - NFSC_OVERHEAD < m)
		m = nfs->max_resp - NFSC_OVERHEAD;
	return m & ~4095u;
}

uint32_t bs_nfs_last_status(const struct bs_nfs *nfs)
{
	return nfs->last_status;
}
