/* SPDX-License-Identifier: MIT */
/*
 * The `nfs` export type: NFS v4.0/4.1/4.2 serving one tree, a host
 * directory (`path = DIR`, backend_dir.c) or the ext4 filesystem on a
 * blkstack device (`device = NAME`, backend_ext4.c), on its own listener.
 *
 *   [export share]
 *   type = nfs
 *   path = /srv/share          or: device = vol0
 *   listen = 127.0.0.1:2049    (default)
 *   lease = 90                 seconds a client's state lives unrenewed
 *   grace = 90                 seconds after start when only reclaims
 *                              are served (default: the lease)
 *   delegations = 1            hand out read/write delegations (0: never)
 *   inline = 1                 try COMPOUNDs on the connection's I/O
 *                              thread first (0: always on a worker)
 *   setuid = 0                 modes set by clients lose their setuid
 *                              and setgid bits (1: kept)
 *   devices = 0                clients cannot create block or character
 *                              devices (1: they can)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>
#include <blkstack/workers.h>

#include "core/random.h"
#include "export/nfs/nfs.h"

extern const struct bs_export_type nfs_export_type;

struct nfs_opts {
	const char *path, *listen;
	uint32_t lease, grace, delegations, inline_io, setuid, devices;
	bool grace_set;
	struct bs_net_limits lim;
};

/* @key as a number in [@min, @max] (*@out keeps its default when absent);
 * out of range: "FILE:LINE: export NAME: KEY: give @hint" */
static int get_u32_in(const char *name, struct bs_opts *opts,
		      const char *key, uint32_t min, uint32_t max,
		      const char *hint, uint32_t *out)
{
	int err = bs_opts_get_u32(opts, key, out);
	const char *w = bs_opts_where(opts, key);

	if (err < 0)
		return err;
	if (*out < min || *out > max)
		return bs_error(-EINVAL, "%s%sexport %s: %s: give %s", w,
				bs_sep(w), name, key, hint);
	return 0;
}

static int read_opts(const char *name, struct bs_opts *opts,
		     struct nfs_opts *o, bool has_device)
{
	struct bs_net_addr a;
	char why[160];
	const char *w;
	int err;

	memset(o, 0, sizeof(*o));
	o->path = bs_opts_get(opts, "path");
	o->listen = bs_opts_get(opts, "listen");
	if (!o->listen)
		o->listen = NFS_DEFAULT_LISTEN;
	o->lease = NFS_DEFAULT_LEASE;
	if ((err = get_u32_in(name, opts, "lease", 1, 3600,
			      "1 to 3600 seconds", &o->lease)))
		return err;
	o->grace = o->lease;
	if ((err = get_u32_in(name, opts, "grace", 0, 3600,
			      "0 to 3600 seconds", &o->grace)))
		return err;
	o->delegations = 1;
	if ((err = get_u32_in(name, opts, "delegations", 0, 1, "0 or 1",
			      &o->delegations)))
		return err;
	o->inline_io = 1;
	if ((err = get_u32_in(name, opts, "inline", 0, 1, "0 or 1",
			      &o->inline_io)))
		return err;
	/*
	 * AUTH_SYS proves nothing and the server writes as root: a client
	 * must not leave a setuid-root program or a device node in the
	 * exported tree for the host's users (nosuid, nodev by default)
	 */
	if ((err = get_u32_in(name, opts, "setuid", 0, 1, "0 or 1",
			      &o->setuid)) ||
	    (err = get_u32_in(name, opts, "devices", 0, 1, "0 or 1",
			      &o->devices)))
		return err;
	/* no handshake in NFS: the first bytes may be a COMPOUND */
	bs_net_limits_default(&o->lim);
	o->lim.handshake_ms = 0;
	if ((err = bs_net_read_limits(name, opts, BS_NET_KEYS_ALL &
				      ~(BS_NET_KEY_HANDSHAKE | BS_NET_KEY_IDLE),
				      &o->lim)))
		return err;
	w = bs_opts_where(opts, "listen");
	if (bs_net_parse_addr(o->listen, &a, why, sizeof(why)))
		return bs_error(-EINVAL, "%s%sexport %s: listen '%s': %s", w,
				bs_sep(w), name, o->listen, why);
	if (o->path && has_device)
		return bs_error(-EINVAL, "export %s: give either path = DIR "
				"or a device, not both", name);
	if (!o->path && !has_device)
		return bs_error(-EINVAL, "export %s: give path = DIR (a host "
				"directory) or device = DEV (an ext4 "
				"filesystem)", name);
	if (o->path && o->path[0] != '/')
		return bs_error(-EINVAL, "export %s: path '%s': give an "
				"absolute path", name, o->path);
	return 0;
}

