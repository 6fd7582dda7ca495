/* SPDX-License-Identifier: MIT */
/*
 * One NVMe/TCP connection = one queue: the session-operations table the
 * network server drives. PDU assembly (header, header digest, data, data
 * digest), ICReq/ICResp, command capsules with in-capsule data, R2T and
 * H2CData for the rest of a write, C2HData (with SUCCESS when the host
 * turned SQ flow control off) and response capsules, C2HTermReq on fatal
 * transport errors. Commands go to fabrics.c, admin.c or io.c.
 *
 * A command's payload buffer holds its own data only (in-capsule, the
 * rest of a write's behind its R2T, a Read's): its bytes come from the
 * server budget, and a command that finds it full waits in the queue's
 * FIFO. A Compare holds its data like a Write; what the device holds is
 * read into the queue's Compare scratch (one chunk, not from the budget),
 * which one Compare at a time owns while the others wait for it in a
 * FIFO of their own ("the Compare scratch" below).
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/bufpool.h>
#include <blkstack/loop.h>

#include "core/crc32c.h"
#include "export/nvmf/nvmf.h"

/* ---- payload buffers and the server budget --------------------------------- */

/* @over: take the bytes even above the budget's limit (see rest_begin()) */
static int buf_get(struct nvmf_queue *q, uint32_t len, uint8_t **out,
		   bool over)
{
	uint8_t *b;

	if (q->budget && over)
		bs_budget_take_over(q->budget, &q->bh, len);
	else if (q->budget && !bs_budget_take(q->budget, &q->bh, len))
		return -EAGAIN;
	/* page aligned (drivers may do direct I/O from it) and pooled:
	 * warm, already mapped, no heap left at its high-water mark */
	b = bs_buf_get(len);
	if (!b) {
		if (q->budget)
			bs_budget_give(q->budget, &q->bh, len);
		return -ENOMEM;
	}
	*out = b;
	return 0;
}

int nvmf_buf_get(struct nvmf_queue *q, uint32_t len, uint8_t **out)
{
	return buf_get(q, len, out, false);
}

void nvmf_buf_put(struct nvmf_queue *q, uint8_t *buf, uint32_t len)
{
	if (!buf)
		return;
	bs_buf_put(buf, len);
	if (q->budget)
		bs_budget_give(q->budget, &q->bh, len);
}

/* Put @c at the end of the list @head/@tail (linked by wnext). */
static void wait_append(struct nvmf_cmd **head, struct nvmf_cmd **tail,
			struct nvmf_cmd *c)
{
	c->wnext = NULL;
	if (*tail)
		(*tail)->wnext = c;
	else
		*head = c;
	*tail = c;
}

/* Take @c out of the list @head/@tail (linked by wnext). */
static void wait_unlink(struct nvmf_cmd **head, struct nvmf_cmd **tail,
			struct nvmf_cmd *c)
{
	struct nvmf_cmd **pp, *prev = NULL;

	for (pp = head; *pp; prev = *pp, pp = &(*pp)->wnext)
		if (*pp == c) {
			*pp = c->wnext;
			if (*tail == c)
				*tail = prev;
			break;
		}
	c->wnext = NULL;
}

/* Out of whichever wait it is in: the budget's FIFO or the scratch's. */
static void cmd_unpark(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;

	if (c->parked)
		wait_unlink(&q->wait_head, &q->wait_tail, c);
	else if (c->cmp_wait)
		wait_unlink(&q->cmp_head, &q->cmp_tail, c);
	c->parked = false;
	c->cmp_wait = false;
}

static void cmd_park(struct nvmf_cmd *c, void (*resume)(struct nvmf_cmd *c))
{
	struct nvmf_queue *q = c->q;

	c->resume = resume;
	if (c->parked) {
		q->wait_refused = true;	/* the head, refused once more */
		return;
	}
	c->parked = true;
	wait_append(&q->wait_head, &q->wait_tail, c);
}

