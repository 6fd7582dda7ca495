/* SPDX-License-Identifier: MIT */
/*
 * The NVMe/TCP target's capability mapping, below the transport: Identify
 * Namespace DLFEAT is (1<<3)|1 exactly while the device has
 * write_zeroes_unmap and follows the queue/write_zeroes_unmap knob, NMIC
 * shared and the identifiers stable; Identify Controller CMIC and ONCS;
 * Write Zeroes on a file device frees the blocks with DEAC and keeps them
 * allocated without it (read back zeroes either way). Admin and I/O
 * commands through the dispatch with their statuses and data: the active
 * namespace list and identification descriptors, the error and SMART
 * logs, the volatile write cache feature (WCE=0 makes writes FUA; Invalid
 * Field without a cache), Flush, Write FUA, Compare (Compare Failure
 * 285h), Abort (not aborted), and devices that cannot discard or zero
 * (ONCS bits clear, those commands Invalid Command Opcode). The discovery log
 * lists every port of every subsystem of the process, each at its own
 * address, reads
 * at any dword offset, and its generation counter moves when one joins
 * or leaves. Through the session ops the network server drives: an
 * H2CData PDU's data goes straight into the write's buffer (zero-copy
 * input), its data digest checked where it landed; a read that finds the
 * server budget full waits, and its queue takes no input, until bytes
 * are given back (and a queue that ends meanwhile passes its turn on at
 * once); a queue holding a write's bytes without sending its data is
 * evicted while another holder waits, but not one whose commands wait in
 * a slow device; a Compare holds only its own data from the budget and
 * reads the device by chunks into its queue's scratch, which the queue's
 * Compares take in turn.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <blkstack/attr.h>
#include <blkstack/budget.h>
#include <blkstack/bufpool.h>
#include <blkstack/loop.h>

#include "core/crc32c.h"
#include "export/nvmf/nvmf.h"
#include "helpers/slowdev.h"
#include "helpers/th.h"

#define MiB (1024 * 1024)

struct fx {
	struct bs_ctx *ctx;
	char dir[64], path[96];
	struct bs_dev *dev;
	struct bs_export exp;
	struct bs_export_unit unit;
	struct nvmf_subsys ss;
	struct nvmf_ctrl ctrl;
	struct nvmf_queue q;
	struct nvmf_ns ns;
};

/* The fixture over device @spec (NULL: a 16 MiB file that punches). */
static int setup_spec(void **state, const char *spec_in)
{
	struct fx *f = calloc(1, sizeof(*f));
	char spec[160];

	th_ctx_setup((void **)&f->ctx);
	snprintf(f->dir, sizeof(f->dir), "/tmp/nvmf-unit-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/f.img", f->dir);
	snprintf(spec, sizeof(spec), "file:%s,size=16M", f->path);
	f->dev = th_dev(f->ctx, "f", spec_in ? spec_in : spec);
	snprintf(f->unit.name, sizeof(f->unit.name), "f");
	f->unit.dev = f->dev;
	bs_dev_caps(f->dev, &f->unit.caps);
	f->unit.readonly = f->unit.caps.readonly;
	f->ns.nsid = 1;
	f->ns.unit = &f->unit;
	f->ns.caps = f->unit.caps;
	pthread_mutex_init(&f->ss.lock, NULL);
	snprintf(f->ss.nqn, sizeof(f->ss.nqn), "nqn.2026-12.org.blkstack:t");
	f->ss.ns = &f->ns;
	f->ss.nns = 1;
	f->ss.qdepth = 128;
	f->ss.incapsule = 16384;
	f->ss.max_ioq = 1;
	bs_net_limits_default(&f->ss.lim);	/* out_max as a listener's */
	f->ctrl.ss = &f->ss;
	f->ctrl.cntlid = 7;
	f->ctrl.wce = true;
	f->ctrl.csts = BS_NVME_CSTS_RDY;
	f->q.ss = &f->ss;
	f->q.ctrl = &f->ctrl;
	f->q.qid = 1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_spec(state, NULL);
}

static int teardown(void **state)
{
	struct fx *f = *state;
	char cmd[128];

	nvmf_out_drop_all(&f->q);
	/* the fixture's queue is never freed: its Compare scratch is */
	if (f->q.cmp_buf)
		bs_buf_put(f->q.cmp_buf, f->q.cmp_buf_len);
	th_ctx_teardown((void **)&f->ctx);
	pthread_mutex_destroy(&f->ss.lock);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void dlfeat_follows_the_knob(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ns id;
	struct bs_nvme_id_ctrl ic;
	uint8_t nguid[16];

	nvmf_id_ns(&f->ns, &id);
	assert_int_equal(id.dlfeat, 9);
	assert_int_equal(id.nmic, BS_NVME_NMIC_SHARED);
	assert_int_equal(bs_nvme_le64(id.nsze), 16 * MiB / 512);
	assert_int_equal(id.lbaf[0].lbads, 9);
	memcpy(nguid, id.nguid, 16);
	nvmf_id_ctrl(&f->q, &ic);
	assert_int_equal(ic.cmic & BS_NVME_CMIC_MULTI_CTRL,
			 BS_NVME_CMIC_MULTI_CTRL);
	assert_int_equal(bs_nvme_le16(ic.oncs),
			 BS_NVME_ONCS_COMPARE | BS_NVME_ONCS_DSM |
				 BS_NVME_ONCS_WRITE_ZEROES);
	assert_int_equal(bs_nvme_le16(ic.cntlid), 7);
	/* IOCCSZ: the 64-byte command and in_capsule bytes, in 16s */
	assert_int_equal(bs_nvme_le32(ic.ioccsz), (64 + 16384) / 16);
	f->ss.incapsule = 0;
	nvmf_id_ctrl(&f->q, &ic);
	assert_int_equal(bs_nvme_le32(ic.ioccsz), 4);
	f->ss.incapsule = 16384;
	assert_int_equal(ic.cntrltype, BS_NVME_CTRL_TYPE_IO);
	assert_int_equal(bs_nvme_le32(ic.nn), 1);
	assert_string_equal(ic.subnqn, "nqn.2026-12.org.blkstack:t");

	assert_int_equal(bs_attr_store(f->dev, "queue/write_zeroes_unmap",
				       "0"), 0);
	bs_dev_caps(f->dev, &f->unit.caps);
	f->ns.caps = f->unit.caps;
	nvmf_id_ns(&f->ns, &id);
	assert_int_equal(id.dlfeat, 0);
	assert_int_equal(id.nmic, BS_NVME_NMIC_SHARED);
	/* identifiers do not move with capabilities */
	assert_memory_equal(id.nguid, nguid, 16);

	assert_int_equal(bs_attr_store(f->dev, "queue/write_zeroes_unmap",
				       "1"), 0);
	bs_dev_caps(f->dev, &f->unit.caps);
	f->ns.caps = f->unit.caps;
	nvmf_id_ns(&f->ns, &id);
	assert_int_equal(id.dlfeat, 9);
}

static long long allocated(struct fx *f)
{
	struct stat st;

	assert_int_equal(stat(f->path, &st), 0);
	return (long long)st.st_blocks * 512;
}

/*
 * Run one command (@sqe as the host sent it) through the admin (@admin)
 * or the I/O dispatch: with @in, @len bytes of host data, all of it here;
 * else @len bytes the controller may send, copied to @out (when not
 * NULL). Returns the response's status field (SCT << 8 | SC, DNR), its
 * Dword 0 in @dw0 (when not NULL). The queue's earlier output is dropped
 * first; this command's stays queued.
 */
static uint16_t exec(struct fx *f, const struct bs_nvme_sqe *sqe, bool admin,
		     const void *in, void *out, uint32_t len, uint32_t *dw0)
{
	struct nvmf_cmd *c = calloc(1, sizeof(*c));
	struct bs_nvme_cqe cqe;
	struct nvmf_out *o;
	uint32_t got = 0;
	int i;

	nvmf_out_drop_all(&f->q);
	c->q = &f->q;
	c->sqe = *sqe;
	c->len = len;
	if (in) {
		assert_int_equal(nvmf_buf_get(&f->q, len, &c->buf), 0);
		c->buf_len = len;
		memcpy(c->buf, in, len);
		c->got = len;
	}
	c->next = f->q.cmds;
	f->q.cmds = c;
	f->q.ncmds++;
	if (admin)
		nvmf_admin(c);
	else
		nvmf_io(c);
	for (i = 0; i < 2000 && f->q.cmds; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_null(f->q.cmds);
	/* C2HData PDUs (the data in order), then the response, last */
	for (o = f->q.out_head; o && o->next; o = o->next) {
		assert_int_equal(o->hdr[0], BS_NVME_TCP_C2H_DATA);
		assert_true(got + o->data_len <= len);
		if (out)
			memcpy((uint8_t *)out + got, o->data, o->data_len);
		got += (uint32_t)o->data_len;
	}
	assert_non_null(o);
	assert_int_equal(o->hdr[0], BS_NVME_TCP_RSP);
	memcpy(&cqe, o->hdr + 8, sizeof(cqe));
	assert_int_equal(cqe.cid, sqe->cid);
	if (dw0)
		*dw0 = bs_nvme_le32(cqe.result);
	return bs_nvme_le16(cqe.status) >> 1;
}

/* An I/O command's SQE: @opc on NSID 1, SLBA/NLB and CDW12 flags. */
static struct bs_nvme_sqe io_sqe(uint8_t opc, uint64_t slba, uint32_t nlb,
				 uint32_t cdw12_flags)
{
	struct bs_nvme_sqe sqe;

	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = opc;
	sqe.cid = 5;
	sqe.nsid = bs_nvme_cpu_to_le32(1);
	sqe.cdw10 = bs_nvme_cpu_to_le32((uint32_t)slba);
	sqe.cdw11 = bs_nvme_cpu_to_le32((uint32_t)(slba >> 32));
	sqe.cdw12 = bs_nvme_cpu_to_le32((nlb - 1) | cdw12_flags);
	return sqe;
}

/* Run one I/O command through io.c; the response status field. */
static uint16_t run(struct fx *f, uint8_t opc, uint64_t slba, uint32_t nlb,
		    uint32_t cdw12_flags, void *data, uint32_t len)
{
	struct bs_nvme_sqe sqe = io_sqe(opc, slba, nlb, cdw12_flags);

	return exec(f, &sqe, false, data, NULL, len, NULL);
}

static void write_zeroes_deac_mapping(void **state)
{
	struct fx *f = *state;
	uint8_t *buf = malloc(4 * MiB);
	long long before;

	memset(buf, 0xa5, 4 * MiB);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 0, 2048, 0, buf, MiB), 0);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 2048, 2048, 0, buf, MiB),
			 0);
	assert_int_equal(bs_flush_sync(f->dev), 0);
	before = allocated(f);
	assert_true(before >= 2 * MiB);

	/* without DEAC: zeroes, blocks kept */
	assert_int_equal(run(f, BS_NVME_CMD_WRITE_ZEROES, 0, 2048, 0, NULL, 0),
			 0);
	assert_true(allocated(f) >= before);
	assert_int_equal(bs_read_sync(f->dev, buf, MiB, 0), 0);
	assert_true(th_is_zero(buf, MiB));

	/* with DEAC (and FUA): zeroes, blocks freed */
	assert_int_equal(run(f, BS_NVME_CMD_WRITE_ZEROES, 2048, 2048,
			     BS_NVME_RW_DEAC | BS_NVME_RW_FUA, NULL, 0),
			 0);
	assert_true(allocated(f) <= before - MiB);
	assert_int_equal(bs_read_sync(f->dev, buf, MiB, MiB), 0);
	assert_true(th_is_zero(buf, MiB));

	/* past the end: LBA Out of Range, DNR */
	assert_int_equal(run(f, BS_NVME_CMD_WRITE_ZEROES, 16 * MiB / 512, 1,
			     0, NULL, 0),
			 BS_NVME_SC_LBA_RANGE | BS_NVME_SF_DNR);
	/* an unknown opcode */
	assert_int_equal(run(f, 0x7e, 0, 1, 0, NULL, 0),
			 BS_NVME_SC_INVALID_OPCODE | BS_NVME_SF_DNR);
	free(buf);
}

/* The network server asks for one iovec to learn whether output waits:
 * queued output must answer it (it answered 0 and the queue stalled). */
