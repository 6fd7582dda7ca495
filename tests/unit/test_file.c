/* SPDX-License-Identifier: MIT */
/* file driver: async data against a model, zeroing modes, allocation map. */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/zero.h>

#include "helpers/th.h"

#define MiB (1ull << 20)
#define SIZE (32 * MiB)

struct fx {
	struct bs_ctx *ctx;
	char dir[64], path[128];
};

static int setup(void **state)
{
	struct fx *x = calloc(1, sizeof(*x));

	snprintf(x->dir, sizeof(x->dir), "/var/tmp/bs-file.XXXXXX");
	assert_non_null(mkdtemp(x->dir));
	snprintf(x->path, sizeof(x->path), "%s/f.img", x->dir);
	assert_int_equal(bs_ctx_new(&x->ctx), 0);
	*state = x;
	return 0;
}

static int teardown(void **state)
{
	struct fx *x = *state;

	bs_ctx_free(x->ctx);
	unlink(x->path);
	rmdir(x->dir);
	free(x);
	return 0;
}

static struct bs_dev *open_file(struct fx *x, const char *extra)
{
	char spec[256];

	snprintf(spec, sizeof(spec), "file:%s,size=32M%s", x->path, extra);
	return th_dev(x->ctx, "f", spec);
}

struct io {
	struct bs_req req;
	int *pending;
	uint8_t *buf;
};

static void io_done(struct bs_req *req)
{
	struct io *io = req->priv;

	assert_int_equal(req->result, 0);
	(*io->pending)--;
}

/*
 * Many requests in flight at once; every byte compared with a model.
 * Writes of 512 B to 128 KiB: with the default inline_write_max (64K)
 * some are written on the loop thread, the others through io_uring.
 */
static void model_run(struct fx *x, const char *extra)
{
	struct bs_dev *d = open_file(x, extra);
	uint8_t *model = calloc(1, SIZE), *got = malloc(SIZE);
	struct io ios[64];
	uint64_t seed = 42;
	int round, i, pending;

	for (round = 0; round < 20; round++) {
		pending = 0;
		/* non-overlapping writes in one batch: 64 slots of 512 KiB */
		for (i = 0; i < 64; i++) {
			uint64_t slot = (uint64_t)i * (SIZE / 64);
			uint64_t off = slot + (th_rand(&seed) % 512) * 512;
			uint64_t len = 512 * (1 + th_rand(&seed) % 256);
			ios[i].buf = malloc(len);
			th_fill(ios[i].buf, len, th_rand(&seed));
			memcpy(model + off, ios[i].buf, len);
			ios[i].pending = &pending;
			bs_req_init(&ios[i].req, BS_OP_WRITE, 0, off, len,
				    ios[i].buf, io_done, &ios[i]);
			pending++;
			bs_submit(d, &ios[i].req);
		}
		while (pending)
			assert_int_equal(bs_loop_run_once(bs_ctx_loop(x->ctx), 1000), 0);
		for (i = 0; i < 64; i++)
			free(ios[i].buf);
		/* a zeroout and a discard across slots */
		uint64_t zo = (th_rand(&seed) % (SIZE / 4096 - 600)) * 4096;
		assert_int_equal(bs_zeroout_sync(d, zo, 600 * 4096,
						 round & 1 ? BS_ZERO_NOUNMAP : 0,
						 NULL, NULL), 0);
		memset(model + zo, 0, 600 * 4096);
	}
	assert_int_equal(bs_read_sync(d, got, SIZE, 0), 0);
	assert_memory_equal(got, model, SIZE);
	assert_int_equal(bs_flush_sync(d), 0);
	assert_true(d->stats.ops[BS_OP_FLUSH] >= 1);
	free(model);
	free(got);
	assert_int_equal(bs_dev_destroy(d), 0);
}

static void async_model(void **state)
{
	model_run(*state, "");
}

static void kv_inline(void *arg, const char *key, const char *fmt, ...)
{
	char *out = arg;
	va_list ap;

	if (strcmp(key, "inline_write_max"))
		return;
	va_start(ap, fmt);
	vsnprintf(out, 64, fmt, ap);
	va_end(ap);
}

/*
 * inline_write_max: every write through the ring (0), every write of the
 * model inline (1M), the same bytes either way; above 1M refused; shown
 * by describe; off under direct=1 (O_DIRECT writes are not buffered).
 */
