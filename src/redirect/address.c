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
	P_NONE,      /* STDIO: no colon */
};

struct keyword {
	const char *name;      /* as written, any case */
	const char *canonical; /* for messages */
	enum redir_kind kind;
	int family;
	int socktype;
	enum params params;
};

/* socat's names and its aliases (socat(1), ADDRESS TYPES), for the types
 * vmio serves. */
static const struct keyword keywords[] = {
	{ "UNIX-LISTEN", "UNIX-LISTEN", REDIR_UNIX_LISTEN, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX-L", "UNIX-LISTEN", REDIR_UNIX_LISTEN, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX-CONNECT", "UNIX-CONNECT", REDIR_UNIX_CONNECT, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX-CLIENT", "UNIX-CLIENT", REDIR_UNIX_CLIENT, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX", "UNIX-CLIENT", REDIR_UNIX_CLIENT, AF_UNIX, SOCK_STREAM, P_PATH },
	{ "UNIX-RECV", "UNIX-RECV", REDIR_UNIX_RECV, AF_UNIX, SOCK_DGRAM, P_PATH },
	{ "UNIX-SENDTO", "UNIX-SENDTO", REDIR_UNIX_SENDTO, AF_UNIX, SOCK_DGRAM, P_PATH },
	/* No version: IPv6 and IPv4 both (a dual-stack socket on ::, or
	 * IPv4 alone where the machine has no IPv6). */
	{ "TCP-LISTEN", "TCP-LISTEN", REDIR_TCP_LISTEN, AF_UNSPEC, SOCK_STREAM, P_PORT },
	{ "TCP-L", "TCP-LISTEN", REDIR_TCP_LISTEN, AF_UNSPEC, SOCK_STREAM, P_PORT },
	{ "TCP4-LISTEN", "TCP4-LISTEN", REDIR_TCP_LISTEN, AF_INET, SOCK_STREAM, P_PORT },
	{ "TCP4-L", "TCP4-LISTEN", REDIR_TCP_LISTEN, AF_INET, SOCK_STREAM, P_PORT },
	{ "TCP6-LISTEN", "TCP6-LISTEN", REDIR_TCP_LISTEN, AF_INET6, SOCK_STREAM, P_PORT },
	{ "TCP6-L", "TCP6-LISTEN", REDIR_TCP_LISTEN, AF_INET6, SOCK_STREAM, P_PORT },
	{ "TCP", "TCP", REDIR_TCP_CONNECT, AF_UNSPEC, SOCK_STREAM, P_HOST_PORT },
	{ "TCP-CONNECT", "TCP", REDIR_TCP_CONNECT, AF_UNSPEC, SOCK_STREAM, P_HOST_PORT },
	{ "TCP4", "TCP4", REDIR_TCP_CONNECT, AF_INET, SOCK_STREAM, P_HOST_PORT },
	{ "TCP4-CONNECT", "TCP4", REDIR_TCP_CONNECT, AF_INET, SOCK_STREAM, P_HOST_PORT },
	{ "TCP6", "TCP6", REDIR_TCP_CONNECT, AF_INET6, SOCK_STREAM, P_HOST_PORT },
	{ "TCP6-CONNECT", "TCP6", REDIR_TCP_CONNECT, AF_INET6, SOCK_STREAM, P_HOST_PORT },
	{ "VSOCK-LISTEN", "VSOCK-LISTEN", REDIR_VSOCK_LISTEN, AF_VSOCK, SOCK_STREAM, P_PORT },
	{ "VSOCK-L", "VSOCK-LISTEN", REDIR_VSOCK_LISTEN, AF_VSOCK, SOCK_STREAM, P_PORT },
	{ "VSOCK-CONNECT", "VSOCK-CONNECT", REDIR_VSOCK_CONNECT, AF_VSOCK, SOCK_STREAM, P_CID_PORT },
	{ "STDIO", "STDIO", REDIR_STDIO, AF_UNSPEC, SOCK_STREAM, P_NONE },
	{ "-", "STDIO", REDIR_STDIO, AF_UNSPEC, SOCK_STREAM, P_NONE },
};

/* socat's other address types (and aliases), named when refused so that
 * a socat command line gets a clear "not this one" instead of a typo's
 * message. */
