/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fsth.h"
#include "th.h"

int fsth_setup(void **state)
{
	struct fsth *x = calloc(1, sizeof(*x));
	char spec[200];

	assert_non_null(x);
	snprintf(x->dir, sizeof(x->dir), "/var/tmp/bs-fs.XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(x->path, sizeof(x->path), "%s/fs.img", x->dir);
	assert_int_equal(bs_ctx_new(&x->ctx), 0);
	snprintf(spec, sizeof(spec), "file:%s,size=64M", x->path);
	x->dev = th_dev(x->ctx, "f", spec);
	if (bs_fs_mkfs(x->dev, NULL))
		fail_msg("mkfs: %s", bs_last_error());
	fsth_open(x, 0);
	*state = x;
	return 0;
}

int fsth_teardown(void **state)
{
	struct fsth *x = *state;
	char p[160];

	if (x->fs)
		bs_fs_close(x->fs);
	bs_dev_destroy(x->dev);
	bs_ctx_free(x->ctx);
	unlink(x->path);
	snprintf(p, sizeof(p), "%s/fsck.log", x->dir);
	unlink(p);
	rmdir(x->dir);
	free(x);
	return 0;
}

void fsth_close(struct fsth *x)
{
	if (x->fs && bs_fs_close(x->fs))
		fail_msg("close: %s", bs_last_error());
	x->fs = NULL;
}

void fsth_open(struct fsth *x, unsigned flags)
{
	if (bs_fs_open(x->dev, flags, &x->fs))
		fail_msg("open: %s", bs_last_error());
}

static int sh(const char *cmd)
{
	int rc = system(cmd);

	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

void fsth_fsck_reopen(struct fsth *x)
{
	char cmd[512];
	int rc;

	fsth_close(x);
	snprintf(cmd, sizeof(cmd), "e2fsck -fn '%s' >'%s/fsck.log' 2>&1",
		 x->path, x->dir);
	rc = sh(cmd);
	if (rc) {
		snprintf(cmd, sizeof(cmd), "cat '%s/fsck.log' >&2", x->dir);
		sh(cmd);
	}
	assert_int_equal(rc, 0);
	fsth_open(x, 0);
}

void fsth_debugfs(struct fsth *x, const char *cmd, char *out, size_t cap)
{
	char line[512];
	size_t n;
	FILE *p;

	snprintf(line, sizeof(line), "debugfs -R '%s' '%s' 2>/dev/null", cmd,
		 x->path);
	p = popen(line, "r");
	assert_non_null(p);
	n = fread(out, 1, cap - 1, p);
	out[n] = '\0';
	pclose(p);
}
