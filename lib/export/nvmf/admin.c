/* SPDX-License-Identifier: MIT */
/*
 * Admin commands: Identify (controller, active namespace list, namespace,
 * namespace identification descriptors, NVM command set specific), Get
 * Log Page (error, SMART / health, changed namespace list, ANA,
 * discovery),
 * Set/Get Features (number of queues, asynchronous event configuration,
 * keep alive timer, volatile write cache), Asynchronous Event Request
 * (held until an event), Abort, Keep Alive.
 *
 * Capability mapping (the point): DLFEAT = (1<<3)|1 exactly while the
 * namespace's device has write_zeroes_unmap, else 0; ONCS Compare always,
 * Write Zeroes and Dataset Management from the devices' capabilities; VWC
 * from their write cache; NMIC shared and CMIC multi-controller so that
 * multipath hosts join paths; MDTS 1 MiB or the smallest max transfer;
 * with ANA (ana.c) CMIC bit 3, ANACAP/ANATT/ANAGRPMAX/NANAGRPID, each
 * namespace's ANAGRPID in Identify Namespace, the ANA log and its change
 * notice.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/loop.h>

#include "export/nvmf/nvmf.h"

#define FAIL(c, sf) nvmf_cmd_done((c), (sf) | BS_NVME_SF_DNR, 0, NULL, 0)

static void pad_ascii(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);

	memset(dst, ' ', n);
	memcpy(dst, src, l < n ? l : n);
}

static unsigned ilog2_32(uint64_t v)
{
	unsigned n = 0;

	while (v > 1) {
		v >>= 1;
		n++;
	}
	return n;
}

static uint8_t mdts_of(struct nvmf_subsys *ss)
{
	uint64_t max = NVMF_MAX_XFER;
	unsigned i;

	for (i = 0; i < ss->nns; i++) {
		uint64_t m = ss->ns[i].caps.max_transfer;

		if (m && m < max)
			max = m;
	}
	if (max < 4096)
		max = 4096;
	return (uint8_t)ilog2_32(max / 4096);
}

static bool any_write_cache(const struct nvmf_subsys *ss)
{
	unsigned i;

	for (i = 0; i < ss->nns; i++)
		if (ss->ns[i].caps.write_cache)
			return true;
	return false;
}

uint16_t nvmf_oncs(const struct nvmf_subsys *ss)
{
	uint16_t oncs = BS_NVME_ONCS_COMPARE;
	unsigned i;

	for (i = 0; i < ss->nns; i++) {
		const struct bs_caps *cp = &ss->ns[i].caps;

		if (cp->zeroing != BS_CAP_NO)
			oncs |= BS_NVME_ONCS_WRITE_ZEROES;
		if (cp->discard || cp->write_zeroes_unmap)
			oncs |= BS_NVME_ONCS_DSM;
	}
	return oncs;
}

void nvmf_id_ctrl(struct nvmf_queue *q, struct bs_nvme_id_ctrl *id)
{
	struct nvmf_subsys *ss = q->ss;
	struct nvmf_ctrl *ctrl = q->ctrl;
	char sn[24];
	uint64_t h = 0xcbf29ce484222325ull;
	const char *p;

	memset(id, 0, sizeof(*id));
	for (p = ss->nqn; *p; p++) {
		h ^= (uint8_t)*p;
		h *= 0x100000001b3ull;
	}
	snprintf(sn, sizeof(sn), "%016llx", (unsigned long long)h);
	pad_ascii(id->sn, sizeof(id->sn), sn);
	pad_ascii(id->mn, sizeof(id->mn), "blkstack");
	pad_ascii(id->fr, sizeof(id->fr), "0.1");
	id->rab = 6;
	id->cntlid = bs_nvme_cpu_to_le16(ctrl->cntlid);
	id->ver = bs_nvme_cpu_to_le32(BS_NVME_VS(1, 4, 0));
	id->aerl = NVMF_AERL - 1;
	id->kas = bs_nvme_cpu_to_le16(NVMF_KAS_100MS);
	id->lpa = BS_NVME_LPA_EXT_DATA;
	id->sgls = bs_nvme_cpu_to_le32(BS_NVME_SGLS_SUPPORTED |
				       BS_NVME_SGLS_OFFSET);
	id->maxcmd = bs_nvme_cpu_to_le16((uint16_t)ss->qdepth);
	id->sqes = (BS_NVME_SQES_LOG2 << 4) | BS_NVME_SQES_LOG2;
	id->cqes = (BS_NVME_CQES_LOG2 << 4) | BS_NVME_CQES_LOG2;
	id->ioccsz = bs_nvme_cpu_to_le32((64 + ss->incapsule) / 16);
	id->iorcsz = bs_nvme_cpu_to_le32(1);
	id->msdbd = 1;
	id->mdts = mdts_of(ss);
	if (ctrl->discovery) {
		id->cntrltype = BS_NVME_CTRL_TYPE_DISCOVERY;
		id->oaes = bs_nvme_cpu_to_le32(BS_NVME_AEN_CFG_DISC_CHANGE);
		memcpy(id->subnqn, BS_NVME_DISC_SUBSYS_NAME,
			sizeof(BS_NVME_DISC_SUBSYS_NAME) - 1);
		return;
	}
	id->cntrltype = BS_NVME_CTRL_TYPE_IO;
	id->cmic = BS_NVME_CMIC_MULTI_CTRL;
	id->oaes = bs_nvme_cpu_to_le32(BS_NVME_AEN_CFG_NS_ATTR);
	if (ss->ana) {
		id->cmic |= BS_NVME_CMIC_ANA;
		if (ss->nports > 1)
			id->cmic |= BS_NVME_CMIC_MULTI_PORT;
		id->oaes |= bs_nvme_cpu_to_le32(BS_NVME_AEN_CFG_ANA_CHANGE);
		id->anatt = ss->anatt ? ss->anatt : NVMF_ANATT;
		id->anacap = BS_NVME_ANACAP_OPTIMIZED |
			     BS_NVME_ANACAP_NONOPTIMIZED |
			     BS_NVME_ANACAP_INACCESSIBLE |
			     BS_NVME_ANACAP_PERSISTENT_LOSS |
			     BS_NVME_ANACAP_CHANGE |
			     BS_NVME_ANACAP_GRPID_FIXED;
		/* the IDs are 1..the highest in use: a host sizes the
		 * ANA log from NANAGRPID and NN */
		id->anagrpmax = bs_nvme_cpu_to_le32(
			ss->ana_maxgrp ? ss->ana_maxgrp : 1);
		id->nanagrpid = id->anagrpmax;
	}
	id->acl = 3;
	id->oncs = bs_nvme_cpu_to_le16(nvmf_oncs(ss));
	if (any_write_cache(ss))
		id->vwc = BS_NVME_VWC_PRESENT | BS_NVME_VWC_FLUSH_ALL_NO;
	id->nn = bs_nvme_cpu_to_le32(ss->nns);
	id->mnan = bs_nvme_cpu_to_le32(ss->nns);
	memcpy(id->subnqn, ss->nqn, strlen(ss->nqn));
}

