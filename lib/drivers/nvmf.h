/* SPDX-License-Identifier: MIT */
/*
 * The nvmf driver's own declarations, shared by its files (not a public
 * API): nvmf.c (the device type, paths, requests, multipath),
 * nvmf_queue.c (one NVMe/TCP queue: a socket, PDUs, commands in flight),
 * nvmf_ctrl.c (a controller = one path: admin queue bring-up,
 * identify, keep alive, events, I/O queues, reconnects) and nvmf_ana.c
 * (Asymmetric Namespace Access: a path's state, which paths carry I/O).
 * Everything runs on the context's main loop.
 */
#ifndef BLKSTACK_DRIVERS_NVMF_H
#define BLKSTACK_DRIVERS_NVMF_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include <blkstack/bdev.h>
#include <blkstack/fdpump.h>
#include <blkstack/loop.h>

#include "drivers/nvmf_config.h"
#include "drivers/reach.h"

#define NVMF_TICK_MS 100
#define NVMF_MAX_PATHS 8
#define NVMF_MAX_QUEUES 16
#define NVMF_ADMIN_DEPTH 32
#define NVMF_ANA_LOG_MAX (1u << 20)	/* the largest ANA log read */
/* H2CData is queued for the socket while less than this waits to be sent */
#define NVQ_OUT_HIGH (1u << 20)

/* ---- one queue ----------------------------------------------------------- */

struct nvq;
/* A command finished: @cqe (16 bytes) or @err < 0 (the queue was lost). */
typedef void (*nvq_done_fn)(void *arg, const uint8_t *cqe, int err);

/*
 * A command ID is its slot (bits 11:0) and the slot's generation (bits
 * 15:12, bumped each time a command in the slot ends), so a late or
 * repeated completion never lands on the slot's next command.
 */
#define NVQ_CID_SLOT_MASK 0x0fffu
#define NVQ_CID_GEN_SHIFT 12
static inline unsigned nvq_cid_slot(uint16_t cid)
{
	return cid & NVQ_CID_SLOT_MASK;
}

struct nvq_slot {
	bool busy;
	uint8_t gen;			/* of the cid, 0..15 */
	uint8_t sqe[64];
	const struct iovec *out;	/* data to the controller */
	int outcnt;
	struct iovec *in;		/* data from it */
	int incnt;
	uint32_t len;			/* data bytes */
	uint32_t got;			/* C2H bytes received */
	uint32_t sent;			/* H2C bytes queued (in-capsule: all) */
	uint32_t r2t_left;		/* of the R2T being answered, from sent */
	uint16_t ttag;			/* its transfer tag */
	uint64_t sent_ns;
	nvq_done_fn done;
	void *arg;
};

struct nvq_buf {
	uint8_t *p;
	size_t len, cap, off;		/* bytes [off, len) pending */
};

enum nvq_state { NVQ_CLOSED, NVQ_CONNECTING, NVQ_IC, NVQ_READY };

struct nvq {
	struct bs_loop *loop;
	struct bs_fdpump *pump;
	int fd;
	enum nvq_state state;
	uint16_t qid;
	unsigned depth;
	struct nvq_slot *slots;
	unsigned inflight;
	bool hdgst, ddgst;		/* asked for, then as agreed */
	uint32_t cpda, maxh2cdata;
	uint32_t icd_max;		/* in-capsule data bytes, 0 = none */
	uint32_t max_in;		/* the largest read sent: bounds a PDU */
	struct nvq_buf out, in;
	unsigned r2t_pending;		/* slots with r2t_left > 0 */
	unsigned r2t_cur;		/* the slot being answered first */
	char err[160];
	/* the owner's: connected (0) or lost (-errno) */
	void (*event)(void *owner, struct nvq *q, int err);
	void *owner;
};

int nvq_open(struct nvq *q, struct bs_loop *loop, const char *host,
	     const char *port, uint16_t qid, unsigned depth, bool hdgst,
	     bool ddgst, void (*event)(void *, struct nvq *, int), void *owner);
void nvq_close(struct nvq *q, int err);
bool nvq_has_slot(const struct nvq *q);
/* Queue a command: @sqe (64 bytes, cid and SGL filled here). 0 or -errno
 * (-EAGAIN: no free slot). */
int nvq_submit(struct nvq *q, const uint8_t *sqe, const struct iovec *out,
	       int outcnt, struct iovec *in, int incnt, uint32_t len,
	       nvq_done_fn done, void *arg);
/* The oldest command in flight was sent at (0 = none). */
uint64_t nvq_oldest_ns(const struct nvq *q);

/* ---- a controller (a path) ---------------------------------------------- */

