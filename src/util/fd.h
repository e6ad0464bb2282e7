/* Closing a descriptor a struct owns, so that a second close is harmless. */
#ifndef VMIO_UTIL_FD_H
#define VMIO_UTIL_FD_H

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* Closes *fd if it is open and marks it closed (-1). */
static inline void vmio_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Makes fd non-blocking. Returns 0 or -errno. An fd a peer passed us
 * shares its file status with the peer's copy; a peer that wanted it
 * blocking cannot make us wait in write() or read() on it either way. */
static inline int vmio_fd_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0)
		return -errno;
	if (!(fl & O_NONBLOCK) && fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

#endif
