/* SPDX-License-Identifier: MIT */
/*
 * The iscsi driver's sessions and probe (see iscsi.c for the whole).
 *
 * A session: a libiscsi context connected (iscsi_connect_async) and
 * logged in (iscsi_login_async), its socket pumped by bs_fdpump. A lost
 * session is torn down and made anew after reconnect_ms; libiscsi's own
 * reconnect is off. Each new session, and each UNIT ATTENTION, runs the
 * probe: READ CAPACITY 16 (10), VPD 00/B0/B1/B2, REPORT SUPPORTED
 * OPERATION CODES, MODE SENSE caching; then sd_config_decide() and, after
 * the open, bs_dev_limits_changed().
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>

#include "drivers/iscsi.h"

const char *isd_status_str(int status)
{
	switch (status) {
	case SCSI_STATUS_GOOD: return "GOOD";
	case SCSI_STATUS_CHECK_CONDITION: return "CHECK CONDITION";
	case SCSI_STATUS_BUSY: return "BUSY";
	case SCSI_STATUS_RESERVATION_CONFLICT: return "RESERVATION CONFLICT";
	case SCSI_STATUS_TASK_SET_FULL: return "TASK SET FULL";
	case SCSI_STATUS_TASK_ABORTED: return "TASK ABORTED";
	case SCSI_STATUS_CANCELLED: return "cancelled";
	case SCSI_STATUS_TIMEOUT: return "timeout";
	default: return "connection error";
	}
}

/* ---- sessions ------------------------------------------------------------ */

static void start_session(struct isd *s);

static int pump_get_fd(void *lib)
{
	struct isd *s = lib;

	return s->iscsi ? iscsi_lib.iscsi_get_fd(s->iscsi) : -1;
}

static uint32_t pump_events(void *lib)
{
	struct isd *s = lib;

	/* POLLIN/POLLOUT have the values of EPOLLIN/EPOLLOUT on Linux */
	return s->iscsi ? (uint32_t)iscsi_lib.iscsi_which_events(s->iscsi) : 0;
}

static int pump_service(void *lib, uint32_t revents)
{
	struct isd *s = lib;

	if (!s->iscsi)
		return 0;
	return iscsi_lib.iscsi_service(s->iscsi, (int)revents) < 0 ? -EIO : 0;
}


static void reset_at_once(struct isd *s, const char *why);

static void watchdog(struct isd *s)
{
	uint64_t now = bs_now_ns();
	struct isd_req *r;
	bool again = true;
	unsigned rounds = 0;

	/* cancelling calls back, which edits the list: rescan from the top */
	while (again && rounds++ < 4096) {
		again = false;
		for (r = s->reqs; r; r = r->next) {
			if (r->expired || now < r->deadline_ns)
				continue;
			r->expired = true;
			s->expired++;
			if (r->task && s->iscsi &&
			    r->task->xfer_dir == SCSI_XFER_WRITE) {
				/*
				 * Data-Out PDUs of it may wait in libiscsi
				 * behind the command (an R2T's, unsolicited
				 * ones): a local cancel takes the first PDU
				 * off only, and the rest would go out later
				 * from the freed task's buffers, or the
				 * target would still write what we failed.
				 * The session goes instead, every PDU with it
				 * (the target aborts a lost connection's
				 * tasks), and a new one starts at once.
				 */
				reset_at_once(s, "a command sending data "
					      "passed its deadline");
				again = true;
				break;
			}
			if (r->task && s->iscsi) {
				/* calls back at once, cancelled */
				if (iscsi_lib.iscsi_scsi_cancel_task(s->iscsi,
								     r->task))
					isd_reset_session(s, "a command past its "
						      "deadline could not be "
						      "cancelled");
				again = true;
				break;
			}
		}
	}
	/* the expired ones not in flight (waiting, or a cancel that found
	 * nothing) fail now */
	again = true;
	while (again) {
		again = false;
		for (r = s->reqs; r; r = r->next) {
			if (!r->expired || (r->task && s->iscsi))
				continue;
			if (r->timer)
				bs_loop_cancel_timer(s->loop, r->timer);
			r->timer = 0;
			r->task = NULL;
			/* finish() takes it off the list */
			isd_issue(r);
			again = true;
			break;
		}
	}
}

