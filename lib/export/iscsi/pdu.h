/* SPDX-License-Identifier: MIT */
/*
 * iSCSI PDUs (RFC 7143 section 11): the 48-byte Basic Header Segment,
 * additional header segments, the data segment padded to 4 bytes, and the
 * optional CRC32C header and data digests. Field access by offset, all
 * big-endian; no allocation here (not a public API).
 */
#ifndef BLKSTACK_ISCSI_PDU_H
#define BLKSTACK_ISCSI_PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ISCSI_BHS_LEN 48
#define ISCSI_DIGEST_LEN 4
/* A data segment length field is 24 bits. */
#define ISCSI_DSL_MAX 0xffffffu
#define ISCSI_RSVD_TAG 0xffffffffu

/* Opcodes: initiator to target. */
enum {
	ISCSI_OP_NOP_OUT = 0x00,
	ISCSI_OP_SCSI_CMD = 0x01,
	ISCSI_OP_TMF_REQ = 0x02,
	ISCSI_OP_LOGIN_REQ = 0x03,
	ISCSI_OP_TEXT_REQ = 0x04,
	ISCSI_OP_DATA_OUT = 0x05,
	ISCSI_OP_LOGOUT_REQ = 0x06,
	ISCSI_OP_SNACK_REQ = 0x10,
};

/* Opcodes: target to initiator. */
enum {
	ISCSI_OP_NOP_IN = 0x20,
	ISCSI_OP_SCSI_RSP = 0x21,
	ISCSI_OP_TMF_RSP = 0x22,
	ISCSI_OP_LOGIN_RSP = 0x23,
	ISCSI_OP_TEXT_RSP = 0x24,
	ISCSI_OP_DATA_IN = 0x25,
	ISCSI_OP_LOGOUT_RSP = 0x26,
	ISCSI_OP_R2T = 0x31,
	ISCSI_OP_ASYNC = 0x32,
	ISCSI_OP_REJECT = 0x3f,
};

/* Byte 0 and 1 flags. */
#define ISCSI_FLAG_IMMEDIATE 0x40	/* byte 0 */
#define ISCSI_OPCODE_MASK 0x3f
#define ISCSI_FLAG_FINAL 0x80		/* byte 1 */
#define ISCSI_FLAG_CONTINUE 0x40	/* text, login */
#define ISCSI_CMD_READ 0x40
#define ISCSI_CMD_WRITE 0x20
#define ISCSI_CMD_ATTR_MASK 0x07
#define ISCSI_LOGIN_TRANSIT 0x80
#define ISCSI_LOGIN_CSG(b) (((b) >> 2) & 3)
#define ISCSI_LOGIN_NSG(b) ((b) & 3)
#define ISCSI_DATA_ACK 0x40
#define ISCSI_DATA_OVERFLOW 0x04
#define ISCSI_DATA_UNDERFLOW 0x02
#define ISCSI_DATA_STATUS 0x01
#define ISCSI_RSP_OVERFLOW 0x04
#define ISCSI_RSP_UNDERFLOW 0x02

/* Login stages. */
enum {
	ISCSI_STAGE_SECURITY = 0,
	ISCSI_STAGE_OPERATIONAL = 1,
	ISCSI_STAGE_FULL = 3,
};

/* Reject reasons (11.17.1). */
enum {
	ISCSI_REJECT_DIGEST = 0x02,
	ISCSI_REJECT_SNACK = 0x03,
	ISCSI_REJECT_PROTOCOL = 0x04,
	ISCSI_REJECT_UNSUPPORTED = 0x05,
	ISCSI_REJECT_IMMEDIATE = 0x06,
	ISCSI_REJECT_TASK_IN_PROGRESS = 0x07,
	ISCSI_REJECT_DATA_ACK = 0x08,
	ISCSI_REJECT_INVALID_FIELD = 0x09,
	ISCSI_REJECT_OUT_OF_RESOURCES = 0x0a,
	ISCSI_REJECT_WAITING_LOGOUT = 0x0c,
};

/* Task management functions and responses (11.5, 11.6). */
enum {
	ISCSI_TMF_ABORT_TASK = 1,
	ISCSI_TMF_ABORT_TASK_SET = 2,
	ISCSI_TMF_CLEAR_ACA = 3,
	ISCSI_TMF_CLEAR_TASK_SET = 4,
	ISCSI_TMF_LUN_RESET = 5,
	ISCSI_TMF_TARGET_WARM_RESET = 6,
	ISCSI_TMF_TARGET_COLD_RESET = 7,
	ISCSI_TMF_TASK_REASSIGN = 8,
};
enum {
	ISCSI_TMF_RSP_COMPLETE = 0,
	ISCSI_TMF_RSP_NO_TASK = 1,
	ISCSI_TMF_RSP_NO_LUN = 2,
	ISCSI_TMF_RSP_NO_REASSIGN = 4,	/* allegiance reassignment */
	ISCSI_TMF_RSP_NOT_SUPPORTED = 5,
	ISCSI_TMF_RSP_REJECTED = 255,
};

