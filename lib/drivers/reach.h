/* SPDX-License-Identifier: MIT */
/*
 * Bounded reconnect for the drivers of remote devices (nbd, nvmf): not a
 * public API. A remote driver reconnects for as long as its device lives,
 * but when nothing has been usable (no connection ready, no path live)
 * for down_after seconds the device is *down*: requests fail at once
 * with EIO instead of each waiting its timeout, one log line says so
 * (bs_dev_log), explain gives the reason and info a "reachable" line;
 * the first connection (path) ready again ends it, with one more log
 * line. This file keeps that state and says it; the driver decides what
 * "usable" is, calls reach_lost() / reach_ok() as it changes and
 * reach_check() every tick, and fails its requests with reach_fail()
 * while r->down. One loop thread owns it (describe reads it as the
 * drivers' other counters).
 */
#ifndef BLKSTACK_DRIVERS_REACH_H
#define BLKSTACK_DRIVERS_REACH_H

#include <stdbool.h>
#include <stdint.h>

#include <blkstack/bdev.h>

#define REACH_DOWN_AFTER_DEFAULT 60	/* seconds */
#define REACH_DOWN_AFTER_MAX 86400	/* 0 = never down */

/* How a driver names things in the messages. */
struct reach_words {
	const char *drv;	/* "nbd": explain's "nbd server unreachable" */
	const char *what;	/* "server", "target" */
	const char *lack;	/* "no connection", "no live path" (info) */
	const char *back;	/* "a connection is made again" (log) */
};

struct reach {
	struct bs_dev *dev;
	const struct reach_words *w;
	char where[256];	/* "nbd URI": log lines and errors */
	unsigned down_after_s;	/* 0: never down */
	unsigned reconnect_ms;	/* for the messages */

	uint64_t unreach_ns;	/* nothing usable since, 0: something is */
	uint64_t down_ns;	/* down since */
	bool down;
	char why[256];		/* the last error when it went down */
	uint64_t downs, failed;	/* times down, requests failed while down */
};

/* @where is copied (e.g. "nbd nbd://host/x"), @w must outlive @r. */
void reach_init(struct reach *r, struct bs_dev *dev,
		const struct reach_words *w, const char *where,
		unsigned down_after_s, unsigned reconnect_ms);
/* Nothing is usable now: the clock starts (it keeps running if it is). */
void reach_lost(struct reach *r);
/*
 * Every tick. down_after has passed since reach_lost() with nothing
 * usable: the device is down (why: @why, the driver's last error), the
 * log line is written and true returned, once; the driver then sets its
 * reason (reach_set_reason()) and fails what waits.
 */
bool reach_check(struct reach *r, const char *why);
/* Something is usable again (@how: "connected", "path.1 ... live"):
 * true when the device was down (it is up now, logged). */
bool reach_ok(struct reach *r, const char *how);
/* A request (operation @op) while down: counted, bs_error set, -EIO. */
int reach_fail(struct reach *r, const char *op);
/* While down: explain's reason ("nbd server unreachable over ..."). */
void reach_set_reason(const struct reach *r);
/* info: "reachable" (yes, how long not, or down), @last the last error. */
void reach_describe(const struct reach *r, const char *last, bs_kv_fn kv,
		    void *arg);

#endif
