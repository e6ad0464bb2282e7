#include "cli/socket_instance.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

int vmio_instance_name_ok(const char *name)
{
	return name[0] && name[0] != '.' && !strchr(name, '/');
}

int vmio_instance_from_path(const char *path, char *out, size_t size)
{
	const char *last = strrchr(path, '/'), *dir;
	size_t len;

	if (!last || last == path)
		return -EINVAL;
	for (dir = last; dir > path && dir[-1] != '/'; dir--)
		;
	len = (size_t)(last - dir);
	if (len >= size)
		return -ENAMETOOLONG;
	memcpy(out, dir, len);
	out[len] = '\0';
	return vmio_instance_name_ok(out) ? 0 : -EINVAL;
}

/* One name for the one descriptor: a list ("a:b") is not ours. */
static int from_fdnames(const char *fdnames, char *out, size_t size)
{
	size_t len = strlen(fdnames);

	if (strchr(fdnames, ':') || !vmio_instance_name_ok(fdnames))
		return -EINVAL;
	if (len >= size)
		return -ENAMETOOLONG;
	memcpy(out, fdnames, len + 1);
	return 0;
}

int vmio_socket_instance(int fd, const char *fdnames, char *out, size_t size,
			 const char **why)
{
	struct sockaddr_un sa;
	socklen_t len = sizeof(sa);
	char path[sizeof(sa.sun_path) + 1];
	int rc;

	if (fdnames && fdnames[0] && strcmp(fdnames, VMIO_ACCEPTED_FD_NAME)) {
		rc = from_fdnames(fdnames, out, size);
		if (rc)
			*why = "LISTEN_FDNAMES is not one instance name";
		return rc;
	}
	memset(&sa, 0, sizeof(sa));
	if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0) {
		rc = -errno;
		*why = "getsockname failed";
		return rc;
	}
	/* An unnamed or abstract socket has no path to take a name from. */
	if (sa.sun_family != AF_UNIX || len <= offsetof(struct sockaddr_un,
							sun_path) ||
	    sa.sun_path[0] != '/') {
		*why = "the socket has no path (an AF_UNIX socket bound to a file "
		       "is expected)";
		return -EINVAL;
	}
	len -= (socklen_t)offsetof(struct sockaddr_un, sun_path);
	memcpy(path, sa.sun_path, len);
	path[len] = '\0';
	rc = vmio_instance_from_path(path, out, size);
	if (rc)
		*why = "the socket's directory is no instance name";
	return rc;
}