static const char *const socat_only[] = {
	"ABSTRACT", "ABSTRACT-CLIENT", "ABSTRACT-CONNECT", "ABSTRACT-L",
	"ABSTRACT-LISTEN", "ABSTRACT-RECV", "ABSTRACT-RECVFROM",
	"ABSTRACT-SENDTO", "ACCEPT-FD", "CREATE", "CREAT", "DCCP-CONNECT",
	"DCCP-LISTEN", "EXEC", "FD", "FILE", "GOPEN", "INTERFACE", "IP",
	"IP-DATAGRAM", "IP-DGRAM", "IP-RECV", "IP-RECVFROM", "IP-SENDTO",
	"IP4", "IP4-DATAGRAM", "IP4-RECV", "IP4-RECVFROM", "IP4-SENDTO", "IP6",
	"IP6-DATAGRAM", "IP6-RECV", "IP6-RECVFROM", "IP6-SENDTO",
	"NAMED", "OPEN", "OPENSSL", "OPENSSL-CONNECT", "OPENSSL-DTLS-CLIENT",
	"OPENSSL-DTLS-SERVER", "OPENSSL-LISTEN", "PIPE", "POSIXMQ-READ",
	"POSIXMQ-RECEIVE", "POSIXMQ-SEND", "POSIXMQ-BIDIRECTIONAL", "PROXY",
	"PROXY-CONNECT", "PTY", "READLINE", "SCTP", "SCTP-CONNECT",
	"SCTP-LISTEN", "SCTP4", "SCTP4-CONNECT", "SCTP4-LISTEN", "SCTP6",
	"SCTP6-CONNECT", "SCTP6-LISTEN", "SHELL", "SOCKET-CONNECT",
	"SOCKET-DATAGRAM", "SOCKET-LISTEN", "SOCKET-RECV", "SOCKET-RECVFROM",
	"SOCKET-SENDTO", "SOCKETPAIR", "SOCKS", "SOCKS4", "SOCKS4A", "SOCKS5",
	"SOCKS5-CONNECT", "SOCKS5-LISTEN", "SSL", "SSL-L", "STDERR", "STDIN",
	"STDOUT", "SYSTEM", "TUN", "UDP", "UDP-CONNECT", "UDP-DATAGRAM",
	"UDP-L", "UDP-LISTEN", "UDP-RECV", "UDP-RECVFROM", "UDP-SENDTO", "UDP4",
	"UDP4-CONNECT", "UDP4-DATAGRAM", "UDP4-L", "UDP4-LISTEN", "UDP4-RECV",
	"UDP4-RECVFROM", "UDP4-SENDTO", "UDP6", "UDP6-CONNECT", "UDP6-DATAGRAM",
	"UDP6-L", "UDP6-LISTEN", "UDP6-RECV", "UDP6-RECVFROM", "UDP6-SENDTO",
	"UDPLITE-CONNECT", "UDPLITE-LISTEN", "UNIX-RECVFROM",
};

bool redir_addr_connects(const struct redir_addr *a)
{
	return a->kind == REDIR_UNIX_CONNECT || a->kind == REDIR_UNIX_CLIENT ||
	       a->kind == REDIR_UNIX_SENDTO || a->kind == REDIR_TCP_CONNECT ||
	       a->kind == REDIR_VSOCK_CONNECT;
}

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
	case P_NONE:
		return 0;
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

static bool is_tcp(const struct redir_addr *a)
{
	return a->kind == REDIR_TCP_LISTEN || a->kind == REDIR_TCP_CONNECT;
}

/* The socket files vmio makes: a unix listener's, UNIX-RECV's. */
static bool makes_file(const struct redir_addr *a)
{
	return a->kind == REDIR_UNIX_LISTEN || a->kind == REDIR_UNIX_RECV;
}

/* socat's longer spellings of the options vmio takes. */
static const char *option_alias(const char *name)
{
	static const char *const aliases[][2] = {
		{ "so-reuseaddr", "reuseaddr" }, { "tcp-nodelay", "nodelay" },
		{ "so-keepalive", "keepalive" }, { "perm", "mode" },
		{ "owner", "user" },
	};

	for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
		if (!strcasecmp(name, aliases[i][0]))
			return aliases[i][1];
	return name;
}

static bool is_flag(const char *name)
{
	static const char *const flags[] = { "fork", "reuseaddr",
		"unlink-early", "nodelay", "keepalive" };

	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (!strcasecmp(name, flags[i]))
			return true;
	return false;
}

static int bad_value(const char *name, const char *val, size_t val_len,
		     const char *what, char *err, size_t err_size)
{
	snprintf(err, err_size, "option '%s': '%.*s' is not %s", name,
		 (int)(val_len > 64 ? 64 : val_len), val, what);
	return -1;
}

