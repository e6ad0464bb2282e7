/* See scale_host.h. */
#include "scale_host.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdnoreturn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/unix_socket.h"
#include "vsock_transfer.h"

/* Unix listeners' backlog (the kernel caps it at net.core.somaxconn):
 * vmio refuses a guest's connection when the backlog is full, so it must
 * absorb a burst of REQUESTs while the child is busy elsewhere. */
#define BACKLOG 4096
/* Connections accepted per listener event, so that one busy listener
 * lets the others and the streams in. */
#define ACCEPT_BUDGET 64
/* Sink reads per event. */
#define READ_BUDGET 16
#define READ_SIZE 65536
#define ECHO_SIZE 4096

/* epoll data: what an event is for, in the top byte; a listener's index
 * or a connection's fd below. */
enum { EV_CTL = 1, EV_LISTENER, EV_CONN };
#define EV(kind, v) ((uint64_t)(kind) << 56 | (uint64_t)(v))

struct hconn {
	bool open;
	enum scale_serve serve;
	uint32_t vm;
	uint64_t bytes;
	bool bad;             /* sink: wrong bytes seen */
	uint8_t *echo;        /* echo: ECHO_SIZE, bytes not written back */
	uint32_t echo_off, echo_len;
};

struct child {
	const struct scale_host_cfg *cfg;
	int ep, ctl;
	int *lfd;
	struct hconn *c; /* by fd */
	size_t nc;
	uint64_t held, lost, stray;
	uint64_t want;       /* a SCALE_HELD request waiting; 0: none */
	int64_t last_accept; /* ms */
	uint8_t buf[READ_SIZE];
};

static void child_fail(const char *what)
{
	fprintf(stderr, "vmio-scale host: %s: %s\n", what, strerror(errno));
	_exit(1);
}

