#include "redirect/sockmap_relay.h"

#include <errno.h>
#include <linux/sock_diag.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/fd.h"
#include "util/log.h"

/* How often the counters are read. */
#define TICK_MS 10
/* How long a socket the kernel sends on must have stayed writable, with
 * no new data for it, before its queue counts as empty. The kernel's
 * queue retries every jiffy (4 ms at HZ=250) while the socket has room,
 * so a quarter second is dozens of chances to have emptied it even on a
 * loaded machine. If it still had not, what follows (a shutdown) makes
 * its next send fail, and that failure is reported as lost data. */
#define QUIET_MS 250
/* After the egress is shut down, how long to wait for its peer to close,
 * so that a send the kernel failed after it still shows. */
#define LINGER_MS 2000

struct redir_sockmap_relay {
	struct vmio_loop *loop;
	struct redir_sockmap *sm;
	int ingress, egress;
	struct vmio_timer tick; /* every TICK_MS: the counters */
	/* The diversion: div_in is in the map, div_out is read by `tail`
	 * (div_out -> egress in userspace) once the diverted data may go. */
	int div_in, div_out;
	struct redir_relay *tail;
	bool diverted;      /* the egress refused data; it went to div_in */
	bool eof;           /* the empty datagram has arrived */
	bool shut;          /* end of input passed on (egress or div_in shut) */
	bool peer_gone;     /* the egress's peer closed before end of input */
	bool count_drops;   /* the egress's drop count means lost data */
	uint32_t drops;     /* the egress's drop count when it joined */
	uint64_t gone_bytes; /* forwarded when it did */
	uint64_t last_bytes;
	unsigned quiet_ms;  /* how long the socket being waited on was quiet */
	unsigned linger_ms;
	uint64_t start_ns, end_ns;
	bool finished;
	char name[32];
	redir_sockmap_done_fn done;
	void *opaque;
};

static void unwatch(struct redir_sockmap_relay *r)
{
	vmio_timer_cancel(&r->tick);
	if (r->egress >= 0)
		vmio_loop_remove(r->loop, r->egress);
	vmio_loop_remove(r->loop, r->div_in);
}

static void finish(struct redir_sockmap_relay *r, int error)
{
	if (r->finished)
		return;
	r->finished = true;
	r->end_ns = vmio_now_ns();
	unwatch(r);
	r->done(r->opaque, r, error);
}

static int socket_error(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return errno;
	return err;
}

/* The kernel's count of packets dropped on fd (SO_MEMINFO), or 0 if it
 * will not say. */
static uint32_t drop_count(int fd)
{
	uint32_t mem[SK_MEMINFO_VARS] = { 0 };
	socklen_t len = sizeof(mem);

	if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mem, &len) < 0 ||
	    len <= SK_MEMINFO_DROPS * sizeof(mem[0]))
		return 0;
	return mem[SK_MEMINFO_DROPS];
}

/* Whether the kernel dropped what it held for the egress. When the
 * egress's peer shuts down either way, Linux takes a unix egress out of
 * the map (unix_shutdown unhashes the peer) and drops the packets still
 * queued for it (sk_psock_stop), each counted on the egress: the sender
 * was told they went, and what follows them would close the gap
 * unseen. */
static bool egress_dropped(struct redir_sockmap_relay *r)
{
	uint32_t now;

	if (!r->count_drops || r->egress < 0)
		return false;
	now = drop_count(r->egress);
	if (now == r->drops)
		return false;
	log_err("%s: ADDRESS2's peer shut down or closed while the kernel held %u packets for it, and the kernel dropped them: data was lost",
		r->name, now - r->drops);
	return true;
}

static bool writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
}

/* One more tick of the socket the kernel sends on being idle: bytes is
 * the forwarded count, which must not move. Returns true once it has been
 * quiet for QUIET_MS. */
static bool quiet_for_long(struct redir_sockmap_relay *r, int fd,
			   uint64_t bytes)
{
	if (bytes != r->last_bytes || !writable(fd)) {
		r->last_bytes = bytes;
		r->quiet_ms = 0;
		return false;
	}
	r->quiet_ms += TICK_MS;
	return r->quiet_ms >= QUIET_MS;
}

/* A socket the kernel sends on failed, or the egress's peer went away:
 * whatever the kernel still held for it is lost, and the senders must
 * hear of it, which they do when the ingress closes (their next send is
 * refused). */
