/* SPDX-License-Identifier: MIT */
/* Sizes as users type them ("64K", "1G") and as they read them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <blkstack/bdev.h>

/*
 * A size is a decimal number of bytes, optionally followed by one binary
 * unit letter K M G T P E (either case; powers of 1024), optionally spelled
 * with "iB" (64KiB). Nothing else: no blanks, no sign, no octal ("010" is
 * ten) and no hex, so what the user reads is what the device gets.
 */
int bs_parse_size(const char *s, uint64_t *out)
{
	static const char units[] = "KMGTPE";
	uint64_t v = 0;
	unsigned shift = 0;
	bool big = false;
	const char *p = s;

	if (!s || *s < '0' || *s > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			big = true;	/* keep reading: "99...9x" is not a size */
		else
			v = v * 10 + d;
	}
	if (*p) {
		char u = *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
		unsigned i;

		for (i = 0; units[i] && units[i] != u; i++)
			;
		if (!units[i])
			return -EINVAL;
		shift = 10 * (i + 1);
		p++;
		if (p[0] == 'i' && p[1] == 'B')
			p += 2;
		if (*p)
			return -EINVAL;
	}
	if (big || v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

const char *bs_size_strerror(int err)
{
	if (err == -ERANGE)
		return "too large (the largest size is 16E - 1 bytes)";
	return "not a size (a decimal number of bytes, or with a unit "
	       "K M G T P E: 4096, 64K, 1G)";
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
