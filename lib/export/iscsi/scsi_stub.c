/* SPDX-License-Identifier: MIT */
/*
 * TEMPORARY: weak stand-ins for the SCSI target core (scsi.h) until
 * lib/export/scsi/ is merged from h-scsi; its strong symbols replace
 * these at link time. Every command answers CHECK CONDITION, LOGICAL
 * UNIT NOT SUPPORTED. Remove this file after the merge.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/loop.h>
#include <blkstack/scsi.h>

#define WEAK __attribute__((weak))

struct bs_scsi_tgt {
	int unused;
};

struct bs_scsi_nexus {
	int unused;
};

WEAK int bs_scsi_tgt_new(const struct bs_scsi_tgt_cfg *cfg,
			 struct bs_scsi_tgt **out)
{
	(void)cfg;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

WEAK void bs_scsi_tgt_free(struct bs_scsi_tgt *t)
{
	free(t);
}

WEAK int bs_scsi_lu_add(struct bs_scsi_tgt *t, const struct bs_scsi_lu_cfg *cfg,
			struct bs_scsi_lu **out)
{
	(void)t;
	(void)cfg;
	*out = NULL;
	return 0;
}

WEAK void bs_scsi_lu_remove(struct bs_scsi_lu *lu)
{
	(void)lu;
}

WEAK void bs_scsi_lu_caps_changed(struct bs_scsi_lu *lu,
				  const struct bs_caps *old,
				  const struct bs_caps *now)
{
	(void)lu;
	(void)old;
	(void)now;
}

WEAK int bs_scsi_nexus_new(struct bs_scsi_tgt *t,
			   const struct bs_scsi_nexus_cfg *cfg,
			   struct bs_scsi_nexus **out)
{
	(void)t;
	(void)cfg;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

WEAK void bs_scsi_nexus_free(struct bs_scsi_nexus *n)
{
	free(n);
}

WEAK uint8_t bs_scsi_sense_build(uint8_t *buf, bool desc, uint8_t key,
				 uint8_t asc, uint8_t ascq)
{
	memset(buf, 0, 18);
	if (desc) {
		buf[0] = 0x72;
		buf[1] = key;
		buf[2] = asc;
		buf[3] = ascq;
		return 8;
	}
	buf[0] = 0x70;
	buf[2] = key;
	buf[7] = 10;
	buf[12] = asc;
	buf[13] = ascq;
	return 18;
}

static void stub_done(void *arg)
{
	struct bs_scsi_cmd *cmd = arg;

	cmd->done(cmd);
}

WEAK void bs_scsi_exec(struct bs_scsi_cmd *cmd)
{
	struct bs_work *w = (struct bs_work *)cmd->core;

	cmd->status = BS_SCSI_CHECK_CONDITION;
	cmd->sense_len = bs_scsi_sense_build(cmd->sense, false, 0x05, 0x25, 0);
	cmd->din = NULL;
	cmd->din_len = 0;
	w->fn = stub_done;
	w->arg = cmd;
	bs_loop_defer(bs_loop_current(), w);
}

WEAK void bs_scsi_cmd_release(struct bs_scsi_cmd *cmd)
{
	(void)cmd;
}

WEAK int bs_scsi_lu_reset(struct bs_scsi_tgt *t, uint64_t lun,
			  struct bs_scsi_nexus *from)
{
	(void)t;
	(void)lun;
	(void)from;
	return 0;
}

WEAK void bs_scsi_tgt_reset(struct bs_scsi_tgt *t, struct bs_scsi_nexus *from)
{
	(void)t;
	(void)from;
}

WEAK uint64_t bs_scsi_lun_decode(const uint8_t raw[8])
{
	return (uint64_t)(raw[0] & 0x3f) << 8 | raw[1];
}

WEAK void bs_scsi_lun_encode(uint64_t lun, uint8_t raw[8])
{
	memset(raw, 0, 8);
	raw[0] = (uint8_t)(lun >> 8) & 0x3f;
	if (lun > 255)
		raw[0] |= 0x40;
	raw[1] = (uint8_t)lun;
}
