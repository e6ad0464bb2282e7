#include "util/sd_notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/log.h"

/* The address $NOTIFY_SOCKET names into sa. Returns its length, 0 if
 * unset, or -errno. */
static int notify_address(struct sockaddr_un *sa)
{
	const char *name = getenv("NOTIFY_SOCKET");
	size_t len;

	if (!name || !name[0])
		return 0;
	len = strlen(name);
	/* A path, or '@' for the abstract namespace, whose address is the
	 * name's bytes after a NUL, exactly as long as the name. */
	if ((name[0] != '/' && name[0] != '@') || len < 2 ||
	    len > sizeof(sa->sun_path))
		return -EAFNOSUPPORT;
	if (name[0] == '/' && len == sizeof(sa->sun_path))
		return -ENAMETOOLONG; /* no room for the NUL */
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, name, len);
	if (name[0] == '@')
		sa->sun_path[0] = '\0';
	return (int)(offsetof(struct sockaddr_un, sun_path) + len +
		     (name[0] == '/'));
}

static int notify(const char *state, int fd, int flags)
{
	struct sockaddr_un sa;
	int salen = notify_address(&sa);
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { (void *)state, strlen(state) };
	struct msghdr mh = {
		.msg_name = &sa,
		.msg_iov = &iov,
		.msg_iovlen = 1,
	};
	ssize_t n;
	int sock, err;

	if (salen <= 0)
		return salen;
	mh.msg_namelen = (socklen_t)salen;
	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	n = sendmsg(sock, &mh, MSG_NOSIGNAL | flags);
	err = n < 0 ? -errno : 1;
	close(sock);
	return err;
}

int vmio_sd_notify(const char *state)
{
	return notify(state, -1, 0);
}

int vmio_sd_notify_fd(const char *state, int fd)
{
	return notify(state, fd, MSG_DONTWAIT);
}

void vmio_sd_notify_ready(void)
{
	int rc = vmio_sd_notify("READY=1");

	if (rc < 0)
		log_warn("cannot tell systemd the service is ready "
			 "(NOTIFY_SOCKET=%s): %s",
			 getenv("NOTIFY_SOCKET"), strerror(-rc));
}
