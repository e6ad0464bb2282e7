#include "util/sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/log.h"

int vmio_sd_notify(const char *state)
{
	const char *name = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len;
	socklen_t salen;
	ssize_t n;
	int fd, err;

	if (!name || !name[0])
		return 0;
	len = strlen(name);
	/* A path, or '@' for the abstract namespace, whose address is the
	 * name's bytes after a NUL, exactly as long as the name. */
	if ((name[0] != '/' && name[0] != '@') || len < 2 ||
	    len > sizeof(sa.sun_path))
		return -EAFNOSUPPORT;
	if (name[0] == '/' && len == sizeof(sa.sun_path))
		return -ENAMETOOLONG; /* no room for the NUL */
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
			    (name[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL,
		   (const struct sockaddr *)&sa, salen);
	err = n < 0 ? -errno : 1;
	close(fd);
	return err;
}

void vmio_sd_notify_ready(void)
{
	int rc = vmio_sd_notify("READY=1");

	if (rc < 0)
		log_warn("cannot tell systemd the service is ready "
			 "(NOTIFY_SOCKET=%s): %s",
			 getenv("NOTIFY_SOCKET"), strerror(-rc));
}
