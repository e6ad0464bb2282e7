/* A record's fields in a fixed byte order; see wire.h. */
#include "util/wire.h"

#include <stdlib.h>
#include <string.h>

void vmio_wire_writer_init(struct vmio_wire_writer *w, size_t max)
{
	*w = (struct vmio_wire_writer){ .max = max ? max : SIZE_MAX };
}

void vmio_wire_writer_fini(struct vmio_wire_writer *w)
{
	free(w->buf);
	*w = (struct vmio_wire_writer){ 0 };
}

/* n more bytes at the record's end, for the caller to fill; NULL once
 * the writer has failed. */
static uint8_t *extend(struct vmio_wire_writer *w, size_t n)
{
	uint8_t *p;

	if (w->failed)
		return NULL;
	if (n > w->max - w->len) {
		w->failed = true;
		return NULL;
	}
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 256;
		uint8_t *b;

		while (cap < w->len + n)
			cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
		b = realloc(w->buf, cap);
		if (!b) {
			w->failed = true;
			return NULL;
		}
		w->buf = b;
		w->cap = cap;
	}
	p = w->buf + w->len;
	w->len += n;
	return p;
}

void vmio_wire_put_bytes(struct vmio_wire_writer *w, const void *p, size_t n)
{
	uint8_t *to = extend(w, n);

	if (to && n)
		memcpy(to, p, n);
}

void vmio_wire_put_zeros(struct vmio_wire_writer *w, size_t n)
{
	uint8_t *to = extend(w, n);

	if (to && n)
		memset(to, 0, n);
}

/* Little-endian whatever the host's order: every field of every record
 * is stored and loaded by these two. */
static void store_le(uint8_t *b, uint64_t v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t load_le(const uint8_t *b, unsigned n)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)b[i] << (8 * i);
	return v;
}

static void put_le(struct vmio_wire_writer *w, uint64_t v, unsigned n)
{
	uint8_t *to = extend(w, n);

	if (to)
		store_le(to, v, n);
}

void vmio_wire_patch_u32(struct vmio_wire_writer *w, size_t at, uint32_t v)
{
	if (w->failed)
		return;
	if (at > w->len || w->len - at < 4) {
		w->failed = true;
		return;
	}
	store_le(w->buf + at, v, 4);
}

void vmio_wire_put_u8(struct vmio_wire_writer *w, uint8_t v)
{
	put_le(w, v, 1);
}

void vmio_wire_put_u16(struct vmio_wire_writer *w, uint16_t v)
{
	put_le(w, v, 2);
}

void vmio_wire_put_u32(struct vmio_wire_writer *w, uint32_t v)
{
	put_le(w, v, 4);
}

void vmio_wire_put_u64(struct vmio_wire_writer *w, uint64_t v)
{
	put_le(w, v, 8);
}

void vmio_wire_put_counters(struct vmio_wire_writer *w, const uint64_t *v,
			    size_t n)
{
	vmio_wire_put_u32(w, (uint32_t)n);
	for (size_t i = 0; i < n; i++)
		vmio_wire_put_u64(w, v[i]);
}

void vmio_wire_reader_init(struct vmio_wire_reader *r, const void *p,
			   size_t n)
{
	*r = (struct vmio_wire_reader){ .p = p, .left = n };
}

void vmio_wire_fail(struct vmio_wire_reader *r, const char *why)
{
	if (!r->why)
		r->why = why;
}

const uint8_t *vmio_wire_get_bytes(struct vmio_wire_reader *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->why)
		return NULL;
	if (n > r->left) {
		vmio_wire_fail(r, "record ends inside a field");
		return NULL;
	}
	r->p += n;
	r->left -= n;
	return p;
}

static uint64_t get_le(struct vmio_wire_reader *r, unsigned n)
{
	const uint8_t *b = vmio_wire_get_bytes(r, n);

	return b ? load_le(b, n) : 0;
}

uint8_t vmio_wire_get_u8(struct vmio_wire_reader *r)
{
	return (uint8_t)get_le(r, 1);
}

uint16_t vmio_wire_get_u16(struct vmio_wire_reader *r)
{
	return (uint16_t)get_le(r, 2);
}

uint32_t vmio_wire_get_u32(struct vmio_wire_reader *r)
{
	return (uint32_t)get_le(r, 4);
}

uint64_t vmio_wire_get_u64(struct vmio_wire_reader *r)
{
	return get_le(r, 8);
}

uint32_t vmio_wire_get_count(struct vmio_wire_reader *r, size_t item_size)
{
	uint32_t n = vmio_wire_get_u32(r);

	if (item_size && n > r->left / item_size) {
		vmio_wire_fail(r, "a count larger than the record can hold");
		return 0;
	}
	return r->why ? 0 : n;
}

void vmio_wire_get_counters(struct vmio_wire_reader *r, uint64_t *v, size_t n,
			    uint32_t max)
{
	uint32_t have = vmio_wire_get_count(r, 8);

	if (have > max) {
		vmio_wire_fail(r, "more counters than a record carries");
		return;
	}
	for (uint32_t i = 0; i < have; i++) {
		uint64_t x = vmio_wire_get_u64(r);

		if (i < n && vmio_wire_ok(r))
			v[i] = x;
	}
}