static void cmd_free(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;

	/* out of the device when answered or dropped (a Compare counts as
	 * in it from compare() to here) */
	nvmf_cmd_core(c, false);
	cmd_unpark(c);
	if (q->cmp_owner == c)
		q->cmp_owner = NULL;	/* only with the queue closing */
	if (q->h2c == c)
		q->h2c = NULL;
	nvmf_buf_put(q, c->buf, c->buf_len);
	if (c->over) {
		/* the next capsule held at its header may go above the
		 * limit now (rest_begin()): input goes on */
		q->nover--;
		if (q->hdr_held && q->nc && !q->orphan)
			bs_net_conn_kick(q->nc);
	}
	free(c->reqs);
	free(c);
}

bool nvmf_cmd_hold(struct nvmf_cmd *c, uint32_t len,
		   void (*resume)(struct nvmf_cmd *c))
{
	struct nvmf_queue *q = c->q;
	uint8_t *b;
	int err;

	if (!len || (c->buf && c->buf_len >= len))
		return true;
	/* first come, first served: behind the ones already waiting */
	if (q->wait_head && q->wait_head != c) {
		cmd_park(c, resume);
		return false;
	}
	err = nvmf_buf_get(q, len, &b);
	if (err == -EAGAIN) {
		cmd_park(c, resume);
		return false;
	}
	cmd_unpark(c);
	if (err) {
		nvmf_cmd_done(c, BS_NVME_SC_INTERNAL, 0, NULL, 0);
		return false;
	}
	if (c->buf) {
		memcpy(b, c->buf, c->got);
		nvmf_buf_put(q, c->buf, c->buf_len);
	}
	c->buf = b;
	c->buf_len = len;
	return true;
}

/* A slow device is not a stalled client: a command's buffer does not
 * count against the host while the command is in a device, a Write, a
 * Read and a Compare's chunk reads alike, and a queue with all its
 * bytes there is not evicted; bytes outside (Read data not taken) are
 * the host's whatever else is in a device (budget.h). Per command, not
 * per request: a DSM's ranges and a zeroout's pieces are one command in
 * the device until the last is back. */
void nvmf_cmd_core(struct nvmf_cmd *c, bool in)
{
	struct nvmf_queue *q = c->q;

	if (c->in_core == in)
		return;
	c->in_core = in;
	if (!q->budget)
		return;
	if (in) {
		c->dev_bytes = c->buf ? c->buf_len : 0;
		bs_budget_dev_begin(&q->bh, c->dev_bytes);
	} else {
		bs_budget_dev_end(&q->bh, c->dev_bytes);
	}
}

/* Commands waiting for the budget try again, oldest first, until one is
 * refused. */
static void wait_run(struct nvmf_queue *q)
{
	while (q->wait_head && !q->ended) {
		struct nvmf_cmd *c = q->wait_head;

		q->wait_refused = false;
		c->resume(c);
		if (q->wait_refused)
			break;
	}
}

/* ---- the Compare scratch --------------------------------------------------- */

/*
 * One Compare of the queue at a time reads the device into q->cmp_buf,
 * chunk by chunk (io.c). The others wait for it in a FIFO of their own
 * (q->cmp_head), resumed in order by the owner giving the scratch back.
 * Not in the budget's FIFO: a Compare waiting for the scratch neither
 * stops the queue's input nor holds back the commands after it (Reads
 * and Writes go on around it; NVMe orders nothing within a queue), and
 * it holds no more bytes than a Write and waits for none of the
 * budget's: it does not wait behind commands waiting for the budget (a
 * Write with all of its data goes to the device the same way), else it
 * would hold its bytes while waiting for others' (hold and wait).
 */
