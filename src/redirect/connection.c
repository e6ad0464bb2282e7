/* Connections of `vmio redirect` on their workers; see connection.h. */
#include "redirect/connection.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "redirect/connect_retry.h"
#include "redirect/sockmap_relay.h"
#include "util/clock.h"
#include "util/json.h"
#include "util/log.h"

struct redir_conn {
	struct redir_worker *w;
	unsigned id;
	struct redir_side a; /* from ADDRESS1 */
	int b;           /* to ADDRESS2 while connecting */
	/* ADDRESS2's connect: retried while a unix listener's queue is
	 * full, given up at connect-timeout='s deadline (0: none). */
	struct vmio_timer timer;
	uint64_t deadline_ns;
	unsigned retry_ms;
	struct redir_relay *relay;
	struct redir_sockmap_relay *krelay; /* the sockmap engine's instead */
	struct vmio_defer arrive; /* the hand-over, posted to w's loop */
	char peer[128];           /* ADDRESS1's peer, for --control */
	LIST_ENTRY(redir_conn) link; /* on w->conns */
};

int redir_worker_init(struct redir_worker *w, unsigned index,
		      struct vmio_loop *loop, struct redir_conn_setup *setup)
{
	int rc;

	*w = (struct redir_worker){ .loop = loop, .index = index,
				       .setup = setup };
	LIST_INIT(&w->conns);
	rc = pthread_mutex_init(&w->lock, NULL);
	if (rc)
		log_err("worker %u: %s", index, strerror(rc));
	return rc ? -1 : 0;
}

void redir_worker_fini(struct redir_worker *w)
{
	/* Stats of connections cut short are still worth having. */
	w->closing = true;
	while (!LIST_EMPTY(&w->conns))
		redir_conn_end(LIST_FIRST(&w->conns), 0);
	pthread_mutex_destroy(&w->lock);
}

static void count_and_print(struct redir_conn *c)
{
	struct redir_totals *t = &c->w->totals;
	struct redir_relay_stats st;

	if (c->krelay)
		redir_sockmap_relay_get_stats(c->krelay, &st);
	else
		redir_relay_get_stats(c->relay, &st);
	uint64_t total = st.bytes_ab + st.bytes_ba;
	double secs = (double)(st.end_ns - st.start_ns) / 1e9;

	t->bytes += total;
	t->dropped += st.dropped;
	t->conns++;
	if (c->w->setup->stats)
		vmio_log_raw(VMIO_LOG_INFO,
			"vmio redirect: connection %u: %llu bytes 1->2, %llu bytes 2->1, %llu messages dropped, %.3f s, %.1f MB/s",
			c->id, (unsigned long long)st.bytes_ab,
			(unsigned long long)st.bytes_ba,
			(unsigned long long)st.dropped, secs,
			secs > 0 ? (double)total / 1e6 / secs : 0.0);
}

void redir_conn_end(struct redir_conn *c, int status)
{
	struct redir_worker *w = c->w;

	vmio_defer_cancel(&c->arrive);
	vmio_timer_fini(&c->timer);
	if (c->relay || c->krelay) {
		count_and_print(c);
		redir_relay_free(c->relay);
		redir_sockmap_relay_free(c->krelay);
	} else {
		vmio_loop_remove(w->loop, c->b);
		if (c->b >= 0)
			close(c->b);
		if (c->a.in >= 0)
			close(c->a.in);
		if (c->a.out >= 0 && c->a.out != c->a.in)
			close(c->a.out);
	}
	pthread_mutex_lock(&w->lock);
	LIST_REMOVE(c, link);
	pthread_mutex_unlock(&w->lock);
	free(c);
	if (!w->closing && w->setup->ended)
		w->setup->ended(w->setup->opaque, status);
}

static void on_relay_done(void *opaque, struct redir_relay *r, int error)
{
	struct redir_conn *c = opaque;

	log_debug("connection %u: %s", c->id, error ? "failed" : "done");
	redir_conn_end(c, error ? 1 : 0);
}

static void on_sockmap_done(void *opaque, struct redir_sockmap_relay *r,
			    int error)
{
	on_relay_done(opaque, NULL, error);
}

static void conn_name(const struct redir_conn *c, char *name, size_t size)
{
	snprintf(name, size, "connection %u", c->id);
}

/* "1.2.3.4:5", "[::1]:5", a unix path, or "" when the peer has no
 * name (an unbound unix client). */
static void peer_name(int fd, char *buf, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char ip[INET6_ADDRSTRLEN];

	buf[0] = '\0';
	if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)&ss;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, size, "%s:%u", ip, ntohs(in->sin_port));
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)&ss;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, size, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else if (ss.ss_family == AF_UNIX &&
		   len > offsetof(struct sockaddr_un, sun_path)) {
		const struct sockaddr_un *un = (const void *)&ss;
		size_t n = len - offsetof(struct sockaddr_un, sun_path);

		if (n > sizeof(un->sun_path))
			n = sizeof(un->sun_path);
		/* An abstract name starts with a NUL: shown with '@'. */
		snprintf(buf, size, "%s%.*s", un->sun_path[0] ? "" : "@",
			 (int)(un->sun_path[0] ? strnlen(un->sun_path, n)
					       : n - 1),
			 un->sun_path + !un->sun_path[0]);
	}
}

