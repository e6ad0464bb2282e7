/* `vmio redirect` handed over to a successor (issue 36): reloaded again
 * and again while clients connect and stream, every byte checked, no
 * connect refused, the relays open across a reload finished by the old
 * process; and the hand-overs that must fail, leaving the old process
 * serving, saying why, with no fd more than before.
 *
 * vmio runs from a copy in the test's directory, so that a case can take
 * the binary away from the path it was started from, or put another
 * program there. The test is the subreaper of what it starts: every
 * successor, whose parent exits, becomes its child, so each process's
 * end is waited for and its exit status checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include "handover/envelope.h"
#include "handover/fd_transfer.h"
#include "handover/successor.h"
#include "harness.h"
#include "harness_handover.h"


/* ---- An echo server on ADDRESS2 ----------------------------------------- */

static int echo_listen_fd = -1;
static atomic_uint echo_open;

static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[16384];
	ssize_t n;

	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t off = 0; off < n;) {
			ssize_t w = write(fd, buf + off, (size_t)(n - off));

			if (w <= 0)
				goto out;
			off += w;
		}
out:
	close(fd);
	atomic_fetch_sub(&echo_open, 1);
	return NULL;
}

static void *echo_accept(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept4(echo_listen_fd, NULL, NULL, SOCK_CLOEXEC);
		pthread_t t;

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			return NULL; /* the listener was shut down */
		}
		atomic_fetch_add(&echo_open, 1);
		if (pthread_create(&t, NULL, echo_conn, (void *)(intptr_t)fd)) {
			close(fd);
			atomic_fetch_sub(&echo_open, 1);
			continue;
		}
		pthread_detach(t);
	}
}

static pthread_t echo_thread;

static void echo_start(void)
{
	echo_listen_fd = harness_unix_listen(harness_path("back.sock"));
	assert_int_equal(pthread_create(&echo_thread, NULL, echo_accept, NULL),
			 0);
}

static void echo_stop(void)
{
	shutdown(echo_listen_fd, SHUT_RDWR);
	pthread_join(echo_thread, NULL);
	close(echo_listen_fd);
	echo_listen_fd = -1;
}

/* ---- Clients ------------------------------------------------------------ */

static uint8_t byte_at(uint64_t off, unsigned seed)
{
	uint64_t x = off * 2654435761u + seed * 40503u;

	return (uint8_t)(x ^ (x >> 13) ^ (x >> 21));
}

/* total bytes out through vmio, each checked as it comes back, piece
 * bytes at a time; the connection stays open. Returns 0, or an errno
 * (EBADMSG: a byte differed). */
static int stream_part(int fd, uint64_t total, unsigned seed, size_t piece)
{
	uint8_t out[16384], in[16384];
	uint64_t sent = 0, got = 0;

	if (piece > sizeof(out))
		piece = sizeof(out);
	while (got < total) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		size_t n = 0;

		if (sent == got && sent < total) {
			n = total - sent < piece ? (size_t)(total - sent) : piece;
			for (size_t i = 0; i < n; i++)
				out[i] = byte_at(sent + i, seed);
			if (write(fd, out, n) != (ssize_t)n)
				return errno ? errno : EIO;
			sent += n;
		}
		if (poll(&p, 1, HARNESS_WAIT_MS) != 1)
			return ETIMEDOUT;
		ssize_t r = read(fd, in, sizeof(in));

		if (r <= 0)
			return r ? errno : ECONNRESET;
		for (ssize_t i = 0; i < r; i++)
			if (in[i] != byte_at(got + (uint64_t)i, seed))
				return EBADMSG;
		got += (uint64_t)r;
	}
	return 0;
}