bool nvmf_cmp_scratch_take(struct nvmf_cmd *c, uint32_t len,
			   void (*resume)(struct nvmf_cmd *c))
{
	struct nvmf_queue *q = c->q;
	uint8_t *b;

	if (q->cmp_owner && q->cmp_owner != c) {
		c->resume = resume;
		if (!c->cmp_wait) {
			cmd_unpark(c);
			c->cmp_wait = true;
			wait_append(&q->cmp_head, &q->cmp_tail, c);
		}
		return false;
	}
	cmd_unpark(c);
	if (q->cmp_buf_len < len) {
		/* the first Compare of the queue (or one whose LBA is larger
		 * than the chunk so far) */
		b = bs_buf_get(len);
		if (!b) {
			nvmf_cmd_done(c, BS_NVME_SC_INTERNAL, 0, NULL, 0);
			return false;
		}
		if (q->cmp_buf)
			bs_buf_put(q->cmp_buf, q->cmp_buf_len);
		q->cmp_buf = b;
		q->cmp_buf_len = len;
	}
	q->cmp_owner = c;
	return true;
}

void nvmf_cmp_scratch_put(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_cmd *w;

	if (q->cmp_owner != c)
		return;
	q->cmp_owner = NULL;
	/* an ended queue starts nothing: what is parked goes when it
	 * closes (p_close()) */
	if (q->ended)
		return;
	/* each resume takes the scratch or answers its command (range
	 * checked again, out of memory): the loop ends */
	while (!q->cmp_owner && (w = q->cmp_head))
		w->resume(w);
}

/* ---- output ---------------------------------------------------------------- */

static struct nvmf_out *out_new(void)
{
	return calloc(1, sizeof(struct nvmf_out));
}

