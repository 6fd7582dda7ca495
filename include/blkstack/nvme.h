/* SPDX-License-Identifier: MIT */
/*
 * NVMe wire definitions shared by the NVMe/TCP target (lib/export/nvmf/)
 * and the NVMe/TCP host driver: protocol facts only, no logic.
 *
 * Sources (read for facts): NVM Express Base Specification (SQE/CQE,
 * admin and NVM command sets, Identify, log pages, features, properties,
 * asynchronous events), NVMe over Fabrics (Connect, Property Get/Set,
 * discovery log page), NVMe/TCP Transport Specification (PDUs).
 *
 * Everything on the wire is little-endian. The packed structs below are
 * wire images: multi-byte fields hold little-endian values, so read them
 * with bs_nvme_le16/32/64() (or the get/put helpers on byte pointers) and
 * write them with bs_nvme_cpu_to_le*(). Sizes and offsets are checked by
 * static assertions at the end of the file.
 */
#ifndef BLKSTACK_NVME_H
#define BLKSTACK_NVME_H

#include <assert.h>
#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Little-endian helpers                                               */
/* ------------------------------------------------------------------ */

static inline uint16_t bs_nvme_le16(uint16_t v) { return le16toh(v); }
static inline uint32_t bs_nvme_le32(uint32_t v) { return le32toh(v); }
static inline uint64_t bs_nvme_le64(uint64_t v) { return le64toh(v); }
static inline uint16_t bs_nvme_cpu_to_le16(uint16_t v) { return htole16(v); }
static inline uint32_t bs_nvme_cpu_to_le32(uint32_t v) { return htole32(v); }
static inline uint64_t bs_nvme_cpu_to_le64(uint64_t v) { return htole64(v); }

static inline uint16_t bs_nvme_get16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}
static inline uint32_t bs_nvme_get32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}
static inline uint64_t bs_nvme_get64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}
static inline void bs_nvme_put16(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}
static inline void bs_nvme_put32(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}
static inline void bs_nvme_put64(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

/* ------------------------------------------------------------------ */
/* NVMe/TCP transport: PDUs                                            */
/* ------------------------------------------------------------------ */

#define BS_NVME_TCP_PORT	4420	/* IANA: NVMe/TCP I/O and discovery */
#define BS_NVME_TCP_DISC_PORT	8009	/* IANA: NVMe/TCP discovery */

enum bs_nvme_tcp_pdu_type {
	BS_NVME_TCP_ICREQ = 0x00,
	BS_NVME_TCP_ICRESP = 0x01,
	BS_NVME_TCP_H2C_TERM = 0x02,
	BS_NVME_TCP_C2H_TERM = 0x03,
	BS_NVME_TCP_CMD = 0x04,		/* CapsuleCmd */
	BS_NVME_TCP_RSP = 0x05,		/* CapsuleResp */
	BS_NVME_TCP_H2C_DATA = 0x06,
	BS_NVME_TCP_C2H_DATA = 0x07,
	BS_NVME_TCP_R2T = 0x09,
};

/* Common header flags (ch.flags). */
enum {
	BS_NVME_TCP_F_HDGST = 1u << 0,	/* HDGSTF: a header digest follows */
	BS_NVME_TCP_F_DDGST = 1u << 1,	/* DDGSTF: a data digest follows */
	BS_NVME_TCP_F_DATA_LAST = 1u << 2,	/* LAST_PDU (H2C/C2HData) */
	BS_NVME_TCP_F_DATA_SUCCESS = 1u << 3,	/* SUCCESS (C2HData): the
						   command ended, no
						   CapsuleResp follows;
						   LAST_PDU set too */
};

/* ICReq/ICResp DGST field. */
enum {
	BS_NVME_TCP_HDGST_ENABLE = 1u << 0,
	BS_NVME_TCP_DDGST_ENABLE = 1u << 1,
};

#define BS_NVME_TCP_PFV_1_0	0	/* PDU format version */
#define BS_NVME_TCP_DIGEST_LEN	4	/* CRC32C, little-endian */
/* Header lengths (ch.hlen) of each PDU type. */
#define BS_NVME_TCP_ICREQ_HLEN	128
#define BS_NVME_TCP_ICRESP_HLEN	128
#define BS_NVME_TCP_TERM_HLEN	24
#define BS_NVME_TCP_CMD_HLEN	72	/* ch + SQE */
#define BS_NVME_TCP_RSP_HLEN	24	/* ch + CQE */
#define BS_NVME_TCP_DATA_HLEN	24	/* H2CData, C2HData */
#define BS_NVME_TCP_R2T_HLEN	24
/* A TermReq carries at most this many bytes of the offending header. */
#define BS_NVME_TCP_TERM_DATA_MAX	128
#define BS_NVME_TCP_TERM_PLEN_MAX	(BS_NVME_TCP_TERM_HLEN + \
					 BS_NVME_TCP_TERM_DATA_MAX)
/* The longest header any PDU has (ICReq/ICResp). */
#define BS_NVME_TCP_HLEN_MAX	128

/* Fatal error status (TermReq FES). */
enum {
	BS_NVME_TCP_FES_INVALID_HEADER = 0x01,	/* FEI: byte offset */
	BS_NVME_TCP_FES_PDU_SEQUENCE = 0x02,
	BS_NVME_TCP_FES_HDGST = 0x03,		/* FEI: the received digest */
	BS_NVME_TCP_FES_DATA_OUT_OF_RANGE = 0x04,
	BS_NVME_TCP_FES_R2T_LIMIT = 0x05,	/* data transfer limit
						   exceeded */
	BS_NVME_TCP_FES_UNSUPPORTED_PARAM = 0x06,	/* FEI: byte offset */
};

/* Common header, first 8 bytes of every PDU. */
struct bs_nvme_tcp_ch {
	uint8_t type;
	uint8_t flags;
	uint8_t hlen;		/* header length, without header digest */
	uint8_t pdo;		/* PDU data offset, 0 when no data */
	uint32_t plen;		/* whole PDU: header, digests, pad, data */
} __attribute__((packed));

struct bs_nvme_tcp_icreq {
	struct bs_nvme_tcp_ch ch;
	uint16_t pfv;
	uint8_t hpda;		/* host PDU data alignment, 0's based
				   dwords */
	uint8_t dgst;		/* BS_NVME_TCP_*DGST_ENABLE */
	uint32_t maxr2t;	/* 0's based */
	uint8_t rsvd[112];
} __attribute__((packed));

struct bs_nvme_tcp_icresp {
	struct bs_nvme_tcp_ch ch;
	uint16_t pfv;
	uint8_t cpda;		/* controller PDU data alignment */
	uint8_t dgst;
	uint32_t maxh2cdata;	/* bytes, multiple of 4, at least 4096 */
	uint8_t rsvd[112];
} __attribute__((packed));

/* H2CTermReq and C2HTermReq; the offending header follows as data. */
struct bs_nvme_tcp_term {
	struct bs_nvme_tcp_ch ch;
	uint16_t fes;
	uint32_t fei;
	uint8_t rsvd[10];
} __attribute__((packed));

struct bs_nvme_tcp_data {	/* H2CData, C2HData */
	struct bs_nvme_tcp_ch ch;
	uint16_t cccid;		/* command capsule CID */
	uint16_t ttag;		/* H2CData: the R2T's tag; C2H: reserved */
	uint32_t datao;		/* offset in the command's data */
	uint32_t datal;
	uint8_t rsvd[4];
} __attribute__((packed));

struct bs_nvme_tcp_r2t {
	struct bs_nvme_tcp_ch ch;
	uint16_t cccid;
	uint16_t ttag;
	uint32_t r2to;
	uint32_t r2tl;
	uint8_t rsvd[4];
} __attribute__((packed));

/* ------------------------------------------------------------------ */
/* Submission / completion queue entries                               */
/* ------------------------------------------------------------------ */

