/* SPDX-License-Identifier: MIT */
/*
 * Asymmetric Namespace Access (NVMe base specification, "Asymmetric
 * Namespace Access Reporting"): how a host learns which of the
 * subsystem's ports to use.
 *
 * Each namespace sits in an ANA group (`ana_group.NSID`, default 1; IDs
 * fixed by the config, ANACAP bit 6). A state belongs to a group on a
 * port, so one port may be optimized for one namespace and not for
 * another; every controller whose association came in on a port sees
 * that port's states: in the ANA log page (LID 0Ch: every group in use,
 * ascending, with its NSIDs), and as the path status of its I/O commands
 * for a namespace whose group is inaccessible there (SCT 3h SC 02h), in
 * persistent loss (01h) or in change (03h, "ANA transition"). The
 * status field values are the ones
 * of the specification's Figure "Path Related Status Values":
 * BS_NVME_SC_ANA_* (0x301..0x303). DNR stays clear: another path may
 * serve the command.
 *
 * A state change counts one in the subsystem's change count (the log
 * header's) and one in the change count of each group whose state
 * changed (its descriptor's), and sends an Asymmetric Namespace Access Change notice (type notice, info 03h,
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

uint8_t nvmf_ana_state(const struct nvmf_ctrl *ctrl, uint32_t grpid)
{
	if (!ctrl->port || !grpid || grpid > NVMF_ANA_MAX_GROUPS)
		return BS_NVME_ANA_OPTIMIZED;
	return __atomic_load_n(&ctrl->port->ana_state[grpid],
			       __ATOMIC_RELAXED);
}

bool nvmf_ana_group_used(const struct nvmf_subsys *ss, uint32_t grpid)
{
	unsigned i;

	for (i = 0; i < ss->nns; i++)
		if (ss->ns[i].anagrpid == grpid)
			return true;
	return false;
}

size_t nvmf_ana_log(const struct nvmf_ctrl *ctrl, bool rgo, uint8_t *page)
{
	const struct nvmf_subsys *ss = ctrl->ss;
	struct bs_nvme_ana_log_hdr *h = (void *)page;
	size_t off = sizeof(*h);
	unsigned ngrps = 0, i;
	uint32_t grp;

	if (page)
		memset(page, 0, off);
	/* ascending ANAGRPID, each group with its NSIDs ascending */
	for (grp = 1; grp <= NVMF_ANA_MAX_GROUPS; grp++) {
		struct bs_nvme_ana_group_desc *g;
		uint32_t nn = 0;

		if (!nvmf_ana_group_used(ss, grp))
			continue;
		ngrps++;
		g = page ? (void *)(page + off) : NULL;
		off += sizeof(*g);
		for (i = 0; !rgo && i < ss->nns; i++) {
			if (ss->ns[i].anagrpid != grp)
				continue;
			if (page)
				bs_nvme_put32(page + off, ss->ns[i].nsid);
			off += 4;
			nn++;
		}
		if (!g)
			continue;
		memset(g, 0, sizeof(*g));
		g->grpid = bs_nvme_cpu_to_le32(grp);
		g->nnsids = bs_nvme_cpu_to_le32(nn);
		g->chgcnt = bs_nvme_cpu_to_le64(ss->ana_grp_chgcnt[grp]);
		g->state = nvmf_ana_state(ctrl, grp);
	}
	if (page) {
		h->chgcnt = bs_nvme_cpu_to_le64(ss->ana_chgcnt);
		h->ngrps = bs_nvme_cpu_to_le16((uint16_t)ngrps);
	}
	return off;
}

uint16_t nvmf_ana_io_status(const struct nvmf_ctrl *ctrl,
			    const struct nvmf_ns *ns)
{
	switch (nvmf_ana_state(ctrl, ns->anagrpid)) {
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

void nvmf_ana_port_init(struct nvmf_port *port, uint8_t state)
{
	memset(port->ana_state, state, sizeof(port->ana_state));
}

unsigned nvmf_ana_set(struct nvmf_port *port, uint32_t grpid, uint8_t state)
{
	struct nvmf_subsys *ss = port->ss;
	struct nvmf_ctrl *ctrl;
	unsigned changed = 0;
	uint32_t g;

	for (g = 1; g <= NVMF_ANA_MAX_GROUPS; g++) {
		if ((grpid && g != grpid) || port->ana_state[g] == state)
			continue;
		__atomic_store_n(&port->ana_state[g], state,
				 __ATOMIC_RELAXED);
		/* a group no namespace is in is not in the log: no count */
		if (!nvmf_ana_group_used(ss, g))
			continue;
		/* starts at 0, wraps to 0 after all ones, as the log
		 * page's change counts do */
		ss->ana_grp_chgcnt[g]++;
		changed++;
	}
	if (!changed)
		return 0;
	ss->ana_chgcnt++;
	for (ctrl = ss->ctrls; ctrl; ctrl = ctrl->next) {
		if (ctrl->discovery || ctrl->port != port)
			continue;
		ctrl->aen_ana_pending = true;
		if (ctrl->admin)
			nvmf_queue_send_aen(ctrl->admin);
	}
	return changed;
}
