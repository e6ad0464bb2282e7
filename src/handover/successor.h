/* The old side of a hand-over: start the successor, give it the state and
 * its fds, and learn, within a bound, whether it took over.
 *
 * The successor is the binary at the start path (start_path.h), run with
 * this process's arguments and environment, plus VMIO_HANDOVER_FD naming
 * its end of a seqpacket socketpair. Over it go the record and the fds
 * (fd_transfer.h); back comes one message, the answer: "taken over PID"
 * once it serves, or "refused: WHY". Everything is driven by the loop:
 * posix_spawn returns once the exec has happened or failed (a missing
 * binary is known at once), the transfer waits for the socket, the
 * answer for the socket, the child's end for its pidfd, and the bound
 * for a timer.
 *
 * Until the answer the old process serves as before: it decides, on the
 * outcome, what to stop. On any failure the child is killed, and the
 * outcome is told once it is reaped (from the loop, when its pidfd says
 * it is gone): a refused hand-over leaves no process behind. */
#ifndef VMIO_HANDOVER_SUCCESSOR_H
#define VMIO_HANDOVER_SUCCESSOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "event/loop.h"

#define VMIO_HANDOVER_ENV "VMIO_HANDOVER_FD"
/* The successor's answers, each one message. */
#define VMIO_HANDOVER_TAKEN "taken over "
#define VMIO_HANDOVER_REFUSED "refused: "
#define VMIO_HANDOVER_ANSWER_MAX 512u

struct vmio_successor;

/* Called once: why NULL if the successor (pid) has taken over, else the
 * reason it did not. The successor object is then done with: free it
 * (vmio_successor_free) from the callback or later. */
typedef void (*vmio_successor_done_fn)(void *opaque, pid_t pid,
				       const char *why);

struct vmio_successor_opts {
	const char *path;   /* the binary */
	char *const *argv;  /* NULL-terminated */
	const uint8_t *rec; /* the record, and its fds: the caller's, */
	size_t len;         /* alive until done is called */
	const int *fds;
	size_t nfds;
	unsigned timeout_ms; /* for the answer, from the spawn */
	vmio_successor_done_fn done;
	void *opaque;
};

/* Starts it. Returns the successor, or NULL with the reason in why
 * (the binary is missing, not executable, no memory...): nothing was
 * started then. */
struct vmio_successor *vmio_successor_start(struct vmio_loop *loop,
					    const struct vmio_successor_opts *o,
					    char *why, size_t why_size);

/* After done: closes this side (a successor that took over lives on;
 * one that failed was killed and reaped before done was called). Before
 * done: gives up, killing the child. NULL: no-op. */
void vmio_successor_free(struct vmio_successor *s);

#endif
