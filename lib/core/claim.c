/* SPDX-License-Identifier: MIT */
/*
 * Claims: who uses a device, and in which mode (shared read, shared write,
 * exclusive). The rule is the table in bdev.h; a conflict names the first
 * holder in its way. The claim lists belong to the loop's thread: called
 * from another thread (a command on blkstackd's control thread), claim,
 * check and release run there, the caller waiting (bs_sync_run()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <blkstack/bdev.h>
#include <blkstack/loop.h>

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

static int claim_check(const struct bs_dev *dev, enum bs_claim_mode mode)
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

static int claim(struct bs_dev *dev, enum bs_claim_mode mode,
		 const char *holder, struct bs_claim **out)
{
	struct bs_claim *c, **pp;
	int err;

	*out = NULL;
	err = claim_check(dev, mode);
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

static void release(struct bs_claim *claim)
{
	struct bs_claim **pp;

	for (pp = &claim->dev->claims; *pp; pp = &(*pp)->next) {
		if (*pp == claim) {
			*pp = claim->next;
			break;
		}
	}
	free(claim);
}

/* ---- from any thread ---------------------------------------------------- */

enum claim_op { OP_CHECK, OP_CLAIM, OP_RELEASE };

struct claim_call {
	struct bs_sync sync;
	enum claim_op op;
	struct bs_dev *dev;
	enum bs_claim_mode mode;
	const char *holder;
	struct bs_claim **out;
	struct bs_claim *claim;
	int result;
};

/* On the loop's thread: do it now, and say done. */
static int call_start(struct bs_sync *s, void *arg)
{
	struct claim_call *c = arg;

	switch (c->op) {
	case OP_CHECK:
		c->result = claim_check(c->dev, c->mode);
		break;
	case OP_CLAIM:
		c->result = claim(c->dev, c->mode, c->holder, c->out);
		break;
	case OP_RELEASE:
		release(c->claim);
		break;
	}
	s->failed = c->result < 0;
	bs_sync_done(s);
	return 0;
}

static bool on_loop(const struct bs_dev *dev)
{
	return bs_loop_is_current(bs_ctx_loop(dev->ctx));
}

static int call(struct claim_call *c)
{
	int err = bs_sync_run(c->dev->ctx, &c->sync, call_start, c);

	return err ? err : c->result;
}

int bs_dev_claim_check(const struct bs_dev *dev, enum bs_claim_mode mode)
{
	struct claim_call c = { .op = OP_CHECK, .dev = (struct bs_dev *)dev,
				.mode = mode };

	return on_loop(dev) ? claim_check(dev, mode) : call(&c);
}

int bs_dev_claim(struct bs_dev *dev, enum bs_claim_mode mode,
		 const char *holder, struct bs_claim **out)
{
	struct claim_call c = { .op = OP_CLAIM, .dev = dev, .mode = mode,
				.holder = holder, .out = out };

	*out = NULL;
	return on_loop(dev) ? claim(dev, mode, holder, out) : call(&c);
}

void bs_claim_release(struct bs_claim *claim)
{
	struct claim_call c = { .op = OP_RELEASE };

	if (!claim)
		return;
	if (on_loop(claim->dev)) {
		release(claim);
		return;
	}
	c.dev = claim->dev;
	c.claim = claim;
	call(&c);
}

/* Reading the list: on the loop's thread only (info, explain). */
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
		release(dev->claims);
}
