/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 as the paper defines it: the state is four 64-bit words
 * started from the key and four constants; each 8-byte little-endian
 * word of the message goes in with two SipRounds, the last word also
 * carries the length's low byte in its top byte; four more rounds after
 * 0xff goes into v2, and the four words xored are the hash.
 */
#include <string.h>

#include "core/siphash.h"

static inline uint64_t rotl(uint64_t x, unsigned b)
{
	return x << b | x >> (64 - b);
}

static inline void sipround(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = rotl(v[1], 13) ^ v[0];
	v[0] = rotl(v[0], 32);
	v[2] += v[3];
	v[3] = rotl(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = rotl(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = rotl(v[1], 17) ^ v[2];
	v[2] = rotl(v[2], 32);
}

static inline void absorb(uint64_t v[4], uint64_t m)
{
	v[3] ^= m;
	sipround(v);
	sipround(v);
	v[0] ^= m;
}

static uint64_t le64(const uint8_t *p, size_t n)
{
	uint64_t m = 0;

	while (n--)
		m = m << 8 | p[n];
	return m;
}

uint64_t bs_siphash(const uint64_t key[2], const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t v[4] = {
		key[0] ^ 0x736f6d6570736575ull,	/* "somepseu" */
		key[1] ^ 0x646f72616e646f6dull,	/* "dorandom" */
		key[0] ^ 0x6c7967656e657261ull,	/* "lygenera" */
		key[1] ^ 0x7465646279746573ull,	/* "tedbytes" */
	};
	size_t left = len;

	for (; left >= 8; p += 8, left -= 8)
		absorb(v, le64(p, 8));
	absorb(v, le64(p, left) | (uint64_t)len << 56);
	v[2] ^= 0xff;
	sipround(v);
	sipround(v);
	sipround(v);
	sipround(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}
