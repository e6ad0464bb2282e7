/* The hybrid vsock listener; see hybrid.h. */
#include "devices/vsock/hybrid.h"
#include "devices/vsock/hybrid_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "devices/vsock/packet.h"
#include "util/unix_socket.h"

/* Takes p off the list; its fd is the caller's (closed or handed on). */
static void pending_unlink(struct vsock_hybrid *h, struct hy_pending *p)
{
	vmio_loop_remove(h->loop, p->fd);
	if (p->prev)
		p->prev->next = p->next;
	else
		h->pending = p->next;
	if (p->next)
		p->next->prev = p->prev;
	h->npending--;
	free(p);
}

static void pending_close(struct vsock_hybrid *h, struct hy_pending *p)
{
	int fd = p->fd;

	pending_unlink(h, p);
	close(fd);
}

static const char *refusal_reason(int rc)
{
	if (rc == -ENOSPC)
		return "too many connections";
	if (rc == -ENOTCONN)
		return "no VM is attached";
	if (rc == -EPROTONOSUPPORT)
		return "the guest did not negotiate this socket type";
	if (rc == -EADDRINUSE)
		return "every host port of --host-port-range is in use towards "
		       "that guest port";
	return strerror(-rc);
}

static void line_done(struct vsock_hybrid *h, struct hy_pending *p,
		      uint32_t port)
{
	int fd = p->fd, rc;
	uint16_t type = p->type;
	uint32_t local;

	pending_unlink(h, p);
	rc = vsock_muxer_connect_local_type(h->mux, fd, type, port, &local);
	if (rc)
		vsock_peer_log(&h->rl, VMIO_LOG_WARN,
			       "vsock: %s: CONNECT %u refused: %s", h->path,
			       port, refusal_reason(rc));
	else
		vsock_peer_log(&h->rl, VMIO_LOG_DEBUG,
			       "vsock: %s: CONNECT %u as host port %u",
			       h->path, port, local);
}

