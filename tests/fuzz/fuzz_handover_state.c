/* Fuzzes what a successor reads from its predecessor: the state envelope
 * (handover/envelope.h) and the messages that carry it and its fds
 * (handover/fd_transfer.h). Both come from another process, maybe of
 * another release: hostile input.
 *
 * Input: [0] the mode.
 *   even: the rest is a record for vmio_envelope_read. Invariants: a
 *     record read has every section inside it, names unique, fd ranges
 *     that tile [0, nfds) in order; a refusal always says why.
 *   odd: the rest is messages sent into a receiver through a seqpacket
 *     socketpair, each [len lo, len hi, fds] + len bytes, fds (0..7)
 *     copies of /dev/null attached. Invariants: the receiver ends done or
 *     failed with a reason, never with more fds than it announced, and
 *     once it is finished no fd of the process is left open (the lowest
 *     free fd number is what it was). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "handover/envelope.h"
#include "handover/fd_transfer.h"

static void check_record(const uint8_t *p, size_t n)
{
	struct vmio_envelope e;
	char why[256] = "";
	uint32_t next = 0;

	if (vmio_envelope_read(&e, p, n, why, sizeof(why))) {
		assert(why[0]);
		return;
	}
	assert(e.nsections <= VMIO_ENVELOPE_MAX_SECTIONS);
	for (unsigned i = 0; i < e.nsections; i++) {
		const struct vmio_envelope_section *s = &e.sec[i];

		assert(s->data >= p + VMIO_ENVELOPE_HEADER &&
		       s->data + s->len <= p + n - 4);
		assert(s->fd_first == next);
		next += s->fd_count;
		assert(vmio_envelope_find(&e, s->name) == s);
	}
	assert(next == e.nfds);
}

static int lowest_free_fd(void)
{
	int fd = dup(0);

	assert(fd >= 0);
	close(fd);
	return fd;
}

static void check_transfer(const uint8_t *p, size_t n)
{
	struct vmio_fd_receiver rx;
	int sv[2], null_fd, before = lowest_free_fd(), rc;
	size_t pos = 0;
	char why[256] = "";

	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	assert(null_fd >= 0);
	assert(!socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK |
					    SOCK_CLOEXEC, 0, sv));
	while (pos + 3 <= n) {
		size_t len = p[pos] | (size_t)(p[pos + 1] & 0x7f) << 8;
		unsigned nfds = p[pos + 2] & 7;

		pos += 3;
		if (len > n - pos)
			len = n - pos;
		int fds[7] = { null_fd, null_fd, null_fd, null_fd, null_fd,
			       null_fd, null_fd };

		/* A full socket ends the input: what was sent is what is
		 * read. */
		vmio_fd_send_message(sv[0], p + pos, len, fds, nfds);
		pos += len;
	}
	close(sv[0]);
	close(null_fd);
	vmio_fd_receiver_init(&rx, sv[1], 4096, 16);
	/* The peer is gone: each step reads what is queued, then the end. */
	do
		rc = vmio_fd_receiver_step(&rx, why, sizeof(why));
	while (rc == -EAGAIN);
	assert(rc == 0 || (rc == -1 && why[0]));
	if (!rc)
		assert(rx.got == rx.nfds && rx.nfds <= 16 && rx.len <= 4096);
	vmio_fd_receiver_fini(&rx);
	close(sv[1]);
	assert(lowest_free_fd() == before);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	if (data[0] & 1)
		check_transfer(data + 1, size - 1);
	else
		check_record(data + 1, size - 1);
	return 0;
}
