/* SPDX-License-Identifier: MIT */
/*
 * The NVMe/TCP target's Asymmetric Namespace Access, below the
 * transport: the ANA log page byte by byte (header, one group, its NSID
 * list or none with RGO, the change count), the Identify fields (CMIC
 * bit 3, ANATT, ANACAP, ANAGRPMAX, NANAGRPID, ANAGRPID at byte 92 of
 * Identify Namespace and at byte 4 of the I/O command set independent
 * one, whose NSATTR is byte 8: this target once wrote it into byte 6),
 * the path status of each state on an I/O command, and the ANA change
 * notice: sent once to the controllers of the port whose host enabled
 * it, masked until the log is read without RAE. Namespaces in two
 * groups with a state per port and group; a log of 256 namespaces in
 * 128 groups (past 4 KiB) read whole and at an offset. The config keys
 * of the ports (listen.N, ana, ana_state.N, ana_state.N.G,
 * ana_group.NSID, anatt) and their refusals.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/export.h>
#include <blkstack/loop.h>
#include <blkstack/opts.h>

#include "export/nvmf/nvmf.h"
#include "helpers/th.h"

#define MiB (1024 * 1024)

struct fx {
	struct bs_ctx *ctx;
	struct bs_dev *dev;
	struct bs_export_unit unit[2];
	struct nvmf_ns ns[2];
	struct nvmf_subsys ss;
	/* controller 1 on port 2 (admin queue aq, I/O queue q); controller
	 * 2 on port 1 (admin queue aq2) */
	struct nvmf_ctrl ctrl, ctrl2;
	struct nvmf_queue aq, q, aq2;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	unsigned i;

	th_ctx_setup((void **)&f->ctx);
	f->dev = th_dev(f->ctx, "m", "mem:16M");
	pthread_mutex_init(&f->ss.lock, NULL);
	snprintf(f->ss.nqn, sizeof(f->ss.nqn), "nqn.2026-12.org.blkstack:a");
	for (i = 0; i < 2; i++) {
		snprintf(f->unit[i].name, sizeof(f->unit[i].name), "u%u", i);
		f->unit[i].dev = f->dev;
		bs_dev_caps(f->dev, &f->unit[i].caps);
		f->ns[i].nsid = i + 1;
		f->ns[i].unit = &f->unit[i];
		f->ns[i].caps = f->unit[i].caps;
		f->ns[i].anagrpid = NVMF_ANAGRPID;
	}
	f->ss.ns = f->ns;
	f->ss.nns = 2;
	f->ss.qdepth = 128;
	f->ss.incapsule = 16384;
	f->ss.max_ioq = 1;
	f->ss.ana = true;
	f->ss.anatt = NVMF_ANATT;
	f->ss.ana_maxgrp = 1;
	f->ss.nports = 2;
	for (i = 0; i < 2; i++) {
		f->ss.ports[i].ss = &f->ss;
		f->ss.ports[i].index = i + 1;
		nvmf_ana_port_init(&f->ss.ports[i],
				   BS_NVME_ANA_OPTIMIZED);
	}
	f->ctrl.ss = f->ctrl2.ss = &f->ss;
	f->ctrl.port = &f->ss.ports[1];
	f->ctrl2.port = &f->ss.ports[0];
	f->ctrl.cntlid = 1;
	f->ctrl2.cntlid = 2;
	f->ctrl.csts = f->ctrl2.csts = BS_NVME_CSTS_RDY;
	f->ctrl.admin = &f->aq;
	f->ctrl2.admin = &f->aq2;
	f->ctrl.next = &f->ctrl2;
	f->ss.ctrls = &f->ctrl;
	f->aq.ss = f->q.ss = f->aq2.ss = &f->ss;
	f->aq.port = f->q.port = &f->ss.ports[1];
	f->aq2.port = &f->ss.ports[0];
	f->aq.ctrl = f->q.ctrl = &f->ctrl;
	f->aq2.ctrl = &f->ctrl2;
	f->q.qid = 1;
	f->aq.loop = f->q.loop = f->aq2.loop = bs_ctx_loop(f->ctx);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	nvmf_out_drop_all(&f->aq);
	nvmf_out_drop_all(&f->q);
	nvmf_out_drop_all(&f->aq2);
	th_ctx_teardown((void **)&f->ctx);
	pthread_mutex_destroy(&f->ss.lock);
	free(f);
	return 0;
}

