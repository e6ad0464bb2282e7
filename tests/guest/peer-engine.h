/*
 * The stream engine shared by the guest's vsock-tool and the host's
 * uds-peer: both ends of every guest vsock test run the same code, so a
 * byte pattern, a checksum and a result line mean the same on both sides.
 *
 * One poll loop drives any number of non-blocking stream sockets, each in
 * one mode:
 *   sink            read to EOF, then close
 *   source BYTES    write BYTES of the pattern (reading whatever comes back
 *                   meanwhile, so an echoing peer cannot deadlock us), then
 *                   shutdown(SHUT_WR), then read to EOF
 *   echo            write back what arrives; at EOF, flush and shut down
 *   half-close      (server) read to EOF, then reply "got N fnv HEX\n" and
 *                   close: a peer that shuts down its write side and then
 *                   waits for a reply sees half-close work end to end
 *
 * The pattern is a pure function of the byte offset, so a receiver checks
 * what it got (--expect BYTES) without being told anything but the size;
 * the checksum is FNV-1a 64 over the bytes in order.
 *
 * Every finished connection prints one line of key=value pairs, and a run
 * of several connections a "summary" line, for the test scripts to grep.
 */
#ifndef VMIO_TESTS_GUEST_PEER_ENGINE_H
#define VMIO_TESTS_GUEST_PEER_ENGINE_H

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define PE_CHUNK (64 * 1024)
#define PE_FNV_INIT 0xcbf29ce484222325ULL

enum pe_mode { PE_SINK, PE_SOURCE, PE_ECHO, PE_HALF_CLOSE };

struct pe_opts {
	enum pe_mode mode;
	uint64_t bytes;       /* source: how many to send */
	int64_t expect;       /* sink/half-close: bytes that must arrive (-1: any) */
	bool echo_check;      /* source: what comes back must equal what went */
	int read_delay_ms;    /* slow reader: sleep this long between reads */
	size_t read_size;     /* slow reader: bytes per read */
	bool verbose;         /* a line per connection even for many */
	const char *prog;     /* prefix of every output line */
};

struct pe_conn {
	int fd;
	int id;
	/* what we write: pattern (source), echo data or the reply */
	uint64_t to_send, gen_off;
	uint64_t sent, sent_fnv;
	unsigned char *buf;
	size_t boff, blen;
	/* what we read */
	uint64_t recvd, recv_fnv;
	char head[96];          /* the first bytes received, for printing replies */
	size_t headlen;
	bool pattern_ok;        /* received bytes so far equal the pattern */
	bool wr_shut, rd_eof, done;
	bool replied;           /* half-close: the reply is queued */
	int err;                /* errno of a failed read/write */
	double t0, t1;
	double next_read;       /* slow reader: not before this time */
};

static inline double pe_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* splitmix64: the pattern's 8-byte word k. */
static inline uint64_t pe_word(uint64_t k)
{
	uint64_t z = k * 0x9e3779b97f4a7c15ULL + 0x6a09e667f3bcc909ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static inline unsigned char pe_byte(uint64_t off)
{
	return (unsigned char)(pe_word(off >> 3) >> (8 * (off & 7)));
}

/* Fills buf with the pattern from offset off. */
static inline void pe_fill(unsigned char *buf, size_t len, uint64_t off)
{
	size_t i = 0;
	while (i < len && ((off + i) & 7))
		buf[i] = pe_byte(off + i), i++;
	for (; i + 8 <= len; i += 8) {
		uint64_t w = pe_word((off + i) >> 3);
		memcpy(buf + i, &w, 8); /* little-endian host and guest: x86-64 */
	}
	for (; i < len; i++)
		buf[i] = pe_byte(off + i);
}

static inline uint64_t pe_fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* FNV-1a of the first n bytes of the pattern: what a receiver must see. */
static inline uint64_t pe_pattern_fnv(uint64_t n)
{
	static unsigned char b[PE_CHUNK];
	uint64_t h = PE_FNV_INIT;
	for (uint64_t off = 0; off < n;) {
		size_t len = n - off < PE_CHUNK ? (size_t)(n - off) : PE_CHUNK;
		pe_fill(b, len, off);
		h = pe_fnv(h, b, len);
		off += len;
	}
	return h;
}

/* What a checking receiver keeps: bytes and their FNV, the first wrong
 * byte, and the longest gap between two reads (the pause a hand-over
 * costs a stream). */
struct pe_rx {
	uint64_t got, fnv, bad_at;
	unsigned char bad, expected; /* the first wrong byte, and its due */
	double t0, last, max_gap, gap_at;
};

static inline void pe_rx_init(struct pe_rx *r)
{
	*r = (struct pe_rx){ .fnv = PE_FNV_INIT, .bad_at = UINT64_MAX,
			     .t0 = pe_now() };
}

/* k bytes read: checked against the pattern at their offset. Returns
 * true for the stream's first bytes. */
static inline bool pe_rx_take(struct pe_rx *r, const unsigned char *buf,
			      size_t k)
{
	static unsigned char want[PE_CHUNK];
	double now = pe_now();
	bool first = !r->got;

	if (!first && now - r->last > r->max_gap)
		r->max_gap = now - r->last, r->gap_at = now - r->t0;
	r->last = now;
	for (size_t off = 0; off < k && r->bad_at == UINT64_MAX;) {
		size_t n = k - off < PE_CHUNK ? k - off : PE_CHUNK;

		pe_fill(want, n, r->got + off);
		for (size_t i = 0; i < n; i++)
			if (buf[off + i] != want[i]) {
				r->bad_at = r->got + off + i;
				r->bad = buf[off + i];
				r->expected = want[i];
				break;
			}
		off += n;
	}
	r->fnv = pe_fnv(r->fnv, buf, k);
	r->got += k;
	return first;
}

static inline const char *pe_errname(int e)
{
	const char *s = strerrorname_np(e);
	return s ? s : "E?";
}

static inline bool pe_parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 'K': case 'k': v <<= 10; end++; break;
	case 'M': case 'm': v <<= 20; end++; break;
	case 'G': case 'g': v <<= 30; end++; break;
	default: break;
	}
	if (*end)
		return false;
	*out = v;
	return true;
}