/* The same, then the end both ways: EOF sent, EOF back. */
static int stream(int fd, uint64_t total, unsigned seed, size_t piece)
{
	uint8_t in[1];
	int rc = stream_part(fd, total, seed, piece);

	if (rc)
		return rc;
	shutdown(fd, SHUT_WR);
	/* The relay ends both ways: EOF comes back. */
	struct pollfd p = { .fd = fd, .events = POLLIN };

	if (poll(&p, 1, HARNESS_WAIT_MS) != 1 || read(fd, in, sizeof(in)) != 0)
		return EPROTO;
	return 0;
}

struct clients {
	const char *front; /* harness_path is not for threads */
	atomic_bool stop;
	atomic_uint done;   /* connections that finished, checked */
	atomic_uint failed;
	atomic_int first_error;
	unsigned seed;
};

static void *client_loop(void *arg)
{
	struct clients *c = arg;
	unsigned seed = atomic_fetch_add(&c->done, 0) + (unsigned)pthread_self();

	while (!atomic_load(&c->stop)) {
		int fd = harness_unix_connect(c->front, SOCK_STREAM);
		int rc = fd < 0 ? errno : stream(fd, 64 * 1024, seed++, 4096);

		if (fd >= 0)
			close(fd);
		if (rc) {
			atomic_fetch_add(&c->failed, 1);
			int zero = 0;
			atomic_compare_exchange_strong(&c->first_error, &zero,
						       rc);
		} else {
			atomic_fetch_add(&c->done, 1);
		}
	}
	return NULL;
}

/* ---- vmio's processes ----------------------------------------------------- */

static void write_script(const char *path, const char *text)
{
	char tmp[600];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	chmod(tmp, 0755);
	/* As a package upgrade does: a new file renamed over the path. */
	assert_int_equal(rename(tmp, path), 0);
}

/* The vmio that serves now, stopped by the case's teardown whatever
 * happened. */
static pid_t serving = -1;

static pid_t start_relay(void)
{
	const char *args[] = { "redirect", "--control",
			       harness_path("ctl"), "--handover-timeout", "5000",
			       "--drain-timeout", "60", NULL, NULL, NULL };
	static char a1[600], a2[600];
	pid_t pid;

	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s,fork",
		 harness_path("front.sock"));
	snprintf(a2, sizeof(a2), "UNIX-CONNECT:%s", harness_path("back.sock"));
	args[7] = a1;
	args[8] = a2;
	pid = harness_handover_spawn(args);
	serving = pid;
	assert_true(harness_wait_socket(harness_path("ctl"), HARNESS_WAIT_MS));
	assert_true(harness_wait_socket(harness_path("front.sock"),
					HARNESS_WAIT_MS));
	return pid;
}

static unsigned fd_count(pid_t pid)
{
	char path[64], line[64];
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "ls /proc/%d/fd", (int)pid);
	f = popen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n++;
	pclose(f);
	return n;
}

/* The process's children, from /proc: none once a refused successor has
 * been reaped. */
static unsigned children(pid_t pid)
{
	char path[80], buf[256];
	unsigned n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid,
		 (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f))
		for (char *p = strtok(buf, " \n"); p; p = strtok(NULL, " \n"))
			n++;
	fclose(f);
	return n;
}

static void expect_serves(void)
{
	int fd = harness_unix_connect(harness_path("front.sock"), SOCK_STREAM);

	assert_true(fd >= 0);
	assert_int_equal(stream(fd, 100000, 7, 8192), 0);
	close(fd);
}

static int case_setup(void **state)
{
	(void)state;
	harness_log_clear();
	echo_start();
	return 0;
}

static int case_teardown(void **state)
{
	pid_t r;

	(void)state;
	/* What a failed case left: whichever vmio serves, and every other
	 * this test is the parent of. */
	if (serving > 0 && kill(serving, 0) == 0)
		harness_stop(serving, HARNESS_WAIT_MS);
	serving = -1;
	signal(SIGCHLD, SIG_DFL);
	while ((r = waitpid(-1, NULL, WNOHANG)) > 0)
		;
	echo_stop();
	return 0;
}

