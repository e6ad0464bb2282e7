/* The bounded JSON writer (json.h). */
#include "util/json.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void vmio_json_init(struct vmio_json *j, size_t cap)
{
	memset(j, 0, sizeof(*j));
	j->cap = cap;
	j->first[0] = true;
}

void vmio_json_fini(struct vmio_json *j)
{
	free(j->buf);
	j->buf = NULL;
}

void vmio_json_reset(struct vmio_json *j)
{
	j->len = 0;
	j->depth = 0;
	j->first[0] = true;
	j->after_key = false;
	j->truncated = false;
}

static bool reserve(struct vmio_json *j, size_t n)
{
	if (j->truncated)
		return false;
	if (n > j->cap - j->len) {
		j->truncated = true;
		return false;
	}
	if (j->len + n <= j->size)
		return true;
	size_t size = j->size ? j->size : 256;
	while (size < j->len + n)
		size *= 2;
	if (size > j->cap)
		size = j->cap;
	char *buf = realloc(j->buf, size);
	if (!buf) {
		j->truncated = true;
		return false;
	}
	j->buf = buf;
	j->size = size;
	return true;
}

static void put(struct vmio_json *j, const char *s, size_t n)
{
	if (reserve(j, n)) {
		memcpy(j->buf + j->len, s, n);
		j->len += n;
	}
}

/* The comma before a value or key, unless it is a key's value or the
 * first of its container. */
static void separate(struct vmio_json *j)
{
	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth])
		put(j, ",", 1);
	j->first[j->depth] = false;
}

/* UTF-8 sequence length at s (n bytes left), or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* Overlong forms, surrogates and beyond U+10FFFF are not UTF-8. */
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

static void put_escaped(struct vmio_json *j, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	char esc[8];

	put(j, "\"", 1);
	for (size_t i = 0; i < n && !j->truncated;) {
		unsigned char c = p[i];
		size_t len = utf8_len(p + i, n - i);

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			put(j, esc, 2);
		} else if (c == '\n') {
			put(j, "\\n", 2);
		} else if (c == '\t') {
			put(j, "\\t", 2);
		} else if (c < 0x20 || c == 0x7f || len == 0) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			put(j, esc, 6);
			len = 1;
		} else {
			put(j, s + i, len);
		}
		i += len ? len : 1;
	}
	put(j, "\"", 1);
}

void vmio_json_key(struct vmio_json *j, const char *key)
{
	separate(j);
	put_escaped(j, key, strlen(key));
	put(j, ":", 1);
	j->after_key = true;
}

static void open_container(struct vmio_json *j, const char *c)
{
	separate(j);
	if (j->depth >= VMIO_JSON_MAX_DEPTH) {
		j->truncated = true;
		return;
	}
	put(j, c, 1);
	j->first[++j->depth] = true;
}

static void close_container(struct vmio_json *j, const char *c)
{
	if (j->depth == 0) {
		j->truncated = true;
		return;
	}
	j->depth--;
	put(j, c, 1);
}

void vmio_json_object_begin(struct vmio_json *j)
{
	open_container(j, "{");
}

void vmio_json_object_end(struct vmio_json *j)
{
	close_container(j, "}");
}

void vmio_json_array_begin(struct vmio_json *j)
{
	open_container(j, "[");
}

void vmio_json_array_end(struct vmio_json *j)
{
	close_container(j, "]");
}

void vmio_json_string_n(struct vmio_json *j, const char *s, size_t len)
{
	separate(j);
	put_escaped(j, s, len);
}

void vmio_json_string(struct vmio_json *j, const char *s)
{
	if (!s) {
		vmio_json_null(j);
		return;
	}
	vmio_json_string_n(j, s, strlen(s));
}

void vmio_json_uint(struct vmio_json *j, uint64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRIu64, v);

	separate(j);
	put(j, num, (size_t)n);
}

void vmio_json_int(struct vmio_json *j, int64_t v)
{
	char num[24];
	int n = snprintf(num, sizeof(num), "%" PRId64, v);

	separate(j);
	put(j, num, (size_t)n);
}

void vmio_json_bool(struct vmio_json *j, bool v)
{
	separate(j);
	put(j, v ? "true" : "false", v ? 4 : 5);
}

void vmio_json_null(struct vmio_json *j)
{
	separate(j);
	put(j, "null", 4);
}

void vmio_json_raw(struct vmio_json *j, const char *text, size_t len)
{
	separate(j);
	put(j, text, len);
}