/* SECONDS with an optional fraction ("2", "0.25"), down to the
 * microsecond, as socat's connect-timeout takes it; 1 us to a day. */
static int parse_seconds(const char *s, size_t n, uint64_t *ns)
{
	const char *dot = memchr(s, '.', n);
	size_t int_len = dot ? (size_t)(dot - s) : n;
	uint64_t whole = 0, frac = 0, scale = 1000000000u;

	if (int_len && parse_dec(s, int_len, 86400, &whole))
		return -1;
	if (dot) {
		size_t frac_len = (size_t)(s + n - dot - 1);

		if (frac_len == 0 || frac_len > 6 ||
		    parse_dec(dot + 1, frac_len, 999999, &frac))
			return -1;
		for (size_t i = 0; i < frac_len; i++)
			scale /= 10;
		frac *= scale;
	} else if (int_len == 0) {
		return -1;
	}
	*ns = whole * 1000000000u + frac;
	return *ns && *ns <= 86400ull * 1000000000u ? 0 : -1;
}

/* A size in bytes, with an optional k, m or g suffix (powers of 1024). */
static int parse_size(const char *s, size_t n, uint64_t max, uint64_t *out)
{
	unsigned shift = 0;

	if (n > 1) {
		switch (s[n - 1]) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		}
	}
	if (shift)
		n--;
	/* Bounded here: parse_dec's check wraps for a bound below 9. */
	if (parse_dec(s, n, UINT64_MAX >> shift, out) || *out > max >> shift)
		return -1;
	*out <<= shift;
	return 0;
}

/* user= and group=: a name or a number, looked up when the address is
 * resolved. */
static int copy_id(char *dst, size_t size, const char *name, const char *val,
		   size_t val_len, char *err, size_t err_size)
{
	if (val_len == 0 || memchr(val, '\0', val_len) ||
	    copy_bounded(dst, size, val, val_len))
		return bad_value(name, val, val_len, "a user or group name",
				 err, err_size);
	return 0;
}

/* One "name" or "name=value" option of length n at s. */
static int parse_option(struct redir_addr *a, const char *s, size_t n,
			char *err, size_t err_size)
{
	const char *eq = memchr(s, '=', n);
	size_t name_len = eq ? (size_t)(eq - s) : n;
	const char *val = eq ? eq + 1 : NULL;
	size_t val_len = eq ? (size_t)(s + n - eq - 1) : 0;
	char written[32];
	const char *name;

	if (name_len == 0 || copy_bounded(written, sizeof(written), s, name_len)) {
		snprintf(err, err_size, "%s: unsupported option '%.*s'",
			 a->keyword, (int)(n > 64 ? 64 : n), s);
		return -1;
	}
	name = option_alias(written);
	bool flag = is_flag(name);
	if (flag && val) {
		snprintf(err, err_size, "option '%s' takes no value", written);
		return -1;
	}
	if (!flag && !val && (!strcasecmp(name, "bind") ||
			      !strcasecmp(name, "backlog") ||
			      !strcasecmp(name, "type") ||
			      !strcasecmp(name, "connect-timeout") ||
			      !strcasecmp(name, "vsock-buffer") ||
			      !strcasecmp(name, "mode") ||
			      !strcasecmp(name, "user") ||
			      !strcasecmp(name, "group"))) {
		snprintf(err, err_size, "option '%s' needs '=value'", written);
		return -1;
	}

	if (!strcasecmp(name, "fork")) {
		if (!redir_addr_is_passive(a))
			return not_here(a, written, err, err_size);
		a->fork = true;
	} else if (!strcasecmp(name, "reuseaddr")) {
		if (a->kind == REDIR_STDIO)
			return not_here(a, written, err, err_size);
		a->reuseaddr = true;
	} else if (!strcasecmp(name, "nodelay")) {
		if (!is_tcp(a))
			return not_here(a, written, err, err_size);
		a->nodelay = true;
	} else if (!strcasecmp(name, "keepalive")) {
		if (!is_tcp(a))
			return not_here(a, written, err, err_size);
		a->keepalive = true;
	} else if (!strcasecmp(name, "connect-timeout")) {
		if (!redir_addr_connects(a))
			return not_here(a, written, err, err_size);
		if (parse_seconds(val, val_len, &a->connect_timeout_ns))
			return bad_value(written, val, val_len,
					 "0.000001 to 86400 seconds", err,
					 err_size);
	} else if (!strcasecmp(name, "vsock-buffer")) {
		uint64_t v;

		if (a->family != AF_VSOCK)
			return not_here(a, written, err, err_size);
		if (parse_size(val, val_len, REDIR_VSOCK_BUFFER_MAX, &v) ||
		    (v && v < 4096))
			return bad_value(written, val, val_len,
					 "0 (the kernel's) or 4k to 64m", err,
					 err_size);
		a->vsock_buffer = (uint32_t)v;
	} else if (!strcasecmp(name, "mode")) {
		unsigned v = 0;

		if (!makes_file(a))
			return not_here(a, written, err, err_size);
		if (val_len == 0 || val_len > 5)
			return bad_value(written, val, val_len,
					 "an octal mode (0 to 7777)", err,
					 err_size);
		for (size_t i = 0; i < val_len; i++) {
			if (val[i] < '0' || val[i] > '7')
				return bad_value(written, val, val_len,
						 "an octal mode (0 to 7777)",
						 err, err_size);
			v = v * 8 + (unsigned)(val[i] - '0');
		}
		if (v > 07777)
			return bad_value(written, val, val_len,
					 "an octal mode (0 to 7777)", err,
					 err_size);
		a->mode = v;
		a->has_mode = true;
	} else if (!strcasecmp(name, "user") || !strcasecmp(name, "group")) {
		bool user = !strcasecmp(name, "user");

		if (!makes_file(a))
			return not_here(a, written, err, err_size);
		if (copy_id(user ? a->user : a->group, sizeof(a->user), written,
			    val, val_len, err, err_size))
			return -1;
	} else if (!strcasecmp(name, "unlink-early")) {
		if (!makes_file(a))
			return not_here(a, written, err, err_size);
		a->unlink_early = true;
	} else if (!strcasecmp(name, "bind")) {
		if (a->family == AF_VSOCK || makes_file(a) ||
		    a->kind == REDIR_STDIO)
			return not_here(a, written, err, err_size);
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
			return not_here(a, written, err, err_size);
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
			return not_here(a, written, err, err_size);
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
			 a->keyword, written);
		return -1;
	}
	return 0;
}

