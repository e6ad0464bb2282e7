#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include "harness.h"

#include "frontend/stream.h"
#include "frontend/vsock_guest.h"
#include "util/proc_stat.h"
#include "util/proc_status.h"

#include <dirent.h>
#include <jansson.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char *tmpdir;

/* Paths handed out live until exit; kept reachable so that the leak
 * checker does not count them. */
static char **paths;
static size_t npaths;

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

const char *harness_tmpdir(void)
{
	if (!tmpdir) {
		const char *base = getenv("TMPDIR");
		char buf[4096];

		snprintf(buf, sizeof(buf), "%s/vmio-test.XXXXXX",
			 base && *base ? base : "/tmp");
		tmpdir = strdup(buf);
		if (!tmpdir || !mkdtemp(tmpdir))
			fail_msg("cannot create a temporary directory: %s",
				 strerror(errno));
	}
	return tmpdir;
}

const char *harness_path(const char *name)
{
	char **grown = realloc(paths, (npaths + 1) * sizeof(*paths));
	char *p = NULL;

	if (!grown || asprintf(&p, "%s/%s", harness_tmpdir(), name) < 0)
		fail_msg("out of memory");
	paths = grown;
	paths[npaths++] = p;
	return p;
}

static const char *vmio_bin(void)
{
	const char *bin = getenv("VMIO_BIN");

	if (!bin || !*bin)
		fail_msg("VMIO_BIN is not set: run the test through meson");
	return bin;
}

/* In the child: never returns. The child dies with the test, so a failed
 * assertion cannot leave a backend running. If exec fails, errno goes to
 * err_fd, which exec would otherwise have closed (O_CLOEXEC). */
static void exec_vmio(const char *bin, const char *const args[], int log_fd,
		      int err_fd, int in_fd, int out_fd)
{
	size_t n = 0;
	int e;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	while (args[n])
		n++;
	const char **argv = calloc(n + 2, sizeof(*argv));
	if (!argv)
		_exit(127);
	argv[0] = bin;
	memcpy(argv + 1, args, n * sizeof(*argv));
	if (dup2(log_fd, STDERR_FILENO) < 0 ||
	    dup2(out_fd >= 0 ? out_fd : log_fd, STDOUT_FILENO) < 0 ||
	    (in_fd >= 0 && dup2(in_fd, STDIN_FILENO) < 0))
		_exit(127);
	execv(bin, (char *const *)argv);
	e = errno;
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(127);
}

pid_t harness_spawn(const char *const args[])
{
	return harness_spawn_stdio(args, -1, -1);
}

