/* SPDX-License-Identifier: MIT */
/*
 * Asymmetric Namespace Access in the nvmf host driver: which paths of a
 * multipath device may carry I/O, as Linux's nvme multipath decides it.
 *
 * A controller that sets CMIC bit 3 reports ANA: the driver reads the ANA
 * log page (LID 0Ch) at connect and again on every Asymmetric Namespace
 * Access Change notice, and takes the state of the group its namespace
 * is in (ANAGRPID from Identify Namespace; the group whose NSID list
 * names the namespace when ANAGRPID is 0). A path without ANA counts as
 * optimized.
 *
 * Path choice: among live paths, the optimized ones (and those without
 * ANA); only when none is up the non-optimized ones; never a path that
 * is inaccessible, in persistent loss or in change. A command that comes
 * back with an ANA path status (SCT 3h SC 01h..03h) sets its path to that
 * state, starts a read of the path's log, and goes to another path (or
 * waits for one, up to the request's deadline) without counting as a
 * retry: the user's I/O does not fail for it.
 *
 * The whole log is read: its size bound from Identify Controller
 * (16-byte header, NANAGRPID group descriptors of 32 bytes, 4 bytes for
 * each of NN namespaces; at most NVMF_ANA_LOG_MAX), in Get Log Page
 * commands of at most MDTS bytes at growing offsets, stopping once the
 * groups the header counts are all in (nvmf_ana_log_need()).
 *
 * ANATT: a path in change (from the log or an ANA Transition status)
 * reads the log again every second and on every change notice; if it is
 * still in change ANATT seconds after it entered it, the path is
 * treated as failed (lost: its commands go to another path, and it
 * connects again later), as Linux resets such a controller.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <blkstack/nvme.h>
#include "drivers/nvmf.h"

const char *nvmf_ana_state_name(uint8_t st)
{
	switch (st) {
	case BS_NVME_ANA_OPTIMIZED: return "optimized";
	case BS_NVME_ANA_NONOPTIMIZED: return "non-optimized";
	case BS_NVME_ANA_INACCESSIBLE: return "inaccessible";
	case BS_NVME_ANA_PERSISTENT_LOSS: return "persistent-loss";
	case BS_NVME_ANA_CHANGE: return "change";
	case 0: return "none";
	default: return "reserved";
	}
}

int nvmf_ana_rank(uint8_t st)
{
	switch (st) {
	case 0:				/* not reported */
	case BS_NVME_ANA_OPTIMIZED:
		return 0;
	case BS_NVME_ANA_NONOPTIMIZED:
		return 1;
	default:
		return -1;
	}
}

uint8_t nvmf_ana_state_of_status(uint16_t sf)
{
	switch (sf & 0x7ff) {
	case BS_NVME_SC_ANA_PERSISTENT_LOSS:
		return BS_NVME_ANA_PERSISTENT_LOSS;
	case BS_NVME_SC_ANA_INACCESSIBLE:
		return BS_NVME_ANA_INACCESSIBLE;
	case BS_NVME_SC_ANA_TRANSITION:
		return BS_NVME_ANA_CHANGE;
	default:
		return 0;
	}
}

int nvmf_ana_best_rank(const uint8_t *states, const bool *live, unsigned n)
{
	int best = -1, r;
	unsigned i;

	for (i = 0; i < n; i++) {
		if (!live[i])
			continue;
		r = nvmf_ana_rank(states[i]);
		if (r >= 0 && (best < 0 || r < best))
			best = r;
	}
	return best;
}

int nvmf_ana_find(const uint8_t *log, size_t len, uint32_t grpid,
		  uint32_t nsid, uint8_t *state, uint64_t *chgcnt)
{
	size_t off = sizeof(struct bs_nvme_ana_log_hdr);
	unsigned ngrps, g;
	uint32_t i;

	if (len < off)
		return -EPROTO;
	ngrps = bs_nvme_get16(log + 8);
	for (g = 0; g < ngrps; g++) {
		const struct bs_nvme_ana_group_desc *d;
		uint32_t id, nn;
		bool ours;

		if (off + sizeof(*d) > len)
			return -ENOENT;		/* beyond what was read */
		d = (const void *)(log + off);
		id = bs_nvme_le32(d->grpid);
		nn = bs_nvme_le32(d->nnsids);
		ours = grpid && id == grpid;
		for (i = 0; !ours && !grpid && i < nn; i++) {
			size_t at = off + sizeof(*d) + 4 * (size_t)i;

			if (at + 4 > len)
				break;
			ours = bs_nvme_get32(log + at) == nsid;
		}
		if (ours) {
			*state = d->state & 0x0f;
			*chgcnt = bs_nvme_le64(d->chgcnt);
			return 0;
		}
		off += sizeof(*d) + 4 * (size_t)nn;
	}
	return -ENOENT;
}

