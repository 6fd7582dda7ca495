/* SPDX-License-Identifier: MIT */
/*
 * The file driver's create path: a new backing image is private to its
 * owner (0600, whatever the umask allows), and a size it cannot serve is
 * refused before anything is created.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "helpers/th.h"

static char dir[64];

static int make_dir(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/var/tmp/blkstack-fc.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state)
{
	(void)state;
	return rmdir(dir);
}

static void created_0600(void **state)
{
	struct bs_ctx *ctx;
	char spec[256], path[128];
	struct stat st;
	mode_t old = umask(0);	/* the mode must not rely on the umask */

	(void)state;
	snprintf(path, sizeof(path), "%s/vol.img", dir);
	snprintf(spec, sizeof(spec), "file:%s,size=1M", path);
	assert_int_equal(bs_ctx_new(&ctx), 0);
	th_dev(ctx, "vol", spec);
	bs_ctx_free(ctx);
	umask(old);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, 1 << 20);
	print_message("mode %o\n", st.st_mode & 07777);
	assert_int_equal(st.st_mode & 07777, 0600);

	/* an existing file keeps the mode its owner gave it */
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(bs_ctx_new(&ctx), 0);
	th_dev(ctx, "vol", spec);
	bs_ctx_free(ctx);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(unlink(path), 0);
}

static void bad_size_creates_nothing(void **state)
{
	struct bs_ctx *ctx;
	char spec[256], path[128];

	(void)state;
	snprintf(path, sizeof(path), "%s/odd.img", dir);
	snprintf(spec, sizeof(spec), "file:%s,size=1000", path);
	assert_int_equal(bs_ctx_new(&ctx), 0);
	assert_int_equal(th_dev_try(ctx, "odd", spec, NULL), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "not a multiple of the "
					      "logical block size 512"));
	assert_int_equal(access(path, F_OK), -1);
	snprintf(spec, sizeof(spec), "file:%s,size=6K,logical_block_size=4K",
		 path);
	assert_int_equal(th_dev_try(ctx, "odd", spec, NULL), -EINVAL);
	assert_int_equal(access(path, F_OK), -1);
	bs_ctx_free(ctx);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(created_0600),
		cmocka_unit_test(bad_size_creates_nothing),
	};

	return cmocka_run_group_tests_name("file_create", tests, make_dir,
					   remove_dir);
}
