/* Fuzzes the socat-style address parser of vmio redirect: a user types
 * the text, and a typo must give a message, never a crash or a half-filled
 * address that later code would trust.
 *
 * Input: the address text (cut at the first NUL, as argv would be).
 * Invariants checked:
 *   - failure leaves a non-empty, terminated message
 *   - success: the text starts with the keyword reported, or with one of
 *     its aliases (socat's UNIX for UNIX-CLIENT, TCP-L for TCP-LISTEN...):
 *     then the same text with the reported spelling parses to the very
 *     same address
 *   - unix addresses have a non-empty path that fits sun_path; TCP ports
 *     fit 16 bits and a TCP connect has a host and a non-zero port
 *   - options are only set where they apply */
#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "fuzz.h"
#include "redirect/address.h"

/* The text as written, with its keyword spelled as reported. */
static void check_alias(const char *text, const struct redir_addr *a)
{
	size_t kw = strcspn(text, ":,"), canon = strlen(a->keyword);
	size_t rest = strlen(text + kw);
	char *again = malloc(canon + rest + 1), err[256];
	struct redir_addr b;

	if (kw == canon && !strncasecmp(text, a->keyword, kw))
		return free(again);
	assert(again);
	memcpy(again, a->keyword, canon);
	memcpy(again + canon, text + kw, rest + 1);
	assert(redir_addr_parse(again, &b, err, sizeof(err)) == 0);
	assert(!memcmp(a, &b, sizeof(b)));
	free(again);
}

static void check_ok(const char *text, const struct redir_addr *a)
{
	check_alias(text, a);
	switch (a->family) {
	case AF_UNIX:
		assert(a->path[0] && strlen(a->path) < sizeof(a->path));
		assert(a->socktype == SOCK_STREAM || a->socktype == SOCK_DGRAM ||
		       a->socktype == SOCK_SEQPACKET);
		break;
	case AF_INET:
	case AF_INET6:
	case AF_UNSPEC:
		assert(a->port <= 65535);
		if (a->kind == REDIR_TCP_CONNECT)
			assert(a->host[0] && a->port > 0);
		assert(a->socktype == SOCK_STREAM);
		break;
	case AF_VSOCK:
		assert(!a->has_bind);
		break;
	default:
		assert(0);
	}
	if (a->fork)
		assert(redir_addr_is_passive(a));
	if (a->has_bind)
		assert(a->bind[0] && strlen(a->bind) < sizeof(a->bind));
	assert(a->backlog >= 0 && a->backlog <= 65535);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text = malloc(size + 1);
	struct redir_addr a;
	char err[256];

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	memset(err, 0, sizeof(err));
	if (redir_addr_parse(text, &a, err, sizeof(err)) == 0) {
		check_ok(text, &a);
	} else {
		assert(err[0] && memchr(err, '\0', sizeof(err)));
	}
	free(text);
	return 0;
}
