/* socat-style addresses for `vmio redirect`: "KEYWORD:params[,option...]".
 * Parsing only: nothing is resolved or opened here, so a command line that
 * cannot work is refused before any socket exists. */
#ifndef VMIO_REDIRECT_ADDRESS_H
#define VMIO_REDIRECT_ADDRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

enum redir_kind {
	REDIR_UNIX_LISTEN,
	REDIR_UNIX_CONNECT,
	REDIR_UNIX_CLIENT,
	REDIR_UNIX_RECV,
	REDIR_UNIX_SENDTO,
	REDIR_TCP_LISTEN,
	REDIR_TCP_CONNECT,
	REDIR_VSOCK_LISTEN,
	REDIR_VSOCK_CONNECT,
	REDIR_STDIO,           /* reads fd 0, writes fd 1 */
};

/* Longest host name or numeric address accepted (DNS's limit). */
#define REDIR_HOST_MAX 255

struct redir_addr {
	enum redir_kind kind;
	const char *keyword;   /* canonical spelling, for messages */
	int family;            /* AF_UNIX, AF_INET, AF_INET6, AF_UNSPEC, AF_VSOCK */
	int socktype;          /* SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET */
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* unix */
	char host[REDIR_HOST_MAX + 1]; /* TCP connect; empty otherwise */
	uint32_t port;         /* TCP (<= 65535) or vsock port */
	uint32_t cid;          /* VSOCK-CONNECT */

	/* Options. */
	bool fork;
	bool reuseaddr;
	bool unlink_early;
	bool has_bind;
	char bind[REDIR_HOST_MAX + 1]; /* unix path, or host[:port] for TCP */
	int backlog;           /* 0: the default */
	bool nodelay;          /* TCP_NODELAY on the connection */
	bool keepalive;        /* SO_KEEPALIVE on the connection */
	uint64_t connect_timeout_ns; /* 0: the kernel's */
	/* vsock-buffer=: SO_VM_SOCKETS_BUFFER_SIZE (and _MAX_SIZE) of each
	 * vsock connection, in bytes; 0: the kernel's (256 KiB);
	 * REDIR_VSOCK_BUFFER_UNSET: not given, the engine's default. Linux
	 * 6.12.69 and later keep a sender's bytes in flight within its own
	 * socket's buffer as well as within the peer's credit, so this
	 * bounds the rate towards the host as much as the host does. */
	uint32_t vsock_buffer;
	/* The socket file a unix listener makes: chmod'ed, chown'ed
	 * before it listens. */
	bool has_mode;
	unsigned mode;
	char user[64];         /* name or number; empty: not asked */
	char group[64];
};

/* True for the kinds that connect (connect-timeout applies). */
bool redir_addr_connects(const struct redir_addr *a);

/* True for the kinds that wait for a peer (the listeners and UNIX-RECV). */
bool redir_addr_is_passive(const struct redir_addr *a);

#define REDIR_VSOCK_BUFFER_UNSET UINT32_MAX
/* The largest vsock-buffer= taken: the kernel takes up to 4 GiB - 1,
 * but what the buffer holds is guest memory, per connection. */
#define REDIR_VSOCK_BUFFER_MAX (64u << 20)

/* Parses text into *a. Returns 0, or -1 with a message naming the
 * offending keyword, option or value in err. */
int redir_addr_parse(const char *text, struct redir_addr *a, char *err,
		     size_t err_size);

#endif
