/* --control PATH: a unix stream socket that answers each connection with
 * one JSON document of live counters, then closes it.
 *
 * The counters belong to devices that live on worker threads, each on
 * one worker's loop, and are plain integers only that worker writes. So
 * the server, on worker 0's loop, never reads them itself: for each
 * connection it posts a snapshot request (vmio_defer_post) to every part
 * of the document, each part writes its own fragment on its own worker,
 * and the last to finish posts the assembly back to worker 0. Nothing on
 * a device's hot path pays for it.
 *
 * A client costs bounded memory and no waiting: the document is capped
 * (VMIO_CONTROL_DOC_MAX; a larger one says "truncated") and shared by
 * the clients it goes to, at most VMIO_CONTROL_MAX_CLIENTS are served at
 * once (others are closed at accept), each is written without blocking
 * as its socket drains, and one that has not taken its document within
 * VMIO_CONTROL_TIMEOUT_MS is closed. The cap holds some 25000 vsock
 * connections; memory grows with what is written, not with the cap.
 *
 * A client may also ask for a hand-over (a reload): one whose socket is
 * bound, before it connects, to an abstract name starting with
 * VMIO_CONTROL_RELOAD_NAME gets, instead of the document, one JSON line
 * once the hand-over has an outcome: {"reload":"ok","pid":N} or
 * {"reload":"failed","error":"..."}. The request is known at accept, so
 * no race with the document; a plain reader is unchanged. */
#ifndef VMIO_CLI_CONTROL_H
#define VMIO_CLI_CONTROL_H

#include <stddef.h>

#include "event/loop.h"

#define VMIO_CONTROL_DOC_MAX (8u << 20)
#define VMIO_CONTROL_MAX_CLIENTS 16u
#define VMIO_CONTROL_TIMEOUT_MS 2000u
/* How long a reload client is kept waiting for the outcome: longer than
 * any hand-over's own bound. */
#define VMIO_CONTROL_RELOAD_TIMEOUT_MS 120000u
/* "\0vmio-reload/PID": the client's own name, unique per process. */
#define VMIO_CONTROL_RELOAD_NAME "vmio-reload/"

struct vmio_json;
struct vmio_control;

/* Writes one fragment: a complete JSON value (an object, usually). Runs
 * on the part's loop; j is the part's own. */
typedef void (*vmio_control_write_fn)(void *opaque, struct vmio_json *j);

/* A server on loop (worker 0's) for device ("vsock"): the document is
 * {"device":..., "pid":..., SECTION: [fragment, ...], ...}. NULL on
 * allocation failure (logged). */
struct vmio_control *vmio_control_new(struct vmio_loop *loop,
				      const char *device);
/* Adds a part, to the array named section (sections appear in the order
 * first named). Before vmio_control_listen. Returns 0, or -1 (logged). */
int vmio_control_add(struct vmio_control *c, const char *section,
		     struct vmio_loop *loop, vmio_control_write_fn fn,
		     void *opaque);
/* Listens on path (a stale socket file is replaced, a live one refused).
 * Returns 0, or -errno (logged). */
int vmio_control_listen(struct vmio_control *c, const char *path);
/* The same on fd, a listener a predecessor handed over (owned from now
 * on; its file at path is this server's to remove). */
int vmio_control_listen_fd(struct vmio_control *c, const char *path, int fd);
/* The listening socket (-1: none), for a hand-over. */
int vmio_control_listener(const struct vmio_control *c);
/* Stops accepting and closes the listener, leaving its file: a successor
 * listens on the same socket now. The clients connected still get their
 * answers. */
void vmio_control_give_up_listener(struct vmio_control *c);

/* Starts a hand-over for a client's request: returns 0 if it started
 * (its outcome comes through vmio_control_reload_done, never from within
 * the call), or -1 with the reason in why (answered at once). */
typedef int (*vmio_control_reload_fn)(void *opaque, char *why,
				      size_t why_size);
/* Makes "reload\n" start fn; without one a reload is answered as
 * failed: this command cannot hand over. */
void vmio_control_set_reload(struct vmio_control *c, vmio_control_reload_fn fn,
			     void *opaque);
/* The outcome, for every client that asked: why NULL if the successor
 * pid took over. NULL c is a no-op. */
void vmio_control_reload_done(struct vmio_control *c, int pid,
			      const char *why);

/* After every loop of a part has stopped running (the workers joined):
 * closes the clients and the socket, removes its file. NULL is a
 * no-op. */
void vmio_control_free(struct vmio_control *c);

struct vmio_backend;
/* A part for one vhost-user backend: {"socket":..., "sessions":...,
 * "protocol_errors":..., "connected":...}; be lives as long as c. */
int vmio_control_add_backend(struct vmio_control *c, const char *section,
			     struct vmio_loop *loop, struct vmio_backend *be);

/* The --control of a subcommand: a server for device on loop if path is
 * not NULL, with add(opaque, c) adding its parts, listening. Returns 0
 * with *out NULL (no path) or the server, or -1 (logged). */
int vmio_control_open(struct vmio_loop *loop, const char *device,
		      const char *path,
		      int (*add)(void *opaque, struct vmio_control *c),
		      void *opaque, struct vmio_control **out);
/* The same on fd, a listener handed over (fd < 0: vmio_control_open). */
int vmio_control_open_fd(struct vmio_loop *loop, const char *device,
			 const char *path, int fd,
			 int (*add)(void *opaque, struct vmio_control *c),
			 void *opaque, struct vmio_control **out);

#endif
