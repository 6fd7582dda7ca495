/* SPDX-License-Identifier: MIT */
/*
 * The NBD session state machine without sockets: bytes in through
 * nbd_session_feed(), replies out through nbd_session_out_iov(), requests
 * run on mem devices through the context's loop. Every expectation is the
 * NBD protocol document's (fixed newstyle, structured replies,
 * base:allocation), checked against the bytes on the wire and the bytes
 * on the device.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/budget.h>
#include <blkstack/export.h>
#include <blkstack/opts.h>

#include "export/nbd/internal.h" /* white box: the byte accounting */
#include "export/nbd/proto.h"
#include "export/nbd/session.h"
#include "helpers/slowdev.h"
#include "helpers/th.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)

/* ---- a test-only export type: an export object without a listener ---- */

static int t_open(struct bs_export *exp, struct bs_opts *opts)
{
	(void)exp;
	(void)opts;
	return 0;
}

static void t_close(struct bs_export *exp)
{
	(void)exp;
}

static const struct bs_export_type test_export_type = {
	.name = "nbd-session-test",
	.summary = "export object for the session tests (no listener)",
	.open = t_open,
	.close = t_close,
};

BS_EXPORT_TYPE(test_export_type)

/* ---- harness ---------------------------------------------------------- */

struct h {
	struct bs_ctx *ctx;
	struct bs_exports *set;
	struct bs_export *exp;
	struct bs_dev *dev;
	struct nbd_session *s;
	uint8_t *out;
	size_t out_len, out_cap, out_pos;
	/* sink mode: count output, check simple replies of 1 MiB reads */
	bool sink;
	uint64_t sunk, sink_next;
	uint8_t sink_hdr[16];
	unsigned kicks, nlogs;
	char log[512];
};

static void ops_kick(void *arg)
{
	((struct h *)arg)->kicks++;
}

/* Every unit of every export is an NBD export name; "" is the first. */
static struct bs_export_unit *ops_find(void *arg, const char *name)
{
	struct h *x = arg;
	struct bs_export *e;
	struct bs_export_unit *u;

	for (e = bs_export_next(x->set, NULL); e;
	     e = bs_export_next(x->set, e)) {
		if (!*name)
			return &e->units[0];
		if ((u = bs_export_unit_find(e, name)))
			return u;
	}
	return NULL;
}

static struct bs_export_unit *ops_next(void *arg,
					 struct bs_export_unit *prev)
{
	struct h *x = arg;
	struct bs_export *e;

	if (prev && prev->index + 1 < prev->exp->nunits)
		return &prev->exp->units[prev->index + 1];
	e = bs_export_next(x->set, prev ? prev->exp : NULL);
	return e ? &e->units[0] : NULL;
}

static void ops_log(void *arg, const char *msg)
{
	struct h *h = arg;

	h->nlogs++;
	snprintf(h->log, sizeof(h->log), "%s", msg);
}

static const struct nbd_session_ops ops = {
	.kick = ops_kick,
	.find = ops_find,
	.next = ops_next,
	.log = ops_log,
};

static struct bs_export *add_export(struct h *h, const char *name,
				    const char *dev, bool ro, const char *desc)
{
	struct bs_opts *o;
	struct bs_export *e = NULL;
	int err;

	assert_int_equal(bs_opts_new(&o), 0);
	assert_int_equal(bs_opts_set(o, "device", dev, "test"), 0);
	if (ro)
		assert_int_equal(bs_opts_set(o, "readonly", "1", "test"), 0);
	if (desc)
		assert_int_equal(bs_opts_set(o, "description", desc, "test"),
				 0);
	err = bs_export_create(h->set, name, test_export_type.name, o, &e);
	if (err)
		fail_msg("export %s: %d %s", name, err, bs_last_error());
	bs_opts_free(o);
	return e;
}

/* A context, device "d" from @spec exported as "vol0", one session. */
static void h_init(struct h *h, const char *spec, bool ro)
{
	memset(h, 0, sizeof(*h));
	assert_int_equal(bs_ctx_new(&h->ctx), 0);
	h->dev = th_dev(h->ctx, "d", spec);
	assert_int_equal(bs_exports_new(h->ctx, &h->set), 0);
	h->exp = add_export(h, "vol0", "d", ro, "test volume");
	assert_int_equal(nbd_session_new(h->ctx, h->set, &ops, h, &h->s), 0);
}

static void h_fini(struct h *h)
{
	nbd_session_free(h->s);
	bs_exports_free(h->set);
	bs_ctx_free(h->ctx);
	free(h->out);
}

/* Run the loop until nothing is in flight (and a few idle rounds). */
static void h_run(struct h *h)
{
	struct bs_loop *loop = bs_ctx_loop(h->ctx);
	int i, idle = 0;

	for (i = 0; i < 1000000 && idle < 3; i++) {
		assert_int_equal(bs_loop_run_once(loop, 0), 0);
		if (nbd_session_inflight(h->s))
			idle = 0;
		else
			idle++;
	}
	assert_int_equal(nbd_session_inflight(h->s), 0);
}

/* Sink: a stream of simple replies to 1 MiB reads, cookies 0, 1, ... */
static void sink_append(struct h *h, const uint8_t *p, size_t n)
{
	const uint64_t rec = 16 + 1 * MiB;

	while (n) {
		uint64_t pos = h->sunk % rec;
		size_t take = n;

		if (pos < 16) {
			if (take > 16 - pos)
				take = (size_t)(16 - pos);
			memcpy(h->sink_hdr + pos, p, take);
			if (pos + take == 16) {
				assert_int_equal(nbd_get32(h->sink_hdr),
						 NBD_SIMPLE_REPLY_MAGIC);
				assert_int_equal(nbd_get32(h->sink_hdr + 4), 0);
				assert_int_equal(nbd_get64(h->sink_hdr + 8),
						 h->sink_next);
				h->sink_next++;
			}
		} else if (take > rec - pos) {
			take = (size_t)(rec - pos);
		}
		h->sunk += take;
		p += take;
		n -= take;
	}
}

static void out_append(struct h *h, const void *p, size_t n)
{
	if (h->sink) {
		sink_append(h, p, n);
		return;
	}
	if (h->out_len + n > h->out_cap) {
		h->out_cap = (h->out_len + n) * 2 + 4096;
		h->out = realloc(h->out, h->out_cap);
		assert_non_null(h->out);
	}
	memcpy(h->out + h->out_len, p, n);
	h->out_len += n;
}

/* Take all pending output, @step bytes per advance (0 = all at once). */
static void h_drain_step(struct h *h, size_t step)
{
	while (nbd_session_has_output(h->s)) {
		struct iovec iov[8];
		int i, n = nbd_session_out_iov(h->s, iov, 8);
		size_t total = 0;

		assert_true(n > 0);
		for (i = 0; i < n; i++) {
			size_t len = iov[i].iov_len;
			assert_true(len > 0);
			if (step && total + len > step)
				len = step - total;
			out_append(h, iov[i].iov_base, len);
			total += len;
			if (step && total == step)
				break;
		}
		nbd_session_out_advance(h->s, total);
	}
	/* what the network server bounds: nothing queued is nothing counted */
	assert_int_equal(nbd_session_out_bytes(h->s), 0);
}

static void h_drain(struct h *h)
{
	h_drain_step(h, 0);
}

/* Feed everything (running the loop and draining when the session waits). */
static void h_feed(struct h *h, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	int rounds = 0;

	while (len) {
		size_t n = nbd_session_feed(h->s, p, len);
		p += n;
		len -= n;
		if (len) {
			assert_true(++rounds < 100000);
			h_run(h);
			h_drain(h);
		}
	}
}

static size_t h_avail(const struct h *h)
{
	return h->out_len - h->out_pos;
}

static const uint8_t *h_take(struct h *h, size_t n)
{
	const uint8_t *p;

	if (h_avail(h) < n)
		fail_msg("expected %zu more output bytes, have %zu", n,
			 h_avail(h));
	p = h->out + h->out_pos;
	h->out_pos += n;
	return p;
}

/* Run, drain, and then everything sent must have been consumed. */
static void h_settle(struct h *h)
{
	h_run(h);
	h_drain(h);
}

/* ---- client messages -------------------------------------------------- */

static void put_flags(struct h *h, uint32_t f)
{
	uint8_t b[4];

	nbd_put32(b, f);
	h_feed(h, b, 4);
}

static void send_opt(struct h *h, uint32_t opt, const void *data, uint32_t len)
{
	uint8_t hdr[16];

	nbd_put64(hdr, NBD_IHAVEOPT);
	nbd_put32(hdr + 8, opt);
	nbd_put32(hdr + 12, len);
	h_feed(h, hdr, 16);
	if (len)
		h_feed(h, data, len);
}

struct rep {
	uint32_t opt, type, len;
	const uint8_t *data;
};

static struct rep get_rep(struct h *h)
{
	const uint8_t *p;
	struct rep r;

	h_settle(h);
	p = h_take(h, 20);
	assert_int_equal(nbd_get64(p), NBD_REP_MAGIC);
	r.opt = nbd_get32(p + 8);
	r.type = nbd_get32(p + 12);
	r.len = nbd_get32(p + 16);
	r.data = h_take(h, r.len);
	return r;
}

static void expect_rep(struct h *h, uint32_t opt, uint32_t type)
{
	struct rep r = get_rep(h);

	assert_int_equal(r.opt, opt);
	assert_int_equal(r.type, type);
	if (type == NBD_REP_ACK)
		assert_int_equal(r.len, 0);
}

