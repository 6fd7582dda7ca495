/* SPDX-License-Identifier: MIT */
/*
 * Random bytes from the kernel (getrandom(2)) for everything that must
 * not be guessed: boot verifiers, session and state ids, hash keys,
 * CHAP challenges, inode generations, file system UUIDs (not a public
 * API).
 */
#ifndef BLKSTACK_CORE_RANDOM_H
#define BLKSTACK_CORE_RANDOM_H

#include <stddef.h>

/*
 * Fill @len bytes at @buf from getrandom(2) without flags: blocks until
 * the kernel's pool is ready, carries on after EINTR and after short
 * reads (large requests, signals). 0, or the negative errno of the
 * first other failure; @buf's contents are undefined then.
 */
int bs_random_bytes(void *buf, size_t len);

#endif
