/* SPDX-License-Identifier: MIT */
/*
 * Drive a client library's socket from the loop: the pattern of libiscsi
 * (iscsi_get_fd / iscsi_which_events / iscsi_service), libnbd
 * (nbd_aio_get_fd / nbd_aio_get_direction / nbd_aio_notify_*) and similar
 * asynchronous libraries. The pump watches the descriptor the library
 * names for the events it wants now, calls its service function when they
 * come, follows a descriptor that changes (a reconnect), and calls a
 * periodic tick for the library's own timeouts.
 */
#ifndef BLKSTACK_FDPUMP_H
#define BLKSTACK_FDPUMP_H

#include <stdint.h>

struct bs_loop;
struct bs_fdpump;

struct bs_fdpump_ops {
	/* the descriptor now, or -1 while the library has none */
	int (*get_fd)(void *lib);
	/* EPOLLIN / EPOLLOUT the library waits for now (0: none) */
	uint32_t (*events)(void *lib);
	/* @revents happened (EPOLLIN/OUT/ERR/HUP): 0, or -errno when the
	 * connection is lost (the pump then calls on_error) */
	int (*service)(void *lib, uint32_t revents);
	/* optional: called every tick_ms for the library's timeouts */
	void (*tick)(void *lib);
	/* optional: service() failed with @err; the pump stops watching
	 * until bs_fdpump_update() */
	void (*on_error)(void *lib, int err);
};

/* Start pumping @lib; @tick_ms 0 = no tick. 0 or -errno. */
int bs_fdpump_new(struct bs_loop *loop, const struct bs_fdpump_ops *ops,
		  void *lib, unsigned tick_ms, struct bs_fdpump **out);
/*
 * Re-read the descriptor and the events wanted (call after queuing work
 * in the library, e.g. after nbd_aio_pwrite()). Cheap when nothing
 * changed. 0 or -errno.
 */
int bs_fdpump_update(struct bs_fdpump *p);
/* Stop watching and free (the library stays the caller's). */
void bs_fdpump_free(struct bs_fdpump *p);

#endif
