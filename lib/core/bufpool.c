/* SPDX-License-Identifier: MIT */
/*
 * Per-thread payload buffer pool (bufpool.h): one LIFO list per
 * power-of-two class, trimmed by a low-water mark. Between two trims each
 * class remembers the fewest buffers it held; that many sat in the cache
 * the whole interval without being asked for, so the trim frees them.
 * Under a steady load the low-water mark is 0 and nothing is freed; once
 * the load stops, everything goes within two intervals.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#include <blkstack/bufpool.h>
#include <blkstack/loop.h>

#define PAGE 4096u
#define MIN_SHIFT 12u				/* 4 KiB */
#define NCLASS 14u				/* 4 KiB .. 32 MiB */
/* From this class up a buffer is its own mapping. */
#define MMAP_MIN (128u << 10)
#define IDLE_NS ((uint64_t)BS_BUFPOOL_IDLE_MS * 1000000u)

/* A cached buffer: its first bytes link it into its class. */
struct cached {
	struct cached *next;
};

struct class {
	struct cached *head;
	size_t count;
	size_t low;		/* fewest held since the last trim */
};

struct pool {
	bool init;
	struct class cls[NCLASS];
	size_t limit;
	uint64_t epoch_ns;	/* last trim */
	struct bs_loop *loop;	/* bound: trims on its timer */
	unsigned binds;
	int timer;		/* > 0 armed */
	struct bs_bufpool_stats st;
};

static __thread struct pool tl;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void pool_drain(struct pool *p);

static void on_thread_exit(void *arg)
{
	pool_drain(arg);
}

static void make_key(void)
{
	/* nothing to do without a key: the thread's cache then leaks at exit */
	(void)pthread_key_create(&exit_key, on_thread_exit);
}

static struct pool *pool(void)
{
	struct pool *p = &tl;

	if (!p->init) {
		p->init = true;
		p->limit = BS_BUFPOOL_CACHE_DEFAULT;
		p->epoch_ns = bs_now_ns();
		pthread_once(&exit_once, make_key);
		(void)pthread_setspecific(exit_key, p);
	}
	return p;
}

/* Class of @len (> 0); NCLASS when too big to pool. */
static unsigned class_of(size_t len)
{
	unsigned c = 0;

	while (c < NCLASS && ((size_t)PAGE << c) < len)
		c++;
	return c;
}

static size_t class_size(unsigned c)
{
	return (size_t)PAGE << c;
}

size_t bs_buf_size(size_t len)
{
	unsigned c = class_of(len);

	return c < NCLASS ? class_size(c) : (len + PAGE - 1) & ~(size_t)(PAGE - 1);
}

static void *raw_alloc(size_t size)
{
	void *b;

	if (size < MMAP_MIN)
		return aligned_alloc(PAGE, size);
	b = mmap(NULL, size, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return b == MAP_FAILED ? NULL : b;
}

static void raw_free(void *b, size_t size)
{
	if (size < MMAP_MIN)
		free(b);
	else
		munmap(b, size);
}

/* Pop one cached buffer of class @c (count > 0). */
static void *pop(struct pool *p, unsigned c)
{
	struct class *k = &p->cls[c];
	struct cached *b = k->head;

	k->head = b->next;
	k->count--;
	if (k->count < k->low)
		k->low = k->count;
	p->st.cached_bufs--;
	p->st.cached_bytes -= class_size(c);
	return b;
}

static void arm(struct pool *p);

static void on_timer(void *arg)
{
	struct pool *p = arg;

	p->timer = 0;
	bs_bufpool_trim(bs_now_ns());
	arm(p);
}

/* Bound and holding something: make sure a trim comes. */
static void arm(struct pool *p)
{
	int id;

	if (!p->loop || p->timer > 0 || !p->st.cached_bytes)
		return;
	/* a little past the interval, so that the trim is due when it runs */
	id = bs_loop_add_timer(p->loop, BS_BUFPOOL_IDLE_MS + 10, on_timer, p);
	if (id > 0)
		p->timer = id;
}

static void trim_if_due(struct pool *p)
{
	if (p->st.cached_bytes)
		bs_bufpool_trim(bs_now_ns());
}

void *bs_buf_get(size_t len)
{
	struct pool *p = pool();
	unsigned c = class_of(len ? len : 1);
	void *b;

	if (c >= NCLASS)
		return raw_alloc(bs_buf_size(len));
	trim_if_due(p);
	if (p->cls[c].count) {
		p->st.hits++;
		return pop(p, c);
	}
	b = raw_alloc(class_size(c));
	if (b)
		p->st.misses++;
	return b;
}

void bs_buf_put(void *buf, size_t len)
{
	struct pool *p;
	unsigned c = class_of(len ? len : 1);
	struct cached *b = buf;

	if (!buf)
		return;
	if (c >= NCLASS) {
		raw_free(buf, bs_buf_size(len));
		return;
	}
	p = pool();
	trim_if_due(p);
	if (p->st.cached_bytes + class_size(c) > p->limit) {
		p->st.overflow++;
		raw_free(buf, class_size(c));
		return;
	}
	b->next = p->cls[c].head;
	p->cls[c].head = b;
	p->cls[c].count++;
	p->st.cached_bufs++;
	p->st.cached_bytes += class_size(c);
	arm(p);
}

void bs_bufpool_trim(uint64_t now_ns)
{
	struct pool *p = pool();
	unsigned c;

	if (now_ns < p->epoch_ns || now_ns - p->epoch_ns < IDLE_NS)
		return;
	for (c = 0; c < NCLASS; c++) {
		struct class *k = &p->cls[c];
		size_t n = k->low;

		while (n-- && k->count) {
			raw_free(pop(p, c), class_size(c));
			p->st.trimmed++;
		}
		k->low = k->count;
	}
	p->epoch_ns = now_ns;
}

static void pool_drain(struct pool *p)
{
	unsigned c;

	for (c = 0; c < NCLASS; c++) {
		while (p->cls[c].count)
			raw_free(pop(p, c), class_size(c));
		p->cls[c].low = 0;
	}
}

void bs_bufpool_drain(void)
{
	struct pool *p = pool();

	pool_drain(p);
	/* a fresh start: the next interval begins now */
	p->epoch_ns = bs_now_ns();
}

void bs_bufpool_set_limit(size_t bytes)
{
	struct pool *p = pool();
	unsigned c = NCLASS;

	p->limit = bytes;
	/* largest first: they are the most memory for the fewest unmaps */
	while (p->st.cached_bytes > p->limit && c--)
		while (p->cls[c].count && p->st.cached_bytes > p->limit)
			raw_free(pop(p, c), class_size(c));
}

void bs_bufpool_bind(struct bs_loop *loop)
{
	struct pool *p = pool();

	if (p->binds++ && p->loop == loop)
		return;
	/* a different loop on this thread: the old one's timer is not ours now */
	if (p->loop && p->timer > 0)
		bs_loop_cancel_timer(p->loop, p->timer);
	p->timer = 0;
	p->loop = loop;
	arm(p);
}

void bs_bufpool_unbind(struct bs_loop *loop)
{
	struct pool *p = pool();

	if (!p->binds || p->loop != loop)
		return;
	if (--p->binds)
		return;
	if (p->timer > 0)
		bs_loop_cancel_timer(p->loop, p->timer);
	p->timer = 0;
	p->loop = NULL;
	/* nobody serves from this thread now: nothing to keep warm */
	pool_drain(p);
}

void bs_bufpool_stats(struct bs_bufpool_stats *st)
{
	*st = pool()->st;
}
