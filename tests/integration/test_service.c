/* What systemd sees of vmio run as a Type=notify service: READY=1 on
 * $NOTIFY_SOCKET (a datagram socket the test binds, as systemd does) only
 * once the sockets are bound, no READY and exit 2 for a configuration
 * that cannot be used, and, with stderr as the journal (JOURNAL_STREAM
 * naming it), every line before the exit carrying its "<N>" severity,
 * one line per cause. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* The notify socket of a case: bound, non-blocking, named in
 * NOTIFY_SOCKET for the processes spawned next. */
static int notify_fd = -1;

static int bind_notify(void **state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	const char *path = harness_path("notify");

	(void)state;
	unlink(path);
	notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_true(notify_fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	assert_int_equal(bind(notify_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	harness_log_clear();
	return 0;
}

static int close_notify(void **state)
{
	(void)state;
	close(notify_fd);
	notify_fd = -1;
	unsetenv("NOTIFY_SOCKET");
	unsetenv("JOURNAL_STREAM");
	return 0;
}

/* Makes the processes spawned next take their stderr (the harness's log
 * file) for the journal, as systemd's JOURNAL_STREAM tells a service. */
static void log_is_journal(void)
{
	char js[64];
	struct stat st;
	int fd = open(harness_path("vmio.log"), O_WRONLY | O_CREAT | O_CLOEXEC,
		      0644);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	close(fd);
	snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
		 (unsigned long long)st.st_ino);
	setenv("JOURNAL_STREAM", js, 1);
}

/* The next datagram within timeout_ms into buf, or "" if none came. */
static void next_notify(char *buf, size_t size, int timeout_ms)
{
	struct pollfd p = { .fd = notify_fd, .events = POLLIN };
	ssize_t n = 0;

	buf[0] = '\0';
	if (poll(&p, 1, timeout_ms) == 1)
		n = recv(notify_fd, buf, size - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
}

static bool connectable(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

static const char *write_file(const char *name, const char *text)
{
	const char *path = harness_path(name);
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

/* READY=1, then the sockets a VMM and a host program use answer at once;
 * SIGTERM ends it with 0. */
static void expect_ready(pid_t pid, const char *const sockets[])
{
	char msg[128];

	next_notify(msg, sizeof(msg), HARNESS_WAIT_MS);
	assert_string_equal(msg, "READY=1");
	for (unsigned i = 0; sockets[i]; i++)
		if (!connectable(sockets[i]))
			fail_msg("READY=1 came before %s listened", sockets[i]);
	assert_int_equal(harness_stop(pid, HARNESS_WAIT_MS), 0);
}

/* The service's options in the file beside its VMs: its control socket
 * here, which the command line's overrides. */
static void test_vsock_config_ready(void **state)
{
	const char *ctl = harness_path("ctl.sock"),
		   *cli_ctl = harness_path("cli-ctl.sock");
	char yaml[1024];

	(void)state;
	snprintf(yaml, sizeof(yaml),
		 "max_connections: 64\n"
		 "control: %s\n"
		 "vms:\n"
		 "  - guest_cid: 3\n"
		 "    socket: %s\n"
		 "    uds_path: %s\n",
		 ctl, harness_path("v.sock"), harness_path("vm.vsock"));
	const char *conf = write_file("vm1.yaml", yaml);
	pid_t pid = harness_spawn((const char *[]){ "vsock", "--config", conf,
						    NULL });

	expect_ready(pid, (const char *[]){ harness_path("v.sock"),
					     harness_path("vm.vsock"), ctl,
					     NULL });

	pid = harness_spawn((const char *[]){ "vsock", "--config", conf,
					      "--control", cli_ctl, NULL });
	expect_ready(pid, (const char *[]){ cli_ctl, NULL });
	if (connectable(ctl))
		fail_msg("the file's control socket was used over the "
			 "command line's");
}

static void test_net_ready(void **state)
{
	(void)state;
	pid_t pid = harness_spawn((const char *[]){
		"net", "--null", "--socket", harness_path("n.sock"),
		"--control", harness_path("nctl.sock"), NULL });

	expect_ready(pid, (const char *[]){ harness_path("n.sock"),
					     harness_path("nctl.sock"), NULL });
}

static void test_redirect_ready(void **state)
{
	char a1[200], a2[200];

	(void)state;
	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s,fork", harness_path("r.sock"));
	snprintf(a2, sizeof(a2), "UNIX-CONNECT:%s", harness_path("nobody"));
	pid_t pid = harness_spawn((const char *[]){
		"redirect", "--control", harness_path("rctl.sock"), a1, a2,
		NULL });

	expect_ready(pid, (const char *[]){ harness_path("rctl.sock"), NULL });
	/* Not probed before READY: a probe would be a connection to relay. */
}

/* Every line of the log carries a severity, errors at "<3>", and there
 * are exactly want of those. */
static void expect_journal_lines(unsigned want_errors, const char *needle)
{
	char lines[32][HARNESS_LOG_LINE];
	unsigned n = harness_log_lines(lines, 32), errors = 0;
	bool found = false;

	assert_true(n > 0);
	for (unsigned i = 0; i < n; i++) {
		if (lines[i][0] != '<' || lines[i][1] < '0' ||
		    lines[i][1] > '7' || lines[i][2] != '>')
			fail_msg("line %u has no journal severity: %s", i + 1,
				 lines[i]);
		errors += !strncmp(lines[i], "<3>", 3);
		found = found || strstr(lines[i], needle);
	}
	if (errors != want_errors)
		fail_msg("%u error lines, not %u (first: %s)", errors,
			 want_errors, lines[0]);
	if (!found)
		fail_msg("no line says '%s' (first: %s)", needle, lines[0]);
}

/* A start that fails with status: no READY=1, one error line in the
 * journal that names the problem. */
static void expect_failure(const char *const args[], int status,
			   const char *needle)
{
	char msg[128];
	pid_t pid;

	log_is_journal();
	harness_log_clear();
	pid = harness_spawn(args);
	harness_expect_exit(pid, status);
	next_notify(msg, sizeof(msg), 0);
	assert_string_equal(msg, "");
	expect_journal_lines(1, needle);
}

/* A configuration that cannot be used exits 2, which the units keep
 * from restarting. */
static void expect_refused(const char *const args[], const char *needle)
{
	expect_failure(args, 2, needle);
}

static void test_bad_configs(void **state)
{
	(void)state;
	expect_refused((const char *[]){ "vsock", "--config",
					 harness_path("missing.yaml"), NULL },
		       "missing.yaml");
	const char *bad = write_file("bad.yaml", "vms:\n  - guest_cid: 3\n"
						 "    colour: red\n");
	expect_refused((const char *[]){ "vsock", "--config", bad, NULL },
		       "unknown key 'colour'");
	bad = write_file("bad-option.yaml", "colour: red\nvms:\n"
					    "  - guest_cid: 3\n");
	expect_refused((const char *[]){ "vsock", "--config", bad, NULL },
		       "bad-option.yaml:1: unknown option 'colour'");
	bad = write_file("bad-value.yaml", "vms: []\nmax_connections: many\n");
	expect_refused((const char *[]){ "vsock", "--config", bad, NULL },
		       "--max-connections: 'many' is not a number");
	expect_refused((const char *[]){ "net", "--null", "--socket",
					 harness_path("nodir/x.sock"), NULL },
		       "does not exist");
	expect_refused((const char *[]){ "redirect", "--engine", "warp",
					 "STDIO", "STDIO", NULL },
		       "unknown engine");
}

/* A socket another process serves: one error line for the one cause,
 * whichever socket it is. */
static void test_socket_in_use(void **state)
{
	const char *sock = harness_path("busy.sock"), *ctl = harness_path("busy.ctl");
	char msg[128], a1[200];
	pid_t pid;

	(void)state;
	pid = harness_spawn((const char *[]){ "net", "--null", "--socket", sock,
					      "--control", ctl, NULL });
	next_notify(msg, sizeof(msg), HARNESS_WAIT_MS);
	assert_string_equal(msg, "READY=1");
	expect_failure((const char *[]){ "net", "--null", "--socket", sock,
					 NULL }, 1, "a live process listens");
	expect_failure((const char *[]){ "net", "--null", "--socket",
					 harness_path("free.sock"), "--control",
					 ctl, NULL }, 1, "a live process listens");
	expect_failure((const char *[]){ "vsock", "--socket",
					 harness_path("free.sock"), "--uds-path",
					 sock, NULL }, 1, "a live process listens");
	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s", sock);
	expect_failure((const char *[]){ "redirect", a1, "STDIO", NULL }, 1,
		       "a live process listens");
	assert_int_equal(harness_stop(pid, HARNESS_WAIT_MS), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_vsock_config_ready,
						bind_notify, close_notify),
		cmocka_unit_test_setup_teardown(test_net_ready, bind_notify,
						close_notify),
		cmocka_unit_test_setup_teardown(test_redirect_ready,
						bind_notify, close_notify),
		cmocka_unit_test_setup_teardown(test_bad_configs, bind_notify,
						close_notify),
		cmocka_unit_test_setup_teardown(test_socket_in_use,
						bind_notify, close_notify),
	};
	int rc;

	harness_test_filter();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_cleanup();
	return rc;
}
