/* SPDX-License-Identifier: MIT */
/*
 * iscsi: a LUN of a remote iSCSI target as a blkstack device (the "sd"
 * driver: blkstack as an initiator), on libiscsi's asynchronous API.
 *
 * This file: the device type (options, open, close, describe) and the
 * requests; iscsi_session.c: sessions, reconnects and the probe.
 *
 * One session per device, on the context's main loop: the socket is
 * watched through bs_fdpump (get_fd / which_events / service, a 100 ms
 * tick for libiscsi's timeouts and the requests' deadlines). A libiscsi
 * context is not thread-safe, so requests submitted on an I/O thread are
 * handed to the main loop (bs_loop_send, no allocation) and complete back
 * on their own loop through bs_req_complete(). Many commands are in flight
 * at once; libiscsi holds those beyond the target's MaxCmdSN window in its
 * queue.
 *
 * Opening (and again after every UNIT ATTENTION and new session): READ
 * CAPACITY 16 (10 when refused), INQUIRY VPD 00 and then B0, B1, B2 when
 * offered (B2 only with LBPME, as sd), REPORT SUPPORTED OPERATION CODES,
 * MODE SENSE(6) of the caching page. The decision is sd's
 * (drivers/sd_config.c). After the open, new limits go through
 * bs_dev_limits_changed(), so every device above restacks.
 *
 * Errors: UNIT ATTENTION -> rescan, command retried at once; NOT READY,
 * BUSY, TASK SET FULL, ABORTED COMMAND, a timeout -> retried after
 * reconnect_ms, at most max_retries times, then -EIO. A lost connection:
 * the session is torn down and made anew after reconnect_ms (and again
 * while that fails); its commands wait for the new one. No request lives
 * longer than `timeout` seconds: then -EIO.
 * ILLEGAL REQUEST (invalid opcode / field in CDB) on a WRITE SAME used to
 * zero turns write-zeroes off for good (sd_disable_write_same) and the
 * core falls back to writing zeroes; on a discard it turns discard off
 * (sd_disable_discard).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <blkstack/opts.h>

#include "drivers/iscsi.h"

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
	isd_issue(r);
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
	isd_issue(r);
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
		iscsi_lib.scsi_free_scsi_task(task);
	}
	r->task = NULL;
	if (s->closing) {
		finish(r, -EIO);
		return;
	}
	if (iscsi == s->iscsi)
		isd_note_activity(s);
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
			isd_probe_start(s);
			retry(r, false, "unit attention");
			return;
		case SCSI_SENSE_NOT_READY:
		case SCSI_SENSE_COMMAND_ABORTED:
			retry(r, true, iscsi_lib.scsi_sense_key_str(sense.key));
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
			 iscsi_lib.scsi_sense_key_str(sense.key),
			 iscsi_lib.scsi_sense_ascq_str(sense.ascq));
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
			isd_reset_session(s, iscsi_lib.iscsi_get_error(iscsi));
		s->retries++;
		isd_issue(r);
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
		return iscsi_lib.iscsi_writesame16_task(s->iscsi, s->lun, lba,
							s->zero, lbs, n, 0,
							unmap, 0, 0, task_cb,
							r);
	}
	r->opcode = SCSI_OPCODE_WRITE_SAME10;
	return iscsi_lib.iscsi_writesame10_task(s->iscsi, s->lun, (uint32_t)lba,
						s->zero, lbs, (uint16_t)n, 0,
						unmap, 0, 0, task_cb, r);
}

/* Send @r's command now (on the main loop), or queue it for a session. */
void isd_issue(struct isd_req *r)
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
		t = iscsi_lib.iscsi_read16_iov_task(s->iscsi, s->lun, lba,
					  (uint32_t)req->len, (int)lbs, 0, 0, 0,
					  0, 0, task_cb, r, r->iov,
					  req->iovcnt);
		break;
	case BS_OP_WRITE:
		if ((err = prep_iov(r)))
			goto fail;
		r->opcode = 0x8a;
		t = iscsi_lib.iscsi_write16_iov_task(s->iscsi, s->lun, lba,
						     NULL, (uint32_t)req->len,
						     (int)lbs, 0, 0, fua, 0, 0,
						     task_cb, r, r->iov,
						     req->iovcnt);
		break;
	case BS_OP_FLUSH:
		r->opcode = 0x91;
		t = iscsi_lib.iscsi_synchronizecache16_task(s->iscsi, s->lun, 0,
							    0, 0, 0, task_cb,
							    r);
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
			t = iscsi_lib.iscsi_unmap_task(s->iscsi, s->lun, 0, 0,
						       &r->ul, 1, task_cb, r);
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
			 iscsi_lib.iscsi_get_error(s->iscsi));
		retry(r, true, s->last_error);
		return;
	}
	r->task = t;
	isd_kick(s);
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
	isd_issue(r);
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
		struct iscsi_context *c = iscsi_lib.iscsi_create_context(s->initiator);
		struct iscsi_url *u;

		if (portal || iqn)
			return bs_error(-EINVAL, "%s: iscsi: give url or "
					"portal + iqn, not both", dev->name);
		if (!c)
			return -ENOMEM;
		u = iscsi_lib.iscsi_parse_full_url(c, url);
		if (!u) {
			err = bs_error(-EINVAL, "%s: iscsi: url %s: %s (want "
				       "iscsi://HOST[:PORT]/IQN/LUN)",
				       dev->name, url, iscsi_lib.iscsi_get_error(c));
			iscsi_lib.iscsi_destroy_context(c);
			return err;
		}
		s->portal = strdup(u->portal);
		s->target = strdup(u->target);
		s->lun = u->lun;
		if (u->user[0] && !s->chap_user) {
			s->chap_user = strdup(u->user);
			s->chap_secret = strdup(u->passwd);
		}
		iscsi_lib.iscsi_destroy_url(u);
		iscsi_lib.iscsi_destroy_context(c);
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
	char host[64] = "localhost", ini[160], why[256];
	uint64_t max_io = 1u << 20;
	uint32_t timeout = 30, retries = 5, rms = 1000, poll = 1000;
	int err;

	if (!s)
		return -ENOMEM;
	s->dev = dev;
	s->loop = bs_ctx_loop(dev->ctx);
	if ((err = bs_opts_get_u32(opts, "timeout", &timeout)) < 0 ||
	    (err = bs_opts_get_u32(opts, "max_retries", &retries)) < 0 ||
	    (err = bs_opts_get_u32(opts, "reconnect_ms", &rms)) < 0 ||
	    (err = bs_opts_get_u32(opts, "poll_ms", &poll)) < 0 ||
	    (err = bs_opts_get_size(opts, "max_io", &max_io)) < 0)
		goto fail;
	if (timeout < 1 || timeout > 3600 || retries > 100 || rms < 10 ||
	    rms > 600000 || max_io < 4096 || max_io > (64u << 20) ||
	    (poll && poll < 100) || poll > 3600000) {
		err = bs_error(-EINVAL, "%s: iscsi: timeout 1..3600 s, "
			       "max_retries 0..100, reconnect_ms 10..600000, "
			       "poll_ms 0 or 100..3600000, max_io 4K..64M",
			       dev->name);
		goto fail;
	}
	s->timeout_s = timeout;
	s->max_retries = retries;
	s->reconnect_ms = rms;
	s->poll_ms = poll;
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
	/* libiscsi, loaded by the first open (iscsi_lib.h) */
	if ((err = iscsi_lib_load(why, sizeof(why)))) {
		err = bs_error(err, "%s: %s", dev->name, why);
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
	isd_session_begin(s);
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
		if (!iscsi_lib.iscsi_logout_async(s->iscsi, logout_cb, &done)) {
			isd_kick(s);
			while (!done && bs_now_ns() < until)
				if (bs_loop_run_once(s->loop, 50))
					break;
		}
	}
	bs_fdpump_free(s->pump);
	s->pump = NULL;
	if (s->iscsi)
		iscsi_lib.iscsi_destroy_context(s->iscsi);	/* cancels the rest */
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
	kv(arg, "policy", "timeout %u s, max_retries %u, reconnect_ms %u, "
	   "poll_ms %u (polls so far %llu)", s->timeout_s, s->max_retries,
	   s->reconnect_ms, s->poll_ms, (unsigned long long)s->polls);
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
	kv(arg, "retries", "%llu (failed at the deadline %llu; sessions "
	   "reset for a write past it %llu)",
	   (unsigned long long)s->retries, (unsigned long long)s->expired,
	   (unsigned long long)s->session_resets_deadline);
}

