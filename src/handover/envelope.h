/* The state envelope: what one vmio hands its successor, as one record
 * beside a list of file descriptors carried alongside (fd_transfer.h).
 *
 * The record is read as hostile input: it comes from another process,
 * maybe another release, and a bug there must cost a refused hand-over,
 * not a crash here. So every length and every fd index in it is checked
 * against the record's own size and the fd list's, and a record that is
 * short, long, corrupted or of a format this build does not know is
 * refused with a reason.
 *
 * Format 1, little-endian, no padding:
 *
 *   0   magic "VMIOHAND"                       8 bytes
 *   8   format (1)                             u16
 *   10  flags (0)                              u16
 *   12  total length, checksum included        u32
 *   16  the writer's vmio version, NUL-padded  32 bytes
 *   48  number of sections                     u32
 *   52  number of fds the record names         u32
 *   56  sections, each:
 *         name, NUL-padded ([a-z0-9._-], unique)  24 bytes
 *         first fd index, fd count              u32, u32
 *         payload length, payload               u32, bytes
 *   end CRC-32 (zlib's) of every byte before it  u32
 *
 * A section's fds are the indices [first, first + count) of the fd list;
 * every index names exactly one section, so no fd is taken twice. */
#ifndef VMIO_HANDOVER_ENVELOPE_H
#define VMIO_HANDOVER_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VMIO_ENVELOPE_MAGIC "VMIOHAND"
/* The format this build writes, and the oldest it reads. */
#define VMIO_ENVELOPE_FORMAT 1u
#define VMIO_ENVELOPE_FORMAT_MIN 1u

#define VMIO_ENVELOPE_HEADER 56u
#define VMIO_ENVELOPE_NAME_MAX 24u
#define VMIO_ENVELOPE_VERSION_MAX 32u
#define VMIO_ENVELOPE_SECTION_HEADER (VMIO_ENVELOPE_NAME_MAX + 12u)
/* Bounds a reader holds a writer to: what a successor allocates is known
 * before it reads a byte of the record. */
#define VMIO_ENVELOPE_MAX_BYTES (64u << 20)
/* vmio vsock writes a section per VM (VSOCK_MAX_VMS, 256) beside its
 * own: room for that four times over. */
#define VMIO_ENVELOPE_MAX_SECTIONS 1024u
#define VMIO_ENVELOPE_MAX_FDS 65536u

/* ---- Writing ----------------------------------------------------------- */

struct vmio_envelope_writer {
	uint8_t *buf;
	size_t len, cap;
	uint32_t nsections, nfds;
	bool failed; /* out of memory or past a bound: finish says so */
};

/* version: the writer's vmio version (cut to fit). */
void vmio_envelope_writer_init(struct vmio_envelope_writer *w,
			       const char *version);
/* Appends a section named name with len bytes of data and the next
 * fd_count fds of the list (the caller keeps the list in the same
 * order). Returns 0, or -1 (the writer has failed: a bad name, a bound
 * passed, no memory). */
int vmio_envelope_add(struct vmio_envelope_writer *w, const char *name,
		      const void *data, size_t len, uint32_t fd_count);
/* Seals the record (length, counts, checksum). Returns 0 with *rec and
 * *len the record (the writer's: freed by _fini), or -1. */
int vmio_envelope_finish(struct vmio_envelope_writer *w, const uint8_t **rec,
			 size_t *len);
void vmio_envelope_writer_fini(struct vmio_envelope_writer *w);

/* ---- Reading ----------------------------------------------------------- */

struct vmio_envelope_section {
	char name[VMIO_ENVELOPE_NAME_MAX + 1];
	const uint8_t *data; /* into the record */
	size_t len;
	uint32_t fd_first, fd_count;
};

struct vmio_envelope {
	unsigned format;
	char version[VMIO_ENVELOPE_VERSION_MAX + 1];
	uint32_t nfds;
	unsigned nsections;
	struct vmio_envelope_section sec[VMIO_ENVELOPE_MAX_SECTIONS];
};

/* Reads the record of len bytes into e (which points into it). Returns
 * 0, or -1 with the reason in why ("format version 7: this vmio reads
 * 1 to 1"). */
int vmio_envelope_read(struct vmio_envelope *e, const uint8_t *rec,
		       size_t len, char *why, size_t why_size);

/* The section called name, or NULL. */
const struct vmio_envelope_section *
vmio_envelope_find(const struct vmio_envelope *e, const char *name);

#endif
