/* SPDX-License-Identifier: MIT */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/opts.h>

#include "fz_dev.h"

int fz_mem_dev(struct bs_ctx *ctx, const char *spec, struct bs_dev **out)
{
	char *copy = strdup(spec), *tok, *save = NULL;
	struct bs_opts *o = NULL;
	int err;

	if (!copy)
		return -1;
	err = bs_opts_new(&o);
	for (tok = strtok_r(copy, ";", &save); tok && !err;
	     tok = strtok_r(NULL, ";", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq) {
			err = -1;
			break;
		}
		*eq = '\0';
		err = bs_opts_set(o, tok, eq + 1, "fuzz");
	}
	if (!err)
		err = bs_dev_create(ctx, "d", "mem", o, out);
	bs_opts_free(o);
	free(copy);
	return err;
}

size_t fz_out_iov_check(const struct iovec *iov, int n)
{
	size_t total = 0;
	int i;

	if (n <= 0)
		abort();	/* bytes queued but nothing to send */
	for (i = 0; i < n; i++) {
		volatile const uint8_t *p = iov[i].iov_base;

		if (!iov[i].iov_len)
			abort();
		(void)p[0];
		(void)p[iov[i].iov_len - 1];
		total += iov[i].iov_len;
	}
	return total;
}