void nvmf_id_ns(struct nvmf_ns *ns, struct bs_nvme_id_ns *id)
{
	const struct bs_caps *cp = &ns->caps;
	uint32_t lbs = cp->logical_block_size ? cp->logical_block_size : 512;
	uint64_t blocks = cp->size / lbs;

	memset(id, 0, sizeof(*id));
	id->nsze = id->ncap = id->nuse = bs_nvme_cpu_to_le64(blocks);
	if (cp->discard || cp->write_zeroes_unmap)
		id->nsfeat |= BS_NVME_NSFEAT_THIN;
	id->nlbaf = 0;
	id->flbas = 0;
	id->lbaf[0].lbads = (uint8_t)ilog2_32(lbs);
	id->nmic = BS_NVME_NMIC_SHARED;
	/* the seed's rule: DLFEAT (1<<3)|1 exactly when write-zeroes may
	 * deallocate and deallocated blocks read as zeroes */
	id->dlfeat = cp->write_zeroes_unmap ?
			     BS_NVME_DLFEAT_WZ_DEAC | BS_NVME_DLFEAT_READ_ZEROES
			     : 0;
	if (cp->discard_granularity && cp->discard_granularity >= lbs) {
		id->nsfeat |= BS_NVME_NSFEAT_IO_OPT;
		id->npdg = id->npda = bs_nvme_cpu_to_le16(
			(uint16_t)(cp->discard_granularity / lbs - 1));
		if (cp->physical_block_size >= lbs)
			id->npwg = id->npwa = bs_nvme_cpu_to_le16(
				(uint16_t)(cp->physical_block_size / lbs - 1));
	}
	if (ns->unit->readonly)
		id->nsattr = 1;
	id->anagrpid = bs_nvme_cpu_to_le32(ns->anagrpid);
	memcpy(id->nguid, ns->nguid, 16);
	memcpy(id->eui64, ns->eui64, 8);
}

