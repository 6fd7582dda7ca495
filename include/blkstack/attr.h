/* SPDX-License-Identifier: MIT */
/*
 * Attributes: the sysfs analogue. Each is a name, a mode and show/store.
 * Values are text as sysfs shows them ("1\n"); store accepts what sysfs
 * accepts (surrounding blanks, one trailing newline).
 */
#ifndef BLKSTACK_ATTR_H
#define BLKSTACK_ATTR_H

#include <stddef.h>

struct bs_dev;

#define BS_ATTR_RO 0444
#define BS_ATTR_RW 0644

struct bs_attr {
	const char *name;	/* "queue/write_zeroes_unmap" */
	unsigned mode;		/* BS_ATTR_RO or BS_ATTR_RW */
	/* Write the value with a trailing newline; returns length or -errno. */
	int (*show)(struct bs_dev *dev, char *buf, size_t len);
	/* Parse and apply; 0 or -errno (-EINVAL for bad values). */
	int (*store)(struct bs_dev *dev, const char *buf);
	const char *help;
};

/* Iterate the attributes of @dev (core ones, then the type's): i from 0. */
const struct bs_attr *bs_attr_at(const struct bs_dev *dev, unsigned i);
const struct bs_attr *bs_attr_find(const struct bs_dev *dev, const char *name);

/* -ENOENT for an unknown name. */
int bs_attr_show(struct bs_dev *dev, const char *name, char *buf, size_t len);
/* -ENOENT unknown, -EACCES read-only, -EINVAL bad value; restacks above. */
int bs_attr_store(struct bs_dev *dev, const char *name, const char *value);

/*
 * Parse an unsigned decimal the way sysfs does for queue attributes:
 * optional blanks, optional '+', digits, optional blanks/newline. -EINVAL
 * for anything else or overflow.
 */
int bs_attr_parse_u64(const char *buf, unsigned long long *out);

#endif
