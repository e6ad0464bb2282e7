/* Shared by the integration tests: start `vmio` (the binary named by the
 * VMIO_BIN environment variable) in another process, wait for its socket,
 * and stop it, all bounded in time. */
#ifndef VMIO_TESTS_HARNESS_H
#define VMIO_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct vmio_fe;
struct vmio_stream_opts;
struct vmio_stream_result;

/* How long a test waits for the backend to do anything at all: generous,
 * so that a slow (sanitized, loaded) machine is not taken for a hang. */
#define HARNESS_WAIT_MS 20000

/* A fresh directory under $TMPDIR (or /tmp), removed by harness_cleanup. */
const char *harness_tmpdir(void);
/* Joins harness_tmpdir() and name into a static-lifetime string. */
const char *harness_path(const char *name);

/* Starts $VMIO_BIN with args (NULL-terminated, without argv[0]). Its
 * stderr goes to harness_path("vmio.log") (appended). Returns the pid, or
 * -1 (and fails the test) if it cannot be started. */
pid_t harness_spawn(const char *const args[]);
/* The same with stdin from in_fd and stdout to out_fd (-1: the test's
 * stdin, the log); both stay the caller's to close. */
pid_t harness_spawn_stdio(const char *const args[], int in_fd, int out_fd);

/* Waits until a unix socket at path accepts connections. Returns true on
 * success, false after timeout_ms. */
bool harness_wait_socket(const char *path, int timeout_ms);

/* Waits for pid to exit, up to timeout_ms. Returns its wait status, or -1
 * on timeout (the process is left running). */
int harness_wait_exit(pid_t pid, int timeout_ms);

/* Waits (HARNESS_WAIT_MS) for pid to exit by itself with status; fails
 * the test otherwise, killing it if it is still running. */
void harness_expect_exit(pid_t pid, int status);

/* SIGTERM, then SIGKILL after timeout_ms; returns the wait status. */
int harness_stop(pid_t pid, int timeout_ms);

/* True if the log written by spawned processes contains needle. */
bool harness_log_contains(const char *needle);

/* The first cap lines of that log, without their newline, each cut to
 * HARNESS_LOG_LINE bytes; returns how many. */
#define HARNESS_LOG_LINE 512
unsigned harness_log_lines(char lines[][HARNESS_LOG_LINE], unsigned cap);

/* Empties the log, so that what a test asks of it is this test's. */
void harness_log_clear(void);

/* Runs $VMIO_BIN with args to completion (bounded by timeout_ms), capturing
 * stdout and stderr into the given buffers (NUL-terminated, truncated to
 * their size). Returns the exit status, or -1 on timeout or failure. */
int harness_run(const char *const args[], int timeout_ms, char *out,
		size_t out_size, char *err, size_t err_size);

/* A `vmio loopback` started afresh for each test case, so that no case
 * sees what an earlier one left in the process. Hand one to cmocka as the
 * case's initial state, with name set:
 *
 *	static struct harness_loopback lb = { .name = "x.sock" };
 *	... HARNESS_LOOPBACK_CASE(test_x, lb), ...
 */
struct harness_loopback {
	const char *name; /* of the socket, inside harness_tmpdir() */
	const char *sock; /* its path, set by the setup */
	char ctl[300];    /* its --control socket, set by the setup */
	pid_t pid;
};

/* Spawns `vmio loopback --socket-path <tmpdir>/<name>` and waits until it
 * listens; fails the test if it does not. */
int harness_loopback_setup(void **state);

/* Stops the backend and asserts that it exited 0 on SIGTERM. */
int harness_loopback_teardown(void **state);

/* A cmocka case run between harness_loopback_setup and _teardown. */
#define HARNESS_LOOPBACK_CASE(f, lb)                                         \
	cmocka_unit_test_prestate_setup_teardown(                            \
		f, harness_loopback_setup, harness_loopback_teardown, &(lb))

/* vmio_stream_connect (negotiated, queues 0 and 1 set up with qsize
 * entries) to the backend at sock; fails the test if it cannot. */
struct vmio_fe *harness_connect(const char *sock, uint64_t mem_size,
				unsigned nregions, uint16_t qsize);

/* One whole session: connect with the memory o needs in nregions regions,
 * stream o, close. Fails the test unless every one of o->bytes came back
 * (checked, if o->verify); res is left for the caller to look at. */
void harness_stream_session(const char *sock,
			    const struct vmio_stream_opts *o,
			    unsigned nregions, uint16_t qsize,
			    struct vmio_stream_result *res);

/* Resident memory of a process in KiB (VmRSS), or -1 if it is gone: how
 * the tests check that a stalled peer does not grow vmio's buffers. */
long harness_rss_kib(pid_t pid);

/* CPU time a process used (utime + stime), in clock ticks, or -1: how the
 * tests check that vmio does not spin while it waits. */
long harness_cpu_ticks(pid_t pid);

/* A thread of a process: its name (comm: "vmio-w1" for worker 1) and the
 * CPU time it used, in clock ticks. */
struct harness_thread {
	char name[32];
	long ticks;
};