static void start_relay(struct redir_conn *c, struct redir_side b)
{
	const struct redir_conn_setup *s = c->w->setup;
	struct redir_side a = c->a;
	char name[32];

	conn_name(c, name, sizeof(name));
	c->a = (struct redir_side){ -1, -1 };
	c->b = -1;
	c->relay = redir_relay_new_sides(c->w->loop, a, b, s->engine,
					 s->buffer, s->dirs, name,
					 on_relay_done, c);
	if (!c->relay)
		redir_conn_end(c, 1);
}

static void connect_failed(struct redir_conn *c, int err)
{
	char where[160];

	c->w->totals.refused++;

	log_err("connection %u: cannot connect to %s: %s", c->id,
		redir_endpoint_describe(c->w->setup->to, where, sizeof(where)),
		strerror(-err));
	redir_conn_end(c, 1);
}

static void on_connected(void *opaque, int fd, uint32_t events)
{
	struct redir_conn *c = opaque;
	int err = redir_connect_result(fd);

	vmio_loop_remove(c->w->loop, fd);
	vmio_timer_fini(&c->timer);
	if (err)
		connect_failed(c, err);
	else
		start_relay(c, (struct redir_side){ fd, fd });
}

/* A connection on w's list with nothing started yet; NULL (logged)
 * without memory. From any thread: the list is under w's lock. */
static struct redir_conn *conn_new(struct redir_worker *w,
				      struct redir_side a)
{
	struct redir_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		log_err("out of memory: dropping a connection");
		return NULL;
	}
	*c = (struct redir_conn){
		.w = w,
		.id = atomic_fetch_add_explicit(&w->setup->next_id, 1,
						memory_order_relaxed) + 1,
		.a = a,
		.b = -1,
	};
	pthread_mutex_lock(&w->lock);
	LIST_INSERT_HEAD(&w->conns, c, link);
	pthread_mutex_unlock(&w->lock);
	return c;
}

static void try_connect(struct redir_conn *c);

/* A connect in progress has met its deadline, or a retry is due. */
static void on_timer(void *opaque)
{
	struct redir_conn *c = opaque;

	if (c->b >= 0)
		connect_failed(c, -ETIMEDOUT);
	else
		try_connect(c);
}

/* Arms c's timer in ns, but never past the deadline. Returns 0 or
 * -ENOMEM. */
static int arm_timer(struct redir_conn *c, uint64_t ns)
{
	if (!c->timer.initialised &&
	    vmio_timer_init(&c->timer, c->w->loop, on_timer, c))
		return -ENOMEM;
	if (c->deadline_ns) {
		uint64_t now = vmio_now_ns();
		uint64_t left = c->deadline_ns > now ? c->deadline_ns - now : 0;

		if (!ns || left < ns)
			ns = left;
	}
	vmio_timer_arm_ns(&c->timer, ns ? ns : 1);
	return 0;
}

static void try_connect(struct redir_conn *c)
{
	const struct redir_endpoint *to = c->w->setup->to;
	int b, rc;

	if (c->deadline_ns && vmio_now_ns() >= c->deadline_ns) {
		connect_failed(c, -ETIMEDOUT);
		return;
	}
	b = redir_endpoint_connect(to);
	/* Waits on a timer, backing off (connect_retry.h). */
	if (redir_connect_retries(to, b)) {
		if (c->retry_ms == REDIR_CONNECT_RETRY_FIRST_MS)
			log_debug("connection %u: ADDRESS2's accept queue is full: retrying",
				  c->id);
		rc = arm_timer(c, (uint64_t)c->retry_ms * 1000000u);
		c->retry_ms = redir_connect_retry_next(c->retry_ms);
		if (rc)
			connect_failed(c, rc);
		return;
	}
	if (b < 0) {
		connect_failed(c, b);
		return;
	}
	c->b = b;
	rc = vmio_loop_add(c->w->loop, b, EPOLLOUT, on_connected, c);
	/* The connect waits on the loop like any event, bounded by the
	 * timer when asked. */
	if (!rc && c->deadline_ns)
		rc = arm_timer(c, 0);
	if (rc)
		connect_failed(c, rc);
}

/* On c's worker: ADDRESS2 is connected, and the relay starts once it
 * is. */