/* Let messages to the queues (ANA notices) run. */
static void settle(struct fx *f)
{
	int i;

	for (i = 0; i < 20; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 1);
}

static struct nvmf_cmd *cmd(struct nvmf_queue *q, uint8_t opc,
			    uint32_t nsid, uint32_t cdw10, uint32_t cdw11,
			    uint32_t len)
{
	struct nvmf_cmd *c = calloc(1, sizeof(*c));
	static uint16_t cid = 100;

	c->q = q;
	c->sqe.opcode = opc;
	c->sqe.cid = cid++;
	c->sqe.nsid = bs_nvme_cpu_to_le32(nsid);
	c->sqe.cdw10 = bs_nvme_cpu_to_le32(cdw10);
	c->sqe.cdw11 = bs_nvme_cpu_to_le32(cdw11);
	c->len = len;
	c->next = q->cmds;
	q->cmds = c;
	q->ncmds++;
	return c;
}

/* The last response @q sent: its status field, DW0 and CID. */
static uint16_t last_rsp(struct nvmf_queue *q, uint32_t *dw0, uint16_t *cid)
{
	struct nvmf_out *o, *last = NULL;
	struct bs_nvme_cqe cqe;

	for (o = q->out_head; o; o = o->next)
		if (o->hdr[0] == BS_NVME_TCP_RSP)
			last = o;
	assert_non_null(last);
	memcpy(&cqe, last->hdr + 8, sizeof(cqe));
	if (dw0)
		*dw0 = bs_nvme_le32(cqe.result);
	if (cid)
		*cid = cqe.cid;
	return bs_nvme_le16(cqe.status) >> 1;
}

static unsigned responses(struct nvmf_queue *q)
{
	struct nvmf_out *o;
	unsigned n = 0;

	for (o = q->out_head; o; o = o->next)
		if (o->hdr[0] == BS_NVME_TCP_RSP)
			n++;
	return n;
}

/* The data of the last C2HData PDU @q sent. */
static const uint8_t *last_data(struct nvmf_queue *q)
{
	struct nvmf_out *o, *last = NULL;

	for (o = q->out_head; o; o = o->next)
		if (o->data)
			last = o;
	assert_non_null(last);
	return last->data;
}

/* Get Log Page 0Ch of @len bytes on @q, @lsp and @rae in CDW10. */
static const uint8_t *ana_log(struct fx *f, struct nvmf_queue *q,
			      uint32_t len, unsigned lsp, bool rae)
{
	uint32_t cdw10 = BS_NVME_LOG_ANA | lsp << BS_NVME_LOG_LSP_SHIFT |
			 (rae ? BS_NVME_LOG_RAE : 0) | (len / 4 - 1) << 16;

	(void)f;
	nvmf_out_drop_all(q);
	nvmf_admin(cmd(q, BS_NVME_ADMIN_GET_LOG_PAGE, 0xffffffffu, cdw10, 0,
		       len));
	assert_int_equal(last_rsp(q, NULL, NULL), 0);
	return last_data(q);
}

