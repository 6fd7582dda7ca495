/* SPDX-License-Identifier: MIT */
/*
 * The stacking table: how WRITE_ZEROES_UNMAP and write_zeroes_max_bytes
 * come out of linear, striped and mirror stacks, which component explain
 * names, three levels over mem and file devices, the knob flipped at the
 * bottom, and a component that claims write-zeroes and refuses it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers/th.h"

#include <blkstack/attr.h>
#include <blkstack/explain.h>
#include <blkstack/zero.h>

static const char *const mappers[] = { "linear", "striped", "mirror" };
#define NMAPPERS (sizeof(mappers) / sizeof(mappers[0]))

static struct bs_dev *stack(struct bs_ctx *ctx, const char *name,
			    const char *type, const char *devices)
{
	char kv[256];

	/* the tables stack every mapper over the same legs: shared claims */
	snprintf(kv, sizeof(kv), "type=%s;devices=%s;claim=shared", type,
		 devices);
	return th_dev_kv(ctx, name, kv);
}

static const char *rule(struct bs_dev *d)
{
	static char buf[256];

	bs_explain_rule(d, BS_CAP_WRITE_ZEROES_UNMAP, buf, sizeof(buf));
	return buf;
}

#define assert_rule_has(dev, text)                                          \
	do {                                                                \
		const char *r_ = rule(dev);                                 \
		if (!strstr(r_, text))                                      \
			fail_msg("%s: rule '%s' lacks '%s'", (dev)->name, r_, \
				 text);                                     \
	} while (0)

/* One row of the table per mapper: capable components -> capable. */
static void test_table_all_capable(void **state)
{
	struct bs_ctx *ctx = *state;
	unsigned i;

	th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "b", "mem:1M");
	for (i = 0; i < NMAPPERS; i++) {
		struct bs_dev *v = stack(ctx, mappers[i], mappers[i], "a b");

		assert_true(bs_dev_write_zeroes_unmap(v));
		assert_true(th_attr_u64(v, "queue/write_zeroes_max_bytes") > 0);
		assert_int_equal(th_attr_u64(v, "queue/write_zeroes_unmap_max_hw_bytes"),
				 th_attr_u64(v, "queue/write_zeroes_max_bytes"));
		assert_rule_has(v, "every component has it");
	}
}

/* zeroes = write, or the knob at 0, on one component -> cleared, and the
 * rule names that component. */
static void test_table_one_without_unmap(void **state)
{
	struct bs_ctx *ctx = *state;
	char name[32];
	unsigned i;

	th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "w", "mem:1M,zeroes=write");
	th_dev(ctx, "k", "mem:1M,write_zeroes_unmap=0");
	for (i = 0; i < NMAPPERS; i++) {
		struct bs_dev *v;

		snprintf(name, sizeof(name), "%s-w", mappers[i]);
		v = stack(ctx, name, mappers[i], "a w");
		assert_false(bs_dev_write_zeroes_unmap(v));
		/* write-zeroes itself stays: it just writes */
		assert_true(th_attr_u64(v, "queue/write_zeroes_max_bytes") > 0);
		assert_rule_has(v, "cleared because w lacks it");
		assert_rule_has(bs_dev_find(ctx, "w"), "zeroes = write");

		snprintf(name, sizeof(name), "%s-k", mappers[i]);
		v = stack(ctx, name, mappers[i], "k a");
		assert_false(bs_dev_write_zeroes_unmap(v));
		assert_rule_has(v, "cleared because k lacks it");
		assert_rule_has(bs_dev_find(ctx, "k"),
				"knob write_zeroes_unmap=0 set by user");
	}
}

/* A component with no write-zeroes at all -> the stack has none: max 0,
 * feature clear, and the rule says which component has none. */
static void test_table_one_without_write_zeroes(void **state)
{
	struct bs_ctx *ctx = *state;
	unsigned i;

	th_dev(ctx, "a", "mem:1M");
	th_dev(ctx, "n", "mem:1M,max_write_zeroes=0");
	for (i = 0; i < NMAPPERS; i++) {
		struct bs_dev *v = stack(ctx, mappers[i], mappers[i], "a n");

		assert_int_equal(th_attr_u64(v, "queue/write_zeroes_max_bytes"), 0);
		assert_int_equal(v->limits.features & BS_FEAT_WRITE_ZEROES_UNMAP, 0);
		assert_false(bs_dev_write_zeroes_unmap(v));
		assert_rule_has(v, "write_zeroes_max_bytes = 0) because n has none");
		/* zeroout still works, by writing */
		assert_int_equal(bs_zeroout_sync(v, 0, 65536, 0, NULL, NULL), 0);
		assert_int_equal(bs_zeroout_sync(v, 0, 65536, BS_ZERO_NOFALLBACK,
						 NULL, NULL), -EOPNOTSUPP);
	}
}

struct files {
	char dir[64];
	char path[4][96];
};

