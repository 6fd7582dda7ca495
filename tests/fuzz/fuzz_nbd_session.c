/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the NBD session state machine (handshake and request
 * parser, execution on a mem device, replies). One session per input.
 *
 * Input layout:
 *   byte 0   configuration: bit 0 read-only export; bits 1-2 device
 *            (0 mem unmap, 1 zeroes=write, 2 zeroes=none, 3 4K blocks
 *            with a write cache); bit 3 keep output unread until the
 *            session stalls (exercises the caps); bit 4 free the session
 *            with requests still in flight instead of waiting; bit 5 stop
 *            the server (nbd_session_shutdown) half way through the stream
 *   byte 1   feed granularity: bytes per nbd_session_feed() call is
 *            1 + byte * 61 (1 .. 15556)
 *   rest     the client's byte stream, from the client flags on (the
 *            server greeting is not part of it)
 *
 * Between feeds the loop runs and output is drained; at the end the client
 * hangs up, everything in flight completes, and all is freed (LeakSanitizer
 * checks that nothing outlives the input).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/export.h>
#include <blkstack/opts.h>

#include "export/nbd/session.h"
#include "helpers/fz_dev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fz_open(struct bs_export *exp, struct bs_opts *opts)
{
	(void)exp;
	(void)opts;
	return 0;
}

static void fz_close(struct bs_export *exp)
{
	(void)exp;
}

static const struct bs_export_type fuzz_export_type = {
	.name = "nbd-fuzz",
	.summary = "export object for the NBD session fuzzer (no listener)",
	.open = fz_open,
	.close = fz_close,
};

BS_EXPORT_TYPE(fuzz_export_type)

struct fz {
	struct bs_exports *set;
	unsigned kicks;
};

static void fz_kick(void *arg)
{
	((struct fz *)arg)->kicks++;
}

/* Every unit of every export is an NBD export name; "" is the first. */
static struct bs_export_unit *fz_find(void *arg, const char *name)
{
	struct fz *x = arg;
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

static struct bs_export_unit *fz_next(void *arg,
					 struct bs_export_unit *prev)
{
	struct fz *x = arg;
	struct bs_export *e;

	if (prev && prev->index + 1 < prev->exp->nunits)
		return &prev->exp->units[prev->index + 1];
	e = bs_export_next(x->set, prev ? prev->exp : NULL);
	return e ? &e->units[0] : NULL;
}

static void fz_log(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

static const struct nbd_session_ops fz_ops = {
	.kick = fz_kick,
	.find = fz_find,
	.next = fz_next,
	.log = fz_log,
};

static const char *const dev_specs[] = {
	"size=4M;chunk=4K",
	"size=4M;chunk=64K;zeroes=write",
	"size=4M;zeroes=none;max_discard=0",
	"size=4M;logical_block_size=4096;write_cache=1",
};

static int make_export(struct bs_exports *set, const char *name, bool ro,
		       const char *desc)
{
	struct bs_opts *o = NULL;
	int err = bs_opts_new(&o);

	if (!err)
		err = bs_opts_set(o, "device", "d", "fuzz");
	if (!err && ro)
		err = bs_opts_set(o, "readonly", "1", "fuzz");
	if (!err && desc)
		err = bs_opts_set(o, "description", desc, "fuzz");
	if (!err)
		err = bs_export_create(set, name, fuzz_export_type.name, o,
				       NULL);
	bs_opts_free(o);
	return err;
}

/* Consume output as a client would: all of it, in a few sendmsg()s. */
static void drain(struct nbd_session *s)
{
	unsigned rounds = 0;

	while (nbd_session_has_output(s) && rounds++ < 100000) {
		struct iovec iov[16];
		int n = nbd_session_out_iov(s, iov, 16);
		size_t total = fz_out_iov_check(iov, n);

		/* sometimes a short send, to cross message boundaries */
		if (total > 7 && (rounds & 1))
			total -= 7;
		nbd_session_out_advance(s, total);
	}
}

static void run(struct bs_loop *loop, struct nbd_session *s)
{
	unsigned i, idle = 0;

	for (i = 0; i < 100000 && idle < 2; i++) {
		bs_loop_run_once(loop, 0);
		idle = nbd_session_inflight(s) ? 0 : idle + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct bs_ctx *ctx = NULL;
	struct bs_dev *dev = NULL;
	struct nbd_session *s = NULL;
	struct bs_loop *loop;
	struct fz fz = { 0 };
	uint8_t cfg, gran;
	size_t step, pos, stalls = 0;
	bool lazy, drop, stop;

	if (size < 2)
		return 0;
	cfg = data[0];
	gran = data[1];
	data += 2;
	size -= 2;
	lazy = cfg & 8;
	drop = cfg & 16;
	stop = cfg & 32;
	step = 1 + (size_t)gran * 61;

	if (bs_ctx_new(&ctx))
		return 0;
	loop = bs_ctx_loop(ctx);
	if (fz_mem_dev(ctx, dev_specs[(cfg >> 1) & 3], &dev) ||
	    bs_exports_new(ctx, &fz.set)) {
		bs_ctx_free(ctx);
		return 0;
	}
	if (make_export(fz.set, "vol0", cfg & 1, "fuzzed volume") ||
	    make_export(fz.set, "other", false, NULL) ||
	    nbd_session_new(ctx, fz.set, &fz_ops, &fz, &s))
		goto out;
	drain(s);

	for (pos = 0; pos < size && stalls < 64;) {
		size_t n = size - pos, used;

		if (n > step)
			n = step;
		if (stop && pos >= size / 2) {
			nbd_session_shutdown(s);
			stop = false;
		}
		used = nbd_session_feed(s, data + pos, n);
		if (used > n)
			abort();
		pos += used;
		run(loop, s);
		if (!lazy || used < n)
			drain(s);
		if (nbd_session_finished(s) && !nbd_session_has_output(s))
			break;
		/* at the caps with nothing in flight and nothing to send */
		stalls = used ? 0 : stalls + 1;
	}
	/* the client hangs up */
	nbd_session_eof(s);
	if (!drop) {
		run(loop, s);
		drain(s);
		if (nbd_session_inflight(s) || !nbd_session_finished(s))
			abort(); /* an ended session must be able to close */
	}
	(void)nbd_session_end_reason(s);
	(void)nbd_session_export_name(s);
	(void)nbd_session_stats(s);
out:
	/* requests still in the device finish first (the set waits) */
	nbd_session_free(s);
	bs_exports_free(fz.set);
	bs_ctx_free(ctx);
	return 0;
}
