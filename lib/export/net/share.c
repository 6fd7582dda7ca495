/* SPDX-License-Identifier: MIT */
/*
 * Shared listeners: exports of one type that name the same address are
 * served by one network listener. See share.h for the model.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>

#include "export/net/share.h"

static struct bs_share **share_slot(struct bs_exports *set,
				    const struct bs_export_type *type)
{
	return (struct bs_share **)bs_exports_type_slot(set, type);
}

int bs_share_join(struct bs_share_ref *ref, struct bs_export *exp,
		  const struct bs_export_type *type,
		  const struct bs_share_ops *ops, void *member)
{
	struct bs_share **slot = share_slot(exp->set, type);
	struct bs_share *sh;

	if (!slot)
		return -EINVAL;
	if (!*slot) {
		sh = calloc(1, sizeof(*sh));
		if (!sh)
			return -ENOMEM;
		sh->ops = ops;
		sh->set = exp->set;
		sh->ctx = exp->ctx;
		sh->loop = bs_ctx_loop(exp->ctx);
		*slot = sh;
	}
	(*slot)->nexports++;
	ref->member = member;
	ref->name = exp->name;
	ref->sh = *slot;
	ref->type = type;
	return 0;
}

bool bs_share_active(const struct bs_share_ref *ref)
{
	/* read by I/O threads during a handshake, set by the main loop */
	return ref && ref->sh && !__atomic_load_n(&ref->shutdown,
						  __ATOMIC_ACQUIRE);
}

static struct bs_share_listener *find_listener(struct bs_share *sh,
					       const char *addr, bool is_unix)
{
	struct bs_share_listener *l;

	for (l = sh->listeners; l; l = l->next)
		if (bs_net_listener_accepting(l->nl) &&
		    !strcmp(bs_net_listener_addr(l->nl), addr) &&
		    bs_net_listener_is_unix(l->nl) == is_unix)
			return l;
	return NULL;
}

