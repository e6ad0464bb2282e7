/* The state envelope (envelope.h). */
#include "handover/envelope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handover/checksum.h"
#include "util/wire.h"

/* Where the header keeps what finish writes last (envelope.h). */
#define AT_LENGTH 12u
#define AT_SECTIONS 48u
#define AT_FDS 52u

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

/* The record so far as a wire writer, which writes it: envelope.h's
 * writer only keeps its buffer between calls. */
static struct vmio_wire_writer wire_of(const struct vmio_envelope_writer *w)
{
	return (struct vmio_wire_writer){ .buf = w->buf,
					  .len = w->len,
					  .cap = w->cap,
					  .max = VMIO_ENVELOPE_MAX_BYTES,
					  .failed = w->failed };
}

/* Takes the buffer back from wire; -1 if the writer has failed. */
static int keep(struct vmio_envelope_writer *w,
		const struct vmio_wire_writer *wire)
{
	w->buf = wire->buf;
	w->len = wire->len;
	w->cap = wire->cap;
	w->failed = wire->failed;
	return w->failed ? -1 : 0;
}

void vmio_envelope_writer_init(struct vmio_envelope_writer *w,
			       const char *version)
{
	/* Cut to leave a NUL in the field: a reader refuses one without. */
	size_t vlen = strnlen(version, VMIO_ENVELOPE_VERSION_MAX - 1);
	struct vmio_wire_writer wire;

	*w = (struct vmio_envelope_writer){ 0 };
	wire = wire_of(w);
	vmio_wire_put_bytes(&wire, VMIO_ENVELOPE_MAGIC, 8);
	vmio_wire_put_u16(&wire, VMIO_ENVELOPE_FORMAT);
	vmio_wire_put_u16(&wire, 0);
	vmio_wire_put_u32(&wire, 0); /* the length, once sealed */
	vmio_wire_put_bytes(&wire, version, vlen);
	vmio_wire_put_zeros(&wire, VMIO_ENVELOPE_VERSION_MAX - vlen);
	vmio_wire_put_u32(&wire, 0); /* the counts, once sealed */
	vmio_wire_put_u32(&wire, 0);
	keep(w, &wire);
}

int vmio_envelope_add(struct vmio_envelope_writer *w, const char *name,
		      const void *data, size_t len, uint32_t fd_count)
{
	size_t nlen = strlen(name);
	struct vmio_wire_writer wire;

	if (!name_ok(name, nlen) ||
	    w->nsections == VMIO_ENVELOPE_MAX_SECTIONS ||
	    fd_count > VMIO_ENVELOPE_MAX_FDS - w->nfds || len > UINT32_MAX)
		w->failed = true;
	if (w->failed)
		return -1;
	wire = wire_of(w);
	vmio_wire_put_bytes(&wire, name, nlen);
	vmio_wire_put_zeros(&wire, VMIO_ENVELOPE_NAME_MAX - nlen);
	vmio_wire_put_u32(&wire, w->nfds);
	vmio_wire_put_u32(&wire, fd_count);
	vmio_wire_put_u32(&wire, (uint32_t)len);
	vmio_wire_put_bytes(&wire, data, len);
	if (keep(w, &wire))
		return -1;
	w->nsections++;
	w->nfds += fd_count;
	return 0;
}

