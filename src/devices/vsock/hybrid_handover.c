/* The hybrid listener's hand-over record; see hybrid_handover.h.
 *
 * Layout (the version is the whole hand-over record's):
 *   u32 listeners (2), each u16 type and u32 fd index
 *   u32 sockets awaiting their line, each u16 type, u64 ms left,
 *       u32 line bytes and the bytes, u32 fd index */
#include "devices/vsock/hybrid_handover.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/vsock/hybrid_internal.h"
#include "devices/vsock/packet.h"

#define NS_PER_MS 1000000ull

static int put_fd(int fd, int fds[], unsigned max_fds, unsigned *nfds,
		  struct vmio_wire_writer *w)
{
	if (*nfds >= max_fds)
		return -1;
	vmio_wire_put_u32(w, *nfds);
	fds[(*nfds)++] = fd;
	return 0;
}

int vsock_hybrid_save(const struct vsock_hybrid *h, struct vmio_wire_writer *w,
		      int fds[], unsigned max_fds, unsigned *nfds,
		      const char **why)
{
	uint64_t now = vsock_expiry_now(&h->expiry);

	if (!h->paused) {
		*why = "its sockets are still watched";
		return -1;
	}
	*why = "more sockets than the hand-over carries";
	vmio_wire_put_u32(w, 2);
	for (int i = 0; i < 2; i++) {
		vmio_wire_put_u16(w, h->lis[i].type);
		if (put_fd(h->lis[i].fd, fds, max_fds, nfds, w))
			return -1;
	}
	vmio_wire_put_u32(w, h->npending);
	for (const struct hy_pending *p = h->pending; p; p = p->next) {
		uint64_t left = p->deadline_ns > now ? p->deadline_ns - now : 0;

		vmio_wire_put_u16(w, p->type);
		vmio_wire_put_u64(w, left / NS_PER_MS);
		vmio_wire_put_u32(w, (uint32_t)p->line.len);
		vmio_wire_put_bytes(w, p->line.buf, p->line.len);
		if (put_fd(p->fd, fds, max_fds, nfds, w))
			return -1;
	}
	*why = NULL;
	return 0;
}

/* ---- Taking it back -------------------------------------------------- */

static int sock_int(int fd, int level, int opt)
{
	int v = -1;
	socklen_t len = sizeof(v);

	return getsockopt(fd, level, opt, &v, &len) ? -1 : v;
}

/* An fd index of the record: in range and not taken yet. */
static int take_fd(struct vmio_wire_reader *r, int fds[], unsigned nfds)
{
	uint32_t i = vmio_wire_get_u32(r);
	int fd;

	if (!vmio_wire_ok(r))
		return -1;
	if (i >= nfds || fds[i] < 0) {
		vmio_wire_fail(r, "a socket the hand-over did not carry, or "
				  "one taken twice");
		return -1;
	}
	fd = fds[i];
	fds[i] = -1;
	return fd;
}

static int sock_type(uint16_t vsock_type)
{
	return vsock_type == VSOCK_TYPE_SEQPACKET ? SOCK_SEQPACKET
						  : SOCK_STREAM;
}

/* A listener: a listening unix socket of the type, bound where this vmio
 * serves, its file still there. */
static void restore_listener(struct vsock_hybrid *h, int want_type,
			     struct vmio_wire_reader *r, int fds[],
			     unsigned nfds)
{
	uint16_t type = vmio_wire_get_u16(r);
	int fd = take_fd(r, fds, nfds);
	struct sockaddr_un a;
	socklen_t alen = sizeof(a);
	char path[sizeof(a.sun_path)];
	struct stat st;

	if (fd < 0)
		return;
	snprintf(path, sizeof(path), "%s%s", h->path,
		 want_type == VSOCK_TYPE_SEQPACKET ? VSOCK_HYBRID_SEQPACKET_SUFFIX
						   : "");
	if (type != want_type ||
	    sock_int(fd, SOL_SOCKET, SO_DOMAIN) != AF_UNIX ||
	    sock_int(fd, SOL_SOCKET, SO_TYPE) != sock_type(type) ||
	    sock_int(fd, SOL_SOCKET, SO_ACCEPTCONN) != 1 ||
	    getsockname(fd, (struct sockaddr *)&a, &alen) ||
	    alen <= offsetof(struct sockaddr_un, sun_path)) {
		vmio_wire_fail(r, "a listener that is not this vmio's");
		close(fd);
		return;
	}
	a.sun_path[sizeof(a.sun_path) - 1] = '\0';
	if (strcmp(a.sun_path, path)) {
		vmio_wire_fail(r, "a listener at another path");
		close(fd);
		return;
	}
	if (stat(a.sun_path, &st) || !S_ISSOCK(st.st_mode)) {
		vmio_wire_fail(r, "a listener whose socket file is gone");
		close(fd);
		return;
	}
	if (vsock_hybrid_listen_fd(h, type, fd, &st)) {
		vmio_wire_fail(r, "cannot watch a listener");
		close(fd);
	}
}

