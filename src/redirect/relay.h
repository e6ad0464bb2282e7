/* A bidirectional relay between two connected sockets on the event
 * loop. Each direction holds at most a bounded amount of data in flight,
 * so a slow reader on one side slows the writer on the other instead of
 * growing memory. EOF in one direction becomes shutdown(SHUT_WR) on the
 * other once everything read has been written (half-close); the relay is
 * done when both directions are, or at the first error. */
#ifndef VMIO_REDIRECT_RELAY_H
#define VMIO_REDIRECT_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include "event/loop.h"

enum redir_engine {
	REDIR_ENGINE_AUTO,
	REDIR_ENGINE_COPY,   /* read/write through a ring buffer */
	REDIR_ENGINE_SPLICE, /* socket -> pipe -> socket, no user copy */
	REDIR_ENGINE_SOCKMAP,
};

/* Largest amount in flight per direction by default (buffer 0): the
 * copy and message engines' ... */
#define REDIR_DEFAULT_BUFFER (256u * 1024)
/* ... and the splice engine's, whose pipe starts at the kernel's default
 * size and grows to this as data flows: an idle connection keeps a
 * small pipe (pipe pages are counted per user, fs.pipe-user-pages-soft),
 * a busy one takes fewer, larger splices (at 1 MiB, TCP into a unix
 * stream cost a third of the relay CPU per GiB it cost at 256 KiB). */
#define REDIR_SPLICE_DEFAULT_BUFFER (1024u * 1024)

/* Parses "auto", "copy", "splice" or "sockmap". Returns 0 or -1. */
int redir_engine_parse(const char *name, enum redir_engine *out);
const char *redir_engine_name(enum redir_engine e);

struct redir_relay_stats {
	uint64_t bytes_ab;    /* a -> b */
	uint64_t bytes_ba;    /* b -> a */
	uint64_t dropped;     /* messages dropped (too big), both ways */
	uint64_t start_ns;    /* CLOCK_MONOTONIC */
	uint64_t end_ns;
};

struct redir_relay;

/* Called once when the relay is done: error is 0 after a clean finish of
 * both directions, else a negative errno (already logged). The callee may
 * free the relay. */
typedef void (*redir_relay_done_fn)(void *opaque, struct redir_relay *r,
				    int error);

/* Starts relaying between the connected sockets a and b (made
 * non-blocking here), with engine COPY or SPLICE between streams and
 * buffer bytes per direction (0: the engine's default). A direction with a datagram or seqpacket
 * end uses the message engine instead, whatever engine says: it keeps
 * message boundaries, and buffer is then the largest message accepted
 * (16 of them held at most). A direction into a datagram socket with no
 * peer (UNIX-RECV) is not relayed; the direction out of a connected
 * datagram socket ends once the direction into it has passed EOF on, as
 * a datagram server sends no EOF of its own. The relay owns both fds from
 * now on, even on failure. name prefixes its log lines. Returns NULL (and
 * closes the fds) on failure. */
struct redir_relay *redir_relay_new(struct vmio_loop *loop, int a, int b,
				    enum redir_engine engine, size_t buffer,
				    const char *name, redir_relay_done_fn done,
				    void *opaque);

/* One end of a relay: the fd read and the fd written, the same socket
 * or two descriptors (STDIO: 0 and 1). An end that is no socket (a pipe,
 * a tty, a file) is relayed by the copy engine; its EOF is passed on by
 * closing its written fd, and its file flags are restored at the end. One
 * that epoll cannot watch (a regular file, /dev/null) is taken as always
 * ready, and served on each turn of the loop while there is work. */
struct redir_side {
	int in, out;
};

/* Which directions are relayed; one not relayed is never read. */
#define REDIR_A_TO_B 1u
#define REDIR_B_TO_A 2u
#define REDIR_BOTH (REDIR_A_TO_B | REDIR_B_TO_A)

/* redir_relay_new for two ends and the directions in dirs (socat's -u:
 * REDIR_A_TO_B, -U: REDIR_B_TO_A). */
struct redir_relay *redir_relay_new_sides(struct vmio_loop *loop,
					  struct redir_side a,
					  struct redir_side b,
					  enum redir_engine engine,
					  size_t buffer, unsigned dirs,
					  const char *name,
					  redir_relay_done_fn done,
					  void *opaque);

/* The same, from a to b only: b is never read, and its EOF goes nowhere. */
struct redir_relay *redir_relay_new_one_way(struct vmio_loop *loop, int a,
					    int b, enum redir_engine engine,
					    size_t buffer, const char *name,
					    redir_relay_done_fn done,
					    void *opaque);

void redir_relay_get_stats(const struct redir_relay *r,
			   struct redir_relay_stats *st);

/* The engine that moves r's bytes: "copy", "splice" or "message" (a
 * datagram or seqpacket end takes the message engine whatever was
 * asked), for --control and log lines. */
const char *redir_relay_engine(const struct redir_relay *r);

/* Stops watching and closes both sockets. */
void redir_relay_free(struct redir_relay *r);

#endif
