/* A live vhost-user session as a record of bytes and an ordered list of
 * fds, so that another process (vmio's successor at a hand-over) can take
 * it over without the front end noticing: QEMU checks no peer
 * credentials, and KVM's ioeventfd and irqfd belong to the eventfds, so
 * if every fd goes across and the successor resumes exactly where this
 * process stopped, nothing changes for the guest.
 *
 * The steps, on the backend's loop:
 *   old:  vmio_session_hold    stop reading messages, stop every queue
 *                              for good (every popped chain finished)
 *         vmio_session_save    the record and copies of its fds
 *   new:  vmio_session_restore into a fresh backend of the same device:
 *                              every value checked as a message would be,
 *                              memory mapped again, rings set up; held
 *         vmio_session_resume  serve: every started ring once, every call
 *                              fd written once, messages read again
 *   old:  vmio_session_handed_over  (or vmio_session_resume, if the new
 *                              process refused or failed before resuming)
 * The record holds the vhost-user core's state only; a device's own state
 * (connections, counters) travels apart. See docs/architecture.md, "The
 * session record". */
#ifndef VMIO_VHOST_USER_SESSION_STATE_H
#define VMIO_VHOST_USER_SESSION_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct vmio_backend;

/* The record's formats: 1, and 2 for a channel with bytes in flight (a
 * message half read, replies not taken), written only then, so that a
 * reader of 1 alone takes every other record. A reader refuses any
 * other. */
#define VMIO_SESSION_STATE_VERSION 2
#define VMIO_SESSION_STATE_VERSION_MIN 1
/* The most fds one record names: the channel, the backend channel, a
 * table of regions, three per queue of the largest device, and those of
 * a message half read. */
#define VMIO_SESSION_MAX_FDS (2 + 64 + 3 * 256 + 8)

struct vmio_session_record {
	uint8_t *bytes; /* malloc'd */
	size_t len;
	int fds[VMIO_SESSION_MAX_FDS]; /* the record's fd indices name these */
	unsigned nfds;
};

/* Frees the bytes and closes every fd still in rec (-1 once taken). */
void vmio_session_record_free(struct vmio_session_record *rec);

/* Stops taking work: no further message is read or reply sent (the
 * channel is frozen, a message half read and replies not yet taken kept
 * for the record: a front end slow to finish either holds up no
 * hand-over) and every queue stops for good (VMIO_QUEUE_HOLD: the device
 * gives back every chain it holds, so the indices are exact, and keeps
 * what it set up for the queues outside the session). Returns
 *   0            held: vmio_session_save may run now;
 *   -EINPROGRESS queues stop on other threads: held(opaque) is called on
 *                the backend's loop once they have;
 *   -EAGAIN      a message waits for its queues to stop: try again on a
 *                later turn;
 *   -ENOTCONN    no front end; -EALREADY held already;
 *   -EOPNOTSUPP  a state no record carries (dirty logging on).
 * why says which. */
int vmio_session_hold(struct vmio_backend *be, void (*held)(void *opaque),
		      void *opaque, char *why, size_t why_len);

/* Writes the record of a held backend whose queues have stopped into
 * *rec, with copies of its fds (the caller's: sent, then closed by
 * vmio_session_record_free); the backend keeps its own, so it can still
 * resume. Returns 0, or -errno with why set: not held, a queue not yet
 * stopped or holding a chain, no front end, out of fds or memory. */
int vmio_session_save(const struct vmio_backend *be,
		      struct vmio_session_record *rec, char *why,
		      size_t why_len);

/* A snapshot of a session that serves on, for its restore after this
 * process dies (a crash: nothing was held, chains popped are lost): the
 * same record, with copies of its fds, but no queue's indices (a restore
 * serves each split ring again from its used index in guest memory, and
 * refuses a packed ring) and no bytes in flight on the channel. On the
 * backend's loop, between messages. Returns 0, or -errno with why set:
 * -ENOTCONN no front end, -EAGAIN a message under way or held,
 * -EOPNOTSUPP dirty logging on, or out of fds or memory. */
int vmio_session_snapshot(const struct vmio_backend *be,
			  struct vmio_session_record *rec, char *why,
			  size_t why_len);

/* Sets up a fresh backend (made with vmio_backend_new for the same
 * device, no front end yet) from a record, as hostile input: every
 * length, count, index and fd index is checked, and every value goes
 * through the checks the message that set it would (handlers.c). The
 * memory is mapped again from its fds at addresses of this process. fds
 * are always consumed: taken by the backend or closed, each exactly once.
 * On success the backend is held, serving nothing until
 * vmio_session_resume; on refusal (-errno, why set) it is as it was. */
int vmio_session_restore(struct vmio_backend *be, const void *bytes,
			 size_t len, int *fds, unsigned nfds, char *why,
			 size_t why_len);

/* Serves a held session: a fresh event index published on every started
 * ring (a guest that saw a stale one may never kick again), every ready
 * queue started through the normal path (the device looks at its ring at
 * once), every started queue's call fd written once (a spurious
 * interrupt is harmless, a missed one stalls the guest), and messages
 * read again. Returns 0, -EINVAL if not held, -ENOTCONN if the front end
 * is gone. */
int vmio_session_resume(struct vmio_backend *be);

/* The session went to a successor: this process's copies of its fds are
 * closed and its memory unmapped, without a word to the device or the
 * front end (vmio_session_drop). The backend can be freed. */
void vmio_session_handed_over(struct vmio_backend *be);

#endif