pid_t harness_spawn_stdio(const char *const args[], int in_fd, int out_fd)
{
	const char *bin = vmio_bin();
	int log_fd = open(harness_path("vmio.log"),
			  O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	int p[2], e = 0;
	pid_t pid;

	if (log_fd < 0)
		fail_msg("cannot open the log: %s", strerror(errno));
	if (pipe2(p, O_CLOEXEC) < 0)
		fail_msg("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0)
		exec_vmio(bin, args, log_fd, p[1], in_fd, out_fd);
	close(log_fd);
	close(p[1]);
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	/* EOF as soon as exec succeeds: no waiting on a process that never
	 * started. */
	ssize_t n;
	do
		n = read(p[0], &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(p[0]);
	if (n == sizeof(e)) {
		harness_wait_exit(pid, 1000);
		fail_msg("cannot run %s: %s", bin, strerror(e));
		return -1;
	}
	return pid;
}

static bool socket_accepts(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;
	bool ok;

	if (strlen(path) >= sizeof(sa.sun_path))
		return false;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* Whether some socket listens on path, from /proc/net/unix: unlike a test
 * connection, looking does not occupy a backend that serves one front end
 * at a time. -1 if /proc cannot tell. */
static int proc_listening(const char *path)
{
	const unsigned acceptcon = 0x10000; /* __SO_ACCEPTCON */
	FILE *f = fopen("/proc/net/unix", "r");
	size_t plen = strlen(path);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int found = 0;

	if (!f)
		return -1;
	while (!found && (n = getline(&line, &cap, f)) > 0) {
		unsigned flags;

		if (n && line[n - 1] == '\n')
			line[--n] = '\0';
		if ((size_t)n <= plen || line[n - plen - 1] != ' ' ||
		    strcmp(line + n - plen, path))
			continue;
		if (sscanf(line, "%*s %*s %*s %x", &flags) == 1 &&
		    (flags & acceptcon))
			found = 1;
	}
	free(line);
	fclose(f);
	return found;
}

/* Nothing tells us when a socket starts listening: poll it with a short,
 * growing backoff. */
bool harness_wait_socket(const char *path, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	int backoff = 1;

	for (;;) {
		int l = proc_listening(path);

		if (l == 1 || (l < 0 && socket_accepts(path)))
			return true;
		if (now_ms() >= deadline)
			return false;
		sleep_ms(backoff);
		if (backoff < 50)
			backoff *= 2;
	}
}

static int reap(pid_t pid)
{
	int status;
	pid_t r;

	do
		r = waitpid(pid, &status, WNOHANG);
	while (r < 0 && errno == EINTR);
	return r == pid ? status : -1;
}

/* A pidfd becomes readable when the process exits: a real wait, not a
 * polling loop. Kernels without pidfd_open fall back to polling. */
int harness_wait_exit(pid_t pid, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	int status = reap(pid);
	int backoff = 1;

	while (status == -1) {
		int64_t left = deadline - now_ms();

		if (left <= 0)
			break;
		if (pidfd >= 0) {
			struct pollfd p = { .fd = pidfd, .events = POLLIN };

			poll(&p, 1, (int)left);
		} else {
			sleep_ms(backoff < left ? backoff : (int)left);
			if (backoff < 50)
				backoff *= 2;
		}
		status = reap(pid);
	}
	if (pidfd >= 0)
		close(pidfd);
	return status;
}

void harness_expect_exit(pid_t pid, int status)
{
	int st = harness_wait_exit(pid, HARNESS_WAIT_MS);

	if (st == -1) {
		harness_stop(pid, 1000);
		fail_msg("vmio did not exit by itself");
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != status)
		fail_msg("vmio ended with wait status 0x%x, not exit %d", st,
			 status);
}

int harness_stop(pid_t pid, int timeout_ms)
{
	int status;

	kill(pid, SIGTERM);
	status = harness_wait_exit(pid, timeout_ms);
	if (status != -1)
		return status;
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	return status;
}

void harness_log_clear(void)
{
	if (truncate(harness_path("vmio.log"), 0) < 0 && errno != ENOENT)
		fail_msg("cannot empty the vmio log: %s", strerror(errno));
}

bool harness_log_contains(const char *needle)
{
	FILE *f = fopen(harness_path("vmio.log"), "r");
	char *buf = NULL;
	size_t cap = 0;
	bool found = false;

	if (!f)
		return false;
	/* Line by line: a log line never spans two reads, and the whole log
	 * need not fit in memory. */
	while (!found && getline(&buf, &cap, f) >= 0)
		found = strstr(buf, needle) != NULL;
	free(buf);
	fclose(f);
	return found;
}

unsigned harness_log_lines(char lines[][HARNESS_LOG_LINE], unsigned cap)
{
	FILE *f = fopen(harness_path("vmio.log"), "r");
	unsigned n = 0;

	if (!f)
		return 0;
	while (n < cap && fgets(lines[n], HARNESS_LOG_LINE, f)) {
		lines[n][strcspn(lines[n], "\n")] = '\0';
		n++;
	}
	fclose(f);
	return n;
}

struct capture {
	int fd;
	char *buf;
	size_t size;
	size_t len;
};

/* Reads what is there; returns false at EOF. Output beyond the buffer is
 * read and dropped so the child never blocks on a full pipe. */
static bool capture_read(struct capture *c)
{
	char scratch[4096];
	ssize_t n = read(c->fd, scratch, sizeof(scratch));

	if (n <= 0)
		return n < 0 && errno == EINTR;
	if (c->size && c->len < c->size - 1) {
		size_t room = c->size - 1 - c->len;
		size_t k = (size_t)n < room ? (size_t)n : room;

		memcpy(c->buf + c->len, scratch, k);
		c->len += k;
		c->buf[c->len] = '\0';
	}
	return true;
}

static pid_t spawn_captured(const char *const args[], int out[2], int err[2])
{
	const char *bin = vmio_bin();
	pid_t pid;

	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		fail_msg("pipe: %s", strerror(errno));
	pid = fork();
	if (pid == 0) {
		size_t n = 0;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		while (args[n])
			n++;
		const char **argv = calloc(n + 2, sizeof(*argv));
		if (!argv || dup2(out[1], STDOUT_FILENO) < 0 ||
		    dup2(err[1], STDERR_FILENO) < 0)
			_exit(127);
		argv[0] = bin;
		memcpy(argv + 1, args, n * sizeof(*argv));
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	if (pid < 0)
		fail_msg("fork: %s", strerror(errno));
	return pid;
}

int harness_run(const char *const args[], int timeout_ms, char *out,
		size_t out_size, char *err, size_t err_size)
{
	int64_t deadline = now_ms() + timeout_ms;
	int po[2], pe[2];
	pid_t pid = spawn_captured(args, po, pe);
	struct capture c[2] = {
		{ .fd = po[0], .buf = out, .size = out_size },
		{ .fd = pe[0], .buf = err, .size = err_size },
	};
	bool open_[2] = { true, true };
	int status;

	if (out_size)
		out[0] = '\0';
	if (err_size)
		err[0] = '\0';
	while (open_[0] || open_[1]) {
		struct pollfd p[2] = {
			{ .fd = open_[0] ? c[0].fd : -1, .events = POLLIN },
			{ .fd = open_[1] ? c[1].fd : -1, .events = POLLIN },
		};
		int64_t left = deadline - now_ms();

		if (left <= 0 || poll(p, 2, (int)left) == 0)
			break;
		for (int k = 0; k < 2; k++)
			if (open_[k] && p[k].revents)
				open_[k] = capture_read(&c[k]);
	}
	close(po[0]);
	close(pe[0]);
	int64_t left = deadline - now_ms();
	status = harness_wait_exit(pid, left > 0 ? (int)left : 0);
	if (status == -1) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		return -1;
	}
	return status;
}

int harness_loopback_setup(void **state)
{
	struct harness_loopback *lb = *state;

	lb->sock = harness_path(lb->name);
	snprintf(lb->ctl, sizeof(lb->ctl), "%s.ctl", lb->sock);
	lb->pid = harness_spawn((const char *[]){ "loopback", "--socket-path",
						  lb->sock, "--control",
						  lb->ctl, NULL });
	if (!harness_wait_socket(lb->sock, HARNESS_WAIT_MS))
		fail_msg("vmio did not start listening on %s", lb->sock);
	return 0;
}

int harness_loopback_teardown(void **state)
{
	struct harness_loopback *lb = *state;
	int st = harness_stop(lb->pid, HARNESS_WAIT_MS);

	/* Whatever the test did, the backend must exit cleanly on SIGTERM. */
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

struct vmio_fe *harness_connect(const char *sock, uint64_t mem_size,
				unsigned nregions, uint16_t qsize)
{
	char err[256];
	struct vmio_fe *fe = vmio_stream_connect(sock, HARNESS_WAIT_MS,
						 mem_size, nregions, qsize,
						 err, sizeof(err));

	if (!fe)
		fail_msg("%s", err);
	return fe;
}

void harness_stream_session(const char *sock,
			    const struct vmio_stream_opts *o,
			    unsigned nregions, uint16_t qsize,
			    struct vmio_stream_result *res)
{
	struct vmio_fe *fe = harness_connect(sock,
					     vmio_stream_mem_needed(o, qsize),
					     nregions, qsize);
	int r = vmio_stream_run(fe, o, res);

	/* Closed before any verdict: fail_msg does not return, and the
	 * socket and guest memory would leak. */
	vmio_fe_close(fe);
	if (r && o->remap_every)
		fail_msg("after %" PRIu64 " bytes and %u remaps: %s",
			 res->bytes, res->remaps, res->error);
	if (r)
		fail_msg("after %" PRIu64 " bytes: %s", res->bytes, res->error);
	assert_int_equal(res->bytes, o->bytes);
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
			struct FTW *ftw)
{
	return remove(path);
}

void harness_cleanup(void)
{
	const char *keep = getenv("VMIO_TEST_KEEP");

	if (!tmpdir)
		return;
	if (keep && *keep)
		printf("# kept %s\n", tmpdir);
	else
		nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	free(tmpdir);
	tmpdir = NULL;
}

void harness_read_exact(int fd, void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (!harness_wait_fd(fd, POLLIN, HARNESS_WAIT_MS))
			fail_msg("host: %zu of %zu bytes came", got, len);
		n = read(fd, (uint8_t *)buf + got, len - got);
		if (n <= 0)
			fail_msg("host read: %s", n ? strerror(errno) : "EOF");
		got += (size_t)n;
	}
}

int harness_group_teardown(void **state)
{
	harness_cleanup();
	return 0;
}

long harness_rss_kib(pid_t pid)
{
	return vmio_proc_status_kib(pid, "VmRSS");
}

long harness_cpu_ticks(pid_t pid)
{
	return vmio_proc_cpu_ticks(pid);
}

unsigned harness_threads(pid_t pid, struct harness_thread *t, unsigned cap)
{
	char dir[64], path[384];
	struct dirent *e;
	unsigned n = 0;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/task", (int)pid);
	d = opendir(dir);
	if (!d)
		fail_msg("vmio (pid %d) is gone", (int)pid);
	while ((e = readdir(d)) && n < cap) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s/stat", dir, e->d_name);
		t[n].ticks = vmio_proc_stat_ticks(path, t[n].name,
						   sizeof(t[n].name));
		if (t[n].ticks >= 0)
			n++;
	}
	closedir(d);
	return n;
}

long harness_thread_ticks(const struct harness_thread *t, unsigned n,
			  const char *name)
{
	for (unsigned k = 0; k < n; k++)
		if (!strcmp(t[k].name, name))
			return t[k].ticks;
	fail_msg("vmio has no thread named %s", name);
	return -1;
}

void harness_expect_idle(pid_t pid, const char *what)
{
	long used = -1;

	for (int w = 0; w < HARNESS_IDLE_WINDOWS; w++) {
		long t0 = harness_cpu_ticks(pid), t1;

		sleep_ms(1000);
		t1 = harness_cpu_ticks(pid);
		if (t0 < 0 || t1 < 0)
			fail_msg("vmio (pid %d) is gone (%s)", (int)pid, what);
		used = t1 - t0;
		printf("# vmio used %ld ticks in 1 s %s\n", used, what);
		if (used < HARNESS_IDLE_TICKS)
			return;
	}
	fail_msg("vmio is not idle %s: %ld ticks in the last of %d windows "
		 "of 1 s", what, used, HARNESS_IDLE_WINDOWS);
}

void harness_test_filter(void)
{
	const char *f = getenv("VMIO_TEST_FILTER");

	if (f && *f)
		cmocka_set_test_filter(f);
}

/* ---- Live counters ------------------------------------------------------ */

struct json_t *harness_control_get(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = HARNESS_WAIT_MS / 1000 };
	json_error_t jerr;
	json_t *doc;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, path);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		fail_msg("control socket %s: %s", path, strerror(errno));
	/* jansson reads to EOF: the server closes after the document. */
	FILE *f = fdopen(fd, "r");
	assert_non_null(f);
	doc = json_loadf(f, 0, &jerr);
	fclose(f);
	if (!doc)
		fail_msg("control socket %s: not JSON: %s (line %d)", path,
			 jerr.text, jerr.line);
	return doc;
}

long long harness_json_num(struct json_t *doc, const char *path)
{
	char buf[256], *save = NULL;
	json_t *v = doc;

	assert_true(strlen(path) < sizeof(buf));
	strcpy(buf, path);
	for (char *k = strtok_r(buf, ".", &save); k && v;
	     k = strtok_r(NULL, ".", &save)) {
		if (json_is_array(v))
			v = json_array_get(v, strtoul(k, NULL, 10));
		else
			v = json_object_get(v, k);
	}
	if (!json_is_integer(v)) {
		char *text = json_dumps(doc, JSON_COMPACT);

		fail_msg("no number at %s in %s", path, text ? text : "?");
	}
	return (long long)json_integer_value(v);
}

long long harness_control_num(const char *path, const char *key)
{
	json_t *doc = harness_control_get(path);
	long long v = harness_json_num(doc, key);

	json_decref(doc);
	return v;
}

/* ---- Host programs on unix sockets -------------------------------------- */

int harness_unix_connect(const char *path, int type)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	strcpy(a.sun_path, path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int harness_unix_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(a.sun_path));
	strcpy(a.sun_path, path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 128), 0);
	return fd;
}

