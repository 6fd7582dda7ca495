/* SPDX-License-Identifier: MIT */
/*
 * NVMe/TCP PDU framing of the target: the common-header checks (each
 * malformed header refused with the FES and FEI a C2HTermReq carries),
 * where data and digests lie, header/data digests (CRC32C), and the PDUs
 * the controller builds (ICResp, CapsuleResp, C2HData with SUCCESS, R2T,
 * C2HTermReq) byte by byte.
 */
#include <errno.h>
#include <string.h>

#include "export/nvmf/pdu.h"
#include "helpers/th.h"

static void put_ch(uint8_t *b, uint8_t type, uint8_t flags, uint8_t hlen,
		   uint8_t pdo, uint32_t plen)
{
	b[0] = type;
	b[1] = flags;
	b[2] = hlen;
	b[3] = pdo;
	bs_nvme_put32(b + 4, plen);
}

static const struct nvmf_pdu_params before_ic = { .max_data = 8192 };
static const struct nvmf_pdu_params plain = { .ic_done = true,
					      .max_data = 8192 };
static const struct nvmf_pdu_params digests = { .ic_done = true,
						.hdgst = true, .ddgst = true,
						.max_data = 8192 };

static void expect_err(const uint8_t *ch, const struct nvmf_pdu_params *p,
		       uint16_t fes, uint32_t fei)
{
	struct nvmf_pdu_layout l;
	struct nvmf_pdu_err e;

	assert_int_equal(nvmf_pdu_parse(ch, p, &l, &e), -EPROTO);
	assert_int_equal(e.fes, fes);
	assert_int_equal(e.fei, fei);
	assert_non_null(e.why);
}

static void icreq_and_sequence(void **state)
{
	uint8_t ch[8];
	struct nvmf_pdu_layout l;
	struct nvmf_pdu_err e;

	(void)state;
	put_ch(ch, BS_NVME_TCP_ICREQ, 0, 128, 0, 128);
	assert_int_equal(nvmf_pdu_parse(ch, &before_ic, &l, &e), 0);
	assert_int_equal(l.hdr_len, 128);
	assert_int_equal(l.data_len, 0);
	/* a second ICReq, a command before ICReq */
	expect_err(ch, &plain, BS_NVME_TCP_FES_PDU_SEQUENCE, 0);
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 0, 72);
	expect_err(ch, &before_ic, BS_NVME_TCP_FES_PDU_SEQUENCE, 0);
	/* ICReq with a wrong PLEN, HLEN, a digest flag */
	put_ch(ch, BS_NVME_TCP_ICREQ, 0, 128, 0, 132);
	expect_err(ch, &before_ic, BS_NVME_TCP_FES_INVALID_HEADER, 4);
	put_ch(ch, BS_NVME_TCP_ICREQ, 0, 120, 0, 128);
	expect_err(ch, &before_ic, BS_NVME_TCP_FES_INVALID_HEADER, 2);
	put_ch(ch, BS_NVME_TCP_ICREQ, BS_NVME_TCP_F_HDGST, 128, 0, 128);
	expect_err(ch, &before_ic, BS_NVME_TCP_FES_INVALID_HEADER, 1);
	/* types only the controller sends, unknown types */
	put_ch(ch, BS_NVME_TCP_C2H_DATA, 0, 24, 0, 24);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 0);
	put_ch(ch, BS_NVME_TCP_RSP, 0, 24, 0, 24);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 0);
	put_ch(ch, 0x42, 0, 24, 0, 24);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 0);
	/* H2CTermReq is fine at any time, with up to 128 bytes */
	put_ch(ch, BS_NVME_TCP_H2C_TERM, 0, 24, 0, 24 + 128);
	assert_int_equal(nvmf_pdu_parse(ch, &before_ic, &l, &e), 0);
	assert_int_equal(l.data_len, 128);
	put_ch(ch, BS_NVME_TCP_H2C_TERM, 0, 24, 0, 24 + 129);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 4);
}

