/* A timed transfer of pattern messages over several connections at once,
 * round robin and never blocking, for the vsock benchmarks: the same loop
 * drives plain unix sockets and the in-tree guest's vsock sockets (one
 * guest's or many guests'), so vmio-vsock-bench and vmio-scale measure
 * the same way. */
#ifndef VMIO_TOOLS_VSOCK_TRANSFER_H
#define VMIO_TOOLS_VSOCK_TRANSFER_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "frontend/vsock_guest.h"

#define XFER_MAX_CONNS 64
/* No byte moving for this long is an error. */
#define XFER_STALL_MS 10000
/* Largest message: what one host read takes at most, 16 packets. */
#define XFER_MAX_MSG (VSOCK_MAX_PKT_PAYLOAD * 16)

/* What each connection carries: per_conn bytes as messages of msg bytes,
 * every message the same pattern. */
struct xfer_plan {
	uint64_t msg, per_conn;
	unsigned conns;
};

/* The pattern's bytes, one message of plan msg (at most XFER_MAX_MSG). */
void xfer_pattern_fill(uint64_t msg, uint8_t *buf);
/* Checks the part of buf (at stream offset off) that lies in the first
 * or the last message of a stream of total bytes (UINT64_MAX: endless,
 * only the first is checked). */
bool xfer_pattern_check_ends(uint64_t msg, uint64_t total, uint64_t off,
			     const uint8_t *buf, size_t n);

/* What a connection's read or write returns when it cannot move a byte
 * now (not an errno: those come back negated). */
#define XFER_AGAIN ((ssize_t)INT_MIN)

/* How to move bytes on connection c of ctx: write and read return the
 * bytes moved (read: 0 at end of stream), XFER_AGAIN, or -errno; wait
 * blocks up to 100 ms for any active connection to be ready, and fills
 * err on a failure. */
struct xfer_ops {
	const char *write_name; /* for the error message */
	ssize_t (*write)(void *ctx, unsigned c, const void *buf, size_t n);
	ssize_t (*read)(void *ctx, unsigned c, void *buf, size_t n);
	void (*shut_wr)(void *ctx, unsigned c);
	int (*wait)(void *ctx, const bool *active, unsigned conns, bool out,
		    char *err, size_t err_size);
};

struct xfer_conns {
	const struct xfer_ops *ops;
	void *ctx;
};

/* Plain non-blocking sockets: ctx is an array of fds. */
extern const struct xfer_ops xfer_fd_ops;

/* Sockets of in-tree guests: connection c is s[c]; the wait serves every
 * guest of g (ng of them, at most VG_POLL_MANY_MAX). */
struct xfer_vg {
	struct vg_sock **s;
	struct vg *const *g;
	unsigned ng;
};
extern const struct xfer_ops xfer_vg_ops;

/* Sends (send) or receives plan->per_conn bytes on each connection,
 * round robin, never blocking in a read or write and waiting when none
 * can move a byte. Sending writes pattern messages and shuts each
 * connection down for writing when its share is out; receiving checks
 * the first and last message of each. Fills *t with the time of the
 * first write (send) or of the last byte read (receive), *total with the
 * bytes moved. Returns 0, or -1 with err filled. */
int xfer_all(const struct xfer_plan *plan, const struct xfer_conns *cs,
	     bool send, int64_t *t, uint64_t *total, char *err,
	     size_t err_size);

#endif
