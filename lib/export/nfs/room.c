/* SPDX-License-Identifier: MIT */
/*
 * How large a call's reply can be, read from its arguments before it
 * runs: the room the in-flight budget keeps for the reply (conn.c).
 * Without it every call held room for the largest reply (a 1 MiB READ)
 * from its first byte to its reply, so a 64 MiB budget let about sixty
 * NFS calls be in flight across all clients, whatever they were.
 *
 * The ops of the data path and the lookups around them are known here,
 * each with the largest result body it can encode; a COMPOUND of only
 * those is bounded by their sum. Anything else (an op not listed,
 * arguments that do not parse, a procedure other than COMPOUND or NULL)
 * gets the largest reply, as before. Argument formats: RFC 8881 18.x
 * (RFC 7530 for 4.0); results as ops_*.c, attr.c and session.c encode
 * them. A reply from the session's reply cache can be longer than the
 * bound of the call that replays it (a client reusing a slot with other
 * ops): conn.c takes what a reply holds above its room when it is made.
 */
#include "export/nfs/nfs.h"

/* RPC reply header: xid, REPLY, MSG_ACCEPTED, a verifier with no body,
 * accept status and a mismatch's two versions (denials are shorter) */
#define ROOM_RPC_HEAD (4u * 8)
/* per result: the op number and its status */
#define ROOM_OP_HEAD 8u

static size_t pad4(size_t n)
{
	return (n + 3) & ~(size_t)3;
}

/* An opaque<> argument of at most @max bytes: skipped; false if not. */
static bool skip_opaque(struct xdr_dec *d, uint32_t max)
{
	uint32_t n;

	xdr_get_opaque_ref(d, &n, max);
	return !xdr_dec_err(d);
}

/* A bitmap4 of at most NFS4_BITMAP_WORDS words (as ours are) skipped. */
static bool skip_bitmap(struct xdr_dec *d)
{
	uint32_t n = xdr_get_u32(d);

	if (xdr_dec_err(d) || n > 8)
		return false;
	xdr_skip(d, (size_t)n * 4);
	return !xdr_dec_err(d);
}

/* One op's arguments skipped; its largest result body in *@room. False
 * for an op this file does not know. */
static bool op_room(uint32_t op, struct xdr_dec *d, size_t *room)
{
	uint32_t count;

	switch (op) {
	case OP_SEQUENCE:	/* sessionid, seq, slot, highest, cachethis */
		xdr_skip(d, NFS4_SESSIONID_SIZE + 4 * 4);
		*room = NFS4_SESSIONID_SIZE + 5 * 4;
		break;
	case OP_PUTFH:
		if (!skip_opaque(d, NFS4_FHSIZE))
			return false;
		*room = 0;
		break;
	case OP_PUTROOTFH:
	case OP_SAVEFH:
	case OP_RESTOREFH:
		*room = 0;
		break;
	case OP_GETFH:
		*room = 4 + NFS4_FHSIZE;
		break;
	case OP_LOOKUP:
		if (!skip_opaque(d, NFS4_OPAQUE_LIMIT))
			return false;
		*room = 0;
		break;
	case OP_ACCESS:		/* supported, access */
		xdr_skip(d, 4);
		*room = 8;
		break;
	case OP_GETATTR:	/* a bitmap and the attributes */
		if (!skip_bitmap(d))
			return false;
		*room = 4 + 4 * NFS4_BITMAP_WORDS + 4 + NFS_FATTR_MAX;
		break;
	case OP_READ:		/* stateid, offset, count: eof, data<> */
		xdr_skip(d, NFS4_STATEID_SIZE + 8);
		count = xdr_get_u32(d);
		*room = 8 + pad4(count < NFS_MAX_IO ? count : NFS_MAX_IO);
		break;
	case OP_WRITE:		/* stateid, offset, stable, data<> */
		xdr_skip(d, NFS4_STATEID_SIZE + 8 + 4);
		if (!skip_opaque(d, XDR_NOMAX))
			return false;
		*room = 4 + 4 + NFS4_VERIFIER_SIZE;
		break;
	case OP_COMMIT:		/* offset, count: verifier */
		xdr_skip(d, 8 + 4);
		*room = NFS4_VERIFIER_SIZE;
		break;
	default:
		return false;
	}
	return !xdr_dec_err(d);
}

size_t nfs_reply_room(const uint8_t *req, size_t len)
{
	struct xdr_dec d;
	uint32_t proc, nops, tag_len, i;
	size_t room, op;

	xdr_dec_init(&d, req, len);
	xdr_skip(&d, 4 * 5);		/* xid, CALL, rpcvers, prog, vers */
	proc = xdr_get_u32(&d);
	xdr_skip(&d, 4);		/* credential */
	skip_opaque(&d, RPC_AUTH_MAX);
	xdr_skip(&d, 4);		/* verifier */
	skip_opaque(&d, RPC_AUTH_MAX);
	if (xdr_dec_err(&d))
		return NFS_MAX_REPLY;
	if (proc == NFS4_PROC_NULL)
		return ROOM_RPC_HEAD;
	if (proc != NFS4_PROC_COMPOUND)
		return NFS_MAX_REPLY;
	xdr_get_opaque_ref(&d, &tag_len, NFS4_OPAQUE_LIMIT);
	xdr_skip(&d, 4);		/* minor version */
	nops = xdr_get_u32(&d);
	if (xdr_dec_err(&d) || nops > NFS_MAX_OPS * 4)
		return NFS_MAX_REPLY;
	/* status, the tag echoed, the number of results */
	room = ROOM_RPC_HEAD + 4 + 4 + pad4(tag_len) + 4;
	for (i = 0; i < nops; i++) {
		if (!op_room(xdr_get_u32(&d), &d, &op))
			return NFS_MAX_REPLY;
		room += ROOM_OP_HEAD + op;
		if (room >= NFS_MAX_REPLY)
			return NFS_MAX_REPLY;
	}
	return room;
}
