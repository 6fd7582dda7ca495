/* SPDX-License-Identifier: MIT */
/*
 * The NFS v4.0/4.1/4.2 server's internal interfaces: one server per
 * export (its backend, clients, sessions and state under one lock), the
 * per-COMPOUND state the op handlers share, and the backend ops table.
 *
 * Threads: a COMPOUND runs with srv->lock held from its first op to its
 * reply (but for an op waiting for a callback, NFS_OP_WAIT, and for the
 * I/O of a backend with parallel_io: nfs_unlock()), so one filesystem's
 * calls and all protocol state are serialised: first on the connection's
 * I/O loop while its ops cannot block (nowait, NFS_OP_BLOCK), then on a
 * worker (bs_ctx_workers) from the op that would have; connections,
 * record marking and replies stay on the connection's I/O loop (conn.c).
 */
#ifndef BLKSTACK_NFS_H
#define BLKSTACK_NFS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <blkstack/export.h>
#include <blkstack/net.h>

#include "export/nfs/nfs4_const.h"
#include "export/nfs/xdr.h"

#define NFS_DEFAULT_LISTEN "127.0.0.1:2049"
#define NFS_DEFAULT_LEASE 90
/* the largest READ/WRITE payload, and a record's cap around it */
#define NFS_MAX_IO (1u << 20)
#define NFS_MAX_RECORD (NFS_MAX_IO + 64 * 1024)
#define NFS_MAX_REPLY (NFS_MAX_IO + 64 * 1024)
/*
 * One WRITE_SAME writes at most this many bytes of pattern blocks (they
 * are written out, under the export's lock on a backend without
 * parallel I/O) and says so in wr_count; the client sends the rest.
 * Zeroes, made at metadata cost, are not bounded.
 */
#define NFS_WS_PATTERN_MAX (64u << 20)
#define NFS_MAX_SLOTS 32
/*
 * The reply cache: a slot keeps its last reply when the client asked
 * (sa_cachethis) or when it is this small (most non-idempotent ops);
 * a retry of any other gets RETRY_UNCACHED_REP. ca_maxresponsesize_cached
 * is at most NFS_MAX_CACHED: with the session caps below, every reply
 * cache together holds at most NFS_MAX_SESSIONS x NFS_MAX_SLOTS x
 * NFS_MAX_CACHED (256 MiB), whatever clients send.
 */
#define NFS_SLOT_KEEP_SMALL 1024u
#define NFS_MAX_CACHED 8192u
/* sessions per client and per export: CREATE_SESSION past them, NOSPC */
#define NFS_MAX_CLIENT_SESSIONS 16u
#define NFS_MAX_SESSIONS 1024u
/*
 * Client records per export (when full, the oldest unconfirmed one goes
 * for a new one; none: EXCHANGE_ID / SETCLIENTID answer DELAY /
 * RESOURCE), open, lock and delegation states per client and per
 * export, byte ranges per lock state: what a client can make the server
 * hold, and the lists the server walks, stay bounded.
 */
#define NFS_MAX_CLIENTS 4096u
#define NFS_MAX_CLIENT_STATES 8192u
#define NFS_MAX_STATES 65536u
#define NFS_MAX_LOCK_RANGES 1024u
/*
 * The buckets of the server's lookup tables (struct nfs_tables): at most
 * four entries a bucket on average when everything above is full.
 */
#define NFS_STATE_BUCKETS (NFS_MAX_STATES / 4)
#define NFS_CLIENT_BUCKETS (NFS_MAX_CLIENTS / 4)
#define NFS_SESSION_BUCKETS (NFS_MAX_SESSIONS / 4)
#define NFS_MAX_OPS 64
/* the largest fattr4 body GETATTR encodes (every supported attribute;
 * test_nfs_room checks it) */
#define NFS_FATTR_MAX 2048u
#define NFS_NAME_MAX 255

/* ---- file handles and attributes ----------------------------------------- */

struct nfs_fh {
	uint32_t len;
	uint8_t data[NFS4_FHSIZE];
};

/* What a backend reports of an object (a struct stat in NFS terms). */
struct nfs_attr {
	uint32_t type;		/* nfs_ftype4 */
	uint32_t mode;		/* permission bits, 07777 */
	uint32_t nlink;
	uint32_t uid, gid;
	uint64_t size, used;
	uint64_t fileid;
	uint64_t change;
	uint32_t rdev_major, rdev_minor;
	struct timespec atime, mtime, ctime;
};

/* Attributes to set (SETATTR, CREATE, OPEN): NFS_SA_* in mask. */
enum {
	NFS_SA_MODE = 1 << 0,
	NFS_SA_UID = 1 << 1,
	NFS_SA_GID = 1 << 2,
	NFS_SA_SIZE = 1 << 3,
	NFS_SA_ATIME = 1 << 4,		/* atime given (or server time) */
	NFS_SA_MTIME = 1 << 5,
	NFS_SA_ATIME_NOW = 1 << 6,
	NFS_SA_MTIME_NOW = 1 << 7,
};

struct nfs_sattr {
	uint32_t mask;
	uint32_t mode, uid, gid;
	uint64_t size;
	struct timespec atime, mtime;
};

struct nfs_statfs {
	uint64_t bytes_total, bytes_free, bytes_avail;
	uint64_t files_total, files_free, files_avail;
	uint32_t name_max;
	uint64_t fsid_major, fsid_minor;
};

/* ---- backends ------------------------------------------------------------ */

struct nfs_backend;
struct bs_ws_sink;

