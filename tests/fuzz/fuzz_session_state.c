/* Fuzzes the session record's reader (vmio_session_restore): a record
 * comes from another process, and is checked as a VMM's messages are.
 *
 * Input: [fds] [record...]
 *   fds: which fds come with the record, in this order: a connected unix
 *        stream socket if bit 7 is set, (bits 4-5) memfds of 1 MiB of
 *        guest memory, (bits 0-3) eventfds, at most 12 in all.
 *   record: the bytes restore reads (session_state.c has the format).
 * A record restored is served (resumed: each started ring looked at once,
 * in guest memory that is all zeros), held and saved again, then the
 * backend is freed. Every fd the harness made must be closed exactly
 * once by then: close is wrapped (-Wl,--wrap=close), and a close of an fd
 * that is not open aborts, as does one left open.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "devices/loopback/loopback.h"
#include "fuzz.h"
#include "util/log.h"
#include "vhost-user/backend.h"
#include "vhost-user/session_state.h"

#define MEM_SIZE (1u << 20)
#define MAX_FDS 12

int __real_close(int fd);
int __wrap_close(int fd);

/* An fd closed twice would close whatever took its number since; here
 * nothing does, so the second close fails with EBADF. */
int __wrap_close(int fd)
{
	int rc = __real_close(fd);

	if (rc < 0 && errno == EBADF)
		abort();
	return rc;
}

static struct vmio_loop *loop;
static struct fuzz_clock clock_ = { FUZZ_CLOCK_START };
static int memfd = -1;

static void init_once(void)
{
	if (loop)
		return;
	vmio_log_set_level(VMIO_LOG_ERR);
	loop = vmio_loop_new();
	if (!loop || vmio_loop_set_clock(loop, fuzz_clock_now, &clock_))
		abort();
	fuzz_guest_memory("fuzz_session_state", MEM_SIZE, &memfd);
}

static bool is_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

/* The fds the first byte asks for; *peer is the front end's end of the
 * socket, or -1. Returns how many. */
static unsigned make_fds(uint8_t spec, int *fds, int *peer)
{
	unsigned n = 0, mem = (spec >> 4) & 3, ev = spec & 15;
	int sv[2];

	*peer = -1;
	if (spec & 0x80) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
			abort();
		fds[n++] = sv[1];
		*peer = sv[0];
	}
	for (unsigned i = 0; i < mem && n < MAX_FDS; i++)
		if ((fds[n++] = fcntl(memfd, F_DUPFD_CLOEXEC, 0)) < 0)
			abort();
	for (unsigned i = 0; i < ev && n < MAX_FDS; i++)
		if ((fds[n++] = eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
			abort();
	return n;
}

static void settle(void)
{
	for (int i = 0; i < 16 && vmio_loop_run_once(loop, 0) > 0; i++)
		;
}

/* What a successor does with a record it took: serve, then hand it on. */
static void serve_and_save(struct vmio_backend *be)
{
	struct vmio_session_record rec;
	char why[256];

	if (vmio_session_resume(be))
		return;
	settle();
	if (vmio_session_hold(be, NULL, NULL, why, sizeof(why)))
		return;
	if (!vmio_session_save(be, &rec, why, sizeof(why)))
		vmio_session_record_free(&rec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fds[MAX_FDS], made[MAX_FDS], peer;
	struct vmio_loopback *lb;
	struct vmio_backend *be;
	char why[256];
	unsigned n;

	if (!size)
		return 0;
	init_once();
	if (ftruncate(memfd, 0) < 0 || ftruncate(memfd, MEM_SIZE) < 0)
		abort();
	why[0] = '\0';
	n = make_fds(data[0], fds, &peer);
	memcpy(made, fds, sizeof(made));
	lb = vmio_loopback_new(loop, 256);
	be = lb ? vmio_backend_new(loop, vmio_loopback_ops(lb), lb) : NULL;
	if (!be)
		abort();
	if (!vmio_session_restore(be, data + 1, size - 1, fds, n, why,
				  sizeof(why)))
		serve_and_save(be);
	else if (!why[0])
		abort(); /* a refusal says why */
	for (unsigned i = 0; i < n; i++)
		if (fds[i] != -1)
			abort(); /* restore takes every fd it is given */
	vmio_backend_free(be);
	vmio_loopback_free(lb);
	settle();
	for (unsigned i = 0; i < n; i++)
		if (is_open(made[i]))
			abort(); /* kept after the backend is gone */
	if (peer >= 0)
		close(peer);
	if (!fuzz_fds_steady())
		abort();
	return 0;
}
