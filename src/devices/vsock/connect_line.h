/* The first line a host program writes on a hybrid-vsock connection to
 * uds-path (Firecracker's protocol): `CONNECT <port>\n`, asking for a
 * connection to that port in the guest. Everything after the newline is
 * stream data for the guest, so the parser must stop exactly there.
 *
 * The bytes come from any local program and may arrive split anywhere
 * (one read per byte is legal), so the parser is incremental and keeps
 * its own bounded buffer: it never allocates, never reads past what it was
 * given, and refuses a line as soon as it cannot be valid (too long, NUL)
 * instead of waiting for a newline that may never come.
 *
 * Accepted, exactly:
 *   keyword   "CONNECT", any case (Kata Containers sends "connect")
 *   blanks    one or more spaces or tabs
 *   port      decimal digits, no sign, value in 0..4294967295
 *   end       an optional '\r', then '\n'
 * Nothing else: no leading or trailing blanks, no second argument. */
#ifndef VMIO_DEVICES_VSOCK_CONNECT_LINE_H
#define VMIO_DEVICES_VSOCK_CONNECT_LINE_H

#include <stddef.h>
#include <stdint.h>

/* Upper bound of the configurable maximum (--connect-line-max). The
 * longest valid line, "connect\t<...blanks...>4294967295\r\n", only needs
 * blanks to exceed 21 bytes, so this is generous. */
#define VSOCK_CONNECT_LINE_MAX_LIMIT 256

/* The smallest maximum accepted: "CONNECT 4294967295\r\n" is 20 bytes,
 * but a line of 16 still carries every port up to 5 digits; below that
 * even "CONNECT 1\n" would hardly fit and the option is surely a typo. */
#define VSOCK_CONNECT_LINE_MAX_MIN 16

enum vsock_line_result {
	VSOCK_LINE_MORE, /* all of data consumed, no newline yet */
	VSOCK_LINE_DONE, /* the line is complete and valid: *port is set */
	VSOCK_LINE_BAD,  /* the line can never be valid: *why says why */
};

struct vsock_connect_line {
	size_t max; /* longest line accepted, '\n' (and '\r') included */
	size_t len; /* bytes collected, '\n' excluded */
	/* The bytes collected so far, NUL-terminated once complete. len
	 * stays below max <= LIMIT, so the terminator always fits. */
	char buf[VSOCK_CONNECT_LINE_MAX_LIMIT];
	int finished; /* DONE or BAD was returned: nothing more accepted */
};

/* Starts a line of at most max_len bytes including its newline; max_len
 * is clamped to [VSOCK_CONNECT_LINE_MAX_MIN, VSOCK_CONNECT_LINE_MAX_LIMIT]. */
void vsock_connect_line_init(struct vsock_connect_line *l, size_t max_len);

/* Feeds the next len bytes the host socket gave. Sets *consumed to the
 * bytes of data that belong to the line:
 *   MORE  len (everything was taken, ask again with the next read)
 *   DONE  up to and including the '\n'; data[*consumed..len) is the
 *         start of the stream and is the caller's to forward
 *   BAD   up to and including the byte that made the line invalid (the
 *         caller closes the socket, so the rest does not matter)
 * *port is set only with DONE; *why (may be NULL) only with BAD, to a
 * static string for a log line. Once DONE or BAD was returned, the parser
 * is finished: further calls consume nothing and return BAD. */
enum vsock_line_result vsock_connect_line_feed(struct vsock_connect_line *l,
					       const uint8_t *data, size_t len,
					       size_t *consumed,
					       uint32_t *port,
					       const char **why);

/* A seqpacket host connection sends the line as its first message, and
 * the message is the line, nothing more: `CONNECT <port>\n` exactly as
 * above, its newline the message's last byte. Returns DONE with *port set,
 * or BAD with *why (may be NULL) set: a message without the newline at its
 * end (MORE is never returned: a message does not continue), anything
 * after it, or a line the parser refuses (too long for max_len included).
 * msg holds the whole message: a caller whose read was truncated refuses
 * the message itself. */
enum vsock_line_result vsock_connect_line_message(const uint8_t *msg,
						  size_t len, size_t max_len,
						  uint32_t *port,
						  const char **why);

#endif
