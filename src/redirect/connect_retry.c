/* ADDRESS2's connect and its retries; see connect_retry.h. */
#include "redirect/connect_retry.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/log.h"

#define CONNECT_RETRY_MAX_MS 100u

bool redir_connect_retries(const struct redir_endpoint *ep, int rc)
{
	return rc == -EAGAIN && ep->addr.family == AF_UNIX;
}

unsigned redir_connect_retry_next(unsigned ms)
{
	return ms < CONNECT_RETRY_MAX_MS ? ms * 2 : ms;
}

/* The milliseconds left until deadline_ns (0: none), rounded up: -1 for
 * no deadline, 0 once it has passed. */
static int ms_left(uint64_t deadline_ns)
{
	uint64_t now = vmio_now_ns();

	if (!deadline_ns)
		return -1;
	if (now >= deadline_ns)
		return 0;
	return (int)((deadline_ns - now + 999999) / 1000000);
}

int redir_connect_wait(const struct redir_endpoint *ep)
{
	uint64_t ns = ep->addr.connect_timeout_ns;
	uint64_t deadline = ns ? vmio_now_ns() + ns : 0;
	unsigned retry_ms = REDIR_CONNECT_RETRY_FIRST_MS;
	char where[160];
	int fd;

	while (redir_connect_retries(ep, fd = redir_endpoint_connect(ep))) {
		int left = ms_left(deadline);

		if (left == 0) {
			fd = -ETIMEDOUT;
			break;
		}
		poll(NULL, 0, left > 0 && left < (int)retry_ms ? left :
								 (int)retry_ms);
		retry_ms = redir_connect_retry_next(retry_ms);
	}
	if (fd >= 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		int ms = ms_left(deadline);
		int n, err;

		while ((n = poll(&p, 1, ms)) < 0 && errno == EINTR)
			;
		err = n == 0 ? -ETIMEDOUT : redir_connect_result(fd);
		if (err) {
			close(fd);
			fd = err;
		}
	}
	if (fd < 0) {
		log_err("cannot connect to %s: %s",
			redir_endpoint_describe(ep, where, sizeof(where)),
			strerror(-fd));
		return -1;
	}
	return fd;
}