static void tur_cb(struct iscsi_context *iscsi, int status, void *data,
		   void *priv)
{
	struct isd *s = priv;
	struct scsi_task *task = data;
	bool ua = status == SCSI_STATUS_CHECK_CONDITION && task &&
		  task->sense.key == SCSI_SENSE_UNIT_ATTENTION;

	if (task)
		iscsi_lib.scsi_free_scsi_task(task);
	if (s->closing || iscsi != s->iscsi)
		return;
	s->tur_busy = false;
	isd_note_activity(s);
	if (ua) {
		/* the target's news, with no client command to carry it */
		s->unit_attentions++;
		isd_probe_start(s);
	} else if (status == SCSI_STATUS_ERROR ||
		   status == SCSI_STATUS_CANCELLED) {
		isd_reset_session(s, iscsi_lib.iscsi_get_error(iscsi));
	}
}

/* Idle for poll_ms: ask TEST UNIT READY (sd's media-change polling has
 * the same purpose: learn of the disk's changes without a client). */
static void idle_poll(struct isd *s)
{
	struct scsi_task *t;

	if (!s->poll_ms || !s->iscsi || !s->logged_in || s->tur_busy ||
	    s->probing || s->opening ||
	    bs_now_ns() - s->last_activity_ns < s->poll_ms * 1000000ull)
		return;
	t = iscsi_lib.iscsi_testunitready_task(s->iscsi, s->lun, tur_cb, s);
	if (!t)
		return;
	s->tur_busy = true;
	s->polls++;
	s->last_activity_ns = bs_now_ns();
	isd_kick(s);
}

static void pump_tick(void *lib)
{
	struct isd *s = lib;

	/* libiscsi's timeouts run in its service */
	if (s->iscsi && iscsi_lib.iscsi_get_fd(s->iscsi) >= 0 &&
	    iscsi_lib.iscsi_service(s->iscsi, 0) < 0)
		isd_reset_session(s, iscsi_lib.iscsi_get_error(s->iscsi));
	watchdog(s);
	idle_poll(s);
}

static void pump_error(void *lib, int err)
{
	struct isd *s = lib;

	isd_reset_session(s, s->iscsi ? iscsi_lib.iscsi_get_error(s->iscsi) : strerror(-err));
}

static const struct bs_fdpump_ops isd_pump_ops = {
	.get_fd = pump_get_fd,
	.events = pump_events,
	.service = pump_service,
	.tick = pump_tick,
	.on_error = pump_error,
};

void isd_kick(struct isd *s)
{
	if (s->pump)
		bs_fdpump_update(s->pump);
}

/* Tear the session down (outside libiscsi's callbacks): every command in
 * it comes back cancelled and waits for the next one. */
static void reset_now(void *arg)
{
	struct isd *s = arg;
	struct iscsi_context *old = s->iscsi;

	s->reset_timer = 0;
	if (s->closing)
		return;
	s->logged_in = false;
	s->iscsi = NULL;
	/* its probe dies with it: the next session probes from the start */
	s->probing = s->probe_again = false;
	s->tur_busy = false;
	if (s->pump)
		bs_fdpump_update(s->pump);	/* stop watching its fd */
	if (old)
		iscsi_lib.iscsi_destroy_context(old);	/* callbacks: cancelled */
	start_session(s);
}

/* isd_reset_session() without the wait (outside libiscsi's callbacks) */
static void reset_at_once(struct isd *s, const char *why)
{
	snprintf(s->last_error, sizeof(s->last_error), "%s", why);
	if (s->closing)
		return;
	if (s->reset_timer)
		bs_loop_cancel_timer(s->loop, s->reset_timer);
	s->reset_timer = 0;
	s->session_resets_deadline++;
	reset_now(s);
}

void isd_reset_session(struct isd *s, const char *why)
{
	snprintf(s->last_error, sizeof(s->last_error), "%s", why ? why : "");
	if (s->reset_timer || s->closing)
		return;
	s->logged_in = false;
	s->reset_timer = bs_loop_add_timer(s->loop, s->reconnect_ms, reset_now,
					   s);
	if (s->reset_timer < 0)
		s->reset_timer = 0;
}

static void open_done_deferred(void *arg)
{
	struct isd *s = arg;

	if (s->open_timer)
		bs_loop_cancel_timer(s->loop, s->open_timer);
	s->open_timer = 0;
	s->opening = false;
	bs_dev_open_done(s->dev, s->open_err);
}

