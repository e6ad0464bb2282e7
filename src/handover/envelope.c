/* The state envelope (envelope.h). */
#include "handover/envelope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return get16(p) | (uint32_t)get16(p + 2) << 16;
}

/* zlib's crc32 takes a uInt length: a record may be larger than one. */
static uint32_t checksum(const uint8_t *p, size_t len)
{
	uLong crc = crc32(0L, Z_NULL, 0);

	while (len) {
		uInt n = len > (1u << 30) ? 1u << 30 : (uInt)len;

		crc = crc32(crc, p, n);
		p += n;
		len -= n;
	}
	return (uint32_t)crc;
}

static bool name_ok(const char *name, size_t len)
{
	if (!len || len > VMIO_ENVELOPE_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* ---- Writing ----------------------------------------------------------- */

static bool reserve(struct vmio_envelope_writer *w, size_t more)
{
	size_t cap = w->cap ? w->cap : 4096;
	uint8_t *b;

	if (w->failed || more > VMIO_ENVELOPE_MAX_BYTES - w->len) {
		w->failed = true;
		return false;
	}
	if (w->len + more <= w->cap)
		return true;
	while (cap < w->len + more)
		cap *= 2;
	b = realloc(w->buf, cap);
	if (!b) {
		w->failed = true;
		return false;
	}
	w->buf = b;
	w->cap = cap;
	return true;
}

void vmio_envelope_writer_init(struct vmio_envelope_writer *w,
			       const char *version)
{
	size_t vlen = strlen(version);

	*w = (struct vmio_envelope_writer){ 0 };
	if (!reserve(w, VMIO_ENVELOPE_HEADER))
		return;
	memset(w->buf, 0, VMIO_ENVELOPE_HEADER);
	memcpy(w->buf, VMIO_ENVELOPE_MAGIC, 8);
	put16(w->buf + 8, VMIO_ENVELOPE_FORMAT);
	memcpy(w->buf + 16, version,
	       vlen < VMIO_ENVELOPE_VERSION_MAX ? vlen
						: VMIO_ENVELOPE_VERSION_MAX - 1);
	w->len = VMIO_ENVELOPE_HEADER;
}

int vmio_envelope_add(struct vmio_envelope_writer *w, const char *name,
		      const void *data, size_t len, uint32_t fd_count)
{
	size_t nlen = strlen(name);
	uint8_t *p;

	if (!name_ok(name, nlen) ||
	    w->nsections == VMIO_ENVELOPE_MAX_SECTIONS ||
	    fd_count > VMIO_ENVELOPE_MAX_FDS - w->nfds || len > UINT32_MAX)
		w->failed = true;
	if (!reserve(w, VMIO_ENVELOPE_SECTION_HEADER + len))
		return -1;
	p = w->buf + w->len;
	memset(p, 0, VMIO_ENVELOPE_NAME_MAX);
	memcpy(p, name, nlen);
	put32(p + VMIO_ENVELOPE_NAME_MAX, w->nfds);
	put32(p + VMIO_ENVELOPE_NAME_MAX + 4, fd_count);
	put32(p + VMIO_ENVELOPE_NAME_MAX + 8, (uint32_t)len);
	if (len)
		memcpy(p + VMIO_ENVELOPE_SECTION_HEADER, data, len);
	w->len += VMIO_ENVELOPE_SECTION_HEADER + len;
	w->nsections++;
	w->nfds += fd_count;
	return 0;
}

int vmio_envelope_finish(struct vmio_envelope_writer *w, const uint8_t **rec,
			 size_t *len)
{
	if (!reserve(w, 4))
		return -1;
	put32(w->buf + 12, (uint32_t)(w->len + 4));
	put32(w->buf + 48, w->nsections);
	put32(w->buf + 52, w->nfds);
	put32(w->buf + w->len, checksum(w->buf, w->len));
	*rec = w->buf;
	*len = w->len + 4;
	return 0;
}

void vmio_envelope_writer_fini(struct vmio_envelope_writer *w)
{
	free(w->buf);
	*w = (struct vmio_envelope_writer){ 0 };
}

/* ---- Reading ----------------------------------------------------------- */

/* The reason into why, and the reader's answer: refused. */
#define refuse(why, size, ...) (snprintf((why), (size), __VA_ARGS__), -1)

/* A NUL-padded text field: a NUL within it, nothing after the first but
 * NULs, and printable before it. */
static bool padded_ok(const uint8_t *p, size_t size, size_t *len)
{
	size_t n = strnlen((const char *)p, size);

	if (n == size)
		return false;
	for (size_t i = n; i < size; i++)
		if (p[i])
			return false;
	for (size_t i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return false;
	*len = n;
	return true;
}

static int read_header(struct vmio_envelope *e, const uint8_t *rec,
		       size_t len, char *why, size_t size)
{
	size_t vlen;
	unsigned format;

	if (len < VMIO_ENVELOPE_HEADER + 4)
		return refuse(why, size, "the state is %zu bytes, shorter than its header",
			      len);
	if (memcmp(rec, VMIO_ENVELOPE_MAGIC, 8))
		return refuse(why, size, "not a vmio state (bad magic)");
	format = get16(rec + 8);
	if (format < VMIO_ENVELOPE_FORMAT_MIN || format > VMIO_ENVELOPE_FORMAT)
		return refuse(why, size,
			      "state format version %u: this vmio reads versions %u to %u",
			      format, VMIO_ENVELOPE_FORMAT_MIN,
			      VMIO_ENVELOPE_FORMAT);
	if (get16(rec + 10))
		return refuse(why, size, "state flags 0x%x: none are known",
			      get16(rec + 10));
	if (get32(rec + 12) != len)
		return refuse(why, size,
			      "the state says it is %u bytes, %zu arrived",
			      get32(rec + 12), len);
	if (len > VMIO_ENVELOPE_MAX_BYTES)
		return refuse(why, size, "the state is larger than %u bytes",
			      VMIO_ENVELOPE_MAX_BYTES);
	if (get32(rec + len - 4) != checksum(rec, len - 4))
		return refuse(why, size, "the state's checksum does not match (corrupted)");
	if (!padded_ok(rec + 16, VMIO_ENVELOPE_VERSION_MAX, &vlen))
		return refuse(why, size, "the writer's version is not text");
	e->format = format;
	memcpy(e->version, rec + 16, vlen);
	e->version[vlen] = '\0';
	e->nsections = get32(rec + 48);
	e->nfds = get32(rec + 52);
	if (e->nsections > VMIO_ENVELOPE_MAX_SECTIONS)
		return refuse(why, size, "%u sections: at most %u", e->nsections,
			      VMIO_ENVELOPE_MAX_SECTIONS);
	if (e->nfds > VMIO_ENVELOPE_MAX_FDS)
		return refuse(why, size, "%u fds: at most %u", e->nfds,
			      VMIO_ENVELOPE_MAX_FDS);
	return 0;
}

/* Sections claim fd ranges in the order they come: each starts where the
 * one before ended, so no index is claimed twice or left out. */
static int read_section(struct vmio_envelope *e, unsigned i, const uint8_t *p,
			size_t left, uint32_t *next_fd, char *why, size_t size)
{
	struct vmio_envelope_section *s = &e->sec[i];
	size_t nlen;

	if (left < VMIO_ENVELOPE_SECTION_HEADER)
		return refuse(why, size, "section %u: cut short", i);
	if (!padded_ok(p, VMIO_ENVELOPE_NAME_MAX, &nlen) ||
	    !name_ok((const char *)p, nlen))
		return refuse(why, size, "section %u: its name is not [a-z0-9._-]+",
			      i);
	memcpy(s->name, p, nlen);
	s->name[nlen] = '\0';
	for (unsigned k = 0; k < i; k++)
		if (!strcmp(e->sec[k].name, s->name))
			return refuse(why, size, "section '%s' appears twice",
				      s->name);
	s->fd_first = get32(p + VMIO_ENVELOPE_NAME_MAX);
	s->fd_count = get32(p + VMIO_ENVELOPE_NAME_MAX + 4);
	s->len = get32(p + VMIO_ENVELOPE_NAME_MAX + 8);
	if (s->fd_first != *next_fd || s->fd_count > e->nfds - *next_fd)
		return refuse(why, size,
			      "section '%s': fds %u+%u, but the list has %u and the next free is %u",
			      s->name, s->fd_first, s->fd_count, e->nfds,
			      *next_fd);
	if (s->len > left - VMIO_ENVELOPE_SECTION_HEADER)
		return refuse(why, size,
			      "section '%s': %zu bytes, past the end of the state",
			      s->name, s->len);
	s->data = p + VMIO_ENVELOPE_SECTION_HEADER;
	*next_fd += s->fd_count;
	return 0;
}

int vmio_envelope_read(struct vmio_envelope *e, const uint8_t *rec,
		       size_t len, char *why, size_t why_size)
{
	uint32_t next_fd = 0;
	size_t off = VMIO_ENVELOPE_HEADER, end;

	memset(e, 0, sizeof(*e));
	if (read_header(e, rec, len, why, why_size))
		return -1;
	end = len - 4;
	for (unsigned i = 0; i < e->nsections; i++) {
		if (read_section(e, i, rec + off, end - off, &next_fd, why,
				 why_size))
			return -1;
		off += VMIO_ENVELOPE_SECTION_HEADER + e->sec[i].len;
	}
	if (off != end)
		return refuse(why, why_size,
			      "%zu bytes after the last section", end - off);
	if (next_fd != e->nfds)
		return refuse(why, why_size,
			      "the list has %u fds, the sections claim %u",
			      e->nfds, next_fd);
	return 0;
}

const struct vmio_envelope_section *
vmio_envelope_find(const struct vmio_envelope *e, const char *name)
{
	for (unsigned i = 0; i < e->nsections; i++)
		if (!strcmp(e->sec[i].name, name))
			return &e->sec[i];
	return NULL;
}
