/* See round_trips.h. */
#include "round_trips.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_common.h"
#include "util/clock.h"

/* What the echo reads at a time. */
#define ECHO_CHUNK 4096

/* ---- samples ---- */

void rt_samples_init(struct rt_samples *sm)
{
	*sm = (struct rt_samples){ .ns = malloc(RT_MAX_SAMPLES *
						sizeof(*sm->ns)) };
	if (!sm->ns)
		tool_die("out of memory");
}

void rt_samples_free(struct rt_samples *sm)
{
	free(sm->ns);
	sm->ns = NULL;
}

void rt_keep(struct rt_samples *sm, int64_t ns)
{
	if (sm->n < RT_MAX_SAMPLES)
		sm->ns[sm->n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
	sm->all++;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

void rt_sort(struct rt_samples *sm)
{
	qsort(sm->ns, sm->n, sizeof(*sm->ns), cmp_u32);
}

double rt_pct_us(const struct rt_samples *sm, unsigned p)
{
	size_t k = (sm->n * p + 99) / 100;

	return sm->n ? sm->ns[k ? k - 1 : 0] / 1e3 : 0;
}

/* ---- both sides ---- */

/* Fills err for a read or write on connection c that returned r (< 0,
 * not XFER_AGAIN; 0 for a read: end of stream). */
static int io_error(const char *what, unsigned c, ssize_t r, char *err,
		    size_t err_size)
{
	snprintf(err, err_size, "connection %u: %s: %s", c, what,
		 r ? strerror((int)-r) : "end of stream");
	return -1;
}

static bool stalled(int64_t last, char *err, size_t err_size)
{
	if ((int64_t)vmio_now_ns() - last <= (int64_t)XFER_STALL_MS * 1000000)
		return false;
	snprintf(err, err_size, "no round trip moved a byte for %d s",
		 XFER_STALL_MS / 1000);
	return true;
}

/* ---- the requester ---- */

/* One pass over the connections: what each can write of its request
 * and read of its answer now. Sets *moved if a byte moved, *busy if a
 * round trip is under way, waiting[c] for those that wait on an answer
 * and *out if a request is not all written. */
static int rt_pass(const struct xfer_conns *cs, struct rt_conn *rc,
		   unsigned n, uint64_t msg, const uint8_t *req, bool ending,
		   rt_kept_fn *kept, void *arg, bool *waiting, bool *moved,
		   bool *busy, bool *out, char *err, size_t err_size)
{
	static uint8_t resp[XFER_MAX_MSG];

	for (unsigned i = 0; i < n; i++) {
		struct rt_conn *c = &rc[i];
		ssize_t r;

		/* Once ending, no new round trip, but the one begun goes
		 * on. */
		if (c->sent < msg && (c->sent || !ending)) {
			if (!c->sent)
				c->t0 = (int64_t)vmio_now_ns();
			r = cs->ops->write(cs->ctx, i, req + c->sent,
					   msg - c->sent);
			if (r < 0 && r != XFER_AGAIN)
				return io_error(cs->ops->write_name, i, r, err,
						err_size);
			if (r > 0) {
				c->sent += (uint64_t)r;
				*moved = true;
			}
			*out |= c->sent < msg;
		}
		waiting[i] = c->sent > 0;
		if (!c->sent)
			continue;
		*busy = true;
		r = cs->ops->read(cs->ctx, i, resp, msg - c->got);
		if (r == XFER_AGAIN)
			continue;
		if (r <= 0)
			return io_error("read", i, r, err, err_size);
		if (memcmp(resp, req + c->got, (size_t)r)) {
			snprintf(err, err_size, "connection %u: the answer is "
				 "not the request", i);
			return -1;
		}
		c->got += (uint64_t)r;
		*moved = true;
		if (c->got < msg)
			continue;
		if (kept && !ending)
			kept(arg, i, (int64_t)vmio_now_ns() - c->t0);
		c->sent = c->got = 0;
		waiting[i] = false;
	}
	return 0;
}

volatile sig_atomic_t rt_stop;

int rt_phase(const struct xfer_conns *cs, struct rt_conn *rc, unsigned n,
	     uint64_t msg, uint64_t ms, rt_kept_fn *kept, void *arg,
	     char *err, size_t err_size)
{
	static uint8_t req[XFER_MAX_MSG];
	int64_t end = (int64_t)vmio_now_ns() + (int64_t)ms * 1000000;
	int64_t last = (int64_t)vmio_now_ns();
	bool ending = false, *waiting = calloc(n, sizeof(*waiting));
	int ret = -1;

	if (!waiting)
		tool_die("out of memory");
	if (msg > XFER_MAX_MSG) {
		snprintf(err, err_size, "at most %d-byte messages",
			 XFER_MAX_MSG);
		goto out;
	}
	xfer_pattern_fill(msg, req);
	for (;;) {
		bool moved = false, busy = false, wr = false;

		ending |= (int64_t)vmio_now_ns() >= end || (kept && rt_stop);
		if (rt_pass(cs, rc, n, msg, req, ending, kept, arg, waiting,
			    &moved, &busy, &wr, err, err_size))
			goto out;
		if (ending && !busy)
			break;
		if (moved) {
			last = (int64_t)vmio_now_ns();
			continue;
		}
		if (stalled(last, err, err_size) ||
		    cs->ops->wait(cs->ctx, waiting, n, wr, err, err_size))
			goto out;
	}
	ret = 0;
out:
	free(waiting);
	return ret;
}

/* ---- the echo ---- */

struct echo_conn {
	uint8_t buf[ECHO_CHUNK];
	uint32_t off, len; /* what is read and not yet written back */
	bool ended;
};

/* One pass: each connection writes back what it holds, or reads more.
 * Counts the ended ones in *ended. */
static int echo_pass(const struct xfer_conns *cs, struct echo_conn *e,
		     unsigned n, bool *active, unsigned *ended,
		     uint64_t *bytes, bool *moved, bool *out, char *err,
		     size_t err_size)
{
	for (unsigned i = 0; i < n; i++) {
		struct echo_conn *c = &e[i];
		ssize_t r;

		if (c->ended)
			continue;
		if (!c->len) {
			r = cs->ops->read(cs->ctx, i, c->buf, sizeof(c->buf));
			if (r == XFER_AGAIN)
				continue;
			if (r < 0)
				return io_error("read", i, r, err, err_size);
			*moved = true;
			if (!r) {
				cs->ops->shut_wr(cs->ctx, i);
				c->ended = true;
				active[i] = false;
				(*ended)++;
				continue;
			}
			c->off = 0;
			c->len = (uint32_t)r;
		}
		r = cs->ops->write(cs->ctx, i, c->buf + c->off, c->len);
		if (r < 0 && r != XFER_AGAIN)
			return io_error(cs->ops->write_name, i, r, err,
					err_size);
		if (r > 0) {
			c->off += (uint32_t)r;
			c->len -= (uint32_t)r;
			*bytes += (uint64_t)r;
			*moved = true;
		}
		*out |= c->len > 0;
	}
	return 0;
}

int rt_echo(const struct xfer_conns *cs, unsigned n, uint64_t *bytes,
	    char *err, size_t err_size)
{
	struct echo_conn *e = calloc(n, sizeof(*e));
	bool *active = malloc(n * sizeof(*active));
	int64_t last = (int64_t)vmio_now_ns();
	unsigned ended = 0;
	int ret = -1;

	if (!e || !active)
		tool_die("out of memory");
	for (unsigned i = 0; i < n; i++)
		active[i] = true;
	*bytes = 0;
	while (ended < n) {
		bool moved = false, out = false;

		if (echo_pass(cs, e, n, active, &ended, bytes, &moved, &out,
			      err, err_size))
			goto done;
		if (moved) {
			last = (int64_t)vmio_now_ns();
			continue;
		}
		if (stalled(last, err, err_size) ||
		    cs->ops->wait(cs->ctx, active, n, out, err, err_size))
			goto done;
	}
	ret = 0;
done:
	free(active);
	free(e);
	return ret;
}
