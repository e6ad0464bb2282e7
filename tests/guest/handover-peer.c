/*
 * handover-peer: both ends of the streams of tests/guest/handover_test.sh,
 * the guest test of vmio vsock's hand-over (issue 36), and of
 * net_handover_test.sh, vmio net's hand-over and crash (TCP between the
 * guest and a network namespace). Built static: the same program runs in
 * the guest (AF_VSOCK, TCP) and on the host (the unix sockets of the
 * hybrid scheme, TCP), so a pattern, a checksum and a result line mean
 * the same on both sides (peer-engine.h's pattern and FNV).
 *
 *   handover-peer send ADDR [--rate BYTES/S] [--final BYTES] [--total BYTES]
 *                           [--half-connect]
 *   handover-peer recv ADDR [--read-size BYTES --read-delay-ms MS]
 *   handover-peer seq-send ADDR [--rate MSGS/S]
 * with [--timeout SECS] (default 300): every wait is bounded by it.
 *
 * ADDR:
 *   vsock:CID:PORT      connect (in the guest)
 *   vsock-listen:PORT   listen, accept one connection (in the guest)
 *   unix-listen:PATH    listen, accept one (the host: <uds-path>_PORT)
 *   tcp:IPV4:PORT       connect (stream modes)
 *   tcp-listen:PORT     listen on every IPv4 address, accept one
 *   hybrid:UDS:PORT     the host's connect through vmio: "CONNECT PORT\n"
 *                       on UDS, then "OK N\n" (seq-send: UDS.seqpacket,
 *                       the line and the answer one message each)
 *
 * send      writes the pattern, paced at --rate (in pieces of 1 KiB),
 *           until SIGUSR1; then --final more bytes at once (an idle
 *           connection: --rate 0, --final 64K), shuts down its sending
 *           side and reads the receiver's reply "got N fnv X" to end of
 *           stream: it must name what was sent. --total: a stream of that
 *           many bytes, ended as on SIGUSR1 once all are written (the
 *           64 MiB streams of net_migrate_test.sh). --half-connect (hybrid):
 *           writes "CONNECT " and half the port, prints "half-written",
 *           and writes the rest of the line on SIGUSR2.
 * recv      reads to end of stream, checking every byte against the
 *           pattern, timing the longest gap between two reads once the
 *           first byte came (the pause a hand-over costs the stream); at
 *           the end replies "got N fnv X\n" and closes. --read-size and
 *           --read-delay-ms make a slow reader (until SIGUSR1), so that
 *           vmio holds the writer's bytes.
 * seq-send  seqpacket: sends messages of a cycle of sizes (1 B to 64 KiB
 *           + 1, each message its own part of the pattern), paced at
 *           --rate, to an echo (vsock-tool seq-listen), and checks every
 *           message that comes back: its length (boundaries kept) and
 *           bytes, in order; on SIGUSR1 it stops, waits for the echoes
 *           of all and shuts down.
 *
 * Every mode prints "handover-peer: connected ..." once connected, and one
 * result line ending in result=ok or result=FAIL (why=...). Exit 0 ok,
 * 1 failed, 2 usage or time limit.
 */
#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <signal.h>

#include "peer-engine.h"

#define PIECE 1024u
#define TICK_MS 20

static const char *prog = "handover-peer";
static volatile sig_atomic_t stop_flag, finish_flag;
static double deadline;

static void on_usr1(int s)
{
	(void)s;
	stop_flag = 1;
}

static void on_usr2(int s)
{
	(void)s;
	finish_flag = 1;
}

static void usage(void)
{
	fprintf(stderr, "usage: %s send ADDR [--rate BYTES/S] [--final BYTES] [--total BYTES] [--half-connect]\n"
			"       %s recv ADDR [--read-size BYTES --read-delay-ms MS]\n"
			"       %s seq-send ADDR [--rate MSGS/S]\n"
			"  common: [--timeout SECS]; ADDR vsock:CID:PORT, vsock-listen:PORT,\n"
			"  unix-listen:PATH, hybrid:UDS:PORT, tcp:IPV4:PORT or tcp-listen:PORT\n",
		prog, prog, prog);
	exit(2);
}

