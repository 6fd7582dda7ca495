/* SPDX-License-Identifier: MIT */
/*
 * The `nvmf` export type: an export is one NVM subsystem served over
 * NVMe/TCP, its units the namespaces (NSID 1.. in config order). Its
 * listeners are the subsystem's ports (each with an ANA state, ana.c,
 * set at run time by `blkstack ana-state` through set_port_state); each
 * serves the discovery subsystem too.
 *
 *   [export s0]
 *   type = nvmf
 *   device = vol0                 NSID 1; or unit.NAME = DEV lines
 *   listen = 127.0.0.1:4420       HOST:PORT (default that): port 1
 *   listen.2 = 127.0.0.1:4421     more ports of the subsystem (to .4)
 *   ana = 0|1                     report ANA (default: 1 with more than
 *                                 one port, an ana_state.N or an
 *                                 ana_group.NSID line)
 *   ana_group.NSID = G            namespace NSID's ANA group (1..128,
 *                                 default 1)
 *   ana_state.N = optimized       port N's ANA state, every group's
 *                                 (optimized, non-optimized,
 *                                 inaccessible, persistent-loss, change)
 *   ana_state.N.G = STATE         group G's on port N (beats ana_state.N)
 *   anatt = 10                    ANATT: seconds a change may last
 *   nqn = nqn.2026-12.org.blkstack:s0   (default: that prefix + the name)
 *   allow_hosts = NQN,NQN         host NQNs allowed (default: any host)
 *   header_digest = 0|1           allow CRC32C header digests (default 1)
 *   data_digest = 0|1             allow CRC32C data digests (default 1)
 *   io_queues = 4                 I/O queues per controller (1..64)
 *   queue_depth = 128             entries per queue (2..1024)
 *   in_capsule = 1M               write data a host may send with its
 *                                 command (IOCCSZ; 0..1M, a multiple
 *                                 of 16; larger writes wait for an R2T)
 *   kato_max = 0                  longest keep alive timeout a host may
 *                                 set (seconds; 0 = any)
 *   max_connections = 512         per listener
 *   handshake_timeout = 10        seconds for ICReq + Connect
 *
 * Namespace identifiers (NGUID, EUI-64, UUID) are derived from the
 * subsystem NQN and the unit name, so they stay the same across restarts
 * and differ between namespaces.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "export/nvmf/nvmf.h"

#define TICK_MS 1000

extern const struct bs_export_type nvmf_export_type;

struct nvmf_opts {
	char listen[NVMF_MAX_PORTS][128];
	unsigned nports;
	bool ana;
	uint8_t anatt;
	/* [port][ANAGRPID]; [port][0] is ana_state.N (every group) */
	uint8_t ana_state[NVMF_MAX_PORTS][NVMF_ANA_MAX_GROUPS + 1];
	/* ana_group.NSID: [NSID], 0 = the default group */
	uint8_t ana_group[BS_EXPORT_MAX_UNITS + 1];
	uint32_t ana_group_nsid_max;	/* the highest NSID named */
	/* the groups an ana_state.N.G line names: checked at open */
	bool grp_named[NVMF_ANA_MAX_GROUPS + 1];
	char nqn[BS_NVME_NQN_SIZE];
	char *allow_words;
	char *allow[NVMF_MAX_ALLOW];
	unsigned nallow;
	bool hdgst, ddgst;
	uint32_t ioq, qdepth, incapsule;
	unsigned kato_max_ms;
	struct bs_net_limits lim;
};

static bool good_nqn(const char *s)
{
	size_t l = strlen(s);

	return l >= 9 && l < BS_NVME_NQN_SIZE && !strncmp(s, "nqn.", 4) &&
	       !strchr(s, ' ');
}

static int get_count(const char *name, struct bs_opts *opts, const char *key,
		     uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint32_t v;
	int err = bs_opts_get_u32(opts, key, &v);
	const char *w = bs_opts_where(opts, key);

	if (err < 0)
		return err;
	if (err == 1)
		return 0;	/* absent: the default */
	if (v < lo || v > hi)
		return bs_error(-EINVAL, "%s%sexport %s: %s %u: give %u to %u",
				w, bs_sep(w), name, key, v, lo, hi);
	*out = v;
	return 0;
}