/* Reads up to cap threads of pid; returns how many. */
unsigned harness_threads(pid_t pid, struct harness_thread *t, unsigned cap);
/* The ticks of the thread called name (fails the test if none is). */
long harness_thread_ticks(const struct harness_thread *t, unsigned n,
			  const char *name);

/* Asserts that pid is idle (does not spin): some window of 1 s, of at
 * most HARNESS_IDLE_WINDOWS in a row, in which it used fewer than
 * HARNESS_IDLE_TICKS clock ticks. A process that spins burns every window
 * (100 ticks a second alone, about half that beside a CPU hog) and fails;
 * one that only finished some earlier work in the first window, slowed by
 * a sanitizer or a loaded machine, passes in the next. what names the
 * state in the messages. */
#define HARNESS_IDLE_WINDOWS 5
#define HARNESS_IDLE_TICKS 20
void harness_expect_idle(pid_t pid, const char *what);

/* Runs only the cases whose names match $VMIO_TEST_FILTER (a cmocka
 * pattern, '*' and '?'), when it is set: how one case is run many times
 * in a row. Call before cmocka_run_group_tests. */
void harness_test_filter(void);

/* ---- Live counters (--control) ----------------------------------------- */

/* Connects to the --control socket at path and returns its document,
 * parsed (jansson; json_decref it), or fails the test. Bounded by
 * HARNESS_WAIT_MS. */
struct json_t;
struct json_t *harness_control_get(const char *path);
/* The number at a dotted path of doc ("vms.0.totals.bytes_to_guest";
 * array members by index), or fails the test naming the path. */
long long harness_json_num(struct json_t *doc, const char *path);
/* The same read fresh from the socket: one document per call. */
long long harness_control_num(const char *path, const char *key);

/* ---- Host programs on unix sockets -------------------------------------- */

/* A socket of type (SOCK_STREAM, SOCK_SEQPACKET) connected to path, or
 * -1 with errno set. */
int harness_unix_connect(const char *path, int type);
/* A SOCK_STREAM listener at path (a stale file is replaced), or fails
 * the test. */
int harness_unix_listen(const char *path);
/* Waits up to ms for events (POLLIN, ...) on fd; true if they came. */
bool harness_wait_fd(int fd, short events, int ms);
/* Reads exactly len bytes from fd, each wait bounded by HARNESS_WAIT_MS;
 * fails the test on a timeout, an error or EOF. */
void harness_read_exact(int fd, void *buf, size_t len);

/* ---- `vmio vsock` with the in-tree driver as its guest ----------------- */

/* One `vmio vsock --guest-cid 3` per case, its vhost-user socket,
 * --uds-path and --control in harness_tmpdir(), and the driver
 * (frontend/vsock_guest.h) attached with its defaults. Hand one to cmocka
 * as the case's initial state:
 *
 *	static struct harness_vsock vm = { .extra = { "--opt", "v" } };
 *	... cmocka_unit_test_prestate_setup_teardown(test_x,
 *		harness_vsock_setup, harness_vsock_teardown, &vm), ...
 */
struct vg;
struct harness_vsock {
	const char *extra[8]; /* more vmio options, NULL-terminated */
	char sock[256], uds[256], ctl[256];
	pid_t pid;
	struct vg *g;
};

int harness_vsock_setup(void **state);
/* Frees the driver, stops vmio and asserts that it exited 0. */
int harness_vsock_teardown(void **state);

/* ---- Hand-over ------------------------------------------------------------ */

/* Installs from as a package upgrade does: copied beside to and renamed
 * over it (a running binary is never written to). */
void harness_install(const char *from, const char *to);
/* `vmio reload CTL`: its wait status, its output (stdout, then stderr)
 * in out. */
int harness_reload(const char *ctl, char *out, size_t size);

/* ---- A misbehaving VMM (tools/vmio-bad-vmm.c, $VMIO_BAD_VMM) ------------- */

struct harness_bad_vmm {
	pid_t pid;
	int out; /* its stdout, non-blocking */
	char said[512];
	size_t said_len;
};
/* Starts it on sock misbehaving as kind (hold_ms NULL: its default),
 * bounded to two minutes on its own; its stderr goes to the log. */
void harness_bad_vmm_start(struct harness_bad_vmm *b, const char *sock,
			   const char *kind, const char *hold_ms);
/* Takes what it printed so far; true once it said "ready". */
bool harness_bad_vmm_ready(struct harness_bad_vmm *b);
/* SIGTERM: it must exit 0 at once, having connected at least once; its
 * last line (kind=... connects=N ...) stays in b->said. */
void harness_bad_vmm_stop(struct harness_bad_vmm *b);

/* Removes the temporary directory, unless $VMIO_TEST_KEEP is set: then
 * it stays, with vmio's log in it, and its path is printed (how a soak
 * keeps what a failing run left). */
void harness_cleanup(void);

/* harness_cleanup as a cmocka group teardown: the directory outlives
 * every case (the log is in it) and goes once the group is done. */
int harness_group_teardown(void **state);

#endif
