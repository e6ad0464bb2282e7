/* The vhost-user backend core: one listening (or inherited) socket, one
 * front end at a time, the message handlers, the guest memory table and the
 * rings, driving a device through struct vmio_device_ops. */
#ifndef VMIO_VHOST_USER_BACKEND_H
#define VMIO_VHOST_USER_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "event/loop.h"
#include "vhost-user/protocol.h"
#include "vhost-user/device.h"

struct vmio_backend;

struct vmio_backend *vmio_backend_new(struct vmio_loop *loop,
				      const struct vmio_device_ops *ops,
				      void *dev);
/* Stops queues, drops memory, closes sockets; removes a socket file it
 * created. */
void vmio_backend_free(struct vmio_backend *be);

/* Listens on a unix socket at path. A stale socket file (nothing accepts on
 * it) is replaced; a path a live process listens on is refused with
 * -EADDRINUSE. One front end is served at a time; after it disconnects
 * the device is reset and the next connection is accepted. */
int vmio_backend_listen(struct vmio_backend *be, const char *path);

/* The least time between the starts of two sessions of one listening
 * backend: a VMM that reconnects in a loop waits in the backlog. */
#define VMIO_BACKEND_SESSION_GAP_NS (10 * 1000 * 1000ull)

/* Serves an already-connected socket (--fd). When that front end goes
 * away there is no one left to serve: on_gone is called. */
int vmio_backend_serve_fd(struct vmio_backend *be, int fd);
/* The same for a front end a predecessor served (session_state.h): its
 * session goes on, and the log says so. */
int vmio_backend_serve_taken_fd(struct vmio_backend *be, int fd);
/* Accepts front ends on fd, a listening unix stream socket the caller
 * was given (systemd socket activation), as vmio_backend_listen does on
 * its own; the socket file is not ours, so it is never removed. The
 * backend owns fd from now on. Returns 0 or -errno. */
int vmio_backend_listen_fd(struct vmio_backend *be, int fd);

/* ---- The listener at a hand-over (cli/vsock_handover.h) ---------------- */

/* Stops accepting new front ends, or starts again: while a hand-over is
 * under way a VMM that connects waits in the kernel's backlog for
 * whichever process serves next, instead of starting a session that the
 * successor's record does not have. */
void vmio_backend_hold_accept(struct vmio_backend *be, bool hold);

/* The listening socket (-1: none, a --fd connection), and whether its file
 * is this backend's (vmio_backend_listen bound it), for the record. */
int vmio_backend_listener(const struct vmio_backend *be);
bool vmio_backend_owns_socket_file(const struct vmio_backend *be);

/* The successor accepts on the listener now: forget it, closing this
 * process's copy and leaving the socket file where it is. */
void vmio_backend_give_up_listener(struct vmio_backend *be);

/* Accepts on fd, a listener a predecessor handed over, as
 * vmio_backend_listen_fd does; path (NULL: not ours) is the file it was
 * bound at, which this backend then removes at its end, as if it had
 * bound it. Owns fd from now on, whatever it returns. Returns 0 or
 * -errno. */
int vmio_backend_adopt_listener(struct vmio_backend *be, int fd,
				const char *path);

/* Called whenever a front end disconnects (after the device reset).
 * May be NULL. */
void vmio_backend_set_disconnect_cb(struct vmio_backend *be,
				    void (*cb)(void *opaque), void *opaque);

/* Calls cb(opaque, false) on the backend's loop after a message from the
 * front end has been handled and every queue it touched has settled:
 * the moment to take a snapshot of the session (session_state.h) that
 * will bring it back after a crash. Calls cb(opaque, true) when the
 * session ends (after the device reset). NULL: no more calls. Set while
 * a session runs, it is called once for that session as it stands. */
void vmio_backend_set_session_watch(struct vmio_backend *be,
				    void (*cb)(void *opaque, bool gone),
				    void *opaque);

/* How long a front end may take to finish a message it started, or to
 * take the replies waiting for it, before its connection is closed (ms;
 * 0: VHOST_USER_MSG_TIMEOUT_MS). Applies from the next connection. */
void vmio_backend_set_message_timeout(struct vmio_backend *be, unsigned ms);

struct vmio_kick_budget;
/* What kicks that bring no work may cost each queue (kick_guard.h;
 * default VMIO_KICK_IDLE_RATE:VMIO_KICK_IDLE_BURST). Before the first
 * session, or it applies from each queue's next start. */
void vmio_backend_set_kick_budget(struct vmio_backend *be,
				  const struct vmio_kick_budget *b);

/* Virtio features acked by the front end (0 before SET_FEATURES). */
uint64_t vmio_backend_acked_features(const struct vmio_backend *be);

/* Number of front ends served so far (for tests and statistics). */
unsigned vmio_backend_sessions(const struct vmio_backend *be);

/* Protocol errors of its front ends so far: messages refused, rings or
 * tables that did not fit, connections closed for a fault. */
uint64_t vmio_backend_errors(const struct vmio_backend *be);

/* The CPU time the VM cost vmio so far, in ns: the account current when
 * the backend was made (event/cpu_account.h), which the accounts a
 * device names for its queues are parts of. From any thread. */
uint64_t vmio_backend_cpu_ns(const struct vmio_backend *be);

/* Queue index's kicks served, and of them those that found no work
 * (0 beyond the last queue). From any thread. */
void vmio_backend_queue_kicks(const struct vmio_backend *be, unsigned index,
			      uint64_t *kicks, uint64_t *idle);

struct vmio_json;
/* Sessions and how they ended, errors, whether a front end is there, the
 * VM's CPU time, what holds it back, and each queue's kicks, as members
 * of the object being written. On the backend's loop. */
void vmio_backend_write_stats(const struct vmio_backend *be,
			      struct vmio_json *j);

#endif
