/* SPDX-License-Identifier: MIT */
/*
 * The `iscsi` export type: an export is one iSCSI target (an IQN) whose
 * units are its LUNs, served by the SCSI target core. Listeners belong to
 * the network server; several targets may share one address (discovery
 * lists each, login by TargetName picks one).
 *
 *   [export t0]
 *   type = iscsi
 *   device = vol0                 LUN 0; or unit.NAME = DEV lines
 *   listen = 127.0.0.1:3260       one or more HOST:PORT (default that)
 *   iqn = iqn.2026-12.org.blkstack:t0   (default: that prefix + the name)
 *   chap_user = u                 CHAP required when set (with the secret)
 *   chap_secret = 12+ chars
 *   mutual_chap_user = t          the target's answer to mutual CHAP
 *   mutual_chap_secret = 12+ chars, not the chap_secret
 *   header_digest = None,CRC32C   digests allowed (either or both)
 *   data_digest = None,CRC32C
 *   max_sessions = 16             sessions of this target at once
 *   queue_depth = 128             commands in flight per session
 *   max_connections = 512         per listener
 *   handshake_timeout = 10        seconds for a login to finish
 *
 * LUNs: a unit whose name is a number 0..16383 is that LUN; any other
 * unit is the LUN of its place in the config (the first is 0); a
 * `device =` export is LUN 0. Two units on one LUN are refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>

#include "export/iscsi/target.h"

#define ISCSI_DEFAULT_LISTEN "127.0.0.1:3260"
#define ISCSI_IQN_PREFIX "iqn.2026-12.org.blkstack:"
#define ISCSI_MAX_SESSIONS 16
#define CHAP_SECRET_MIN 12	/* RFC 7143 12.1.3: at least 96 bits */
#define CHAP_FIELD_MAX 255

extern const struct bs_export_type iscsi_export_type;

/* Numbers the targets' connection labels. */
static unsigned target_ids;

/* ---- options ------------------------------------------------------------- */

struct iscsi_opts {
	char *words;
	char *v[BS_SHARE_MAX_LISTEN];
	int n;
	const char *listen_where;
	char iqn[ISCSI_NAME_MAX];
	const char *chap_user, *chap_secret, *mutual_user, *mutual_secret;
	unsigned hdig, ddig;
	uint32_t max_sessions, queue_depth;
	struct bs_net_limits lim;
};

static int split_words(char *s, char **v, int max)
{
	int n = 0;
	char *save = NULL, *w;

	for (w = strtok_r(s, " \t,", &save); w;
	     w = strtok_r(NULL, " \t,", &save)) {
		if (n == max)
			return -E2BIG;
		v[n++] = w;
	}
	return n;
}

static int get_digests(const char *name, struct bs_opts *opts,
		       const char *key, unsigned *out)
{
	const char *v = bs_opts_get(opts, key), *p;
	const char *w = bs_opts_where(opts, key);

	*out = ISCSI_DIGEST_NONE | ISCSI_DIGEST_CRC32C;
	if (!v)
		return 0;
	*out = 0;
	for (p = v; *p;) {
		size_t n = strcspn(p, ", \t");

		if (n == 4 && !strncasecmp(p, "None", 4))
			*out |= ISCSI_DIGEST_NONE;
		else if (n == 6 && !strncasecmp(p, "CRC32C", 6))
			*out |= ISCSI_DIGEST_CRC32C;
		else if (n)
			return bs_error(-EINVAL, "%s%sexport %s: %s '%s': give "
					"None, CRC32C or both", w, bs_sep(w),
					name, key, v);
		p += n;
		p += strspn(p, ", \t");
	}
	if (!*out)
		return bs_error(-EINVAL, "%s%sexport %s: %s: give None, "
				"CRC32C or both", w, bs_sep(w), name, key);
	return 0;
}

static int get_count(const char *name, struct bs_opts *opts, const char *key,
		     uint32_t lo, uint32_t hi, uint32_t *out)
{
	uint32_t v;
	int err = bs_opts_get_u32(opts, key, &v);

	if (err < 0)
		return err;
	if (err == 0) {
		const char *w = bs_opts_where(opts, key);

		if (v < lo || v > hi)
			return bs_error(-EINVAL, "%s%sexport %s: %s: give %u "
					"to %u", w, bs_sep(w), name, key, lo,
					hi);
		*out = v;
	}
	return 0;
}

