/* SPDX-License-Identifier: MIT */
/*
 * MODE SENSE and MODE SELECT 6/10: the read-write error recovery page
 * (01h, nothing to tune), the caching page (08h, WCE from the device's
 * write cache), the control page (0Ah, D_SENSE changeable per LU) and the
 * informational exceptions page (1Ch, nothing reported). Saving is not
 * supported (parameters are not kept across restarts).
 */
#include <string.h>

#include "export/scsi/internal.h"

#define PAGES_MAX 64

/* One page as @pc asks (0 current, 1 changeable, 2 default); its length. */
static unsigned page(struct bs_scsi_lu *lu, const struct bs_caps *c,
		     uint8_t code, unsigned pc, uint8_t *d)
{
	switch (code) {
	case 0x01:
		memset(d, 0, 12);
		d[0] = 0x01;
		d[1] = 0x0a;
		return 12;
	case 0x08:
		memset(d, 0, 20);
		d[0] = 0x08;
		d[1] = 0x12;
		if (pc != 1 && c->write_cache)
			d[2] = 0x04;	/* WCE */
		return 20;
	case 0x0a:
		memset(d, 0, 12);
		d[0] = 0x0a;
		d[1] = 0x0a;
		if (pc == 1)
			d[2] = 0x04;	/* D_SENSE is changeable */
		else if (pc == 0 && scsi_lu_dsense(lu))
			d[2] = 0x04;
		if (pc != 1) {
			d[3] = 0x10;	/* queue algorithm: unrestricted */
			d[5] = 0x40;	/* TAS: tasks aborted by another nexus
					 * end with TASK ABORTED (TST 000b:
					 * one task set for all nexuses) */
		}
		return 12;
	case 0x1c:
		memset(d, 0, 12);
		d[0] = 0x1c;
		d[1] = 0x0a;
		return 12;
	}
	return 0;
}

static const uint8_t page_codes[] = { 0x01, 0x08, 0x0a, 0x1c };

int scsi_mode_sense(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	bool ten = cmd->cdb[0] == 0x5a;
	bool dbd = cmd->cdb[1] & 0x08, llbaa = ten && (cmd->cdb[1] & 0x10);
	unsigned pc = cmd->cdb[2] >> 6, code = cmd->cdb[2] & 0x3f;
	uint8_t sub = cmd->cdb[3];
	uint32_t alloc = ten ? get16(cmd->cdb + 7) : cmd->cdb[4];
	unsigned hdr = ten ? 8 : 4, bdl = 0, len, i;
	uint64_t nblocks;
	struct bs_caps c;
	uint32_t bs;
	uint8_t *d;

	if (pc == 3)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST,
				  A_SAVING_NOT_SUPPORTED);
	if (sub && !(code == 0x3f && sub == 0xff))
		return scsi_bad_cdb(cmd, 3, -1);
	scsi_lu_caps(lu, &c);
	scsi_lu_geometry(lu, &nblocks, &bs);
	d = scsi_din(cmd, 512);
	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	if (!dbd)
		bdl = llbaa ? 16 : 8;
	len = hdr + bdl;
	if (code == 0x3f) {
		for (i = 0; i < sizeof(page_codes); i++)
			len += page(lu, &c, page_codes[i], pc, d + len);
	} else {
		unsigned l = page(lu, &c, (uint8_t)code, pc, d + len);

		if (!l)
			return scsi_bad_cdb(cmd, 2, 5);
		len += l;
	}
	/* header: device-specific parameter WP, DPOFUA */
	if (ten) {
		put16(d, (uint16_t)(len - 2));
		d[3] = (c.readonly ? 0x80 : 0) | 0x10;
		d[4] = llbaa ? 0x01 : 0;
		put16(d + 6, (uint16_t)bdl);
	} else {
		d[0] = (uint8_t)(len - 1);
		d[2] = (c.readonly ? 0x80 : 0) | 0x10;
		d[3] = (uint8_t)bdl;
	}
	if (bdl == 8) {
		put32(d + hdr, nblocks > UINT32_MAX ? UINT32_MAX
						    : (uint32_t)nblocks);
		put32(d + hdr + 4, bs & 0xffffff);
	} else if (bdl == 16) {
		put64(d + hdr, nblocks);
		put32(d + hdr + 12, bs);
	}
	return scsi_din_done(cmd, len, alloc);
}

int scsi_mode_select(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	bool ten = cmd->cdb[0] == 0x55;
	uint32_t plen = ten ? get16(cmd->cdb + 7) : cmd->cdb[4];
	unsigned hdr = ten ? 8 : 4, bdl, off, l, i;
	const uint8_t *p = cmd->dout;
	uint8_t cur[PAGES_MAX], mask[PAGES_MAX];
	bool dsense = scsi_lu_dsense(lu), changed;
	uint64_t nblocks;
	struct bs_caps c;
	uint32_t bs;

	if (cmd->cdb[1] & 0x01)		/* SP: nothing is saved */
		return scsi_bad_cdb(cmd, 1, 0);
	if (!plen)
		return scsi_good(cmd);
	if (!p || cmd->dout_len < plen)
		return scsi_short_dout(cmd);
	if (plen < hdr)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_PARAM_LIST_LENGTH);
	bdl = ten ? get16(p + 6) : p[3];
	if (hdr + bdl > plen)
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_PARAM_LIST_LENGTH);
	scsi_lu_caps(lu, &c);
	scsi_lu_geometry(lu, &nblocks, &bs);
	if (bdl) {
		bool lng = ten && (p[4] & 0x01);

		if (bdl != (lng ? 16u : 8u))
			return scsi_bad_param(cmd, ten ? 6 : 3, -1);
		/* the block length cannot change */
		uint32_t blen = lng ? get32(p + hdr + 12)
				    : get32(p + hdr + 4) & 0xffffff;

		if (blen != bs)
			return scsi_bad_param(cmd, hdr + (lng ? 12 : 5), -1);
	}
	for (off = hdr + bdl; off < plen; off += l) {
		uint8_t code = p[off] & 0x3f;

		if (p[off] & 0x40)	/* SPF: no subpages here */
			return scsi_bad_param(cmd, off, 6);
		if (off + 2 > plen)
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  A_PARAM_LIST_LENGTH);
		l = page(lu, &c, code, 0, cur);
		if (!l)
			return scsi_bad_param(cmd, off, 5);
		if (p[off + 1] != l - 2)
			return scsi_bad_param(cmd, off + 1, -1);
		if (off + l > plen)
			return scsi_check(cmd, SK_ILLEGAL_REQUEST,
					  A_PARAM_LIST_LENGTH);
		page(lu, &c, code, 1, mask);
		for (i = 2; i < l; i++)
			if ((p[off + i] ^ cur[i]) & ~mask[i])
				return scsi_bad_param(cmd, off + i, -1);
		if (code == 0x0a)
			dsense = p[off + 2] & 0x04;
	}
	pthread_mutex_lock(&lu->tgt->lock);
	changed = dsense != lu->d_sense;
	__atomic_store_n(&lu->d_sense, dsense, __ATOMIC_RELAXED);
	/* SPC-4: the other nexuses hear MODE PARAMETERS CHANGED */
	if (changed)
		scsi_ua_queue_all(lu->tgt, lu->lun, A_MODE_CHANGED,
				  cmd->nexus);
	pthread_mutex_unlock(&lu->tgt->lock);
	return scsi_good(cmd);
}
