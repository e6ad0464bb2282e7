#include "redirect/relay.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "redirect/relay_internal.h"
#include "util/clock.h"
#include "util/log.h"

/* Bytes one direction moves per wake-up at most, so that one busy
 * connection cannot starve the others sharing the loop; level-triggered
 * epoll brings it back for the rest. */
#define PUMP_BUDGET (4u * 1024 * 1024)

/* One descriptor of the relay's (a socket is both ends' in and out). */
struct watch {
	int fd;             /* -1: closed (a non-socket's out, at its EOF) */
	uint32_t watched;   /* events it is registered for; 0: not */
	bool unpollable;    /* epoll refused it: always ready */
	bool is_socket;
	int flags;          /* F_GETFL before, restored on a non-socket */
};

struct redir_relay {
	struct vmio_loop *loop;
	struct redir_side side[2]; /* a, b */
	struct watch w[4];
	unsigned nw;
	struct vmio_defer kick;    /* serves the unpollable ones */
	struct redir_dir dir[2];   /* [0] a -> b, [1] b -> a */
	char name[32];
	uint64_t start_ns, end_ns;
	bool finished;
	redir_relay_done_fn done;
	void *opaque;
};

static const char *const engine_names[] = {
	[REDIR_ENGINE_AUTO] = "auto",
	[REDIR_ENGINE_COPY] = "copy",
	[REDIR_ENGINE_SPLICE] = "splice",
	[REDIR_ENGINE_SOCKMAP] = "sockmap",
};

int redir_engine_parse(const char *name, enum redir_engine *out)
{
	for (size_t i = 0; i < sizeof(engine_names) / sizeof(engine_names[0]); i++) {
		if (!strcasecmp(name, engine_names[i])) {
			*out = (enum redir_engine)i;
			return 0;
		}
	}
	return -1;
}

const char *redir_engine_name(enum redir_engine e)
{
	return (size_t)e < sizeof(engine_names) / sizeof(engine_names[0]) ?
		       engine_names[e] : "?";
}

const struct redir_engine_ops *redir_engine_for(int src_type, int dst_type,
						enum redir_engine requested)
{
	if ((src_type && src_type != SOCK_STREAM) ||
	    (dst_type && dst_type != SOCK_STREAM))
		return &redir_engine_msg;
	if (!src_type || !dst_type)
		return &redir_engine_copy;
	return requested == REDIR_ENGINE_COPY ? &redir_engine_copy :
						&redir_engine_splice;
}

int redir_end_shutdown(struct redir_dir *d)
{
	if (shutdown(d->dst, SHUT_WR) < 0 && errno != ENOTCONN)
		return -errno;
	return 0;
}

static bool wants_fill(const struct redir_dir *d)
{
	return !d->eof && d->ops->can_fill(d);
}

static struct watch *watch_of(struct redir_relay *r, int fd)
{
	for (unsigned k = 0; k < r->nw; k++)
		if (r->w[k].fd == fd)
			return &r->w[k];
	return NULL;
}

/* A stream reader sees EOF at shutdown; a pipe's or a tty's only once
 * its writer is closed. */
static int pass_eof(struct redir_relay *r, int i)
{
	struct redir_dir *d = &r->dir[i];
	struct watch *w = watch_of(r, d->dst);

	if (!w || w->is_socket)
		return d->ops->end ? d->ops->end(d) : redir_end_shutdown(d);
	if (w->watched)
		vmio_loop_remove(r->loop, w->fd);
	fcntl(w->fd, F_SETFL, w->flags);
	close(w->fd);
	w->fd = -1;
	w->watched = 0;
	r->side[!i].out = -1;
	d->dst = -1;
	return 0;
}

static void relay_on_event(void *opaque, int fd, uint32_t events);

/* The events w needs: readable while a direction out of it can take
 * more, writable while one into it holds data or has an EOF still to
 * pass on (an empty datagram can meet a full queue). A socket needing
 * nothing is taken off the loop, because epoll reports a hang-up whether
 * asked or not and a level-triggered hang-up we cannot act on yet would
 * spin. */
static uint32_t wanted(const struct redir_relay *r, const struct watch *w)
{
	uint32_t want = 0;

	for (int i = 0; i < 2; i++) {
		const struct redir_dir *out = &r->dir[i], *in = &r->dir[!i];

		if (r->side[i].in == w->fd && wants_fill(out))
			want |= EPOLLIN;
		if (r->side[i].out == w->fd &&
		    (in->held || (in->eof && !in->done)))
			want |= EPOLLOUT;
	}
	return want;
}

