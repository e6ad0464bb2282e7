#include "redirect/sockmap_relay.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "util/log.h"

/* How often the counters are read. */
#define TICK_MS 10
/* How long, after end of input, the counters must stand still with the
 * egress writable before the egress is shut down. The kernel's queue
 * towards the egress retries every jiffy (4 ms at HZ=250) while the egress
 * has room, so a quarter second is dozens of chances to have emptied it
 * even on a loaded machine; if it still had not, the shutdown makes its
 * next send fail, and that failure is reported as lost data. */
#define QUIET_MS 250
/* After the shutdown, how long to wait for the egress's peer to close, so
 * that a send the kernel failed after it still shows. */
#define LINGER_MS 2000

enum phase {
	RUNNING,   /* forwarding; end of input not seen yet */
	DRAINING,  /* end of input seen; waiting for the counters to settle */
	LINGERING, /* egress shut down; watching for a late failure */
};

struct redir_sockmap_relay {
	struct vmio_loop *loop;
	struct redir_sockmap *sm;
	int ingress, egress, timer;
	enum phase phase;
	uint64_t last_bytes;
	unsigned quiet_ms, linger_ms;
	uint64_t start_ns, end_ns;
	bool finished;
	char name[32];
	redir_sockmap_done_fn done;
	void *opaque;
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void finish(struct redir_sockmap_relay *r, int error)
{
	r->finished = true;
	r->end_ns = now_ns();
	vmio_loop_remove(r->loop, r->timer);
	vmio_loop_remove(r->loop, r->egress);
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

static bool writable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLOUT };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLOUT);
}

/* The egress failed or its peer went away: whatever the kernel still
 * held for it is lost, and the senders must hear of it, which they do
 * when the ingress closes (their next send is refused). */
static void egress_failed(struct redir_sockmap_relay *r, uint32_t events)
{
	struct redir_sockmap_counters c;
	int err = socket_error(r->egress);

	redir_sockmap_read(r->sm, &c);
	if (r->phase == LINGERING && !err) {
		finish(r, 0); /* the peer read everything, then closed */
		return;
	}
	log_err("%s: ADDRESS2 %s after %llu bytes%s", r->name,
		err ? strerror(err) : "closed", (unsigned long long)c.bytes,
		r->phase == LINGERING ?
			": data sent after end of input was lost" : "");
	finish(r, -(err ? err : EPIPE));
}

static void on_egress(void *opaque, int fd, uint32_t events)
{
	egress_failed(opaque, events);
}

static void on_tick(void *opaque, int fd, uint32_t events)
{
	struct redir_sockmap_relay *r = opaque;
	struct redir_sockmap_counters c;
	uint64_t expirations;

	if (read(fd, &expirations, sizeof(expirations)) < 0)
		return;
	redir_sockmap_read(r->sm, &c);
	if (c.failed) {
		log_err("%s: the kernel dropped %llu datagrams: ADDRESS2 is gone",
			r->name, (unsigned long long)c.failed);
		finish(r, -EPIPE);
		return;
	}
	switch (r->phase) {
	case RUNNING:
		if (!c.eof)
			break;
		log_debug("%s: end of input after %llu bytes", r->name,
			  (unsigned long long)c.bytes);
		r->phase = DRAINING;
		r->last_bytes = c.bytes;
		r->quiet_ms = 0;
		break;
	case DRAINING:
		if (c.bytes != r->last_bytes || !writable(r->egress)) {
			r->last_bytes = c.bytes;
			r->quiet_ms = 0;
			break;
		}
		r->quiet_ms += TICK_MS;
		if (r->quiet_ms < QUIET_MS)
			break;
		if (shutdown(r->egress, SHUT_WR) < 0 && errno != ENOTCONN) {
			log_err("%s: shutdown: %s", r->name, strerror(errno));
			finish(r, -errno);
			return;
		}
		r->phase = LINGERING;
		r->linger_ms = 0;
		break;
	case LINGERING:
		r->linger_ms += TICK_MS;
		if (r->linger_ms >= LINGER_MS)
			finish(r, 0);
		break;
	}
}

struct redir_sockmap_relay *redir_sockmap_relay_new(struct vmio_loop *loop,
						    struct redir_sockmap *sm,
						    int ingress, int egress,
						    const char *name,
						    redir_sockmap_done_fn done,
						    void *opaque)
{
	struct redir_sockmap_relay *r = calloc(1, sizeof(*r));
	struct itimerspec its = {
		.it_interval.tv_nsec = TICK_MS * 1000000L,
		.it_value.tv_nsec = TICK_MS * 1000000L,
	};
	int rc;

	if (!r) {
		close(ingress);
		close(egress);
		redir_sockmap_free(sm);
		return NULL;
	}
	*r = (struct redir_sockmap_relay){
		.loop = loop, .sm = sm, .ingress = ingress, .egress = egress,
		.done = done, .opaque = opaque, .start_ns = now_ns(),
	};
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	rc = r->timer < 0 ? -errno : 0;
	if (!rc && timerfd_settime(r->timer, 0, &its, NULL) < 0)
		rc = -errno;
	if (!rc)
		rc = vmio_loop_add(loop, r->timer, EPOLLIN, on_tick, r);
	/* No events asked: epoll reports a hang-up or an error regardless,
	 * and those are all this process acts on. */
	if (!rc)
		rc = vmio_loop_add(loop, egress, 0, on_egress, r);
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
		.start_ns = r->start_ns,
		.end_ns = r->finished ? r->end_ns : now_ns(),
	};
}

void redir_sockmap_relay_free(struct redir_sockmap_relay *r)
{
	if (!r)
		return;
	vmio_loop_remove(r->loop, r->timer);
	vmio_loop_remove(r->loop, r->egress);
	if (r->timer >= 0)
		close(r->timer);
	/* The ingress first: once the egress is closed the program would
	 * drop what still arrives. */
	close(r->ingress);
	close(r->egress);
	redir_sockmap_free(r->sm);
	free(r);
}