static int listener_add(struct bs_share_listener *l, struct bs_share_ref *ref,
			const char *where, void *arg)
{
	const struct bs_share_ops *ops = ref->sh->ops;
	struct bs_share_ref **v;
	unsigned i;
	int err;

	for (i = 0; i < ref->nls; i++)
		if (ref->ls[i] == l)
			return 0;	/* named twice: once is enough */
	for (i = 0; ops->clash && i < l->n; i++) {
		err = ops->clash(ref->member, l->refs[i]->member, l, where,
				 arg);
		if (err)
			return err;
	}
	if (ref->nls == BS_SHARE_MAX_LISTEN)
		return bs_error(-E2BIG, "%s%sexport %s: more than %d listen "
				"addresses", where, bs_sep(where), ref->name,
				BS_SHARE_MAX_LISTEN);
	v = realloc(l->refs, (l->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	l->refs = v;
	l->refs[l->n++] = ref;
	ref->ls[ref->nls++] = l;
	return 0;
}

static bool same_limits(const struct bs_net_limits *a,
			const struct bs_net_limits *b)
{
	return a->max_conns == b->max_conns &&
	       a->max_per_peer == b->max_per_peer &&
	       a->handshake_ms == b->handshake_ms &&
	       a->idle_ms == b->idle_ms && a->out_max == b->out_max &&
	       a->socket_mode == b->socket_mode && a->sndbuf == b->sndbuf;
}

static void set_log(void *arg, const char *msg)
{
	bs_exports_log(arg, "%s", msg);
}

static void listener_free(struct bs_share_listener *l)
{
	struct bs_share_listener **pp;

	for (pp = &l->sh->listeners; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	/* the connections close (on their loops) while their sessions
	 * still see l */
	bs_net_listener_stop(l->nl);
	bs_net_listener_close_conns(l->nl, NULL, NULL, "export closed");
	bs_net_listener_free(l->nl);
	free(l->refs);
	free(l);
}

int bs_share_listen(struct bs_share_ref *ref, const char *where,
		    const char *addr, bool is_unix,
		    const struct bs_net_limits *lim, void *arg)
{
	struct bs_share *sh = ref->sh;
	struct bs_share_listener *l = find_listener(sh, addr, is_unix);
	struct bs_net_listen_cfg cfg = {
		.addr = addr,
		.is_unix = is_unix,
		.limits = *lim,
		.proto = sh->ops->proto,
		.log = set_log,
		.log_arg = sh->set,
		.ctx = sh->ctx,		/* clients go to the I/O threads */
	};
	struct bs_net_addr a;
	char why[160];
	int err;

	if (l) {
		if (!same_limits(bs_net_listener_limits(l->nl), lim))
			return bs_error(-EINVAL, "%s%sexport %s: %s is shared "
					"with export %s but with other "
					"connection settings (max_connections"
					"*, *_timeout, socket_mode, "
					"send_buffer): give the same ones",
					where, bs_sep(where), ref->name, addr,
					l->refs[0]->name);
		return listener_add(l, ref, where, arg);
	}
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->sh = sh;
	cfg.owner = l;
	bs_error_clear();
	err = bs_net_listen(sh->loop, &cfg, &l->nl);
	if (err) {
		char msg[600];

		snprintf(msg, sizeof(msg), "%s", *bs_last_error() ?
			 bs_last_error() : strerror(-err));
		free(l);
		return bs_error(err, "%s%sexport %s: %s", where, bs_sep(where),
				ref->name, msg);
	}
	err = listener_add(l, ref, where, arg);
	if (err) {
		bs_net_listener_free(l->nl);
		free(l->refs);
		free(l);
		return err;
	}
	l->next = sh->listeners;
	sh->listeners = l;
	if (!is_unix && !bs_net_parse_addr(addr, &a, why, sizeof(why)) &&
	    a.wildcard)
		bs_exports_log(sh->set, "%s: listening on %s: WARNING: every "
			       "address: export %s is reachable from the "
			       "network (give 127.0.0.1 or [::1] for this "
			       "machine only)", sh->ops->name, addr, ref->name);
	else
		bs_exports_log(sh->set, "%s: listening on %s%s", sh->ops->name,
			       is_unix ? "unix:" : "", addr);
	return 0;
}

/* Under the listener's lock: is @c a client of the member @arg? */
static bool conn_of(struct bs_net_conn *c, void *arg)
{
	const struct bs_share_ref *ref = arg;
	const char *e = bs_net_conn_label(c);

	return *e && ref->sh->ops->has_conn(ref->member, e);
}

void bs_share_shutdown(struct bs_share_ref *ref)
{
	unsigned i, j;

	if (!ref->sh || ref->shutdown)
		return;
	__atomic_store_n(&ref->shutdown, true, __ATOMIC_RELEASE);
	for (i = 0; i < ref->nls; i++) {
		struct bs_share_listener *l = ref->ls[i];
		bool all = true;
		struct bs_net_conn *c;

		for (j = 0; j < l->n; j++)
			if (bs_share_active(l->refs[j]))
				all = false;
		if (all)
			bs_net_listener_stop(l->nl);
		bs_net_listener_lock(l->nl);
		for (c = bs_net_conn_next(l->nl, NULL); c;
		     c = bs_net_conn_next(l->nl, c)) {
			/* clients still negotiating go too once nothing is
			 * left to pick */
			if (conn_of(c, ref) ||
			    (!*bs_net_conn_label(c) && all))
				bs_net_conn_send_shutdown(c);
		}
		bs_net_listener_unlock(l->nl);
	}
}

unsigned bs_share_clients(const struct bs_share_ref *ref)
{
	unsigned i, n = 0;

	for (i = 0; i < ref->nls; i++) {
		struct bs_share_listener *l = ref->ls[i];
		struct bs_net_conn *c;

		bs_net_listener_lock(l->nl);
		for (c = bs_net_conn_next(l->nl, NULL); c;
		     c = bs_net_conn_next(l->nl, c)) {
			/* a negotiating client counts for the first member */
			if (*bs_net_conn_label(c) ?
			    conn_of(c, (void *)ref) : l->refs[0] == ref)
				n++;
		}
		bs_net_listener_unlock(l->nl);
	}
	return n;
}

/* Drop @ref from @l; the listener goes when no member is left on it. */
static void listener_remove(struct bs_share_listener *l,
			    struct bs_share_ref *ref)
{
	unsigned i;

	for (i = 0; i < l->n; i++) {
		if (l->refs[i] == ref) {
			memmove(&l->refs[i], &l->refs[i + 1],
				(l->n - i - 1) * sizeof(*l->refs));
			l->n--;
			break;
		}
	}
	if (!l->n) {
		listener_free(l);
		return;
	}
	/* clients of this member lose it; the others go on */
	bs_net_listener_close_conns(l->nl, conn_of, ref, "export closed");
}

void bs_share_leave(struct bs_share_ref *ref)
{
	struct bs_share **slot;
	struct bs_share *sh = ref->sh;

	if (!sh)
		return;
	__atomic_store_n(&ref->shutdown, true, __ATOMIC_RELEASE);
	while (ref->nls)
		listener_remove(ref->ls[--ref->nls], ref);
	ref->sh = NULL;
	if (--sh->nexports)
		return;
	while (sh->listeners)
		listener_free(sh->listeners);
	slot = share_slot(sh->set, ref->type);
	if (slot)
		*slot = NULL;
	free(sh);
}

void bs_share_describe(const struct bs_share_ref *ref, bs_kv_fn kv,
		       void *arg)
{
	unsigned i;

	for (i = 0; i < ref->nls; i++)
		kv(arg, bs_net_listener_is_unix(ref->ls[i]->nl) ? "socket" :
		   "listen", "%s", bs_net_listener_addr(ref->ls[i]->nl));
}
