/* SPDX-License-Identifier: MIT */
/*
 * Exports: front ends that serve devices to clients over a protocol (NBD,
 * later iSCSI, NVMe/TCP, ...). An export type is an ops table registered by
 * name with one line (BS_EXPORT_TYPE); an export is a target created from
 * the options of an `[export NAME]` config section, holding one or more
 * units, each a device: NBD serves each unit as an export name, iSCSI will
 * map units to LUNs, NVMe/TCP to namespaces.
 *
 *   [export vol0]              one unit, named like the export
 *   type = nbd                 the export type
 *   device = vol0              the device served
 *   readonly = 0|1             refuse writes (also when the device is RO)
 *   description = text         shown to clients that ask
 *   ...                        the type's options (nbd: listen, socket)
 *
 *   [export t]                 units named on their own lines
 *   type = nbd
 *   unit.a = vol0              unit "a" (the NBD export name) serves vol0
 *   unit.b = vol1
 *   unit.b.readonly = 1        per unit; "readonly = 1" above covers all
 *   unit.b.description = text  per unit; "description" is the default
 *
 * `device =` and `unit.NAME =` lines do not mix in one section. Units are
 * kept in the order of their lines.
 *
 * Exports live in a set (struct bs_exports) tied to one context; everything
 * runs on the context's loop. Types share per-set state (e.g. one listening
 * socket for several NBD exports) through bs_exports_type_slot().
 */
#ifndef BLKSTACK_EXPORT_H
#define BLKSTACK_EXPORT_H

#include <stdarg.h>
#include <stdbool.h>
#include <sys/types.h>

#include <blkstack/bdev.h>
#include <blkstack/caps.h>

struct bs_ctx;
struct bs_dev;
struct bs_opts;
struct bs_config;
struct bs_exports;

#define BS_EXPORT_NAME_MAX 256
/* Units of one target, at most. */
#define BS_EXPORT_MAX_UNITS 256

/* One device of a target, and how it is served. */
struct bs_export_unit {
	char name[BS_EXPORT_NAME_MAX];	/* NBD export name; the target's
					   name for a `device =` export */
	struct bs_export *exp;		/* the target holding it */
	unsigned index;			/* in exp->units, from 0 */
	struct bs_dev *dev;
	bool readonly;		/* unit, export or device read-only */
	char *description;		/* "" when none */
	/*
	 * The device's capabilities as this unit last saw them, kept up to
	 * date by a change subscription (export.c): every change is logged
	 * and handed to the type's caps_changed().
	 */
	struct bs_caps caps;
	struct bs_caps_sub *caps_sub;
	/*
	 * The unit's claim on dev (export.c): shared write, or shared read
	 * when readonly; holder "export TYPE/NAME" (the target's name) for
	 * a `device =` export, "export TYPE/TARGET/UNIT" otherwise.
	 */
	struct bs_claim *claim;
};

struct bs_export {
	char name[BS_EXPORT_NAME_MAX];	/* the target */
	const struct bs_export_type *type;
	struct bs_exports *set;
	struct bs_ctx *ctx;
	struct bs_export_unit *units;	/* config order */
	unsigned nunits;		/* at least 1, unless the type's
					   device_optional */
	void *priv;		/* the type's state */
	struct bs_export *next;
};

/*
 * "export NAME" for the one unit of a `device =` export, else "export
 * TARGET unit NAME": how logs name a unit.
 */
const char *bs_export_unit_label(const struct bs_export_unit *u, char *buf,
				 size_t len);
/* The unit of @exp called @name, or NULL. */
struct bs_export_unit *bs_export_unit_find(struct bs_export *exp,
					   const char *name);

struct bs_export_type {
	const char *name;	/* "nbd" */
	const char *summary;	/* one line */
	const char *options;	/* "key=VALUE  text" lines */
	/*
	 * The type may serve something other than a device (nfs: a host
	 * directory, `path = DIR`): with no `device =` and no unit lines
	 * the export has no units (nunits 0) instead of being refused.
	 */
	bool device_optional;