static void output_answers_one_iovec(void **state)
{
	struct fx *f = *state;
	struct iovec iov[8];

	assert_int_equal(run(f, BS_NVME_CMD_READ, 0, 8, 0, NULL, 4096), 0);
	/* C2HData header, data, then the response */
	assert_int_equal(nvmf_net_proto.output(&f->q, iov, 1), 1);
	assert_ptr_equal(iov[0].iov_base, f->q.out_head->hdr);
	assert_int_equal(nvmf_net_proto.output(&f->q, iov, 2), 2);
	assert_int_equal(iov[1].iov_len, 4096);
	assert_int_equal(nvmf_net_proto.output(&f->q, iov, 8), 3);
	/* part of the header sent: one iovec is still the rest of it */
	nvmf_net_proto.sent(&f->q, 3);
	assert_int_equal(nvmf_net_proto.output(&f->q, iov, 1), 1);
	assert_ptr_equal(iov[0].iov_base, f->q.out_head->hdr + 3);
}

/* Every nvmf subsystem of the process in the discovery log, at offsets. */
static void discovery_lists_every_subsystem(void **state)
{
	struct nvmf_subsys a, b;
	uint8_t page[4096], part[1024 + 8];
	const struct bs_nvme_disc_log_hdr *h = (const void *)page;
	const struct bs_nvme_disc_log_entry *e1 = (const void *)(page + 1024);
	const struct bs_nvme_disc_log_entry *e2 = (const void *)(page + 2048);
	const struct bs_nvme_disc_log_entry *e3 = (const void *)(page + 3072);
	uint64_t gen, n0;

	(void)state;
	nvmf_discovery_log(NULL, page, 0, sizeof(page));
	n0 = bs_nvme_le64(h->numrec);
	gen = bs_nvme_le64(h->genctr);
	assert_int_equal(n0, 0);
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	snprintf(a.nqn, sizeof(a.nqn), "nqn.2026-12.org.blkstack:a");
	a.nports = 1;
	snprintf(a.ports[0].listen, sizeof(a.ports[0].listen),
		 "127.0.0.1:4420");
	a.qdepth = 128;
	/* b has two ports: one entry each */
	snprintf(b.nqn, sizeof(b.nqn), "nqn.2026-12.org.blkstack:b");
	b.nports = 2;
	snprintf(b.ports[0].listen, sizeof(b.ports[0].listen), "[::1]:4421");
	snprintf(b.ports[1].listen, sizeof(b.ports[1].listen),
		 "127.0.0.2:4422");
	b.qdepth = 32;
	nvmf_disc_add(&a);
	nvmf_disc_add(&b);

	nvmf_discovery_log(&a, page, 0, sizeof(page));
	assert_int_equal(bs_nvme_le64(h->numrec), 3);
	assert_true(bs_nvme_le64(h->genctr) != gen);
	gen = bs_nvme_le64(h->genctr);
	assert_string_equal(e1->subnqn, "nqn.2026-12.org.blkstack:a");
	assert_memory_equal(e1->traddr, "127.0.0.1 ", 10);
	assert_memory_equal(e1->trsvcid, "4420 ", 5);
	assert_int_equal(e1->adrfam, BS_NVME_ADRFAM_IPV4);
	assert_int_equal(bs_nvme_le16(e1->asqsz), 128);
	assert_string_equal(e2->subnqn, "nqn.2026-12.org.blkstack:b");
	assert_memory_equal(e2->traddr, "::1 ", 4);
	assert_memory_equal(e2->trsvcid, "4421 ", 5);
	assert_int_equal(e2->adrfam, BS_NVME_ADRFAM_IPV6);
	assert_true(bs_nvme_le16(e1->portid) != bs_nvme_le16(e2->portid));
	assert_string_equal(e3->subnqn, "nqn.2026-12.org.blkstack:b");
	assert_memory_equal(e3->traddr, "127.0.0.2 ", 10);
	assert_memory_equal(e3->trsvcid, "4422 ", 5);
	assert_true(bs_nvme_le16(e3->portid) != bs_nvme_le16(e2->portid));

	/* the same page from the listener of the other subsystem */
	memset(part, 0xee, sizeof(part));
	nvmf_discovery_log(&b, part, 0, 1024);
	assert_memory_equal(part, page, 1024);

	/* an offset: the third entry alone, the rest past the end zero */
	memset(part, 0xee, sizeof(part));
	nvmf_discovery_log(&a, part, 3072, sizeof(part));
	assert_memory_equal(part, page + 3072, 1024);
	assert_true(th_is_zero(part + 1024, 8));
	/* an offset inside the header: genctr onwards */
	nvmf_discovery_log(&a, part, 8, 16);
	assert_memory_equal(part, page + 8, 16);
	/* past the end: zeroes */
	memset(part, 0xee, sizeof(part));
	nvmf_discovery_log(&a, part, 5120, 64);
	assert_true(th_is_zero(part, 64));

	/* one leaves: a new generation, one record */
	nvmf_disc_remove(&a);
	nvmf_discovery_log(&b, page, 0, sizeof(page));
	assert_int_equal(bs_nvme_le64(h->numrec), 2);
	assert_true(bs_nvme_le64(h->genctr) != gen);
	assert_string_equal(e1->subnqn, "nqn.2026-12.org.blkstack:b");
	nvmf_disc_remove(&b);
}

/* ---- through the session ops ------------------------------------------- */

/* A queue as the network server starts it (no connection), attached to
 * the fixture's controller as I/O queue 1, ICReq done. */
static struct nvmf_queue *ops_queue(struct fx *f, struct nvmf_port *port,
				    bool ddgst)
{
	void *sess = NULL;
	struct nvmf_queue *q;

	f->exp.ctx = f->ctx;
	f->ss.exp = &f->exp;
	memset(port, 0, sizeof(*port));
	port->ss = &f->ss;
	assert_int_equal(nvmf_net_proto.start(port, NULL, &sess), 0);
	q = sess;
	q->ctrl = &f->ctrl;
	q->qid = 1;
	q->sqsize = 31;
	q->pp.ic_done = true;
	q->pp.ddgst = ddgst;
	return q;
}

/* A CapsuleCmd without in-capsule data: @opc of @len bytes at LBA 0. */
static void put_capsule(struct fx *f, struct nvmf_queue *q, uint8_t opc,
			uint16_t cid, uint32_t len)
{
	uint8_t pdu[BS_NVME_TCP_CMD_HLEN] = { BS_NVME_TCP_CMD, 0,
					     BS_NVME_TCP_CMD_HLEN, 0 };
	struct bs_nvme_sqe sqe;
	uint32_t lbs;
	uint64_t size;
	bool wzu;

	nvmf_ns_geometry(&f->ss, &f->ns, &lbs, &size, &wzu);
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = opc;
	sqe.flags = BS_NVME_SQE_PSDT_SGL;
	sqe.cid = cid;
	sqe.nsid = bs_nvme_cpu_to_le32(1);
	sqe.cdw12 = bs_nvme_cpu_to_le32(len / lbs - 1);
	sqe.dptr.type = BS_NVME_SGL_TCP_TRANSPORT;
	sqe.dptr.length = bs_nvme_cpu_to_le32(len);
	bs_nvme_put32(pdu + 4, BS_NVME_TCP_CMD_HLEN);
	memcpy(pdu + 8, &sqe, sizeof(sqe));
	assert_int_equal(nvmf_net_proto.input(q, pdu, sizeof(pdu)),
			 sizeof(pdu));
}

/* The CQE of the last response queued on @q in @cqe; false: none. */
static bool last_cqe(struct nvmf_queue *q, struct bs_nvme_cqe *cqe)
{
	struct nvmf_out *o, *rsp = NULL;

	for (o = q->out_head; o; o = o->next)
		if (o->hdr[0] == BS_NVME_TCP_RSP)
			rsp = o;
	if (!rsp)
		return false;
	memcpy(cqe, rsp->hdr + 8, sizeof(*cqe));
	return true;
}

/* The status of the last response queued on @q (-1: none). */
static int last_status(struct nvmf_queue *q)
{
	struct bs_nvme_cqe cqe;

	if (!last_cqe(q, &cqe))
		return -1;
	return bs_nvme_le16(cqe.status) >> 1;
}

/* Close @q as the network server does (not attached for real: detach
 * it first). */
static void ops_close(struct nvmf_queue *q)
{
	q->ctrl = NULL;
	nvmf_net_proto.close(q, "test over");
}

static void settle(struct fx *f, struct nvmf_queue *q)
{
	int i;

	for (i = 0; i < 2000 && q->cmds; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_null(q->cmds);
}

/* A 64 KiB write's data after its R2T: zero-copy, @bad: a wrong digest. */
static void h2c_direct(struct fx *f, bool ddgst, bool bad)
{
	const uint32_t len = 64 * 1024;
	struct nvmf_port port;
	struct nvmf_queue *q = ops_queue(f, &port, ddgst);
	uint8_t hdr[BS_NVME_TCP_DATA_HLEN] = { BS_NVME_TCP_H2C_DATA, 0,
					       BS_NVME_TCP_DATA_HLEN,
					       BS_NVME_TCP_DATA_HLEN };
	uint8_t *dst, *want = malloc(len), *got = malloc(len), dg[4];
	struct nvmf_out *o;
	uint16_t cid = 9, ttag;
	uint32_t i;

	for (i = 0; i < len; i++)
		want[i] = (uint8_t)(i * 7 + ddgst + bad);
	put_capsule(f, q, BS_NVME_CMD_WRITE, cid, len);
	/* the R2T asks for all of it */
	o = q->out_tail;
	assert_non_null(o);
	assert_int_equal(o->hdr[0], BS_NVME_TCP_R2T);
	assert_int_equal(bs_nvme_get32(o->hdr + 16), len);
	memcpy(&ttag, o->hdr + 10, 2);

	if (ddgst)
		hdr[1] = BS_NVME_TCP_F_DDGST;
	bs_nvme_put32(hdr + 4, BS_NVME_TCP_DATA_HLEN + len + (ddgst ? 4 : 0));
	memcpy(hdr + 8, &cid, 2);
	memcpy(hdr + 10, &ttag, 2);
	bs_nvme_put32(hdr + 16, len);
	/* no room before the header is in */
	assert_non_null(nvmf_net_proto.in_direct);
	assert_non_null(nvmf_net_proto.in_direct_done);
	assert_int_equal(nvmf_net_proto.in_direct(q, &dst), 0);
	assert_int_equal(nvmf_net_proto.input(q, hdr, 10), 10);
	assert_int_equal(nvmf_net_proto.in_direct(q, &dst), 0);
	assert_int_equal(nvmf_net_proto.input(q, hdr + 10, sizeof(hdr) - 10),
			 sizeof(hdr) - 10);
	/* the rest of the PDU goes straight into the command's buffer */
	assert_int_equal(nvmf_net_proto.in_direct(q, &dst), len);
	assert_ptr_equal(dst, q->cmds->buf);
	memcpy(dst, want, 4096);
	nvmf_net_proto.in_direct_done(q, 4096);
	assert_int_equal(nvmf_net_proto.in_direct(q, &dst), len - 4096);
	assert_ptr_equal(dst, q->cmds->buf + 4096);
	memcpy(dst, want + 4096, len - 4096);
	nvmf_net_proto.in_direct_done(q, len - 4096);
	assert_int_equal(nvmf_net_proto.in_direct(q, &dst), 0);
	if (ddgst) {
		/* the data digest comes through the input buffer, checked
		 * over the data where it landed */
		bs_nvme_put32(dg, bs_crc32c(want, len) ^ (bad ? 1 : 0));
		assert_int_equal(nvmf_net_proto.input(q, dg, 4), 4);
	}
	if (bad) {
		assert_true(q->ended);
		assert_string_equal(q->reason, "data digest mismatch");
	} else {
		settle(f, q);
		assert_int_equal(last_status(q), 0);
		assert_int_equal(bs_read_sync(f->dev, got, len, 0), 0);
		assert_memory_equal(got, want, len);
	}
	ops_close(q);
	free(want);
	free(got);
}

static void h2c_data_zero_copy(void **state)
{
	h2c_direct(*state, false, false);
}

static void h2c_data_zero_copy_digest(void **state)
{
	h2c_direct(*state, true, false);
}

static void h2c_data_zero_copy_bad_digest(void **state)
{
	h2c_direct(*state, true, true);
}

/* A read that finds the budget full waits for it, and its queue reads no
 * new PDU meanwhile; bytes given back wake it and it completes. */
static void read_waits_for_the_budget(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_budget_holder other;
	struct nvmf_port port;
	struct nvmf_queue *q;
	int i;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, BS_BUDGET_MIN - 512 * 1024));
	q = ops_queue(f, &port, false);
	put_capsule(f, q, BS_NVME_CMD_READ, 3, MiB);
	for (i = 0; i < 20; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 1);
	/* waiting: no answer, no read in the device, no input */
	assert_non_null(q->cmds);
	assert_false(q->cmds->in_core);
	assert_int_equal(last_status(q), -1);
	assert_false(nvmf_net_proto.wants_input(q));
	assert_true(bs_budget_used(b) <= BS_BUDGET_MIN);

	bs_budget_give(b, &other, BS_BUDGET_MIN - 512 * 1024);
	settle(f, q);
	assert_int_equal(last_status(q), 0);
	assert_int_equal(q->out_head->hdr[0], BS_NVME_TCP_C2H_DATA);
	assert_int_equal(q->out_head->data_len, MiB);
	assert_true(nvmf_net_proto.wants_input(q));
	/* the read data holds its bytes until sent */
	assert_int_equal(bs_budget_used(b), MiB);
	ops_close(q);
	assert_int_equal(bs_budget_used(b), 0);
	bs_budget_leave(b, &other);
}