static void log_page_bytes(void **state)
{
	struct fx *f = *state;
	const uint8_t *p;
	uint8_t page[64];

	/* as the encoder lays it out: 16-byte header, 32-byte group
	 * descriptor, 4 bytes per NSID */
	assert_int_equal(nvmf_ana_log(&f->ctrl, false, NULL), 16 + 32 + 8);
	assert_int_equal(nvmf_ana_log(&f->ctrl, true, NULL), 16 + 32);

	p = ana_log(f, &f->aq, 56, 0, true);
	assert_int_equal(bs_nvme_get64(p), 0);		/* change count */
	assert_int_equal(bs_nvme_get16(p + 8), 1);	/* groups */
	assert_int_equal(bs_nvme_get32(p + 16), 1);	/* ANAGRPID */
	assert_int_equal(bs_nvme_get32(p + 20), 2);	/* NNSIDs */
	assert_int_equal(bs_nvme_get64(p + 24), 0);
	assert_int_equal(p[32], BS_NVME_ANA_OPTIMIZED);
	assert_int_equal(bs_nvme_get32(p + 48), 1);
	assert_int_equal(bs_nvme_get32(p + 52), 2);

	/* port 2 (controller 1's) goes inaccessible: counted once */
	pthread_mutex_lock(&f->ss.lock);
	nvmf_ana_set(&f->ss.ports[1], 0, BS_NVME_ANA_INACCESSIBLE);
	nvmf_ana_set(&f->ss.ports[1], 0, BS_NVME_ANA_INACCESSIBLE);
	pthread_mutex_unlock(&f->ss.lock);
	settle(f);
	p = ana_log(f, &f->aq, 56, 0, true);
	assert_int_equal(bs_nvme_get64(p), 1);
	assert_int_equal(bs_nvme_get64(p + 24), 1);
	assert_int_equal(p[32], BS_NVME_ANA_INACCESSIBLE);
	/* port 1's controller still sees its port optimized */
	p = ana_log(f, &f->aq2, 56, 0, true);
	assert_int_equal(p[32], BS_NVME_ANA_OPTIMIZED);
	assert_int_equal(bs_nvme_get64(p), 1);

	/* RGO: the group without its NSID list */
	p = ana_log(f, &f->aq, 64, BS_NVME_ANA_LSP_RGO, true);
	memcpy(page, p, sizeof(page));
	assert_int_equal(bs_nvme_get32(page + 20), 0);
	assert_int_equal(page[32], BS_NVME_ANA_INACCESSIBLE);
	assert_true(th_is_zero(page + 48, 16));

	/* without ANA the page does not exist */
	f->ss.ana = false;
	nvmf_out_drop_all(&f->aq);
	nvmf_admin(cmd(&f->aq, BS_NVME_ADMIN_GET_LOG_PAGE, 0xffffffffu,
		       BS_NVME_LOG_ANA | (56 / 4 - 1) << 16, 0, 56));
	assert_int_equal(last_rsp(&f->aq, NULL, NULL),
			 BS_NVME_SC_INVALID_LOG_PAGE | BS_NVME_SF_DNR);
}

static void identify_fields(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ctrl ic;
	struct bs_nvme_id_ns ns;
	const uint8_t *raw = (const uint8_t *)&ic;
	const uint8_t *d;

	nvmf_id_ctrl(&f->aq, &ic);
	assert_int_equal(raw[76], BS_NVME_CMIC_MULTI_PORT |
				  BS_NVME_CMIC_MULTI_CTRL | BS_NVME_CMIC_ANA);
	assert_int_equal(raw[342], NVMF_ANATT);
	assert_int_equal(raw[343], 0x5f);	/* states 4:0, bit 6 */
	assert_int_equal(bs_nvme_get32(raw + 344), 1);	/* ANAGRPMAX */
	assert_int_equal(bs_nvme_get32(raw + 348), 1);	/* NANAGRPID */
	assert_true(bs_nvme_get32(raw + 92) & BS_NVME_AEN_CFG_ANA_CHANGE);

	/* Identify Namespace: ANAGRPID bytes 95:92, NSATTR byte 99 */
	f->unit[0].readonly = true;
	nvmf_id_ns(&f->ns[0], &ns);
	raw = (const uint8_t *)&ns;
	assert_int_equal(bs_nvme_get32(raw + 92), 1);
	assert_int_equal(raw[99], 1);

	/* CNS 08h through the admin path: ANAGRPID bytes 7:4, NSATTR
	 * byte 8, NSTAT byte 14; byte 6 (where NSATTR once went) is the
	 * ANAGRPID's third byte */
	nvmf_admin(cmd(&f->aq, BS_NVME_ADMIN_IDENTIFY, 1,
		       BS_NVME_CNS_NS_CS_INDEP, 0, BS_NVME_IDENTIFY_SIZE));
	assert_int_equal(last_rsp(&f->aq, NULL, NULL), 0);
	d = last_data(&f->aq);
	assert_int_equal(d[1], BS_NVME_NMIC_SHARED);
	assert_int_equal(bs_nvme_get32(d + 4), 1);
	assert_int_equal(d[6], 0);
	assert_int_equal(d[8], 1);
	assert_int_equal(d[14], 1);
	f->unit[0].readonly = false;
	nvmf_admin(cmd(&f->aq, BS_NVME_ADMIN_IDENTIFY, 1,
		       BS_NVME_CNS_NS_CS_INDEP, 0, BS_NVME_IDENTIFY_SIZE));
	d = last_data(&f->aq);
	assert_int_equal(d[8], 0);

	/* without ANA: none of it */
	f->ss.ana = false;
	f->ns[0].anagrpid = 0;
	nvmf_id_ctrl(&f->aq, &ic);
	raw = (const uint8_t *)&ic;
	assert_int_equal(raw[76], BS_NVME_CMIC_MULTI_CTRL);
	assert_int_equal(raw[343], 0);
	assert_int_equal(bs_nvme_get32(raw + 344), 0);
	assert_false(bs_nvme_get32(raw + 92) & BS_NVME_AEN_CFG_ANA_CHANGE);
	nvmf_id_ns(&f->ns[0], &ns);
	assert_int_equal(bs_nvme_get32((const uint8_t *)&ns + 92), 0);
}

