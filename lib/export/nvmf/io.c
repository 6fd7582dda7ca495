/* SPDX-License-Identifier: MIT */
/*
 * NVM I/O commands on a namespace: Read, Write (FUA; in-capsule data or
 * R2T/H2CData for the rest), Flush, Write Zeroes (DEAC set: a zeroout
 * that may unmap; DEAC clear: zeroout NOUNMAP; FUA; zero buffers written
 * where the device has no write-zeroes), Dataset Management
 * deallocate (a zeroout that may unmap where the device has
 * write_zeroes_unmap, so deallocated blocks read as zeroes as DLFEAT
 * says; else a discard, advisory), Compare. Write Zeroes and Dataset
 * Management only while ONCS has them (nvmf_oncs()), else Invalid Command
 * Opcode. On a port where the
 * namespace's ANA group is inaccessible, in persistent loss or in change
 * every one of them gets the path status of that state (ana.c), without
 * DNR. A command is marked in the device while it is (nvmf_cmd_core()),
 * so that the budget's stall watchdog does not take a slow device for a
 * stalled host: a Write, a Read and each chunk read of a Compare alike.
 *
 * Compare holds only its own data from the server budget, as a Write
 * does (in its capsule, or behind its R2T). What the device holds is
 * read a chunk at a time (CMP_CHUNK, whole LBAs) into the queue's
 * Compare scratch and compared with that chunk of the host's data: the
 * first chunk that differs ends it with Compare Failure, a read error
 * with that error's status. Compares of one queue take the scratch in
 * turn (queue.c). Before, a Compare held twice its data length from the
 * budget, and one whose data came in its capsule held that while it
 * waited for the rest: queues doing so could hold the whole budget,
 * each waiting for more, until the stall timeout ended them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/zero.h>

#include "export/nvmf/nvmf.h"

#define FAIL(c, sf) nvmf_cmd_done((c), (sf) | BS_NVME_SF_DNR, 0, NULL, 0)

/* Bytes of a Compare read from the device at a time: the size of the
 * queue's scratch (whole LBAs; one LBA where that is larger). */
#define CMP_CHUNK (64u << 10)

/* The write cache as the host set it (Set Features on the admin queue,
 * maybe another thread). */
static bool wce(const struct nvmf_cmd *c)
{
	return __atomic_load_n(&c->q->ctrl->wce, __ATOMIC_RELAXED);
}

/* One device request (or zeroout) of @c ended with @result. */
static void cmd_result(struct nvmf_cmd *c, int result)
{
	uint8_t op = c->sqe.opcode;
	uint8_t *data = NULL;
	uint32_t len = 0;
	uint16_t sf;

	if (result && !c->err)
		c->err = result;
	if (--c->pending)
		return;
	nvmf_cmd_core(c, false);
	sf = nvmf_errno_sf(c->err, op != BS_NVME_CMD_READ);
	if (op == BS_NVME_CMD_DSM && c->err == -EOPNOTSUPP)
		sf = 0;		/* deallocate is advisory */
	if (!sf && op == BS_NVME_CMD_READ) {
		data = c->buf;	/* moves to the C2HData PDU */
		len = c->len;
	}
	nvmf_cmd_done(c, sf, 0, data, len);
}

static void req_done(struct bs_req *req)
{
	cmd_result(req->priv, req->result);
}

static void zero_done(void *arg, int result)
{
	cmd_result(arg, result);
}

static void submit(struct nvmf_cmd *c, struct bs_req *req)
{
	nvmf_cmd_core(c, true);
	c->pending++;
	bs_submit(c->ns->unit->dev, req);
}