/* SGL descriptor (16 bytes); fabrics commands always use SGLs. */
struct bs_nvme_sgl {
	uint64_t addr;		/* TCP in-capsule: offset into the data */
	uint32_t length;
	uint8_t rsvd[3];
	uint8_t type;		/* descriptor type << 4 | sub type */
} __attribute__((packed));

enum {
	BS_NVME_SGL_DATA_BLOCK = 0x0,
	BS_NVME_SGL_BIT_BUCKET = 0x1,
	BS_NVME_SGL_SEGMENT = 0x2,
	BS_NVME_SGL_LAST_SEGMENT = 0x3,
	BS_NVME_SGL_KEYED_DATA_BLOCK = 0x4,
	BS_NVME_SGL_TRANSPORT_DATA_BLOCK = 0x5,
};
enum {
	BS_NVME_SGL_SUB_ADDRESS = 0x0,
	BS_NVME_SGL_SUB_OFFSET = 0x1,
	BS_NVME_SGL_SUB_TRANSPORT = 0xa,
};
/* The two descriptors NVMe/TCP uses (the type byte). */
#define BS_NVME_SGL_TCP_INCAPSULE \
	((BS_NVME_SGL_DATA_BLOCK << 4) | BS_NVME_SGL_SUB_OFFSET)	/* 0x01 */
#define BS_NVME_SGL_TCP_TRANSPORT \
	((BS_NVME_SGL_TRANSPORT_DATA_BLOCK << 4) | \
	 BS_NVME_SGL_SUB_TRANSPORT)					/* 0x5a */

/* SQE flags byte: FUSE in bits 1:0, PSDT in bits 7:6. */
#define BS_NVME_SQE_FUSE_MASK	0x03
#define BS_NVME_SQE_PSDT_MASK	0xc0
#define BS_NVME_SQE_PSDT_SGL	0x40	/* SGL for data, MPTR a pointer */

/* The 64-byte submission queue entry (generic command layout). */
struct bs_nvme_sqe {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint32_t nsid;
	uint32_t cdw2;
	uint32_t cdw3;
	uint64_t mptr;
	struct bs_nvme_sgl dptr;	/* SGL1 */
	uint32_t cdw10;
	uint32_t cdw11;
	uint32_t cdw12;
	uint32_t cdw13;
	uint32_t cdw14;
	uint32_t cdw15;
} __attribute__((packed));

/* Fabrics command (opcode 0x7f): fctype sits where NSID's first byte is. */
struct bs_nvme_fabrics_cmd {
	uint8_t opcode;		/* BS_NVME_FABRICS_OPC */
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd1[35];
	uint8_t specific[24];	/* bytes 40..63 */
} __attribute__((packed));

struct bs_nvme_connect_cmd {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;		/* BS_NVME_FCTYPE_CONNECT */
	uint8_t rsvd1[19];
	struct bs_nvme_sgl dptr;	/* the 1024-byte connect data */
	uint16_t recfmt;	/* record format, 0 */
	uint16_t qid;		/* 0 = admin queue */
	uint16_t sqsize;	/* 0's based */
	uint8_t cattr;		/* BS_NVME_CONNECT_CATTR_* */
	uint8_t rsvd2;
	uint32_t kato;		/* ms, admin queue only; 0 = off */
	uint8_t rsvd3[12];
} __attribute__((packed));

enum {
	BS_NVME_CONNECT_CATTR_PRIORITY_MASK = 0x03,	/* bits 1:0 */
	BS_NVME_CONNECT_CATTR_DISABLE_SQFLOW = 1u << 2,	/* SQ flow control
							   off: SQHD
							   meaningless, C2H
							   SUCCESS allowed */
	BS_NVME_CONNECT_CATTR_IO_CTRL = 1u << 3,	/* I/O controller
							   requested */
};

#define BS_NVME_NQN_SIZE	256	/* NQN fields, NUL-terminated */
#define BS_NVME_CNTLID_DYNAMIC	0xffff	/* connect: any controller */
#define BS_NVME_CNTLID_STATIC_ANY	0xfffe
#define BS_NVME_CNTLID_MAX	0xffef	/* valid IDs: 0x0001..0xffef */

struct bs_nvme_connect_data {
	uint8_t hostid[16];
	uint16_t cntlid;	/* admin: 0xffff dynamic; I/O: from connect */
	uint8_t rsvd1[238];
	char subnqn[BS_NVME_NQN_SIZE];
	char hostnqn[BS_NVME_NQN_SIZE];
	uint8_t rsvd2[256];
} __attribute__((packed));

/*
 * Connect completion: DW0 bits 15:0 the controller ID on success; for
 * status Connect Invalid Parameters, bits 15:0 the byte offset (IPO) of
 * the bad field and bit 16 (IATTR) 1 when it is in the connect data,
 * 0 when in the command.
 */
#define BS_NVME_CONNECT_IATTR_DATA	(1u << 16)

/* Property Get (fctype 0x04) / Set (0x00). */
struct bs_nvme_prop_cmd {
	uint8_t opcode;
	uint8_t flags;
	uint16_t cid;
	uint8_t fctype;
	uint8_t rsvd1[35];
	uint8_t attrib;		/* bits 2:0: 0 = 4 bytes, 1 = 8 bytes */
	uint8_t rsvd2[3];
	uint32_t ofst;
	uint64_t value;		/* Set only */
	uint8_t rsvd3[8];
} __attribute__((packed));

#define BS_NVME_PROP_ATTR_SIZE_MASK	0x07
#define BS_NVME_PROP_ATTR_SIZE_8	0x01

/* The 16-byte completion queue entry. */
struct bs_nvme_cqe {
	uint32_t result;	/* DW0, command specific */
	uint32_t dw1;
	uint16_t sqhd;
	uint16_t sqid;
	uint16_t cid;
	uint16_t status;	/* bit 0 phase; bits 15:1 the status field */
} __attribute__((packed));

/*
 * Status field (the CQE's bits 15:1, i.e. cqe.status >> 1): SC in bits
 * 7:0, SCT in bits 10:8, CRD in 12:11, More in 13, DNR in 14. The values
 * below are status fields (SCT << 8 | SC); put them on the wire shifted
 * left by one.
 */
#define BS_NVME_SCT(sf)		(((sf) >> 8) & 0x7)
#define BS_NVME_SC(sf)		((sf) & 0xff)
#define BS_NVME_SF_MORE		0x2000
#define BS_NVME_SF_DNR		0x4000
static inline uint16_t bs_nvme_cqe_status(uint16_t sf)
{
	return (uint16_t)(sf << 1);
}

enum {
	BS_NVME_SCT_GENERIC = 0x0,
	BS_NVME_SCT_CMD_SPECIFIC = 0x1,
	BS_NVME_SCT_MEDIA = 0x2,
	BS_NVME_SCT_PATH = 0x3,
	BS_NVME_SCT_VENDOR = 0x7,
};