static void pending_cb(void *opaque, int fd, uint32_t events)
{
	struct hy_pending *p = opaque;
	struct vsock_hybrid *h = p->h;
	uint8_t buf[VSOCK_CONNECT_LINE_MAX_LIMIT];
	enum vsock_line_result r;
	const char *why = NULL;
	size_t consumed = 0;
	uint32_t port = 0;
	bool seq = p->type == VSOCK_TYPE_SEQPACKET;
	ssize_t n;

	/* Stream: peek, what follows the newline is the guest's, not ours.
	 * Seqpacket: the first message is the line, taken whole (MSG_TRUNC
	 * gives its real length, so a longer one is seen and refused). */
	do
		n = recv(fd, buf, sizeof(buf),
			 (seq ? MSG_TRUNC : MSG_PEEK) | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	if (n <= 0) {
		vsock_peer_log(&h->rl, VMIO_LOG_INFO,
			       "vsock: %s: host peer %s before its CONNECT "
			       "line; closed",
			       h->path, n ? strerror(errno) : "hung up");
		pending_close(h, p);
		return;
	}
	if (seq) {
		r = (size_t)n > sizeof(buf)
			    ? VSOCK_LINE_BAD
			    : vsock_connect_line_message(buf, (size_t)n,
							 h->cfg.line_max, &port,
							 &why);
		if ((size_t)n > sizeof(buf))
			why = "first message too long";
		goto verdict;
	}
	r = vsock_connect_line_feed(&p->line, buf, (size_t)n, &consumed,
				    &port, &why);
	/* Take exactly the line's bytes off the socket. */
	if (consumed && recv(fd, buf, consumed, MSG_DONTWAIT) !=
				(ssize_t)consumed && r != VSOCK_LINE_BAD) {
		vsock_peer_log(&h->rl, VMIO_LOG_WARN,
			       "vsock: %s: cannot read a CONNECT line; closed",
			       h->path);
		pending_close(h, p);
		return;
	}
verdict:
	switch (r) {
	case VSOCK_LINE_MORE:
		return;
	case VSOCK_LINE_BAD:
		vsock_peer_log(&h->rl, VMIO_LOG_WARN,
			       "vsock: %s: bad CONNECT line: %s; closed",
			       h->path, why ? why : "?");
		pending_close(h, p);
		return;
	case VSOCK_LINE_DONE:
		line_done(h, p, port);
		return;
	}
}

int vsock_hybrid_pending_add(struct vsock_hybrid *h, int fd, uint16_t type,
			     uint64_t deadline_ns,
			     const struct vsock_connect_line *line)
{
	struct hy_pending *p = calloc(1, sizeof(*p));

	if (!p ||
	    (!h->paused && vmio_loop_add(h->loop, fd, EPOLLIN, pending_cb, p))) {
		free(p);
		close(fd);
		return -ENOMEM;
	}
	p->h = h;
	p->fd = fd;
	p->type = type;
	p->deadline_ns = deadline_ns;
	p->line = *line;
	p->next = h->pending;
	if (h->pending)
		h->pending->prev = p;
	h->pending = p;
	h->npending++;
	vsock_expiry_run(&h->expiry, true);
	return 0;
}

static void accept_cb(void *opaque, int lfd, uint32_t events)
{
	struct hy_listener *l = opaque;
	struct vsock_hybrid *h = l->h;
	struct vsock_connect_line line;
	uint64_t deadline = 0;
	int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			vsock_peer_log(&h->rl, VMIO_LOG_WARN,
				       "vsock: accept on %s: %s", l->path,
				       strerror(errno));
		return;
	}
	if (h->npending >= h->cfg.max_pending) {
		vsock_peer_log(&h->rl, VMIO_LOG_WARN,
			       "vsock: %s: %u host connections already await "
			       "their CONNECT line; closed a new one",
			       h->path, h->npending);
		close(fd);
		return;
	}
	vsock_expiry_connect(&h->expiry, &deadline);
	vsock_connect_line_init(&line, h->cfg.line_max);
	if (vsock_hybrid_pending_add(h, fd, l->type, deadline, &line))
		vsock_peer_log(&h->rl, VMIO_LOG_WARN,
			       "vsock: %s: cannot take a host connection",
			       h->path);
}

static void timer_cb(void *opaque)
{
	struct vsock_hybrid *h = opaque;
	struct hy_pending *p, *next;
	uint64_t now = vsock_expiry_now(&h->expiry);

	if (h->paused)
		return;
	for (p = h->pending; p; p = next) {
		next = p->next;
		if (!vsock_expiry_due(p->deadline_ns, now))
			continue;
		vsock_peer_log(&h->rl, VMIO_LOG_INFO,
			       "vsock: %s: no complete CONNECT line within "
			       "%u ms; closed",
			       h->path, h->cfg.line_timeout_ms);
		pending_close(h, p);
	}
	if (!h->pending)
		vsock_expiry_run(&h->expiry, false);
}

/* The listener's path: uds-path, or its seqpacket twin. */
static int listener_path(struct hy_listener *l, uint16_t type,
			 const char *path)
{
	bool seq = type == VSOCK_TYPE_SEQPACKET;
	size_t n = strlen(path) + sizeof(VSOCK_HYBRID_SEQPACKET_SUFFIX);

	l->type = type;
	l->path = malloc(n);
	if (!l->path)
		return -ENOMEM;
	snprintf(l->path, n, "%s%s", path,
		 seq ? VSOCK_HYBRID_SEQPACKET_SUFFIX : "");
	return 0;
}

int vsock_hybrid_listen_fd(struct vsock_hybrid *h, uint16_t type, int fd,
			   const struct stat *st)
{
	struct hy_listener *l = &h->lis[type == VSOCK_TYPE_SEQPACKET];
	int rc = l->path ? 0 : listener_path(l, type, h->path);

	if (rc)
		return rc;
	l->h = h;
	l->fd = fd;
	l->st = *st;
	return h->paused ? 0 : vmio_loop_add(h->loop, fd, EPOLLIN, accept_cb, l);
}