static void expect_greeting(struct h *h)
{
	const uint8_t *p;

	h_drain(h);
	p = h_take(h, 18);
	assert_int_equal(nbd_get64(p), NBD_MAGIC);
	assert_int_equal(nbd_get64(p + 8), NBD_IHAVEOPT);
	assert_int_equal(nbd_get16(p + 16),
			 NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	assert_int_equal(h_avail(h), 0);
}

/* Option data of INFO/GO: name + list of information requests. */
static size_t info_data(uint8_t *b, const char *name, const uint16_t *req,
			unsigned nreq)
{
	size_t n = strlen(name), i;

	nbd_put32(b, (uint32_t)n);
	memcpy(b + 4, name, n);
	nbd_put16(b + 4 + n, (uint16_t)nreq);
	for (i = 0; i < nreq; i++)
		nbd_put16(b + 6 + n + 2 * i, req[i]);
	return 6 + n + 2 * nreq;
}

/* Option data of LIST/SET_META_CONTEXT. */
static size_t meta_data(uint8_t *b, const char *name, const char *const *q,
			unsigned nq)
{
	size_t n = strlen(name), pos, i;

	nbd_put32(b, (uint32_t)n);
	memcpy(b + 4, name, n);
	nbd_put32(b + 4 + n, nq);
	pos = 8 + n;
	for (i = 0; i < nq; i++) {
		size_t ql = strlen(q[i]);
		nbd_put32(b + pos, (uint32_t)ql);
		memcpy(b + pos + 4, q[i], ql);
		pos += 4 + ql;
	}
	return pos;
}

struct info {
	uint64_t size;
	uint16_t flags;
	uint32_t bmin, bpref, bmax;
	char name[300], desc[300];
	bool got_export, got_block;
};

/* Read NBD_REP_INFO replies up to the final reply; returns its type. */
static uint32_t get_info(struct h *h, uint32_t opt, struct info *inf)
{
	memset(inf, 0, sizeof(*inf));
	for (;;) {
		struct rep r = get_rep(h);
		uint16_t t;

		assert_int_equal(r.opt, opt);
		if (r.type != NBD_REP_INFO)
			return r.type;
		assert_true(r.len >= 2);
		t = nbd_get16(r.data);
		switch (t) {
		case NBD_INFO_EXPORT:
			assert_int_equal(r.len, 12);
			inf->size = nbd_get64(r.data + 2);
			inf->flags = nbd_get16(r.data + 10);
			inf->got_export = true;
			break;
		case NBD_INFO_NAME:
			memcpy(inf->name, r.data + 2, r.len - 2);
			break;
		case NBD_INFO_DESCRIPTION:
			memcpy(inf->desc, r.data + 2, r.len - 2);
			break;
		case NBD_INFO_BLOCK_SIZE:
			assert_int_equal(r.len, 14);
			inf->bmin = nbd_get32(r.data + 2);
			inf->bpref = nbd_get32(r.data + 6);
			inf->bmax = nbd_get32(r.data + 10);
			inf->got_block = true;
			break;
		default:
			fail_msg("unknown info type %u", t);
		}
	}
}

enum { H_STRUCTURED = 1, H_META = 2 };

/* Greeting, flags, options, NBD_OPT_GO on @name; returns the flags. */
static uint16_t h_go(struct h *h, const char *name, unsigned what)
{
	static const uint16_t req[] = { NBD_INFO_BLOCK_SIZE };
	uint8_t b[512];
	struct info inf;
	size_t n;

	expect_greeting(h);
	put_flags(h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	if (what & H_STRUCTURED) {
		send_opt(h, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
		expect_rep(h, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ACK);
	}
	if (what & H_META) {
		const char *q[] = { NBD_META_BASE_ALLOCATION };
		struct rep r;

		n = meta_data(b, name, q, 1);
		send_opt(h, NBD_OPT_SET_META_CONTEXT, b, (uint32_t)n);
		r = get_rep(h);
		assert_int_equal(r.type, NBD_REP_META_CONTEXT);
		assert_int_equal(nbd_get32(r.data), NBD_META_ID_ALLOCATION);
		expect_rep(h, NBD_OPT_SET_META_CONTEXT, NBD_REP_ACK);
	}
	n = info_data(b, name, req, 1);
	send_opt(h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_info(h, NBD_OPT_GO, &inf), NBD_REP_ACK);
	assert_true(inf.got_export);
	assert_string_equal(nbd_session_export_name(h->s),
			    *name ? name : h->exp->units[0].name);
	assert_int_equal(h_avail(h), 0);
	return inf.flags;
}

/* A request header (28 bytes) at @p */
static void put_req(uint8_t *p, uint16_t flags, uint16_t type,
		    uint64_t cookie, uint64_t off, uint32_t len)
{
	nbd_put32(p, NBD_REQUEST_MAGIC);
	nbd_put16(p + 4, flags);
	nbd_put16(p + 6, type);
	nbd_put64(p + 8, cookie);
	nbd_put64(p + 16, off);
	nbd_put32(p + 24, len);
}

static void send_req(struct h *h, uint16_t flags, uint16_t type,
		     uint64_t cookie, uint64_t off, uint32_t len,
		     const void *payload)
{
	uint8_t r[28];

	put_req(r, flags, type, cookie, off, len);
	h_feed(h, r, 28);
	if (payload)
		h_feed(h, payload, len);
}

/* A simple reply: returns the error; @data gets @dlen bytes if error 0. */
static uint32_t get_simple(struct h *h, uint64_t cookie, void *data,
			   size_t dlen)
{
	const uint8_t *p;
	uint32_t err;

	h_settle(h);
	p = h_take(h, 16);
	assert_int_equal(nbd_get32(p), NBD_SIMPLE_REPLY_MAGIC);
	err = nbd_get32(p + 4);
	assert_int_equal(nbd_get64(p + 8), cookie);
	if (!err && dlen)
		memcpy(data, h_take(h, dlen), dlen);
	return err;
}

struct chunk {
	uint16_t flags, type;
	uint64_t cookie;
	uint32_t len;
	const uint8_t *data;
};

static struct chunk get_chunk(struct h *h)
{
	const uint8_t *p;
	struct chunk c;

	h_settle(h);
	p = h_take(h, 20);
	assert_int_equal(nbd_get32(p), NBD_STRUCTURED_REPLY_MAGIC);
	c.flags = nbd_get16(p + 4);
	c.type = nbd_get16(p + 6);
	c.cookie = nbd_get64(p + 8);
	c.len = nbd_get32(p + 16);
	c.data = h_take(h, c.len);
	return c;
}

/* A structured error chunk, final: returns the error. */
static uint32_t chunk_error(const struct chunk *c)
{
	uint16_t ml;

	assert_int_equal(c->type, NBD_REPLY_TYPE_ERROR);
	assert_int_equal(c->flags, NBD_REPLY_FLAG_DONE);
	assert_true(c->len >= 6);
	ml = nbd_get16(c->data + 4);
	assert_int_equal(c->len, 6 + ml);
	assert_true(ml > 0); /* a message for humans */
	return nbd_get32(c->data);
}

static void fill(struct h *h, uint64_t off, uint64_t len, uint64_t seed)
{
	uint8_t *b = malloc(len);

	th_fill(b, len, seed);
	assert_int_equal(bs_write_sync(h->dev, b, len, off), 0);
	free(b);
}

static bool dev_is_zero(struct h *h, uint64_t off, uint64_t len)
{
	uint8_t *b = malloc(len);
	bool z;

	assert_int_equal(bs_read_sync(h->dev, b, len, off), 0);
	z = th_is_zero(b, len);
	free(b);
	return z;
}

static bool dev_matches(struct h *h, uint64_t off, uint64_t len, uint64_t seed)
{
	uint8_t *b = malloc(len), *w = malloc(len);
	bool same;

	th_fill(w, len, seed);
	assert_int_equal(bs_read_sync(h->dev, b, len, off), 0);
	same = !memcmp(b, w, len);
	free(b);
	free(w);
	return same;
}

/* ---- handshake ---------------------------------------------------------- */

/* S: NBDMAGIC IHAVEOPT, handshake flags FIXED_NEWSTYLE|NO_ZEROES, 18 bytes. */
static void greeting(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	assert_true(nbd_session_wants_input(h.s));
	assert_false(nbd_session_finished(h.s));
	assert_null(nbd_session_export_name(h.s));
	h_fini(&h);
}

/*
 * nbd_session_out_bytes() is what the network server compares with its
 * output bound: it must follow partial sends and whole replies exactly
 * (a count that drifted up stopped reading a client for good).
 */
static void out_bytes_counts(void **state)
{
	struct iovec iov[8];
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	assert_int_equal(nbd_session_out_bytes(h.s), 18);	/* greeting */
	assert_true(nbd_session_out_iov(h.s, iov, 8) > 0);
	out_append(&h, iov[0].iov_base, 5);
	nbd_session_out_advance(h.s, 5);
	assert_int_equal(nbd_session_out_bytes(h.s), 13);
	h_drain(&h);
	h_go(&h, "vol0", 0);
	send_req(&h, 0, NBD_CMD_READ, 1, 0, 64 * KiB, NULL);
	h_run(&h);
	assert_int_equal(nbd_session_out_bytes(h.s), 16 + 64 * KiB);
	h_drain_step(&h, 1000);
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	h_fini(&h);
}

/* Unknown client flags: the server MUST drop the connection. */
static void client_flags_unknown(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | 0x4);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	assert_false(nbd_session_wants_input(h.s));
	assert_non_null(strstr(nbd_session_end_reason(h.s), "client flags"));
	h_fini(&h);
}

/* EXPORT_NAME: size, flags and 124 zeroes unless NO_ZEROES. */
static void export_name(void **state)
{
	static const uint32_t cflags[] = {
		NBD_FLAG_C_FIXED_NEWSTYLE,
		NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES,
		0, /* plain newstyle: EXPORT_NAME is its only option */
	};
	unsigned i;

	(void)state;
	for (i = 0; i < 3; i++) {
		bool nz = cflags[i] & NBD_FLAG_C_NO_ZEROES;
		uint8_t data[4096];
		const uint8_t *p;
		struct h h;
		uint16_t f;

		h_init(&h, "mem:8M", false);
		expect_greeting(&h);
		put_flags(&h, cflags[i]);
		send_opt(&h, NBD_OPT_EXPORT_NAME, "vol0", 4);
		h_settle(&h);
		assert_int_equal(h_avail(&h), nz ? 10 : 134);
		p = h_take(&h, 10);
		assert_int_equal(nbd_get64(p), 8 * MiB);
		f = nbd_get16(p + 8);
		assert_true(f & NBD_FLAG_HAS_FLAGS);
		assert_false(f & NBD_FLAG_SEND_DF); /* no structured replies */
		if (!nz)
			assert_true(th_is_zero(h_take(&h, 124), 124));
		assert_string_equal(nbd_session_export_name(h.s), "vol0");
		/* transmission: a simple read reply follows at once */
		fill(&h, 0, 4096, 7);
		send_req(&h, 0, NBD_CMD_READ, 99, 0, 4096, NULL);
		assert_int_equal(get_simple(&h, 99, data, 4096), 0);
		assert_true(dev_matches(&h, 0, 4096, 7));
		h_fini(&h);
	}
}

/* EXPORT_NAME with no data: the default export. */
static void export_name_default(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&h, NBD_OPT_EXPORT_NAME, NULL, 0);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 10);
	assert_string_equal(nbd_session_export_name(h.s), "vol0");
	h_fini(&h);
}

/* EXPORT_NAME cannot fail with an error: an unknown export closes. */
static void export_name_unknown(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE);
	send_opt(&h, NBD_OPT_EXPORT_NAME, "nope", 4);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	assert_null(nbd_session_export_name(h.s));
	h_fini(&h);
}

/* Without FIXED_NEWSTYLE, any option other than EXPORT_NAME closes. */
static void nonfixed_client(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, 0);
	send_opt(&h, NBD_OPT_LIST, NULL, 0);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	h_fini(&h);
}

/* LIST: one NBD_REP_SERVER per export, then ACK; data is invalid. */
static void opt_list(void **state)
{
	struct rep r;
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	add_export(&h, "second", "d", true, NULL);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&h, NBD_OPT_LIST, NULL, 0);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_SERVER);
	assert_int_equal(nbd_get32(r.data), 4);
	/* the description follows the name, as qemu-nbd sends it */
	assert_int_equal(r.len, 8 + strlen("test volume"));
	assert_memory_equal(r.data + 4, "vol0test volume", 15);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_SERVER);
	assert_int_equal(nbd_get32(r.data), 6);
	assert_int_equal(r.len, 10);
	assert_memory_equal(r.data + 4, "second", 6);
	expect_rep(&h, NBD_OPT_LIST, NBD_REP_ACK);
	send_opt(&h, NBD_OPT_LIST, "x", 1);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_ERR_INVALID);
	assert_true(r.len > 0);
	assert_false(nbd_session_finished(h.s));
	h_fini(&h);
}

/*
 * A target with two units: LIST names each unit (after the one-device
 * export), GO picks a unit by name and serves that unit's device with its
 * own readonly flag and description.
 */
static void units_list_go(void **state)
{
	static const uint16_t req[] = { NBD_INFO_DESCRIPTION };
	struct bs_export *t = NULL;
	struct bs_opts *o;
	struct info inf;
	uint8_t b[512];
	struct rep r;
	struct h h;
	size_t n;

	(void)state;
	h_init(&h, "mem:8M", false);
	th_dev(h.ctx, "d2", "mem:4M");
	assert_int_equal(bs_opts_new(&o), 0);
	assert_int_equal(bs_opts_set(o, "unit.a", "d", "t:1"), 0);
	assert_int_equal(bs_opts_set(o, "unit.b", "d2", "t:2"), 0);
	assert_int_equal(bs_opts_set(o, "unit.b.readonly", "1", "t:3"), 0);
	assert_int_equal(bs_opts_set(o, "unit.b.description", "scratch",
				     "t:4"), 0);
	assert_int_equal(bs_export_create(h.set, "t", test_export_type.name,
					  o, &t), 0);
	bs_opts_free(o);
	assert_int_equal(t->nunits, 2);

	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&h, NBD_OPT_LIST, NULL, 0);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_SERVER);
	assert_memory_equal(r.data + 4, "vol0", 4);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_SERVER);
	assert_int_equal(nbd_get32(r.data), 1);
	assert_int_equal(r.len, 5);
	assert_memory_equal(r.data + 4, "a", 1);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_SERVER);
	assert_int_equal(nbd_get32(r.data), 1);
	assert_int_equal(r.len, 5 + strlen("scratch"));
	assert_memory_equal(r.data + 4, "bscratch", 8);
	expect_rep(&h, NBD_OPT_LIST, NBD_REP_ACK);

	/* INFO on a: the 8M device, writable, no description */
	n = info_data(b, "a", req, 1);
	send_opt(&h, NBD_OPT_INFO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_INFO, &inf), NBD_REP_ACK);
	assert_int_equal(inf.size, 8 << 20);
	assert_false(inf.flags & NBD_FLAG_READ_ONLY);
	/* GO on b: the 4M device, read-only, its description */
	n = info_data(b, "b", req, 1);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &inf), NBD_REP_ACK);
	assert_int_equal(inf.size, 4 << 20);
	assert_true(inf.flags & NBD_FLAG_READ_ONLY);
	assert_string_equal(inf.desc, "scratch");
	assert_string_equal(nbd_session_export_name(h.s), "b");
	h_fini(&h);
}

/* INFO/GO: EXPORT, NAME, DESCRIPTION, BLOCK_SIZE; errors for bad input. */
static void opt_info_go(void **state)
{
	static const uint16_t req[] = { NBD_INFO_NAME, NBD_INFO_DESCRIPTION,
					NBD_INFO_BLOCK_SIZE, 0x7777 };
	uint8_t b[256];
	struct info inf;
	struct rep r;
	struct h h;
	size_t n;

	(void)state;
	h_init(&h, "mem:64M,logical_block_size=4096", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);

	/* INFO on the default export "" names it and stays in handshake */
	n = info_data(b, "", req, 4);
	send_opt(&h, NBD_OPT_INFO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_INFO, &inf), NBD_REP_ACK);
	assert_true(inf.got_export && inf.got_block);
	assert_int_equal(inf.size, 64 * MiB);
	assert_string_equal(inf.name, "vol0");
	assert_string_equal(inf.desc, "test volume");
	/* byte granular: the core read-modify-writes partial blocks */
	assert_int_equal(inf.bmin, 1);
	assert_int_equal(inf.bpref, 4096);
	assert_int_equal(inf.bmax, NBD_MAX_PAYLOAD);
	assert_null(nbd_session_export_name(h.s));

	/* unknown export */
	n = info_data(b, "nope", req, 1);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &inf), NBD_REP_ERR_UNKNOWN);
	assert_false(inf.got_export);
	/* too short, name beyond the data, count not matching the length */
	send_opt(&h, NBD_OPT_GO, b, 5);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	n = info_data(b, "vol0", NULL, 0);
	nbd_put32(b, 200);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	n = info_data(b, "vol0", req, 2);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n - 1);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	/* a NUL in the name */
	n = info_data(b, "vo\0l", NULL, 0);
	memcpy(b + 4, "vo\0l", 4);
	nbd_put32(b, 4);
	nbd_put16(b + 8, 0);
	send_opt(&h, NBD_OPT_GO, b, 10);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	assert_null(nbd_session_export_name(h.s));

	/* GO without information requests: EXPORT and BLOCK_SIZE anyway */
	n = info_data(b, "vol0", NULL, 0);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &inf), NBD_REP_ACK);
	assert_true(inf.got_export && inf.got_block);
	assert_string_equal(inf.name, "");
	assert_string_equal(inf.desc, "");
	assert_string_equal(nbd_session_export_name(h.s), "vol0");
	assert_int_equal(h_avail(&h), 0);
	/* transmission now: an option header is a bad request magic */
	memset(b, 0, 28);
	nbd_put64(b, NBD_IHAVEOPT);
	nbd_put32(b + 8, NBD_OPT_LIST);
	assert_int_equal(nbd_session_feed(h.s, b, 28), 28);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	(void)r;
	h_fini(&h);
}