/* An iSCSI name in the iqn. or eui. / naa. format (RFC 7143 4.2.7). */
static bool good_iqn(const char *s)
{
	const char *p;

	if (strlen(s) >= ISCSI_NAME_MAX)
		return false;
	if (strncmp(s, "iqn.", 4) && strncmp(s, "eui.", 4) &&
	    strncmp(s, "naa.", 4))
		return false;
	for (p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '-' || *p == ':'))
			return false;
	return true;
}

static int get_chap(const char *name, struct bs_opts *opts, const char *ukey,
		    const char *skey, const char **user, const char **secret)
{
	const char *wu = bs_opts_where(opts, ukey);

	*user = bs_opts_get(opts, ukey);
	*secret = bs_opts_get(opts, skey);
	if (!*user && !*secret)
		return 0;
	if (!*user || !*secret)
		return bs_error(-EINVAL, "%s%sexport %s: give both %s and %s",
				*user ? wu : bs_opts_where(opts, skey),
				bs_sep(*user ? wu : bs_opts_where(opts, skey)),
				name, ukey, skey);
	if (!**user || strlen(*user) > CHAP_FIELD_MAX ||
	    strlen(*secret) < CHAP_SECRET_MIN ||
	    strlen(*secret) > CHAP_FIELD_MAX)
		return bs_error(-EINVAL, "%s%sexport %s: %s: a user of 1-%d "
				"bytes and a secret of %d-%d bytes", wu,
				bs_sep(wu), name, ukey, CHAP_FIELD_MAX,
				CHAP_SECRET_MIN, CHAP_FIELD_MAX);
	return 0;
}

static int read_opts(const char *name, struct bs_opts *opts,
		     struct iscsi_opts *o)
{
	const char *listen = bs_opts_get(opts, "listen");
	const char *iqn = bs_opts_get(opts, "iqn");
	const char *wu, *ws;
	char why[200];
	int i, err;