static inline void pe_conn_init(struct pe_conn *c, int fd, int id, const struct pe_opts *o)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->id = id;
	c->sent_fnv = c->recv_fnv = PE_FNV_INIT;
	c->pattern_ok = true;
	c->buf = malloc(PE_CHUNK);
	if (!c->buf) {
		perror("malloc");
		exit(2);
	}
	if (o->mode == PE_SOURCE)
		c->to_send = o->bytes;
	c->t0 = pe_now();
	int fl = fcntl(fd, F_GETFL);
	fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* Did this connection do what its mode promised? */
static inline bool pe_conn_ok(const struct pe_conn *c, const struct pe_opts *o)
{
	if (c->err)
		return false;
	if (o->mode == PE_SOURCE && c->sent != o->bytes)
		return false;
	if (o->expect >= 0 && (c->recvd != (uint64_t)o->expect || !c->pattern_ok))
		return false;
	if (o->echo_check && (c->recvd != c->sent || c->recv_fnv != c->sent_fnv))
		return false;
	return true;
}

static inline void pe_print_conn(const struct pe_conn *c, const struct pe_opts *o,
				 const char *what)
{
	double el = (c->t1 > c->t0 ? c->t1 : pe_now()) - c->t0;
	uint64_t most = c->sent > c->recvd ? c->sent : c->recvd;
	printf("%s: %s conn=%d sent=%" PRIu64 " sent_fnv=%016" PRIx64 " recvd=%" PRIu64
	       " recv_fnv=%016" PRIx64 " ms=%.0f MBps=%.1f", o->prog, what, c->id, c->sent,
	       c->sent_fnv, c->recvd, c->recv_fnv, el * 1e3,
	       el > 0 ? (double)most / el / 1e6 : 0.0);
	if (o->expect >= 0)
		printf(" pattern=%s", c->pattern_ok && c->recvd == (uint64_t)o->expect ? "ok" : "BAD");
	if (c->err)
		printf(" errno=%s", pe_errname(c->err));
	if (c->headlen && c->recvd <= sizeof(c->head)) {
		/* A short reply (half-close): show it, printable bytes only. */
		printf(" reply=\"");
		for (size_t i = 0; i < c->headlen; i++)
			putchar(c->head[i] >= 32 && c->head[i] < 127 && c->head[i] != '"' ? c->head[i] : '.');
		printf("\"");
	}
	printf(" result=%s\n", pe_conn_ok(c, o) ? "ok" : "FAIL");
	fflush(stdout);
}

static inline void pe_finish(struct pe_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->done = true;
	c->t1 = pe_now();
	free(c->buf);
	c->buf = NULL;
}

