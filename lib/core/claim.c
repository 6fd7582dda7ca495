/* SPDX-License-Identifier: MIT */
/*
 * Claims: who uses a device, and in which mode (shared read, shared write,
 * exclusive). The rule is the table in bdev.h; a conflict names the first
 * holder in its way. Everything here runs on the loop thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <blkstack/bdev.h>

#include "core/internal.h"

struct bs_claim {
	struct bs_dev *dev;
	enum bs_claim_mode mode;
	char holder[320];		/* "export nbd/NAME": names up to 255 */
	struct bs_claim *next;		/* the device's list, oldest first */
};

bool bs_claim_compatible(enum bs_claim_mode held, enum bs_claim_mode want)
{
	/* readers and writers share; exclusive shares with nobody */
	return held != BS_CLAIM_EXCL && want != BS_CLAIM_EXCL;
}

const char *bs_claim_mode_name(enum bs_claim_mode mode)
{
	switch (mode) {
	case BS_CLAIM_READ:
		return "read";
	case BS_CLAIM_WRITE:
		return "write";
	case BS_CLAIM_EXCL:
		return "exclusive";
	}
	return "?";
}

int bs_dev_claim_check(const struct bs_dev *dev, enum bs_claim_mode mode)
{
	const struct bs_claim *c;

	if (mode != BS_CLAIM_READ && mode != BS_CLAIM_WRITE &&
	    mode != BS_CLAIM_EXCL)
		return bs_error(-EINVAL, "%s: claim: unknown mode %d", dev->name,
				(int)mode);
	for (c = dev->claims; c; c = c->next)
		if (!bs_claim_compatible(c->mode, mode))
			return bs_error(-EBUSY, "%s: in use by %s", dev->name,
					c->holder);
	if (mode == BS_CLAIM_WRITE && dev->readonly)
		return bs_error(-EROFS, "%s: read-only device: no write claim",
				dev->name);
	return 0;
}

int bs_dev_claim(struct bs_dev *dev, enum bs_claim_mode mode,
		 const char *holder, struct bs_claim **out)
{
	struct bs_claim *c, **pp;
	int err;

	*out = NULL;
	err = bs_dev_claim_check(dev, mode);
	if (err)
		return err;
	c = calloc(1, sizeof(*c));
	if (!c)
		return bs_error(-ENOMEM, "%s: claim: out of memory", dev->name);
	c->dev = dev;
	c->mode = mode;
	snprintf(c->holder, sizeof(c->holder), "%s",
		 holder && *holder ? holder : "an unnamed holder");
	for (pp = &dev->claims; *pp; pp = &(*pp)->next)
		;
	*pp = c;
	*out = c;
	return 0;
}

void bs_claim_release(struct bs_claim *claim)
{
	struct bs_claim **pp;

	if (!claim)
		return;
	for (pp = &claim->dev->claims; *pp; pp = &(*pp)->next) {
		if (*pp == claim) {
			*pp = claim->next;
			break;
		}
	}
	free(claim);
}

const struct bs_claim *bs_dev_claim_next(const struct bs_dev *dev,
					 const struct bs_claim *prev)
{
	return prev ? prev->next : dev->claims;
}

const char *bs_claim_holder(const struct bs_claim *claim)
{
	return claim->holder;
}

enum bs_claim_mode bs_claim_mode_of(const struct bs_claim *claim)
{
	return claim->mode;
}

void bs_dev_claims_drop(struct bs_dev *dev)
{
	while (dev->claims)
		bs_claim_release(dev->claims);
}
