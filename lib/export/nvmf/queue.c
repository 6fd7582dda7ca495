/* SPDX-License-Identifier: MIT */
/*
 * One NVMe/TCP connection = one queue: the session-operations table the
 * network server drives. PDU assembly (header, header digest, data, data
 * digest), ICReq/ICResp, command capsules with in-capsule data, R2T and
 * H2CData for the rest of a write, C2HData (with SUCCESS when the host
 * turned SQ flow control off) and response capsules, C2HTermReq on fatal
 * transport errors. Commands go to fabrics.c, admin.c or io.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/loop.h>

#include "export/nvmf/nvmf.h"

/* ---- output ---------------------------------------------------------------- */

static struct nvmf_out *out_new(void)
{
	return calloc(1, sizeof(struct nvmf_out));
}

static void out_queue(struct nvmf_queue *q, struct nvmf_out *o)
{
	o->next = NULL;
	if (q->out_tail)
		q->out_tail->next = o;
	else
		q->out_head = o;
	q->out_tail = o;
	q->out_bytes += o->hdr_len + o->data_len + o->dd_len;
	if (q->nc && !q->orphan)
		bs_net_conn_kick(q->nc);
}

static void out_free(struct nvmf_out *o)
{
	free(o->data);
	free(o);
}

static void term(struct nvmf_queue *q, const struct nvmf_pdu_err *e)
{
	struct nvmf_out *o = out_new();

	if (o) {
		o->hdr_len = nvmf_pdu_term(o->hdr, e->fes, e->fei, q->hdr,
					   q->have);
		o->close_after = true;
		out_queue(q, o);
	}
	nvmf_queue_end(q, "fatal transport error (FES %u, FEI %u): %s",
		       e->fes, e->fei, e->why);
}

void nvmf_queue_end(struct nvmf_queue *q, const char *fmt, ...)
{
	va_list ap;

	if (q->ended)
		return;
	q->ended = true;
	va_start(ap, fmt);
	vsnprintf(q->reason, sizeof(q->reason), fmt, ap);
	va_end(ap);
	if (q->nc && !q->orphan)
		bs_net_conn_kick(q->nc);
}

static void put_rsp(struct nvmf_queue *q, uint16_t cid, uint16_t sf,
		    uint64_t result)
{
	struct nvmf_out *o = out_new();
	struct bs_nvme_cqe cqe;

	if (!o) {
		nvmf_queue_end(q, "out of memory for a response");
		return;
	}
	memset(&cqe, 0, sizeof(cqe));
	cqe.result = bs_nvme_cpu_to_le32((uint32_t)result);
	cqe.dw1 = bs_nvme_cpu_to_le32((uint32_t)(result >> 32));
	cqe.sqid = bs_nvme_cpu_to_le16(q->qid);
	cqe.cid = cid;		/* as the host sent it */
	cqe.status = bs_nvme_cpu_to_le16(bs_nvme_cqe_status(sf));
	o->hdr_len = nvmf_pdu_rsp(o->hdr, q->pp.hdgst, &cqe);
	if (sf)
		q->errors++;
	out_queue(q, o);
}

void nvmf_queue_respond(struct nvmf_queue *q, uint16_t cid, uint16_t sf,
			uint64_t result)
{
	put_rsp(q, cid, sf, result);
}

static void cmd_unlink(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_cmd **pp;

	for (pp = &q->cmds; *pp; pp = &(*pp)->next)
		if (*pp == c) {
			*pp = c->next;
			q->ncmds--;
			break;
		}
}

static void queue_free(struct nvmf_queue *q);

void nvmf_cmd_forget(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;

	cmd_unlink(c);
	free(c->buf);
	free(c->reqs);
	free(c);
	if (q->orphan && !q->cmds)
		queue_free(q);
}

