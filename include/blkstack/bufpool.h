/* SPDX-License-Identifier: MIT */
/*
 * Payload buffers from a per-thread pool.
 *
 * Front ends hold request payloads (a write being received, read data
 * waiting to be sent) in page-aligned buffers. Taking them from malloc
 * for every request costs page faults and, worse, grows glibc's heap:
 * once a 1 MiB buffer has been freed, glibc serves the next ones from the
 * heap instead of mmap, and the heap stays at its high-water mark (issue
 * 12 measured 114-164 MiB resident for 16-64 MiB in flight).
 *
 * Here every thread keeps its own cache (no locks: a buffer is taken and
 * given back on the thread that serves the connection), one LIFO list per
 * power-of-two size class from 4 KiB to 32 MiB, so a busy thread reuses
 * buffers that are still mapped and warm in its cache. Classes from
 * 128 KiB up are mmap'd on their own (munmap gives the memory back to the
 * system at once); smaller ones come from malloc.
 *
 * Giving back: a buffer that stayed in the cache for a whole second was
 * not needed; it is freed at the next trim. Trims happen on the thread's
 * loop (a one-second timer, armed only while the cache holds something)
 * once a user bound the pool to it, and in passing on every get/put. The
 * cache of one thread never holds more than its limit (default
 * BS_BUFPOOL_CACHE_DEFAULT): what comes back above it is freed at once.
 * Buffers in use are not counted here: the server budget (budget.h)
 * bounds them. A thread's cache is freed when the thread exits.
 */
#ifndef BLKSTACK_BUFPOOL_H
#define BLKSTACK_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

struct bs_loop;

/* Largest pooled size; larger buffers are mapped and unmapped each time. */
#define BS_BUFPOOL_MAX_CLASS (32u << 20)
/* Cache limit per thread unless bs_bufpool_set_limit() says otherwise. */
#define BS_BUFPOOL_CACHE_DEFAULT (256u << 20)
/* A cached buffer unused for this long is given back. */
#define BS_BUFPOOL_IDLE_MS 1000u

/*
 * A page-aligned buffer of at least @len bytes (len > 0), or NULL (out of
 * memory). Its contents are undefined. Give it back with bs_buf_put() and
 * the same @len.
 */
void *bs_buf_get(size_t len);
void bs_buf_put(void *buf, size_t len);
/* Bytes a buffer of @len really holds (its size class). */
size_t bs_buf_size(size_t len);

/*
 * Trim this thread's cache on @loop's timers (the loop must run on this
 * thread). Counted: every bind needs an unbind; the last unbind stops the
 * timer and frees the whole cache.
 */
void bs_bufpool_bind(struct bs_loop *loop);
void bs_bufpool_unbind(struct bs_loop *loop);

/* Cache limit of this thread's pool in bytes (0: cache nothing). */
void bs_bufpool_set_limit(size_t bytes);
/* Free what sat unused since the last trim, if that was >= 1 s before @now_ns. */
void bs_bufpool_trim(uint64_t now_ns);
/* Free every cached buffer of this thread; the next interval starts now. */
void bs_bufpool_drain(void);

struct bs_bufpool_stats {
	uint64_t cached_bytes;	/* in the cache now */
	uint64_t cached_bufs;
	uint64_t hits;		/* gets served from the cache */
	uint64_t misses;	/* gets that allocated */
	uint64_t trimmed;	/* buffers given back after sitting idle */
	uint64_t overflow;	/* buffers freed at once: cache full */
};

/* This thread's pool. */
void bs_bufpool_stats(struct bs_bufpool_stats *st);

#endif
