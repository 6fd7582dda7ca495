/* SPDX-License-Identifier: MIT */
/*
 * State shared by the files of the NVMe/TCP target (not a public API).
 *
 *   nvmf_subsys  one `nvmf` export: an NVM subsystem (its NQN), its
 *                namespaces (the export's units, NSID 1..), its ports
 *                and its controllers.
 *   nvmf_port    one listener of the subsystem (`listen`, `listen.N`)
 *                with its ANA state; it also serves the discovery
 *                subsystem.
 *   nvmf_ctrl    one controller = one association: made by a Connect on
 *                an admin queue, joined by I/O queues naming its ID.
 *   nvmf_queue   one TCP connection = one queue (admin or I/O).
 *   nvmf_cmd     one command in flight on a queue.
 *
 * Threads (docs/nvmf.md "Threads"): the listener spreads connections
 * over the I/O threads, so the queues of one controller may live on
 * different loops. A queue's own state (input, output, commands) is its
 * loop's alone. What queues and the main loop share sits under the
 * subsystem's lock ss->lock: the controller list and IDs, every
 * controller's state (CC/CSTS, KATO and its last Keep Alive, AEN
 * configuration, held AERs, the changed-namespace log, features, its
 * queue table) and the namespaces' capabilities as hosts see them.
 * Another thread reaches a queue only by nvmf_queue_send_close() /
 * nvmf_queue_send_aen() under ss->lock while the queue is attached to a
 * controller; the queue takes its message back when it detaches.
 */
#ifndef BLKSTACK_NVMF_INTERNAL_H
#define BLKSTACK_NVMF_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <blkstack/bdev.h>
#include <blkstack/budget.h>
#include <blkstack/caps.h>
#include <blkstack/export.h>
#include <blkstack/net.h>
#include <blkstack/nvme.h>

#include "export/nvmf/pdu.h"

#define NVMF_NQN_PREFIX "nqn.2026-12.org.blkstack:"
#define NVMF_DEFAULT_LISTEN "127.0.0.1:4420"
#define NVMF_MAX_ALLOW 32
#define NVMF_MDTS 8		/* 2^8 x 4 KiB = 1 MiB per command */
#define NVMF_MAX_XFER (4096u << NVMF_MDTS)
/* in-capsule data bytes accepted (IOCCSZ): `in_capsule`, at most a
 * whole transfer, by default a whole transfer (no R2T round trip) */
#define NVMF_INCAPSULE_MAX NVMF_MAX_XFER
/* in-capsule data bytes accepted on the admin queue and before Connect
 * whatever `in_capsule` is (the admin queue's capsules are 8 KiB) */
#define NVMF_ADMIN_INCAPSULE 8192u
/* ICResp MAXH2CDATA: the largest transfer, so that one R2T (and one
 * H2CData PDU) can carry all of a write's data (see queue.c) */
#define NVMF_MAXH2CDATA NVMF_MAX_XFER
/* PDU data from this many bytes goes straight from the socket into its
 * payload buffer (zero-copy input) */
#define NVMF_DIRECT_MIN (16u << 10)
#define NVMF_AERL 4		/* AERs held at once */
#define NVMF_KAS_100MS 10	/* keep alive granularity: 1 s */
#define NVMF_MAX_PORTS 4	/* listeners of one subsystem */
/* ANA: a namespace's group is `ana_group.NSID` (default 1); group IDs
 * 1..NVMF_ANA_MAX_GROUPS; a state per port and group */
#define NVMF_ANAGRPID 1
#define NVMF_ANA_MAX_GROUPS 128
#define NVMF_ANATT 10		/* seconds a transition may last (`anatt`) */

struct nvmf_ns {
	uint32_t nsid;
	struct bs_export_unit *unit;
	uint8_t nguid[16];
	uint8_t eui64[8];
	uint8_t uuid[16];
	uint32_t anagrpid;		/* 0 without ANA */
	/* the unit's capabilities as hosts see them (ss->lock): copied
	 * before the namespace attribute notice is sent */
	struct bs_caps caps;
};

struct nvmf_ctrl;
struct nvmf_queue;
struct nvmf_subsys;