void nvmf_id_ns_indep(struct nvmf_ns *ns, struct bs_nvme_id_ns_cs_indep *id)
{
	memset(id, 0, sizeof(*id));
	if (ns->caps.discard || ns->caps.write_zeroes_unmap)
		id->nsfeat = BS_NVME_NSFEAT_THIN;
	id->nmic = BS_NVME_NMIC_SHARED;
	id->anagrpid = bs_nvme_cpu_to_le32(ns->anagrpid);
	if (ns->unit->readonly)
		id->nsattr = 1;
	id->nstat = 1;		/* ready */
}

static void put_desc(uint8_t *b, size_t *off, uint8_t type, const void *v,
		     uint8_t len)
{
	b[*off] = type;
	b[*off + 1] = len;
	memcpy(b + *off + 4, v, len);
	*off += 4u + len;
}

static void identify(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_subsys *ss = q->ss;
	uint32_t cdw10 = bs_nvme_le32(c->sqe.cdw10);
	uint32_t nsid = bs_nvme_le32(c->sqe.nsid);
	uint8_t cns = cdw10 & 0xff, csi = bs_nvme_le32(c->sqe.cdw11) >> 24;
	struct nvmf_ns *ns;
	uint8_t *b;
	unsigned i, n;

	/* the data structures are 4 KiB; a host asking for another length
	 * (up to 1 MiB, which was allocated and sent) is refused, as Linux's
	 * nvmet does */
	if (c->len != BS_NVME_IDENTIFY_SIZE) {
		FAIL(c, BS_NVME_SC_SGL_INVALID_DATA);
		return;
	}
	b = calloc(1, BS_NVME_IDENTIFY_SIZE);
	if (!b) {
		FAIL(c, BS_NVME_SC_INTERNAL);
		return;
	}
	if (q->ctrl->discovery && cns != BS_NVME_CNS_CTRL) {
		free(b);
		FAIL(c, BS_NVME_SC_INVALID_FIELD);
		return;
	}
	switch (cns) {
	case BS_NVME_CNS_CTRL:
		nvmf_id_ctrl(q, (struct bs_nvme_id_ctrl *)b);
		break;
	case BS_NVME_CNS_NS:
		ns = nvmf_ns_find(ss, nsid);
		if (!ns) {
			free(b);
			FAIL(c, BS_NVME_SC_INVALID_NS);
			return;
		}
		nvmf_id_ns(ns, (struct bs_nvme_id_ns *)b);
		break;
	case BS_NVME_CNS_CS_NS_ACTIVE_LIST:
		if (csi != BS_NVME_CSI_NVM)
			break;
		/* fall through */
	case BS_NVME_CNS_NS_ACTIVE_LIST:
		if (nsid >= 0xfffffffeu) {
			free(b);
			FAIL(c, BS_NVME_SC_INVALID_NS);
			return;
		}
		for (i = 0, n = 0; i < ss->nns && n < 1024; i++)
			if (ss->ns[i].nsid > nsid)
				bs_nvme_put32(b + 4 * n++, ss->ns[i].nsid);
		break;
	case BS_NVME_CNS_NS_DESC_LIST: {
		size_t off = 0;
		uint8_t csi_v = BS_NVME_CSI_NVM;

		ns = nvmf_ns_find(ss, nsid);
		if (!ns) {
			free(b);
			FAIL(c, BS_NVME_SC_INVALID_NS);
			return;
		}
		put_desc(b, &off, BS_NVME_NIDT_EUI64, ns->eui64, 8);
		put_desc(b, &off, BS_NVME_NIDT_NGUID, ns->nguid, 16);
		put_desc(b, &off, BS_NVME_NIDT_UUID, ns->uuid, 16);
		put_desc(b, &off, BS_NVME_NIDT_CSI, &csi_v, 1);
		break;
	}
	case BS_NVME_CNS_CS_NS:
	case BS_NVME_CNS_NS_CS_INDEP:
		ns = nvmf_ns_find(ss, nsid);
		if (!ns || (cns == BS_NVME_CNS_CS_NS &&
			    csi != BS_NVME_CSI_NVM)) {
			free(b);
			FAIL(c, ns ? BS_NVME_SC_INVALID_FIELD
				   : BS_NVME_SC_INVALID_NS);
			return;
		}
		if (cns == BS_NVME_CNS_NS_CS_INDEP)
			nvmf_id_ns_indep(ns, (void *)b);
		break;
	case BS_NVME_CNS_CS_CTRL:
		if (csi != BS_NVME_CSI_NVM) {
			free(b);
			FAIL(c, BS_NVME_SC_INVALID_FIELD);
			return;
		}
		break;		/* the NVM set's limits: none reported */
	default:
		free(b);
		FAIL(c, BS_NVME_SC_INVALID_FIELD);
		return;
	}
	nvmf_cmd_done(c, 0, 0, b, BS_NVME_IDENTIFY_SIZE);
}