void nvmf_cmd_done(struct nvmf_cmd *c, uint16_t sf, uint64_t result,
		   uint8_t *data, uint32_t len)
{
	struct nvmf_queue *q = c->q;

	cmd_unlink(c);
	if (!q->ended) {
		bool success = false;

		if (len && !sf) {
			struct nvmf_out *o = out_new();

			if (!o) {
				free(data);
				data = NULL;
				nvmf_queue_end(q, "out of memory for data");
				goto out;
			}
			success = q->sqflow_off;
			o->hdr_len = nvmf_pdu_c2h_data(o->hdr, q->pp.hdgst,
						       q->pp.ddgst, c->sqe.cid,
						       0, len, true, success);
			/* the CID goes as the host sent it */
			memcpy(o->hdr + 8, &c->sqe.cid, 2);
			if (q->pp.hdgst)
				nvmf_pdu_put_hdgst(o->hdr,
						   BS_NVME_TCP_DATA_HLEN);
			o->data = data;
			o->data_len = len;
			data = NULL;
			if (q->pp.ddgst) {
				bs_nvme_put32(o->ddgst,
					      nvmf_crc32c(o->data, len));
				o->dd_len = 4;
			}
			out_queue(q, o);
		}
		if (!success)
			put_rsp(q, c->sqe.cid, sf, result);
	}
out:
	free(data);
	if (c->buf != data)
		free(c->buf);
	free(c->reqs);
	free(c);
	if (q->orphan && !q->cmds)
		queue_free(q);
}

void nvmf_cmd_want_data(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_out *o;
	/* R2TL at most MAXH2CDATA, which is the largest transfer (MDTS):
	 * so one R2T asks for the rest of a write and a host may answer it
	 * with one H2CData PDU. Hosts that ignore MAXH2CDATA and send R2TL
	 * bytes in one PDU (libnvmf, Linux before 2022) thus stay within
	 * it; libnvmf also cannot answer an R2T that asks for less than
	 * the rest (it sends the rest under a header saying R2TL). */
	uint32_t n = c->len - c->got;

	if (n > NVMF_MAXH2CDATA)
		n = NVMF_MAXH2CDATA;

	o = out_new();
	if (!o) {
		nvmf_queue_end(q, "out of memory for an R2T");
		return;
	}
	c->ttag = q->next_ttag++;
	c->r2t_len = n;
	c->wants_data = true;
	o->hdr_len = nvmf_pdu_r2t(o->hdr, q->pp.hdgst, 0, c->ttag, c->got, n);
	memcpy(o->hdr + 8, &c->sqe.cid, 2);
	if (q->pp.hdgst)
		nvmf_pdu_put_hdgst(o->hdr, BS_NVME_TCP_R2T_HLEN);
	out_queue(q, o);
}

uint16_t nvmf_errno_sf(int err, bool write)
{
	switch (err) {
	case 0:
		return BS_NVME_SC_SUCCESS;
	case -EINVAL:
	case -ERANGE:
		return BS_NVME_SC_LBA_RANGE | BS_NVME_SF_DNR;
	case -EROFS:
		return BS_NVME_SC_NS_WRITE_PROTECTED | BS_NVME_SF_DNR;
	case -ENOSPC:
		return BS_NVME_SC_CAP_EXCEEDED | BS_NVME_SF_DNR;
	case -EOPNOTSUPP:
		return BS_NVME_SC_INVALID_OPCODE | BS_NVME_SF_DNR;
	case -EIO:
		return write ? BS_NVME_SC_WRITE_FAULT : BS_NVME_SC_READ_ERROR;
	default:
		return BS_NVME_SC_INTERNAL;
	}
}

int nvmf_sgl(const struct bs_nvme_sqe *sqe, uint32_t *len, bool *incapsule)
{
	const struct bs_nvme_sgl *s = &sqe->dptr;

	*len = bs_nvme_le32(s->length);
	*incapsule = false;
	if ((sqe->flags & BS_NVME_SQE_PSDT_MASK) != BS_NVME_SQE_PSDT_SGL &&
	    *len)
		return BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR;
	if (s->type == BS_NVME_SGL_TCP_INCAPSULE) {
		if (bs_nvme_le64(s->addr))
			return BS_NVME_SC_SGL_INVALID_OFFSET | BS_NVME_SF_DNR;
		*incapsule = true;
		return 0;
	}
	if (s->type == BS_NVME_SGL_TCP_TRANSPORT || !*len)
		return 0;
	return BS_NVME_SC_SGL_INVALID_TYPE | BS_NVME_SF_DNR;
}

