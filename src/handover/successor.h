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
 * Starting and sending are two steps so that a caller can start the
 * successor before it stops serving: the exec, the dynamic linking and
 * the successor's own set-up then run while the guests are still served,
 * and only the state's transfer falls in the pause the guests see.
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
/* Set, to the spawning process's pid, for a successor that is to say
 * "ready" first: one message, once it is set up and waits for the state.
 * A vmio before this variable says nothing, which the caller's own bound
 * covers; and it passes the variable on to its own successor, which the
 * pid tells apart (its parent is not the one that asked). */
#define VMIO_HANDOVER_READY_ENV "VMIO_HANDOVER_SAY_READY"
#define VMIO_HANDOVER_READY "ready"
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
	unsigned timeout_ms; /* for the answer, from the spawn */
	vmio_successor_done_fn done;
	/* The successor said "ready" (NULL: it is not asked to). Called at
	 * most once, before the state is sent, never after done. */
	void (*ready)(void *opaque);
	void *opaque;
};

/* Starts it; it waits for the state. Returns the successor, or NULL with
 * the reason in why (the binary is missing, not executable, no
 * memory...): nothing was started then. done may be called before the
 * state is sent (the successor died or the bound passed). */
struct vmio_successor *vmio_successor_start(struct vmio_loop *loop,
					    const struct vmio_successor_opts *o,
					    char *why, size_t why_size);

/* Gives it the record and its fds (the caller's, alive until done is
 * called), sent as the socket takes them. Once only; nothing if the
 * successor has failed already (done tells). */
void vmio_successor_send(struct vmio_successor *s, const uint8_t *rec,
			 size_t len, const int *fds, size_t nfds);

/* After done: closes this side (a successor that took over lives on;
 * one that failed was killed and reaped before done was called). Before
 * done: gives up, killing the child. NULL: no-op. */
void vmio_successor_free(struct vmio_successor *s);

#endif
