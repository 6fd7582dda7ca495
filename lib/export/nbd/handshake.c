/* SPDX-License-Identifier: MIT */
/*
 * NBD fixed newstyle handshake: greeting, client flags, and the options
 * EXPORT_NAME, ABORT, LIST, INFO, GO, STRUCTURED_REPLY, LIST_META_CONTEXT
 * and SET_META_CONTEXT. Every option is answered at once (the device is
 * not touched during the handshake), so this part is synchronous.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/nbd/internal.h"

void nbd_hs_greeting(struct nbd_session *s)
{
	uint8_t g[18];

	nbd_put64(g, NBD_MAGIC);
	nbd_put64(g + 8, NBD_IHAVEOPT);
	nbd_put16(g + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	nbd_out_push(s, g, sizeof(g), NULL, 0, 0);
}

void nbd_hs_client_flags(struct nbd_session *s)
{
	uint32_t f = nbd_get32(s->hdr);

	s->have = 0;
	if (f & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		/* the protocol says: drop the connection */
		nbd_end(s, "unknown client flags 0x%x", f);
		return;
	}
	s->fixed = f & NBD_FLAG_C_FIXED_NEWSTYLE;
	s->no_zeroes = f & NBD_FLAG_C_NO_ZEROES;
	s->in = IN_OPT_HDR;
}

/* ---- option replies -------------------------------------------------------- */

static void reply(struct nbd_session *s, uint32_t type, const void *data,
		  size_t len)
{
	uint8_t h[NBD_OPT_REPLY_HDR_SIZE];
	uint8_t *buf;

	nbd_put64(h, NBD_REP_MAGIC);
	nbd_put32(h + 8, s->opt);
	nbd_put32(h + 12, type);
	nbd_put32(h + 16, (uint32_t)len);
	if (!len) {
		nbd_out_push(s, h, sizeof(h), NULL, 0, 0);
		return;
	}
	buf = malloc(sizeof(h) + len);
	if (!buf) {
		nbd_end(s, "out of memory");
		return;
	}
	memcpy(buf, h, sizeof(h));
	memcpy(buf + sizeof(h), data, len);
	nbd_out_push(s, buf, sizeof(h) + len, NULL, 0, 0);
	free(buf);
}

static void reply_err(struct nbd_session *s, uint32_t type, const char *fmt,
		      ...) __attribute__((format(printf, 3, 4)));