static void capsule_layout(void **state)
{
	uint8_t ch[8];
	struct nvmf_pdu_layout l;
	struct nvmf_pdu_err e;

	(void)state;
	/* no data */
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 0, 72);
	assert_int_equal(nvmf_pdu_parse(ch, &plain, &l, &e), 0);
	assert_int_equal(l.hdr_len, 72);
	assert_int_equal(l.data_len, 0);
	/* PDO without data is ignored (pynvmeof sets it to HLEN) */
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 72, 72);
	assert_int_equal(nvmf_pdu_parse(ch, &plain, &l, &e), 0);
	assert_int_equal(l.data_len, 0);
	/* 4 KiB in-capsule data */
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 72, 72 + 4096);
	assert_int_equal(nvmf_pdu_parse(ch, &plain, &l, &e), 0);
	assert_int_equal(l.data_off, 72);
	assert_int_equal(l.data_len, 4096);
	/* with both digests */
	put_ch(ch, BS_NVME_TCP_CMD, BS_NVME_TCP_F_HDGST | BS_NVME_TCP_F_DDGST,
	       72, 76, 76 + 4096 + 4);
	assert_int_equal(nvmf_pdu_parse(ch, &digests, &l, &e), 0);
	assert_int_equal(l.hdr_len, 76);
	assert_true(l.hdgst && l.ddgst);
	assert_int_equal(l.data_off, 76);
	assert_int_equal(l.data_len, 4096);
	/* header digest only, no data: no DDGSTF needed */
	put_ch(ch, BS_NVME_TCP_CMD, BS_NVME_TCP_F_HDGST, 72, 0, 76);
	assert_int_equal(nvmf_pdu_parse(ch, &digests, &l, &e), 0);
	assert_int_equal(l.data_len, 0);
	/* data past a padded PDO */
	put_ch(ch, BS_NVME_TCP_H2C_DATA, 0, 24, 32, 32 + 512);
	assert_int_equal(nvmf_pdu_parse(ch, &plain, &l, &e), 0);
	assert_int_equal(l.data_off, 32);
	assert_int_equal(l.data_len, 512);
}

static void bad_lengths_and_flags(void **state)
{
	uint8_t ch[8];

	(void)state;
	/* HLEN of a capsule wrong */
	put_ch(ch, BS_NVME_TCP_CMD, 0, 64, 0, 72);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 2);
	/* PLEN shorter than the header */
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 0, 40);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 4);
	/* digests not as negotiated */
	put_ch(ch, BS_NVME_TCP_CMD, BS_NVME_TCP_F_HDGST, 72, 0, 76);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 1);
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 0, 72);
	expect_err(ch, &digests, BS_NVME_TCP_FES_INVALID_HEADER, 1);
	put_ch(ch, BS_NVME_TCP_CMD, BS_NVME_TCP_F_HDGST, 72, 76, 76 + 512);
	expect_err(ch, &digests, BS_NVME_TCP_FES_INVALID_HEADER, 1);
	/* PDO inside the header, unaligned, past the end */
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 64, 72 + 512);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 3);
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 74, 74 + 512);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 3);
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 200, 150);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 3);
	/* H2CData without data, too much data in one PDU */
	put_ch(ch, BS_NVME_TCP_H2C_DATA, 0, 24, 0, 24);
	expect_err(ch, &plain, BS_NVME_TCP_FES_INVALID_HEADER, 4);
	put_ch(ch, BS_NVME_TCP_H2C_DATA, 0, 24, 24, 24 + 8193);
	expect_err(ch, &plain, BS_NVME_TCP_FES_R2T_LIMIT, 4);
	/* a huge PLEN does not wrap */
	put_ch(ch, BS_NVME_TCP_CMD, 0, 72, 72, 0xffffffffu);
	expect_err(ch, &plain, BS_NVME_TCP_FES_R2T_LIMIT, 4);
}

static void digests_crc32c(void **state)
{
	uint8_t hdr[128];

	(void)state;
	/* the CRC32C check value */
	assert_int_equal(nvmf_crc32c("123456789", 9), 0xe3069283);
	memset(hdr, 0x5a, sizeof(hdr));
	nvmf_pdu_put_hdgst(hdr, 72);
	assert_int_equal(bs_nvme_get32(hdr + 72), nvmf_crc32c(hdr, 72));
	assert_true(nvmf_pdu_hdgst_ok(hdr, 72));
	hdr[10] ^= 1;
	assert_false(nvmf_pdu_hdgst_ok(hdr, 72));
}

