/*
 * The trickle of issue 21, both ends, included after peer-engine.h by the
 * host's uds-peer (the writer) and the guest's vsock-tool (the reader):
 *
 *   trickle_write  writes PIECES pieces of SIZE bytes, one write each, with
 *                  a GAP of microseconds after each write ends (a write that
 *                  blocked is not made up for by a burst), then shuts down
 *                  its write side and waits for the reader to close
 *   trickle_read   holds the accepted connection unread for HOLD ms, then
 *                  reads every byte to end of stream: a stream must bring
 *                  PIECES x SIZE bytes of the pattern in order; a seqpacket
 *                  connection PIECES messages of SIZE bytes each, message i
 *                  the pattern from offset i x SIZE (boundaries, lengths
 *                  and order all checked)
 *
 * Linux 6.12.94 and later refuse a packet once a socket's unread packets
 * cost more than its buffer at 576 bytes each: a device that made a
 * packet of every 300-byte write had the guest reset the connection after
 * some 455 of them (the reader's ENOBUFS, the writer's EPIPE).
 *
 * Result lines: "<prog>: trickle <stream|seqpacket> pieces=N bytes=B
 * result=ok ms=T ..." or result=error at=WHERE errno=NAME. Exit status: 0
 * ok, 1 not.
 */
#ifndef VMIO_TESTS_GUEST_TRICKLE_ENGINE_H
#define VMIO_TESTS_GUEST_TRICKLE_ENGINE_H

#include <sys/time.h>

struct trickle_opts {
	unsigned pieces, size, gap_us, hold_ms;
	bool seqpacket;
	double timeout, retry;
};

#define TRICKLE_OPTS_HELP \
	"  --pieces N --size BYTES   the writes (default 2000 of 300)\n" \
	"  --gap-us US               writer: pause after each write (default 200)\n" \
	"  --hold-ms MS              reader: read nothing for MS after accept (default 4000)\n" \
	"  --seqpacket               SOCK_SEQPACKET: every write a message\n" \
	"  --timeout SECS --retry SECS\n"

/* argv[first..] into o; false on anything it does not know. */
static inline bool trickle_parse(int argc, char **argv, int first, struct trickle_opts *o)
{
	*o = (struct trickle_opts){ .pieces = 2000, .size = 300, .gap_us = 200,
				    .hold_ms = 4000, .timeout = 60 };
	for (int i = first; i < argc; i++) {
		uint64_t x;
		if (!strcmp(argv[i], "--seqpacket")) {
			o->seqpacket = true;
			continue;
		}
		if (i + 1 >= argc || !pe_parse_size(argv[i + 1], &x) || x > 1u << 30)
			return false;
		if (!strcmp(argv[i], "--pieces"))
			o->pieces = (unsigned)x;
		else if (!strcmp(argv[i], "--size"))
			o->size = (unsigned)x;
		else if (!strcmp(argv[i], "--gap-us"))
			o->gap_us = (unsigned)x;
		else if (!strcmp(argv[i], "--hold-ms"))
			o->hold_ms = (unsigned)x;
		else if (!strcmp(argv[i], "--timeout"))
			o->timeout = (double)x;
		else if (!strcmp(argv[i], "--retry"))
			o->retry = (double)x;
		else
			return false;
		i++;
	}
	return o->pieces && o->size && o->size <= PE_CHUNK;
}

static inline const char *trickle_kind(const struct trickle_opts *o)
{
	return o->seqpacket ? "seqpacket" : "stream";
}

