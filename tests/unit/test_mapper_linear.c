/* SPDX-License-Identifier: MIT */
/* linear mapper: data against a reference model, stacking, EOPNOTSUPP rule. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/explain.h>
#include <blkstack/opts.h>
#include <blkstack/zero.h>

static struct bs_dev *mk(struct bs_ctx *ctx, const char *name,
			 const char *type, const char *kv)
{
	struct bs_opts *o;
	struct bs_dev *d = NULL;
	char *copy = strdup(kv), *tok, *save = NULL;

	assert_int_equal(bs_opts_new(&o), 0);
	for (tok = strtok_r(copy, ";", &save); tok;
	     tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');
		*eq = 0;
		assert_int_equal(bs_opts_set(o, tok, eq + 1, NULL), 0);
	}
	free(copy);
	if (bs_dev_create(ctx, name, type, o, &d))
		print_message("create %s: %s\n", name, bs_last_error());
	bs_opts_free(o);
	return d;
}

#define SZ (4u << 20)

static void test_linear_model(void **state)
{
	struct bs_ctx *ctx;
	struct bs_dev *v;
	uint8_t *model, *buf;
	unsigned i;

	(void)state;
	assert_int_equal(bs_ctx_new(&ctx), 0);
	assert_non_null(mk(ctx, "a", "mem", "size=4M"));
	assert_non_null(mk(ctx, "b", "mem", "size=4M"));
	v = mk(ctx, "v", "linear", "devices=a b;map=1M:1536K 512K");
	assert_non_null(v);
	assert_int_equal(v->size, 1536 * 1024 + 3584 * 1024);
	model = calloc(1, v->size);
	buf = malloc(v->size);
	srand(7);
	for (i = 0; i < 300; i++) {
		uint64_t off = ((uint64_t)rand() % (v->size / 512)) * 512;
		uint64_t len = ((uint64_t)rand() % 512 + 1) * 512;
		int op = rand() % 4;
		uint64_t j;

		if (len > v->size - off)
			len = v->size - off;
		if (op == 0) {
			for (j = 0; j < len; j++)
				buf[j] = (uint8_t)rand();
			assert_int_equal(bs_write_sync(v, buf, len, off), 0);
			memcpy(model + off, buf, len);
		} else if (op == 1) {
			assert_int_equal(bs_zeroout_sync(v, off, len,
				rand() % 2 ? BS_ZERO_NOUNMAP : 0, NULL, NULL), 0);
			memset(model + off, 0, len);
		} else if (op == 2) {
			assert_int_equal(bs_io_sync(v, BS_OP_DISCARD, 0, off,
						    len, NULL), 0);
			memset(model + off, 0, len);
		} else {
			assert_int_equal(bs_read_sync(v, buf, len, off), 0);
			assert_memory_equal(buf, model + off, len);
		}
	}
	assert_int_equal(bs_read_sync(v, buf, v->size, 0), 0);
	assert_memory_equal(buf, model, v->size);
	/* the segments landed where the map says */
	assert_int_equal(bs_read_sync(bs_dev_find(ctx, "a"), buf, 1536 * 1024,
				      1 << 20), 0);
	assert_memory_equal(buf, model, 1536 * 1024);
	free(model);
	free(buf);
	bs_ctx_free(ctx);
}

static void test_linear_caps(void **state)
{
	struct bs_ctx *ctx;
	struct bs_dev *v, *a;
	char rule[256];

	(void)state;
	assert_int_equal(bs_ctx_new(&ctx), 0);
	a = mk(ctx, "a", "mem", "size=1M");
	assert_non_null(mk(ctx, "b", "mem", "size=1M;zeroes=write"));
	assert_non_null(mk(ctx, "c", "mem", "size=1M"));
	/* v and w both stack on a: shared claims */
	v = mk(ctx, "v", "linear", "devices=a c;claim=shared");
	assert_true(bs_dev_write_zeroes_unmap(v));
	/* the knob below clears it above within the same call, and back */
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(v));
	bs_explain_rule(v, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "cleared because a lacks it"));
	bs_explain_rule(a, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "knob write_zeroes_unmap=0"));
	assert_int_equal(bs_attr_store(a, "queue/write_zeroes_unmap", "1"), 0);
	assert_true(bs_dev_write_zeroes_unmap(v));
	v = mk(ctx, "w", "linear", "devices=a b;claim=shared");
	assert_false(bs_dev_write_zeroes_unmap(v));
	assert_true(v->limits.max_write_zeroes_sectors > 0);
	bs_ctx_free(ctx);
}

static void test_linear_broken_wz(void **state)
{
	struct bs_ctx *ctx;
	struct bs_dev *v, *b;
	uint8_t *buf = malloc(1 << 20), *zero = calloc(1, 1 << 20);

	(void)state;
	assert_int_equal(bs_ctx_new(&ctx), 0);
	assert_non_null(mk(ctx, "a", "mem", "size=1M"));
	b = mk(ctx, "b", "mem", "size=1M;broken_write_zeroes=1");
	v = mk(ctx, "v", "linear", "devices=a b");
	memset(buf, 0xab, 1 << 20);
	assert_int_equal(bs_write_sync(v, buf, 1 << 20, 512 * 1024), 0);
	assert_true(v->limits.max_write_zeroes_sectors > 0);
	assert_int_equal(bs_zeroout_sync(v, 512 * 1024, 1 << 20, 0, NULL,
					 NULL), 0);
	assert_int_equal(bs_read_sync(v, buf, 1 << 20, 512 * 1024), 0);
	assert_memory_equal(buf, zero, 1 << 20);
	assert_true(b->wz_broken);
	assert_int_equal(v->limits.max_write_zeroes_sectors, 0);
	assert_false(bs_dev_write_zeroes_unmap(v));
	free(buf);
	free(zero);
	bs_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_linear_model),
		cmocka_unit_test(test_linear_caps),
		cmocka_unit_test(test_linear_broken_wz),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