/* A Read of 8 blocks on the I/O queue: its status field. */
static uint16_t read8(struct fx *f)
{
	int i;
	struct nvmf_cmd *c = cmd(&f->q, BS_NVME_CMD_READ, 1, 0, 0, 4096);

	nvmf_out_drop_all(&f->q);
	c->sqe.cdw12 = bs_nvme_cpu_to_le32(7);	/* NLB 0's based */
	nvmf_io(c);
	for (i = 0; i < 2000 && f->q.cmds; i++)
		bs_loop_run_once(bs_ctx_loop(f->ctx), 10);
	assert_null(f->q.cmds);
	return last_rsp(&f->q, NULL, NULL);
}

static void io_status_per_state(void **state)
{
	struct fx *f = *state;
	static const struct {
		uint8_t st;
		uint16_t sf;
	} rows[] = {
		{ BS_NVME_ANA_OPTIMIZED, 0 },
		{ BS_NVME_ANA_NONOPTIMIZED, 0 },
		/* SCT 3h, no DNR: another path may serve it */
		{ BS_NVME_ANA_INACCESSIBLE, 0x302 },
		{ BS_NVME_ANA_PERSISTENT_LOSS, 0x301 },
		{ BS_NVME_ANA_CHANGE, 0x303 },
		{ BS_NVME_ANA_OPTIMIZED, 0 },
	};
	unsigned i;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		pthread_mutex_lock(&f->ss.lock);
		nvmf_ana_set(&f->ss.ports[1], 0, rows[i].st);
		pthread_mutex_unlock(&f->ss.lock);
		assert_int_equal(nvmf_ana_io_status(&f->ctrl, &f->ns[0]), rows[i].sf);
		assert_int_equal(read8(f), rows[i].sf);
		assert_int_equal(BS_NVME_SCT(rows[i].sf),
				 rows[i].sf ? BS_NVME_SCT_PATH : 0);
	}
	/* names both ways */
	assert_int_equal(nvmf_ana_parse("non-optimized"),
			 BS_NVME_ANA_NONOPTIMIZED);
	assert_string_equal(nvmf_ana_name(BS_NVME_ANA_PERSISTENT_LOSS),
			    "persistent-loss");
	assert_int_equal(nvmf_ana_parse("optimised"), 0);
	assert_null(nvmf_ana_name(7));
}

