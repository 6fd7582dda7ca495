/* SPDX-License-Identifier: MIT */
/* blkstackd internals shared by its files (not a public API). */
#ifndef BLKSTACKD_H
#define BLKSTACKD_H

#include <limits.h>
#include <stdbool.h>
#include <sys/un.h>

struct bs_ctx;
struct bs_loop;
struct bs_exports;
struct ctl_server;

struct bsd {
	struct bs_ctx *ctx;
	struct bs_loop *loop;
	struct bs_exports *set;
	struct ctl_server *ctl;
	char state_dir[PATH_MAX];
	char control[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char pid_file[PATH_MAX];
	bool served;		/* started: the exports were up */
	bool stopping;		/* a stop signal came: draining clients */
	bool forced;		/* a second one: close now */
	int drain_timer;
	unsigned drain_ticks;
	int sigfd;
	uint64_t max_inflight;	/* [daemon] max_inflight, 0 = default */
	uint32_t stall_timeout;	/* [daemon] stall_timeout (s) */
	bool stall_set;
	unsigned threads;	/* [daemon] threads (I/O threads) */
	bool threads_set;
	unsigned poll_us;	/* [daemon] poll_us (adaptive polling) */
	bool epoll;		/* event_loop = epoll (the default): no io_uring loops */
};

/* One log line, with a timestamp, to the log (stderr or the log file). */
void bsd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* control.c: the control socket serving `blkstack -s`. */
int ctl_start(struct bsd *d, const char *path);
/* Stop accepting; commands running finish and answer. */
void ctl_stop(struct ctl_server *ctl);
void ctl_free(struct ctl_server *ctl);
/* Commands running, queued or still sending their reply. */
unsigned ctl_pending(const struct ctl_server *ctl);

#endif
