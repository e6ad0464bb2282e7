#include "util/unix_socket.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/log.h"

/* In /proc/net/unix: a socket that listens (stream, seqpacket) */
#define UNIX_FLAG_ACCEPTCON 0x10000u

static const char *base_name(const char *p)
{
	const char *slash = strrchr(p, '/');

	return slash ? slash + 1 : p;
}

/* Whether a live socket of this type is bound to path and takes
 * connections (or, for datagrams, is bound at all), as /proc/net/unix
 * lists the sockets of our network namespace. 1: yes, 0: no, -1: cannot
 * tell (no /proc, or a socket bound by a relative name that may be this
 * file). Looked up rather than connected to: a probe connection would be
 * a live relay's one connection, or a front end to a backend. */
static int listed_live(const char *path, int type)
{
	FILE *f = fopen("/proc/net/unix", "re");
	char line[512], abs[4200], cwd[4096];
	int verdict = 0;

	if (!f)
		return -1;
	/* Entries show the name as it was bound: absolute, most often. */
	if (path[0] != '/' && getcwd(cwd, sizeof(cwd)))
		snprintf(abs, sizeof(abs), "%s/%s", cwd, path);
	else
		snprintf(abs, sizeof(abs), "%s", path);
	while (verdict != 1 && fgets(line, sizeof(line), f)) {
		unsigned flags, stype, state;
		char *name;
		int at = 0;

		if (sscanf(line, "%*s %*s %*s %x %x %x %*s %n", &flags,
			   &stype, &state, &at) != 3 || !at)
			continue;
		name = line + at;
		name[strcspn(name, "\n")] = '\0';
		if ((int)stype != type ||
		    (type != SOCK_DGRAM && !(flags & UNIX_FLAG_ACCEPTCON)))
			continue;
		if (!strcmp(name, abs) || !strcmp(name, path))
			verdict = 1;
		else if (name[0] && name[0] != '/' && name[0] != '@' &&
			 !strcmp(base_name(name), base_name(path)))
			verdict = -1;
	}
	fclose(f);
	return verdict;
}

/* A connection attempt: the fallback when /proc is not there. */
static int probe_live(const struct sockaddr_un *sa, int type, int *err)
{
	/* Probed with the socket's own type: another type would be refused
	 * (EPROTOTYPE) by a live socket and a stale one alike. */
	int probe = socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	int rc;

	*err = 0;
	if (probe < 0) {
		*err = errno;
		return -1;
	}
	rc = connect(probe, (const struct sockaddr *)sa, sizeof(*sa));
	*err = rc ? errno : 0;
	close(probe);
	/* A full backlog (EAGAIN) still means someone listens. */
	if (!rc || *err == EAGAIN || *err == EINPROGRESS)
		return 1;
	return *err == ECONNREFUSED ? 0 : -1;
}

/* A socket file left by a process that died is ours to replace; one that a
 * live process listens on, or a file that is not a socket, is not. */
static int claim_path(const char *path, int type, const struct sockaddr_un *sa,
		      const char *who)
{
	struct stat st;
	int live, err = 0;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	live = listed_live(path, type);
	if (live < 0)
		live = probe_live(sa, type, &err);
	if (live > 0)
		return -EADDRINUSE;
	if (live < 0)
		return -err;
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
	return vmio_unix_bind_socket_perms(fd, path, type, backlog, who, NULL,
					   st);
}

static int apply_perms(const char *path, const struct vmio_unix_perms *p)
{
	if (p->mode >= 0 && chmod(path, (mode_t)p->mode) < 0)
		return -errno;
	if ((p->uid >= 0 || p->gid >= 0) &&
	    chown(path, (uid_t)p->uid, (gid_t)p->gid) < 0)
		return -errno;
	return 0;
}

int vmio_unix_bind_socket_perms(int fd, const char *path, int type,
				int backlog, const char *who,
				const struct vmio_unix_perms *perms,
				struct stat *st)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int rc;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	if (perms && perms->mode >= 0) {
		/* The file is born with the mode asked (less any bits
		 * umask cannot give), so no peer gets in between bind and
		 * chmod. */
		mode_t old = umask((mode_t)~perms->mode & 0777);

		rc = bind_path(fd, path, type, &sa, who);
		umask(old);
	} else {
		rc = bind_path(fd, path, type, &sa, who);
	}
	if (rc)
		return rc;
	if (perms) {
		rc = apply_perms(path, perms);
		if (rc) {
			unlink(path);
			return rc;
		}
	}
	/* A datagram socket has no connections to listen for. */
	if ((type != SOCK_DGRAM && listen(fd, backlog) < 0) ||
	    stat(path, st) < 0) {
		int err = errno;

		unlink(path);
		return -err;
	}
	return 0;
}

const char *vmio_unix_strerror(int rc)
{
	switch (rc) {
	case -EADDRINUSE:
		return "a live process listens on it";
	case -EEXIST:
		return "it exists and is not a socket (not replaced)";
	case -ENAMETOOLONG:
		return "too long for a unix socket address (107 bytes at most)";
	}
	return strerror(-rc);
}

void vmio_unix_unlink_if_same(const char *path, const struct stat *st)
{
	struct stat now;

	if (stat(path, &now) == 0 && now.st_dev == st->st_dev &&
	    now.st_ino == st->st_ino)
		unlink(path);
}
