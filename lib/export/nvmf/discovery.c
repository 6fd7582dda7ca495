/* SPDX-License-Identifier: MIT */
/*
 * The discovery subsystem (nqn.2014-08.org.nvmexpress.discovery) each
 * listener serves besides its NVM subsystem: the discovery log page, a
 * header with the generation counter and record count, then one entry per
 * subsystem reachable here (this listener's NVM subsystem), read with any
 * offset and length the host asks for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/nvmf/nvmf.h"

static void pad(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);

	memset(dst, ' ', n);
	memcpy(dst, src, l < n ? l : n);
}

void nvmf_discovery_log(struct nvmf_subsys *ss, uint8_t *buf, uint64_t off,
			uint32_t len)
{
	size_t size = sizeof(struct bs_nvme_disc_log_hdr) +
		      sizeof(struct bs_nvme_disc_log_entry);
	struct bs_nvme_disc_log_hdr *h;
	struct bs_nvme_disc_log_entry *e;
	uint8_t *page = calloc(1, size);
	char host[128], port[32];
	const char *colon;

	memset(buf, 0, len);
	if (!page)
		return;
	h = (void *)page;
	e = (void *)(page + sizeof(*h));
	h->genctr = bs_nvme_cpu_to_le64(ss->disc_genctr);
	h->numrec = bs_nvme_cpu_to_le64(1);
	e->trtype = BS_NVME_TRTYPE_TCP;
	snprintf(host, sizeof(host), "%s", ss->listen);
	colon = strrchr(host, ':');
	snprintf(port, sizeof(port), "%s", colon ? colon + 1 : "4420");
	if (colon)
		host[colon - host] = 0;
	if (host[0] == '[') {
		size_t l = strlen(host);

		memmove(host, host + 1, l);
		if (l >= 2 && host[l - 2] == ']')
			host[l - 2] = 0;
		e->adrfam = BS_NVME_ADRFAM_IPV6;
	} else {
		e->adrfam = BS_NVME_ADRFAM_IPV4;
	}
	e->subtype = BS_NVME_NQN_TYPE_NVME;
	e->treq = BS_NVME_TREQ_SECURE_NOT_REQUIRED;
	e->portid = bs_nvme_cpu_to_le16(1);
	e->cntlid = bs_nvme_cpu_to_le16(BS_NVME_CNTLID_DYNAMIC);
	e->asqsz = bs_nvme_cpu_to_le16((uint16_t)ss->qdepth);
	pad(e->trsvcid, sizeof(e->trsvcid), port);
	memcpy(e->subnqn, ss->nqn, strlen(ss->nqn));
	pad(e->traddr, sizeof(e->traddr), host);
	e->tsas[0] = BS_NVME_TCP_SECTYPE_NONE;
	if (off < size)
		memcpy(buf, page + off, size - off < len ? size - off : len);
	free(page);
}