/* ---- input ----------------------------------------------------------------- */

static void icreq(struct nvmf_queue *q)
{
	const struct bs_nvme_tcp_icreq *r = (const void *)q->hdr;
	struct nvmf_pdu_err e = { 0 };
	struct nvmf_out *o;
	uint8_t dgst = 0;

	if (bs_nvme_le16(r->pfv) != BS_NVME_TCP_PFV_1_0) {
		e = (struct nvmf_pdu_err){ BS_NVME_TCP_FES_UNSUPPORTED_PARAM,
					   8, "ICReq PFV is not 0" };
		term(q, &e);
		return;
	}
	if (r->hpda > 31) {
		e = (struct nvmf_pdu_err){ BS_NVME_TCP_FES_UNSUPPORTED_PARAM,
					   10, "ICReq HPDA above 31" };
		term(q, &e);
		return;
	}
	if ((r->dgst & BS_NVME_TCP_HDGST_ENABLE) && q->ss->hdgst_ok)
		dgst |= BS_NVME_TCP_HDGST_ENABLE;
	if ((r->dgst & BS_NVME_TCP_DDGST_ENABLE) && q->ss->ddgst_ok)
		dgst |= BS_NVME_TCP_DDGST_ENABLE;
	o = out_new();
	if (!o) {
		nvmf_queue_end(q, "out of memory for ICResp");
		return;
	}
	o->hdr_len = nvmf_pdu_icresp(o->hdr, dgst, NVMF_MAXH2CDATA);
	out_queue(q, o);
	q->pp.ic_done = true;
	q->pp.hdgst = dgst & BS_NVME_TCP_HDGST_ENABLE;
	q->pp.ddgst = dgst & BS_NVME_TCP_DDGST_ENABLE;
}

void nvmf_capsule(struct nvmf_queue *q, const uint8_t *sqe,
		  const uint8_t *data, uint32_t dlen)
{
	struct nvmf_cmd *c = calloc(1, sizeof(*c));
	uint32_t len;
	bool inc;
	int sf;

	if (!c) {
		nvmf_queue_end(q, "out of memory for a command");
		return;
	}
	c->q = q;
	memcpy(&c->sqe, sqe, sizeof(c->sqe));
	c->next = q->cmds;
	q->cmds = c;
	q->ncmds++;
	q->commands++;
	sf = nvmf_sgl(&c->sqe, &len, &inc);
	if (!sf && inc && len != dlen)
		sf = BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR;
	if (!sf && !inc && dlen)
		sf = BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR;
	/* more in-capsule data than IOCCSZ offers (PDUs may be as long as
	 * MAXH2CDATA, capsules may not) */
	if (!sf && inc && dlen > NVMF_INCAPSULE)
		sf = BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR;
	if (!sf && len > NVMF_MAX_XFER + 0u &&
	    c->sqe.opcode != BS_NVME_FABRICS_OPC)
		sf = BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR;
	if (sf) {
		nvmf_cmd_done(c, (uint16_t)sf, 0, NULL, 0);
		return;
	}
	c->len = len;
	if (inc && dlen) {
		c->buf = malloc(dlen);
		if (!c->buf) {
			nvmf_cmd_done(c, BS_NVME_SC_INTERNAL, 0, NULL, 0);
			return;
		}
		memcpy(c->buf, data, dlen);
		c->got = dlen;
	}
	if (c->sqe.opcode == BS_NVME_FABRICS_OPC)
		nvmf_fabrics(c);
	else if (!q->ctrl)
		nvmf_cmd_done(c, BS_NVME_SC_CMD_SEQ_ERROR | BS_NVME_SF_DNR, 0,
			      NULL, 0);
	else if (q->qid == 0)
		nvmf_admin(c);
	else
		nvmf_io(c);
}

