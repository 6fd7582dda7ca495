/* SPDX-License-Identifier: MIT */
/*
 * CRC32C (Castagnoli, reflected polynomial 0x82f63b78): the header and
 * data digest of iSCSI and of NVMe/TCP (target and host), initial value
 * ~0, final complement, sent little-endian on the wire. SSE4.2's crc32
 * instruction when the CPU has it, else a table (not a public API).
 */
#ifndef BLKSTACK_CORE_CRC32C_H
#define BLKSTACK_CORE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continue a running CRC (start with ~0u; complement at the end). */
uint32_t bs_crc32c_update(uint32_t crc, const void *buf, size_t len);
/* The table path alone (tests compare it with the instruction). */
uint32_t bs_crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* The digest of one buffer: ~update(~0, buf, len). */
uint32_t bs_crc32c(const void *buf, size_t len);

#endif