static void reply_err(struct nbd_session *s, uint32_t type, const char *fmt,
		      ...)
{
	char msg[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	reply(s, type, msg, (size_t)n);
}

static void reply_info(struct nbd_session *s, uint16_t info, const void *data,
		       size_t len)
{
	uint8_t buf[2 + NBD_MAX_STRING];

	if (len > NBD_MAX_STRING)
		len = NBD_MAX_STRING;
	nbd_put16(buf, info);
	memcpy(buf + 2, data, len);
	reply(s, NBD_REP_INFO, buf, 2 + len);
}

/* ---- helpers ------------------------------------------------------------- */

/* A protocol string of @len bytes at @p as a C string; NULL if invalid. */
static char *get_string(const uint8_t *p, size_t len)
{
	char *str;

	/* @p is NULL for an option without data: len 0, the empty name */
	if (len > NBD_MAX_STRING || (len && memchr(p, '\0', len)))
		return NULL;
	str = malloc(len + 1);
	if (!str)
		return NULL;
	if (len)
		memcpy(str, p, len);
	str[len] = '\0';
	return str;
}

static struct bs_export_unit *find(struct nbd_session *s, const char *name)
{
	return s->ops && s->ops->find ? s->ops->find(s->arg, name) : NULL;
}

/* Enter transmission on @u with the flags and minimum block sent. */
static void go(struct nbd_session *s, struct bs_export_unit *u,
	       uint16_t flags, uint32_t min_block)
{
	s->transmission = true;
	s->dev = u->dev;
	s->ro = u->readonly;
	s->tflags = flags;
	s->min_block = min_block;
	snprintf(s->export_name, sizeof(s->export_name), "%s", u->name);
	/* a context selected for another export does not carry over */
	if (s->meta_alloc &&
	    (!s->meta_export || strcmp(s->meta_export, u->name)))
		s->meta_alloc = false;
	s->in = IN_REQ_HDR;
	s->have = 0;
	nbd_log(s, "export %s: flags 0x%04x%s%s", u->name, flags,
		s->structured ? ", structured replies" : "",
		s->meta_alloc ? ", base:allocation" : "");
}

/* ---- options --------------------------------------------------------------- */

static void opt_export_name(struct nbd_session *s)
{
	struct bs_export_unit *u;
	uint8_t r[8 + 2 + 124];
	uint16_t flags;
	uint32_t bmin;
	char *name = get_string(s->optbuf, s->optlen);

	if (!name) {
		nbd_end(s, "NBD_OPT_EXPORT_NAME with an invalid name");
		return;
	}
	u = find(s, name);
	if (!u || bs_dev_snap(u->dev)->state != BS_DEV_LIVE) {
		/* no way to answer an error here: the protocol says close */
		if (!u)
			nbd_end(s, "NBD_OPT_EXPORT_NAME: no export '%s'", name);
		else
			nbd_end(s, "NBD_OPT_EXPORT_NAME: export '%s': device "
				"%s %s: %s", name, u->dev->name,
				bs_dev_state_name(bs_dev_snap(u->dev)->state),
				bs_dev_snap(u->dev)->state_reason);
		free(name);
		return;
	}
	free(name);
	flags = nbd_tx_flags(s, u);
	memset(r, 0, sizeof(r));
	nbd_put64(r, bs_dev_size(u->dev));
	nbd_put16(r + 8, flags);
	nbd_out_push(s, r, s->no_zeroes ? 10 : sizeof(r), NULL, 0, 0);
	nbd_tx_block_sizes(u, &bmin, NULL, NULL);
	go(s, u, flags, bmin);
}

static void opt_list(struct nbd_session *s)
{
	struct bs_export_unit *u = NULL;
	uint8_t buf[4 + BS_EXPORT_NAME_MAX + NBD_MAX_STRING];

	if (s->optlen) {
		reply_err(s, NBD_REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
		return;
	}
	while (s->ops && s->ops->next && (u = s->ops->next(s->arg, u))) {
		size_t n = strlen(u->name), d = 0;

		/* name, then the description as the rest of the reply */
		nbd_put32(buf, (uint32_t)n);
		memcpy(buf + 4, u->name, n);
		if (u->description) {
			d = strnlen(u->description, NBD_MAX_STRING);
			memcpy(buf + 4 + n, u->description, d);
		}
		reply(s, NBD_REP_SERVER, buf, 4 + n + d);
	}
	reply(s, NBD_REP_ACK, NULL, 0);
}

/*
 * @prev: what an NBD_OPT_INFO answered if it was the option just before.
 * A GO with the same data gets the same information (the protocol's
 * MUST), even if the device's capabilities changed in between; anything
 * else is computed now.
 */
static void opt_info_go(struct nbd_session *s, bool is_go,
			const struct nbd_info_memo *prev)
{
	const uint8_t *p = s->optbuf;
	uint32_t namelen, i;
	uint16_t nreq;
	bool want_name = false, want_desc = false;
	struct bs_export_unit *u;
	struct nbd_info_memo now;
	uint8_t buf[14];
	char *name;

	if (s->optlen < 6) {
		reply_err(s, NBD_REP_ERR_INVALID, "option too short");
		return;
	}
	namelen = nbd_get32(p);
	if (namelen > s->optlen - 6) {
		reply_err(s, NBD_REP_ERR_INVALID, "name length %u beyond the "
			  "option data", namelen);
		return;
	}
	nreq = nbd_get16(p + 4 + namelen);
	if (s->optlen != 4 + namelen + 2 + 2 * (uint32_t)nreq) {
		reply_err(s, NBD_REP_ERR_INVALID, "option length %u does not "
			  "match %u information requests", s->optlen, nreq);
		return;
	}
	name = get_string(p + 4, namelen);
	if (!name) {
		reply_err(s, NBD_REP_ERR_INVALID, "invalid export name");
		return;
	}
	for (i = 0; i < nreq; i++) {
		uint16_t r = nbd_get16(p + 4 + namelen + 2 + 2 * i);
		if (r == NBD_INFO_NAME)
			want_name = true;
		else if (r == NBD_INFO_DESCRIPTION)
			want_desc = true;
		/* EXPORT and BLOCK_SIZE are always sent; others ignored */
	}
	u = find(s, name);
	if (!u) {
		reply_err(s, NBD_REP_ERR_UNKNOWN, "no export '%s' here", name);
		free(name);
		return;
	}
	free(name);
	if (bs_dev_snap(u->dev)->state != BS_DEV_LIVE) {
		/* "not available": the client may try again later */
		reply_err(s, NBD_REP_ERR_UNKNOWN, "export '%s': device %s %s: "
			  "%s", u->name, u->dev->name,
			  bs_dev_snap(u->dev)->state == BS_DEV_OPENING
				  ? "is still opening"
				  : "failed to open",
			  bs_dev_snap(u->dev)->state_reason);
		return;
	}
	if (is_go && prev && prev->len == s->optlen &&
	    !memcmp(prev->data, p, s->optlen)) {
		now = *prev;
	} else {
		now.size = bs_dev_size(u->dev);
		now.flags = nbd_tx_flags(s, u);
		nbd_tx_block_sizes(u, &now.bmin, &now.bpref, &now.bmax);
	}
	nbd_put16(buf, NBD_INFO_EXPORT);
	nbd_put64(buf + 2, now.size);
	nbd_put16(buf + 10, now.flags);
	reply(s, NBD_REP_INFO, buf, 12);
	if (want_name)
		reply_info(s, NBD_INFO_NAME, u->name, strlen(u->name));
	if (want_desc && u->description && *u->description)
		reply_info(s, NBD_INFO_DESCRIPTION, u->description,
			   strlen(u->description));
	nbd_put16(buf, NBD_INFO_BLOCK_SIZE);
	nbd_put32(buf + 2, now.bmin);
	nbd_put32(buf + 6, now.bpref);
	nbd_put32(buf + 10, now.bmax);
	reply(s, NBD_REP_INFO, buf, 14);
	reply(s, NBD_REP_ACK, NULL, 0);
	if (is_go) {
		go(s, u, now.flags, now.bmin);
		return;
	}
	/* remembered for a GO that follows at once (none if no memory) */
	s->info_memo = malloc(sizeof(*s->info_memo) + s->optlen);
	if (s->info_memo) {
		*s->info_memo = now;
		s->info_memo->len = s->optlen;
		memcpy(s->info_memo->data, p, s->optlen);
	}
}

static void opt_meta(struct nbd_session *s, bool set)
{
	const uint8_t *p = s->optbuf;
	size_t len = s->optlen, pos;
	uint32_t namelen, nq, i;
	bool want = false;
	struct bs_export_unit *u;
	char *name;
	uint8_t buf[4 + sizeof(NBD_META_BASE_ALLOCATION)];

	if (set) {
		/* replaces the selection, even when this option fails */
		s->meta_alloc = false;
		free(s->meta_export);
		s->meta_export = NULL;
		if (!s->structured) {
			reply_err(s, NBD_REP_ERR_INVALID, "negotiate "
				  "NBD_OPT_STRUCTURED_REPLY first");
			return;
		}
	}
	if (len < 8) {
		reply_err(s, NBD_REP_ERR_INVALID, "option too short");
		return;
	}
	namelen = nbd_get32(p);
	if (namelen > len - 8) {
		reply_err(s, NBD_REP_ERR_INVALID, "name length %u beyond the "
			  "option data", namelen);
		return;
	}
	nq = nbd_get32(p + 4 + namelen);
	pos = 8 + (size_t)namelen;
	/* walk the queries once for syntax before answering anything */
	for (i = 0; i < nq; i++) {
		uint32_t ql;
		if (len - pos < 4) {
			reply_err(s, NBD_REP_ERR_INVALID, "query %u beyond the "
				  "option data", i);
			return;
		}
		ql = nbd_get32(p + pos);
		pos += 4;
		if (ql > len - pos || ql > NBD_MAX_STRING) {
			reply_err(s, NBD_REP_ERR_INVALID, "query %u length %u "
				  "beyond the option data", i, ql);
			return;
		}
		if ((ql == 5 && !memcmp(p + pos, "base:", 5) && !set) ||
		    (ql == strlen(NBD_META_BASE_ALLOCATION) &&
		     !memcmp(p + pos, NBD_META_BASE_ALLOCATION, ql)))
			want = true;
		pos += ql;
	}
	if (pos != len) {
		reply_err(s, NBD_REP_ERR_INVALID, "%zu bytes after the last "
			  "query", len - pos);
		return;
	}
	if (!nq && !set)
		want = true; /* list everything there is */
	name = get_string(p + 4, namelen);
	if (!name) {
		reply_err(s, NBD_REP_ERR_INVALID, "invalid export name");
		return;
	}
	u = find(s, name);
	if (!u) {
		reply_err(s, NBD_REP_ERR_UNKNOWN, "no export '%s' here", name);
		free(name);
		return;
	}
	if (want) {
		nbd_put32(buf, set ? NBD_META_ID_ALLOCATION : 0);
		memcpy(buf + 4, NBD_META_BASE_ALLOCATION,
		       strlen(NBD_META_BASE_ALLOCATION));
		reply(s, NBD_REP_META_CONTEXT, buf,
		      4 + strlen(NBD_META_BASE_ALLOCATION));
	}
	if (set && want) {
		s->meta_alloc = true;
		s->meta_export = strdup(u->name);
		if (!s->meta_export)
			s->meta_alloc = false;
	}
	free(name);
	reply(s, NBD_REP_ACK, NULL, 0);
}

void nbd_hs_option_header(struct nbd_session *s)
{
	uint64_t magic = nbd_get64(s->hdr);

	s->have = 0;
	s->opt = nbd_get32(s->hdr + 8);
	s->optlen = nbd_get32(s->hdr + 12);
	if (magic != NBD_IHAVEOPT) {
		nbd_end(s, "bad option magic 0x%016llx",
			(unsigned long long)magic);
		return;
	}
	if (!s->fixed && s->opt != NBD_OPT_EXPORT_NAME) {
		nbd_end(s, "option %u from a client without fixed newstyle",
			s->opt);
		return;
	}
	if (s->optlen > NBD_MAX_OPTION) {
		if (s->shutdown) {
			/* not worth reading past while stopping */
			nbd_end(s, "server shutting down");
			return;
		}
		if (s->opt == NBD_OPT_EXPORT_NAME) {
			nbd_end(s, "NBD_OPT_EXPORT_NAME of %u bytes", s->optlen);
			return;
		}
		/* read past it, then say so: the stream stays in sync */
		s->skip_left = s->optlen;
		s->in = IN_OPT_SKIP;
		return;
	}
	s->opthave = 0;
	free(s->optbuf);
	s->optbuf = NULL;
	if (!s->optlen) {
		nbd_hs_option(s);
		return;
	}
	s->optbuf = malloc(s->optlen);
	if (!s->optbuf) {
		nbd_end(s, "out of memory for an option");
		return;
	}
	s->in = IN_OPT_DATA;
}

bool nbd_hs_idle(const struct nbd_session *s)
{
	return (s->in == IN_CLIENT_FLAGS || s->in == IN_OPT_HDR) && !s->have;
}

/*
 * The server is shutting down: every option but ABORT gets
 * NBD_REP_ERR_SHUTDOWN (the protocol's advice), a bounded number of
 * times; EXPORT_NAME cannot carry an error and closes.
 */
static void opt_shutting_down(struct nbd_session *s)
{
	if (s->opt == NBD_OPT_ABORT) {
		reply(s, NBD_REP_ACK, NULL, 0);
		nbd_end(s, "server shutting down; client aborted");
		return;
	}
	if (s->opt == NBD_OPT_EXPORT_NAME) {
		nbd_end(s, "server shutting down (NBD_OPT_EXPORT_NAME closed)");
		return;
	}
	reply_err(s, NBD_REP_ERR_SHUTDOWN, "server shutting down");
	if (++s->shut_opts >= NBD_HS_SHUTDOWN_OPTS)
		nbd_end(s, "server shutting down");
}

void nbd_hs_option_skipped(struct nbd_session *s)
{
	s->in = IN_OPT_HDR;
	/* an option in between: a GO after it gets fresh information */
	free(s->info_memo);
	s->info_memo = NULL;
	reply_err(s, NBD_REP_ERR_TOO_BIG, "option data of %u bytes exceeds "
		  "the server's limit of %u", s->optlen, NBD_MAX_OPTION);
}

void nbd_hs_option(struct nbd_session *s)
{
	/* only the option right after an INFO may reuse its answer */
	struct nbd_info_memo *prev = s->info_memo;

	s->info_memo = NULL;
	s->in = IN_OPT_HDR;
	if (s->shutdown) {
		opt_shutting_down(s);
		goto out;
	}
	switch (s->opt) {
	case NBD_OPT_EXPORT_NAME:
		opt_export_name(s);
		break;
	case NBD_OPT_ABORT:
		/* data is ignored, as the protocol asks */
		reply(s, NBD_REP_ACK, NULL, 0);
		nbd_end(s, "client aborted the handshake (NBD_OPT_ABORT)");
		break;
	case NBD_OPT_LIST:
		opt_list(s);
		break;
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		opt_info_go(s, s->opt == NBD_OPT_GO, prev);
		break;
	case NBD_OPT_STRUCTURED_REPLY:
		if (s->optlen)
			reply_err(s, NBD_REP_ERR_INVALID,
				  "NBD_OPT_STRUCTURED_REPLY takes no data");
		else {
			s->structured = true;
			reply(s, NBD_REP_ACK, NULL, 0);
		}
		break;
	case NBD_OPT_LIST_META_CONTEXT:
		opt_meta(s, false);
		break;
	case NBD_OPT_SET_META_CONTEXT:
		opt_meta(s, true);
		break;
	case NBD_OPT_STARTTLS:
		reply_err(s, NBD_REP_ERR_UNSUP, "TLS is not supported by "
			  "this server");
		break;
	default:
		reply_err(s, NBD_REP_ERR_UNSUP, "unknown option %u", s->opt);
		break;
	}
out:
	free(prev);
	free(s->optbuf);
	s->optbuf = NULL;
}
