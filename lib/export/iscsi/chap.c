/* SPDX-License-Identifier: MIT */
/*
 * CHAP values and the MD5 response; MD5 itself comes from nettle.
 */
#include <errno.h>
#include <string.h>

#include <nettle/base64.h>
#include <nettle/md5.h>

#include "export/iscsi/chap.h"

void iscsi_chap_response(uint8_t id, const char *secret, const uint8_t *chal,
			 size_t chal_len, uint8_t *out)
{
	struct md5_ctx ctx;

	md5_init(&ctx);
	md5_update(&ctx, 1, &id);
	md5_update(&ctx, strlen(secret), (const uint8_t *)secret);
	md5_update(&ctx, chal_len, chal);
	md5_digest(&ctx, MD5_DIGEST_SIZE, out);
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static int decode_hex(const char *p, uint8_t *out, size_t max)
{
	size_t n = strlen(p), i = 0, o = 0;

	if (!n)
		return -EINVAL;
	if ((n + 1) / 2 > max)
		return -E2BIG;
	if (n & 1) {
		int v = hexval(p[0]);

		if (v < 0)
			return -EINVAL;
		out[o++] = (uint8_t)v;
		i = 1;
	}
	for (; i < n; i += 2) {
		int hi = hexval(p[i]), lo = hexval(p[i + 1]);

		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[o++] = (uint8_t)(hi << 4 | lo);
	}
	return (int)o;
}

static int decode_b64(const char *p, uint8_t *out, size_t max)
{
	struct base64_decode_ctx ctx;
	size_t n = strlen(p), len = BASE64_DECODE_LENGTH(n);
	uint8_t tmp[BASE64_DECODE_LENGTH(ISCSI_CHAP_BIN_MAX * 2) + 8];

	if (!n)
		return -EINVAL;
	if (len > sizeof(tmp))
		return -E2BIG;
	base64_decode_init(&ctx);
	if (!base64_decode_update(&ctx, &len, tmp, n, p) ||
	    !base64_decode_final(&ctx))
		return -EINVAL;
	if (len > max)
		return -E2BIG;
	if (!len)
		return -EINVAL;
	memcpy(out, tmp, len);
	return (int)len;
}

int iscsi_chap_decode(const char *v, uint8_t *out, size_t max)
{
	if (v[0] == '0' && (v[1] == 'x' || v[1] == 'X'))
		return decode_hex(v + 2, out, max);
	if (v[0] == '0' && (v[1] == 'b' || v[1] == 'B'))
		return decode_b64(v + 2, out, max);
	return -EINVAL;
}

void iscsi_chap_hex(const uint8_t *bin, size_t len, char *buf)
{
	static const char digits[] = "0123456789abcdef";
	size_t i;

	buf[0] = '0';
	buf[1] = 'x';
	for (i = 0; i < len; i++) {
		buf[2 + 2 * i] = digits[bin[i] >> 4];
		buf[3 + 2 * i] = digits[bin[i] & 15];
	}
	buf[2 + 2 * len] = '\0';
}
