/* systemd's side of the fd store, for tests; see fake_fdstore.h. */
#include "fake_fdstore.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "harness_handover.h"

#define MAX_KEPT 4096
#define NAME_MAX_LEN 256

struct kept_fd {
	int fd;
	char name[NAME_MAX_LEN];
};

struct fake_fdstore {
	int sock;
	char path[108];
	struct kept_fd kept[MAX_KEPT];
	unsigned n;
	bool ready;
	/* systemd reads its notify socket as messages come: a thread here,
	 * so that a sender never finds it full while the test waits on
	 * something else (this host's kernel queues 10 datagrams). */
	pthread_t reader;
	pthread_mutex_t lock;
	int stop[2];
};

static unsigned drain_locked(struct fake_fdstore *s);

static void *reader_main(void *opaque)
{
	struct fake_fdstore *s = opaque;

	for (;;) {
		struct pollfd p[2] = { { .fd = s->sock, .events = POLLIN },
				       { .fd = s->stop[0], .events = POLLIN } };

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			return NULL;
		if (p[1].revents)
			return NULL;
		pthread_mutex_lock(&s->lock);
		drain_locked(s);
		pthread_mutex_unlock(&s->lock);
	}
}

struct fake_fdstore *fake_fdstore_new(const char *path)
{
	struct fake_fdstore *s = calloc(1, sizeof(*s));
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int big = 4 << 20;

