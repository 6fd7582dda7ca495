/* SPDX-License-Identifier: MIT */
/*
 * blkstack event loop: one thread, epoll underneath.
 *
 * A context has a main loop and, in a server, one loop per I/O thread
 * (docs/architecture.md "Threads"); a connection and the requests it
 * submits live on one loop. Request
 * completions are never delivered from inside a submit call: they are
 * queued as deferred work and run by the loop, so completion callbacks may
 * submit again without growing the stack.
 */
#ifndef BLKSTACK_LOOP_H
#define BLKSTACK_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bs_loop;

typedef void (*bs_fn)(void *arg);
typedef void (*bs_fd_fn)(void *arg, uint32_t events);

/* Intrusive deferred work item: embed it, never allocate for it. */
struct bs_work {
	struct bs_work *next;
	bs_fn fn;
	void *arg;
};

int bs_loop_new(struct bs_loop **out);
void bs_loop_free(struct bs_loop *loop);

/* Watch @fd for EPOLLIN/EPOLLOUT/... (@events as in epoll). */
int bs_loop_add_fd(struct bs_loop *loop, int fd, uint32_t events, bs_fd_fn fn,
		   void *arg);
int bs_loop_mod_fd(struct bs_loop *loop, int fd, uint32_t events);
void bs_loop_del_fd(struct bs_loop *loop, int fd);

/* Run @w->fn(@w->arg) from the loop, soon, in FIFO order. Same thread only. */
void bs_loop_defer(struct bs_loop *loop, struct bs_work *w);

/* Take @w back before it ran; true if it was queued. Same thread only. */
bool bs_loop_cancel_work(struct bs_loop *loop, struct bs_work *w);

/*
 * Thread-safe, no allocation: run @w on @loop's thread, in the order sent.
 * On that thread itself it is bs_loop_defer(); from another thread it is
 * queued under the loop's lock and the loop woken (once per batch). The
 * owner may take it back with bs_loop_cancel_work() until it ran.
 */
void bs_loop_send(struct bs_loop *loop, struct bs_work *w);

/* Thread-safe: run @fn(@arg) on the loop's thread. Allocates; -ENOMEM. */
int bs_loop_post(struct bs_loop *loop, bs_fn fn, void *arg);

/*
 * Hooks run once per loop iteration just before the loop may block, e.g. to
 * submit a batch of queued io_uring entries. Returns a handle for removal.
 */
int bs_loop_add_prepoll(struct bs_loop *loop, bs_fn fn, void *arg);
void bs_loop_del_prepoll(struct bs_loop *loop, bs_fn fn, void *arg);

/* One-shot timer in milliseconds; returns an id > 0, or -errno. */
int bs_loop_add_timer(struct bs_loop *loop, uint64_t ms, bs_fn fn, void *arg);
void bs_loop_cancel_timer(struct bs_loop *loop, int id);

/*
 * Run deferred work, pre-poll hooks, then wait up to @timeout_ms (-1 =
 * forever, 0 = poll) for fd events and timers. Returns 0 or -errno.
 */
int bs_loop_run_once(struct bs_loop *loop, int timeout_ms);

/* Run until bs_loop_stop() is called. */
int bs_loop_run(struct bs_loop *loop);

/*
 * Adaptive polling: before blocking, spin up to @us microseconds (0 = off,
 * the default) checking for events, as long as events keep coming that
 * soon after the loop would block (docs/architecture.md "Threads"). Set
 * by the thread that runs the loop, or before it runs.
 */
void bs_loop_set_poll(struct bs_loop *loop, unsigned us);
/* The spin the loop does now before blocking, in ns (0: none). */
uint64_t bs_loop_poll_ns(const struct bs_loop *loop);
void bs_loop_stop(struct bs_loop *loop);

/*
 * True on the loop's own thread (the one that created it and runs it).
 * Devices, exports and the fs layer's I/O belong to that thread; another
 * thread reaches them only through bs_loop_post() (the sync wrappers of
 * bdev.h / zero.h do that for it, see docs/daemon.md "Threads").
 */
bool bs_loop_is_current(const struct bs_loop *loop);

/*
 * The loop the calling thread runs (set by bs_loop_run()/run_once(), or by
 * bs_loop_new() on a thread that had none), or NULL on a thread that runs
 * no loop (a worker, the control thread).
 */
struct bs_loop *bs_loop_current(void);
/* The thread that will run @loop (set before it runs it; threads.c). */
void bs_loop_set_owner(struct bs_loop *loop, pthread_t thread);
void bs_loop_set_current(struct bs_loop *loop);

/* A small number naming the loop in its context (0 = the main loop). */
void bs_loop_set_index(struct bs_loop *loop, unsigned index);
unsigned bs_loop_index(const struct bs_loop *loop);

/*
 * Quiescent points, readable from any thread: iterations begun so far,
 * and whether the loop is blocked waiting (so holds no pointer it read
 * in a callback). Used to free retired snapshots (see bdev.h).
 */
uint64_t bs_loop_iterations(const struct bs_loop *loop);
bool bs_loop_idle(const struct bs_loop *loop);

/*
 * Ring mode: the loop waits in io_uring instead of epoll_wait. Its fd
 * watches become one-shot polls in that ring (re-armed after each event,
 * so they behave as above), and code running on the loop may queue its
 * own operations there: bs_loop_sqe() gives an SQE to prepare with
 * liburing and tag with io_uring_sqe_set_data(sqe, op); it reaches the
 * kernel when the loop next waits (one io_uring_enter for the batch and
 * the wait), and op->fn(op, cqe->res, cqe->flags) runs on the loop when it
 * completes. bs_loop_use_ring() is called before the loop watches any fd
 * (-EBUSY otherwise); -errno where io_uring (or its synchronous cancel,
 * Linux 6.0) is not there: the loop stays on epoll.
 */
struct io_uring_sqe;
struct bs_ring_op {
	void (*fn)(struct bs_ring_op *op, int res, uint32_t flags);
};
/* The struct of type @type whose member @member is at @ptr (an op's
 * owner, in its fn). */
#define BS_CONTAINER_OF(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
int bs_loop_use_ring(struct bs_loop *loop, unsigned entries);
bool bs_loop_has_ring(const struct bs_loop *loop);
/* An SQE of the loop's ring (NULL: not in ring mode). Loop thread only. */
struct io_uring_sqe *bs_loop_sqe(struct bs_loop *loop);
/*
 * Cancel the operations tagged @op and return once the kernel is done
 * with them (their buffers may be freed then); their CQEs still come to
 * op->fn, so @op itself must live until they did. 0 or -errno.
 */
int bs_loop_ring_cancel(struct bs_loop *loop, struct bs_ring_op *op);

/* Current monotonic time in nanoseconds. */
uint64_t bs_now_ns(void);

#endif