/* The first probe ended (or the open gave up): tell the core, later. */
static void open_finish(struct isd *s, int err)
{
	if (!s->opening || s->open_work.fn)
		return;
	s->open_err = err;
	if (err)
		bs_error(err, "%s: iscsi %s/%s/%d: %s", s->dev->name, s->portal,
			 s->target, s->lun, s->last_error);
	s->open_work.fn = open_done_deferred;
	s->open_work.arg = s;
	bs_loop_defer(s->loop, &s->open_work);
}

static void open_timeout(void *arg)
{
	struct isd *s = arg;

	s->open_timer = 0;
	if (!s->last_error[0])
		snprintf(s->last_error, sizeof(s->last_error),
			 "no session within %u s", s->timeout_s);
	open_finish(s, -ETIMEDOUT);
}

/* The connect or the login failed: try again later, or give the open up. */
static void session_failed(struct isd *s, struct iscsi_context *c)
{
	snprintf(s->last_error, sizeof(s->last_error), "%s",
		 iscsi_lib.iscsi_get_error(c));
	s->failed_connects++;
	if (s->opening && s->failed_connects > s->max_retries) {
		open_finish(s, -EIO);
		return;
	}
	isd_reset_session(s, s->last_error);
}

static void login_cb(struct iscsi_context *iscsi, int status, void *data,
		     void *priv)
{
	struct isd *s = priv;
	struct isd_req *r, *next;

	(void)data;
	if (iscsi != s->iscsi || s->closing)
		return;
	if (status != SCSI_STATUS_GOOD) {
		session_failed(s, iscsi);
		return;
	}
	s->logged_in = true;
	s->tur_busy = false;
	isd_note_activity(s);
	s->failed_connects = 0;
	s->connects++;
	if (s->connects > 1)
		s->reconnects++;
	s->last_error[0] = '\0';
	/* the capacity and VPDs first at open; after a new session the
	 * target may have changed: read them again */
	isd_probe_start(s);
	/* isd_issue() may finish @r (its deadline passed): take next first */
	for (r = s->reqs; r; r = next) {
		next = r->next;
		if (r->waiting && !r->timer) {
			r->waiting = false;
			isd_issue(r);
		}
	}
	isd_kick(s);
}

/*
 * Connect, then log in: libiscsi's "full connect" would do both (and a
 * TEST UNIT READY) but leaks its small state when the context is destroyed
 * before it finishes (a close while the target is down); these two leave
 * nothing behind. Unit attentions are met by the probe, which retries.
 */
static void socket_cb(struct iscsi_context *iscsi, int status, void *data,
		      void *priv)
{
	struct isd *s = priv;

	(void)data;
	if (iscsi != s->iscsi || s->closing)
		return;
	if (status != SCSI_STATUS_GOOD ||
	    iscsi_lib.iscsi_login_async(iscsi, login_cb, s)) {
		session_failed(s, iscsi);
		return;
	}
	isd_kick(s);
}

static void start_session(struct isd *s)
{
	struct iscsi_context *c = iscsi_lib.iscsi_create_context(s->initiator);
	int err;

	if (!c) {
		snprintf(s->last_error, sizeof(s->last_error),
			 "iscsi_create_context failed");
		goto retry;
	}
	iscsi_lib.iscsi_set_targetname(c, s->target);
	iscsi_lib.iscsi_set_session_type(c, ISCSI_SESSION_NORMAL);
	if (s->chap_user)
		iscsi_lib.iscsi_set_initiator_username_pwd(c, s->chap_user,
						 s->chap_secret);
	if (s->tchap_user)
		iscsi_lib.iscsi_set_target_username_pwd(c, s->tchap_user,
					      s->tchap_secret);
	iscsi_lib.iscsi_set_timeout(c, (int)s->timeout_s);
	/*
	 * Reconnecting is ours: a lost session is torn down and made anew
	 * (reset_session), so every session starts with a login and a probe.
	 * libiscsi's own reconnect needs its "full connect" (which leaks when
	 * destroyed half-way) and would resend commands on its own terms.
	 */
	iscsi_lib.iscsi_set_noautoreconnect(c, 1);
	s->iscsi = c;
	err = iscsi_lib.iscsi_connect_async(c, s->portal, socket_cb, s);
	if (err) {
		snprintf(s->last_error, sizeof(s->last_error), "%s",
			 iscsi_lib.iscsi_get_error(c));
		s->iscsi = NULL;
		iscsi_lib.iscsi_destroy_context(c);
		goto retry;
	}
	if (!s->pump) {
		err = bs_fdpump_new(s->loop, &isd_pump_ops, s, ISD_TICK_MS,
				    &s->pump);
		if (err) {
			snprintf(s->last_error, sizeof(s->last_error),
				 "cannot watch the socket: %s", strerror(-err));
			goto retry;
		}
	}
	isd_kick(s);
	return;
retry:
	s->failed_connects++;
	if (s->opening && s->failed_connects > s->max_retries) {
		open_finish(s, -EIO);
		return;
	}
	isd_reset_session(s, s->last_error);
}

