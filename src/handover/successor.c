/* Starting a successor and waiting for its answer (successor.h). */
#include "handover/successor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handover/fd_transfer.h"
#include "util/fd.h"

extern char **environ;

/* How long a killed child may take to be reaped before the outcome is
 * told anyway. */
#define REAP_GRACE_MS 5000u

struct vmio_successor {
	struct vmio_loop *loop;
	pid_t pid;
	int sock, pidfd;
	struct vmio_fd_sender tx;
	bool sent, failed, reaped, reported;
	char why[VMIO_HANDOVER_ANSWER_MAX + 128];
	unsigned timeout_ms;
	struct vmio_timer bound, grace;
	vmio_successor_done_fn done;
	void *opaque;
};

static void report(struct vmio_successor *s)
{
	if (s->reported)
		return;
	s->reported = true;
	vmio_timer_cancel(&s->bound);
	vmio_timer_cancel(&s->grace);
	/* May free s. */
	s->done(s->opaque, s->pid, s->failed ? s->why : NULL);
}

static void stop_watching_sock(struct vmio_successor *s)
{
	if (s->sock >= 0)
		vmio_loop_remove(s->loop, s->sock);
	vmio_close_fd(&s->sock);
}

/* The hand-over failed: the child goes, and the outcome is told once it
 * is reaped. */
static void fail(struct vmio_successor *s, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void fail(struct vmio_successor *s, const char *fmt, ...)
{
	va_list ap;

	if (s->failed || s->reported)
		return;
	s->failed = true;
	va_start(ap, fmt);
	vsnprintf(s->why, sizeof(s->why), fmt, ap);
	va_end(ap);
	stop_watching_sock(s);
	if (s->reaped) {
		report(s);
		return;
	}
	kill(s->pid, SIGKILL);
	vmio_timer_arm_ms(&s->grace, REAP_GRACE_MS);
}

/* The answer is text from another process: kept printable for the log
 * and the reload's reply. */
static void printable(char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] > 0x7e)
			p[i] = '?';
	p[n] = '\0';
}

static void read_answer(struct vmio_successor *s)
{
	char a[VMIO_HANDOVER_ANSWER_MAX + 1];
	ssize_t n = recv(s->sock, a, sizeof(a) - 1, MSG_DONTWAIT);
	size_t tl = strlen(VMIO_HANDOVER_TAKEN),
	       rl = strlen(VMIO_HANDOVER_REFUSED);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* Gone, or going: its exit status says more than the
		 * socket, so wait for it (the bound still holds). */
		stop_watching_sock(s);
		return;
	}
	while (n && (a[n - 1] == '\n' || a[n - 1] == '\0'))
		n--;
	printable(a, (size_t)n);
	if ((size_t)n >= tl && !memcmp(a, VMIO_HANDOVER_TAKEN, tl)) {
		stop_watching_sock(s);
		report(s);
	} else if ((size_t)n >= rl && !memcmp(a, VMIO_HANDOVER_REFUSED, rl)) {
		fail(s, "the successor refused the state: %s", a + rl);
	} else {
		fail(s, "the successor answered neither taken over nor refused: '%.80s'",
		     a);
	}
}

static void on_sock(void *opaque, int fd, uint32_t events)
{
	struct vmio_successor *s = opaque;
	int rc;

	(void)fd;
	if (s->sent) {
		read_answer(s);
		return;
	}
	rc = vmio_fd_sender_step(&s->tx);
	if (rc == -EAGAIN)
		return;
	if (rc == -EPIPE || rc == -ECONNRESET) {
		stop_watching_sock(s);
		return;
	}
	if (rc) {
		fail(s, "cannot send the state to the successor: %s",
		     strerror(-rc));
		return;
	}
	s->sent = true;
	if (vmio_loop_modify(s->loop, s->sock, EPOLLIN))
		fail(s, "cannot watch the successor's answer");
}

static void on_child(void *opaque, int fd, uint32_t events)
{
	struct vmio_successor *s = opaque;
	bool was_failed = s->failed;
	int st;
	pid_t r = waitpid(s->pid, &st, WNOHANG);

	(void)fd;
	if (r == 0)
		return;
	s->reaped = true;
	vmio_loop_remove(s->loop, s->pidfd);
	vmio_close_fd(&s->pidfd);
	if (r < 0)
		fail(s, "the successor is gone (waitpid: %s)", strerror(errno));
	else if (WIFEXITED(st))
		fail(s, "the successor exited with status %d before taking over",
		     WEXITSTATUS(st));
	else
		fail(s, "the successor was killed by signal %d (%s) before taking over",
		     WTERMSIG(st), strsignal(WTERMSIG(st)));
	/* A first failure reported just now; an earlier one waited for
	 * this. */
	if (was_failed)
		report(s);
}

static void on_bound(void *opaque)
{
	struct vmio_successor *s = opaque;

	fail(s, "the successor did not take over within %u ms", s->timeout_ms);
}

static void on_grace(void *opaque)
{
	report(opaque);
}