static void out_queue(struct nvmf_queue *q, struct nvmf_out *o)
{
	if (q->evicted) {
		/* nobody reads it: its bytes go back at once */
		nvmf_out_free(q, o);
		return;
	}
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

void nvmf_out_free(struct nvmf_queue *q, struct nvmf_out *o)
{
	if (o->data_pool)
		nvmf_buf_put(q, o->data, o->data_pool);
	else
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
	/* its commands and header held for the budget wait no more
	 * (wait_run() stops here): its turn goes on now */
	if (q->budget)
		bs_budget_cancel(q->budget, &q->bh);
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
	/* SQ flow control on: the head, which the host needs to reuse
	 * entries (reserved when off) */
	if (!q->sqflow_off)
		cqe.sqhd = bs_nvme_cpu_to_le16(q->sqhd);
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
	cmd_free(c);
	if (q->orphan && !q->cmds)
		queue_free(q);
}

void nvmf_cmd_done(struct nvmf_cmd *c, uint16_t sf, uint64_t result,
		   uint8_t *data, uint32_t len)
{
	struct nvmf_queue *q = c->q;
	uint32_t pool = 0;

	if (data && data == c->buf) {
		/* the payload buffer moves to the C2HData PDU */
		pool = c->buf_len;
		c->buf = NULL;
		c->buf_len = 0;
	}
	cmd_unlink(c);
	if (!q->ended) {
		bool success = false;

		if (len && !sf) {
			struct nvmf_out *o = out_new();

			if (!o) {
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
			o->data_pool = pool;
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
	if (pool)
		nvmf_buf_put(q, data, pool);
	else
		free(data);
	cmd_free(c);
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
	/* the R2T goes once the buffer for its data is held (a Compare's
	 * too: what the device holds is read into the queue's scratch) */
	if (!nvmf_cmd_hold(c, c->len, nvmf_cmd_want_data))
		return;

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

/*
 * In-capsule data bytes @q accepts. IOCCSZ (`in_capsule`) is for I/O
 * queues; the admin queue's capsules are 8 KiB (hosts send Connect's
 * 1 KiB and other admin data in them whatever IOCCSZ says), and so are
 * those of a queue not connected yet (an I/O queue's Connect).
 */
static uint32_t incapsule_max(const struct nvmf_queue *q)
{
	uint32_t n = q->ss->incapsule;

	if ((!q->ctrl || !q->qid) && n < NVMF_ADMIN_INCAPSULE)
		n = NVMF_ADMIN_INCAPSULE;
	return n;
}

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
	/* our C2HData PDUs put their data right after the header: a host
	 * asking for it aligned (HPDA 1..31) is refused, as Linux's nvmet
	 * does, rather than sent data where it does not look */
	if (r->hpda) {
		e = (struct nvmf_pdu_err){ BS_NVME_TCP_FES_UNSUPPORTED_PARAM,
					   10, "ICReq HPDA is not 0" };
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

void nvmf_capsule(struct nvmf_queue *q, const uint8_t *sqe, uint8_t *buf,
		  uint32_t dlen)
{
	struct nvmf_cmd *c = calloc(1, sizeof(*c));
	bool over = buf && q->icbuf_over;
	uint32_t len;
	bool inc;
	int sf;

	q->icbuf_over = false;
	if (!c) {
		if (over)
			q->nover--;
		nvmf_buf_put(q, buf, dlen);
		nvmf_queue_end(q, "out of memory for a command");
		return;
	}
	c->q = q;
	c->over = over;
	/* the entry is consumed: the head moves past it (Connect sets the
	 * queue's size, and counts itself) */
	q->sqhd = (uint16_t)((q->sqhd + 1u) % (q->sqsize + 1u));
	memcpy(&c->sqe, sqe, sizeof(c->sqe));
	c->next = q->cmds;
	q->cmds = c;
	q->ncmds++;
	q->commands++;
	/* the in-capsule data is the command's buffer (no copy) */
	if (buf) {
		c->buf = buf;
		c->buf_len = dlen;
	}
	sf = nvmf_sgl(&c->sqe, &len, &inc);
	if (!sf && inc && len != dlen)
		sf = BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR;
	if (!sf && !inc && dlen)
		sf = BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR;
	/* more in-capsule data than IOCCSZ offers (PDUs may be as long as
	 * MAXH2CDATA, capsules may not; such data was not kept) */
	if (!sf && inc && (dlen > incapsule_max(q) || (dlen && !buf)))
		sf = BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR;
	if (!sf && len > NVMF_MAX_XFER + 0u &&
	    c->sqe.opcode != BS_NVME_FABRICS_OPC)
		sf = BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR;
	if (sf) {
		nvmf_cmd_done(c, (uint16_t)sf, 0, NULL, 0);
		return;
	}
	c->len = len;
	if (inc && dlen)
		c->got = dlen;
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

/* An H2CData header: the command whose outstanding R2T it answers,
 * checked (its buffer holds the data already); NULL after a fatal
 * error. */
static struct nvmf_cmd *h2c_begin(struct nvmf_queue *q)
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
		return NULL;
	}
	if (len != q->lay.data_len) {
		e = (struct nvmf_pdu_err){ BS_NVME_TCP_FES_INVALID_HEADER, 16,
					   "H2CData DATAL differs from the "
					   "data in the PDU" };
		term(q, &e);
		return NULL;
	}
	if (off != c->got || (uint64_t)off + len > c->len ||
	    len > c->r2t_len) {
		e = (struct nvmf_pdu_err){ BS_NVME_TCP_FES_DATA_OUT_OF_RANGE,
					   12, "H2CData outside the R2T" };
		term(q, &e);
		return NULL;
	}
	return c;
}

/* An H2CData PDU's data is in its command's buffer. */
static void h2c_data(struct nvmf_queue *q)
{
	struct nvmf_cmd *c = q->h2c;

	q->h2c = NULL;
	if (!c)
		return;
	c->got += q->lay.data_len;
	c->r2t_len -= q->lay.data_len;
	if (c->r2t_len)
		return;
	c->wants_data = false;
	if (c->got < c->len)
		nvmf_cmd_want_data(c);
	else if (c->sqe.opcode == BS_NVME_FABRICS_OPC)
		nvmf_fabrics(c);	/* a Connect's data, after an R2T */
	else
		nvmf_io_exec(c);
}

/* A command with an outstanding R2T: its data is on the way. */
static bool r2t_pending(const struct nvmf_queue *q)
{
	const struct nvmf_cmd *c;

	for (c = q->cmds; c; c = c->next)
		if (c->wants_data)
			return true;
	return false;
}

/*
 * The header is in: where the rest of the PDU goes. 0; -EAGAIN: its
 * in-capsule data waits for the budget (input stops at this header until
 * the budget wakes the queue); else the queue ended.
 *
 * Not while an R2T of this queue is outstanding: its data may be on the
 * wire behind this capsule, and the bytes that data would give back are
 * held already. Stopping here, queues that hold the budget that way
 * would wait for each other until the stall timeout ends one; so the
 * in-capsule data is taken above the limit. That is bounded: one
 * capsule's data (at most `in_capsule` bytes) per queue at a time, and
 * only while an R2T is outstanding. The next such capsule waits at its
 * header until the budget has room or that one's command is done (its
 * bytes back: cmd_free() kicks the queue).
 */
static int rest_begin(struct nvmf_queue *q)
{
	const struct nvmf_pdu_layout *l = &q->lay;
	int err;

	q->pad_left = l->data_len ? l->data_off - l->hdr_len : 0;
	q->ddst = NULL;
	q->dhave = 0;
	q->skip_crc = ~0u;
	q->dgst_have = 0;
	if (!l->data_len)
		return 0;
	if (l->type == BS_NVME_TCP_H2C_DATA) {
		struct nvmf_cmd *c = h2c_begin(q);

		if (!c)
			return -EPROTO;
		q->h2c = c;
		q->ddst = c->buf + c->got;
	} else if (l->type == BS_NVME_TCP_CMD &&
		   l->data_len <= incapsule_max(q)) {
		err = buf_get(q, l->data_len, &q->icbuf, false);
		if (err == -EAGAIN && r2t_pending(q) && !q->nover) {
			err = buf_get(q, l->data_len, &q->icbuf, true);
			if (!err) {
				q->icbuf_over = true;
				q->nover++;
			}
		}
		if (err == -EAGAIN)
			return err;
		if (err) {
			nvmf_queue_end(q, "out of memory for in-capsule data");
			return err;
		}
		q->icbuf_len = l->data_len;
		q->ddst = q->icbuf;
	}
	/* else skipped: a TermReq's copy of our header, or in-capsule data
	 * above IOCCSZ (the capsule is refused) */
	return 0;
}

static bool rest_complete(const struct nvmf_queue *q)
{
	return q->in_rest && !q->pad_left && q->dhave == q->lay.data_len &&
	       q->dgst_have == (q->lay.ddgst ? BS_NVME_TCP_DIGEST_LEN : 0u);
}

/* All of the PDU is in: check its data digest, then act on it. */
static void rest_done(struct nvmf_queue *q)
{
	const struct nvmf_pdu_layout *l = &q->lay;
	uint8_t *ic;

	q->in_rest = false;
	q->have = 0;
	if (l->ddgst) {
		/* computed over the data where it landed (maybe straight
		 * from the socket) */
		uint32_t crc = q->ddst ? nvmf_crc32c(q->ddst, l->data_len)
				       : ~q->skip_crc;

		if (bs_nvme_get32(q->dgst) != crc) {
			/* fatal: the connection closes (what Linux's nvmet
			 * does too) */
			nvmf_queue_end(q, "data digest mismatch");
			return;
		}
	}
	ic = q->icbuf;
	q->icbuf = NULL;
	q->icbuf_len = 0;
	q->ddst = NULL;
	switch (l->type) {
	case BS_NVME_TCP_ICREQ:
		icreq(q);
		break;
	case BS_NVME_TCP_H2C_TERM:
		nvmf_queue_end(q, "the host ended the connection (H2CTermReq "
			       "FES %u)", bs_nvme_get16(q->hdr + 8));
		break;
	case BS_NVME_TCP_CMD:
		nvmf_capsule(q, q->hdr + 8, ic, l->data_len);
		break;
	case BS_NVME_TCP_H2C_DATA:
		h2c_data(q);
		break;
	}
}

/*
 * Waiting for the budget takes no new PDU: neither with in-capsule data
 * held at its header nor with commands waiting for a buffer. But the
 * data of an outstanding R2T still comes in (its bytes are held; reading
 * it gives them back once the write is done), else queues that hold the
 * whole budget that way would wait for each other.
 */
static bool budget_blocked(const struct nvmf_queue *q)
{
	if (q->hdr_held)
		return true;
	/* a PDU begun is read to its end (its bytes are held) */
	if (q->in_rest || q->have)
		return false;
	return q->wait_head && !r2t_pending(q);
}

/*
 * No new PDU while the queue's commands fill its depth or its unsent
 * output is above the listener's out_max (every port's listener has
 * ss->lim). The network server checks both only between input() calls,
 * and one call may hold thousands of small capsules, each of which may
 * queue up to a MiB of output (Get Log Page): so feed() checks before
 * each PDU. Input goes on from the kick of the output sent or of the
 * command answered.
 */
static bool input_full(const struct nvmf_queue *q)
{
	return q->ncmds >= q->ss->qdepth + 1 ||
	       q->out_bytes > q->ss->lim.out_max;
}

static void progress(struct nvmf_queue *q)
{
	if (q->budget)
		bs_budget_progress(&q->bh);
}

/* The next part of the PDU's rest from @buf: bytes used. */
static size_t rest_feed(struct nvmf_queue *q, const uint8_t *buf, size_t len)
{
	size_t n;

	if (q->pad_left) {
		n = q->pad_left < len ? q->pad_left : len;
		q->pad_left -= (uint32_t)n;
		return n;
	}
	if (q->dhave < q->lay.data_len) {
		n = q->lay.data_len - q->dhave;
		if (n > len)
			n = len;
		if (q->ddst)
			memcpy(q->ddst + q->dhave, buf, n);
		else if (q->lay.ddgst)
			q->skip_crc = bs_crc32c_update(q->skip_crc, buf, n);
		q->dhave += (uint32_t)n;
		progress(q);
		return n;
	}
	n = BS_NVME_TCP_DIGEST_LEN - q->dgst_have;
	if (n > len)
		n = len;
	memcpy(q->dgst + q->dgst_have, buf, n);
	q->dgst_have += (uint32_t)n;
	return n;
}

static size_t feed(struct nvmf_queue *q, const uint8_t *buf, size_t len)
{
	size_t used = 0;

	while (!q->ended) {
		size_t n;
		int err;

		if (q->in_rest) {
			if (rest_complete(q)) {
				rest_done(q);
				continue;
			}
			if (used == len)
				break;
			used += rest_feed(q, buf + used, len - used);
			continue;
		}
		if (q->hdr_held) {
			err = rest_begin(q);
			if (err == -EAGAIN)
				break;
			q->hdr_held = false;
			if (!err)
				q->in_rest = true;
			continue;
		}
		/* nothing new while waiting for bytes */
		if (budget_blocked(q))
			break;
		if (used == len)
			break;
		if (!q->have && input_full(q))
			break;
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
		err = rest_begin(q);
		if (err == -EAGAIN) {
			q->hdr_held = true;
			break;
		}
		if (!err)
			q->in_rest = true;
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
	/* an ended queue too: it closes only once its output is sent, and
	 * a peer that stops reading would keep it (and its controller)
	 * for ever, KATO or not */
	if (why && q->nc)
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

#define QUEUE_OF(h) \
	((struct nvmf_queue *)((char *)(h) - offsetof(struct nvmf_queue, bh)))

/* Bytes may be free again: commands waiting for a buffer, then in-capsule
 * data held at its header, try again; input goes on. */
static void budget_wake(struct bs_budget_holder *h)
{
	struct nvmf_queue *q = QUEUE_OF(h);

	if (q->orphan)
		return;		/* nothing of it waits any more */
	wait_run(q);
	if (q->hdr_held)
		feed(q, NULL, 0);
	if (q->nc)
		bs_net_conn_kick(q->nc);
}

/* Stalled while holding bytes others wait for: end now, and drop what
 * it cannot send (read data), so that its bytes go back. */
static void budget_evict(struct bs_budget_holder *h, const char *why)
{
	struct nvmf_queue *q = QUEUE_OF(h);

	if (q->nc && !q->orphan)
		bs_net_conn_log(q->nc, "closing: %s", why);
	nvmf_queue_end(q, "%s", why);
	q->evicted = true;
	/* the kernel may be sending from it (ring mode): it lets go first */
	if (q->nc && !q->orphan)
		bs_net_conn_drop_output(q->nc);
	nvmf_out_drop_all(q);
	if (q->nc && !q->orphan)
		bs_net_conn_kick(q->nc);
}

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
	q->pp.max_data = NVMF_MAXH2CDATA > NVMF_INCAPSULE_MAX
				 ? NVMF_MAXH2CDATA : NVMF_INCAPSULE_MAX;
	q->start_ns = bs_now_ns();
	if (q->ss->exp && q->ss->exp->ctx)
		q->budget = bs_ctx_budget(q->ss->exp->ctx);
	q->bh.wake = budget_wake;
	q->bh.evict = budget_evict;
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

	return !q->ended && !q->eof && !q->shutdown && !input_full(q) &&
	       !budget_blocked(q);
}

/* Zero-copy input: a PDU's data (H2CData, in-capsule) straight into its
 * payload buffer. */
static size_t p_in_direct(void *sess, uint8_t **dst)
{
	struct nvmf_queue *q = sess;

	if (q->ended || !q->in_rest || q->pad_left || !q->ddst ||
	    q->dhave >= q->lay.data_len)
		return 0;
	*dst = q->ddst + q->dhave;
	return q->lay.data_len - q->dhave;
}

static void p_in_direct_done(void *sess, size_t n)
{
	struct nvmf_queue *q = sess;

	if (!n)
		return;
	q->dhave += (uint32_t)n;
	progress(q);
	/* a PDU complete without a data digest is taken now */
	p_input(q, NULL, 0);
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

	progress(q);
	q->out_bytes -= n < q->out_bytes ? n : q->out_bytes;
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
		nvmf_out_free(q, o);
	}
}

void nvmf_out_drop_all(struct nvmf_queue *q)
{
	while (q->out_head) {
		struct nvmf_out *o = q->out_head;

		q->out_head = o->next;
		nvmf_out_free(q, o);
	}
	q->out_tail = NULL;
	q->out_bytes = 0;
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
	nvmf_out_drop_all(q);
	nvmf_buf_put(q, q->icbuf, q->icbuf_len);
	if (q->cmp_buf)
		bs_buf_put(q->cmp_buf, q->cmp_buf_len);	/* not the budget's */
	if (q->budget)
		bs_budget_leave(q->budget, &q->bh);
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
	if (q->budget)
		bs_budget_cancel(q->budget, &q->bh);
	nvmf_ctrl_detach(q);
	/* detached: nothing sends to it any more; take back what was sent */
	if (q->loop)
		bs_loop_cancel_work(q->loop, &q->msg);
	/* commands not in the device go now (a Compare waiting for the
	 * scratch is counted there, but nothing resumes it on an ended
	 * queue); the rest finish first */
	for (c = q->cmds; c; c = next) {
		next = c->next;
		if (!c->in_core || c->cmp_wait) {
			cmd_unlink(c);
			cmd_free(c);
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
	.direct_min = NVMF_DIRECT_MIN,
	/* after data taken zero-copy: its digest and a capsule's header
	 * with its digest (an H2CData header is shorter) */
	.direct_hdr = 2 * BS_NVME_TCP_DIGEST_LEN + BS_NVME_TCP_CMD_HLEN,
	.start = p_start,
	.input = p_input,
	.wants_input = p_wants_input,
	.in_direct = p_in_direct,
	.in_direct_done = p_in_direct_done,
	.output = p_output,
	.out_bytes = p_out_bytes,
	.sent = p_sent,
	.eof = p_eof,
	.shutdown = p_shutdown,
	.finished = p_finished,
	.busy = p_busy,
	.close = p_close,
};
