/* Starting a successor and waiting for its answer (successor.h). */
#include "handover/successor.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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

/* SIGKILL leaves nothing to wait for: reaped at once. */
static void kill_and_reap(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* posix_spawn runs on a thread of its own: glibc's vfork suspends the
 * calling thread until the exec is done, several milliseconds with a
 * large descriptor table, and the caller's thread serves guests. The
 * thread posts `spawned` when done, unless the successor was freed
 * before (abandoned): then it kills what it started and frees the job. */
struct spawn_job {
	pthread_t thread;
	pthread_mutex_t lock;
	bool finished, abandoned; /* under lock */
	struct vmio_defer *spawned;
	char *path; /* copies: an abandoned spawn outlives the caller's */
	char **argv;
	char **env;
	int child_fd;
	pid_t pid;
	int rc; /* 0 or an errno */
};

struct vmio_successor {
	struct vmio_loop *loop;
	pid_t pid; /* -1 until spawned */
	int sock, pidfd;
	struct spawn_job *job; /* until spawned */
	struct vmio_defer spawned;
	struct vmio_fd_sender tx;
	bool given, sent, failed, reaped, reported; /* given: the state */
	char why[VMIO_HANDOVER_ANSWER_MAX + 128];
	unsigned timeout_ms;
	struct vmio_timer bound, grace;
	vmio_successor_done_fn done;
	void (*ready)(void *opaque);
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

/* Failed, with a child: it goes, and its pidfd (or the grace) tells. */
static void kill_then_wait(struct vmio_successor *s)
{
	kill(s->pid, SIGKILL);
	vmio_timer_arm_ms(&s->grace, REAP_GRACE_MS);
}

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
	/* Not spawned yet: on_spawned kills it, or reports. */
	if (s->pid > 0)
		kill_then_wait(s);
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

/* Before the state: the one message a successor may send is "ready". */
static void read_ready(struct vmio_successor *s)
{
	char a[VMIO_HANDOVER_ANSWER_MAX + 1];
	ssize_t n = recv(s->sock, a, sizeof(a) - 1, MSG_DONTWAIT);
	void (*ready)(void *opaque) = s->ready;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		/* Gone: its pidfd says why. */
		stop_watching_sock(s);
		return;
	}
	if (!ready || (size_t)n != strlen(VMIO_HANDOVER_READY) ||
	    memcmp(a, VMIO_HANDOVER_READY, (size_t)n)) {
		printable(a, (size_t)n);
		fail(s, "the successor said '%.80s' before it had the state", a);
		return;
	}
	s->ready = NULL;
	if (vmio_loop_modify(s->loop, s->sock, 0)) {
		fail(s, "cannot watch the successor");
		return;
	}
	ready(s->opaque);
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
	if (!s->given) {
		read_ready(s);
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
	/* Its answer may wait on the socket, to be handled after this in
	 * the same turn: an end after an answer is no failure. Whatever the
	 * answer, reading it tells the outcome (which may free s). */
	if (!was_failed && !s->reported && s->sent && s->sock >= 0 &&
	    recv(s->sock, &(char){ 0 }, 1, MSG_PEEK | MSG_DONTWAIT) > 0) {
		read_answer(s);
		return;
	}
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

static bool is_var(const char *entry, const char *name)
{
	size_t l = strlen(name);

	return !strncmp(entry, name, l) && entry[l] == '=';
}

/* This environment, with VMIO_HANDOVER_FD=fd instead of any it had, and
 * VMIO_HANDOVER_SAY_READY=<this pid> if asked. */
static char **child_env(int fd, bool say_ready)
{
	size_t n = 0, k = 0;
	char **env;

	while (environ[n])
		n++;
	env = calloc(n + 3, sizeof(*env));
	if (!env)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (!is_var(environ[i], VMIO_HANDOVER_ENV) &&
		    !is_var(environ[i], VMIO_HANDOVER_READY_ENV))
			env[k++] = environ[i];
	if (asprintf(&env[k++], "%s=%d", VMIO_HANDOVER_ENV, fd) < 0) {
		free(env);
		return NULL;
	}
	if (say_ready && asprintf(&env[k], "%s=%d", VMIO_HANDOVER_READY_ENV,
				  (int)getpid()) < 0) {
		free(env[k - 1]);
		free(env);
		return NULL;
	}
	return env;
}

/* The child starts as a process of its own would: no signal blocked
 * (this one blocks those its signalfd reads), none ignored. Returns 0
 * or an errno. */
static int spawn(struct spawn_job *j)
{
	posix_spawnattr_t attr;
	sigset_t none, dfl;
	int rc;

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
	rc = posix_spawn(&j->pid, j->path, NULL, &attr, j->argv, j->env);
	posix_spawnattr_destroy(&attr);
	return rc;
}

/* The two entries child_env made are its own; the rest are environ's. */
static void free_env(char **env)
{
	for (size_t i = 0; env[i]; i++)
		if (is_var(env[i], VMIO_HANDOVER_ENV) ||
		    is_var(env[i], VMIO_HANDOVER_READY_ENV))
			free(env[i]);
	free(env);
}

static void job_free(struct spawn_job *j)
{
	pthread_mutex_destroy(&j->lock);
	for (size_t i = 0; j->argv && j->argv[i]; i++)
		free(j->argv[i]);
	free(j->argv);
	free(j->path);
	free(j);
}

/* path and argv copied into j. Returns 0, or -1 without memory. */
static int job_copy_args(struct spawn_job *j, const char *path,
			 char *const *argv)
{
	size_t n = 0;

	while (argv[n])
		n++;
	j->path = strdup(path);
	j->argv = calloc(n + 1, sizeof(*j->argv));
	if (!j->path || !j->argv)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (!(j->argv[i] = strdup(argv[i])))
			return -1;
	return 0;
}

static void *spawn_main(void *opaque)
{
	struct spawn_job *j = opaque;
	int rc = spawn(j);
	bool abandoned;

	close(j->child_fd);
	free_env(j->env);
	pthread_mutex_lock(&j->lock);
	j->rc = rc;
	j->finished = true;
	abandoned = j->abandoned;
	if (!abandoned)
		vmio_defer_post(j->spawned);
	pthread_mutex_unlock(&j->lock);
	if (abandoned) {
		if (!rc)
			kill_and_reap(j->pid);
		job_free(j);
	}
	return NULL;
}

/* No child runs (none started, or it was killed and reaped here): the
 * outcome is told now, with why unless a failure came first. */
static void no_child(struct vmio_successor *s, const char *why)
{
	s->reaped = true;
	if (s->failed)
		report(s);
	else
		fail(s, "%s", why);
}

static void kill_child(struct vmio_successor *s, const char *why)
{
	kill_and_reap(s->pid);
	no_child(s, why);
}

/* On the loop: the spawn is done. */
static void on_spawned(void *opaque)
{
	struct vmio_successor *s = opaque;
	struct spawn_job *j = s->job;
	char why[VMIO_HANDOVER_ANSWER_MAX];

	pthread_join(j->thread, NULL);
	s->job = NULL;
	s->pid = j->rc ? -1 : j->pid;
	snprintf(why, sizeof(why), "cannot start %s: %s", j->path,
		 strerror(j->rc));
	job_free(j);
	if (s->pid < 0) {
		no_child(s, why);
		return;
	}
	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	if (s->pidfd < 0) {
		snprintf(why, sizeof(why), "pidfd_open: %s", strerror(errno));
		kill_child(s, why);
		return;
	}
	if (vmio_loop_add(s->loop, s->pidfd, EPOLLIN, on_child, s)) {
		vmio_close_fd(&s->pidfd);
		kill_child(s, "cannot watch the successor");
		return;
	}
	if (s->failed) {
		/* Failed meanwhile (the bound, or given up): as fail would. */
		kill_then_wait(s);
		return;
	}
	if (vmio_loop_add(s->loop, s->sock,
			  s->given ? EPOLLOUT : s->ready ? EPOLLIN : 0, on_sock,
			  s))
		fail(s, "cannot watch the successor");
}

static int setup(struct vmio_successor *s, const struct vmio_successor_opts *o,
		 char *why, size_t why_size)
{
	struct spawn_job *j;
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
	j = calloc(1, sizeof(*j));
	if (j)
		pthread_mutex_init(&j->lock, NULL);
	if (!j || job_copy_args(j, o->path, o->argv) ||
	    !(j->env = child_env(child_fd, o->ready != NULL))) {
		snprintf(why, why_size, "out of memory");
		if (j)
			job_free(j);
		close(child_fd);
		return -1;
	}
	j->spawned = &s->spawned;
	j->child_fd = child_fd;
	rc = pthread_create(&j->thread, NULL, spawn_main, j);
	if (rc) {
		snprintf(why, why_size, "cannot start a thread to start %s: %s",
			 o->path, strerror(rc));
		free_env(j->env);
		close(child_fd);
		job_free(j);
		return -1;
	}
	s->job = j;
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
				      .done = o->done, .ready = o->ready,
				      .opaque = o->opaque };
	if (!o->path) {
		snprintf(why, why_size,
			 "the path this vmio was started from is unknown");
		free(s);
		return NULL;
	}
	vmio_defer_init(&s->spawned, loop, on_spawned, s);
	if (vmio_timer_init(&s->bound, loop, on_bound, s) ||
	    vmio_timer_init(&s->grace, loop, on_grace, s) ||
	    setup(s, o, why, why_size)) {
		s->reported = true; /* nothing to tell: the caller knows */
		vmio_successor_free(s);
		return NULL;
	}
	vmio_timer_arm_ms(&s->bound, o->timeout_ms);
	return s;
}

void vmio_successor_send(struct vmio_successor *s, const uint8_t *rec,
			 size_t len, const int *fds, size_t nfds)
{
	if (s->failed || s->reported)
		return;
	vmio_fd_sender_init(&s->tx, s->sock, rec, len, fds, nfds);
	s->given = true;
	s->ready = NULL;
	/* Not spawned yet: on_spawned watches for EPOLLOUT. A socket
	 * already closed (the successor went) is told by its pidfd. */
	if (s->job)
		return;
	if (s->sock >= 0 && vmio_loop_modify(s->loop, s->sock, EPOLLOUT))
		fail(s, "cannot watch the socket to the successor");
}

/* Freed while the spawn thread may still run: it is left to end on its
 * own (abandoned), or, done, joined (at once) and what it started
 * killed. */
static void drop_job(struct vmio_successor *s)
{
	struct spawn_job *j = s->job;
	pthread_t t;

	if (!j)
		return;
	s->job = NULL;
	t = j->thread;
	pthread_mutex_lock(&j->lock);
	if (!j->finished) {
		/* From here the thread owns j, and may free it at once. */
		j->abandoned = true;
		pthread_mutex_unlock(&j->lock);
		pthread_detach(t);
		return;
	}
	pthread_mutex_unlock(&j->lock);
	pthread_join(j->thread, NULL);
	vmio_defer_cancel(&s->spawned);
	if (!j->rc)
		kill_and_reap(j->pid);
	job_free(j);
}

void vmio_successor_free(struct vmio_successor *s)
{
	if (!s)
		return;
	drop_job(s);
	vmio_defer_cancel(&s->spawned);
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