/* Blocking I/O from here on, each call bounded by the timeout. */
static inline void trickle_setup_fd(int fd, double timeout)
{
	struct timeval tv = { .tv_sec = (time_t)timeout };
	int fl = fcntl(fd, F_GETFL);

	fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static inline void trickle_sleep_us(unsigned us)
{
	struct timespec ts = { .tv_sec = us / 1000000u, .tv_nsec = (long)(us % 1000000u) * 1000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* The writer's end, on a connected socket. */
static inline int trickle_write(int fd, const char *prog, const struct trickle_opts *o)
{
	unsigned char buf[PE_CHUNK];
	double t0 = pe_now(), slowest = 0;
	uint64_t bytes = 0;
	unsigned i;
	int err = 0;
	const char *at = "";

	trickle_setup_fd(fd, o->timeout);
	for (i = 0; i < o->pieces && !err; i++) {
		double w0 = pe_now();
		size_t done = 0;

		pe_fill(buf, o->size, (uint64_t)i * o->size);
		/* A stream may take a piece in parts; a message goes whole. */
		while (done < o->size) {
			ssize_t n = send(fd, buf + done, o->size - done, MSG_NOSIGNAL);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				err = n < 0 ? errno : EIO;
				break;
			}
			done += (size_t)n;
		}
		bytes += done;
		if (err)
			break;
		if (pe_now() - w0 > slowest)
			slowest = pe_now() - w0;
		trickle_sleep_us(o->gap_us);
	}
	double wrote = pe_now() - t0;
	/* The reader closes once it has read everything: its close, not
	 * ours, ends the case. */
	if (!err) {
		at = "shutdown";
		if (shutdown(fd, SHUT_WR) < 0)
			err = errno;
	}
	if (!err) {
		at = "wait-close";
		ssize_t n;
		do
			n = recv(fd, buf, sizeof(buf), 0);
		while (n < 0 && errno == EINTR);
		if (n != 0)
			err = n < 0 ? errno : EPROTO;
	}
	close(fd);
	printf("%s: trickle %s pieces=%u bytes=%" PRIu64 " writes_ms=%.0f slowest_write_ms=%.0f ", prog,
	       trickle_kind(o), i, bytes, wrote * 1e3, slowest * 1e3);
	if (err && i < o->pieces)
		printf("result=error at=write-%u errno=%s", i + 1, pe_errname(err));
	else if (err)
		printf("result=error at=%s errno=%s", at, pe_errname(err));
	else
		printf("result=ok");
	printf(" ms=%.0f\n", (pe_now() - t0) * 1e3);
	return err ? 1 : 0;
}

/* The reader's end, on an accepted socket. */
static inline int trickle_read(int fd, const char *prog, const struct trickle_opts *o)
{
	static unsigned char buf[PE_CHUNK + 1], want[PE_CHUNK + 1];
	uint64_t total = (uint64_t)o->pieces * o->size, got = 0;
	unsigned msgs = 0;
	const char *why = NULL;
	int err = 0;
	ssize_t n;

	trickle_setup_fd(fd, o->timeout);
	trickle_sleep_us(o->hold_ms * 1000u);
	double t0 = pe_now();
	for (;;) {
		n = recv(fd, buf, o->seqpacket ? sizeof(buf) : PE_CHUNK, o->seqpacket ? MSG_TRUNC : 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			err = n < 0 ? errno : 0;
			break;
		}
		if (o->seqpacket && n != (ssize_t)o->size) {
			why = "message-length";
			break;
		}
		if (got + (uint64_t)n > total) {
			why = "too-many-bytes";
			break;
		}
		pe_fill(want, (size_t)n, got);
		if (memcmp(buf, want, (size_t)n)) {
			why = "wrong-bytes";
			break;
		}
		got += (uint64_t)n;
		msgs++;
	}
	close(fd);
	if (!why && !err && got != total)
		why = "short";
	printf("%s: trickle %s pieces=%u bytes=%" PRIu64 " hold_ms=%u", prog, trickle_kind(o),
	       o->seqpacket ? msgs : (unsigned)(got / o->size), got, o->hold_ms);
	if (why || err) {
		printf(" result=error at=%s", why ? why : "read");
		if (err)
			printf(" errno=%s", pe_errname(err));
		if (why && n > 0)
			printf(" len=%zd", n);
	} else {
		printf(" result=ok");
	}
	printf(" ms=%.0f\n", (pe_now() - t0) * 1e3);
	return why || err ? 1 : 0;
}

#endif
