/* The CRC-32 (zlib's) that every record vmio keeps or hands on ends
 * with: a record cut short or changed by a crash halfway through a write
 * is told from a whole one. */
#ifndef VMIO_HANDOVER_CHECKSUM_H
#define VMIO_HANDOVER_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint32_t vmio_checksum(const void *p, size_t len);

#endif