static void conn_begin(struct redir_conn *c)
{
	const struct redir_endpoint *to = c->w->setup->to;

	log_debug("connection %u: accepted, served by worker %u", c->id,
		  c->w->index);
	peer_name(c->a.in, c->peer, sizeof(c->peer));
	if (to->addr.kind == REDIR_STDIO) {
		start_relay(c, (struct redir_side){ STDIN_FILENO,
						    STDOUT_FILENO });
		return;
	}
	c->retry_ms = REDIR_CONNECT_RETRY_FIRST_MS;
	if (to->addr.connect_timeout_ns)
		c->deadline_ns = vmio_now_ns() + to->addr.connect_timeout_ns;
	try_connect(c);
}

static void on_arrival(void *opaque)
{
	conn_begin(opaque);
}

void redir_conn_start_side(struct redir_worker *w, struct redir_side a)
{
	struct redir_conn *c = conn_new(w, a);

	if (c) {
		conn_begin(c);
		return;
	}
	close(a.in);
	if (a.out != a.in)
		close(a.out);
}

void redir_conn_start(struct redir_worker *w, int a)
{
	redir_conn_start_side(w, (struct redir_side){ a, a });
}

void redir_conn_hand_over(struct redir_worker *w, int a)
{
	struct redir_conn *c = conn_new(w, (struct redir_side){ a, a });

	if (!c) {
		close(a);
		return;
	}
	/* From here on only w's thread touches c (or the teardown, once
	 * every worker is joined). */
	vmio_defer_init(&c->arrive, w->loop, on_arrival, c);
	vmio_defer_post(&c->arrive);
}

void redir_conn_start_connected(struct redir_worker *w, int a, int b)
{
	struct redir_conn *c = conn_new(w, (struct redir_side){ a, a });

	if (!c) {
		close(a);
		close(b);
		return;
	}
	peer_name(a, c->peer, sizeof(c->peer));
	start_relay(c, (struct redir_side){ b, b });
}

struct redir_conn *redir_conn_start_sockmap(struct redir_worker *w,
					    struct redir_sockmap *sm,
					    int ingress, int egress,
					    int sndbuf)
{
	struct redir_conn *c = conn_new(w, (struct redir_side){ -1, -1 });
	char name[32];

	if (!c) {
		redir_sockmap_free(sm);
		close(ingress);
		close(egress);
		return NULL;
	}
	conn_name(c, name, sizeof(name));
	c->krelay = redir_sockmap_relay_new(w->loop, sm, ingress, egress,
					    sndbuf, name, on_sockmap_done, c);
	if (!c->krelay) {
		redir_conn_end(c, 1);
		return NULL;
	}
	return c;
}

/* ---- Counters ----------------------------------------------------------- */

static void write_conn(const struct redir_conn *c, struct vmio_json *j)
{
	const struct redir_conn_setup *s = c->w->setup;
	struct redir_relay_stats st = { 0 };
	char to[160];

	if (c->krelay)
		redir_sockmap_relay_get_stats(c->krelay, &st);
	else if (c->relay)
		redir_relay_get_stats(c->relay, &st);
	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "id", c->id);
	/* What moves the bytes, not what was asked: a connecting one has
	 * no relay yet, and will run the one the setup names. */
	vmio_json_kv_string(j, "engine", c->krelay ? "sockmap" :
					 c->relay ? redir_relay_engine(c->relay) :
					 s->engine_name);
	vmio_json_kv_string(j, "state", c->relay || c->krelay ? "relaying"
							      : "connecting");
	vmio_json_kv_string(j, "peer1", c->peer);
	vmio_json_kv_string(j, "peer2",
			    redir_endpoint_describe(s->to, to, sizeof(to)));
	vmio_json_kv_uint(j, "bytes_1to2", st.bytes_ab);
	vmio_json_kv_uint(j, "bytes_2to1", st.bytes_ba);
	vmio_json_kv_uint(j, "messages_dropped", st.dropped);
	vmio_json_object_end(j);
}

void redir_worker_write_stats(struct redir_worker *w, struct vmio_json *j)
{
	const struct redir_conn *c;

	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "worker", w->index);
	vmio_json_kv_uint(j, "connections_ended", w->totals.conns);
	vmio_json_kv_uint(j, "connections_refused", w->totals.refused);
	vmio_json_kv_uint(j, "bytes_ended", w->totals.bytes);
	vmio_json_kv_uint(j, "messages_dropped_ended", w->totals.dropped);
	vmio_json_key(j, "connections");
	vmio_json_array_begin(j);
	/* The accepting thread adds to the list meanwhile; each
	 * connection's own fields are this thread's. */
	pthread_mutex_lock(&w->lock);
	LIST_FOREACH(c, &w->conns, link)
		write_conn(c, j);
	pthread_mutex_unlock(&w->lock);
	vmio_json_array_end(j);
	vmio_json_object_end(j);
}

unsigned redir_worker_count(struct redir_worker *w)
{
	struct redir_conn *c;
	unsigned n = 0;

	pthread_mutex_lock(&w->lock);
	LIST_FOREACH(c, &w->conns, link)
		n++;
	pthread_mutex_unlock(&w->lock);
	return n;
}
