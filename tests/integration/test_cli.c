/* The vmio command line as a user meets it: help, errors, exit statuses,
 * capabilities, the socket-in-use check and a clean exit on signals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/frontend.h"
#include "harness.h"

static char out[8192], err[8192];

static int run(const char *const args[])
{
	return harness_run(args, 10000, out, sizeof(out), err, sizeof(err));
}

static int exit_code(int status)
{
	assert_true(status >= 0);
	assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static void test_help(void **state)
{
	assert_int_equal(exit_code(run((const char *[]){ "--help", NULL })), 0);
	assert_non_null(strstr(out, "loopback"));
	assert_int_equal(exit_code(run((const char *[]){ "loopback", "--help", NULL })), 0);
	assert_non_null(strstr(out, "--socket-path"));
	assert_non_null(strstr(out, "--fd"));
	assert_non_null(strstr(out, "--print-capabilities"));
	assert_int_equal(exit_code(run((const char *[]){ "--version", NULL })), 0);
	assert_non_null(strstr(out, "vmio "));
}

static void test_usage_errors(void **state)
{
	static const char *const cases[][5] = {
		{ NULL },
		{ "nosuchcommand", NULL },
		{ "loopback", NULL },
		{ "loopback", "--bogus", NULL },
		{ "loopback", "--socket-path", NULL },
		{ "loopback", "--socket-path", "/tmp/x", "--fd" },
		{ "loopback", "--queue-size", "1000", NULL },
		{ "loopback", "--fd", "abc", NULL },
	};
	static const char *const expect[] = {
		"COMMAND", "unknown command 'nosuchcommand'",
		"--socket-path PATH or --fd N", "unknown option '--bogus'",
		"needs a value", "needs a value", "power of two",
		"not a file descriptor",
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(exit_code(run(cases[i])), 2);
		if (!strstr(err, expect[i]))
			fail_msg("case %zu: stderr lacks '%s': %s", i, expect[i], err);
	}
}

/* --host-port-range A-B: two ports of 0..2^32-2 (2^32-1 is
 * VMADDR_PORT_ANY), A <= B; refused with
 * the reason before anything is opened. */
static void test_vsock_host_port_range_errors(void **state)
{
	static const char *const bad[] = {
		"1024", "-65535", "1024-", "a-b", "1024-65535x", "5000-1024",
		"0-4294967296", "12345678901234567-2", "0-4294967295",
	};
	static const char *const expect[] = {
		"is not FIRST-LAST", "is not two ports", "is not two ports",
		"is not two ports", "is not two ports", "5000 is above 1024",
		"is not two ports", "is not FIRST-LAST", "VMADDR_PORT_ANY",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *args[] = { "vsock", "--guest-cid", "3", "--socket",
				       harness_path("hpr.sock"), "--uds-path",
				       harness_path("hpr.vsock"),
				       "--host-port-range", bad[i], NULL };

		assert_int_equal(exit_code(run(args)), 2);
		if (!strstr(err, "--host-port-range") ||
		    !strstr(err, expect[i]))
			fail_msg("'%s': stderr lacks '%s': %s", bad[i],
				 expect[i], err);
	}
}

static void test_print_capabilities(void **state)
{
	/* The convention: other options and arguments are ignored. */
	assert_int_equal(exit_code(run((const char *[]){
				 "vsock", "--bogus", "--print-capabilities",
				 "stray", NULL })), 0);
	assert_non_null(strstr(out, "\"type\": \"vsock\""));
	assert_non_null(strstr(out, "\"features\""));
	/* loopback is no type of QEMU's schema: refused, not invented. */
	assert_int_equal(exit_code(run((const char *[]){
				 "loopback", "--print-capabilities", NULL })), 2);
	assert_non_null(strstr(err, "no type in QEMU's vhost-user schema"));
}

/* --fd must be a unix stream socket, and --socket's directory must
 * exist: usage errors (2) that say which, as for --uds-path. */
