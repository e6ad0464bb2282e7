/* Closing a descriptor a struct owns, so that a second close is harmless. */
#ifndef VMIO_UTIL_FD_H
#define VMIO_UTIL_FD_H

#include <unistd.h>

/* Closes *fd if it is open and marks it closed (-1). */
static inline void vmio_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

#endif