static int ms_left(void)
{
	double l = deadline - pe_now();
	return l <= 0 ? 0 : (int)(l * 1e3) + 1;
}

/* Waits for events on fd up to ms (capped by the deadline); the revents,
 * 0 on timeout. EINTR (our signals) counts as a timeout. */
static short wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int left = ms_left();
	if (ms < 0 || ms > left)
		ms = left;
	return poll(&p, 1, ms) > 0 ? p.revents : 0;
}

static void timed_out(const char *what)
{
	printf("%s: %s result=FAIL why=timeout\n", prog, what);
	exit(2);
}

/* Writes all of buf (a blocking-style write on a non-blocking fd), bounded
 * by the deadline; 0 or -errno. */
static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k > 0) {
			p += k;
			n -= (size_t)k;
			continue;
		}
		if (k < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (!ms_left())
			return -ETIMEDOUT;
		wait_fd(fd, POLLOUT, 100);
	}
	return 0;
}

struct addr {
	enum { A_VSOCK, A_VSOCK_LISTEN, A_UNIX_LISTEN, A_HYBRID, A_TCP, A_TCP_LISTEN } kind;
	unsigned cid, port;
	struct in_addr ip;
	char path[108];
};

static bool parse_addr(const char *s, struct addr *a)
{
	char rest[200];
	uint64_t x, y;
	memset(a, 0, sizeof(*a));
	if (sscanf(s, "vsock:%" SCNu64 ":%" SCNu64, &x, &y) == 2) {
		a->kind = A_VSOCK;
		a->cid = (unsigned)x;
		a->port = (unsigned)y;
		return true;
	}
	if (!strncmp(s, "tcp:", 4) && strlen(s + 4) < sizeof(rest)) {
		strcpy(rest, s + 4);
		char *colon = strrchr(rest, ':');
		if (!colon || !pe_parse_size(colon + 1, &x) || x > 65535)
			return false;
		*colon = 0;
		a->kind = A_TCP;
		a->port = (unsigned)x;
		return inet_pton(AF_INET, rest, &a->ip) == 1;
	}
	if (sscanf(s, "tcp-listen:%" SCNu64, &x) == 1 && x <= 65535) {
		a->kind = A_TCP_LISTEN;
		a->port = (unsigned)x;
		return true;
	}
	if (sscanf(s, "vsock-listen:%" SCNu64, &x) == 1) {
		a->kind = A_VSOCK_LISTEN;
		a->port = (unsigned)x;
		return true;
	}
	if (!strncmp(s, "unix-listen:", 12) && strlen(s + 12) < sizeof(a->path)) {
		a->kind = A_UNIX_LISTEN;
		strcpy(a->path, s + 12);
		return true;
	}
	if (!strncmp(s, "hybrid:", 7) && strlen(s + 7) < sizeof(rest)) {
		strcpy(rest, s + 7);
		char *colon = strrchr(rest, ':');
		if (!colon || !pe_parse_size(colon + 1, &x) || (size_t)(colon - rest) >= sizeof(a->path) - 12)
			return false;
		*colon = 0;
		a->kind = A_HYBRID;
		a->port = (unsigned)x;
		strcpy(a->path, rest);
		return true;
	}
	return false;
}

static void die_conn(const char *what, const char *why)
{
	printf("%s: %s result=FAIL why=%s\n", prog, what, why);
	exit(1);
}

/* The accepted connection of a listening socket, bounded. */
static int accept_one(int lfd, const char *what)
{
	if (listen(lfd, 4) < 0)
		die_conn(what, pe_errname(errno));
	printf("%s: listening %s\n", prog, what);
	if (!(wait_fd(lfd, POLLIN, -1) & POLLIN))
		timed_out(what);
	int fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die_conn(what, pe_errname(errno));
	close(lfd);
	return fd;
}

/* Reads one line (to '\n', byte by byte: what follows is the stream's),
 * bounded; false on end of stream, error or timeout. */
