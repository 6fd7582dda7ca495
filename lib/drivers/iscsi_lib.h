/* SPDX-License-Identifier: MIT */
/*
 * libiscsi, loaded at the first iscsi (sd) open (lib/core/dynlib.h), not
 * linked: it brings the RDMA and netlink libraries, which cost every
 * blkstack process start-up time and resident memory.
 *
 * The table holds a pointer per libiscsi function the driver calls,
 * typed from its headers and named as the function: a call reads
 * iscsi_lib.iscsi_service(...). Not a public API.
 */
#ifndef BLKSTACK_DRIVERS_ISCSI_LIB_H
#define BLKSTACK_DRIVERS_ISCSI_LIB_H

#include <stddef.h>

#include <iscsi/iscsi.h>
#include <iscsi/scsi-lowlevel.h>

#include "core/dynlib.h"

#define ISCSI_LIB(X)							\
	X(iscsi_connect_async) X(iscsi_create_context)	\
	X(iscsi_destroy_context) X(iscsi_destroy_url)	\
	X(iscsi_get_error) X(iscsi_get_fd) X(iscsi_inquiry_task)	\
	X(iscsi_login_async) X(iscsi_logout_async)	\
	X(iscsi_modesense6_task) X(iscsi_parse_full_url)	\
	X(iscsi_read16_iov_task) X(iscsi_readcapacity10_task)	\
	X(iscsi_readcapacity16_task)	\
	X(iscsi_report_supported_opcodes_task)	\
	X(iscsi_scsi_cancel_task) X(iscsi_service)	\
	X(iscsi_set_initiator_username_pwd)	\
	X(iscsi_set_noautoreconnect) X(iscsi_set_session_type)	\
	X(iscsi_set_target_username_pwd) X(iscsi_set_targetname)	\
	X(iscsi_set_timeout) X(iscsi_synchronizecache16_task)	\
	X(iscsi_testunitready_task) X(iscsi_unmap_task)	\
	X(iscsi_which_events) X(iscsi_write16_iov_task)	\
	X(iscsi_writesame10_task) X(iscsi_writesame16_task)	\
	X(scsi_datain_unmarshall) X(scsi_free_scsi_task)	\
	X(scsi_modesense_get_page) X(scsi_sense_ascq_str)	\
	X(scsi_sense_key_str)

struct iscsi_lib {
	ISCSI_LIB(BS_DYNLIB_MEMBER)
};

/* Filled by iscsi_lib_load(); read only after it returned 0. */
extern struct iscsi_lib iscsi_lib;

/* Load libiscsi.so.7 (once per process): 0, or -ELIBACC and why. */
int iscsi_lib_load(char *why, size_t len);

#endif
