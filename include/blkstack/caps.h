/* SPDX-License-Identifier: MIT */
/*
 * Capabilities: what a device offers to the layers above, as one snapshot
 * that front ends and commands read instead of raw limits, with the reason
 * for every "no" made in one place; and change events, so a front end
 * learns when a knob, a restack below, a lost mirror leg or a run-time
 * EOPNOTSUPP changed what it may advertise.
 */
#ifndef BLKSTACK_CAPS_H
#define BLKSTACK_CAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bs_dev;

enum bs_cap_how {
	BS_CAP_NO,		/* not offered */
	BS_CAP_EMULATED,	/* offered; the core does it with other ops */
	BS_CAP_NATIVE,		/* the device (or every component) does it */
};

#define BS_CAPS_WHY 256

struct bs_caps {
	uint64_t generation;	/* bumped on every change of the rest */
	int state;		/* enum bs_dev_state: live, opening, failed */
	uint64_t size;		/* bytes */
	bool readonly;
	uint32_t logical_block_size;
	uint32_t physical_block_size;
	uint32_t io_min;	/* bytes, 0 = not reported */
	uint32_t io_opt;	/* bytes, 0 = not reported */
	uint64_t max_transfer;	/* bytes of one read or write */

	/*
	 * Zeroing a range: NATIVE with a write-zeroes command (up to
	 * max_write_zeroes bytes each), EMULATED when the core writes zero
	 * buffers, NO on a read-only device.
	 */
	enum bs_cap_how zeroing;
	uint64_t max_write_zeroes;
	/* write-zeroes may deallocate and reads return zeroes, and the
	 * user's knob allows it: write_zeroes_unmap(dev) */
	bool write_zeroes_unmap;
	/* a zero request can be promised fast (metadata cost): NBD's
	 * FAST_ZERO, NVMe DLFEAT, SCSI LBPRZ+LBPWS all follow this */
	bool fast_zero;

	bool discard;
	uint64_t max_discard;		/* bytes */
	uint32_t discard_granularity;	/* bytes */
	/* discarded blocks read back as zeroes (only where a discard is
	 * done as unmapping write-zeroes, which guarantees it) */
	bool discard_zeroes;

	enum bs_cap_how fua;	/* NATIVE, or EMULATED by a flush after */
	bool write_cache;	/* volatile cache: FLUSH matters */
	bool rotational;

	/* one line each, "" when the answer is yes / native */
	char why_no_unmap[BS_CAPS_WHY];	/* why !write_zeroes_unmap */
	char why_emulated_zeroing[BS_CAPS_WHY];
	char why_no_discard[BS_CAPS_WHY];
};

/* Fill @out with @dev's capabilities now. */
void bs_dev_caps(const struct bs_dev *dev, struct bs_caps *out);

/* "no", "emulated", "native". */
const char *bs_cap_how_name(enum bs_cap_how how);

/*
 * Why @dev does not zero by unmapping, one line without the device name
 * ("write zeroes unmap disabled by the user (queue/write_zeroes_unmap=0)",
 * "the device has no write-zeroes command: file on tmpfs: ..."); "" when
 * it does. The one place every command, the fs layer and the front ends
 * take this reason from.
 */
void bs_caps_why_no_unmap(const struct bs_dev *dev, char *buf, size_t len);

/*
 * What changed from @old to @new, as one line for a log: "fast_zero
 * yes->no (write zeroes unmap disabled by the user ...), discard yes->no"
 * (the reason of a new "no" in brackets). Returns the number of changed
 * facts (0: @buf is ""). The generation is not compared.
 */
unsigned bs_caps_diff(const struct bs_caps *old, const struct bs_caps *new_,
		      char *buf, size_t len);

/* ---- change events ------------------------------------------------------ */

/*
 * Called on the device's loop, after a change of @dev's capabilities,
 * with the new snapshot. Several changes between two loop iterations are
 * delivered as one event with the latest snapshot; a change undone before
 * delivery is delivered as nothing.
 */
typedef void (*bs_caps_fn)(void *arg, struct bs_dev *dev,
			   const struct bs_caps *caps);

struct bs_caps_sub;

/* Subscribe to @dev's changes; 0 or -ENOMEM. */
int bs_caps_subscribe(struct bs_dev *dev, bs_caps_fn fn, void *arg,
		      struct bs_caps_sub **out);
/* Unsubscribe (safe from inside a callback); NULL is ignored. */
void bs_caps_unsubscribe(struct bs_caps_sub *sub);

/* The generation of @dev's capabilities now (bumped on each change). */
uint64_t bs_dev_caps_generation(const struct bs_dev *dev);

/*
 * Core: @dev's limits or state may have changed; compare with the last
 * published snapshot and, if different, bump the generation and queue
 * the event. Called by the stacking walk for every device it touched.
 */
void bs_caps_note_change(struct bs_dev *dev);
/* Core: the first snapshot of a new device; 0 or -ENOMEM. */
int bs_caps_dev_init(struct bs_dev *dev);
/* Core: free @dev's subscriptions and pending event (device closing). */
void bs_caps_dev_free(struct bs_dev *dev);

#endif
