/* SPDX-License-Identifier: MIT */
/* error mapper: which requests fail and with what, after=N and its
 * re-arming attribute, pass-through data over a component, standalone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "helpers/th.h"
#include "helpers/model.h"

#include <blkstack/attr.h>
#include <blkstack/explain.h>
#include <blkstack/zero.h>

static void test_error_standalone_fails_all(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *e;
	uint8_t buf[4096];

	e = th_dev_kv(ctx, "e", "type=error;size=1M;write_cache=1");
	assert_int_equal(e->size, 1u << 20);
	assert_int_equal(bs_read_sync(e, buf, 4096, 0), -EIO);
	assert_int_equal(bs_write_sync(e, buf, 4096, 0), -EIO);
	assert_int_equal(bs_flush_sync(e), -EIO);
	assert_int_equal(bs_io_sync(e, BS_OP_DISCARD, 0, 0, 4096, NULL), -EIO);
	assert_int_equal(bs_io_sync(e, BS_OP_WRITE_ZEROES, 0, 0, 4096, NULL),
			 -EIO);
	assert_int_equal(th_attr_u64(e, "error/failed"), 5);
	/* EIO is no reason to drop write-zeroes */
	assert_true(e->limits.max_write_zeroes_sectors > 0);
}

static void test_error_errno_and_ops(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *e;
	uint8_t buf[4096];

	/* no cache claimed: flushes complete in the core, never fail */
	e = th_dev_kv(ctx, "n", "type=error;size=1M");
	assert_int_equal(bs_flush_sync(e), 0);
	e = th_dev_kv(ctx, "e", "type=error;size=1M;errno=ENOSPC;ops=write,flush;"
		      "write_cache=1");
	assert_int_equal(bs_write_sync(e, buf, 4096, 0), -ENOSPC);
	assert_int_equal(bs_flush_sync(e), -ENOSPC);
	/* other ops pass: standalone, they act as on a zero device */
	memset(buf, 1, sizeof(buf));
	assert_int_equal(bs_read_sync(e, buf, 4096, 0), 0);
	assert_true(th_is_zero(buf, sizeof(buf)));
	assert_int_equal(bs_zeroout_sync(e, 0, 65536, BS_ZERO_NOFALLBACK, NULL,
					 NULL), 0);
	e = th_dev_kv(ctx, "f", "type=error;size=1M;errno=28;ops=read");
	assert_int_equal(bs_read_sync(e, buf, 4096, 0), -ENOSPC);
	e = th_dev_kv(ctx, "g", "type=error;size=1M;errno=etimedout;ops=all");
	assert_int_equal(bs_read_sync(e, buf, 4096, 0), -ETIMEDOUT);
}

static void test_error_bad_options(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *e = NULL;

	th_dev(ctx, "m", "mem:1M");
	th_dev(ctx, "n", "mem:1M");
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error;size=1M;errno=EWHAT",
				       &e), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "EWHAT"));
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error;size=1M;errno=0", &e),
			 -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error;size=1M;ops=trim",
				       &e), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "'trim'"));
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error", &e), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "needs size"));
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error;size=1M;devices=m",
				       &e), -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "e",
				       "type=error;devices=m;write_cache=1", &e),
			 -EINVAL);
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error;devices=m n", &e),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "one component"));
	assert_int_equal(th_dev_kv_try(ctx, "e", "type=error;devices=nope", &e),
			 -ENOENT);
	assert_non_null(strstr(bs_last_error(), "'nope'"));
	assert_null(bs_dev_find(ctx, "e"));
	/* no holder was left behind by the failures */
	assert_int_equal(bs_dev_find(ctx, "m")->nholders, 0);
}

