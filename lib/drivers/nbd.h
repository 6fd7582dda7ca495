/* SPDX-License-Identifier: MIT */
/*
 * The nbd driver's own declarations, shared by its files (not a public
 * API): nbd.c (the device type and requests), nbd_conn.c (connections,
 * reconnects, the open), nbd_status.c (block status), nbd_config.c (the
 * pure option parsing and capability decision). Everything but block
 * status runs on the context's main loop (see nbd.c).
 */
#ifndef BLKSTACK_DRIVERS_NBD_H
#define BLKSTACK_DRIVERS_NBD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>


#include <blkstack/bdev.h>
#include <blkstack/fdpump.h>
#include <blkstack/loop.h>

#include "drivers/nbd_lib.h"
#include "drivers/nbd_config.h"
#include "drivers/reach.h"

#define NBDC_TICK_MS 100

struct nbdc;
struct nbdc_conn;

/* Per request (the core's per-request context). */
struct nbdc_req {
	struct nbdc_req *prev, *next;	/* s->reqs: owned by the driver */
	struct bs_req *req;
	struct nbdc *s;
	struct bs_work work;		/* hand-over, then the completion */
	struct nbdc_conn *conn;		/* in flight on, else NULL */
	void *bounce;			/* READ/WRITE of several iovecs */
	uint64_t deadline_ns;
	uint64_t flush_seq;		/* FLUSH: the writes it covers */
	int res;			/* from the completion callback */
	bool retry;			/* ... the connection went: again */
	bool waiting;			/* for a connection */
	bool expired;			/* past its deadline */
};

enum nbdc_conn_state { NC_DOWN, NC_CONNECTING, NC_READY };

struct nbdc_conn {
	struct nbdc *s;
	unsigned idx;
	struct nbd_handle *h;
	struct bs_fdpump *pump;
	enum nbdc_conn_state state;
	bool tearing;			/* nbd_close() under way */
	bool was_ready;			/* lost while ready (counted) */
	int timer;			/* reconnect */
	struct bs_work lost_work;	/* teardown outside libnbd */
	char lost_why[160];
	unsigned inflight;
	uint64_t connects, lost, requests;
	char last_error[256];
};

struct nbdc {
	struct bs_dev *dev;
	struct bs_loop *loop;		/* the main loop: everything runs here */
	struct nbdc_opts o;

	/* what the server said, and what was decided */
	struct nbdc_facts facts;
	struct nbdc_config cfg;
	bool have_facts;
	bool user_readonly;		/* "readonly = 1" in the device's options */

	struct nbdc_conn conns[NBDC_MAX_CONNS];
	unsigned rr;			/* round-robin position */
	int tick_timer;

	/* the open */
	bool opening, closing;
	struct bs_work open_work;
	int open_err;
	int open_timer;
	unsigned failed_connects;	/* in a row, connection 1 */
	char last_error[256];

	/* requests owned by the driver */
	struct nbdc_req *reqs;
	unsigned nreqs;

	/*
	 * Durability across a lost connection: writes acknowledged (without
	 * FUA) are counted; a FLUSH covers those acknowledged before it was
	 * sent. When a connection goes with writes not yet covered, a server
	 * that restarted may have lost them from its cache, so the next FLUSH
	 * fails with EIO once (as a kernel reports a writeback error once).
	 */
	uint64_t wseq, flushed_seq, lost_seq;

	/*
	 * Bounded reconnect (drivers/reach.h): with no connection ready for
	 * down_after the device is down: waiting and new requests fail at
	 * once with EIO instead of each waiting its timeout; attempts go on
	 * every reconnect_ms, and the first ready connection ends it.
	 */
	struct reach reach;

	/* counters for describe() */
	uint64_t retries, expired, reconnects, flush_lost;

	/* block status: its own handle, used by whichever thread asks */
	pthread_mutex_t st_lock;
	bool st_offered;		/* base:allocation (atomic) */
	struct nbd_handle *st_h;
	uint64_t st_calls, st_failed;
	char st_error[160];
};

/* nbd_conn.c */
/* The open: connection 1 and the open's deadline. */
void nbdc_conn_begin(struct nbdc *s);
/* Start connecting @c (now). */
void nbdc_conn_start(struct nbdc_conn *c);
/* @c is lost (or must go): tear down outside libnbd, reconnect later. */
void nbdc_conn_lost(struct nbdc_conn *c, const char *why);
/* The device's reason (explain): the decision, and "down" when it is. */
void nbdc_set_reason(struct nbdc *s);
/* Every tick: down_after passed without a ready connection: down. */
void nbdc_check_down(struct nbdc *s);
/* How the bounded reconnect names the server (nbd_conn.c). */
extern const struct reach_words nbdc_reach_words;
/* Watch what libnbd wants now on @c (after queuing a command). */
void nbdc_kick(struct nbdc_conn *c);
/* Close every connection (the device closes). */
void nbdc_conn_close_all(struct nbdc *s);
const char *nbdc_conn_state_name(enum nbdc_conn_state st);

/* nbd.c */
/* Send @r on a ready connection, or park it until there is one. */
void nbdc_issue(struct nbdc_req *r);
/* A connection became ready: send what waits. */
void nbdc_issue_waiting(struct nbdc *s);
/* Fail @r now with @res (from the main loop). */
void nbdc_finish(struct nbdc_req *r, int res);
/* Every 100 ms: requests past their deadline. */
void nbdc_watchdog(struct nbdc *s);

/* nbd_status.c */
int nbdc_block_status(struct bs_dev *dev, uint64_t offset, uint64_t len,
		      bs_extent_fn fn, void *arg);
void nbdc_status_close(struct nbdc *s);

#endif
