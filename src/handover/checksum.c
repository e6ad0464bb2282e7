/* The records' CRC-32; see checksum.h. */
#include "handover/checksum.h"

#include <zlib.h>

/* zlib's crc32 takes a uInt length: a record may be larger than one. */
uint32_t vmio_checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uLong crc = crc32(0L, Z_NULL, 0);

	while (len) {
		uInt n = len > (1u << 30) ? 1u << 30 : (uInt)len;

		crc = crc32(crc, b, n);
		b += n;
		len -= n;
	}
	return (uint32_t)crc;
}