struct waiter {
	struct bs_budget_holder h;	/* first */
	int woken;
};

static void waiter_wake(struct bs_budget_holder *h)
{
	((struct waiter *)h)->woken++;
}

/*
 * A queue with a read waiting for the budget, woken for its turn, that
 * ends before its wake ran (a fatal transport error, the host's
 * Disconnect, an eviction) waits no more: the next waiter is woken then,
 * not a second later nor when the queue is freed.
 */
static void ended_queue_passes_the_turn_on(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	uint64_t held = BS_BUDGET_MIN - 512 * 1024;
	struct bs_budget_holder other;
	struct waiter next;
	struct nvmf_port port;
	struct nvmf_queue *q;
	int i;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, held));
	q = ops_queue(f, &port, false);
	put_capsule(f, q, BS_NVME_CMD_READ, 3, MiB);
	for (i = 0; i < 20; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 1);
	assert_non_null(q->cmds);
	assert_false(q->cmds->in_core);
	memset(&next, 0, sizeof(next));
	next.h.wake = waiter_wake;
	assert_false(bs_budget_take(b, &next.h, 8 * MiB));
	/* room for both: the queue's turn (the smaller); it ends before
	 * its wake runs */
	bs_budget_give(b, &other, 16 * MiB);
	nvmf_queue_end(q, "test: ended");
	bs_loop_run_once(bs_ctx_loop(f->ctx), 0);
	assert_int_equal(next.woken, 1);
	assert_true(bs_budget_take(b, &next.h, 8 * MiB));
	assert_int_equal(last_status(q), -1);	/* the read never ran */
	ops_close(q);
	bs_budget_leave(b, &next.h);
	bs_budget_leave(b, &other);
	assert_int_equal(bs_budget_used(b), 0);
}

/* A queue that holds a write's bytes (R2T sent) and never sends its data
 * is evicted while another holder waits: ended, its output dropped, its
 * bytes back once it closes. */
static void stalled_write_is_evicted(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_budget_holder other;
	struct nvmf_port port;
	struct nvmf_queue *q;
	int i;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 20), 0);
	q = ops_queue(f, &port, false);
	put_capsule(f, q, BS_NVME_CMD_WRITE, 4, MiB);
	assert_int_equal(q->out_tail->hdr[0], BS_NVME_TCP_R2T);
	assert_int_equal(bs_budget_used(b), MiB);
	memset(&other, 0, sizeof(other));
	assert_false(bs_budget_take(b, &other, BS_BUDGET_MIN));
	for (i = 0; i < 500 && !q->ended; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_true(q->ended);
	assert_non_null(strstr(q->reason, "no progress for"));
	assert_null(q->out_head);
	ops_close(q);
	assert_int_equal(bs_budget_used(b), 0);
	bs_budget_leave(b, &other);
}

/*
 * In-capsule data in front of the data of an R2T already granted, with
 * the budget full: the in-capsule bytes are taken above the limit, so
 * that input reaches the H2CData behind them (which gives bytes back).
 * Before, input stopped at the capsule's header and queues holding the
 * budget that way waited for each other until the stall timeout.
 */
static void incapsule_ahead_of_granted_data(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_budget_holder other;
	struct nvmf_port port;
	struct nvmf_queue *q;
	const uint32_t ic = 4096, len = MiB;
	size_t total = BS_NVME_TCP_CMD_HLEN + ic + BS_NVME_TCP_DATA_HLEN + len;
	uint8_t *wire = calloc(1, total), *p = wire, *got = malloc(len);
	struct bs_nvme_sqe sqe;
	uint16_t cid = 4, ttag;
	size_t off = 0;
	uint32_t i;
	int n;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	q = ops_queue(f, &port, false);
	/* a 1 MiB write at LBA 0: its bytes held, R2T sent */
	put_capsule(f, q, BS_NVME_CMD_WRITE, cid, len);
	assert_int_equal(q->out_tail->hdr[0], BS_NVME_TCP_R2T);
	memcpy(&ttag, q->out_tail->hdr + 10, 2);
	/* everything else is taken */
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, BS_BUDGET_MIN - len));

	/* a 4 KiB write at LBA 4096 with in-capsule data ... */
	p[0] = BS_NVME_TCP_CMD;
	p[2] = BS_NVME_TCP_CMD_HLEN;
	p[3] = BS_NVME_TCP_CMD_HLEN;
	bs_nvme_put32(p + 4, BS_NVME_TCP_CMD_HLEN + ic);
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = BS_NVME_CMD_WRITE;
	sqe.flags = BS_NVME_SQE_PSDT_SGL;
	sqe.cid = 5;
	sqe.nsid = bs_nvme_cpu_to_le32(1);
	sqe.cdw10 = bs_nvme_cpu_to_le32(4096);
	sqe.cdw12 = bs_nvme_cpu_to_le32(ic / 512 - 1);
	sqe.dptr.type = BS_NVME_SGL_TCP_INCAPSULE;
	sqe.dptr.length = bs_nvme_cpu_to_le32(ic);
	memcpy(p + 8, &sqe, sizeof(sqe));
	memset(p + BS_NVME_TCP_CMD_HLEN, 0xc5, ic);
	p += BS_NVME_TCP_CMD_HLEN + ic;
	/* ... then the first write's data */
	p[0] = BS_NVME_TCP_H2C_DATA;
	p[2] = BS_NVME_TCP_DATA_HLEN;
	p[3] = BS_NVME_TCP_DATA_HLEN;
	bs_nvme_put32(p + 4, BS_NVME_TCP_DATA_HLEN + len);
	memcpy(p + 8, &cid, 2);
	memcpy(p + 10, &ttag, 2);
	bs_nvme_put32(p + 16, len);
	for (i = 0; i < len; i++)
		p[BS_NVME_TCP_DATA_HLEN + i] = (uint8_t)(i * 13 + 1);

	for (n = 0; n < 100 && off < total; n++) {
		if (!nvmf_net_proto.wants_input(q))
			break;
		off += nvmf_net_proto.input(q, wire + off, total - off);
		bs_loop_run_once(bs_ctx_loop(f->ctx), 1);
	}
	assert_int_equal(off, total);
	settle(f, q);
	assert_int_equal(last_status(q), 0);
	assert_int_equal(bs_read_sync(f->dev, got, len, 0), 0);
	assert_memory_equal(got, p + BS_NVME_TCP_DATA_HLEN, len);
	assert_int_equal(bs_read_sync(f->dev, got, ic, 4096 * 512ull), 0);
	for (i = 0; i < ic; i++)
		assert_int_equal(got[i], 0xc5);
	/* the in-capsule bytes went above the limit, and back */
	assert_int_equal(bs_budget_over(b), ic);
	assert_int_equal(bs_budget_used(b), BS_BUDGET_MIN - len);
	ops_close(q);
	bs_budget_leave(b, &other);
	assert_int_equal(bs_budget_used(b), 0);
	free(wire);
	free(got);
}

/* ---- admin and I/O commands through the dispatch ------------------------ */

/* An admin command's SQE: @opc with NSID and CDW10/CDW11. */
static struct bs_nvme_sqe admin_sqe(uint8_t opc, uint32_t nsid,
				    uint32_t cdw10, uint32_t cdw11)
{
	struct bs_nvme_sqe sqe;

	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = opc;
	sqe.cid = 0x31;
	sqe.nsid = bs_nvme_cpu_to_le32(nsid);
	sqe.cdw10 = bs_nvme_cpu_to_le32(cdw10);
	sqe.cdw11 = bs_nvme_cpu_to_le32(cdw11);
	return sqe;
}

static uint16_t identify(struct fx *f, uint8_t cns, uint32_t nsid,
			 uint8_t *out)
{
	struct bs_nvme_sqe sqe = admin_sqe(BS_NVME_ADMIN_IDENTIFY, nsid, cns,
					   0);

	return exec(f, &sqe, true, NULL, out, BS_NVME_IDENTIFY_SIZE, NULL);
}

/* Identify CNS 02h: active NSIDs above CDW1.NSID, ascending, zero-filled;
 * FFFFFFFEh and FFFFFFFFh are Invalid Namespace or Format (NVMe Base 2.1
 * 5.1.13.2.2). CNS 03h: EUI-64, NGUID, UUID and CSI descriptors with the
 * namespace's identifiers; an inactive NSID is Invalid Namespace. */
static void identify_ns_list_and_descriptors(void **state)
{
	struct fx *f = *state;
	struct nvmf_ns ns[3];
	uint8_t *b = malloc(BS_NVME_IDENTIFY_SIZE);
	unsigned i;

	for (i = 0; i < 3; i++) {
		ns[i] = f->ns;
		ns[i].nsid = i + 1;
		memset(ns[i].eui64, 0x10 + i, 8);
		memset(ns[i].nguid, 0x20 + i, 16);
		memset(ns[i].uuid, 0x30 + i, 16);
	}
	f->ss.ns = ns;
	f->ss.nns = 3;

	memset(b, 0xee, BS_NVME_IDENTIFY_SIZE);
	assert_int_equal(identify(f, BS_NVME_CNS_NS_ACTIVE_LIST, 0, b), 0);
	assert_int_equal(bs_nvme_get32(b), 1);
	assert_int_equal(bs_nvme_get32(b + 4), 2);
	assert_int_equal(bs_nvme_get32(b + 8), 3);
	assert_true(th_is_zero(b + 12, BS_NVME_IDENTIFY_SIZE - 12));
	assert_int_equal(identify(f, BS_NVME_CNS_NS_ACTIVE_LIST, 1, b), 0);
	assert_int_equal(bs_nvme_get32(b), 2);
	assert_int_equal(bs_nvme_get32(b + 4), 3);
	assert_true(th_is_zero(b + 8, BS_NVME_IDENTIFY_SIZE - 8));
	assert_int_equal(identify(f, BS_NVME_CNS_NS_ACTIVE_LIST, 3, b), 0);
	assert_true(th_is_zero(b, BS_NVME_IDENTIFY_SIZE));
	assert_int_equal(identify(f, BS_NVME_CNS_NS_ACTIVE_LIST, 0xfffffffe,
				  NULL),
			 BS_NVME_SC_INVALID_NS | BS_NVME_SF_DNR);
	assert_int_equal(identify(f, BS_NVME_CNS_NS_ACTIVE_LIST, 0xffffffff,
				  NULL),
			 BS_NVME_SC_INVALID_NS | BS_NVME_SF_DNR);

	/* namespace 2's descriptors: type, length, 2 reserved, the value */
	memset(b, 0xee, BS_NVME_IDENTIFY_SIZE);
	assert_int_equal(identify(f, BS_NVME_CNS_NS_DESC_LIST, 2, b), 0);
	assert_int_equal(b[0], BS_NVME_NIDT_EUI64);
	assert_int_equal(b[1], 8);
	assert_memory_equal(b + 4, ns[1].eui64, 8);
	assert_int_equal(b[12], BS_NVME_NIDT_NGUID);
	assert_int_equal(b[13], 16);
	assert_memory_equal(b + 16, ns[1].nguid, 16);
	assert_int_equal(b[32], BS_NVME_NIDT_UUID);
	assert_int_equal(b[33], 16);
	assert_memory_equal(b + 36, ns[1].uuid, 16);
	assert_int_equal(b[52], BS_NVME_NIDT_CSI);
	assert_int_equal(b[53], 1);
	assert_int_equal(b[56], BS_NVME_CSI_NVM);
	/* then a zero descriptor ends the list */
	assert_true(th_is_zero(b + 57, BS_NVME_IDENTIFY_SIZE - 57));
	assert_int_equal(identify(f, BS_NVME_CNS_NS_DESC_LIST, 4, NULL),
			 BS_NVME_SC_INVALID_NS | BS_NVME_SF_DNR);
	f->ss.ns = &f->ns;
	f->ss.nns = 1;
	free(b);
}

