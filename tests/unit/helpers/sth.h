/* SPDX-License-Identifier: MIT */
/*
 * A SCSI target core test bench: a context, one target, two nexuses and
 * LUs over devices; commands run through bs_scsi_exec() and the loop.
 */
#ifndef BLKSTACK_TEST_STH_H
#define BLKSTACK_TEST_STH_H

#include <stdbool.h>
#include <stdint.h>

#include <blkstack/bdev.h>
#include <blkstack/scsi.h>

struct sth {
	struct bs_ctx *ctx;
	struct bs_scsi_tgt *tgt;
	struct bs_scsi_nexus *n[2];
	char dir[64];
};

/* The answer of one command. */
struct sth_res {
	uint8_t status;
	uint8_t sense[BS_SCSI_SENSE_MAX];
	uint8_t sense_len;
	uint8_t din[1 << 20];
	uint32_t din_len;
};

/* cmocka fixtures: *state is a struct sth (target "iqn.2026-01.test:t"). */
int sth_setup(void **state);
int sth_teardown(void **state);

/* Add LU @lun over @dev (named @name). */
struct bs_scsi_lu *sth_lu(struct sth *s, uint64_t lun, struct bs_dev *dev,
			  bool readonly);

/*
 * Run one command on nexus @n: CDB @cdb (@cdb_len), Data-Out @dout, and
 * Data-In of at most @din_max; results in @r. Checks that done() is not
 * called inside bs_scsi_exec(). Returns r->status.
 */
uint8_t sth_cmd(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun,
		const uint8_t *cdb, unsigned cdb_len, const void *dout,
		uint32_t dout_len, uint32_t din_max, struct sth_res *r);
/* Clear pending unit attentions of (@n, @lun) with TEST UNIT READY. */
void sth_clear_ua(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun);

/* Sense key / ASC / ASCQ of fixed or descriptor sense. */
uint8_t sth_key(const struct sth_res *r);
uint16_t sth_asc(const struct sth_res *r);	/* asc << 8 | ascq */

/* Assert CHECK CONDITION with @key and @asc (asc << 8 | ascq). */
#define sth_assert_check(r, key, asc)                                  \
	do {                                                           \
		assert_int_equal((r)->status, BS_SCSI_CHECK_CONDITION); \
		assert_int_equal(sth_key(r), (key));                   \
		assert_int_equal(sth_asc(r), (asc));                   \
	} while (0)

/* CDB builders */
void sth_cdb_rw(uint8_t *cdb, unsigned size, bool write, uint64_t lba,
		uint32_t n);

#endif
