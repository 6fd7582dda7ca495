/* SPDX-License-Identifier: MIT */
/*
 * hostbdev on a loop device over a file: limits equal the host's sysfs,
 * data round-trips (aligned and not), both zeroing modes give zeroes,
 * discard frees the backing file's blocks, and many zeroing requests at
 * once pass through the worker pool. Needs root and losetup: skips (77)
 * with the reason otherwise. The loop device is the one this test made,
 * detached at exit.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define MiB (1ull << 20)
#define SIZE (64 * MiB)

static char dir[64], img[128], loopdev[64], spec[96];

static void detach(void)
{
	char cmd[128];

	if (loopdev[0]) {
		snprintf(cmd, sizeof(cmd), "losetup -d %s", loopdev);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: %s failed\n", cmd);
		loopdev[0] = 0;
	}
	if (img[0]) {
		unlink(img);
		snprintf(cmd, sizeof(cmd), "rm -rf %s/sys", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "warning: %s failed\n", cmd);
		rmdir(dir);
		img[0] = 0;
	}
}

/* Make the loop device; a reason to skip, or NULL. */
static const char *make_loop(void)
{
	static char why[192];
	char cmd[256];
	FILE *p;
	int fd;

	if (geteuid() != 0)
		return "not root (losetup needs it)";
	snprintf(dir, sizeof(dir), "/var/tmp/bs-hostbdev.XXXXXX");
	if (!mkdtemp(dir))
		return "cannot make a temp dir in /var/tmp";
	snprintf(img, sizeof(img), "%s/backing.img", dir);
	fd = open(img, O_CREAT | O_RDWR | O_EXCL, 0600);
	if (fd < 0 || ftruncate(fd, SIZE) < 0) {
		if (fd >= 0)
			close(fd);
		return "cannot create the backing file";
	}
	close(fd);
	atexit(detach);
	snprintf(cmd, sizeof(cmd), "losetup -f --show %s 2>&1", img);
	p = popen(cmd, "r");
	if (!p)
		return "cannot run losetup";
	if (!fgets(loopdev, sizeof(loopdev), p))
		loopdev[0] = 0;
	if (pclose(p) != 0 || strncmp(loopdev, "/dev/loop", 9)) {
		snprintf(why, sizeof(why), "losetup failed: %s", loopdev);
		why[strcspn(why, "\n")] = 0;
		loopdev[0] = 0;
		return why;
	}
	loopdev[strcspn(loopdev, "\n")] = 0;
	snprintf(spec, sizeof(spec), "hostbdev:%s", loopdev);
	return NULL;
}

static uint64_t sys_u64(const char *attr)
{
	char p[256], buf[64] = "";
	FILE *f;

	snprintf(p, sizeof(p), "/sys/class/block/%s/queue/%s", loopdev + 5,
		 attr);
	f = fopen(p, "r");
	if (!f)
		fail_msg("%s: %s", p, strerror(errno));
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = 0;
	fclose(f);
	return strtoull(buf, NULL, 10);
}

static int64_t backing_allocated(void)
{
	struct stat st;

	assert_int_equal(stat(img, &st), 0);
	return (int64_t)st.st_blocks * 512;
}

