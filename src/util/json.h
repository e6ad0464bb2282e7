/* A JSON writer into a buffer of bounded size: objects, arrays, strings
 * (escaped: names and paths come from users and guests), unsigned and
 * signed numbers, booleans. The buffer grows up to a cap given at init;
 * a document that would pass it is marked truncated and stops growing,
 * so what a peer can make us allocate is the cap, whatever it names
 * itself. Commas and nesting are the writer's: the caller says key and
 * value, in order. */
#ifndef VMIO_UTIL_JSON_H
#define VMIO_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VMIO_JSON_MAX_DEPTH 16

struct vmio_json {
	char *buf;
	size_t len, size, cap;
	unsigned depth;
	bool first[VMIO_JSON_MAX_DEPTH + 1]; /* no member yet at that depth */
	bool after_key;
	bool truncated; /* ran out of room (cap or memory), or too deep */
};

/* cap: the most bytes the document may take (> 0). */
void vmio_json_init(struct vmio_json *j, size_t cap);
void vmio_json_fini(struct vmio_json *j);
/* Empties it for reuse; keeps the buffer. */
void vmio_json_reset(struct vmio_json *j);

/* A key inside an object; the value follows with the next call. */
void vmio_json_key(struct vmio_json *j, const char *key);
void vmio_json_object_begin(struct vmio_json *j);
void vmio_json_object_end(struct vmio_json *j);
void vmio_json_array_begin(struct vmio_json *j);
void vmio_json_array_end(struct vmio_json *j);
/* A string of len bytes: '"', '\\' and control bytes escaped, bytes that
 * are not UTF-8 written as \u00XX of their value so that the document
 * stays valid whatever a guest named. */
void vmio_json_string_n(struct vmio_json *j, const char *s, size_t len);
void vmio_json_string(struct vmio_json *j, const char *s);
void vmio_json_uint(struct vmio_json *j, uint64_t v);
void vmio_json_int(struct vmio_json *j, int64_t v);
void vmio_json_bool(struct vmio_json *j, bool v);
void vmio_json_null(struct vmio_json *j);
/* Text that is already a JSON value (a fragment another writer made). */
void vmio_json_raw(struct vmio_json *j, const char *text, size_t len);

/* key and value in one call: the common case. */
static inline void vmio_json_kv_uint(struct vmio_json *j, const char *k,
				     uint64_t v)
{
	vmio_json_key(j, k);
	vmio_json_uint(j, v);
}
static inline void vmio_json_kv_string(struct vmio_json *j, const char *k,
				       const char *v)
{
	vmio_json_key(j, k);
	vmio_json_string(j, v);
}

#endif
