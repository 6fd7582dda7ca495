/* SPDX-License-Identifier: MIT */
/*
 * The per-thread payload buffer pool: a buffer given back is the next one
 * handed out (warm, already mapped); buffers that sat unused for a whole
 * second are freed at the next trim while buffers in use keep theirs; the
 * cache never holds more than its limit; a pool bound to a loop gives
 * everything back on its own once the load stops; the last unbind empties
 * it; each thread has its own.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include <blkstack/bufpool.h>
#include <blkstack/loop.h>

#include "helpers/th.h"

#define MiB (1ull << 20)
#define SEC 1000000000ull

static int reset(void **state)
{
	(void)state;
	bs_bufpool_drain();
	bs_bufpool_set_limit(BS_BUFPOOL_CACHE_DEFAULT);
	return 0;
}

static void test_reuse(void **state)
{
	struct bs_bufpool_stats st0, st;
	void *a, *b, *c;

	(void)state;
	bs_bufpool_stats(&st0);
	a = bs_buf_get(MiB);
	assert_non_null(a);
	assert_int_equal((uintptr_t)a % 4096, 0);
	memset(a, 0xab, MiB);	/* all of it is ours */
	bs_buf_put(a, MiB);
	/* the same class (a 700 KiB payload rounds up to 1 MiB): same buffer */
	b = bs_buf_get(700 << 10);
	assert_ptr_equal(a, b);
	assert_int_equal(bs_buf_size(700 << 10), MiB);
	/* another class: another buffer */
	c = bs_buf_get(4096);
	assert_non_null(c);
	assert_ptr_not_equal(c, b);
	assert_int_equal((uintptr_t)c % 4096, 0);
	bs_buf_put(c, 4096);
	bs_buf_put(b, 700 << 10);
	bs_bufpool_stats(&st);
	assert_int_equal(st.misses - st0.misses, 2);
	assert_int_equal(st.hits - st0.hits, 1);
	assert_int_equal(st.cached_bufs, 2);
	assert_int_equal(st.cached_bytes, MiB + 4096);
}

/* Put back @n buffers of @len got at once. */
static void cycle(unsigned n, size_t len)
{
	void *b[64];
	unsigned i;

	for (i = 0; i < n; i++) {
		b[i] = bs_buf_get(len);
		assert_non_null(b[i]);
	}
	for (i = 0; i < n; i++)
		bs_buf_put(b[i], len);
}

static void test_idle_given_back(void **state)
{
	struct bs_bufpool_stats st;
	uint64_t t = bs_now_ns() + 20 * SEC;
	void *b;

	(void)state;
	bs_bufpool_trim(t);
	cycle(8, MiB);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bufs, 8);
	/* they came back during this interval: not idle for a second yet */
	bs_bufpool_trim(t + SEC);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bufs, 8);
	/* a trim before the second is over does nothing */
	bs_bufpool_trim(t + SEC + SEC / 2);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bufs, 8);
	/* three are in use for a moment during the next second ... */
	cycle(3, MiB);
	/* ... and one is still out at the trim */
	b = bs_buf_get(MiB);
	bs_bufpool_trim(t + 2 * SEC);
	bs_bufpool_stats(&st);
	/* the five that nobody asked for went; two stay warm */
	assert_int_equal(st.cached_bufs, 2);
	assert_int_equal(st.trimmed >= 5, 1);
	bs_buf_put(b, MiB);
	/* no use at all for a second: everything goes */
	bs_bufpool_trim(t + 3 * SEC);
	bs_bufpool_trim(t + 4 * SEC);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bufs, 0);
	assert_int_equal(st.cached_bytes, 0);
}

static void test_steady_load_keeps(void **state)
{
	struct bs_bufpool_stats st0, st;
	uint64_t t = bs_now_ns() + 40 * SEC;
	unsigned i;

	(void)state;
	bs_bufpool_trim(t);
	bs_bufpool_stats(&st0);
	/* sixteen in flight at every second's end: nothing is freed */
	for (i = 1; i <= 5; i++) {
		cycle(16, MiB);
		bs_bufpool_trim(t + i * SEC);
	}
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bufs, 16);
	assert_int_equal(st.misses - st0.misses, 16);
	assert_int_equal(st.trimmed, st0.trimmed);
}

static void test_limit(void **state)
{
	struct bs_bufpool_stats st0, st;

	(void)state;
	bs_bufpool_stats(&st0);
	bs_bufpool_set_limit(2 * MiB);
	cycle(3, MiB);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bytes, 2 * MiB);
	assert_int_equal(st.overflow - st0.overflow, 1);
	/* lowering the limit frees down to it */
	bs_bufpool_set_limit(MiB);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bytes, MiB);
	bs_bufpool_set_limit(0);
	cycle(1, 4096);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bytes, 0);
}

static void test_bigger_than_classes(void **state)
{
	struct bs_bufpool_stats st;
	size_t len = BS_BUFPOOL_MAX_CLASS + 4096;
	uint8_t *b;

	(void)state;
	b = bs_buf_get(len);
	assert_non_null(b);
	b[len - 1] = 1;
	bs_buf_put(b, len);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bytes, 0);
}

static void test_bound_loop_gives_back(void **state)
{
	struct bs_bufpool_stats st;
	struct bs_loop *loop;
	uint64_t start, gone = 0;
	int i;

	(void)state;
	assert_int_equal(bs_loop_new(&loop), 0);
	bs_bufpool_bind(loop);
	start = bs_now_ns();
	cycle(4, MiB);
	cycle(4, 4096);
	/* nothing more asks for a buffer: the loop's timer frees them */
	for (i = 0; i < 100 && !gone; i++) {
		bs_loop_run_once(loop, 50);
		bs_bufpool_stats(&st);
		if (!st.cached_bytes)
			gone = bs_now_ns() - start;
	}
	assert_true(gone > 0);
	/* not before they sat idle for a second */
	assert_true(gone >= BS_BUFPOOL_IDLE_MS * 1000000ull);
	/* the last unbind empties the cache */
	cycle(2, MiB);
	bs_bufpool_bind(loop);
	bs_bufpool_unbind(loop);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bytes, 2 * MiB);
	bs_bufpool_unbind(loop);
	bs_bufpool_stats(&st);
	assert_int_equal(st.cached_bytes, 0);
	/* no timer of the pool is left on the loop */
	bs_loop_free(loop);
}

static void *other_thread(void *arg)
{
	struct bs_bufpool_stats *st = arg;
	void *b = bs_buf_get(MiB);

	bs_buf_put(b, MiB);
	bs_bufpool_stats(st);
	return NULL;
}

static void test_per_thread(void **state)
{
	struct bs_bufpool_stats mine0, mine, theirs;
	pthread_t t;

	(void)state;
	cycle(1, MiB);
	bs_bufpool_stats(&mine0);
	assert_int_equal(pthread_create(&t, NULL, other_thread, &theirs), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* the other thread started empty and missed; ours did not move */
	assert_int_equal(theirs.misses, 1);
	assert_int_equal(theirs.cached_bufs, 1);
	bs_bufpool_stats(&mine);
	assert_int_equal(mine.misses, mine0.misses);
	assert_int_equal(mine.cached_bufs, mine0.cached_bufs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_reuse, reset),
		cmocka_unit_test_setup(test_idle_given_back, reset),
		cmocka_unit_test_setup(test_steady_load_keeps, reset),
		cmocka_unit_test_setup(test_limit, reset),
		cmocka_unit_test_setup(test_bigger_than_classes, reset),
		cmocka_unit_test_setup(test_bound_loop_gives_back, reset),
		cmocka_unit_test_setup(test_per_thread, reset),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
