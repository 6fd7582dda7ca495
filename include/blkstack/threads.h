/* SPDX-License-Identifier: MIT */
/*
 * I/O threads of a context (docs/architecture.md "Threads").
 *
 * Every context has a main loop (bs_ctx_loop()): device creation and
 * opening, claims, capability walks and events, attribute stores, timers
 * of the daemon, listeners, the control socket. A server adds N I/O
 * threads, each running its own loop; connections are spread over them
 * and stay on one for their life. A request is submitted on some loop and
 * completes on that same loop. With no I/O thread (the CLI, most unit
 * tests) the main loop does everything.
 */
#ifndef BLKSTACK_THREADS_H
#define BLKSTACK_THREADS_H

#include <blkstack/loop.h>

struct bs_ctx;

/* At most this many I/O threads (loop indexes 1..BS_THREADS_MAX). */
#define BS_THREADS_MAX 64

/* Online CPUs, 1..BS_THREADS_MAX: the default number of I/O threads. */
unsigned bs_cpu_count(void);

/* Start @n I/O threads (0: none). Once per context; -errno + bs_error(). */
int bs_ctx_start_threads(struct bs_ctx *ctx, unsigned n);
/*
 * Adaptive polling of the I/O threads started after this call
 * (bs_loop_set_poll; 0 = off, the default; at most BS_POLL_US_MAX).
 */
void bs_ctx_set_poll(struct bs_ctx *ctx, unsigned us);
#define BS_POLL_US_MAX 1000
/*
 * I/O threads started after this call wait in io_uring instead of epoll
 * (bs_loop_use_ring, @on) and connections send and receive through that
 * ring. Where the kernel cannot, a loop stays on epoll and
 * bs_ctx_ring_error() says why (-errno of the first; 0: every loop has
 * its ring).
 */
void bs_ctx_set_ring(struct bs_ctx *ctx, bool on);
int bs_ctx_ring_error(const struct bs_ctx *ctx);
#define BS_RING_ENTRIES 256
/*
 * Stop and join them. Everything living on them (connections, device
 * channels) must be gone: bs_ctx_free() calls this after the devices are
 * closed.
 */
void bs_ctx_stop_threads(struct bs_ctx *ctx);
unsigned bs_ctx_nthreads(const struct bs_ctx *ctx);

/* Loops by index: 0 is the main loop, 1..nthreads the I/O loops. */
unsigned bs_ctx_nloops(const struct bs_ctx *ctx);
struct bs_loop *bs_ctx_loop_at(struct bs_ctx *ctx, unsigned index);

/* The loop for a new connection: the I/O loops in turn (main if none). */
struct bs_loop *bs_ctx_io_loop(struct bs_ctx *ctx);

/* The calling thread's loop in @ctx; the main loop for a thread with none. */
struct bs_loop *bs_ctx_current_loop(struct bs_ctx *ctx);

/*
 * Run @fn(@arg) on @loop's thread and wait until it returned (at once when
 * called there). Never call it from a loop @loop may be waiting for.
 */
void bs_loop_call(struct bs_loop *loop, bs_fn fn, void *arg);

#endif