static void inline_writes(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = NULL;
	char spec[256], got[64] = "";

	model_run(x, ",inline_write_max=0");
	model_run(x, ",inline_write_max=1M");
	snprintf(spec, sizeof(spec), "file:%s,inline_write_max=2M", x->path);
	assert_int_equal(th_dev_try(x->ctx, "g", spec, &d), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "inline_write_max"));
	d = open_file(x, "");
	bs_dev_describe(d, kv_inline, got);
	assert_string_equal(got, "65536");
	assert_int_equal(bs_dev_destroy(d), 0);
	snprintf(spec, sizeof(spec), "file:%s,direct=1", x->path);
	if (th_dev_try(x->ctx, "h", spec, &d) == 0) {
		bs_dev_describe(d, kv_inline, got);
		assert_string_equal(got, "0");
	}
}

static void errors_and_knob(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = open_file(x, ""), *e = NULL;
	uint8_t *buf = malloc(MiB), *got = malloc(MiB);
	struct stat st;
	char spec[256];

	th_fill(buf, MiB, 5);
	assert_int_equal(bs_write_sync(d, buf, MiB, 0), 0);
	assert_int_equal(bs_write_sync(d, buf, 4096, SIZE - 512), -EINVAL);
	assert_int_equal(bs_write_sync(d, buf, 1000, 0), -EINVAL);
	assert_int_equal(bs_fallocate_sync(d, BS_FALLOC_WRITE_ZEROES |
					   BS_FALLOC_KEEP_SIZE, 0, MiB, NULL, NULL),
			 -EOPNOTSUPP);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "0"), 0);
	assert_int_equal(bs_fallocate_sync(d, BS_FALLOC_WRITE_ZEROES, 0, MiB,
					   NULL, NULL), -EOPNOTSUPP);
	assert_int_equal(bs_read_sync(d, got, MiB, 0), 0);
	assert_memory_equal(got, buf, MiB);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "2"),
			 -EINVAL);
	assert_int_equal(bs_attr_store(d, "queue/write_zeroes_unmap", "1"), 0);
	assert_int_equal(bs_flush_sync(d), 0);
	stat(x->path, &st);
	assert_true(st.st_blocks * 512 >= (long long)MiB);
	assert_int_equal(bs_fallocate_sync(d, BS_FALLOC_WRITE_ZEROES, 0, MiB,
					   NULL, NULL), 0);
	stat(x->path, &st);
	assert_true(st.st_blocks * 512 < (long long)MiB);
	assert_int_equal(bs_read_sync(d, got, MiB, 0), 0);
	assert_true(th_is_zero(got, MiB));
	/* a size that does not match the existing file is refused */
	snprintf(spec, sizeof(spec), "file:%s,size=64M", x->path);
	assert_int_equal(th_dev_try(x->ctx, "g", spec, &e), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "not resizing"));
	assert_int_equal(th_dev_try(x->ctx, "h", "file:/nonexistent/dir/x.img",
				    &e), -ENOENT);
	free(buf);
	free(got);
}

static void zeroes_modes(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = open_file(x, ",zeroes=write");
	struct bs_dev *n;
	char spec[256];

	assert_false(bs_dev_write_zeroes_unmap(d));
	assert_true(th_attr_u64(d, "queue/write_zeroes_max_bytes") > 0);
	assert_non_null(strstr(d->wz_reason, "zeroes = write"));
	assert_int_equal(bs_dev_destroy(d), 0);
	snprintf(spec, sizeof(spec), "file:%s,zeroes=none", x->path);
	n = th_dev(x->ctx, "n", spec);
	assert_int_equal(th_attr_u64(n, "queue/write_zeroes_max_bytes"), 0);
	assert_int_equal(bs_zeroout_sync(n, 0, MiB, BS_ZERO_NOFALLBACK, NULL,
					 NULL), -EOPNOTSUPP);
}

static int ext_fn(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	int *n = arg;

	(void)len;
	if (*n == 0)
		assert_int_equal(flags, BS_EXT_HOLE | BS_EXT_ZERO);
	if (*n == 1) {
		assert_int_equal(off, 4 * MiB);
		assert_int_equal(flags, 0);
	}
	(*n)++;
	return 0;
}

static void block_status(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = open_file(x, "");
	uint8_t *buf = malloc(MiB);
	int n = 0;

	memset(buf, 7, MiB);
	assert_int_equal(bs_write_sync(d, buf, MiB, 4 * MiB), 0);
	assert_int_equal(bs_block_status(d, 0, SIZE, ext_fn, &n), 0);
	assert_int_equal(n, 3);
	free(buf);
}

static void kv_direct(void *arg, const char *key, const char *fmt, ...)
{
	char *out = arg;
	va_list ap;

	if (strcmp(key, "direct"))
		return;
	va_start(ap, fmt);
	vsnprintf(out, 256, fmt, ap);
	va_end(ap);
}

/*
 * direct=1: user buffers at odd addresses and iovecs of odd pieces are
 * bounced through aligned memory; many at once (more than the bounce
 * pool) still all land, and the file holds exactly those bytes.
 */