enum bs_nvme_status {
	/* Generic command status (SCT 0). */
	BS_NVME_SC_SUCCESS = 0x000,
	BS_NVME_SC_INVALID_OPCODE = 0x001,
	BS_NVME_SC_INVALID_FIELD = 0x002,
	BS_NVME_SC_CMDID_CONFLICT = 0x003,
	BS_NVME_SC_DATA_XFER_ERROR = 0x004,
	BS_NVME_SC_POWER_LOSS = 0x005,
	BS_NVME_SC_INTERNAL = 0x006,
	BS_NVME_SC_ABORT_REQ = 0x007,
	BS_NVME_SC_ABORT_QUEUE = 0x008,	/* SQ deletion */
	BS_NVME_SC_FUSED_FAIL = 0x009,
	BS_NVME_SC_FUSED_MISSING = 0x00a,
	BS_NVME_SC_INVALID_NS = 0x00b,	/* invalid namespace or format */
	BS_NVME_SC_CMD_SEQ_ERROR = 0x00c,
	BS_NVME_SC_SGL_INVALID_LAST = 0x00d,
	BS_NVME_SC_SGL_INVALID_COUNT = 0x00e,
	BS_NVME_SC_SGL_INVALID_DATA = 0x00f,	/* data SGL length invalid */
	BS_NVME_SC_SGL_INVALID_METADATA = 0x010,
	BS_NVME_SC_SGL_INVALID_TYPE = 0x011,
	BS_NVME_SC_SGL_INVALID_OFFSET = 0x016,
	BS_NVME_SC_HOST_ID_INCONSIST = 0x018,
	BS_NVME_SC_KA_TIMEOUT_EXPIRED = 0x019,
	BS_NVME_SC_KA_TIMEOUT_INVALID = 0x01a,
	BS_NVME_SC_NS_WRITE_PROTECTED = 0x020,
	BS_NVME_SC_CMD_INTERRUPTED = 0x021,
	BS_NVME_SC_TRANSIENT_TR_ERR = 0x022,
	/* Generic, NVM command set (SCT 0). */
	BS_NVME_SC_LBA_RANGE = 0x080,
	BS_NVME_SC_CAP_EXCEEDED = 0x081,
	BS_NVME_SC_NS_NOT_READY = 0x082,
	BS_NVME_SC_RESERVATION_CONFLICT = 0x083,
	/* Command specific (SCT 1). */
	BS_NVME_SC_CQ_INVALID = 0x100,
	BS_NVME_SC_QID_INVALID = 0x101,
	BS_NVME_SC_QUEUE_SIZE = 0x102,
	BS_NVME_SC_ABORT_LIMIT = 0x103,
	BS_NVME_SC_ASYNC_LIMIT = 0x105,
	BS_NVME_SC_INVALID_LOG_PAGE = 0x109,
	BS_NVME_SC_INVALID_FORMAT = 0x10a,
	BS_NVME_SC_FEATURE_NOT_SAVEABLE = 0x10d,
	BS_NVME_SC_FEATURE_NOT_CHANGEABLE = 0x10e,
	BS_NVME_SC_FEATURE_NOT_PER_NS = 0x10f,
	BS_NVME_SC_CONNECT_FORMAT = 0x180,	/* incompatible format */
	BS_NVME_SC_CONNECT_CTRL_BUSY = 0x181,
	BS_NVME_SC_CONNECT_INVALID_PARAM = 0x182,
	BS_NVME_SC_CONNECT_RESTART_DISC = 0x183,
	BS_NVME_SC_CONNECT_INVALID_HOST = 0x184,
	BS_NVME_SC_DISCOVERY_RESTART = 0x190,
	BS_NVME_SC_AUTH_REQUIRED = 0x191,
	/* Command specific, NVM command set (SCT 1). */
	BS_NVME_SC_BAD_ATTRIBUTES = 0x180,	/* conflicting attributes */
	BS_NVME_SC_INVALID_PI = 0x181,
	BS_NVME_SC_READ_ONLY = 0x182,		/* write to read only range */
	/* Media and data integrity errors (SCT 2). */
	BS_NVME_SC_WRITE_FAULT = 0x280,
	BS_NVME_SC_READ_ERROR = 0x281,
	BS_NVME_SC_GUARD_CHECK = 0x282,
	BS_NVME_SC_APPTAG_CHECK = 0x283,
	BS_NVME_SC_REFTAG_CHECK = 0x284,
	BS_NVME_SC_COMPARE_FAILED = 0x285,
	BS_NVME_SC_ACCESS_DENIED = 0x286,
	BS_NVME_SC_UNWRITTEN_BLOCK = 0x287,
	/* Path related (SCT 3). */
	BS_NVME_SC_INTERNAL_PATH_ERROR = 0x300,
	BS_NVME_SC_ANA_PERSISTENT_LOSS = 0x301,
	BS_NVME_SC_ANA_INACCESSIBLE = 0x302,
	BS_NVME_SC_ANA_TRANSITION = 0x303,
	BS_NVME_SC_CTRL_PATH_ERROR = 0x360,
	BS_NVME_SC_HOST_PATH_ERROR = 0x370,
	BS_NVME_SC_HOST_ABORTED_CMD = 0x371,
};

/* ------------------------------------------------------------------ */
/* Opcodes                                                             */
/* ------------------------------------------------------------------ */

enum bs_nvme_admin_opcode {
	BS_NVME_ADMIN_DELETE_SQ = 0x00,
	BS_NVME_ADMIN_CREATE_SQ = 0x01,
	BS_NVME_ADMIN_GET_LOG_PAGE = 0x02,
	BS_NVME_ADMIN_DELETE_CQ = 0x04,
	BS_NVME_ADMIN_CREATE_CQ = 0x05,
	BS_NVME_ADMIN_IDENTIFY = 0x06,
	BS_NVME_ADMIN_ABORT = 0x08,
	BS_NVME_ADMIN_SET_FEATURES = 0x09,
	BS_NVME_ADMIN_GET_FEATURES = 0x0a,
	BS_NVME_ADMIN_ASYNC_EVENT = 0x0c,
	BS_NVME_ADMIN_NS_MGMT = 0x0d,
	BS_NVME_ADMIN_FW_COMMIT = 0x10,
	BS_NVME_ADMIN_FW_DOWNLOAD = 0x11,
	BS_NVME_ADMIN_DEV_SELF_TEST = 0x14,
	BS_NVME_ADMIN_NS_ATTACH = 0x15,
	BS_NVME_ADMIN_KEEP_ALIVE = 0x18,
	BS_NVME_ADMIN_DIRECTIVE_SEND = 0x19,
	BS_NVME_ADMIN_DIRECTIVE_RECV = 0x1a,
	BS_NVME_ADMIN_DBBUF = 0x7c,
	BS_NVME_ADMIN_FORMAT_NVM = 0x80,
	BS_NVME_ADMIN_SECURITY_SEND = 0x81,
	BS_NVME_ADMIN_SECURITY_RECV = 0x82,
	BS_NVME_ADMIN_SANITIZE = 0x84,
	BS_NVME_ADMIN_GET_LBA_STATUS = 0x86,
};

enum bs_nvme_io_opcode {
	BS_NVME_CMD_FLUSH = 0x00,
	BS_NVME_CMD_WRITE = 0x01,
	BS_NVME_CMD_READ = 0x02,
	BS_NVME_CMD_WRITE_UNCOR = 0x04,
	BS_NVME_CMD_COMPARE = 0x05,
	BS_NVME_CMD_WRITE_ZEROES = 0x08,
	BS_NVME_CMD_DSM = 0x09,
	BS_NVME_CMD_VERIFY = 0x0c,
	BS_NVME_CMD_RESV_REGISTER = 0x0d,
	BS_NVME_CMD_RESV_REPORT = 0x0e,
	BS_NVME_CMD_RESV_ACQUIRE = 0x11,
	BS_NVME_CMD_RESV_RELEASE = 0x15,
	BS_NVME_CMD_COPY = 0x19,
};

/* Fabrics commands: opcode 0x7f on any queue, fctype selects. */
#define BS_NVME_FABRICS_OPC	0x7f
enum bs_nvme_fctype {
	BS_NVME_FCTYPE_PROP_SET = 0x00,
	BS_NVME_FCTYPE_CONNECT = 0x01,
	BS_NVME_FCTYPE_PROP_GET = 0x04,
	BS_NVME_FCTYPE_AUTH_SEND = 0x05,
	BS_NVME_FCTYPE_AUTH_RECV = 0x06,
	BS_NVME_FCTYPE_DISCONNECT = 0x08,
};

/* Read / Write / Compare / Write Zeroes / Verify: CDW10-11 SLBA, CDW12: */
#define BS_NVME_RW_NLB_MASK	0xffffu		/* 0's based block count */
#define BS_NVME_RW_DEAC		(1u << 25)	/* Write Zeroes: deallocate */
#define BS_NVME_RW_PRINFO_SHIFT	26		/* bits 29:26 */
#define BS_NVME_RW_FUA		(1u << 30)
#define BS_NVME_RW_LR		(1u << 31)	/* limited retry */