static void h2c_data(struct nvmf_queue *q, const uint8_t *data, uint32_t dlen)
{
	const struct bs_nvme_tcp_data *h = (const void *)q->hdr;
	uint16_t ttag = bs_nvme_le16(h->ttag);
	uint32_t off = bs_nvme_le32(h->datao), len = bs_nvme_le32(h->datal);
	struct nvmf_pdu_err e = { BS_NVME_TCP_FES_INVALID_HEADER, 8,
				  "H2CData for no outstanding R2T" };
	struct nvmf_cmd *c;

	for (c = q->cmds; c; c = c->next)
		if (c->wants_data && c->sqe.cid == h->cccid && c->ttag == ttag)
			break;
	if (!c) {
		term(q, &e);
		return;
	}
	if (len != dlen) {
		e = (struct nvmf_pdu_err){ BS_NVME_TCP_FES_INVALID_HEADER, 16,
					   "H2CData DATAL differs from the "
					   "data in the PDU" };
		term(q, &e);
		return;
	}
	if (off != c->got || (uint64_t)off + len > c->len ||
	    len > c->r2t_len) {
		e = (struct nvmf_pdu_err){ BS_NVME_TCP_FES_DATA_OUT_OF_RANGE,
					   12, "H2CData outside the R2T" };
		term(q, &e);
		return;
	}
	if (!c->buf) {
		c->buf = malloc(c->len);
		if (!c->buf) {
			nvmf_queue_end(q, "out of memory for write data");
			return;
		}
	}
	memcpy(c->buf + off, data, len);
	c->got += len;
	c->r2t_len -= len;
	if (c->r2t_len)
		return;
	c->wants_data = false;
	if (c->got < c->len)
		nvmf_cmd_want_data(c);
	else
		nvmf_io_exec(c);
}

static void pdu(struct nvmf_queue *q)
{
	const uint8_t *data = NULL;
	uint32_t dlen = q->lay.data_len;

	if (dlen)
		data = q->rbuf + (q->lay.data_off - q->lay.hdr_len);
	switch (q->lay.type) {
	case BS_NVME_TCP_ICREQ:
		icreq(q);
		break;
	case BS_NVME_TCP_H2C_TERM:
		nvmf_queue_end(q, "the host ended the connection (H2CTermReq "
			       "FES %u)", bs_nvme_get16(q->hdr + 8));
		break;
	case BS_NVME_TCP_CMD:
		nvmf_capsule(q, q->hdr + 8, data, dlen);
		break;
	case BS_NVME_TCP_H2C_DATA:
		h2c_data(q, data, dlen);
		break;
	}
}

static void pdu_reset(struct nvmf_queue *q)
{
	free(q->rbuf);
	q->rbuf = NULL;
	q->rlen = q->rhave = 0;
	q->have = 0;
}

static size_t feed(struct nvmf_queue *q, const uint8_t *buf, size_t len)
{
	size_t used = 0;

	while (used < len && !q->ended) {
		size_t n;

		if (q->rbuf) {
			n = q->rlen - q->rhave;
			if (n > len - used)
				n = len - used;
			memcpy(q->rbuf + q->rhave, buf + used, n);
			q->rhave += n;
			used += n;
			if (q->rhave < q->rlen)
				break;
			if (q->lay.ddgst) {
				const uint8_t *d = q->rbuf + (q->lay.data_off -
							      q->lay.hdr_len);

				if (bs_nvme_get32(d + q->lay.data_len) !=
				    nvmf_crc32c(d, q->lay.data_len)) {
					/* fatal: the connection closes
					 * (what Linux's nvmet does too) */
					nvmf_queue_end(q, "data digest "
						       "mismatch");
					break;
				}
			}
			pdu(q);
			pdu_reset(q);
			continue;
		}
		if (q->have < 8) {
			n = 8 - q->have;
			if (n > len - used)
				n = len - used;
			memcpy(q->hdr + q->have, buf + used, n);
			q->have += n;
			used += n;
			if (q->have < 8)
				break;
			struct nvmf_pdu_err e;

			if (nvmf_pdu_parse(q->hdr, &q->pp, &q->lay, &e)) {
				term(q, &e);
				break;
			}
		}
		n = q->lay.hdr_len - q->have;
		if (n > len - used)
			n = len - used;
		memcpy(q->hdr + q->have, buf + used, n);
		q->have += n;
		used += n;
		if (q->have < q->lay.hdr_len)
			break;
		if (q->lay.hdgst && !nvmf_pdu_hdgst_ok(q->hdr, q->lay.hlen)) {
			struct nvmf_pdu_err e = {
				BS_NVME_TCP_FES_HDGST,
				bs_nvme_get32(q->hdr + q->lay.hlen),
				"header digest mismatch" };

			term(q, &e);
			break;
		}
		if (q->lay.plen > q->lay.hdr_len) {
			q->rlen = q->lay.plen - q->lay.hdr_len;
			q->rbuf = malloc(q->rlen);
			if (!q->rbuf) {
				nvmf_queue_end(q, "out of memory for a PDU");
				break;
			}
			continue;
		}
		pdu(q);
		pdu_reset(q);
	}
	if (q->ended)
		return len;
	return used;
}

