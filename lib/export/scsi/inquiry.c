/* SPDX-License-Identifier: MIT */
/*
 * INQUIRY: standard data (SPC-4) and the vital product data pages 00h,
 * 80h (serial), 83h (identification: NAA, EUI-64, T10 vendor id, relative
 * target port, SCSI name strings), 8Fh (third-party copy: xcopy.c), B0h (block limits), B1h (block device
 * characteristics), B2h (logical block provisioning). The block pages
 * follow the device's capabilities as they are now (caps.c has the
 * mapping), so a knob or a restack below changes the next answer.
 */
#include <string.h>

#include "export/scsi/internal.h"

#define INQ_STD_LEN 74
#define VPD_MAX 1024

static void pad_ascii(uint8_t *d, const char *s, size_t n)
{
	size_t l = strlen(s);

	memset(d, ' ', n);
	memcpy(d, s, l < n ? l : n);
}

static uint32_t inq_std(struct bs_scsi_tgt *t, struct bs_scsi_lu *lu,
			uint8_t *d)
{
	/* direct access block device; or PQ 3 */
	d[0] = lu ? 0x00 : 0x7f;
	d[2] = 0x06;			/* SPC-4 */
	d[3] = 0x10 | 0x02;		/* HISUP, response data format 2 */
	d[4] = INQ_STD_LEN - 5;
	/* SCCS 0, TPGS 0, PROTECT 0; 3PC: EXTENDED COPY (xcopy.c) */
	d[5] = lu ? 0x08 : 0x00;
	d[7] = 0x02;			/* CMDQUE */
	pad_ascii(d + 8, t->vendor, 8);
	pad_ascii(d + 16, t->product, 16);
	pad_ascii(d + 32, t->revision, 4);
	/* version descriptors: SAM-5, iSCSI, SPC-4, SBC-3 */
	put16(d + 58, 0x00a0);
	put16(d + 60, 0x0960);
	put16(d + 62, 0x0460);
	put16(d + 64, 0x04c0);
	return INQ_STD_LEN;
}

/* One designation descriptor; returns its length. */
static uint32_t desig(uint8_t *d, uint8_t proto_codeset, uint8_t piv_assoc_type,
		      const void *id, uint32_t len)
{
	d[0] = proto_codeset;
	d[1] = piv_assoc_type;
	d[3] = (uint8_t)len;
	memcpy(d + 4, id, len);
	return 4 + len;
}

/* A SCSI name string, NUL-terminated and padded to a multiple of 4. */
static uint32_t name_desig(uint8_t *d, uint8_t assoc, const char *name)
{
	uint32_t l = (uint32_t)strlen(name), padded;

	if (l > 250)
		l = 250;
	padded = (l + 4) & ~3u;
	d[0] = 0x50 | 0x03;		/* iSCSI, UTF-8 */
	d[1] = 0x80 | assoc << 4 | 0x08;	/* PIV, SCSI name string */
	d[3] = (uint8_t)padded;
	memset(d + 4, 0, padded);
	memcpy(d + 4, name, l);
	return 4 + padded;
}

static uint32_t vpd83(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu,
		      uint8_t *d)
{
	struct bs_scsi_tgt *t = lu->tgt;
	uint8_t id[64];
	uint32_t n = 4, l;

	put64(id, lu->naa);
	n += desig(d + n, 0x01, 0x03, id, 8);		/* NAA, binary */
	put64(id, lu->eui);
	n += desig(d + n, 0x01, 0x02, id, 8);		/* EUI-64 */
	pad_ascii(id, t->vendor, 8);			/* T10 vendor id */
	l = (uint32_t)strlen(lu->serial);
	memcpy(id + 8, lu->serial, l);
	n += desig(d + n, 0x02, 0x01, id, 8 + l);
	memset(id, 0, 4);
	/* relative target port */
	put16(id + 2, cmd->nexus->rel_port);
	n += desig(d + n, 0x51, 0x80 | 0x10 | 0x04, id, 4);
	n += name_desig(d + n, 1, cmd->nexus->tport);	/* target port */
	n += name_desig(d + n, 2, t->name);		/* target device */
	return n;
}