/* Listens at path (stream) or path + VSOCK_HYBRID_SEQPACKET_SUFFIX. */
static int listener_open(struct vsock_hybrid *h, uint16_t type)
{
	struct hy_listener *l = &h->lis[type == VSOCK_TYPE_SEQPACKET];
	bool seq = type == VSOCK_TYPE_SEQPACKET;
	struct stat st;
	int fd, rc = listener_path(l, type, h->path);

	if (rc)
		return rc;
	fd = socket(AF_UNIX,
		    (seq ? SOCK_SEQPACKET : SOCK_STREAM) | SOCK_NONBLOCK |
			    SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	rc = vmio_unix_bind_socket(fd, l->path, seq ? SOCK_SEQPACKET
						    : SOCK_STREAM,
				   HYBRID_BACKLOG, "vsock", &st);
	if (rc) {
		close(fd);
		return rc;
	}
	/* On failure the free closes fd and removes its file. */
	return vsock_hybrid_listen_fd(h, type, fd, &st);
}

static void listener_close(struct vsock_hybrid *h, struct hy_listener *l)
{
	if (l->fd >= 0) {
		vmio_loop_remove(h->loop, l->fd);
		close(l->fd);
		vmio_unix_unlink_if_same(l->path, &l->st);
	}
	free(l->path);
}

void vsock_hybrid_pause(struct vsock_hybrid *h, bool paused)
{
	if (h->paused == paused)
		return;
	h->paused = paused;
	for (int i = 0; i < 2; i++) {
		struct hy_listener *l = &h->lis[i];

		if (l->fd < 0)
			continue;
		if (paused)
			vmio_loop_remove(h->loop, l->fd);
		else if (vmio_loop_add(h->loop, l->fd, EPOLLIN, accept_cb, l))
			vsock_peer_log(&h->rl, VMIO_LOG_ERR,
				       "vsock: %s: cannot watch the listener "
				       "again", l->path);
	}
	for (struct hy_pending *p = h->pending, *next; p; p = next) {
		next = p->next;
		if (paused)
			vmio_loop_remove(h->loop, p->fd);
		else if (vmio_loop_add(h->loop, p->fd, EPOLLIN, pending_cb, p))
			pending_close(h, p);
	}
}

struct vsock_hybrid *vsock_hybrid_alloc(struct vmio_loop *loop,
					struct vsock_muxer *mux,
					const struct vsock_hybrid_config *cfg)
{
	struct vsock_hybrid *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->loop = loop;
	h->mux = mux;
	h->cfg = *cfg;
	h->lis[0].fd = h->lis[1].fd = -1;
	h->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(10);
	h->path = strdup(cfg->uds_path);
	h->cfg.uds_path = h->path;
	if (!h->path || vsock_expiry_init(&h->expiry, loop,
					  h->cfg.line_timeout_ms, timer_cb, h)) {
		free(h->path);
		free(h);
		return NULL;
	}
	return h;
}

struct vsock_hybrid *vsock_hybrid_new(struct vmio_loop *loop,
				      struct vsock_muxer *mux,
				      const struct vsock_hybrid_config *cfg,
				      int *err)
{
	struct vsock_hybrid *h = vsock_hybrid_alloc(loop, mux, cfg);
	int rc = -ENOMEM;

	if (h) {
		rc = listener_open(h, VSOCK_TYPE_STREAM);
		if (!rc)
			rc = listener_open(h, VSOCK_TYPE_SEQPACKET);
		if (!rc)
			return h;
	}
	if (err)
		*err = rc;
	vsock_hybrid_free(h);
	return NULL;
}

void vsock_hybrid_free(struct vsock_hybrid *h)
{
	if (!h)
		return;
	while (h->pending)
		pending_close(h, h->pending);
	listener_close(h, &h->lis[0]);
	listener_close(h, &h->lis[1]);
	vsock_expiry_fini(&h->expiry);
	free(h->path);
	free(h);
}