/* ---- log pages --------------------------------------------------------- */

static void get_log(struct nvmf_cmd *c)
{
	struct nvmf_queue *q = c->q;
	struct nvmf_ctrl *ctrl = q->ctrl;
	uint32_t cdw10 = bs_nvme_le32(c->sqe.cdw10);
	uint32_t cdw11 = bs_nvme_le32(c->sqe.cdw11);
	uint8_t lid = cdw10 & 0xff;
	bool rae = cdw10 & BS_NVME_LOG_RAE;
	uint64_t numd = ((uint64_t)(cdw11 & 0xffff) << 16 | cdw10 >> 16) + 1;
	uint64_t off = bs_nvme_le32(c->sqe.cdw12) |
		       (uint64_t)bs_nvme_le32(c->sqe.cdw13) << 32;
	uint64_t len = numd * 4, size;
	uint8_t *page = NULL, *out;
	unsigned i;

	/* the SGL carries exactly NUMD dwords (as Linux's nvmet checks) */
	if (len != c->len) {
		FAIL(c, BS_NVME_SC_SGL_INVALID_DATA);
		return;
	}
	if (off & 3) {
		FAIL(c, BS_NVME_SC_INVALID_FIELD);
		return;
	}
	out = calloc(1, c->len);
	if (!out) {
		FAIL(c, BS_NVME_SC_INTERNAL);
		return;
	}
	if (lid == BS_NVME_LOG_DISCOVERY) {
		if (!ctrl->discovery) {
			free(out);
			FAIL(c, BS_NVME_SC_INVALID_LOG_PAGE);
			return;
		}
		nvmf_discovery_log(q->ss, out, off, (uint32_t)len);
		nvmf_cmd_done(c, 0, 0, out, c->len);
		return;
	}
	if (ctrl->discovery && lid != BS_NVME_LOG_ERROR) {
		free(out);
		FAIL(c, BS_NVME_SC_INVALID_LOG_PAGE);
		return;
	}
	switch (lid) {
	case BS_NVME_LOG_ERROR:
		size = sizeof(struct bs_nvme_error_log);
		page = calloc(1, size);
		break;
	case BS_NVME_LOG_SMART: {
		struct bs_nvme_smart_log *s;

		size = sizeof(*s);
		page = calloc(1, size);
		if (!page)
			break;
		s = (void *)page;
		s->temperature = bs_nvme_cpu_to_le16(273 + 30);
		s->avail_spare = 100;
		s->spare_thresh = 10;
		break;
	}
	case BS_NVME_LOG_CHANGED_NS:
		size = BS_NVME_CHANGED_NS_MAX * 4;
		page = calloc(1, size);
		if (!page)
			break;
		if (ctrl->changed_overflow)
			bs_nvme_put32(page, BS_NVME_CHANGED_NS_OVERFLOW);
		else
			for (i = 0; i < ctrl->nchanged; i++)
				bs_nvme_put32(page + 4 * i, ctrl->changed[i]);
		if (!rae) {
			ctrl->nchanged = 0;
			ctrl->changed_overflow = false;
			ctrl->aen_ns_masked = false;
		}
		break;
	case BS_NVME_LOG_ANA: {
		bool rgo = (cdw10 >> BS_NVME_LOG_LSP_SHIFT) &
			   BS_NVME_ANA_LSP_RGO;

		if (!q->ss->ana)
			goto bad_lid;
		size = nvmf_ana_log(ctrl, rgo, NULL);
		page = malloc(size);
		if (!page)
			break;
		nvmf_ana_log(ctrl, rgo, page);
		if (!rae) {
			ctrl->aen_ana_pending = false;
			ctrl->aen_ana_masked = false;
		}
		break;
	}
	default:
	bad_lid:
		free(out);
		FAIL(c, BS_NVME_SC_INVALID_LOG_PAGE);
		return;
	}
	if (!page) {
		free(out);
		FAIL(c, BS_NVME_SC_INTERNAL);
		return;
	}
	if (off > size) {
		free(page);
		free(out);
		FAIL(c, BS_NVME_SC_INVALID_FIELD);
		return;
	}
	memcpy(out, page + off, size - off < len ? size - off : len);
	free(page);
	nvmf_cmd_done(c, 0, 0, out, c->len);
	nvmf_aen_kick(ctrl);
}