/* What this connection wants to write next: refills the buffer. */
static inline void pe_refill(struct pe_conn *c, const struct pe_opts *o)
{
	if (c->boff < c->blen)
		return;
	c->boff = c->blen = 0;
	if (o->mode == PE_SOURCE && c->gen_off < c->to_send) {
		uint64_t left = c->to_send - c->gen_off;
		size_t len = left < PE_CHUNK ? (size_t)left : PE_CHUNK;
		pe_fill(c->buf, len, c->gen_off);
		c->gen_off += len;
		c->blen = len;
	}
}

static inline bool pe_write_pending(struct pe_conn *c, const struct pe_opts *o)
{
	pe_refill(c, o);
	return c->boff < c->blen;
}

/* Nothing more will be written: shut the write side (once). */
static inline void pe_maybe_shut(struct pe_conn *c, const struct pe_opts *o)
{
	if (c->wr_shut || pe_write_pending(c, o))
		return;
	bool now = false;
	switch (o->mode) {
	case PE_SOURCE: now = c->gen_off >= c->to_send; break;
	case PE_ECHO: now = c->rd_eof; break;
	case PE_HALF_CLOSE: now = c->replied; break;
	case PE_SINK: now = c->rd_eof; break; /* the sink never writes */
	}
	if (!now)
		return;
	c->wr_shut = true;
	if (o->mode != PE_SINK && shutdown(c->fd, SHUT_WR) < 0 && !c->err)
		c->err = errno;
}

static inline void pe_on_read(struct pe_conn *c, const struct pe_opts *o,
			      const unsigned char *p, size_t n)
{
	static unsigned char want[PE_CHUNK];
	if (o->expect >= 0 && c->pattern_ok && n <= sizeof(want)) {
		/* memcmp against the pattern first; find the byte only if it differs. */
		pe_fill(want, n, c->recvd);
		for (size_t i = 0; memcmp(p, want, n) && i < n; i++) {
			if (p[i] != want[i]) {
				c->pattern_ok = false;
				fprintf(stderr, "%s: conn %d: byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
					o->prog, c->id, c->recvd + i, p[i], pe_byte(c->recvd + i));
				break;
			}
		}
	}
	c->recv_fnv = pe_fnv(c->recv_fnv, p, n);
	if (c->headlen < sizeof(c->head)) {
		size_t k = sizeof(c->head) - c->headlen < n ? sizeof(c->head) - c->headlen : n;
		memcpy(c->head + c->headlen, p, k);
		c->headlen += k;
	}
	c->recvd += n;
	if (o->mode == PE_ECHO) {
		/* The poll loop only reads while the buffer is empty. */
		memcpy(c->buf, p, n);
		c->boff = 0;
		c->blen = n;
	}
}

/* One step of I/O on a connection that poll() said is ready. */
static inline void pe_step(struct pe_conn *c, const struct pe_opts *o, short rev)
{
	static unsigned char rbuf[PE_CHUNK];
	if ((rev & (POLLIN | POLLHUP | POLLERR)) && !c->rd_eof) {
		size_t want = sizeof(rbuf);
		if (o->read_size && o->read_size < want)
			want = o->read_size;
		ssize_t n = read(c->fd, rbuf, want);
		if (n > 0) {
			pe_on_read(c, o, rbuf, (size_t)n);
			if (o->read_delay_ms)
				c->next_read = pe_now() + o->read_delay_ms / 1e3;
		} else if (n == 0) {
			c->rd_eof = true;
			if (o->mode == PE_HALF_CLOSE) {
				int len = snprintf((char *)c->buf, PE_CHUNK, "got %" PRIu64 " fnv %016" PRIx64 "\n",
						   c->recvd, c->recv_fnv);
				c->boff = 0;
				c->blen = (size_t)len;
				c->replied = true;
			}
		} else if (errno != EAGAIN && errno != EINTR) {
			c->err = errno;
		}
	}
	if (!c->err && (rev & POLLOUT) && pe_write_pending(c, o)) {
		ssize_t n = write(c->fd, c->buf + c->boff, c->blen - c->boff);
		if (n > 0) {
			c->sent_fnv = pe_fnv(c->sent_fnv, c->buf + c->boff, (size_t)n);
			c->sent += (uint64_t)n;
			c->boff += (size_t)n;
		} else if (n < 0 && errno != EAGAIN && errno != EINTR) {
			c->err = errno;
		}
	}
	if (!c->err)
		pe_maybe_shut(c, o);
	if (c->err || (c->rd_eof && c->wr_shut))
		pe_finish(c);
}

/*
 * Runs the connections until all are done, with an optional listening
 * socket that accepts until `want` connections (0: no limit) have been
 * seen. accept_fn makes a connection from a listening socket (it may also
 * refuse, returning -1). Returns 0 if every connection did what its mode
 * promised, 1 if one did not, 2 at the time limit.
 */