bool harness_wait_fd(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };
	int r;

	do
		r = poll(&p, 1, ms);
	while (r < 0 && errno == EINTR);
	return r == 1;
}

/* ---- `vmio vsock` with the in-tree driver as its guest ----------------- */

int harness_vsock_setup(void **state)
{
	static unsigned seq;
	struct harness_vsock *vm = *state;
	const char *args[24] = { "vsock", "--guest-cid", "3", "--socket",
				 vm->sock, "--uds-path", vm->uds,
				 "--control", vm->ctl };
	unsigned n = 9;
	char err[256];

	seq++;
	snprintf(vm->sock, sizeof(vm->sock), "%s/hv-vhost%u.sock",
		 harness_tmpdir(), seq);
	snprintf(vm->uds, sizeof(vm->uds), "%s/hv%u.vsock", harness_tmpdir(),
		 seq);
	snprintf(vm->ctl, sizeof(vm->ctl), "%s/hv%u.ctl", harness_tmpdir(),
		 seq);
	for (unsigned i = 0; vm->extra[i]; i++)
		args[n++] = vm->extra[i];
	args[n] = NULL;
	vm->pid = harness_spawn(args);
	assert_true(vm->pid > 0);
	if (!harness_wait_socket(vm->sock, HARNESS_WAIT_MS))
		fail_msg("vmio vsock did not listen on %s", vm->sock);
	vm->g = vg_open(vm->sock, HARNESS_WAIT_MS, NULL, err, sizeof(err));
	if (!vm->g)
		fail_msg("%s", err);
	return 0;
}

