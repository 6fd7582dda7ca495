/* SPDX-License-Identifier: MIT */
/*
 * The discovery subsystem (nqn.2014-08.org.nvmexpress.discovery) each
 * listener serves besides its NVM subsystem: the discovery log page, a
 * header with the generation counter and record count, then one entry per
 * port of every NVM subsystem of the process (every listener of every
 * `nvmf` export, each at its address and port ID), read with any offset
 * and length the host asks for.
 *
 * The registry of subsystems is process-wide and under a mutex: exports
 * are opened and closed on the main loop, and a discovery controller's
 * Get Log Page may run on any thread. The generation counter changes
 * whenever a subsystem joins or leaves, so a host that reads the log in
 * pieces can tell that the pieces belong to one version.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export/nvmf/nvmf.h"

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nvmf_subsys *reg_head;
static uint64_t reg_genctr = 1;
static uint16_t reg_next_portid = 1;

void nvmf_disc_add(struct nvmf_subsys *ss)
{
	struct nvmf_subsys **pp;
	unsigned i;

	pthread_mutex_lock(&reg_lock);
	ss->disc_next = NULL;
	for (i = 0; i < ss->nports; i++) {
		ss->ports[i].portid = reg_next_portid++;
		if (!reg_next_portid)
			reg_next_portid = 1;
	}
	for (pp = &reg_head; *pp; pp = &(*pp)->disc_next)
		;
	*pp = ss;
	reg_genctr++;
	pthread_mutex_unlock(&reg_lock);
}

void nvmf_disc_remove(struct nvmf_subsys *ss)
{
	struct nvmf_subsys **pp;

	pthread_mutex_lock(&reg_lock);
	for (pp = &reg_head; *pp; pp = &(*pp)->disc_next)
		if (*pp == ss) {
			*pp = ss->disc_next;
			reg_genctr++;
			break;
		}
	pthread_mutex_unlock(&reg_lock);
}

static void pad(char *dst, size_t n, const char *src)
{
	size_t l = strlen(src);

	memset(dst, ' ', n);
	memcpy(dst, src, l < n ? l : n);
}

static void entry(struct nvmf_subsys *ss, struct nvmf_port *pt,
		  struct bs_nvme_disc_log_entry *e)
{
	char host[128], port[32];
	const char *colon;

	e->trtype = BS_NVME_TRTYPE_TCP;
	/* the bound address (the port the kernel chose for port 0) */
	snprintf(host, sizeof(host), "%s",
		 pt->nl ? bs_net_listener_addr(pt->nl) : pt->listen);
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
	e->portid = bs_nvme_cpu_to_le16(pt->portid);
	e->cntlid = bs_nvme_cpu_to_le16(BS_NVME_CNTLID_DYNAMIC);
	e->asqsz = bs_nvme_cpu_to_le16((uint16_t)ss->qdepth);
	pad(e->trsvcid, sizeof(e->trsvcid), port);
	memcpy(e->subnqn, ss->nqn, strnlen(ss->nqn, sizeof(e->subnqn)));
	pad(e->traddr, sizeof(e->traddr), host);
	e->tsas[0] = BS_NVME_TCP_SECTYPE_NONE;
}

void nvmf_discovery_log(struct nvmf_subsys *ss, uint8_t *buf, uint64_t off,
			uint32_t len)
{
	struct bs_nvme_disc_log_hdr *h;
	struct nvmf_subsys *s;
	uint8_t *page = NULL;
	const size_t esz = sizeof(struct bs_nvme_disc_log_entry);
	uint64_t n = 0, i = 0;
	unsigned p;
	size_t size;

	(void)ss;
	memset(buf, 0, len);
	pthread_mutex_lock(&reg_lock);
	for (s = reg_head; s; s = s->disc_next)
		n += s->nports;
	size = sizeof(*h) + n * sizeof(struct bs_nvme_disc_log_entry);
	if (off < size)
		page = calloc(1, size);
	if (page) {
		h = (void *)page;
		h->genctr = bs_nvme_cpu_to_le64(reg_genctr);
		h->numrec = bs_nvme_cpu_to_le64(n);
		for (s = reg_head; s; s = s->disc_next)
			for (p = 0; p < s->nports; p++, i++)
				entry(s, &s->ports[p],
				      (void *)(page + sizeof(*h) + i * esz));
	}
	pthread_mutex_unlock(&reg_lock);
	if (page)
		memcpy(buf, page + off, size - off < len ? size - off : len);
	free(page);
}