/* A decimal number 1..@max (no sign, no suffix) */
static int parse_id(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	/* no leading zero: "ana_state.01" is not port 1's key */
	if (*s < '1' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || !v || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

/* ana_state.N (@grp 0) or ana_state.N.G = @v for port @port */
static int ana_port_state(const char *name, struct nvmf_opts *o,
			  const char *key, const char *w, unsigned port,
			  const char *v, unsigned grp)
{
	if (port > o->nports)
		return bs_error(-EINVAL, "%s%sexport %s: %s: no port %u (%u "
				"listener%s)", w, bs_sep(w), name, key, port,
				o->nports, o->nports == 1 ? "" : "s");
	o->ana_state[port - 1][grp] = nvmf_ana_parse(v);
	if (!o->ana_state[port - 1][grp])
		return bs_error(-EINVAL, "%s%sexport %s: %s '%s': give "
				"optimized, non-optimized, inaccessible, "
				"persistent-loss or change", w, bs_sep(w), name,
				key, v);
	return 0;
}

/*
 * ana_group.NSID = G and ana_state.N.G = STATE (after ana_state.N, which
 * they refine). Whether NSID is a namespace and G a group in use is
 * known at open only (nvmf_open).
 */
static int ana_groups(const char *name, struct bs_opts *opts,
		      struct nvmf_opts *o, bool *any)
{
	const char *k, *v, *w;
	unsigned long nsid, port, grp;
	char num[16];
	unsigned i;
	int err;

	for (i = 0; bs_opts_at(opts, i, &k, &v); i++) {
		if (!strncmp(k, "ana_group.", 10)) {
			w = bs_opts_where(opts, k);
			if (parse_id(k + 10, BS_EXPORT_MAX_UNITS, &nsid))
				return bs_error(-EINVAL, "%s%sexport %s: %s: "
						"give ana_group.NSID, NSID 1 "
						"to %d", w, bs_sep(w), name, k,
						BS_EXPORT_MAX_UNITS);
			if (!v || parse_id(v, NVMF_ANA_MAX_GROUPS, &grp))
				return bs_error(-EINVAL, "%s%sexport %s: %s "
						"'%s': give a group ID, 1 to "
						"%d", w, bs_sep(w), name, k,
						v ? v : "", NVMF_ANA_MAX_GROUPS);
			bs_opts_get(opts, k);
			o->ana_group[nsid] = (uint8_t)grp;
			if (nsid > o->ana_group_nsid_max)
				o->ana_group_nsid_max = (uint32_t)nsid;
			*any = true;
			continue;
		}
		if (strncmp(k, "ana_state.", 10))
			continue;
		w = bs_opts_where(opts, k);
		if (!strchr(k + 10, '.')) {
			/* ana_state.N: read_ports() took ports 1..4 */
			if (parse_id(k + 10, NVMF_MAX_PORTS, &port))
				return bs_error(-EINVAL, "%s%sexport %s: %s: "
						"give ana_state.PORT, PORT 1 "
						"to %d", w, bs_sep(w), name, k,
						NVMF_MAX_PORTS);
			continue;
		}
		snprintf(num, sizeof(num), "%.*s",
			 (int)(strchr(k + 10, '.') - (k + 10)), k + 10);
		if (parse_id(num, NVMF_MAX_PORTS, &port) ||
		    parse_id(strchr(k + 10, '.') + 1, NVMF_ANA_MAX_GROUPS,
			     &grp))
			return bs_error(-EINVAL, "%s%sexport %s: %s: give "
					"ana_state.PORT.GROUP, PORT 1 to %d, "
					"GROUP 1 to %d", w, bs_sep(w), name, k,
					NVMF_MAX_PORTS, NVMF_ANA_MAX_GROUPS);
		bs_opts_get(opts, k);
		err = ana_port_state(name, o, k, w, (unsigned)port, v ? v : "",
				     (unsigned)grp);
		if (err)
			return err;
		o->grp_named[grp] = true;
		*any = true;
	}
	return 0;
}

/*
 * listen.2 .. listen.N (after `listen`, port 1), then `ana` and the
 * ports' ana_state.N. Ports are numbered by their keys, without gaps.
 */
static int read_ports(const char *name, struct bs_opts *opts,
		      struct nvmf_opts *o)
{
	char key[32], why[200];
	const char *v, *w;
	struct bs_net_addr a;
	bool any_state = false;
	unsigned long n;
	unsigned i, j;
	int err;

	o->nports = 1;
	for (i = 2; i <= NVMF_MAX_PORTS; i++) {
		snprintf(key, sizeof(key), "listen.%u", i);
		v = bs_opts_get(opts, key);
		if (!v)
			continue;
		w = bs_opts_where(opts, key);
		if (o->nports + 1 != i)
			return bs_error(-EINVAL, "%s%sexport %s: %s without "
					"listen.%u", w, bs_sep(w), name, key,
					i - 1);
		if (bs_net_parse_addr(v, &a, why, sizeof(why)))
			return bs_error(-EINVAL, "%s%sexport %s: %s '%s': %s",
					w, bs_sep(w), name, key, v, why);
		for (j = 0; j < o->nports; j++)
			if (!strcmp(o->listen[j], v))
				return bs_error(-EINVAL, "%s%sexport %s: %s "
						"'%s': port %u has it", w,
						bs_sep(w), name, key, v, j + 1);
		snprintf(o->listen[o->nports++], sizeof(o->listen[0]), "%s",
			 v);
	}
	for (i = 1; i <= NVMF_MAX_PORTS; i++) {
		snprintf(key, sizeof(key), "ana_state.%u", i);
		v = bs_opts_get(opts, key);
		if (i <= o->nports)
			memset(o->ana_state[i - 1], BS_NVME_ANA_OPTIMIZED,
			       sizeof(o->ana_state[0]));
		if (!v)
			continue;
		w = bs_opts_where(opts, key);
		err = ana_port_state(name, o, key, w, i, v, 0);
		if (err)
			return err;
		memset(o->ana_state[i - 1], o->ana_state[i - 1][0],
		       sizeof(o->ana_state[0]));
		any_state = true;
	}
	err = ana_groups(name, opts, o, &any_state);
	if (err)
		return err;
	/* on with several ports or a state or group given, unless
	 * `ana = 0` */
	o->ana = o->nports > 1 || any_state;
	err = bs_opts_get_bool(opts, "ana", &o->ana);
	if (err < 0)
		return err;
	if (any_state && !o->ana) {
		w = bs_opts_where(opts, "ana");
		return bs_error(-EINVAL, "%s%sexport %s: ana_state.N or "
				"ana_group.NSID with ana = 0: hosts could not "
				"learn the state", w, bs_sep(w), name);
	}
	v = bs_opts_get(opts, "anatt");
	o->anatt = NVMF_ANATT;
	if (v) {
		w = bs_opts_where(opts, "anatt");
		if (parse_id(v, 255, &n))
			return bs_error(-EINVAL, "%s%sexport %s: anatt '%s': "
					"give seconds, 1 to 255", w, bs_sep(w),
					name, v);
		o->anatt = (uint8_t)n;
	}
	return 0;
}

static int read_opts(const char *name, struct bs_opts *opts,
		     struct nvmf_opts *o)
{
	const char *listen = bs_opts_get(opts, "listen");
	const char *nqn = bs_opts_get(opts, "nqn");
	const char *allow = bs_opts_get(opts, "allow_hosts");
	const char *w;
	struct bs_net_addr a;
	char why[200];
	int err;

	memset(o, 0, sizeof(*o));
	bs_net_limits_default(&o->lim);
	o->hdgst = o->ddgst = true;
	o->ioq = 4;
	o->qdepth = 128;
	o->incapsule = NVMF_INCAPSULE_MAX;
	snprintf(o->listen[0], sizeof(o->listen[0]), "%s",
		 listen ? listen : NVMF_DEFAULT_LISTEN);
	w = bs_opts_where(opts, "listen");
	if (bs_net_parse_addr(o->listen[0], &a, why, sizeof(why)))
		return bs_error(-EINVAL, "%s%sexport %s: listen '%s': %s", w,
				bs_sep(w), name, o->listen[0], why);
	err = read_ports(name, opts, o);
	if (err)
		return err;
	if (nqn) {
		w = bs_opts_where(opts, "nqn");
		if (!good_nqn(nqn))
			return bs_error(-EINVAL, "%s%sexport %s: nqn '%s': "
					"give an NQN (nqn.YYYY-MM.domain:name, "
					"no spaces, under 256 bytes)", w,
					bs_sep(w), name, nqn);
		if (!strcmp(nqn, BS_NVME_DISC_SUBSYS_NAME))
			return bs_error(-EINVAL, "%s%sexport %s: nqn: that is "
					"the discovery subsystem's name", w,
					bs_sep(w), name);
		snprintf(o->nqn, sizeof(o->nqn), "%s", nqn);
	} else {
		snprintf(o->nqn, sizeof(o->nqn), "%s%s", NVMF_NQN_PREFIX,
			 name);
	}
	if (allow) {
		char *save = NULL, *t;

		o->allow_words = strdup(allow);
		if (!o->allow_words)
			return -ENOMEM;
		w = bs_opts_where(opts, "allow_hosts");
		for (t = strtok_r(o->allow_words, " \t,", &save); t;
		     t = strtok_r(NULL, " \t,", &save)) {
			if (o->nallow == NVMF_MAX_ALLOW)
				return bs_error(-EINVAL, "%s%sexport %s: "
						"allow_hosts: at most %d",
						w, bs_sep(w), name,
						NVMF_MAX_ALLOW);
			if (!good_nqn(t))
				return bs_error(-EINVAL, "%s%sexport %s: "
						"allow_hosts '%s': not an NQN",
						w, bs_sep(w), name, t);
			o->allow[o->nallow++] = t;
		}
	}
	err = bs_opts_get_bool(opts, "header_digest", &o->hdgst);
	if (err >= 0)
		err = bs_opts_get_bool(opts, "data_digest", &o->ddgst);
	if (err < 0)
		return err;
	err = get_count(name, opts, "io_queues", 1, 64, &o->ioq);
	if (!err)
		err = get_count(name, opts, "queue_depth", 2, 1024, &o->qdepth);
	if (!err) {
		const char *v = bs_opts_get(opts, "kato_max");

		w = bs_opts_where(opts, "kato_max");
		if (v && bs_net_parse_ms(v, &o->kato_max_ms))
			err = bs_error(-EINVAL, "%s%sexport %s: kato_max '%s': "
				       "give seconds (120, 2.5, 500ms; 0 = "
				       "any)", w, bs_sep(w), name, v);
	}
	if (!err)
		/* no idle_timeout: the protocol's own keep-alive */
		err = bs_net_read_limits(name, opts,
					 BS_NET_KEYS_ALL & ~BS_NET_KEY_IDLE,
					 &o->lim);
	if (!err) {
		uint64_t sz;
		int r = bs_opts_get_size(opts, "in_capsule", &sz);

		w = bs_opts_where(opts, "in_capsule");
		if (r < 0)
			err = r;
		else if (!r && (sz > NVMF_INCAPSULE_MAX || sz % 16))
			err = bs_error(-EINVAL, "%s%sexport %s: in_capsule "
				       "'%s': give a size up to %uK, a multiple "
				       "of 16 bytes (0: all write data by R2T)",
				       w, bs_sep(w), name,
				       bs_opts_get(opts, "in_capsule"),
				       NVMF_INCAPSULE_MAX >> 10);
		else if (!r)
			o->incapsule = (uint32_t)sz;
	}
	return err;
}

static int nvmf_check(const char *name, struct bs_opts *opts)
{
	struct nvmf_opts o;
	int err = read_opts(name, opts, &o);

	free(o.allow_words);
	return err;
}

/* ---- namespaces ------------------------------------------------------------ */

static uint64_t fnv1a(uint64_t h, const char *s)
{
	if (!h)
		h = 0xcbf29ce484222325ull;
	while (*s) {
		h ^= (uint8_t)*s++;
		h *= 0x100000001b3ull;
	}
	/* a separator, so that ("ab","c") and ("a","bc") differ */
	h ^= 0xff;
	h *= 0x100000001b3ull;
	return h;
}

static void put_be64(uint8_t *p, uint64_t v)
{
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (uint8_t)v;
		v >>= 8;
	}
}

/* Stable identifiers from the subsystem NQN and the unit name. */
static void ns_ids(struct nvmf_ns *ns, const char *nqn, const char *unit)
{
	uint64_t h = fnv1a(fnv1a(0, nqn), unit);

	put_be64(ns->nguid, fnv1a(h, "nguid-hi"));
	put_be64(ns->nguid + 8, fnv1a(h, "nguid-lo"));
	/* EUI-64 with a locally administered first byte */
	put_be64(ns->eui64, (fnv1a(h, "eui64") & ~(0xffull << 56)) |
				    (0x02ull << 56));
	put_be64(ns->uuid, fnv1a(h, "uuid-hi"));
	put_be64(ns->uuid + 8, fnv1a(h, "uuid-lo"));
	/* RFC 9562 version 8 (custom), variant 10b */
	ns->uuid[6] = (uint8_t)((ns->uuid[6] & 0x0f) | 0x80);
	ns->uuid[8] = (uint8_t)((ns->uuid[8] & 0x3f) | 0x80);
}

struct nvmf_ns *nvmf_ns_find(struct nvmf_subsys *ss, uint32_t nsid)
{
	if (!nsid || nsid > ss->nns)
		return NULL;
	return &ss->ns[nsid - 1];
}

void nvmf_ns_geometry(struct nvmf_subsys *ss, const struct nvmf_ns *ns,
		      uint32_t *lbs, uint64_t *size, bool *wz_unmap)
{
	pthread_mutex_lock(&ss->lock);
	*lbs = ns->caps.logical_block_size ? ns->caps.logical_block_size
					   : 512;
	*size = ns->caps.size;
	*wz_unmap = ns->caps.write_zeroes_unmap;
	pthread_mutex_unlock(&ss->lock);
}

/* ---- the export type ------------------------------------------------------- */

static void set_log(void *arg, const char *msg)
{
	struct nvmf_subsys *ss = arg;

	bs_exports_log(ss->exp->set, "%s", msg);
}

static void tick(void *arg)
{
	struct nvmf_subsys *ss = arg;

	ss->timer = 0;
	nvmf_subsys_tick(ss);
	ss->timer = bs_loop_add_timer(ss->loop, TICK_MS, tick, ss);
	if (ss->timer < 0)
		ss->timer = 0;
}

static void subsys_free(struct nvmf_subsys *ss)
{
	unsigned i;

	nvmf_disc_remove(ss);
	if (ss->timer)
		bs_loop_cancel_timer(ss->loop, ss->timer);
	/* closes every queue and waits until they are gone */
	for (i = 0; i < ss->nports; i++)
		if (ss->ports[i].nl)
			bs_net_listener_free(ss->ports[i].nl);
	for (i = 0; i < ss->nallow; i++)
		free(ss->allow[i]);
	free(ss->ns);
	pthread_mutex_destroy(&ss->lock);
	free(ss);
}

/* What only the units tell: ana_group.NSID of a namespace that is
 * there, ana_state.N.G of a group a namespace is in. */
static int check_groups(struct bs_export *exp, struct nvmf_subsys *ss,
			const struct nvmf_opts *o)
{
	unsigned g;

	if (o->ana_group_nsid_max > ss->nns)
		return bs_error(-EINVAL, "export %s: ana_group.%u: no "
				"namespace %u (%u unit%s)", exp->name,
				o->ana_group_nsid_max, o->ana_group_nsid_max,
				ss->nns, ss->nns == 1 ? "" : "s");
	for (g = 1; g <= NVMF_ANA_MAX_GROUPS; g++)
		if (o->grp_named[g] && !nvmf_ana_group_used(ss, g))
			return bs_error(-EINVAL, "export %s: ana_state.N.%u: "
					"no namespace is in ANA group %u "
					"(ana_group.NSID = %u)", exp->name, g,
					g, g);
	return 0;
}

#define STATES_LEN 1024

/* Groups in use of @ss: how many; the lowest at *@first. */
static unsigned groups_used(const struct nvmf_subsys *ss, uint32_t *first)
{
	unsigned n = 0;
	uint32_t g;

	*first = 0;
	for (g = 1; g <= ss->ana_maxgrp; g++)
		if (nvmf_ana_group_used(ss, g)) {
			if (!n++)
				*first = g;
		}
	return n;
}

/* @port's states, read atomically: "optimized" when every group in use
 * has it, else "group 1 optimized, group 2 non-optimized". */
static void port_states(const struct nvmf_port *pt, char *buf, size_t len)
{
	const struct nvmf_subsys *ss = pt->ss;
	size_t used = 0;
	uint32_t g, first;
	uint8_t st, one;
	bool same = true;

	buf[0] = 0;
	groups_used(ss, &first);
	if (!first)
		return;
	one = __atomic_load_n(&pt->ana_state[first], __ATOMIC_RELAXED);
	for (g = first; g <= ss->ana_maxgrp; g++)
		if (nvmf_ana_group_used(ss, g) &&
		    __atomic_load_n(&pt->ana_state[g], __ATOMIC_RELAXED) != one)
			same = false;
	if (same) {
		snprintf(buf, len, "%s", nvmf_ana_name(one));
		return;
	}
	for (g = first; g <= ss->ana_maxgrp && used + 1 < len; g++) {
		if (!nvmf_ana_group_used(ss, g))
			continue;
		st = __atomic_load_n(&pt->ana_state[g], __ATOMIC_RELAXED);
		snprintf(buf + used, len - used, "%sgroup %u %s",
			 used ? ", " : "", g, nvmf_ana_name(st));
		used = strlen(buf);
	}
}

static int nvmf_open(struct bs_export *exp, struct bs_opts *opts)
{
	struct nvmf_subsys *ss;
	struct nvmf_opts o;
	unsigned i;
	int err = read_opts(exp->name, opts, &o);

	if (err) {
		free(o.allow_words);
		return err;
	}
	ss = calloc(1, sizeof(*ss));
	if (!ss) {
		free(o.allow_words);
		return -ENOMEM;
	}
	pthread_mutex_init(&ss->lock, NULL);
	ss->exp = exp;
	ss->loop = bs_ctx_loop(exp->ctx);
	snprintf(ss->nqn, sizeof(ss->nqn), "%s", o.nqn);
	ss->ana = o.ana;
	ss->anatt = o.anatt;
	for (i = 0; i < o.nports; i++) {
		struct nvmf_port *pt = &ss->ports[i];

		pt->ss = ss;
		pt->index = i + 1;
		memcpy(pt->ana_state, o.ana_state[i], sizeof(pt->ana_state));
		snprintf(pt->listen, sizeof(pt->listen), "%s", o.listen[i]);
	}
	for (i = 0; i < o.nallow; i++) {
		ss->allow[i] = strdup(o.allow[i]);
		if (!ss->allow[i]) {
			err = -ENOMEM;
			goto fail;
		}
		ss->nallow++;
	}
	free(o.allow_words);
	o.allow_words = NULL;
	ss->hdgst_ok = o.hdgst;
	ss->ddgst_ok = o.ddgst;
	ss->max_ioq = o.ioq;
	ss->qdepth = o.qdepth;
	ss->incapsule = o.incapsule;
	ss->kato_max_ms = o.kato_max_ms;
	ss->lim = o.lim;
	ss->next_cntlid = 1;
	ss->nns = exp->nunits;
	ss->ns = calloc(ss->nns, sizeof(*ss->ns));
	if (!ss->ns) {
		err = -ENOMEM;
		goto fail;
	}
	for (i = 0; i < ss->nns; i++) {
		ss->ns[i].nsid = i + 1;
		ss->ns[i].unit = &exp->units[i];
		ss->ns[i].caps = exp->units[i].caps;
		ns_ids(&ss->ns[i], ss->nqn, exp->units[i].name);
		if (!ss->ana)
			continue;
		ss->ns[i].anagrpid = o.ana_group[i + 1] ? o.ana_group[i + 1]
							 : NVMF_ANAGRPID;
		if (ss->ns[i].anagrpid > ss->ana_maxgrp)
			ss->ana_maxgrp = ss->ns[i].anagrpid;
	}
	err = check_groups(exp, ss, &o);
	if (err)
		goto fail;
	for (i = 0; i < o.nports; i++) {
		struct bs_net_listen_cfg cfg = {
			.addr = ss->ports[i].listen,
			.limits = ss->lim,
			.proto = &nvmf_net_proto,
			.owner = &ss->ports[i],
			.log = set_log,
			.log_arg = ss,
			/* connections spread over the I/O threads */
			.ctx = exp->ctx,
		};

		err = bs_net_listen(ss->loop, &cfg, &ss->ports[i].nl);
		if (err)
			goto fail;
		/* counted as they open: subsys_free() frees those */
		ss->nports = i + 1;
	}
	ss->timer = bs_loop_add_timer(ss->loop, TICK_MS, tick, ss);
	if (ss->timer < 0)
		ss->timer = 0;
	exp->priv = ss;
	nvmf_disc_add(ss);
	for (i = 0; i < ss->nports; i++) {
		char st[STATES_LEN];

		port_states(&ss->ports[i], st, sizeof(st));
		bs_exports_log(exp->set, "export %s: nvmf subsystem %s port "
			       "%u on %s%s%s, %u namespace%s", exp->name,
			       ss->nqn, i + 1,
			       bs_net_listener_addr(ss->ports[i].nl),
			       ss->ana ? ", ANA " : "", ss->ana ? st : "",
			       ss->nns, ss->nns == 1 ? "" : "s");
	}
	return 0;
fail:
	free(o.allow_words);
	subsys_free(ss);
	return err;
}

static void nvmf_shutdown(struct bs_export *exp)
{
	struct nvmf_subsys *ss = exp->priv;
	unsigned i;

	for (i = 0; ss && i < ss->nports; i++)
		bs_net_listener_drain(ss->ports[i].nl);
}

static unsigned nvmf_clients(struct bs_export *exp)
{
	struct nvmf_subsys *ss = exp->priv;
	unsigned i, n = 0;

	for (i = 0; ss && i < ss->nports; i++)
		n += bs_net_listener_conns(ss->ports[i].nl);
	return n;
}

static void nvmf_close(struct bs_export *exp)
{
	struct nvmf_subsys *ss = exp->priv;

	if (!ss)
		return;
	exp->priv = NULL;
	subsys_free(ss);
}

/* "1 (ns 1 3), 2 (ns 2)": each group in use with its NSIDs */
static void group_list(const struct nvmf_subsys *ss, char *buf, size_t len)
{
	size_t used = 0;
	uint32_t g;
	unsigned i;

	buf[0] = 0;
	for (g = 1; g <= ss->ana_maxgrp && used + 1 < len; g++) {
		if (!nvmf_ana_group_used(ss, g))
			continue;
		snprintf(buf + used, len - used, "%s%u (ns", used ? ", " : "",
			 g);
		used = strlen(buf);
		for (i = 0; i < ss->nns && used + 1 < len; i++) {
			if (ss->ns[i].anagrpid != g)
				continue;
			snprintf(buf + used, len - used, " %u", ss->ns[i].nsid);
			used = strlen(buf);
		}
		snprintf(buf + used, len - used, ")");
		used = strlen(buf);
	}
}

static void nvmf_describe(struct bs_export *exp, bs_kv_fn kv, void *arg)
{
	struct nvmf_subsys *ss = exp->priv;
	struct nvmf_ctrl *c;
	char st[NVMF_MAX_PORTS][STATES_LEN], grps[STATES_LEN];
	unsigned n = 0, i;
	char key[32], addrs[NVMF_MAX_PORTS * 130] = "";
	size_t used;

	if (!ss)
		return;
	pthread_mutex_lock(&ss->lock);
	for (c = ss->ctrls; c; c = c->next)
		n++;
	for (i = 0; i < ss->nports; i++)
		port_states(&ss->ports[i], st[i], sizeof(st[i]));
	pthread_mutex_unlock(&ss->lock);
	kv(arg, "nqn", "%s", ss->nqn);
	/* every port, comma-separated, in port order */
	for (i = 0, used = 0; i < ss->nports && used < sizeof(addrs) - 1;
	     i++) {
		snprintf(addrs + used, sizeof(addrs) - used, "%s%s",
			 i ? "," : "", bs_net_listener_addr(ss->ports[i].nl));
		used = strlen(addrs);
	}
	kv(arg, "listen", "%s", addrs);
	if (ss->ana) {
		group_list(ss, grps, sizeof(grps));
		kv(arg, "ana", "on (ANATT %u s; groups %s)", ss->anatt, grps);
	} else {
		kv(arg, "ana", "off");
	}
	for (i = 0; ss->ana && i < ss->nports; i++) {
		snprintf(key, sizeof(key), "ana_state.%u", i + 1);
		kv(arg, key, "%s", st[i]);
	}
	kv(arg, "namespaces", "%u", ss->nns);
	kv(arg, "controllers", "%u", n);
	kv(arg, "clients", "%u", nvmf_clients(exp));
}

/*
 * What a host sees in Identify Namespace changed: raise a Namespace
 * Attribute Changed event with the changed-namespace log on every
 * controller (beyond Linux's nvmet, which fixes DLFEAT at enable).
 */
static void nvmf_caps_changed(struct bs_export *exp, struct bs_export_unit *u,
			      const struct bs_caps *now)
{
	struct nvmf_subsys *ss = exp->priv;
	const struct bs_caps *old = &u->caps;

	if (!ss || u->index >= ss->nns)
		return;
	if (old->size == now->size &&
	    old->write_zeroes_unmap == now->write_zeroes_unmap &&
	    old->discard == now->discard &&
	    old->write_cache == now->write_cache &&
	    old->readonly == now->readonly &&
	    old->logical_block_size == now->logical_block_size &&
	    old->zeroing == now->zeroing &&
	    old->discard_granularity == now->discard_granularity) {
		pthread_mutex_lock(&ss->lock);
		ss->ns[u->index].caps = *now;
		pthread_mutex_unlock(&ss->lock);
		return;
	}
	/* Identify reads the new capabilities before the notice goes */
	pthread_mutex_lock(&ss->lock);
	ss->ns[u->index].caps = *now;
	nvmf_aen_ns_changed(ss, ss->ns[u->index].nsid);
	pthread_mutex_unlock(&ss->lock);
}

/*
 * `blkstack ana-state EXPORT [PORT STATE [GROUP]]`: PORT is the port's
 * number (1 = `listen`, N = `listen.N`) or its address as configured or
 * bound; GROUP an ANA group ID in use (without: every group).
 */
static int nvmf_set_port_state(struct bs_export *exp, const char *port,
			       const char *state, const char *group,
			       bs_kv_fn kv, void *arg)
{
	struct nvmf_subsys *ss = exp->priv;
	struct nvmf_port *pt = NULL;
	char st[NVMF_MAX_PORTS][NVMF_ANA_MAX_GROUPS + 1];
	char was[STATES_LEN], now[STATES_LEN], key[32];
	unsigned long grp = 0;
	uint32_t g, first;
	unsigned i, ngrps;

	if (!ss)
		return bs_error(-ENODEV, "export %s: not open", exp->name);
	if (!ss->ana)
		return bs_error(-EOPNOTSUPP, "export %s: ANA is not reported "
				"(one listener and no ana_state.N, or ana = "
				"0)", exp->name);
	ngrps = groups_used(ss, &first);
	if (port) {
		uint8_t v = nvmf_ana_parse(state);

		for (i = 0; i < ss->nports && !pt; i++) {
			const char *bound = bs_net_listener_addr(
				ss->ports[i].nl);

			snprintf(key, sizeof(key), "%u", i + 1);
			if (!strcmp(port, key) ||
			    !strcmp(port, ss->ports[i].listen) ||
			    !strcmp(port, bound))
				pt = &ss->ports[i];
		}
		if (!pt)
			return bs_error(-EINVAL, "export %s: no port '%s' (1..%u "
					"or an address)", exp->name, port,
					ss->nports);
		if (!v)
			return bs_error(-EINVAL, "export %s: '%s': not an ANA "
					"state (optimized, non-optimized, "
					"inaccessible, persistent-loss, "
					"change)", exp->name, state);
		if (group && (parse_id(group, NVMF_ANA_MAX_GROUPS, &grp) ||
			      !nvmf_ana_group_used(ss, (uint32_t)grp)))
			return bs_error(-EINVAL, "export %s: no ANA group '%s' "
					"(a namespace's ana_group)", exp->name,
					group);
		pthread_mutex_lock(&ss->lock);
		port_states(pt, was, sizeof(was));
		if (nvmf_ana_set(pt, (uint32_t)grp, v))
			port_states(pt, now, sizeof(now));
		else
			now[0] = 0;
		pthread_mutex_unlock(&ss->lock);
		if (now[0])
			bs_exports_log(exp->set, "export %s: port %u (%s): ANA "
				       "%s -> %s", exp->name, pt->index,
				       bs_net_listener_addr(pt->nl), was, now);
	}
	pthread_mutex_lock(&ss->lock);
	for (i = 0; i < ss->nports; i++)
		for (g = 1; g <= ss->ana_maxgrp; g++)
			st[i][g] = (char)ss->ports[i].ana_state[g];
	pthread_mutex_unlock(&ss->lock);
	/* one line a port, or with several groups one a port and group */
	for (i = 0; i < ss->nports; i++) {
		for (g = first; g && g <= ss->ana_maxgrp; g++) {
			if (!nvmf_ana_group_used(ss, g))
				continue;
			if (ngrps == 1)
				snprintf(key, sizeof(key), "port.%u", i + 1);
			else
				snprintf(key, sizeof(key), "port.%u.%u", i + 1,
					 g);
			kv(arg, key, "%s %s",
			   bs_net_listener_addr(ss->ports[i].nl),
			   nvmf_ana_name((uint8_t)st[i][g]));
		}
	}
	return 0;
}

const struct bs_export_type nvmf_export_type = {
	.name = "nvmf",
	.summary = "NVMe over TCP target: a subsystem, units are namespaces",
	.options =
		"listen=HOST:PORT  port 1's address (default 127.0.0.1:4420)\n"
		"listen.2=HOST:PORT  a second port of the subsystem\n"
		"listen.3=HOST:PORT  a third port\n"
		"listen.4=HOST:PORT  a fourth port (the most)\n"
		"ana=0|1  report ANA (default 1 with several ports, an\n"
		"  ana_state or an ana_group line)\n"
		"ana_group.N=G  namespace N's ANA group ID, 1..128 (default 1)\n"
		"ana_state.N=STATE  port N's ANA state, every group's:\n"
		"  optimized (default), non-optimized, inaccessible,\n"
		"  persistent-loss, change\n"
		"ana_state.N.G=STATE  group G's on port N (beats ana_state.N)\n"
		"anatt=SECONDS  ANA transition time hosts wait, 1..255\n"
		"  (default 10)\n"
		"nqn=NQN  subsystem NQN (default nqn.2026-12.org.blkstack:NAME)\n"
		"allow_hosts=NQN,...  host NQNs allowed (default any)\n"
		"header_digest=0|1  allow CRC32C header digests (default 1)\n"
		"data_digest=0|1  allow CRC32C data digests (default 1)\n"
		"io_queues=N  I/O queues per controller, 1..64 (default 4)\n"
		"queue_depth=N  entries per queue, 2..1024 (default 128)\n"
		"in_capsule=SIZE  write data sent with the command (IOCCSZ),\n"
		"  0..1M, a multiple of 16 (default 1M); more waits for an R2T\n"
		"kato_max=SECONDS  longest keep alive timeout (default 0: any)\n"
		"max_connections=N  per listener (default 512)\n"
		"max_connections_per_peer=N  per host address (default 64)\n"
		"handshake_timeout=SECONDS  for ICReq + Connect (default 10)\n"
		"send_buffer=SIZE  TCP send buffer of each connection\n"
		"  (SO_SNDBUF, 4K..64M; default 512K; 0 = autotuned)",
	.open = nvmf_open,
	.check = nvmf_check,
	.shutdown = nvmf_shutdown,
	.clients = nvmf_clients,
	.close = nvmf_close,
	.describe = nvmf_describe,
	.caps_changed = nvmf_caps_changed,
	.set_port_state = nvmf_set_port_state,
};
BS_EXPORT_TYPE(nvmf_export_type);