static uint16_t get_log(struct fx *f, uint8_t lid, uint32_t nsid,
			uint32_t len, uint64_t off, uint8_t *out)
{
	uint32_t numd = len / 4 - 1;
	struct bs_nvme_sqe sqe = admin_sqe(BS_NVME_ADMIN_GET_LOG_PAGE, nsid,
					   lid | (numd & 0xffff) << 16,
					   numd >> 16);

	sqe.cdw12 = bs_nvme_cpu_to_le32((uint32_t)off);
	sqe.cdw13 = bs_nvme_cpu_to_le32((uint32_t)(off >> 32));
	return exec(f, &sqe, true, NULL, out, len, NULL);
}

/* Get Log Page: the error log is ELPE + 1 = one 64-byte entry, empty
 * (Error Count 0: no error recorded); SMART / Health is 512 bytes with no
 * critical warning, a composite temperature in Kelvin, available spare
 * 100% above its 10% threshold, 0% used, for NSID 0 and FFFFFFFFh alike;
 * an offset reads from there and past the end of a page is Invalid Field;
 * an unknown page is Invalid Log Page. */
static void log_pages_error_and_smart(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ctrl *ic = malloc(sizeof(*ic));
	uint8_t *b = malloc(4096), *whole = malloc(512);

	nvmf_id_ctrl(&f->q, ic);
	assert_int_equal(ic->elpe, 0);
	assert_int_equal(ic->lpa & BS_NVME_LPA_EXT_DATA, BS_NVME_LPA_EXT_DATA);

	memset(b, 0xee, 4096);
	assert_int_equal(get_log(f, BS_NVME_LOG_ERROR, 0, 64, 0, b), 0);
	assert_true(th_is_zero(b, 64));
	/* more than the page: zeroes after it */
	memset(b, 0xee, 4096);
	assert_int_equal(get_log(f, BS_NVME_LOG_ERROR, 0, 4096, 0, b), 0);
	assert_true(th_is_zero(b, 4096));

	memset(whole, 0xee, 512);
	assert_int_equal(get_log(f, BS_NVME_LOG_SMART, 0xffffffff, 512, 0,
				 whole),
			 0);
	assert_int_equal(whole[0], 0);			/* critical warning */
	assert_int_equal(whole[1] | whole[2] << 8, 273 + 30);	/* Kelvin */
	assert_int_equal(whole[3], 100);		/* available spare */
	assert_int_equal(whole[4], 10);			/* its threshold */
	assert_int_equal(whole[5], 0);			/* percentage used */
	assert_true(th_is_zero(whole + 6, 512 - 6));
	memset(b, 0xee, 4096);
	assert_int_equal(get_log(f, BS_NVME_LOG_SMART, 0, 512, 0, b), 0);
	assert_memory_equal(b, whole, 512);
	/* LPO 4: bytes 4.. of the page */
	memset(b, 0xee, 4096);
	assert_int_equal(get_log(f, BS_NVME_LOG_SMART, 0, 8, 4, b), 0);
	assert_memory_equal(b, whole + 4, 8);
	assert_int_equal(get_log(f, BS_NVME_LOG_SMART, 0, 8, 516, NULL),
			 BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR);
	assert_int_equal(get_log(f, BS_NVME_LOG_SMART, 0, 8, 2, NULL),
			 BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR);
	assert_int_equal(get_log(f, 0xc5, 0, 64, 0, NULL),
			 BS_NVME_SC_INVALID_LOG_PAGE | BS_NVME_SF_DNR);
	free(ic);
	free(b);
	free(whole);
}

/* A Connect for queue @qid of controller @cntlid (0xffff: a new one) of
 * the fixture's subsystem by host "h", its 1 KiB of data in the capsule;
 * the status of the answer. */
static int put_connect_r2t(struct nvmf_queue *q, uint16_t qid,
			   uint16_t cntlid, bool r2t)
{
	uint8_t pdu[BS_NVME_TCP_CMD_HLEN + sizeof(struct bs_nvme_connect_data)];
	uint8_t h2c[BS_NVME_TCP_DATA_HLEN] = { BS_NVME_TCP_H2C_DATA, 0,
					       BS_NVME_TCP_DATA_HLEN,
					       BS_NVME_TCP_DATA_HLEN };
	struct bs_nvme_connect_cmd cmd;
	struct bs_nvme_connect_data d;
	size_t clen = r2t ? BS_NVME_TCP_CMD_HLEN : sizeof(pdu);

	memset(pdu, 0, sizeof(pdu));
	pdu[0] = BS_NVME_TCP_CMD;
	pdu[2] = BS_NVME_TCP_CMD_HLEN;
	pdu[3] = r2t ? 0 : BS_NVME_TCP_CMD_HLEN;
	bs_nvme_put32(pdu + 4, (uint32_t)clen);
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = BS_NVME_FABRICS_OPC;
	cmd.flags = BS_NVME_SQE_PSDT_SGL;
	cmd.cid = 0x77;
	cmd.fctype = BS_NVME_FCTYPE_CONNECT;
	cmd.dptr.type = r2t ? BS_NVME_SGL_TCP_TRANSPORT
			    : BS_NVME_SGL_TCP_INCAPSULE;
	cmd.dptr.length = bs_nvme_cpu_to_le32(sizeof(d));
	cmd.qid = bs_nvme_cpu_to_le16(qid);
	cmd.sqsize = bs_nvme_cpu_to_le16(31);
	memcpy(pdu + 8, &cmd, sizeof(cmd));
	memset(&d, 0, sizeof(d));
	d.cntlid = bs_nvme_cpu_to_le16(cntlid);
	snprintf(d.subnqn, sizeof(d.subnqn), "%s", q->ss->nqn);
	snprintf(d.hostnqn, sizeof(d.hostnqn), "h");
	memcpy(pdu + BS_NVME_TCP_CMD_HLEN, &d, sizeof(d));
	assert_int_equal(nvmf_net_proto.input(q, pdu, clen), clen);
	if (r2t) {
		/* the data after the R2T that asks for all of it */
		struct nvmf_out *o = q->out_tail;

		assert_non_null(o);
		assert_int_equal(o->hdr[0], BS_NVME_TCP_R2T);
		assert_int_equal(bs_nvme_get32(o->hdr + 16), sizeof(d));
		bs_nvme_put32(h2c + 4, BS_NVME_TCP_DATA_HLEN + sizeof(d));
		memcpy(h2c + 8, o->hdr + 8, 4);		/* CID, TTAG */
		bs_nvme_put32(h2c + 16, sizeof(d));
		assert_int_equal(nvmf_net_proto.input(q, h2c, sizeof(h2c)),
				 sizeof(h2c));
		assert_int_equal(nvmf_net_proto.input(q, (uint8_t *)&d,
						      sizeof(d)),
				 sizeof(d));
	}
	return last_status(q);
}

static int put_connect(struct nvmf_queue *q, uint16_t qid, uint16_t cntlid)
{
	return put_connect_r2t(q, qid, cntlid, false);
}

/*
 * in_capsule = 0 (IOCCSZ 64 bytes): Connect still works. The admin queue
 * (and a queue not connected yet) takes up to 8 KiB in its capsules; an
 * I/O queue's Connect from a host that keeps to IOCCSZ (Linux, libnvmf)
 * carries no data and gets an R2T for its 1 KiB. Before, every Connect
 * was Data SGL Length Invalid. Connected I/O queues keep to IOCCSZ.
 */
static void connect_with_in_capsule_zero(void **state)
{
	struct fx *f = *state;
	struct nvmf_port port;
	struct nvmf_queue *a, *q1, *q2;
	uint16_t cntlid;

	f->ss.incapsule = 0;
	f->ss.max_ioq = 2;
	a = ops_queue(f, &port, false);
	a->ctrl = NULL;
	a->qid = 0;
	assert_int_equal(put_connect(a, 0, 0xffff), 0);
	assert_non_null(a->ctrl);
	cntlid = a->ctrl->cntlid;
	a->ctrl->csts = BS_NVME_CSTS_RDY;	/* CC.EN */

	q1 = ops_queue(f, &port, false);
	q1->ctrl = NULL;
	q1->qid = 0;
	assert_int_equal(put_connect_r2t(q1, 1, cntlid, true), 0);
	assert_ptr_equal(q1->ctrl, a->ctrl);
	assert_int_equal(q1->qid, 1);

	q2 = ops_queue(f, &port, false);
	q2->ctrl = NULL;
	q2->qid = 0;
	assert_int_equal(put_connect(q2, 2, cntlid), 0);
	assert_ptr_equal(q2->ctrl, a->ctrl);

	nvmf_net_proto.close(q1, "test over");
	nvmf_net_proto.close(q2, "test over");
	nvmf_net_proto.close(a, "test over");
	assert_null(f->ss.ctrls);
}

/* An I/O queue may not join a controller whose admin queue is gone (it
 * is ending: nothing would ever close that queue); while the admin
 * queue is there it may. */
static void connect_io_needs_the_admin_queue(void **state)
{
	struct fx *f = *state;
	struct nvmf_port port;
	struct nvmf_queue *q = ops_queue(f, &port, false), admin;

	q->ctrl = NULL;
	q->qid = 0;
	f->ctrl.port = &port;
	f->ctrl.nr_ioq = 1;
	f->ctrl.ioq = calloc(2, sizeof(*f->ctrl.ioq));
	f->ctrl.refs = 2;	/* never freed: it is the fixture's */
	snprintf(f->ctrl.hostnqn, sizeof(f->ctrl.hostnqn), "h");
	f->ss.ctrls = &f->ctrl;
	assert_int_equal(put_connect(q, 1, 7),
			 BS_NVME_SC_CONNECT_INVALID_PARAM | BS_NVME_SF_DNR);
	assert_null(q->ctrl);
	assert_null(f->ctrl.ioq[1]);

	f->ctrl.admin = &admin;
	assert_int_equal(put_connect(q, 1, 7), 0);
	assert_ptr_equal(q->ctrl, &f->ctrl);
	assert_ptr_equal(f->ctrl.ioq[1], q);
	nvmf_net_proto.close(q, "test over");
	assert_null(f->ctrl.ioq[1]);
	f->ss.ctrls = NULL;
	free(f->ctrl.ioq);
}

/*
 * Three writes with in-capsule data in front of the H2CData of a granted
 * R2T, the budget full: one capsule's data at a time goes above the
 * limit; the next waits at its header until that one's write is done,
 * then goes. Before, all three were taken above the limit at once (up to
 * the queue depth x in_capsule: 128 MiB per connection by default).
 */