static uint32_t vpd_b0(const struct bs_caps *c, uint8_t *d)
{
	uint32_t lbs = c->logical_block_size ? c->logical_block_size : 512;
	uint32_t xfer = scsi_max_xfer_blocks(c);

	put16(d + 2, 0x3c);
	d[4] = 0x00;			/* WSNZ = 0 */
	d[5] = (uint8_t)(xfer < SCSI_MAX_CAW_BLOCKS ? xfer
						     : SCSI_MAX_CAW_BLOCKS);
	put16(d + 6, (uint16_t)(c->physical_block_size > lbs
					? c->physical_block_size / lbs
					: 1));
	put32(d + 8, xfer);		/* MAXIMUM TRANSFER LENGTH */
	if (c->io_opt >= lbs)
		put32(d + 12, c->io_opt / lbs);
	put32(d + 16, xfer);		/* MAXIMUM PRE-FETCH LENGTH */
	if (c->discard) {
		put32(d + 20, scsi_max_unmap_blocks(c));
		put32(d + 24, SCSI_MAX_UNMAP_DESC);
		if (c->discard_granularity >= lbs)
			put32(d + 28, c->discard_granularity / lbs);
		else
			put32(d + 28, 1);
	}
	put64(d + 36, scsi_max_ws_blocks(c));
	return 64;
}

static uint32_t vpd_b1(const struct bs_caps *c, uint8_t *d)
{
	put16(d + 2, 0x3c);
	put16(d + 4, c->rotational ? 0 : 1);	/* 1: non-rotating medium */
	return 64;
}

static uint32_t vpd_b2(const struct bs_caps *c, uint8_t *d)
{
	bool wzu = c->write_zeroes_unmap;

	put16(d + 2, 4);
	/*
	 * LBPU: the UNMAP command is supported, i.e. the device discards;
	 * it does not follow unmap zeroing (sd chooses its zeroing from
	 * LBPRZ with LBPWS / LBPWS10 only, and its discard from LBPU first:
	 * docs/iscsi.md, "LBPU follows discard")
	 */
	d[5] = (c->discard ? 0x80 : 0) |	/* LBPU */
	       (wzu ? 0x40 : 0) |		/* LBPWS */
	       (wzu ? 0x20 : 0) |		/* LBPWS10 */
	       (scsi_lbprz(c) ? 0x04 : 0);	/* LBPRZ = 001b */
	/*
	 * ANC_SUP 0, DP 0; provisioning type thin whenever LBPME is 1 (SBC-4:
	 * a fully provisioned unit has LBPME 0), also when only unmap
	 * zeroing frees blocks
	 */
	d[6] = scsi_lbpme(c) ? 0x02 : 0x00;
	return 8;
}

static const uint8_t vpd_pages[] = { 0x00, 0x80, 0x83, 0x8f, 0xb0, 0xb1,
				     0xb2 };

int scsi_inquiry(struct bs_scsi_cmd *cmd, struct bs_scsi_lu *lu)
{
	struct bs_scsi_tgt *t = cmd->nexus->tgt;
	uint8_t evpd = cmd->cdb[1] & 0x01, page = cmd->cdb[2];
	uint16_t alloc = get16(cmd->cdb + 3);
	struct bs_caps c;
	uint32_t len;
	uint8_t *d;

	if (cmd->cdb[1] & 0x02)		/* CMDDT (obsolete) */
		return scsi_bad_cdb(cmd, 1, 1);
	if (!evpd && page)
		return scsi_bad_cdb(cmd, 2, -1);
	d = scsi_din(cmd, VPD_MAX);
	if (!d)
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	if (!evpd)
		return scsi_din_done(cmd, inq_std(t, lu, d), alloc);
	if (!lu) {
		/* no such unit: peripheral qualifier 3 and nothing else */
		d[0] = 0x7f;
		d[1] = page;
		return scsi_din_done(cmd, 4, alloc);
	}
	d[1] = page;
	if (page >= 0xb0)
		scsi_lu_caps(lu, &c);
	switch (page) {
	case 0x00:
		memcpy(d + 4, vpd_pages, sizeof(vpd_pages));
		len = 4 + sizeof(vpd_pages);
		break;
	case 0x80:
		len = (uint32_t)strlen(lu->serial);
		memcpy(d + 4, lu->serial, len);
		len += 4;
		break;
	case 0x83:
		len = vpd83(cmd, lu, d);
		break;
	case 0x8f:
		len = scsi_vpd_tpc(lu, d);
		break;
	case 0xb0:
		len = vpd_b0(&c, d);
		break;
	case 0xb1:
		len = vpd_b1(&c, d);
		break;
	case 0xb2:
		len = vpd_b2(&c, d);
		break;
	default:
		return scsi_bad_cdb(cmd, 2, -1);
	}
	if (page != 0xb0 && page != 0xb1 && page != 0xb2)
		put16(d + 2, (uint16_t)(len - 4));
	return scsi_din_done(cmd, len, alloc);
}