/* A session on a fresh "mem:8M" past the greeting and client flags. */
static void h_negotiating(struct h *h)
{
	h_init(h, "mem:8M", false);
	expect_greeting(h);
	put_flags(h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
}

/* INFO with @b (offering fast zero), then the knob turns fast zero off. */
static void info_then_knob_off(struct h *h, const uint8_t *b, size_t n,
			       struct info *inf)
{
	send_opt(h, NBD_OPT_INFO, b, (uint32_t)n);
	assert_int_equal(get_info(h, NBD_OPT_INFO, inf), NBD_REP_ACK);
	assert_true(inf->flags & NBD_FLAG_SEND_FAST_ZERO);
	assert_int_equal(bs_attr_store(h->dev, "queue/write_zeroes_unmap", "0"),
			 0);
}

/*
 * INFO then GO with the same data and no option between: the server MUST
 * give the same information, flags included, even when the device's
 * capabilities changed in between (here the knob turns fast zero off).
 * With an option between, or other data, the answer is fresh.
 */
static void info_then_go_same(void **state)
{
	static const uint16_t req[] = { NBD_INFO_BLOCK_SIZE };
	uint8_t b[64], b0[64];
	struct info inf, go;
	struct h h;
	size_t n = info_data(b, "vol0", req, 1);
	size_t n0 = info_data(b0, "vol0", NULL, 0);

	(void)state;
	h_negotiating(&h);
	info_then_knob_off(&h, b, n, &inf);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &go), NBD_REP_ACK);
	assert_int_equal(go.flags, inf.flags);
	assert_int_equal(go.size, inf.size);
	assert_int_equal(go.bmin, inf.bmin);
	assert_int_equal(go.bpref, inf.bpref);
	assert_int_equal(go.bmax, inf.bmax);
	assert_int_equal(h.s->tflags, inf.flags); /* what the session uses */
	/* offered and now off: refused fast, as after any later change */
	send_req(&h, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 1, 0, 4096,
		 NULL);
	assert_int_equal(get_simple(&h, 1, NULL, 0), NBD_ENOTSUP);
	h_fini(&h);

	/* an option in between: the GO's answer is fresh */
	h_negotiating(&h);
	info_then_knob_off(&h, b, n, &inf);
	send_opt(&h, 0x7777, NULL, 0);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_UNSUP);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &go), NBD_REP_ACK);
	assert_false(go.flags & NBD_FLAG_SEND_FAST_ZERO);
	h_fini(&h);

	/* other data (no information requests): fresh too */
	h_negotiating(&h);
	info_then_knob_off(&h, b, n, &inf);
	send_opt(&h, NBD_OPT_GO, b0, (uint32_t)n0);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &go), NBD_REP_ACK);
	assert_false(go.flags & NBD_FLAG_SEND_FAST_ZERO);
	h_fini(&h);
}

/* Transmission flags follow the device and the export, at negotiation. */
static void transmission_flags(void **state)
{
	const uint16_t always = NBD_FLAG_HAS_FLAGS | NBD_FLAG_SEND_FLUSH |
				NBD_FLAG_CAN_MULTI_CONN | NBD_FLAG_SEND_CACHE;
	const uint16_t rw = NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_WRITE_ZEROES;
	struct h h;
	uint16_t f;

	(void)state;
	/* mem unmaps on write-zeroes: fast zero, trim */
	h_init(&h, "mem:8M", false);
	f = h_go(&h, "vol0", 0);
	assert_int_equal(f, always | rw | NBD_FLAG_SEND_TRIM |
				    NBD_FLAG_SEND_FAST_ZERO);
	h_fini(&h);

	/* structured replies add DF */
	h_init(&h, "mem:8M", false);
	f = h_go(&h, "vol0", H_STRUCTURED);
	assert_int_equal(f, always | rw | NBD_FLAG_SEND_TRIM |
				    NBD_FLAG_SEND_FAST_ZERO | NBD_FLAG_SEND_DF);
	h_fini(&h);

	/* zeroes = write: write-zeroes still offered (it writes), fast not */
	h_init(&h, "mem:8M,zeroes=write", false);
	f = h_go(&h, "vol0", 0);
	assert_int_equal(f, always | rw | NBD_FLAG_SEND_TRIM);
	h_fini(&h);

	/* zeroes = none: the core falls back, WRITE_ZEROES stays */
	h_init(&h, "mem:8M,zeroes=none,max_discard=0", false);
	f = h_go(&h, "vol0", 0);
	assert_int_equal(f, always | rw);
	h_fini(&h);

	/* the knob off before the connection: no fast zero */
	h_init(&h, "mem:8M", false);
	assert_int_equal(bs_attr_store(h.dev, "queue/write_zeroes_unmap", "0"),
			 0);
	f = h_go(&h, "vol0", 0);
	assert_false(f & NBD_FLAG_SEND_FAST_ZERO);
	assert_true(f & NBD_FLAG_SEND_WRITE_ZEROES);
	h_fini(&h);

	/* read-only: READ_ONLY and nothing that writes */
	h_init(&h, "mem:8M", true);
	f = h_go(&h, "vol0", 0);
	assert_int_equal(f, always | NBD_FLAG_READ_ONLY);
	h_fini(&h);
}

/* STRUCTURED_REPLY: ACK; with data INVALID (and then not negotiated). */
static void opt_structured(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&h, NBD_OPT_STRUCTURED_REPLY, "x", 1);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	send_opt(&h, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	expect_rep(&h, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ACK);
	h_fini(&h);
}

/* LIST/SET_META_CONTEXT with base:allocation, wildcards, bad input. */
static void opt_meta_context(void **state)
{
	const char *alloc[] = { NBD_META_BASE_ALLOCATION };
	const char *base[] = { "base:" };
	const char *other[] = { "x-foo:bar", "qemu:dirty-bitmap:a" };
	uint8_t b[512];
	struct rep r;
	struct h h;
	size_t n;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);

	/* SET before structured replies: INVALID */
	n = meta_data(b, "vol0", alloc, 1);
	send_opt(&h, NBD_OPT_SET_META_CONTEXT, b, (uint32_t)n);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	send_opt(&h, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	expect_rep(&h, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ACK);

	/* LIST, no query: everything there is; id 0 */
	n = meta_data(b, "vol0", NULL, 0);
	send_opt(&h, NBD_OPT_LIST_META_CONTEXT, b, (uint32_t)n);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_META_CONTEXT);
	assert_int_equal(r.len, 4 + strlen(NBD_META_BASE_ALLOCATION));
	assert_int_equal(nbd_get32(r.data), 0);
	assert_memory_equal(r.data + 4, NBD_META_BASE_ALLOCATION,
			    strlen(NBD_META_BASE_ALLOCATION));
	expect_rep(&h, NBD_OPT_LIST_META_CONTEXT, NBD_REP_ACK);
	/* LIST "base:" is a wildcard */
	n = meta_data(b, "vol0", base, 1);
	send_opt(&h, NBD_OPT_LIST_META_CONTEXT, b, (uint32_t)n);
	assert_int_equal(get_rep(&h).type, NBD_REP_META_CONTEXT);
	expect_rep(&h, NBD_OPT_LIST_META_CONTEXT, NBD_REP_ACK);
	/* unknown namespaces are ignored: only ACK */
	n = meta_data(b, "vol0", other, 2);
	send_opt(&h, NBD_OPT_LIST_META_CONTEXT, b, (uint32_t)n);
	expect_rep(&h, NBD_OPT_LIST_META_CONTEXT, NBD_REP_ACK);
	/* query beyond the data; trailing bytes; unknown export */
	n = meta_data(b, "vol0", alloc, 1);
	send_opt(&h, NBD_OPT_LIST_META_CONTEXT, b, (uint32_t)n - 1);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	send_opt(&h, NBD_OPT_LIST_META_CONTEXT, b, (uint32_t)n + 3);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_INVALID);
	n = meta_data(b, "nope", alloc, 1);
	send_opt(&h, NBD_OPT_SET_META_CONTEXT, b, (uint32_t)n);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_UNKNOWN);

	/* SET "base:" selects nothing; zero queries select nothing */
	n = meta_data(b, "vol0", base, 1);
	send_opt(&h, NBD_OPT_SET_META_CONTEXT, b, (uint32_t)n);
	expect_rep(&h, NBD_OPT_SET_META_CONTEXT, NBD_REP_ACK);
	n = meta_data(b, "vol0", NULL, 0);
	send_opt(&h, NBD_OPT_SET_META_CONTEXT, b, (uint32_t)n);
	expect_rep(&h, NBD_OPT_SET_META_CONTEXT, NBD_REP_ACK);
	/* SET base:allocation: id 1 */
	n = meta_data(b, "vol0", alloc, 1);
	send_opt(&h, NBD_OPT_SET_META_CONTEXT, b, (uint32_t)n);
	r = get_rep(&h);
	assert_int_equal(r.type, NBD_REP_META_CONTEXT);
	assert_int_equal(nbd_get32(r.data), NBD_META_ID_ALLOCATION);
	expect_rep(&h, NBD_OPT_SET_META_CONTEXT, NBD_REP_ACK);
	h_fini(&h);
}

/* ABORT: ACK, then the session ends. */
static void opt_abort(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE);
	send_opt(&h, NBD_OPT_ABORT, "ignored", 7);
	expect_rep(&h, NBD_OPT_ABORT, NBD_REP_ACK);
	assert_true(nbd_session_finished(h.s));
	assert_false(nbd_session_wants_input(h.s));
	assert_int_equal(nbd_session_feed(h.s, (const uint8_t *)"x", 1), 0);
	h_fini(&h);
}

/* Unknown options and STARTTLS: NBD_REP_ERR_UNSUP, the session goes on. */
static void opt_unknown(void **state)
{
	uint32_t opts[] = { 0, 4, NBD_OPT_STARTTLS, NBD_OPT_EXTENDED_HEADERS,
			    42, 0xffffffffu };
	unsigned i;
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	for (i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		struct rep r;
		send_opt(&h, opts[i], "abc", 3);
		r = get_rep(&h);
		assert_int_equal(r.opt, opts[i]);
		assert_int_equal(r.type, NBD_REP_ERR_UNSUP);
		assert_true(r.len > 0);
	}
	send_opt(&h, NBD_OPT_LIST, NULL, 0);
	assert_int_equal(get_rep(&h).type, NBD_REP_SERVER);
	expect_rep(&h, NBD_OPT_LIST, NBD_REP_ACK);
	h_fini(&h);
}

/* An option beyond the limit is read past and answered TOO_BIG. */
static void opt_oversized(void **state)
{
	uint32_t len = NBD_MAX_OPTION + 1;
	uint8_t *junk = calloc(1, len);
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&h, NBD_OPT_GO, junk, len);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_TOO_BIG);
	/* still in sync: a GO works */
	{
		uint8_t b[64];
		struct info inf;
		size_t n = info_data(b, "vol0", NULL, 0);
		send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
		assert_int_equal(get_info(&h, NBD_OPT_GO, &inf), NBD_REP_ACK);
	}
	h_fini(&h);

	/* EXPORT_NAME cannot answer an error: close */
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE);
	send_opt(&h, NBD_OPT_EXPORT_NAME, junk, 16);
	h_settle(&h);
	assert_true(nbd_session_finished(h.s));
	h_fini(&h);
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE);
	{
		uint8_t hdr[16];
		nbd_put64(hdr, NBD_IHAVEOPT);
		nbd_put32(hdr + 8, NBD_OPT_EXPORT_NAME);
		nbd_put32(hdr + 12, len);
		assert_int_equal(nbd_session_feed(h.s, hdr, 16), 16);
	}
	assert_true(nbd_session_finished(h.s));
	assert_int_equal(nbd_session_feed(h.s, junk, 100), 0);
	h_fini(&h);
	free(junk);
}

/* Wrong option magic: close. */
static void opt_bad_magic(void **state)
{
	uint8_t hdr[16];
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE);
	nbd_put64(hdr, NBD_IHAVEOPT ^ 1);
	nbd_put32(hdr + 8, NBD_OPT_LIST);
	nbd_put32(hdr + 12, 0);
	assert_int_equal(nbd_session_feed(h.s, hdr, 16), 16);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	assert_non_null(strstr(nbd_session_end_reason(h.s), "magic"));
	h_fini(&h);
}