struct nvmf;

enum nvc_state { NVC_DOWN, NVC_CONNECTING, NVC_LIVE, NVC_REFUSED };

struct nvc {
	struct nvmf *m;
	unsigned index;
	char *url, *host, *port, *subnqn;
	char name[80];			/* "path.N HOST:PORT" for reasons */
	uint32_t nsid;
	enum nvc_state state;
	struct nvq admin;
	struct nvq io[NVMF_MAX_QUEUES];
	unsigned nio, io_ready, rr;
	int step;			/* bring-up step */
	int timer;			/* reconnect / CSTS poll */
	int ka_timer;
	uint16_t cntlid;
	uint64_t cap;
	unsigned rdy_polls;
	uint64_t connect_ns;		/* bring-up began */
	bool aer_posted;
	bool reidentify;		/* an event asked, re-read the namespace */
	uint8_t *idbuf;			/* 4096 bytes for Identify / logs */
	struct iovec idiov;

	/* facts, ids and the decision */
	struct nvmf_facts facts;
	struct nvmf_ids ids;
	struct nvmf_config cfg;
	uint16_t oaes_lo;
	uint8_t nmic, cmic;
	uint32_t ioccsz;
	uint32_t anagrpid;

	/* ANA (nvmf_ana.c) */
	bool ana;			/* CMIC bit 3: the controller reports it */
	uint8_t anacap;
	uint8_t anatt;			/* seconds a change may last */
	uint32_t nanagrpid, nn;		/* Identify Controller: size the log */
	uint8_t *ana_log;		/* the log as read */
	size_t ana_size;		/* its bound (allocated) */
	size_t ana_have;		/* bytes read so far */
	uint32_t ana_want;		/* bytes of the part asked for */
	uint64_t ana_change_ns;		/* entered change, 0 = not in it */
	uint64_t ana_timeouts;		/* lost for a change past ANATT */
	uint8_t ana_state;		/* BS_NVME_ANA_*; 0 = not reported */
	uint64_t ana_chgcnt;		/* of our group, as last read */
	uint64_t ana_read_ns;		/* the log was last read */
	bool reana;			/* read the ANA log once idle */
	uint64_t ana_changes, ana_errors;	/* states seen, path statuses */

	/* counters and news */
	unsigned connects, failed_connects;
	uint64_t events, lost, keepalives;
	uint64_t commands;		/* I/O commands sent on the path */
	char last_error[256];
};

const char *nvc_state_name(enum nvc_state s);
void nvc_start(struct nvc *c);		/* connect now */
void nvc_stop(struct nvc *c);		/* close everything */
/* The path is lost: close, fail its commands back, reconnect later. */
void nvc_lost(struct nvc *c, const char *why);
/* Pick an I/O queue with a free slot (round robin), or NULL. */
struct nvq *nvc_queue(struct nvc *c);
void nvc_tick(struct nvc *c);
/* Read the path's ANA log now, or once the admin queue is idle. */
void nvc_ana_refresh(struct nvc *c);

/* ---- ANA (nvmf_ana.c) ---------------------------------------------------- */

/* "optimized", ... "none" (0: not reported) */
const char *nvmf_ana_state_name(uint8_t st);
/* 0: optimized or not reported, 1: non-optimized, -1: no I/O there */
int nvmf_ana_rank(uint8_t st);
/* The ANA state an ANA path status (SCT 3h SC 01h..03h) says, else 0. */
uint8_t nvmf_ana_state_of_status(uint16_t sf);
/* The best rank among the @live of @n paths in @states, -1 if none. */
int nvmf_ana_best_rank(const uint8_t *states, const bool *live, unsigned n);
/* In the ANA log @log (@len bytes read): the state and change count of
 * group @grpid, or (@grpid 0) of the group listing @nsid. 0, -ENOENT or
 * -EPROTO. */
int nvmf_ana_find(const uint8_t *log, size_t len, uint32_t grpid,
		  uint32_t nsid, uint8_t *state, uint64_t *chgcnt);
/* Get Log Page 0Ch of @len bytes (a multiple of 4) from byte @off, RAE
 * clear. */
void nvmf_ana_log_sqe(uint8_t *sqe, uint32_t len, uint64_t off);
/* The most an ANA log can be for @nanagrpid groups and @nn namespaces
 * (Identify Controller), at most NVMF_ANA_LOG_MAX, a multiple of 4. */
size_t nvmf_ana_log_bound(uint32_t nanagrpid, uint32_t nn);
/* The most one Get Log Page may carry: MDTS in minimum pages (0: no
 * limit), at most NVMF_ANA_LOG_MAX. */