int harness_vsock_teardown(void **state)
{
	struct harness_vsock *vm = *state;
	int st;

	if (vm->g && vm->g->violations)
		print_message("# device violations: %" PRIu64 " (last: %s)\n",
			      vm->g->violations, vm->g->violation);
	vg_free(vm->g);
	vm->g = NULL;
	st = harness_stop(vm->pid, 5000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

/* ---- Hand-over ------------------------------------------------------------ */

void harness_install(const char *from, const char *to)
{
	char buf[65536], tmp[600];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	snprintf(tmp, sizeof(tmp), "%s.new", to);
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	assert_true(in >= 0 && out >= 0);
	while ((n = read(in, buf, sizeof(buf))) > 0)
		assert_int_equal(write(out, buf, (size_t)n), n);
	close(in);
	close(out);
	assert_int_equal(rename(tmp, to), 0);
}

int harness_reload(const char *ctl, char *out, size_t size)
{
	const char *args[] = { "reload", ctl, NULL };
	char err[1024];
	int st = harness_run(args, HARNESS_WAIT_MS, out, size, err,
			     sizeof(err));

	strncat(out, err, size - strlen(out) - 1);
	return st;
}

/* ---- A misbehaving VMM -------------------------------------------------- */

void harness_bad_vmm_start(struct harness_bad_vmm *b, const char *sock,
			   const char *kind, const char *hold_ms)
{
	const char *bin = getenv("VMIO_BAD_VMM");
	int p[2];

	if (!bin || !*bin)
		fail_msg("VMIO_BAD_VMM is not set: run the test through meson");
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	memset(b, 0, sizeof(*b));
	b->pid = fork();
	assert_true(b->pid >= 0);
	if (b->pid == 0) {
		const char *argv[10] = { bin, "--socket", sock, "--kind",
					 kind };
		unsigned n = 5;
		int log = open(harness_path("vmio.log"),
			       O_WRONLY | O_APPEND | O_CREAT, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (hold_ms) {
			argv[n++] = "--hold-ms";
			argv[n++] = hold_ms;
		}
		/* Bounded on its own too, should this test die. */
		argv[n++] = "--duration-ms";
		argv[n++] = "120000";
		argv[n] = NULL;
		if (dup2(p[1], STDOUT_FILENO) < 0 ||
		    (log >= 0 && dup2(log, STDERR_FILENO) < 0))
			_exit(127);
		execv(bin, (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	b->out = p[0];
	assert_int_equal(fcntl(b->out, F_SETFL, O_NONBLOCK), 0);
}

bool harness_bad_vmm_ready(struct harness_bad_vmm *b)
{
	ssize_t n;

	while (b->said_len + 1 < sizeof(b->said) &&
	       (n = read(b->out, b->said + b->said_len,
			 sizeof(b->said) - 1 - b->said_len)) > 0)
		b->said_len += (size_t)n;
	b->said[b->said_len] = '\0';
	return strstr(b->said, "ready\n") != NULL;
}

void harness_bad_vmm_stop(struct harness_bad_vmm *b)
{
	int st;
	char *p;

	assert_int_equal(kill(b->pid, SIGTERM), 0);
	st = harness_wait_exit(b->pid, 5000);
	if (st < 0) {
		kill(b->pid, SIGKILL);
		harness_wait_exit(b->pid, 5000);
		fail_msg("vmio-bad-vmm did not exit on SIGTERM");
	}
	harness_bad_vmm_ready(b);
	close(b->out);
	p = strstr(b->said, "vmio-bad-vmm:");
	print_message("# %s", p ? p : "(vmio-bad-vmm said nothing)\n");
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_non_null(p);
	/* It did connect: it held B's socket, and was not refused. */
	p = strstr(p, "connects=");
	assert_non_null(p);
	assert_true(strtoull(p + 9, NULL, 10) >= 1);
}