	memset(o, 0, sizeof(*o));
	bs_net_limits_default(&o->lim);
	o->max_sessions = ISCSI_MAX_SESSIONS;
	o->queue_depth = ISCSI_QUEUE_DEPTH;
	o->listen_where = bs_opts_where(opts, "listen");
	o->words = strdup(listen ? listen : ISCSI_DEFAULT_LISTEN);
	if (!o->words)
		return -ENOMEM;
	o->n = split_words(o->words, o->v, BS_SHARE_MAX_LISTEN);
	if (o->n <= 0)
		return bs_error(-EINVAL, "%s%sexport %s: listen: give 1 to %d "
				"HOST:PORT addresses", o->listen_where,
				bs_sep(o->listen_where), name,
				BS_SHARE_MAX_LISTEN);
	for (i = 0; i < o->n; i++) {
		struct bs_net_addr a;

		if (bs_net_parse_addr(o->v[i], &a, why, sizeof(why)))
			return bs_error(-EINVAL, "%s%sexport %s: listen '%s': "
					"%s", o->listen_where,
					bs_sep(o->listen_where), name, o->v[i],
					why);
	}
	if (iqn) {
		const char *w = bs_opts_where(opts, "iqn");

		if (!good_iqn(iqn))
			return bs_error(-EINVAL, "%s%sexport %s: iqn '%s': "
					"give an iSCSI name (iqn.YYYY-MM."
					"domain:name; lower case, digits, "
					"'.-:')", w, bs_sep(w), name, iqn);
		snprintf(o->iqn, sizeof(o->iqn), "%s", iqn);
	} else {
		char *p;

		snprintf(o->iqn, sizeof(o->iqn), "%s%s", ISCSI_IQN_PREFIX,
			 name);
		for (p = o->iqn; *p; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
		if (!good_iqn(o->iqn))
			return bs_error(-EINVAL, "export %s: the default iqn "
					"'%s' is not an iSCSI name: give iqn =",
					name, o->iqn);
	}
	err = get_chap(name, opts, "chap_user", "chap_secret", &o->chap_user,
		       &o->chap_secret);
	if (!err)
		err = get_chap(name, opts, "mutual_chap_user",
			       "mutual_chap_secret", &o->mutual_user,
			       &o->mutual_secret);
	if (err)
		return err;
	wu = bs_opts_where(opts, "mutual_chap_user");
	ws = bs_opts_where(opts, "mutual_chap_secret");
	if (o->mutual_user && !o->chap_user)
		return bs_error(-EINVAL, "%s%sexport %s: mutual CHAP needs "
				"chap_user and chap_secret too", wu, bs_sep(wu),
				name);
	if (o->mutual_secret && !strcmp(o->mutual_secret, o->chap_secret))
		return bs_error(-EINVAL, "%s%sexport %s: mutual_chap_secret "
				"must differ from chap_secret (RFC 7143 "
				"12.1.3)", ws, bs_sep(ws), name);
	err = get_digests(name, opts, "header_digest", &o->hdig);
	if (!err)
		err = get_digests(name, opts, "data_digest", &o->ddig);
	if (!err)
		err = get_count(name, opts, "max_sessions", 1, 65535,
				&o->max_sessions);
	if (!err)
		err = get_count(name, opts, "queue_depth", 1, 4096,
				&o->queue_depth);
	if (!err)
		/* no idle_timeout: the protocol's own keep-alive */
		err = bs_net_read_limits(name, opts,
					 BS_NET_KEYS_ALL & ~BS_NET_KEY_IDLE,
					 &o->lim);
	return err;
}

static int iscsi_check(const char *name, struct bs_opts *opts)
{
	struct iscsi_opts o;
	int err = read_opts(name, opts, &o);

	free(o.words);
	return err;
}

/* ---- targets ------------------------------------------------------------- */

bool iscsi_target_active(const struct iscsi_target *t)
{
	return t && bs_share_active(&t->ref);
}

void iscsi_target_login_view(struct iscsi_target *t,
			     struct iscsi_login_target *lt)
{
	memset(lt, 0, sizeof(*lt));
	lt->name = t->iqn;
	lt->chap_user = t->chap_user;
	lt->chap_secret = t->chap_secret;
	lt->mutual_user = t->mutual_user;
	lt->mutual_secret = t->mutual_secret;
	lt->tp = &t->tp;
	lt->priv = t;
}

void iscsi_target_get(struct iscsi_target *t)
{
	__atomic_add_fetch(&t->refs, 1, __ATOMIC_ACQ_REL);
}

void iscsi_target_put(struct iscsi_target *t)
{
	unsigned i;

	if (__atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL))
		return;
	/* the export may be gone: an orphaned session drops the last ref */
	for (i = 0; t->lus && i < t->nlus; i++)
		if (t->lus[i])
			bs_scsi_lu_remove(t->lus[i]);
	if (t->scsi)
		bs_scsi_tgt_free(t->scsi);
	free(t->lus);
	free(t->chap_user);
	free(t->chap_secret);
	free(t->mutual_user);
	free(t->mutual_secret);
	free(t);
}

bool iscsi_target_label_is(const struct iscsi_target *t, const char *e)
{
	size_t n = strlen(t->label);

	return !strncmp(e, t->label, n) && (e[n] == '\0' || e[n] == ' ');
}

int iscsi_target_attach(struct iscsi_target *t,
			struct iscsi_session_target *st, unsigned replaced)
{
	unsigned n;

	if (!iscsi_target_active(t))
		return -ENOENT;
	n = __atomic_add_fetch(&t->sessions, 1, __ATOMIC_ACQ_REL);
	if (n > t->max_sessions + replaced) {
		__atomic_sub_fetch(&t->sessions, 1, __ATOMIC_ACQ_REL);
		return -EBUSY;
	}
	st->scsi = t->scsi;
	st->queue_depth = t->queue_depth;
	return 0;
}

void iscsi_target_detach(struct iscsi_target *t)
{
	__atomic_sub_fetch(&t->sessions, 1, __ATOMIC_ACQ_REL);
}

