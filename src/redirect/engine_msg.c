/* The message engine: for a direction with a datagram or seqpacket end,
 * where a boundary is part of the data. The direction holds a ring of
 * message slots; each slot is one message as it came (from a socket that
 * keeps boundaries) or one read (from a stream), and goes out as exactly
 * one message (to a socket that keeps boundaries) or as bytes (to a
 * stream). Batches move with recvmmsg/sendmmsg, one system call for up to
 * MSG_SLOTS messages.
 *
 * Nothing is cut silently: the largest message accepted is the buffer size
 * (-b) when the destination keeps boundaries too; a larger one is dropped
 * whole, logged with its size (rate-limited) and counted, and so is one
 * the destination refuses as too big (EMSGSIZE). Into a stream, where
 * boundaries end anyway, -b is what it is for every other engine (bytes
 * in flight, as the sockmap engine's send buffer): any datagram a unix
 * socket can carry by default is taken, so that one command line means
 * the same with either engine. Memory: MSG_SLOTS buffers of that size per direction at
 * most, each allocated when first used and touched only as far as its
 * messages reach. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "redirect/relay_internal.h"
#include "util/log.h"

#define MSG_SLOTS 16

/* A read from a stream becomes one datagram: kept below the size every
 * unix datagram socket takes with default buffers. */
#define STREAM_MSG_MAX (64u * 1024)
/* Into a stream, messages up to this are taken whatever -b says: the
 * largest datagram a unix socket sends with the default wmem_max
 * (212992 bytes). */
#define INTO_STREAM_MSG_MAX (256u * 1024)

struct msg_slot {
	uint8_t *buf;   /* max_msg bytes, allocated on first use */
	size_t len;
};

struct redir_msg_ring {
	struct msg_slot slot[MSG_SLOTS];
	unsigned head, count; /* count slots hold messages, from head */
	size_t off;           /* bytes of slot[head] already written to a stream */
	size_t max_msg;       /* buffer size: the largest message taken */
};

/* One limit for all the connections of a thread, so that a flood of
 * oversized datagrams on many of them still logs a few lines a second;
 * per thread, because relays on other workers' loops would race on one
 * limiter, and a lock is not worth a log line. */
static __thread struct vmio_ratelimit drop_rl = VMIO_RATELIMIT_INIT(5);

static bool keeps_boundaries(int type)
{
	return type == SOCK_DGRAM || type == SOCK_SEQPACKET;
}

static long errno_result(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK ? -EAGAIN : -errno;
}

static int msg_init(struct redir_dir *d)
{
	d->msgs = calloc(1, sizeof(*d->msgs));
	if (!d->msgs)
		return -ENOMEM;
	/* Room is counted in slots, not in held bytes. */
	d->msgs->max_msg = d->capacity;
	if (!keeps_boundaries(d->dst_type) &&
	    d->msgs->max_msg < INTO_STREAM_MSG_MAX)
		d->msgs->max_msg = INTO_STREAM_MSG_MAX;
	return 0;
}

static bool msg_can_fill(const struct redir_dir *d)
{
	return d->msgs->count < MSG_SLOTS;
}

static struct msg_slot *slot_at(struct redir_msg_ring *m, unsigned i)
{
	struct msg_slot *s = &m->slot[(m->head + i) % MSG_SLOTS];

	if (!s->buf)
		s->buf = malloc(m->max_msg);
	return s->buf ? s : NULL;
}

static void drop(struct redir_dir *d, const char *why, size_t size)
{
	d->dropped++;
	log_ratelimited(&drop_rl, VMIO_LOG_ERR,
			"%s: dropped a %zu-byte message: %s (limit %zu bytes, -b)",
			d->name, size, why, d->msgs->max_msg);
}

/* From a stream: one read, one message. */
static long fill_from_stream(struct redir_dir *d, size_t max)
{
	struct redir_msg_ring *m = d->msgs;
	struct msg_slot *s = slot_at(m, m->count);
	/* -b sizes the datagrams a stream's bytes are cut into. */
	size_t cap = d->capacity < STREAM_MSG_MAX ? d->capacity : STREAM_MSG_MAX;

	if (!s)
		return -ENOMEM;
	ssize_t r = read(d->src, s->buf, cap < max ? cap : max);
	if (r <= 0)
		return r ? errno_result() : 0;
	s->len = (size_t)r;
	m->count++;
	d->held += (size_t)r;
	return r;
}

/* Receives one batch into the free slots, keeping the whole messages in
 * order at the ring's tail. An EOF in the batch ends the direction here
 * (d->eof), with the messages before it still to go: src will not be
 * readable again to say so. Returns the bytes kept (0 if every message
 * was dropped or an EOF came first), or -errno. */
