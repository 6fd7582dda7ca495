/* SPDX-License-Identifier: MIT */
/*
 * Wire file handles: a version byte, the export's id (a hash of its name,
 * so it survives a restart) and the backend's own handle bytes (which
 * survive a restart too: backend_dir.c, backend_ext4.c). A handle of
 * another export is STALE, a malformed one BADHANDLE.
 */
#include <string.h>

#include "export/nfs/nfs.h"

#define FH_VERSION 1
#define FH_HDR 5

void nfs_fh_wrap(struct nfs_server *srv, const struct nfs_fh *be,
		 struct nfs_fh *wire)
{
	wire->data[0] = FH_VERSION;
	xdr_set_be32(wire->data + 1, srv->export_id);
	memcpy(wire->data + FH_HDR, be->data, be->len);
	wire->len = FH_HDR + be->len;
}

uint32_t nfs_fh_unwrap(struct nfs_server *srv, const uint8_t *p,
		       uint32_t len, struct nfs_fh *be)
{
	if (len <= FH_HDR || len > NFS4_FHSIZE || p[0] != FH_VERSION ||
	    len - FH_HDR > NFS_BACKEND_FH_MAX)
		return NFS4ERR_BADHANDLE;
	if (xdr_be32(p + 1) != srv->export_id)
		return NFS4ERR_STALE;
	be->len = len - FH_HDR;
	memcpy(be->data, p + FH_HDR, be->len);
	return NFS4_OK;
}

bool nfs_fh_equal(const struct nfs_fh *a, const struct nfs_fh *b)
{
	return a->len == b->len && !memcmp(a->data, b->data, a->len);
}
