#include "redirect/endpoint.h"

#include <errno.h>
#include <linux/vm_sockets.h>
#include <netdb.h>
#include <grp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/log.h"
#include "util/unix_socket.h"

#define DEFAULT_BACKLOG 128

static int resolve_inet(const char *host, unsigned port, int family,
			bool passive, struct sockaddr_storage *ss,
			socklen_t *len, char *err, size_t err_size)
{
	struct addrinfo hints = {
		.ai_family = family,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0),
	};
	struct addrinfo *res;
	char service[16];

	snprintf(service, sizeof(service), "%u", port);
	int rc = getaddrinfo(host, service, &hints, &res);
	if (rc) {
		snprintf(err, err_size, "cannot resolve '%s': %s",
			 host ? host : "", gai_strerror(rc));
		return -1;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* bind=host[:port]: an IPv6 host is bracketed when a port follows. */
static int resolve_bind_inet(const char *text, int family, bool passive,
			     unsigned default_port, struct sockaddr_storage *ss,
			     socklen_t *len, char *err, size_t err_size)
{
	char host[REDIR_HOST_MAX + 1];
	const char *colon = strchr(text, ':');
	unsigned long port = default_port;

	snprintf(host, sizeof(host), "%s", text);
	if (text[0] == '[') {
		char *close = strchr(host, ']');

		if (!close || (close[1] && close[1] != ':'))
			goto bad;
		*close = '\0';
		memmove(host, host + 1, strlen(host + 1) + 1);
		colon = strchr(text, ']')[1] ? strchr(text, ']') + 1 : NULL;
	} else if (colon && strchr(colon + 1, ':')) {
		colon = NULL; /* a bare IPv6 address, no port */
	} else if (colon) {
		host[colon - text] = '\0';
	}
	if (colon) {
		char *end;

		errno = 0;
		port = strtoul(colon + 1, &end, 10);
		if (errno || *end || end == colon + 1 || port > 65535)
			goto bad;
	}
	return resolve_inet(host, (unsigned)port, family, passive, ss, len,
			    err, err_size);
bad:
	snprintf(err, err_size, "option 'bind': '%s' is not host[:port]", text);
	return -1;
}

static void unix_sa(struct sockaddr_storage *ss, socklen_t *len,
		    const char *path)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)ss;

	memset(ss, 0, sizeof(*ss));
	sun->sun_family = AF_UNIX;
	/* The parser bounded every unix path to sun_path already. */
	memcpy(sun->sun_path, path,
	       strnlen(path, sizeof(sun->sun_path) - 1));
	*len = sizeof(*sun);
}

/* Stream only, refused before anything is opened otherwise: AF_VSOCK
 * datagrams exist on the VMCI transport alone, not virtio's, and seqpacket
 * has message boundaries that a stream relay would not keep. A listener
 * takes connections to any of the machine's CIDs, as socat's does. */
static int vsock_sa(struct redir_endpoint *ep, const struct redir_addr *a,
		    char *err, size_t err_size)
{
	struct sockaddr_vm *svm = (struct sockaddr_vm *)&ep->sa;

	if (a->socktype == SOCK_DGRAM) {
		snprintf(err, err_size,
			 "%s: type=2: AF_VSOCK datagrams are not supported",
			 a->keyword);
		return -1;
	}
	if (a->socktype != SOCK_STREAM) {
		snprintf(err, err_size,
			 "%s: type=%d: only stream vsock sockets are supported",
			 a->keyword, a->socktype);
		return -1;
	}
	svm->svm_family = AF_VSOCK;
	svm->svm_cid = a->kind == REDIR_VSOCK_LISTEN ? VMADDR_CID_ANY : a->cid;
	svm->svm_port = a->port;
	ep->sa_len = sizeof(*svm);
	return 0;
}

/* A number, or a name the user or group database knows. */
static int lookup_id(const char *text, bool user, int *id, char *err,
		     size_t err_size)
{
	uint64_t v;
	char *end;

	if (!text[0]) {
		*id = -1;
		return 0;
	}
	errno = 0;
	v = strtoull(text, &end, 10);
	if (!*end && !errno && text[0] >= '0' && text[0] <= '9' &&
	    v < (uint64_t)INT32_MAX) {
		*id = (int)v;
		return 0;
	}
	if (user) {
		struct passwd *pw = getpwnam(text);

		if (pw) {
			*id = (int)pw->pw_uid;
			return 0;
		}
	} else {
		struct group *gr = getgrnam(text);

		if (gr) {
			*id = (int)gr->gr_gid;
			return 0;
		}
	}
	snprintf(err, err_size, "option '%s': no such %s '%s'",
		 user ? "user" : "group", user ? "user" : "group", text);
	return -1;
}