/* A client that never reads option replies is stopped, bounded. */
static void opt_replies_bounded(void **state)
{
	uint8_t hdr[16];
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE);
	nbd_put64(hdr, NBD_IHAVEOPT);
	nbd_put32(hdr + 8, NBD_OPT_LIST);
	nbd_put32(hdr + 12, 0);
	for (i = 0; i < 100000; i++)
		if (nbd_session_feed(h.s, hdr, 16) != 16)
			break;
	assert_true(i < 100000);
	assert_false(nbd_session_wants_input(h.s));
	h_drain(&h);
	assert_true(nbd_session_wants_input(h.s));
	assert_int_equal(nbd_session_feed(h.s, hdr, 16), 16);
	h_fini(&h);
}

/* ---- transmission ------------------------------------------------------- */

/* WRITE (+FUA) then READ, simple replies; the device holds the bytes. */
static void rw_simple(void **state)
{
	uint8_t *w = malloc(256 * KiB), *r = malloc(256 * KiB);
	struct h h;

	(void)state;
	h_init(&h, "mem:8M,write_cache=1", false);
	h_go(&h, "vol0", 0);
	th_fill(w, 256 * KiB, 1);
	send_req(&h, 0, NBD_CMD_WRITE, 1, 4096, 256 * KiB, w);
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	assert_true(dev_matches(&h, 4096, 256 * KiB, 1));
	th_fill(w, 4096, 2);
	send_req(&h, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 2, 0, 4096, w);
	assert_int_equal(get_simple(&h, 2, NULL, 0), 0);
	assert_true(dev_matches(&h, 0, 4096, 2));
	/* write cache on: FUA reached the device as a flush or FUA */
	assert_true(h.dev->stats.ops[BS_OP_FLUSH] >= 1);
	send_req(&h, 0, NBD_CMD_READ, 3, 0, 4096, NULL);
	assert_int_equal(get_simple(&h, 3, r, 4096), 0);
	assert_memory_equal(r, w, 4096);
	send_req(&h, 0, NBD_CMD_FLUSH, 4, 0, 0, NULL);
	assert_int_equal(get_simple(&h, 4, NULL, 0), 0);
	send_req(&h, 0, NBD_CMD_CACHE, 5, 0, 64 * KiB, NULL);
	assert_int_equal(get_simple(&h, 5, NULL, 0), 0);
	assert_int_equal(h_avail(&h), 0);
	assert_int_equal(nbd_session_stats(h.s)->bytes_written,
			 256 * KiB + 4096);
	assert_int_equal(nbd_session_stats(h.s)->bytes_read, 4096);
	h_fini(&h);
	free(w);
	free(r);
}

/* Structured replies: OFFSET_DATA, one final chunk; errors as chunks. */
static void rw_structured(void **state)
{
	struct chunk c;
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", H_STRUCTURED);
	fill(&h, 64 * KiB, 128 * KiB, 3);
	send_req(&h, NBD_CMD_FLAG_DF, NBD_CMD_READ, 7, 64 * KiB, 128 * KiB,
		 NULL);
	c = get_chunk(&h);
	assert_int_equal(c.cookie, 7);
	assert_int_equal(c.type, NBD_REPLY_TYPE_OFFSET_DATA);
	assert_int_equal(c.flags, NBD_REPLY_FLAG_DONE);
	assert_int_equal(c.len, 8 + 128 * KiB);
	assert_int_equal(nbd_get64(c.data), 64 * KiB);
	{
		uint8_t *w = malloc(128 * KiB);
		th_fill(w, 128 * KiB, 3);
		assert_memory_equal(c.data + 8, w, 128 * KiB);
		free(w);
	}
	/* a read error is a chunk, never a simple reply */
	send_req(&h, 0, NBD_CMD_READ, 8, 8 * MiB, 4096, NULL);
	c = get_chunk(&h);
	assert_int_equal(c.cookie, 8);
	assert_int_equal(chunk_error(&c), NBD_EINVAL);
	/* read output drained a byte at a time is the same stream */
	send_req(&h, 0, NBD_CMD_READ, 9, 64 * KiB, 4096, NULL);
	h_run(&h);
	h_drain_step(&h, 1);
	c = get_chunk(&h);
	assert_int_equal(c.cookie, 9);
	assert_int_equal(c.len, 8 + 4096);
	for (i = 0; i < 3; i++) {
		send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 10 + i, 0, 4096, NULL);
		/* non-read replies without payload: simple is allowed */
		assert_int_equal(get_simple(&h, 10 + i, NULL, 0), 0);
	}
	h_fini(&h);
}

/* TRIM frees chunks and reads back zero. */
static void trim(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:8M,chunk=64K", false);
	h_go(&h, "vol0", 0);
	fill(&h, 0, 512 * KiB, 4);
	fill(&h, 512 * KiB, 512 * KiB, 5);
	assert_int_equal(bs_dev_allocated(h.dev), 1 * MiB);
	send_req(&h, NBD_CMD_FLAG_FUA, NBD_CMD_TRIM, 1, 0, 512 * KiB, NULL);
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	assert_int_equal(bs_dev_allocated(h.dev), 512 * KiB);
	assert_true(dev_is_zero(&h, 0, 512 * KiB));
	assert_true(dev_matches(&h, 512 * KiB, 512 * KiB, 5));
	h_fini(&h);
}

/* WRITE_ZEROES may unmap; NO_HOLE keeps allocation; FAST_ZERO unmaps. */
static void write_zeroes(void **state)
{
	uint64_t writes;
	struct h h;

	(void)state;
	h_init(&h, "mem:8M,chunk=64K", false);
	h_go(&h, "vol0", 0);
	fill(&h, 0, 2 * MiB, 5);
	writes = h.dev->stats.ops[BS_OP_WRITE];
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 1, 0, 512 * KiB, NULL);
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	assert_true(dev_is_zero(&h, 0, 512 * KiB));
	assert_int_equal(bs_dev_allocated(h.dev), 2 * MiB - 512 * KiB);
	/* NO_HOLE -> NOUNMAP: zeroes, blocks stay allocated */
	send_req(&h, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE_ZEROES, 2, 512 * KiB,
		 512 * KiB, NULL);
	assert_int_equal(get_simple(&h, 2, NULL, 0), 0);
	assert_true(dev_is_zero(&h, 512 * KiB, 512 * KiB));
	assert_int_equal(bs_dev_allocated(h.dev), 2 * MiB - 512 * KiB);
	/* NO_HOLE over a hole allocates */
	send_req(&h, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA,
		 NBD_CMD_WRITE_ZEROES, 3, 4 * MiB, 128 * KiB, NULL);
	assert_int_equal(get_simple(&h, 3, NULL, 0), 0);
	assert_int_equal(bs_dev_allocated(h.dev), 2 * MiB - 384 * KiB);
	/* FAST_ZERO on a capable device: done by unmapping */
	send_req(&h, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 4, 1 * MiB,
		 1 * MiB, NULL);
	assert_int_equal(get_simple(&h, 4, NULL, 0), 0);
	assert_true(dev_is_zero(&h, 1 * MiB, 1 * MiB));
	assert_int_equal(bs_dev_allocated(h.dev), 640 * KiB);
	/* none of it wrote data buffers */
	assert_int_equal(h.dev->stats.ops[BS_OP_WRITE], writes);
	/* unaligned to a chunk: partial chunks zeroed in place */
	fill(&h, 0, 64 * KiB, 6);
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 5, 512, 1024, NULL);
	assert_int_equal(get_simple(&h, 5, NULL, 0), 0);
	assert_true(dev_is_zero(&h, 512, 1024));
	assert_false(dev_is_zero(&h, 0, 512));
	h_fini(&h);
}

/* FAST_ZERO where zeroing would write: refused at once, nothing written. */
static void fast_zero_incapable(void **state)
{
	struct h h;
	uint16_t f;

	(void)state;
	/* not advertised (zeroes = write): the flag is invalid -> EINVAL */
	h_init(&h, "mem:8M,zeroes=write", false);
	f = h_go(&h, "vol0", 0);
	assert_false(f & NBD_FLAG_SEND_FAST_ZERO);
	fill(&h, 0, 1 * MiB, 8);
	memset(&h.dev->stats, 0, sizeof(h.dev->stats));
	send_req(&h, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 1, 0,
		 1 * MiB, NULL);
	assert_int_equal(get_simple(&h, 1, NULL, 0), NBD_EINVAL);
	assert_int_equal(h.dev->stats.ops[BS_OP_WRITE], 0);
	assert_int_equal(h.dev->stats.ops[BS_OP_WRITE_ZEROES], 0);
	assert_true(dev_matches(&h, 0, 1 * MiB, 8));
	/* without the flag it is served (by writing) */
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 2, 0, 1 * MiB, NULL);
	assert_int_equal(get_simple(&h, 2, NULL, 0), 0);
	assert_true(dev_is_zero(&h, 0, 1 * MiB));
	h_fini(&h);

	/* advertised, then the knob goes off: ENOTSUP, nothing written */
	h_init(&h, "mem:8M", false);
	f = h_go(&h, "vol0", H_STRUCTURED);
	assert_true(f & NBD_FLAG_SEND_FAST_ZERO);
	fill(&h, 0, 1 * MiB, 9);
	assert_int_equal(bs_attr_store(h.dev, "queue/write_zeroes_unmap", "0"),
			 0);
	memset(&h.dev->stats, 0, sizeof(h.dev->stats));
	send_req(&h, NBD_CMD_FLAG_FAST_ZERO | NBD_CMD_FLAG_NO_HOLE,
		 NBD_CMD_WRITE_ZEROES, 3, 0, 1 * MiB, NULL);
	{
		struct chunk c = get_chunk(&h);
		assert_int_equal(c.cookie, 3);
		assert_int_equal(chunk_error(&c), NBD_ENOTSUP);
	}
	assert_int_equal(h.dev->stats.ops[BS_OP_WRITE], 0);
	assert_int_equal(h.dev->stats.ops[BS_OP_WRITE_ZEROES], 0);
	assert_true(dev_matches(&h, 0, 1 * MiB, 9));
	/* ... and back on: served again on this connection */
	assert_int_equal(bs_attr_store(h.dev, "queue/write_zeroes_unmap", "1"),
			 0);
	send_req(&h, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 4, 0,
		 1 * MiB, NULL);
	assert_int_equal(get_simple(&h, 4, NULL, 0), 0);
	assert_true(dev_is_zero(&h, 0, 1 * MiB));
	h_fini(&h);

	/* a device that claims write-zeroes and refuses it at run time */
	h_init(&h, "mem:8M,broken_write_zeroes=1", false);
	f = h_go(&h, "vol0", 0);
	assert_true(f & NBD_FLAG_SEND_FAST_ZERO);
	fill(&h, 0, 1 * MiB, 10);
	send_req(&h, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 5, 0,
		 1 * MiB, NULL);
	assert_int_equal(get_simple(&h, 5, NULL, 0), NBD_ENOTSUP);
	assert_true(dev_matches(&h, 0, 1 * MiB, 10));
	h_fini(&h);
}

struct ext {
	uint32_t len, flags;
};

static unsigned get_extents(struct h *h, uint64_t cookie, struct ext *e,
			    unsigned max)
{
	struct chunk c = get_chunk(h);
	unsigned i, n;

	assert_int_equal(c.cookie, cookie);
	assert_int_equal(c.type, NBD_REPLY_TYPE_BLOCK_STATUS);
	assert_int_equal(c.flags, NBD_REPLY_FLAG_DONE);
	assert_true(c.len >= 12 && (c.len - 4) % 8 == 0);
	assert_int_equal(nbd_get32(c.data), NBD_META_ID_ALLOCATION);
	n = (c.len - 4) / 8;
	assert_true(n <= max);
	for (i = 0; i < n; i++) {
		e[i].len = nbd_get32(c.data + 4 + 8 * i);
		e[i].flags = nbd_get32(c.data + 8 + 8 * i);
		assert_true(e[i].len > 0);
	}
	return n;
}

