/* SPDX-License-Identifier: MIT */
/*
 * CRC32C (lib/core/crc32c.c), the digest of iSCSI and NVMe/TCP: the
 * examples of RFC 3720 appendix B.4 through both the instruction and the
 * table path, and a running CRC over any split equal to the whole.
 */
#include <string.h>

#include "core/crc32c.h"
#include "helpers/th.h"

static void crc_both(const uint8_t *buf, size_t len, uint32_t want)
{
	assert_int_equal(bs_crc32c(buf, len), want);
	assert_int_equal(~bs_crc32c_sw(~0u, buf, len), want);
}

static void crc32c_rfc3720_examples(void **state)
{
	/* an iSCSI READ command PDU, B.4 */
	static const uint8_t read_pdu[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
		0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};
	uint8_t buf[32];
	int i;

	(void)state;
	memset(buf, 0, sizeof(buf));
	crc_both(buf, 32, 0x8a9136aa);
	memset(buf, 0xff, sizeof(buf));
	crc_both(buf, 32, 0x62a8ab43);
	for (i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	crc_both(buf, 32, 0x46dd794e);
	for (i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	crc_both(buf, 32, 0x113fdb5c);
	crc_both(read_pdu, sizeof(read_pdu), 0xd9963a56);
	/* the usual check value */
	crc_both((const uint8_t *)"123456789", 9, 0xe3069283);
}

static void crc32c_incremental_equals_whole(void **state)
{
	uint8_t buf[1000];
	uint32_t crc;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7 + 3);
	/* every split, odd lengths and offsets (the 8-byte steps) */
	for (i = 0; i <= 17; i++) {
		crc = bs_crc32c_update(~0u, buf, i);
		crc = ~bs_crc32c_update(crc, buf + i, sizeof(buf) - i);
		assert_int_equal(crc, bs_crc32c(buf, sizeof(buf)));
	}
	assert_int_equal(bs_crc32c(buf + 1, 999),
			 ~bs_crc32c_sw(~0u, buf + 1, 999));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(crc32c_rfc3720_examples),
		cmocka_unit_test(crc32c_incremental_equals_whole),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
