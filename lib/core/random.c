/* SPDX-License-Identifier: MIT */
/*
 * bs_random_bytes(): getrandom(2) may return fewer bytes than asked
 * (more than 256 bytes at once, or a signal), and -1/EINTR for a signal
 * before any byte; both are carried on from, every other error is the
 * caller's.
 */
#include <errno.h>
#include <stdint.h>
#include <sys/random.h>

#include "core/random.h"

int bs_random_bytes(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)		/* never for len > 0; do not spin */
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