static const struct bs_dev_type iscsi_type = {
	.name = "iscsi",
	.req_ctx_size = sizeof(struct isd_req),
	.spec_key = "url",
	.summary = "a LUN of a remote iSCSI target (libiscsi), decided as Linux's sd",
	.options =
		"url=iscsi://HOST[:PORT]/IQN/LUN  the LUN (iscsi:URL; user%secret@HOST\n"
		"                     for CHAP)\n"
		"portal=HOST[:PORT]   instead of url: the portal (port 3260) ...\n"
		"iqn=IQN              ... the target's name ...\n"
		"lun=N                ... and the LUN (0)\n"
		"initiator=IQN        our name (iqn.2026-12.org.blkstack:initiator-HOST)\n"
		"chap_user=NAME       CHAP: our name for the target's challenge (none)\n"
		"chap_secret=SECRET   CHAP: our secret\n"
		"target_chap_user=NAME  mutual CHAP: the name the target must give\n"
		"target_chap_secret=SECRET  mutual CHAP: the target's secret\n"
		"timeout=SECONDS      longest a request (retries included) or the open\n"
		"                     may take; then -EIO (30)\n"
		"max_retries=N        retries of a command; failed connects before the\n"
		"                     open gives up (5)\n"
		"reconnect_ms=MS      delay before a retry or a new session (1000)\n"
		"poll_ms=MS           TEST UNIT READY after this long idle, to see a\n"
		"                     unit attention without a client (1000; 0 off)\n"
		"max_io=SIZE          largest READ/WRITE, below the target's (1M)\n",
	.open = isd_open,
	.close = isd_close,
	.submit = isd_submit,
	.describe = isd_describe,
};

BS_DEV_TYPE(iscsi_type)