/* TCP-LISTEN with no version and no bind=: ::, dual-stack (IPv4 too),
 * or 0.0.0.0 where IPv6 is missing (redir_endpoint_listen). */
static void any_inet6(struct redir_endpoint *ep, unsigned port)
{
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ep->sa;

	memset(&ep->sa, 0, sizeof(ep->sa));
	s6->sin6_family = AF_INET6;
	s6->sin6_addr = in6addr_any;
	s6->sin6_port = htons((uint16_t)port);
	ep->sa_len = sizeof(*s6);
}

int redir_endpoint_resolve(struct redir_endpoint *ep, const struct redir_addr *a,
			   char *err, size_t err_size)
{
	memset(ep, 0, sizeof(*ep));
	ep->addr = *a;
	if (lookup_id(a->user, true, &ep->uid, err, err_size) ||
	    lookup_id(a->group, false, &ep->gid, err, err_size))
		return -1;
	if (a->kind == REDIR_STDIO)
		return 0;
	switch (a->family) {
	case AF_UNIX:
		unix_sa(&ep->sa, &ep->sa_len, a->path);
		if (a->has_bind)
			unix_sa(&ep->bind_sa, &ep->bind_len, a->bind);
		return 0;
	case AF_INET:
	case AF_INET6:
	case AF_UNSPEC:
		if (a->kind == REDIR_TCP_LISTEN) {
			if (a->has_bind)
				return resolve_bind_inet(a->bind, a->family, true,
							 a->port, &ep->sa,
							 &ep->sa_len, err,
							 err_size);
			if (a->family == AF_UNSPEC) {
				any_inet6(ep, a->port);
				return 0;
			}
			return resolve_inet(NULL, a->port, a->family, true,
					    &ep->sa, &ep->sa_len, err, err_size);
		}
		if (resolve_inet(a->host, a->port, a->family, false, &ep->sa,
				 &ep->sa_len, err, err_size))
			return -1;
		if (a->has_bind)
			return resolve_bind_inet(a->bind, ep->sa.ss_family,
						 false, 0, &ep->bind_sa,
						 &ep->bind_len, err, err_size);
		return 0;
	case AF_VSOCK:
		return vsock_sa(ep, a, err, err_size);
	}
	snprintf(err, err_size, "%s: not supported yet", a->keyword);
	return -1;
}

static int set_reuseaddr(int fd)
{
	int one = 1;

	return setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ?
		       -errno : 0;
}

int redir_endpoint_bind_socket(struct redir_endpoint *ep, int fd)
{
	const struct redir_addr *a = &ep->addr;
	int rc;

	if (a->unlink_early && unlink(a->path) < 0 && errno != ENOENT) {
		rc = -errno;
		log_err("cannot unlink %s: %s", a->path, strerror(errno));
		return rc;
	}
	struct vmio_unix_perms perms = {
		.mode = a->has_mode ? (int)a->mode : -1,
		.uid = ep->uid,
		.gid = ep->gid,
	};
	rc = vmio_unix_bind_socket_perms(fd, a->path, a->socktype,
					 a->backlog ? a->backlog : DEFAULT_BACKLOG,
					 "redirect", &perms, &ep->st);
	if (!rc)
		ep->made_file = true;
	else
		log_err("cannot bind %s: %s", a->path, vmio_unix_strerror(rc));
	return rc;
}

static void any_inet4(struct redir_endpoint *ep, unsigned port)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ep->sa;

	memset(&ep->sa, 0, sizeof(ep->sa));
	s4->sin_family = AF_INET;
	s4->sin_addr.s_addr = htonl(INADDR_ANY);
	s4->sin_port = htons((uint16_t)port);
	ep->sa_len = sizeof(*s4);
}

/* TCP6-LISTEN is IPv6 only; TCP-LISTEN on an IPv6 address takes IPv4
 * too (mapped), whatever net.ipv6.bindv6only says. */
static int set_v6only(int fd, bool only)
{
	int v = only;

	return setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, sizeof(v)) < 0 ?
		       -errno : 0;
}

/* The vsock socket's buffer: its receive buffer, and since Linux
 * 6.12.69 also the most it keeps in flight towards its peer. The maximum
 * goes first, or the kernel would clamp the size to the old one (256 KiB).
 * Set before connect (or on the listener, whose connections inherit it),
 * the first credit the peer sees is already this one. */
static int set_vsock_buffer(int fd, uint32_t bytes)
{
	unsigned long long v = bytes;

	if (!bytes || bytes == REDIR_VSOCK_BUFFER_UNSET)
		return 0;
	if (setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_MAX_SIZE, &v,
		       sizeof(v)) < 0 ||
	    setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_SIZE, &v,
		       sizeof(v)) < 0) {
		int err = errno;

		log_err("cannot set the vsock buffer to %u bytes: %s", bytes,
			strerror(err));
		return -err;
	}
	return 0;
}