struct nvmf_port {
	struct nvmf_subsys *ss;
	unsigned index;			/* 1.. (`listen` = 1, `listen.N`) */
	char listen[128];
	struct bs_net_listener *nl;
	uint16_t portid;		/* in the discovery log */
	/* BS_NVME_ANA_* of each group on this port, [ANAGRPID] ([0]
	 * unused): written under ss->lock, read atomically by the I/O
	 * path */
	uint8_t ana_state[NVMF_ANA_MAX_GROUPS + 1];
};

struct nvmf_subsys {
	struct bs_export *exp;
	struct bs_loop *loop;		/* the main loop: listener, tick */
	pthread_mutex_t lock;		/* see "Threads" above */
	char nqn[BS_NVME_NQN_SIZE];
	char *allow[NVMF_MAX_ALLOW];	/* host NQNs; none = any host */
	unsigned nallow;
	bool hdgst_ok, ddgst_ok;	/* digests the target accepts */
	uint32_t max_ioq;		/* I/O queues per controller */
	uint32_t qdepth;		/* entries per queue (MQES + 1) */
	uint32_t incapsule;		/* in-capsule data bytes (IOCCSZ) */
	uint32_t kato_max_ms;		/* 0 = any */
	struct bs_net_limits lim;
	struct nvmf_port ports[NVMF_MAX_PORTS];
	unsigned nports;
	bool ana;			/* ANA reported (CMIC bit 3) */
	uint8_t anatt;			/* seconds, Identify Controller ANATT */
	uint32_t ana_maxgrp;		/* the highest ANAGRPID in use */
	uint64_t ana_chgcnt;		/* ANA log change count (ss->lock) */
	/* each group's change count, [ANAGRPID] (ss->lock) */
	uint64_t ana_grp_chgcnt[NVMF_ANA_MAX_GROUPS + 1];
	struct nvmf_ns *ns;
	unsigned nns;
	struct nvmf_ctrl *ctrls;
	uint16_t next_cntlid;
	struct nvmf_subsys *disc_next;	/* discovery.c's registry */
	int timer;
};

struct nvmf_ctrl {
	struct nvmf_subsys *ss;
	struct nvmf_port *port;		/* its admin queue came in on; NULL
					   in unit tests = optimized */
	struct nvmf_ctrl *next;
	uint16_t cntlid;
	bool discovery;
	char hostnqn[BS_NVME_NQN_SIZE];
	uint8_t hostid[16];
	uint32_t cc, csts;
	uint32_t kato_ms;
	uint64_t ka_ns;			/* last Keep Alive */
	uint32_t aen_cfg;
	uint16_t aer_cid[NVMF_AERL];
	unsigned naer;
	bool aen_ns_pending;		/* a NS attribute notice to send */
	bool aen_ns_masked;		/* sent, log page not read yet */
	bool aen_ana_pending;		/* an ANA change notice to send */
	bool aen_ana_masked;		/* sent, ANA log not read yet */
	uint32_t changed[BS_NVME_CHANGED_NS_MAX];
	unsigned nchanged;
	bool changed_overflow;
	uint32_t nr_ioq;		/* granted by Set Features */
	bool wce;			/* atomic: I/O queues read it */
	struct nvmf_queue *admin;
	struct nvmf_queue **ioq;	/* [1..max_ioq] */
	unsigned refs;			/* queues attached */
};

struct nvmf_out {
	struct nvmf_out *next;
	uint8_t hdr[BS_NVME_TCP_TERM_PLEN_MAX];
	size_t hdr_len;
	uint8_t *data;			/* owned, freed once sent */
	uint32_t data_pool;		/* data is a payload buffer of this
					   many bytes (nvmf_buf_get()); 0:
					   malloc'd */
	size_t data_off, data_len;
	uint8_t ddgst[4];
	size_t dd_len;
	size_t sent;
	bool close_after;		/* a C2HTermReq: close once sent */
};

