/* SPDX-License-Identifier: MIT */
/*
 * CRC32C for the iSCSI and NVMe/TCP digests. The table is built once from
 * the reflected polynomial; on x86-64 with SSE4.2 (cpuid checked once) the
 * crc32 instruction does 8 bytes a step instead.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "core/crc32c.h"

#define CRC32C_POLY 0x82f63b78u

static uint32_t table[256];
static bool have_sse42;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
	unsigned i, k;

	for (i = 0; i < 256; i++) {
		uint32_t c = i;

		for (k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
		table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

uint32_t bs_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init);
#if defined(__x86_64__)
	if (have_sse42)
		return crc_sse42(crc, buf, len);
#endif
	return crc_table(crc, buf, len);
}

uint32_t bs_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&once, init);
	return crc_table(crc, buf, len);
}

uint32_t bs_crc32c(const void *buf, size_t len)
{
	return ~bs_crc32c_update(~0u, buf, len);
}
