/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "slowdev.h"
#include "th.h"

static struct bs_dev *slow_dev;
static const struct bs_dev_type *slow_orig;
static struct bs_dev_type slow_type;
static struct bs_req *slow_held[8];
static unsigned slow_n;

static void slow_submit(struct bs_dev *dev, struct bs_req *req)
{
	(void)dev;
	assert_true(slow_n < 8);
	slow_held[slow_n++] = req;
}

void th_slow_begin(struct bs_dev *dev)
{
	slow_dev = dev;
	slow_orig = dev->type;
	slow_type = *slow_orig;
	slow_type.submit = slow_submit;
	dev->type = &slow_type;
	slow_n = 0;
}

void th_slow_end(void)
{
	assert_int_equal(slow_n, 0);
	slow_dev->type = slow_orig;
	slow_dev = NULL;
}

unsigned th_slow_count(void)
{
	return slow_n;
}

void th_slow_release(void)
{
	struct bs_req *req;

	assert_true(slow_n > 0);
	req = slow_held[0];
	memmove(slow_held, slow_held + 1, --slow_n * sizeof(*slow_held));
	slow_orig->submit(slow_dev, req);
}

void th_slow_wait(struct bs_loop *loop, unsigned n)
{
	int i;

	for (i = 0; i < 400 && slow_n < n; i++)
		bs_loop_run_once(loop, 5);
	assert_int_equal(slow_n, n);
}
