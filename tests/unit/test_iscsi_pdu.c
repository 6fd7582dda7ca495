/* SPDX-License-Identifier: MIT */
/*
 * iSCSI PDU framing: the length of a PDU on the wire with padding and
 * digests, and the CDB out of a SCSI Command with its extended-CDB AHS
 * (every malformed AHS refused). The CRC32C itself: test_crc32c.
 */
#include <errno.h>
#include <string.h>

#include "export/iscsi/pdu.h"
#include "helpers/th.h"

static void rest_len_padding_and_digests(void **state)
{
	uint8_t bhs[ISCSI_BHS_LEN] = { 0 };

	(void)state;
	assert_int_equal(iscsi_pdu_rest_len(bhs, false, false), 0);
	/* no data: no data digest either */
	assert_int_equal(iscsi_pdu_rest_len(bhs, true, true), 4);
	iscsi_put24(bhs + 5, 5);	/* 5 bytes + 3 padding */
	assert_int_equal(iscsi_pdu_rest_len(bhs, false, false), 8);
	assert_int_equal(iscsi_pdu_rest_len(bhs, true, true), 16);
	bhs[4] = 2;			/* 8 bytes of AHS */
	assert_int_equal(iscsi_pdu_rest_len(bhs, false, true), 20);
	iscsi_put24(bhs + 5, ISCSI_DSL_MAX);
	assert_int_equal(iscsi_dsl(bhs), 0xffffff);
	assert_int_equal(iscsi_pad4(0xffffff), 1);
}

static void serial_numbers(void **state)
{
	(void)state;
	assert_true(iscsi_sn_lt(1, 2));
	assert_false(iscsi_sn_lt(2, 2));
	assert_true(iscsi_sn_lt(0xfffffff0u, 5));	/* wraps */
	assert_false(iscsi_sn_lt(5, 0xfffffff0u));
	assert_true(iscsi_sn_le(7, 7));
}

static void cdb_plain_and_extended(void **state)
{
	uint8_t bhs[ISCSI_BHS_LEN] = { 0 }, ahs[24] = { 0 }, cdb[32];
	bool bidi;
	int i;

	(void)state;
	for (i = 0; i < 16; i++)
		bhs[32 + i] = (uint8_t)(0x10 + i);
	assert_int_equal(iscsi_pdu_cdb(bhs, NULL, 0, cdb, sizeof(cdb), &bidi),
			 16);
	assert_memory_equal(cdb, bhs + 32, 16);
	assert_false(bidi);

	/* a 32-byte CDB: AHSLength 17 (reserved byte + 16), padded to 20 */
	iscsi_put16(ahs, 17);
	ahs[2] = ISCSI_AHS_EXTENDED_CDB;
	for (i = 0; i < 16; i++)
		ahs[4 + i] = (uint8_t)(0x80 + i);
	assert_int_equal(iscsi_pdu_cdb(bhs, ahs, 20, cdb, sizeof(cdb), &bidi),
			 32);
	assert_int_equal(cdb[16], 0x80);
	assert_int_equal(cdb[31], 0x8f);

	/* the AHS runs past what TotalAHSLength gives */
	assert_int_equal(iscsi_pdu_cdb(bhs, ahs, 16, cdb, sizeof(cdb), &bidi),
			 -EINVAL);
	/* a CDB longer than the caller's room */
	assert_int_equal(iscsi_pdu_cdb(bhs, ahs, 20, cdb, 24, &bidi), -EINVAL);
	/* an unknown AHS type */
	ahs[2] = 0x3f;
	assert_int_equal(iscsi_pdu_cdb(bhs, ahs, 20, cdb, sizeof(cdb), &bidi),
			 -EINVAL);
	/* fewer than 4 bytes */
	assert_int_equal(iscsi_pdu_cdb(bhs, ahs, 3, cdb, sizeof(cdb), &bidi),
			 -EINVAL);
	/* bidirectional read length AHS: 5 = reserved + 4 bytes */
	memset(ahs, 0, sizeof(ahs));
	iscsi_put16(ahs, 5);
	ahs[2] = ISCSI_AHS_BIDI_READ_LEN;
	assert_int_equal(iscsi_pdu_cdb(bhs, ahs, 8, cdb, sizeof(cdb), &bidi),
			 16);
	assert_true(bidi);
	/* two extended CDBs */
	memset(ahs, 0, sizeof(ahs));
	iscsi_put16(ahs, 5);
	ahs[2] = ISCSI_AHS_EXTENDED_CDB;
	iscsi_put16(ahs + 8, 5);
	ahs[10] = ISCSI_AHS_EXTENDED_CDB;
	assert_int_equal(iscsi_pdu_cdb(bhs, ahs, 16, cdb, sizeof(cdb), &bidi),
			 -EINVAL);
}

static void bhs_init_and_names(void **state)
{
	uint8_t bhs[ISCSI_BHS_LEN];
	char buf[24];

	(void)state;
	memset(bhs, 0xee, sizeof(bhs));
	iscsi_bhs_init(bhs, ISCSI_OP_NOP_IN, 0x123456, 0xdeadbeef);
	assert_int_equal(bhs[0], ISCSI_OP_NOP_IN);
	assert_int_equal(bhs[1], ISCSI_FLAG_FINAL);
	assert_int_equal(iscsi_dsl(bhs), 0x123456);
	assert_int_equal(iscsi_itt(bhs), 0xdeadbeef);
	assert_int_equal(bhs[47], 0);
	assert_string_equal(iscsi_opcode_name(ISCSI_OP_SCSI_CMD, buf,
					      sizeof(buf)), "SCSI Command");
	assert_string_equal(iscsi_opcode_name(0x1c, buf, sizeof(buf)),
			    "opcode 0x1c");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rest_len_padding_and_digests),
		cmocka_unit_test(serial_numbers),
		cmocka_unit_test(cdb_plain_and_extended),
		cmocka_unit_test(bhs_init_and_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
