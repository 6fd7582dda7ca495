/* SPDX-License-Identifier: MIT */
/*
 * A slow device for the unit tests: from th_slow_begin() on, a device
 * holds every request it is given (at most 8) until the test lets the
 * oldest go to the real device with th_slow_release(). One at a time per
 * test process.
 */
#ifndef BLKSTACK_TEST_SLOWDEV_H
#define BLKSTACK_TEST_SLOWDEV_H

#include <blkstack/bdev.h>
#include <blkstack/loop.h>

void th_slow_begin(struct bs_dev *dev);
/* No request may still be held: the device is itself again. */
void th_slow_end(void);
/* Requests held now. */
unsigned th_slow_count(void);
/* Let the oldest request held go to the real device. */
void th_slow_release(void);
/* Run @loop until @n requests are held (or 2 s): exactly @n. */
void th_slow_wait(struct bs_loop *loop, unsigned n);

#endif