/* A host socket whose line is part read: the bytes so far must be what
 * a fresh parser takes whole and still wants more of. */
static void restore_pending(struct vsock_hybrid *h, struct vmio_wire_reader *r,
			    int fds[], unsigned nfds)
{
	uint16_t type = vmio_wire_get_u16(r);
	uint64_t left = vmio_wire_get_u64(r);
	uint32_t len = vmio_wire_get_u32(r), port;
	const uint8_t *bytes = vmio_wire_get_bytes(r, len);
	struct vsock_connect_line line;
	size_t consumed = 0;
	const char *why = NULL;
	int fd = take_fd(r, fds, nfds);

	if (fd < 0)
		return;
	vsock_connect_line_init(&line, h->cfg.line_max);
	if ((type != VSOCK_TYPE_STREAM && type != VSOCK_TYPE_SEQPACKET) ||
	    sock_int(fd, SOL_SOCKET, SO_TYPE) != sock_type(type) ||
	    (len && (vsock_connect_line_feed(&line, bytes, len, &consumed,
					     &port, &why) != VSOCK_LINE_MORE ||
		     consumed != len))) {
		vmio_wire_fail(r, "a host socket's CONNECT line this vmio "
				  "would not have kept");
		close(fd);
		return;
	}
	if (left > h->cfg.line_timeout_ms)
		left = h->cfg.line_timeout_ms;
	if (vsock_hybrid_pending_add(h, fd, type,
				     vsock_expiry_now(&h->expiry) +
					     left * NS_PER_MS,
				     &line))
		vmio_wire_fail(r, "out of memory");
}

struct vsock_hybrid *vsock_hybrid_restore(struct vmio_loop *loop,
					  struct vsock_muxer *mux,
					  const struct vsock_hybrid_config *cfg,
					  struct vmio_wire_reader *r, int fds[],
					  unsigned nfds)
{
	struct vsock_hybrid *h = vsock_hybrid_alloc(loop, mux, cfg);
	uint32_t n;

	if (!h) {
		vmio_wire_fail(r, "out of memory");
		return NULL;
	}
	/* Nothing taken or read until this process has taken over. */
	h->paused = true;
	if (vmio_wire_get_u32(r) != 2 && vmio_wire_ok(r))
		vmio_wire_fail(r, "not the two listeners of a hybrid");
	restore_listener(h, VSOCK_TYPE_STREAM, r, fds, nfds);
	restore_listener(h, VSOCK_TYPE_SEQPACKET, r, fds, nfds);
	n = vmio_wire_get_count(r, 2 + 8 + 4 + 4);
	if (vmio_wire_ok(r) && n > cfg->max_pending)
		vmio_wire_fail(r, "more host sockets awaiting their line than "
				  "--max-pending takes");
	for (uint32_t i = 0; i < n && vmio_wire_ok(r); i++)
		restore_pending(h, r, fds, nfds);
	if (vmio_wire_ok(r))
		return h;
	/* The files are the old process's, which still serves them. */
	vsock_hybrid_handed_over(h);
	vsock_hybrid_free(h);
	return NULL;
}

void vsock_hybrid_handed_over(struct vsock_hybrid *h)
{
	for (int i = 0; i < 2; i++)
		memset(&h->lis[i].st, 0, sizeof(h->lis[i].st));
}