static void builders(void **state)
{
	uint8_t b[256], bad[150];
	struct bs_nvme_cqe cqe;
	size_t n;

	(void)state;
	n = nvmf_pdu_icresp(b, BS_NVME_TCP_HDGST_ENABLE, 131072);
	assert_int_equal(n, 128);
	assert_int_equal(b[0], BS_NVME_TCP_ICRESP);
	assert_int_equal(b[2], 128);
	assert_int_equal(bs_nvme_get32(b + 4), 128);
	assert_int_equal(bs_nvme_get16(b + 8), 0);
	assert_int_equal(b[10], 0);
	assert_int_equal(b[11], BS_NVME_TCP_HDGST_ENABLE);
	assert_int_equal(bs_nvme_get32(b + 12), 131072);

	memset(&cqe, 0, sizeof(cqe));
	cqe.cid = bs_nvme_cpu_to_le16(0x1234);
	cqe.status = bs_nvme_cpu_to_le16(
		bs_nvme_cqe_status(BS_NVME_SC_LBA_RANGE | BS_NVME_SF_DNR));
	n = nvmf_pdu_rsp(b, true, &cqe);
	assert_int_equal(n, 28);
	assert_int_equal(b[0], BS_NVME_TCP_RSP);
	assert_int_equal(b[1], BS_NVME_TCP_F_HDGST);
	assert_int_equal(b[3], 0);
	assert_int_equal(bs_nvme_get32(b + 4), 28);
	assert_int_equal(bs_nvme_get16(b + 8 + 12), 0x1234);
	assert_int_equal(bs_nvme_get16(b + 8 + 14), (0x4080u << 1) & 0xffff);
	assert_true(nvmf_pdu_hdgst_ok(b, 24));

	n = nvmf_pdu_c2h_data(b, false, true, 7, 4096, 8192, true, true);
	assert_int_equal(n, 24);
	assert_int_equal(b[0], BS_NVME_TCP_C2H_DATA);
	assert_int_equal(b[1], BS_NVME_TCP_F_DDGST | BS_NVME_TCP_F_DATA_LAST |
				       BS_NVME_TCP_F_DATA_SUCCESS);
	assert_int_equal(b[3], 24);
	assert_int_equal(bs_nvme_get32(b + 4), 24 + 8192 + 4);
	assert_int_equal(bs_nvme_get16(b + 8), 7);
	assert_int_equal(bs_nvme_get32(b + 12), 4096);
	assert_int_equal(bs_nvme_get32(b + 16), 8192);

	n = nvmf_pdu_r2t(b, true, 9, 3, 8192, 65536);
	assert_int_equal(n, 28);
	assert_int_equal(b[0], BS_NVME_TCP_R2T);
	assert_int_equal(bs_nvme_get32(b + 4), 28);
	assert_int_equal(bs_nvme_get16(b + 8), 9);
	assert_int_equal(bs_nvme_get16(b + 10), 3);
	assert_int_equal(bs_nvme_get32(b + 12), 8192);
	assert_int_equal(bs_nvme_get32(b + 16), 65536);

	memset(bad, 0xee, sizeof(bad));
	n = nvmf_pdu_term(b, BS_NVME_TCP_FES_HDGST, 0xdeadbeef, bad,
			  sizeof(bad));
	assert_int_equal(n, 24 + 128);
	assert_int_equal(b[0], BS_NVME_TCP_C2H_TERM);
	assert_int_equal(b[2], 24);
	assert_int_equal(bs_nvme_get32(b + 4), 152);
	assert_int_equal(bs_nvme_get16(b + 8), BS_NVME_TCP_FES_HDGST);
	assert_int_equal(bs_nvme_get32(b + 10), 0xdeadbeef);
	/* the first 128 bytes of the offending header follow */
	assert_memory_equal(b + 24, bad, 128);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(icreq_and_sequence),
		cmocka_unit_test(capsule_layout),
		cmocka_unit_test(bad_lengths_and_flags),
		cmocka_unit_test(digests_crc32c),
		cmocka_unit_test(builders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
