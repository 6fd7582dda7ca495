/* SPDX-License-Identifier: MIT */
/*
 * iscsi: a LUN of a remote iSCSI target as a blkstack device (the "sd"
 * driver: blkstack as an initiator), on libiscsi's asynchronous API.
 *
 * One session per device, on the context's main loop: the socket is
 * watched through bs_fdpump (get_fd / which_events / service, a 100 ms
 * tick for libiscsi's timeouts and reconnect back-off). A libiscsi context
 * is not thread-safe, so requests submitted on an I/O thread are handed to
 * the main loop (bs_loop_send, no allocation) and complete back on their
 * own loop through bs_req_complete(). Many commands are in flight at once;
 * libiscsi holds those beyond the target's MaxCmdSN window in its queue.
 *
 * Opening (and again after every UNIT ATTENTION): READ CAPACITY 16 (10
 * when refused), INQUIRY VPD 00 and then B0, B1, B2 when offered (B2 only
 * with LBPME, as sd), REPORT SUPPORTED OPERATION CODES, MODE SENSE(6) of
 * the caching page. The decision is sd's (drivers/sd_config.c). After a
 * unit attention the new limits go through bs_dev_limits_changed(), so
 * every device above restacks.
 *
 * Errors: UNIT ATTENTION -> rescan, command retried at once; NOT READY,
 * BUSY, TASK SET FULL, ABORTED COMMAND, a timeout or a lost connection ->
 * retried after reconnect_ms, at most max_retries times, then -EIO. A lost
 * connection is re-established by libiscsi (at most max_retries tries;
 * commands wait in its queue); when it gives up, the session is torn down
 * and made anew every reconnect_ms while requests fail at their deadline.
 * ILLEGAL REQUEST (invalid opcode / field in CDB) on a WRITE SAME used to
 * zero turns write-zeroes off for good (sd_disable_write_same) and the
 * core falls back to writing zeroes; on a discard it turns discard off
 * (sd_disable_discard).
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include <blkstack/bdev.h>
#include <blkstack/fdpump.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "drivers/sd_config.h"

#define ISD_TICK_MS 100
#define ISD_IOV_INLINE 8
#define ISD_ZERO_BLOCK 65536	/* the largest logical block */

struct isd;

/* Per request (the core's per-request context). */
struct isd_req {
	struct isd_req *prev, *next;	/* s->reqs: owned by the driver */
	struct bs_req *req;
	struct isd *s;
	struct bs_work work;		/* hand-over to the main loop */
	struct scsi_task *task;		/* in flight, else NULL */
	int timer;			/* retry timer, else 0 */
	bool waiting;			/* for a session */
	bool expired;			/* cancelled by the deadline */
	unsigned tries;
	uint64_t deadline_ns;
	uint8_t opcode;			/* the command last sent */
	bool ws_unmap;			/* ... a WRITE SAME with UNMAP */
	struct scsi_iovec iov_inline[ISD_IOV_INLINE];
	struct scsi_iovec *iov;
	struct unmap_list ul;
};

enum isd_step {
	P_RC16, P_RC10, P_VPD00, P_B0, P_B1, P_B2, P_RSOC, P_MODE, P_DONE
};

struct isd {
	struct bs_dev *dev;
	struct bs_loop *loop;		/* the main loop: everything runs here */
	struct iscsi_context *iscsi;
	struct bs_fdpump *pump;

	/* configuration */
	char *portal, *target, *initiator;
	char *chap_user, *chap_secret, *tchap_user, *tchap_secret;
	int lun;
	uint32_t max_io;
	unsigned timeout_s, max_retries, reconnect_ms;

	/* session */
	bool logged_in;
	bool closing;
	int reset_timer;		/* a new session after reconnect_ms */
	unsigned connects;		/* sessions made (1 = the first) */
	unsigned failed_connects;	/* in a row */
	char last_error[256];

	/* the probe (open and rescans) */
	bool opening;			/* the device waits for the first probe */
	bool probing, probe_again;
	enum isd_step step;
	unsigned step_tries;
	bool vpd_offered[3];		/* B0, B1, B2 */
	struct sd_facts nf;		/* facts being read */
	uint64_t nblocks_new;
	struct bs_work open_work;	/* bs_dev_open_done(), deferred */
	int open_err;
	int open_timer;

	/* what was decided */
	struct sd_facts facts;
	struct sd_config cfg;
	uint64_t nblocks;
	uint8_t *zero;			/* a zero block for WRITE SAME */