/* SLBA/NLB of a Read/Write/Compare/Write Zeroes, checked: 0 or a status. */
static uint16_t range(struct nvmf_cmd *c, uint64_t *off, uint64_t *len)
{
	uint64_t slba = bs_nvme_le32(c->sqe.cdw10) |
			(uint64_t)bs_nvme_le32(c->sqe.cdw11) << 32;
	uint64_t nlb = (bs_nvme_le32(c->sqe.cdw12) & BS_NVME_RW_NLB_MASK) + 1;
	uint32_t lbs;
	uint64_t size, blocks;
	bool wzu;

	nvmf_ns_geometry(c->q->ss, c->ns, &lbs, &size, &wzu);
	blocks = size / lbs;

	if (slba >= blocks || nlb > blocks - slba)
		return BS_NVME_SC_LBA_RANGE | BS_NVME_SF_DNR;
	*off = slba * lbs;
	*len = nlb * lbs;
	return 0;
}

/* ---- Compare --------------------------------------------------------------- */

/* Read the next chunk of what the device holds into the scratch. */
static void cmp_next(struct nvmf_cmd *c);

/* The bytes of the chunk at c->cmp_done: a whole one, or what is left. */
static uint32_t cmp_len(const struct nvmf_cmd *c)
{
	uint32_t n = c->len - c->cmp_done;

	return n < c->cmp_chunk ? n : c->cmp_chunk;
}

static void cmp_read_done(struct bs_req *req)
{
	struct nvmf_cmd *c = req->priv;
	struct nvmf_queue *q = c->q;
	uint32_t n = cmp_len(c);	/* the chunk read (cmp_next()) */
	uint16_t sf = 0;

	c->pending--;
	if (req->result)
		sf = nvmf_errno_sf(req->result, false);
	else if (memcmp(c->buf + c->cmp_done, q->cmp_buf, n))
		sf = BS_NVME_SC_COMPARE_FAILED | BS_NVME_SF_DNR;
	else
		c->cmp_done += n;
	/* on to the next chunk; an ended queue answers nothing, so it
	 * stops here */
	if (!sf && c->cmp_done < c->len && !q->ended) {
		cmp_next(c);
		return;
	}
	/* give the scratch back first: answering may free @c and, on a
	 * closed queue, the queue with the scratch */
	nvmf_cmp_scratch_put(c);
	nvmf_cmd_done(c, sf, 0, NULL, 0);
}

static void cmp_next(struct nvmf_cmd *c)
{
	bs_req_init(&c->req, BS_OP_READ, 0, c->cmp_off + c->cmp_done,
		    cmp_len(c), c->q->cmp_buf, cmp_read_done, c);
	submit(c, &c->req);
}

/* A Compare with all of its data in c->buf, the range checked: @off is
 * where it starts on the device. */
static void compare(struct nvmf_cmd *c, uint64_t off)
{
	uint32_t lbs, chunk;
	uint64_t size;
	bool wzu;

	/* in the device from here to its answer (cmd_free()): its
	 * wait for the scratch is for another command's device reads, and
	 * its data held meanwhile is not its host's to move */
	nvmf_cmd_core(c, true);
	nvmf_ns_geometry(c->q->ss, c->ns, &lbs, &size, &wzu);
	chunk = CMP_CHUNK - CMP_CHUNK % lbs;
	if (!chunk)
		chunk = lbs;
	/* waiting for another Compare of the queue: this runs again */
	if (!nvmf_cmp_scratch_take(c, chunk, nvmf_io_exec))
		return;
	c->cmp_off = off;
	c->cmp_done = 0;
	c->cmp_chunk = chunk;
	cmp_next(c);
}

static void dsm(struct nvmf_cmd *c);

void nvmf_io_exec(struct nvmf_cmd *c)
{
	uint32_t cdw12 = bs_nvme_le32(c->sqe.cdw12);
	uint32_t flags = 0;
	uint64_t off, len;
	uint16_t sf;

	if (c->sqe.opcode == BS_NVME_CMD_DSM) {
		dsm(c);
		return;
	}
	sf = range(c, &off, &len);
	if (sf) {
		FAIL(c, sf);
		return;
	}
	if (c->sqe.opcode == BS_NVME_CMD_COMPARE) {
		/* its data only (c->len bytes, held already): checked again,
		 * as this runs again after waiting for the scratch */
		if (len != c->len) {
			FAIL(c, BS_NVME_SC_SGL_INVALID_DATA);
			return;
		}
		compare(c, off);
		return;
	}
	if ((cdw12 & BS_NVME_RW_FUA) || !wce(c))
		flags |= BS_REQ_FUA;
	bs_req_init(&c->req, BS_OP_WRITE, flags, off, len, c->buf, req_done,
		    c);
	submit(c, &c->req);
}

