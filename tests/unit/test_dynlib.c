/* SPDX-License-Identifier: MIT */
/*
 * Libraries loaded on first use (lib/core/dynlib.c): a slot per function,
 * one load per process, and errors that name the driver, the library,
 * the missing function and the Debian package.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "core/dynlib.h"

struct libc_tab {
	size_t (*strlen)(const char *);
	int (*abs)(int);
	void *not_there;
};

static void loads_and_fills(void **state)
{
	static struct libc_tab t;
	static const struct bs_dynsym syms[] = {
		{ "strlen", (void **)&t.strlen, false },
		{ "abs", (void **)&t.abs, false },
		{ "bs_no_such_function", &t.not_there, true },
	};
	static struct bs_dynlib lib = BS_DYNLIB("test", "libc.so.6", "libc6",
						syms);
	char why[256] = "";

	(void)state;
	assert_int_equal(bs_dynlib_load(&lib, why, sizeof(why)), 0);
	assert_string_equal(why, "");
	assert_int_equal(t.strlen("blkstack"), 8);
	assert_int_equal(t.abs(-3), 3);
	assert_null(t.not_there);		/* optional: no error */
	/* once per process: a second call does not load again */
	t.abs = NULL;
	assert_int_equal(bs_dynlib_load(&lib, NULL, 0), 0);
	assert_null(t.abs);
}

static void missing_library(void **state)
{
	static void *slot;
	static const struct bs_dynsym syms[] = { { "f", &slot, false } };
	static struct bs_dynlib lib = BS_DYNLIB("nbd", "libbs-missing.so.9",
						"libbs-missing9", syms);
	char why[256];

	(void)state;
	assert_int_equal(bs_dynlib_load(&lib, why, sizeof(why)), -ELIBACC);
	assert_non_null(strstr(why, "nbd: cannot load libbs-missing.so.9: "));
	assert_non_null(strstr(why, "(Debian: libbs-missing9)"));
	/* the same answer again, without trying again */
	why[0] = '\0';
	assert_int_equal(bs_dynlib_load(&lib, why, sizeof(why)), -ELIBACC);
	assert_non_null(strstr(why, "cannot load"));
}

static void missing_function(void **state)
{
	static void *a, *b;
	static const struct bs_dynsym syms[] = {
		{ "strlen", &a, false },
		{ "bs_no_such_function", &b, false },
	};
	static struct bs_dynlib lib = BS_DYNLIB("iscsi", "libc.so.6", "libc6",
						syms);
	char why[256];

	(void)state;
	assert_int_equal(bs_dynlib_load(&lib, why, sizeof(why)), -ELIBACC);
	assert_string_equal(why, "iscsi: libc.so.6 has no bs_no_such_function: "
			    "a version this build does not support");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(loads_and_fills),
		cmocka_unit_test(missing_library),
		cmocka_unit_test(missing_function),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