static bool read_line(int fd, char *line, size_t size)
{
	size_t len = 0;
	for (;;) {
		char ch;
		ssize_t k = read(fd, &ch, 1);
		if (k == 1) {
			if (ch == '\n')
				break;
			if (len + 1 < size)
				line[len++] = ch;
			continue;
		}
		if (k == 0 || (errno != EAGAIN && errno != EINTR))
			return false;
		if (!ms_left())
			return false;
		wait_fd(fd, POLLIN, 100);
	}
	line[len] = 0;
	return true;
}

/* Connects (or accepts) as ADDR says; type SOCK_STREAM or SOCK_SEQPACKET.
 * half: write the CONNECT line in two parts, the second on SIGUSR2. The
 * socket is non-blocking. */
static int open_addr(const struct addr *a, int type, bool half, const char *what)
{
	int fd = -1;
	if (a->kind != A_UNIX_LISTEN && a->kind != A_HYBRID) {
		union {
			struct sockaddr sa;
			struct sockaddr_vm vm;
			struct sockaddr_in in;
		} sa;
		socklen_t len;
		bool tcp = a->kind == A_TCP || a->kind == A_TCP_LISTEN;
		bool dial = a->kind == A_VSOCK || a->kind == A_TCP;
		if (tcp) {
			sa.in = (struct sockaddr_in){ .sin_family = AF_INET,
						      .sin_port = htons((uint16_t)a->port),
						      .sin_addr = a->ip };
			len = sizeof(sa.in);
		} else {
			sa.vm = (struct sockaddr_vm){ .svm_family = AF_VSOCK, .svm_port = a->port,
						      .svm_cid = dial ? a->cid : VMADDR_CID_ANY };
			len = sizeof(sa.vm);
		}
		if (tcp && type != SOCK_STREAM)
			die_conn(what, "tcp-is-a-stream");
		fd = socket(sa.sa.sa_family, type | SOCK_CLOEXEC, 0);
		if (fd < 0)
			die_conn(what, pe_errname(errno));
		if (dial) {
			if (connect(fd, &sa.sa, len) < 0)
				die_conn(what, pe_errname(errno));
		} else {
			if (bind(fd, &sa.sa, len) < 0)
				die_conn(what, pe_errname(errno));
			fd = accept_one(fd, what);
		}
	} else if (a->kind == A_UNIX_LISTEN) {
		fd = pe_unix_listen_type(a->path, type, 4, prog);
		if (fd < 0)
			die_conn(what, pe_errname(errno));
		fd = accept_one(fd, what);
	} else {
		struct sockaddr_un u;
		char path[120];
		snprintf(path, sizeof(path), "%s%s", a->path, type == SOCK_SEQPACKET ? ".seqpacket" : "");
		pe_unix_addr(&u, path, prog);
		fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&u, sizeof(u)) < 0)
			die_conn(what, pe_errname(errno));
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (a->kind != A_HYBRID)
		goto done;

	char line[64], ok[64];
	int n = snprintf(line, sizeof(line), "CONNECT %u\n", a->port);
	if (type == SOCK_SEQPACKET) {
		if (send(fd, line, (size_t)n, MSG_NOSIGNAL) != n)
			die_conn(what, pe_errname(errno));
		for (;;) {
			ssize_t k = recv(fd, ok, sizeof(ok) - 1, 0);
			if (k > 0) {
				ok[k] = 0;
				break;
			}
			if (k == 0 || (errno != EAGAIN && errno != EINTR))
				die_conn(what, k == 0 ? "closed-before-OK" : pe_errname(errno));
			if (!ms_left())
				timed_out(what);
			wait_fd(fd, POLLIN, 100);
		}
		if (strncmp(ok, "OK ", 3) || ok[strlen(ok) - 1] != '\n')
			die_conn(what, "bad-reply");
		ok[strlen(ok) - 1] = 0;
	} else {
		int first = half ? n - 4 : n; /* "CONNECT 62" | "05\n" */
		if (write_all(fd, line, (size_t)first))
			die_conn(what, "write-connect");
		if (half) {
			printf("%s: half-written \"%.*s\" %s\n", prog, first, line, what);
			while (!finish_flag) {
				if (stop_flag)
					die_conn(what, "stopped-while-half-written");
				if (!ms_left())
					timed_out(what);
				/* The socket must stay open meanwhile: vmio
				 * closing it is a failure, seen here. */
				short r = wait_fd(fd, POLLIN, 100);
				if (r & (POLLIN | POLLHUP | POLLERR))
					die_conn(what, "closed-while-half-written");
			}
			if (write_all(fd, line + first, (size_t)(n - first)))
				die_conn(what, "write-connect-rest");
		}
		if (!read_line(fd, ok, sizeof(ok)))
			die_conn(what, "no-OK-line");
		if (strncmp(ok, "OK ", 3))
			die_conn(what, "bad-reply");
	}
	printf("%s: reply \"%s\" %s\n", prog, ok, what);