	assert_non_null(s);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	strcpy(s->path, path);
	unlink(path);
	s->sock = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	assert_true(s->sock >= 0);
	setsockopt(s->sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (bind(s->sock, (struct sockaddr *)&sa, sizeof(sa)))
		fail_msg("bind %s: %s", path, strerror(errno));
	pthread_mutex_init(&s->lock, NULL);
	assert_int_equal(pipe2(s->stop, O_CLOEXEC), 0);
	assert_int_equal(pthread_create(&s->reader, NULL, reader_main, s), 0);
	return s;
}

void fake_fdstore_free(struct fake_fdstore *s)
{
	if (!s)
		return;
	assert_int_equal(write(s->stop[1], "x", 1), 1);
	pthread_join(s->reader, NULL);
	close(s->stop[0]);
	close(s->stop[1]);
	pthread_mutex_destroy(&s->lock);
	for (unsigned i = 0; i < s->n; i++)
		close(s->kept[i].fd);
	close(s->sock);
	unlink(s->path);
	free(s);
}

static bool same_file(int a, int b)
{
	pid_t pid = getpid();

	return syscall(SYS_kcmp, pid, pid, KCMP_FILE, a, b) == 0;
}

static void keep(struct fake_fdstore *s, int fd, const char *name)
{
	for (unsigned i = 0; i < s->n; i++)
		if (same_file(s->kept[i].fd, fd)) {
			close(fd); /* "Suppressing duplicate fd" */
			return;
		}
	if (s->n == MAX_KEPT) {
		close(fd);
		return;
	}
	s->kept[s->n].fd = fd;
	snprintf(s->kept[s->n].name, NAME_MAX_LEN, "%s", name);
	s->n++;
}

static void remove_named(struct fake_fdstore *s, const char *name)
{
	for (unsigned i = 0; i < s->n;) {
		if (!strcmp(s->kept[i].name, name)) {
			close(s->kept[i].fd);
			s->kept[i] = s->kept[--s->n];
		} else {
			i++;
		}
	}
}

/* One datagram's lines, and the fds it carried. */
static void take(struct fake_fdstore *s, char *text, int *fds, unsigned nfds)
{
	bool store = false, remove = false;
	char name[NAME_MAX_LEN] = "stored";
	char *save = NULL;

	for (char *l = strtok_r(text, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		if (!strcmp(l, "FDSTORE=1"))
			store = true;
		else if (!strcmp(l, "FDSTOREREMOVE=1"))
			remove = true;
		else if (!strcmp(l, "READY=1"))
			s->ready = true;
		else if (!strncmp(l, "FDNAME=", 7))
			snprintf(name, sizeof(name), "%s", l + 7);
	}
	if (getenv("FAKE_FDSTORE_TRACE"))
		fprintf(stderr, "# store: %s%s%s %s (%u fds)\n",
			store ? "put" : "", remove ? "remove" : "",
			s->ready ? "" : "", name, nfds);
	if (remove)
		remove_named(s, name);
	for (unsigned i = 0; i < nfds; i++) {
		if (store)
			keep(s, fds[i], name);
		else
			close(fds[i]);
	}
}

unsigned fake_fdstore_drain(struct fake_fdstore *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	n = drain_locked(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

static unsigned drain_locked(struct fake_fdstore *s)
{
	unsigned count = 0;

	for (;;) {
		char text[4096];
		union {
			char buf[CMSG_SPACE(253 * sizeof(int))];
			struct cmsghdr align;
		} c;
		struct iovec iov = { text, sizeof(text) - 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
				     .msg_control = c.buf,
				     .msg_controllen = sizeof(c.buf) };
		int fds[253];
		unsigned nfds = 0;
		ssize_t n = recvmsg(s->sock, &mh, MSG_CMSG_CLOEXEC);

		if (n < 0)
			return count;
		text[n] = '\0';
		for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm;
		     cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level != SOL_SOCKET ||
			    cm->cmsg_type != SCM_RIGHTS)
				continue;
			unsigned k = (unsigned)((cm->cmsg_len - CMSG_LEN(0)) /
						sizeof(int));
			memcpy(fds + nfds, CMSG_DATA(cm), k * sizeof(int));
			nfds += k;
		}
		take(s, text, fds, nfds);
		count++;
	}
}

bool fake_fdstore_wait_ready(struct fake_fdstore *s, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 10) {
		bool ready;

		pthread_mutex_lock(&s->lock);
		drain_locked(s);
		ready = s->ready;
		pthread_mutex_unlock(&s->lock);
		if (ready)
			return true;
		usleep(10000);
	}
	return false;
}

unsigned fake_fdstore_count(struct fake_fdstore *s)
{
	unsigned n;

	pthread_mutex_lock(&s->lock);
	drain_locked(s);
	n = s->n;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int fake_fdstore_find(struct fake_fdstore *s, const char *name)
{
	int fd = -1;

	pthread_mutex_lock(&s->lock);
	drain_locked(s);
	for (unsigned i = 0; i < s->n && fd < 0; i++)
		if (!strcmp(s->kept[i].name, name))
			fd = s->kept[i].fd;
	pthread_mutex_unlock(&s->lock);
	return fd;
}

/* In the child: the kept fds at 3.., then the variables naming them. */
static void pass_fds(struct fake_fdstore *s)
{
	static char names[MAX_KEPT * 8];
	int high[MAX_KEPT];
	char num[32];
	size_t at = 0;

	for (unsigned i = 0; i < s->n; i++) {
		high[i] = fcntl(s->kept[i].fd, F_DUPFD, 3 + (int)s->n + 64);
		if (high[i] < 0)
			_exit(126);
	}
	for (unsigned i = 0; i < s->n; i++) {
		if (dup2(high[i], 3 + (int)i) < 0)
			_exit(126);
		close(high[i]);
		at += (size_t)snprintf(names + at, sizeof(names) - at, "%s%s",
				       i ? ":" : "", s->kept[i].name);
	}
	if (!s->n)
		return;
	snprintf(num, sizeof(num), "%d", (int)getpid());
	setenv("LISTEN_PID", num, 1);
	snprintf(num, sizeof(num), "%u", s->n);
	setenv("LISTEN_FDS", num, 1);
	setenv("LISTEN_FDNAMES", names, 1);
}

pid_t fake_fdstore_spawn(struct fake_fdstore *s, const char *const args[])
{
	const char *bin = getenv("VMIO_BIN");
	const char *argv[64] = { bin };
	unsigned n = 1;
	int log_fd = open(harness_path("vmio.log"),
			  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	pid_t pid;

	assert_non_null(bin);
	assert_true(log_fd >= 0);
	while (args[n - 1] && n < 63) {
		argv[n] = args[n - 1];
		n++;
	}
	argv[n] = NULL;
	/* Held across the fork: the child copies a whole table. */
	pthread_mutex_lock(&s->lock);
	s->ready = false;
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (dup2(log_fd, STDERR_FILENO) < 0 ||
		    dup2(log_fd, STDOUT_FILENO) < 0)
			_exit(127);
		pass_fds(s);
		setenv("NOTIFY_SOCKET", s->path, 1);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	pthread_mutex_unlock(&s->lock);
	close(log_fd);
	assert_true(pid > 0);
	return pid;
}


pid_t fake_fdstore_start(struct fake_fdstore *s, const char *const args[],
			 const char *control)
{
	pid_t pid = fake_fdstore_spawn(s, args);

	if (!fake_fdstore_wait_ready(s, HARNESS_WAIT_MS))
		fail_msg("vmio did not say READY=1");
	assert_true(harness_wait_socket(control, HARNESS_WAIT_MS));
	return pid;
}

void fake_fdstore_kill(struct fake_fdstore *s, pid_t pid)
{
	int st;

	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFSIGNALED(st));
	fake_fdstore_drain(s);
}

void fake_fdstore_stop(struct fake_fdstore *s, pid_t pid)
{
	int st;

	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	fake_fdstore_drain(s);
}

struct fake_fdstore *fake_fdstore_case_begin(void)
{
	harness_log_clear();
	return fake_fdstore_new(harness_path("notify"));
}

void fake_fdstore_case_end(struct fake_fdstore **s, pid_t *serving)
{
	harness_handover_end(serving);
	fake_fdstore_free(*s);
	*s = NULL;
}