static void direct_unaligned(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = NULL;
	enum { N = 48, LEN = 64 * 1024 };
	uint8_t *raw[N], *model = calloc(1, SIZE), *got = malloc(SIZE + 1);
	struct io ios[N];
	struct iovec iov[3];
	struct bs_req req;
	char spec[256], desc[256] = "";
	int i, pending = 0, fd, err;
	uint32_t lbs;

	snprintf(spec, sizeof(spec), "file:%s,size=32M,direct=1", x->path);
	err = th_dev_try(x->ctx, "f", spec, &d);
	if (err == -EINVAL && strstr(bs_last_error(), "open")) {
		print_message("SKIP: O_DIRECT refused on %s: %s\n", x->dir,
			      bs_last_error());
		free(model);
		free(got);
		skip();
	}
	assert_int_equal(err, 0);
	lbs = d->limits.logical_block_size;
	for (i = 0; i < N; i++) {
		uint64_t off = (uint64_t)i * (SIZE / N) / lbs * lbs + lbs;

		raw[i] = malloc(LEN + 1);
		ios[i].buf = raw[i] + 1; /* never aligned */
		th_fill(ios[i].buf, LEN, (uint64_t)i + 100);
		memcpy(model + off, ios[i].buf, LEN);
		ios[i].pending = &pending;
		bs_req_init(&ios[i].req, BS_OP_WRITE, 0, off, LEN, ios[i].buf,
			    io_done, &ios[i]);
		pending++;
		bs_submit(d, &ios[i].req);
	}
	while (pending)
		assert_int_equal(bs_loop_run_once(bs_ctx_loop(x->ctx), 1000), 0);
	for (i = 0; i < N; i++)
		free(raw[i]);

	/* a write from three pieces of odd lengths, one request */
	uint8_t *pieces = malloc(3 * lbs + 7);
	th_fill(pieces, 3 * lbs + 7, 9);
	iov[0] = (struct iovec){ pieces + 3, 100 };
	iov[1] = (struct iovec){ pieces + 103, 2 * lbs - 200 };
	iov[2] = (struct iovec){ pieces + 3 + 2 * lbs - 100, lbs + 100 };
	memcpy(model + 8 * lbs, pieces + 3, 3 * lbs);
	memset(&req, 0, sizeof(req));
	bs_req_init(&req, BS_OP_WRITE, 0, 8 * lbs, 3 * lbs, NULL, io_done,
		    &ios[0]);
	req.iov = iov;
	req.iovcnt = 3;
	pending = 1;
	ios[0].pending = &pending;
	bs_submit(d, &req);
	while (pending)
		assert_int_equal(bs_loop_run_once(bs_ctx_loop(x->ctx), 1000), 0);
	free(pieces);

	/* read back into an odd address, through the device and the file */
	assert_int_equal(bs_read_sync(d, got + 1, SIZE, 0), 0);
	assert_memory_equal(got + 1, model, SIZE);
	fd = open(x->path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, got, SIZE, 0), SIZE);
	close(fd);
	assert_memory_equal(got, model, SIZE);
	bs_dev_describe(d, kv_direct, desc);
	assert_non_null(strstr(desc, "bounced"));
	assert_null(strstr(desc, "bounced: 0 "));
	free(model);
	free(got);
}

/* An explicit size=0 is an error, not "use the file's size". */
static void kv_skipped(void *arg, const char *key, const char *fmt, ...)
{
	unsigned long long *n = arg;
	char buf[128];
	va_list ap;

	if (strcmp(key, "punches_skipped"))
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	*n = strtoull(buf, NULL, 10);
}

static unsigned long long skipped(struct bs_dev *d)
{
	unsigned long long n = ~0ull;

	bs_dev_describe(d, kv_skipped, &n);
	assert_true(n != ~0ull);
	return n;
}

static long long allocated(struct fx *x)
{
	struct stat st;

	assert_int_equal(stat(x->path, &st), 0);
	return (long long)st.st_blocks * 512;
}

/*
 * Zeroing that may unmap, and discard, of a range that holds no data send
 * no punch (it would take the inode lock and drain direct I/O for
 * nothing); a range with data is punched from its first data on, and the
 * bytes before the range stay; NOUNMAP zeroing of a hole still allocates,
 * and what it allocated is freed again by zeroing that may unmap.
 */