static long recv_batch(struct redir_dir *d)
{
	struct redir_msg_ring *m = d->msgs;
	struct mmsghdr hdr[MSG_SLOTS];
	struct iovec iov[MSG_SLOTS];
	unsigned base = m->count, free_slots = MSG_SLOTS - m->count;
	size_t taken = 0;

	for (unsigned i = 0; i < free_slots; i++) {
		struct msg_slot *s = slot_at(m, base + i);

		if (!s)
			return -ENOMEM;
		iov[i] = (struct iovec){ s->buf, m->max_msg };
		hdr[i] = (struct mmsghdr){
			.msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 },
		};
	}
	/* MSG_TRUNC: msg_len is the real length, so a drop can name the
	 * size that did not fit. */
	int n = recvmmsg(d->src, hdr, free_slots, MSG_TRUNC, NULL);
	if (n < 0)
		return errno_result();
	for (unsigned i = 0; i < (unsigned)n; i++) {
		size_t len = hdr[i].msg_len;

		if (len == 0) {
			d->eof = true;
			break;
		}
		if (len > m->max_msg || (hdr[i].msg_hdr.msg_flags & MSG_TRUNC)) {
			drop(d, "larger than the buffer", len);
			continue;
		}
		/* After a drop, later messages close the gap: the slots
		 * swap buffers, nothing is copied. */
		struct msg_slot *to = &m->slot[(m->head + m->count) % MSG_SLOTS];
		struct msg_slot *from = &m->slot[(m->head + base + i) % MSG_SLOTS];
		if (to != from) {
			uint8_t *buf = to->buf;

			to->buf = from->buf;
			from->buf = buf;
		}
		to->len = len;
		m->count++;
		taken += len;
	}
	d->held += taken;
	return (long)taken;
}

/* From a socket that keeps boundaries: whole messages. An empty message
 * is EOF (socat's convention for datagrams, and what a seqpacket read
 * returns at EOF): the messages before it are kept, any after it in the
 * same batch are discarded. */
static long fill_messages(struct redir_dir *d)
{
	for (;;) {
		long n = recv_batch(d);
		/* A batch of drops only: try the next one. */
		if (n != 0 || d->eof)
			return n;
	}
}

static long msg_fill(struct redir_dir *d, size_t max)
{
	if (!keeps_boundaries(d->src_type))
		return fill_from_stream(d, max);
	return fill_messages(d);
}

static void consume(struct redir_dir *d, unsigned n)
{
	struct redir_msg_ring *m = d->msgs;

	for (unsigned i = 0; i < n; i++) {
		d->held -= m->slot[m->head].len;
		m->head = (m->head + 1) % MSG_SLOTS;
	}
	m->count -= n;
}

/* To a socket that keeps boundaries: each slot is exactly one message.
 * One the destination refuses as too big is dropped, not retried. */
static long drain_messages(struct redir_dir *d)
{
	struct redir_msg_ring *m = d->msgs;
	struct mmsghdr hdr[MSG_SLOTS];
	struct iovec iov[MSG_SLOTS];
	size_t sent = 0;

	while (m->count) {
		for (unsigned i = 0; i < m->count; i++) {
			struct msg_slot *s = &m->slot[(m->head + i) % MSG_SLOTS];

			iov[i] = (struct iovec){ s->buf, s->len };
			hdr[i] = (struct mmsghdr){
				.msg_hdr = { .msg_iov = &iov[i], .msg_iovlen = 1 },
			};
		}
		int n = sendmmsg(d->dst, hdr, m->count, MSG_NOSIGNAL);
		if (n < 0 && errno == EMSGSIZE) {
			size_t len = m->slot[m->head].len;

			drop(d, "the destination refuses it as too big", len);
			consume(d, 1);
			continue;
		}
		if (n < 0)
			return sent ? (long)sent : errno_result();
		for (int i = 0; i < n; i++)
			sent += hdr[i].msg_len;
		consume(d, (unsigned)n);
		if (m->count)
			break; /* dst is full; the next wake-up goes on */
	}
	/* Only drops: nothing written, but the ring has room again. */
	return sent ? (long)sent : -EAGAIN;
}

/* To a stream: the slots are bytes, written as far as the stream takes. */
static long drain_stream(struct redir_dir *d)
{
	struct redir_msg_ring *m = d->msgs;
	struct iovec iov[MSG_SLOTS];

	for (unsigned i = 0; i < m->count; i++) {
		struct msg_slot *s = &m->slot[(m->head + i) % MSG_SLOTS];
		size_t skip = i ? 0 : m->off;

		iov[i] = (struct iovec){ s->buf + skip, s->len - skip };
	}
	ssize_t w = writev(d->dst, iov, (int)m->count);
	if (w < 0)
		return errno_result();

	size_t left = (size_t)w + m->off;
	unsigned whole = 0;
	while (whole < m->count &&
	       left >= m->slot[(m->head + whole) % MSG_SLOTS].len)
		left -= m->slot[(m->head + whole++) % MSG_SLOTS].len;
	consume(d, whole);
	m->off = left;
	return w;
}

static long msg_drain(struct redir_dir *d)
{
	return keeps_boundaries(d->dst_type) ? drain_messages(d) :
					       drain_stream(d);
}

/* EOF goes on as its reader can see it: shutdown for a stream or a
 * seqpacket peer (it reads 0), an empty datagram for a datagram peer
 * (socat's convention; a second vmio or socat on UNIX-RECV ends there). */
static int msg_end(struct redir_dir *d)
{
	if (d->dst_type != SOCK_DGRAM)
		return redir_end_shutdown(d);
	if (send(d->dst, "", 0, MSG_NOSIGNAL) < 0)
		return (int)errno_result();
	return 0;
}

static void msg_fini(struct redir_dir *d)
{
	if (!d->msgs)
		return;
	for (unsigned i = 0; i < MSG_SLOTS; i++)
		free(d->msgs->slot[i].buf);
	free(d->msgs);
	d->msgs = NULL;
}

const struct redir_engine_ops redir_engine_msg = {
	.init = msg_init,
	.can_fill = msg_can_fill,
	.fill = msg_fill,
	.drain = msg_drain,
	.end = msg_end,
	.fini = msg_fini,
};