static void backing_read(void *buf, size_t len, off_t off)
{
	int fd = open(img, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void limits_match_sysfs(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "disk0", spec);
	const struct bs_limits *l = &d->limits;
	static const char *const same[] = {
		"logical_block_size", "physical_block_size", "minimum_io_size",
		"optimal_io_size", "max_hw_sectors_kb", "max_sectors_kb",
		"write_zeroes_max_bytes", "discard_granularity",
		"discard_max_bytes", "rotational", "fua", NULL };
	unsigned i;

	assert_int_equal(d->size, SIZE);
	for (i = 0; same[i]; i++) {
		char name[96];

		snprintf(name, sizeof(name), "queue/%s", same[i]);
		if (th_attr_u64(d, name) != sys_u64(same[i]))
			fail_msg("%s: blkstack %llu, host %llu", same[i],
				 th_attr_u64(d, name),
				 (unsigned long long)sys_u64(same[i]));
	}
	assert_int_equal(l->max_write_zeroes_sectors,
			 sys_u64("write_zeroes_max_bytes") >> 9);
	/* the host decides unmap zeroing, and the reason says which file */
	assert_int_equal(bs_dev_write_zeroes_unmap(d),
			 sys_u64("write_zeroes_unmap_max_bytes") > 0);
	assert_non_null(strstr(d->wz_reason, "write_zeroes_unmap"));
}

static void data_round_trip(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "disk0", spec);
	uint8_t *buf = malloc(4 * MiB + 1), *got = malloc(4 * MiB + 1);

	/* aligned, then from and into odd addresses (bounced) */
	th_fill(buf, 4 * MiB, 1);
	assert_int_equal(bs_write_sync(d, buf, 4 * MiB, MiB), 0);
	assert_int_equal(bs_read_sync(d, got, 4 * MiB, MiB), 0);
	assert_memory_equal(got, buf, 4 * MiB);
	th_fill(buf + 1, 4 * MiB, 2);
	assert_int_equal(bs_write_sync(d, buf + 1, 4 * MiB, 8 * MiB), 0);
	assert_int_equal(bs_read_sync(d, got + 1, 4 * MiB, 8 * MiB), 0);
	assert_memory_equal(got + 1, buf + 1, 4 * MiB);
	assert_int_equal(bs_flush_sync(d), 0);
	/* the bytes are in the loop device's backing file */
	backing_read(got, 4 * MiB, 8 * MiB);
	assert_memory_equal(got, buf + 1, 4 * MiB);
	free(buf);
	free(got);
}

static void zeroing_and_discard(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "disk0", spec);
	uint8_t *buf = malloc(16 * MiB), *got = malloc(4 * MiB);
	int64_t before, after;

	th_fill(buf, 16 * MiB, 3);
	assert_int_equal(bs_write_sync(d, buf, 16 * MiB, 0), 0);
	assert_int_equal(bs_flush_sync(d), 0);

	/* NOUNMAP (BLKZEROOUT): zeroes, blocks stay allocated */
	before = backing_allocated();
	assert_int_equal(bs_zeroout_sync(d, 0, 4 * MiB, BS_ZERO_NOUNMAP |
					 BS_ZERO_NOFALLBACK, NULL, NULL), 0);
	assert_int_equal(bs_read_sync(d, got, 4 * MiB, 0), 0);
	assert_true(th_is_zero(got, 4 * MiB));
	backing_read(got, 4 * MiB, 0);
	assert_true(th_is_zero(got, 4 * MiB));
	after = backing_allocated();
	assert_true(after >= before - (int64_t)MiB);

	/* may unmap: zeroes; blocks freed where the host offers unmap */
	assert_int_equal(bs_zeroout_sync(d, 4 * MiB, 4 * MiB,
					 BS_ZERO_NOFALLBACK, NULL, NULL), 0);
	assert_int_equal(bs_read_sync(d, got, 4 * MiB, 4 * MiB), 0);
	assert_true(th_is_zero(got, 4 * MiB));
	backing_read(got, 4 * MiB, 4 * MiB);
	assert_true(th_is_zero(got, 4 * MiB));
	if (bs_dev_write_zeroes_unmap(d))
		assert_true(backing_allocated() <= after - 3 * (int64_t)MiB);
	else
		print_message("note: %s offers no unmap zeroing (%s); "
			      "blocks not expected to be freed\n", loopdev,
			      d->wz_reason);

	/* discard (BLKDISCARD): the loop driver punches the backing file */
	if (d->limits.max_discard_sectors) {
		before = backing_allocated();
		assert_int_equal(bs_io_sync(d, BS_OP_DISCARD, 0, 8 * MiB,
					    4 * MiB, NULL), 0);
		assert_true(backing_allocated() <= before - 3 * (int64_t)MiB);
	}
	/* the rest is untouched */
	assert_int_equal(bs_read_sync(d, got, 4 * MiB, 12 * MiB), 0);
	assert_memory_equal(got, buf + 12 * MiB, 4 * MiB);
	free(buf);
	free(got);
}

struct many {
	struct bs_req req;
	int *pending;
};

static void many_done(struct bs_req *req)
{
	struct many *m = req->priv;

	assert_int_equal(req->result, 0);
	(*m->pending)--;
}