static void change_notice(void **state)
{
	struct fx *f = *state;
	uint16_t aer_cid, cid;
	uint32_t dw0;
	struct nvmf_cmd *c;

	/* the host enables ANA change notices and posts an AER */
	nvmf_admin(cmd(&f->aq, BS_NVME_ADMIN_SET_FEATURES, 0,
		       BS_NVME_FEAT_ASYNC_EVENT,
		       BS_NVME_AEN_CFG_ANA_CHANGE | BS_NVME_AEN_CFG_NS_ATTR,
		       0));
	assert_int_equal(last_rsp(&f->aq, &dw0, NULL), 0);
	assert_int_equal(dw0, BS_NVME_AEN_CFG_ANA_CHANGE |
				      BS_NVME_AEN_CFG_NS_ATTR);
	c = cmd(&f->aq, BS_NVME_ADMIN_ASYNC_EVENT, 0, 0, 0, 0);
	aer_cid = c->sqe.cid;
	nvmf_admin(c);
	/* controller 2 (port 1) posts one too, without enabling */
	nvmf_admin(cmd(&f->aq2, BS_NVME_ADMIN_ASYNC_EVENT, 0, 0, 0, 0));
	nvmf_out_drop_all(&f->aq);

	pthread_mutex_lock(&f->ss.lock);
	nvmf_ana_set(&f->ss.ports[1], 0, BS_NVME_ANA_INACCESSIBLE);
	pthread_mutex_unlock(&f->ss.lock);
	settle(f);
	assert_int_equal(responses(&f->aq), 1);
	assert_int_equal(last_rsp(&f->aq, &dw0, &cid), 0);
	assert_int_equal(cid, aer_cid);
	assert_int_equal(dw0, bs_nvme_aen_result(BS_NVME_AER_TYPE_NOTICE,
						 BS_NVME_AER_NOTICE_ANA,
						 BS_NVME_LOG_ANA));
	assert_int_equal(dw0, 0x0c0302);
	/* not port 1's controller */
	assert_int_equal(responses(&f->aq2), 0);

	/* masked until the log is read without RAE */
	nvmf_admin(cmd(&f->aq, BS_NVME_ADMIN_ASYNC_EVENT, 0, 0, 0, 0));
	nvmf_out_drop_all(&f->aq);
	pthread_mutex_lock(&f->ss.lock);
	nvmf_ana_set(&f->ss.ports[1], 0, BS_NVME_ANA_OPTIMIZED);
	pthread_mutex_unlock(&f->ss.lock);
	settle(f);
	assert_int_equal(responses(&f->aq), 0);
	ana_log(f, &f->aq, 56, 0, true);	/* RAE: still masked */
	nvmf_out_drop_all(&f->aq);
	settle(f);
	assert_int_equal(responses(&f->aq), 0);
	assert_int_equal(ana_log(f, &f->aq, 56, 0, false)[32],
			 BS_NVME_ANA_OPTIMIZED);
	nvmf_out_drop_all(&f->aq);

	/* unmasked: the next change is told at once (the AER held) */
	pthread_mutex_lock(&f->ss.lock);
	nvmf_ana_set(&f->ss.ports[1], 0, BS_NVME_ANA_CHANGE);
	pthread_mutex_unlock(&f->ss.lock);
	settle(f);
	assert_int_equal(responses(&f->aq), 1);
	assert_int_equal(last_rsp(&f->aq, &dw0, NULL), 0);
	assert_int_equal((dw0 >> 8) & 0xff, BS_NVME_AER_NOTICE_ANA);
}


/* ns 1 in group 1, ns 2 in group 2; port 2 (controller 1's):
 * group 1 optimized, group 2 non-optimized, then group 2 in change */
