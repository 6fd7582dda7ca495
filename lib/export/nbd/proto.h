/* SPDX-License-Identifier: MIT */
/*
 * NBD wire protocol: magic numbers, option/command/reply codes and flags of
 * the fixed newstyle protocol (NetworkBlockDevice doc/proto.md), and the
 * big-endian helpers the parser and the reply encoder share.
 */
#ifndef BLKSTACK_NBD_PROTO_H
#define BLKSTACK_NBD_PROTO_H

#include <stdint.h>
#include <string.h>

/* ---- handshake ---------------------------------------------------------- */

#define NBD_MAGIC 0x4e42444d41474943ull		/* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454F5054ull	/* "IHAVEOPT" */
#define NBD_REP_MAGIC 0x3e889045565a9ull	/* option replies */

/* handshake flags (server) */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
/* client flags */
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)

/* options */
#define NBD_OPT_EXPORT_NAME 1
#define NBD_OPT_ABORT 2
#define NBD_OPT_LIST 3
#define NBD_OPT_STARTTLS 5
#define NBD_OPT_INFO 6
#define NBD_OPT_GO 7
#define NBD_OPT_STRUCTURED_REPLY 8
#define NBD_OPT_LIST_META_CONTEXT 9
#define NBD_OPT_SET_META_CONTEXT 10
#define NBD_OPT_EXTENDED_HEADERS 11

/* option replies */
#define NBD_REP_ACK 1
#define NBD_REP_SERVER 2
#define NBD_REP_INFO 3
#define NBD_REP_META_CONTEXT 4
#define NBD_REP_ERR(n) (0x80000000u | (n))
#define NBD_REP_ERR_UNSUP NBD_REP_ERR(1)
#define NBD_REP_ERR_POLICY NBD_REP_ERR(2)
#define NBD_REP_ERR_INVALID NBD_REP_ERR(3)
#define NBD_REP_ERR_PLATFORM NBD_REP_ERR(4)
#define NBD_REP_ERR_TLS_REQD NBD_REP_ERR(5)
#define NBD_REP_ERR_UNKNOWN NBD_REP_ERR(6)
#define NBD_REP_ERR_SHUTDOWN NBD_REP_ERR(7)
#define NBD_REP_ERR_BLOCK_SIZE_REQD NBD_REP_ERR(8)
#define NBD_REP_ERR_TOO_BIG NBD_REP_ERR(9)

/* NBD_REP_INFO types */
#define NBD_INFO_EXPORT 0
#define NBD_INFO_NAME 1
#define NBD_INFO_DESCRIPTION 2
#define NBD_INFO_BLOCK_SIZE 3

/* transmission flags */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_ROTATIONAL (1u << 4)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)
#define NBD_FLAG_SEND_RESIZE (1u << 9)
#define NBD_FLAG_SEND_CACHE (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO (1u << 11)

/* ---- transmission -------------------------------------------------------- */

#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1
#define NBD_CMD_DISC 2
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_CACHE 5
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7

#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_DF (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

#define NBD_REPLY_FLAG_DONE (1u << 0)
#define NBD_REPLY_TYPE_NONE 0
#define NBD_REPLY_TYPE_OFFSET_DATA 1
#define NBD_REPLY_TYPE_OFFSET_HOLE 2
#define NBD_REPLY_TYPE_BLOCK_STATUS 5
#define NBD_REPLY_TYPE_ERROR 0x8001u
#define NBD_REPLY_TYPE_ERROR_OFFSET 0x8002u

/* error values (fixed by the protocol, not the host's errno) */
#define NBD_EPERM 1
#define NBD_EIO 5
#define NBD_ENOMEM 12
#define NBD_EINVAL 22
#define NBD_ENOSPC 28
#define NBD_EOVERFLOW 75
#define NBD_ENOTSUP 95
#define NBD_ESHUTDOWN 108

/* base:allocation */
#define NBD_STATE_HOLE (1u << 0)
#define NBD_STATE_ZERO (1u << 1)
#define NBD_META_BASE_ALLOCATION "base:allocation"
#define NBD_META_ID_ALLOCATION 1

/* ---- sizes --------------------------------------------------------------- */

#define NBD_OPT_HDR_SIZE 16	/* magic, option, length */
#define NBD_REQ_HDR_SIZE 28	/* magic, flags, type, cookie, offset, length */
#define NBD_SIMPLE_HDR_SIZE 16
#define NBD_CHUNK_HDR_SIZE 20
#define NBD_OPT_REPLY_HDR_SIZE 20
#define NBD_MAX_STRING 4096	/* protocol limit of names, messages */

/* ---- big-endian helpers -------------------------------------------------- */

static inline void nbd_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void nbd_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void nbd_put64(uint8_t *p, uint64_t v)
{
	nbd_put32(p, (uint32_t)(v >> 32));
	nbd_put32(p + 4, (uint32_t)v);
}

static inline uint16_t nbd_get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static inline uint32_t nbd_get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	       ((uint32_t)p[2] << 8) | p[3];
}

static inline uint64_t nbd_get64(const uint8_t *p)
{
	return ((uint64_t)nbd_get32(p) << 32) | nbd_get32(p + 4);
}

/*
 * Map a negative errno of the core or a device to the protocol's error
 * value. NBD_EOVERFLOW and NBD_ESHUTDOWN say things about the server
 * (a READ too long for one piece, the server stopping): a device's
 * EOVERFLOW or ESHUTDOWN is an I/O error for the client.
 */
static inline uint32_t nbd_errno(int err)
{
	switch (-err) {
	case 0:
		return 0;
	case 1:  /* EPERM */
	case 30: /* EROFS */
	case 13: /* EACCES */
		return NBD_EPERM;
	case 12: /* ENOMEM */
		return NBD_ENOMEM;
	case 22: /* EINVAL */
		return NBD_EINVAL;
	case 28:  /* ENOSPC */
	case 27:  /* EFBIG */
	case 122: /* EDQUOT */
		return NBD_ENOSPC;
	case 95: /* EOPNOTSUPP: only a fast zero keeps it (transmit.c) */
		return NBD_ENOTSUP;
	default:
		return NBD_EIO;
	}
}

#endif
