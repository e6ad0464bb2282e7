/* Listening on a unix socket path, as every vmio listener does (the
 * vhost-user socket, the hybrid vsock uds-path): a socket file left by a
 * process that died is replaced, one a live process accepts on is refused,
 * and anything that is not a socket is never touched. */
#ifndef VMIO_UTIL_UNIX_SOCKET_H
#define VMIO_UTIL_UNIX_SOCKET_H

#include <sys/stat.h>

/* Binds and listens on path (non-blocking, close-on-exec). who prefixes
 * the log line of a stale file replaced ("vhost-user", "vsock"). On
 * success returns the fd and fills *st with the socket file's identity,
 * so that the owner can later remove only the file it made. Returns
 * -errno on failure, leaving no file behind and logging nothing (the
 * caller says what the socket was for, once, with vmio_unix_strerror):
 * -EADDRINUSE if a live process listens on path, -EEXIST if path is not a
 * socket, -ENAMETOOLONG if it does not fit a sockaddr_un. */
int vmio_unix_listen(const char *path, int backlog, const char *who,
		     struct stat *st);

/* Why a listen above failed, for the caller's one line. */
const char *vmio_unix_strerror(int rc);

/* The same for a socket fd the caller made, of type SOCK_STREAM,
 * SOCK_SEQPACKET (both listening) or SOCK_DGRAM (bound only: it receives
 * at once), so that it can be set up before its address exists.
 * Returns 0 or -errno (not logged); fd stays the caller's either way. */
int vmio_unix_bind_socket(int fd, const char *path, int type, int backlog,
			  const char *who, struct stat *st);

/* Who may connect to the socket file: set between bind and listen, so
 * that no peer gets in before. */
struct vmio_unix_perms {
	int mode;  /* -1: the umask's */
	int uid;   /* -1: ours */
	int gid;   /* -1: ours */
};

/* vmio_unix_bind_socket, with the file's mode and owner set from perms
 * (NULL: left as bind made them). A mode is applied through the umask
 * while binding, so that the file never has a wider one: call it before
 * other threads run (the umask is the process's). */
int vmio_unix_bind_socket_perms(int fd, const char *path, int type,
				int backlog, const char *who,
				const struct vmio_unix_perms *perms,
				struct stat *st);

/* Unlinks path if it is still the file described by st (nobody replaced
 * it since we bound it). */
void vmio_unix_unlink_if_same(const char *path, const struct stat *st);

#endif