static void rw(struct nvmf_cmd *c, bool write);

static void read_resume(struct nvmf_cmd *c)
{
	rw(c, false);
}

static void rw(struct nvmf_cmd *c, bool write)
{
	uint64_t off, len;
	uint16_t sf = range(c, &off, &len);

	if (sf) {
		FAIL(c, sf);
		return;
	}
	if (len != c->len) {
		FAIL(c, BS_NVME_SC_SGL_INVALID_DATA);
		return;
	}
	if (write && c->ns->unit->readonly) {
		FAIL(c, BS_NVME_SC_NS_WRITE_PROTECTED);
		return;
	}
	if (write) {
		if (c->got == c->len)
			nvmf_io_exec(c);
		else
			nvmf_cmd_want_data(c);
		return;
	}
	if (c->buf) {
		/* a read's data goes to the host, never in its capsule (and
		 * the capsule's buffer must not be lost under the read's) */
		FAIL(c, BS_NVME_SC_SGL_INVALID_TYPE);
		return;
	}
	/* the read's buffer comes from the server budget: without room the
	 * command waits (and so do the queue's next ones) */
	if (!nvmf_cmd_hold(c, c->len, read_resume))
		return;
	bs_req_init(&c->req, BS_OP_READ, 0, off, len, c->buf, req_done, c);
	submit(c, &c->req);
}

static void write_zeroes(struct nvmf_cmd *c)
{
	uint32_t cdw12 = bs_nvme_le32(c->sqe.cdw12);
	unsigned flags = 0;
	uint64_t off, len;
	uint16_t sf = range(c, &off, &len);
	int err;

	if (sf) {
		FAIL(c, sf);
		return;
	}
	if (c->ns->unit->readonly) {
		FAIL(c, BS_NVME_SC_NS_WRITE_PROTECTED);
		return;
	}
	/* DEAC: the blocks may be deallocated (they read as zeroes either
	 * way); without it they must stay allocated */
	if (!(cdw12 & BS_NVME_RW_DEAC))
		flags |= BS_ZERO_NOUNMAP;
	if ((cdw12 & BS_NVME_RW_FUA) || !wce(c))
		flags |= BS_ZERO_FUA;
	/* a zeroout, not a bare write-zeroes request: ONCS promises Write
	 * Zeroes wherever the device zeroes at all, also where the core
	 * writes zero buffers (no write-zeroes command, or one that
	 * answered EOPNOTSUPP) */
	nvmf_cmd_core(c, true);
	c->pending++;
	err = bs_zeroout(c->ns->unit->dev, off, len, flags, NULL, zero_done,
			 c);
	if (err) {
		c->pending--;
		nvmf_cmd_core(c, false);
		nvmf_cmd_done(c, nvmf_errno_sf(err, true), 0, NULL, 0);
	}
}