static void two_groups(void **state)
{
	struct fx *f = *state;
	struct bs_nvme_id_ctrl ic;
	struct bs_nvme_id_ns ns;
	const uint8_t *raw = (const uint8_t *)&ic;
	const uint8_t *p;

	f->ns[1].anagrpid = 2;
	f->ss.ana_maxgrp = 2;
	nvmf_id_ctrl(&f->aq, &ic);
	assert_int_equal(bs_nvme_get32(raw + 344), 2);	/* ANAGRPMAX */
	assert_int_equal(bs_nvme_get32(raw + 348), 2);	/* NANAGRPID */
	nvmf_id_ns(&f->ns[1], &ns);
	assert_int_equal(bs_nvme_get32((const uint8_t *)&ns + 92), 2);

	pthread_mutex_lock(&f->ss.lock);
	assert_int_equal(nvmf_ana_set(&f->ss.ports[1], 2,
				      BS_NVME_ANA_NONOPTIMIZED), 1);
	/* the same again: no change, no count */
	assert_int_equal(nvmf_ana_set(&f->ss.ports[1], 2,
				      BS_NVME_ANA_NONOPTIMIZED), 0);
	pthread_mutex_unlock(&f->ss.lock);
	settle(f);
	/* header, group 1 + NSID 1, group 2 + NSID 2 */
	assert_int_equal(nvmf_ana_log(&f->ctrl, false, NULL),
			 16 + 2 * (32 + 4));
	p = ana_log(f, &f->aq, 88, 0, true);
	assert_int_equal(bs_nvme_get64(p), 1);		/* change count */
	assert_int_equal(bs_nvme_get16(p + 8), 2);	/* groups */
	assert_int_equal(bs_nvme_get32(p + 16), 1);
	assert_int_equal(bs_nvme_get32(p + 20), 1);
	assert_int_equal(bs_nvme_get64(p + 24), 0);
	assert_int_equal(p[32], BS_NVME_ANA_OPTIMIZED);
	assert_int_equal(bs_nvme_get32(p + 48), 1);
	assert_int_equal(bs_nvme_get32(p + 52), 2);	/* group 2 */
	assert_int_equal(bs_nvme_get32(p + 56), 1);
	assert_int_equal(bs_nvme_get64(p + 60), 1);
	assert_int_equal(p[68], BS_NVME_ANA_NONOPTIMIZED);
	assert_int_equal(bs_nvme_get32(p + 84), 2);
	/* port 1's controller: both optimized */
	p = ana_log(f, &f->aq2, 88, 0, true);
	assert_int_equal(p[32], BS_NVME_ANA_OPTIMIZED);
	assert_int_equal(p[68], BS_NVME_ANA_OPTIMIZED);
	/* RGO: two descriptors, no NSIDs */
	assert_int_equal(nvmf_ana_log(&f->ctrl, true, NULL), 16 + 2 * 32);

	/* group 2 in change on port 2: ns 2's I/O gets 303h, ns 1's none */
	pthread_mutex_lock(&f->ss.lock);
	nvmf_ana_set(&f->ss.ports[1], 2, BS_NVME_ANA_CHANGE);
	pthread_mutex_unlock(&f->ss.lock);
	assert_int_equal(nvmf_ana_io_status(&f->ctrl, &f->ns[1]),
			 BS_NVME_SC_ANA_TRANSITION);
	assert_int_equal(nvmf_ana_io_status(&f->ctrl, &f->ns[0]), 0);
	assert_int_equal(nvmf_ana_io_status(&f->ctrl2, &f->ns[1]), 0);
	assert_int_equal(read8(f), 0);		/* a Read of NSID 1 */

	/* every group on port 2: one count in the header, one in each
	 * group that changed */
	pthread_mutex_lock(&f->ss.lock);
	assert_int_equal(nvmf_ana_set(&f->ss.ports[1], 0,
				      BS_NVME_ANA_INACCESSIBLE), 2);
	pthread_mutex_unlock(&f->ss.lock);
	settle(f);
	p = ana_log(f, &f->aq, 88, 0, true);
	assert_int_equal(bs_nvme_get64(p), 3);
	assert_int_equal(bs_nvme_get64(p + 24), 1);
	assert_int_equal(p[32], BS_NVME_ANA_INACCESSIBLE);
	assert_int_equal(bs_nvme_get64(p + 60), 3);
	assert_int_equal(p[68], BS_NVME_ANA_INACCESSIBLE);
}

/* 256 namespaces in 128 groups: 16 + 128 x 32 + 256 x 4 = 5136 bytes,
 * more than one 4 KiB read; the second part read at an offset. */
