/* SPDX-License-Identifier: MIT */
/*
 * NBD on a network connection: the session-operations table the network
 * server (lib/export/net/) drives. Bytes in and out go straight to and
 * from the NBD session (session.c); the handshake ends, for the server's
 * handshake timeout, when the session enters transmission. No socket code
 * here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/nbd/proto.h"
#include "export/nbd/server.h"

struct nbd_conn {
	struct bs_net_conn *nc;
	struct bs_share_listener *l;
	struct nbd_session *s;
	uint64_t start_ns;
};

/* ---- what the session asks of its connection ----------------------------- */

static void ops_kick(void *arg)
{
	struct nbd_conn *c = arg;

	bs_net_conn_kick(c->nc);
}

static void ops_drop_output(void *arg)
{
	struct nbd_conn *c = arg;

	bs_net_conn_drop_output(c->nc);
}

/* Every unit of every export on the listener is an NBD export name. */
static struct bs_export_unit *ops_find(void *arg, const char *name)
{
	struct nbd_conn *c = arg;
	struct bs_export_unit *u;
	unsigned i;

	for (i = 0; i < c->l->n; i++) {
		struct bs_export *e = c->l->refs[i]->member;

		if (!bs_share_active(c->l->refs[i]))
			continue;
		/* "" is the default export: the first unit here */
		if (!*name)
			return &e->units[0];
		u = bs_export_unit_find(e, name);
		if (u)
			return u;
	}
	return NULL;
}

static struct bs_export_unit *ops_next(void *arg, struct bs_export_unit *prev)
{
	struct nbd_conn *c = arg;
	unsigned i = 0;

	if (prev) {
		if (prev->index + 1 < prev->exp->nunits)
			return &prev->exp->units[prev->index + 1];
		while (i < c->l->n && c->l->refs[i]->member != prev->exp)
			i++;
		i++;
	}
	for (; i < c->l->n; i++)
		if (bs_share_active(c->l->refs[i]))
			return &((struct bs_export *)
				 c->l->refs[i]->member)->units[0];
	return NULL;
}

static void ops_log(void *arg, const char *msg)
{
	struct nbd_conn *c = arg;

	bs_net_conn_log(c->nc, "%s", msg);
}

static const struct nbd_session_ops session_ops = {
	.kick = ops_kick,
	.drop_output = ops_drop_output,
	.find = ops_find,
	.next = ops_next,
	.log = ops_log,
};

/* ---- what the network server asks of NBD --------------------------------- */

static int p_start(void *owner, struct bs_net_conn *nc, void **sess)
{
	struct bs_share_listener *l = owner;
	struct nbd_conn *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	c->nc = nc;
	c->l = l;
	c->start_ns = bs_now_ns();
	err = nbd_session_new(l->sh->ctx, l->sh->set, &session_ops, c, &c->s);
	if (err) {
		free(c);
		return err;
	}
	*sess = c;
	return 0;
}

static size_t p_input(void *sess, const uint8_t *buf, size_t len)
{
	struct nbd_conn *c = sess;
	size_t n = nbd_session_feed(c->s, buf, len);

	/* transmission: the negotiation is over */
	if (bs_net_conn_in_handshake(c->nc) && nbd_session_export_name(c->s)) {
		/* what the main loop knows the client by (shutdown, clients) */
		bs_net_conn_set_label(c->nc, nbd_session_export_name(c->s));
		bs_net_conn_handshake_done(c->nc);
	}
	return n;
}

static bool p_wants_input(void *sess)
{
	struct nbd_conn *c = sess;

	return nbd_session_wants_input(c->s);
}

static size_t p_in_direct(void *sess, uint8_t **dst)
{
	struct nbd_conn *c = sess;

	return nbd_session_in_direct(c->s, dst);
}

static void p_in_direct_done(void *sess, size_t n)
{
	struct nbd_conn *c = sess;

	nbd_session_in_direct_done(c->s, n);
}

static int p_output(void *sess, struct iovec *iov, int max)
{
	struct nbd_conn *c = sess;

	if (!nbd_session_has_output(c->s))
		return 0;
	return nbd_session_out_iov(c->s, iov, max);
}

static size_t p_out_bytes(void *sess)
{
	struct nbd_conn *c = sess;

	return nbd_session_out_bytes(c->s);
}

static void p_sent(void *sess, size_t n)
{
	struct nbd_conn *c = sess;

	nbd_session_out_advance(c->s, n);
}

static void p_eof(void *sess)
{
	struct nbd_conn *c = sess;

	nbd_session_eof(c->s);
}

static void p_shutdown(void *sess)
{
	struct nbd_conn *c = sess;

	nbd_session_shutdown(c->s);
}

static bool p_finished(void *sess)
{
	struct nbd_conn *c = sess;

	return nbd_session_finished(c->s);
}

static bool p_busy(void *sess)
{
	struct nbd_conn *c = sess;

	return nbd_session_inflight(c->s) > 0;
}

static void p_close(void *sess, const char *why)
{
	struct nbd_conn *c = sess;
	const struct nbd_session_stats *st = nbd_session_stats(c->s);
	const char *exp = nbd_session_export_name(c->s);
	char rd[32], wr[32];

	bs_net_conn_log(c->nc, "close%s%s: %llu requests, %s read, %s "
			"written, %llu errors, %.1f s: %s",
			exp ? " export " : " (no export chosen)",
			exp ? exp : "", (unsigned long long)st->requests,
			bs_fmt_size(st->bytes_read, rd, sizeof(rd)),
			bs_fmt_size(st->bytes_written, wr, sizeof(wr)),
			(unsigned long long)st->errors,
			(double)(bs_now_ns() - c->start_ns) / 1e9,
			why ? why : nbd_session_end_reason(c->s));
	nbd_session_free(c->s);
	free(c);
}

const struct bs_net_proto nbd_net_proto = {
	.name = "nbd",
	.inbuf = NBD_CONN_INBUF,
	.direct_min = NBD_CONN_DIRECT_MIN,
	.direct_hdr = NBD_REQ_HDR_SIZE,
	.start = p_start,
	.input = p_input,
	.wants_input = p_wants_input,
	.in_direct = p_in_direct,
	.in_direct_done = p_in_direct_done,
	.output = p_output,
	.out_bytes = p_out_bytes,
	.sent = p_sent,
	.eof = p_eof,
	.shutdown = p_shutdown,
	.finished = p_finished,
	.busy = p_busy,
	.close = p_close,
};

const char *nbd_conn_export(const struct bs_net_conn *nc)
{
	struct nbd_conn *c = bs_net_conn_session(nc);

	return c ? nbd_session_export_name(c->s) : NULL;
}