/* More zeroing and discard requests at once than the pool's queue holds. */
static void pool_backlog(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "disk0", spec);
	enum { N = 100, LEN = 64 * 1024 };
	struct many *m = calloc(N, sizeof(*m));
	uint8_t *buf = malloc(N * LEN), *got = malloc(N * LEN);
	int i, pending = 0;

	memset(buf, 0x5a, N * LEN);
	assert_int_equal(bs_write_sync(d, buf, N * LEN, 0), 0);
	for (i = 0; i < N; i++) {
		enum bs_op op = d->limits.max_discard_sectors && i % 3 == 2
					? BS_OP_DISCARD : BS_OP_WRITE_ZEROES;

		bs_req_init(&m[i].req, op,
			    op == BS_OP_WRITE_ZEROES && (i & 1) ? BS_REQ_NOUNMAP : 0,
			    (uint64_t)i * LEN, LEN, NULL, many_done, &m[i]);
		m[i].pending = &pending;
		pending++;
		bs_submit(d, &m[i].req);
	}
	while (pending)
		assert_int_equal(bs_loop_run_once(bs_ctx_loop(ctx), 1000), 0);
	/* loop devices read discarded ranges of a sparse file as zeroes */
	assert_int_equal(bs_read_sync(d, got, N * LEN, 0), 0);
	assert_true(th_is_zero(got, N * LEN));
	assert_int_equal(d->stats.ops[BS_OP_WRITE_ZEROES] +
				 d->stats.ops[BS_OP_DISCARD],
			 N);
	free(m);
	free(buf);
	free(got);
}

static void not_a_block_device(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = NULL;
	char s[192];

	snprintf(s, sizeof(s), "hostbdev:%s", img);
	assert_int_equal(th_dev_try(ctx, "x", s, &d), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "not a block device"));
	assert_int_equal(th_dev_try(ctx, "y", "hostbdev:/dev/no-such-disk",
				    &d), -ENOENT);
	assert_non_null(strstr(bs_last_error(), "y: hostbdev /dev/no-such-disk"));
}

/*
 * The device node is OFD-locked as file images are, also where O_EXCL is
 * off (exclusive=0) or does not apply (readonly=1): two blkstack users
 * never write one host device.
 */
static void locked_like_file(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = NULL, *e = NULL;
	char s[192], want[256];

	snprintf(s, sizeof(s), "%s,exclusive=0", spec);
	d = th_dev(ctx, "disk0", s);
	assert_int_equal(th_dev_try(ctx, "disk1", s, &e), -EBUSY);
	snprintf(want, sizeof(want), "disk1: hostbdev: %s: in use by device "
		 "disk0 of this process", loopdev);
	assert_string_equal(bs_last_error(), want);
	snprintf(s, sizeof(s), "%s,readonly=1", spec);
	assert_int_equal(th_dev_try(ctx, "disk1", s, &e), -EBUSY);
	/* lock=0: the user's call */
	snprintf(s, sizeof(s), "%s,exclusive=0,lock=0", spec);
	e = th_dev(ctx, "disk1", s);
	assert_int_equal(bs_dev_destroy(e), 0);
	assert_int_equal(bs_dev_destroy(d), 0);
	/* closed: the lock went with it */
	snprintf(s, sizeof(s), "%s,readonly=1", spec);
	d = th_dev(ctx, "disk0", s);
	e = th_dev(ctx, "disk1", s);	/* readers share */
	assert_int_equal(bs_dev_destroy(e), 0);
	assert_int_equal(bs_dev_destroy(d), 0);
}

/* ---- a fake sysfs: the host's other forms of the unmap attribute ------ */

static char fake[160];

static void put(const char *path, const char *val)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(val, f);
	fclose(f);
}

static void run(const char *cmd)
{
	if (system(cmd) != 0)
		fail_msg("%s failed", cmd);
}

/*
 * A copy of the loop device's sysfs under @fake: its queue files, and
 * dev/block/MAJ:MIN pointing at the disk (or, @partition, at a partition
 * directory below it that has a "partition" file and no queue).
 */