struct pe_run {
	struct pe_conn *conns;
	int n, cap;
	int lfd;       /* listening socket or -1 */
	int want;      /* connections to accept (0: forever) */
	int accepted;
	double deadline;
};

static inline int pe_loop(struct pe_run *r, const struct pe_opts *o)
{
	struct pollfd *pfd = calloc((size_t)r->cap + 1, sizeof(*pfd));
	int *map = calloc((size_t)r->cap + 1, sizeof(*map));
	double start = pe_now();
	int fails = 0;
	bool many = r->cap > 1 && !o->verbose;
	if (!pfd || !map) {
		perror("calloc");
		exit(2);
	}
	for (;;) {
		int np = 0, open = 0;
		double now = pe_now(), wake = r->deadline;
		for (int i = 0; i < r->n; i++) {
			struct pe_conn *c = &r->conns[i];
			if (c->done) {
				if (c->id >= 0) {
					bool ok = pe_conn_ok(c, o);
					fails += !ok;
					if (!many || !ok)
						pe_print_conn(c, o, "conn");
					c->id = -1 - c->id; /* printed */
				}
				continue;
			}
			open++;
			short ev = 0;
			if (!c->rd_eof && !(o->mode == PE_ECHO && c->boff < c->blen)) {
				if (c->next_read > now) {
					if (c->next_read < wake)
						wake = c->next_read;
				} else {
					ev |= POLLIN;
				}
			}
			if (pe_write_pending(c, o))
				ev |= POLLOUT;
			pfd[np] = (struct pollfd){ .fd = c->fd, .events = ev };
			map[np++] = i;
		}
		bool listening = r->lfd >= 0 && (r->want == 0 || r->accepted < r->want);
		if (!open && !listening)
			break;
		if (listening) {
			pfd[np] = (struct pollfd){ .fd = r->lfd, .events = POLLIN };
			map[np++] = -1;
		}
		if (now >= r->deadline) {
			printf("%s: TIMEOUT after %.1fs: %d connection(s) still open, %d of %d accepted\n",
			       o->prog, now - start, open, r->accepted, r->want);
			for (int i = 0; i < r->n; i++)
				if (!r->conns[i].done)
					pe_print_conn(&r->conns[i], o, "open");
			fflush(stdout);
			return 2;
		}
		int ms = (int)((wake - now) * 1e3) + 1;
		int k = poll(pfd, (nfds_t)np, ms);
		if (k < 0 && errno != EINTR) {
			perror("poll");
			exit(2);
		}
		for (int j = 0; k > 0 && j < np; j++) {
			if (!pfd[j].revents)
				continue;
			if (map[j] < 0) {
				int fd = accept(r->lfd, NULL, NULL);
				if (fd < 0)
					continue;
				if (r->n == r->cap) {
					r->cap *= 2;
					r->conns = realloc(r->conns, (size_t)r->cap * sizeof(*r->conns));
					pfd = realloc(pfd, ((size_t)r->cap + 1) * sizeof(*pfd));
					map = realloc(map, ((size_t)r->cap + 1) * sizeof(*map));
					if (!r->conns || !pfd || !map) {
						perror("realloc");
						exit(2);
					}
				}
				pe_conn_init(&r->conns[r->n], fd, r->n, o);
				r->n++;
				r->accepted++;
				continue;
			}
			pe_step(&r->conns[map[j]], o, pfd[j].revents);
		}
	}
	/* Summary for a run of several connections. */
	if (r->n > 1 || many) {
		uint64_t sent = 0, recvd = 0;
		double t0 = 1e300, t1 = 0;
		for (int i = 0; i < r->n; i++) {
			struct pe_conn *c = &r->conns[i];
			sent += c->sent;
			recvd += c->recvd;
			t0 = c->t0 < t0 ? c->t0 : t0;
			t1 = c->t1 > t1 ? c->t1 : t1;
		}
		double el = t1 - t0;
		printf("%s: summary conns=%d ok=%d failed=%d sent=%" PRIu64 " recvd=%" PRIu64
		       " ms=%.0f MBps=%.1f result=%s\n", o->prog, r->n, r->n - fails, fails, sent,
		       recvd, el * 1e3, el > 0 ? (double)(sent > recvd ? sent : recvd) / el / 1e6 : 0.0,
		       fails ? "FAIL" : "ok");
	}
	fflush(stdout);
	free(pfd);
	free(map);
	return fails ? 1 : 0;
}

/* Options common to both programs; returns the number of argv consumed
 * (0: not one of ours, -1: bad value). */