static int listen_inet(const struct redir_endpoint *ep, int backlog)
{
	const struct redir_addr *a = &ep->addr;
	int fd = socket(ep->sa.ss_family,
			SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int rc;

	if (fd < 0)
		return -errno;
	rc = a->reuseaddr ? set_reuseaddr(fd) : 0;
	if (!rc && a->family == AF_VSOCK)
		rc = set_vsock_buffer(fd, a->vsock_buffer);
	if (!rc && ep->sa.ss_family == AF_INET6)
		rc = set_v6only(fd, a->family == AF_INET6);
	if (!rc && (bind(fd, (const struct sockaddr *)&ep->sa, ep->sa_len) < 0 ||
		    listen(fd, backlog) < 0))
		rc = -errno;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int redir_endpoint_listen(struct redir_endpoint *ep)
{
	const struct redir_addr *a = &ep->addr;
	int backlog = a->backlog ? a->backlog : DEFAULT_BACKLOG;
	int fd, rc;

	if (a->family == AF_UNIX) {
		fd = socket(AF_UNIX,
			    a->socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		rc = redir_endpoint_bind_socket(ep, fd);
		if (rc) {
			close(fd);
			return rc;
		}
		return fd;
	}
	fd = listen_inet(ep, backlog);
	if (fd == -EAFNOSUPPORT || fd == -EADDRNOTAVAIL) {
		if (a->family == AF_UNSPEC && !a->has_bind) {
			/* No IPv6 here: IPv4 is all a dual-stack listener
			 * can serve. */
			log_debug("%s: no IPv6 (%s), listening on IPv4 only",
				  a->keyword, strerror(-fd));
			any_inet4(ep, a->port);
			fd = listen_inet(ep, backlog);
		}
	}
	if (fd < 0)
		log_err("cannot listen on %s port %u: %s", a->keyword, a->port,
			strerror(-fd));
	return fd;
}

void redir_endpoint_unlink(struct redir_endpoint *ep)
{
	if (ep->made_file)
		vmio_unix_unlink_if_same(ep->addr.path, &ep->st);
	ep->made_file = false;
}

static int connect_as(const struct redir_endpoint *ep, int socktype)
{
	const struct redir_addr *a = &ep->addr;
	int fd, rc = 0;

	fd = socket(ep->sa.ss_family, socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (a->reuseaddr)
		rc = set_reuseaddr(fd);
	if (!rc)
		rc = redir_endpoint_tune(ep, fd);
	if (!rc && ep->bind_len &&
	    bind(fd, (const struct sockaddr *)&ep->bind_sa, ep->bind_len) < 0)
		rc = -errno;
	if (!rc && connect(fd, (const struct sockaddr *)&ep->sa, ep->sa_len) < 0 &&
	    errno != EINPROGRESS)
		rc = -errno;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int redir_endpoint_connect(const struct redir_endpoint *ep)
{
	int fd = connect_as(ep, ep->addr.socktype);

	/* socat's UNIX-CLIENT takes whatever the peer is: a unix connect
	 * to a socket of another type fails at once with EPROTOTYPE, so
	 * the datagram retry costs nothing when the peer is a stream. */
	if (fd == -EPROTOTYPE && ep->addr.kind == REDIR_UNIX_CLIENT)
		fd = connect_as(ep, SOCK_DGRAM);
	return fd;
}

int redir_endpoint_tune(const struct redir_endpoint *ep, int fd)
{
	const struct redir_addr *a = &ep->addr;
	int one = 1;

	if (a->family == AF_VSOCK && a->kind != REDIR_VSOCK_LISTEN) {
		int rc = set_vsock_buffer(fd, a->vsock_buffer);

		if (rc)
			return rc;
	}

	if (a->nodelay &&
	    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)
		return -errno;
	if (a->keepalive &&
	    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) < 0)
		return -errno;
	return 0;
}

int redir_connect_result(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -errno;
	return -err;
}

const char *redir_endpoint_describe(const struct redir_endpoint *ep,
				    char *buf, size_t size)
{
	const struct redir_addr *a = &ep->addr;

	if (a->kind == REDIR_STDIO)
		snprintf(buf, size, "%s", a->keyword);
	else if (a->family == AF_UNIX)
		snprintf(buf, size, "%s:%s", a->keyword, a->path);
	else if (a->kind == REDIR_TCP_LISTEN || a->kind == REDIR_VSOCK_LISTEN)
		snprintf(buf, size, "%s:%u", a->keyword, a->port);
	else if (a->kind == REDIR_VSOCK_CONNECT)
		snprintf(buf, size, "%s:%u:%u", a->keyword, a->cid, a->port);
	else
		snprintf(buf, size, "%s:%s:%u", a->keyword, a->host, a->port);
	return buf;
}
