/* SPDX-License-Identifier: MIT */
/*
 * What users read: sizes (one spelling for one size wherever it is
 * printed), the `ls` table's columns with UTF-8 names, and the reason an
 * attribute write is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/explain.h>

#include "helpers/th.h"

static void fmt_size_never_prints_1024(void **state)
{
	char buf[32];
	uint64_t gib = 1ull << 30;

	(void)state;
	assert_string_equal(bs_fmt_size(512, buf, sizeof(buf)), "512 B");
	assert_string_equal(bs_fmt_size(1023, buf, sizeof(buf)), "1023 B");
	assert_string_equal(bs_fmt_size(1024, buf, sizeof(buf)), "1 KiB");
	assert_string_equal(bs_fmt_size(1536, buf, sizeof(buf)), "1.5 KiB");
	assert_string_equal(bs_fmt_size(64 * gib, buf, sizeof(buf)),
			    "64 GiB");
	/* 1 TiB less one 4 KiB block: rounds to 1024.0 GiB, reads as TiB */
	assert_string_equal(bs_fmt_size((1ull << 40) - 4096, buf, sizeof(buf)),
			    "1.0 TiB");
	assert_string_equal(bs_fmt_size(1ull << 40, buf, sizeof(buf)),
			    "1 TiB");
	assert_string_equal(bs_fmt_size(2 * (1ull << 40) - 1, buf,
					sizeof(buf)), "2.0 TiB");
	assert_string_equal(bs_fmt_size((1ull << 20) - 1, buf, sizeof(buf)),
			    "1.0 MiB");
	assert_string_equal(bs_fmt_size(UINT64_MAX, buf, sizeof(buf)),
			    "16.0 EiB");
}

/* Display columns of a line, by the same rules a terminal uses. */
static int line_cols(const char *s, size_t n)
{
	int cols = 0;
	size_t i = 0;

	while (i < n) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x80) {
			cols++;
			i++;
		} else if ((c & 0xf0) == 0xe0) {
			/* U+4E00..U+9FFF are wide; box drawing is not */
			unsigned cp = (unsigned)(c & 0x0f) << 12 |
				      (unsigned)(s[i + 1] & 0x3f) << 6 |
				      (unsigned)(s[i + 2] & 0x3f);
			cols += cp >= 0x4e00 && cp <= 0x9fff ? 2 : 1;
			i += 3;
		} else if ((c & 0xe0) == 0xc0) {
			cols++;
			i += 2;
		} else {
			cols += 2;
			i += 4;
		}
	}
	return cols;
}

static void ls_columns_align_with_wide_names(void **state)
{
	struct bs_ctx *ctx = *state;
	char *text = NULL, *line, *save = NULL;
	size_t size = 0;
	int type_col = -1;
	unsigned lines = 0;
	FILE *f;

	th_dev(ctx, "\xe5\x8d\xb7\xe4\xb8\x80", "mem:1M");	/* 卷一 */
	th_dev(ctx, "caf\xc3\xa9", "mem:1M");			/* café */
	th_dev_kv(ctx, "plain", "type=linear;devices=\xe5\x8d\xb7\xe4\xb8\x80");
	f = open_memstream(&text, &size);
	assert_non_null(f);
	bs_ls_print(ctx, f);
	fclose(f);
	/* the TYPE column starts at the same display column on every line */
	for (line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		const char *t = strstr(line, "  TYPE");
		int col;

		if (!t)
			t = strstr(line, "  mem");
		if (!t)
			t = strstr(line, "  linear");
		assert_non_null(t);
		col = line_cols(line, (size_t)(t - line));
		if (type_col < 0)
			type_col = col;
		assert_int_equal(col, type_col);
		lines++;
	}
	assert_int_equal(lines, 4);
	free(text);
}

static void attr_refusal_says_what_is_allowed(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "m", "mem:64M");

	assert_int_equal(bs_attr_store(d, "queue/max_sectors_kb", "1"),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "allowed: 0"));
	assert_non_null(strstr(bs_last_error(), "4.."));
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "2"),
			 -EINVAL);
	assert_non_null(strstr(bs_last_error(), "allowed: 0 (disable) or 1"));
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap_max_bytes",
				       "5"), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "allowed: 0 (disable) or "));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fmt_size_never_prints_1024),
		cmocka_unit_test_setup_teardown(ls_columns_align_with_wide_names,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(attr_refusal_says_what_is_allowed,
						th_ctx_setup, th_ctx_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
