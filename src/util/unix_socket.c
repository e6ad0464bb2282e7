#include "util/unix_socket.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/log.h"

/* A socket file left by a process that died is ours to replace; one that a
 * live process listens on, or a file that is not a socket, is not. */
static int claim_path(const char *path, int type, const struct sockaddr_un *sa,
		      const char *who)
{
	struct stat st;
	int probe, rc, err;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode)) {
		log_err("%s: %s exists and is not a socket; not replacing it",
			who, path);
		return -EEXIST;
	}
	/* Probed with the socket's own type: another type would be refused
	 * (EPROTOTYPE) by a live socket and a stale one alike. */
	probe = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (probe < 0)
		return -errno;
	rc = connect(probe, (const struct sockaddr *)sa, sizeof(*sa));
	err = rc ? errno : 0;
	close(probe);
	/* A full backlog (EAGAIN) still means someone listens. */
	if (!rc || err == EAGAIN || err == EINPROGRESS) {
		log_err("%s: %s is in use by another live backend", who, path);
		return -EADDRINUSE;
	}
	if (err != ECONNREFUSED) {
		log_err("%s: cannot probe %s: %s", who, path, strerror(err));
		return -err;
	}
	if (unlink(path) < 0 && errno != ENOENT)
		return -errno;
	log_info("%s: replaced stale socket %s", who, path);
	return 0;
}

static int bind_path(int fd, const char *path, int type,
		     const struct sockaddr_un *sa, const char *who)
{
	int rc;

	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return 0;
	if (errno != EADDRINUSE)
		return -errno;
	rc = claim_path(path, type, sa, who);
	if (rc)
		return rc;
	if (bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0)
		return -errno;
	return 0;
}

int vmio_unix_listen(const char *path, int backlog, const char *who,
		     struct stat *st)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int rc;

	if (fd < 0)
		return -errno;
	rc = vmio_unix_bind_socket(fd, path, SOCK_STREAM, backlog, who, st);
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

int vmio_unix_bind_socket(int fd, const char *path, int type, int backlog,
			  const char *who, struct stat *st)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		log_err("%s: socket path %s is too long", who, path);
		return -ENAMETOOLONG;
	}
	strcpy(sa.sun_path, path);
	rc = bind_path(fd, path, type, &sa, who);
	if (rc) {
		if (rc != -EADDRINUSE && rc != -EEXIST)
			log_err("%s: cannot bind %s: %s", who, path,
				strerror(-rc));
		return rc;
	}
	/* A datagram socket has no connections to listen for. */
	if ((type != SOCK_DGRAM && listen(fd, backlog) < 0) ||
	    stat(path, st) < 0) {
		int err = errno;

		log_err("%s: cannot listen on %s: %s", who, path,
			strerror(err));
		unlink(path);
		return -err;
	}
	return 0;
}

void vmio_unix_unlink_if_same(const char *path, const struct stat *st)
{
	struct stat now;

	if (stat(path, &now) == 0 && now.st_dev == st->st_dev &&
	    now.st_ino == st->st_ino)
		unlink(path);
}