/* Dataset Management: CDW10 bits 7:0 NR (0's based), CDW11 attributes. */
#define BS_NVME_DSM_NR_MASK	0xffu
#define BS_NVME_DSM_IDR		(1u << 0)
#define BS_NVME_DSM_IDW		(1u << 1)
#define BS_NVME_DSM_AD		(1u << 2)	/* deallocate */
#define BS_NVME_DSM_MAX_RANGES	256

struct bs_nvme_dsm_range {
	uint32_t cattr;
	uint32_t nlb;		/* blocks, NOT 0's based */
	uint64_t slba;
} __attribute__((packed));

/* ------------------------------------------------------------------ */
/* Identify                                                            */
/* ------------------------------------------------------------------ */

/* CDW10 bits 7:0 CNS, bits 31:16 CNTID; CDW11 bits 31:24 CSI. */
enum bs_nvme_cns {
	BS_NVME_CNS_NS = 0x00,
	BS_NVME_CNS_CTRL = 0x01,
	BS_NVME_CNS_NS_ACTIVE_LIST = 0x02,
	BS_NVME_CNS_NS_DESC_LIST = 0x03,
	BS_NVME_CNS_CS_NS = 0x05,	/* I/O command set specific ns */
	BS_NVME_CNS_CS_CTRL = 0x06,	/* I/O command set specific ctrl */
	BS_NVME_CNS_CS_NS_ACTIVE_LIST = 0x07,
	BS_NVME_CNS_NS_CS_INDEP = 0x08,	/* command set independent ns */
	BS_NVME_CNS_NS_PRESENT_LIST = 0x10,
	BS_NVME_CNS_NS_PRESENT = 0x11,
	BS_NVME_CNS_CTRL_NS_LIST = 0x12,
	BS_NVME_CNS_CTRL_LIST = 0x13,
};
#define BS_NVME_IDENTIFY_SIZE	4096
#define BS_NVME_CSI_NVM		0x00	/* command set identifier */

/* Namespace identification descriptor types (CNS 0x03). */
enum {
	BS_NVME_NIDT_EUI64 = 0x01,	/* NIDL 8 */
	BS_NVME_NIDT_NGUID = 0x02,	/* NIDL 16 */
	BS_NVME_NIDT_UUID = 0x03,	/* NIDL 16 */
	BS_NVME_NIDT_CSI = 0x04,	/* NIDL 1 */
};
struct bs_nvme_ns_id_desc {
	uint8_t nidt;
	uint8_t nidl;
	uint16_t rsvd;
	/* nidl bytes of identifier follow */
} __attribute__((packed));

/* Power state descriptor (32 bytes). */
struct bs_nvme_psd {
	uint16_t mp;
	uint8_t rsvd2;
	uint8_t flags;
	uint32_t enlat;
	uint32_t exlat;
	uint8_t rrt, rrl, rwt, rwl;
	uint16_t idlp;
	uint8_t ips;
	uint8_t rsvd19;
	uint16_t actp;
	uint8_t apws;
	uint8_t rsvd23[9];
} __attribute__((packed));

/* Identify Controller data structure (CNS 0x01). */
struct bs_nvme_id_ctrl {
	uint16_t vid;
	uint16_t ssvid;
	char sn[20];		/* ASCII, space padded */
	char mn[40];
	char fr[8];
	uint8_t rab;
	uint8_t ieee[3];
	uint8_t cmic;		/* BS_NVME_CMIC_* */
	uint8_t mdts;		/* 2^n minimum pages; 0 = no limit */
	uint16_t cntlid;
	uint32_t ver;
	uint32_t rtd3r;
	uint32_t rtd3e;
	uint32_t oaes;		/* BS_NVME_AEN_CFG_* bits supported */
	uint32_t ctratt;
	uint16_t rrls;
	uint8_t rsvd102[9];
	uint8_t cntrltype;	/* BS_NVME_CTRL_TYPE_* */
	uint8_t fguid[16];
	uint16_t crdt1;
	uint16_t crdt2;
	uint16_t crdt3;
	uint8_t rsvd134[122];	/* incl. NVMe-MI area at 240 */
	uint16_t oacs;		/* BS_NVME_OACS_* */
	uint8_t acl;		/* abort command limit, 0's based */
	uint8_t aerl;		/* async event request limit, 0's based */
	uint8_t frmw;
	uint8_t lpa;		/* BS_NVME_LPA_* */
	uint8_t elpe;		/* error log entries, 0's based */
	uint8_t npss;
	uint8_t avscc;
	uint8_t apsta;
	uint16_t wctemp;
	uint16_t cctemp;
	uint16_t mtfa;
	uint32_t hmpre;
	uint32_t hmmin;
	uint8_t tnvmcap[16];
	uint8_t unvmcap[16];
	uint32_t rpmbs;
	uint16_t edstt;
	uint8_t dsto;
	uint8_t fwug;
	uint16_t kas;		/* keep alive granularity, 100 ms units */
	uint16_t hctma;
	uint16_t mntmt;
	uint16_t mxtmt;
	uint32_t sanicap;
	uint32_t hmminds;
	uint16_t hmmaxd;
	uint16_t nsetidmax;
	uint16_t endgidmax;
	uint8_t anatt;
	uint8_t anacap;
	uint32_t anagrpmax;
	uint32_t nanagrpid;
	uint32_t pels;
	uint8_t rsvd356[156];
	uint8_t sqes;		/* bits 3:0 required, 7:4 max, log2 bytes */
	uint8_t cqes;
	uint16_t maxcmd;
	uint32_t nn;		/* number of namespaces (highest NSID) */
	uint16_t oncs;		/* BS_NVME_ONCS_* */
	uint16_t fuses;
	uint8_t fna;
	uint8_t vwc;		/* BS_NVME_VWC_* */
	uint16_t awun;
	uint16_t awupf;
	uint8_t icsvscc;
	uint8_t nwpc;
	uint16_t acwu;
	uint16_t ocfs;
	uint32_t sgls;		/* BS_NVME_SGLS_* */
	uint32_t mnan;
	uint8_t maxdna[16];
	uint32_t maxcna;
	uint8_t rsvd564[204];
	char subnqn[BS_NVME_NQN_SIZE];
	uint8_t rsvd1024[768];
	/* Fabrics */
	uint32_t ioccsz;	/* I/O capsule size, 16-byte units */
	uint32_t iorcsz;	/* I/O response capsule size, 16-byte units */
	uint16_t icdoff;	/* in-capsule data offset, 16-byte units */
	uint8_t fcatt;		/* bit 0: 1 = static controller model */
	uint8_t msdbd;		/* max SGL data block descriptors */
	uint16_t ofcs;
	uint8_t rsvd1806[242];
	struct bs_nvme_psd psd[32];
	uint8_t vs[1024];
} __attribute__((packed));

enum {
	BS_NVME_CMIC_MULTI_PORT = 1u << 0,
	BS_NVME_CMIC_MULTI_CTRL = 1u << 1,
	BS_NVME_CMIC_SRIOV = 1u << 2,
	BS_NVME_CMIC_ANA = 1u << 3,
};
/* ANACAP: bits 4:0 the ANA states a controller reports, bit 6 ANAGRPID
 * fixed while the namespace is attached, bit 7 non-zero ANAGRPID in
 * Namespace Management. */