static void punch_skips_holes(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = open_file(x, "");
	uint8_t *buf = malloc(2 * MiB), *got = malloc(2 * MiB);
	unsigned long long s0 = skipped(d);
	long long a0;

	th_fill(buf, 2 * MiB, 9);
	assert_int_equal(bs_write_sync(d, buf, MiB, 4 * MiB), 0);
	assert_int_equal(bs_flush_sync(d), 0);
	/* never written: no punch */
	assert_int_equal(bs_zeroout_sync(d, 8 * MiB, 4 * MiB, 0, NULL, NULL), 0);
	assert_true(skipped(d) > s0);
	s0 = skipped(d);
	assert_int_equal(bs_fallocate_sync(d, BS_FALLOC_PUNCH_HOLE |
					   BS_FALLOC_KEEP_SIZE, 12 * MiB, MiB,
					   NULL, NULL), 0);
	assert_true(skipped(d) > s0);
	s0 = skipped(d);
	/* data in the middle of the range: punched, reads zeroes */
	a0 = allocated(x);
	assert_int_equal(bs_zeroout_sync(d, 2 * MiB, 4 * MiB, 0, NULL, NULL), 0);
	assert_int_equal(skipped(d), s0);
	assert_true(allocated(x) <= a0 - (long long)MiB);
	assert_int_equal(bs_read_sync(d, got, 2 * MiB, 3 * MiB), 0);
	assert_true(th_is_zero(got, 2 * MiB));
	/* the range starts inside data: what is before it stays */
	assert_int_equal(bs_write_sync(d, buf, 2 * MiB, 16 * MiB), 0);
	assert_int_equal(bs_zeroout_sync(d, 17 * MiB, 2 * MiB, 0, NULL, NULL), 0);
	assert_int_equal(bs_read_sync(d, got, 2 * MiB, 16 * MiB), 0);
	assert_memory_equal(got, buf, MiB);
	assert_true(th_is_zero(got + MiB, MiB));
	/* NOUNMAP over a hole allocates, whatever unmap zeroing skipped */
	a0 = allocated(x);
	assert_int_equal(bs_zeroout_sync(d, 24 * MiB, 2 * MiB, BS_ZERO_NOUNMAP,
					 NULL, NULL), 0);
	assert_true(allocated(x) >= a0 + 2 * (long long)MiB);
	assert_int_equal(bs_read_sync(d, got, 2 * MiB, 24 * MiB), 0);
	assert_true(th_is_zero(got, 2 * MiB));
	/* allocated zeroes (unwritten extents: no data to SEEK_DATA) are
	 * still freed by zeroing that may unmap */
	s0 = skipped(d);
	assert_int_equal(bs_zeroout_sync(d, 24 * MiB, 2 * MiB, 0, NULL, NULL), 0);
	assert_int_equal(skipped(d), s0);
	assert_true(allocated(x) <= a0);
	free(buf);
	free(got);
}

static bool submitting;

static void answered_done(struct bs_req *req)
{
	int *n = req->priv;

	/* the callback may submit again: never from inside bs_submit() */
	assert_false(submitting);
	assert_int_equal(req->result, 0);
	(*n)--;
}

/*
 * Requests the driver answers without the kernel (a punch of a range with
 * nothing allocated) complete from the loop, never inside bs_submit(),
 * also when many wait for room in a small ring.
 */
static void answered_from_loop(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = open_file(x, ",queue_depth=4");
	struct bs_req reqs[32];
	int i, pending = 0;

	for (i = 0; i < 32; i++) {
		bs_req_init(&reqs[i], i & 1 ? BS_OP_DISCARD : BS_OP_WRITE_ZEROES,
			    0, (uint64_t)i * MiB, MiB, NULL, answered_done,
			    &pending);
		pending++;
		submitting = true;
		bs_submit(d, &reqs[i]);
		submitting = false;
	}
	while (pending)
		assert_int_equal(bs_loop_run_once(bs_ctx_loop(x->ctx), 1000), 0);
	assert_true(skipped(d) >= 32);
	assert_int_equal(bs_dev_destroy(d), 0);
}

static void size_zero_refused(void **state)
{
	struct fx *x = *state;
	struct bs_dev *d = NULL;
	char spec[256];

	snprintf(spec, sizeof(spec), "file:%s,size=0", x->path);
	assert_int_equal(th_dev_try(x->ctx, "z", spec, &d), -EINVAL);
	assert_non_null(strstr(bs_last_error(), "size must be > 0"));
	assert_int_equal(access(x->path, F_OK), -1); /* nothing created */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(async_model, setup, teardown),
		cmocka_unit_test_setup_teardown(inline_writes, setup, teardown),
		cmocka_unit_test_setup_teardown(errors_and_knob, setup, teardown),
		cmocka_unit_test_setup_teardown(zeroes_modes, setup, teardown),
		cmocka_unit_test_setup_teardown(block_status, setup, teardown),
		cmocka_unit_test_setup_teardown(punch_skips_holes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(answered_from_loop, setup,
						teardown),
		cmocka_unit_test_setup_teardown(direct_unaligned, setup,
						teardown),
		cmocka_unit_test_setup_teardown(size_zero_refused, setup,
						teardown),
	};

	return cmocka_run_group_tests_name("file", tests, NULL, NULL);
}
