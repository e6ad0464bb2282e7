/* What the subcommands share to run: verbosity, usage errors, signals,
 * and serving a vhost-user backend. */
#ifndef VMIO_CLI_SERVE_H
#define VMIO_CLI_SERVE_H

#include "cli/options.h"
#include "event/loop.h"
#include "event/workers.h"
#include "vhost-user/backend.h"

/* Applies -v/-q to the log level. */
void vmio_cli_set_verbosity(int verbosity);

/* Stops loop on SIGTERM or SIGINT, logging which, after calling on_stop
 * (may be NULL); ignores SIGPIPE. One watcher per process. Returns 0, or
 * -1 (logged). */
int vmio_cli_watch_signals(struct vmio_loop *loop, void (*on_stop)(void *),
			   void *opaque);
void vmio_cli_unwatch_signals(void);

/* SIGHUP calls on_reload (a hand-over) instead of ending the process,
 * for a command that can hand over. After vmio_cli_watch_signals and
 * before any worker thread starts (they inherit the blocked signals).
 * Returns 0, or -1 (logged). */
int vmio_cli_watch_reload(void (*on_reload)(void *), void *opaque);

/* What serves: one loop, or a pool of workers whose loop 0 is the
 * backend's (pool NULL: the loop alone). */
struct vmio_cli_run {
	struct vmio_loop *loop;
	struct vmio_workers *pool;
};

/* Puts be on socket_path, or else on fd: a listener the service manager
 * made, or one front end's connection, whose end stops r (there is no
 * socket to accept another on). who starts every message ("", "VM 2: ").
 * r must outlive the backend. Returns 0 or -errno (logged). */
int vmio_cli_attach(struct vmio_backend *be, const char *socket_path, int fd,
		    const char *who, struct vmio_cli_run *r);

/* A successor's vmio_cli_attach: be accepts on listen_fd, the listener
 * a predecessor handed over, whose file at socket_path (NULL: an
 * inherited listener, not ours) this process removes at its end; or,
 * with none (-1), be serves the one front end its session carries, and
 * that front end's end stops r. Returns 0 or -errno (logged). */
int vmio_cli_attach_handed_over(struct vmio_backend *be,
				const char *socket_path, int listen_fd,
				const char *who, struct vmio_cli_run *r);

/* Serves the backend as the options say (listen on --socket-path or adopt
 * --fd) until SIGTERM or SIGINT, or, with --fd, until that front end goes
 * away. Returns the exit status. */
int vmio_cli_serve(struct vmio_loop *loop, struct vmio_backend *be,
		   const struct vmio_backend_opts *o);

/* The same with a pool of workers (not started yet): the backend lives on
 * loop 0, the workers start once signals are watched, and a stop stops
 * them all. */
int vmio_cli_serve_workers(struct vmio_workers *pool, struct vmio_backend *be,
			   const struct vmio_backend_opts *o);

/* Reports a usage error: "vmio SUB: MESSAGE" and a hint to --help.
 * Returns VMIO_EXIT_USAGE. */
int vmio_cli_usage_error(const char *sub, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