/* BLOCK_STATUS: holes read as zero from the chunk map; REQ_ONE. */
static void block_status(void **state)
{
	struct ext e[16];
	struct h h;
	unsigned n;

	(void)state;
	h_init(&h, "mem:8M,chunk=64K", false);
	h_go(&h, "vol0", H_STRUCTURED | H_META);
	fill(&h, 128 * KiB, 64 * KiB, 1);
	fill(&h, 320 * KiB, 128 * KiB, 2);
	send_req(&h, 0, NBD_CMD_BLOCK_STATUS, 1, 0, 1 * MiB, NULL);
	n = get_extents(&h, 1, e, 16);
	assert_int_equal(n, 5);
	assert_int_equal(e[0].len, 128 * KiB);
	assert_int_equal(e[0].flags, NBD_STATE_HOLE | NBD_STATE_ZERO);
	assert_int_equal(e[1].len, 64 * KiB);
	assert_int_equal(e[1].flags, 0);
	assert_int_equal(e[2].len, 128 * KiB);
	assert_int_equal(e[2].flags, NBD_STATE_HOLE | NBD_STATE_ZERO);
	assert_int_equal(e[3].len, 128 * KiB);
	assert_int_equal(e[3].flags, 0);
	assert_int_equal(e[4].len, 1 * MiB - 448 * KiB);
	assert_int_equal(e[4].flags, NBD_STATE_HOLE | NBD_STATE_ZERO);
	/* REQ_ONE: one extent, within the request */
	send_req(&h, NBD_CMD_FLAG_REQ_ONE, NBD_CMD_BLOCK_STATUS, 2, 4096,
		 64 * KiB, NULL);
	n = get_extents(&h, 2, e, 1);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].len, 64 * KiB);
	assert_int_equal(e[0].flags, NBD_STATE_HOLE | NBD_STATE_ZERO);
	/* unaligned to chunks: clipped to the request */
	send_req(&h, 0, NBD_CMD_BLOCK_STATUS, 3, 130 * KiB, 4 * KiB, NULL);
	n = get_extents(&h, 3, e, 16);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].len, 4 * KiB);
	assert_int_equal(e[0].flags, 0);
	/* after write-zeroes the range is a hole again */
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 4, 128 * KiB, 64 * KiB, NULL);
	assert_int_equal(get_simple(&h, 4, NULL, 0), 0);
	send_req(&h, 0, NBD_CMD_BLOCK_STATUS, 5, 0, 320 * KiB, NULL);
	n = get_extents(&h, 5, e, 16);
	assert_int_equal(n, 1);
	assert_int_equal(e[0].len, 320 * KiB);
	/* beyond the end: EINVAL */
	send_req(&h, 0, NBD_CMD_BLOCK_STATUS, 6, 8 * MiB - 4096, 8192, NULL);
	{
		struct chunk c = get_chunk(&h);
		assert_int_equal(chunk_error(&c), NBD_EINVAL);
	}
	h_fini(&h);

	/* 4K blocks: descriptors are multiples of the minimum block size */
	h_init(&h, "mem:8M,chunk=4K,logical_block_size=4096", false);
	h_go(&h, "vol0", H_STRUCTURED | H_META);
	fill(&h, 8 * KiB, 4 * KiB, 1);
	send_req(&h, 0, NBD_CMD_BLOCK_STATUS, 7, 0, 64 * KiB, NULL);
	n = get_extents(&h, 7, e, 16);
	assert_int_equal(n, 3);
	assert_int_equal(e[0].len, 8 * KiB);
	assert_int_equal(e[1].len, 4 * KiB);
	assert_int_equal(e[1].flags, 0);
	assert_int_equal(e[2].len, 52 * KiB);
	h_fini(&h);

	/* no context negotiated: EINVAL */
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", H_STRUCTURED);
	send_req(&h, 0, NBD_CMD_BLOCK_STATUS, 8, 0, 4096, NULL);
	{
		struct chunk c = get_chunk(&h);
		assert_int_equal(chunk_error(&c), NBD_EINVAL);
	}
	h_fini(&h);
}

/* A context set for another export does not carry over to GO. */
static void block_status_other_export(void **state)
{
	const char *alloc[] = { NBD_META_BASE_ALLOCATION };
	uint8_t b[256];
	struct info inf;
	struct h h;
	size_t n;

	(void)state;
	h_init(&h, "mem:8M", false);
	add_export(&h, "other", "d", false, NULL);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES);
	send_opt(&h, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	expect_rep(&h, NBD_OPT_STRUCTURED_REPLY, NBD_REP_ACK);
	n = meta_data(b, "other", alloc, 1);
	send_opt(&h, NBD_OPT_SET_META_CONTEXT, b, (uint32_t)n);
	assert_int_equal(get_rep(&h).type, NBD_REP_META_CONTEXT);
	expect_rep(&h, NBD_OPT_SET_META_CONTEXT, NBD_REP_ACK);
	n = info_data(b, "vol0", NULL, 0);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &inf), NBD_REP_ACK);
	send_req(&h, 0, NBD_CMD_BLOCK_STATUS, 1, 0, 4096, NULL);
	{
		struct chunk c = get_chunk(&h);
		assert_int_equal(chunk_error(&c), NBD_EINVAL);
	}
	h_fini(&h);
}

struct bad {
	uint16_t flags, type;
	uint64_t off;
	uint32_t len;
	uint32_t err;
};

/* Bad requests get the protocol's error, and the stream stays in sync. */
struct errcase {
	uint16_t flags, type;
	uint32_t want;
};

/*
 * Each request of @c (4 KiB at 0; FLUSH 0+0) on a device from @spec that
 * fails it, with simple and then structured replies: the NBD error must
 * be @want, and the session goes on.
 */
static void expect_device_errors(const char *spec, const struct errcase *c,
				 unsigned n)
{
	uint8_t w[4096];
	unsigned i, st;

	memset(w, 0x5a, sizeof(w));
	for (st = 0; st < 2; st++) {
		struct h h;

		h_init(&h, spec, false);
		h_go(&h, "vol0", st ? H_STRUCTURED : 0);
		for (i = 0; i < n; i++) {
			bool flush = c[i].type == NBD_CMD_FLUSH;
			uint32_t err;

			send_req(&h, c[i].flags, c[i].type, 10 + i, 0,
				 flush ? 0 : 4096,
				 c[i].type == NBD_CMD_WRITE ? w : NULL);
			if (st) {
				struct chunk k = get_chunk(&h);
				assert_int_equal(k.cookie, 10 + i);
				err = chunk_error(&k);
			} else {
				err = get_simple(&h, 10 + i, NULL, 0);
			}
			if (err != c[i].want)
				fail_msg("%s case %u (type %u flags 0x%x): got "
					 "%u, want %u", spec, i, c[i].type,
					 c[i].flags, err, c[i].want);
			assert_false(nbd_session_finished(h.s));
		}
		h_fini(&h);
	}
}

/*
 * NBD_ENOTSUP is the answer to a FAST_ZERO the server cannot do fast and
 * to nothing else: with SEND_FAST_ZERO offered, a WRITE_ZEROES without
 * the flag MUST NOT fail with it, and no other command should. A device
 * that says EOPNOTSUPP is an I/O failure (NBD_EIO) for the client.
 */
static void enotsup_only_fast_zero(void **state)
{
	static const struct errcase c[] = {
		{ 0, NBD_CMD_READ, NBD_EIO },
		{ 0, NBD_CMD_WRITE, NBD_EIO },
		{ NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, NBD_EIO },
		{ 0, NBD_CMD_FLUSH, NBD_EIO },
		{ 0, NBD_CMD_WRITE_ZEROES, NBD_EIO },
		{ NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE_ZEROES, NBD_EIO },
		/* offered (else EINVAL), and refused as not fast */
		{ NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, NBD_ENOTSUP },
	};

	(void)state;
	expect_device_errors("error:8M,errno=EOPNOTSUPP,ops=all,write_cache=1",
			     c, sizeof(c) / sizeof(c[0]));
}

/*
 * NBD_EOVERFLOW is the server's own answer to a READ too long to send in
 * one piece (or a payload-free command beyond the maximum), and
 * NBD_ESHUTDOWN tells the client the server is stopping (the client MUST
 * then disconnect). A device failing with EOVERFLOW or ESHUTDOWN (a
 * transport of its own that went away) is an I/O failure instead.
 */
static void device_errors_not_the_servers(void **state)
{
	static const struct errcase c[] = {
		{ 0, NBD_CMD_READ, NBD_EIO },
		{ 0, NBD_CMD_WRITE, NBD_EIO },
		{ 0, NBD_CMD_WRITE_ZEROES, NBD_EIO },
	};

	(void)state;
	expect_device_errors("error:8M,errno=75,ops=all", c, 3);	/* EOVERFLOW */
	expect_device_errors("error:8M,errno=108,ops=all", c, 3); /* ESHUTDOWN */
}

static void bad_requests(void **state)
{
	static const struct bad simple[] = {
		{ 0, 9, 0, 4096, NBD_EINVAL },			/* unknown */
		{ 0, 0xffff, 0, 0, NBD_EINVAL },
		{ NBD_CMD_FLAG_NO_HOLE, NBD_CMD_READ, 0, 4096, NBD_EINVAL },
		{ NBD_CMD_FLAG_DF, NBD_CMD_READ, 0, 4096, NBD_EINVAL },
		{ 0x8000, NBD_CMD_FLUSH, 0, 0, NBD_EINVAL },
		{ NBD_CMD_FLAG_REQ_ONE, NBD_CMD_TRIM, 0, 4096, NBD_EINVAL },
		{ 0, NBD_CMD_READ, UINT64_MAX - 511, 4096, NBD_EINVAL },
		{ 0, NBD_CMD_READ, 8 * MiB, 512, NBD_EINVAL },
		{ 0, NBD_CMD_READ, 8 * MiB - 512, 1024, NBD_EINVAL },
		{ 0, NBD_CMD_TRIM, 8 * MiB - 512, 1024, NBD_EINVAL },
		{ 0, NBD_CMD_CACHE, 8 * MiB, 512, NBD_EINVAL },
		{ 0, NBD_CMD_WRITE_ZEROES, 8 * MiB - 512, 1024, NBD_ENOSPC },
		{ 0, NBD_CMD_WRITE_ZEROES, UINT64_MAX, 512, NBD_EINVAL },
		{ 0, NBD_CMD_READ, 0, NBD_MAX_PAYLOAD + 512, NBD_EINVAL },
		/* unaligned is served now (unaligned_served); past the end
		 * is still refused */
		{ 0, NBD_CMD_READ, 8 * MiB - 511, 512, NBD_EINVAL },
		{ 0, NBD_CMD_TRIM, 8 * MiB - 100, 101, NBD_EINVAL },
		{ 0, NBD_CMD_READ, 0, 0, NBD_EINVAL },
		{ 0, NBD_CMD_FLUSH, 4096, 0, NBD_EINVAL },
		{ 0, NBD_CMD_FLUSH, 0, 4096, NBD_EINVAL },
		{ 0, NBD_CMD_BLOCK_STATUS, 0, 4096, NBD_EINVAL },
	};
	uint8_t *w = malloc(64 * KiB);
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	fill(&h, 0, 1 * MiB, 11);
	for (i = 0; i < sizeof(simple) / sizeof(simple[0]); i++) {
		const struct bad *b = &simple[i];
		unsigned logs = h.nlogs;
		send_req(&h, b->flags, b->type, 100 + i, b->off, b->len, NULL);
		if (get_simple(&h, 100 + i, NULL, 0) != b->err)
			fail_msg("case %u: type %u flags 0x%x %llu+%u: want %u",
				 i, b->type, b->flags,
				 (unsigned long long)b->off, b->len, b->err);
		assert_true(h.nlogs > logs); /* one log line says why */
	}
	/* refused writes: payload read past, then the error */
	th_fill(w, 64 * KiB, 12);
	send_req(&h, 0, NBD_CMD_WRITE, 200, 8 * MiB - 4096, 64 * KiB, w);
	assert_int_equal(get_simple(&h, 200, NULL, 0), NBD_ENOSPC);
	/* unaligned and past the end */
	send_req(&h, 0, NBD_CMD_WRITE, 201, 8 * MiB - 100, 101, w);
	assert_int_equal(get_simple(&h, 201, NULL, 0), NBD_ENOSPC);
	send_req(&h, NBD_CMD_FLAG_NO_HOLE, NBD_CMD_WRITE, 202, 0, 64 * KiB, w);
	assert_int_equal(get_simple(&h, 202, NULL, 0), NBD_EINVAL);
	send_req(&h, 0, NBD_CMD_WRITE, 203, UINT64_MAX - 4095, 64 * KiB, w);
	assert_int_equal(get_simple(&h, 203, NULL, 0), NBD_EINVAL);
	/* nothing of them reached the device */
	assert_true(dev_matches(&h, 0, 1 * MiB, 11));
	assert_true(dev_is_zero(&h, 8 * MiB - 4096, 4096));
	/* in sync: a good write lands */
	send_req(&h, 0, NBD_CMD_WRITE, 204, 0, 64 * KiB, w);
	assert_int_equal(get_simple(&h, 204, NULL, 0), 0);
	assert_true(dev_matches(&h, 0, 64 * KiB, 12));
	assert_false(nbd_session_finished(h.s));
	h_fini(&h);

	/* a write larger than the maximum: skipped in pieces, EINVAL */
	h_init(&h, "mem:64M", false);
	h_go(&h, "vol0", 0);
	{
		uint32_t big = NBD_MAX_PAYLOAD + 4096;
		uint8_t *p = calloc(1, big);
		memset(p, 0xab, big);
		send_req(&h, 0, NBD_CMD_WRITE, 300, 0, big, p);
		assert_int_equal(get_simple(&h, 300, NULL, 0), NBD_EINVAL);
		assert_true(dev_is_zero(&h, 0, 1 * MiB));
		free(p);
	}
	h_fini(&h);

	/* structured: a read above the maximum with DF is EOVERFLOW */
	h_init(&h, "mem:64M", false);
	h_go(&h, "vol0", H_STRUCTURED);
	send_req(&h, NBD_CMD_FLAG_DF, NBD_CMD_READ, 1, 0,
		 NBD_MAX_PAYLOAD + 512, NULL);
	{
		struct chunk c = get_chunk(&h);
		assert_int_equal(chunk_error(&c), NBD_EOVERFLOW);
	}
	send_req(&h, 0, NBD_CMD_READ, 2, 0, NBD_MAX_PAYLOAD + 512, NULL);
	{
		struct chunk c = get_chunk(&h);
		assert_int_equal(chunk_error(&c), NBD_EINVAL);
	}
	/* CACHE moves no data: beyond the maximum, in bounds, is served */
	send_req(&h, 0, NBD_CMD_CACHE, 4, 0, NBD_MAX_PAYLOAD + 512, NULL);
	assert_int_equal(get_simple(&h, 4, NULL, 0), 0);
	send_req(&h, 0, NBD_CMD_CACHE, 5, 0, 64 * MiB, NULL);
	assert_int_equal(get_simple(&h, 5, NULL, 0), 0);
	/* the maximum itself is served */
	send_req(&h, 0, NBD_CMD_READ, 3, 0, NBD_MAX_PAYLOAD, NULL);
	{
		struct chunk c = get_chunk(&h);
		assert_int_equal(c.type, NBD_REPLY_TYPE_OFFSET_DATA);
		assert_int_equal(c.len, 8 + NBD_MAX_PAYLOAD);
	}
	h_fini(&h);
	free(w);
}