static inline int pe_parse_opt(int argc, char **argv, int i, struct pe_opts *o, int *count,
			       double *timeout)
{
	const char *a = argv[i];
	const char *v = i + 1 < argc ? argv[i + 1] : NULL;
	uint64_t x;
	if (!strcmp(a, "--verbose"))
		return o->verbose = true, 1;
	if (!strcmp(a, "--echo-check"))
		return o->echo_check = true, 1;
	if (!v)
		return 0;
	if (!strcmp(a, "--count"))
		return pe_parse_size(v, &x) ? (*count = (int)x, 2) : -1;
	if (!strcmp(a, "--timeout"))
		return pe_parse_size(v, &x) ? (*timeout = (double)x, 2) : -1;
	if (!strcmp(a, "--expect"))
		return pe_parse_size(v, &x) ? (o->expect = (int64_t)x, 2) : -1;
	if (!strcmp(a, "--read-delay-ms"))
		return pe_parse_size(v, &x) ? (o->read_delay_ms = (int)x, 2) : -1;
	if (!strcmp(a, "--read-size"))
		return pe_parse_size(v, &x) ? (o->read_size = (size_t)x, 2) : -1;
	if (!strcmp(a, "--mode")) {
		if (!strcmp(v, "sink"))
			return o->mode = PE_SINK, 2;
		if (!strcmp(v, "echo"))
			return o->mode = PE_ECHO, 2;
		if (!strcmp(v, "half-close"))
			return o->mode = PE_HALF_CLOSE, 2;
		if (!strcmp(v, "source")) {
			if (i + 2 >= argc || !pe_parse_size(argv[i + 2], &o->bytes))
				return -1;
			return o->mode = PE_SOURCE, 3;
		}
		return -1;
	}
	return 0;
}

/* The whole command line of either program: the common options, --retry,
 * and up to 3 positional words into posv. Returns how many words, or -1
 * for a usage error. */
static inline int pe_parse_cmdline(int argc, char **argv, struct pe_opts *o, int *count,
				   double *timeout, double *retry, char *posv[3])
{
	int pos = 0;
	uint64_t x;

	for (int i = 1; i < argc;) {
		if (!strcmp(argv[i], "--retry") && i + 1 < argc && pe_parse_size(argv[i + 1], &x)) {
			*retry = (double)x;
			i += 2;
			continue;
		}
		int k = pe_parse_opt(argc, argv, i, o, count, timeout);
		if (k < 0 || (k == 0 && (argv[i][0] == '-' || pos == 3)))
			return -1;
		if (k == 0)
			posv[pos++] = argv[i++];
		else
			i += k;
	}
	return pos;
}

/* `PROG fnv N`: prints the FNV-1a of the first N pattern bytes, so that a
 * shell script can compare checksums. Returns true if that was the
 * command. */
static inline bool pe_fnv_command(int pos, char *posv[3])
{
	uint64_t x;

	if (pos != 2 || strcmp(posv[0], "fnv") || !pe_parse_size(posv[1], &x))
		return false;
	printf("%016" PRIx64 "\n", pe_pattern_fnv(x));
	return true;
}

/* A unix socket address; a path that does not fit is a usage error. */
static inline void pe_unix_addr(struct sockaddr_un *a, const char *path, const char *prog)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(a->sun_path)) {
		fprintf(stderr, "%s: path too long: %s\n", prog, path);
		exit(2);
	}
	strcpy(a->sun_path, path);
}

/* A unix stream listener on path; a socket file left by an earlier run is
 * ours to replace. Returns the fd, or -1 with errno set. */
static inline int pe_unix_listen_type(const char *path, int type, int backlog,
				      const char *prog)
{
	struct sockaddr_un a;
	struct stat st;
	pe_unix_addr(&a, path, prog);
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd >= 0 && (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, backlog) < 0)) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static inline int pe_unix_listen(const char *path, int backlog, const char *prog)
{
	return pe_unix_listen_type(path, SOCK_STREAM, backlog, prog);
}

#define PE_OPTS_HELP \
	"  --mode sink|echo|half-close|source BYTES   (default sink; BYTES may end in K, M, G)\n" \
	"  --count N          connections (listen: accept N then exit; 0: forever)\n" \
	"  --timeout SECS     give up after SECS (default 60), exit 2\n" \
	"  --expect BYTES     received data must be exactly BYTES of the pattern\n" \
	"  --echo-check       (source) what comes back must equal what was sent\n" \
	"  --read-delay-ms MS --read-size BYTES   a slow reader\n" \
	"  --verbose          a line per connection even when there are many\n"

#endif