	/* requests owned by the driver */
	struct isd_req *reqs;
	unsigned nreqs;

	/* counters for describe() */
	uint64_t unit_attentions, rescans, retries, expired, reconnects;
};

static const char *isd_status_str(int status)
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
static void issue(struct isd_req *r);
static void probe_start(struct isd *s);

static int pump_get_fd(void *lib)
{
	struct isd *s = lib;

	return s->iscsi ? iscsi_get_fd(s->iscsi) : -1;
}

static uint32_t pump_events(void *lib)
{
	struct isd *s = lib;

	/* POLLIN/POLLOUT have the values of EPOLLIN/EPOLLOUT on Linux */
	return s->iscsi ? (uint32_t)iscsi_which_events(s->iscsi) : 0;
}

static int pump_service(void *lib, uint32_t revents)
{
	struct isd *s = lib;

	if (!s->iscsi)
		return 0;
	return iscsi_service(s->iscsi, (int)revents) < 0 ? -EIO : 0;
}

static void reset_session(struct isd *s, const char *why);

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
			if (r->task && s->iscsi) {
				/* calls back at once, cancelled */
				if (iscsi_scsi_cancel_task(s->iscsi, r->task))
					reset_session(s, "a command past its "
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
			issue(r);
			again = true;
			break;
		}
	}
}

static void pump_tick(void *lib)
{
	struct isd *s = lib;

	/* libiscsi's timeouts and reconnect back-off run in its service */
	if (s->iscsi && iscsi_get_fd(s->iscsi) >= 0 &&
	    iscsi_service(s->iscsi, 0) < 0)
		reset_session(s, iscsi_get_error(s->iscsi));
	watchdog(s);
}

static void pump_error(void *lib, int err)
{
	struct isd *s = lib;

	reset_session(s, s->iscsi ? iscsi_get_error(s->iscsi) : strerror(-err));
}

static const struct bs_fdpump_ops isd_pump_ops = {
	.get_fd = pump_get_fd,
	.events = pump_events,
	.service = pump_service,
	.tick = pump_tick,
	.on_error = pump_error,
};

static void kick(struct isd *s)
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
	if (s->pump)
		bs_fdpump_update(s->pump);	/* stop watching its fd */
	if (old)
		iscsi_destroy_context(old);	/* callbacks: cancelled */
	start_session(s);
}

static void reset_session(struct isd *s, const char *why)
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
		 iscsi_get_error(c));
	s->failed_connects++;
	if (s->opening && s->failed_connects > s->max_retries) {
		open_finish(s, -EIO);
		return;
	}
	reset_session(s, s->last_error);
}

static void login_cb(struct iscsi_context *iscsi, int status, void *data,
		     void *priv)
{
	struct isd *s = priv;
	struct isd_req *r;

	(void)data;
	if (iscsi != s->iscsi || s->closing)
		return;
	if (status != SCSI_STATUS_GOOD) {
		session_failed(s, iscsi);
		return;
	}
	s->logged_in = true;
	s->failed_connects = 0;
	s->connects++;
	if (s->connects > 1)
		s->reconnects++;
	s->last_error[0] = '\0';
	/* the capacity and VPDs first at open; after a new session the
	 * target may have changed: read them again */
	probe_start(s);
	for (r = s->reqs; r; r = r->next)
		if (r->waiting && !r->timer) {
			r->waiting = false;
			issue(r);
		}
	kick(s);
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
	    iscsi_login_async(iscsi, login_cb, s)) {
		session_failed(s, iscsi);
		return;
	}
	kick(s);
}