static int nfs_check(const char *name, struct bs_opts *opts)
{
	struct nfs_opts o;
	const char *dev = bs_opts_get(opts, "device");

	return read_opts(name, opts, &o, dev != NULL);
}

void nfs_server_get(struct nfs_server *srv)
{
	__atomic_add_fetch(&srv->refs, 1, __ATOMIC_ACQ_REL);
}

void nfs_server_put(struct nfs_server *srv)
{
	struct nfs_client *clp;

	if (__atomic_sub_fetch(&srv->refs, 1, __ATOMIC_ACQ_REL))
		return;
	while ((clp = srv->clients))
		nfs_client_free(srv, clp);
	nfs_tables_free(srv);
	if (srv->be.ops)
		srv->be.ops->close(&srv->be);
	nfs_cb_fini(srv);
	pthread_mutex_destroy(&srv->lock);
	free(srv);
}

static void set_log(void *arg, const char *msg)
{
	bs_exports_log(arg, "%s", msg);
}

/* FNV-1a of the export's name: its handles' export id */
static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h;
}

static void trim_tick(void *arg);

/* the next trim in NFS_TRIM_TICK_MS, on the main loop (0: none) */
static void trim_arm(struct nfs_server *srv)
{
	srv->trim_timer = bs_loop_add_timer(bs_ctx_loop(srv->ctx),
					    NFS_TRIM_TICK_MS, trim_tick, srv);
	if (srv->trim_timer < 0)
		srv->trim_timer = 0;
}

/* on the main loop: the backend closes what it kept open for nothing */
static void trim_tick(void *arg)
{
	struct nfs_server *srv = arg;

	srv->be.ops->trim(&srv->be, NFS_FD_IDLE_MS);
	trim_arm(srv);
}

static void nfs_close(struct bs_export *exp)
{
	struct nfs_server *srv = exp->priv;

	if (!srv)
		return;
	exp->priv = NULL;
	if (srv->trim_timer)
		bs_loop_cancel_timer(bs_ctx_loop(srv->ctx), srv->trim_timer);
	srv->trim_timer = 0;
	bs_exports_log(exp->set, "nfs: export %s: %llu calls answered on the "
		       "I/O threads, %llu on workers", exp->name,
		       (unsigned long long)__atomic_load_n(&srv->calls_inline,
							   __ATOMIC_RELAXED),
		       (unsigned long long)__atomic_load_n(&srv->calls_worker,
							   __ATOMIC_RELAXED));
	if (srv->nl) {
		bs_net_listener_stop(srv->nl);
		bs_net_listener_close_conns(srv->nl, NULL, NULL,
					    "export closed");
		bs_net_listener_free(srv->nl);
	}
	nfs_server_put(srv);
}

static int nfs_open(struct bs_export *exp, struct bs_opts *opts)
{
	struct nfs_server *srv;
	struct nfs_opts o;
	struct bs_net_listen_cfg cfg;
	int err;

	err = read_opts(exp->name, opts, &o, exp->nunits > 0);
	if (err)
		return err;
	if (exp->nunits > 1)
		return bs_error(-EINVAL, "export %s: an nfs export serves one "
				"device", exp->name);
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	pthread_mutex_init(&srv->lock, NULL);
	nfs_cb_init(srv);
	srv->refs = 1;
	srv->exp = exp;
	srv->ctx = exp->ctx;
	srv->lease = o.lease;
	srv->grace = o.grace;
	srv->delegations = o.delegations;
	srv->setuid_ok = o.setuid;
	srv->devices_ok = o.devices;
	srv->boot = nfs_now();
	srv->export_id = name_hash(exp->name);
	if (bs_random_bytes(srv->boot_verf, sizeof(srv->boot_verf)) ||
	    bs_random_bytes(&srv->boot_tag, sizeof(srv->boot_tag))) {
		free(srv);
		return bs_error(-EIO, "export %s: getrandom failed",
				exp->name);
	}
	srv->be.ctx = srv->ctx;
	if (o.path)
		err = nfs_backend_dir_open(&srv->be, o.path);
	else
		err = nfs_backend_ext4_open(&srv->be, &exp->units[0]);
	if (err) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", bs_last_error());
		nfs_server_put(srv);
		return bs_error(err, "export %s: %s", exp->name, msg);
	}
	/* the worker pool is made here, on the main loop: made lazily by
	 * the first calls, two I/O threads could make it at once */
	if (!bs_ctx_workers(exp->ctx)) {
		nfs_server_put(srv);
		return bs_error(-ENOMEM, "export %s: no worker threads",
				exp->name);
	}
	/* a backend that cannot try without waiting always hands off */
	srv->inline_io = o.inline_io && srv->be.ops->read_nowait;
	exp->priv = srv;
	memset(&cfg, 0, sizeof(cfg));
	cfg.addr = o.listen;
	cfg.limits = o.lim;
	cfg.proto = &nfs_net_proto;
	cfg.owner = srv;
	cfg.log = set_log;
	cfg.log_arg = exp->set;
	cfg.ctx = exp->ctx;
	bs_error_clear();
	err = bs_net_listen(bs_ctx_loop(exp->ctx), &cfg, &srv->nl);
	if (err) {
		char msg[512];

		snprintf(msg, sizeof(msg), "%s", *bs_last_error() ?
			 bs_last_error() : strerror(-err));
		nfs_close(exp);
		return bs_error(err, "export %s: %s", exp->name, msg);
	}
	snprintf(srv->listen, sizeof(srv->listen), "%s", o.listen);
	if (srv->be.ops->trim)
		trim_arm(srv);
	bs_exports_log(exp->set, "nfs: export %s (%s %s) listening on %s, "
		       "lease %u s, grace %u s%s", exp->name,
		       o.path ? "directory" : "device",
		       o.path ? o.path : exp->units[0].dev->name, o.listen,
		       srv->lease, srv->grace,
		       srv->inline_io ? ", inline" : "");
	return 0;
}