/* One readdir entry; return nonzero to stop (no room). */
typedef int (*nfs_dirent_fn)(void *arg, const char *name, uint64_t cookie,
			     const struct nfs_fh *fh,
			     const struct nfs_attr *a);

/*
 * A backend serves one tree. Every call runs on a worker with the
 * server's lock held, but for the I/O calls of a backend that sets
 * parallel_io; errors are negative errno, mapped to nfsstat4 by
 * nfs_errno(). Handles are the backend's own bytes, at most
 * NFS_BACKEND_FH_MAX, stable across a restart (fh.c wraps them).
 */
#define NFS_BACKEND_FH_MAX 112

struct nfs_backend_ops {
	const char *name;
	/*
	 * read, write, commit, seek and with_ws_sink may run without the
	 * server's lock: on several workers at once, beside any other call
	 * (each call opens what it needs from the handle, or takes it
	 * from a cache with its own lock). READ, READ_PLUS, WRITE, COMMIT
	 * and WRITE_SAME then no longer wait for every other client's I/O
	 * to the export.
	 */
	bool parallel_io;
	int (*root)(struct nfs_backend *b, struct nfs_fh *out);
	int (*getattr)(struct nfs_backend *b, const struct nfs_fh *fh,
		       struct nfs_attr *out);
	int (*lookup)(struct nfs_backend *b, const struct nfs_fh *dir,
		      const char *name, struct nfs_fh *out);
	int (*parent)(struct nfs_backend *b, const struct nfs_fh *dir,
		      struct nfs_fh *out);
	/* entries after @cookie (0: from the start), not "." nor ".." */
	int (*readdir)(struct nfs_backend *b, const struct nfs_fh *dir,
		       uint64_t cookie, nfs_dirent_fn fn, void *arg,
		       bool *eof);
	/* create @name in @dir: type NF4REG/DIR/LNK/BLK/CHR/SOCK/FIFO */
	int (*create)(struct nfs_backend *b, const struct nfs_fh *dir,
		      const char *name, uint32_t type, uint32_t mode,
		      const char *link, uint32_t major, uint32_t minor,
		      bool excl, struct nfs_fh *out);
	int (*remove)(struct nfs_backend *b, const struct nfs_fh *dir,
		      const char *name);
	int (*rename)(struct nfs_backend *b, const struct nfs_fh *sdir,
		      const char *sname, const struct nfs_fh *tdir,
		      const char *tname);
	int (*link)(struct nfs_backend *b, const struct nfs_fh *fh,
		    const struct nfs_fh *dir, const char *name);
	int (*readlink)(struct nfs_backend *b, const struct nfs_fh *fh,
			char *buf, size_t cap, size_t *len);
	int (*setattr)(struct nfs_backend *b, const struct nfs_fh *fh,
		       const struct nfs_sattr *sa);
	/* bytes read in *n, *eof at the end of the file */
	int (*read)(struct nfs_backend *b, const struct nfs_fh *fh,
		    uint64_t off, void *buf, size_t len, size_t *n,
		    bool *eof);
	int (*write)(struct nfs_backend *b, const struct nfs_fh *fh,
		     uint64_t off, const void *buf, size_t len, bool sync);
	/*
	 * read and write that never wait (a COMPOUND on a connection's I/O
	 * thread, with the server's lock): -EAGAIN when they would (data
	 * not cached, a write the filesystem cannot take at once), and the
	 * COMPOUND does it with read / write on a worker. NULL: the backend
	 * cannot, and its COMPOUNDs always run on a worker. A backend with
	 * these also answers root and getattr without waiting (but for an
	 * inode the kernel must read first): PUTFH and GETATTR run inline.
	 */
	int (*read_nowait)(struct nfs_backend *b, const struct nfs_fh *fh,
			   uint64_t off, void *buf, size_t len, size_t *n,
			   bool *eof);
	int (*write_nowait)(struct nfs_backend *b, const struct nfs_fh *fh,
			    uint64_t off, const void *buf, size_t len);
	int (*commit)(struct nfs_backend *b, const struct nfs_fh *fh);
	/* FALLOC_FL_* mode */
	int (*fallocate)(struct nfs_backend *b, const struct nfs_fh *fh,
			 int mode, uint64_t off, uint64_t len);
	/* SEEK_DATA / SEEK_HOLE from @off: *out, or -ENXIO past the end */
	int (*seek)(struct nfs_backend *b, const struct nfs_fh *fh,
		    uint64_t off, int whence, uint64_t *out);
	/*
	 * RFC 8276 extended attributes of the user namespace, @name
	 * without its "user." (NULL ops: NOTSUPP). The value in @buf
	 * (*len; -ERANGE when over @cap), -ENODATA when missing; set
	 * with XATTR_CREATE / XATTR_REPLACE / 0 flags; list: the names
	 * NUL-terminated one after another in @buf.
	 */
	int (*getxattr)(struct nfs_backend *b, const struct nfs_fh *fh,
			const char *name, void *buf, size_t cap, size_t *len);
	int (*setxattr)(struct nfs_backend *b, const struct nfs_fh *fh,
			const char *name, const void *val, size_t len,
			int flags);
	int (*listxattr)(struct nfs_backend *b, const struct nfs_fh *fh,
			 char *buf, size_t cap, size_t *len);
	int (*removexattr)(struct nfs_backend *b, const struct nfs_fh *fh,
			   const char *name);
	int (*statfs)(struct nfs_backend *b, struct nfs_statfs *out);
	void (*close)(struct nfs_backend *b);
	/*
	 * Optional: close what it keeps open that no call has used for
	 * @idle_ms (the server calls it every NFS_TRIM_TICK_MS).
	 */
	void (*trim)(struct nfs_backend *b, unsigned idle_ms);
	/* WRITE_SAME: @fn runs with a bs_write_same() sink on file @fh */
	int (*with_ws_sink)(struct nfs_backend *b, const struct nfs_fh *fh,
			    int (*fn)(void *arg, const struct bs_ws_sink *sink),
			    void *arg);
};