static void report(struct child *ch, const struct scale_host_msg *m)
{
	/* The parent reads between runs and a run sends a few; a full pair
	 * means it stopped listening, and then it is gone or going. */
	if (send(ch->ctl, m, sizeof(*m), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(*m))
		child_fail("report to the parent");
}

static void answer_held(struct child *ch)
{
	struct scale_host_msg m = {
		.type = SCALE_HELD, .n = ch->held, .m = ch->lost,
		.bytes = ch->stray,
	};

	report(ch, &m);
	ch->want = 0;
}

static void conn_close(struct child *ch, int fd)
{
	struct hconn *c = &ch->c[fd];

	epoll_ctl(ch->ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	if (c->serve == SCALE_HOLD) {
		ch->held--;
		ch->lost++;
	}
	free(c->echo);
	*c = (struct hconn){ 0 };
}

static void on_accept(struct child *ch, unsigned li)
{
	const struct scale_listener *l = &ch->cfg->l[li];

	for (unsigned k = 0; k < ACCEPT_BUDGET; k++) {
		int fd = accept4(ch->lfd[li], NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN,
					  .data.u64 = EV(EV_CONN, fd) };

		if (fd < 0) {
			if (errno == EAGAIN || errno == ECONNABORTED ||
			    errno == EINTR)
				return;
			child_fail("accept");
		}
		if ((size_t)fd >= ch->nc) {
			errno = EMFILE;
			child_fail("accept");
		}
		ch->c[fd] = (struct hconn){ .open = true, .serve = l->serve,
					    .vm = l->vm };
		if (l->serve == SCALE_ECHO &&
		    !(ch->c[fd].echo = malloc(ECHO_SIZE)))
			child_fail("malloc");
		if (epoll_ctl(ch->ep, EPOLL_CTL_ADD, fd, &ev))
			child_fail("epoll_ctl");
		if (l->serve == SCALE_HOLD) {
			ch->held++;
			ch->last_accept = vmio_now_ms();
			if (ch->want && ch->held >= ch->want)
				answer_held(ch);
		}
	}
}

static void sink_done(struct child *ch, int fd, const char *why)
{
	struct hconn *c = &ch->c[fd];
	struct scale_host_msg m = {
		.type = SCALE_DONE, .vm = c->vm, .bytes = c->bytes,
		.t_ns = (int64_t)vmio_now_ns(),
	};

	if (why)
		snprintf(m.error, sizeof(m.error), "%s after %" PRIu64
			 " bytes", why, c->bytes);
	else if (c->bad)
		snprintf(m.error, sizeof(m.error), "wrong bytes");
	else if (ch->cfg->per_conn != UINT64_MAX &&
		 c->bytes != ch->cfg->per_conn)
		snprintf(m.error, sizeof(m.error), "%" PRIu64 " bytes of %"
			 PRIu64, c->bytes, ch->cfg->per_conn);
	report(ch, &m);
	conn_close(ch, fd);
}

static void on_sink(struct child *ch, int fd)
{
	struct hconn *c = &ch->c[fd];

	for (unsigned k = 0; k < READ_BUDGET; k++) {
		ssize_t r = read(fd, ch->buf, sizeof(ch->buf));

		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r < 0) {
			sink_done(ch, fd, strerror(errno));
			return;
		}
		if (r == 0) {
			sink_done(ch, fd, NULL);
			return;
		}
		if (!xfer_pattern_check_ends(ch->cfg->msg, ch->cfg->per_conn,
					     c->bytes, ch->buf, (size_t)r))
			c->bad = true;
		c->bytes += (uint64_t)r;
	}
}

static void on_echo(struct child *ch, int fd, uint32_t events)
{
	struct hconn *c = &ch->c[fd];
	ssize_t r;

	if (!c->echo_len) {
		r = read(fd, c->echo, ECHO_SIZE);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (r <= 0) {
			conn_close(ch, fd);
			return;
		}
		c->echo_off = 0;
		c->echo_len = (uint32_t)r;
	}
	r = write(fd, c->echo + c->echo_off, c->echo_len);
	if (r < 0 && errno != EAGAIN && errno != EINTR) {
		conn_close(ch, fd);
		return;
	}
	if (r > 0) {
		c->echo_off += (uint32_t)r;
		c->echo_len -= (uint32_t)r;
	}
	/* Until what came is written back, wait for room, not for more. */
	struct epoll_event ev = {
		.events = c->echo_len ? EPOLLOUT : EPOLLIN,
		.data.u64 = EV(EV_CONN, fd),
	};

	if (!!(events & EPOLLOUT) != !!c->echo_len)
		epoll_ctl(ch->ep, EPOLL_CTL_MOD, fd, &ev);
}

static void on_hold(struct child *ch, int fd)
{
	ssize_t r = read(fd, ch->buf, sizeof(ch->buf));

	if (r > 0)
		ch->stray += (uint64_t)r;
	else if (r == 0 || (errno != EAGAIN && errno != EINTR))
		conn_close(ch, fd);
}

static void on_ctl(struct child *ch)
{
	struct scale_host_msg m;
	ssize_t r = recv(ch->ctl, &m, sizeof(m), MSG_DONTWAIT);

	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (r != (ssize_t)sizeof(m) || m.type != SCALE_HELD)
		_exit(0); /* the parent is gone, or not speaking to us */
	ch->want = m.n;
	ch->last_accept = vmio_now_ms();
	if (ch->held >= m.n)
		answer_held(ch);
}

static noreturn void child_main(const struct scale_host_cfg *cfg, int *lfd,
				int ctl)
{
	struct epoll_event evs[256];
	struct child *ch = calloc(1, sizeof(*ch));
	struct rlimit rl;

	/* Dies with the parent, whatever killed it. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (!ch || getrlimit(RLIMIT_NOFILE, &rl))
		child_fail("start");
	ch->cfg = cfg;
	ch->lfd = lfd;
	ch->ctl = ctl;
	ch->nc = rl.rlim_cur;
	ch->c = calloc(ch->nc, sizeof(*ch->c));
	ch->ep = epoll_create1(EPOLL_CLOEXEC);
	if (!ch->c || ch->ep < 0)
		child_fail("start");
	for (unsigned i = 0; i <= cfg->n; i++) {
		struct epoll_event ev = {
			.events = EPOLLIN,
			.data.u64 = i < cfg->n ? EV(EV_LISTENER, i)
					       : EV(EV_CTL, 0),
		};

		if (epoll_ctl(ch->ep, EPOLL_CTL_ADD, i < cfg->n ? lfd[i] : ctl,
			      &ev))
			child_fail("epoll_ctl");
	}
	for (;;) {
		int timeout = -1, n;

		/* A HELD request is answered, full or not, once accepting
		 * has stalled for XFER_STALL_MS. */
		if (ch->want) {
			int64_t left = ch->last_accept + XFER_STALL_MS -
				       vmio_now_ms();

			if (left <= 0) {
				answer_held(ch);
				continue;
			}
			timeout = (int)left;
		}
		n = epoll_wait(ch->ep, evs, sizeof(evs) / sizeof(evs[0]),
			       timeout);
		if (n < 0 && errno != EINTR)
			child_fail("epoll_wait");
		for (int i = 0; i < n; i++) {
			uint64_t d = evs[i].data.u64;
			unsigned v = (unsigned)(d & 0xffffffffu);

			switch (d >> 56) {
			case EV_CTL:
				on_ctl(ch);
				break;
			case EV_LISTENER:
				on_accept(ch, v);
				break;
			case EV_CONN:
				if (!ch->c[v].open)
					break; /* closed earlier in this batch */
				if (ch->c[v].serve == SCALE_SINK)
					on_sink(ch, (int)v);
				else if (ch->c[v].serve == SCALE_ECHO)
					on_echo(ch, (int)v, evs[i].events);
				else
					on_hold(ch, (int)v);
				break;
			}
		}
	}
}

