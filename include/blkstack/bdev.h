/* SPDX-License-Identifier: MIT */
/*
 * The blkstack block device API: contexts, device types (drivers and
 * mappers), devices, and asynchronous requests.
 *
 * Conventions: functions return 0 or a negative errno; a failure that a
 * user should read also leaves a one-line reason in bs_last_error().
 * Requests complete through their callback, always from the context's loop
 * and never from inside bs_submit().
 */
#ifndef BLKSTACK_BDEV_H
#define BLKSTACK_BDEV_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <pthread.h>

#include <blkstack/caps.h>
#include <blkstack/limits.h>
#include <blkstack/loop.h>
#include <blkstack/threads.h>

struct bs_ctx;
struct bs_dev;
struct bs_opts;
struct bs_req;
struct bs_attr;
struct bs_caps_state;

#define BS_NAME_MAX 64

/* ---- errors ------------------------------------------------------------ */

/* Set the calling thread's last error message; returns @err unchanged. */
int bs_error(int err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
int bs_verror(int err, const char *fmt, va_list ap);
/* The last message, or "" when none was set since bs_error_clear(). */
const char *bs_last_error(void);
void bs_error_clear(void);

/* ---- requests ---------------------------------------------------------- */

enum bs_op {
	BS_OP_READ,
	BS_OP_WRITE,
	BS_OP_FLUSH,
	BS_OP_DISCARD,
	BS_OP_WRITE_ZEROES,
	BS_OP__COUNT
};

#define BS_REQ_FUA (1u << 0)	 /* WRITE, WRITE_ZEROES, DISCARD: durable
				  * when completed (the core flushes after
				  * where the device cannot do it natively) */
#define BS_REQ_NOUNMAP (1u << 1) /* WRITE_ZEROES: keep blocks allocated */

typedef void (*bs_req_fn)(struct bs_req *req);

/*
 * Owned by the core (lib/core/order.c): a write's place among the writes in
 * flight on one device, so that a read-modify-write of a block never
 * interleaves with another write touching that block. Zero is idle.
 */
struct bs_wt_node {
	struct bs_wt_node *prev, *next;	/* active or waiting list */
	uint64_t start, end;		/* bytes, whole logical blocks */
	bool excl;			/* RMW: every overlap waits for it */
	uint8_t state;			/* idle, waiting or active */
	void (*go)(struct bs_wt_node *n); /* admitted after waiting */
	struct bs_loop *loop;		/* where go() runs (the admitter's) */
	struct bs_work work;		/* carries go() there */
};

/* Per device: writes in flight and writes waiting, in arrival order. */
struct bs_wtrack {
	struct bs_wt_node *active;		/* in flight, unordered */
	struct bs_wt_node *wait_head, *wait_tail; /* arrival order */
	unsigned nexcl;		/* exclusive nodes active or waiting */
	uint64_t waited;	/* writes that had to wait (statistics) */
};

struct bs_req {
	/* set by the submitter */
	enum bs_op op;
	uint32_t flags;		/* BS_REQ_* */
	uint64_t offset;	/* bytes */
	uint64_t len;		/* bytes; 0 for FLUSH */
	struct iovec *iov;	/* READ/WRITE data, total == len */
	int iovcnt;
	bs_req_fn done;		/* called once, from the loop */
	void *priv;		/* submitter's */
	/* set at completion */
	int result;		/* 0 or -errno */

	/* owned by the core and the device handling the request */
	struct bs_dev *dev;
	struct bs_loop *loop;	/* where it was submitted and completes */
	struct bs_work work;
	struct iovec iov1;	/* storage for bs_req_init_buf() */
	/*
	 * The handling driver's context: req_ctx_size bytes of its type,
	 * zeroed, given by the core when the request reaches the driver and
	 * taken back when the driver completes it (bs_req_drv()).
	 */
	void *drv_ctx;
	struct bs_wt_node ord;	/* write ordering, owned by the core */
};

/* The driver's typed per-request context (NULL when req_ctx_size is 0). */
static inline void *bs_req_drv(const struct bs_req *req)
{
	return req->drv_ctx;
}

/* Fill @req for a single-buffer operation (buf may be NULL for non-data). */
void bs_req_init(struct bs_req *req, enum bs_op op, uint32_t flags,
		 uint64_t offset, uint64_t len, void *buf, bs_req_fn done,
		 void *priv);

/*
 * Submit @req to @dev. The core validates it (bounds, alignment to the
 * logical block size, op support, read-only), splits it by the device's
 * limits, emulates FUA where the device lacks it, and completes FLUSH at
 * once where the device has no write cache. An invalid request completes
 * with -EINVAL (out of range, misaligned), -EOPNOTSUPP (op not offered)
 * or -EROFS, and reaches no driver.
 */
void bs_submit(struct bs_dev *dev, struct bs_req *req);

/*
 * Submit @req at byte granularity: what front ends whose protocol allows
 * any offset and length (NBD with minimum block size 1) call. A request
 * aligned to the logical block size goes to bs_submit() unchanged (zero
 * copy). Otherwise only the bounds are checked (-EINVAL past the end or
 * empty, -EROFS, -EOPNOTSUPP as bs_submit) and:
 *   READ          partial head/tail blocks read into a bounce of one block
 *                 each and copied out; the aligned middle read in place;
 *   WRITE         partial head/tail blocks read-modify-written, the aligned
 *                 middle written from the caller's buffer; FUA holds for
 *                 every piece, so for the whole request;
 *   WRITE_ZEROES  partial blocks read-modify-written with zeroes, the
 *                 aligned middle as WRITE_ZEROES (NOUNMAP kept);
 *   DISCARD       only the whole blocks inside are discarded; partial
 *                 blocks are left as they are (discard is advisory), and
 *                 completes with 0 when no whole block is inside.
 * A read-modify-write never interleaves with another write touching the
 * same block (bs_submit() writes included): conflicting writes wait in
 * arrival order. Bounce memory is at most two blocks per request.
 */
void bs_submit_bytes(struct bs_dev *dev, struct bs_req *req);

/*
 * Called by drivers (and the core) to finish @req with @result. From any
 * thread: off the request's loop it is forwarded there.
 */
void bs_req_complete(struct bs_req *req, int result);

/* Synchronous wrapper: submit and run the loop until done. */
int bs_io_sync(struct bs_dev *dev, enum bs_op op, uint32_t flags,
	       uint64_t offset, uint64_t len, void *buf);
int bs_read_sync(struct bs_dev *dev, void *buf, uint64_t len, uint64_t off);
int bs_write_sync(struct bs_dev *dev, const void *buf, uint64_t len,
		  uint64_t off);
int bs_flush_sync(struct bs_dev *dev);

const char *bs_op_name(enum bs_op op);

/* ---- extents (allocation map, for NBD block status and `du`) --------- */

#define BS_EXT_HOLE (1u << 0) /* not allocated */
#define BS_EXT_ZERO (1u << 1) /* reads as zeroes */

/* Return 0 to go on, non-zero to stop the walk. */
typedef int (*bs_extent_fn)(void *arg, uint64_t offset, uint64_t len,
			    uint32_t flags);

/*
 * Describe [offset, offset+len) as consecutive extents, in order, covering
 * the range (drivers may describe past it; the core clips). Devices that
 * cannot tell report one allocated data extent.
 */
int bs_block_status(struct bs_dev *dev, uint64_t offset, uint64_t len,
		    bs_extent_fn fn, void *arg);

/* ---- device types ------------------------------------------------------ */

/* Key/value sink for describe(): extra lines of `blkstack info`. */
typedef void (*bs_kv_fn)(void *arg, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

struct bs_dev_type {
	const char *name;	/* "mem", "file", "striped", ... */
	const char *summary;	/* one line for --help */
	const char *options;	/* option help, one "key=VALUE  text" per line */
	bool stacked;		/* takes components from "devices =" */
	/*
	 * Bytes of per-request context the type wants (bs_req_drv()): its
	 * own state for a request in flight (bytes done, a bounce buffer, a
	 * phase, a job for the worker pool). Zeroed for every request.
	 */
	size_t req_ctx_size;
	/* key of a spec's bare argument ("mem:1G" -> size); NULL = "path" */
	const char *spec_key;

	/*
	 * Set dev->size, dev->limits (driver values: hw limits and features),
	 * dev->priv; read options with bs_opts_get*(). For a stacked type the
	 * components are already in dev->components, and live. Returns 0 or
	 * -errno with bs_error() set.
	 *
	 * An open that takes time (a remote target to connect to) reads its
	 * options, starts the work and returns BS_OPEN_PENDING: the device is
	 * then `opening` (dev->state_reason may say what it waits for) and
	 * the driver calls bs_dev_open_done() on the loop when it knows size
	 * and limits, or failed. close() is called as for any open device.
	 */
	int (*open)(struct bs_dev *dev, struct bs_opts *opts);
	void (*close)(struct bs_dev *dev);

	/* Handle a validated request within the limits; complete it. */
	void (*submit)(struct bs_dev *dev, struct bs_req *req);

	/*
	 * Stacked types: recompute @lim from the components (start from
	 * bs_limits_init_stacking(), bs_limits_stack() each component, then
	 * add the mapper's own limits). Called at open and whenever a limit
	 * below changes. Optional for leaves.
	 */
	int (*stack_limits)(struct bs_dev *dev, struct bs_limits *lim);

	/* Optional: allocation map. */
	int (*block_status)(struct bs_dev *dev, uint64_t offset, uint64_t len,
			    bs_extent_fn fn, void *arg);

	/* Optional: bytes of backing storage in use, or -EOPNOTSUPP. */
	int64_t (*allocated)(struct bs_dev *dev);

	/* Optional: extra facts for `info` (path, mode, legs...). */
	void (*describe)(struct bs_dev *dev, bs_kv_fn kv, void *arg);

	/* Optional: extra attributes, terminated by a zeroed entry. */
	const struct bs_attr *attrs;
};

/* Register a type; called from the type's constructor (BS_DEV_TYPE). */
void bs_dev_type_register(const struct bs_dev_type *type);
const struct bs_dev_type *bs_dev_type_find(const char *name);
/* Iterate registered types: pass NULL first. */
const struct bs_dev_type *bs_dev_type_next(const struct bs_dev_type *prev);

/* One registration line per type. */
#define BS_DEV_TYPE(var)                                                  \
	__attribute__((constructor)) static void bs_register_##var(void) \
	{                                                                 \
		bs_dev_type_register(&(var));                             \
	}

/* ---- claims ------------------------------------------------------------ */

/*
 * Whoever uses a device for longer than one look opens it with a claim:
 * exports, the filesystem layer, mappers (on their components) and the
 * destructive commands (zeroout, fallocate, fs mkfs). A claim that
 * conflicts with one held fails with -EBUSY and one line naming the
 * holder: "vol0: in use by export nbd/vol0". The rule (docs/core.md):
 *
 *   held \ wanted   read    write   exclusive
 *   read            ok      ok      busy
 *   write           ok      ok      busy
 *   exclusive       busy    busy    busy
 *
 * Readers and writers share a device, as openers of a Linux block device
 * without O_EXCL do; an exclusive claim is the only one. A write claim on a
 * read-only device is -EROFS. Claims live on the loop thread.
 */
enum bs_claim_mode {
	BS_CLAIM_READ,		/* shared read: a read-only export, fs ro */
	BS_CLAIM_WRITE,		/* shared write: a writable export */
	BS_CLAIM_EXCL,		/* exclusive: mappers' components, mkfs, fs
				 * read-write, zeroout, fallocate */
};

struct bs_claim;

/* True when a claim @want may be taken beside a held claim @held. */
bool bs_claim_compatible(enum bs_claim_mode held, enum bs_claim_mode want);
/* "read", "write", "exclusive". */
const char *bs_claim_mode_name(enum bs_claim_mode mode);

/*
 * Claim @dev with @mode for @holder ("export nbd/vol0", "mapper
 * mirror/m0", "fs ext4 (read-write)", "command zeroout"; copied, cut at
 * 319 bytes). 0 and *@out set, or -EBUSY "DEV: in use by HOLDER" (the
 * first conflicting holder), -EROFS, -ENOMEM, with bs_error() set.
 */
int bs_dev_claim(struct bs_dev *dev, enum bs_claim_mode mode,
		 const char *holder, struct bs_claim **out);
/* Would bs_dev_claim() succeed? The same errors, nothing taken. */
int bs_dev_claim_check(const struct bs_dev *dev, enum bs_claim_mode mode);
/* Give a claim back (NULL: nothing). */
void bs_claim_release(struct bs_claim *claim);

/* The claims on @dev, oldest first: pass NULL first. */
const struct bs_claim *bs_dev_claim_next(const struct bs_dev *dev,
					 const struct bs_claim *prev);
const char *bs_claim_holder(const struct bs_claim *claim);
enum bs_claim_mode bs_claim_mode_of(const struct bs_claim *claim);

/* ---- devices ----------------------------------------------------------- */

/* A driver's open() return value: the open goes on, see bs_dev_open_done. */
#define BS_OPEN_PENDING 1

/*
 * Device states. LIVE serves requests. OPENING: its driver's open goes on
 * asynchronously, or (stacked) a component is still opening; requests get
 * -EAGAIN. FAILED: the open failed (state_reason says why); requests get
 * -ENXIO; the device stays listed until destroyed.
 */
enum bs_dev_state { BS_DEV_LIVE, BS_DEV_OPENING, BS_DEV_FAILED };

struct bs_dev_stats {
	uint64_t ops[BS_OP__COUNT];	/* requests reaching the driver */
	uint64_t bytes[BS_OP__COUNT];
	uint64_t errors;
};

/*
 * What the I/O threads read of a device: an immutable snapshot published
 * by the main loop after every change (lib/core/snap.c). Read it with
 * bs_dev_snap() / bs_dev_limits() inside one callback; never keep the
 * pointer across loop iterations.
 */
struct bs_dev_snap {
	struct bs_limits limits;
	int state;			/* enum bs_dev_state */
	bool readonly;
	uint64_t size;			/* 0 unless live */
	char state_reason[192];
	struct bs_caps caps;		/* bs_dev_caps() as of publishing */
};

struct bs_dev {
	char name[BS_NAME_MAX];
	const struct bs_dev_type *type;
	struct bs_ctx *ctx;
	uint64_t size;			/* bytes, multiple of logical block */
	/*
	 * Effective limits: the main loop's working copy (drivers set them in
	 * open, stacking and attribute stores change them). Other threads
	 * read bs_dev_limits(dev), the published snapshot.
	 */
	struct bs_limits limits;
	struct bs_dev_snap *snap;	/* published; atomic pointer */
	bool readonly;
	void *priv;			/* the type's state */

	/* stacking: components below, holders above */
	struct bs_dev **components;
	unsigned ncomponents;
	struct bs_dev **holders;
	unsigned nholders;
	/* claims held on this device (oldest first), and this stacked
	 * device's exclusive claims on its components (NULL for a component
	 * listed twice) */
	struct bs_claim *claims;
	struct bs_claim **comp_claims;

	/*
	 * Why write_zeroes_unmap is what it is, one line, set by the driver
	 * at open ("file on ext4: punch hole works") or by stacking and run
	 * time events ("write-zeroes failed with EOPNOTSUPP at run time").
	 */
	char wz_reason[192];
	/* Set once write-zeroes failed with EOPNOTSUPP: stays off. */
	bool wz_broken;

	enum bs_dev_state state;
	char state_reason[192];		/* what it waits for, why it failed */
	struct bs_opts *pending_opts;	/* stacked, waiting for components */
	bool knob_off;			/* write_zeroes_unmap = 0 at create */
	bool drv_open;			/* the driver's open succeeded: close */

	struct bs_dev_stats stats;	/* atomic counters */
	/* capability events (lib/core/caps.c): generation, subscribers */
	struct bs_caps_state *caps_state;
	/* free per-request driver contexts, one cache per loop (req.c) */
	struct {
		void *head;
		unsigned n;
	} drv_ctx_free[BS_THREADS_MAX + 1];
	struct bs_wtrack wt;		/* write ordering, under wt_lock */
	pthread_mutex_t wt_lock;
	struct bs_dev *next;		/* context list, creation order */
};

/* Create a context (registry of devices + loop). */
int bs_ctx_new(struct bs_ctx **out);
/* Close every device (holders first) and free. */
void bs_ctx_free(struct bs_ctx *ctx);
struct bs_loop *bs_ctx_loop(struct bs_ctx *ctx);

/*
 * Where a device tells of an event the user should see without asking
 * (a remote server given up on, and back): blkstackd sets its log, set
 * before the devices are made; none set, nothing is told (the CLI).
 * bs_dev_log() prefixes "DEV: " and calls it, from any thread.
 */
typedef void (*bs_ctx_log_fn)(void *arg, const char *msg);
void bs_ctx_set_log(struct bs_ctx *ctx, bs_ctx_log_fn fn, void *arg);
void bs_dev_log(struct bs_dev *dev, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Create device @name of type @type (NULL: take "type" from @opts). Core
 * options handled here for every type: "type", "devices" (stacked types:
 * space-separated names of existing devices), "readonly = 0|1",
 * "write_zeroes_unmap = 0|1" (the knob's start value). Every option must be
 * consumed by the core or the type, else -EINVAL "unknown key".
 */
int bs_dev_create(struct bs_ctx *ctx, const char *name, const char *type,
		  struct bs_opts *opts, struct bs_dev **out);
/* -EBUSY while a holder uses it or a claim is held on it. */
int bs_dev_destroy(struct bs_dev *dev);

/*
 * The driver's asynchronous open finished (on the loop): 0 with size and
 * limits set, or -errno with bs_error() set (the reason is kept). Holders
 * waiting for @dev open in turn; capability subscribers hear of it.
 */
void bs_dev_open_done(struct bs_dev *dev, int err);
const char *bs_dev_state_name(enum bs_dev_state state);
/* 0 when live; -EAGAIN (opening) or -ENXIO (failed) with bs_error(). */
int bs_dev_check_live(const struct bs_dev *dev);
/* Run the loop until @dev is not opening, at most @timeout_ms: then
 * bs_dev_check_live() (-ETIMEDOUT when still opening). For the CLI. */
int bs_dev_wait_live(struct bs_dev *dev, unsigned timeout_ms);
struct bs_dev *bs_dev_find(struct bs_ctx *ctx, const char *name);
/* Devices in creation order: pass NULL first. */
struct bs_dev *bs_dev_next(struct bs_ctx *ctx, struct bs_dev *prev);

/* The published snapshot (any loop thread; see struct bs_dev_snap). */
static inline const struct bs_dev_snap *bs_dev_snap(const struct bs_dev *dev)
{
	return __atomic_load_n(&dev->snap, __ATOMIC_ACQUIRE);
}

static inline const struct bs_limits *bs_dev_limits(const struct bs_dev *dev)
{
	const struct bs_dev_snap *s = bs_dev_snap(dev);

	/* not published yet: only the main loop knows the device */
	return s ? &s->limits : &dev->limits;
}

/* The size the data path checks against: the snapshot's (0 unless live),
 * or the working copy before the first publish. A driver may change
 * dev->size at run time (a rescan), so loop threads read this; threads
 * without a loop use bs_dev_snap_copy(). */
static inline uint64_t bs_dev_size(const struct bs_dev *dev)
{
	const struct bs_dev_snap *s = bs_dev_snap(dev);

	return s ? s->size : dev->size;
}

/* Copies of the snapshot, for threads that run no loop (locked). */
void bs_dev_snap_copy(const struct bs_dev *dev, struct bs_dev_snap *out);
void bs_dev_limits_copy(const struct bs_dev *dev, struct bs_limits *out);

static inline bool bs_dev_write_zeroes_unmap(const struct bs_dev *dev)
{
	return bs_limits_write_zeroes_unmap(bs_dev_limits(dev));
}

/*
 * Limits of @dev changed (knob, run-time failure, lost leg): restack it (if
 * stacked) and every holder above, at any depth, before returning.
 */
void bs_dev_limits_changed(struct bs_dev *dev);

/*
 * Write-zeroes failed with -EOPNOTSUPP on @dev at run time: turn
 * write-zeroes (and unmap) off for it and everything above, and remember.
 */
void bs_dev_disable_write_zeroes(struct bs_dev *dev, const char *why);

int64_t bs_dev_allocated(struct bs_dev *dev);
/* The counters as they are now (the I/O threads add to them atomically). */
void bs_dev_stats_read(const struct bs_dev *dev, struct bs_dev_stats *out);
void bs_dev_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg);
int bs_dev_set_reason(struct bs_dev *dev, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Run the context's loop until *@flag becomes true. */
int bs_ctx_wait(struct bs_ctx *ctx, const bool *flag);

/*
 * Parse a size: decimal digits, optionally one unit K M G T P E (either
 * case, powers of 1024), optionally spelled KiB..EiB: "4096", "64K", "1G",
 * "2TiB". -EINVAL when it is not one (blanks, signs, "0x10", "1KB"),
 * -ERANGE when it does not fit in 64 bits.
 */
int bs_parse_size(const char *s, uint64_t *out);
/* The reason to show for an error of bs_parse_size(), e.g. "too large ...". */
const char *bs_size_strerror(int err);
/* Format a byte count as "64 GiB" / "1.5 MiB" / "512 B". */
const char *bs_fmt_size(uint64_t bytes, char *buf, size_t len);

#endif