struct nfs_backend {
	const struct nfs_backend_ops *ops;
	void *priv;
	/*
	 * Set before the open: whose worker pool a backend may hand slow
	 * housekeeping to (NULL: done where it arises)
	 */
	struct bs_ctx *ctx;
	/*
	 * NFS_NOWAIT_READ / _WRITE: not worth trying read_nowait / write_nowait
	 * (the filesystem refused them); set by the backend, read by any
	 * thread (atomic)
	 */
	unsigned nowait_off;
};
#define NFS_NOWAIT_READ 1u
#define NFS_NOWAIT_WRITE 2u
/* the largest READ / WRITE tried on an I/O thread (a copy, with the lock) */
#define NFS_INLINE_IO_MAX (64u << 10)

/*
 * The directory backend keeps this many files open (O_RDWR, by handle)
 * for READ, WRITE, COMMIT and the like: each call would else pay
 * open_by_handle_at + close, dear where syscalls are (a PVM guest). A
 * file unlinked on the host still answers ESTALE (its nlink, checked
 * after each use); its space is freed once its entry is, by a worker
 * when the entry goes on a loop's thread (freeing the blocks of a large
 * file takes the filesystem long, and the loop serves other clients).
 */
#define NFS_DIR_FD_CACHE 64
/*
 * A cached fd nobody used for NFS_FD_IDLE_MS is closed (checked every
 * NFS_TRIM_TICK_MS): a file written over NFS can then be executed on
 * the host (no ETXTBSY) and one deleted there frees its space.
 */
#define NFS_FD_IDLE_MS 2000u
#define NFS_TRIM_TICK_MS 1000u
int nfs_backend_dir_open(struct nfs_backend *b, const char *path);
int nfs_backend_ext4_open(struct nfs_backend *b, struct bs_export_unit *u);

/* ---- protocol state ------------------------------------------------------ */

struct nfs_stateid {
	uint32_t seqid;
	uint8_t other[NFS4_OTHER_SIZE];
};

struct nfs_client;
struct nfs_session;
struct nfs_state;

/*
 * The lists of clients, sessions and states: newest first, unlinked in
 * constant time (@pprev is the pointer that points at the entry). Every
 * walk of them relies on "newest first" where it stops at the first
 * match (which WND4_ reason, which holder a DENIED names).
 */
#define NFS_LIST_ADD(headp, e, nx, pp)                                     \
	do {                                                               \
		__typeof__(e) e_ = (e);                                    \
		e_->nx = *(headp);                                         \
		if (e_->nx)                                                \
			e_->nx->pp = &e_->nx;                              \
		*(headp) = e_;                                             \
		e_->pp = (headp);                                          \
	} while (0)
#define NFS_LIST_DEL(e, nx, pp)                                            \
	do {                                                               \
		__typeof__(e) e_ = (e);                                    \
		if (e_->pp) {                                              \
			*e_->pp = e_->nx;                                  \
			if (e_->nx)                                        \
				e_->nx->pp = e_->pp;                       \
		}                                                          \
		e_->nx = NULL;                                             \
		e_->pp = NULL;                                             \
	} while (0)

struct nfs_slot {
	uint32_t seqid;
	bool busy;		/* its COMPOUND runs (may be without the lock) */
	uint8_t *reply;		/* the cached COMPOUND reply */
	size_t reply_len;
};

/*
 * The back channel (backchannel.c). A connection callbacks can go out on
 * is an nfs_xprt (conn.c registers each one; unit tests register their
 * own); a session's back channel names one by id, with the session's
 * cb_program, callback credential and one back-channel slot (slot 0).
 * Both, and the calls in flight, are under srv->cb_lock, which a thread
 * may take with srv->lock held, never the other way round: the
 * connection's loop matches replies without srv->lock.
 */
struct nfs_xprt {
	uint64_t id;
	/* queue record @rec (record mark included; taken); must not block */
	int (*send)(struct nfs_xprt *x, uint8_t *rec, size_t len);
	struct nfs_xprt *next;
};

struct nfs_cb_sec {
	uint32_t flavor;		/* RPC_AUTH_NONE or RPC_AUTH_SYS */
	uint32_t stamp, uid, gid;
	char machine[RPC_AUTHSYS_NAME_MAX + 1];
};

struct nfs_cb_call;

struct nfs_cb_chan {
	unsigned refs;			/* the session's + one per call */
	uint8_t sessid[NFS4_SESSIONID_SIZE];
	uint32_t minor;
	uint64_t conn_id;		/* 0: no connection bound */
	uint32_t prog;
	struct nfs_cb_sec sec;
	uint32_t seqid;			/* slot 0's last sequence id */
	struct nfs_cb_call *inflight;	/* on slot 0, or NULL */
	bool fault;			/* a callback went unanswered */
};

