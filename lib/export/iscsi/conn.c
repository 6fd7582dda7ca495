/* SPDX-License-Identifier: MIT */
/*
 * iSCSI on a network connection: the session-operations table the network
 * server drives, the lookups a session makes among the targets of its
 * listener, and a one-second tick for pings of idle initiators. The
 * handshake (for the server's handshake timeout) is the login. No socket
 * code here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

#include <blkstack/loop.h>

#include "core/random.h"
#include "export/iscsi/pdu.h"
#include "export/iscsi/target.h"

#define TICK_MS 1000

struct iscsi_conn {
	struct bs_net_conn *nc;
	struct bs_share_listener *l;
	struct iscsi_session *s;
	struct bs_loop *loop;
	int timer;
	uint64_t start_ns;
};

/* ---- what the session asks of its connection ----------------------------- */

static void ops_kick(void *arg)
{
	struct iscsi_conn *c = arg;

	bs_net_conn_kick(c->nc);
}

static void ops_drop_output(void *arg)
{
	struct iscsi_conn *c = arg;

	bs_net_conn_drop_output(c->nc);
}

static void ops_log(void *arg, const char *msg)
{
	struct iscsi_conn *c = arg;

	bs_net_conn_log(c->nc, "%s", msg);
}

static int ops_find(void *arg, const char *name, struct iscsi_login_target *t)
{
	struct iscsi_conn *c = arg;
	unsigned i;

	for (i = 0; i < c->l->n; i++) {
		struct iscsi_target *tg = c->l->refs[i]->member;

		if (iscsi_target_active(tg) && !strcmp(tg->iqn, name)) {
			iscsi_target_get(tg);	/* for the session */
			iscsi_target_login_view(tg, t);
			return 0;
		}
	}
	return -ENOENT;
}

/* What a discovery session negotiates from. */
static const struct iscsi_target_params discovery_params = {
	.header_digests = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C,
	.data_digests = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C,
	.max_recv_dsl = ISCSI_MAX_RECV_DSL,
	.max_burst = ISCSI_MAX_TRANSFER,
	.first_burst = ISCSI_MAX_TRANSFER,
	.max_outstanding_r2t = 1,
	.immediate_data = true,
	.initial_r2t = false,
};

/* Session handles, unique in this process (0 is never one). */
static uint32_t next_tsih;

static const struct iscsi_target_params *ops_dparams(void *arg)
{
	(void)arg;
	return &discovery_params;
}

static uint16_t ops_tsih(void *arg)
{
	uint32_t v;

	(void)arg;
	do
		v = __atomic_add_fetch(&next_tsih, 1, __ATOMIC_RELAXED);
	while (!(uint16_t)v);
	return (uint16_t)v;
}

/* A CHAP challenge must be random: no bytes (a kernel without
 * getrandom(), a seccomp filter) refuses the login, never a guess or a
 * spin on the I/O thread. */
static int ops_random(void *arg, void *buf, size_t len)
{
	(void)arg;
	return bs_random_bytes(buf, len);
}

static void ops_each_target(void *arg,
			    void (*fn)(void *fa, const char *name,
				       const char *portal),
			    void *fa)
{
	struct iscsi_conn *c = arg;
	const char *addr = bs_net_listener_addr(c->l->nl);
	struct bs_net_addr a;
	char portal[320], why[160];
	unsigned i;

	/* "ADDR:PORT,TPGT"; none for a wildcard: the initiator keeps the
	 * address it reached us on */
	if (!bs_net_parse_addr(addr, &a, why, sizeof(why)) && !a.wildcard)
		snprintf(portal, sizeof(portal), "%s,%u", addr, ISCSI_TPGT);
	else
		portal[0] = '\0';
	for (i = 0; i < c->l->n; i++) {
		struct iscsi_target *tg = c->l->refs[i]->member;

		if (iscsi_target_active(tg))
			fn(fa, tg->iqn, portal[0] ? portal : NULL);
	}
}