int vmio_envelope_finish(struct vmio_envelope_writer *w, const uint8_t **rec,
			 size_t *len)
{
	struct vmio_wire_writer wire = wire_of(w);

	vmio_wire_patch_u32(&wire, AT_LENGTH, (uint32_t)(wire.len + 4));
	vmio_wire_patch_u32(&wire, AT_SECTIONS, w->nsections);
	vmio_wire_patch_u32(&wire, AT_FDS, w->nfds);
	vmio_wire_put_u32(&wire, vmio_checksum(wire.buf, wire.len));
	if (keep(w, &wire))
		return -1;
	*rec = w->buf;
	*len = w->len;
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

/* The record's last field, outside what the sections are read from. */
static uint32_t stored_checksum(const uint8_t *rec, size_t len)
{
	struct vmio_wire_reader r;

	vmio_wire_reader_init(&r, rec + len - 4, 4);
	return vmio_wire_get_u32(&r);
}

/* Every field is read before any is checked, and they are checked in the
 * order that gives the most telling reason: the length is checked first,
 * so every read fits. */
static int read_header(struct vmio_envelope *e, struct vmio_wire_reader *r,
		       const uint8_t *rec, size_t len, char *why, size_t size)
{
	const uint8_t *magic, *version;
	unsigned format, flags;
	uint32_t total;
	size_t vlen;

	if (len < VMIO_ENVELOPE_HEADER + 4)
		return refuse(why, size, "the state is %zu bytes, shorter than its header",
			      len);
	magic = vmio_wire_get_bytes(r, 8);
	format = vmio_wire_get_u16(r);
	flags = vmio_wire_get_u16(r);
	total = vmio_wire_get_u32(r);
	version = vmio_wire_get_bytes(r, VMIO_ENVELOPE_VERSION_MAX);
	e->nsections = vmio_wire_get_u32(r);
	e->nfds = vmio_wire_get_u32(r);
	if (!vmio_wire_ok(r) || memcmp(magic, VMIO_ENVELOPE_MAGIC, 8))
		return refuse(why, size, "not a vmio state (bad magic)");
	if (format < VMIO_ENVELOPE_FORMAT_MIN || format > VMIO_ENVELOPE_FORMAT)
		return refuse(why, size,
			      "state format version %u: this vmio reads versions %u to %u",
			      format, VMIO_ENVELOPE_FORMAT_MIN,
			      VMIO_ENVELOPE_FORMAT);
	if (flags)
		return refuse(why, size, "state flags 0x%x: none are known",
			      flags);
	if (total != len)
		return refuse(why, size,
			      "the state says it is %u bytes, %zu arrived",
			      total, len);
	if (len > VMIO_ENVELOPE_MAX_BYTES)
		return refuse(why, size, "the state is larger than %u bytes",
			      VMIO_ENVELOPE_MAX_BYTES);
	if (stored_checksum(rec, len) != vmio_checksum(rec, len - 4))
		return refuse(why, size, "the state's checksum does not match (corrupted)");
	if (!padded_ok(version, VMIO_ENVELOPE_VERSION_MAX, &vlen))
		return refuse(why, size, "the writer's version is not text");
	e->format = format;
	memcpy(e->version, version, vlen);
	e->version[vlen] = '\0';
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
static int read_section(struct vmio_envelope *e, unsigned i,
			struct vmio_wire_reader *r, uint32_t *next_fd,
			char *why, size_t size)
{
	struct vmio_envelope_section *s = &e->sec[i];
	const uint8_t *name;
	size_t nlen;

	if (r->left < VMIO_ENVELOPE_SECTION_HEADER)
		return refuse(why, size, "section %u: cut short", i);
	name = vmio_wire_get_bytes(r, VMIO_ENVELOPE_NAME_MAX);
	s->fd_first = vmio_wire_get_u32(r);
	s->fd_count = vmio_wire_get_u32(r);
	s->len = vmio_wire_get_u32(r);
	if (!vmio_wire_ok(r) || !padded_ok(name, VMIO_ENVELOPE_NAME_MAX, &nlen) ||
	    !name_ok((const char *)name, nlen))
		return refuse(why, size, "section %u: its name is not [a-z0-9._-]+",
			      i);
	memcpy(s->name, name, nlen);
	s->name[nlen] = '\0';
	for (unsigned k = 0; k < i; k++)
		if (!strcmp(e->sec[k].name, s->name))
			return refuse(why, size, "section '%s' appears twice",
				      s->name);
	if (s->fd_first != *next_fd || s->fd_count > e->nfds - *next_fd)
		return refuse(why, size,
			      "section '%s': fds %u+%u, but the list has %u and the next free is %u",
			      s->name, s->fd_first, s->fd_count, e->nfds,
			      *next_fd);
	if (s->len > r->left)
		return refuse(why, size,
			      "section '%s': %zu bytes, past the end of the state",
			      s->name, s->len);
	s->data = vmio_wire_get_bytes(r, s->len);
	*next_fd += s->fd_count;
	return 0;
}

int vmio_envelope_read(struct vmio_envelope *e, const uint8_t *rec,
		       size_t len, char *why, size_t why_size)
{
	struct vmio_wire_reader r;
	uint32_t next_fd = 0;

	memset(e, 0, sizeof(*e));
	/* Everything but the checksum: read_header reads that apart. */
	vmio_wire_reader_init(&r, rec, len < 4 ? 0 : len - 4);
	if (read_header(e, &r, rec, len, why, why_size))
		return -1;
	for (unsigned i = 0; i < e->nsections; i++)
		if (read_section(e, i, &r, &next_fd, why, why_size))
			return -1;
	if (r.left)
		return refuse(why, why_size,
			      "%zu bytes after the last section", r.left);
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