static void dsm(struct nvmf_cmd *c)
{
	uint32_t nr = (bs_nvme_le32(c->sqe.cdw10) & BS_NVME_DSM_NR_MASK) + 1;
	uint32_t attr = bs_nvme_le32(c->sqe.cdw11);
	struct nvmf_ns *ns = c->ns;
	uint32_t lbs;
	uint64_t size, blocks;
	bool zero;
	const struct bs_nvme_dsm_range *r;
	unsigned i, n = 0;

	if (c->len < nr * sizeof(*r) || c->got < c->len) {
		if (c->got < c->len) {
			nvmf_cmd_want_data(c);
			return;
		}
		FAIL(c, BS_NVME_SC_SGL_INVALID_DATA);
		return;
	}
	nvmf_ns_geometry(c->q->ss, ns, &lbs, &size, &zero);
	blocks = size / lbs;
	if (!(attr & BS_NVME_DSM_AD)) {
		nvmf_cmd_done(c, 0, 0, NULL, 0);	/* hints only */
		return;
	}
	if (ns->unit->readonly) {
		FAIL(c, BS_NVME_SC_NS_WRITE_PROTECTED);
		return;
	}
	r = (const void *)c->buf;
	for (i = 0; i < nr; i++) {
		uint64_t slba = bs_nvme_le64(r[i].slba);
		uint32_t nlb = bs_nvme_le32(r[i].nlb);

		if (slba > blocks || nlb > blocks - slba) {
			FAIL(c, BS_NVME_SC_LBA_RANGE);
			return;
		}
	}
	c->reqs = calloc(nr, sizeof(*c->reqs));
	if (!c->reqs) {
		FAIL(c, BS_NVME_SC_INTERNAL);
		return;
	}
	/* count first: a completion must not see pending reach 0 early */
	for (i = 0; i < nr; i++)
		if (bs_nvme_le32(r[i].nlb))
			n++;
	if (!n) {
		nvmf_cmd_done(c, 0, 0, NULL, 0);
		return;
	}
	c->pending = n;
	nvmf_cmd_core(c, true);
	for (i = 0; i < nr; i++) {
		uint64_t off = bs_nvme_le64(r[i].slba) * lbs;
		uint64_t len = (uint64_t)bs_nvme_le32(r[i].nlb) * lbs;

		if (!len)
			continue;
		/* with write_zeroes_unmap a zeroout that may unmap: the
		 * blocks read as zeroes afterwards, as DLFEAT promises */
		bs_req_init(&c->reqs[i],
			    zero ? BS_OP_WRITE_ZEROES : BS_OP_DISCARD, 0, off,
			    len, NULL, req_done, c);
		bs_submit(ns->unit->dev, &c->reqs[i]);
	}
}

/* Is optional command @bit (BS_NVME_ONCS_*) in ONCS now? A command the
 * controller does not support is Invalid Command Opcode (NVMe Base 2.x,
 * generic status 01h), whatever the namespace. */
static bool oncs_has(struct nvmf_subsys *ss, uint16_t bit)
{
	uint16_t oncs;

	pthread_mutex_lock(&ss->lock);
	oncs = nvmf_oncs(ss);
	pthread_mutex_unlock(&ss->lock);
	return oncs & bit;
}

void nvmf_io(struct nvmf_cmd *c)
{
	uint32_t nsid = bs_nvme_le32(c->sqe.nsid);
	uint16_t sf;

	c->ns = nvmf_ns_find(c->q->ss, nsid);
	if (!c->ns) {
		FAIL(c, BS_NVME_SC_INVALID_NS);
		return;
	}
	sf = nvmf_ana_io_status(c->q->ctrl, c->ns);
	if (sf) {
		/* another path may serve it: no DNR */
		nvmf_cmd_done(c, sf, 0, NULL, 0);
		return;
	}
	switch (c->sqe.opcode) {
	case BS_NVME_CMD_READ:
		rw(c, false);
		return;
	case BS_NVME_CMD_WRITE:
		rw(c, true);
		return;
	case BS_NVME_CMD_COMPARE: {
		uint64_t off, len;

		sf = range(c, &off, &len);
		if (sf || len != c->len) {
			FAIL(c, sf ? sf : BS_NVME_SC_SGL_INVALID_DATA);
			return;
		}
		if (c->got < c->len)
			nvmf_cmd_want_data(c);
		else
			nvmf_io_exec(c);
		return;
	}
	case BS_NVME_CMD_FLUSH:
		bs_req_init(&c->req, BS_OP_FLUSH, 0, 0, 0, NULL, req_done, c);
		submit(c, &c->req);
		return;
	case BS_NVME_CMD_WRITE_ZEROES:
		if (!oncs_has(c->q->ss, BS_NVME_ONCS_WRITE_ZEROES))
			break;
		write_zeroes(c);
		return;
	case BS_NVME_CMD_DSM:
		if (!oncs_has(c->q->ss, BS_NVME_ONCS_DSM))
			break;
		dsm(c);
		return;
	default:
		break;
	}
	FAIL(c, BS_NVME_SC_INVALID_OPCODE);
}
