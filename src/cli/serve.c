#include "cli/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/log.h"
#include "util/sd_notify.h"
#include "util/unix_socket.h"

void vmio_cli_set_verbosity(int verbosity)
{
	if (verbosity < 0)
		vmio_log_set_level(VMIO_LOG_ERR);
	else if (verbosity == 0)
		vmio_log_set_level(VMIO_LOG_INFO);
	else
		vmio_log_set_level(VMIO_LOG_DEBUG);
}

int vmio_cli_usage_error(const char *sub, const char *fmt, ...)
{
	const char *sp = sub ? " " : "", *name = sub ? sub : "";
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* In the journal, one entry at error priority for one mistake. */
	if (vmio_log_to_journal())
		vmio_log_raw(VMIO_LOG_ERR, "vmio%s%s: %s (see 'vmio%s%s --help')",
			     sp, name, msg, sp, name);
	else
		fprintf(stderr, "vmio%s%s: %s\nTry 'vmio%s%s --help'.\n", sp,
			name, msg, sp, name);
	return VMIO_EXIT_USAGE;
}

/* One watcher per process: signals are process-wide. */
static struct {
	struct vmio_loop *loop;
	void (*on_stop)(void *opaque);
	void *opaque;
	void (*on_reload)(void *opaque);
	void *reload_opaque;
	sigset_t mask;
	int fd;
} sigwatch = { .fd = -1 };

static void on_signal(void *opaque, int fd, uint32_t events)
{
	struct signalfd_siginfo si;

	if (read(fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
		return;
	if (si.ssi_signo == SIGHUP && sigwatch.on_reload) {
		log_info("SIGHUP received: handing over to a new vmio");
		sigwatch.on_reload(sigwatch.reload_opaque);
		return;
	}
	log_info("%s received, exiting", strsignal((int)si.ssi_signo));
	if (sigwatch.on_stop)
		sigwatch.on_stop(sigwatch.opaque);
	vmio_loop_stop(sigwatch.loop);
}

int vmio_cli_watch_signals(struct vmio_loop *loop, void (*on_stop)(void *),
			   void *opaque)
{
	sigset_t *mask = &sigwatch.mask;

	sigemptyset(mask);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGINT);
	/* A peer that dies mid-write must cost one connection, not the
	 * process. */
	signal(SIGPIPE, SIG_IGN);
	sigprocmask(SIG_BLOCK, mask, NULL);
	sigwatch.loop = loop;
	sigwatch.on_stop = on_stop;
	sigwatch.opaque = opaque;
	sigwatch.fd = signalfd(-1, mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigwatch.fd < 0 ||
	    vmio_loop_add(loop, sigwatch.fd, EPOLLIN, on_signal, NULL)) {
		log_err("cannot watch signals: %s", strerror(errno));
		vmio_cli_unwatch_signals();
		return -1;
	}
	return 0;
}

int vmio_cli_watch_reload(void (*on_reload)(void *), void *opaque)
{
	sigaddset(&sigwatch.mask, SIGHUP);
	if (sigwatch.fd < 0 ||
	    signalfd(sigwatch.fd, &sigwatch.mask, SFD_CLOEXEC | SFD_NONBLOCK) < 0) {
		log_err("cannot watch SIGHUP: %s", strerror(errno));
		return -1;
	}
	sigprocmask(SIG_BLOCK, &sigwatch.mask, NULL);
	sigwatch.on_reload = on_reload;
	sigwatch.reload_opaque = opaque;
	return 0;
}

void vmio_cli_unwatch_signals(void)
{
	sigwatch.on_reload = NULL;
	if (sigwatch.fd < 0)
		return;
	vmio_loop_remove(sigwatch.loop, sigwatch.fd);
	close(sigwatch.fd);
	sigwatch.fd = -1;
}

static bool is_listening(int fd)
{
	int on = 0;
	socklen_t len = sizeof(on);

	return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) == 0 &&
	       on;
}

static void stop_workers(void *opaque)
{
	struct vmio_cli_run *r = opaque;

	if (r->pool)
		vmio_workers_stop(r->pool);
}

static void on_frontend_gone(void *opaque)
{
	struct vmio_cli_run *r = opaque;

	/* With --fd there is no socket to accept a new front end on. */
	log_info("front end closed the inherited socket, exiting");
	stop_workers(r);
	vmio_loop_stop(r->loop);
}

static int run_until_stopped(struct vmio_cli_run *r)
{
	int rc;

	if (!r->pool)
		return vmio_loop_run(r->loop);
	rc = vmio_workers_start(r->pool);
	if (rc) {
		log_err("cannot start the worker threads: %s", strerror(-rc));
		return rc;
	}
	return vmio_workers_run(r->pool);
}

int vmio_cli_attach(struct vmio_backend *be, const char *socket_path, int fd,
		    const char *who, struct vmio_cli_run *r)
{
	int rc;

	if (socket_path) {
		rc = vmio_backend_listen(be, socket_path);
		/* Success is the backend's to say, once. */
		if (rc)
			log_err("%scannot listen on %s: %s", who, socket_path,
				vmio_unix_strerror(rc));
	} else if (is_listening(fd)) {
		/* Socket activation: a listener the service manager made,
		 * served as --socket-path serves its own. */
		rc = vmio_backend_listen_fd(be, fd);
		if (rc)
			log_err("%scannot accept on --fd %d: %s", who, fd,
				strerror(-rc));
	} else {
		vmio_backend_set_disconnect_cb(be, on_frontend_gone, r);
		rc = vmio_backend_serve_fd(be, fd);
		if (rc)
			log_err("%scannot serve --fd %d: %s", who, fd,
				strerror(-rc));
	}
	return rc;
}

int vmio_cli_attach_handed_over(struct vmio_backend *be,
				const char *socket_path, int listen_fd,
				const char *who, struct vmio_cli_run *r)
{
	int rc;

	if (listen_fd < 0) {
		vmio_backend_set_disconnect_cb(be, on_frontend_gone, r);
		return 0;
	}
	rc = vmio_backend_adopt_listener(be, listen_fd, socket_path);
	if (rc)
		log_err("%scannot accept on the listener handed over: %s", who,
			strerror(-rc));
	return rc;
}

static int serve(struct vmio_cli_run *r, struct vmio_backend *be,
		 const struct vmio_backend_opts *o)
{
	/* Before any worker thread starts: they inherit the blocked
	 * signals, so that only the signalfd sees them. */
	if (vmio_cli_watch_signals(r->loop, stop_workers, r))
		return 1;

	int rc;
	vmio_backend_set_message_timeout(be, o->message_timeout_ms);
	vmio_backend_set_kick_budget(be, &o->idle_kicks);
	rc = vmio_cli_attach(be, o->socket_path, o->fd, "", r);
	if (!rc) {
		/* Everything a VMM needs is there: systemd may start it. */
		vmio_sd_notify_ready();
		rc = run_until_stopped(r);
		if (rc)
			log_err("event loop failed: %s", strerror(-rc));
	}

	vmio_cli_unwatch_signals();
	return rc ? 1 : 0;
}

int vmio_cli_serve(struct vmio_loop *loop, struct vmio_backend *be,
		   const struct vmio_backend_opts *o)
{
	struct vmio_cli_run r = { .loop = loop };

	return serve(&r, be, o);
}

int vmio_cli_serve_workers(struct vmio_workers *pool, struct vmio_backend *be,
			   const struct vmio_backend_opts *o)
{
	struct vmio_cli_run r = { .loop = vmio_workers_loop(pool, 0),
			       .pool = pool };

	return serve(&r, be, o);
}