struct nfs_session {
	uint8_t id[NFS4_SESSIONID_SIZE];
	struct nfs_cb_chan *cb;
	struct nfs_client *clp;
	uint32_t nslots;
	uint32_t max_req, max_resp, max_resp_cached, max_ops;
	uint32_t flags;
	struct nfs_slot slots[NFS_MAX_SLOTS];
	struct nfs_session *next, **pprev;	/* the server's list */
	struct nfs_session *id_next, **id_pprev;	/* tables: by id */
	struct nfs_session *clp_next, **clp_pprev;	/* its client's */
};

/* The last CREATE_SESSION's reply, for its replay. */
struct nfs_cs_cache {
	uint8_t *reply;
	size_t len;
	uint32_t status;
};

struct nfs_client {
	uint64_t clientid;
	uint8_t verifier[NFS4_VERIFIER_SIZE];
	uint8_t owner[NFS4_OPAQUE_LIMIT];
	uint32_t owner_len;
	uint32_t principal;		/* AUTH_SYS uid (or ~0 AUTH_NONE) */
	bool confirmed;
	uint32_t minor;			/* 0 for SETCLIENTID clients */
	uint32_t cs_seq;		/* last CREATE_SESSION sequence */
	struct nfs_cs_cache cs_cache;
	bool reclaim_done;
	uint8_t confirm[NFS4_VERIFIER_SIZE];	/* 4.0 SETCLIENTID */
	time_t renewed;
	unsigned nsessions;
	unsigned nstates;		/* its opens, locks, delegations */
	unsigned nrevoked;		/* its revoked delegations */
	struct nfs_session *sessions;	/* its sessions */
	struct nfs_state *states;	/* its states */
	struct nfs_client *next, **pprev;	/* the server's list */
	struct nfs_client *id_next, **id_pprev;	/* tables: by clientid */
	struct nfs_client *owner_next, **owner_pprev;	/* by owner */
};

/* One open, lock or delegation state. */
enum nfs_state_type { NFS_ST_OPEN = 1, NFS_ST_LOCK = 2, NFS_ST_DELEG = 3 };

struct nfs_lock_range {
	uint64_t off, len;	/* len UINT64_MAX: to the end */
	uint32_t type;		/* READ_LT / WRITE_LT */
	struct nfs_lock_range *next;
};

struct nfs_state {
	struct nfs_stateid sid;
	enum nfs_state_type type;
	struct nfs_client *clp;
	struct nfs_fh fh;
	uint8_t owner[NFS4_OPAQUE_LIMIT];
	uint32_t owner_len;
	uint32_t access, deny;		/* open */
	uint32_t owner_seqid;		/* 4.0 seqid of the owner */
	bool confirmed;			/* 4.0 OPEN_CONFIRM */
	struct nfs_state *open;		/* lock: its open */
	struct nfs_lock_range *locks;	/* lock */
	/* delegation: OPEN_DELEGATE_READ / _WRITE in dtype */
	uint32_t dtype;
	struct nfs_cb_call *recall;	/* the CB_RECALL sent, or NULL */
	uint64_t recall_ms;		/* when the first conflict came, or 0 */
	bool revoked;			/* until FREE_STATEID */
	/* tables: by stateid, by file; a delegation also among the file's
	 * delegations */
	struct nfs_state *sid_next, **sid_pprev;
	struct nfs_state *file_next, **file_pprev;
	struct nfs_state *deleg_next, **deleg_pprev;
	struct nfs_state *clp_next, **clp_pprev;	/* its client's */
	struct nfs_state *lock_states;	/* open: its lock states */
	struct nfs_state *lock_next, **lock_pprev;	/* lock: its open's */
};

/*
 * The server's lookup tables, so that no request walks every client,
 * session or state (a client could make that 65536 steps under the
 * server's lock for every other client's READ). Made with the first
 * client record (all sessions and states belong to one), under srv->lock
 * as all they index; NULL before: nothing to find. Stateids and session
 * ids hold 64 random bits and clientids a counter, taken as they are; a
 * file handle and a client owner come from clients and are hashed with
 * SipHash under @key, drawn at random when the tables are made, so no
 * client can fill one bucket on purpose. One bucket may hold entries of
 * several keys: walks compare the key.
 */
struct nfs_tables {
	uint64_t key[2];
	struct nfs_state *sid[NFS_STATE_BUCKETS];
	struct nfs_state *file[NFS_STATE_BUCKETS];	/* all of a file */
	struct nfs_state *deleg[NFS_STATE_BUCKETS];	/* delegations */
	struct nfs_client *clientid[NFS_CLIENT_BUCKETS];
	struct nfs_client *owner[NFS_CLIENT_BUCKETS];
	struct nfs_session *sessid[NFS_SESSION_BUCKETS];
};

struct nfs_server {
	pthread_mutex_t lock;
	int trim_timer;			/* on the main loop; 0 = none */
	unsigned refs;			/* the export's + one per job */
	struct bs_export *exp;
	struct bs_ctx *ctx;
	struct nfs_backend be;
	uint32_t export_id;
	unsigned lease, grace;		/* seconds */
	time_t boot;			/* monotonic seconds at start */
	uint8_t boot_verf[NFS4_VERIFIER_SIZE];	/* write verifier */
	uint32_t boot_tag;		/* in clientids, stateids */
	uint64_t next_clientid;
	unsigned nclients, nstates;
	struct nfs_client *clients;
	struct nfs_session *sessions;
	unsigned nsessions;
	struct nfs_tables *tab;		/* tables.c */
	/* the last lease check (nfs_expire_clients): at @expire_at with
	 * lease @expire_lease; none is due again within that second */
	time_t expire_at;
	unsigned expire_lease;
	struct bs_net_listener *nl;
	char listen[128];
	bool shutdown;
	bool delegations;		/* the export's `delegations` */
	bool setuid_ok;			/* the export's `setuid` */
	bool devices_ok;		/* the export's `devices` */
	/* the export's `inline` and a backend with read_nowait (conn.c) */
	bool inline_io;
	/* calls answered on a connection's loop / handed to a worker */
	uint64_t calls_inline, calls_worker;
	/* the back channel (backchannel.c) */
	pthread_mutex_t cb_lock;
	pthread_cond_t cb_cond;
	struct nfs_xprt *xprts;
	struct nfs_cb_call *calls;	/* awaiting their reply */
	uint32_t cb_xid;
};