static void big_log(void **state)
{
	struct fx *f = *state;
	struct nvmf_ns *many = calloc(256, sizeof(*many));
	struct bs_nvme_id_ctrl ic;
	uint8_t *whole;
	const uint8_t *p;
	size_t size, off;
	unsigned i, g;

	assert_non_null(many);
	for (i = 0; i < 256; i++) {
		many[i].nsid = i + 1;
		many[i].unit = &f->unit[0];
		/* ns 1 and 129 in group 1, ..., 128 and 256 in 128 */
		many[i].anagrpid = i % 128 + 1;
	}
	f->ss.ns = many;
	f->ss.nns = 256;
	f->ss.ana_maxgrp = 128;
	nvmf_id_ctrl(&f->aq, &ic);
	assert_int_equal(bs_nvme_le32(ic.nanagrpid), 128);
	size = nvmf_ana_log(&f->ctrl, false, NULL);
	assert_int_equal(size, 16 + 128 * 32 + 256 * 4);
	pthread_mutex_lock(&f->ss.lock);
	nvmf_ana_set(&f->ss.ports[1], 128, BS_NVME_ANA_NONOPTIMIZED);
	pthread_mutex_unlock(&f->ss.lock);
	settle(f);
	whole = malloc(size);
	assert_non_null(whole);
	pthread_mutex_lock(&f->ss.lock);
	nvmf_ana_log(&f->ctrl, false, whole);
	pthread_mutex_unlock(&f->ss.lock);
	assert_int_equal(bs_nvme_get16(whole + 8), 128);
	for (g = 1, off = 16; g <= 128; g++) {
		assert_int_equal(bs_nvme_get32(whole + off), g);
		assert_int_equal(bs_nvme_get32(whole + off + 4), 2);
		assert_int_equal(whole[off + 16], g == 128 ?
				 BS_NVME_ANA_NONOPTIMIZED :
				 BS_NVME_ANA_OPTIMIZED);
		assert_int_equal(bs_nvme_get32(whole + off + 32), g);
		assert_int_equal(bs_nvme_get32(whole + off + 36), g + 128);
		off += 40;
	}
	assert_int_equal(off, size);
	/* Get Log Page: the first 4 KiB, then the rest from offset 4096 */
	p = ana_log(f, &f->aq, 4096, 0, true);
	assert_memory_equal(p, whole, 4096);
	nvmf_out_drop_all(&f->aq);
	{
		uint32_t rest = (uint32_t)(size - 4096);
		struct nvmf_cmd *c = cmd(&f->aq, BS_NVME_ADMIN_GET_LOG_PAGE,
					 0xffffffffu, BS_NVME_LOG_ANA |
					 BS_NVME_LOG_RAE |
					 (rest / 4 - 1) << 16, 0, rest);

		c->sqe.cdw12 = bs_nvme_cpu_to_le32(4096);
		nvmf_admin(c);
		assert_int_equal(last_rsp(&f->aq, NULL, NULL), 0);
		assert_memory_equal(last_data(&f->aq), whole + 4096, rest);
	}
	free(whole);
	f->ss.ns = f->ns;
	f->ss.nns = 2;
	free(many);
}

/* The nvmf type's check of "k=v" pairs: 0, or -errno with the reason
 * containing @why. */
static void check(const char *const *kv, int want, const char *why)
{
	const struct bs_export_type *t = bs_export_type_find("nvmf");
	struct bs_opts *o;
	unsigned i;

	assert_non_null(t);
	assert_int_equal(bs_opts_new(&o), 0);
	for (i = 0; kv[i]; i += 2)
		assert_int_equal(bs_opts_set(o, kv[i], kv[i + 1], "t.ini:1"),
				 0);
	assert_int_equal(t->check("s0", o), want);
	if (why)
		assert_non_null(strstr(bs_last_error(), why));
	bs_opts_free(o);
}

