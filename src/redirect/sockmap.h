/* The sockmap engine's BPF side: loading the program and handing it one
 * pair of sockets. The kernel then moves each datagram that reaches the
 * ingress socket straight to the egress socket's send path; this process
 * only reads counters.
 *
 * Only a unix datagram ingress is offered, for reasons measured on Linux
 * 6.18 and written down in README ("vmio redirect: engines"): a stream
 * ingress lags forever behind whatever was queued before it was inserted,
 * a TCP ingress has no backpressure, and an egress that keeps message
 * boundaries gets them split. The egress is a unix or TCP stream, or a
 * vsock stream on Linux 6.4+ (docs/architecture.md, section 5). */
#ifndef VMIO_REDIRECT_SOCKMAP_H
#define VMIO_REDIRECT_SOCKMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct redir_sockmap;

/* Loads and attaches the verdict program. Returns NULL with the reason in
 * err (no privilege, or a kernel without sockmap support). */
struct redir_sockmap *redir_sockmap_load(char *err, size_t err_size);

/* Puts egress, a connected stream socket, where the program forwards
 * to, with a send buffer of sndbuf bytes. The kernel may refuse it: a
 * vsock socket before Linux 6.4 (EOPNOTSUPP), or one whose transport
 * cannot (VMCI, Hyper-V). Nothing is forwarded to it yet: no ingress
 * has joined. Returns 0 or -errno; egress stays the caller's. */
int redir_sockmap_join_egress(struct redir_sockmap *sm, int egress,
			      int sndbuf);

/* Joins ingress, an unbound unix datagram socket, to egress, a connected
 * stream socket (joined here if redir_sockmap_join_egress did not); what egress refuses goes to diversion, a connected unix
 * stream socket whose peer the caller reads. Both send buffers become
 * sndbuf bytes. Call it before binding ingress: a datagram queued before
 * the program saw the socket would never be forwarded. Returns 0 or
 * -errno. */
int redir_sockmap_attach(struct redir_sockmap *sm, int ingress, int egress,
			 int diversion, int sndbuf);

struct redir_sockmap_counters {
	uint64_t bytes;   /* forwarded to the egress socket */
	uint64_t msgs;
	uint64_t diverted; /* of msgs, refused by the egress and diverted */
	uint64_t failed;  /* dropped by the kernel: the egress was gone */
	bool eof;         /* an empty datagram (end of input) arrived */
};

void redir_sockmap_read(const struct redir_sockmap *sm,
			struct redir_sockmap_counters *c);

void redir_sockmap_free(struct redir_sockmap *sm);

#endif