static void files_make(struct files *f)
{
	unsigned i;

	snprintf(f->dir, sizeof(f->dir), "/var/tmp/bs-stack.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	for (i = 0; i < 4; i++)
		snprintf(f->path[i], sizeof(f->path[i]), "%s/f%u.img", f->dir, i);
}

static void files_rm(struct files *f)
{
	unsigned i;

	for (i = 0; i < 4; i++)
		unlink(f->path[i]);
	rmdir(f->dir);
}

/*
 * Three levels: striped over two linears, each over a mem and a file
 * device. What holds one level up holds at the top.
 */
static void test_three_levels(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *f0, *top, *top2, *top3;
	struct files f;
	char spec[160];
	bool file_unmap;

	files_make(&f);
	th_dev(ctx, "m0", "mem:1M");
	th_dev(ctx, "m1", "mem:1M");
	snprintf(spec, sizeof(spec), "file:%s,size=1M", f.path[0]);
	f0 = th_dev(ctx, "f0", spec);
	snprintf(spec, sizeof(spec), "file:%s,size=1M", f.path[1]);
	th_dev(ctx, "f1", spec);
	snprintf(spec, sizeof(spec), "file:%s,size=1M,zeroes=write", f.path[2]);
	th_dev(ctx, "fw", spec);
	snprintf(spec, sizeof(spec), "file:%s,size=1M,zeroes=none", f.path[3]);
	th_dev(ctx, "fn", spec);
	file_unmap = bs_dev_write_zeroes_unmap(f0);

	stack(ctx, "l0", "linear", "m0 f0");
	stack(ctx, "l1", "linear", "m1 f1");
	top = stack(ctx, "top", "striped", "l0 l1");
	/* the host filesystem decides the file legs; the stack follows */
	assert_int_equal(bs_dev_write_zeroes_unmap(top), file_unmap);
	if (!file_unmap)
		print_message("note: files here cannot unmap (%s)\n", rule(f0));
	else
		assert_rule_has(top, "every component has it");

	/* one file leg with zeroes = write: cleared at every level above it */
	stack(ctx, "l2", "linear", "m0 fw");
	top2 = stack(ctx, "top2", "striped", "l1 l2");
	assert_false(bs_dev_write_zeroes_unmap(top2));
	assert_true(th_attr_u64(top2, "queue/write_zeroes_max_bytes") > 0);
	assert_rule_has(bs_dev_find(ctx, "l2"), "cleared because fw lacks it");
	assert_rule_has(top2, "l2");

	/* one with no write-zeroes: none at the top either */
	stack(ctx, "l3", "linear", "m1 fn");
	top3 = stack(ctx, "top3", "striped", "l0 l3");
	assert_int_equal(th_attr_u64(top3, "queue/write_zeroes_max_bytes"), 0);
	assert_false(bs_dev_write_zeroes_unmap(top3));
	assert_rule_has(bs_dev_find(ctx, "l3"), "because fn has none");
	assert_rule_has(top3, "because l3 has none");
	/* and zeroes still come out at the top, by writing */
	assert_int_equal(bs_zeroout_sync(top3, 0, top3->size, 0, NULL, NULL), 0);
	files_rm(&f);
}

/* The knob at the bottom clears the feature on every device above within
 * the same call, through either view of it; and back. */
static void test_knob_flip_propagates(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *m0, *l0, *l1, *s, *mir, *top;
	char hw[32];

	m0 = th_dev(ctx, "m0", "mem:1M");
	th_dev(ctx, "m1", "mem:1M");
	th_dev(ctx, "m2", "mem:2M");
	th_dev(ctx, "m3", "mem:4M");
	l0 = stack(ctx, "l0", "linear", "m0 m1");
	l1 = stack(ctx, "l1", "linear", "m2");
	s = stack(ctx, "s", "striped", "l0 l1");
	mir = stack(ctx, "mir", "mirror", "s m3");
	top = stack(ctx, "top", "linear", "mir");
	assert_true(bs_dev_write_zeroes_unmap(top));

	assert_int_equal(bs_attr_store(m0, "queue/write_zeroes_unmap", "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(l0));
	assert_true(bs_dev_write_zeroes_unmap(l1));
	assert_false(bs_dev_write_zeroes_unmap(s));
	assert_false(bs_dev_write_zeroes_unmap(mir));
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_int_equal(th_attr_u64(top, "queue/write_zeroes_unmap"), 0);
	assert_rule_has(l0, "cleared because m0 lacks it");
	assert_rule_has(s, "cleared because l0 lacks it");
	assert_rule_has(mir, "cleared because s lacks it");
	assert_rule_has(top, "cleared because mir lacks it");

	assert_int_equal(bs_attr_store(m0, "queue/write_zeroes_unmap", "1"), 0);
	assert_true(bs_dev_write_zeroes_unmap(l0));
	assert_true(bs_dev_write_zeroes_unmap(s));
	assert_true(bs_dev_write_zeroes_unmap(mir));
	assert_true(bs_dev_write_zeroes_unmap(top));
	assert_rule_has(top, "every component has it");

	/* upstream's byte form is the same state */
	assert_int_equal(bs_attr_store(m0, "queue/write_zeroes_unmap_max_bytes",
				       "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(top));
	snprintf(hw, sizeof(hw), "%llu",
		 th_attr_u64(m0, "queue/write_zeroes_unmap_max_hw_bytes"));
	assert_int_equal(bs_attr_store(m0, "queue/write_zeroes_unmap_max_bytes",
				       hw), 0);
	assert_true(bs_dev_write_zeroes_unmap(top));

	/* the knob in the middle: clears above, leaves below alone */
	assert_int_equal(bs_attr_store(s, "queue/write_zeroes_unmap", "0"), 0);
	assert_false(bs_dev_write_zeroes_unmap(top));
	assert_true(bs_dev_write_zeroes_unmap(l0));
	assert_rule_has(s, "knob write_zeroes_unmap=0 set by user");
	assert_int_equal(bs_attr_store(s, "queue/write_zeroes_unmap", "1"), 0);
	assert_true(bs_dev_write_zeroes_unmap(top));
}

/*
 * A component that claims write-zeroes and answers EOPNOTSUPP: the first
 * zeroout still yields zeroes (fallback), then the stack and everything
 * above it report no write-zeroes and no unmap. For each mapper.
 */
static void test_broken_write_zeroes(void **state)
{
	struct bs_ctx *ctx = *state;
	uint8_t *buf = malloc(2 << 20);
	char name[32], devs[64];
	unsigned i;

	for (i = 0; i < NMAPPERS; i++) {
		struct bs_dev *v, *top, *b;

		snprintf(name, sizeof(name), "a%u", i);
		th_dev(ctx, name, "mem:1M");
		snprintf(name, sizeof(name), "b%u", i);
		b = th_dev(ctx, name, "mem:1M,broken_write_zeroes=1");
		snprintf(devs, sizeof(devs), "a%u b%u", i, i);
		v = stack(ctx, mappers[i], mappers[i], devs);
		snprintf(name, sizeof(name), "top%u", i);
		top = stack(ctx, name, "linear", mappers[i]);
		assert_true(bs_dev_write_zeroes_unmap(top));

		memset(buf, 0xc3, top->size);
		assert_int_equal(bs_write_sync(top, buf, top->size, 0), 0);
		assert_int_equal(bs_zeroout_sync(top, 0, top->size, 0, NULL,
						 NULL), 0);
		assert_int_equal(bs_read_sync(top, buf, top->size, 0), 0);
		if (!th_is_zero(buf, top->size))
			fail_msg("%s: zeroout did not yield zeroes", mappers[i]);
		assert_true(b->wz_broken);
		assert_rule_has(b, "EOPNOTSUPP at run time");
		assert_int_equal(th_attr_u64(v, "queue/write_zeroes_max_bytes"), 0);
		assert_false(bs_dev_write_zeroes_unmap(v));
		assert_int_equal(th_attr_u64(top, "queue/write_zeroes_max_bytes"),
				 0);
		assert_false(bs_dev_write_zeroes_unmap(top));
		assert_rule_has(v, "because b");
		/* and it stays off: NOFALLBACK is refused up front now */
		assert_int_equal(bs_zeroout_sync(top, 0, 4096, BS_ZERO_NOFALLBACK,
						 NULL, NULL), -EOPNOTSUPP);
		/* the knob cannot bring back what the device refused */
		assert_int_equal(bs_attr_store(b, "queue/write_zeroes_unmap", "1"),
				 0);
		assert_false(bs_dev_write_zeroes_unmap(top));
	}
	free(buf);
}

/* explain names the leaf that says no, in the tree under the top. */
static void test_explain_tree(void **state)
{
	struct bs_ctx *ctx = *state;
	char *text = NULL;
	size_t len = 0;
	FILE *f;

	th_dev(ctx, "m0", "mem:1M");
	th_dev(ctx, "m1", "mem:1M");
	th_dev(ctx, "slow", "mem:1M,zeroes=write");
	th_dev(ctx, "m2", "mem:1M");
	stack(ctx, "l0", "linear", "m0 m1");
	stack(ctx, "l1", "linear", "slow m2");
	stack(ctx, "vol", "striped", "l0 l1");
	f = open_memstream(&text, &len);
	assert_int_equal(bs_explain_print(bs_dev_find(ctx, "vol"),
					  BS_CAP_WRITE_ZEROES_UNMAP, f), 0);
	fclose(f);
	assert_non_null(strstr(text, "vol (striped, 4 MiB): write_zeroes_unmap "
				     "no: striped: cleared because l1 lacks it"));
	assert_non_null(strstr(text, "l1 (linear, 2 MiB): write_zeroes_unmap no: "
				     "linear: cleared because slow lacks it"));
	assert_non_null(strstr(text, "slow (mem, 1 MiB): write_zeroes_unmap no: "
				     "mem: zeroes = write"));
	free(text);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_table_all_capable,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_table_one_without_unmap,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(
			test_table_one_without_write_zeroes, th_ctx_setup,
			th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_three_levels, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_knob_flip_propagates,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_broken_write_zeroes,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(test_explain_tree, th_ctx_setup,
						th_ctx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