static int update_watch(struct redir_relay *r, struct watch *w)
{
	uint32_t want = w->fd < 0 ? 0 : wanted(r, w);
	int rc = 0;

	if (w->unpollable) {
		/* A file is always ready: come back on the next turn. */
		if (want)
			vmio_defer_schedule(&r->kick);
		return 0;
	}
	if (want == w->watched)
		return 0;
	if (!want)
		vmio_loop_remove(r->loop, w->fd);
	else if (!w->watched)
		rc = vmio_loop_add(r->loop, w->fd, want, relay_on_event, r);
	else
		rc = vmio_loop_modify(r->loop, w->fd, want);
	if (rc == -EPERM && !w->watched) {
		w->unpollable = true;
		vmio_defer_schedule(&r->kick);
		return 0;
	}
	if (!rc)
		w->watched = want;
	return rc;
}

/* A connected datagram socket never reads EOF unless its peer sends an
 * empty datagram, which a plain datagram server does not: once nothing
 * more goes to it, nothing more is waited for from it, or a relay between
 * a stream client and a datagram server would outlive the client. */
static void end_reply_from_dgram(struct redir_relay *r, int i)
{
	struct redir_dir *back = &r->dir[!i];

	if (r->dir[i].dst_type == SOCK_DGRAM)
		back->eof = true;
}

/* Moves what can be moved now in direction i. Returns 0 or -errno. */
static int pump(struct redir_relay *r, int i)
{
	struct redir_dir *d = &r->dir[i];
	size_t moved = 0;

	while (!d->done && moved < PUMP_BUDGET) {
		bool progress = false;
		long n;

		if (wants_fill(d)) {
			n = d->ops->fill(d, PUMP_BUDGET - moved);
			if (n > 0) {
				progress = true;
			} else if (n == 0) {
				d->eof = true;
				progress = true;
			} else if (n != -EAGAIN) {
				return (int)n;
			}
		}
		if (d->held) {
			n = d->ops->drain(d);
			if (n > 0) {
				d->bytes += (uint64_t)n;
				moved += (size_t)n;
				progress = true;
			} else if (n == 0) {
				return -EIO;
			} else if (n != -EAGAIN) {
				return (int)n;
			}
		}
		if (d->eof && !d->held) {
			/* The far reader sees EOF only once everything
			 * before it has been written. */
			int rc = pass_eof(r, i);

			if (rc == -EAGAIN)
				break;
			if (rc)
				return rc;
			d->done = true;
			end_reply_from_dgram(r, i);
		}
		if (!progress)
			break;
	}
	return 0;
}

static void finish(struct redir_relay *r, int error)
{
	r->finished = true;
	r->end_ns = vmio_now_ns();
	vmio_defer_cancel(&r->kick);
	for (unsigned k = 0; k < r->nw; k++) {
		if (r->w[k].watched)
			vmio_loop_remove(r->loop, r->w[k].fd);
		r->w[k].watched = 0;
	}
	r->done(r->opaque, r, error);
}

static void relay_on_event(void *opaque, int fd, uint32_t events)
{
	struct redir_relay *r = opaque;
	int rc = 0;

	for (int i = 0; i < 2 && !rc; i++) {
		rc = pump(r, i);
		if (rc)
			log_err("%s: %s -> %s: %s", r->name, i ? "b" : "a",
				i ? "a" : "b", strerror(-rc));
	}
	if (!rc && r->dir[0].done && r->dir[1].done) {
		finish(r, 0);
		return;
	}
	for (unsigned k = 0; k < r->nw && !rc; k++) {
		rc = update_watch(r, &r->w[k]);
		if (rc)
			log_err("%s: cannot watch socket: %s", r->name,
				strerror(-rc));
	}
	if (rc)
		finish(r, rc);
}

static void on_kick(void *opaque)
{
	relay_on_event(opaque, -1, 0);
}

/* The socket type of fd; 0 for a descriptor that is no socket. */
static int sock_type(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return errno == ENOTSOCK ? 0 : -errno;
	return type;
}

/* A datagram socket with no peer (UNIX-RECV) has nowhere to send: the
 * direction into it is not relayed, and what its peer sends stays unread
 * in that peer's socket. */
static bool has_nowhere_to_send(int fd, int type)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	return type == SOCK_DGRAM &&
	       getpeername(fd, (struct sockaddr *)&ss, &len) < 0 &&
	       errno == ENOTCONN;
}

/* Sets up direction i (side i's in -> side !i's out) with the engine
 * their types call for. Returns 0 or -errno. */
static int dir_init(struct redir_relay *r, int i, enum redir_engine engine,
		    size_t buffer, bool relayed)
{
	struct redir_dir *d = &r->dir[i];
	int src = r->side[i].in, dst = r->side[!i].out;
	int src_type = sock_type(src), dst_type = sock_type(dst);

	if (src_type < 0)
		return src_type;
	if (dst_type < 0)
		return dst_type;
	*d = (struct redir_dir){
		.ops = redir_engine_for(src_type, dst_type, engine),
		.name = r->name, .src = src, .dst = dst,
		.src_type = src_type ? src_type : SOCK_STREAM,
		.dst_type = dst_type ? dst_type : SOCK_STREAM,
		.capacity = buffer, .pipe_r = -1, .pipe_w = -1,
	};
	if (!buffer)
		d->capacity = d->ops == &redir_engine_splice ?
				      REDIR_SPLICE_DEFAULT_BUFFER :
				      REDIR_DEFAULT_BUFFER;
	if (!relayed || has_nowhere_to_send(d->dst, dst_type))
		d->eof = d->done = true;
	return d->ops->init(d);
}