static void on_failure(void *opaque, int fd, uint32_t events)
{
	struct redir_sockmap_relay *r = opaque;
	struct redir_sockmap_counters c;
	int err = socket_error(fd);

	/* div_in's peer is ours: a hang-up there is the tail ending, and
	 * only an error means lost data. */
	if (fd == r->div_in && !err) {
		vmio_loop_remove(r->loop, fd);
		return;
	}
	if (fd == r->egress && !r->diverted && !err) {
		if (r->shut) {
			finish(r, 0); /* it read everything, then closed */
			return;
		}
		/* A sink may close once it has all it wants. That is only
		 * a loss if more comes (the tick checks), since the kernel
		 * sets an error on the egress when a send to it fails. */
		redir_sockmap_read(r->sm, &c);
		r->peer_gone = true;
		r->gone_bytes = c.bytes;
		vmio_loop_remove(r->loop, fd);
		return;
	}
	redir_sockmap_read(r->sm, &c);
	log_err("%s: %s %s after %llu bytes%s", r->name,
		fd == r->egress ? "ADDRESS2" : "the diversion socket",
		err ? strerror(err) : "closed", (unsigned long long)c.bytes,
		r->shut ? ": data sent after end of input was lost" : "");
	finish(r, -(err ? err : EPIPE));
}

static void on_tail_done(void *opaque, struct redir_relay *tail, int error)
{
	finish(opaque, error);
}

/* The diverted data may follow the egress's own queue once that is
 * empty: from then on, userspace moves it (the egress belongs to `tail`). */
static int start_tail(struct redir_sockmap_relay *r)
{
	char name[48];

	snprintf(name, sizeof(name), "%s (diverted)", r->name);
	vmio_loop_remove(r->loop, r->egress);
	/* One way: the egress's EOF must not reach div_in, since the kernel
	 * would then refuse to forward into it too. */
	r->tail = redir_relay_new_one_way(r->loop, r->div_out, r->egress,
					  REDIR_ENGINE_SPLICE,
					  REDIR_DEFAULT_BUFFER, name,
					  on_tail_done, r);
	r->div_out = r->egress = -1; /* the tail's now, even on failure */
	if (!r->tail)
		return -ENOMEM;
	log_info("%s: ADDRESS2's peer shut down, which takes ADDRESS2 out of the kernel's map; the rest goes through vmio",
		 r->name);
	return 0;
}

static void on_tick(void *opaque)
{
	struct redir_sockmap_relay *r = opaque;
	struct redir_sockmap_counters c;

	redir_sockmap_read(r->sm, &c);
	if (c.failed) {
		log_err("%s: the kernel dropped %llu datagrams: ADDRESS2 is gone",
			r->name, (unsigned long long)c.failed);
		finish(r, -EPIPE);
		return;
	}
	/* Before the tail may take the egress: nothing diverted may follow
	 * a gap. */
	if (egress_dropped(r)) {
		finish(r, -EPIPE);
		return;
	}
	if (r->peer_gone && (c.bytes != r->gone_bytes || c.diverted ||
			     socket_error(r->egress))) {
		log_err("%s: ADDRESS2 closed after %llu bytes; what came after was lost",
			r->name, (unsigned long long)r->gone_bytes);
		finish(r, -EPIPE);
		return;
	}
	if (c.diverted && !r->diverted) {
		/* Wait for the egress's queue from now: no more data goes
		 * to it. */
		r->diverted = true;
		r->last_bytes = c.bytes;
		r->quiet_ms = 0;
	}
	if (r->diverted && !r->tail) {
		/* Nothing more goes to the egress (the diversion is sticky),
		 * so only its room counts, not the count still rising with
		 * what the diversion takes. */
		if (quiet_for_long(r, r->egress, r->last_bytes) &&
		    start_tail(r)) {
			finish(r, -ENOMEM);
			return;
		}
		if (!r->tail)
			return;
		r->quiet_ms = 0; /* now for the diversion's queue */
	}
	if (c.eof && !r->eof) {
		log_debug("%s: end of input after %llu bytes", r->name,
			  (unsigned long long)c.bytes);
		r->eof = true;
		r->last_bytes = c.bytes;
		r->quiet_ms = 0;
	}
	if (r->eof && !r->shut) {
		/* Diverted, the end goes the same way as the data: through
		 * the diversion, whose EOF the tail passes on to the egress. */
		int to = r->diverted ? r->div_in : r->egress;

		if (!quiet_for_long(r, to, c.bytes))
			return;
		if (r->peer_gone) {
			finish(r, 0); /* it had everything: nothing came after */
			return;
		}
		if (shutdown(to, SHUT_WR) < 0 && errno != ENOTCONN) {
			log_err("%s: shutdown: %s", r->name, strerror(errno));
			finish(r, -errno);
			return;
		}
		r->shut = true;
		r->linger_ms = 0;
		return;
	}
	if (r->shut && !r->diverted) {
		r->linger_ms += TICK_MS;
		if (r->linger_ms >= LINGER_MS)
			finish(r, 0);
	}
}

