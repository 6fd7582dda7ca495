/* SPDX-License-Identifier: MIT */
/*
 * The listener keys of a network export's config section, read the same
 * way for every protocol (bs_net_read_limits in net.h): range checks and
 * one error line naming FILE:LINE, the export and the key.
 */
#include <errno.h>
#include <stdio.h>

#include <blkstack/bdev.h>
#include <blkstack/net.h>
#include <blkstack/opts.h>

static int get_count(const char *name, struct bs_opts *opts, const char *key,
		     unsigned *out)
{
	const char *w = bs_opts_where(opts, key);
	uint32_t v;
	int err = bs_opts_get_u32(opts, key, &v);

	if (err)
		return err < 0 ? err : 0;	/* 1: absent, the default */
	if (v < 1 || v > BS_NET_CONNS_MAX)
		return bs_error(-EINVAL, "%s%sexport %s: %s %u: give 1 to %u",
				w, bs_sep(w), name, key, v, BS_NET_CONNS_MAX);
	*out = v;
	return 0;
}

static int get_ms(const char *name, struct bs_opts *opts, const char *key,
		  unsigned *out)
{
	const char *v = bs_opts_get(opts, key);
	const char *w = bs_opts_where(opts, key);

	if (v && bs_net_parse_ms(v, out))
		return bs_error(-EINVAL, "%s%sexport %s: %s '%s': give seconds "
				"(10, 2.5, 500ms; 0 = none), at most a day", w,
				bs_sep(w), name, key, v);
	return 0;
}

/* A socket buffer size: 0 (the kernel's autotuning) or 4K..64M. */
static int get_sockbuf(const char *name, struct bs_opts *opts,
		       const char *key, size_t *out)
{
	const char *w = bs_opts_where(opts, key);
	uint64_t v;
	int err = bs_opts_get_size(opts, key, &v);

	if (err)
		return err < 0 ? err : 0;
	if (v && (v < BS_NET_SNDBUF_MIN || v > BS_NET_SNDBUF_MAX))
		return bs_error(-EINVAL, "%s%sexport %s: %s %llu: give 0 (the "
				"kernel's autotuning) or 4K to 64M", w,
				bs_sep(w), name, key, (unsigned long long)v);
	*out = (size_t)v;
	return 0;
}

int bs_net_read_limits(const char *name, struct bs_opts *opts, unsigned keys,
		       struct bs_net_limits *l)
{
	const char *w;
	int err = 0;

	if (keys & BS_NET_KEY_MAX_CONNS)
		err = get_count(name, opts, "max_connections", &l->max_conns);
	if (!err && (keys & BS_NET_KEY_MAX_PER_PEER))
		err = get_count(name, opts, "max_connections_per_peer",
				&l->max_per_peer);
	if (!err && (keys & BS_NET_KEY_HANDSHAKE))
		err = get_ms(name, opts, "handshake_timeout", &l->handshake_ms);
	if (!err && (keys & BS_NET_KEY_IDLE))
		err = get_ms(name, opts, "idle_timeout", &l->idle_ms);
	if (!err && (keys & BS_NET_KEY_SEND_BUFFER))
		err = get_sockbuf(name, opts, "send_buffer", &l->sndbuf);
	if (err)
		return err;
	if (l->max_per_peer > l->max_conns) {
		w = (keys & BS_NET_KEY_MAX_PER_PEER)
			    ? bs_opts_where(opts, "max_connections_per_peer")
			    : "";
		/* the default per-peer limit follows a smaller listener one */
		if (*w)
			return bs_error(-EINVAL, "%s: export %s: "
					"max_connections_per_peer %u is above "
					"max_connections %u", w, name,
					l->max_per_peer, l->max_conns);
		l->max_per_peer = l->max_conns;
	}
	return 0;
}