/* Login status: class << 8 | detail (11.13.5). */
enum {
	ISCSI_LOGIN_OK = 0x0000,
	ISCSI_LOGIN_INITIATOR_ERROR = 0x0200,
	ISCSI_LOGIN_AUTH_FAILED = 0x0201,
	ISCSI_LOGIN_FORBIDDEN = 0x0202,
	ISCSI_LOGIN_NOT_FOUND = 0x0203,
	ISCSI_LOGIN_REMOVED = 0x0204,
	ISCSI_LOGIN_BAD_VERSION = 0x0205,
	ISCSI_LOGIN_TOO_MANY_CONNS = 0x0206,
	ISCSI_LOGIN_MISSING_PARAM = 0x0207,
	ISCSI_LOGIN_NO_SESSION_SPAN = 0x0208,
	ISCSI_LOGIN_NO_SESSION_TYPE = 0x0209,
	ISCSI_LOGIN_NO_SESSION = 0x020a,
	ISCSI_LOGIN_INVALID_REQUEST = 0x020b,
	ISCSI_LOGIN_TARGET_ERROR = 0x0300,
	ISCSI_LOGIN_UNAVAILABLE = 0x0301,
	ISCSI_LOGIN_NO_RESOURCES = 0x0302,
};

/* Logout reasons and responses. */
enum {
	ISCSI_LOGOUT_CLOSE_SESSION = 0,
	ISCSI_LOGOUT_CLOSE_CONNECTION = 1,
	ISCSI_LOGOUT_REMOVE_FOR_RECOVERY = 2,
};
enum {
	ISCSI_LOGOUT_RSP_OK = 0,
	ISCSI_LOGOUT_RSP_NO_CID = 1,
	ISCSI_LOGOUT_RSP_NO_RECOVERY = 2,
};

/* AHS types. */
#define ISCSI_AHS_EXTENDED_CDB 1
#define ISCSI_AHS_BIDI_READ_LEN 2

static inline uint16_t iscsi_get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t iscsi_get24(const uint8_t *p)
{
	return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}

static inline uint32_t iscsi_get32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

static inline void iscsi_put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void iscsi_put24(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 16);
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)v;
}

static inline void iscsi_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline uint32_t iscsi_pad4(uint32_t n)
{
	return (4 - (n & 3)) & 3;
}

static inline uint8_t iscsi_opcode(const uint8_t *bhs)
{
	return bhs[0] & ISCSI_OPCODE_MASK;
}

static inline bool iscsi_immediate(const uint8_t *bhs)
{
	return bhs[0] & ISCSI_FLAG_IMMEDIATE;
}

/* TotalAHSLength in bytes, DataSegmentLength in bytes (unpadded). */
static inline uint32_t iscsi_ahs_len(const uint8_t *bhs)
{
	return (uint32_t)bhs[4] * 4;
}

static inline uint32_t iscsi_dsl(const uint8_t *bhs)
{
	return iscsi_get24(bhs + 5);
}

static inline uint32_t iscsi_itt(const uint8_t *bhs)
{
	return iscsi_get32(bhs + 16);
}

/* Serial number arithmetic (RFC 1982, 32 bits): a < b. */
static inline bool iscsi_sn_lt(uint32_t a, uint32_t b)
{
	return a != b && (int32_t)(a - b) < 0;
}

static inline bool iscsi_sn_le(uint32_t a, uint32_t b)
{
	return a == b || iscsi_sn_lt(a, b);
}

/* Bytes that follow a BHS on the wire, with the digests negotiated. */
size_t iscsi_pdu_rest_len(const uint8_t *bhs, bool hdigest, bool ddigest);

/* A readable name of an opcode ("SCSI Command", "0x1c"), for logs. */
const char *iscsi_opcode_name(uint8_t op, char *buf, size_t len);

/*
 * A response BHS: zeroed, opcode and F bit set, DataSegmentLength @dsl,
 * ITT @itt. Callers fill the rest.
 */
void iscsi_bhs_init(uint8_t *bhs, uint8_t op, uint32_t dsl, uint32_t itt);

/*
 * The CDB of a SCSI Command: the 16 bytes of the BHS, then the extended
 * CDB AHS if any. Walks every AHS of @ahs (@ahs_len bytes) with each
 * length bounded. Returns the CDB length, or -EINVAL (malformed AHS, a
 * CDB over @max bytes). *@bidi is set when a bidirectional read length
 * AHS is present.
 */
int iscsi_pdu_cdb(const uint8_t *bhs, const uint8_t *ahs, uint32_t ahs_len,
		  uint8_t *cdb, size_t max, bool *bidi);

#endif