/* the caller of a COMPOUND, from its RPC credential */
struct nfs_cred {
	uint32_t flavor;
	uint32_t uid, gid;
};

/* What the ops of one COMPOUND share. */
struct nfs_compound {
	struct nfs_server *srv;
	struct nfs_cred cred;
	uint64_t conn_id;
	uint32_t minor;
	struct nfs_fh cfh, sfh;
	bool has_cfh, has_sfh;
	struct nfs_stateid csid, ssid;	/* current / saved stateid (4.1) */
	bool has_csid, has_ssid;
	struct nfs_session *sess;	/* after SEQUENCE */
	struct nfs_slot *slot;
	bool cache_reply;
	unsigned opindex, nops;
	size_t req_len;		/* the COMPOUND's argument bytes */
	bool keep_body;		/* an error result with a body (LOCK denied) */
	uint8_t *scratch;	/* NFS_MAX_IO bytes for READ / WRITE_SAME */
	/*
	 * an op that returned NFS_OP_WAIT: compound.c drops srv->lock,
	 * waits for this callback's reply (bounded), takes the lock again
	 * and runs the op once more from its arguments, with @waited set
	 */
	struct nfs_cb_call *wait;
	bool waited;
	uint8_t sess_id[NFS4_SESSIONID_SIZE];	/* nfs_unlock()'s */
	/*
	 * on a connection's I/O thread: an op that might block returns
	 * NFS_OP_BLOCK before it changes anything, and the COMPOUND goes on
	 * from that op on a worker (compound.c)
	 */
	bool nowait;
};
#define NFS_OP_WAIT 0xfffffffeu
#define NFS_OP_BLOCK 0xfffffffdu

/*
 * A COMPOUND in progress (compound.c), between nfs_compound_begin() and
 * the nfs_compound_run() that finishes it; @a and @r must stay where
 * they are (and their buffers) until then.
 */
struct nfs_run {
	struct nfs_compound c;
	struct xdr_dec *a;
	struct xdr_enc *r;
	size_t start, count_at;
	uint32_t nops, i, n;
	bool started;		/* the lock was taken: ops ran */
	bool done;		/* the reply is whole */
	bool replayed;		/* it is the slot's cached reply */
};

/*
 * compound.c: an op lets go of srv->lock for a call that needs none of
 * the protocol state (parallel backend I/O, a wait for a callback); its
 * COMPOUND's slot stays busy meanwhile. nfs_relock() takes the lock back:
 * NFS4_OK, or NFS4ERR_BADSESSION when the session went meanwhile (the
 * COMPOUND then ends there, its slot gone with the session).
 */
void nfs_unlock(struct nfs_compound *c);
uint32_t nfs_relock(struct nfs_compound *c);

/* ---- entry points between the files ------------------------------------- */

/* backchannel.c */
void nfs_cb_init(struct nfs_server *srv);
void nfs_cb_fini(struct nfs_server *srv);
/* a connection appears / goes (its calls in flight fail with -EPIPE) */
void nfs_xprt_add(struct nfs_server *srv, struct nfs_xprt *x);
void nfs_xprt_del(struct nfs_server *srv, struct nfs_xprt *x);
/* a session's back channel: made at CREATE_SESSION, dropped with it */
struct nfs_cb_chan *nfs_cb_chan_new(struct nfs_server *srv,
				    const uint8_t *sessid, uint32_t minor);
void nfs_cb_chan_put(struct nfs_server *srv, struct nfs_cb_chan *ch);
void nfs_cb_bind(struct nfs_server *srv, struct nfs_cb_chan *ch,
		 uint64_t conn_id);
void nfs_cb_set_sec(struct nfs_server *srv, struct nfs_cb_chan *ch,
		    uint32_t prog, const struct nfs_cb_sec *sec);
/* a connection is bound, alive, and no callback went unanswered */
bool nfs_cb_up(struct nfs_server *srv, struct nfs_cb_chan *ch);
/* whether a back channel was asked for (bound once) and is down now */
bool nfs_cb_down(struct nfs_server *srv, struct nfs_cb_chan *ch);
/*
 * Send CB_COMPOUND { CB_SEQUENCE, @op } on @ch, @op's arguments put by
 * @put(@arg); the reply is awaited at most @ms. -ENOTCONN without a
 * path, -EBUSY while slot 0 holds another call.
 */
int nfs_cb_start(struct nfs_server *srv, struct nfs_cb_chan *ch,
		 uint32_t op, void (*put)(struct xdr_enc *, const void *),
		 const void *arg, unsigned ms, struct nfs_cb_call **out);
/*
 * -EINPROGRESS while awaited; 0 when answered (*@status the op's, or
 * the first error of the reply); -ETIMEDOUT / -EPIPE / -EPROTO
 */
int nfs_cb_poll(struct nfs_server *srv, struct nfs_cb_call *call,
		uint32_t *status);