/* Registers fd as one of the relay's descriptors (once) and makes it
 * non-blocking. Returns 0 or -errno. */
static int add_fd(struct redir_relay *r, int fd)
{
	struct watch *w;
	int fl;

	if (watch_of(r, fd))
		return 0;
	w = &r->w[r->nw++];
	*w = (struct watch){ .fd = fd, .is_socket = sock_type(fd) > 0 };
	fl = fcntl(fd, F_GETFL);
	if (fl < 0)
		return -errno;
	w->flags = fl;
	if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

struct redir_relay *redir_relay_new_sides(struct vmio_loop *loop,
					  struct redir_side a,
					  struct redir_side b,
					  enum redir_engine engine,
					  size_t buffer, unsigned dirs,
					  const char *name,
					  redir_relay_done_fn done,
					  void *opaque)
{
	struct redir_relay *r = calloc(1, sizeof(*r));
	int rc = 0;

	if (!r) {
		int fds[4] = { a.in, a.out, b.in, b.out };

		for (int k = 0; k < 4; k++)
			if (k % 2 == 0 || fds[k] != fds[k - 1])
				close(fds[k]);
		return NULL;
	}
	r->loop = loop;
	r->side[0] = a;
	r->side[1] = b;
	r->done = done;
	r->opaque = opaque;
	r->start_ns = vmio_now_ns();
	vmio_defer_init(&r->kick, loop, on_kick, r);
	snprintf(r->name, sizeof(r->name), "%s", name);
	for (int i = 0; i < 2; i++)
		r->dir[i] = (struct redir_dir){ .pipe_r = -1, .pipe_w = -1 };
	int fds[4] = { a.in, a.out, b.in, b.out };
	/* Every one is registered, so that each is closed whatever fails. */
	for (int k = 0; k < 4; k++) {
		int err = add_fd(r, fds[k]);

		rc = rc ? rc : err;
	}
	for (int i = 0; i < 2 && !rc; i++)
		rc = dir_init(r, i, engine, buffer,
			      dirs & (i ? REDIR_B_TO_A : REDIR_A_TO_B));
	for (unsigned k = 0; k < r->nw && !rc; k++)
		rc = update_watch(r, &r->w[k]);
	if (rc) {
		log_err("%s: cannot start relay: %s", name, strerror(-rc));
		redir_relay_free(r);
		return NULL;
	}
	return r;
}

struct redir_relay *redir_relay_new(struct vmio_loop *loop, int a, int b,
				    enum redir_engine engine, size_t buffer,
				    const char *name, redir_relay_done_fn done,
				    void *opaque)
{
	return redir_relay_new_sides(loop, (struct redir_side){ a, a },
			   (struct redir_side){ b, b }, engine, buffer,
			   REDIR_BOTH, name, done, opaque);
}

struct redir_relay *redir_relay_new_one_way(struct vmio_loop *loop, int a,
					    int b, enum redir_engine engine,
					    size_t buffer, const char *name,
					    redir_relay_done_fn done,
					    void *opaque)
{
	return redir_relay_new_sides(loop, (struct redir_side){ a, a },
			   (struct redir_side){ b, b }, engine, buffer,
			   REDIR_A_TO_B, name, done, opaque);
}

void redir_relay_get_stats(const struct redir_relay *r,
			   struct redir_relay_stats *st)
{
	*st = (struct redir_relay_stats){
		.bytes_ab = r->dir[0].bytes,
		.bytes_ba = r->dir[1].bytes,
		.dropped = r->dir[0].dropped + r->dir[1].dropped,
		.start_ns = r->start_ns,
		.end_ns = r->finished ? r->end_ns : vmio_now_ns(),
	};
}

const char *redir_relay_engine(const struct redir_relay *r)
{
	/* Both directions share their two ends, hence their engine. */
	const struct redir_engine_ops *ops = r->dir[0].ops;

	return ops == &redir_engine_msg ? "message" :
	       ops == &redir_engine_splice ? "splice" : "copy";
}

void redir_relay_free(struct redir_relay *r)
{
	if (!r)
		return;
	vmio_defer_cancel(&r->kick);
	for (int i = 0; i < 2; i++)
		if (r->dir[i].ops)
			r->dir[i].ops->fini(&r->dir[i]);
	for (unsigned k = 0; k < r->nw; k++) {
		struct watch *w = &r->w[k];

		if (w->fd < 0)
			continue;
		if (w->watched)
			vmio_loop_remove(r->loop, w->fd);
		/* stdin and stdout are shared with whoever started us. */
		if (!w->is_socket)
			fcntl(w->fd, F_SETFL, w->flags);
		close(w->fd);
	}
	free(r);
}