/* ---- Cases ---------------------------------------------------------------- */

/* 20 reloads in a row under connecting, streaming clients; a connection
 * opened before the first reload streams between all of them and ends in
 * the process that accepted it, which exits then. */
static void test_reload_20_times_streaming(void **state)
{
	struct clients c = { 0 };
	pthread_t th[3];
	pid_t first = start_relay(), pid = first;
	int long_fd = harness_unix_connect(harness_path("front.sock"),
					   SOCK_STREAM);
	char out[2048];

	(void)state;
	c.front = harness_path("front.sock");
	assert_true(long_fd >= 0);
	pid_t pids[21];

	/* Through vmio before any reload: accepted by the first process. */
	assert_int_equal(stream_part(long_fd, 1000, 99, 1000), 0);
	pids[0] = first;
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, client_loop, &c),
				 0);
	for (unsigned k = 0; k < 20; k++) {
		unsigned before = atomic_load(&c.done);
		long long cpid;

		if (harness_reload(harness_path("ctl"), out, sizeof(out)) ||
		    !strstr(out, "handed over to pid "))
			fail_msg("reload %u: %s", k, out);
		cpid = strtoll(strstr(out, "pid ") + 4, NULL, 10);
		assert_true(cpid > 0 && cpid != pid);
		pid = (pid_t)cpid;
		serving = pid;
		pids[k + 1] = pid;
		assert_int_equal(harness_control_num(harness_path("ctl"), "pid"),
				 pid);
		/* The long connection still flows, in the first process. */
		assert_int_equal(stream_part(long_fd, 20000, k, 4096), 0);
		/* Clients got through the new process before the next. */
		for (unsigned w = 0; w < HARNESS_WAIT_MS / 10 &&
				     atomic_load(&c.done) < before + 3; w++)
			usleep(10000);
		assert_true(atomic_load(&c.done) >= before + 3);
	}
	atomic_store(&c.stop, true);
	for (unsigned i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	if (atomic_load(&c.failed))
		fail_msg("%u of %u connections failed (first: %s)",
			 atomic_load(&c.failed),
			 atomic_load(&c.done) + atomic_load(&c.failed),
			 strerror(atomic_load(&c.first_error)));
	/* The first process still relays the long connection... */
	assert_int_equal(kill(first, 0), 0);
	/* ...whose bytes all come back, then it exits by itself, 0. */
	assert_int_equal(stream(long_fd, 300000, 5, 16384), 0);
	close(long_fd);
	harness_expect_exit(first, 0);
	/* The 19 in between are gone too, each drained: those that reach
	 * this test (its subreaper) exited 0; a process reaps the successor
	 * that took over from it while it drains. */
	for (unsigned k = 1; k < 20; k++) {
		unsigned w;

		for (w = 0; w < HARNESS_WAIT_MS / 10; w++) {
			int st;
			pid_t r;

			while ((r = waitpid(-1, &st, WNOHANG)) > 0)
				if (!WIFEXITED(st) || WEXITSTATUS(st))
					fail_msg("a vmio ended with wait status 0x%x",
						 st);
			if (kill(pids[k], 0) < 0)
				break;
			usleep(10000);
		}
		if (w == HARNESS_WAIT_MS / 10)
			fail_msg("vmio %d (reload %u) did not exit",
				 (int)pids[k], k);
	}
	expect_serves();
	assert_int_equal(harness_stop(pid, HARNESS_WAIT_MS), 0);
}

/* A refused hand-over: the old process still serves, the answer says
 * why, and it holds no fd and no child more than before. */
static void expect_refused(pid_t pid, const char *why)
{
	unsigned fds = fd_count(pid);
	char out[2048];

	assert_int_equal(harness_reload(harness_path("ctl"), out, sizeof(out)),
			 1 << 8);
	if (!strstr(out, why))
		fail_msg("the answer '%s' does not say '%s'", out, why);
	assert_true(harness_log_contains(why));
	assert_int_equal(fd_count(pid), fds);
	assert_int_equal(children(pid), 0);
	assert_int_equal(harness_control_num(harness_path("ctl"), "pid"), pid);
	expect_serves();
}