static const struct keyword *find_keyword(const char *text, size_t len)
{
	for (size_t i = 0; i < sizeof(keywords) / sizeof(keywords[0]); i++)
		if (strlen(keywords[i].name) == len &&
		    !strncasecmp(text, keywords[i].name, len))
			return &keywords[i];
	return NULL;
}

static void refuse_keyword(const char *text, size_t len, char *err,
			   size_t err_size)
{
	for (size_t i = 0; i < sizeof(socat_only) / sizeof(socat_only[0]); i++) {
		if (strlen(socat_only[i]) == len &&
		    !strncasecmp(text, socat_only[i], len)) {
			snprintf(err, err_size,
				 "socat's address type %s is not supported by vmio redirect (--help lists those it takes)",
				 socat_only[i]);
			return;
		}
	}
	snprintf(err, err_size, "unsupported address '%.*s'",
		 (int)(len > 64 ? 64 : len), text);
}

int redir_addr_parse(const char *text, struct redir_addr *a, char *err,
		     size_t err_size)
{
	size_t kw_len = strcspn(text, ":,");
	const struct keyword *kw = find_keyword(text, kw_len);
	const char *p = text + kw_len;

	memset(a, 0, sizeof(*a));
	if (!kw) {
		refuse_keyword(text, kw_len, err, err_size);
		return -1;
	}
	a->kind = kw->kind;
	a->keyword = kw->canonical;
	a->family = kw->family;
	a->socktype = kw->socktype;
	if (a->family == AF_VSOCK)
		a->vsock_buffer = REDIR_VSOCK_BUFFER_UNSET;
	if (kw->params == P_NONE && *p == ':') {
		snprintf(err, err_size, "%s takes no ':' parameters", a->keyword);
		return -1;
	}
	if (kw->params != P_NONE) {
		if (*p != ':') {
			snprintf(err, err_size,
				 "%s: missing ':' and its parameters", a->keyword);
			return -1;
		}
		/* Parameters end at the first comma: a path cannot hold
		 * one, as in socat. */
		p++;
		size_t plen = strcspn(p, ",");
		if (parse_params(a, kw->params, p, plen, err, err_size))
			return -1;
		p += plen;
	}
	while (*p == ',') {
		p++;
		size_t olen = strcspn(p, ",");
		if (olen == 0) {
			snprintf(err, err_size, "%s: empty option", a->keyword);
			return -1;
		}
		if (parse_option(a, p, olen, err, err_size))
			return -1;
		p += olen;
	}
	return 0;
}
