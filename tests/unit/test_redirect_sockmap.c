/* The sockmap engine in-process: the kernel forwards datagrams from an
 * ingress socket to a stream, and the relay sees the end and failures.
 * Needs root (or CAP_BPF and CAP_NET_ADMIN): without it every case fails
 * and says so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "event/loop.h"
#include "redirect/sockmap.h"
#include "redirect/sockmap_relay.h"

#define MSG 65536u
#define WAIT_MS 10000

static uint8_t byte_at(uint64_t off)
{
	return (uint8_t)((off * 131u) ^ (off >> 9) ^ (off % 251u));
}

struct pair {
	struct sockaddr_un sa;   /* the ingress address (abstract) */
	socklen_t sa_len;
	int ingress, egress, sink;
	struct redir_sockmap *sm;
};

static void pair_open(struct pair *p, const char *tag)
{
	char err[256];
	int sv[2];

	p->sm = redir_sockmap_load(err, sizeof(err));
	if (!p->sm)
		fail_msg("the sockmap engine needs root or CAP_BPF+CAP_NET_ADMIN: %s",
			 err);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	p->egress = sv[0];
	p->sink = sv[1];
	p->ingress = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(p->ingress >= 0);
	memset(&p->sa, 0, sizeof(p->sa));
	p->sa.sun_family = AF_UNIX;
	int n = snprintf(p->sa.sun_path + 1, sizeof(p->sa.sun_path) - 1,
			 "vmio-sockmap-%s-%d", tag, (int)getpid());
	p->sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

struct outcome {
	bool done;
	int error;
};

static void on_done(void *opaque, struct redir_sockmap_relay *r, int error)
{
	struct outcome *o = opaque;

	o->done = true;
	o->error = error;
}

/* The relay joins the pair; only then does the ingress get its address. */
static struct redir_sockmap_relay *pair_start(struct pair *p,
					      struct vmio_loop *loop,
					      struct outcome *o)
{
	struct redir_sockmap_relay *r = redir_sockmap_relay_new(
		loop, p->sm, p->ingress, p->egress, 4 << 20, "test", on_done, o);

	assert_non_null(r);
	assert_int_equal(bind(p->ingress, (struct sockaddr *)&p->sa, p->sa_len), 0);
	return r;
}

struct sender {
	const struct pair *p;
	uint64_t n;          /* bytes to send, then an empty datagram */
	int error;           /* errno of the first failed send */
	uint64_t sent;
};

static void *send_all(void *arg)
{
	struct sender *s = arg;
	uint8_t buf[MSG];
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct timeval tv = { .tv_sec = WAIT_MS / 1000 };

	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (const struct sockaddr *)&s->p->sa, s->p->sa_len) < 0) {
		s->error = errno;
		close(fd);
		return NULL;
	}
	while (s->sent < s->n) {
		size_t len = s->n - s->sent < MSG ? s->n - s->sent : MSG;

		for (size_t i = 0; i < len; i++)
			buf[i] = byte_at(s->sent + i);
		if (send(fd, buf, len, 0) != (ssize_t)len) {
			s->error = errno;
			break;
		}
		s->sent += len;
	}
	if (!s->error && send(fd, "", 0, 0) < 0)
		s->error = errno;
	close(fd);
	return NULL;
}

/* Reads the sink until EOF, checking every byte, while the loop runs. */
static uint64_t sink_until_eof(int sink, struct vmio_loop *loop,
			       struct outcome *o, bool *intact)
{
	uint8_t buf[MSG];
	uint64_t got = 0;
	time_t deadline = time(NULL) + WAIT_MS / 1000;

	*intact = true;
	while (time(NULL) < deadline) {
		struct pollfd p = { .fd = sink, .events = POLLIN };

		if (!o->done)
			vmio_loop_run_once(loop, 0);
		if (poll(&p, 1, 5) <= 0)
			continue;
		ssize_t r = recv(sink, buf, sizeof(buf), MSG_DONTWAIT);
		if (r == 0)
			return got;
		if (r < 0)
			continue;
		for (ssize_t i = 0; i < r; i++)
			if (buf[i] != byte_at(got + (uint64_t)i))
				*intact = false;
		got += (uint64_t)r;
	}
	fail_msg("no EOF at the sink after %llu bytes", (unsigned long long)got);
	return got;
}

static void forward_all(const char *tag, bool sink_half_closes)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct outcome o = { 0 };
	struct pair p;
	struct sender s = { .p = &p, .n = 64u << 20 };
	pthread_t t;
	bool intact;

	pair_open(&p, tag);
	struct redir_sockmap_relay *r = pair_start(&p, loop, &o);
	/* Once the egress is in the map, its peer's shutdown takes it out
	 * (unix_shutdown unhashes the peer), so the program finds no
	 * socket to forward to: the relay must divert, and lose nothing.
	 * Nothing was sent yet, so the kernel held nothing to drop. */
	if (sink_half_closes)
		assert_int_equal(shutdown(p.sink, SHUT_WR), 0);
	pthread_create(&t, NULL, send_all, &s);
	uint64_t got = sink_until_eof(p.sink, loop, &o, &intact);
	pthread_join(t, NULL);
	assert_int_equal(s.error, 0);
	assert_int_equal(got, s.n);
	assert_true(intact);

	struct redir_relay_stats st;
	redir_sockmap_relay_get_stats(r, &st);
	assert_int_equal(st.bytes_ab, s.n);
	close(p.sink); /* the peer closes: the lingering relay ends cleanly */
	for (int i = 0; i < WAIT_MS / 10 && !o.done; i++)
		vmio_loop_run_once(loop, 10);
	assert_true(o.done);
	assert_int_equal(o.error, 0);
	redir_sockmap_relay_free(r);
	vmio_loop_free(loop);
}

static void test_forwards_until_empty_datagram(void **state)
{
	forward_all("fwd", false);
}

static void test_diverts_when_peer_half_closed(void **state)
{
	forward_all("half", true);
}

/* The research's silent-loss trap: the egress's peer goes away mid-stream.
 * The relay must notice at once, and the sender must then be refused
 * rather than have its datagrams vanish. */
static void test_egress_peer_gone(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct outcome o = { 0 };
	struct pair p;
	struct sender s = { .p = &p, .n = UINT64_MAX / 2 };
	pthread_t t;
	uint8_t buf[MSG];

	pair_open(&p, "gone");
	struct redir_sockmap_relay *r = pair_start(&p, loop, &o);
	pthread_create(&t, NULL, send_all, &s);
	/* Let some data through, then the peer dies. */
	assert_true(recv(p.sink, buf, sizeof(buf), MSG_WAITALL) > 0);
	close(p.sink);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < WAIT_MS / 10 && !o.done; i++)
		vmio_loop_run_once(loop, 10);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(o.done);
	assert_int_not_equal(o.error, 0);
	assert_true(t1.tv_sec - t0.tv_sec <= 1);
	redir_sockmap_relay_free(r); /* closes the ingress */
	pthread_join(t, NULL);
	assert_true(s.error == ECONNREFUSED || s.error == ENOTCONN ||
		    s.error == EPIPE || s.error == ECONNRESET);
	vmio_loop_free(loop);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_forwards_until_empty_datagram),
		cmocka_unit_test(test_diverts_when_peer_half_closed),
		cmocka_unit_test(test_egress_peer_gone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