uint32_t nvmf_ana_log_chunk(uint8_t mdts, uint8_t mpsmin);
/* How long the log whose first @have bytes are @log is as far as they
 * tell: more than @have while groups the header counts are missing. */
size_t nvmf_ana_log_need(const uint8_t *log, size_t have);
/* A path in @state since @since_ns (0: not in change): has the change
 * lasted longer than @anatt seconds at @now? */
bool nvmf_ana_expired(uint8_t state, uint64_t since_ns, uint8_t anatt,
		      uint64_t now);
/* The log is in c->ana_log (@status 0) or was refused: take our state. */
void nvc_ana_log_read(struct nvc *c, int status);
/* A command came back with the path status of state @st. */
void nvc_ana_status(struct nvc *c, uint8_t st);
/* Unusable for more than a second: read the log again. */
bool nvc_ana_stale(const struct nvc *c, uint64_t now);

/* ---- the device ---------------------------------------------------------- */

enum nvmf_policy { NVMF_RR, NVMF_FAILOVER };

struct nvmf_req {
	struct nvmf_req *prev, *next;	/* m->reqs */
	struct nvmf_req *wnext;		/* m->wait list */
	struct bs_req *req;
	struct nvmf *m;
	struct bs_work work;
	struct nvc *path;		/* in flight on, else NULL */
	bool waiting;
	unsigned tries;
	uint64_t deadline_ns;
	uint8_t dsm[16];		/* one DSM range */
	struct iovec dsm_iov;
};

struct nvmf {
	struct bs_dev *dev;
	struct bs_loop *loop;
	struct bs_fdpump *ticker;	/* nothing to pump: a tick only */
	int tick_timer;

	/* configuration */
	char *hostnqn;
	uint8_t hostid[16];
	bool hdgst, ddgst;
	unsigned nqueues, depth;
	unsigned timeout_s, reconnect_ms, kato_ms, max_retries;
	unsigned down_after_s;		/* no live path this long: down */
	uint32_t max_io;
	enum nvmf_policy policy;

	struct nvc paths[NVMF_MAX_PATHS];
	unsigned npaths;
	unsigned rr;

	/* the device as decided */
	bool opening;
	bool closing;
	bool have_shape;		/* a path was live once */
	struct nvmf_ids ids;		/* of the first path that joined */
	uint64_t nsze;
	uint32_t lbads;
	char mp_why[192];

	struct nvmf_req *reqs, *wait_head, *wait_tail;
	unsigned nreqs;
	int open_timer;
	struct bs_work open_work;

	/*
	 * Bounded reconnect (drivers/reach.h): with no live path for
	 * down_after the device is down: waiting and new requests fail at
	 * once with EIO; the paths go on connecting every reconnect_ms and
	 * the first one live ends it.
	 */
	struct reach reach;

	/*
	 * The namespace's LBA format (logical block size) changed under the
	 * device: seen on re-identify, or in a path of the same namespace
	 * (identifiers matching) that comes with another block size. The
	 * device's size, limits and every offset above it are in the old
	 * blocks, and a stack above cannot take a new block size live: from
	 * then on every request fails with EIO (those waiting at once, those
	 * in flight when they come back), until the device is made again.
	 * lba_why says so in info, explain and each error.
	 */
	bool lba_changed;
	char lba_why[192];
	uint64_t lba_failed;		/* requests failed for it */

	uint64_t retries, expired, failovers;
	uint64_t ana_redirects;		/* sent again after an ANA status */
};

/*
 * A path is up: join it (0), or refuse it (-EINVAL, c->last_error says
 * why); then, once its timers run, nvmf_path_live() makes it serve.
 * A path changed (re-identified), or was lost.
 */
int nvmf_path_up(struct nvmf *m, struct nvc *c);
void nvmf_path_live(struct nvmf *m, struct nvc *c);
void nvmf_path_changed(struct nvmf *m, struct nvc *c);
void nvmf_path_down(struct nvmf *m, struct nvc *c);
/* A path's ANA state changed; @was / @now: it could carry I/O. */
void nvmf_path_ana(struct nvmf *m, struct nvc *c, bool was, bool now);
/* A path has room: send what waits. */
void nvmf_kick(struct nvmf *m);

/* little-endian helpers */
static inline void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void put32(uint8_t *p, uint32_t v) { put16(p, (uint16_t)v); put16(p + 2, (uint16_t)(v >> 16)); }
static inline void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v); put32(p + 4, (uint32_t)(v >> 32)); }
static inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t get32(const uint8_t *p) { return get16(p) | (uint32_t)get16(p + 2) << 16; }
static inline uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }

#endif