done:
	printf("%s: connected %s\n", prog, what);
	return fd;
}

/* send: the paced writer. */
static int do_send(int fd, const char *what, uint64_t rate, uint64_t final,
		   uint64_t total)
{
	static unsigned char buf[PE_CHUNK];
	uint64_t sent = 0, fnv = PE_FNV_INIT, target = 0;
	double t0 = pe_now(), last_ok = t0, max_block = 0;
	bool final_set = false;
	int err = 0;

	for (;;) {
		if (stop_flag && !final_set) {
			target = sent + final;
			final_set = true;
		} else if (!final_set && rate) {
			target = (uint64_t)((pe_now() - t0) * (double)rate);
			target -= target % PIECE;
		}
		if (total && !final_set && target >= total) {
			target = total;
			final_set = true;
		}
		if (final_set && sent >= target)
			break;
		if (!ms_left()) {
			err = ETIMEDOUT;
			break;
		}
		if (sent < target) {
			size_t len = target - sent < PE_CHUNK ? (size_t)(target - sent) : PE_CHUNK;
			pe_fill(buf, len, sent);
			ssize_t k = write(fd, buf, len);
			if (k > 0) {
				fnv = pe_fnv(fnv, buf, (size_t)k);
				sent += (uint64_t)k;
				double now = pe_now();
				if (now - last_ok > max_block)
					max_block = now - last_ok;
				last_ok = now;
				continue;
			}
			if (k < 0 && errno != EAGAIN && errno != EINTR) {
				err = errno;
				break;
			}
			short r = wait_fd(fd, POLLOUT, TICK_MS);
			if (r & (POLLERR | POLLHUP)) {
				err = EPIPE;
				break;
			}
			continue;
		}
		last_ok = pe_now();
		/* Nothing due: a peer closing or resetting shows as input. */
		short r = wait_fd(fd, POLLIN, TICK_MS);
		if (r & (POLLIN | POLLERR | POLLHUP)) {
			char c;
			ssize_t k = read(fd, &c, 1);
			err = k < 0 ? errno : k == 0 ? EPIPE : EPROTO;
			if (!(k < 0 && (errno == EAGAIN || errno == EINTR)))
				break;
			err = 0;
		}
	}
	char reply[96] = "", want[96];
	if (!err && shutdown(fd, SHUT_WR) < 0)
		err = errno;
	if (!err) {
		/* The reply, then end of stream. */
		char extra[8];
		if (!read_line(fd, reply, sizeof(reply)))
			err = ms_left() ? EPIPE : ETIMEDOUT;
		while (!err) {
			ssize_t k = read(fd, extra, sizeof(extra));
			if (k == 0)
				break;
			if (k > 0) {
				err = EPROTO;
			} else if (errno != EAGAIN && errno != EINTR) {
				err = errno;
			} else if (!ms_left()) {
				err = ETIMEDOUT;
			} else {
				wait_fd(fd, POLLIN, 100);
			}
		}
	}
	snprintf(want, sizeof(want), "got %" PRIu64 " fnv %016" PRIx64, sent, fnv);
	bool ok = !err && !strcmp(reply, want);
	printf("%s: send %s sent=%" PRIu64 " sent_fnv=%016" PRIx64 " reply=\"%s\" ms=%.0f max_block_ms=%.0f%s%s result=%s\n",
	       prog, what, sent, fnv, reply, (pe_now() - t0) * 1e3, max_block * 1e3,
	       err ? " errno=" : "", err ? pe_errname(err) : "", ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
}

/* recv: the checking reader; a slow one (read_size bytes every delay_ms)
 * until SIGUSR1, then as fast as it can. */
static int do_recv(int fd, const char *what, size_t read_size, unsigned delay_ms)
{
	static unsigned char buf[PE_CHUNK];
	struct pe_rx rx;
	int err = 0;

	pe_rx_init(&rx);
	for (;;) {
		bool slow = delay_ms && !stop_flag;
		ssize_t k = read(fd, buf, slow && read_size < sizeof(buf) ? read_size : sizeof(buf));
		if (k > 0) {
			uint64_t was_bad = rx.bad_at;

			if (slow)
				usleep(delay_ms * 1000u); /* a signal ends it early */
			if (pe_rx_take(&rx, buf, (size_t)k))
				printf("%s: first-byte %s\n", prog, what);
			if (was_bad == UINT64_MAX && rx.bad_at != UINT64_MAX)
				fprintf(stderr, "%s: %s: byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
					prog, what, rx.bad_at, rx.bad, rx.expected);
			continue;
		}
		if (k == 0)
			break;
		if (errno != EAGAIN && errno != EINTR) {
			err = errno;
			break;
		}
		if (!ms_left()) {
			err = ETIMEDOUT;
			break;
		}
		wait_fd(fd, POLLIN, 200);
	}
	if (!err) {
		char reply[96];
		int n = snprintf(reply, sizeof(reply), "got %" PRIu64 " fnv %016" PRIx64 "\n", rx.got, rx.fnv);
		int e = write_all(fd, reply, (size_t)n);
		if (e)
			err = -e;
	}
	close(fd);
	bool ok = !err && rx.bad_at == UINT64_MAX;
	printf("%s: recv %s recvd=%" PRIu64 " recv_fnv=%016" PRIx64 " pattern=%s max_gap_ms=%.0f gap_at_s=%.1f ms=%.0f%s%s result=%s\n",
	       prog, what, rx.got, rx.fnv, rx.bad_at == UINT64_MAX ? "ok" : "BAD", rx.max_gap * 1e3, rx.gap_at,
	       (pe_now() - rx.t0) * 1e3, err ? " errno=" : "", err ? pe_errname(err) : "", ok ? "ok" : "FAIL");
	return ok ? 0 : 1;
}

/* seq-send: paced messages to an echo, every echo checked. */
static const unsigned seq_cycle[] = { 1, 100, 4097, 32768, 65537, 2, 4096, 16384 };
#define SEQ_CYCLE (sizeof(seq_cycle) / sizeof(seq_cycle[0]))
#define SEQ_BIG 65537u

static int do_seq_send(int fd, const char *what, double rate)
{
	static unsigned char out[SEQ_BIG], back[SEQ_BIG + 16], want[SEQ_BIG];
	uint64_t sent = 0, echoed = 0, bytes = 0;
	double t0 = pe_now(), last_echo = 0, max_gap = 0;
	char why[96] = "";
	int big = 1 << 20;

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	while (!why[0]) {
		bool stopping = stop_flag;
		if (stopping && echoed == sent)
			break;
		if (!ms_left()) {
			snprintf(why, sizeof(why), "timeout-sent-%" PRIu64 "-echoed-%" PRIu64, sent, echoed);
			break;
		}
		uint64_t due = stopping ? sent : (uint64_t)((pe_now() - t0) * rate) + 1;
		short ev = POLLIN;
		if (sent < due && sent - echoed < 8) {
			unsigned len = seq_cycle[sent % SEQ_CYCLE];
			pe_fill(out, len, sent << 20);
			ssize_t k = send(fd, out, len, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (k == (ssize_t)len) {
				sent++;
				bytes += len;
				continue;
			}
			if (k >= 0) {
				snprintf(why, sizeof(why), "send-%u-short-%zd", len, k);
				break;
			}
			if (errno != EAGAIN && errno != EINTR) {
				snprintf(why, sizeof(why), "send-%u:%s", len, pe_errname(errno));
				break;
			}
			ev |= POLLOUT;
		}
		short r = wait_fd(fd, ev, TICK_MS);
		if (!(r & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t k = recv(fd, back, sizeof(back), MSG_TRUNC | MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0) {
			snprintf(why, sizeof(why), "echo-%s-after-%" PRIu64, k ? pe_errname(errno) : "eof", echoed);
			break;
		}
		unsigned len = seq_cycle[echoed % SEQ_CYCLE];
		if (echoed >= sent || k != (ssize_t)len) {
			snprintf(why, sizeof(why), "echo-%" PRIu64 "-is-%zd-bytes-not-%u", echoed, k, len);
			break;
		}
		pe_fill(want, len, echoed << 20);
		if (memcmp(back, want, len)) {
			snprintf(why, sizeof(why), "echo-%" PRIu64 "-differs", echoed);
			break;
		}
		double now = pe_now();
		if (echoed && now - last_echo > max_gap)
			max_gap = now - last_echo;
		last_echo = now;
		echoed++;
	}
	if (!why[0]) {
		shutdown(fd, SHUT_WR);
		/* The echo ends its side at our end of stream. */
		for (;;) {
			ssize_t k = recv(fd, back, sizeof(back), MSG_DONTWAIT);
			if (k == 0)
				break;
			if (k > 0) {
				snprintf(why, sizeof(why), "message-after-the-last");
				break;
			}
			if (errno != EAGAIN && errno != EINTR) {
				if (errno != ECONNRESET)
					snprintf(why, sizeof(why), "end:%s", pe_errname(errno));
				break;
			}
			if (!ms_left()) {
				snprintf(why, sizeof(why), "no-end-of-stream");
				break;
			}
			wait_fd(fd, POLLIN, 100);
		}
	}
	printf("%s: seq-send %s msgs=%" PRIu64 " echoed=%" PRIu64 " bytes=%" PRIu64 " max_gap_ms=%.0f ms=%.0f result=%s%s%s\n",
	       prog, what, sent, echoed, bytes, max_gap * 1e3, (pe_now() - t0) * 1e3,
	       why[0] ? "FAIL" : "ok", why[0] ? " why=" : "", why);
	return why[0] ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct addr a;
	uint64_t rate = 32768, final = 0, total = 0, x;
	double timeout = 300, mrate = 2;
	bool half = false, rate_given = false;
	size_t read_size = PE_CHUNK;
	unsigned delay_ms = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);
	if (argc < 3 || !parse_addr(argv[2], &a))
		usage();
	for (int i = 3; i < argc; i++) {
		const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(o, "--half-connect"))
			half = true;
		else if (v && !strcmp(o, "--rate") && pe_parse_size(v, &x))
			rate = x, mrate = (double)x, rate_given = true, i++;
		else if (v && !strcmp(o, "--final") && pe_parse_size(v, &x))
			final = x, i++;
		else if (v && !strcmp(o, "--total") && pe_parse_size(v, &x))
			total = x, i++;
		else if (v && !strcmp(o, "--read-size") && pe_parse_size(v, &x) && x)
			read_size = (size_t)x, i++;
		else if (v && !strcmp(o, "--read-delay-ms") && pe_parse_size(v, &x) && x < 10000)
			delay_ms = (unsigned)x, i++;
		else if (v && !strcmp(o, "--timeout") && pe_parse_size(v, &x))
			timeout = (double)x, i++;
		else
			usage();
	}
	(void)rate_given;
	deadline = pe_now() + timeout;
	const char *what = argv[2];
	if (!strcmp(argv[1], "send")) {
		if (half && a.kind != A_HYBRID)
			usage();
		return do_send(open_addr(&a, SOCK_STREAM, half, what), what, rate, final, total);
	}
	if (!strcmp(argv[1], "recv"))
		return do_recv(open_addr(&a, SOCK_STREAM, false, what), what,
			       read_size, delay_ms);
	if (!strcmp(argv[1], "seq-send"))
		return do_seq_send(open_addr(&a, SOCK_SEQPACKET, false, what), what, mrate);
	usage();
}
