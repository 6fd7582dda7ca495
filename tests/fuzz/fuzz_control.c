/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the control-socket request parser of blkstackd
 * (bs_ctl_parse_request). Every prefix of the input is parsed, as the
 * daemon does while bytes arrive; a complete request must give argv
 * strings that lie in the request and re-encode to the same bytes.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/control.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len, step = size > 4096 ? size / 64 : 1;

	for (len = 0; len <= size; len += step) {
		char **argv = NULL;
		int argc = 0, err;

		err = bs_ctl_parse_request(data, len, &argc, &argv);
		if (err == -EAGAIN)
			continue;
		if (err)
			break;	/* the daemon answers and closes here */
		{
			uint8_t *enc = NULL;
			size_t elen = 0;

			if (argc < 1 || argv[argc] != NULL)
				abort();
			if (bs_ctl_encode_request(argc, argv, &enc, &elen) ||
			    elen > len || memcmp(enc, data, elen))
				abort();
			free(enc);
		}
		free(argv);
		break;
	}
	return 0;
}