static int setup(struct redir_sockmap_relay *r, int sndbuf)
{
	int sv[2], rc, domain = 0;
	socklen_t len = sizeof(domain);

	/* TCP counts the segments it refused on the way in as drops too,
	 * and its peer's shutdown leaves it in the map. */
	getsockopt(r->egress, SOL_SOCKET, SO_DOMAIN, &domain, &len);
	r->count_drops = domain != AF_INET && domain != AF_INET6;
	r->drops = drop_count(r->egress);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sv) < 0)
		return -errno;
	r->div_in = sv[0];
	r->div_out = sv[1];
	rc = redir_sockmap_attach(r->sm, r->ingress, r->egress, r->div_in,
				  sndbuf);
	if (rc) {
		log_err("%s: sockmap: cannot insert the sockets: %s", r->name,
			strerror(-rc));
		return rc;
	}
	rc = vmio_timer_init(&r->tick, r->loop, on_tick, r);
	if (rc)
		return rc;
	vmio_timer_arm_periodic_ns(&r->tick, TICK_MS * 1000000ull);
	/* No events asked: epoll reports a hang-up or an error regardless,
	 * and those are all this process acts on. */
	if (!rc)
		rc = vmio_loop_add(r->loop, r->egress, 0, on_failure, r);
	if (!rc)
		rc = vmio_loop_add(r->loop, r->div_in, 0, on_failure, r);
	return rc;
}

struct redir_sockmap_relay *redir_sockmap_relay_new(struct vmio_loop *loop,
						    struct redir_sockmap *sm,
						    int ingress, int egress,
						    int sndbuf, const char *name,
						    redir_sockmap_done_fn done,
						    void *opaque)
{
	struct redir_sockmap_relay *r = calloc(1, sizeof(*r));
	int rc;

	if (!r) {
		close(ingress);
		close(egress);
		redir_sockmap_free(sm);
		return NULL;
	}
	*r = (struct redir_sockmap_relay){
		.loop = loop, .sm = sm, .ingress = ingress, .egress = egress,
		.div_in = -1, .div_out = -1,
		.done = done, .opaque = opaque, .start_ns = vmio_now_ns(),
	};
	snprintf(r->name, sizeof(r->name), "%s", name);
	rc = setup(r, sndbuf);
	if (rc) {
		log_err("%s: cannot start: %s", name, strerror(-rc));
		redir_sockmap_relay_free(r);
		return NULL;
	}
	return r;
}

void redir_sockmap_relay_get_stats(const struct redir_sockmap_relay *r,
				   struct redir_relay_stats *st)
{
	struct redir_sockmap_counters c;

	redir_sockmap_read(r->sm, &c);
	*st = (struct redir_relay_stats){
		.bytes_ab = c.bytes,
		.dropped = c.failed,
		.start_ns = r->start_ns,
		.end_ns = r->finished ? r->end_ns : vmio_now_ns(),
	};
}

void redir_sockmap_relay_free(struct redir_sockmap_relay *r)
{
	if (!r)
		return;
	unwatch(r);
	vmio_timer_fini(&r->tick);
	/* The ingress first: once the egress is closed the program would
	 * drop what still arrives. */
	vmio_close_fd(&r->ingress);
	vmio_close_fd(&r->div_in);
	redir_relay_free(r->tail); /* div_out and the egress, once started */
	vmio_close_fd(&r->div_out);
	vmio_close_fd(&r->egress);
	redir_sockmap_free(r->sm);
	free(r);
}