static void incapsule_over_the_limit_one_at_a_time(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_budget_holder other;
	struct nvmf_port port;
	struct nvmf_queue *q;
	/* above the file driver's inline_write_max: written by its workers,
	 * so each write is still in flight when the next capsule comes */
	const uint32_t ic = 128 * 1024, len = MiB;
	const unsigned nic = 3;
	size_t one = BS_NVME_TCP_CMD_HLEN + ic;
	size_t total = nic * one + BS_NVME_TCP_DATA_HLEN + len;
	uint8_t *wire = calloc(1, total), *p = wire, *got = malloc(ic);
	struct bs_nvme_sqe sqe;
	uint16_t cid = 4, ttag;
	size_t off = 0;
	unsigned i, k;
	int n;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	f->ss.incapsule = MiB;
	q = ops_queue(f, &port, false);
	/* a 1 MiB write by R2T: its bytes held, R2T sent */
	put_capsule(f, q, BS_NVME_CMD_WRITE, cid, len);
	assert_int_equal(q->out_tail->hdr[0], BS_NVME_TCP_R2T);
	memcpy(&ttag, q->out_tail->hdr + 10, 2);
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, BS_BUDGET_MIN - len));

	for (k = 0; k < nic; k++, p += one) {
		p[0] = BS_NVME_TCP_CMD;
		p[2] = BS_NVME_TCP_CMD_HLEN;
		p[3] = BS_NVME_TCP_CMD_HLEN;
		bs_nvme_put32(p + 4, (uint32_t)one);
		memset(&sqe, 0, sizeof(sqe));
		sqe.opcode = BS_NVME_CMD_WRITE;
		sqe.flags = BS_NVME_SQE_PSDT_SGL;
		sqe.cid = (uint16_t)(10 + k);
		sqe.nsid = bs_nvme_cpu_to_le32(1);
		sqe.cdw10 = bs_nvme_cpu_to_le32(8192 + k * (ic / 512));
		sqe.cdw12 = bs_nvme_cpu_to_le32(ic / 512 - 1);
		sqe.dptr.type = BS_NVME_SGL_TCP_INCAPSULE;
		sqe.dptr.length = bs_nvme_cpu_to_le32(ic);
		memcpy(p + 8, &sqe, sizeof(sqe));
		memset(p + BS_NVME_TCP_CMD_HLEN, 0xa0 + k, ic);
	}
	p[0] = BS_NVME_TCP_H2C_DATA;
	p[2] = BS_NVME_TCP_DATA_HLEN;
	p[3] = BS_NVME_TCP_DATA_HLEN;
	bs_nvme_put32(p + 4, BS_NVME_TCP_DATA_HLEN + len);
	memcpy(p + 8, &cid, 2);
	memcpy(p + 10, &ttag, 2);
	bs_nvme_put32(p + 16, len);

	/* all of it in one call: the first capsule goes over, the second
	 * waits at its header */
	off = nvmf_net_proto.input(q, wire, total);
	assert_int_equal(off, one + BS_NVME_TCP_CMD_HLEN);
	assert_int_equal(bs_budget_used(b), BS_BUDGET_MIN + ic);
	assert_false(nvmf_net_proto.wants_input(q));
	/* as the network server does on each kick: feed what is left */
	for (n = 0; n < 2000 && off < total; n++) {
		bs_loop_run_once(bs_ctx_loop(f->ctx), 1);
		off += nvmf_net_proto.input(q, wire + off, total - off);
		assert_true(bs_budget_used(b) <= BS_BUDGET_MIN + ic);
	}
	assert_int_equal(off, total);
	settle(f, q);
	assert_int_equal(last_status(q), 0);
	for (k = 0; k < nic; k++) {
		assert_int_equal(bs_read_sync(f->dev, got, ic,
					      (8192ull + k * (ic / 512)) * 512),
				 0);
		for (i = 0; i < ic; i++)
			assert_int_equal(got[i], 0xa0 + k);
	}
	assert_int_equal(bs_budget_over(b), nic * ic);
	assert_int_equal(q->nover, 0);
	ops_close(q);
	bs_budget_leave(b, &other);
	assert_int_equal(bs_budget_used(b), 0);
	free(wire);
	free(got);
}

/* The SQHD of the last response queued on @q. */
static int last_sqhd(struct nvmf_queue *q)
{
	struct bs_nvme_cqe cqe;

	assert_true(last_cqe(q, &cqe));
	return bs_nvme_le16(cqe.sqhd);
}

/* SQ flow control on: each response's SQHD is the entries consumed so
 * far, modulo the queue's size (SQSIZE + 1 = 32), Connect's own
 * included; with it off, 0 (reserved). Before, always 0. */
static void sqhd_follows_the_queue(void **state)
{
	struct fx *f = *state;
	struct nvmf_port port;
	struct nvmf_queue *a = ops_queue(f, &port, false);
	unsigned i;

	a->ctrl = NULL;
	a->qid = 0;
	assert_int_equal(put_connect(a, 0, 0xffff), 0);
	assert_int_equal(last_sqhd(a), 1);
	nvmf_net_proto.close(a, "test over");

	a = ops_queue(f, &port, false);	/* I/O queue 1, SQSIZE 31 */
	for (i = 1; i <= 40; i++) {
		nvmf_out_drop_all(a);
		put_capsule(f, a, BS_NVME_CMD_READ, (uint16_t)i, 4096);
		settle(f, a);
		assert_int_equal(last_status(a), 0);
		assert_int_equal(last_sqhd(a), i % 32);
	}
	a->sqflow_off = true;
	nvmf_out_drop_all(a);
	put_capsule(f, a, BS_NVME_CMD_FLUSH, 41, 0);
	settle(f, a);
	assert_int_equal(last_sqhd(a), 0);
	ops_close(a);
}

/* ICReq asking for C2HData aligned (HPDA 1..31): our data follows the
 * header unaligned, so the connection is refused (C2HTermReq, Unsupported
 * Parameter at byte 10) as Linux's nvmet does; HPDA 0 is answered. */
static void icreq_hpda_refused(void **state)
{
	struct fx *f = *state;
	struct nvmf_port port;
	struct nvmf_queue *q;
	struct bs_nvme_tcp_icreq r;
	uint8_t hpda;

	for (hpda = 0; hpda < 3; hpda++) {
		q = ops_queue(f, &port, false);
		q->ctrl = NULL;
		q->pp.ic_done = false;
		memset(&r, 0, sizeof(r));
		r.ch.type = BS_NVME_TCP_ICREQ;
		r.ch.hlen = sizeof(r);
		r.ch.plen = bs_nvme_cpu_to_le32(sizeof(r));
		r.hpda = hpda;
		assert_int_equal(nvmf_net_proto.input(q, (uint8_t *)&r,
						      sizeof(r)),
				 sizeof(r));
		assert_non_null(q->out_tail);
		if (!hpda) {
			assert_false(q->ended);
			assert_int_equal(q->out_tail->hdr[0],
					 BS_NVME_TCP_ICRESP);
		} else {
			assert_true(q->ended);
			assert_int_equal(q->out_tail->hdr[0],
					 BS_NVME_TCP_C2H_TERM);
			assert_int_equal(bs_nvme_get16(q->out_tail->hdr + 8),
					 BS_NVME_TCP_FES_UNSUPPORTED_PARAM);
			assert_int_equal(bs_nvme_get32(q->out_tail->hdr + 10),
					 10);
		}
		nvmf_out_drop_all(q);
		ops_close(q);
	}
}

/* @n CapsuleCmds of @sqe (CIDs 0..) back to back, as one read brings
 * them; *@total their bytes. */
static uint8_t *capsules(const struct bs_nvme_sqe *sqe, unsigned n,
			 size_t *total)
{
	uint8_t *wire = calloc(n, BS_NVME_TCP_CMD_HLEN), *p = wire;
	struct bs_nvme_sqe e = *sqe;
	unsigned i;

	assert_non_null(wire);
	for (i = 0; i < n; i++, p += BS_NVME_TCP_CMD_HLEN) {
		p[0] = BS_NVME_TCP_CMD;
		p[2] = BS_NVME_TCP_CMD_HLEN;
		bs_nvme_put32(p + 4, BS_NVME_TCP_CMD_HLEN);
		e.cid = (uint16_t)i;
		memcpy(p + 8, &e, sizeof(e));
	}
	*total = (size_t)n * BS_NVME_TCP_CMD_HLEN;
	return wire;
}

/* Responses queued on @q. */
static unsigned responses(const struct nvmf_queue *q)
{
	const struct nvmf_out *o;
	unsigned n = 0;

	for (o = q->out_head; o; o = o->next)
		n += o->hdr[0] == BS_NVME_TCP_RSP;
	return n;
}

/*
 * A burst of small capsules in one input() call, each asking for 1 MiB
 * of log page (before logging in to any real subsystem: the discovery
 * controller serves them too): the queue stops taking PDUs once its
 * unsent output passed out_max, and goes on as it is sent. Before, the
 * whole 256 KiB input buffer was parsed at once: about 3600 capsules,
 * 3.6 GiB of replies queued.
 */
static void capsule_burst_stops_at_out_max(void **state)
{
	struct fx *f = *state;
	struct nvmf_port port;
	struct nvmf_queue *q = ops_queue(f, &port, false);
	uint32_t numd = MiB / 4 - 1;
	struct bs_nvme_sqe sqe = admin_sqe(BS_NVME_ADMIN_GET_LOG_PAGE, 0,
					   BS_NVME_LOG_ERROR |
						   (numd & 0xffff) << 16,
					   numd >> 16);
	const unsigned n = 64;
	size_t total, off = 0, used;
	uint8_t *wire;
	unsigned answered = 0, rounds = 0;

	f->ss.lim.out_max = 4 * MiB;
	q->qid = 0;
	sqe.flags = BS_NVME_SQE_PSDT_SGL;
	sqe.dptr.type = BS_NVME_SGL_TCP_TRANSPORT;
	sqe.dptr.length = bs_nvme_cpu_to_le32(MiB);
	wire = capsules(&sqe, n, &total);
	while (off < total) {
		used = nvmf_net_proto.input(q, wire + off, total - off);
		assert_true(used > 0);
		off += used;
		/* one PDU's output at most beyond out_max */
		assert_true(q->out_bytes <= f->ss.lim.out_max + MiB + 64);
		if (off < total) {
			assert_true(q->out_bytes > f->ss.lim.out_max);
			assert_false(nvmf_net_proto.wants_input(q));
		}
		/* the network server sends it all: input goes on */
		answered += responses(q);
		nvmf_net_proto.sent(q, q->out_bytes);
		assert_null(q->out_head);
		assert_true(nvmf_net_proto.wants_input(q));
		rounds++;
	}
	assert_int_equal(answered, n);
	assert_true(rounds >= n / 5);
	ops_close(q);
	free(wire);
}

/* Commands the device is still serving fill the queue's depth: the rest
 * of the burst waits in the input buffer until they complete. */
static void capsule_burst_stops_at_queue_depth(void **state)
{
	struct fx *f = *state;
	struct nvmf_port port;
	struct nvmf_queue *q = ops_queue(f, &port, false);
	struct bs_nvme_sqe sqe;
	const unsigned n = 40;
	size_t total, off = 0;
	uint8_t *wire;
	int i;

	f->ss.qdepth = 4;
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = BS_NVME_CMD_READ;
	sqe.flags = BS_NVME_SQE_PSDT_SGL;
	sqe.nsid = bs_nvme_cpu_to_le32(1);
	sqe.cdw12 = bs_nvme_cpu_to_le32(7);
	sqe.dptr.type = BS_NVME_SGL_TCP_TRANSPORT;
	sqe.dptr.length = bs_nvme_cpu_to_le32(4096);
	wire = capsules(&sqe, n, &total);
	off = nvmf_net_proto.input(q, wire, total);
	assert_int_equal(off, 5 * BS_NVME_TCP_CMD_HLEN);
	assert_int_equal(q->ncmds, 5);
	assert_false(nvmf_net_proto.wants_input(q));
	for (i = 0; i < 100 && off < total; i++) {
		settle(f, q);
		off += nvmf_net_proto.input(q, wire + off, total - off);
		assert_true(q->ncmds <= 5);
	}
	assert_int_equal(off, total);
	settle(f, q);
	assert_int_equal(responses(q), n);
	ops_close(q);
	free(wire);
}

/* The data an Identify or Get Log Page moves is what it names: Identify
 * 4 KiB, Get Log Page NUMD dwords. Another SGL length is Data SGL Length
 * Invalid (as Linux's nvmet answers), not a buffer of that size (up to
 * 1 MiB, which a burst of such capsules made the target allocate). */
static void transfer_length_must_match(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_sqe id = admin_sqe(BS_NVME_ADMIN_IDENTIFY, 0,
					  BS_NVME_CNS_CTRL, 0);
	struct bs_nvme_sqe log = admin_sqe(BS_NVME_ADMIN_GET_LOG_PAGE, 0,
					   BS_NVME_LOG_ERROR | (15u << 16), 0);
	const uint16_t bad = BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR;

	assert_int_equal(exec(f, &id, true, NULL, NULL, 4096, NULL), 0);
	assert_int_equal(exec(f, &id, true, NULL, NULL, MiB, NULL), bad);
	assert_int_equal(exec(f, &id, true, NULL, NULL, 8192, NULL), bad);
	assert_int_equal(exec(f, &id, true, NULL, NULL, 512, NULL), bad);
	assert_int_equal(exec(f, &id, true, NULL, NULL, 0, NULL), bad);
	/* NUMD 16: 64 bytes */
	assert_int_equal(exec(f, &log, true, NULL, NULL, 64, NULL), 0);
	assert_int_equal(exec(f, &log, true, NULL, NULL, MiB, NULL), bad);
	assert_int_equal(exec(f, &log, true, NULL, NULL, 4096, NULL), bad);
	assert_int_equal(exec(f, &log, true, NULL, NULL, 32, NULL), bad);
	/* the only output is the response */
	assert_int_equal(f->q.out_head, f->q.out_tail);
	assert_int_equal(f->q.out_head->hdr[0], BS_NVME_TCP_RSP);
}