static void test_refused_missing_binary(void **state)
{
	pid_t pid = start_relay();
	char moved[600];

	(void)state;
	snprintf(moved, sizeof(moved), "%s.moved", harness_handover_copy());
	assert_int_equal(rename(harness_handover_copy(), moved), 0);
	expect_refused(pid, "No such file or directory");
	assert_int_equal(rename(moved, harness_handover_copy()), 0);
	/* The binary back: the next reload goes through. */
	char out[1024];

	assert_int_equal(harness_reload(harness_path("ctl"), out, sizeof(out)), 0);
	harness_expect_exit(pid, 0);
	pid = (pid_t)strtol(strstr(out, "pid ") + 4, NULL, 10);
	serving = pid;
	expect_serves();
	assert_int_equal(harness_stop(pid, HARNESS_WAIT_MS), 0);
}

/* Successors that fail, one way each, put where the binary was: one that
 * exits, one that crashes, one that refuses the state (its reason reaches
 * the answer), one that never answers (--handover-timeout 5000). */
static void test_refused_by_failing_successors(void **state)
{
	static const struct {
		const char *script, *why;
	} cases[] = {
		{ "#!/bin/sh\nexit 7\n",
		  "the successor exited with status 7 before taking over" },
		{ "#!/bin/sh\nkill -SEGV $$\n",
		  "the successor was killed by signal 11" },
		{ "#!/bin/bash\n"
		  "printf 'refused: state format version 99: this vmio reads versions 1 to 1' >&\"$VMIO_HANDOVER_FD\"\n"
		  "read -t 30 <&\"$VMIO_HANDOVER_FD\"\n",
		  "the successor refused the state: state format version 99" },
		{ "#!/bin/bash\nread -t 60 <&\"$VMIO_HANDOVER_FD\"\n",
		  "did not take over within 5000 ms" },
	};
	pid_t pid = start_relay();

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		write_script(harness_handover_copy(), cases[i].script);
		expect_refused(pid, cases[i].why);
	}
	assert_int_equal(harness_stop(pid, HARNESS_WAIT_MS), 0);
}

/* SIGHUP, as the unit's ExecReload= sends it: the same hand-over. */
static void test_sighup(void **state)
{
	pid_t pid = start_relay();
	long long now;

	(void)state;
	assert_int_equal(kill(pid, SIGHUP), 0);
	/* No relay open: the old process exits once the new one took over. */
	harness_expect_exit(pid, 0);
	now = harness_control_num(harness_path("ctl"), "pid");
	serving = (pid_t)now;
	assert_true(now > 0 && now != pid);
	assert_true(harness_log_contains("SIGHUP received: handing over"));
	expect_serves();
	assert_int_equal(harness_stop((pid_t)now, HARNESS_WAIT_MS), 0);
}

/* The real vmio as a successor, this test as its predecessor: a state of
 * a format it does not know is refused with the reason, and it exits. */