static void start_session(struct isd *s)
{
	struct iscsi_context *c = iscsi_create_context(s->initiator);
	int err;

	if (!c) {
		snprintf(s->last_error, sizeof(s->last_error),
			 "iscsi_create_context failed");
		goto retry;
	}
	iscsi_set_targetname(c, s->target);
	iscsi_set_session_type(c, ISCSI_SESSION_NORMAL);
	if (s->chap_user)
		iscsi_set_initiator_username_pwd(c, s->chap_user,
						 s->chap_secret);
	if (s->tchap_user)
		iscsi_set_target_username_pwd(c, s->tchap_user,
					      s->tchap_secret);
	iscsi_set_timeout(c, (int)s->timeout_s);
	/*
	 * Reconnecting is ours: a lost session is torn down and made anew
	 * (reset_session), so every session starts with a login and a probe.
	 * libiscsi's own reconnect needs its "full connect" (which leaks when
	 * destroyed half-way) and would resend commands on its own terms.
	 */
	iscsi_set_noautoreconnect(c, 1);
	s->iscsi = c;
	err = iscsi_connect_async(c, s->portal, socket_cb, s);
	if (err) {
		snprintf(s->last_error, sizeof(s->last_error), "%s",
			 iscsi_get_error(c));
		s->iscsi = NULL;
		iscsi_destroy_context(c);
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
	kick(s);
	return;
retry:
	s->failed_connects++;
	if (s->opening && s->failed_connects > s->max_retries) {
		open_finish(s, -EIO);
		return;
	}
	reset_session(s, s->last_error);
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
		probe_start(s);
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
	void *d = scsi_datain_unmarshall(task);

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
		pg = scsi_modesense_get_page(ms, SCSI_MODEPAGE_CACHING, 0);
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
			scsi_free_scsi_task(task);
		return;
	}
	if (status == SCSI_STATUS_GOOD) {
		probe_got(s, task);
		scsi_free_scsi_task(task);
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
			scsi_free_scsi_task(task);
		if (s->step_tries++ < s->max_retries + 2) {
			if (status == SCSI_STATUS_ERROR ||
			    status == SCSI_STATUS_CANCELLED) {
				/* the next session probes from the start */
				s->probing = false;
				reset_session(s, iscsi_get_error(iscsi));
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
			 scsi_sense_key_str(task->sense.key),
			 scsi_sense_ascq_str(task->sense.ascq));
		scsi_free_scsi_task(task);
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
		t = iscsi_readcapacity16_task(c, s->lun, probe_cb, s);
		break;
	case P_RC10:
		t = iscsi_readcapacity10_task(c, s->lun, 0, 0, probe_cb, s);
		break;
	case P_VPD00:
		t = iscsi_inquiry_task(c, s->lun, 1, 0x00, 255, probe_cb, s);
		break;
	case P_B0:
		t = iscsi_inquiry_task(c, s->lun, 1, 0xb0, 255, probe_cb, s);
		break;
	case P_B1:
		t = iscsi_inquiry_task(c, s->lun, 1, 0xb1, 255, probe_cb, s);
		break;
	case P_B2:
		t = iscsi_inquiry_task(c, s->lun, 1, 0xb2, 255, probe_cb, s);
		break;
	case P_RSOC:
		t = iscsi_report_supported_opcodes_task(c, s->lun, 0, 0, 0, 0,
							65535, probe_cb, s);
		break;
	case P_MODE:
		t = iscsi_modesense6_task(c, s->lun, 1, SCSI_MODESENSE_PC_CURRENT,
					  SCSI_MODEPAGE_CACHING, 0, 255,
					  probe_cb, s);
		break;
	default:
		probe_finish(s);
		return;
	}
	if (!t) {
		snprintf(s->last_error, sizeof(s->last_error), "%s",
			 iscsi_get_error(c));
		s->probing = false;
		reset_session(s, s->last_error);
		return;
	}
	kick(s);
}

static void probe_start(struct isd *s)
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

/* ---- requests ------------------------------------------------------------ */

static void finish(struct isd_req *r, int res)
{
	struct isd *s = r->s;

	if (r->prev)
		r->prev->next = r->next;
	else
		s->reqs = r->next;
	if (r->next)
		r->next->prev = r->prev;
	s->nreqs--;
	if (r->iov != r->iov_inline)
		free(r->iov);
	r->iov = NULL;
	bs_req_complete(r->req, res);
}

static void retry_timer(void *arg)
{
	struct isd_req *r = arg;

	r->timer = 0;
	issue(r);
}

/* Try @r again, now or after reconnect_ms; -EIO after max_retries. */
static void retry(struct isd_req *r, bool later, const char *why)
{
	struct isd *s = r->s;

	if (r->tries++ >= s->max_retries || r->expired) {
		bs_error(-EIO, "%s: iscsi %s/%d: %s %s after %u tries",
			 s->dev->name, s->target, s->lun,
			 bs_op_name(r->req->op), why, r->tries);
		finish(r, -EIO);
		return;
	}
	s->retries++;
	if (later) {
		r->timer = bs_loop_add_timer(s->loop, s->reconnect_ms,
					     retry_timer, r);
		if (r->timer > 0)
			return;
		r->timer = 0;
	}
	issue(r);
}

static void disable_write_same(struct isd *s, const char *cmd)
{
	char why[192];

	s->facts.no_write_same = true;
	snprintf(why, sizeof(why), "iscsi %s/%d: %s refused with ILLEGAL "
		 "REQUEST (EOPNOTSUPP) at run time: write same off, as sd "
		 "does", s->target, s->lun, cmd);
	bs_dev_disable_write_zeroes(s->dev, why);
}

static void disable_discard(struct isd *s)
{
	s->facts.no_discard = true;
	s->cfg.prov = SD_LBP_DISABLE;
	s->dev->limits.max_discard_sectors = 0;
	bs_dev_limits_changed(s->dev);
}

static void task_cb(struct iscsi_context *iscsi, int status, void *data,
		    void *priv)
{
	struct isd_req *r = priv;
	struct isd *s = r->s;
	struct scsi_task *task = data;
	struct scsi_sense sense = { 0 };
	uint32_t residual = 0;

	if (task) {
		sense = task->sense;
		if (task->residual_status == SCSI_RESIDUAL_UNDERFLOW)
			residual = (uint32_t)task->residual;
		scsi_free_scsi_task(task);
	}
	r->task = NULL;
	if (s->closing) {
		finish(r, -EIO);
		return;
	}
	switch (status) {
	case SCSI_STATUS_GOOD:
		if (residual && (r->req->op == BS_OP_READ ||
				 r->req->op == BS_OP_WRITE)) {
			bs_error(-EIO, "%s: iscsi: %s short by %u bytes",
				 s->dev->name, bs_op_name(r->req->op), residual);
			finish(r, -EIO);
			return;
		}
		finish(r, 0);
		return;
	case SCSI_STATUS_CHECK_CONDITION:
		switch (sense.key) {
		case SCSI_SENSE_UNIT_ATTENTION:
			/* the target's news: read it again, then carry on */
			s->unit_attentions++;
			probe_start(s);
			retry(r, false, "unit attention");
			return;
		case SCSI_SENSE_NOT_READY:
		case SCSI_SENSE_COMMAND_ABORTED:
			retry(r, true, scsi_sense_key_str(sense.key));
			return;
		case SCSI_SENSE_ILLEGAL_REQUEST:
			if ((sense.ascq >> 8) == 0x20 || (sense.ascq >> 8) == 0x24) {
				if (r->req->op == BS_OP_WRITE_ZEROES &&
				    (r->opcode == SCSI_OPCODE_WRITE_SAME16 ||
				     r->opcode == SCSI_OPCODE_WRITE_SAME10)) {
					disable_write_same(s, r->opcode ==
						SCSI_OPCODE_WRITE_SAME16 ?
						"WRITE SAME(16)" : "WRITE SAME(10)");
					finish(r, -EOPNOTSUPP);
					return;
				}
				if (r->req->op == BS_OP_DISCARD) {
					disable_discard(s);
					finish(r, -EOPNOTSUPP);
					return;
				}
			}
			break;
		default:
			break;
		}
		bs_error(-EIO, "%s: iscsi %s/%d: %s: %s, %s", s->dev->name,
			 s->target, s->lun, bs_op_name(r->req->op),
			 scsi_sense_key_str(sense.key),
			 scsi_sense_ascq_str(sense.ascq));
		finish(r, -EIO);
		return;
	case SCSI_STATUS_BUSY:
	case SCSI_STATUS_TASK_SET_FULL:
	case SCSI_STATUS_TIMEOUT:
		retry(r, true, isd_status_str(status));
		return;
	case SCSI_STATUS_ERROR:
	case SCSI_STATUS_CANCELLED:
		if (r->expired) {
			retry(r, false, "deadline passed");
			return;
		}
		/* the session went away (libiscsi cancels what it held):
		 * make a new one; the request waits for it, within its
		 * deadline */
		if (iscsi == s->iscsi)
			reset_session(s, iscsi_get_error(iscsi));
		s->retries++;
		issue(r);
		return;
	default:
		bs_error(-EIO, "%s: iscsi: %s: %s", s->dev->name,
			 bs_op_name(r->req->op), isd_status_str(status));
		finish(r, -EIO);
	}
}

static int prep_iov(struct isd_req *r)
{
	struct bs_req *req = r->req;
	int i;

	if (r->iov)
		return 0;
	r->iov = req->iovcnt <= ISD_IOV_INLINE ? r->iov_inline
		 : calloc((size_t)req->iovcnt, sizeof(*r->iov));
	if (!r->iov)
		return -ENOMEM;
	for (i = 0; i < req->iovcnt; i++) {
		r->iov[i].iov_base = req->iov[i].iov_base;
		r->iov[i].iov_len = req->iov[i].iov_len;
	}
	return 0;
}

static struct scsi_task *send_ws(struct isd_req *r, uint64_t lba,
				 uint32_t n, bool ws16, bool unmap)
{
	struct isd *s = r->s;
	uint32_t lbs = s->facts.lbs;

	r->ws_unmap = unmap;
	if (ws16) {
		r->opcode = SCSI_OPCODE_WRITE_SAME16;
		return iscsi_writesame16_task(s->iscsi, s->lun, lba, s->zero,
					      lbs, n, 0, unmap, 0, 0, task_cb,
					      r);
	}
	r->opcode = SCSI_OPCODE_WRITE_SAME10;
	return iscsi_writesame10_task(s->iscsi, s->lun, (uint32_t)lba, s->zero,
				      lbs, (uint16_t)n, 0, unmap, 0, 0,
				      task_cb, r);
}

/* Send @r's command now (on the main loop), or queue it for a session. */
static void issue(struct isd_req *r)
{
	struct isd *s = r->s;
	struct bs_req *req = r->req;
	struct scsi_task *t = NULL;
	uint32_t lbs = s->facts.lbs;
	uint64_t lba = req->offset / lbs, n = req->len / lbs;
	bool fua = req->flags & BS_REQ_FUA;
	int err;

	if (r->expired) {
		bs_error(-EIO, "%s: iscsi %s/%d: %s not done within its "
			 "deadline (%s)", s->dev->name, s->target, s->lun,
			 bs_op_name(req->op), s->last_error[0] ? s->last_error
							       : "no answer");
		finish(r, -EIO);
		return;
	}
	if (!s->iscsi || !s->logged_in) {
		r->waiting = true;
		return;
	}
	switch (req->op) {
	case BS_OP_READ:
		if ((err = prep_iov(r)))
			goto fail;
		r->opcode = 0x88;
		t = iscsi_read16_iov_task(s->iscsi, s->lun, lba,
					  (uint32_t)req->len, (int)lbs, 0, 0, 0,
					  0, 0, task_cb, r, r->iov,
					  req->iovcnt);
		break;
	case BS_OP_WRITE:
		if ((err = prep_iov(r)))
			goto fail;
		r->opcode = 0x8a;
		t = iscsi_write16_iov_task(s->iscsi, s->lun, lba, NULL,
					   (uint32_t)req->len, (int)lbs, 0, 0,
					   fua, 0, 0, task_cb, r, r->iov,
					   req->iovcnt);
		break;
	case BS_OP_FLUSH:
		r->opcode = 0x91;
		t = iscsi_synchronizecache16_task(s->iscsi, s->lun, 0, 0, 0, 0,
						  task_cb, r);
		break;
	case BS_OP_WRITE_ZEROES: {
		enum sd_zeroing z = s->cfg.zeroing;
		/* unmap only when asked, and the user's knob allows it */
		bool may_unmap = !(req->flags & BS_REQ_NOUNMAP) &&
				 bs_dev_write_zeroes_unmap(s->dev);

		if (!s->cfg.max_ws_blocks || s->facts.no_write_same) {
			err = -EOPNOTSUPP;	/* the core writes zeroes */
			goto fail;
		}
		if (may_unmap && z == SD_ZERO_WS16_UNMAP)
			t = send_ws(r, lba, (uint32_t)n, true, true);
		else if (may_unmap && z == SD_ZERO_WS10_UNMAP)
			t = send_ws(r, lba, (uint32_t)n,
				    lba > 0xffffffffull || n > SD_MAX_WS10_BLOCKS,
				    true);
		else
			t = send_ws(r, lba, (uint32_t)n,
				    sd_nounmap_ws16(&s->facts, lba, n), false);
		break;
	}
	case BS_OP_DISCARD:
		switch (s->cfg.prov) {
		case SD_LBP_UNMAP:
			r->opcode = 0x42;
			r->ul.lba = lba;
			r->ul.num = (uint32_t)n;
			t = iscsi_unmap_task(s->iscsi, s->lun, 0, 0, &r->ul, 1,
					     task_cb, r);
			break;
		case SD_LBP_WS16:
			t = send_ws(r, lba, (uint32_t)n, true, true);
			break;
		case SD_LBP_WS10:
			t = send_ws(r, lba, (uint32_t)n,
				    lba > 0xffffffffull || n > SD_MAX_WS10_BLOCKS,
				    true);
			break;
		default:
			err = -EOPNOTSUPP;
			goto fail;
		}
		break;
	default:
		err = -EOPNOTSUPP;
		goto fail;
	}
	if (!t) {
		/* libiscsi could not queue it (memory, or no session) */
		snprintf(s->last_error, sizeof(s->last_error), "%s",
			 iscsi_get_error(s->iscsi));
		retry(r, true, s->last_error);
		return;
	}
	r->task = t;
	kick(s);
	return;
fail:
	finish(r, err);
}

/* On the main loop: take @r into the driver's list and send it. */
static void start_req(void *arg)
{
	struct isd_req *r = arg;
	struct isd *s = r->s;
	/* the longest a request may take, retries and reconnects included */
	r->deadline_ns = bs_now_ns() + s->timeout_s * 1000000000ull;
	r->prev = NULL;
	r->next = s->reqs;
	if (s->reqs)
		s->reqs->prev = r;
	s->reqs = r;
	s->nreqs++;
	issue(r);
}

static void isd_submit(struct bs_dev *dev, struct bs_req *req)
{
	struct isd *s = dev->priv;
	struct isd_req *r = bs_req_drv(req);

	r->req = req;
	r->s = s;
	r->iov = NULL;
	r->task = NULL;
	r->timer = 0;
	r->waiting = r->expired = false;
	r->tries = 0;
	if (bs_loop_is_current(s->loop)) {
		start_req(r);
		return;
	}
	/* libiscsi's context belongs to the main loop */
	r->work.fn = start_req;
	r->work.arg = r;
	bs_loop_send(s->loop, &r->work);
}

/* ---- the device type ---------------------------------------------------- */

static void isd_free(struct isd *s)
{
	free(s->portal);
	free(s->target);
	free(s->initiator);
	free(s->chap_user);
	free(s->chap_secret);
	free(s->tchap_user);
	free(s->tchap_secret);
	free(s->zero);
	free(s);
}

static char *dup_opt(struct bs_opts *opts, const char *key)
{
	const char *v = bs_opts_get(opts, key);

	return v && *v ? strdup(v) : NULL;
}

static int parse_target(struct isd *s, struct bs_opts *opts)
{
	struct bs_dev *dev = s->dev;
	const char *url = bs_opts_get(opts, "url");
	const char *portal = bs_opts_get(opts, "portal");
	const char *iqn = bs_opts_get(opts, "iqn");
	uint32_t lun = 0;
	int err;

	if ((err = bs_opts_get_u32(opts, "lun", &lun)) < 0)
		return err;
	if (url && *url) {
		struct iscsi_context *c = iscsi_create_context(s->initiator);
		struct iscsi_url *u;

		if (portal || iqn)
			return bs_error(-EINVAL, "%s: iscsi: give url or "
					"portal + iqn, not both", dev->name);
		if (!c)
			return -ENOMEM;
		u = iscsi_parse_full_url(c, url);
		if (!u) {
			err = bs_error(-EINVAL, "%s: iscsi: url %s: %s (want "
				       "iscsi://HOST[:PORT]/IQN/LUN)",
				       dev->name, url, iscsi_get_error(c));
			iscsi_destroy_context(c);
			return err;
		}
		s->portal = strdup(u->portal);
		s->target = strdup(u->target);
		s->lun = u->lun;
		if (u->user[0] && !s->chap_user) {
			s->chap_user = strdup(u->user);
			s->chap_secret = strdup(u->passwd);
		}
		iscsi_destroy_url(u);
		iscsi_destroy_context(c);
	} else {
		if (!portal || !*portal || !iqn || !*iqn)
			return bs_error(-EINVAL, "%s: iscsi needs url = "
					"iscsi://HOST[:PORT]/IQN/LUN (or portal "
					"= HOST[:PORT] and iqn = IQN)",
					dev->name);
		s->portal = strdup(portal);
		s->target = strdup(iqn);
		s->lun = (int)lun;
	}
	if (!s->portal || !s->target)
		return -ENOMEM;
	if (s->lun < 0 || s->lun > 16383)
		return bs_error(-EINVAL, "%s: iscsi: lun %d: 0..16383",
				dev->name, s->lun);
	return 0;
}

static int isd_open(struct bs_dev *dev, struct bs_opts *opts)
{
	struct isd *s = calloc(1, sizeof(*s));
	char host[64] = "localhost", ini[160];
	uint64_t max_io = 1u << 20;
	uint32_t timeout = 30, retries = 5, rms = 1000;
	int err;

	if (!s)
		return -ENOMEM;
	s->dev = dev;
	s->loop = bs_ctx_loop(dev->ctx);
	if ((err = bs_opts_get_u32(opts, "timeout", &timeout)) < 0 ||
	    (err = bs_opts_get_u32(opts, "max_retries", &retries)) < 0 ||
	    (err = bs_opts_get_u32(opts, "reconnect_ms", &rms)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_io", &max_io)) < 0)
		goto fail;
	if (timeout < 1 || timeout > 3600 || retries > 100 || rms < 10 ||
	    rms > 600000 || max_io < 4096 || max_io > (64u << 20)) {
		err = bs_error(-EINVAL, "%s: iscsi: timeout 1..3600 s, "
			       "max_retries 0..100, reconnect_ms 10..600000, "
			       "max_io 4K..64M", dev->name);
		goto fail;
	}
	s->timeout_s = timeout;
	s->max_retries = retries;
	s->reconnect_ms = rms;
	s->max_io = (uint32_t)max_io;
	s->initiator = dup_opt(opts, "initiator");
	if (!s->initiator) {
		gethostname(host, sizeof(host) - 1);
		snprintf(ini, sizeof(ini), "iqn.2026-12.org.blkstack:initiator-%s",
			 host);
		s->initiator = strdup(ini);
	}
	s->chap_user = dup_opt(opts, "chap_user");
	s->chap_secret = dup_opt(opts, "chap_secret");
	s->tchap_user = dup_opt(opts, "target_chap_user");
	s->tchap_secret = dup_opt(opts, "target_chap_secret");
	if (!s->initiator) {
		err = -ENOMEM;
		goto fail;
	}
	if (!s->chap_user != !s->chap_secret ||
	    !s->tchap_user != !s->tchap_secret ||
	    (s->tchap_user && !s->chap_user)) {
		err = bs_error(-EINVAL, "%s: iscsi: chap_user and chap_secret "
			       "go together (and target_chap_* need them)",
			       dev->name);
		goto fail;
	}
	if ((err = parse_target(s, opts)))
		goto fail;
	s->zero = calloc(1, ISD_ZERO_BLOCK);
	if (!s->zero) {
		err = -ENOMEM;
		goto fail;
	}
	dev->priv = s;
	s->opening = true;
	snprintf(dev->state_reason, sizeof(dev->state_reason),
		 "connecting to %s, %s lun %d", s->portal, s->target, s->lun);
	s->open_timer = bs_loop_add_timer(s->loop, (uint64_t)timeout * 1000,
					  open_timeout, s);
	if (s->open_timer < 0)
		s->open_timer = 0;
	start_session(s);
	return BS_OPEN_PENDING;
fail:
	isd_free(s);
	return err;
}

static void logout_cb(struct iscsi_context *iscsi, int status, void *data,
		      void *priv)
{
	(void)iscsi;
	(void)status;
	(void)data;
	*(bool *)priv = true;
}

static void isd_close(struct bs_dev *dev)
{
	struct isd *s = dev->priv;
	uint64_t until = bs_now_ns() + 2000000000ull;
	struct isd_req *r;

	if (!s)
		return;
	/* let what is in flight finish, a little */
	while (s->nreqs && s->iscsi && bs_now_ns() < until)
		if (bs_loop_run_once(s->loop, 50))
			break;
	s->closing = true;
	if (s->open_work.fn)
		bs_loop_cancel_work(s->loop, &s->open_work);
	if (s->open_timer)
		bs_loop_cancel_timer(s->loop, s->open_timer);
	if (s->reset_timer)
		bs_loop_cancel_timer(s->loop, s->reset_timer);
	if (s->iscsi && s->logged_in) {
		bool done = false;

		until = bs_now_ns() + 1000000000ull;
		if (!iscsi_logout_async(s->iscsi, logout_cb, &done)) {
			kick(s);
			while (!done && bs_now_ns() < until)
				if (bs_loop_run_once(s->loop, 50))
					break;
		}
	}
	bs_fdpump_free(s->pump);
	s->pump = NULL;
	if (s->iscsi)
		iscsi_destroy_context(s->iscsi);	/* cancels the rest */
	s->iscsi = NULL;
	while ((r = s->reqs)) {
		if (r->timer)
			bs_loop_cancel_timer(s->loop, r->timer);
		r->timer = 0;
		finish(r, -EIO);
	}
	isd_free(s);
	dev->priv = NULL;
}

static void isd_describe(struct bs_dev *dev, bs_kv_fn kv, void *arg)
{
	struct isd *s = dev->priv;
	const struct sd_facts *f;

	if (!s)
		return;
	f = &s->facts;
	kv(arg, "portal", "%s", s->portal);
	kv(arg, "target", "%s", s->target);
	kv(arg, "lun", "%d", s->lun);
	kv(arg, "initiator", "%s", s->initiator);
	kv(arg, "chap", "%s", s->tchap_user ? "mutual" : s->chap_user ? "yes"
								    : "no");
	kv(arg, "session", "%s (sessions made %u, reconnects %llu)",
	   s->logged_in ? "logged in" : "down", s->connects,
	   (unsigned long long)s->reconnects);
	if (s->last_error[0])
		kv(arg, "last_error", "%s", s->last_error);
	kv(arg, "policy", "timeout %u s, max_retries %u, reconnect_ms %u",
	   s->timeout_s, s->max_retries, s->reconnect_ms);
	kv(arg, "read_capacity", "%s: %llu blocks of %u, LBPPBE %u",
	   f->rc16 ? "16" : "10", (unsigned long long)s->nblocks, f->lbs,
	   f->lbppbe);
	kv(arg, "lbpme", "%d", f->lbpme);
	kv(arg, "lbprz", "%d", f->lbprz);
	kv(arg, "vpd_b2", "%s: LBPU=%d LBPWS=%d LBPWS10=%d",
	   f->vpd_b2 ? "read" : "not read", f->lbpu, f->lbpws, f->lbpws10);
	kv(arg, "vpd_b0", "%s: max transfer %u, max write same length %llu, "
	   "max unmap LBA count %u, max unmap descriptors %u, optimal unmap "
	   "granularity %u (blocks)", f->vpd_b0 ? "read" : "not offered",
	   f->max_xfer_blocks, (unsigned long long)f->max_ws_len,
	   f->max_unmap_lba, f->max_unmap_desc, f->unmap_gran);
	kv(arg, "opcodes", "%s: WRITE SAME(16) %s, WRITE SAME(10) %s",
	   f->rsoc ? "listed" : "no REPORT SUPPORTED OPERATION CODES",
	   f->ws16 ? "yes" : "no", f->ws10 ? "yes" : "no");
	kv(arg, "zeroing_mode", "%s (%u blocks per WRITE SAME)%s",
	   sd_zeroing_name(s->cfg.zeroing), s->cfg.max_ws_blocks,
	   f->no_write_same ? ", WRITE SAME refused at run time" : "");
	kv(arg, "provisioning_mode", "%s (%u blocks per discard)%s",
	   sd_prov_name(s->cfg.prov), s->cfg.max_discard_blocks,
	   f->no_discard ? ", refused at run time" : "");
	kv(arg, "decision", "%s", s->cfg.why);
	kv(arg, "cache", "WCE=%d DPOFUA=%d", f->wce, f->dpofua);
	kv(arg, "unit_attentions", "%llu (rescans %llu)",
	   (unsigned long long)s->unit_attentions,
	   (unsigned long long)s->rescans);
	kv(arg, "retries", "%llu (failed at the deadline %llu)",
	   (unsigned long long)s->retries, (unsigned long long)s->expired);
}

static const struct bs_dev_type iscsi_type = {
	.name = "iscsi",
	.req_ctx_size = sizeof(struct isd_req),
	.spec_key = "url",
	.summary = "a LUN of a remote iSCSI target (libiscsi), decided as Linux's sd",
	.options =
		"url=iscsi://HOST[:PORT]/IQN/LUN  the LUN (iscsi:URL)\n"
		"portal=HOST[:PORT], iqn=IQN, lun=N  the same, as keys\n"
		"initiator=IQN        our name (iqn.2026-12.org.blkstack:initiator-HOST)\n"
		"chap_user=, chap_secret=  CHAP credentials (none)\n"
		"target_chap_user=, target_chap_secret=  mutual CHAP (none)\n"
		"timeout=SECONDS      longest a request (retries included) or the open\n"
		"                     may take; then -EIO (30)\n"
		"max_retries=N        retries of a command, reconnects (5)\n"
		"reconnect_ms=MS      delay before a retry or a new session (1000)\n"
		"max_io=SIZE          largest READ/WRITE, below the target's (1M)\n",
	.open = isd_open,
	.close = isd_close,
	.submit = isd_submit,
	.describe = isd_describe,
};

BS_DEV_TYPE(iscsi_type)
