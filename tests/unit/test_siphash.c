/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 (lib/core/siphash.c), the keyed hash of the NFS server's
 * tables: the reference vectors of the SipHash authors (key 00 01 .. 0f,
 * messages 00 01 .. of each length), and another key giving another
 * hash.
 */
#include <string.h>

#include "core/siphash.h"
#include "helpers/th.h"

static void reference_vectors(void **state)
{
	/* (length, hash) of the reference implementation's vectors */
	static const struct {
		size_t len;
		uint64_t want;
	} v[] = {
		{ 0, 0x726fdb47dd0e0e31ull },
		{ 1, 0x74f839c593dc67fdull },
		{ 7, 0xab0200f58b01d137ull },
		{ 8, 0x93f5f5799a932462ull },
		{ 15, 0xa129ca6149be45e5ull },
		{ 16, 0x3f2acc7f57c29bdbull },
		{ 63, 0x958a324ceb064572ull },
	};
	const uint64_t key[2] = { 0x0706050403020100ull,
				  0x0f0e0d0c0b0a0908ull };
	uint8_t msg[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		assert_true(bs_siphash(key, msg, v[i].len) == v[i].want);
}

static void keyed(void **state)
{
	const uint64_t k1[2] = { 1, 2 }, k2[2] = { 1, 3 };
	const char *s = "client owner";

	(void)state;
	assert_true(bs_siphash(k1, s, strlen(s)) ==
		    bs_siphash(k1, s, strlen(s)));
	assert_true(bs_siphash(k1, s, strlen(s)) !=
		    bs_siphash(k2, s, strlen(s)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reference_vectors),
		cmocka_unit_test(keyed),
	};

	return cmocka_run_group_tests_name("siphash", tests, NULL, NULL);
}