static void test_successor_refuses_unknown_format(void **state)
{
	struct vmio_envelope_writer w;
	struct vmio_fd_sender tx;
	const uint8_t *rec;
	uint8_t *copy;
	size_t len;
	int sv[2], lfd, fds[2], child;
	char env[64], answer[600];
	const char *args[] = { "redirect", "--control", harness_path("ctl2"),
			       NULL, "UNIX-CONNECT:/nonexistent", NULL };
	static char a1[600];
	ssize_t n;

	(void)state;
	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s,fork",
		 harness_path("front2.sock"));
	args[3] = a1;
	lfd = harness_unix_listen(harness_path("front2.sock"));
	fds[0] = lfd;
	vmio_envelope_writer_init(&w, "99.0");
	vmio_envelope_add(&w, "redirect.listener", "x", 1, 1);
	vmio_envelope_add(&w, "control", "", 0, 0);
	assert_int_equal(vmio_envelope_finish(&w, &rec, &len), 0);
	copy = malloc(len);
	memcpy(copy, rec, len);
	copy[8] = 99; /* the format */
	uint32_t crc = (uint32_t)crc32(0L, copy, (uInt)(len - 4));
	for (int i = 0; i < 4; i++)
		copy[len - 4 + i] = (uint8_t)(crc >> (8 * i));
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	child = fcntl(sv[1], F_DUPFD, 10);
	close(sv[1]);
	snprintf(env, sizeof(env), "%d", child);
	setenv(VMIO_HANDOVER_ENV, env, 1);
	pid_t pid = harness_spawn(args);
	unsetenv(VMIO_HANDOVER_ENV);
	close(child);
	vmio_fd_sender_init(&tx, sv[0], copy, len, fds, 1);
	for (;;) {
		int rc = vmio_fd_sender_step(&tx);
		struct pollfd p = { .fd = sv[0], .events = POLLOUT };

		if (!rc)
			break;
		assert_int_equal(rc, -EAGAIN);
		assert_int_equal(poll(&p, 1, HARNESS_WAIT_MS), 1);
	}
	assert_true(harness_wait_fd(sv[0], POLLIN, HARNESS_WAIT_MS));
	n = recv(sv[0], answer, sizeof(answer) - 1, 0);
	assert_true(n > 0);
	answer[n] = '\0';
	assert_string_equal(answer,
			    "refused: state format version 99: this vmio reads versions 1 to 1");
	harness_expect_exit(pid, 1);
	/* It left our listener alone: still there, still ours. */
	struct stat st;
	assert_int_equal(stat(harness_path("front2.sock"), &st), 0);
	vmio_envelope_writer_fini(&w);
	free(copy);
	close(sv[0]);
	close(lfd);
}

/* A command that cannot hand over yet says so, and serves on. */
static struct harness_loopback lb = { .name = "lb.sock" };

static void test_loopback_cannot_hand_over(void **state)
{
	struct harness_loopback *l = *state;
	const char *args[] = { "reload", l->ctl, NULL };
	char out[1024], err[1024];

	assert_int_equal(harness_run(args, HARNESS_WAIT_MS, out, sizeof(out),
				     err, sizeof(err)),
			 1 << 8);
	assert_non_null(strstr(err, "this command cannot hand over (yet)"));
	assert_int_equal(harness_control_num(l->ctl, "pid"), l->pid);
}

/* Successors are not killed with the test as the vmio it spawned is
 * (they are not its children when they start): whatever a failed case
 * left, now this test's children as their subreaper, goes with it. */
static int group_teardown(void **state)
{
	char path[64], buf[4096];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/children",
		 (int)getpid());
	f = fopen(path, "r");
	if (f) {
		if (fgets(buf, sizeof(buf), f))
			for (char *p = strtok(buf, " \n"); p;
			     p = strtok(NULL, " \n"))
				kill((pid_t)atoi(p), SIGKILL);
		fclose(f);
	}
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	return harness_group_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reload_20_times_streaming,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_refused_missing_binary,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(
			test_refused_by_failing_successors, case_setup,
			case_teardown),
		cmocka_unit_test_setup_teardown(test_sighup, case_setup,
						case_teardown),
		cmocka_unit_test_setup_teardown(
			test_successor_refuses_unknown_format, case_setup,
			case_teardown),
		HARNESS_LOOPBACK_CASE(test_loopback_cannot_hand_over, lb),
	};
	/* Every successor whose parent exits becomes this test's child. */
	if (harness_handover_init())
		return 1;
	harness_test_filter();
	return cmocka_run_group_tests(tests, NULL, group_teardown);
}