static void fake_sysfs(bool partition)
{
	char cmd[4096], disk[320], qdir[352], target[400];
	const char *n = loopdev + 5;
	struct stat st;

	assert_int_equal(stat(loopdev, &st), 0);
	snprintf(fake, sizeof(fake), "%s/sys", dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", fake);
	run(cmd);
	snprintf(disk, sizeof(disk), "%s/devices/virtual/block/%s", fake, n);
	snprintf(qdir, sizeof(qdir), "%s/queue", disk);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s %s/dev/block && "
		 "for f in /sys/class/block/%s/queue/*; do "
		 "[ -f \"$f\" ] && cat \"$f\" > %s/${f##*/} 2>/dev/null; done; true",
		 qdir, fake, n, qdir);
	run(cmd);
	if (partition) {
		snprintf(target, sizeof(target), "%s/%sp1", disk, n);
		snprintf(cmd, sizeof(cmd), "mkdir -p %s && echo 1 > %s/partition",
			 target, target);
		run(cmd);
	} else {
		snprintf(target, sizeof(target), "%s", disk);
	}
	snprintf(cmd, sizeof(cmd), "ln -s %s %s/dev/block/%u:%u", target, fake,
		 major(st.st_rdev), minor(st.st_rdev));
	run(cmd);
	setenv("BLKSTACK_SYSFS_ROOT", fake, 1);
}

static void fake_queue_file(const char *name, const char *val)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/devices/virtual/block/%s/queue/%s", fake,
		 loopdev + 5, name);
	if (val)
		put(p, val);
	else
		unlink(p);
}

static void kv_host(void *arg, const char *key, const char *fmt, ...)
{
	char *out = arg;
	va_list ap;

	if (strcmp(key, "host"))
		return;
	va_start(ap, fmt);
	vsnprintf(out, 128, fmt, ap);
	va_end(ap);
}

/* The boolean form decides where the merged form is absent; neither = no. */
static void unmap_attribute_forms(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d;

	fake_sysfs(false);
	fake_queue_file("write_zeroes_unmap_max_bytes", NULL);
	fake_queue_file("write_zeroes_unmap", "1\n");
	d = th_dev(ctx, "b1", spec);
	assert_true(bs_dev_write_zeroes_unmap(d));
	assert_non_null(strstr(d->wz_reason, "host queue/write_zeroes_unmap = 1"));
	assert_int_equal(bs_dev_destroy(d), 0);

	fake_queue_file("write_zeroes_unmap", "0\n");
	d = th_dev(ctx, "b0", spec);
	assert_false(bs_dev_write_zeroes_unmap(d));
	assert_non_null(strstr(d->wz_reason, "host queue/write_zeroes_unmap = 0"));
	assert_int_equal(bs_dev_destroy(d), 0);

	fake_queue_file("write_zeroes_unmap", NULL);
	d = th_dev(ctx, "none", spec);
	assert_false(bs_dev_write_zeroes_unmap(d));
	assert_non_null(strstr(d->wz_reason, "has no queue/write_zeroes_unmap"));
	assert_int_equal(bs_dev_destroy(d), 0);

	/* the host claims write-zeroes but not unmap zeroing */
	fake_queue_file("write_zeroes_unmap_max_bytes", "0\n");
	fake_queue_file("write_zeroes_max_bytes", "0\n");
	d = th_dev(ctx, "nowz", spec);
	assert_int_equal(d->limits.max_write_zeroes_sectors, 0);
	assert_non_null(strstr(d->wz_reason, "write_zeroes_max_bytes = 0"));
	assert_int_equal(bs_zeroout_sync(d, 0, MiB, BS_ZERO_NOFALLBACK, NULL,
					 NULL), -EOPNOTSUPP);
	unsetenv("BLKSTACK_SYSFS_ROOT");
}

/*
 * A host that claims unmap zeroing the device then refuses: the first
 * zeroout still yields zeroes (fallback), and afterwards the device offers
 * no write-zeroes (the core's run-time EOPNOTSUPP rule).
 */
static void host_refuses_at_run_time(void **state)
{
	struct bs_ctx *ctx = *state;
	uint8_t *buf = malloc(MiB);
	struct bs_dev *d;
	char desc[128] = "";

	if (sys_u64("write_zeroes_unmap_max_bytes") > 0) {
		print_message("SKIP: %s really has unmap zeroing\n", loopdev);
		free(buf);
		skip();
	}
	fake_sysfs(false);
	fake_queue_file("write_zeroes_unmap_max_bytes", "4294966784\n");
	d = th_dev(ctx, "liar", spec);
	unsetenv("BLKSTACK_SYSFS_ROOT");
	assert_true(bs_dev_write_zeroes_unmap(d));
	memset(buf, 0xee, MiB);
	assert_int_equal(bs_write_sync(d, buf, MiB, 0), 0);
	assert_int_equal(bs_zeroout_sync(d, 0, MiB, 0, NULL, NULL), 0);
	assert_int_equal(bs_read_sync(d, buf, MiB, 0), 0);
	assert_true(th_is_zero(buf, MiB));
	assert_false(bs_dev_write_zeroes_unmap(d));
	assert_int_equal(d->limits.max_write_zeroes_sectors, 0);
	assert_true(d->wz_broken);
	assert_non_null(strstr(d->wz_reason, "FALLOC_FL_WRITE_ZEROES"));
	bs_dev_describe(d, kv_host, desc);
	assert_string_equal(desc, loopdev + 5);
	free(buf);
}

