/* SPDX-License-Identifier: MIT */
/*
 * CHAP for iSCSI login (RFC 7143 12.1.3, RFC 1994): MD5 over
 * identifier || secret || challenge, values written as 0x hex or 0b
 * base64 (not a public API).
 */
#ifndef BLKSTACK_ISCSI_CHAP_H
#define BLKSTACK_ISCSI_CHAP_H

#include <stddef.h>
#include <stdint.h>

#define ISCSI_CHAP_MD5 5
#define ISCSI_CHAP_DIGEST_LEN 16
#define ISCSI_CHAP_CHALLENGE_LEN 16
/* Longest binary value we decode (CHAP_C from an initiator). */
#define ISCSI_CHAP_BIN_MAX 1024

/* MD5(id || secret || challenge) into @out (16 bytes). */
void iscsi_chap_response(uint8_t id, const char *secret, const uint8_t *chal,
			 size_t chal_len, uint8_t *out);
/*
 * Decode a CHAP binary value: "0x" + hex digits (an odd count has an
 * implied leading 0) or "0b" + base64. Returns the byte count, or
 * -EINVAL (bad format, empty) / -E2BIG (over @max).
 */
int iscsi_chap_decode(const char *v, uint8_t *out, size_t max);
/* "0x" + hex of @len bytes into @buf (at least 2 + 2 * len + 1). */
void iscsi_chap_hex(const uint8_t *bin, size_t len, char *buf);

#endif