/* ---- probing: capacity, VPD pages, opcodes, caching --------------------- */

static void probe_send(struct isd *s);

static int apply_config(struct isd *s)
{
	struct bs_dev *dev = s->dev;
	struct bs_limits *l = &dev->limits;
	uint32_t flags = l->flags, user = l->max_user_sectors;
	struct sd_config c;
	struct sd_facts *f = &s->nf;
	char why[192];

	f->no_write_same = s->facts.no_write_same || dev->wz_broken;
	f->no_discard = s->facts.no_discard;
	if (sd_config_decide(f, s->max_io, &c)) {
		snprintf(s->last_error, sizeof(s->last_error), "logical block "
			 "size %u is not one blkstack can use", f->lbs);
		open_finish(s, -EINVAL);
		return -EINVAL;
	}
	s->facts = *f;
	s->cfg = c;
	s->nblocks = s->nblocks_new;
	*l = c.limits;
	l->flags = flags;
	l->max_user_sectors = user;
	bs_limits_finish(l);
	if (dev->wz_broken) {
		l->max_write_zeroes_sectors = 0;
		l->features &= ~BS_FEAT_WRITE_ZEROES_UNMAP;
	}
	dev->size = s->nblocks * f->lbs;
	if (!dev->wz_broken) {
		snprintf(why, sizeof(why), "iscsi LBPME=%d LBPRZ=%d LBPU=%d "
			 "LBPWS=%d LBPWS10=%d max_ws_len=%llu",
			 f->lbpme, f->lbprz, f->lbpu, f->lbpws, f->lbpws10,
			 (unsigned long long)f->max_ws_len);
		bs_dev_set_reason(dev, "%s: %.*s", why,
				  (int)(sizeof(dev->wz_reason) - strlen(why) - 3),
				  c.why);
	}
	return 0;
}

static void probe_finish(struct isd *s)
{
	s->probing = false;
	s->rescans++;
	if (apply_config(s))
		return;
	if (s->opening) {
		open_finish(s, 0);
	} else {
		/* a change on the target reaches everything above */
		bs_dev_limits_changed(s->dev);
	}
	if (s->probe_again) {
		s->probe_again = false;
		isd_probe_start(s);
	}
}

static bool vpd_listed(const struct scsi_inquiry_supported_pages *p, int page)
{
	int i;

	for (i = 0; i < p->num_pages; i++)
		if (p->pages[i] == page)
			return true;
	return false;
}

static enum isd_step next_step(struct isd *s, enum isd_step st)
{
	switch (st) {
	case P_RC16:
	case P_RC10:
		return P_VPD00;
	case P_VPD00:
		if (s->vpd_offered[0])
			return P_B0;
		/* fall through */
	case P_B0:
		if (s->vpd_offered[1])
			return P_B1;
		/* fall through */
	case P_B1:
		/* sd reads the provisioning page only with LBPME */
		if (s->vpd_offered[2] && s->nf.lbpme)
			return P_B2;
		/* fall through */
	case P_B2:
		return P_RSOC;
	case P_RSOC:
		return P_MODE;
	default:
		return P_DONE;
	}
}

static void probe_advance(struct isd *s, enum isd_step st)
{
	s->step = st;
	s->step_tries = 0;
	if (st == P_DONE)
		probe_finish(s);
	else
		probe_send(s);
}

