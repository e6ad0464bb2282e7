/* Fuzzes the hybrid-vsock CONNECT line parser: a host program chooses
 * every byte and how the reads split them.
 *
 * Input: [0] the line maximum (clamped by init), [1..3] chunk sizes
 * (0 means 1), cycled; the rest is the byte stream fed in those chunks.
 * Invariants checked:
 *   - *consumed <= the chunk; MORE consumes all of it
 *   - DONE at most once, and nothing is taken after DONE or BAD
 *   - a DONE line is at most max bytes, ends in '\n', and its port is
 *     what strtoul makes of the collected text (re-parsed independently)
 *   - the line never holds a NUL or more than max - 1 bytes
 * The whole stream is also parsed as one seqpacket message
 * (vsock_connect_line_message): never MORE, and DONE only for a message
 * that is exactly one valid line. */
#include <assert.h>
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "devices/vsock/connect_line.h"
#include "fuzz.h"

#define PREFIX 4u

/* Independent re-parse of a complete line (newline included) with the
 * C library, for the parser's port. */
static void check_done(const uint8_t *line, size_t n, uint32_t port)
{
	char tmp[VSOCK_CONNECT_LINE_MAX_LIMIT + 1];
	char *p, *end;
	unsigned long v;

	assert(n >= 2 && line[n - 1] == '\n');
	memcpy(tmp, line, n - 1);
	tmp[n - 1] = '\0';
	assert(strncasecmp(tmp, "connect", 7) == 0);
	assert(tmp[7] == ' ' || tmp[7] == '\t');
	p = tmp + 7;
	while (*p == ' ' || *p == '\t')
		p++;
	assert(isdigit((unsigned char)*p));
	errno = 0;
	v = strtoul(p, &end, 10);
	assert(errno == 0 && v <= UINT32_MAX && v == port);
	assert(*end == '\0' || (end[0] == '\r' && end[1] == '\0'));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t lay[PREFIX] = { 0 };
	struct vsock_connect_line l;
	const uint8_t *s;
	size_t n, off = 0, chunk_i = 0, line_len = 0;
	bool finished = false;
	int dones = 0;

	memcpy(lay, data, size < PREFIX ? size : PREFIX);
	s = data + (size < PREFIX ? size : PREFIX);
	n = size < PREFIX ? 0 : size - PREFIX;

	vsock_connect_line_init(&l, lay[0]);
	assert(l.max >= VSOCK_CONNECT_LINE_MAX_MIN &&
	       l.max <= VSOCK_CONNECT_LINE_MAX_LIMIT);

	{
		uint32_t port = 0;
		const char *why = NULL;
		enum vsock_line_result r =
			vsock_connect_line_message(s, n, lay[0], &port, &why);

		assert(r != VSOCK_LINE_MORE);
		if (r == VSOCK_LINE_DONE)
			check_done(s, n, port);
		else
			assert(why != NULL);
	}

	while (off < n) {
		size_t chunk = lay[1 + chunk_i++ % (PREFIX - 1)];
		size_t consumed = (size_t)-1;
		uint32_t port = 0;
		const char *why = NULL;
		enum vsock_line_result r;

		if (chunk == 0)
			chunk = 1;
		if (chunk > n - off)
			chunk = n - off;
		r = vsock_connect_line_feed(&l, s + off, chunk, &consumed,
					    &port, &why);
		assert(consumed <= chunk);
		if (finished) {
			assert(r == VSOCK_LINE_BAD && consumed == 0);
			break;
		}
		line_len += consumed;
		assert(l.len < l.max && memchr(l.buf, '\0', l.len) == NULL);
		switch (r) {
		case VSOCK_LINE_MORE:
			assert(consumed == chunk);
			break;
		case VSOCK_LINE_DONE:
			assert(++dones == 1);
			assert(line_len <= l.max);
			check_done(s, line_len, port);
			finished = true;
			/* Feed once more to see that nothing is taken. */
			off += consumed;
			continue;
		case VSOCK_LINE_BAD:
			assert(why != NULL);
			finished = true;
			break;
		}
		off += consumed;
	}
	return 0;
}