/* ---- messages from other threads ----------------------------------------- */

/* On @q's loop. */
static void msg_here(void *arg)
{
	struct nvmf_queue *q = arg;
	struct nvmf_subsys *ss = q->ss;
	const char *why;

	pthread_mutex_lock(&ss->lock);
	q->msg_sent = false;
	why = q->msg_close;
	q->msg_close = NULL;
	if (q->msg_aen && q->ctrl && q->ctrl->admin == q)
		nvmf_aen_kick(q->ctrl);
	q->msg_aen = false;
	pthread_mutex_unlock(&ss->lock);
	if (why && !q->ended && q->nc)
		bs_net_conn_close(q->nc, why);	/* may free q */
}

static void msg_send(struct nvmf_queue *q)
{
	if (q->msg_sent)
		return;
	q->msg_sent = true;
	q->msg.fn = msg_here;
	q->msg.arg = q;
	if (q->loop)
		bs_loop_send(q->loop, &q->msg);
}

void nvmf_queue_send_close(struct nvmf_queue *q, const char *why)
{
	if (!q->msg_close)
		q->msg_close = why;
	msg_send(q);
}

void nvmf_queue_send_aen(struct nvmf_queue *q)
{
	q->msg_aen = true;
	msg_send(q);
}

/* ---- the network server's ops ---------------------------------------------- */

static int p_start(void *owner, struct bs_net_conn *nc, void **sess)
{
	struct nvmf_port *port = owner;
	struct nvmf_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->nc = nc;
	q->port = port;
	q->ss = port->ss;
	q->loop = bs_loop_current();
	q->pp.max_data = NVMF_MAXH2CDATA > NVMF_INCAPSULE ? NVMF_MAXH2CDATA
							  : NVMF_INCAPSULE;
	q->start_ns = bs_now_ns();
	*sess = q;
	return 0;
}

static size_t p_input(void *sess, const uint8_t *buf, size_t len)
{
	struct nvmf_queue *q = sess;
	size_t n = feed(q, buf, len);

	if (q->ctrl && q->nc && bs_net_conn_in_handshake(q->nc))
		bs_net_conn_handshake_done(q->nc);
	return n;
}

static bool p_wants_input(void *sess)
{
	struct nvmf_queue *q = sess;

	return !q->ended && !q->eof && !q->shutdown &&
	       q->ncmds < q->ss->qdepth + 1;
}

