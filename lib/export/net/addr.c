/* SPDX-License-Identifier: MIT */
/*
 * Listen addresses: "IPV4:PORT" and "[IPV6]:PORT", numeric only, so what
 * a config says is exactly what is bound (no resolver, no surprises). The
 * port must be 1..65535 in decimal ("99999" used to wrap to 34463); an
 * empty host used to mean every address and is refused: every address
 * must be asked for by name (0.0.0.0 or [::]), and the caller warns then.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/net.h>

static int port_of(const char *p, unsigned *out, char *why, size_t whylen)
{
	unsigned long v = 0;
	const char *q;

	if (!*p) {
		snprintf(why, whylen, "no port after ':'");
		return -EINVAL;
	}
	for (q = p; *q; q++) {
		if (*q < '0' || *q > '9') {
			snprintf(why, whylen, "port '%s' is not a decimal "
				 "number", p);
			return -EINVAL;
		}
		if (v <= 65535)
			v = v * 10 + (unsigned long)(*q - '0');
	}
	if (v < 1 || v > 65535) {
		snprintf(why, whylen, "port %s is out of range (1-65535)", p);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

int bs_net_parse_addr(const char *s, struct bs_net_addr *out, char *why,
		      size_t whylen)
{
	char host[INET6_ADDRSTRLEN + 8];
	const char *port, *colon;
	unsigned pnum;
	size_t hlen;
	int err;

	memset(out, 0, sizeof(*out));
	if (*s == '[') {
		const char *end = strchr(s, ']');
		struct sockaddr_in6 *sa6 = (struct sockaddr_in6 *)&out->ss;

		if (!end || end[1] != ':') {
			snprintf(why, whylen, "give [IPV6]:PORT");
			return -EINVAL;
		}
		hlen = (size_t)(end - s - 1);
		port = end + 2;
		if (!hlen) {
			snprintf(why, whylen, "empty host: give [::1] for this "
				 "machine only, or [::] for every address");
			return -EINVAL;
		}
		if (hlen >= sizeof(host)) {
			snprintf(why, whylen, "not an IPv6 address");
			return -EINVAL;
		}
		memcpy(host, s + 1, hlen);
		host[hlen] = '\0';
		if (inet_pton(AF_INET6, host, &sa6->sin6_addr) != 1) {
			snprintf(why, whylen, "'%s' is not an IPv6 address",
				 host);
			return -EINVAL;
		}
		err = port_of(port, &pnum, why, whylen);
		if (err)
			return err;
		sa6->sin6_family = AF_INET6;
		sa6->sin6_port = htons((uint16_t)pnum);
		out->len = sizeof(*sa6);
		out->wildcard = IN6_IS_ADDR_UNSPECIFIED(&sa6->sin6_addr);
		return 0;
	}
	colon = strrchr(s, ':');
	if (!colon) {
		snprintf(why, whylen, "give HOST:PORT (127.0.0.1:10809, "
			 "[::1]:10809)");
		return -EINVAL;
	}
	if (colon == s) {
		snprintf(why, whylen, "empty host: give 127.0.0.1 for this "
			 "machine only, or 0.0.0.0 / [::] for every address");
		return -EINVAL;
	}
	if (memchr(s, ':', (size_t)(colon - s))) {
		snprintf(why, whylen, "an IPv6 address goes in brackets: "
			 "[::1]:10809");
		return -EINVAL;
	}
	hlen = (size_t)(colon - s);
	if (hlen >= sizeof(host)) {
		snprintf(why, whylen, "not an IPv4 address");
		return -EINVAL;
	}
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	{
		struct sockaddr_in *sa4 = (struct sockaddr_in *)&out->ss;

		if (inet_pton(AF_INET, host, &sa4->sin_addr) != 1) {
			snprintf(why, whylen, "'%s' is not an IPv4 address "
				 "(names are not resolved; IPv6 goes in "
				 "brackets)", host);
			return -EINVAL;
		}
		err = port_of(colon + 1, &pnum, why, whylen);
		if (err)
			return err;
		sa4->sin_family = AF_INET;
		sa4->sin_port = htons((uint16_t)pnum);
		out->len = sizeof(*sa4);
		out->wildcard = sa4->sin_addr.s_addr == htonl(INADDR_ANY);
	}
	return 0;
}

void bs_net_format_addr(const struct sockaddr *sa, socklen_t len, char *buf,
			size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
		snprintf(buf, size, "%s:%u", host, ntohs(a->sin_port));
	} else if (sa->sa_family == AF_INET6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
		snprintf(buf, size, "[%s]:%u", host, ntohs(a->sin6_port));
	} else {
		snprintf(buf, size, "?");
	}
}

int bs_net_parse_mode(const char *s, mode_t *out)
{
	unsigned v = 0;

	if (!*s || strlen(s) > 4)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '7')
			return -EINVAL;
		v = v * 8 + (unsigned)(*s - '0');
	}
	if (v > 0777)
		return -EINVAL;
	*out = (mode_t)v;
	return 0;
}

int bs_net_parse_ms(const char *s, unsigned *out)
{
	uint64_t whole = 0, frac = 0, scale = 1;
	bool digits = false, ms = false;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++, digits = true)
		if ((whole = whole * 10 + (uint64_t)(*p - '0')) > 86400000)
			return -EINVAL;
	if (*p == '.') {
		for (p++; *p >= '0' && *p <= '9'; p++, digits = true) {
			if (scale < 1000000) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				scale *= 10;
			}
		}
	}
	if (!digits)
		return -EINVAL;
	if (!strcmp(p, "ms"))
		ms = true;
	else if (*p && strcmp(p, "s"))
		return -EINVAL;
	if (ms) {
		if (frac || whole > 86400000)
			return -EINVAL;	/* no fractions of a millisecond */
		*out = (unsigned)whole;
		return 0;
	}
	if (whole > 86400)
		return -EINVAL;
	*out = (unsigned)(whole * 1000 + frac * 1000 / scale);
	return 0;
}
