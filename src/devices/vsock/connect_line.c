/* The hybrid-vsock CONNECT line. See connect_line.h. */
#include "devices/vsock/connect_line.h"

#include <stdbool.h>
#include <strings.h>

#define KEYWORD "connect"
#define KEYWORD_LEN (sizeof(KEYWORD) - 1)

void vsock_connect_line_init(struct vsock_connect_line *l, size_t max_len)
{
	if (max_len < VSOCK_CONNECT_LINE_MAX_MIN)
		max_len = VSOCK_CONNECT_LINE_MAX_MIN;
	if (max_len > VSOCK_CONNECT_LINE_MAX_LIMIT)
		max_len = VSOCK_CONNECT_LINE_MAX_LIMIT;
	l->max = max_len;
	l->len = 0;
	l->buf[0] = '\0';
	l->finished = 0;
}

static bool is_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Parses the complete line in l->buf (NUL-terminated, newline removed).
 * Returns NULL with *port set, or why it is invalid. Hand-rolled rather
 * than strtoul: strtoul skips leading blanks, accepts a sign (and wraps
 * "-1" to ULONG_MAX), and its range is unsigned long, not u32. */
static const char *parse(const char *s, size_t len, uint32_t *port)
{
	size_t i = KEYWORD_LEN;
	uint64_t v = 0;

	if (len > 0 && s[len - 1] == '\r')
		len--;
	if (len < KEYWORD_LEN || strncasecmp(s, KEYWORD, KEYWORD_LEN) != 0)
		return "unknown keyword (want CONNECT)";
	if (i == len || !is_blank(s[i])) {
		/* "CONNECTX 5" is a different keyword, "CONNECT" no port. */
		return i == len ? "missing port" : "unknown keyword (want CONNECT)";
	}
	while (i < len && is_blank(s[i]))
		i++;
	if (i == len)
		return "missing port";
	if (s[i] < '0' || s[i] > '9')
		return "port is not a decimal number";
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
		v = v * 10 + (uint64_t)(s[i] - '0');
		/* Checked per digit, so v never exceeds 10 * 2^32 + 9 and
		 * a port of any length cannot overflow the u64. */
		if (v > UINT32_MAX)
			return "port out of range";
	}
	if (i != len)
		return "trailing garbage after port";
	*port = (uint32_t)v;
	return NULL;
}

enum vsock_line_result vsock_connect_line_feed(struct vsock_connect_line *l,
					       const uint8_t *data, size_t len,
					       size_t *consumed,
					       uint32_t *port,
					       const char **why)
{
	const char *reason;
	size_t i;

	*consumed = 0;
	if (l->finished) {
		if (why)
			*why = "line already finished";
		return VSOCK_LINE_BAD;
	}
	for (i = 0; i < len; i++) {
		char c = (char)data[i];

		if (c == '\n') {
			*consumed = i + 1;
			l->buf[l->len] = '\0';
			l->finished = 1;
			reason = parse(l->buf, l->len, port);
			if (reason) {
				if (why)
					*why = reason;
				return VSOCK_LINE_BAD;
			}
			return VSOCK_LINE_DONE;
		}
		/* Refuse early: a NUL can never be part of a valid line, and
		 * waiting for the newline would let a peer hold the slot. */
		if (c == '\0') {
			*consumed = i + 1;
			l->finished = 1;
			if (why)
				*why = "NUL byte in line";
			return VSOCK_LINE_BAD;
		}
		/* The newline must still fit within max. */
		if (l->len + 1 >= l->max) {
			*consumed = i + 1;
			l->finished = 1;
			if (why)
				*why = "line too long";
			return VSOCK_LINE_BAD;
		}
		l->buf[l->len++] = c;
	}
	*consumed = len;
	return VSOCK_LINE_MORE;
}

enum vsock_line_result vsock_connect_line_message(const uint8_t *msg,
						  size_t len, size_t max_len,
						  uint32_t *port,
						  const char **why)
{
	struct vsock_connect_line l;
	enum vsock_line_result r;
	size_t consumed = 0;

	vsock_connect_line_init(&l, max_len);
	r = vsock_connect_line_feed(&l, msg, len, &consumed, port, why);
	if (r == VSOCK_LINE_MORE) {
		if (why)
			*why = "first message is not a whole line";
		return VSOCK_LINE_BAD;
	}
	if (r == VSOCK_LINE_DONE && consumed != len) {
		if (why)
			*why = "more than the line in its message";
		return VSOCK_LINE_BAD;
	}
	return r;
}