	/*
	 * Read the type's options (bs_opts_get*) and start serving. The units
	 * (devices claimed, readonly and description) are set. 0 or -errno
	 * with bs_error().
	 */
	int (*open)(struct bs_export *exp, struct bs_opts *opts);
	/*
	 * Optional: check the type's options of export @name without opening
	 * or binding anything (bs_config_check_exports, before anything is
	 * created). 0 or -errno with bs_error() naming "FILE:LINE".
	 */
	int (*check)(const char *name, struct bs_opts *opts);
	/*
	 * Stop accepting clients; let requests in flight finish, then close
	 * every client. Asynchronous: watch clients() go to 0.
	 */
	void (*shutdown)(struct bs_export *exp);
	/* Client connections still open. */
	unsigned (*clients)(struct bs_export *exp);
	/* Close everything now (clients too) and free exp->priv. */
	void (*close)(struct bs_export *exp);
	/* Optional: facts for listings ("listen", "socket", "clients"). */
	void (*describe)(struct bs_export *exp, bs_kv_fn kv, void *arg);
	/*
	 * Optional: the device of unit @u changed its capabilities (a knob,
	 * a restack below, a lost mirror leg, a run-time EOPNOTSUPP); called
	 * on the loop after the change was logged, with u->caps still the old
	 * snapshot and @now the new one. Types whose clients learn the
	 * capabilities once, at connection (NBD), need nothing here: new
	 * connections read them afresh; SCSI raises a unit attention, NVMe an
	 * asynchronous event.
	 */
	void (*caps_changed)(struct bs_export *exp, struct bs_export_unit *u,
			     const struct bs_caps *now);
	/*
	 * Optional: the states of the export's ports (nvmf: each listener's
	 * ANA state). With @port and @state (both or neither), set that
	 * port's state first: of its group @group (nvmf: an ANA group ID),
	 * or of every group when @group is NULL; then tell every port's
	 * state through @kv (key: the port, or port and group, value: its
	 * address and state). On the loop. 0 or -errno with bs_error():
	 * -EINVAL for an unknown port, group or state, -EOPNOTSUPP when the
	 * export reports no states.
	 */
	int (*set_port_state)(struct bs_export *exp, const char *port,
			      const char *state, const char *group,
			      bs_kv_fn kv, void *arg);
};

void bs_export_type_register(const struct bs_export_type *type);
const struct bs_export_type *bs_export_type_find(const char *name);
const struct bs_export_type *bs_export_type_next(const struct bs_export_type *p);

#define BS_EXPORT_TYPE(var)                                               \
	__attribute__((constructor)) static void bs_export_register_##var(void) \
	{                                                                 \
		bs_export_type_register(&(var));                          \
	}

/* Log sink of a set: one line, no trailing newline. */
typedef void (*bs_log_fn)(void *arg, const char *msg);

int bs_exports_new(struct bs_ctx *ctx, struct bs_exports **out);
/*
 * Close every export at once, then run the loop until requests that
 * clients left in flight have completed (no request outlives the set).
 */
void bs_exports_free(struct bs_exports *set);
struct bs_ctx *bs_exports_ctx(struct bs_exports *set);
void bs_exports_set_log(struct bs_exports *set, bs_log_fn fn, void *arg);
void bs_exports_log(struct bs_exports *set, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Create export @name; @type NULL takes "type" from @opts. Options used
 * here: type, device, readonly, description and unit.*; the rest go to the
 * type, and any left unread is an error "WHERE: NAME: unknown key 'k'".
 */
int bs_export_create(struct bs_exports *set, const char *name,
		     const char *type, struct bs_opts *opts,
		     struct bs_export **out);
void bs_export_destroy(struct bs_export *exp);
struct bs_export *bs_export_find(struct bs_exports *set, const char *name);
struct bs_export *bs_export_next(struct bs_exports *set,
				 struct bs_export *prev);

/*
 * Check every [export] section of @cfg without creating or binding
 * anything: a known type, no unknown key, units well formed, each device
 * a [device] of @cfg. Errors say "FILE:LINE: export NAME: ...".
 */
int bs_config_check_exports(struct bs_config *cfg);
/* Create every [export] section of @cfg; errors say "FILE:LINE: ...". */
int bs_config_create_exports(struct bs_config *cfg, struct bs_exports *set);

/*
 * Show (@port and @state NULL) or set a port's state (of group @group, or
 * every group's with @group NULL) of @exp through its type's
 * set_port_state(); -EOPNOTSUPP with bs_error() naming the type
 * when it has none.
 */
int bs_export_port_state(struct bs_export *exp, const char *port,
			 const char *state, const char *group, bs_kv_fn kv,
			 void *arg);

/* Graceful stop of every export (see bs_export_type.shutdown). */
void bs_exports_shutdown(struct bs_exports *set);
/* Clients still connected, over all exports. */
unsigned bs_exports_clients(struct bs_exports *set);

/* A per-set pointer owned by @type (shared listeners and the like). */
void **bs_exports_type_slot(struct bs_exports *set,
			    const struct bs_export_type *type);

/*
 * Work a type left running after its clients went away (requests still
 * in the device): bs_exports_free() waits until every hold is released.
 */
void bs_exports_hold(struct bs_exports *set);
void bs_exports_release(struct bs_exports *set);

/*
 * Listen on the UNIX socket @path (non-blocking, close-on-exec; chmod to
 * @mode unless 0). A stale socket file is replaced; -EADDRINUSE when a
 * server answers there, -EEXIST when @path is not a socket, else -errno.
 * The path is removed on failure only if this call created it.
 */
int bs_listen_unix(const char *path, int backlog, mode_t mode, int *out);

#endif