/* The LUN of unit @u: its name when that is a number, else its place. */
static uint64_t unit_lun(const struct bs_export_unit *u)
{
	const char *p = u->name;
	uint64_t v = 0;

	if (!*p || strcmp(u->name, u->exp->name) == 0)
		return u->index;
	for (; *p; p++) {
		if (*p < '0' || *p > '9' || v > 16383)
			return u->index;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	return v <= 16383 ? v : u->index;
}

uint32_t iscsi_target_block_size(struct iscsi_target *t, uint64_t lun)
{
	unsigned i;

	for (i = 0; i < t->exp->nunits; i++)
		if (unit_lun(&t->exp->units[i]) == lun)
			return bs_dev_limits(t->exp->units[i].dev)->
				logical_block_size;
	return 0;
}

static int target_luns(struct iscsi_target *t)
{
	struct bs_export *exp = t->exp;
	struct bs_scsi_tgt_cfg tc = {
		.name = t->iqn,
		.vendor = "BLKSTACK",
		.product = "iSCSI target",
		.revision = "0.1",
	};
	unsigned i;
	int err;

	err = bs_scsi_tgt_new(&tc, &t->scsi);
	if (err)
		return bs_error(err, "export %s: SCSI target: %s", exp->name,
				strerror(-err));
	t->lus = calloc(exp->nunits, sizeof(*t->lus));
	if (!t->lus)
		return -ENOMEM;
	t->nlus = exp->nunits;
	for (i = 0; i < exp->nunits; i++) {
		struct bs_export_unit *u = &exp->units[i];
		struct bs_scsi_lu_cfg lc = {
			.lun = unit_lun(u),
			.dev = u->dev,
			.readonly = u->readonly,
			.name = u->name,
		};

		err = bs_scsi_lu_add(t->scsi, &lc, &t->lus[i]);
		if (err == -EEXIST)
			return bs_error(err, "export %s: unit %s: LUN %llu is "
					"taken by another unit", exp->name,
					u->name, (unsigned long long)lc.lun);
		if (err)
			return bs_error(err, "export %s: unit %s: %s",
					exp->name, u->name, strerror(-err));
	}
	return 0;
}

/* ---- listeners (shared: lib/export/net/share.c) ------------------------- */

static int iscsi_clash(const void *member, const void *other,
		       const struct bs_share_listener *l, const char *where,
		       void *arg)
{
	const struct iscsi_target *t = member, *o = other;

	(void)arg;
	if (strcmp(t->iqn, o->iqn))
		return 0;
	return bs_error(-EEXIST, "%s%sexport %s: iqn %s is already served "
			"on %s by export %s", where, bs_sep(where),
			t->exp->name, t->iqn, bs_net_listener_addr(l->nl),
			o->exp->name);
}

static bool iscsi_has_conn(const void *member, const char *label)
{
	return iscsi_target_label_is(member, label);
}

static const struct bs_share_ops iscsi_share_ops = {
	.name = "iscsi",
	.proto = &iscsi_net_proto,
	.has_conn = iscsi_has_conn,
	.clash = iscsi_clash,
};

/* ---- the export type ----------------------------------------------------- */

static void iscsi_close(struct bs_export *exp)
{
	struct iscsi_target *t = exp->priv;

	if (!t)
		return;
	bs_share_leave(&t->ref);
	exp->priv = NULL;
	iscsi_target_put(t);
}

static char *dup_opt(const char *s, int *err)
{
	char *d;

	if (!s)
		return NULL;
	d = strdup(s);
	if (!d)
		*err = -ENOMEM;
	return d;
}

static int iscsi_open(struct bs_export *exp, struct bs_opts *opts)
{
	struct iscsi_target *t;
	struct iscsi_opts o;
	int i, err;

	err = read_opts(exp->name, opts, &o);
	if (err) {
		free(o.words);
		return err;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		free(o.words);
		return -ENOMEM;
	}
	t->exp = exp;
	t->refs = 1;
	snprintf(t->iqn, sizeof(t->iqn), "%s", o.iqn);
	snprintf(t->label, sizeof(t->label), "t%u",
		 __atomic_add_fetch(&target_ids, 1, __ATOMIC_RELAXED));
	t->chap_user = dup_opt(o.chap_user, &err);
	t->chap_secret = dup_opt(o.chap_secret, &err);
	t->mutual_user = dup_opt(o.mutual_user, &err);
	t->mutual_secret = dup_opt(o.mutual_secret, &err);
	t->tp.header_digests = o.hdig;
	t->tp.data_digests = o.ddig;
	t->tp.max_recv_dsl = ISCSI_MAX_RECV_DSL;
	t->tp.max_burst = ISCSI_MAX_TRANSFER;
	t->tp.first_burst = ISCSI_MAX_TRANSFER;
	t->tp.max_outstanding_r2t = 4;
	t->tp.immediate_data = true;
	t->tp.initial_r2t = false;
	t->queue_depth = o.queue_depth;
	t->max_sessions = o.max_sessions;
	if (!err)
		err = target_luns(t);
	if (err) {
		free(o.words);
		iscsi_target_put(t);
		return err;
	}
	exp->priv = t;
	err = bs_share_join(&t->ref, exp, &iscsi_export_type,
			    &iscsi_share_ops, t);
	if (err) {
		free(o.words);
		exp->priv = NULL;
		iscsi_target_put(t);
		return err;
	}
	for (i = 0; !err && i < o.n; i++)
		err = bs_share_listen(&t->ref, o.listen_where, o.v[i], false,
				      &o.lim, NULL);
	free(o.words);
	if (err)
		iscsi_close(exp);
	return err;
}

static void iscsi_shutdown(struct bs_export *exp)
{
	struct iscsi_target *t = exp->priv;

	if (t)
		bs_share_shutdown(&t->ref);
}

static unsigned iscsi_clients(struct bs_export *exp)
{
	struct iscsi_target *t = exp->priv;

	return t ? bs_share_clients(&t->ref) : 0;
}

static void iscsi_describe(struct bs_export *exp, bs_kv_fn kv, void *arg)
{
	struct iscsi_target *t = exp->priv;
	unsigned i;

	if (!t)
		return;
	kv(arg, "iqn", "%s", t->iqn);
	for (i = 0; i < exp->nunits; i++)
		kv(arg, "lun", "%llu: unit %s, device %s%s",
		   (unsigned long long)unit_lun(&exp->units[i]),
		   exp->units[i].name, exp->units[i].dev->name,
		   exp->units[i].readonly ? ", read-only" : "");
	bs_share_describe(&t->ref, kv, arg);
	kv(arg, "auth", "%s", t->mutual_user ? "CHAP, mutual" :
	   t->chap_user ? "CHAP" : "None");
	kv(arg, "digests", "header %s, data %s",
	   t->tp.header_digests == 3 ? "None,CRC32C" :
	   t->tp.header_digests == 2 ? "CRC32C" : "None",
	   t->tp.data_digests == 3 ? "None,CRC32C" :
	   t->tp.data_digests == 2 ? "CRC32C" : "None");
	kv(arg, "sessions", "%u of %u",
	   __atomic_load_n(&t->sessions, __ATOMIC_ACQUIRE), t->max_sessions);
	kv(arg, "queue_depth", "%u", t->queue_depth);
	kv(arg, "clients", "%u", iscsi_clients(exp));
	if (t->ref.shutdown)
		kv(arg, "state", "stopping");
}

static void iscsi_caps_changed(struct bs_export *exp, struct bs_export_unit *u,
			       const struct bs_caps *now)
{
	struct iscsi_target *t = exp->priv;

	if (t && t->lus && t->lus[u->index])
		bs_scsi_lu_caps_changed(t->lus[u->index], &u->caps, now);
}

const struct bs_export_type iscsi_export_type = {
	.name = "iscsi",
	.summary = "iSCSI target (RFC 7143): units are LUNs, SCSI from the "
		   "target core; CHAP, CRC32C digests, discovery",
	.options =
		"listen=HOST:PORT ...  TCP addresses (default 127.0.0.1:3260)\n"
		"iqn=NAME             the target name (default "
		ISCSI_IQN_PREFIX "EXPORT)\n"
		"chap_user=NAME       require CHAP from initiators as NAME\n"
		"chap_secret=S        their secret (12-255 bytes)\n"
		"mutual_chap_user=NAME  the target's name in mutual CHAP\n"
		"mutual_chap_secret=S   its secret (12-255 bytes, not "
		"chap_secret)\n"
		"header_digest=LIST   None, CRC32C or both (default both)\n"
		"data_digest=LIST     None, CRC32C or both (default both)\n"
		"max_sessions=N       sessions of this target (default 16)\n"
		"queue_depth=N        commands in flight per session "
		"(default 128)\n"
		"max_connections=N    per listener (default 512)\n"
		"max_connections_per_peer=N  per initiator address (default "
		"64)\n"
		"handshake_timeout=S  seconds for a login (default 10)\n"
		"send_buffer=SIZE     TCP send buffer of each connection "
		"(SO_SNDBUF, 4K..64M; default 512K; 0 = the kernel's autotuning)\n",
	.check = iscsi_check,
	.open = iscsi_open,
	.shutdown = iscsi_shutdown,
	.clients = iscsi_clients,
	.close = iscsi_close,
	.describe = iscsi_describe,
	.caps_changed = iscsi_caps_changed,
};
BS_EXPORT_TYPE(iscsi_export_type);