static void nfs_shutdown(struct bs_export *exp)
{
	struct nfs_server *srv = exp->priv;

	if (srv && srv->nl && !srv->shutdown) {
		srv->shutdown = true;
		bs_net_listener_drain(srv->nl);
	}
}

static unsigned nfs_clients(struct bs_export *exp)
{
	struct nfs_server *srv = exp->priv;

	return srv && srv->nl ? bs_net_listener_conns(srv->nl) : 0;
}

static void nfs_describe(struct bs_export *exp, bs_kv_fn kv, void *arg)
{
	struct nfs_server *srv = exp->priv;

	if (!srv)
		return;
	kv(arg, "listen", "%s", srv->listen);
	kv(arg, "backend", "%s", srv->be.ops->name);
	kv(arg, "lease", "%u", srv->lease);
	kv(arg, "grace", "%u", srv->grace);
	kv(arg, "delegations", "%u", srv->delegations ? 1 : 0);
	kv(arg, "setuid", "%u", srv->setuid_ok ? 1 : 0);
	kv(arg, "devices", "%u", srv->devices_ok ? 1 : 0);
	kv(arg, "clients", "%u", nfs_clients(exp));
	kv(arg, "inline", "%u", srv->inline_io ? 1 : 0);
	kv(arg, "calls_inline", "%llu", (unsigned long long)
	   __atomic_load_n(&srv->calls_inline, __ATOMIC_RELAXED));
	kv(arg, "calls_worker", "%llu", (unsigned long long)
	   __atomic_load_n(&srv->calls_worker, __ATOMIC_RELAXED));
}

const struct bs_export_type nfs_export_type = {
	.name = "nfs",
	.summary = "NFS v4.0/4.1/4.2 server of a host directory or an ext4 "
		   "filesystem on a device",
	.options =
		"path=DIR             serve this host directory (or device =)\n"
		"listen=HOST:PORT     TCP address (default 127.0.0.1:2049)\n"
		"lease=SECONDS        client lease (default 90)\n"
		"grace=SECONDS        grace period after start (default: the "
		"lease)\n"
		"delegations=0|1      hand out file delegations (default 1)\n"
		"inline=0|1           run COMPOUNDs that cannot block on the "
		"I/O thread (default 1)\n"
		"setuid=0|1           keep the setuid/setgid bits of modes "
		"clients set (default 0: cleared)\n"
		"devices=0|1          let clients create block and character "
		"devices (default 0: NFS4ERR_PERM)\n"
		"max_connections=N    per listener (default 512)\n"
		"max_connections_per_peer=N  per client address (default 64)\n"
		"send_buffer=SIZE     TCP send buffer of each connection "
		"(SO_SNDBUF, 4K..64M; default 512K; 0 = the kernel's autotuning)\n",
	.device_optional = true,
	.check = nfs_check,
	.open = nfs_open,
	.shutdown = nfs_shutdown,
	.clients = nfs_clients,
	.close = nfs_close,
	.describe = nfs_describe,
};
BS_EXPORT_TYPE(nfs_export_type);
