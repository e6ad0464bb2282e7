/* Guest-to-host data by reference; see tx_splice.h. */
#include "devices/vsock/tx_splice.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "devices/vsock/stats.h"
#include "event/loop.h"

/* Room for one 64 KiB packet in pages that need not be aligned, and
 * more: a payload in many small descriptors takes a pipe slot each, and
 * what does not fit goes in another round. Best effort. */
#define SPLICE_PIPE_SIZE (256 * 1024)

struct vsock_splice {
	int rd, wr;  /* the pipe */
	int devnull; /* where what the socket did not take goes */
};

bool vsock_splice_supported(const char **why)
{
	struct utsname u;
	unsigned major = 0, minor = 0;

	if (uname(&u) || sscanf(u.release, "%u.%u", &major, &minor) != 2) {
		*why = "kernel version unknown";
		return false;
	}
	if (major < 6 || (major == 6 && minor < 5)) {
		*why = "kernel before 6.5 copies spliced pages into AF_UNIX";
		return false;
	}
	*why = "AF_UNIX stream takes spliced pages (Linux 6.5+)";
	return true;
}

/* splice(2) into a socket has no MSG_NOSIGNAL: a host peer that went
 * away would raise SIGPIPE. vmio ignores it anyway (cli/serve.c); a
 * program that left it at its default gets it ignored too, so that the
 * write fails with EPIPE and only that connection ends. */
static void ignore_sigpipe(void)
{
	struct sigaction sa;

	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL &&
	    !(sa.sa_flags & SA_SIGINFO))
		signal(SIGPIPE, SIG_IGN);
}

struct vsock_splice *vsock_splice_new(void)
{
	struct vsock_splice *s = calloc(1, sizeof(*s));
	int p[2];

	if (!s)
		return NULL;
	ignore_sigpipe();
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
		free(s);
		return NULL;
	}
	s->rd = p[0];
	s->wr = p[1];
	(void)fcntl(s->wr, F_SETPIPE_SZ, SPLICE_PIPE_SIZE);
	s->devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
	return s;
}

void vsock_splice_free(struct vsock_splice *s)
{
	if (!s)
		return;
	close(s->rd);
	close(s->wr);
	if (s->devnull >= 0)
		close(s->devnull);
	free(s);
}

/* Empties the pipe of the left bytes it still holds. */
static void pipe_drain(struct vsock_splice *s, size_t left)
{
	char junk[4096];

	while (left) {
		ssize_t r = -1;

		if (s->devnull >= 0)
			r = splice(s->rd, NULL, s->devnull, NULL, left,
				   SPLICE_F_NONBLOCK);
		if (r <= 0)
			r = read(s->rd, junk, left < sizeof(junk) ? left
								 : sizeof(junk));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return; /* cannot happen: the bytes are there */
		left -= (size_t)r;
	}
}

/* Moves v bytes from the pipe into fd. Returns what went; *err is the
 * socket's errno when it failed, 0 when it was only full. */
static size_t pipe_to_sock(struct vsock_splice *s, int fd, size_t v, int *err)
{
	size_t t = 0;

	*err = 0;
	while (t < v) {
		ssize_t r = splice(s->rd, NULL, fd, NULL, v - t,
				   SPLICE_F_NONBLOCK | SPLICE_F_MOVE);

		if (r > 0) {
			t += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno != EAGAIN)
			*err = errno;
		break;
	}
	return t;
}

static void iov_advance(struct iovec **iov, unsigned *n, size_t k)
{
	while (k && *n) {
		size_t d = k < (*iov)->iov_len ? k : (*iov)->iov_len;

		(*iov)->iov_base = (char *)(*iov)->iov_base + d;
		(*iov)->iov_len -= d;
		k -= d;
		if (!(*iov)->iov_len) {
			(*iov)++;
			(*n)--;
		}
	}
}