static void test_fd_and_socket_checks(void **state)
{
	int pipefd[2], dg[2];
	char a[16], b[16];

	assert_int_equal(pipe(pipefd), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_DGRAM, 0, dg), 0);
	snprintf(a, sizeof(a), "%d", pipefd[0]);
	snprintf(b, sizeof(b), "%d", dg[0]);
	assert_int_equal(exit_code(run((const char *[]){
				 "loopback", "--fd", a, NULL })), 2);
	assert_non_null(strstr(err, "is not a socket"));
	assert_int_equal(exit_code(run((const char *[]){
				 "loopback", "--fd", b, NULL })), 2);
	assert_non_null(strstr(err, "is not a unix stream socket"));
	assert_int_equal(exit_code(run((const char *[]){
				 "loopback", "--fd", "1000", NULL })), 2);
	assert_non_null(strstr(err, "--fd 1000: Bad file descriptor"));
	assert_int_equal(exit_code(run((const char *[]){
				 "loopback", "--socket", "/nonexistent-dir/s",
				 NULL })), 2);
	assert_non_null(strstr(err, "--socket: directory '/nonexistent-dir' "
				    "does not exist"));
	/* A short option in a cluster is named as itself. */
	assert_int_equal(exit_code(run((const char *[]){
				 "vsock", "-vx", NULL })), 2);
	assert_non_null(strstr(err, "unknown option '-x'"));
	close(pipefd[0]);
	close(pipefd[1]);
	close(dg[0]);
	close(dg[1]);
}

/* vhost-device-vsock's lines: no --guest-cid means 3; a --socket that is
 * the host listener (or its seqpacket twin) is a usage error naming it. */
static void test_vsock_drop_in(void **state)
{
	const char *sock = harness_path("dropin.sock");
	const char *uds = harness_path("dropin.vsock");
	char seq[300];
	pid_t pid;

	snprintf(seq, sizeof(seq), "%s.seqpacket", uds);
	assert_int_equal(exit_code(run((const char *[]){
				 "vsock", "--uds-path", uds, "--socket", uds,
				 NULL })), 2);
	assert_non_null(strstr(err, "is where host programs connect"));
	assert_int_equal(exit_code(run((const char *[]){
				 "vsock", "--uds-path", uds, "--socket", seq,
				 NULL })), 2);
	assert_non_null(strstr(err, "is where host programs connect"));
	/* Its AF_VSOCK backend is refused by name, with what to use. */
	assert_int_equal(exit_code(run((const char *[]){
				 "vsock", "--uds-path", uds, "--socket", sock,
				 "--forward-cid", "1", NULL })), 2);
	assert_non_null(strstr(err, "--forward-cid and --forward-listen"));
	assert_non_null(strstr(err, "give --uds-path"));
	assert_int_equal(exit_code(run((const char *[]){ "vsock", "--version",
						      NULL })), 0);
	assert_non_null(strstr(out, "vmio "));
	pid = harness_spawn((const char *[]){ "vsock", "--uds-path", uds,
					      "--socket", sock, NULL });
	assert_true(harness_wait_socket(sock, 10000));
	assert_int_equal(exit_code(harness_stop(pid, 10000)), 0);
}

static void test_socket_in_use_and_sigterm(void **state)
{
	const char *sock = harness_path("in-use.sock");
	pid_t first = harness_spawn((const char *[]){
		"loopback", "--socket-path", sock, NULL });
	assert_true(harness_wait_socket(sock, 10000));

	/* A second backend on the same path must refuse, not steal it. */
	int st = run((const char *[]){ "loopback", "--socket-path", sock, NULL });
	assert_int_equal(exit_code(st), 1);
	assert_non_null(strstr(err, "a live process listens"));
	assert_true(harness_wait_socket(sock, 1000));

	assert_int_equal(kill(first, SIGTERM), 0);
	st = harness_wait_exit(first, 10000);
	assert_int_equal(exit_code(st), 0);
	/* The socket file is gone with the backend. */
	assert_int_equal(access(sock, F_OK), -1);
}

/* A second `vmio redirect` on a live listener is refused without a
 * probe connection: the first, which serves one connection only, must
 * not take the probe for it. Its one connection is then the real one. */