struct nvmf_cmd {
	struct nvmf_queue *q;
	struct nvmf_cmd *next;
	struct bs_nvme_sqe sqe;
	struct nvmf_ns *ns;
	uint8_t *buf;			/* payload buffer (nvmf_buf_get()) */
	uint32_t buf_len;		/* its bytes, taken from the budget */
	uint32_t len;			/* data bytes of the command */
	uint32_t got;			/* H2C bytes received so far */
	uint32_t r2t_len;		/* bytes of the outstanding R2T */
	uint16_t ttag;
	bool wants_data;		/* waiting for H2CData */
	bool in_core;			/* requests in the device (set by
					   nvmf_cmd_core()) */
	uint32_t dev_bytes;		/* of buf_len, counted in the device
					   meanwhile */
	unsigned pending;		/* device requests outstanding */
	int err;			/* first error of the requests */
	uint16_t sf;			/* status field to answer */
	struct bs_req req;
	struct bs_req *reqs;		/* DSM: one per range */
	/* waiting for the budget (nvmf_cmd_hold()): the queue's FIFO; or
	 * for the Compare scratch (cmp_wait): its FIFO */
	struct nvmf_cmd *wnext;
	void (*resume)(struct nvmf_cmd *c);
	bool parked;
	bool over;			/* its in-capsule data was taken above
					   the budget's limit (q->nover) */
	bool cmp_wait;			/* waiting for the queue's Compare
					   scratch (q->cmp_head, linked by
					   wnext; not parked) */
	/* Compare: the device offset of its first byte, the bytes compared
	 * so far and the chunk read at a time into q->cmp_buf */
	uint64_t cmp_off;
	uint32_t cmp_done, cmp_chunk;
};

struct nvmf_queue {
	struct bs_net_conn *nc;
	struct nvmf_subsys *ss;
	struct nvmf_port *port;		/* NULL in unit tests */
	struct bs_loop *loop;		/* the loop that serves it */
	/* messages from other threads (ss->lock) */
	struct bs_work msg;
	bool msg_sent, msg_aen;
	const char *msg_close;		/* a reason: close the queue */
	struct nvmf_ctrl *ctrl;		/* after Connect */
	uint16_t qid;
	uint16_t sqsize;
	uint16_t sqhd;			/* SQ head: entries consumed, mod
					   sqsize + 1 */
	bool sqflow_off;
	struct nvmf_pdu_params pp;
	/* input: the header, then the rest of the PDU in three parts:
	 * padding up to PDO (skipped), the data (into a payload buffer,
	 * maybe straight from the socket: p_in_direct()), its digest */
	uint8_t hdr[BS_NVME_TCP_HLEN_MAX + BS_NVME_TCP_DIGEST_LEN];
	size_t have;
	struct nvmf_pdu_layout lay;
	bool in_rest;			/* the header is done */
	bool hdr_held;			/* in-capsule data waits for budget */
	uint32_t pad_left;
	uint8_t *ddst;			/* NULL: the data is skipped */
	uint32_t dhave;
	uint32_t skip_crc;		/* CRC32C of skipped data so far */
	uint8_t dgst[BS_NVME_TCP_DIGEST_LEN];
	uint32_t dgst_have;
	uint8_t *icbuf;			/* in-capsule data (nvmf_buf_get()) */
	uint32_t icbuf_len;
	bool icbuf_over;		/* taken above the budget's limit */
	/* capsules whose data was taken above the limit, not yet freed:
	 * at most one (rest_begin()) */
	unsigned nover;
	struct nvmf_cmd *h2c;		/* the H2CData PDU's command */
	/* the server-wide payload budget (NULL: none, unit tests) */
	struct bs_budget *budget;
	struct bs_budget_holder bh;
	struct nvmf_cmd *wait_head, *wait_tail;
	bool wait_refused;		/* the head asked again, refused */
	/* Compare's scratch: what the device holds, read a chunk at a time
	 * and compared with the host's data (io.c). Made on the queue's
	 * first Compare, freed with the queue; one Compare owns it at a
	 * time, the others wait in cmp_head's FIFO. Not taken from the
	 * budget: a fixed per-queue cost (one chunk, 64 KiB) like the
	 * queue's own buffers, and so nothing a Compare waits for while it
	 * holds its data's bytes. */
	uint8_t *cmp_buf;
	uint32_t cmp_buf_len;
	struct nvmf_cmd *cmp_owner;
	struct nvmf_cmd *cmp_head, *cmp_tail;
	bool evicted;
	/* output */
	struct nvmf_out *out_head, *out_tail;
	size_t out_bytes;
	/* commands */
	struct nvmf_cmd *cmds;
	unsigned ncmds;
	uint16_t next_ttag;
	bool ended, eof, shutdown, orphan;
	struct bs_exports *set;		/* held while orphaned */
	char reason[160];
	uint64_t commands, errors;
	uint64_t start_ns;
};

