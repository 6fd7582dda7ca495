/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sth.h"

int sth_setup(void **state)
{
	struct sth *s = calloc(1, sizeof(*s));
	struct bs_scsi_tgt_cfg tc = {
		.name = "iqn.2026-01.test:t",
		.vendor = "BLKSTACK",
		.product = "test",
		.revision = "0.1",
	};
	struct bs_scsi_nexus_cfg nc[2] = {
		{ "iqn.2026-01.test:a,i,0x000000000001",
		  "iqn.2026-01.test:t,t,0x0001", 1, 1 },
		{ "iqn.2026-01.test:b,i,0x000000000002",
		  "iqn.2026-01.test:t,t,0x0001", 1, 1 },
	};

	assert_non_null(s);
	snprintf(s->dir, sizeof(s->dir), "/var/tmp/bs-scsi.XXXXXX");
	assert_non_null(mkdtemp(s->dir));
	assert_int_equal(bs_ctx_new(&s->ctx), 0);
	assert_int_equal(bs_scsi_tgt_new(&tc, &s->tgt), 0);
	assert_int_equal(bs_scsi_nexus_new(s->tgt, &nc[0], &s->n[0]), 0);
	assert_int_equal(bs_scsi_nexus_new(s->tgt, &nc[1], &s->n[1]), 0);
	*state = s;
	return 0;
}

int sth_teardown(void **state)
{
	struct sth *s = *state;
	char cmd[128];

	bs_scsi_tgt_free(s->tgt);
	bs_ctx_free(s->ctx);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", s->dir);
	if (system(cmd) != 0)
		return -1;
	free(s);
	return 0;
}

struct bs_scsi_lu *sth_lu(struct sth *s, uint64_t lun, struct bs_dev *dev,
			  bool readonly)
{
	struct bs_scsi_lu_cfg c = {
		.lun = lun,
		.dev = dev,
		.readonly = readonly,
		.name = dev->name,
	};
	struct bs_scsi_lu *lu = NULL;

	assert_int_equal(bs_scsi_lu_add(s->tgt, &c, &lu), 0);
	return lu;
}

static void done_cb(struct bs_scsi_cmd *cmd)
{
	bool *flag = cmd->priv;

	*flag = true;
}

uint8_t sth_cmd(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun,
		const uint8_t *cdb, unsigned cdb_len, const void *dout,
		uint32_t dout_len, uint32_t din_max, struct sth_res *r)
{
	struct bs_scsi_cmd *cmd = calloc(1, sizeof(*cmd));
	bool done = false;

	assert_non_null(cmd);
	cmd->nexus = n;
	cmd->lun = lun;
	memcpy(cmd->cdb, cdb, cdb_len);
	cmd->cdb_len = cdb_len < 16 ? 16 : cdb_len;
	cmd->dout = dout;
	cmd->dout_len = dout_len;
	cmd->din_max = din_max;
	cmd->done = done_cb;
	cmd->priv = &done;
	bs_scsi_exec(cmd);
	assert_false(done);	/* never completed inside bs_scsi_exec() */
	assert_int_equal(bs_ctx_wait(s->ctx, &done), 0);
	memset(r, 0, sizeof(*r));
	r->status = cmd->status;
	r->sense_len = cmd->sense_len;
	memcpy(r->sense, cmd->sense, cmd->sense_len);
	assert_true(cmd->din_len <= din_max);
	if (cmd->din_len) {
		assert_non_null(cmd->din);
		assert_true(cmd->din_len <= sizeof(r->din));
		memcpy(r->din, cmd->din, cmd->din_len);
	}
	r->din_len = cmd->din_len;
	bs_scsi_cmd_release(cmd);
	free(cmd);
	return r->status;
}

void sth_clear_ua(struct sth *s, struct bs_scsi_nexus *n, uint64_t lun)
{
	static const uint8_t tur[6];
	struct sth_res *r = malloc(sizeof(*r));
	int i;

	for (i = 0; i < 16; i++)
		if (sth_cmd(s, n, lun, tur, 6, NULL, 0, 0, r) == BS_SCSI_GOOD)
			break;
	assert_int_equal(r->status, BS_SCSI_GOOD);
	free(r);
}

uint8_t sth_key(const struct sth_res *r)
{
	if ((r->sense[0] & 0x7f) == 0x72 || (r->sense[0] & 0x7f) == 0x73)
		return r->sense[1] & 0x0f;
	return r->sense[2] & 0x0f;
}

uint16_t sth_asc(const struct sth_res *r)
{
	if ((r->sense[0] & 0x7f) == 0x72 || (r->sense[0] & 0x7f) == 0x73)
		return (uint16_t)(r->sense[2] << 8 | r->sense[3]);
	return (uint16_t)(r->sense[12] << 8 | r->sense[13]);
}

void sth_cdb_rw(uint8_t *cdb, unsigned size, bool write, uint64_t lba,
		uint32_t n)
{
	memset(cdb, 0, 16);
	switch (size) {
	case 6:
		cdb[0] = write ? 0x0a : 0x08;
		cdb[1] = (uint8_t)(lba >> 16) & 0x1f;
		cdb[2] = (uint8_t)(lba >> 8);
		cdb[3] = (uint8_t)lba;
		cdb[4] = (uint8_t)n;
		break;
	case 10:
		cdb[0] = write ? 0x2a : 0x28;
		cdb[2] = (uint8_t)(lba >> 24);
		cdb[3] = (uint8_t)(lba >> 16);
		cdb[4] = (uint8_t)(lba >> 8);
		cdb[5] = (uint8_t)lba;
		cdb[7] = (uint8_t)(n >> 8);
		cdb[8] = (uint8_t)n;
		break;
	case 12:
		cdb[0] = write ? 0xaa : 0xa8;
		cdb[2] = (uint8_t)(lba >> 24);
		cdb[3] = (uint8_t)(lba >> 16);
		cdb[4] = (uint8_t)(lba >> 8);
		cdb[5] = (uint8_t)lba;
		cdb[6] = (uint8_t)(n >> 24);
		cdb[7] = (uint8_t)(n >> 16);
		cdb[8] = (uint8_t)(n >> 8);
		cdb[9] = (uint8_t)n;
		break;
	default:
		cdb[0] = write ? 0x8a : 0x88;
		for (int i = 0; i < 8; i++)
			cdb[2 + i] = (uint8_t)(lba >> (56 - 8 * i));
		cdb[10] = (uint8_t)(n >> 24);
		cdb[11] = (uint8_t)(n >> 16);
		cdb[12] = (uint8_t)(n >> 8);
		cdb[13] = (uint8_t)n;
		break;
	}
}
