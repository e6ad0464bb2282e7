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

struct redir_relay {
	struct vmio_loop *loop;
	int fd[2];                 /* a, b */
	uint32_t watched[2];       /* events each fd is registered for; 0: not */
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
	if (src_type != SOCK_STREAM || dst_type != SOCK_STREAM)
		return &redir_engine_msg;
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

static int pass_eof(struct redir_dir *d)
{
	return d->ops->end ? d->ops->end(d) : redir_end_shutdown(d);
}

static void relay_on_event(void *opaque, int fd, uint32_t events);

/* The events fd i needs: readable while its outgoing direction can take
 * more, writable while its incoming direction holds data or has an EOF
 * still to pass on (an empty datagram can meet a full queue). A socket needing
 * nothing is taken off the loop, because epoll reports a hang-up whether
 * asked or not and a level-triggered hang-up we cannot act on yet would
 * spin. */
static int update_watch(struct redir_relay *r, int i)
{
	const struct redir_dir *out = &r->dir[i], *in = &r->dir[!i];
	uint32_t want = 0;
	int rc = 0;

	if (wants_fill(out))
		want |= EPOLLIN;
	if (in->held || (in->eof && !in->done))
		want |= EPOLLOUT;
	if (want == r->watched[i])
		return 0;
	if (!want)
		vmio_loop_remove(r->loop, r->fd[i]);
	else if (!r->watched[i])
		rc = vmio_loop_add(r->loop, r->fd[i], want, relay_on_event, r);
	else
		rc = vmio_loop_modify(r->loop, r->fd[i], want);
	if (!rc)
		r->watched[i] = want;
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
			int rc = pass_eof(d);

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
	for (int i = 0; i < 2; i++) {
		if (r->watched[i])
			vmio_loop_remove(r->loop, r->fd[i]);
		r->watched[i] = 0;
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
	for (int i = 0; i < 2 && !rc; i++) {
		rc = update_watch(r, i);
		if (rc)
			log_err("%s: cannot watch socket: %s", r->name,
				strerror(-rc));
	}
	if (rc)
		finish(r, rc);
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int sock_type(int fd)
{
	int type = 0;
	socklen_t len = sizeof(type);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
		return -errno;
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

/* Sets up direction i (fd[i] -> fd[!i]) with the engine its socket types
 * call for. Returns 0 or -errno. */
static int dir_init(struct redir_relay *r, int i, enum redir_engine engine,
		    size_t buffer, bool relayed)
{
	struct redir_dir *d = &r->dir[i];
	int src_type = sock_type(r->fd[i]), dst_type = sock_type(r->fd[!i]);

	if (src_type < 0)
		return src_type;
	if (dst_type < 0)
		return dst_type;
	*d = (struct redir_dir){
		.ops = redir_engine_for(src_type, dst_type, engine),
		.name = r->name, .src = r->fd[i], .dst = r->fd[!i],
		.src_type = src_type, .dst_type = dst_type,
		.capacity = buffer, .pipe_r = -1, .pipe_w = -1,
	};
	if (!relayed || has_nowhere_to_send(d->dst, dst_type))
		d->eof = d->done = true;
	return d->ops->init(d);
}

static struct redir_relay *relay_start(struct vmio_loop *loop, int a, int b,
				       enum redir_engine engine, size_t buffer,
				       bool both_ways, const char *name,
				       redir_relay_done_fn done, void *opaque)
{
	struct redir_relay *r = calloc(1, sizeof(*r));
	int rc;

	if (!r) {
		close(a);
		close(b);
		return NULL;
	}
	r->loop = loop;
	r->fd[0] = a;
	r->fd[1] = b;
	r->done = done;
	r->opaque = opaque;
	r->start_ns = vmio_now_ns();
	snprintf(r->name, sizeof(r->name), "%s", name);
	for (int i = 0; i < 2; i++)
		r->dir[i] = (struct redir_dir){ .pipe_r = -1, .pipe_w = -1 };
	rc = set_nonblock(a);
	if (!rc)
		rc = set_nonblock(b);
	for (int i = 0; i < 2 && !rc; i++)
		rc = dir_init(r, i, engine, buffer, i == 0 || both_ways);
	for (int i = 0; i < 2 && !rc; i++)
		rc = update_watch(r, i);
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
	return relay_start(loop, a, b, engine, buffer, true, name, done,
			   opaque);
}

struct redir_relay *redir_relay_new_one_way(struct vmio_loop *loop, int a,
					    int b, enum redir_engine engine,
					    size_t buffer, const char *name,
					    redir_relay_done_fn done,
					    void *opaque)
{
	return relay_start(loop, a, b, engine, buffer, false, name, done,
			   opaque);
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

void redir_relay_free(struct redir_relay *r)
{
	if (!r)
		return;
	for (int i = 0; i < 2; i++) {
		if (r->watched[i])
			vmio_loop_remove(r->loop, r->fd[i]);
		if (r->dir[i].ops)
			r->dir[i].ops->fini(&r->dir[i]);
		close(r->fd[i]);
	}
	free(r);
}
