/* SPDX-License-Identifier: MIT */
/*
 * Sense data (SPC-4 4.5): fixed (70h) or descriptor (72h) format, chosen
 * per logical unit by the control mode page's D_SENSE; the INFORMATION
 * field (COMPARE AND WRITE / VERIFY miscompare offset) and the sense-key
 * specific field pointer (INVALID FIELD IN CDB / PARAMETER LIST). And the
 * mapping of device errors to sense.
 */
#include <errno.h>
#include <string.h>

#include "export/scsi/internal.h"

uint8_t scsi_sense_fill(uint8_t *buf, bool desc, uint8_t key, uint16_t asc,
			bool info_valid, uint64_t info, const uint8_t *sks)
{
	uint8_t len;

	if (!desc) {
		memset(buf, 0, 18);
		buf[0] = 0x70 | (info_valid ? 0x80 : 0);
		buf[2] = key & 0x0f;
		if (info_valid)
			put32(buf + 3, (uint32_t)info);
		buf[7] = 10;	/* additional sense length */
		buf[12] = (uint8_t)(asc >> 8);
		buf[13] = (uint8_t)asc;
		if (sks)
			memcpy(buf + 15, sks, 3);
		return 18;
	}
	memset(buf, 0, 8);
	buf[0] = 0x72;
	buf[1] = key & 0x0f;
	buf[2] = (uint8_t)(asc >> 8);
	buf[3] = (uint8_t)asc;
	len = 8;
	if (info_valid) {	/* information descriptor */
		memset(buf + len, 0, 12);
		buf[len] = 0x00;
		buf[len + 1] = 0x0a;
		buf[len + 2] = 0x80;
		put64(buf + len + 4, info);
		len += 12;
	}
	if (sks) {		/* sense key specific descriptor */
		memset(buf + len, 0, 8);
		buf[len] = 0x02;
		buf[len + 1] = 0x06;
		memcpy(buf + len + 4, sks, 3);
		len += 8;
	}
	buf[7] = len - 8;
	return len;
}

uint8_t bs_scsi_sense_build(uint8_t *buf, bool desc, uint8_t key, uint8_t asc,
			    uint8_t ascq)
{
	return scsi_sense_fill(buf, desc, key, ASC(asc, ascq), false, 0, NULL);
}

static int check(struct bs_scsi_cmd *cmd, uint8_t key, uint16_t asc,
		 bool info_valid, uint64_t info, const uint8_t *sks)
{
	cmd->status = BS_SCSI_CHECK_CONDITION;
	cmd->sense_len = scsi_sense_fill(cmd->sense, scsi_core(cmd)->dsense,
					 key, asc, info_valid, info, sks);
	cmd->din_len = 0;
	return SCSI_DONE;
}

int scsi_check(struct bs_scsi_cmd *cmd, uint8_t key, uint16_t asc)
{
	return check(cmd, key, asc, false, 0, NULL);
}

int scsi_check_info(struct bs_scsi_cmd *cmd, uint8_t key, uint16_t asc,
		    uint64_t info)
{
	return check(cmd, key, asc, true, info, NULL);
}

/* Sense-key specific field pointer: SKSV, C/D, BPV + bit, field pointer. */
static int field(struct bs_scsi_cmd *cmd, bool in_cdb, unsigned byte, int bit)
{
	uint8_t sks[3];

	sks[0] = 0x80 | (in_cdb ? 0x40 : 0);
	if (bit >= 0)
		sks[0] |= 0x08 | (bit & 7);
	put16(sks + 1, (uint16_t)byte);
	return check(cmd, SK_ILLEGAL_REQUEST,
		     in_cdb ? A_INVALID_FIELD_CDB : A_INVALID_FIELD_PARAM,
		     false, 0, sks);
}

int scsi_bad_cdb(struct bs_scsi_cmd *cmd, unsigned byte, int bit)
{
	return field(cmd, true, byte, bit);
}

int scsi_bad_param(struct bs_scsi_cmd *cmd, unsigned byte, int bit)
{
	return field(cmd, false, byte, bit);
}

int scsi_check_errno(struct bs_scsi_cmd *cmd, int err, bool write)
{
	switch (err) {
	case -EIO:
		return scsi_check(cmd, SK_MEDIUM_ERROR,
				  write ? A_WRITE_ERROR : A_UNRECOVERED_READ);
	case -ENOSPC:
		/* thin provisioning: SPACE ALLOCATION FAILED WRITE PROTECT */
		return scsi_check(cmd, SK_DATA_PROTECT, A_SPACE_ALLOC_FAILED);
	case -EROFS:
		return scsi_check(cmd, SK_DATA_PROTECT, A_WRITE_PROTECTED);
	case -EAGAIN:	/* the device is still opening */
		return scsi_check(cmd, SK_NOT_READY, A_BECOMING_READY);
	case -ENXIO:	/* the device failed to open */
		return scsi_check(cmd, SK_NOT_READY, A_NOT_READY_MANUAL);
	case -EINVAL:	/* a range the core refused: it shrank under us */
		return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_LBA_OUT_OF_RANGE);
	default:
		return scsi_check(cmd, SK_HARDWARE_ERROR, A_INTERNAL_FAILURE);
	}
}

int scsi_short_dout(struct bs_scsi_cmd *cmd)
{
	/* FCP-4 / SAM-5: the Data-Out the transport gathered (its expected
	 * length) does not hold what the CDB asks for: nothing is written */
	return scsi_check(cmd, SK_ILLEGAL_REQUEST, A_INVALID_FIELD_IU);
}

int scsi_good(struct bs_scsi_cmd *cmd)
{
	cmd->status = BS_SCSI_GOOD;
	cmd->sense_len = 0;
	return SCSI_DONE;
}