/* nfs_cb_poll() after waiting up to the call's deadline (no srv->lock) */
int nfs_cb_wait(struct nfs_server *srv, struct nfs_cb_call *call,
		uint32_t *status);
/* the answered op's result body (after its status) */
void nfs_cb_result(struct nfs_cb_call *call, struct xdr_dec *d);
void nfs_cb_call_put(struct nfs_server *srv, struct nfs_cb_call *call);
/* an RPC reply arrived on connection @conn_id */
void nfs_cb_reply(struct nfs_server *srv, uint64_t conn_id,
		  const uint8_t *rec, size_t len);
uint64_t nfs_now_ms(void);
/* the callback_sec_parms4<> of CREATE_SESSION / BACKCHANNEL_CTL */
uint32_t nfs_get_cb_sec(struct xdr_dec *a, struct nfs_cb_sec *sec);
uint32_t nfs_op_backchannel_ctl(struct nfs_compound *, struct xdr_dec *,
				struct xdr_enc *);

/*
 * rpc.c: record marking (RFC 5531 11). Bytes are fed in; a record is
 * ready when its last fragment is in (rm->buf, rm->len); records over
 * @max bytes, or a zero-length non-last fragment train over it, are
 * -EMSGSIZE (the connection closes).
 *
 * Admission (optional, set after nfs_rm_init): each fragment's length is
 * offered to admit() once its header is read, before any room is made
 * for it; false holds the fragment at its header (rm->held: the feed
 * stops there, nothing more is consumed) until nfs_rm_retry() admits it.
 */
struct nfs_rm {
	uint8_t *buf;
	size_t len, cap, max;
	uint8_t hdr[4];
	unsigned hdr_have;
	uint32_t frag_left;
	bool in_frag, last, ready;
	bool held;
	bool (*admit)(void *arg, uint32_t frag_len);
	void *admit_arg;
};
void nfs_rm_init(struct nfs_rm *rm, size_t max);
void nfs_rm_free(struct nfs_rm *rm);
/* bytes consumed (stops at a ready record or a held fragment), or
 * -EMSGSIZE / -ENOMEM */
long nfs_rm_feed(struct nfs_rm *rm, const uint8_t *p, size_t n);
/* a held fragment: ask admit() again; 1 admitted (or none held), 0 still
 * held, -ENOMEM */
int nfs_rm_retry(struct nfs_rm *rm);
/* forget the ready record */
void nfs_rm_next(struct nfs_rm *rm);
/*
 * Zero-copy input: where the rest of the current fragment goes and how
 * much of it is left (0: not inside a fragment); then the bytes that
 * were put there.
 */
size_t nfs_rm_direct(struct nfs_rm *rm, uint8_t **dst);
void nfs_rm_direct_done(struct nfs_rm *rm, size_t n);

/* conn.c: the network server's session ops; server.c: references */
extern const struct bs_net_proto nfs_net_proto;
void nfs_server_get(struct nfs_server *srv);
void nfs_server_put(struct nfs_server *srv);

/*
 * room.c: an upper bound of the reply (without record mark) to the RPC
 * call @req, from its arguments: NFS_MAX_REPLY unless it is a NULL call
 * or a COMPOUND of the data path's ops whose arguments parse.
 */
size_t nfs_reply_room(const uint8_t *req, size_t len);

/* rpc.c: one RPC record in, one reply (without record mark) out. */
int nfs_rpc_process(struct nfs_server *srv, uint64_t conn_id,
		    const uint8_t *req, size_t len, uint8_t *out, size_t cap,
		    size_t *out_len);
/*
 * The same in steps, for a COMPOUND that may stop on an I/O thread and go
 * on on a worker: start reads the call's header (-EBADMSG: not a call,
 * nothing to answer) and answers what is no COMPOUND; run runs the
 * COMPOUND (nfs_compound_run: -EAGAIN with @nowait when it stopped) and
 * gives the reply's length. @k, @req and @out stay put in between.
 */
struct nfs_call {
	struct xdr_dec d;
	struct xdr_enc e;
	bool compound;
	struct nfs_run run;
};
int nfs_call_start(struct nfs_call *k, struct nfs_server *srv,
		   uint64_t conn_id, const uint8_t *req, size_t len,
		   uint8_t *out, size_t cap);
int nfs_call_run(struct nfs_call *k, bool nowait, size_t *out_len);

/* compound.c: COMPOUND4args at @args -> COMPOUND4res at @res. */
int nfs_compound(struct nfs_server *srv, const struct nfs_cred *cred,
		 uint64_t conn_id, struct xdr_dec *args, struct xdr_enc *res);
/*
 * The same in steps: begin decodes the header (-EBADMSG: garbage) and
 * encodes the reply's head; run runs the ops from where the last run
 * stopped. With @nowait (a connection's I/O thread) run takes the lock
 * only when it is free and stops at the first op that would block:
 * -EAGAIN, the lock not held, everything before that op done; call it
 * again without @nowait (a worker) to go on. 0 when the reply is whole.
 */
int nfs_compound_begin(struct nfs_run *p, struct nfs_server *srv,
		       const struct nfs_cred *cred, uint64_t conn_id,
		       struct xdr_dec *args, struct xdr_enc *res);
int nfs_compound_run(struct nfs_run *p, bool nowait);

typedef uint32_t (*nfs_op_fn)(struct nfs_compound *c, struct xdr_dec *a,
			      struct xdr_enc *r);

/* session.c */
uint32_t nfs_op_exchange_id(struct nfs_compound *, struct xdr_dec *,
			    struct xdr_enc *);