/*
 * Minimum block size 1: any offset and length is served, partial blocks
 * read-modify-written in the core; every byte checked against a model.
 */
static void unaligned_served(void **state)
{
	enum { SPAN = 64 * 1024 };
	uint8_t *model = malloc(SPAN), *buf = malloc(SPAN), *w = malloc(SPAN);
	uint16_t tflags;
	struct h h;

	(void)state;
	h_init(&h, "mem:8M,logical_block_size=4096", false);
	tflags = h_go(&h, "vol0", 0);
	assert_true(tflags & NBD_FLAG_SEND_FAST_ZERO);
	fill(&h, 0, SPAN, 3);
	th_fill(model, SPAN, 3);

	/* qemu-io's write -P 0x11 1 1000 */
	memset(w, 0x11, 1000);
	send_req(&h, 0, NBD_CMD_WRITE, 1, 1, 1000, w);
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	memset(model + 1, 0x11, 1000);
	/* write -z 3 5000, both ways */
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 2, 3, 5000, NULL);
	assert_int_equal(get_simple(&h, 2, NULL, 0), 0);
	memset(model + 3, 0, 5000);
	send_req(&h, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA,
		 NBD_CMD_WRITE_ZEROES, 3, 9000, 7000, NULL);
	assert_int_equal(get_simple(&h, 3, NULL, 0), 0);
	memset(model + 9000, 0, 7000);
	/* fast zero of a partial block: refused, nothing written */
	send_req(&h, NBD_CMD_FLAG_FAST_ZERO, NBD_CMD_WRITE_ZEROES, 4, 20000,
		 100, NULL);
	assert_int_equal(get_simple(&h, 4, NULL, 0), NBD_ENOTSUP);
	/* a FUA write across three blocks */
	th_fill(w, 9000, 4);
	send_req(&h, NBD_CMD_FLAG_FUA, NBD_CMD_WRITE, 5, 30001, 9000, w);
	assert_int_equal(get_simple(&h, 5, NULL, 0), 0);
	memcpy(model + 30001, w, 9000);
	/* trim: the whole blocks inside only; partial ones keep their data */
	send_req(&h, 0, NBD_CMD_TRIM, 6, 40100, 10000, NULL);
	assert_int_equal(get_simple(&h, 6, NULL, 0), 0);
	memset(model + 40960, 0, 49152 - 40960);
	/* reads at odd offsets */
	send_req(&h, 0, NBD_CMD_READ, 7, 7, 3001, NULL);
	assert_int_equal(get_simple(&h, 7, buf, 3001), 0);
	assert_memory_equal(buf, model + 7, 3001);
	send_req(&h, 0, NBD_CMD_READ, 8, 4095, 2, NULL);
	assert_int_equal(get_simple(&h, 8, buf, 2), 0);
	assert_memory_equal(buf, model + 4095, 2);
	send_req(&h, 0, NBD_CMD_READ, 9, 8 * MiB - 1, 1, NULL);
	assert_int_equal(get_simple(&h, 9, buf, 1), 0);
	/* the device holds exactly the model */
	assert_int_equal(bs_read_sync(h.dev, buf, SPAN, 0), 0);
	assert_memory_equal(buf, model, SPAN);
	h_fini(&h);
	free(model);
	free(buf);
	free(w);
}

/*
 * Many overlapping unaligned writes to the same blocks in flight at once:
 * none loses another's bytes. Conflicting writes go in arrival order, so
 * the device must equal the writes applied in the order they were sent.
 */
static void unaligned_overlap_inflight(void **state)
{
	enum { N = 64, SPAN = 1536 };
	uint8_t model[SPAN], got[SPAN], w[512];
	bool seen[N] = { false };
	uint64_t rng = 9;
	unsigned round, i;
	struct h h;

	(void)state;
	h_init(&h, "mem:1M", false);
	h_go(&h, "vol0", 0);
	memset(model, 0, sizeof(model));
	for (round = 0; round < 4; round++) {
		for (i = 0; i < N; i++) {
			uint64_t len = 1 + th_rand(&rng) % 511;
			uint64_t off = th_rand(&rng) % (SPAN - len + 1);

			th_fill(w, len, round * N + i + 1);
			memcpy(model + off, w, len);
			send_req(&h, 0, NBD_CMD_WRITE, round * N + i, off,
				 (uint32_t)len, w);
		}
		/* several in flight, answered as they complete */
		h_settle(&h);
		memset(seen, 0, sizeof(seen));
		for (i = 0; i < N; i++) {
			const uint8_t *p = h_take(&h, 16);
			uint64_t c = nbd_get64(p + 8) - round * N;

			assert_int_equal(nbd_get32(p), NBD_SIMPLE_REPLY_MAGIC);
			assert_int_equal(nbd_get32(p + 4), 0);
			assert_true(c < N && !seen[c]);
			seen[c] = true;
		}
	}
	assert_int_equal(bs_read_sync(h.dev, got, SPAN, 0), 0);
	if (memcmp(got, model, SPAN)) {
		for (i = 0; i < SPAN && got[i] == model[i]; i++)
			;
		fail_msg("byte %u is 0x%02x, want 0x%02x", i, got[i], model[i]);
	}
	/* the ordering really had to hold writes back */
	assert_true(h.dev->wt.waited > 0);
	h_fini(&h);
}

/* Read-only export: every writing command gets EPERM, nothing written. */
static void readonly_export(void **state)
{
	static const uint16_t types[] = { NBD_CMD_WRITE, NBD_CMD_TRIM,
					  NBD_CMD_WRITE_ZEROES };
	uint8_t w[4096];
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:8M", true);
	h_go(&h, "vol0", 0);
	fill(&h, 0, 4096, 13);
	memset(w, 0xee, sizeof(w));
	for (i = 0; i < 3; i++) {
		send_req(&h, 0, types[i], i, 0, 4096,
			 types[i] == NBD_CMD_WRITE ? w : NULL);
		assert_int_equal(get_simple(&h, i, NULL, 0), NBD_EPERM);
	}
	assert_true(dev_matches(&h, 0, 4096, 13));
	send_req(&h, 0, NBD_CMD_READ, 9, 0, 4096, NULL);
	assert_int_equal(get_simple(&h, 9, w, 4096), 0);
	send_req(&h, 0, NBD_CMD_FLUSH, 10, 0, 0, NULL);
	assert_int_equal(get_simple(&h, 10, NULL, 0), 0);
	h_fini(&h);
}

/* Bad request magic: the session ends (a hard disconnect). */
static void bad_request_magic(void **state)
{
	uint8_t r[28] = { 0 };
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	nbd_put32(r, NBD_SIMPLE_REPLY_MAGIC);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	assert_false(nbd_session_wants_input(h.s));
	h_fini(&h);
}

/* DISC: requests in flight are answered, nothing after DISC is read. */
static void disc(void **state)
{
	uint8_t buf[3 * 28 + 4096], *p = buf;
	uint8_t w[4096];
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	th_fill(w, sizeof(w), 14);
	for (i = 0; i < 3; i++) {
		uint16_t type = i == 0 ? NBD_CMD_WRITE :
				i == 1 ? NBD_CMD_DISC : NBD_CMD_READ;
		put_req(p, 0, type, i, 0, type == NBD_CMD_DISC ? 0 : 4096);
		p += 28;
		if (type == NBD_CMD_WRITE) {
			memcpy(p, w, 4096);
			p += 4096;
		}
	}
	/* everything up to and including DISC; the read after it is not */
	assert_int_equal(nbd_session_feed(h.s, buf, sizeof(buf)),
			 2 * 28 + 4096);
	assert_false(nbd_session_wants_input(h.s));
	assert_false(nbd_session_finished(h.s)); /* the write is in flight */
	assert_int_equal(get_simple(&h, 0, NULL, 0), 0);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	assert_true(dev_matches(&h, 0, 4096, 14));
	assert_non_null(strstr(nbd_session_end_reason(h.s), "DISC"));
	h_fini(&h);
}

/* Many requests in one buffer: every cookie answered exactly once. */
static void many_inflight(void **state)
{
	enum { N = NBD_INFLIGHT_REQS - 16 };
	size_t cap = (size_t)N * (28 + 8192), len = 0;
	uint8_t *buf = malloc(cap);
	bool seen[N] = { false };
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:16M", false);
	h_go(&h, "vol0", H_STRUCTURED);
	for (i = 0; i < N; i++) {
		uint8_t *p = buf + len;
		uint16_t type = i % 3 == 0 ? NBD_CMD_WRITE :
				i % 3 == 1 ? NBD_CMD_READ : NBD_CMD_WRITE_ZEROES;
		put_req(p, 0, type, 1000 + i, (uint64_t)(i % 1024) * 8192,
			8192);
		len += 28;
		if (type == NBD_CMD_WRITE) {
			th_fill(p + 28, 8192, i);
			len += 8192;
		}
	}
	/* the session takes it all without the loop running */
	assert_int_equal(nbd_session_feed(h.s, buf, len), len);
	assert_true(nbd_session_inflight(h.s) > 100);
	h_settle(&h);
	for (i = 0; i < N; i++) {
		const uint8_t *p = h.out + h.out_pos;
		uint64_t cookie;
		unsigned idx;

		assert_true(h_avail(&h) >= 16);
		if (nbd_get32(p) == NBD_SIMPLE_REPLY_MAGIC) {
			p = h_take(&h, 16);
			assert_int_equal(nbd_get32(p + 4), 0);
			cookie = nbd_get64(p + 8);
		} else {
			p = h_take(&h, 20);
			assert_int_equal(nbd_get16(p + 6),
					 NBD_REPLY_TYPE_OFFSET_DATA);
			cookie = nbd_get64(p + 8);
			h_take(&h, nbd_get32(p + 16));
		}
		assert_true(cookie >= 1000 && cookie < 1000 + N);
		idx = (unsigned)(cookie - 1000);
		assert_false(seen[idx]);
		seen[idx] = true;
	}
	assert_int_equal(h_avail(&h), 0);
	assert_int_equal(nbd_session_stats(h.s)->requests, N);
	h_fini(&h);
	free(buf);
}

/* Replies go out in completion order, not request order. */
static void completion_order(void **state)
{
	struct h h;
	const uint8_t *p;

	(void)state;
	/* zeroes = none: 32 MiB of zeroes is 32 fallback writes, 16 at once */
	h_init(&h, "mem:64M,zeroes=none", false);
	h_go(&h, "vol0", 0);
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 1, 0, 32 * MiB, NULL);
	send_req(&h, 0, NBD_CMD_READ, 2, 48 * MiB, 4096, NULL);
	h_settle(&h);
	p = h_take(&h, 16);
	assert_int_equal(nbd_get64(p + 8), 2);
	h_take(&h, 4096);
	p = h_take(&h, 16);
	assert_int_equal(nbd_get64(p + 8), 1);
	assert_int_equal(nbd_get32(p + 4), 0);
	h_fini(&h);
}

/* Memory stays bounded: feed stops at the caps and resumes after. */
static void bounded_memory(void **state)
{
	enum { N = 200 };
	uint8_t *buf = malloc(N * 28);
	size_t total = N * 28, fed;
	struct h h;
	unsigned i, answered = 0;

	(void)state;
	h_init(&h, "mem:256M", false);
	h_go(&h, "vol0", 0);
	h.sink = true;
	/* 200 reads of 1 MiB = 200 MiB of reply data: over the byte cap */
	for (i = 0; i < N; i++) {
		uint8_t *p = buf + 28 * i;
		put_req(p, 0, NBD_CMD_READ, i, (uint64_t)i * MiB, 1 * MiB);
	}
	fed = nbd_session_feed(h.s, buf, total);
	assert_true(fed < total);
	assert_true(fed >= 28 * 32);
	assert_false(nbd_session_wants_input(h.s));
	/* completions alone do not free room: replies are not read */
	h_run(&h);
	fed += nbd_session_feed(h.s, buf + fed, total - fed);
	assert_true(fed < total);
	assert_false(nbd_session_wants_input(h.s));
	while (fed < total) {
		unsigned kicks = h.kicks;
		h_drain(&h);
		assert_true(h.kicks > kicks); /* room freed: the caller is told */
		fed += nbd_session_feed(h.s, buf + fed, total - fed);
		assert_true(h.s->inflight_bytes <=
			    NBD_INFLIGHT_BYTES + NBD_MAX_PAYLOAD);
		h_run(&h);
		assert_true(h.s->inflight_bytes <=
			    NBD_INFLIGHT_BYTES + NBD_MAX_PAYLOAD);
	}
	h_settle(&h);
	/* the output (not kept: sink) is every reply, in request order */
	assert_int_equal(h.sunk, (uint64_t)N * (16 + 1 * MiB));
	assert_int_equal(h.sink_next, N);
	(void)answered;
	h_fini(&h);
	free(buf);
}