enum {
	BS_NVME_ANACAP_OPTIMIZED = 1u << 0,
	BS_NVME_ANACAP_NONOPTIMIZED = 1u << 1,
	BS_NVME_ANACAP_INACCESSIBLE = 1u << 2,
	BS_NVME_ANACAP_PERSISTENT_LOSS = 1u << 3,
	BS_NVME_ANACAP_CHANGE = 1u << 4,
	BS_NVME_ANACAP_GRPID_FIXED = 1u << 6,
	BS_NVME_ANACAP_GRPID_MGMT = 1u << 7,
};
enum {
	BS_NVME_CTRL_TYPE_IO = 1,
	BS_NVME_CTRL_TYPE_DISCOVERY = 2,
	BS_NVME_CTRL_TYPE_ADMIN = 3,
};
enum {
	BS_NVME_OACS_SECURITY = 1u << 0,
	BS_NVME_OACS_FORMAT = 1u << 1,
	BS_NVME_OACS_FW = 1u << 2,
	BS_NVME_OACS_NS_MGMT = 1u << 3,
	BS_NVME_OACS_SELF_TEST = 1u << 4,
	BS_NVME_OACS_DIRECTIVES = 1u << 5,
	BS_NVME_OACS_MI = 1u << 6,
	BS_NVME_OACS_VIRT = 1u << 7,
	BS_NVME_OACS_DBBUF = 1u << 8,
	BS_NVME_OACS_LBA_STATUS = 1u << 9,
};
enum {
	BS_NVME_LPA_SMART_PER_NS = 1u << 0,
	BS_NVME_LPA_CMD_EFFECTS = 1u << 1,
	BS_NVME_LPA_EXT_DATA = 1u << 2,	/* NUMDU, LPOL/LPOU honoured */
	BS_NVME_LPA_TELEMETRY = 1u << 3,
	BS_NVME_LPA_PEL = 1u << 4,
};
enum {
	BS_NVME_ONCS_COMPARE = 1u << 0,
	BS_NVME_ONCS_WRITE_UNCOR = 1u << 1,
	BS_NVME_ONCS_DSM = 1u << 2,
	BS_NVME_ONCS_WRITE_ZEROES = 1u << 3,
	BS_NVME_ONCS_SAVE_SELECT = 1u << 4,
	BS_NVME_ONCS_RESERVATIONS = 1u << 5,
	BS_NVME_ONCS_TIMESTAMP = 1u << 6,
	BS_NVME_ONCS_VERIFY = 1u << 7,
	BS_NVME_ONCS_COPY = 1u << 8,
};
enum {
	BS_NVME_VWC_PRESENT = 1u << 0,
	/* bits 2:1 flush with NSID FFFFFFFFh: 10b unsupported, 11b ok */
	BS_NVME_VWC_FLUSH_ALL_NO = 2u << 1,
	BS_NVME_VWC_FLUSH_ALL_OK = 3u << 1,
};
enum {
	BS_NVME_SGLS_SUPPORTED = 1u << 0,	/* bits 1:0 = 01b */
	BS_NVME_SGLS_KEYED = 1u << 2,
	BS_NVME_SGLS_BIT_BUCKET = 1u << 16,
	BS_NVME_SGLS_OFFSET = 1u << 20,		/* in-capsule offsets */
};

/* LBA format (4 bytes). */
struct bs_nvme_lbaf {
	uint16_t ms;		/* metadata bytes */
	uint8_t lbads;		/* log2 of the block size */
	uint8_t rp;		/* relative performance, bits 1:0 */
} __attribute__((packed));

/* Identify Namespace data structure, NVM command set (CNS 0x00). */
struct bs_nvme_id_ns {
	uint64_t nsze;
	uint64_t ncap;
	uint64_t nuse;
	uint8_t nsfeat;		/* BS_NVME_NSFEAT_* */
	uint8_t nlbaf;		/* 0's based */
	uint8_t flbas;		/* bits 3:0 the format in use */
	uint8_t mc;
	uint8_t dpc;
	uint8_t dps;
	uint8_t nmic;		/* BS_NVME_NMIC_SHARED */
	uint8_t rescap;
	uint8_t fpi;
	uint8_t dlfeat;		/* BS_NVME_DLFEAT_* */
	uint16_t nawun;
	uint16_t nawupf;
	uint16_t nacwu;
	uint16_t nabsn;
	uint16_t nabo;
	uint16_t nabspf;
	uint16_t noiob;
	uint8_t nvmcap[16];
	uint16_t npwg;
	uint16_t npwa;
	uint16_t npdg;
	uint16_t npda;
	uint16_t nows;
	uint16_t mssrl;
	uint32_t mcl;
	uint8_t msrc;
	uint8_t rsvd81[11];
	uint32_t anagrpid;
	uint8_t rsvd96[3];
	uint8_t nsattr;		/* bit 0 write protected */
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nguid[16];
	uint8_t eui64[8];
	struct bs_nvme_lbaf lbaf[64];
	uint8_t rsvd384[2688];
	uint8_t vs[1024];
} __attribute__((packed));

/* I/O Command Set Independent Identify Namespace (CNS 0x08). */
struct bs_nvme_id_ns_cs_indep {
	uint8_t nsfeat;
	uint8_t nmic;
	uint8_t rescap;
	uint8_t fpi;
	uint32_t anagrpid;
	uint8_t nsattr;		/* bit 0 write protected */
	uint8_t rsvd9;
	uint16_t nvmsetid;
	uint16_t endgid;
	uint8_t nstat;		/* bit 0 namespace ready */
	uint8_t rsvd15[4081];
} __attribute__((packed));

enum {
	BS_NVME_NSFEAT_THIN = 1u << 0,
	BS_NVME_NSFEAT_NS_ATOMIC = 1u << 1,
	BS_NVME_NSFEAT_DAE = 1u << 2,
	BS_NVME_NSFEAT_UIDREUSE = 1u << 3,
	BS_NVME_NSFEAT_IO_OPT = 1u << 4,	/* NPWG..NOWS valid */
};
#define BS_NVME_NMIC_SHARED	(1u << 0)
/* DLFEAT: bits 2:0 what reads of deallocated blocks return; bit 3 DEAC
 * supported in Write Zeroes; bit 4 guard field is the CRC. */
enum {
	BS_NVME_DLFEAT_READ_MASK = 0x7,
	BS_NVME_DLFEAT_READ_NOT_REPORTED = 0x0,
	BS_NVME_DLFEAT_READ_ZEROES = 0x1,
	BS_NVME_DLFEAT_READ_ONES = 0x2,
	BS_NVME_DLFEAT_WZ_DEAC = 1u << 3,
	BS_NVME_DLFEAT_GUARD_CRC = 1u << 4,
};

/* ------------------------------------------------------------------ */
/* Log pages                                                           */
/* ------------------------------------------------------------------ */

/*
 * Get Log Page: CDW10 bits 7:0 LID, 14:8 LSP, 15 RAE, 31:16 NUMDL;
 * CDW11 bits 15:0 NUMDU, 31:16 LSI; CDW12/13 LPOL/LPOU (byte offset).
 * NUMD = NUMDU:NUMDL, 0's based dwords.
 */
#define BS_NVME_LOG_RAE		(1u << 15)
#define BS_NVME_LOG_LSP_SHIFT	8
#define BS_NVME_LOG_LSP_MASK	0x7f
/* ANA log, LSP bit 0: Return Groups Only (no NSID lists) */
#define BS_NVME_ANA_LSP_RGO	0x01
enum bs_nvme_log_id {
	BS_NVME_LOG_ERROR = 0x01,
	BS_NVME_LOG_SMART = 0x02,
	BS_NVME_LOG_FW_SLOT = 0x03,
	BS_NVME_LOG_CHANGED_NS = 0x04,
	BS_NVME_LOG_CMD_EFFECTS = 0x05,
	BS_NVME_LOG_DEVICE_SELF_TEST = 0x06,
	BS_NVME_LOG_ANA = 0x0c,
	BS_NVME_LOG_DISCOVERY = 0x70,
	BS_NVME_LOG_RESERVATION = 0x80,
	BS_NVME_LOG_SANITIZE = 0x81,
};

struct bs_nvme_error_log {	/* one entry, 64 bytes */
	uint64_t error_count;
	uint16_t sqid;
	uint16_t cid;
	uint16_t status;	/* status field << 1 | phase */
	uint16_t param_error_location;
	uint64_t lba;
	uint32_t nsid;
	uint8_t vs;
	uint8_t trtype;
	uint8_t rsvd30[2];
	uint64_t cs;
	uint16_t trtype_spec_info;
	uint8_t rsvd42[22];
} __attribute__((packed));

