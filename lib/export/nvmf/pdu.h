/* SPDX-License-Identifier: MIT */
/*
 * NVMe/TCP PDU framing for the target (not a public API): checking the
 * common header of a PDU the host sent, where its parts lie (header
 * digest, data, data digest), CRC32C digests, and building the PDUs the
 * controller sends (ICResp, CapsuleResp, C2HData, R2T, C2HTermReq).
 *
 * Checks follow the NVMe/TCP transport rules: a PDU type the host may
 * send, ICReq only first and nothing else before it, hlen exactly the
 * type's, HDGSTF/DDGSTF exactly as negotiated (never on ICReq/TermReq),
 * PDO inside the PDU and past the header, PLEN consistent and bounded.
 * A violation is fatal: the caller sends a C2HTermReq with the FES and
 * FEI given and closes the connection.
 */
#ifndef BLKSTACK_NVMF_PDU_H
#define BLKSTACK_NVMF_PDU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/nvme.h>

/* Where the parts of one host PDU are, from its common header. */
struct nvmf_pdu_layout {
	uint8_t type;
	uint8_t flags;
	uint32_t hlen;		/* header bytes without digest */
	uint32_t hdr_len;	/* header bytes incl. its digest */
	uint32_t plen;
	uint32_t data_off;	/* PDO, 0 when no data */
	uint32_t data_len;	/* 0 when no data */
	bool hdgst, ddgst;	/* digests present */
};

/* A fatal transport error: FES and FEI of the C2HTermReq to send. */
struct nvmf_pdu_err {
	uint16_t fes;
	uint32_t fei;
	const char *why;	/* for the log */
};

/* What the connection has negotiated so far. */
struct nvmf_pdu_params {
	bool ic_done;		/* ICReq/ICResp exchanged */
	bool hdgst, ddgst;	/* digests enabled */
	uint32_t max_data;	/* largest data part accepted in one PDU */
};

/*
 * Check the 8-byte common header @ch against @p. 0 and @out filled, or
 * -EPROTO and @err filled.
 */
int nvmf_pdu_parse(const uint8_t *ch, const struct nvmf_pdu_params *p,
		   struct nvmf_pdu_layout *out, struct nvmf_pdu_err *err);

/* CRC32C digest of @len bytes (as sent: stored little-endian). */
uint32_t nvmf_crc32c(const void *buf, size_t len);
/* Check the header digest after the @hlen header bytes at @hdr. */
bool nvmf_pdu_hdgst_ok(const uint8_t *hdr, uint32_t hlen);
/* Append the header digest of the @hlen bytes at @hdr after them. */
void nvmf_pdu_put_hdgst(uint8_t *hdr, uint32_t hlen);

/*
 * Builders: fill the header at @buf (room for its hlen plus a digest) and
 * return the header bytes incl. the digest when @hdgst. Data (and its
 * digest) follow as the caller queues them; PDO/PLEN already count them.
 */
size_t nvmf_pdu_icresp(uint8_t *buf, uint8_t dgst, uint32_t maxh2cdata);
size_t nvmf_pdu_rsp(uint8_t *buf, bool hdgst, const struct bs_nvme_cqe *cqe);
size_t nvmf_pdu_c2h_data(uint8_t *buf, bool hdgst, bool ddgst,
			 uint16_t cid, uint32_t off, uint32_t len, bool last,
			 bool success);
size_t nvmf_pdu_r2t(uint8_t *buf, bool hdgst, uint16_t cid, uint16_t ttag,
		    uint32_t off, uint32_t len);
/* C2HTermReq carrying up to 128 bytes of the offending header @bad. */
size_t nvmf_pdu_term(uint8_t *buf, uint16_t fes, uint32_t fei,
		     const uint8_t *bad, size_t bad_len);

#endif
