/* SPDX-License-Identifier: MIT */
/*
 * The client's WRITE_SAME fallback: a bs_write_same() sink whose writes
 * are NFS WRITEs (UNSTABLE, in pieces the session allows) and whose
 * commit is COMMIT. It has no write_zeroes: WRITE_SAME was what would
 * have zeroed cheaply, and the server said no. A write verifier that
 * changes between the WRITEs and the COMMIT means the server restarted
 * and may have lost them: the commit then fails with -EIO.
 */
#include <errno.h>
#include <string.h>

#include <blkstack/bdev.h>

#include "nfsclient/internal.h"

static int note_verf(struct bs_nfs_ws_sink *s, const uint8_t *verf)
{
	if (!s->have_verf) {
		memcpy(s->verf, verf, sizeof(s->verf));
		s->have_verf = true;
	} else if (memcmp(s->verf, verf, sizeof(s->verf))) {
		s->verf_changed = true;
	}
	return 0;
}

static int sink_write(void *arg, uint64_t off, const void *buf, size_t len)
{
	struct bs_nfs_ws_sink *s = arg;
	const uint8_t *p = buf;
	uint8_t verf[NFS4_VERIFIER_SIZE];

	while (len) {
		uint32_t n = len > bs_nfs_io_max(s->nfs) ? bs_nfs_io_max(s->nfs)
							 : (uint32_t)len;
		int64_t got = bs_nfs_write(s->nfs, s->f, p, n, off,
					   BS_NFS_UNSTABLE, NULL, verf);

		if (got < 0)
			return (int)got;
		if (got == 0)
			return bs_error(-EIO, "nfs: WRITE at %llu wrote "
					"nothing", (unsigned long long)off);
		note_verf(s, verf);
		p += got;
		off += (uint64_t)got;
		len -= (size_t)got;
	}
	return 0;
}

static int sink_commit(void *arg)
{
	struct bs_nfs_ws_sink *s = arg;
	uint8_t verf[NFS4_VERIFIER_SIZE];
	int err = bs_nfs_commit(s->nfs, s->f, 0, 0, verf);

	if (err)
		return err;
	note_verf(s, verf);
	if (s->verf_changed)
		return bs_error(-EIO, "nfs: the server's write verifier "
				"changed (a restart): unstable writes may "
				"be lost");
	return 0;
}

static const struct bs_ws_sink_ops nfs_sink_ops = {
	.write = sink_write,
	.commit = sink_commit,
};

void bs_nfs_ws_sink_init(struct bs_ws_sink *sink, struct bs_nfs_ws_sink *s,
			 struct bs_nfs *nfs, struct bs_nfs_file *f)
{
	memset(s, 0, sizeof(*s));
	s->nfs = nfs;
	s->f = f;
	*sink = (struct bs_ws_sink){
		.ops = &nfs_sink_ops,
		.arg = s,
		.max_size = (uint64_t)INT64_MAX,
		.max_write = bs_nfs_io_max(nfs),
	};
}