struct bs_nvme_smart_log {	/* 512 bytes */
	uint8_t critical_warning;
	uint16_t temperature;	/* Kelvin */
	uint8_t avail_spare;
	uint8_t spare_thresh;
	uint8_t percent_used;
	uint8_t endu_grp_crit_warn;
	uint8_t rsvd7[25];
	uint8_t data_units_read[16];	/* 1000 x 512 bytes */
	uint8_t data_units_written[16];
	uint8_t host_reads[16];
	uint8_t host_writes[16];
	uint8_t ctrl_busy_time[16];
	uint8_t power_cycles[16];
	uint8_t power_on_hours[16];
	uint8_t unsafe_shutdowns[16];
	uint8_t media_errors[16];
	uint8_t num_err_log_entries[16];
	uint32_t warning_temp_time;
	uint32_t critical_comp_time;
	uint16_t temp_sensor[8];
	uint8_t rsvd216[296];
} __attribute__((packed));

/* Changed Namespace List: up to 1024 NSIDs, zero-filled; more than that
 * changed → first entry FFFFFFFFh. */
#define BS_NVME_CHANGED_NS_MAX		1024
#define BS_NVME_CHANGED_NS_OVERFLOW	0xffffffffu

/* ANA log page header and group descriptor. */
struct bs_nvme_ana_log_hdr {
	uint64_t chgcnt;
	uint16_t ngrps;
	uint8_t rsvd[6];
} __attribute__((packed));
struct bs_nvme_ana_group_desc {
	uint32_t grpid;
	uint32_t nnsids;
	uint64_t chgcnt;
	uint8_t state;		/* BS_NVME_ANA_* */
	uint8_t rsvd17[15];
	/* nnsids x uint32_t NSID follow */
} __attribute__((packed));
enum {
	BS_NVME_ANA_OPTIMIZED = 0x01,
	BS_NVME_ANA_NONOPTIMIZED = 0x02,
	BS_NVME_ANA_INACCESSIBLE = 0x03,
	BS_NVME_ANA_PERSISTENT_LOSS = 0x04,
	BS_NVME_ANA_CHANGE = 0x0f,
};

/* Discovery log page (fabrics, LID 0x70): a 1024-byte header, then one
 * 1024-byte entry per record. */
#define BS_NVME_DISC_SUBSYS_NAME "nqn.2014-08.org.nvmexpress.discovery"

struct bs_nvme_disc_log_hdr {
	uint64_t genctr;
	uint64_t numrec;
	uint16_t recfmt;	/* 0 */
	uint8_t rsvd[1006];
} __attribute__((packed));

struct bs_nvme_disc_log_entry {
	uint8_t trtype;		/* BS_NVME_TRTYPE_* */
	uint8_t adrfam;		/* BS_NVME_ADRFAM_* */
	uint8_t subtype;	/* BS_NVME_NQN_TYPE_* */
	uint8_t treq;		/* BS_NVME_TREQ_* */
	uint16_t portid;
	uint16_t cntlid;
	uint16_t asqsz;		/* admin max SQ size */
	uint16_t eflags;
	uint8_t rsvd12[20];
	char trsvcid[32];	/* port, ASCII, space padded */
	uint8_t rsvd64[192];
	char subnqn[BS_NVME_NQN_SIZE];
	char traddr[256];	/* ASCII, space padded */
	uint8_t tsas[256];	/* TCP: byte 0 sectype */
} __attribute__((packed));

enum {
	BS_NVME_TRTYPE_RDMA = 1,
	BS_NVME_TRTYPE_FC = 2,
	BS_NVME_TRTYPE_TCP = 3,
	BS_NVME_TRTYPE_LOOP = 254,
};
enum {
	BS_NVME_ADRFAM_IPV4 = 1,
	BS_NVME_ADRFAM_IPV6 = 2,
	BS_NVME_ADRFAM_IB = 3,
	BS_NVME_ADRFAM_FC = 4,
	BS_NVME_ADRFAM_LOOP = 254,
};
enum {
	BS_NVME_NQN_TYPE_REFERRAL = 1,	/* another discovery service */
	BS_NVME_NQN_TYPE_NVME = 2,	/* an NVM subsystem */
	BS_NVME_NQN_TYPE_CURR_DISC = 3,	/* this discovery subsystem */
};
enum {
	BS_NVME_TREQ_SECURE_NOT_SPECIFIED = 0x0,
	BS_NVME_TREQ_SECURE_REQUIRED = 0x1,
	BS_NVME_TREQ_SECURE_NOT_REQUIRED = 0x2,
	BS_NVME_TREQ_DISABLE_SQFLOW = 1u << 2,	/* SQ flow control may be
						   disabled */
};
enum {
	BS_NVME_TCP_SECTYPE_NONE = 0,
	BS_NVME_TCP_SECTYPE_TLS12 = 1,
	BS_NVME_TCP_SECTYPE_TLS13 = 2,
};

/* ------------------------------------------------------------------ */
/* Features                                                            */
/* ------------------------------------------------------------------ */

/* Get Features CDW10: bits 7:0 FID, 10:8 SEL; Set Features CDW10: FID,
 * bit 31 SV (save). */
#define BS_NVME_FEAT_SEL_SHIFT	8
#define BS_NVME_FEAT_SEL_MASK	0x7u
enum {
	BS_NVME_FEAT_SEL_CURRENT = 0,
	BS_NVME_FEAT_SEL_DEFAULT = 1,
	BS_NVME_FEAT_SEL_SAVED = 2,
	BS_NVME_FEAT_SEL_SUPPORTED = 3,	/* capabilities in DW0 */
};
#define BS_NVME_FEAT_SV		(1u << 31)
enum bs_nvme_feat_id {
	BS_NVME_FEAT_ARBITRATION = 0x01,
	BS_NVME_FEAT_POWER_MGMT = 0x02,
	BS_NVME_FEAT_LBA_RANGE = 0x03,
	BS_NVME_FEAT_TEMP_THRESH = 0x04,
	BS_NVME_FEAT_ERR_RECOVERY = 0x05,
	BS_NVME_FEAT_VOLATILE_WC = 0x06,	/* CDW11 bit 0 WCE */
	BS_NVME_FEAT_NUM_QUEUES = 0x07,	/* CDW11/DW0: NSQ 15:0, NCQ
					   31:16, 0's based */
	BS_NVME_FEAT_IRQ_COALESCE = 0x08,
	BS_NVME_FEAT_IRQ_CONFIG = 0x09,
	BS_NVME_FEAT_WRITE_ATOMIC = 0x0a,
	BS_NVME_FEAT_ASYNC_EVENT = 0x0b,	/* CDW11: BS_NVME_AEN_CFG_* */
	BS_NVME_FEAT_AUTO_PST = 0x0c,
	BS_NVME_FEAT_HOST_MEM_BUF = 0x0d,
	BS_NVME_FEAT_TIMESTAMP = 0x0e,
	BS_NVME_FEAT_KATO = 0x0f,	/* CDW11: KATO in ms */
	BS_NVME_FEAT_HCTM = 0x10,
	BS_NVME_FEAT_NOPSC = 0x11,
	BS_NVME_FEAT_RRL = 0x12,
	BS_NVME_FEAT_HOST_ID = 0x81,
	BS_NVME_FEAT_RESV_MASK = 0x82,
	BS_NVME_FEAT_RESV_PERSIST = 0x83,
	BS_NVME_FEAT_WRITE_PROTECT = 0x84,
};

/* ------------------------------------------------------------------ */
/* Asynchronous events                                                 */
/* ------------------------------------------------------------------ */

/* Asynchronous Event Configuration (feature 0x0b) and OAES bits. */
enum {
	BS_NVME_AEN_CFG_SMART_MASK = 0xffu,	/* critical warnings */
	BS_NVME_AEN_CFG_NS_ATTR = 1u << 8,
	BS_NVME_AEN_CFG_FW_ACT = 1u << 9,
	BS_NVME_AEN_CFG_TELEMETRY = 1u << 10,
	BS_NVME_AEN_CFG_ANA_CHANGE = 1u << 11,
	BS_NVME_AEN_CFG_PLEA = 1u << 12,
	BS_NVME_AEN_CFG_LBAS = 1u << 13,
	BS_NVME_AEN_CFG_EGEAL = 1u << 14,
	BS_NVME_AEN_CFG_DISC_CHANGE = 1u << 31,
};