/* FNV-1a, 64 bits: a short key for "initiator, ISID" in a label. */
static uint64_t key_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s) {
		h ^= (uint8_t)*s++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/*
 * Session reinstatement (RFC 7143 6.3.5): a new session of the same
 * initiator port (InitiatorName and ISID) to the same target replaces the
 * old one, whose connection is closed (its tasks end with it, ERL 0). The
 * key is in the connections' labels: "tN HASH".
 */
static unsigned reinstate(struct iscsi_target *tg, struct bs_net_conn *self,
			  const char *label)
{
	unsigned i, n = 0;

	for (i = 0; i < tg->ref.nls; i++) {
		struct bs_net_listener *nl = tg->ref.ls[i]->nl;
		struct bs_net_conn *o;

		bs_net_listener_lock(nl);
		for (o = bs_net_conn_next(nl, NULL); o;
		     o = bs_net_conn_next(nl, o)) {
			if (o == self || strcmp(bs_net_conn_label(o), label))
				continue;
			bs_net_conn_send_close(o, "session reinstated: the "
					       "initiator logged in again with "
					       "its ISID");
			n++;
		}
		bs_net_listener_unlock(nl);
	}
	return n;
}

static int ops_attach(void *arg, const struct iscsi_login_target *t,
		      struct iscsi_session_target *st)
{
	struct iscsi_conn *c = arg;
	struct iscsi_target *tg = t->priv;
	char port[ISCSI_NAME_MAX + 32], label[64];
	unsigned n;
	int err;

	snprintf(label, sizeof(label), "%s %016llx", tg->label,
		 (unsigned long long)key_hash(
			 iscsi_session_initiator_port(c->s, port,
						      sizeof(port))));
	n = reinstate(tg, c->nc, label);
	if (n)
		bs_net_conn_log(c->nc, "reinstating %u session%s of %s", n,
				n == 1 ? "" : "s", port);
	err = iscsi_target_attach(tg, st, n);
	if (!err)
		bs_net_conn_set_label(c->nc, label);
	return err;
}

static void ops_detach(const struct iscsi_login_target *t)
{
	iscsi_target_detach(t->priv);
}

/* Logged out: still the target's connection (an export removal finds
 * it), no longer a session of its initiator port for reinstate(). */
static void ops_logged_out(void *arg, const struct iscsi_login_target *t)
{
	struct iscsi_conn *c = arg;
	struct iscsi_target *tg = t->priv;

	bs_net_conn_set_label(c->nc, tg->label);
}

static void ops_release(const struct iscsi_login_target *t)
{
	iscsi_target_put(t->priv);
}

static uint32_t ops_block_size(void *arg, const struct iscsi_login_target *t,
			       uint64_t lun)
{
	(void)arg;
	return iscsi_target_block_size(t->priv, lun);
}

static const struct iscsi_session_ops session_ops = {
	.kick = ops_kick,
	.drop_output = ops_drop_output,
	.log = ops_log,
	.find = ops_find,
	.discovery_params = ops_dparams,
	.tsih = ops_tsih,
	.random = ops_random,
	.each_target = ops_each_target,
	.attach = ops_attach,
	.detach = ops_detach,
	.logged_out = ops_logged_out,
	.release = ops_release,
	.block_size = ops_block_size,
};

/* ---- what the network server asks of iSCSI ------------------------------- */

static void tick(void *arg)
{
	struct iscsi_conn *c = arg;

	c->timer = 0;
	iscsi_session_tick(c->s, bs_now_ns());
	c->timer = bs_loop_add_timer(c->loop, TICK_MS, tick, c);
	if (c->timer < 0)
		c->timer = 0;
}

static int p_start(void *owner, struct bs_net_conn *nc, void **sess)
{
	struct bs_share_listener *l = owner;
	struct iscsi_conn *c = calloc(1, sizeof(*c));
	int err;

	if (!c)
		return -ENOMEM;
	c->nc = nc;
	c->l = l;
	c->start_ns = bs_now_ns();
	c->loop = bs_loop_current();
	err = iscsi_session_new(l->sh->ctx, l->sh->set, &session_ops, c,
				&c->s);
	if (err) {
		free(c);
		return err;
	}
	if (c->loop) {
		c->timer = bs_loop_add_timer(c->loop, TICK_MS, tick, c);
		if (c->timer < 0)
			c->timer = 0;
	}
	*sess = c;
	return 0;
}

static size_t p_input(void *sess, const uint8_t *buf, size_t len)
{
	struct iscsi_conn *c = sess;
	size_t n = iscsi_session_feed(c->s, buf, len);

	if (bs_net_conn_in_handshake(c->nc)) {
		const struct iscsi_login_target *t =
			iscsi_session_login_target(c->s);

		/* what the main loop knows the initiator by (the target's
		 * short label: an IQN may be longer than a label holds), set
		 * as soon as the login names a target, so closing that
		 * export closes logins in progress too */
		if (t && !*bs_net_conn_label(c->nc))
			bs_net_conn_set_label(c->nc,
				((struct iscsi_target *)t->priv)->label);
		if (iscsi_session_full_feature(c->s))
			bs_net_conn_handshake_done(c->nc);
	}
	return n;
}

static bool p_wants_input(void *sess)
{
	struct iscsi_conn *c = sess;

	return iscsi_session_wants_input(c->s);
}

static size_t p_in_direct(void *sess, uint8_t **dst)
{
	struct iscsi_conn *c = sess;

	return iscsi_session_in_direct(c->s, dst);
}

static void p_in_direct_done(void *sess, size_t n)
{
	struct iscsi_conn *c = sess;

	iscsi_session_in_direct_done(c->s, n);
}

static int p_output(void *sess, struct iovec *iov, int max)
{
	struct iscsi_conn *c = sess;

	return iscsi_session_out_iov(c->s, iov, max);
}

static size_t p_out_bytes(void *sess)
{
	struct iscsi_conn *c = sess;

	return iscsi_session_out_bytes(c->s);
}

static void p_sent(void *sess, size_t n)
{
	struct iscsi_conn *c = sess;

	iscsi_session_out_advance(c->s, n);
}

static void p_eof(void *sess)
{
	struct iscsi_conn *c = sess;

	iscsi_session_eof(c->s);
}

static void p_shutdown(void *sess)
{
	struct iscsi_conn *c = sess;

	iscsi_session_shutdown(c->s);
}

static bool p_finished(void *sess)
{
	struct iscsi_conn *c = sess;

	return iscsi_session_finished(c->s);
}

static bool p_busy(void *sess)
{
	struct iscsi_conn *c = sess;

	return iscsi_session_inflight(c->s) > 0;
}

static void p_close(void *sess, const char *why)
{
	struct iscsi_conn *c = sess;
	const struct iscsi_session_stats *st = iscsi_session_stats(c->s);
	const char *t = iscsi_session_target(c->s);
	const char *ini = iscsi_session_initiator(c->s);
	char rd[32], wr[32];

	if (c->timer)
		bs_loop_cancel_timer(c->loop, c->timer);
	bs_net_conn_log(c->nc, "close%s%s%s%s: %llu commands, %s read, %s "
			"written, %llu errors, %.1f s: %s",
			t ? " target " : "", t ? t : "",
			ini ? " initiator " : "", ini ? ini : "",
			(unsigned long long)st->commands,
			bs_fmt_size(st->bytes_read, rd, sizeof(rd)),
			bs_fmt_size(st->bytes_written, wr, sizeof(wr)),
			(unsigned long long)st->errors,
			(double)(bs_now_ns() - c->start_ns) / 1e9,
			why ? why : iscsi_session_end_reason(c->s));
	iscsi_session_free(c->s);
	free(c);
}

const struct bs_net_proto iscsi_net_proto = {
	.name = "iscsi",
	.inbuf = ISCSI_CONN_INBUF,
	.direct_min = ISCSI_CONN_DIRECT_MIN,
	/* after a payload: its tail (pad, digest) and the next BHS + digest */
	.direct_hdr = 3 + ISCSI_DIGEST_LEN + ISCSI_BHS_LEN + ISCSI_DIGEST_LEN,
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