/* ---- features ------------------------------------------------------------ */

static void features(struct nvmf_cmd *c, bool set)
{
	struct nvmf_ctrl *ctrl = c->q->ctrl;
	struct nvmf_subsys *ss = c->q->ss;
	uint32_t cdw10 = bs_nvme_le32(c->sqe.cdw10);
	uint32_t cdw11 = bs_nvme_le32(c->sqe.cdw11);
	uint8_t fid = cdw10 & 0xff;
	unsigned sel = (cdw10 >> BS_NVME_FEAT_SEL_SHIFT) &
		       BS_NVME_FEAT_SEL_MASK;
	uint32_t r = 0;
	unsigned i;

	if (set && (cdw10 & BS_NVME_FEAT_SV)) {
		FAIL(c, BS_NVME_SC_FEATURE_NOT_SAVEABLE);
		return;
	}
	if (!set && sel == BS_NVME_FEAT_SEL_SUPPORTED) {
		/* changeable, not saveable, not per namespace */
		nvmf_cmd_done(c, 0, 1u << 2, NULL, 0);
		return;
	}
	switch (fid) {
	case BS_NVME_FEAT_NUM_QUEUES:
		if (ctrl->discovery)
			goto invalid;
		if (set) {
			uint32_t nsq = (cdw11 & 0xffff) + 1;
			uint32_t ncq = (cdw11 >> 16) + 1;

			if (nsq == 0x10000 || ncq == 0x10000)
				goto invalid;
			for (i = 1; i <= ss->max_ioq; i++)
				if (ctrl->ioq[i]) {
					FAIL(c, BS_NVME_SC_CMD_SEQ_ERROR);
					return;
				}
			(void)nsq;
			(void)ncq;
		}
		/* every controller gets the configured count */
		r = (ctrl->nr_ioq - 1) | (ctrl->nr_ioq - 1) << 16;
		break;
	case BS_NVME_FEAT_ASYNC_EVENT: {
		uint32_t ok = ctrl->discovery ? BS_NVME_AEN_CFG_DISC_CHANGE
					      : BS_NVME_AEN_CFG_NS_ATTR;

		if (!ctrl->discovery && ss->ana)
			ok |= BS_NVME_AEN_CFG_ANA_CHANGE;

		if (set)
			ctrl->aen_cfg = cdw11 & ok;
		r = ctrl->aen_cfg;
		break;
	}
	case BS_NVME_FEAT_KATO:
		if (set) {
			if (ss->kato_max_ms && cdw11 > ss->kato_max_ms) {
				FAIL(c, BS_NVME_SC_KA_TIMEOUT_INVALID);
				return;
			}
			ctrl->kato_ms = cdw11;
			ctrl->ka_ns = bs_now_ns();
		}
		r = ctrl->kato_ms;
		break;
	case BS_NVME_FEAT_VOLATILE_WC:
		/* without a volatile write cache (VWC bit 0 clear) Set and
		 * Get of this feature are Invalid Field in Command (NVMe
		 * Base 2.x, Volatile Write Cache feature) */
		if (ctrl->discovery || !any_write_cache(ss))
			goto invalid;
		if (set)
			__atomic_store_n(&ctrl->wce, cdw11 & 1,
					 __ATOMIC_RELAXED);
		r = ctrl->wce;
		break;
	default:
		goto invalid;
	}
	nvmf_cmd_done(c, 0, r, NULL, 0);
	if (set && fid == BS_NVME_FEAT_ASYNC_EVENT)
		nvmf_aen_kick(ctrl);
	return;
invalid:
	FAIL(c, BS_NVME_SC_INVALID_FIELD);
}

/* ---- asynchronous events --------------------------------------------------- */

