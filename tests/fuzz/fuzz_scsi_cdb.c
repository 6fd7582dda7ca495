/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the SCSI target core's CDB decoder and commands, fed
 * random CDBs and Data-Out through bs_scsi_exec() over small mem devices.
 *
 * Input layout:
 *   byte 0   configuration: bits 0-1 the device of LU 0 (0 mem unmap,
 *            1 zeroes=write, 2 zeroes=none without discard, 3 4K blocks
 *            with a write cache); bit 2 LU 0 read-only
 *   then records, until the input ends:
 *     byte   selector: bit 0 nexus (0/1); bits 1-2 LUN (0, 1, 2 unknown,
 *            300 unknown); bits 5-7 = 7: an event instead of a command
 *            (bits 1-2: LU reset, target reset, caps change, knob flip)
 *     byte   CDB length (taken modulo 33)
 *     bytes  the CDB
 *     2 bytes Data-Out length (big-endian), then that many bytes (cut at
 *            the input's end)
 *     byte   Data-In maximum, in 512-byte units (0: 0 bytes)
 * Every command runs to completion before the next; at the end all is
 * freed (LeakSanitizer checks nothing outlives the input).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <blkstack/attr.h>
#include <blkstack/bdev.h>
#include <blkstack/opts.h>
#include <blkstack/scsi.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const specs[] = {
	"mem:4M,chunk=4K",
	"mem:4M,zeroes=write,max_write_zeroes=64K",
	"mem:4M,zeroes=none,max_discard=0",
	"mem:4M,logical_block_size=4096,write_cache=1",
};

static struct bs_dev *make_dev(struct bs_ctx *ctx, const char *name,
			       const char *spec)
{
	struct bs_opts *o = NULL;
	struct bs_dev *d = NULL;
	char *type = NULL;

	if (bs_opts_parse_spec(spec, &type, &o) == 0)
		bs_dev_create(ctx, name, type, o, &d);
	bs_opts_free(o);
	free(type);
	return d;
}

static void done_cb(struct bs_scsi_cmd *cmd)
{
	*(bool *)cmd->priv = true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint64_t luns[4] = { 0, 1, 2, 300 };
	struct bs_scsi_tgt_cfg tc = { .name = "iqn.2026-01.fuzz:t" };
	struct bs_scsi_nexus_cfg nc[2] = {
		{ "iqn.2026-01.fuzz:a,i,0x1", "iqn.2026-01.fuzz:t,t,0x1",
		  1, 1 },
		{ "iqn.2026-01.fuzz:b,i,0x2", "iqn.2026-01.fuzz:t,t,0x1",
		  1, 1 },
	};
	struct bs_scsi_nexus *nx[2] = { NULL, NULL };
	struct bs_scsi_lu *lu0 = NULL;
	struct bs_scsi_tgt *t = NULL;
	struct bs_ctx *ctx = NULL;
	struct bs_dev *d0, *d1;
	struct bs_scsi_cmd *cmd;
	size_t pos = 1;
	bool knob = true;

	if (size < 1 || bs_ctx_new(&ctx))
		return 0;
	d0 = make_dev(ctx, "d0", specs[data[0] & 3]);
	d1 = make_dev(ctx, "d1", "mem:1M");
	if (!d0 || !d1 || bs_scsi_tgt_new(&tc, &t))
		goto out;
	{
		struct bs_scsi_lu_cfg c0 = { .lun = 0, .dev = d0,
					     .readonly = data[0] & 4,
					     .name = "d0" };
		struct bs_scsi_lu_cfg c1 = { .lun = 1, .dev = d1,
					     .name = "d1" };

		if (bs_scsi_lu_add(t, &c0, &lu0) ||
		    bs_scsi_lu_add(t, &c1, NULL))
			goto out;
	}
	if (bs_scsi_nexus_new(t, &nc[0], &nx[0]) ||
	    bs_scsi_nexus_new(t, &nc[1], &nx[1]))
		goto out;
	cmd = calloc(1, sizeof(*cmd));
	if (!cmd)
		goto out;
	while (pos + 2 <= size) {
		uint8_t sel = data[pos++], clen = data[pos++] % 33;
		uint32_t dlen;
		bool done = false;

		if ((sel >> 5) == 7) {
			struct bs_caps old, now;

			switch ((sel >> 1) & 3) {
			case 0:
				bs_scsi_lu_reset(t, 0, nx[sel & 1]);
				break;
			case 1:
				bs_scsi_tgt_reset(t, nx[sel & 1]);
				break;
			default:
				bs_dev_caps(d0, &old);
				knob = !knob;
				bs_attr_store(d0, "queue/write_zeroes_unmap",
					      knob ? "1" : "0");
				bs_dev_caps(d0, &now);
				bs_scsi_lu_caps_changed(lu0, &old, &now);
				break;
			}
			pos--;	/* no CDB length byte for events */
			continue;
		}
		memset(cmd, 0, sizeof(*cmd));
		if (pos + clen > size)
			break;
		memcpy(cmd->cdb, data + pos, clen);
		pos += clen;
		cmd->cdb_len = clen;
		dlen = 0;
		if (pos + 2 <= size) {
			dlen = (uint32_t)data[pos] << 8 | data[pos + 1];
			pos += 2;
		}
		if (dlen > size - pos)
			dlen = (uint32_t)(size - pos);
		cmd->dout = data + pos;
		cmd->dout_len = dlen;
		pos += dlen;
		cmd->din_max = pos < size ? (uint32_t)data[pos++] * 512 : 0;
		cmd->nexus = nx[sel & 1];
		cmd->lun = luns[(sel >> 1) & 3];
		cmd->done = done_cb;
		cmd->priv = &done;
		bs_scsi_exec(cmd);
		if (done)
			abort();	/* completed inside bs_scsi_exec() */
		bs_ctx_wait(ctx, &done);
		if (cmd->din_len > cmd->din_max ||
		    (cmd->status == BS_SCSI_CHECK_CONDITION && !cmd->sense_len))
			abort();
		/* touch what the transport would send */
		if (cmd->din_len)
			(void)*(volatile uint8_t *)&cmd->din[cmd->din_len - 1];
		bs_scsi_cmd_release(cmd);
	}
	free(cmd);
out:
	if (t)
		bs_scsi_tgt_free(t);
	bs_ctx_free(ctx);
	return 0;
}