/* AER completion DW0: bits 2:0 type, 15:8 info, 23:16 log page ID. */
static inline uint32_t bs_nvme_aen_result(unsigned type, unsigned info,
					  unsigned lid)
{
	return (type & 0x7u) | (info & 0xffu) << 8 | (lid & 0xffu) << 16;
}
enum {
	BS_NVME_AER_TYPE_ERROR = 0,
	BS_NVME_AER_TYPE_SMART = 1,
	BS_NVME_AER_TYPE_NOTICE = 2,
	BS_NVME_AER_TYPE_IO_SPECIFIC = 6,
	BS_NVME_AER_TYPE_VENDOR = 7,
};
enum {	/* info for BS_NVME_AER_TYPE_NOTICE */
	BS_NVME_AER_NOTICE_NS_CHANGED = 0x00,
	BS_NVME_AER_NOTICE_FW_ACT = 0x01,
	BS_NVME_AER_NOTICE_TELEMETRY = 0x02,
	BS_NVME_AER_NOTICE_ANA = 0x03,
	BS_NVME_AER_NOTICE_PLE = 0x04,
	BS_NVME_AER_NOTICE_LBAS = 0x05,
	BS_NVME_AER_NOTICE_EGE = 0x06,
	BS_NVME_AER_NOTICE_DISC_CHANGED = 0xf0,
};

/* ------------------------------------------------------------------ */
/* Controller properties (fabrics: Property Get/Set offsets)           */
/* ------------------------------------------------------------------ */

enum {
	BS_NVME_REG_CAP = 0x00,		/* 8 bytes */
	BS_NVME_REG_VS = 0x08,
	BS_NVME_REG_INTMS = 0x0c,	/* reserved on fabrics */
	BS_NVME_REG_INTMC = 0x10,	/* reserved on fabrics */
	BS_NVME_REG_CC = 0x14,
	BS_NVME_REG_CSTS = 0x1c,
	BS_NVME_REG_NSSR = 0x20,
};

/* CAP */
#define BS_NVME_CAP_MQES(cap)		((cap) & 0xffffu)	/* 0's based */
#define BS_NVME_CAP_CQR			(1ull << 16)
#define BS_NVME_CAP_TO_SHIFT		24	/* bits 31:24, 500 ms units */
#define BS_NVME_CAP_DSTRD_SHIFT		32
#define BS_NVME_CAP_NSSRS		(1ull << 36)
#define BS_NVME_CAP_CSS_NVM		(1ull << 37)	/* CSS bit 0 */
#define BS_NVME_CAP_CSS_IOCS		(1ull << 43)	/* CSS bit 6: I/O
							   command sets */
#define BS_NVME_CAP_CSS_NO_IO		(1ull << 44)	/* CSS bit 7 */
#define BS_NVME_CAP_MPSMIN_SHIFT	48	/* 2^(12+n) */
#define BS_NVME_CAP_MPSMAX_SHIFT	52

/* VS: major 31:16, minor 15:8, tertiary 7:0. */
#define BS_NVME_VS(mjr, mnr, ter) \
	(((uint32_t)(mjr) << 16) | ((uint32_t)(mnr) << 8) | (uint32_t)(ter))

/* CC */
#define BS_NVME_CC_EN			(1u << 0)
#define BS_NVME_CC_CSS_SHIFT		4	/* 6:4; 000b NVM */
#define BS_NVME_CC_CSS_MASK		(0x7u << 4)
#define BS_NVME_CC_CSS_NVM		(0x0u << 4)
#define BS_NVME_CC_CSS_CSI		(0x6u << 4)	/* all supported I/O
							   command sets */
#define BS_NVME_CC_CSS_ADMIN		(0x7u << 4)
#define BS_NVME_CC_MPS_SHIFT		7	/* 10:7 */
#define BS_NVME_CC_MPS_MASK		(0xfu << 7)
#define BS_NVME_CC_AMS_SHIFT		11	/* 13:11 */
#define BS_NVME_CC_AMS_MASK		(0x7u << 11)
#define BS_NVME_CC_SHN_SHIFT		14	/* 15:14 */
#define BS_NVME_CC_SHN_MASK		(0x3u << 14)
#define BS_NVME_CC_SHN_NONE		(0x0u << 14)
#define BS_NVME_CC_SHN_NORMAL		(0x1u << 14)
#define BS_NVME_CC_SHN_ABRUPT		(0x2u << 14)
#define BS_NVME_CC_IOSQES_SHIFT		16	/* 19:16, log2 */
#define BS_NVME_CC_IOSQES_MASK		(0xfu << 16)
#define BS_NVME_CC_IOCQES_SHIFT		20	/* 23:20, log2 */
#define BS_NVME_CC_IOCQES_MASK		(0xfu << 20)
#define BS_NVME_SQES_LOG2		6	/* 64-byte SQE */
#define BS_NVME_CQES_LOG2		4	/* 16-byte CQE */

/* CSTS */
#define BS_NVME_CSTS_RDY		(1u << 0)
#define BS_NVME_CSTS_CFS		(1u << 1)
#define BS_NVME_CSTS_SHST_MASK		(0x3u << 2)
#define BS_NVME_CSTS_SHST_NORMAL	(0x0u << 2)
#define BS_NVME_CSTS_SHST_OCCUR		(0x1u << 2)
#define BS_NVME_CSTS_SHST_CMPLT		(0x2u << 2)
#define BS_NVME_CSTS_NSSRO		(1u << 4)

/* ------------------------------------------------------------------ */
/* Size and offset checks                                              */
/* ------------------------------------------------------------------ */