static uint16_t features(struct fx *f, bool set, uint32_t cdw10,
			 uint32_t cdw11, uint32_t *dw0)
{
	struct bs_nvme_sqe sqe = admin_sqe(set ? BS_NVME_ADMIN_SET_FEATURES :
						 BS_NVME_ADMIN_GET_FEATURES,
					   0, cdw10, cdw11);

	return exec(f, &sqe, true, NULL, NULL, 0, dw0);
}

/* Set Features Volatile Write Cache WCE = @wce, read back by Get. */
static void set_wce(struct fx *f, uint32_t wce)
{
	uint32_t dw0 = 0xdead;

	assert_int_equal(features(f, true, BS_NVME_FEAT_VOLATILE_WC, wce,
				  NULL),
			 0);
	assert_int_equal(features(f, false, BS_NVME_FEAT_VOLATILE_WC, 0, &dw0),
			 0);
	assert_int_equal(dw0, wce);
}

static uint64_t flushes(struct fx *f)
{
	struct bs_dev_stats st;

	bs_dev_stats_read(f->dev, &st);
	return st.ops[BS_OP_FLUSH];
}

/* A namespace on a device with a volatile write cache (mem, write_cache=1,
 * FUA emulated by a flush after the write): VWC present, Flush with NSID
 * FFFFFFFFh not supported (FB 10b). With WCE set a Write reaches the
 * device without FUA unless it asks; Set Features WCE=0 (read back by Get
 * Features) makes every Write and Write Zeroes FUA; Flush reaches the
 * device; a saved value is Feature Identifier Not Saveable. */
static void write_cache_feature_fua_and_flush(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ctrl *ic = malloc(sizeof(*ic));
	struct bs_nvme_sqe flush = io_sqe(BS_NVME_CMD_FLUSH, 0, 1, 0);
	uint8_t buf[4096];
	uint32_t dw0 = 0xdead;
	uint64_t n;

	nvmf_id_ctrl(&f->q, ic);
	assert_int_equal(ic->vwc,
			 BS_NVME_VWC_PRESENT | BS_NVME_VWC_FLUSH_ALL_NO);
	memset(buf, 0x5c, sizeof(buf));
	assert_int_equal(features(f, false, BS_NVME_FEAT_VOLATILE_WC, 0, &dw0),
			 0);
	assert_int_equal(dw0, 1);
	n = flushes(f);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 0, 8, 0, buf, 4096), 0);
	assert_int_equal(flushes(f), n);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 8, 8, BS_NVME_RW_FUA, buf,
			     4096),
			 0);
	assert_int_equal(flushes(f), n + 1);
	assert_int_equal(exec(f, &flush, false, NULL, NULL, 0, NULL), 0);
	assert_int_equal(flushes(f), n + 2);
	flush.nsid = bs_nvme_cpu_to_le32(0xffffffff);
	assert_int_equal(exec(f, &flush, false, NULL, NULL, 0, NULL),
			 BS_NVME_SC_INVALID_NS | BS_NVME_SF_DNR);
	assert_int_equal(flushes(f), n + 2);

	/* WCE=0: writes are made durable before they complete */
	set_wce(f, 0);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 16, 8, 0, buf, 4096), 0);
	assert_int_equal(flushes(f), n + 3);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE_ZEROES, 16, 8, 0, NULL, 0),
			 0);
	assert_int_equal(flushes(f), n + 4);
	set_wce(f, 1);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 24, 8, 0, buf, 4096), 0);
	assert_int_equal(flushes(f), n + 4);
	assert_int_equal(features(f, true,
				  BS_NVME_FEAT_VOLATILE_WC | BS_NVME_FEAT_SV, 1,
				  NULL),
			 BS_NVME_SC_FEATURE_NOT_SAVEABLE | BS_NVME_SF_DNR);
	free(ic);
}

/* Without a volatile write cache (mem, write_cache=0): VWC clear, Set
 * and Get Features of the Volatile Write Cache feature are Invalid Field
 * in Command (NVMe Base 2.x, Volatile Write Cache feature; Get answered
 * success with 0 before), and Flush succeeds without reaching the
 * device. */
static void no_write_cache_feature_invalid(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ctrl *ic = malloc(sizeof(*ic));
	struct bs_nvme_sqe flush = io_sqe(BS_NVME_CMD_FLUSH, 0, 1, 0);

	nvmf_id_ctrl(&f->q, ic);
	assert_int_equal(ic->vwc, 0);
	assert_int_equal(features(f, false, BS_NVME_FEAT_VOLATILE_WC, 0, NULL),
			 BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR);
	assert_int_equal(features(f, true, BS_NVME_FEAT_VOLATILE_WC, 1, NULL),
			 BS_NVME_SC_INVALID_FIELD | BS_NVME_SF_DNR);
	assert_int_equal(exec(f, &flush, false, NULL, NULL, 0, NULL), 0);
	assert_int_equal(flushes(f), 0);
	free(ic);
}

/* Compare: the same data is success; one byte off is Compare Failure,
 * status code type 2h (media and data integrity errors), code 85h, DNR;
 * past the end is LBA Out of Range; data of another length than NLB
 * blocks is Data SGL Length Invalid. */
static void compare_match_and_miscompare(void **state)
{
	struct fx *f = *state;
	uint8_t *buf = malloc(8192);
	uint16_t sf;

	th_fill(buf, 8192, 77);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 100, 16, 0, buf, 8192), 0);
	assert_int_equal(run(f, BS_NVME_CMD_COMPARE, 100, 16, 0, buf, 8192), 0);
	assert_int_equal(run(f, BS_NVME_CMD_COMPARE, 104, 8, 0, buf + 2048,
			     4096),
			 0);
	buf[8191] ^= 1;
	sf = run(f, BS_NVME_CMD_COMPARE, 100, 16, 0, buf, 8192);
	assert_int_equal(sf, BS_NVME_SC_COMPARE_FAILED | BS_NVME_SF_DNR);
	assert_int_equal(BS_NVME_SCT(sf), BS_NVME_SCT_MEDIA);
	assert_int_equal(sf & 0xff, 0x85);
	/* the device is unchanged by it */
	assert_int_equal(run(f, BS_NVME_CMD_COMPARE, 100, 15, 0, buf, 7680), 0);
	assert_int_equal(run(f, BS_NVME_CMD_COMPARE, 16 * MiB / 512 - 1, 2, 0,
			     buf, 1024),
			 BS_NVME_SC_LBA_RANGE | BS_NVME_SF_DNR);
	assert_int_equal(run(f, BS_NVME_CMD_COMPARE, 100, 16, 0, buf, 4096),
			 BS_NVME_SC_SGL_INVALID_DATA | BS_NVME_SF_DNR);
	free(buf);
}

/* ---- Compare: its own data from the budget, the device's by chunks ------- */

/* A CapsuleCmd for @opc of @len bytes at @slba, with @data in the capsule
 * (NULL: none, the data comes by R2T); *@total its bytes. */
static uint8_t *cmd_pdu(struct fx *f, uint8_t opc, uint16_t cid,
			uint64_t slba, uint32_t len, const uint8_t *data,
			size_t *total)
{
	uint32_t dlen = data ? len : 0;
	uint8_t *p = calloc(1, BS_NVME_TCP_CMD_HLEN + dlen);
	struct bs_nvme_sqe sqe;
	uint32_t lbs;
	uint64_t size;
	bool wzu;

	assert_non_null(p);
	nvmf_ns_geometry(&f->ss, &f->ns, &lbs, &size, &wzu);
	p[0] = BS_NVME_TCP_CMD;
	p[2] = BS_NVME_TCP_CMD_HLEN;
	p[3] = data ? BS_NVME_TCP_CMD_HLEN : 0;
	bs_nvme_put32(p + 4, BS_NVME_TCP_CMD_HLEN + dlen);
	memset(&sqe, 0, sizeof(sqe));
	sqe.opcode = opc;
	sqe.flags = BS_NVME_SQE_PSDT_SGL;
	sqe.cid = cid;
	sqe.nsid = bs_nvme_cpu_to_le32(1);
	sqe.cdw10 = bs_nvme_cpu_to_le32((uint32_t)slba);
	sqe.cdw11 = bs_nvme_cpu_to_le32((uint32_t)(slba >> 32));
	sqe.cdw12 = bs_nvme_cpu_to_le32(len / lbs - 1);
	sqe.dptr.type = data ? BS_NVME_SGL_TCP_INCAPSULE
			     : BS_NVME_SGL_TCP_TRANSPORT;
	sqe.dptr.length = bs_nvme_cpu_to_le32(len);
	memcpy(p + 8, &sqe, sizeof(sqe));
	if (data)
		memcpy(p + BS_NVME_TCP_CMD_HLEN, data, len);
	*total = BS_NVME_TCP_CMD_HLEN + dlen;
	return p;
}

/* The H2CData PDU that answers the R2T queued on @q for @cid with all
 * of its @len bytes of @data; *@total its bytes. */
static uint8_t *h2c_pdu(struct nvmf_queue *q, uint16_t cid,
			const uint8_t *data, uint32_t len, size_t *total)
{
	uint8_t *p = calloc(1, BS_NVME_TCP_DATA_HLEN + len);
	struct nvmf_out *o;

	assert_non_null(p);
	for (o = q->out_head; o; o = o->next)
		if (o->hdr[0] == BS_NVME_TCP_R2T && !memcmp(o->hdr + 8, &cid, 2))
			break;
	assert_non_null(o);
	assert_int_equal(bs_nvme_get32(o->hdr + 12), 0);	/* R2TO */
	assert_int_equal(bs_nvme_get32(o->hdr + 16), len);	/* R2TL */
	p[0] = BS_NVME_TCP_H2C_DATA;
	p[2] = BS_NVME_TCP_DATA_HLEN;
	p[3] = BS_NVME_TCP_DATA_HLEN;
	bs_nvme_put32(p + 4, BS_NVME_TCP_DATA_HLEN + len);
	memcpy(p + 8, o->hdr + 8, 4);		/* CID, TTAG */
	bs_nvme_put32(p + 16, len);
	memcpy(p + BS_NVME_TCP_DATA_HLEN, data, len);
	*total = BS_NVME_TCP_DATA_HLEN + len;
	return p;
}

/* All of @wire into @q as the network server gives it: while @q wants
 * input, the loop run in between. */
static void feed_all(struct fx *f, struct nvmf_queue *q, const uint8_t *wire,
		     size_t total)
{
	size_t off = 0;
	int n;

	for (n = 0; n < 200 && off < total; n++) {
		if (nvmf_net_proto.wants_input(q))
			off += nvmf_net_proto.input(q, wire + off, total - off);
		if (off < total)
			bs_loop_run_once(bs_ctx_loop(f->ctx), 1);
	}
	assert_int_equal(off, total);
}

/* The status of the response queued on @q for @cid (-1: none). */
static int status_of(struct nvmf_queue *q, uint16_t cid)
{
	struct bs_nvme_cqe cqe;
	struct nvmf_out *o;

	for (o = q->out_head; o; o = o->next) {
		if (o->hdr[0] != BS_NVME_TCP_RSP)
			continue;
		memcpy(&cqe, o->hdr + 8, sizeof(cqe));
		if (cqe.cid == cid)
			return bs_nvme_le16(cqe.status) >> 1;
	}
	return -1;
}

/* Bytes the fixture's device has been asked to read. */
static uint64_t read_bytes(struct fx *f)
{
	struct bs_dev_stats st;

	bs_dev_stats_read(f->dev, &st);
	return st.bytes[BS_OP_READ];
}

#define MISCOMPARE (BS_NVME_SC_COMPARE_FAILED | BS_NVME_SF_DNR)

/*
 * The budget full but for exactly one in-capsule Compare's data: the
 * Compare holds its capsule's bytes and needs no more (what the device
 * holds is read into the queue's scratch, which is not the budget's), so
 * it completes while the other holder keeps all the rest, and its bytes
 * go back. Before, it held its capsule and waited for twice its length
 * (hold and wait): queues doing that could fill the budget and wait for
 * each other until the stall timeout evicted them.
 */
