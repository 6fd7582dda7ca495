/* SPDX-License-Identifier: MIT */
/*
 * The ext4 backend (`device = NAME`): blkstack's fs layer on a device.
 * Not written yet: the export is refused with a reason.
 */
#include <errno.h>

#include "export/nfs/nfs.h"

int nfs_backend_ext4_open(struct nfs_backend *b, struct bs_export_unit *u)
{
	(void)b;
	return bs_error(-EOPNOTSUPP, "device %s: the nfs export of an ext4 "
			"filesystem on a device is not implemented yet (give "
			"path = DIR)", u->dev->name);
}