uint32_t nfs_op_create_session(struct nfs_compound *, struct xdr_dec *,
			       struct xdr_enc *);
uint32_t nfs_op_destroy_session(struct nfs_compound *, struct xdr_dec *,
				struct xdr_enc *);
uint32_t nfs_op_destroy_clientid(struct nfs_compound *, struct xdr_dec *,
				 struct xdr_enc *);
uint32_t nfs_op_reclaim_complete(struct nfs_compound *, struct xdr_dec *,
				 struct xdr_enc *);
uint32_t nfs_op_bind_conn(struct nfs_compound *, struct xdr_dec *,
			  struct xdr_enc *);
uint32_t nfs_op_setclientid(struct nfs_compound *, struct xdr_dec *,
			    struct xdr_enc *);
uint32_t nfs_op_setclientid_confirm(struct nfs_compound *, struct xdr_dec *,
				    struct xdr_enc *);
uint32_t nfs_op_renew(struct nfs_compound *, struct xdr_dec *,
		      struct xdr_enc *);
/*
 * SEQUENCE as the first op: 0 = go on; a status to stop with; or
 * NFS_SEQ_REPLAY when *@cached holds the reply to send as it is.
 */
#define NFS_SEQ_REPLAY 0xffffffffu
uint32_t nfs_sequence(struct nfs_compound *c, struct xdr_dec *a,
		      struct xdr_enc *r);
/* the slot's reply cache after the COMPOUND was encoded */
void nfs_slot_store(struct nfs_compound *c, const uint8_t *reply,
		    size_t len);
struct nfs_client *nfs_client_find(struct nfs_server *srv, uint64_t id);
struct nfs_session *nfs_session_find(struct nfs_server *srv,
				     const uint8_t *id);
void nfs_client_free(struct nfs_server *srv, struct nfs_client *clp);
/* drop clients whose lease ran out */
void nfs_expire_clients(struct nfs_server *srv);
time_t nfs_now(void);
bool nfs_in_grace(struct nfs_server *srv);

/*
 * tables.c: nfs_tables_get() makes srv->tab when there is none (0, or
 * -ENOMEM / -EIO); the buckets of a key (NULL without tables); freed
 * with the server, when nothing is left in them.
 */
int nfs_tables_get(struct nfs_server *srv);
void nfs_tables_free(struct nfs_server *srv);
struct nfs_state **nfs_sid_bucket(struct nfs_server *srv,
				  const uint8_t *other);
struct nfs_state **nfs_file_bucket(struct nfs_server *srv,
				   const struct nfs_fh *fh);
struct nfs_state **nfs_deleg_bucket(struct nfs_server *srv,
				    const struct nfs_fh *fh);
struct nfs_client **nfs_clientid_bucket(struct nfs_server *srv,
					uint64_t id);
struct nfs_client **nfs_owner_bucket(struct nfs_server *srv,
				     const uint8_t *owner, uint32_t len);
struct nfs_session **nfs_sessid_bucket(struct nfs_server *srv,
				       const uint8_t *id);
/* the first state in the table's bucket of @fh (walk its file_next /
 * deleg_next, comparing handles), or NULL */
struct nfs_state *nfs_file_states(struct nfs_server *srv,
				  const struct nfs_fh *fh);
struct nfs_state *nfs_file_delegs(struct nfs_server *srv,
				  const struct nfs_fh *fh);

/* state.c */
struct nfs_state *nfs_state_new(struct nfs_server *srv,
				struct nfs_client *clp, enum nfs_state_type t,
				const struct nfs_fh *fh, const uint8_t *owner,
				uint32_t owner_len);
void nfs_state_free(struct nfs_server *srv, struct nfs_state *st);
void nfs_states_of_client_free(struct nfs_server *srv,
			       struct nfs_client *clp);
/* find by stateid: 0 or NFS4ERR_BAD_STATEID / OLD_STATEID / ... */
uint32_t nfs_state_find(struct nfs_compound *c,
			const struct nfs_stateid *sid,
			struct nfs_state **out);
/* ... and of @type, on the current file */
uint32_t nfs_state_find_cur(struct nfs_compound *c,
			    const struct nfs_stateid *sid,
			    enum nfs_state_type type, struct nfs_state **s);
/* the stateid an I/O op names allows @access on the current file */
uint32_t nfs_state_check_io(struct nfs_compound *c,
			    const struct nfs_stateid *sid, uint32_t access);
void nfs_get_stateid(struct nfs_compound *c, struct xdr_dec *a,
		     struct nfs_stateid *sid);
void nfs_put_stateid(struct xdr_enc *r, const struct nfs_stateid *sid);
uint32_t nfs_op_open(struct nfs_compound *, struct xdr_dec *,
		     struct xdr_enc *);
uint32_t nfs_op_open_confirm(struct nfs_compound *, struct xdr_dec *,
			     struct xdr_enc *);
uint32_t nfs_op_open_downgrade(struct nfs_compound *, struct xdr_dec *,
			       struct xdr_enc *);
uint32_t nfs_op_close(struct nfs_compound *, struct xdr_dec *,
		      struct xdr_enc *);
uint32_t nfs_op_lock(struct nfs_compound *, struct xdr_dec *,
		     struct xdr_enc *);
uint32_t nfs_op_lockt(struct nfs_compound *, struct xdr_dec *,
		      struct xdr_enc *);
uint32_t nfs_op_locku(struct nfs_compound *, struct xdr_dec *,
		      struct xdr_enc *);
uint32_t nfs_op_test_stateid(struct nfs_compound *, struct xdr_dec *,
			     struct xdr_enc *);
