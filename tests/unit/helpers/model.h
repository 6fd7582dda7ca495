/* SPDX-License-Identifier: MIT */
/*
 * A byte model of a device for data tests: random writes, zeroouts,
 * discards and reads through a device, each checked against the model.
 */
#ifndef BLKSTACK_TEST_MODEL_H
#define BLKSTACK_TEST_MODEL_H

#include <stdint.h>

#include <blkstack/bdev.h>

struct th_model {
	struct bs_dev *dev;
	uint8_t *bytes;		/* what every byte of dev must read as */
	uint8_t *buf;		/* scratch, dev->size */
	uint64_t size;
	uint64_t rng;
	uint64_t boundary;	/* offsets cluster around multiples of it */
	uint64_t max_len;
	unsigned ops[4];	/* done: write, zeroout, discard, read */
};

#define TH_MODEL_WRITE (1u << 0)
#define TH_MODEL_ZERO (1u << 1)
#define TH_MODEL_DISCARD (1u << 2)
#define TH_MODEL_READ (1u << 3)
#define TH_MODEL_ALL 0xfu

/* The model starts as the device's current contents. */
void th_model_init(struct th_model *m, struct bs_dev *dev, uint64_t seed,
		   uint64_t boundary, uint64_t max_len);
void th_model_free(struct th_model *m);
/* @n random operations of @ops, each checked (reads compare every byte). */
void th_model_run(struct th_model *m, unsigned n, unsigned ops);
/* Read all of @dev at @dev_off for @len and compare with model @off. */
void th_model_check(struct th_model *m, struct bs_dev *dev, uint64_t dev_off,
		    uint64_t off, uint64_t len);
/* The whole device against the model. */
void th_model_check_all(struct th_model *m);

#endif
