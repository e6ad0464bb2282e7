#include "redirect/address.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

/* Which parameters follow a keyword's colon. */
enum params {
	P_PATH,      /* UNIX-*: path */
	P_PORT,      /* *-LISTEN: port */
	P_HOST_PORT, /* TCP: host:port */
	P_CID_PORT,  /* VSOCK-CONNECT: cid:port */
};

struct keyword {
	const char *name;
	enum redir_kind kind;
	int family;
	int socktype;
	enum params params;
};

static const struct keyword keywords[] = {
	{ "UNIX-LISTEN", REDIR_UNIX_LISTEN, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX-CONNECT", REDIR_UNIX_CONNECT, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX-CLIENT", REDIR_UNIX_CLIENT, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX-RECV", REDIR_UNIX_RECV, AF_UNIX, SOCK_DGRAM, P_PATH },
	{ "UNIX-SENDTO", REDIR_UNIX_SENDTO, AF_UNIX, SOCK_DGRAM, P_PATH },
	/* A listener with no version listens on IPv4, as socat does. */
	{ "TCP-LISTEN", REDIR_TCP_LISTEN, AF_INET, SOCK_STREAM, P_PORT },
	{ "TCP4-LISTEN", REDIR_TCP_LISTEN, AF_INET, SOCK_STREAM, P_PORT },
	{ "TCP6-LISTEN", REDIR_TCP_LISTEN, AF_INET6, SOCK_STREAM, P_PORT },
	{ "TCP", REDIR_TCP_CONNECT, AF_UNSPEC, SOCK_STREAM, P_HOST_PORT },
	{ "TCP4", REDIR_TCP_CONNECT, AF_INET, SOCK_STREAM, P_HOST_PORT },
	{ "TCP6", REDIR_TCP_CONNECT, AF_INET6, SOCK_STREAM, P_HOST_PORT },
	{ "VSOCK-LISTEN", REDIR_VSOCK_LISTEN, AF_VSOCK, SOCK_STREAM, P_PORT },
	{ "VSOCK-CONNECT", REDIR_VSOCK_CONNECT, AF_VSOCK, SOCK_STREAM, P_CID_PORT },
};

bool redir_addr_is_passive(const struct redir_addr *a)
{
	return a->kind == REDIR_UNIX_LISTEN || a->kind == REDIR_UNIX_RECV ||
	       a->kind == REDIR_TCP_LISTEN || a->kind == REDIR_VSOCK_LISTEN;
}

static bool is_unix(const struct redir_addr *a)
{
	return a->family == AF_UNIX;
}

static bool is_listener(const struct redir_addr *a)
{
	return a->kind == REDIR_UNIX_LISTEN || a->kind == REDIR_TCP_LISTEN ||
	       a->kind == REDIR_VSOCK_LISTEN;
}

/* Strict decimal: strtoul would take signs, spaces and hex. */
static int parse_dec(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		if (v > (max - (uint64_t)(s[i] - '0')) / 10)
			return -1;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	*out = v;
	return 0;
}

static int copy_bounded(char *dst, size_t dst_size, const char *s, size_t n)
{
	if (n >= dst_size)
		return -1;
	memcpy(dst, s, n);
	dst[n] = '\0';
	return 0;
}

static int parse_port(const char *s, size_t n, uint32_t max, uint32_t *out)
{
	uint64_t v;

	if (parse_dec(s, n, max, &v))
		return -1;
	*out = (uint32_t)v;
	return 0;
}

/* "host:port", where an IPv6 host is written in brackets ("[::1]:80"). */
static int parse_host_port(struct redir_addr *a, const char *s, size_t n,
			   char *err, size_t err_size)
{
	const char *colon, *host = s;
	size_t host_len;

	if (n && s[0] == '[') {
		const char *close = memchr(s, ']', n);

		if (!close || close + 1 >= s + n || close[1] != ':') {
			snprintf(err, err_size,
				 "%s: '%.*s' is not [ipv6-address]:port",
				 a->keyword, (int)n, s);
			return -1;
		}
		host = s + 1;
		host_len = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = NULL;
		for (size_t i = n; i-- > 0;) {
			if (s[i] == ':') {
				colon = s + i;
				break;
			}
		}
		if (!colon) {
			snprintf(err, err_size, "%s: '%.*s' has no ':port'",
				 a->keyword, (int)n, s);
			return -1;
		}
		host_len = (size_t)(colon - s);
	}
	if (host_len == 0 || memchr(host, '\0', host_len) ||
	    copy_bounded(a->host, sizeof(a->host), host, host_len)) {
		snprintf(err, err_size, "%s: bad host '%.*s'", a->keyword,
			 (int)host_len, host);
		return -1;
	}
	size_t port_len = (size_t)(s + n - colon - 1);
	if (parse_port(colon + 1, port_len, 65535, &a->port) || a->port == 0) {
		snprintf(err, err_size, "%s: bad port '%.*s' (1 to 65535)",
			 a->keyword, (int)port_len, colon + 1);
		return -1;
	}
	return 0;
}

static int parse_params(struct redir_addr *a, enum params p, const char *s,
			size_t n, char *err, size_t err_size)
{
	const char *colon;

	switch (p) {
	case P_PATH:
		if (n == 0) {
			snprintf(err, err_size, "%s: empty path", a->keyword);
			return -1;
		}
		if (copy_bounded(a->path, sizeof(a->path), s, n)) {
			snprintf(err, err_size,
				 "%s: path longer than %zu bytes", a->keyword,
				 sizeof(a->path) - 1);
			return -1;
		}
		return 0;
	case P_PORT: {
		uint32_t max = a->family == AF_VSOCK ? UINT32_MAX : 65535;

		if (parse_port(s, n, max, &a->port)) {
			snprintf(err, err_size, "%s: bad port '%.*s' (0 to %u)",
				 a->keyword, (int)n, s, max);
			return -1;
		}
		return 0;
	}
	case P_HOST_PORT:
		return parse_host_port(a, s, n, err, err_size);
	case P_CID_PORT:
		colon = memchr(s, ':', n);
		if (!colon ||
		    parse_port(s, (size_t)(colon - s), UINT32_MAX, &a->cid) ||
		    parse_port(colon + 1, (size_t)(s + n - colon - 1),
			       UINT32_MAX, &a->port)) {
			snprintf(err, err_size, "%s: '%.*s' is not cid:port",
				 a->keyword, (int)n, s);
			return -1;
		}
		return 0;
	}
	return -1;
}

static int not_here(const struct redir_addr *a, const char *opt, char *err,
		    size_t err_size)
{
	snprintf(err, err_size, "option '%s' does not apply to %s", opt,
		 a->keyword);
	return -1;
}

/* One "name" or "name=value" option of length n at s. */
static int parse_option(struct redir_addr *a, const char *s, size_t n,
			char *err, size_t err_size)
{
	const char *eq = memchr(s, '=', n);
	size_t name_len = eq ? (size_t)(eq - s) : n;
	const char *val = eq ? eq + 1 : NULL;
	size_t val_len = eq ? (size_t)(s + n - eq - 1) : 0;
	char name[32];

	if (name_len == 0 || copy_bounded(name, sizeof(name), s, name_len)) {
		snprintf(err, err_size, "%s: unsupported option '%.*s'",
			 a->keyword, (int)(n > 64 ? 64 : n), s);
		return -1;
	}
	bool flag = !strcasecmp(name, "fork") || !strcasecmp(name, "reuseaddr") ||
		    !strcasecmp(name, "unlink-early");
	if (flag && val) {
		snprintf(err, err_size, "option '%s' takes no value", name);
		return -1;
	}
	if (!flag && !val && (!strcasecmp(name, "bind") ||
			      !strcasecmp(name, "backlog") ||
			      !strcasecmp(name, "type"))) {
		snprintf(err, err_size, "option '%s' needs '=value'", name);
		return -1;
	}

	if (!strcasecmp(name, "fork")) {
		if (!redir_addr_is_passive(a))
			return not_here(a, name, err, err_size);
		a->fork = true;
	} else if (!strcasecmp(name, "reuseaddr")) {
		a->reuseaddr = true;
	} else if (!strcasecmp(name, "unlink-early")) {
		if (a->kind != REDIR_UNIX_LISTEN && a->kind != REDIR_UNIX_RECV)
			return not_here(a, name, err, err_size);
		a->unlink_early = true;
	} else if (!strcasecmp(name, "bind")) {
		if (a->family == AF_VSOCK || a->kind == REDIR_UNIX_LISTEN ||
		    a->kind == REDIR_UNIX_RECV)
			return not_here(a, name, err, err_size);
		size_t max = is_unix(a) ? sizeof(a->path) : sizeof(a->bind);
		if (val_len == 0 || val_len >= max || memchr(val, '\0', val_len)) {
			snprintf(err, err_size, "option 'bind': bad value '%.*s'",
				 (int)(val_len > 64 ? 64 : val_len), val);
			return -1;
		}
		copy_bounded(a->bind, sizeof(a->bind), val, val_len);
		a->has_bind = true;
	} else if (!strcasecmp(name, "backlog")) {
		uint32_t v;

		if (!is_listener(a))
			return not_here(a, name, err, err_size);
		if (parse_port(val, val_len, 65535, &v) || v == 0) {
			snprintf(err, err_size,
				 "option 'backlog': '%.*s' is not 1 to 65535",
				 (int)(val_len > 64 ? 64 : val_len), val);
			return -1;
		}
		a->backlog = (int)v;
	} else if (!strcasecmp(name, "type")) {
		uint32_t v;

		/* socat takes type= on vsock too; what vsock cannot do
		 * (datagrams, seqpacket) is refused with its reason when
		 * the address is resolved. */
		bool vsock = a->family == AF_VSOCK;

		if ((!is_unix(a) && !vsock) || a->socktype == SOCK_DGRAM)
			return not_here(a, name, err, err_size);
		if (parse_port(val, val_len, 255, &v) ||
		    (v != SOCK_STREAM && v != SOCK_SEQPACKET &&
		     !(vsock && v == SOCK_DGRAM))) {
			snprintf(err, err_size,
				 "option 'type': '%.*s' is not supported (1 stream, 5 seqpacket)",
				 (int)(val_len > 64 ? 64 : val_len), val);
			return -1;
		}
		a->socktype = (int)v;
	} else {
		snprintf(err, err_size, "%s: unsupported option '%s'",
			 a->keyword, name);
		return -1;
	}
	return 0;
}

int redir_addr_parse(const char *text, struct redir_addr *a, char *err,
		     size_t err_size)
{
	const struct keyword *kw = NULL;
	const char *colon = strchr(text, ':');
	size_t kw_len = colon ? (size_t)(colon - text) : strcspn(text, ",");

	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++) {
		if (strlen(keywords[i].name) == kw_len &&
		    !strncasecmp(text, keywords[i].name, kw_len)) {
			kw = &keywords[i];
			break;
		}
	}
	if (!kw) {
		snprintf(err, err_size, "unsupported address '%.*s'",
			 (int)(kw_len > 64 ? 64 : kw_len), text);
		return -1;
	}
	a->kind = kw->kind;
	a->keyword = kw->name;
	a->family = kw->family;
	a->socktype = kw->socktype;
	if (!colon) {
		snprintf(err, err_size, "%s: missing ':' and its parameters",
			 kw->name);
		return -1;
	}

	/* Parameters end at the first comma: a path cannot hold one, as in
	 * socat. */
	const char *p = colon + 1;
	size_t plen = strcspn(p, ",");
	if (parse_params(a, kw->params, p, plen, err, err_size))
		return -1;

	p += plen;
	while (*p == ',') {
		p++;
		size_t olen = strcspn(p, ",");
		if (olen == 0) {
			snprintf(err, err_size, "%s: empty option", kw->name);
			return -1;
		}
		if (parse_option(a, p, olen, err, err_size))
			return -1;
		p += olen;
	}
	return 0;
}