static void probe_got(struct isd *s, struct scsi_task *task)
{
	struct sd_facts *f = &s->nf;
	void *d = iscsi_lib.scsi_datain_unmarshall(task);

	switch (s->step) {
	case P_RC16: {
		struct scsi_readcapacity16 *rc = d;

		if (!rc)
			break;
		f->rc16 = true;
		f->lbs = rc->block_length;
		f->lbppbe = rc->lbppbe;
		f->lbpme = rc->lbpme;
		f->lbprz = rc->lbprz;
		s->nblocks_new = rc->returned_lba + 1;
		break;
	}
	case P_RC10: {
		struct scsi_readcapacity10 *rc = d;

		if (!rc)
			break;
		f->lbs = rc->block_size;
		s->nblocks_new = (uint64_t)rc->lba + 1;
		break;
	}
	case P_VPD00: {
		struct scsi_inquiry_supported_pages *p = d;

		if (!p)
			break;
		s->vpd_offered[0] = vpd_listed(p, 0xb0);
		s->vpd_offered[1] = vpd_listed(p, 0xb1);
		s->vpd_offered[2] = vpd_listed(p, 0xb2);
		break;
	}
	case P_B0: {
		struct scsi_inquiry_block_limits *b = d;

		if (!b)
			break;
		f->vpd_b0 = true;
		f->max_xfer_blocks = b->max_xfer_len;
		f->opt_xfer_blocks = b->opt_xfer_len;
		f->opt_gran_blocks = b->opt_gran;
		f->max_unmap_lba = b->max_unmap;
		f->max_unmap_desc = b->max_unmap_bdc;
		f->unmap_gran = b->opt_unmap_gran;
		f->max_ws_len = b->max_ws_len;
		break;
	}
	case P_B1: {
		struct scsi_inquiry_block_device_characteristics *b = d;

		if (!b)
			break;
		f->vpd_b1 = true;
		f->rotation_rate = (uint16_t)b->medium_rotation_rate;
		break;
	}
	case P_B2: {
		struct scsi_inquiry_logical_block_provisioning *b = d;

		if (!b)
			break;
		f->vpd_b2 = true;
		f->lbpu = b->lbpu;
		f->lbpws = b->lbpws;
		f->lbpws10 = b->lbpws10;
		break;
	}
	case P_RSOC: {
		struct scsi_report_supported_op_codes *o = d;
		int i;

		if (!o)
			break;
		f->rsoc = true;
		for (i = 0; i < o->num_descriptors; i++) {
			if (o->descriptors[i].opcode == SCSI_OPCODE_WRITE_SAME16)
				f->ws16 = true;
			if (o->descriptors[i].opcode == SCSI_OPCODE_WRITE_SAME10)
				f->ws10 = true;
		}
		break;
	}
	case P_MODE: {
		struct scsi_mode_sense *ms = d;
		struct scsi_mode_page *pg;

		if (!ms)
			break;
		f->dpofua = ms->device_specific_parameter & 0x10;
		pg = iscsi_lib.scsi_modesense_get_page(ms,
						       SCSI_MODEPAGE_CACHING,
						       0);
		if (pg)
			f->wce = pg->caching.wce;
		break;
	}
	default:
		break;
	}
}

