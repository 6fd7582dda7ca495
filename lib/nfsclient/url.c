/* SPDX-License-Identifier: MIT */
/* nfs://HOST[:PORT]/PATH, with HOST a name, an IPv4 address or [IPv6]. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/nfsclient.h>

int bs_nfs_url_parse(const char *url, struct bs_nfs_url *u)
{
	const char *p, *host, *end, *slash;
	size_t hlen;

	memset(u, 0, sizeof(*u));
	u->port = BS_NFS_PORT;
	if (strncmp(url, "nfs://", 6))
		return bs_error(-EINVAL, "'%s': not an nfs:// URL", url);
	p = url + 6;
	slash = strchr(p, '/');
	end = slash ? slash : p + strlen(p);
	if (*p == '[') {
		host = p + 1;
		p = memchr(host, ']', (size_t)(end - host));
		if (!p)
			return bs_error(-EINVAL, "'%s': no ']' after the "
					"IPv6 address", url);
		hlen = (size_t)(p - host);
		p++;
	} else {
		host = p;
		p = memchr(host, ':', (size_t)(end - host));
		if (!p)
			p = end;
		hlen = (size_t)(p - host);
	}
	if (!hlen || hlen >= sizeof(u->host))
		return bs_error(-EINVAL, "'%s': no host", url);
	memcpy(u->host, host, hlen);
	if (*p == ':') {
		char *e;
		unsigned long port = strtoul(p + 1, &e, 10);

		if (e == p + 1 || e != end || !port || port > 65535)
			return bs_error(-EINVAL, "'%s': bad port", url);
		u->port = (uint16_t)port;
	} else if (p != end) {
		return bs_error(-EINVAL, "'%s': junk after the host", url);
	}
	if (slash) {
		while (*slash == '/')
			slash++;
		if (strlen(slash) >= sizeof(u->path))
			return bs_error(-ENAMETOOLONG, "'%s': path too long",
					url);
		strcpy(u->path, slash);
	}
	return 0;
}
