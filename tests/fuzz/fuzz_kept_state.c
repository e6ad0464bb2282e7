/* Fuzzes what a vmio started after a crash reads from systemd's fd store:
 * a kept state's record (handover/kept_state.h) and a VM's journal of
 * connections (devices/vsock/conn_journal.h). The process that wrote
 * them died at any point of a write, and a bug may have written
 * anything: hostile input.
 *
 * Input: [0] the mode, [1] how many fds the store gives back (0..7, as
 * "t.f0".. "t.f6", copies of /dev/null), then the bytes.
 *   even: the bytes are both memfds' ("t.s0" whole, "t.s1" its first
 *     half). Invariants: a state taken has at most the fds asked for,
 *     each open; a refusal says why; once everything is let go no fd of
 *     the process is left open.
 *   odd: the bytes are a journal; every connection reported is counted
 *     against the bound given. */
#include <assert.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devices/vsock/conn_journal.h"
#include "fuzz.h"
#include "handover/kept_state.h"
#include "util/fd_store.h"

#define MAX_FDS 8

static int lowest_free_fd(void)
{
	int fd = dup(0);

	assert(fd >= 0);
	close(fd);
	return fd;
}

static int memfd_of(const uint8_t *p, size_t n)
{
	int fd = memfd_create("fuzz", MFD_CLOEXEC);

	assert(fd >= 0);
	assert(write(fd, p, n) == (ssize_t)n);
	return fd;
}

static void check_kept(const uint8_t *p, size_t n, unsigned given)
{
	int fds[MAX_FDS];
	unsigned nfds = 0;
	uint8_t *bytes = NULL;
	size_t len = 0;
	char why[256] = "", name[16];
	struct vmio_kept *k;
	int rc;

	assert(!vmio_fd_store_give("t.s0", memfd_of(p, n)));
	assert(!vmio_fd_store_give("t.s1", memfd_of(p, n / 2)));
	for (unsigned i = 0; i < given; i++) {
		snprintf(name, sizeof(name), "t.f%u", i);
		assert(!vmio_fd_store_give(name, open("/dev/null",
						      O_RDONLY | O_CLOEXEC)));
	}
	k = vmio_kept_open("t");
	assert(k);
	rc = vmio_kept_take(k, &bytes, &len, fds, MAX_FDS, &nfds, why,
			    sizeof(why));
	if (rc < 0)
		assert(why[0] && !nfds && !bytes);
	if (rc > 0) {
		assert(nfds <= MAX_FDS);
		for (unsigned i = 0; i < nfds; i++) {
			assert(fcntl(fds[i], F_GETFD) >= 0);
			close(fds[i]);
		}
	}
	free(bytes);
	vmio_kept_free(k);
	vmio_fd_store_close_rest();
}

static unsigned seen;

static void count(void *opaque, uint32_t local, uint32_t peer, uint16_t type)
{
	(void)opaque;
	(void)local;
	(void)peer;
	(void)type;
	seen++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int before = lowest_free_fd();

	if (size < 2)
		return 0;
	if (!(data[0] & 1)) {
		check_kept(data + 2, size - 2, data[1] % MAX_FDS);
	} else {
		int fd = memfd_of(data + 2, size - 2);
		unsigned max = data[1];

		seen = 0;
		assert(vsock_journal_read(fd, max, count, NULL) == seen);
		assert(seen <= max);
		close(fd);
	}
	assert(lowest_free_fd() == before);
	return 0;
}