/* Answer a held AER with a notice of @info (log page @lid) when one is
 * pending, not masked and enabled (@cfg); masked until the log is read. */
static void aen_notice(struct nvmf_ctrl *ctrl, bool *pending, bool *masked,
		       uint32_t cfg, unsigned info, unsigned lid)
{
	uint16_t cid;

	if (!ctrl->naer || !*pending || *masked || !(ctrl->aen_cfg & cfg))
		return;
	cid = ctrl->aer_cid[--ctrl->naer];
	*pending = false;
	*masked = true;
	nvmf_queue_respond(ctrl->admin, cid, 0,
			   bs_nvme_aen_result(BS_NVME_AER_TYPE_NOTICE, info,
					      lid));
}

void nvmf_aen_kick(struct nvmf_ctrl *ctrl)
{
	if (!ctrl->admin || ctrl->admin->ended)
		return;
	aen_notice(ctrl, &ctrl->aen_ns_pending, &ctrl->aen_ns_masked,
		   BS_NVME_AEN_CFG_NS_ATTR, BS_NVME_AER_NOTICE_NS_CHANGED,
		   BS_NVME_LOG_CHANGED_NS);
	aen_notice(ctrl, &ctrl->aen_ana_pending, &ctrl->aen_ana_masked,
		   BS_NVME_AEN_CFG_ANA_CHANGE, BS_NVME_AER_NOTICE_ANA,
		   BS_NVME_LOG_ANA);
}

void nvmf_aen_ns_changed(struct nvmf_subsys *ss, uint32_t nsid)
{
	struct nvmf_ctrl *ctrl;
	unsigned i;

	for (ctrl = ss->ctrls; ctrl; ctrl = ctrl->next) {
		if (ctrl->discovery)
			continue;
		for (i = 0; i < ctrl->nchanged; i++)
			if (ctrl->changed[i] == nsid)
				break;
		if (i == ctrl->nchanged) {
			if (ctrl->nchanged == BS_NVME_CHANGED_NS_MAX)
				ctrl->changed_overflow = true;
			else
				ctrl->changed[ctrl->nchanged++] = nsid;
		}
		ctrl->aen_ns_pending = true;
		/* the admin queue's loop answers a held AER */
		if (ctrl->admin)
			nvmf_queue_send_aen(ctrl->admin);
	}
}

static void aer(struct nvmf_cmd *c)
{
	struct nvmf_ctrl *ctrl = c->q->ctrl;

	if (ctrl->naer >= NVMF_AERL) {
		FAIL(c, BS_NVME_SC_ASYNC_LIMIT);
		return;
	}
	ctrl->aer_cid[ctrl->naer++] = c->sqe.cid;
	nvmf_cmd_forget(c);
	nvmf_aen_kick(ctrl);
}

static void admin(struct nvmf_cmd *c)
{
	struct nvmf_ctrl *ctrl = c->q->ctrl;

	if (!(ctrl->csts & BS_NVME_CSTS_RDY) &&
	    c->sqe.opcode != BS_NVME_ADMIN_KEEP_ALIVE) {
		FAIL(c, BS_NVME_SC_CMD_SEQ_ERROR);
		return;
	}
	switch (c->sqe.opcode) {
	case BS_NVME_ADMIN_IDENTIFY:
		identify(c);
		return;
	case BS_NVME_ADMIN_GET_LOG_PAGE:
		get_log(c);
		return;
	case BS_NVME_ADMIN_SET_FEATURES:
		features(c, true);
		return;
	case BS_NVME_ADMIN_GET_FEATURES:
		features(c, false);
		return;
	case BS_NVME_ADMIN_ASYNC_EVENT:
		aer(c);
		return;
	case BS_NVME_ADMIN_KEEP_ALIVE:
		ctrl->ka_ns = bs_now_ns();
		nvmf_cmd_done(c, 0, 0, NULL, 0);
		return;
	case BS_NVME_ADMIN_ABORT:
		/* bit 0 set: the command was not aborted */
		nvmf_cmd_done(c, 0, 1, NULL, 0);
		return;
	default:
		FAIL(c, BS_NVME_SC_INVALID_OPCODE);
	}
}

void nvmf_admin(struct nvmf_cmd *c)
{
	struct nvmf_subsys *ss = c->q->ss;

	pthread_mutex_lock(&ss->lock);
	admin(c);
	pthread_mutex_unlock(&ss->lock);
}
