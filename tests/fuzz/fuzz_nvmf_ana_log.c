/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the nvmf host driver's ANA log parsing
 * (lib/drivers/nvmf_ana.c), what a target sends back to Get Log Page
 * 0Ch. The input after 8 bytes is the log, in a buffer of exactly its
 * size (so AddressSanitizer sees any read past it):
 *
 *   bytes 0-3  ANAGRPID to look for (0: by NSID)
 *   bytes 4-7  the NSID
 *   rest       the log page as read
 *
 * Both readers run on every prefix length a part boundary can give
 * (the whole and every 4 KiB), as the driver runs them while the log
 * comes in parts: nvmf_ana_log_need() (how much more to read) and
 * nvmf_ana_find() (our group's state). Rules checked: need never says
 * "done" with less than the header; a state found is one of the 4 bits.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/nvme.h>
#include "drivers/nvmf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint32_t grpid, nsid;
	uint8_t *log, st;
	uint64_t cnt;
	size_t len, have;

	if (size < 8)
		return 0;
	grpid = bs_nvme_get32(data);
	nsid = bs_nvme_get32(data + 4);
	len = size - 8;
	log = malloc(len ? len : 1);
	if (!log)
		return 0;
	memcpy(log, data + 8, len);
	for (have = len;; have = have > 4096 ? have - 4096 : 0) {
		size_t need = nvmf_ana_log_need(log, have);

		if (need <= have && have < 16)
			abort();
		st = 0xff;
		if (!nvmf_ana_find(log, have, grpid, nsid, &st, &cnt) &&
		    st > 0x0f)
			abort();
		if (!have)
			break;
	}
	free(log);
	return 0;
}
