/* SPDX-License-Identifier: MIT */
/*
 * The per-request driver context: a type asks for req_ctx_size bytes and
 * gets them zeroed for every request reaching it, one per request in
 * flight, taken back when it completes the request (and reused); a type
 * that asks for none gets NULL; split children get their own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bdev.h>
#include <blkstack/opts.h>

#include "helpers/th.h"

struct ctxdev_req {
	uint64_t magic;
	unsigned seq;
	char pad[200];
};

struct ctxdev {
	struct bs_req *held[64];
	unsigned nheld;
	unsigned seen_dirty;	/* contexts that were not zeroed */
	unsigned seen_null;
	void *ptrs[64];
};

static int ctxdev_open(struct bs_dev *dev, struct bs_opts *opts)
{
	(void)opts;
	dev->size = 1 << 20;
	dev->priv = calloc(1, sizeof(struct ctxdev));
	dev->limits.max_hw_sectors = 8;		/* 4 KiB: splits */
	return dev->priv ? 0 : -ENOMEM;
}

static void ctxdev_close(struct bs_dev *dev)
{
	free(dev->priv);
}

/* Hold every request; the test completes them. */
static void ctxdev_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct ctxdev *c = dev->priv;
	struct ctxdev_req *r = bs_req_drv(req);
	char zero[sizeof(*r)] = { 0 };

	if (!r) {
		c->seen_null++;
		bs_req_complete(req, 0);
		return;
	}
	if (memcmp(r, zero, sizeof(*r)))
		c->seen_dirty++;
	r->magic = 0xfeedfacecafebeefull;
	memset(r->pad, 0xee, sizeof(r->pad));
	r->seq = c->nheld;
	c->ptrs[c->nheld] = r;
	c->held[c->nheld++] = req;
}

static const struct bs_dev_type ctxdev_type = {
	.name = "ctxdev",
	.summary = "test: holds requests, checks their driver context",
	.req_ctx_size = sizeof(struct ctxdev_req),
	.open = ctxdev_open,
	.close = ctxdev_close,
	.submit = ctxdev_submit,
};

static const struct bs_dev_type noctx_type = {
	.name = "noctxdev",
	.summary = "test: no driver context",
	.open = ctxdev_open,
	.close = ctxdev_close,
	.submit = ctxdev_submit,
};

BS_DEV_TYPE(ctxdev_type)
BS_DEV_TYPE(noctx_type)

static void done_count(struct bs_req *req)
{
	(*(unsigned *)req->priv)++;
}

static void settle(struct bs_ctx *ctx)
{
	int i;

	for (i = 0; i < 4; i++)
		bs_loop_run_once(bs_ctx_loop(ctx), 0);
}

static void contexts_per_request(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev_kv(ctx, "d", "type=ctxdev");
	struct ctxdev *c = d->priv;
	struct bs_req reqs[8];
	static char buf[16384];
	unsigned done = 0, i, j;
	int round;

	for (round = 0; round < 3; round++) {
		c->nheld = 0;
		done = 0;
		/* 7 single requests and one that splits into 4 children */
		for (i = 0; i < 7; i++) {
			bs_req_init(&reqs[i], BS_OP_WRITE, 0, i * 4096, 4096,
				    buf, done_count, &done);
			bs_submit(d, &reqs[i]);
		}
		bs_req_init(&reqs[7], BS_OP_WRITE, 0, 65536, 16384, buf,
			    done_count, &done);
		bs_submit(d, &reqs[7]);
		settle(ctx);
		assert_int_equal(c->nheld, 11);
		/* every request in flight has its own, zeroed context */
		assert_int_equal(c->seen_dirty, 0);
		for (i = 0; i < c->nheld; i++)
			for (j = i + 1; j < c->nheld; j++)
				assert_ptr_not_equal(c->ptrs[i], c->ptrs[j]);
		for (i = 0; i < c->nheld; i++) {
			struct ctxdev_req *r = bs_req_drv(c->held[i]);

			assert_int_equal(r->seq, i);
			bs_req_complete(c->held[i], 0);
			/* taken back at completion */
			assert_null(c->held[i]->drv_ctx);
		}
		settle(ctx);
		assert_int_equal(done, 8);
	}
	/* reused contexts came back zeroed every round */
	assert_int_equal(c->seen_dirty, 0);
	assert_true(d->drv_ctx_free[0].n >= 11);
	assert_int_equal(c->seen_null, 0);
}

static void no_context_when_none_asked(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev_kv(ctx, "n", "type=noctxdev");
	struct ctxdev *c = d->priv;
	static char buf[4096];
	unsigned done = 0;
	struct bs_req r;

	bs_req_init(&r, BS_OP_WRITE, 0, 0, 4096, buf, done_count, &done);
	r.drv_ctx = (void *)0x1;	/* a submitter's leftover is ignored */
	bs_submit(d, &r);
	settle(ctx);
	assert_int_equal(done, 1);
	assert_int_equal(c->seen_null, 1);
	assert_null(r.drv_ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(contexts_per_request,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(no_context_when_none_asked,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