ssize_t vsock_splice_send(struct vsock_splice *s, int fd,
			  const struct iovec *iov_in, unsigned n, size_t len)
{
	struct iovec iov[64];
	struct iovec *p = iov;
	size_t done = 0;

	if (n > sizeof(iov) / sizeof(iov[0]))
		n = sizeof(iov) / sizeof(iov[0]);
	for (unsigned i = 0; i < n; i++)
		iov[i] = iov_in[i];
	while (done < len && n) {
		ssize_t v;
		size_t t;
		int err;

		if (!p->iov_len) {
			p++;
			n--;
			continue;
		}
		v = vmsplice(s->wr, p, n, SPLICE_F_NONBLOCK);
		if (v < 0 && errno == EINTR)
			continue;
		if (v <= 0)
			break; /* the caller copies the rest */
		if ((size_t)v > len - done) {
			/* More than asked (iov longer than len): cannot
			 * happen, the caller slices; keep the pipe clean. */
			pipe_drain(s, (size_t)v - (len - done));
			v = (ssize_t)(len - done);
		}
		t = pipe_to_sock(s, fd, (size_t)v, &err);
		done += t;
		if (t < (size_t)v) {
			pipe_drain(s, (size_t)v - t);
			if (err && !done) {
				errno = err;
				return -1;
			}
			break;
		}
		iov_advance(&p, &n, (size_t)v);
	}
	return (ssize_t)done;
}

uint64_t vsock_splice_outq(int fd)
{
	int v = 0;

	if (ioctl(fd, SIOCOUTQ, &v) || v < 0)
		return UINT64_MAX;
	return (uint64_t)v;
}

/* ---- Held chains, one connection's ------------------------------------ */

void vsock_held_set_cap(struct vsock_held_chains *h, uint16_t cap)
{
	if (!h->v)
		h->cap = cap;
}

bool vsock_held_push(struct vsock_held_chains *h, uint16_t head,
		     uint32_t bytes)
{
	if (!h->v) {
		h->v = calloc(h->cap, sizeof(*h->v));
		if (!h->v)
			return false;
	}
	if (h->n == h->cap)
		return false;
	h->v[(h->first + h->n) % h->cap] = (struct vsock_tx_held){
		.head = head,
		.bytes = bytes,
		.mark = h->outq_added,
	};
	h->n++;
	return true;
}

void vsock_held_grew(struct vsock_held_chains *h, int fd, uint64_t before)
{
	uint64_t after = vsock_splice_outq(fd);

	if (after != UINT64_MAX && before != UINT64_MAX && after > before)
		h->outq_added += after - before;
}

bool vsock_held_pop(struct vsock_held_chains *h, uint64_t outq, bool force,
		    struct vsock_tx_held *out)
{
	if (!h->n)
		return false;
	*out = h->v[h->first];
	if (!force && outq > h->outq_added - out->mark)
		return false;
	h->first = (uint16_t)((h->first + 1) % h->cap);
	h->n--;
	return true;
}

void vsock_held_free(struct vsock_held_chains *h)
{
	free(h->v);
	h->v = NULL;
	h->n = 0;
}

/* ---- Held chains, one VM's -------------------------------------------- */

void vsock_holders_init(struct vsock_holders *hs, struct vmio_loop *loop,
			unsigned max)
{
	hs->loop = loop;
	hs->list = NULL;
	hs->total = 0;
	hs->max = max;
	hs->per_conn = max / 2 ? max / 2 : 1;
}

static void holders_unlist(struct vsock_holders *hs, struct vsock_holder *ho)
{
	struct vsock_holder **pp;

	if (!ho->listed)
		return;
	for (pp = &hs->list; *pp; pp = &(*pp)->next) {
		if (*pp == ho) {
			*pp = ho->next;
			break;
		}
	}
	ho->next = NULL;
	ho->listed = false;
}

void vsock_holders_add(struct vsock_holders *hs, struct vsock_holder *ho,
		       int fd, void (*wake)(void *opaque, int fd,
					    uint32_t events),
		       void *opaque, struct vsock_vm_stats *st)
{
	hs->total++;
	st->tx_chains_held++;
	if (hs->total > st->tx_chains_held_max)
		st->tx_chains_held_max = hs->total;
	if (!ho->listed) {
		ho->next = hs->list;
		hs->list = ho;
		ho->listed = true;
	}
	if (ho->wake_fd >= 0 || fd < 0)
		return;
	ho->wake_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (ho->wake_fd < 0)
		return;
	if (vmio_loop_add(hs->loop, ho->wake_fd, EPOLLOUT | EPOLLET, wake,
			  opaque)) {
		close(ho->wake_fd);
		ho->wake_fd = -1;
	}
}

void vsock_holders_released(struct vsock_holders *hs, struct vsock_holder *ho,
			    unsigned k, bool none_left)
{
	hs->total -= k;
	if (none_left)
		holders_unlist(hs, ho);
}

void vsock_holder_unwatch(struct vsock_holders *hs, struct vsock_holder *ho)
{
	if (ho->wake_fd < 0)
		return;
	vmio_loop_remove(hs->loop, ho->wake_fd);
	close(ho->wake_fd);
	ho->wake_fd = -1;
}