static void incapsule_compare_needs_only_its_data(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_budget_holder other;
	struct nvmf_port port;
	struct nvmf_queue *q;
	const uint32_t len = 256 * 1024;
	const uint64_t slba = 2048;
	uint8_t *data = malloc(len), *wire;
	size_t total;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	f->ss.incapsule = len;
	th_fill(data, len, 17);
	assert_int_equal(bs_write_sync(f->dev, data, len, slba * 512), 0);
	q = ops_queue(f, &port, false);
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, BS_BUDGET_MIN - len));

	wire = cmd_pdu(f, BS_NVME_CMD_COMPARE, 6, slba, len, data, &total);
	feed_all(f, q, wire, total);
	free(wire);
	/* the capsule's bytes and no more */
	assert_true(bs_budget_used(b) <= BS_BUDGET_MIN);
	settle(f, q);
	assert_int_equal(status_of(q, 6), 0);
	assert_int_equal(bs_budget_used(b), BS_BUDGET_MIN - len);
	assert_int_equal(bs_budget_over(b), 0);

	/* the same with one byte off in its second chunk */
	data[100 * 1024] ^= 0x10;
	wire = cmd_pdu(f, BS_NVME_CMD_COMPARE, 7, slba, len, data, &total);
	feed_all(f, q, wire, total);
	free(wire);
	settle(f, q);
	assert_int_equal(status_of(q, 7), MISCOMPARE);
	assert_int_equal(bs_budget_used(b), BS_BUDGET_MIN - len);

	ops_close(q);
	bs_budget_leave(b, &other);
	assert_int_equal(bs_budget_used(b), 0);
	free(data);
}

/* A Compare of @len bytes at @slba on @q, its data by R2T: the status of
 * its answer. Only its data's bytes are taken from the budget. */
static int compare_r2t(struct fx *f, struct nvmf_queue *q, uint16_t cid,
		       uint64_t slba, const uint8_t *data, uint32_t len)
{
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	uint64_t used = bs_budget_used(b);
	uint8_t *wire;
	size_t total;

	wire = cmd_pdu(f, BS_NVME_CMD_COMPARE, cid, slba, len, NULL, &total);
	feed_all(f, q, wire, total);
	free(wire);
	assert_int_equal(bs_budget_used(b), used + len);
	wire = h2c_pdu(q, cid, data, len, &total);
	feed_all(f, q, wire, total);
	free(wire);
	settle(f, q);
	return status_of(q, cid);
}

/*
 * A 1 MiB Compare by R2T holds 1 MiB of the budget (2 MiB before) and
 * reads the device in 64 KiB chunks into the queue's scratch: equal data
 * is success after reading all of it; a byte off in the last chunk only
 * is Compare Failure after reading all of it; one in the first chunk is
 * Compare Failure after reading that chunk alone.
 */
static void compare_in_chunks(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct nvmf_port port;
	struct nvmf_queue *q;
	uint8_t *data = malloc(MiB);
	uint64_t r;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	th_fill(data, MiB, 31);
	assert_int_equal(bs_write_sync(f->dev, data, MiB, 0), 0);
	q = ops_queue(f, &port, false);

	r = read_bytes(f);
	assert_int_equal(compare_r2t(f, q, 1, 0, data, MiB), 0);
	assert_int_equal(read_bytes(f) - r, MiB);
	assert_int_equal(q->cmp_buf_len, 64 * 1024);	/* one chunk */
	assert_int_equal(bs_budget_used(b), 0);

	data[MiB - 1] ^= 0x40;
	r = read_bytes(f);
	assert_int_equal(compare_r2t(f, q, 2, 0, data, MiB), MISCOMPARE);
	assert_int_equal(read_bytes(f) - r, MiB);
	data[MiB - 1] ^= 0x40;

	data[0] ^= 1;
	r = read_bytes(f);
	assert_int_equal(compare_r2t(f, q, 3, 0, data, MiB), MISCOMPARE);
	assert_int_equal(read_bytes(f) - r, 64 * 1024);
	data[0] ^= 1;

	/* the device is unchanged by them */
	assert_int_equal(compare_r2t(f, q, 4, 0, data, MiB), 0);
	assert_int_equal(bs_budget_used(b), 0);
	ops_close(q);
	free(data);
}

/* Two Compares of 256 KiB on @q by R2T (CIDs 1 and 2, at LBA 0 and 512:
 * @a and @b, which the device holds but where @b2 may differ), their data
 * in one input call. */
static void two_compare_cmds(struct fx *f, struct nvmf_queue *q, uint32_t len)
{
	uint8_t *wire;
	size_t total;

	wire = cmd_pdu(f, BS_NVME_CMD_COMPARE, 1, 0, len, NULL, &total);
	feed_all(f, q, wire, total);
	free(wire);
	wire = cmd_pdu(f, BS_NVME_CMD_COMPARE, 2, len / 512, len, NULL,
		       &total);
	feed_all(f, q, wire, total);
	free(wire);
}

/* The two Compares' data (@a for cid 1, @b2 for cid 2) in one input call. */
static void two_compare_data(struct nvmf_queue *q, const uint8_t *a,
			     const uint8_t *b2, uint32_t len)
{
	uint8_t *wire, *h1, *h2;
	size_t n1, n2;

	h1 = h2c_pdu(q, 1, a, len, &n1);
	h2 = h2c_pdu(q, 2, b2, len, &n2);
	wire = malloc(n1 + n2);
	memcpy(wire, h1, n1);
	memcpy(wire + n1, h2, n2);
	assert_int_equal(nvmf_net_proto.input(q, wire, n1 + n2), n1 + n2);
	free(h1);
	free(h2);
	free(wire);
}

static void two_compares(struct fx *f, struct nvmf_queue *q, const uint8_t *a,
			 const uint8_t *b2, uint32_t len)
{
	two_compare_cmds(f, q, len);
	two_compare_data(q, a, b2, len);
}

/*
 * Two Compares in flight on one queue: the first reads into the scratch,
 * the second waits for it and goes once the first is done; each gets its
 * own answer. The queue's input goes on meanwhile: a Read sent behind
 * them is answered while the second still waits.
 */