#define BS_NVME_CHECK_OFF(t, f, o) \
	static_assert(offsetof(struct t, f) == (o), #t "." #f " at " #o)
#define BS_NVME_CHECK_SIZE(t, s) \
	static_assert(sizeof(struct t) == (s), #t " is " #s " bytes")

BS_NVME_CHECK_SIZE(bs_nvme_tcp_ch, 8);
BS_NVME_CHECK_OFF(bs_nvme_tcp_ch, plen, 4);
BS_NVME_CHECK_SIZE(bs_nvme_tcp_icreq, BS_NVME_TCP_ICREQ_HLEN);
BS_NVME_CHECK_OFF(bs_nvme_tcp_icreq, pfv, 8);
BS_NVME_CHECK_OFF(bs_nvme_tcp_icreq, hpda, 10);
BS_NVME_CHECK_OFF(bs_nvme_tcp_icreq, dgst, 11);
BS_NVME_CHECK_OFF(bs_nvme_tcp_icreq, maxr2t, 12);
BS_NVME_CHECK_SIZE(bs_nvme_tcp_icresp, BS_NVME_TCP_ICRESP_HLEN);
BS_NVME_CHECK_OFF(bs_nvme_tcp_icresp, cpda, 10);
BS_NVME_CHECK_OFF(bs_nvme_tcp_icresp, maxh2cdata, 12);
BS_NVME_CHECK_SIZE(bs_nvme_tcp_term, BS_NVME_TCP_TERM_HLEN);
BS_NVME_CHECK_OFF(bs_nvme_tcp_term, fes, 8);
BS_NVME_CHECK_OFF(bs_nvme_tcp_term, fei, 10);
BS_NVME_CHECK_SIZE(bs_nvme_tcp_data, BS_NVME_TCP_DATA_HLEN);
BS_NVME_CHECK_OFF(bs_nvme_tcp_data, cccid, 8);
BS_NVME_CHECK_OFF(bs_nvme_tcp_data, ttag, 10);
BS_NVME_CHECK_OFF(bs_nvme_tcp_data, datao, 12);
BS_NVME_CHECK_OFF(bs_nvme_tcp_data, datal, 16);
BS_NVME_CHECK_SIZE(bs_nvme_tcp_r2t, BS_NVME_TCP_R2T_HLEN);
BS_NVME_CHECK_OFF(bs_nvme_tcp_r2t, r2to, 12);
BS_NVME_CHECK_OFF(bs_nvme_tcp_r2t, r2tl, 16);

BS_NVME_CHECK_SIZE(bs_nvme_sgl, 16);
BS_NVME_CHECK_OFF(bs_nvme_sgl, length, 8);
BS_NVME_CHECK_OFF(bs_nvme_sgl, type, 15);
BS_NVME_CHECK_SIZE(bs_nvme_sqe, 64);
BS_NVME_CHECK_OFF(bs_nvme_sqe, cid, 2);
BS_NVME_CHECK_OFF(bs_nvme_sqe, nsid, 4);
BS_NVME_CHECK_OFF(bs_nvme_sqe, mptr, 16);
BS_NVME_CHECK_OFF(bs_nvme_sqe, dptr, 24);
BS_NVME_CHECK_OFF(bs_nvme_sqe, cdw10, 40);
BS_NVME_CHECK_OFF(bs_nvme_sqe, cdw15, 60);
static_assert(BS_NVME_TCP_CMD_HLEN == 8 + sizeof(struct bs_nvme_sqe),
	      "CapsuleCmd header is ch + SQE");
BS_NVME_CHECK_SIZE(bs_nvme_fabrics_cmd, 64);
BS_NVME_CHECK_OFF(bs_nvme_fabrics_cmd, fctype, 4);
BS_NVME_CHECK_OFF(bs_nvme_fabrics_cmd, specific, 40);
BS_NVME_CHECK_SIZE(bs_nvme_connect_cmd, 64);
BS_NVME_CHECK_OFF(bs_nvme_connect_cmd, dptr, 24);
BS_NVME_CHECK_OFF(bs_nvme_connect_cmd, recfmt, 40);
BS_NVME_CHECK_OFF(bs_nvme_connect_cmd, qid, 42);
BS_NVME_CHECK_OFF(bs_nvme_connect_cmd, sqsize, 44);
BS_NVME_CHECK_OFF(bs_nvme_connect_cmd, cattr, 46);
BS_NVME_CHECK_OFF(bs_nvme_connect_cmd, kato, 48);
BS_NVME_CHECK_SIZE(bs_nvme_connect_data, 1024);
BS_NVME_CHECK_OFF(bs_nvme_connect_data, cntlid, 16);
BS_NVME_CHECK_OFF(bs_nvme_connect_data, subnqn, 256);
BS_NVME_CHECK_OFF(bs_nvme_connect_data, hostnqn, 512);
BS_NVME_CHECK_SIZE(bs_nvme_prop_cmd, 64);
BS_NVME_CHECK_OFF(bs_nvme_prop_cmd, attrib, 40);
BS_NVME_CHECK_OFF(bs_nvme_prop_cmd, ofst, 44);
BS_NVME_CHECK_OFF(bs_nvme_prop_cmd, value, 48);
BS_NVME_CHECK_SIZE(bs_nvme_cqe, 16);
BS_NVME_CHECK_OFF(bs_nvme_cqe, sqhd, 8);
BS_NVME_CHECK_OFF(bs_nvme_cqe, sqid, 10);
BS_NVME_CHECK_OFF(bs_nvme_cqe, cid, 12);
BS_NVME_CHECK_OFF(bs_nvme_cqe, status, 14);
static_assert(BS_NVME_TCP_RSP_HLEN == 8 + sizeof(struct bs_nvme_cqe),
	      "CapsuleResp header is ch + CQE");
BS_NVME_CHECK_SIZE(bs_nvme_dsm_range, 16);
BS_NVME_CHECK_OFF(bs_nvme_dsm_range, slba, 8);
BS_NVME_CHECK_SIZE(bs_nvme_ns_id_desc, 4);

BS_NVME_CHECK_SIZE(bs_nvme_psd, 32);
BS_NVME_CHECK_SIZE(bs_nvme_id_ctrl, BS_NVME_IDENTIFY_SIZE);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, sn, 4);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, mn, 24);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, fr, 64);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, cmic, 76);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, mdts, 77);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, cntlid, 78);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, ver, 80);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, oaes, 92);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, ctratt, 96);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, cntrltype, 111);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, fguid, 112);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, oacs, 256);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, acl, 258);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, aerl, 259);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, lpa, 261);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, elpe, 262);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, tnvmcap, 280);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, kas, 320);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, anatt, 342);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, anagrpmax, 344);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, pels, 352);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, sqes, 512);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, maxcmd, 514);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, nn, 516);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, oncs, 520);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, fna, 524);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, vwc, 525);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, awun, 526);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, sgls, 536);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, mnan, 540);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, subnqn, 768);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, ioccsz, 1792);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, iorcsz, 1796);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, icdoff, 1800);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, msdbd, 1803);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, psd, 2048);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, vs, 3072);

BS_NVME_CHECK_SIZE(bs_nvme_lbaf, 4);
BS_NVME_CHECK_SIZE(bs_nvme_id_ns, BS_NVME_IDENTIFY_SIZE);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, nsfeat, 24);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, flbas, 26);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, nmic, 30);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, dlfeat, 33);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, noiob, 46);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, nvmcap, 48);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, npwg, 64);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, anagrpid, 92);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, nsattr, 99);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, nguid, 104);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, eui64, 120);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, lbaf, 128);
BS_NVME_CHECK_OFF(bs_nvme_id_ns, vs, 3072);

BS_NVME_CHECK_SIZE(bs_nvme_id_ns_cs_indep, BS_NVME_IDENTIFY_SIZE);
BS_NVME_CHECK_OFF(bs_nvme_id_ns_cs_indep, anagrpid, 4);
BS_NVME_CHECK_OFF(bs_nvme_id_ns_cs_indep, nsattr, 8);
BS_NVME_CHECK_OFF(bs_nvme_id_ns_cs_indep, nvmsetid, 10);
BS_NVME_CHECK_OFF(bs_nvme_id_ns_cs_indep, nstat, 14);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, anacap, 343);
BS_NVME_CHECK_OFF(bs_nvme_id_ctrl, nanagrpid, 348);
BS_NVME_CHECK_OFF(bs_nvme_ana_group_desc, chgcnt, 8);
BS_NVME_CHECK_OFF(bs_nvme_ana_group_desc, state, 16);
BS_NVME_CHECK_SIZE(bs_nvme_error_log, 64);
BS_NVME_CHECK_OFF(bs_nvme_error_log, nsid, 24);
BS_NVME_CHECK_SIZE(bs_nvme_smart_log, 512);
BS_NVME_CHECK_OFF(bs_nvme_smart_log, data_units_read, 32);
BS_NVME_CHECK_OFF(bs_nvme_smart_log, power_on_hours, 128);
BS_NVME_CHECK_OFF(bs_nvme_smart_log, warning_temp_time, 192);
BS_NVME_CHECK_SIZE(bs_nvme_ana_log_hdr, 16);
BS_NVME_CHECK_SIZE(bs_nvme_ana_group_desc, 32);
BS_NVME_CHECK_SIZE(bs_nvme_disc_log_hdr, 1024);
BS_NVME_CHECK_OFF(bs_nvme_disc_log_hdr, recfmt, 16);
BS_NVME_CHECK_SIZE(bs_nvme_disc_log_entry, 1024);
BS_NVME_CHECK_OFF(bs_nvme_disc_log_entry, portid, 4);
BS_NVME_CHECK_OFF(bs_nvme_disc_log_entry, asqsz, 8);
BS_NVME_CHECK_OFF(bs_nvme_disc_log_entry, trsvcid, 32);
BS_NVME_CHECK_OFF(bs_nvme_disc_log_entry, subnqn, 256);
BS_NVME_CHECK_OFF(bs_nvme_disc_log_entry, traddr, 512);
BS_NVME_CHECK_OFF(bs_nvme_disc_log_entry, tsas, 768);

#undef BS_NVME_CHECK_OFF
#undef BS_NVME_CHECK_SIZE

#endif
