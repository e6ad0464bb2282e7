/* Which device a socket-activated connection is for.
 *
 * vmio-net-accept@NAME.socket (Accept=yes) starts one service per VMM
 * connection, named after the connection, not after NAME. systemd 257
 * and later pass NAME as the descriptor's name (FileDescriptorName=%i,
 * in LISTEN_FDNAMES); systemd before 257 ignores FileDescriptorName= for
 * Accept=yes and names every accepted descriptor "connection". The
 * accepted socket's own address is the listener's path, which the socket
 * unit makes /run/vmio/net/NAME/vhost.sock: NAME is the directory the
 * socket is in. */
#ifndef VMIO_CLI_SOCKET_INSTANCE_H
#define VMIO_CLI_SOCKET_INSTANCE_H

#include <stddef.h>

/* The name systemd before 257 gives every accepted descriptor. */
#define VMIO_ACCEPTED_FD_NAME "connection"

/* Whether name can be an instance: a file name of its own (a
 * configuration file is made of it), not empty, no '/', not starting
 * with '.'. */
int vmio_instance_name_ok(const char *name);

/* NAME from a socket path ".../NAME/SOCKET": the name of the directory
 * it is in. Returns 0, or -EINVAL (no such directory, or one that is no
 * instance name) / -ENAMETOOLONG (not room for it in out). */
int vmio_instance_from_path(const char *path, char *out, size_t size);

/* The instance of the socket fd that systemd passed with the descriptor
 * names fdnames (LISTEN_FDNAMES; NULL when unset): the name, unless it is
 * empty or "connection", else the directory of the socket's address
 * (getsockname). Returns 0, or -errno with *why saying what was wrong. */
int vmio_socket_instance(int fd, const char *fdnames, char *out, size_t size,
			 const char **why);

#endif