/* The request cap: no more than NBD_INFLIGHT_REQS unanswered requests. */
static void request_cap(void **state)
{
	enum { N = NBD_INFLIGHT_REQS + 50 };
	uint8_t *buf = malloc(N * 28);
	size_t fed;
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	for (i = 0; i < N; i++) {
		uint8_t *p = buf + 28 * i;
		put_req(p, 0, NBD_CMD_FLUSH, i, 0, 0);
	}
	fed = nbd_session_feed(h.s, buf, N * 28);
	assert_int_equal(nbd_session_inflight(h.s), NBD_INFLIGHT_REQS);
	assert_int_equal(fed, NBD_INFLIGHT_REQS * 28 + 28);
	h_run(&h);
	/* the parked header goes on once there is room */
	fed += nbd_session_feed(h.s, buf + fed, N * 28 - fed);
	assert_int_equal(fed, N * 28);
	h_settle(&h);
	assert_int_equal(h_avail(&h), N * 16);
	h_fini(&h);
	free(buf);
}

/*
 * Replies without payload are bounded too: READs of length 0 (EINVAL
 * each, answered at once) from a client that reads nothing stop being
 * taken once their queued replies cost NBD_REPLY_META_MAX; reading them
 * lets the rest in. Before, ~72 bytes were held per 28 received, up to
 * NBD_INFLIGHT_BYTES (64 MiB) per connection, outside the budget.
 */
static void error_replies_bounded(void **state)
{
	enum { N = 40000 };	/* 40000 replies cost about 2.9 MiB */
	uint8_t *buf = malloc((size_t)N * 28);
	size_t fed, total = (size_t)N * 28;
	struct h h;
	unsigned i;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	for (i = 0; i < N; i++) {
		uint8_t *p = buf + 28 * (size_t)i;
		put_req(p, 0, NBD_CMD_READ, i, 0, 0);
	}
	fed = nbd_session_feed(h.s, buf, total);
	assert_true(fed < total);
	assert_false(nbd_session_wants_input(h.s));
	assert_true(h.s->meta_bytes <= NBD_REPLY_META_MAX + 1024);
	assert_true(h.s->inflight_bytes <= NBD_REPLY_META_MAX + 1024);
	while (fed < total) {
		h_drain(&h);
		fed += nbd_session_feed(h.s, buf + fed, total - fed);
		assert_true(h.s->meta_bytes <= NBD_REPLY_META_MAX + 1024);
	}
	h_settle(&h);
	assert_int_equal(h_avail(&h), (size_t)N * 16);	/* every EINVAL */
	h_fini(&h);
	free(buf);
}

/* Client EOF in the middle of a write: nothing of it reaches the device. */
static void eof_mid_write(void **state)
{
	uint8_t r[28], w[8192];
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	fill(&h, 0, 8192, 15);
	memset(w, 0, sizeof(w));
	nbd_put32(r, NBD_REQUEST_MAGIC);
	nbd_put16(r + 4, 0);
	nbd_put16(r + 6, NBD_CMD_WRITE);
	nbd_put64(r + 8, 1);
	nbd_put64(r + 16, 0);
	nbd_put32(r + 24, 8192);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	assert_int_equal(nbd_session_feed(h.s, w, 8191), 8191);
	/* a write still receiving its payload is not in the device */
	assert_int_equal(nbd_session_inflight(h.s), 0);
	assert_int_equal(h.dev->stats.ops[BS_OP_WRITE], 1); /* fill() */
	nbd_session_eof(h.s);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_true(nbd_session_finished(h.s));
	assert_true(dev_matches(&h, 0, 8192, 15));
	assert_non_null(strstr(nbd_session_end_reason(h.s), "middle"));
	assert_int_equal(nbd_session_feed(h.s, w, 1), 0);
	h_fini(&h);

	/* EOF in the middle of a header */
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	assert_int_equal(nbd_session_feed(h.s, r, 10), 10);
	nbd_session_eof(h.s);
	assert_true(nbd_session_finished(h.s));
	h_fini(&h);

	/* EOF during the handshake */
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	put_flags(&h, NBD_FLAG_C_FIXED_NEWSTYLE);
	nbd_session_eof(h.s);
	assert_true(nbd_session_finished(h.s));
	assert_non_null(strstr(nbd_session_end_reason(h.s), "handshake"));
	h_fini(&h);
}

/* EOF with requests in flight: they finish, replies still queued. */
static void eof_with_inflight(void **state)
{
	struct h h;

	(void)state;
	h_init(&h, "mem:64M,zeroes=none", false);
	h_go(&h, "vol0", 0);
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 1, 0, 16 * MiB, NULL);
	nbd_session_eof(h.s);
	assert_false(nbd_session_finished(h.s));
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	assert_true(nbd_session_finished(h.s));
	h_fini(&h);
}

/* Freeing a session with requests in flight: they finish first, no leak. */
static void free_with_inflight(void **state)
{
	uint8_t w[4096];
	struct h h;

	(void)state;
	h_init(&h, "mem:64M,zeroes=none", false);
	h_go(&h, "vol0", 0);
	memset(w, 0x77, sizeof(w));
	send_req(&h, 0, NBD_CMD_WRITE_ZEROES, 1, 0, 32 * MiB, NULL);
	send_req(&h, 0, NBD_CMD_WRITE, 2, 48 * MiB, 4096, w);
	send_req(&h, NBD_CMD_FLAG_FUA, NBD_CMD_TRIM, 3, 0, 4096, NULL);
	/* and a partial write */
	{
		uint8_t r[28];
		nbd_put32(r, NBD_REQUEST_MAGIC);
		nbd_put16(r + 4, 0);
		nbd_put16(r + 6, NBD_CMD_WRITE);
		nbd_put64(r + 8, 4);
		nbd_put64(r + 16, 0);
		nbd_put32(r + 24, 4096);
		assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
		assert_int_equal(nbd_session_feed(h.s, w, 100), 100);
	}
	assert_true(nbd_session_inflight(h.s) >= 2);
	nbd_session_free(h.s);
	h.s = NULL;
	/* the set waits for the orphaned requests */
	bs_exports_free(h.set);
	h.set = NULL;
	bs_ctx_free(h.ctx);
	free(h.out);
}

/* Shutdown: at a request boundary the session is done; mid-write later. */
static void shutdown_session(void **state)
{
	uint8_t r[28], w[4096];
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	nbd_session_shutdown(h.s);
	assert_true(nbd_session_finished(h.s));
	h_fini(&h);

	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	memset(w, 0x42, sizeof(w));
	nbd_put32(r, NBD_REQUEST_MAGIC);
	nbd_put16(r + 4, 0);
	nbd_put16(r + 6, NBD_CMD_WRITE);
	nbd_put64(r + 8, 1);
	nbd_put64(r + 16, 0);
	nbd_put32(r + 24, 4096);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	assert_int_equal(nbd_session_feed(h.s, w, 1000), 1000);
	nbd_session_shutdown(h.s);
	assert_false(nbd_session_finished(h.s));
	assert_true(nbd_session_wants_input(h.s));
	/* the write in progress completes and is answered; then no more */
	assert_int_equal(nbd_session_feed(h.s, w + 1000, 3096), 3096);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 0);
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	assert_true(nbd_session_finished(h.s));
	assert_true(dev_is_zero(&h, 4096, 4096));
	{
		uint8_t b[4096];
		assert_int_equal(bs_read_sync(h.dev, b, 4096, 0), 0);
		assert_memory_equal(b, w, 4096);
	}
	h_fini(&h);
}

/*
 * A server being shut down SHOULD answer options it receives (other than
 * ABORT) with NBD_REP_ERR_SHUTDOWN rather than drop the connection: the
 * client then disconnects softly. Options already sent are answered; at
 * an option boundary the session may close (nothing to answer), and an
 * EXPORT_NAME, which cannot carry an error, closes.
 */
static void shutdown_handshake(void **state)
{
	static const uint16_t req[] = { NBD_INFO_BLOCK_SIZE };
	uint8_t b[64], hdr[16];
	struct rep r;
	struct h h;
	size_t n;
	unsigned i;

	(void)state;
	/* between options: every option gets ERR_SHUTDOWN, ABORT an ACK */
	h_negotiating(&h);
	nbd_session_shutdown(h.s);
	assert_true(nbd_session_finished(h.s)); /* may close: at a boundary */
	assert_true(nbd_session_wants_input(h.s));
	send_opt(&h, NBD_OPT_LIST, NULL, 0);
	r = get_rep(&h);
	assert_int_equal(r.opt, NBD_OPT_LIST);
	assert_int_equal(r.type, NBD_REP_ERR_SHUTDOWN);
	assert_true(r.len > 0); /* says why */
	n = info_data(b, "vol0", req, 1);
	send_opt(&h, NBD_OPT_GO, b, (uint32_t)n);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_SHUTDOWN);
	assert_null(nbd_session_export_name(h.s));
	send_opt(&h, NBD_OPT_STRUCTURED_REPLY, NULL, 0);
	assert_int_equal(get_rep(&h).type, NBD_REP_ERR_SHUTDOWN);
	send_opt(&h, NBD_OPT_ABORT, NULL, 0);
	expect_rep(&h, NBD_OPT_ABORT, NBD_REP_ACK);
	assert_true(nbd_session_finished(h.s));
	assert_false(nbd_session_wants_input(h.s));
	h_fini(&h);

	/* an option half received when the shutdown comes is answered */
	h_negotiating(&h);
	n = info_data(b, "vol0", req, 1);
	nbd_put64(hdr, NBD_IHAVEOPT);
	nbd_put32(hdr + 8, NBD_OPT_INFO);
	nbd_put32(hdr + 12, (uint32_t)n);
	h_feed(&h, hdr, 16);
	h_feed(&h, b, 3);
	nbd_session_shutdown(h.s);
	assert_false(nbd_session_finished(h.s));
	assert_true(nbd_session_wants_input(h.s));
	h_feed(&h, b + 3, n - 3);
	r = get_rep(&h);
	assert_int_equal(r.opt, NBD_OPT_INFO);
	assert_int_equal(r.type, NBD_REP_ERR_SHUTDOWN);
	assert_true(nbd_session_finished(h.s));
	h_fini(&h);

	/* EXPORT_NAME cannot be answered with an error: closed */
	h_negotiating(&h);
	nbd_session_shutdown(h.s);
	send_opt(&h, NBD_OPT_EXPORT_NAME, "vol0", 4);
	h_settle(&h);
	assert_int_equal(h_avail(&h), 0);
	assert_null(nbd_session_export_name(h.s));
	assert_true(nbd_session_finished(h.s));
	assert_false(nbd_session_wants_input(h.s));
	h_fini(&h);

	/* a client that keeps asking is answered a bounded number of times */
	h_negotiating(&h);
	nbd_session_shutdown(h.s);
	for (i = 0; i < 100 && nbd_session_wants_input(h.s); i++) {
		nbd_put64(hdr, NBD_IHAVEOPT);
		nbd_put32(hdr + 8, NBD_OPT_LIST);
		nbd_put32(hdr + 12, 0);
		assert_int_equal(nbd_session_feed(h.s, hdr, 16), 16);
	}
	assert_true(i < 100);
	assert_true(nbd_session_finished(h.s));
	while (i--)
		assert_int_equal(get_rep(&h).type, NBD_REP_ERR_SHUTDOWN);
	assert_int_equal(h_avail(&h), 0);
	h_fini(&h);
}

/* Input in one-byte pieces parses the same as in one piece. */
static void byte_at_a_time(void **state)
{
	static const uint16_t req[] = { NBD_INFO_BLOCK_SIZE };
	uint8_t msg[512], *p = msg, w[1024], rd[1024];
	struct info inf;
	struct h h;
	size_t i, n;

	(void)state;
	h_init(&h, "mem:8M", false);
	expect_greeting(&h);
	nbd_put32(p, NBD_FLAG_C_FIXED_NEWSTYLE);
	p += 4;
	nbd_put64(p, NBD_IHAVEOPT);
	nbd_put32(p + 8, NBD_OPT_GO);
	n = info_data(p + 16, "vol0", req, 1);
	nbd_put32(p + 12, (uint32_t)n);
	p += 16 + n;
	for (i = 0; i < (size_t)(p - msg); i++)
		assert_int_equal(nbd_session_feed(h.s, msg + i, 1), 1);
	assert_int_equal(get_info(&h, NBD_OPT_GO, &inf), NBD_REP_ACK);
	th_fill(w, sizeof(w), 16);
	p = msg;
	put_req(p, 0, NBD_CMD_WRITE, 5, 1024, sizeof(w));
	for (i = 0; i < 28; i++)
		assert_int_equal(nbd_session_feed(h.s, msg + i, 1), 1);
	for (i = 0; i < sizeof(w); i++)
		assert_int_equal(nbd_session_feed(h.s, w + i, 1), 1);
	assert_int_equal(get_simple(&h, 5, NULL, 0), 0);
	assert_int_equal(bs_read_sync(h.dev, rd, sizeof(rd), 1024), 0);
	assert_memory_equal(rd, w, sizeof(w));
	h_fini(&h);
}

