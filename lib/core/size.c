/* SPDX-License-Identifier: MIT */
/* Sizes as users type them ("64K", "1G") and as they read them. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <blkstack/bdev.h>

int bs_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned shift = 0;
	char *end;

	if (!s)
		return -EINVAL;
	while (isspace((unsigned char)*s))
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno == ERANGE)
		return -ERANGE;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; end++; break;
	case 'M': shift = 20; end++; break;
	case 'G': shift = 30; end++; break;
	case 'T': shift = 40; end++; break;
	case 'P': shift = 50; end++; break;
	case 'E': shift = 60; end++; break;
	default: break;
	}
	/* accept KiB / KB / B suffix spellings */
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

const char *bs_fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB",
					     "PiB", "EiB" };
	unsigned u = 0;
	double v = (double)bytes;

	/*
	 * Step up while the value would print as 1024 or more once rounded
	 * to one decimal (1023.96 GiB reads "1.0 TiB", never "1024.0 GiB"),
	 * so one size always reads the same wherever it is printed.
	 */
	while (v >= 1023.95 && u < 6) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else if (!(bytes & ((1ull << (10 * u)) - 1)))
		/* a whole number of units (exact: no double rounding) */
		snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}
