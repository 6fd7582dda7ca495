/* SPDX-License-Identifier: MIT */
/* NVMe/TCP PDU framing and digests (see pdu.h). */
#include <errno.h>
#include <string.h>

#include "core/crc32c.h"
#include "export/nvmf/pdu.h"

uint32_t nvmf_crc32c(const void *buf, size_t len)
{
	/* NVMe/TCP's digest is the same CRC32C as iSCSI's */
	return bs_crc32c(buf, len);
}

bool nvmf_pdu_hdgst_ok(const uint8_t *hdr, uint32_t hlen)
{
	return bs_nvme_get32(hdr + hlen) == nvmf_crc32c(hdr, hlen);
}

void nvmf_pdu_put_hdgst(uint8_t *hdr, uint32_t hlen)
{
	bs_nvme_put32(hdr + hlen, nvmf_crc32c(hdr, hlen));
}

static int fail(struct nvmf_pdu_err *err, uint16_t fes, uint32_t fei,
		const char *why)
{
	err->fes = fes;
	err->fei = fei;
	err->why = why;
	return -EPROTO;
}

/* Offsets of common header fields, for FEI. */
#define OFF_TYPE 0
#define OFF_FLAGS 1
#define OFF_HLEN 2
#define OFF_PDO 3
#define OFF_PLEN 4

int nvmf_pdu_parse(const uint8_t *ch, const struct nvmf_pdu_params *p,
		   struct nvmf_pdu_layout *out, struct nvmf_pdu_err *err)
{
	uint8_t type = ch[0], flags = ch[1], hlen = ch[2], pdo = ch[3];
	uint32_t plen = bs_nvme_get32(ch + 4);
	uint32_t want_hlen, hdr_len, rest, dd;
	bool digests_apply = true;

	memset(out, 0, sizeof(*out));
	switch (type) {
	case BS_NVME_TCP_ICREQ:
		want_hlen = BS_NVME_TCP_ICREQ_HLEN;
		digests_apply = false;
		break;
	case BS_NVME_TCP_H2C_TERM:
		want_hlen = BS_NVME_TCP_TERM_HLEN;
		digests_apply = false;
		break;
	case BS_NVME_TCP_CMD:
		want_hlen = BS_NVME_TCP_CMD_HLEN;
		break;
	case BS_NVME_TCP_H2C_DATA:
		want_hlen = BS_NVME_TCP_DATA_HLEN;
		break;
	default:
		return fail(err, BS_NVME_TCP_FES_INVALID_HEADER, OFF_TYPE,
			    "a PDU type the host may not send");
	}
	if (!p->ic_done && type != BS_NVME_TCP_ICREQ &&
	    type != BS_NVME_TCP_H2C_TERM)
		return fail(err, BS_NVME_TCP_FES_PDU_SEQUENCE, 0,
			    "a PDU before ICReq");
	if (p->ic_done && type == BS_NVME_TCP_ICREQ)
		return fail(err, BS_NVME_TCP_FES_PDU_SEQUENCE, 0,
			    "a second ICReq");
	if (hlen != want_hlen)
		return fail(err, BS_NVME_TCP_FES_INVALID_HEADER, OFF_HLEN,
			    "wrong HLEN for the PDU type");
	if (!digests_apply) {
		if (flags & (BS_NVME_TCP_F_HDGST | BS_NVME_TCP_F_DDGST))
			return fail(err, BS_NVME_TCP_FES_INVALID_HEADER,
				    OFF_FLAGS, "digest flag on ICReq/TermReq");
		if (type == BS_NVME_TCP_ICREQ &&
		    plen != BS_NVME_TCP_ICREQ_HLEN)
			return fail(err, BS_NVME_TCP_FES_INVALID_HEADER,
				    OFF_PLEN, "ICReq PLEN is not 128");
		if (type == BS_NVME_TCP_H2C_TERM &&
		    (plen < hlen || plen > BS_NVME_TCP_TERM_PLEN_MAX))
			return fail(err, BS_NVME_TCP_FES_INVALID_HEADER,
				    OFF_PLEN, "TermReq PLEN out of range");
		out->type = type;
		out->flags = flags;
		out->hlen = out->hdr_len = hlen;
		out->plen = plen;
		if (plen > hlen) {
			out->data_off = hlen;
			out->data_len = plen - hlen;
		}
		return 0;
	}
	/* CapsuleCmd, H2CData: the header digest exactly as negotiated */
	if (!!(flags & BS_NVME_TCP_F_HDGST) != p->hdgst)
		return fail(err, BS_NVME_TCP_FES_INVALID_HEADER, OFF_FLAGS,
			    "HDGSTF differs from the negotiated digest");
	hdr_len = hlen + (p->hdgst ? BS_NVME_TCP_DIGEST_LEN : 0);
	if (plen < hdr_len)
		return fail(err, BS_NVME_TCP_FES_INVALID_HEADER, OFF_PLEN,
			    "PLEN shorter than the header");
	out->type = type;
	out->flags = flags;
	out->hlen = hlen;
	out->hdr_len = hdr_len;
	out->plen = plen;
	out->hdgst = p->hdgst;
	if (plen == hdr_len) {
		/* no data: no data digest, PDO 0 */
		if (flags & BS_NVME_TCP_F_DDGST)
			return fail(err, BS_NVME_TCP_FES_INVALID_HEADER,
				    OFF_FLAGS, "DDGSTF on a PDU without data");
		/* PDO is ignored without data (some hosts set it to HLEN) */
		if (type == BS_NVME_TCP_H2C_DATA)
			return fail(err, BS_NVME_TCP_FES_INVALID_HEADER,
				    OFF_PLEN, "H2CData without data");
		return 0;
	}
	if (!!(flags & BS_NVME_TCP_F_DDGST) != p->ddgst)
		return fail(err, BS_NVME_TCP_FES_INVALID_HEADER, OFF_FLAGS,
			    "DDGSTF differs from the negotiated digest");
	dd = p->ddgst ? BS_NVME_TCP_DIGEST_LEN : 0;
	if (pdo < hdr_len || (pdo & 3))
		return fail(err, BS_NVME_TCP_FES_INVALID_HEADER, OFF_PDO,
			    "PDO inside the header or unaligned");
	if ((uint64_t)pdo + dd >= plen)
		return fail(err, BS_NVME_TCP_FES_INVALID_HEADER, OFF_PDO,
			    "PDO at or past the end of the PDU");
	rest = plen - pdo - dd;
	if (rest > p->max_data)
		return fail(err, BS_NVME_TCP_FES_R2T_LIMIT, OFF_PLEN,
			    "more data in one PDU than the limit");
	out->ddgst = p->ddgst;
	out->data_off = pdo;
	out->data_len = rest;
	return 0;
}

