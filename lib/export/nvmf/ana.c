/* SPDX-License-Identifier: MIT */
/*
 * Asymmetric Namespace Access (NVMe base specification, "Asymmetric
 * Namespace Access Reporting"): how a host learns which of the
 * subsystem's ports to use.
 *
 * A limit of this target: one ANA group per subsystem (ANAGRPID 1, every
 * namespace in it). The state is a port's, so every controller whose
 * association came in on a port sees that port's state: in the ANA log
 * page (LID 0Ch), and as the path status of its I/O commands when the
 * port is inaccessible (SCT 3h SC 02h), in persistent loss (01h) or in
 * change (03h, "ANA transition"). The status field values are the ones
 * of the specification's Figure "Path Related Status Values":
 * BS_NVME_SC_ANA_* (0x301..0x303). DNR stays clear: another path may
 * serve the command.
 *
 * A state change counts one in the subsystem's change count and sends
 * an Asymmetric Namespace Access Change notice (type notice, info 03h,
 * log page 0Ch) to the controllers on that port whose host enabled it
 * (Set Features 0Bh, bit 11); the notice is masked until the host reads
 * the ANA log without RAE.
 */
#include <string.h>

#include "export/nvmf/nvmf.h"

static const struct {
	uint8_t state;
	const char *name;
} names[] = {
	{ BS_NVME_ANA_OPTIMIZED, "optimized" },
	{ BS_NVME_ANA_NONOPTIMIZED, "non-optimized" },
	{ BS_NVME_ANA_INACCESSIBLE, "inaccessible" },
	{ BS_NVME_ANA_PERSISTENT_LOSS, "persistent-loss" },
	{ BS_NVME_ANA_CHANGE, "change" },
};

const char *nvmf_ana_name(uint8_t state)
{
	unsigned i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].state == state)
			return names[i].name;
	return NULL;
}

uint8_t nvmf_ana_parse(const char *name)
{
	unsigned i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(names[i].name, name))
			return names[i].state;
	return 0;
}

uint8_t nvmf_ana_state(const struct nvmf_ctrl *ctrl)
{
	if (!ctrl->port)
		return BS_NVME_ANA_OPTIMIZED;
	return __atomic_load_n(&ctrl->port->ana_state, __ATOMIC_RELAXED);
}

size_t nvmf_ana_log(const struct nvmf_ctrl *ctrl, bool rgo, uint8_t *page)
{
	const struct nvmf_subsys *ss = ctrl->ss;
	uint32_t nns = rgo ? 0 : ss->nns;
	size_t size = sizeof(struct bs_nvme_ana_log_hdr) +
		      sizeof(struct bs_nvme_ana_group_desc) + 4 * (size_t)nns;
	struct bs_nvme_ana_log_hdr *h;
	struct bs_nvme_ana_group_desc *g;
	uint32_t i;

	if (!page)
		return size;
	memset(page, 0, size);
	h = (void *)page;
	g = (void *)(page + sizeof(*h));
	h->chgcnt = bs_nvme_cpu_to_le64(ss->ana_chgcnt);
	h->ngrps = bs_nvme_cpu_to_le16(1);
	g->grpid = bs_nvme_cpu_to_le32(NVMF_ANAGRPID);
	g->nnsids = bs_nvme_cpu_to_le32(nns);
	g->chgcnt = bs_nvme_cpu_to_le64(ss->ana_chgcnt);
	g->state = nvmf_ana_state(ctrl);
	/* the NSIDs in ascending order */
	for (i = 0; i < nns; i++)
		bs_nvme_put32(page + sizeof(*h) + sizeof(*g) + 4 * i,
			      ss->ns[i].nsid);
	return size;
}

uint16_t nvmf_ana_io_status(const struct nvmf_ctrl *ctrl)
{
	switch (nvmf_ana_state(ctrl)) {
	case BS_NVME_ANA_INACCESSIBLE:
		return BS_NVME_SC_ANA_INACCESSIBLE;
	case BS_NVME_ANA_PERSISTENT_LOSS:
		return BS_NVME_SC_ANA_PERSISTENT_LOSS;
	case BS_NVME_ANA_CHANGE:
		return BS_NVME_SC_ANA_TRANSITION;
	default:
		return 0;
	}
}

void nvmf_ana_set(struct nvmf_port *port, uint8_t state)
{
	struct nvmf_subsys *ss = port->ss;
	struct nvmf_ctrl *ctrl;

	if (port->ana_state == state)
		return;
	__atomic_store_n(&port->ana_state, state, __ATOMIC_RELAXED);
	/* starts at 0, wraps to 0 after all ones, as the log page's
	 * change count does */
	ss->ana_chgcnt++;
	for (ctrl = ss->ctrls; ctrl; ctrl = ctrl->next) {
		if (ctrl->discovery || ctrl->port != port)
			continue;
		ctrl->aen_ana_pending = true;
		if (ctrl->admin)
			nvmf_queue_send_aen(ctrl->admin);
	}
}