static void port_keys(void **state)
{
	(void)state;
	check((const char *const[]){ "listen", "127.0.0.1:4420", "listen.2",
				     "127.0.0.1:4421", "ana_state.2",
				     "non-optimized", NULL },
	      0, NULL);
	/* a state with one listener turns ANA on */
	check((const char *const[]){ "ana_state.1", "inaccessible", NULL }, 0,
	      NULL);
	check((const char *const[]){ "listen.3", "127.0.0.1:4422", NULL },
	      -EINVAL, "listen.3 without listen.2");
	check((const char *const[]){ "listen.2", "127.0.0.1:4420", NULL },
	      -EINVAL, "port 1 has it");
	check((const char *const[]){ "listen.2", "127.0.0.1:4421",
				     "ana_state.3", "optimized", NULL },
	      -EINVAL, "no port 3 (2 listeners)");
	check((const char *const[]){ "ana_state.1", "fast", NULL }, -EINVAL,
	      "give optimized, non-optimized");
	check((const char *const[]){ "listen.2", "127.0.0.1:4421", "ana", "0",
				     "ana_state.2", "change", NULL },
	      -EINVAL, "with ana = 0");
	check((const char *const[]){ "listen.2", "127.0.0.1:4421", "ana", "0",
				     NULL },
	      0, NULL);
	/* groups: ana_group.NSID, ana_state.N.G, anatt */
	check((const char *const[]){ "listen.2", "127.0.0.1:4421",
				     "ana_group.2", "2", "ana_state.1.2",
				     "non-optimized", "ana_state.2",
				     "non-optimized", "ana_state.2.2",
				     "optimized", "anatt", "3", NULL },
	      0, NULL);
	/* a group alone turns ANA on */
	check((const char *const[]){ "ana_group.1", "7", NULL }, 0, NULL);
	check((const char *const[]){ "ana_group.0", "1", NULL }, -EINVAL,
	      "give ana_group.NSID");
	check((const char *const[]){ "ana_group.1", "129", NULL }, -EINVAL,
	      "give a group ID, 1 to 128");
	check((const char *const[]){ "ana_group.1", "2", "ana", "0", NULL },
	      -EINVAL, "with ana = 0");
	check((const char *const[]){ "ana_state.2.1", "optimized", NULL },
	      -EINVAL, "no port 2 (1 listener)");
	check((const char *const[]){ "ana_state.1.1", "fast", NULL }, -EINVAL,
	      "give optimized, non-optimized");
	check((const char *const[]){ "ana_state.1.x", "optimized", NULL },
	      -EINVAL, "give ana_state.PORT.GROUP");
	check((const char *const[]){ "ana_state.5", "optimized", NULL },
	      -EINVAL, "give ana_state.PORT, PORT 1 to 4");
	check((const char *const[]){ "ana_state.01", "optimized", NULL },
	      -EINVAL, "give ana_state.PORT,");
	check((const char *const[]){ "ana_group.01", "1", NULL }, -EINVAL,
	      "give ana_group.NSID");
	check((const char *const[]){ "ana_group.1", "2", "anatt", "0", NULL },
	      -EINVAL, "anatt '0': give seconds, 1 to 255");
}

/* The keys with numbers in them are known keys of the type (its help
 * names them with N and G); others are not. */
static void known_keys(void **state)
{
	const struct bs_export_type *t = bs_export_type_find("nvmf");
	static const struct {
		const char *key;
		int want;
	} rows[] = {
		{ "ana_group.1", 0 },		{ "ana_group.256", 0 },
		{ "ana_state.2", 0 },		{ "ana_state.2.17", 0 },
		{ "anatt", 0 },			{ "listen.3", 0 },
		{ "ana_group.", -EINVAL },	{ "ana_group.x", -EINVAL },
		{ "ana_state.2.1.1", -EINVAL }, { "ana_group", -EINVAL },
		{ "ana_state.N", -EINVAL },
	};
	struct bs_opts *o;
	unsigned i;

	(void)state;
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		assert_int_equal(bs_opts_new(&o), 0);
		assert_int_equal(bs_opts_set(o, rows[i].key, "1", "t.ini:1"),
				 0);
		if (bs_opts_check_known(o, NULL, t->options) != rows[i].want)
			fail_msg("key %s", rows[i].key);
		bs_opts_free(o);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(log_page_bytes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(identify_fields, setup,
						teardown),
		cmocka_unit_test_setup_teardown(io_status_per_state, setup,
						teardown),
		cmocka_unit_test_setup_teardown(change_notice, setup,
						teardown),
		cmocka_unit_test_setup_teardown(two_groups, setup, teardown),
		cmocka_unit_test_setup_teardown(big_log, setup, teardown),
		cmocka_unit_test(port_keys),
		cmocka_unit_test(known_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
