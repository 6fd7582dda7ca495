/* SPDX-License-Identifier: MIT */
/*
 * iSCSI PDU framing: how long a PDU is on the wire, response headers, and
 * the CDB out of a SCSI Command with its additional header segments.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "export/iscsi/pdu.h"

size_t iscsi_pdu_rest_len(const uint8_t *bhs, bool hdigest, bool ddigest)
{
	uint32_t dsl = iscsi_dsl(bhs);
	size_t n = iscsi_ahs_len(bhs);

	if (hdigest)
		n += ISCSI_DIGEST_LEN;
	if (dsl) {
		n += dsl + iscsi_pad4(dsl);
		if (ddigest)
			n += ISCSI_DIGEST_LEN;
	}
	return n;
}

const char *iscsi_opcode_name(uint8_t op, char *buf, size_t len)
{
	static const struct {
		uint8_t op;
		const char *name;
	} names[] = {
		{ ISCSI_OP_NOP_OUT, "NOP-Out" },
		{ ISCSI_OP_SCSI_CMD, "SCSI Command" },
		{ ISCSI_OP_TMF_REQ, "Task Management" },
		{ ISCSI_OP_LOGIN_REQ, "Login" },
		{ ISCSI_OP_TEXT_REQ, "Text" },
		{ ISCSI_OP_DATA_OUT, "Data-Out" },
		{ ISCSI_OP_LOGOUT_REQ, "Logout" },
		{ ISCSI_OP_SNACK_REQ, "SNACK" },
	};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].op == op)
			return names[i].name;
	snprintf(buf, len, "opcode 0x%02x", op);
	return buf;
}

void iscsi_bhs_init(uint8_t *bhs, uint8_t op, uint32_t dsl, uint32_t itt)
{
	memset(bhs, 0, ISCSI_BHS_LEN);
	bhs[0] = op;
	bhs[1] = ISCSI_FLAG_FINAL;
	iscsi_put24(bhs + 5, dsl);
	iscsi_put32(bhs + 16, itt);
}

int iscsi_pdu_cdb(const uint8_t *bhs, const uint8_t *ahs, uint32_t ahs_len,
		  uint8_t *cdb, size_t max, bool *bidi)
{
	size_t n = 16;
	uint32_t off = 0;
	bool ext = false;

	*bidi = false;
	if (max < 16)
		return -EINVAL;
	memcpy(cdb, bhs + 32, 16);
	while (off < ahs_len) {
		uint32_t alen, total;
		uint8_t type;

		if (ahs_len - off < 4)
			return -EINVAL;
		alen = iscsi_get16(ahs + off);
		type = ahs[off + 2];
		/* AHSLength counts the bytes after the type byte */
		total = 3 + alen;
		total += iscsi_pad4(total);
		if (total > ahs_len - off)
			return -EINVAL;
		if (type == ISCSI_AHS_EXTENDED_CDB) {
			/* a reserved byte, then CDB bytes 16 on */
			if (ext || alen < 2 || 16 + (size_t)alen - 1 > max)
				return -EINVAL;
			memcpy(cdb + 16, ahs + off + 4, alen - 1);
			n = 16 + (size_t)alen - 1;
			ext = true;
		} else if (type == ISCSI_AHS_BIDI_READ_LEN) {
			if (alen != 5)
				return -EINVAL;
			*bidi = true;
		} else {
			return -EINVAL;
		}
		off += total;
	}
	return (int)n;
}