int scale_host_start(const struct scale_host_cfg *cfg, struct scale_host *h,
		     char *err, size_t err_size)
{
	int *lfd = calloc(cfg->n ? cfg->n : 1, sizeof(*lfd));
	int pair[2] = { -1, -1 };

	*h = (struct scale_host){
		.pid = -1, .ctl = -1,
		.paths = calloc(cfg->n ? cfg->n : 1, sizeof(*h->paths)),
		.st = calloc(cfg->n ? cfg->n : 1, sizeof(*h->st)),
	};
	if (!lfd || !h->paths || !h->st) {
		snprintf(err, err_size, "out of memory");
		goto fail;
	}
	for (; h->n < cfg->n; h->n++) {
		const struct scale_listener *l = &cfg->l[h->n];
		struct sockaddr_un sa;
		int fd;

		if (asprintf(&h->paths[h->n], "%s_%u", l->uds_path, l->port) <
		    0) {
			h->paths[h->n] = NULL;
			snprintf(err, err_size, "out of memory");
			goto fail;
		}
		if (strlen(h->paths[h->n]) >= sizeof(sa.sun_path)) {
			snprintf(err, err_size, "%s: path too long",
				 h->paths[h->n]);
			free(h->paths[h->n]);
			goto fail;
		}
		fd = vmio_unix_listen(h->paths[h->n], BACKLOG, "vmio-scale",
				      &h->st[h->n]);
		if (fd < 0) {
			snprintf(err, err_size, "listen on %s: %s",
				 h->paths[h->n], strerror(-fd));
			free(h->paths[h->n]);
			goto fail;
		}
		lfd[h->n] = fd;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair)) {
		snprintf(err, err_size, "socketpair: %s", strerror(errno));
		goto fail;
	}
	fflush(NULL);
	h->pid = fork();
	if (h->pid < 0) {
		snprintf(err, err_size, "fork: %s", strerror(errno));
		goto fail;
	}
	if (h->pid == 0) {
		close(pair[0]);
		child_main(cfg, lfd, pair[1]);
	}
	close(pair[1]);
	h->ctl = pair[0];
	/* The child has them. */
	for (unsigned k = 0; k < cfg->n; k++)
		close(lfd[k]);
	free(lfd);
	return 0;
fail:
	if (pair[0] >= 0) {
		close(pair[0]);
		close(pair[1]);
	}
	for (unsigned k = 0; k < h->n; k++)
		close(lfd[k]);
	free(lfd);
	scale_host_stop(h);
	return -1;
}

void scale_host_stop(struct scale_host *h)
{
	if (h->pid > 0) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, NULL, 0);
	}
	if (h->ctl >= 0)
		close(h->ctl);
	for (unsigned k = 0; k < h->n; k++) {
		vmio_unix_unlink_if_same(h->paths[k], &h->st[k]);
		free(h->paths[k]);
	}
	free(h->paths);
	free(h->st);
	*h = (struct scale_host){ .pid = -1, .ctl = -1 };
}

int scale_host_send(struct scale_host *h, const struct scale_host_msg *m)
{
	return send(h->ctl, m, sizeof(*m), MSG_NOSIGNAL | MSG_DONTWAIT) ==
			       (ssize_t)sizeof(*m)
		       ? 0
		       : -1;
}

int scale_host_recv(struct scale_host *h, struct scale_host_msg *m,
		    int timeout_ms)
{
	struct pollfd p = { .fd = h->ctl, .events = POLLIN };
	int r = poll(&p, 1, timeout_ms);

	if (r < 0)
		return errno == EINTR ? 0 : -1;
	if (r == 0)
		return 0;
	return recv(h->ctl, m, sizeof(*m), MSG_DONTWAIT) == (ssize_t)sizeof(*m)
		       ? 1
		       : -1;
}

int scale_host_wait_held(struct scale_host *h, uint64_t n,
			 struct scale_host_msg *reply)
{
	struct scale_host_msg m = { .type = SCALE_HELD, .n = n };

	if (scale_host_send(h, &m))
		return -1;
	/* The child answers within XFER_STALL_MS of its last accept. */
	for (;;) {
		int r = scale_host_recv(h, reply, XFER_STALL_MS * 2);

		if (r < 0 || (r == 1 && reply->type != SCALE_HELD))
			return -1;
		if (r == 1)
			return 0;
		if (waitpid(h->pid, NULL, WNOHANG) != 0)
			return -1;
	}
}