/* A partition reads the limits of its disk. */
static void partition_reads_the_disk(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d;
	char desc[128] = "", want[160];

	fake_sysfs(true);
	fake_queue_file("logical_block_size", "4096\n");
	fake_queue_file("physical_block_size", "4096\n");
	d = th_dev(ctx, "part", spec);
	unsetenv("BLKSTACK_SYSFS_ROOT");
	assert_int_equal(d->limits.logical_block_size, 4096);
	bs_dev_describe(d, kv_host, desc);
	snprintf(want, sizeof(want), "%sp1 (partition of %s)", loopdev + 5,
		 loopdev + 5);
	assert_string_equal(desc, want);
}

/*
 * fallocate(2) on the loop device itself against bs_fallocate_sync() on
 * a hostbdev over it: every mode of the low 8 bits and a few unknown high
 * bits, with good, misaligned, out-of-range and overflowing arguments.
 * The two must agree on success and on the errno of every refusal: the
 * kernel's generic checks, then its block-device rules (modes allowed,
 * range inside the device, KEEP_SIZE trimming the end, logical-block
 * alignment, WRITE_ZEROES only with unmap zeroing).
 */
static void fallocate_rules_match_kernel(void **state)
{
	struct bs_ctx *ctx = *state;
	struct bs_dev *d = th_dev(ctx, "disk0", spec);
	const int64_t sz = (int64_t)SIZE;
	const struct {
		int64_t off, len;
	} args[] = {
		{ 0, 4096 }, { 1 << 20, 1 << 20 }, { -1, 4096 }, { 0, 0 },
		{ 0, -4096 }, { 512 + 1, 4096 }, { 4096, 100 },
		{ sz - 4096, 8192 }, { sz, 4096 }, { sz + 4096, 4096 },
		{ INT64_MAX, 1 }, { INT64_MAX - 4095, 8192 },
	};
	static const int high[] = { 0x100, 0x8000, 0x40000000 };
	unsigned agreed = 0, ok = 0, a;
	int mode, fd;

	fd = open(loopdev, O_RDWR | O_CLOEXEC);
	assert_true(fd >= 0);
	for (a = 0; a < sizeof(args) / sizeof(args[0]); a++) {
		for (mode = 0; mode < 256 + 3; mode++) {
			int m = mode < 256 ? mode : high[mode - 256];
			int want, got;

			want = fallocate(fd, m, args[a].off, args[a].len) ?
			       -errno : 0;
			bs_error_clear();
			got = bs_fallocate_sync(d, m, args[a].off,
						args[a].len, NULL, NULL);
			if (got != want)
				fail_msg("%s mode 0x%x off %lld len %lld: kernel "
					 "%d, blkstack %d (%s)", loopdev, m,
					 (long long)args[a].off,
					 (long long)args[a].len, want, got,
					 bs_last_error());
			agreed++;
			ok += !got;
		}
	}
	close(fd);
	print_message("%u cases agree with the kernel on %s (%u succeed)\n",
		      agreed, loopdev, ok);
	assert_true(ok > 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(limits_match_sysfs,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(data_round_trip, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(zeroing_and_discard,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(pool_backlog, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(not_a_block_device,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(locked_like_file, th_ctx_setup,
						th_ctx_teardown),
		cmocka_unit_test_setup_teardown(unmap_attribute_forms,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(host_refuses_at_run_time,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(partition_reads_the_disk,
						th_ctx_setup, th_ctx_teardown),
		cmocka_unit_test_setup_teardown(fallocate_rules_match_kernel,
						th_ctx_setup, th_ctx_teardown),
	};
	const char *why = make_loop();
	int rc;

	if (why) {
		printf("SKIP: %s\n", why);
		detach();
		return 77;
	}
	rc = cmocka_run_group_tests_name("hostbdev", tests, NULL, NULL);
	detach();
	return rc;
}
