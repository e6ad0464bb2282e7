/* A record's fields in a fixed byte order: a growable writer, and a reader
 * that never reads past the record's end. What one vmio hands its
 * successor (the hand-over) is made of such records, and the successor
 * reads them as hostile input: a field that is not there, or a count the
 * record cannot hold, fails the reader, and the failure is sticky, so a
 * caller reads every field and checks once, at the end, before it uses
 * any of them.
 *
 * Little-endian, no padding, no field names: a record's layout is its
 * reader's code, and its version (carried by the record's owner) says
 * which layout it is. */
#ifndef VMIO_UTIL_WIRE_H
#define VMIO_UTIL_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vmio_wire_writer {
	uint8_t *buf;
	size_t len, cap;
	size_t max;  /* the record's bound: past it, the writer fails */
	bool failed; /* out of memory or past max */
};

/* max: the largest record the reader will take (0: SIZE_MAX). */
void vmio_wire_writer_init(struct vmio_wire_writer *w, size_t max);
void vmio_wire_writer_fini(struct vmio_wire_writer *w);
void vmio_wire_put_u8(struct vmio_wire_writer *w, uint8_t v);
void vmio_wire_put_u16(struct vmio_wire_writer *w, uint16_t v);
void vmio_wire_put_u32(struct vmio_wire_writer *w, uint32_t v);
void vmio_wire_put_u64(struct vmio_wire_writer *w, uint64_t v);
void vmio_wire_put_bytes(struct vmio_wire_writer *w, const void *p,
			 size_t n);
/* n zero bytes: what pads a fixed-size field after its text. */
void vmio_wire_put_zeros(struct vmio_wire_writer *w, size_t n);
/* Overwrites the u32 written at offset at: a length or count the record
 * holds before the fields it counts, known once they are written. Fails
 * the writer if the record does not reach that far yet. */
void vmio_wire_patch_u32(struct vmio_wire_writer *w, size_t at, uint32_t v);

/* A set of counters (n u64s, a struct of nothing else): their count,
 * then each. A later release appends counters; a reader takes what it
 * knows (vmio_wire_get_counters). */
void vmio_wire_put_counters(struct vmio_wire_writer *w, const uint64_t *v,
			    size_t n);

struct vmio_wire_reader {
	const uint8_t *p;
	size_t left;
	const char *why; /* NULL while every read fitted */
};

void vmio_wire_reader_init(struct vmio_wire_reader *r, const void *p,
			   size_t n);
/* Each returns the field, or 0 once the reader has failed. */
uint8_t vmio_wire_get_u8(struct vmio_wire_reader *r);
uint16_t vmio_wire_get_u16(struct vmio_wire_reader *r);
uint32_t vmio_wire_get_u32(struct vmio_wire_reader *r);
uint64_t vmio_wire_get_u64(struct vmio_wire_reader *r);
/* A pointer to the next n bytes, in the record (NULL once failed). */
const uint8_t *vmio_wire_get_bytes(struct vmio_wire_reader *r, size_t n);
/* A count of items of at least item_size bytes each that are to follow:
 * fails unless the rest of the record could hold them, so a caller may
 * allocate count items without trusting the record. */
uint32_t vmio_wire_get_count(struct vmio_wire_reader *r, size_t item_size);
/* Counters written by vmio_wire_put_counters into v[0..n): those the
 * record has beyond n are skipped, those it lacks left as they are; more
 * than max fails the reader. */
void vmio_wire_get_counters(struct vmio_wire_reader *r, uint64_t *v, size_t n,
			    uint32_t max);
/* Fails the reader with why (the first failure is kept). */
void vmio_wire_fail(struct vmio_wire_reader *r, const char *why);
/* Whether every read so far fitted (and nothing was failed). */
static inline bool vmio_wire_ok(const struct vmio_wire_reader *r)
{
	return !r->why;
}

#endif
