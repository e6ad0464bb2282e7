/*
 * The seqpacket half of the guest vsock tests, shared by vsock-tool (in
 * the guest, AF_VSOCK SOCK_SEQPACKET) and uds-peer (on the host, AF_UNIX
 * SOCK_SEQPACKET), included after peer-engine.h:
 *
 *   seq_client  sends one message of each size in seq_sizes (every size
 *               its own pattern offset), and reads each back from an echo
 *               peer: the same length (MSG_TRUNC would show a longer one),
 *               the same bytes. Then one message a byte over the largest:
 *               it must be refused, by the sender's own kernel (Linux's
 *               vsock checks the peer's buffer: EMSGSIZE, which 6.1 turns
 *               into ENOMEM on its way out of sendmsg, fixed upstream by
 *               "vsock: return errors other than -ENOMEM to socket") or
 *               by the backend, which closes the connection instead of
 *               splitting it.
 *   seq_echo    sends every message it receives back as one message, until
 *               end of stream.
 *
 * Result lines: "<prog>: seq <what> msgs=N max=BYTES refused=HOW
 * result=ok ms=T", or result=error why=... Exit status: 0 ok, 1 not.
 */
#ifndef VMIO_TESTS_GUEST_SEQ_ENGINE_H
#define VMIO_TESTS_GUEST_SEQ_ENGINE_H

#include <sys/time.h>

/* The largest message either way with the defaults: the backend's and
 * Linux's socket buffers are both 256 KiB. */
#define SEQ_MAX (256u * 1024u)

static const unsigned seq_sizes[] = { 1,     2,     100,   4051,  4052,  4053,
				      4096,  4097,  16384, 65535, 65536, 65537,
				      100000, SEQ_MAX - 1, SEQ_MAX };
#define SEQ_NSIZES (sizeof(seq_sizes) / sizeof(seq_sizes[0]))

/* Bounds every later call on fd, and makes room for the largest message
 * in one send (AF_UNIX refuses one longer than SO_SNDBUF). */
static inline void seq_setup_fd(int fd, double timeout)
{
	struct timeval tv = { .tv_sec = (time_t)timeout,
			      .tv_usec = (suseconds_t)((timeout - (time_t)timeout) * 1e6) };
	int big = 1 << 20;

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
}

/* One message into buf (size bytes); returns its whole length (MSG_TRUNC),
 * 0 at end of stream, -errno. */
static inline ssize_t seq_recv(int fd, unsigned char *buf, size_t size)
{
	ssize_t n;

	do
		n = recv(fd, buf, size, MSG_TRUNC);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static inline int seq_result(const char *prog, const char *what, unsigned msgs,
			     const char *refused, double t0, const char *why)
{
	printf("%s: seq %s msgs=%u max=%u refused=%s result=%s%s%s ms=%.0f\n", prog, what, msgs,
	       SEQ_MAX, refused, why ? "error" : "ok", why ? " why=" : "", why ? why : "",
	       (pe_now() - t0) * 1e3);
	return why ? 1 : 0;
}

static inline int seq_client(int fd, const char *prog, const char *what, double timeout)
{
	unsigned char *buf = malloc(SEQ_MAX + 1), *got = malloc(SEQ_MAX + 2);
	double t0 = pe_now();
	static char why[128];
	const char *refused = "no";
	unsigned i;
	ssize_t n;

	if (!buf || !got)
		return seq_result(prog, what, 0, refused, t0, "out-of-memory");
	seq_setup_fd(fd, timeout);
	for (i = 0; i < SEQ_NSIZES; i++) {
		unsigned len = seq_sizes[i];

		pe_fill(buf, len, (uint64_t)i << 20);
		n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n != (ssize_t)len) {
			snprintf(why, sizeof(why), "send-%u:%s", len,
				 n < 0 ? pe_errname(errno) : "short");
			return seq_result(prog, what, i, refused, t0, why);
		}
		n = seq_recv(fd, got, SEQ_MAX + 2);
		if (n != (ssize_t)len) {
			snprintf(why, sizeof(why), "echo-of-%u-came-as-%s%zd", len,
				 n < 0 ? pe_errname((int)-n) : "", n < 0 ? (ssize_t)0 : n);
			return seq_result(prog, what, i, refused, t0, why);
		}
		if (memcmp(buf, got, len)) {
			snprintf(why, sizeof(why), "echo-of-%u-differs", len);
			return seq_result(prog, what, i, refused, t0, why);
		}
	}
	/* One byte too many: refused whole, never split or cut. */
	pe_fill(buf, SEQ_MAX + 1, 0);
	n = send(fd, buf, SEQ_MAX + 1, MSG_NOSIGNAL);
	if (n < 0 && (errno == EMSGSIZE || errno == ENOMEM)) {
		refused = pe_errname(errno);
	} else if (n == SEQ_MAX + 1) {
		/* Taken by our kernel: the backend must close, not echo. */
		n = seq_recv(fd, got, SEQ_MAX + 2);
		if (n == 0 || n == -ECONNRESET)
			refused = "closed";
		else
			refused = n > 0 ? "echoed" : pe_errname((int)-n);
	} else {
		refused = n < 0 ? pe_errname(errno) : "short";
	}
	free(buf);
	free(got);
	return seq_result(prog, what, i, refused, t0, NULL);
}

static inline int seq_echo(int fd, const char *prog, const char *what, double timeout)
{
	unsigned char *buf = malloc(4u << 20);
	double t0 = pe_now();
	static char why[96];
	unsigned msgs = 0;
	ssize_t n;

	if (!buf)
		return seq_result(prog, what, 0, "-", t0, "out-of-memory");
	seq_setup_fd(fd, timeout);
	for (;;) {
		n = seq_recv(fd, buf, 4u << 20);
		/* The peer's last, too large message ends the connection. */
		if (n == 0 || n == -ECONNRESET)
			break;
		if (n < 0 || n > (ssize_t)(4u << 20)) {
			snprintf(why, sizeof(why), "recv:%s", n < 0 ? pe_errname((int)-n) : "too-long");
			return seq_result(prog, what, msgs, "-", t0, why);
		}
		if (send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n) {
			snprintf(why, sizeof(why), "send-%zd:%s", n, pe_errname(errno));
			return seq_result(prog, what, msgs, "-", t0, why);
		}
		msgs++;
	}
	free(buf);
	return seq_result(prog, what, msgs, "-", t0, NULL);
}

#endif
