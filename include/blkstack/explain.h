/* SPDX-License-Identifier: MIT */
/*
 * Explain capabilities: for a device and everything below it, whether it
 * has a capability (unmapping write-zeroes, discard) and which rule
 * decided it: the driver's reason for leaves, the user's knob, a run-time
 * EOPNOTSUPP, or for stacked devices the components that took it away.
 */
#ifndef BLKSTACK_EXPLAIN_H
#define BLKSTACK_EXPLAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct bs_ctx;
struct bs_dev;
struct bs_limits;

enum bs_cap {
	BS_CAP_WRITE_ZEROES_UNMAP,	/* "write-zeroes": write_zeroes_unmap */
	BS_CAP_DISCARD,			/* "discard": max_discard_sectors > 0 */
};

/* "write-zeroes" (also "write_zeroes_unmap", "wz") or "discard"; -EINVAL. */
int bs_cap_parse(const char *s, enum bs_cap *out);
const char *bs_cap_name(enum bs_cap cap);
/* The word of explain's lines: "write_zeroes_unmap" (the attribute) or
 * "discard". */
const char *bs_cap_attr(enum bs_cap cap);

bool bs_dev_has_cap(const struct bs_dev *dev, enum bs_cap cap);

/*
 * The rule a stacked device's limits @lim got @cap by, from its
 * components (only those with @use[i], all when @use is NULL):
 * "striped: cleared because disk1, disk2 lack it",
 * "no write-zeroes (write_zeroes_max_bytes = 0) because disk3 has none",
 * "striped: every component has it".
 */
void bs_explain_stacked(const struct bs_dev *dev, const struct bs_limits *lim,
			const bool *use, enum bs_cap cap, char *buf,
			size_t len);

/*
 * The rule that decided @cap on @dev now, one line without the device
 * name: the knob, a run-time failure, the stacking rule, or the driver's
 * reason (dev->wz_reason).
 */
void bs_explain_rule(const struct bs_dev *dev, enum bs_cap cap, char *buf,
		     size_t len);

/*
 * Print the tree under @dev, one node a line ("├─ disk1 (mem, 1 GiB):
 * write_zeroes_unmap no: knob write_zeroes_unmap=0 set by user").
 * Returns 0.
 */
int bs_explain_print(struct bs_dev *dev, enum bs_cap cap, FILE *out);

/*
 * Print every device of @ctx as trees (devices nobody holds at the roots)
 * with columns NAME TYPE SIZE WZ-UNMAP WZ-MAX DISCARD.
 */
int bs_ls_print(struct bs_ctx *ctx, FILE *out);

#endif