static void two_compares_share_the_scratch(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct nvmf_port port;
	struct nvmf_queue *q;
	const uint32_t len = 256 * 1024;
	uint8_t *a = malloc(len), *b2 = malloc(len);
	int i;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	th_fill(a, len, 41);
	th_fill(b2, len, 42);
	assert_int_equal(bs_write_sync(f->dev, a, len, 0), 0);
	assert_int_equal(bs_write_sync(f->dev, b2, len, len), 0);
	q = ops_queue(f, &port, false);

	b2[len - 5] ^= 1;		/* the second's last chunk differs */
	two_compares(f, q, a, b2, len);
	assert_non_null(q->cmp_owner);
	assert_int_equal(q->cmp_owner->sqe.cid, 1);
	assert_true(q->cmp_owner->in_core);
	/* the second waits for the scratch, not in the budget's FIFO: the
	 * queue's input goes on */
	assert_null(q->wait_head);
	assert_non_null(q->cmp_head);
	assert_int_equal(q->cmp_head->sqe.cid, 2);
	assert_true(q->cmp_head->cmp_wait);
	/* counted in the device meanwhile: it waits for the first's device
	 * reads, not for its host (the budget's watchdog passes it over) */
	assert_true(q->cmp_head->in_core);
	assert_true(nvmf_net_proto.wants_input(q));
	put_capsule(f, q, BS_NVME_CMD_READ, 7, 4096);
	for (i = 0; i < 100 && status_of(q, 7) < 0; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_int_equal(status_of(q, 7), 0);
	assert_int_equal(status_of(q, 2), -1);
	settle(f, q);
	assert_int_equal(status_of(q, 1), 0);
	assert_int_equal(status_of(q, 2), MISCOMPARE);
	assert_null(q->cmp_owner);
	assert_null(q->cmp_head);
	assert_true(nvmf_net_proto.wants_input(q));

	/* and the other way round */
	b2[len - 5] ^= 1;
	a[0] ^= 1;
	nvmf_out_drop_all(q);
	two_compares(f, q, a, b2, len);
	settle(f, q);
	assert_int_equal(status_of(q, 1), MISCOMPARE);
	assert_int_equal(status_of(q, 2), 0);
	assert_int_equal(bs_budget_used(b), 0);
	ops_close(q);
	free(a);
	free(b2);
}

/*
 * A Compare with its data does not wait behind a command waiting for the
 * budget: a Read parked for the budget (full), then two Compares whose
 * data was granted before; the second waits only for the scratch, so
 * both answer while the Read still waits; the Read goes once bytes come
 * back. Waiting behind the Read, the Compares would hold their bytes
 * while waiting for more (hold and wait again).
 */
static void compare_passes_a_budget_waiter(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_budget_holder other;
	struct nvmf_port port;
	struct nvmf_queue *q;
	const uint32_t len = 256 * 1024;
	uint8_t *a = malloc(len), *b2 = malloc(len), *wire;
	size_t total;
	int i;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	th_fill(a, len, 51);
	th_fill(b2, len, 52);
	assert_int_equal(bs_write_sync(f->dev, a, len, 0), 0);
	assert_int_equal(bs_write_sync(f->dev, b2, len, len), 0);
	q = ops_queue(f, &port, false);
	two_compare_cmds(f, q, len);
	memset(&other, 0, sizeof(other));
	assert_true(bs_budget_take(b, &other, BS_BUDGET_MIN - 2 * len));
	/* a 1 MiB Read: no room, it waits (the R2Ts' data still comes) */
	wire = cmd_pdu(f, BS_NVME_CMD_READ, 3, 4096, MiB, NULL, &total);
	assert_int_equal(nvmf_net_proto.input(q, wire, total), total);
	free(wire);
	assert_non_null(q->wait_head);
	assert_int_equal(q->wait_head->sqe.cid, 3);
	two_compare_data(q, a, b2, len);
	/* the first Compare reads, the second waits for the scratch only,
	 * not behind the Read */
	assert_int_equal(q->cmp_owner->sqe.cid, 1);
	assert_int_equal(q->wait_head->sqe.cid, 3);
	assert_null(q->wait_head->wnext);
	assert_int_equal(q->cmp_head->sqe.cid, 2);
	for (i = 0; i < 2000 && (status_of(q, 1) < 0 || status_of(q, 2) < 0);
	     i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_int_equal(status_of(q, 1), 0);
	assert_int_equal(status_of(q, 2), 0);
	/* the Read still waits, the Compares' bytes are back */
	assert_int_equal(status_of(q, 3), -1);
	assert_int_equal(q->wait_head->sqe.cid, 3);
	assert_null(q->wait_head->wnext);
	assert_int_equal(bs_budget_used(b), BS_BUDGET_MIN - 2 * len);

	bs_budget_give(b, &other, BS_BUDGET_MIN - 2 * len);
	settle(f, q);
	assert_int_equal(status_of(q, 3), 0);
	ops_close(q);
	bs_budget_leave(b, &other);
	assert_int_equal(bs_budget_used(b), 0);
	free(a);
	free(b2);
}

/* The queue closes with two Compares in flight: the one whose read is in
 * the device finishes first (the queue waits for it, orphaned), the one
 * waiting for the scratch is freed at once; then every byte is back and
 * the queue lets go of the export set. */
static void close_with_compares_in_flight(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_exports *set;
	struct nvmf_port port;
	struct nvmf_queue *q;
	const uint32_t len = 256 * 1024;
	uint8_t *a = malloc(len);
	int i;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 0), 0);
	assert_int_equal(bs_exports_new(f->ctx, &set), 0);
	th_fill(a, len, 61);
	q = ops_queue(f, &port, false);
	f->exp.set = set;
	two_compares(f, q, a, a, len);
	assert_true(q->cmp_owner->in_core);
	assert_int_equal(bs_budget_used(b), 2 * len);
	ops_close(q);		/* q is the loop's now */
	/* the parked one's bytes are back already */
	assert_int_equal(bs_budget_used(b), len);
	for (i = 0; i < 2000 && bs_budget_used(b); i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_int_equal(bs_budget_used(b), 0);
	bs_exports_free(set);	/* waits for the queue's hold */
	f->exp.set = NULL;
	free(a);
}

/* A read error in the third chunk of a Compare (error device: reads fail
 * with EIO after two): Unrecovered Read Error, as for a Read, no chunk
 * read after it. */
static void compare_read_error(void **state)
{
	struct fx *f = *state;
	uint8_t *zero = calloc(1, MiB);
	uint64_t r = read_bytes(f);

	/* the device reads as zeroes until it fails */
	assert_int_equal(run(f, BS_NVME_CMD_COMPARE, 0, 2048, 0, zero, MiB),
			 BS_NVME_SC_READ_ERROR);
	assert_int_equal(read_bytes(f) - r, 3 * 64 * 1024);
	free(zero);
}

/* ---- a slow device: its requests wait until the test lets them go ------- */

/* One request reaches the device, which holds it for @ms milliseconds
 * (while the loop runs, the budget's watchdog too) and then carries it
 * out; @q is not ended meanwhile. */
static void slow_one(struct fx *f, struct nvmf_queue *q, unsigned ms)
{
	int i;

	for (i = 0; i < 200 && !th_slow_count(); i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 5);
	assert_int_equal(th_slow_count(), 1);
	th_run_for(bs_ctx_loop(f->ctx), ms);
	assert_false(q->ended);
	th_slow_release();
}

/* Run the loop until @q answered @cid (or a second went by). */
static int answer_of(struct fx *f, struct nvmf_queue *q, uint16_t cid)
{
	int i;

	for (i = 0; i < 200 && status_of(q, cid) < 0; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 5);
	return status_of(q, cid);
}

/*
 * A slow device is not a stalled client. With a stall timeout of 20 ms
 * and another holder waiting for the budget, a queue whose commands wait
 * in the device keeps its bytes however long that takes: the device
 * holds each request for five stall timeouts, and a 1 MiB Write (its data
 * received by R2T), two 256 KiB Compares (four chunk reads each, held;
 * the second waits for the first's scratch meanwhile) and a 1 MiB Read
 * all complete. Before, the queue was evicted ("no progress
 * for ...") a stall timeout after the Write's data was in, and a Compare
 * the same way in any chunk: the device's work counted for nothing. Once
 * the device is done the client's part counts again: the Read's data,
 * which this client never takes, gets the queue evicted.
 */
static void slow_device_is_not_a_stall(void **state)
{
	struct fx *f = *state;
	struct bs_budget *b = bs_ctx_budget(f->ctx);
	struct bs_budget_holder other;
	struct nvmf_port port;
	struct nvmf_queue *q;
	const uint32_t clen = 256 * 1024;
	uint8_t *data = malloc(MiB), *wire;
	size_t total;
	int i;

	assert_int_equal(bs_budget_configure(b, BS_BUDGET_MIN, 20), 0);
	th_fill(data, MiB, 71);
	q = ops_queue(f, &port, false);
	th_slow_begin(f->dev);

	/* a 1 MiB Write by R2T: its bytes held; the other holder waits */
	wire = cmd_pdu(f, BS_NVME_CMD_WRITE, 1, 0, MiB, NULL, &total);
	feed_all(f, q, wire, total);
	free(wire);
	memset(&other, 0, sizeof(other));
	assert_false(bs_budget_take(b, &other, BS_BUDGET_MIN));
	wire = h2c_pdu(q, 1, data, MiB, &total);
	feed_all(f, q, wire, total);
	free(wire);
	slow_one(f, q, 100);
	assert_int_equal(answer_of(f, q, 1), 0);

	/* two 256 KiB Compares of what was written, each chunk read
	 * slowly; the second waits for the queue's Compare scratch, its
	 * data held, while the first reads: that wait is the device's too
	 * (with per-byte cover it first got the queue evicted) */
	wire = cmd_pdu(f, BS_NVME_CMD_COMPARE, 2, 0, clen, NULL, &total);
	feed_all(f, q, wire, total);
	free(wire);
	wire = h2c_pdu(q, 2, data, clen, &total);
	feed_all(f, q, wire, total);
	free(wire);
	wire = cmd_pdu(f, BS_NVME_CMD_COMPARE, 4, 0, clen, NULL, &total);
	feed_all(f, q, wire, total);
	free(wire);
	wire = h2c_pdu(q, 4, data, clen, &total);
	feed_all(f, q, wire, total);
	free(wire);
	for (i = 0; i < 8; i++)
		slow_one(f, q, 60);
	assert_int_equal(answer_of(f, q, 2), 0);
	assert_int_equal(answer_of(f, q, 4), 0);

	/* a 1 MiB Read, slowly */
	put_capsule(f, q, BS_NVME_CMD_READ, 3, MiB);
	slow_one(f, q, 100);
	assert_int_equal(answer_of(f, q, 3), 0);
	assert_false(q->ended);
	th_slow_end();

	/* its data is never taken, the device is done: evicted */
	for (i = 0; i < 500 && !q->ended; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_true(q->ended);
	assert_non_null(strstr(q->reason, "no progress for"));
	ops_close(q);
	assert_int_equal(bs_budget_used(b), 0);
	bs_budget_leave(b, &other);
	free(data);
}

/* Abort: success, Dword 0 bit 0 (IANP) set: no immediate abort was
 * performed (NVMe Base 2.1 5.1.1, Figure 144); the command named goes on. */
static void abort_answers_not_aborted(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_sqe sqe = admin_sqe(BS_NVME_ADMIN_ABORT, 0,
					   1u | 5u << 16, 0);
	uint32_t dw0 = 0;

	assert_int_equal(exec(f, &sqe, true, NULL, NULL, 0, &dw0), 0);
	assert_int_equal(dw0 & 1, 1);
}

static uint16_t dsm_dealloc(struct fx *f, uint64_t slba, uint32_t nlb)
{
	struct bs_nvme_dsm_range r;
	struct bs_nvme_sqe sqe = io_sqe(BS_NVME_CMD_DSM, 0, 1, 0);

	memset(&r, 0, sizeof(r));
	r.slba = bs_nvme_cpu_to_le64(slba);
	r.nlb = bs_nvme_cpu_to_le32(nlb);
	sqe.cdw10 = 0;				/* one range */
	sqe.cdw11 = bs_nvme_cpu_to_le32(BS_NVME_DSM_AD);
	sqe.cdw12 = 0;
	return exec(f, &sqe, false, &r, NULL, sizeof(r), NULL);
}

/* A device that neither discards nor zeroes by unmapping (mem,
 * max_discard=0, zeroes=none: the core zeroes by writing): ONCS has
 * Compare and Write Zeroes but not Dataset Management, DLFEAT 0, not
 * thin; Dataset Management is Invalid Command Opcode (it answered success
 * before); Write Zeroes still zeroes. */
static void no_discard_device(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ctrl *ic = malloc(sizeof(*ic));
	struct bs_nvme_id_ns *id = malloc(sizeof(*id));
	uint8_t buf[4096];

	nvmf_id_ctrl(&f->q, ic);
	assert_int_equal(bs_nvme_le16(ic->oncs),
			 BS_NVME_ONCS_COMPARE | BS_NVME_ONCS_WRITE_ZEROES);
	nvmf_id_ns(&f->ns, id);
	assert_int_equal(id->dlfeat, 0);
	assert_int_equal(id->nsfeat & BS_NVME_NSFEAT_THIN, 0);
	assert_int_equal(dsm_dealloc(f, 0, 8),
			 BS_NVME_SC_INVALID_OPCODE | BS_NVME_SF_DNR);
	memset(buf, 0x66, sizeof(buf));
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 0, 8, 0, buf, 4096), 0);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE_ZEROES, 0, 8, 0, NULL, 0), 0);
	assert_int_equal(bs_read_sync(f->dev, buf, 4096, 0), 0);
	assert_true(th_is_zero(buf, 4096));
	free(ic);
	free(id);
}

/* A read-only device: no zeroing and no discard at all, so ONCS is
 * Compare alone and Write Zeroes and Dataset Management are Invalid
 * Command Opcode (they answered Namespace Write Protected before); a
 * Write is Namespace Write Protected; NSATTR says write protected. */
static void read_only_device(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ctrl *ic = malloc(sizeof(*ic));
	struct bs_nvme_id_ns *id = malloc(sizeof(*id));
	uint8_t buf[4096];

	nvmf_id_ctrl(&f->q, ic);
	assert_int_equal(bs_nvme_le16(ic->oncs), BS_NVME_ONCS_COMPARE);
	nvmf_id_ns(&f->ns, id);
	assert_int_equal(id->dlfeat, 0);
	assert_int_equal(id->nsattr, 1);
	assert_int_equal(run(f, BS_NVME_CMD_WRITE_ZEROES, 0, 8, 0, NULL, 0),
			 BS_NVME_SC_INVALID_OPCODE | BS_NVME_SF_DNR);
	assert_int_equal(dsm_dealloc(f, 0, 8),
			 BS_NVME_SC_INVALID_OPCODE | BS_NVME_SF_DNR);
	memset(buf, 0x66, sizeof(buf));
	assert_int_equal(run(f, BS_NVME_CMD_WRITE, 0, 8, 0, buf, 4096),
			 BS_NVME_SC_NS_WRITE_PROTECTED | BS_NVME_SF_DNR);
	memset(buf, 0, sizeof(buf));
	assert_int_equal(run(f, BS_NVME_CMD_COMPARE, 0, 8, 0, buf, 4096), 0);
	free(ic);
	free(id);
}

static int setup_write_cache(void **state)
{
	return setup_spec(state, "mem:16M,write_cache=1");
}

static int setup_no_write_cache(void **state)
{
	return setup_spec(state, "mem:16M");
}

static int setup_no_discard(void **state)
{
	return setup_spec(state, "mem:16M,max_discard=0,zeroes=none");
}

static int setup_read_error(void **state)
{
	return setup_spec(state, "error:16M,errno=EIO,ops=read,after=2");
}

static int setup_read_only(void **state)
{
	return setup_spec(state, "mem:16M,readonly=1");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(dlfeat_follows_the_knob, setup,
						teardown),
		cmocka_unit_test_setup_teardown(output_answers_one_iovec, setup,
						teardown),
		cmocka_unit_test_setup_teardown(write_zeroes_deac_mapping,
						setup, teardown),
		cmocka_unit_test(discovery_lists_every_subsystem),
		cmocka_unit_test_setup_teardown(h2c_data_zero_copy, setup,
						teardown),
		cmocka_unit_test_setup_teardown(h2c_data_zero_copy_digest,
						setup, teardown),
		cmocka_unit_test_setup_teardown(h2c_data_zero_copy_bad_digest,
						setup, teardown),
		cmocka_unit_test_setup_teardown(read_waits_for_the_budget,
						setup, teardown),
		cmocka_unit_test_setup_teardown(ended_queue_passes_the_turn_on,
						setup, teardown),
		cmocka_unit_test_setup_teardown(incapsule_ahead_of_granted_data,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			incapsule_over_the_limit_one_at_a_time, setup,
			teardown),
		cmocka_unit_test_setup_teardown(stalled_write_is_evicted,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			connect_io_needs_the_admin_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(connect_with_in_capsule_zero,
						setup, teardown),
		cmocka_unit_test_setup_teardown(sqhd_follows_the_queue, setup,
						teardown),
		cmocka_unit_test_setup_teardown(icreq_hpda_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(capsule_burst_stops_at_out_max,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			capsule_burst_stops_at_queue_depth, setup, teardown),
		cmocka_unit_test_setup_teardown(transfer_length_must_match,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			identify_ns_list_and_descriptors, setup, teardown),
		cmocka_unit_test_setup_teardown(log_pages_error_and_smart,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			write_cache_feature_fua_and_flush, setup_write_cache,
			teardown),
		cmocka_unit_test_setup_teardown(no_write_cache_feature_invalid,
						setup_no_write_cache, teardown),
		cmocka_unit_test_setup_teardown(compare_match_and_miscompare,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			incapsule_compare_needs_only_its_data, setup,
			teardown),
		cmocka_unit_test_setup_teardown(compare_in_chunks, setup,
						teardown),
		cmocka_unit_test_setup_teardown(two_compares_share_the_scratch,
						setup, teardown),
		cmocka_unit_test_setup_teardown(compare_passes_a_budget_waiter,
						setup, teardown),
		cmocka_unit_test_setup_teardown(close_with_compares_in_flight,
						setup, teardown),
		cmocka_unit_test_setup_teardown(compare_read_error,
						setup_read_error, teardown),
		cmocka_unit_test_setup_teardown(slow_device_is_not_a_stall,
						setup, teardown),
		cmocka_unit_test_setup_teardown(abort_answers_not_aborted,
						setup, teardown),
		cmocka_unit_test_setup_teardown(no_discard_device,
						setup_no_discard, teardown),
		cmocka_unit_test_setup_teardown(read_only_device,
						setup_read_only, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
