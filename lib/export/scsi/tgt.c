/* SPDX-License-Identifier: MIT */
/*
 * The SCSI target device: its logical units, its I_T nexuses, the unit
 * attention queues (per nexus and LU), task management resets and the
 * capability changes that raise unit attentions. Everything here is under
 * the target's mutex: sessions on several I/O loops share a target.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/scsi/internal.h"

static struct scsi_tmf_wait *waits_ready(struct bs_scsi_tgt *t);
static struct bs_scsi_lu *lu_find(struct bs_scsi_tgt *t, uint64_t lun);
static void waits_run(struct scsi_tmf_wait *w);

/* FNV-1a, 64 bits: stable identifiers from names. */
static uint64_t fnv1a(uint64_t h, const char *s)
{
	if (!h)
		h = 0xcbf29ce484222325ull;
	for (; *s; s++) {
		h ^= (uint8_t)*s;
		h *= 0x100000001b3ull;
	}
	h *= 0x100000001b3ull;	/* the terminator separates two names */
	return h;
}

static void copy_id(char *dst, size_t size, const char *src, const char *def)
{
	snprintf(dst, size, "%s", src ? src : def);
}

int bs_scsi_tgt_new(const struct bs_scsi_tgt_cfg *cfg, struct bs_scsi_tgt **out)
{
	struct bs_scsi_tgt *t;

	if (!cfg || !cfg->name || !*cfg->name)
		return bs_error(-EINVAL, "scsi: a target needs a name");
	if ((cfg->vendor && strlen(cfg->vendor) > 8) ||
	    (cfg->product && strlen(cfg->product) > 16) ||
	    (cfg->revision && strlen(cfg->revision) > 4))
		return bs_error(-EINVAL, "scsi: %s: vendor (8), product (16) "
				"or revision (4) too long", cfg->name);
	t = calloc(1, sizeof(*t));
	if (!t || !(t->name = strdup(cfg->name))) {
		free(t);
		return -ENOMEM;
	}
	copy_id(t->vendor, sizeof(t->vendor), cfg->vendor, "BLKSTACK");
	copy_id(t->product, sizeof(t->product), cfg->product, "blkstack");
	copy_id(t->revision, sizeof(t->revision), cfg->revision, "0001");
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void bs_scsi_tgt_free(struct bs_scsi_tgt *t)
{
	if (!t)
		return;
	while (t->nexuses)
		bs_scsi_nexus_free(t->nexuses);
	while (t->lus)
		bs_scsi_lu_remove(t->lus);
	while (t->waits) {	/* only when tasks were lost: drop them */
		struct scsi_tmf_wait *w = t->waits;

		t->waits = w->next;
		free(w);
	}
	pthread_mutex_destroy(&t->lock);
	free(t->name);
	free(t);
}

/* ---- unit attentions ----------------------------------------------------- */

static bool ua_is_reset(uint16_t asc)
{
	return (asc >> 8) == 0x29;
}

void scsi_ua_queue(struct bs_scsi_nexus *n, uint64_t lun, uint16_t asc)
{
	struct scsi_ua *q;
	unsigned i;

	for (q = n->ua; q && q->lun != lun; q = q->next)
		;
	if (!q) {
		q = calloc(1, sizeof(*q));
		if (!q)
			return;	/* nothing better to do: the UA is lost */
		q->lun = lun;
		q->next = n->ua;
		n->ua = q;
	}
	/* a reset supersedes everything queued before it (SAM-5) */
	if (ua_is_reset(asc))
		q->n = 0;
	for (i = 0; i < q->n; i++)
		if (q->asc[i] == asc || ua_is_reset(q->asc[i]))
			return;	/* the same condition, or a reset, is pending */
	if (q->n == SCSI_UA_MAX) {
		/* full: the oldest two merge into the oldest */
		memmove(q->asc + 1, q->asc + 2,
			(SCSI_UA_MAX - 2) * sizeof(q->asc[0]));
		q->n--;
	}
	q->asc[q->n++] = asc;
}

void scsi_ua_queue_all(struct bs_scsi_tgt *t, uint64_t lun, uint16_t asc,
		       const struct bs_scsi_nexus *except)
{
	struct bs_scsi_nexus *n;

	for (n = t->nexuses; n; n = n->next)
		if (n != except)
			scsi_ua_queue(n, lun, asc);
}

uint16_t scsi_ua_take(struct bs_scsi_nexus *n, uint64_t lun)
{
	struct scsi_ua *q;
	uint16_t asc;

	for (q = n->ua; q && q->lun != lun; q = q->next)
		;
	if (!q || !q->n)
		return 0;
	asc = q->asc[0];
	memmove(q->asc, q->asc + 1, (q->n - 1) * sizeof(q->asc[0]));
	q->n--;
	return asc;
}

static void ua_forget_lun(struct bs_scsi_nexus *n, uint64_t lun)
{
	struct scsi_ua **pp, *q;

	for (pp = &n->ua; (q = *pp);) {
		if (q->lun == lun) {
			*pp = q->next;
			free(q);
		} else {
			pp = &q->next;
		}
	}
}

/* ---- logical units ------------------------------------------------------- */

bool scsi_lu_dsense(const struct bs_scsi_lu *lu)
{
	return __atomic_load_n(&lu->d_sense, __ATOMIC_RELAXED);
}

int bs_scsi_lu_add(struct bs_scsi_tgt *t, const struct bs_scsi_lu_cfg *cfg,
		   struct bs_scsi_lu **out)
{
	struct bs_scsi_lu *lu, **pp;
	struct bs_scsi_nexus *n;
	const char *name;
	uint64_t h;

	if (!cfg || !cfg->dev || cfg->lun > 16383)
		return bs_error(-EINVAL, "scsi: %s: LUN must be 0..16383 with "
				"a device", t->name);
	name = cfg->name ? cfg->name : cfg->dev->name;
	if (cfg->serial && strlen(cfg->serial) > 40)
		return bs_error(-EINVAL, "scsi: %s: serial longer than 40",
				name);
	lu = calloc(1, sizeof(*lu));
	if (!lu || !(lu->name = strdup(name))) {
		free(lu);
		return -ENOMEM;
	}
	lu->tgt = t;
	lu->lun = cfg->lun;
	lu->dev = cfg->dev;
	lu->readonly = cfg->readonly;
	h = fnv1a(fnv1a(0, t->name), name);
	/* NAA 3: locally assigned, 60 bits of our own */
	lu->naa = 0x3000000000000000ull | (h & 0x0fffffffffffffffull);
	/* EUI-64 with a locally administered first byte */
	lu->eui = (fnv1a(h, "eui") & ~(0xffull << 56)) | (0x02ull << 56);
	if (cfg->serial)
		snprintf(lu->serial, sizeof(lu->serial), "%s", cfg->serial);
	else
		snprintf(lu->serial, sizeof(lu->serial), "%016llx",
			 (unsigned long long)h);

	pthread_mutex_lock(&t->lock);
	for (pp = &t->lus; *pp && (*pp)->lun < cfg->lun; pp = &(*pp)->next)
		;
	if (*pp && (*pp)->lun == cfg->lun) {
		pthread_mutex_unlock(&t->lock);
		free(lu->name);
		free(lu);
		return bs_error(-EEXIST, "scsi: %s: LUN %llu is taken", t->name,
				(unsigned long long)cfg->lun);
	}
	lu->next = *pp;
	*pp = lu;
	for (n = t->nexuses; n; n = n->next) {
		struct bs_scsi_lu *o;

		scsi_ua_queue(n, lu->lun, A_POWER_ON_RESET);
		for (o = t->lus; o; o = o->next)
			if (o != lu)
				scsi_ua_queue(n, o->lun, A_LUNS_CHANGED);
	}
	pthread_mutex_unlock(&t->lock);
	if (out)
		*out = lu;
	return 0;
}

void bs_scsi_lu_remove(struct bs_scsi_lu *lu)
{
	struct bs_scsi_tgt *t;
	struct bs_scsi_lu **pp, *o;
	struct bs_scsi_nexus *n;
	struct scsi_tmf_wait *ready;

	if (!lu)
		return;
	t = lu->tgt;
	pthread_mutex_lock(&t->lock);
	for (pp = &t->lus; *pp && *pp != lu; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = lu->next;
	for (n = t->nexuses; n; n = n->next) {
		ua_forget_lun(n, lu->lun);
		for (o = t->lus; o; o = o->next)
			scsi_ua_queue(n, o->lun, A_LUNS_CHANGED);
	}
	ready = waits_ready(t);
	pthread_mutex_unlock(&t->lock);
	waits_run(ready);
	scsi_pr_free(&lu->pr);
	free(lu->name);
	free(lu);
}

/* Does a capability that VPD pages report differ? */
static bool vpd_changed(const struct bs_caps *a, const struct bs_caps *b)
{
	return a->fast_zero != b->fast_zero ||
	       a->write_zeroes_unmap != b->write_zeroes_unmap ||
	       a->discard != b->discard ||
	       a->discard_zeroes != b->discard_zeroes ||
	       a->max_discard != b->max_discard ||
	       a->discard_granularity != b->discard_granularity ||
	       a->max_write_zeroes != b->max_write_zeroes ||
	       a->zeroing != b->zeroing ||
	       a->max_transfer != b->max_transfer ||
	       a->io_min != b->io_min || a->io_opt != b->io_opt ||
	       a->rotational != b->rotational ||
	       a->physical_block_size != b->physical_block_size;
}

void bs_scsi_lu_caps_changed(struct bs_scsi_lu *lu, const struct bs_caps *old,
			     const struct bs_caps *now)
{
	struct bs_scsi_tgt *t = lu->tgt;

	pthread_mutex_lock(&t->lock);
	if (old->size != now->size ||
	    old->logical_block_size != now->logical_block_size)
		scsi_ua_queue_all(t, lu->lun, A_CAPACITY_CHANGED, NULL);
	if (old->write_cache != now->write_cache ||
	    old->readonly != now->readonly)
		scsi_ua_queue_all(t, lu->lun, A_MODE_CHANGED, NULL);
	if (vpd_changed(old, now))
		scsi_ua_queue_all(t, lu->lun, A_INQUIRY_CHANGED, NULL);
	pthread_mutex_unlock(&t->lock);
}

/* ---- nexuses ------------------------------------------------------------- */

int bs_scsi_nexus_new(struct bs_scsi_tgt *t,
		      const struct bs_scsi_nexus_cfg *cfg,
		      struct bs_scsi_nexus **out)
{
	struct bs_scsi_nexus *n;
	struct bs_scsi_lu *lu;

	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->tgt = t;
	n->iport = strdup(cfg && cfg->initiator_port ? cfg->initiator_port
						     : "");
	n->tport = strdup(cfg && cfg->target_port ? cfg->target_port : t->name);
	n->rel_port = cfg && cfg->rel_port_id ? cfg->rel_port_id : 1;
	n->tpg = cfg ? cfg->tpg : 1;
	if (!n->iport || !n->tport) {
		free(n->iport);
		free(n->tport);
		free(n);
		return -ENOMEM;
	}
	pthread_mutex_lock(&t->lock);
	for (lu = t->lus; lu; lu = lu->next)
		scsi_ua_queue(n, lu->lun, A_POWER_ON_RESET);
	n->next = t->nexuses;
	t->nexuses = n;
	pthread_mutex_unlock(&t->lock);
	*out = n;
	return 0;
}

void bs_scsi_nexus_free(struct bs_scsi_nexus *n)
{
	struct bs_scsi_tgt *t;
	struct bs_scsi_nexus **pp;
	struct bs_scsi_lu *lu;
	struct scsi_ua *q;

	if (!n)
		return;
	t = n->tgt;
	pthread_mutex_lock(&t->lock);
	for (pp = &t->nexuses; *pp && *pp != n; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = n->next;
	for (lu = t->lus; lu; lu = lu->next)
		scsi_res_drop(lu, n);
	pthread_mutex_unlock(&t->lock);
	while ((q = n->ua)) {
		n->ua = q->next;
		free(q);
	}
	free(n->iport);
	free(n->tport);
	free(n);
}

/* ---- task management ----------------------------------------------------- */

/*
 * One task set per LU for all I_T nexuses (control mode page TST 000b):
 * every command the core runs on a LU is linked into lu->tasks from
 * bs_scsi_exec() until just before its done() (scsi_set_remove()). A
 * reset or CLEAR TASK SET marks the tasks in the set aborted; each ends
 * with TASK ABORTED (TAS 1: the other nexuses hear of it that way; the
 * transport drops the answers of its own nexus), and the function's
 * response waits (struct scsi_tmf_wait) until no aborted task of its
 * scope is left. A request of an aborted task already at the device is
 * not cancelled; the task ends when it completes, without further steps.
 */

void scsi_set_add(struct bs_scsi_lu *lu, struct bs_scsi_cmd *cmd)
{
	struct scsi_core *c = scsi_core(cmd);

	c->set_prev = NULL;
	c->set_next = lu->tasks;
	if (lu->tasks)
		scsi_core(lu->tasks)->set_prev = cmd;
	lu->tasks = cmd;
	c->in_set = true;
	c->aborted = false;
}

void bs_scsi_cmd_arrived(struct bs_scsi_cmd *cmd)
{
	struct bs_scsi_tgt *t = cmd->nexus->tgt;
	struct bs_scsi_lu *lu;

	pthread_mutex_lock(&t->lock);
	lu = lu_find(t, cmd->lun);
	cmd->arrived = lu != NULL;
	cmd->epoch = lu ? lu->epoch : 0;
	pthread_mutex_unlock(&t->lock);
}

static unsigned aborting(struct bs_scsi_tgt *t, const struct scsi_tmf_wait *w)
{
	struct bs_scsi_lu *lu;
	unsigned n = 0;

	for (lu = t->lus; lu; lu = lu->next)
		if (w->all || lu->lun == w->lun)
			n += lu->aborting;
	return n;
}

/* Take the satisfied waiters off the list (lock held) into @out. */
static struct scsi_tmf_wait *waits_ready(struct bs_scsi_tgt *t)
{
	struct scsi_tmf_wait **pp, *w, *out = NULL;

	for (pp = &t->waits; (w = *pp);) {
		if (!aborting(t, w)) {
			*pp = w->next;
			w->next = out;
			out = w;
		} else {
			pp = &w->next;
		}
	}
	return out;
}

/* The waiter's work, on its loop: the caller's function, then free. */
static void wait_fire(void *arg)
{
	struct scsi_tmf_wait *w = arg;
	bs_scsi_tmf_fn fn = w->fn;
	void *fn_arg = w->arg;

	free(w);
	fn(fn_arg);
}

static void waits_run(struct scsi_tmf_wait *w)
{
	struct scsi_tmf_wait *next;

	for (; w; w = next) {
		next = w->next;
		w->work.next = NULL;
		if (w->loop)
			bs_loop_send(w->loop, &w->work);
		else
			w->work.fn(w->work.arg);
	}
}

struct scsi_tmf_wait *scsi_set_remove(struct bs_scsi_cmd *cmd)
{
	struct scsi_core *c = scsi_core(cmd);
	struct bs_scsi_lu *lu = c->lu;
	struct scsi_tmf_wait *ready = NULL;
	struct bs_scsi_tgt *t;

	if (!c->in_set)
		return NULL;
	t = lu->tgt;
	pthread_mutex_lock(&t->lock);
	if (c->set_prev)
		scsi_core(c->set_prev)->set_next = c->set_next;
	else
		lu->tasks = c->set_next;
	if (c->set_next)
		scsi_core(c->set_next)->set_prev = c->set_prev;
	c->in_set = false;
	if (c->aborted) {
		lu->aborting--;
		ready = waits_ready(t);
	}
	pthread_mutex_unlock(&t->lock);
	if (c->aborted) {
		cmd->status = BS_SCSI_TASK_ABORTED;
		cmd->sense_len = 0;
		cmd->din_len = 0;
	}
	return ready;
}

void scsi_waits_run(struct scsi_tmf_wait *ready)
{
	waits_run(ready);
}

void scsi_visit_join(struct scsi_visit *v, struct bs_scsi_lu *lu)
{
	struct bs_scsi_tgt *t = lu->tgt;

	pthread_mutex_lock(&t->lock);
	v->lu = lu;
	v->aborted = false;
	v->prev = NULL;
	v->next = lu->visits;
	if (lu->visits)
		lu->visits->prev = v;
	lu->visits = v;
	pthread_mutex_unlock(&t->lock);
}

void scsi_visit_leave(struct scsi_visit *v)
{
	struct bs_scsi_lu *lu = v->lu;
	struct scsi_tmf_wait *ready = NULL;
	struct bs_scsi_tgt *t;

	if (!lu)
		return;
	t = lu->tgt;
	pthread_mutex_lock(&t->lock);
	if (v->prev)
		v->prev->next = v->next;
	else
		lu->visits = v->next;
	if (v->next)
		v->next->prev = v->prev;
	v->lu = NULL;
	if (v->aborted) {
		lu->aborting--;
		ready = waits_ready(t);
	}
	pthread_mutex_unlock(&t->lock);
	waits_run(ready);
}

bool scsi_visit_aborted(const struct scsi_visit *v)
{
	return __atomic_load_n(&v->aborted, __ATOMIC_RELAXED);
}

/* Mark every task of @lu aborted; lock held. */
static void set_abort(struct bs_scsi_lu *lu)
{
	struct bs_scsi_cmd *cmd;
	struct scsi_visit *v;

	lu->epoch++;	/* and the tasks the transports still hold */
	for (cmd = lu->tasks; cmd; cmd = scsi_core(cmd)->set_next) {
		struct scsi_core *c = scsi_core(cmd);

		if (!c->aborted) {
			/* read without the lock between I/O steps (io.c) */
			__atomic_store_n(&c->aborted, true, __ATOMIC_RELAXED);
			lu->aborting++;
		}
	}
	for (v = lu->visits; v; v = v->next)
		if (!v->aborted) {
			__atomic_store_n(&v->aborted, true, __ATOMIC_RELAXED);
			lu->aborting++;
		}
}

/*
 * After the aborts (lock held): 0 when nothing is left to wait for, else
 * queue a waiter calling @fn(@arg) on this thread's loop and return 1.
 */
static int wait_add(struct bs_scsi_tgt *t, bool all, uint64_t lun,
		    bs_scsi_tmf_fn fn, void *arg)
{
	struct scsi_tmf_wait *w;

	if (!fn)
		return 0;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->all = all;
	w->lun = lun;
	if (!aborting(t, w)) {
		free(w);
		return 0;
	}
	w->loop = bs_loop_current();
	w->fn = fn;
	w->arg = arg;
	w->work.fn = wait_fire;
	w->work.arg = w;
	w->next = t->waits;
	t->waits = w;
	return 1;
}

static void lu_reset_locked(struct bs_scsi_tgt *t, struct bs_scsi_lu *lu,
			    uint16_t asc)
{
	struct bs_scsi_nexus *n;

	set_abort(lu);
	if (lu->res_holder)
		scsi_res_drop(lu, lu->res_holder);
	/*
	 * SAM-5: a unit attention for every I_T nexus, the one the reset came
	 * from included (iscsi-test-cu's MultipathIO.Reset checks every path)
	 */
	for (n = t->nexuses; n; n = n->next)
		scsi_ua_queue(n, lu->lun, asc);
}

static struct bs_scsi_lu *lu_find(struct bs_scsi_tgt *t, uint64_t lun)
{
	struct bs_scsi_lu *lu;

	for (lu = t->lus; lu && lu->lun != lun; lu = lu->next)
		;
	return lu;
}

int bs_scsi_lu_reset_wait(struct bs_scsi_tgt *t, uint64_t lun,
			  struct bs_scsi_nexus *from, bs_scsi_tmf_fn fn,
			  void *arg)
{
	struct bs_scsi_lu *lu;
	int rc = -ENODEV;

	(void)from;
	pthread_mutex_lock(&t->lock);
	lu = lu_find(t, lun);
	if (lu) {
		lu_reset_locked(t, lu, A_LU_RESET);
		rc = wait_add(t, false, lun, fn, arg);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int bs_scsi_tgt_reset_wait(struct bs_scsi_tgt *t, struct bs_scsi_nexus *from,
			   bs_scsi_tmf_fn fn, void *arg)
{
	struct bs_scsi_lu *lu;
	int rc;

	(void)from;
	pthread_mutex_lock(&t->lock);
	for (lu = t->lus; lu; lu = lu->next)
		lu_reset_locked(t, lu, A_BUS_RESET);
	rc = wait_add(t, true, 0, fn, arg);
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int bs_scsi_clear_task_set_wait(struct bs_scsi_tgt *t, uint64_t lun,
				struct bs_scsi_nexus *from, bs_scsi_tmf_fn fn,
				void *arg)
{
	struct bs_scsi_lu *lu;
	int rc = -ENODEV;

	(void)from;
	pthread_mutex_lock(&t->lock);
	lu = lu_find(t, lun);
	if (lu) {
		/* TAS 1: the other nexuses learn of it from TASK ABORTED
		 * status, not from a unit attention (SAM-5) */
		set_abort(lu);
		rc = wait_add(t, false, lun, fn, arg);
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

int bs_scsi_lu_reset(struct bs_scsi_tgt *t, uint64_t lun,
		     struct bs_scsi_nexus *from)
{
	return bs_scsi_lu_reset_wait(t, lun, from, NULL, NULL);
}

void bs_scsi_tgt_reset(struct bs_scsi_tgt *t, struct bs_scsi_nexus *from)
{
	bs_scsi_tgt_reset_wait(t, from, NULL, NULL);
}

/* ---- LUN fields ---------------------------------------------------------- */

uint64_t bs_scsi_lun_decode(const uint8_t raw[8])
{
	switch (raw[0] >> 6) {
	case 0:	/* peripheral device addressing, bus 0 */
		if (raw[0] & 0x3f)
			return UINT64_MAX;
		return raw[1];
	case 1:	/* flat space addressing */
		return (uint64_t)(raw[0] & 0x3f) << 8 | raw[1];
	default:
		return UINT64_MAX;	/* no such LUN here */
	}
}

void bs_scsi_lun_encode(uint64_t lun, uint8_t raw[8])
{
	memset(raw, 0, 8);
	if (lun < 256) {
		raw[1] = (uint8_t)lun;
	} else {
		raw[0] = 0x40 | (uint8_t)((lun >> 8) & 0x3f);
		raw[1] = (uint8_t)lun;
	}
}
