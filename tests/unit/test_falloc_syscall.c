/* SPDX-License-Identifier: MIT */
/*
 * The generic fallocate checks against the host kernel's fallocate(2):
 * every mode value of the low 8 bits plus unknown high bits and bad
 * arguments, on a regular file on the real filesystem. Where blkstack's
 * check fails, the syscall must fail with the same errno; where it passes,
 * the syscall may still refuse a mode the filesystem lacks (EOPNOTSUPP).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <blkstack/zero.h>

#include "helpers/th.h"

/* Compare in a fresh directory under @base; skips if @base is not @fs. */
static void compare_in(const char *base, const char *fs_name, long fs_magic)
{
	static const struct {
		int64_t off, len;
	} args[] = {
		{ 0, 4096 }, { -1, 4096 }, { 0, 0 }, { 0, -4096 },
		{ INT64_MAX, 1 }, { INT64_MAX - 4095, 8192 },
	};
	static const int high[] = { 0x100, 0x8000, 0x40000000 };
	char dir[128], path[160];
	unsigned compared = 0, fs_refused = 0, a;
	int mode, fd;
	struct statfs sf;

	if (statfs(base, &sf) || (fs_magic && sf.f_type != fs_magic)) {
		print_message("SKIP: %s is not %s here\n", base, fs_name);
		skip();
	}
	snprintf(dir, sizeof(dir), "%s/bs-fsys.XXXXXX", base);
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	for (a = 0; a < sizeof(args) / sizeof(args[0]); a++) {
		for (mode = 0; mode < 256 + 3; mode++) {
			int m = mode < 256 ? mode : high[mode - 256];
			int want, got;

			fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
			assert_true(fd >= 0);
			assert_int_equal(ftruncate(fd, 1 << 20), 0);
			/* INT64_MAX stands in for the fs's own s_maxbytes: only
			 * overflow rows (which every fs refuses) use it */
			want = bs_falloc_check(m, args[a].off, args[a].len,
					       INT64_MAX);
			got = fallocate(fd, m, args[a].off, args[a].len) ? -errno : 0;
			close(fd);
			if (want) {
				if (got != want)
					fail_msg("mode 0x%x off %lld len %lld: "
						 "blkstack %d, kernel %d", m,
						 (long long)args[a].off,
						 (long long)args[a].len, want, got);
				compared++;
			} else if (got == -EOPNOTSUPP || got == -EFBIG) {
				/* fs lacks the mode, or its s_maxbytes is lower */
				fs_refused++;
			} else if (got) {
				fail_msg("mode 0x%x: blkstack accepts, kernel %d",
					 m, got);
			} else {
				compared++;
			}
		}
	}
	unlink(path);
	rmdir(dir);
	print_message("%s (%s): %u rows agree with the kernel; %u rows pass "
		      "the generic check and are refused by this filesystem "
		      "(EOPNOTSUPP/EFBIG)\n", base, fs_name, compared,
		      fs_refused);
	assert_true(compared > 1000);
}

/* The real filesystem the project's temp files live on (ext4 here). */
static void compare_on_disk_fs(void **state)
{
	(void)state;
	compare_in("/var/tmp", "a disk filesystem", 0);
}

/* tmpfs: no ZERO_RANGE, its own answers for the modes it lacks. */
static void compare_on_tmpfs(void **state)
{
	(void)state;
	compare_in("/dev/shm", "tmpfs", 0x01021994 /* TMPFS_MAGIC */);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(compare_on_disk_fs),
		cmocka_unit_test(compare_on_tmpfs),
	};

	return cmocka_run_group_tests_name("falloc_syscall", tests, NULL, NULL);
}