uint32_t nfs_op_free_stateid(struct nfs_compound *, struct xdr_dec *,
			     struct xdr_enc *);
uint32_t nfs_op_release_lockowner(struct nfs_compound *, struct xdr_dec *,
				  struct xdr_enc *);

/* deleg.c */
/* OPEN's open_delegation4: a delegation when one may be had */
void nfs_deleg_open(struct nfs_compound *c, struct nfs_client *clp,
		    const struct nfs_fh *fh, uint32_t access, uint32_t want,
		    struct xdr_enc *r);
/*
 * @clp (NULL: an unknown client) is about to use @fh (@write: change
 * it): 0 when no delegation of another client conflicts (or those that
 * did are revoked now), NFS4ERR_DELAY while they are being recalled.
 */
uint32_t nfs_deleg_break(struct nfs_compound *c, struct nfs_client *clp,
			 const struct nfs_fh *fh, bool write);
/* the same for @name in @dir, and for the current file, by the caller */
uint32_t nfs_deleg_break_name(struct nfs_compound *c,
			      const struct nfs_fh *dir, const char *name);
uint32_t nfs_deleg_break_cur(struct nfs_compound *c, bool write);
/* SEQ4_STATUS_RECALLABLE_STATE_REVOKED while @clp has revoked ones */
uint32_t nfs_deleg_seq_flags(struct nfs_server *srv, struct nfs_client *clp);
uint32_t nfs_op_delegreturn(struct nfs_compound *, struct xdr_dec *,
			    struct xdr_enc *);
/*
 * GETATTR of @bm on the current file, the backend's answer in @at: a
 * write delegation of another client is asked with CB_GETATTR
 * (NFS_OP_WAIT), and its answer put into @at when GETATTR runs again
 */
uint32_t nfs_deleg_getattr(struct nfs_compound *c, const uint32_t *bm,
			   struct nfs_attr *at);

/* fh.c: wire handles = export id + backend handle */
void nfs_fh_wrap(struct nfs_server *srv, const struct nfs_fh *be,
		 struct nfs_fh *wire);
uint32_t nfs_fh_unwrap(struct nfs_server *srv, const uint8_t *p,
		       uint32_t len, struct nfs_fh *be);
bool nfs_fh_equal(const struct nfs_fh *a, const struct nfs_fh *b);

/* attr.c */
extern const uint32_t nfs_supported_attrs[NFS4_BITMAP_WORDS];
void nfs_get_bitmap(struct xdr_dec *a, uint32_t *bm, unsigned words);
void nfs_put_bitmap(struct xdr_enc *r, const uint32_t *bm, unsigned words);
/* fattr4 of object @fh with attributes @at for the @req bitmap */
uint32_t nfs_encode_fattr(struct nfs_compound *c, struct xdr_enc *r,
			  const uint32_t *req, const struct nfs_fh *fh,
			  const struct nfs_attr *at);
/* decode a fattr4 to set: NFS4ERR_ATTRNOTSUPP / INVAL / BADXDR; *set the
 * bitmap of what it holds */
uint32_t nfs_decode_sattr(struct nfs_compound *c, struct xdr_dec *a,
			  struct nfs_sattr *sa, uint32_t *set);
uint32_t nfs_op_getattr(struct nfs_compound *, struct xdr_dec *,
			struct xdr_enc *);
uint32_t nfs_op_setattr(struct nfs_compound *, struct xdr_dec *,
			struct xdr_enc *);
uint32_t nfs_op_verify(struct nfs_compound *, struct xdr_dec *,
		       struct xdr_enc *);
uint32_t nfs_op_nverify(struct nfs_compound *, struct xdr_dec *,
			struct xdr_enc *);

/* ops_ns.c / ops_data.c */
uint32_t nfs_errno(int err);
/* a component4: NFS4ERR_INVAL / BADNAME / NAMETOOLONG / BADXDR */
uint32_t nfs_get_name(struct xdr_dec *a, char *name);
uint32_t nfs_need_fh(struct nfs_compound *c);
/* the current fh's attributes, and its type checked */
uint32_t nfs_cur_attr(struct nfs_compound *c, struct nfs_attr *at);
void nfs_put_change_info(struct xdr_enc *r, uint64_t before,
			 uint64_t after);

#define NFS_OPS_NS(X)                                                       \
	X(putrootfh) X(putpubfh) X(putfh) X(getfh) X(savefh) X(restorefh)  \
	X(lookup) X(lookupp) X(readdir) X(access) X(create) X(remove)      \
	X(rename) X(link) X(readlink) X(secinfo) X(secinfo_no_name)
#define NFS_OPS_DATA(X)                                                     \
	X(read) X(write) X(commit) X(allocate) X(deallocate) X(seek)        \
	X(read_plus) X(write_same)
/*
 * ops_xattr.c, for backends: keep the user.* names of a NUL-separated
 * list of @n bytes in @buf, without their prefix; returns the new length.
 */
size_t nfs_xattr_user_names(char *buf, size_t n);

#define NFS_OPS_XATTR(X)                                                    \
	X(getxattr) X(setxattr) X(listxattrs) X(removexattr)
#define NFS_DECL(n) uint32_t nfs_op_##n(struct nfs_compound *,             \
					struct xdr_dec *, struct xdr_enc *);
NFS_OPS_NS(NFS_DECL)
NFS_OPS_DATA(NFS_DECL)
NFS_OPS_XATTR(NFS_DECL)
#undef NFS_DECL

#endif