/* queue.c */
extern const struct bs_net_proto nvmf_net_proto;
void nvmf_queue_end(struct nvmf_queue *q, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Complete @c: C2HData of @data/@len first when @len (owned by the
 * queue afterwards, freed: c->buf, a payload buffer, or malloc'd), then
 * the response. */
void nvmf_cmd_done(struct nvmf_cmd *c, uint16_t sf, uint64_t result,
		   uint8_t *data, uint32_t len);
/* Free @c without an answer (an AER kept by its CID). */
void nvmf_cmd_forget(struct nvmf_cmd *c);
/* Ask for the rest of a write's data (R2T): once c->buf holds all of
 * it (taking the bytes from the budget may make @c wait first). */
void nvmf_cmd_want_data(struct nvmf_cmd *c);
/*
 * Payload buffers: @len bytes (> 0) from the buffer pool, taken from the
 * server-wide budget first. 0, -EAGAIN (the budget is full: the queue's
 * holder is woken when it may try again) or -ENOMEM.
 */
int nvmf_buf_get(struct nvmf_queue *q, uint32_t len, uint8_t **out);
void nvmf_buf_put(struct nvmf_queue *q, uint8_t *buf, uint32_t len);
/*
 * c->buf of at least @len bytes (what it holds is kept). True: go on.
 * False: @c waits in the queue's FIFO for the budget and @resume runs
 * when it may try again, or @c was answered (out of memory); either
 * way the caller leaves @c alone.
 */
bool nvmf_cmd_hold(struct nvmf_cmd *c, uint32_t len,
		   void (*resume)(struct nvmf_cmd *c));
/*
 * The queue's Compare scratch for @c, at least @len bytes (a chunk;
 * page aligned, from the buffer pool, not from the budget): true, @c owns
 * it (c->q->cmp_buf) until nvmf_cmp_scratch_put(). False: another Compare
 * owns it, @c waits in the scratch's FIFO (q->cmp_head, not the
 * budget's) and @resume runs once it is free; or @c was answered (out of memory). Either way the caller leaves
 * @c alone then.
 */
bool nvmf_cmp_scratch_take(struct nvmf_cmd *c, uint32_t len,
			   void (*resume)(struct nvmf_cmd *c));
/* @c (its owner, else nothing happens) is done with the scratch: the
 * next Compare waiting for it takes it. Before nvmf_cmd_done(), which
 * may free @c and its queue. */
void nvmf_cmp_scratch_put(struct nvmf_cmd *c);
/* @c goes to the device (@in) or is back from it: c->in_core. While any
 * command of the queue is in a device the budget's watchdog does not
 * take the queue for stalled (its client waits for the device, not the
 * other way round); one coming back counts as progress. */
void nvmf_cmd_core(struct nvmf_cmd *c, bool in);
/* Free a queued output PDU (and its data); all of @q's output. */
void nvmf_out_free(struct nvmf_queue *q, struct nvmf_out *o);
void nvmf_out_drop_all(struct nvmf_queue *q);
/* Send a response capsule for command @cid without a command object. */
void nvmf_queue_respond(struct nvmf_queue *q, uint16_t cid, uint16_t sf,
			uint64_t result);
uint16_t nvmf_errno_sf(int err, bool write);
/* Under ss->lock, @q attached to a controller, from any thread: close
 * @q on its loop (@why a constant) / send its controller's pending
 * asynchronous events there (@q an admin queue). */
void nvmf_queue_send_close(struct nvmf_queue *q, const char *why);
void nvmf_queue_send_aen(struct nvmf_queue *q);
/* A complete command capsule: the 64-byte @sqe and its @dlen bytes of
 * in-capsule data in @buf (from nvmf_buf_get(q, dlen), owned by the
 * command now; NULL when the data was not kept; taken above the budget's
 * limit when q->icbuf_over, which the command takes over), checked and
 * dispatched (fabrics, admin or I/O). */
void nvmf_capsule(struct nvmf_queue *q, const uint8_t *sqe, uint8_t *buf,
		  uint32_t dlen);
/* Length of the data the SGL of @sqe describes, and whether in capsule. */
int nvmf_sgl(const struct bs_nvme_sqe *sqe, uint32_t *len, bool *incapsule);

/* fabrics.c */
void nvmf_fabrics(struct nvmf_cmd *c);
void nvmf_ctrl_detach(struct nvmf_queue *q);
void nvmf_subsys_tick(struct nvmf_subsys *ss);
const char *nvmf_queue_subnqn(const struct nvmf_queue *q);

/* admin.c */
/* Takes ss->lock for the command. */
void nvmf_admin(struct nvmf_cmd *c);
/* These two under ss->lock; kick on the admin queue's loop only. */
void nvmf_aen_ns_changed(struct nvmf_subsys *ss, uint32_t nsid);
void nvmf_aen_kick(struct nvmf_ctrl *ctrl);
/* The Identify data structures, as sent (unit tests read them too;
 * under ss->lock when queues may run). */
void nvmf_id_ctrl(struct nvmf_queue *q, struct bs_nvme_id_ctrl *id);
void nvmf_id_ns(struct nvmf_ns *ns, struct bs_nvme_id_ns *id);
/* Identify Controller ONCS: Compare always, Write Zeroes when a
 * namespace's device zeroes at all, Dataset Management when one discards
 * or unmaps (under ss->lock). I/O commands it leaves out are Invalid
 * Command Opcode. */
uint16_t nvmf_oncs(const struct nvmf_subsys *ss);
/* The I/O command set independent Identify Namespace (CNS 08h). */
void nvmf_id_ns_indep(struct nvmf_ns *ns,
		      struct bs_nvme_id_ns_cs_indep *id);

/* ana.c: Asymmetric Namespace Access: each namespace in a group
 * (ns->anagrpid), the state per port and group */
/* "optimized" ... for a BS_NVME_ANA_* state, NULL if none */
const char *nvmf_ana_name(uint8_t state);
/* The state called @name, or 0 */
uint8_t nvmf_ana_parse(const char *name);
/* Group @grpid's state on @ctrl's port (optimized without a port) */
uint8_t nvmf_ana_state(const struct nvmf_ctrl *ctrl, uint32_t grpid);
/* Does a namespace of @ss sit in group @grpid? */
bool nvmf_ana_group_used(const struct nvmf_subsys *ss, uint32_t grpid);
/* The ANA log page (LID 0Ch) as @ctrl sees it: every group in use in
 * ascending ID with its NSIDs (@rgo: groups only, no NSID lists);
 * returns its size, @page NULL to size it. Under ss->lock. */
size_t nvmf_ana_log(const struct nvmf_ctrl *ctrl, bool rgo, uint8_t *page);
/* The path status an I/O command for @ns gets on @ctrl's port: 0 when
 * its group is optimized or non-optimized there (any thread, no lock) */
uint16_t nvmf_ana_io_status(const struct nvmf_ctrl *ctrl,
			    const struct nvmf_ns *ns);
/* Every group's state on @port to @state (at open, before queues run) */
void nvmf_ana_port_init(struct nvmf_port *port, uint8_t state);
/* Under ss->lock: set group @grpid's state on @port (@grpid 0: every
 * group's); when a state changed, count it (the log's change count
 * once, each changed group's own) and tell every controller on the
 * port (one ANA change notice). Returns the number of groups changed. */
unsigned nvmf_ana_set(struct nvmf_port *port, uint32_t grpid, uint8_t state);

/* io.c */
void nvmf_io(struct nvmf_cmd *c);
/* Start the command once its data is here (Write, Compare, DSM). */
void nvmf_io_exec(struct nvmf_cmd *c);

/* discovery.c */
/* Join/leave the list every discovery log shows (any thread). */
void nvmf_disc_add(struct nvmf_subsys *ss);	/* gives port IDs */
void nvmf_disc_remove(struct nvmf_subsys *ss);
/* The discovery log page (every subsystem of the process, as @ss's
 * discovery controller sees it) into @buf (@len bytes from @off). */
void nvmf_discovery_log(struct nvmf_subsys *ss, uint8_t *buf, uint64_t off,
			uint32_t len);

/* subsys.c */
struct nvmf_ns *nvmf_ns_find(struct nvmf_subsys *ss, uint32_t nsid);
/* What the data path needs of @ns's capabilities (takes ss->lock). */
void nvmf_ns_geometry(struct nvmf_subsys *ss, const struct nvmf_ns *ns,
		      uint32_t *lbs, uint64_t *size, bool *wz_unmap);
#endif