/* Over a component: requests pass unchanged until after=N is used up. */
static void test_error_passthrough_model(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *m, *e;
	struct th_model model;
	uint8_t buf[4096];

	m = th_dev(ctx, "m", "mem:2M,chunk=4K");
	/* two error devices over m: both share it (claim=shared) */
	e = th_dev_kv(ctx, "e", "type=error;devices=m;ops=flush;after=0;"
		      "claim=shared");
	assert_int_equal(e->size, m->size);
	assert_true(bs_dev_write_zeroes_unmap(e));
	assert_int_equal(m->nholders, 1);
	th_model_init(&model, e, 17, 65536, 100000);
	th_model_run(&model, 300, TH_MODEL_ALL);
	th_model_check_all(&model);
	th_model_check(&model, m, 0, 0, m->size);
	th_model_free(&model);
	/* mem has no write cache: flushes complete above, never fail */
	assert_int_equal(bs_flush_sync(e), 0);
	/* after=3: three writes pass, the fourth fails */
	e = th_dev_kv(ctx, "f", "type=error;devices=m;ops=write;after=3;"
		      "claim=shared");
	memset(buf, 9, sizeof(buf));
	assert_int_equal(bs_write_sync(e, buf, 4096, 0), 0);
	assert_int_equal(bs_read_sync(e, buf, 4096, 0), 0); /* not counted */
	assert_int_equal(bs_write_sync(e, buf, 4096, 4096), 0);
	assert_int_equal(bs_write_sync(e, buf, 4096, 8192), 0);
	assert_int_equal(bs_write_sync(e, buf, 4096, 12288), -EIO);
	assert_int_equal(bs_write_sync(e, buf, 4096, 12288), -EIO);
	assert_int_equal(th_attr_u64(e, "error/passed"), 3);
	assert_int_equal(th_attr_u64(e, "error/failed"), 2);
	/* re-arm: two more pass */
	assert_int_equal(bs_attr_store(e, "error/after", "2"), 0);
	assert_int_equal(th_attr_u64(e, "error/passed"), 0);
	assert_int_equal(bs_write_sync(e, buf, 4096, 12288), 0);
	assert_int_equal(bs_write_sync(e, buf, 4096, 12288), 0);
	assert_int_equal(bs_write_sync(e, buf, 4096, 12288), -EIO);
	assert_int_equal(bs_attr_store(e, "error/after", "x"), -EINVAL);
	assert_int_equal(bs_attr_store(e, "error/passed", "1"), -EACCES);
	/* the knob below still reaches the error device */
	assert_int_equal(bs_attr_store(m, "queue/write_zeroes_unmap", "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(e));
	assert_int_equal(bs_attr_store(m, "queue/write_zeroes_unmap", "1"), 0);
	assert_true(bs_dev_write_zeroes_unmap(e));
}

/* errno=EOPNOTSUPP on write-zeroes: the core's rule drops write-zeroes
 * here and above, and zeroout still yields zeroes. */
static void test_error_eopnotsupp_write_zeroes(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *e, *v;
	uint8_t *buf = malloc(1 << 20);
	char rule[256];

	th_dev(ctx, "m", "mem:1M");
	e = th_dev_kv(ctx, "e",
		      "type=error;devices=m;ops=write_zeroes;errno=EOPNOTSUPP");
	v = th_dev_kv(ctx, "v", "type=linear;devices=e");
	memset(buf, 3, 1 << 20);
	assert_int_equal(bs_write_sync(v, buf, 1 << 20, 0), 0);
	assert_true(bs_dev_write_zeroes_unmap(v));
	assert_int_equal(bs_zeroout_sync(v, 0, 1 << 20, 0, NULL, NULL), 0);
	assert_int_equal(bs_read_sync(v, buf, 1 << 20, 0), 0);
	assert_true(th_is_zero(buf, 1 << 20));
	assert_true(e->wz_broken);
	assert_int_equal(th_attr_u64(v, "queue/write_zeroes_max_bytes"), 0);
	assert_false(bs_dev_write_zeroes_unmap(v));
	bs_explain_rule(e, BS_CAP_WRITE_ZEROES_UNMAP, rule, sizeof(rule));
	assert_non_null(strstr(rule, "EOPNOTSUPP at run time"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_error_standalone_fails_all,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_error_errno_and_ops,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_error_bad_options,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_error_passthrough_model,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			test_error_eopnotsupp_write_zeroes, th_ctx_setup,
			th_ctx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
