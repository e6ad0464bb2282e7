/* See vsock_transfer.h. */
#include "vsock_transfer.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"

#define READ_SIZE 65536

/* ---- the pattern: every message is the same msg bytes ---- */

static uint8_t pat(uint64_t msg, uint64_t off)
{
	uint64_t k = off % msg;

	return (uint8_t)((k * 2654435761u) >> 13 ^ k >> 8 ^ 0x5a);
}

void xfer_pattern_fill(uint64_t msg, uint8_t *buf)
{
	for (uint64_t i = 0; i < msg; i++)
		buf[i] = pat(msg, i);
}

bool xfer_pattern_check_ends(uint64_t msg, uint64_t total, uint64_t off,
			     const uint8_t *buf, size_t n)
{
	uint64_t tail = total > msg ? total - msg : 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t o = off + i;

		if (o >= msg && o < tail) {
			/* Skip to the tail. */
			if (tail - off >= n)
				break;
			i = (size_t)(tail - off);
			o = tail;
		}
		if (buf[i] != pat(msg, o))
			return false;
	}
	return true;
}

/* ---- the loop ---- */

int xfer_all(const struct xfer_plan *plan, const struct xfer_conns *cs,
	     bool send, int64_t *t, uint64_t *total, char *err,
	     size_t err_size)
{
	static uint8_t out[XFER_MAX_MSG], in[READ_SIZE];
	uint64_t moved[XFER_MAX_CONNS] = { 0 };
	bool active[XFER_MAX_CONNS];
	unsigned done = 0;
	int64_t last = (int64_t)vmio_now_ns();

	if (plan->conns > XFER_MAX_CONNS || plan->msg > XFER_MAX_MSG) {
		snprintf(err, err_size, "at most %d connections and %d-byte "
			 "messages", XFER_MAX_CONNS, XFER_MAX_MSG);
		return -1;
	}
	for (unsigned c = 0; c < plan->conns; c++)
		active[c] = true;
	if (send) {
		xfer_pattern_fill(plan->msg, out);
		*t = (int64_t)vmio_now_ns();
	}
	*total = 0;
	while (done < plan->conns) {
		bool progress = false;

		for (unsigned c = 0; c < plan->conns; c++) {
			ssize_t r;

			if (!active[c])
				continue;
			if (send) {
				uint64_t at = moved[c] % plan->msg;
				uint64_t n = plan->msg - at;

				if (n > plan->per_conn - moved[c])
					n = plan->per_conn - moved[c];
				r = cs->ops->write(cs->ctx, c, out + at, n);
			} else {
				r = cs->ops->read(cs->ctx, c, in, sizeof(in));
			}
			if (r == XFER_AGAIN)
				continue;
			if (send && r < 0) {
				snprintf(err, err_size, "%s: %s",
					 cs->ops->write_name, strerror((int)-r));
				return -1;
			}
			if (!send && r <= 0) {
				snprintf(err, err_size,
					 "connection %u: %s after %" PRIu64
					 " bytes", c,
					 r ? strerror((int)-r) : "early EOF",
					 moved[c]);
				return -1;
			}
			if (!send &&
			    !xfer_pattern_check_ends(plan->msg, plan->per_conn,
						     moved[c], in, (size_t)r)) {
				snprintf(err, err_size,
					 "connection %u: wrong bytes at %"
					 PRIu64, c, moved[c]);
				return -1;
			}
			moved[c] += (uint64_t)r;
			*total += (uint64_t)r;
			progress = true;
			if (moved[c] > plan->per_conn) {
				snprintf(err, err_size,
					 "connection %u: %" PRIu64
					 " bytes, more than sent", c, moved[c]);
				return -1;
			}
			if (moved[c] == plan->per_conn) {
				if (send)
					cs->ops->shut_wr(cs->ctx, c);
				active[c] = false;
				done++;
			}
		}
		if (progress) {
			last = (int64_t)vmio_now_ns();
			continue;
		}
		if ((int64_t)vmio_now_ns() - last >
		    (int64_t)XFER_STALL_MS * 1000000) {
			snprintf(err, err_size,
				 "no progress for %d s after %" PRIu64
				 " bytes %s", XFER_STALL_MS / 1000, *total,
				 send ? "sent" : "received");
			return -1;
		}
		if (cs->ops->wait(cs->ctx, active, plan->conns, send, err,
				  err_size))
			return -1;
	}
	if (!send)
		*t = (int64_t)vmio_now_ns();
	return 0;
}

/* ---- plain sockets ---- */

static ssize_t fd_io_result(ssize_t r)
{
	if (r >= 0)
		return r;
	if (errno == EAGAIN || errno == EINTR)
		return XFER_AGAIN;
	return -errno;
}

static ssize_t fd_conn_write(void *ctx, unsigned c, const void *buf,
			     size_t n)
{
	return fd_io_result(write(((int *)ctx)[c], buf, n));
}

static ssize_t fd_conn_read(void *ctx, unsigned c, void *buf, size_t n)
{
	return fd_io_result(read(((int *)ctx)[c], buf, n));
}

static void fd_conn_shut_wr(void *ctx, unsigned c)
{
	shutdown(((int *)ctx)[c], SHUT_WR);
}

static int fd_conn_wait(void *ctx, const bool *active, unsigned conns,
			bool out, char *err, size_t err_size)
{
	struct pollfd p[XFER_MAX_CONNS];

	for (unsigned c = 0; c < conns; c++)
		p[c] = (struct pollfd){
			.fd = active[c] ? ((int *)ctx)[c] : -1,
			.events = out ? POLLOUT : POLLIN,
		};
	poll(p, conns, 100);
	return 0;
}

const struct xfer_ops xfer_fd_ops = {
	.write_name = "write",
	.write = fd_conn_write,
	.read = fd_conn_read,
	.shut_wr = fd_conn_shut_wr,
	.wait = fd_conn_wait,
};

/* ---- the guests' sockets ---- */

/* vg_write and vg_read with no wait move what credit, tx slots and the
 * rx queue allow now, and say -ETIMEDOUT when that is nothing. */
static ssize_t vg_io_result(ssize_t r)
{
	return r == -ETIMEDOUT ? XFER_AGAIN : r;
}

static ssize_t vg_conn_write(void *ctx, unsigned c, const void *buf,
			     size_t n)
{
	return vg_io_result(vg_write(((struct xfer_vg *)ctx)->s[c], buf, n,
				     0));
}

static ssize_t vg_conn_read(void *ctx, unsigned c, void *buf, size_t n)
{
	return vg_io_result(vg_read(((struct xfer_vg *)ctx)->s[c], buf, n,
				    0));
}

static void vg_conn_shut_wr(void *ctx, unsigned c)
{
	vg_shutdown(((struct xfer_vg *)ctx)->s[c], VSOCK_SHUTDOWN_SEND);
}

static int vg_conn_wait(void *ctx, const bool *active, unsigned conns,
			bool out, char *err, size_t err_size)
{
	struct xfer_vg *v = ctx;
	int r = vg_poll_many(v->g, v->ng, 100);

	if (r < 0) {
		snprintf(err, err_size, "vg_poll: %s", strerror(-r));
		return -1;
	}
	return 0;
}

const struct xfer_ops xfer_vg_ops = {
	.write_name = "vg_write",
	.write = vg_conn_write,
	.read = vg_conn_read,
	.shut_wr = vg_conn_shut_wr,
	.wait = vg_conn_wait,
};
