/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 (Aumasson and Bernstein, "SipHash: a fast short-input
 * PRF", 2012): a 64-bit keyed hash for hash tables whose keys come from
 * the network, so that nobody who does not know the key can make many
 * keys fall into one bucket (not a public API).
 */
#ifndef BLKSTACK_CORE_SIPHASH_H
#define BLKSTACK_CORE_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash of @len bytes at @buf under the 128-bit key @key (k0, k1:
 * the key's bytes 0-7 and 8-15 read little-endian). */
uint64_t bs_siphash(const uint64_t key[2], const void *buf, size_t len);

#endif