static int p_output(void *sess, struct iovec *iov, int max)
{
	struct nvmf_queue *q = sess;
	struct nvmf_out *o;
	int n = 0;

	/* as many iovecs as asked for, even one: the network server asks
	 * for one to learn whether output waits (has_output()), and a
	 * queue that answered 0 with output queued was never written
	 * again until a completion kicked it (stalls at depth) */
	for (o = q->out_head; o && n < max; o = o->next) {
		size_t s = o->sent;

		if (s < o->hdr_len) {
			iov[n].iov_base = o->hdr + s;
			iov[n++].iov_len = o->hdr_len - s;
			s = 0;
		} else {
			s -= o->hdr_len;
		}
		if (n == max)
			break;
		if (o->data_len && s < o->data_len) {
			iov[n].iov_base = o->data + s;
			iov[n++].iov_len = o->data_len - s;
			s = 0;
		} else if (o->data_len) {
			s -= o->data_len;
		}
		if (n == max)
			break;
		if (o->dd_len && s < o->dd_len) {
			iov[n].iov_base = o->ddgst + s;
			iov[n++].iov_len = o->dd_len - s;
		}
		if (o->close_after)
			break;
	}
	return n;
}

static size_t p_out_bytes(void *sess)
{
	struct nvmf_queue *q = sess;

	return q->out_bytes;
}

static void p_sent(void *sess, size_t n)
{
	struct nvmf_queue *q = sess;

	q->out_bytes -= n;
	while (n && q->out_head) {
		struct nvmf_out *o = q->out_head;
		size_t total = o->hdr_len + o->data_len + o->dd_len;
		size_t k = total - o->sent;

		if (n < k) {
			o->sent += n;
			return;
		}
		n -= k;
		q->out_head = o->next;
		if (!q->out_head)
			q->out_tail = NULL;
		out_free(o);
	}
}

static void p_eof(void *sess)
{
	struct nvmf_queue *q = sess;

	q->eof = true;
}

static void p_shutdown(void *sess)
{
	struct nvmf_queue *q = sess;

	q->shutdown = true;
}

static bool p_finished(void *sess)
{
	struct nvmf_queue *q = sess;

	if (q->ended)
		return true;
	return (q->eof || q->shutdown) && !q->cmds;
}

static bool p_busy(void *sess)
{
	struct nvmf_queue *q = sess;

	return q->cmds != NULL;
}

static void queue_free(struct nvmf_queue *q)
{
	if (q->set)
		bs_exports_release(q->set);
	while (q->out_head) {
		struct nvmf_out *o = q->out_head;

		q->out_head = o->next;
		out_free(o);
	}
	free(q->rbuf);
	free(q);
}

static void p_close(void *sess, const char *why)
{
	struct nvmf_queue *q = sess;
	struct nvmf_cmd *c, *next;

	if (q->nc)
		bs_net_conn_log(q->nc, "close %s queue %u%s%s: %llu commands, %llu "
			"errors, %.1f s: %s",
			nvmf_queue_subnqn(q), q->qid,
			q->ctrl ? " host " : "", q->ctrl ? q->ctrl->hostnqn : "",
			(unsigned long long)q->commands,
			(unsigned long long)q->errors,
			(double)(bs_now_ns() - q->start_ns) / 1e9,
			why ? why : q->reason[0] ? q->reason : "closed");
	q->ended = true;
	nvmf_ctrl_detach(q);
	/* detached: nothing sends to it any more; take back what was sent */
	if (q->loop)
		bs_loop_cancel_work(q->loop, &q->msg);
	/* commands not in the device go now; the rest finish first */
	for (c = q->cmds; c; c = next) {
		next = c->next;
		if (!c->in_core) {
			cmd_unlink(c);
			free(c->buf);
			free(c->reqs);
			free(c);
		}
	}
	q->nc = NULL;
	if (q->cmds) {
		/* the set waits for the requests still in devices */
		q->orphan = true;
		bs_exports_hold(q->ss->exp->set);
		q->set = q->ss->exp->set;
		return;
	}
	queue_free(q);
}

const struct bs_net_proto nvmf_net_proto = {
	.name = "nvmf",
	.inbuf = 256 * 1024,
	.start = p_start,
	.input = p_input,
	.wants_input = p_wants_input,
	.output = p_output,
	.out_bytes = p_out_bytes,
	.sent = p_sent,
	.eof = p_eof,
	.shutdown = p_shutdown,
	.finished = p_finished,
	.busy = p_busy,
	.close = p_close,
};
