/* systemd's file descriptor store; see fd_store.h. */
#include "util/fd_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fd.h"
#include "util/sd_notify.h"

/* The first descriptor systemd passes (SD_LISTEN_FDS_START). */
#define LISTEN_FDS_START 3

static bool name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n > VMIO_FD_STORE_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (name[i] < 0x21 || name[i] > 0x7e || name[i] == ':')
			return false;
	return true;
}

bool vmio_fd_store_available(void)
{
	const char *s = getenv("NOTIFY_SOCKET");

	return s && s[0];
}

int vmio_fd_store_put(int fd, const char *name)
{
	char msg[64 + VMIO_FD_STORE_NAME_MAX];

	if (fd < 0 || !name_ok(name))
		return -EINVAL;
	snprintf(msg, sizeof(msg), "FDSTORE=1\nFDPOLL=0\nFDNAME=%s", name);
	return vmio_sd_notify_fd(msg, fd);
}

int vmio_fd_store_remove(const char *name)
{
	char msg[64 + VMIO_FD_STORE_NAME_MAX];

	if (!name_ok(name))
		return -EINVAL;
	snprintf(msg, sizeof(msg), "FDSTOREREMOVE=1\nFDNAME=%s", name);
	return vmio_sd_notify_fd(msg, -1);
}

/* ---- At start ----------------------------------------------------------- */

struct given {
	char *name;
	int fd;
};

static struct given *given;
static unsigned ngiven;

static bool has_prefix(const char *s, const char *prefix)
{
	return !strncmp(s, prefix, strlen(prefix));
}

/* LISTEN_FDS's count, if LISTEN_PID names this process; else 0. */
static unsigned passed_count(void)
{
	const char *pid = getenv("LISTEN_PID"), *fds = getenv("LISTEN_FDS");
	char *end;
	long long p, n;

	if (!pid || !fds)
		return 0;
	p = strtoll(pid, &end, 10);
	if (*end || p != (long long)getpid())
		return 0;
	n = strtoll(fds, &end, 10);
	if (*end || n <= 0 || n > 65536)
		return 0;
	return (unsigned)n;
}

unsigned vmio_fd_store_collect(const char *prefix)
{
	unsigned n = passed_count(), taken = 0;
	const char *names = getenv("LISTEN_FDNAMES");
	char *copy, *save = NULL, *tok;

	if (!n || !names)
		return 0;
	copy = strdup(names);
	given = calloc(n, sizeof(*given));
	if (!copy || !given) {
		free(copy);
		free(given);
		given = NULL;
		return 0;
	}
	tok = strtok_r(copy, ":", &save);
	for (unsigned i = 0; i < n && tok; i++, tok = strtok_r(NULL, ":", &save)) {
		if (!has_prefix(tok, prefix))
			continue;
		given[ngiven].name = strdup(tok);
		if (!given[ngiven].name)
			break;
		given[ngiven].fd = LISTEN_FDS_START + (int)i;
		(void)fcntl(given[ngiven].fd, F_SETFD, FD_CLOEXEC);
		ngiven++;
		taken++;
	}
	free(copy);
	/* Taken: a child (a successor at a hand-over) must not see them. */
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	unsetenv("LISTEN_PIDFDID");
	return taken;
}

int vmio_fd_store_give(const char *name, int fd)
{
	struct given *g = realloc(given, (ngiven + 1) * sizeof(*given));

	if (!g)
		return -ENOMEM;
	given = g;
	given[ngiven].name = strdup(name);
	if (!given[ngiven].name)
		return -ENOMEM;
	given[ngiven++].fd = fd;
	return 0;
}

int vmio_fd_store_take(const char *name)
{
	for (unsigned i = 0; i < ngiven; i++)
		if (given[i].fd >= 0 && !strcmp(given[i].name, name)) {
			int fd = given[i].fd;

			given[i].fd = -1;
			return fd;
		}
	return -1;
}

unsigned vmio_fd_store_count(const char *prefix)
{
	unsigned n = 0;

	for (unsigned i = 0; i < ngiven; i++)
		n += given[i].fd >= 0 && has_prefix(given[i].name, prefix);
	return n;
}

unsigned vmio_fd_store_close_rest(void)
{
	unsigned n = 0;

	for (unsigned i = 0; i < ngiven; i++) {
		if (given[i].fd >= 0) {
			n++;
			(void)vmio_fd_store_remove(given[i].name);
		}
		vmio_close_fd(&given[i].fd);
		free(given[i].name);
	}
	free(given);
	given = NULL;
	ngiven = 0;
	return n;
}