/* This environment, with VMIO_HANDOVER_FD=fd instead of any it had. */
static char **child_env(int fd)
{
	size_t n = 0, k = 0, pl = strlen(VMIO_HANDOVER_ENV);
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 2, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], VMIO_HANDOVER_ENV, pl) ||
		    environ[i][pl] != '=')
			env[k++] = environ[i];
	if (asprintf(&env[k], "%s=%d", VMIO_HANDOVER_ENV, fd) < 0) {
		free(env);
		return NULL;
	}
	return env;
}

/* The child starts as a process of its own would: no signal blocked
 * (this one blocks those its signalfd reads), none ignored. Returns 0
 * or an errno. */
static int spawn(struct vmio_successor *s, const struct vmio_successor_opts *o,
		 int child_fd)
{
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	char **env = child_env(child_fd);
	int rc;

	if (!env)
		return ENOMEM;
	sigemptyset(&none);
	sigemptyset(&dfl);
	sigaddset(&dfl, SIGPIPE);
	sigaddset(&dfl, SIGHUP);
	sigaddset(&dfl, SIGTERM);
	sigaddset(&dfl, SIGINT);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &dfl);
	posix_spawnattr_setflags(&attr,
				 POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	/* glibc's posix_spawn returns the exec's error: a missing or
	 * unrunnable binary fails here, with nothing left running. */
	rc = posix_spawn(&s->pid, o->path, NULL, &attr, o->argv, env);
	posix_spawnattr_destroy(&attr);
	for (size_t i = 0; env[i]; i++)
		if (!strncmp(env[i], VMIO_HANDOVER_ENV "=",
			     strlen(VMIO_HANDOVER_ENV) + 1))
			free(env[i]);
	free(env);
	return rc;
}

static int setup(struct vmio_successor *s, const struct vmio_successor_opts *o,
		 char *why, size_t why_size)
{
	int sv[2], child_fd, rc;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		snprintf(why, why_size, "socketpair: %s", strerror(errno));
		return -1;
	}
	s->sock = sv[0];
	/* The child's end without close-on-exec, for the exec alone: a
	 * copy, closed as soon as the child has it. */
	child_fd = fcntl(sv[1], F_DUPFD, 3);
	close(sv[1]);
	if (child_fd < 0 || vmio_fd_set_nonblock(s->sock)) {
		snprintf(why, why_size, "cannot set up the hand-over socket: %s",
			 strerror(errno));
		if (child_fd >= 0)
			close(child_fd);
		return -1;
	}
	rc = spawn(s, o, child_fd);
	close(child_fd);
	if (rc) {
		snprintf(why, why_size, "cannot start %s: %s", o->path,
			 strerror(rc));
		return -1;
	}
	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	if (s->pidfd < 0) {
		snprintf(why, why_size, "pidfd_open: %s", strerror(errno));
		kill(s->pid, SIGKILL);
		/* Reaped at once: SIGKILL leaves nothing to wait for. */
		waitpid(s->pid, NULL, 0);
		return -1;
	}
	if (vmio_loop_add(s->loop, s->pidfd, EPOLLIN, on_child, s) ||
	    vmio_loop_add(s->loop, s->sock, EPOLLOUT, on_sock, s)) {
		snprintf(why, why_size, "cannot watch the successor");
		s->failed = true;
		return -1;
	}
	return 0;
}

struct vmio_successor *vmio_successor_start(struct vmio_loop *loop,
					    const struct vmio_successor_opts *o,
					    char *why, size_t why_size)
{
	struct vmio_successor *s = calloc(1, sizeof(*s));

	if (!s) {
		snprintf(why, why_size, "out of memory");
		return NULL;
	}
	*s = (struct vmio_successor){ .loop = loop, .sock = -1, .pidfd = -1,
				      .pid = -1, .timeout_ms = o->timeout_ms,
				      .done = o->done, .opaque = o->opaque };
	if (!o->path) {
		snprintf(why, why_size,
			 "the path this vmio was started from is unknown");
		free(s);
		return NULL;
	}
	vmio_fd_sender_init(&s->tx, -1, o->rec, o->len, o->fds, o->nfds);
	if (vmio_timer_init(&s->bound, loop, on_bound, s) ||
	    vmio_timer_init(&s->grace, loop, on_grace, s) ||
	    setup(s, o, why, why_size)) {
		s->reported = true; /* nothing to tell: the caller knows */
		vmio_successor_free(s);
		return NULL;
	}
	s->tx.sock = s->sock;
	vmio_timer_arm_ms(&s->bound, o->timeout_ms);
	return s;
}

void vmio_successor_free(struct vmio_successor *s)
{
	if (!s)
		return;
	vmio_timer_fini(&s->bound);
	vmio_timer_fini(&s->grace);
	stop_watching_sock(s);
	if (s->pidfd >= 0) {
		vmio_loop_remove(s->loop, s->pidfd);
		vmio_close_fd(&s->pidfd);
	}
	/* Given up before the outcome, or failed and not reaped in time. */
	if (s->pid > 0 && !s->reaped && (s->failed || !s->reported)) {
		kill(s->pid, SIGKILL);
		waitpid(s->pid, NULL, WNOHANG);
	}
	free(s);
}