void nvmf_ana_log_sqe(uint8_t *sqe, uint32_t len, uint64_t off)
{
	uint32_t numd = len / 4 - 1;

	memset(sqe, 0, 64);
	sqe[0] = BS_NVME_ADMIN_GET_LOG_PAGE;
	put32(sqe + 4, 0xffffffff);
	/* RAE clear: reading re-arms the change notice; NUMDL in CDW10
	 * 31:16, NUMDU in CDW11 15:0, the offset in CDW12/13 */
	put32(sqe + 40, BS_NVME_LOG_ANA | (numd & 0xffff) << 16);
	put32(sqe + 44, numd >> 16);
	put64(sqe + 48, off);
}

size_t nvmf_ana_log_bound(uint32_t nanagrpid, uint32_t nn)
{
	uint64_t size = sizeof(struct bs_nvme_ana_log_hdr) +
			(uint64_t)nanagrpid *
				sizeof(struct bs_nvme_ana_group_desc) +
			4 * (uint64_t)nn;

	/* a controller without the fields: the header and one group */
	if (size < sizeof(struct bs_nvme_ana_log_hdr) +
			   sizeof(struct bs_nvme_ana_group_desc))
		size = sizeof(struct bs_nvme_ana_log_hdr) +
		       sizeof(struct bs_nvme_ana_group_desc);
	if (size > NVMF_ANA_LOG_MAX)
		size = NVMF_ANA_LOG_MAX;
	return (size + 3) & ~(size_t)3;
}

uint32_t nvmf_ana_log_chunk(uint8_t mdts, uint8_t mpsmin)
{
	uint64_t max = NVMF_ANA_LOG_MAX;

	if (mdts && mdts < 32)
		max = (4096ull << (mpsmin > 15 ? 15 : mpsmin)) << mdts;
	return (uint32_t)(max < NVMF_ANA_LOG_MAX ? max : NVMF_ANA_LOG_MAX);
}

size_t nvmf_ana_log_need(const uint8_t *log, size_t have)
{
	size_t off = sizeof(struct bs_nvme_ana_log_hdr);
	unsigned ngrps, g;

	if (have < off)
		return off;
	ngrps = bs_nvme_get16(log + 8);
	for (g = 0; g < ngrps; g++) {
		if (off + sizeof(struct bs_nvme_ana_group_desc) > have)
			return off + sizeof(struct bs_nvme_ana_group_desc);
		off += sizeof(struct bs_nvme_ana_group_desc) +
		       4 * (size_t)bs_nvme_get32(log + off + 4);
	}
	return off;
}

/* ---- a path's state ----------------------------------------------------- */

static void set_state(struct nvc *c, uint8_t st)
{
	struct nvmf *m = c->m;
	int was = nvmf_ana_rank(c->ana_state);

	if (c->ana_state == st)
		return;
	/* ANATT counts from the first sight of the change state */
	if (st == BS_NVME_ANA_CHANGE)
		c->ana_change_ns = bs_now_ns();
	else
		c->ana_change_ns = 0;
	c->ana_changes++;
	c->ana_state = st;
	nvmf_path_ana(m, c, was >= 0, nvmf_ana_rank(st) >= 0);
}

void nvc_ana_log_read(struct nvc *c, int status)
{
	uint8_t st = 0;
	uint64_t cnt = 0;

	c->ana_read_ns = bs_now_ns();
	if (status) {
		snprintf(c->last_error, sizeof(c->last_error), "ANA log: "
			 "status 0x%03x", status);
		return;
	}
	if (nvmf_ana_find(c->ana_log, c->ana_have, c->anagrpid, c->nsid, &st,
			  &cnt)) {
		/* our group is not in the log: as without ANA */
		st = 0;
	}
	c->ana_chgcnt = cnt;
	set_state(c, st);
}

void nvc_ana_status(struct nvc *c, uint8_t st)
{
	c->ana_errors++;
	set_state(c, st);
	nvc_ana_refresh(c);
}

bool nvc_ana_stale(const struct nvc *c, uint64_t now)
{
	return c->ana && nvmf_ana_rank(c->ana_state) < 0 &&
	       now - c->ana_read_ns > 1000000000ull;
}

bool nvmf_ana_expired(uint8_t state, uint64_t since_ns, uint8_t anatt,
		      uint64_t now)
{
	/* a controller that gives no ANATT: the target default, 10 s */
	uint64_t limit = (anatt ? anatt : 10) * 1000000000ull;

	return state == BS_NVME_ANA_CHANGE && since_ns &&
	       now - since_ns > limit;
}