static void probe_cb(struct iscsi_context *iscsi, int status, void *data,
		     void *priv)
{
	struct isd *s = priv;
	struct scsi_task *task = data;
	enum isd_step st = s->step;

	if (s->closing || iscsi != s->iscsi) {
		if (task)
			iscsi_lib.scsi_free_scsi_task(task);
		return;
	}
	if (status == SCSI_STATUS_GOOD) {
		probe_got(s, task);
		iscsi_lib.scsi_free_scsi_task(task);
		if (st == P_RC16 && !s->nf.rc16) {
			probe_advance(s, P_RC10);
			return;
		}
		if ((st == P_RC16 || st == P_RC10) && !s->nf.lbs) {
			snprintf(s->last_error, sizeof(s->last_error),
				 "READ CAPACITY returned nothing usable");
			s->probing = false;
			open_finish(s, -EIO);
			return;
		}
		probe_advance(s, next_step(s, st));
		return;
	}
	/* a unit attention (the target's news) or a lost command: again */
	if ((status == SCSI_STATUS_CHECK_CONDITION &&
	     task->sense.key == SCSI_SENSE_UNIT_ATTENTION) ||
	    status == SCSI_STATUS_BUSY || status == SCSI_STATUS_TASK_SET_FULL ||
	    status == SCSI_STATUS_TIMEOUT || status == SCSI_STATUS_ERROR ||
	    status == SCSI_STATUS_CANCELLED) {
		if (task)
			iscsi_lib.scsi_free_scsi_task(task);
		if (s->step_tries++ < s->max_retries + 2) {
			if (status == SCSI_STATUS_ERROR ||
			    status == SCSI_STATUS_CANCELLED) {
				/* the next session probes from the start */
				s->probing = false;
				isd_reset_session(s, iscsi_lib.iscsi_get_error(iscsi));
				return;
			}
			probe_send(s);
			return;
		}
	} else if (task) {
		snprintf(s->last_error, sizeof(s->last_error), "%s: %s (%s, %s)",
			 st == P_RC16 ? "READ CAPACITY(16)" :
			 st == P_RC10 ? "READ CAPACITY(10)" : "probe",
			 isd_status_str(status),
			 iscsi_lib.scsi_sense_key_str(task->sense.key),
			 iscsi_lib.scsi_sense_ascq_str(task->sense.ascq));
		iscsi_lib.scsi_free_scsi_task(task);
	}
	/* refused: READ CAPACITY 16 falls back to 10, the rest is optional
	 * (sd: no page, no opcodes list, no caching page = write through) */
	switch (st) {
	case P_RC16:
		probe_advance(s, P_RC10);
		return;
	case P_RC10:
		s->probing = false;
		open_finish(s, -EIO);
		return;
	default:
		probe_advance(s, next_step(s, st));
	}
}

static void probe_send(struct isd *s)
{
	struct iscsi_context *c = s->iscsi;
	struct scsi_task *t = NULL;

	if (!c || !s->logged_in) {
		s->probing = false;	/* the next session probes again */
		return;
	}
	switch (s->step) {
	case P_RC16:
		t = iscsi_lib.iscsi_readcapacity16_task(c, s->lun, probe_cb, s);
		break;
	case P_RC10:
		t = iscsi_lib.iscsi_readcapacity10_task(c, s->lun, 0, 0,
							probe_cb, s);
		break;
	case P_VPD00:
		t = iscsi_lib.iscsi_inquiry_task(c, s->lun, 1, 0x00, 255,
						 probe_cb, s);
		break;
	case P_B0:
		t = iscsi_lib.iscsi_inquiry_task(c, s->lun, 1, 0xb0, 255,
						 probe_cb, s);
		break;
	case P_B1:
		t = iscsi_lib.iscsi_inquiry_task(c, s->lun, 1, 0xb1, 255,
						 probe_cb, s);
		break;
	case P_B2:
		t = iscsi_lib.iscsi_inquiry_task(c, s->lun, 1, 0xb2, 255,
						 probe_cb, s);
		break;
	case P_RSOC:
		t = iscsi_lib.iscsi_report_supported_opcodes_task(c, s->lun, 0,
								  0, 0, 0,
								  65535,
								  probe_cb, s);
		break;
	case P_MODE:
		t = iscsi_lib.iscsi_modesense6_task(c, s->lun, 1,
						    SCSI_MODESENSE_PC_CURRENT,
						    SCSI_MODEPAGE_CACHING, 0,
						    255, probe_cb, s);
		break;
	default:
		probe_finish(s);
		return;
	}
	if (!t) {
		snprintf(s->last_error, sizeof(s->last_error), "%s",
			 iscsi_lib.iscsi_get_error(c));
		s->probing = false;
		isd_reset_session(s, s->last_error);
		return;
	}
	isd_kick(s);
}

void isd_probe_start(struct isd *s)
{
	if (s->probing) {
		s->probe_again = true;
		return;
	}
	s->probing = true;
	memset(&s->nf, 0, sizeof(s->nf));
	memset(s->vpd_offered, 0, sizeof(s->vpd_offered));
	probe_advance(s, P_RC16);
}

void isd_session_begin(struct isd *s)
{
	s->open_timer = bs_loop_add_timer(s->loop, (uint64_t)s->timeout_s * 1000,
					  open_timeout, s);
	if (s->open_timer < 0)
		s->open_timer = 0;
	start_session(s);
}