static void test_live_check_takes_no_connection(void **state)
{
	const char *in = harness_path("probe-in.sock");
	const char *out_path = harness_path("probe-out.sock");
	char a1[300], a2[300], got[8] = { 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int sink, c, s;
	pid_t first;

	snprintf(a1, sizeof(a1), "UNIX-LISTEN:%s", in);
	snprintf(a2, sizeof(a2), "UNIX-CONNECT:%s", out_path);
	sink = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	strncpy(sa.sun_path, out_path, sizeof(sa.sun_path) - 1);
	assert_int_equal(bind(sink, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(sink, 4), 0);
	first = harness_spawn((const char *[]){ "redirect", a1, a2, NULL });
	/* It looks in /proc/net/unix: no connection made. */
	assert_true(harness_wait_socket(in, 10000));
	assert_int_equal(exit_code(run((const char *[]){ "redirect", a1, a2,
						      NULL })), 1);
	assert_non_null(strstr(err, "a live process listens"));
	c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	strncpy(sa.sun_path, in, sizeof(sa.sun_path) - 1);
	assert_int_equal(connect(c, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(c, "hello", 5), 5);
	shutdown(c, SHUT_WR);
	s = accept(sink, NULL, NULL);
	assert_true(s >= 0);
	assert_int_equal(read(s, got, sizeof(got)), 5);
	assert_string_equal(got, "hello");
	close(s);
	close(c);
	assert_int_equal(exit_code(harness_wait_exit(first, 10000)), 0);
	close(sink);
}

static void test_stale_socket_is_replaced(void **state)
{
	const char *sock = harness_path("stale.sock");
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strncpy(sa.sun_path, sock, sizeof(sa.sun_path) - 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd); /* bound, never listened: a stale file */

	pid_t pid = harness_spawn((const char *[]){
		"loopback", "--socket-path", sock, NULL });
	assert_true(harness_wait_socket(sock, 10000));
	assert_int_equal(exit_code(harness_stop(pid, 10000)), 0);
}

static void test_sigint_exits_cleanly(void **state)
{
	const char *sock = harness_path("sigint.sock");
	pid_t pid = harness_spawn((const char *[]){
		"loopback", "--socket-path", sock, NULL });
	assert_true(harness_wait_socket(sock, 10000));
	assert_int_equal(kill(pid, SIGINT), 0);
	assert_int_equal(exit_code(harness_wait_exit(pid, 10000)), 0);
}

/* A SIGTERM the moment a socket appears ends vmio cleanly (exit 0), as
 * a VMM or a unit's stop may send it: the VM list form listens as it
 * makes each VM, so its signals must be watched before the first. vmio
 * died of the signal (143) here in 198 of 200 tries before. */
static void test_sigterm_at_first_socket(void **state)
{
	const char *conf = harness_path("two-vms.yaml");
	const char *first = harness_path("vm-a.sock");
	FILE *f = fopen(conf, "w");
	struct stat st;

	assert_non_null(f);
	fprintf(f, "vms:\n"
		   "  - guest_cid: 3\n    socket: %s\n    uds_path: %s\n"
		   "  - guest_cid: 4\n    socket: %s\n    uds_path: %s\n",
		first, harness_path("vm-a.vsock"), harness_path("vm-b.sock"),
		harness_path("vm-b.vsock"));
	assert_int_equal(fclose(f), 0);
	for (int i = 0; i < 20; i++) {
		pid_t pid = harness_spawn((const char *[]){
			"vsock", "--config", conf, "-q", NULL });
		int status;

		/* The file, not a connection: no session to wait for. Each
		 * look waits up to 1 ms for vmio's exit, which must not come;
		 * HARNESS_WAIT_MS looks at most. */
		for (int ms = 0; stat(first, &st) || !S_ISSOCK(st.st_mode);
		     ms++) {
			assert_true(ms < HARNESS_WAIT_MS);
			assert_int_equal(harness_wait_exit(pid, 1), -1);
		}
		assert_int_equal(kill(pid, SIGTERM), 0);
		status = harness_wait_exit(pid, HARNESS_WAIT_MS);
		assert_true(WIFEXITED(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_int_equal(access(first, F_OK), -1);
	}
}

static void test_fd_mode_exits_when_frontend_leaves(void **state)
{
	int sv[2];
	/* Only the backend's end may reach the child, or the child would hold
	 * the front end's end open itself and never see it leave. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(fcntl(sv[1], F_SETFD, 0), 0);
	char fdarg[16];
	snprintf(fdarg, sizeof(fdarg), "%d", sv[1]);
	pid_t pid = harness_spawn((const char *[]){ "loopback", "--fd", fdarg, NULL });
	close(sv[1]);
	close(sv[0]); /* the front end goes away */
	assert_int_equal(exit_code(harness_wait_exit(pid, 10000)), 0);
}

/* Socket activation: --fd names a listening socket the caller made.
 * vmio accepts front ends on it one after another, as on its own
 * --socket-path, exits 0 on SIGTERM, and leaves the file, which is not
 * its own. */
static void test_fd_listening(void **state)
{
	const char *sock = harness_path("activated.sock");
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	char fdarg[16];
	pid_t pid;

	strncpy(sa.sun_path, sock, sizeof(sa.sun_path) - 1);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 4), 0);
	snprintf(fdarg, sizeof(fdarg), "%d", lfd);
	pid = harness_spawn((const char *[]){ "loopback", "--fd", fdarg, NULL });
	close(lfd);
	for (int i = 0; i < 2; i++) {
		struct vmio_fe *fe = vmio_fe_connect(sock, 10000);

		assert_non_null(fe);
		assert_int_equal(vmio_fe_negotiate(fe, 1ull << 32, 0), 0);
		vmio_fe_close(fe);
	}
	assert_int_equal(kill(pid, 0), 0); /* still serving */
	assert_int_equal(exit_code(harness_stop(pid, 10000)), 0);
	assert_int_equal(access(sock, F_OK), 0);
}

/* vmio stats: the document of a running device, raw or indented; the
 * problems it names and its exit statuses. */
static void test_stats(void **state)
{
	const char *sock = harness_path("stats.sock");
	const char *ctl = harness_path("stats.ctl");
	const char *plain = harness_path("plain-file");
	json_error_t jerr;
	json_t *doc;
	int fd;

	(void)state;
	pid_t pid = harness_spawn((const char *[]){ "loopback", "--socket",
						    sock, "--control", ctl,
						    NULL });
	assert_true(harness_wait_socket(ctl, HARNESS_WAIT_MS));
	assert_int_equal(exit_code(run((const char *[]){ "stats", "--json",
							 ctl, NULL })), 0);
	doc = json_loads(out, 0, &jerr);
	if (!doc)
		fail_msg("vmio stats --json: not JSON: %s", jerr.text);
	assert_string_equal(json_string_value(json_object_get(doc, "device")),
			    "loopback");
	assert_int_equal(harness_json_num(doc, "backends.0.sessions"), 0);
	json_decref(doc);
	/* Indented: the same document, one member a line. */
	assert_int_equal(exit_code(run((const char *[]){ "stats", ctl, NULL })),
			 0);
	assert_non_null(strstr(out, "\n  \"device\": \"loopback\",\n"));
	doc = json_loads(out, 0, &jerr);
	assert_non_null(doc);
	json_decref(doc);
	assert_int_equal(exit_code(harness_stop(pid, HARNESS_WAIT_MS)), 0);
	/* The socket file went with the device. */
	assert_int_equal(access(ctl, F_OK), -1);

	assert_int_equal(exit_code(run((const char *[]){ "stats", ctl, NULL })),
			 1);
	assert_non_null(strstr(err, "No such file or directory"));
	fd = open(plain, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(exit_code(run((const char *[]){ "stats", plain,
							 NULL })), 1);
	assert_non_null(strstr(err, "plain-file"));
	assert_int_equal(exit_code(run((const char *[]){ "stats", NULL })), 2);
	assert_non_null(strstr(err, "PATH is required"));
	assert_int_equal(exit_code(run((const char *[]){ "stats", "a", "b",
							 NULL })), 2);
	assert_int_equal(exit_code(run((const char *[]){ "stats", "--timeout",
							 "0", ctl, NULL })), 2);
	assert_int_equal(exit_code(run((const char *[]){ "loopback", "--socket",
							 sock, "--control",
							 "/nonexistent-dir/c",
							 NULL })), 2);
	assert_non_null(strstr(err, "--control: directory '/nonexistent-dir'"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_help),
		cmocka_unit_test(test_stats),
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_vsock_host_port_range_errors),
		cmocka_unit_test(test_print_capabilities),
		cmocka_unit_test(test_fd_and_socket_checks),
		cmocka_unit_test(test_fd_listening),
		cmocka_unit_test(test_vsock_drop_in),
		cmocka_unit_test(test_socket_in_use_and_sigterm),
		cmocka_unit_test(test_live_check_takes_no_connection),
		cmocka_unit_test(test_stale_socket_is_replaced),
		cmocka_unit_test(test_sigint_exits_cleanly),
		cmocka_unit_test(test_sigterm_at_first_socket),
		cmocka_unit_test(test_fd_mode_exits_when_frontend_leaves),
	};
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