struct waiter {
	struct bs_budget_holder h;	/* first */
	int woken;
};

static void waiter_wake(struct bs_budget_holder *h)
{
	((struct waiter *)h)->woken++;
}

/*
 * A session waiting at a READ's header for the server-wide budget, woken
 * for its turn, that sees the client's EOF before it took (or ends, or
 * is freed with requests still in the device) waits no more: the next
 * waiter is woken then, not a second later nor when the session is gone.
 */
static void budget_turn_passed_on_at_eof(void **state)
{
	struct bs_budget_holder other;
	struct waiter next;
	struct bs_budget *b;
	uint8_t r[28];
	uint64_t held = BS_BUDGET_MIN - 512 * KiB;
	struct h h;

	(void)state;
	h_init(&h, "mem:8M", false);
	h_go(&h, "vol0", 0);
	b = bs_ctx_budget(h.ctx);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, held));
	/* a 1 MiB READ does not fit: the session waits at its header */
	put_req(r, 0, NBD_CMD_READ, 1, 0, 1 * MiB);
	nbd_session_feed(h.s, r, sizeof(r));
	assert_int_equal(nbd_session_inflight(h.s), 0);
	assert_int_equal(bs_budget_waits(b), 1);
	memset(&next, 0, sizeof(next));
	next.h.wake = waiter_wake;
	assert_false(bs_budget_take(b, &next.h, 8 * MiB));
	/* room for both: the session's turn (the smaller); it is kicked
	 * but never feeds again */
	bs_budget_give(b, &other, 16 * MiB);
	h_run(&h);
	assert_int_equal(next.woken, 0);
	nbd_session_eof(h.s);
	h_run(&h);
	assert_int_equal(next.woken, 1);
	assert_true(bs_budget_take(b, &next.h, 8 * MiB));
	bs_budget_leave(b, &next.h);
	bs_budget_leave(b, &other);
	assert_int_equal(bs_budget_used(b), 0);
	h_fini(&h);
}

/* ---- a slow device: its requests wait until the test lets them go ------- */

/* Requests of the session the budget counts in a device right now. */
static unsigned in_dev(const struct h *h)
{
	return __atomic_load_n(&h->s->bh.in_dev, __ATOMIC_ACQUIRE);
}

/*
 * One request (header + @payload of @len, if any) fed whole; the device
 * holds it for @ms milliseconds (five stall timeouts and more, the
 * watchdog running, another holder waiting) and then carries it out:
 * the session is not ended meanwhile, and the request is counted in the
 * device until it comes back.
 */
static void slow_request(struct h *h, uint16_t type, uint64_t cookie,
			 uint64_t off, uint32_t len, const void *payload,
			 unsigned ms)
{
	uint8_t r[28];

	put_req(r, 0, type, cookie, off, len);
	assert_int_equal(nbd_session_feed(h->s, r, 28), 28);
	if (payload)
		assert_int_equal(nbd_session_feed(h->s, payload, len), len);
	th_slow_wait(bs_ctx_loop(h->ctx), 1);
	th_run_for(bs_ctx_loop(h->ctx), ms);
	assert_false(h->s->ended);
	assert_int_equal(in_dev(h), 1);
	th_slow_release();
}

/*
 * A slow device is not a stalled client. With a stall timeout of 20 ms
 * and another holder waiting for the budget, a session whose requests
 * wait in the device keeps its bytes however long that takes: the device
 * holds each request for 100 ms, and a 1 MiB WRITE (its payload in, its
 * bytes held), a 1 MiB READ (its buffer held), and a FLUSH, a TRIM and a
 * WRITE_ZEROES (each counted in the device while it is there) all
 * complete. Before, the session was evicted ("no progress for ...") a
 * stall timeout after the WRITE's payload was in, though its client was
 * the one waiting. Once the device is done the client's part counts
 * again: a READ's reply that the client never reads gets the session
 * evicted.
 */
static void slow_device_is_not_a_stall(void **state)
{
	struct bs_budget_holder other;
	struct bs_budget *b;
	uint8_t *data = malloc(MiB), *rd = malloc(MiB), r[28];
	struct h h;
	int i;

	(void)state;
	h_init(&h, "mem:64M,write_cache=1", false);
	h_go(&h, "vol0", 0);
	b = bs_ctx_budget(h.ctx);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 20), 0);
	th_fill(data, MiB, 81);
	th_slow_begin(h.dev);

	/* a 1 MiB WRITE: its header takes the bytes; then the other holder
	 * waits for the whole budget */
	put_req(r, 0, NBD_CMD_WRITE, 1, 0, MiB);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	memset(&other, 0, sizeof(other));
	assert_false(bs_budget_take(b, &other, BS_BUDGET_MIN));
	assert_int_equal(nbd_session_feed(h.s, data, MiB), MiB);
	th_slow_wait(bs_ctx_loop(h.ctx), 1);
	th_run_for(bs_ctx_loop(h.ctx), 100);
	assert_false(h.s->ended);
	th_slow_release();
	assert_int_equal(get_simple(&h, 1, NULL, 0), 0);
	assert_int_equal(in_dev(&h), 0);

	/* a 1 MiB READ of it, slowly */
	slow_request(&h, NBD_CMD_READ, 2, 0, MiB, NULL, 100);
	assert_int_equal(get_simple(&h, 2, rd, MiB), 0);
	assert_memory_equal(rd, data, MiB);

	/* FLUSH, TRIM, WRITE_ZEROES: each in the device while it is */
	slow_request(&h, NBD_CMD_FLUSH, 3, 0, 0, NULL, 30);
	assert_int_equal(get_simple(&h, 3, NULL, 0), 0);
	slow_request(&h, NBD_CMD_TRIM, 4, 2 * MiB, MiB, NULL, 30);
	assert_int_equal(get_simple(&h, 4, NULL, 0), 0);
	slow_request(&h, NBD_CMD_WRITE_ZEROES, 5, 64 * KiB, 64 * KiB, NULL,
		     30);
	assert_int_equal(get_simple(&h, 5, NULL, 0), 0);
	assert_int_equal(in_dev(&h), 0);
	assert_false(h.s->ended);
	th_slow_end();
	assert_true(dev_is_zero(&h, 64 * KiB, 64 * KiB));

	/* the device done, a READ's reply never read: evicted */
	put_req(r, 0, NBD_CMD_READ, 6, 0, MiB);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	for (i = 0; i < 500 && !h.s->ended; i++)
		bs_loop_run_once(bs_ctx_loop(h.ctx), 10);
	assert_true(h.s->evicted);
	assert_non_null(strstr(nbd_session_end_reason(h.s), "no progress for"));
	assert_int_equal(in_dev(&h), 0);
	nbd_session_free(h.s);
	h.s = NULL;
	assert_int_equal(bs_budget_used(b), 0);
	bs_budget_leave(b, &other);
	h_fini(&h);
	free(data);
	free(rd);
}

/*
 * A client that does not read a 1 MiB READ's reply, but sends a FLUSH
 * every 5 ms (each goes to the device and comes back at once): with a
 * 20 ms stall timeout and another holder waiting, it is evicted within a
 * few stall timeouts. When a request coming back counted as progress
 * (the first version of the device-time rule), it kept the reply's
 * bytes for as long as it went on pinging (200 pings, none evicted).
 */
static void unread_reply_not_kept_by_pings(void **state)
{
	struct bs_budget_holder other;
	struct bs_budget *b;
	uint8_t r[28];
	struct h h;
	int i;

	(void)state;
	h_init(&h, "mem:64M,write_cache=1", false);
	h_go(&h, "vol0", 0);
	b = bs_ctx_budget(h.ctx);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 20), 0);
	put_req(r, 0, NBD_CMD_READ, 1, 0, MiB);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	th_run_for(bs_ctx_loop(h.ctx), 2);
	memset(&other, 0, sizeof(other));
	assert_false(bs_budget_take(b, &other, BS_BUDGET_MIN));
	for (i = 0; i < 200 && !h.s->ended; i++) {
		put_req(r, 0, NBD_CMD_FLUSH, 100 + i, 0, 0);
		assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
		th_run_for(bs_ctx_loop(h.ctx), 5);
	}
	assert_true(h.s->evicted);
	assert_true(i < 40);
	assert_non_null(strstr(nbd_session_end_reason(h.s), "no progress for"));
	assert_int_equal(in_dev(&h), 0);
	nbd_session_free(h.s);
	h.s = NULL;
	assert_int_equal(bs_budget_used(b), 0);
	bs_budget_leave(b, &other);
	h_fini(&h);
}

/*
 * A session freed with requests in a slow device (while another holder
 * waits and the watchdog runs): each is counted in the device until it
 * is back, and the session goes, its budget with it, only when the last
 * one is.
 */
static void freed_with_requests_in_a_slow_device(void **state)
{
	struct bs_budget_holder other;
	struct bs_budget *b;
	uint8_t *data = malloc(MiB), r[28];
	struct h h;
	int i;

	(void)state;
	h_init(&h, "mem:64M,write_cache=1", false);
	h_go(&h, "vol0", 0);
	b = bs_ctx_budget(h.ctx);
	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 20), 0);
	th_fill(data, MiB, 82);
	th_slow_begin(h.dev);
	put_req(r, 0, NBD_CMD_WRITE, 1, 0, MiB);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	memset(&other, 0, sizeof(other));
	assert_false(bs_budget_take(b, &other, BS_BUDGET_MIN));
	assert_int_equal(nbd_session_feed(h.s, data, MiB), MiB);
	put_req(r, 0, NBD_CMD_FLUSH, 2, 0, 0);
	assert_int_equal(nbd_session_feed(h.s, r, 28), 28);
	th_slow_wait(bs_ctx_loop(h.ctx), 2);
	assert_int_equal(in_dev(&h), 2);
	nbd_session_free(h.s);		/* orphaned until they are back */
	h.s = NULL;
	th_run_for(bs_ctx_loop(h.ctx), 60);
	assert_int_equal(bs_budget_used(b), MiB);
	th_slow_release();
	th_slow_release();
	for (i = 0; i < 50; i++)
		bs_loop_run_once(bs_ctx_loop(h.ctx), 0);
	th_slow_end();
	assert_int_equal(bs_budget_used(b), 0);
	assert_true(dev_matches(&h, 0, MiB, 82));
	bs_budget_leave(b, &other);
	h_fini(&h);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(greeting),
		cmocka_unit_test(out_bytes_counts),
		cmocka_unit_test(client_flags_unknown),
		cmocka_unit_test(export_name),
		cmocka_unit_test(export_name_default),
		cmocka_unit_test(export_name_unknown),
		cmocka_unit_test(nonfixed_client),
		cmocka_unit_test(opt_list),
		cmocka_unit_test(opt_info_go),
		cmocka_unit_test(info_then_go_same),
		cmocka_unit_test(units_list_go),
		cmocka_unit_test(transmission_flags),
		cmocka_unit_test(opt_structured),
		cmocka_unit_test(opt_meta_context),
		cmocka_unit_test(opt_abort),
		cmocka_unit_test(opt_unknown),
		cmocka_unit_test(opt_oversized),
		cmocka_unit_test(opt_bad_magic),
		cmocka_unit_test(opt_replies_bounded),
		cmocka_unit_test(rw_simple),
		cmocka_unit_test(rw_structured),
		cmocka_unit_test(trim),
		cmocka_unit_test(write_zeroes),
		cmocka_unit_test(fast_zero_incapable),
		cmocka_unit_test(block_status),
		cmocka_unit_test(block_status_other_export),
		cmocka_unit_test(bad_requests),
		cmocka_unit_test(error_replies_bounded),
		cmocka_unit_test(enotsup_only_fast_zero),
		cmocka_unit_test(device_errors_not_the_servers),
		cmocka_unit_test(unaligned_served),
		cmocka_unit_test(unaligned_overlap_inflight),
		cmocka_unit_test(readonly_export),
		cmocka_unit_test(bad_request_magic),
		cmocka_unit_test(disc),
		cmocka_unit_test(many_inflight),
		cmocka_unit_test(completion_order),
		cmocka_unit_test(bounded_memory),
		cmocka_unit_test(request_cap),
		cmocka_unit_test(eof_mid_write),
		cmocka_unit_test(eof_with_inflight),
		cmocka_unit_test(budget_turn_passed_on_at_eof),
		cmocka_unit_test(free_with_inflight),
		cmocka_unit_test(slow_device_is_not_a_stall),
		cmocka_unit_test(unread_reply_not_kept_by_pings),
		cmocka_unit_test(freed_with_requests_in_a_slow_device),
		cmocka_unit_test(shutdown_session),
		cmocka_unit_test(shutdown_handshake),
		cmocka_unit_test(byte_at_a_time),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