static size_t finish(uint8_t *buf, uint8_t type, uint8_t flags, uint8_t hlen,
		     bool hdgst, uint32_t data_len, bool ddgst)
{
	size_t hdr_len = hlen + (hdgst ? BS_NVME_TCP_DIGEST_LEN : 0);
	uint32_t plen = (uint32_t)hdr_len;

	if (hdgst)
		flags |= BS_NVME_TCP_F_HDGST;
	if (data_len) {
		if (ddgst)
			flags |= BS_NVME_TCP_F_DDGST;
		plen += data_len + (ddgst ? BS_NVME_TCP_DIGEST_LEN : 0);
	}
	buf[0] = type;
	buf[1] = flags;
	buf[2] = hlen;
	buf[3] = data_len ? (uint8_t)hdr_len : 0;
	bs_nvme_put32(buf + 4, plen);
	if (hdgst)
		nvmf_pdu_put_hdgst(buf, hlen);
	return hdr_len;
}

size_t nvmf_pdu_icresp(uint8_t *buf, uint8_t dgst, uint32_t maxh2cdata)
{
	memset(buf, 0, BS_NVME_TCP_ICRESP_HLEN);
	bs_nvme_put16(buf + 8, BS_NVME_TCP_PFV_1_0);
	buf[10] = 0;		/* CPDA: no alignment */
	buf[11] = dgst;
	bs_nvme_put32(buf + 12, maxh2cdata);
	return finish(buf, BS_NVME_TCP_ICRESP, 0, BS_NVME_TCP_ICRESP_HLEN,
		      false, 0, false);
}

size_t nvmf_pdu_rsp(uint8_t *buf, bool hdgst, const struct bs_nvme_cqe *cqe)
{
	memcpy(buf + 8, cqe, sizeof(*cqe));
	return finish(buf, BS_NVME_TCP_RSP, 0, BS_NVME_TCP_RSP_HLEN, hdgst, 0,
		      false);
}

size_t nvmf_pdu_c2h_data(uint8_t *buf, bool hdgst, bool ddgst,
			 uint16_t cid, uint32_t off, uint32_t len, bool last,
			 bool success)
{
	uint8_t flags = 0;

	memset(buf, 0, BS_NVME_TCP_DATA_HLEN);
	bs_nvme_put16(buf + 8, cid);
	bs_nvme_put32(buf + 12, off);
	bs_nvme_put32(buf + 16, len);
	if (last)
		flags |= BS_NVME_TCP_F_DATA_LAST;
	if (success)
		flags |= BS_NVME_TCP_F_DATA_SUCCESS | BS_NVME_TCP_F_DATA_LAST;
	return finish(buf, BS_NVME_TCP_C2H_DATA, flags, BS_NVME_TCP_DATA_HLEN,
		      hdgst, len, ddgst);
}

size_t nvmf_pdu_r2t(uint8_t *buf, bool hdgst, uint16_t cid, uint16_t ttag,
		    uint32_t off, uint32_t len)
{
	memset(buf, 0, BS_NVME_TCP_R2T_HLEN);
	bs_nvme_put16(buf + 8, cid);
	bs_nvme_put16(buf + 10, ttag);
	bs_nvme_put32(buf + 12, off);
	bs_nvme_put32(buf + 16, len);
	return finish(buf, BS_NVME_TCP_R2T, 0, BS_NVME_TCP_R2T_HLEN, hdgst, 0,
		      false);
}

size_t nvmf_pdu_term(uint8_t *buf, uint16_t fes, uint32_t fei,
		     const uint8_t *bad, size_t bad_len)
{
	if (bad_len > BS_NVME_TCP_TERM_DATA_MAX)
		bad_len = BS_NVME_TCP_TERM_DATA_MAX;
	memset(buf, 0, BS_NVME_TCP_TERM_HLEN);
	bs_nvme_put16(buf + 8, fes);
	bs_nvme_put32(buf + 10, fei);
	if (bad_len)
		memcpy(buf + BS_NVME_TCP_TERM_HLEN, bad, bad_len);
	buf[0] = BS_NVME_TCP_C2H_TERM;
	buf[1] = 0;
	buf[2] = BS_NVME_TCP_TERM_HLEN;
	buf[3] = bad_len ? BS_NVME_TCP_TERM_HLEN : 0;
	bs_nvme_put32(buf + 4, (uint32_t)(BS_NVME_TCP_TERM_HLEN + bad_len));
	return BS_NVME_TCP_TERM_HLEN + bad_len;
}
