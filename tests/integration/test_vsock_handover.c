/* `vmio vsock` handed over to a successor (issue 36), with the in-tree
 * driver as the guest: reloaded again and again while bytes are held
 * both ways, every byte checked, the connections open across every
 * reload (an idle one, a host program half way through its CONNECT
 * line), none reset, the guest's driver seeing no violation; two VMs on
 * two workers handed over together; and the hand-overs that must fail,
 * leaving the old process serving, saying why.
 *
 * vmio runs from a copy in the test's directory (harness_handover.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "frontend/vsock_guest.h"
#include "harness.h"
#include "harness_handover.h"

#define WAIT HARNESS_WAIT_MS
#define G2H_PORT 1234
#define H2G_PORT 5000
#define HALF_PORT 5001
#define SIB_PORT 7000
#define SIB_PIECE (16u * 1024)
/* More than the host socket takes while its reader waits, so that vmio
 * holds bytes for it at every reload; less than --tx-buffer-size. */
#define G2H_PIECE (160u * 1024)
#define H2G_PIECE (48u * 1024)

static pid_t serving = -1;  /* stopped by the teardown whatever happened */

/* ---- vmio's processes ----------------------------------------------------- */

/* vmio vsock with args after its own (NULL-terminated), from the copy. */
static pid_t start_vsock(const char *const *more)
{
	const char *args[32] = { "vsock", "--control", harness_path("ctl"),
				 "--handover-timeout", "5000" };
	unsigned n = 5;

	while (*more)
		args[n++] = *more++;
	args[n] = NULL;
	serving = harness_handover_spawn(args);
	assert_true(harness_wait_socket(harness_path("ctl"), WAIT));
	return serving;
}

static int reload(char *out, size_t size)
{
	return harness_reload(harness_path("ctl"), out, size);
}

/* A reload that must go through: the new pid. */
static pid_t reload_ok(pid_t old)
{
	serving = harness_reload_ok(harness_path("ctl"), old);
	return serving;
}

/* The last successor stops on SIGTERM as any vmio does: exit 0, with
 * nothing for a sanitizer to report. */
static void stop_serving(void)
{
	int st = harness_stop(serving, WAIT);

	serving = -1;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
}

static long long vm_num(unsigned vm, const char *key)
{
	char path[128];

	snprintf(path, sizeof(path), "vms.%u.%s", vm, key);
	return harness_control_num(harness_path("ctl"), path);
}

/* ---- Host programs --------------------------------------------------------- */

/* A connected host socket through which the guest's port is reached:
 * the CONNECT line written, the OK read once the guest accepted. */
static int host_connect(struct vg *g, const char *uds, uint32_t port,
			struct vg_sock **gs)
{
	char line[32], ok[32];
	int fd = harness_unix_connect(uds, SOCK_STREAM), err = 0;
	size_t got = 0;

	assert_true(fd >= 0);
	snprintf(line, sizeof(line), "CONNECT %u\n", port);
	assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	*gs = vg_accept(g, port, false, WAIT, &err);
	if (!*gs)
		fail_msg("guest accept on %u: %s", port, strerror(-err));
	while (got < sizeof(ok) - 1 && (got == 0 || ok[got - 1] != '\n')) {
		assert_true(harness_wait_fd(fd, POLLIN, WAIT));
		assert_int_equal(read(fd, ok + got, 1), 1);
		got++;
	}
	ok[got] = '\0';
	assert_memory_equal(ok, "OK ", 3);
	return fd;
}

static void read_checked(int fd, uint64_t seed, uint64_t off, size_t len)
{
	static uint8_t buf[G2H_PIECE];

	assert_true(len <= sizeof(buf));
	harness_read_exact(fd, buf, len);
	assert_int_equal(vg_pattern_check(seed, off, buf, len), len);
}

static void guest_read_checked(struct vg_sock *s, uint64_t seed, uint64_t off,
			       size_t len)
{
	static uint8_t buf[H2G_PIECE];
	size_t got = 0;

	assert_true(len <= sizeof(buf));
	while (got < len) {
		ssize_t n = vg_read(s, buf + got, len - got, WAIT);

		if (n <= 0)
			fail_msg("guest read: %s (%zu of %zu)",
				 n ? strerror((int)-n) : "EOF", got, len);
		got += (size_t)n;
	}
	assert_int_equal(vg_pattern_check(seed, off, buf, len), len);
}

/* ---- One VM's connections -------------------------------------------------- */

struct flows {
	struct vg *g;
	const char *uds;
	int lis;                 /* the host service at uds_G2H_PORT */
	struct vg_sock *g2h, *h2g, *idle, *idle_h2g;
	int g2h_host, h2g_host, idle_host, idle_h2g_host;
	uint64_t g2h_off, h2g_off;
};

static void flows_open(struct flows *f, struct vg *g, const char *uds)
{
	char path[300];
	int err = 0, small = 4096;

	memset(f, 0, sizeof(*f));
	f->g = g;
	f->uds = uds;
	snprintf(path, sizeof(path), "%s_%u", uds, G2H_PORT);
	f->lis = harness_unix_listen(path);
	f->g2h = vg_connect(g, G2H_PORT, WAIT, &err);
	if (!f->g2h)
		fail_msg("connect: %s", strerror(-err));
	assert_true(harness_wait_fd(f->lis, POLLIN, WAIT));
	f->g2h_host = accept4(f->lis, NULL, NULL, SOCK_CLOEXEC);
	assert_true(f->g2h_host >= 0);
	/* A slow reader: vmio holds what the socket does not take. */
	setsockopt(f->g2h_host, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	f->idle = vg_connect(g, G2H_PORT, WAIT, &err);
	assert_non_null(f->idle);
	assert_true(harness_wait_fd(f->lis, POLLIN, WAIT));
	f->idle_host = accept4(f->lis, NULL, NULL, SOCK_CLOEXEC);
	assert_true(f->idle_host >= 0);
	assert_int_equal(vg_listen(g, H2G_PORT), 0);
	f->h2g_host = host_connect(g, uds, H2G_PORT, &f->h2g);
	f->idle_h2g_host = host_connect(g, uds, H2G_PORT, &f->idle_h2g);
}

/* Bytes on their way both ways, not yet taken by their readers. */
static void flows_send(struct flows *f, uint8_t *buf)
{
	vg_pattern_fill(1, f->g2h_off, buf, G2H_PIECE);
	assert_int_equal(vg_write(f->g2h, buf, G2H_PIECE, WAIT), G2H_PIECE);
	vg_pattern_fill(2, f->h2g_off, buf, H2G_PIECE);
	assert_int_equal(write(f->h2g_host, buf, H2G_PIECE), H2G_PIECE);
}

/* ...and taken, every byte checked. */
static void flows_take(struct flows *f)
{
	read_checked(f->g2h_host, 1, f->g2h_off, G2H_PIECE);
	f->g2h_off += G2H_PIECE;
	guest_read_checked(f->h2g, 2, f->h2g_off, H2G_PIECE);
	f->h2g_off += H2G_PIECE;
}

/* The idle connections carry bytes both ways still; nothing was reset. */
static void flows_close(struct flows *f)
{
	struct vg_sock *all[] = { f->g2h, f->h2g, f->idle, f->idle_h2g };
	char c = 0;

	assert_int_equal(vg_write(f->idle, "i", 1, WAIT), 1);
	assert_true(harness_wait_fd(f->idle_host, POLLIN, WAIT));
	assert_int_equal(read(f->idle_host, &c, 1), 1);
	assert_int_equal(c, 'i');
	assert_int_equal(write(f->idle_h2g_host, "j", 1), 1);
	assert_int_equal(vg_read(f->idle_h2g, &c, 1, WAIT), 1);
	assert_int_equal(c, 'j');
	for (unsigned i = 0; i < 4; i++) {
		struct vg_sock_info info;

		vg_sock_info(all[i], &info);
		assert_false(info.reset);
		assert_true(info.established);
		vg_close(all[i]);
	}
	close(f->g2h_host);
	close(f->h2g_host);
	close(f->idle_host);
	close(f->idle_h2g_host);
	close(f->lis);
}

/* ---- Cases ------------------------------------------------------------------ */

static int case_setup(void **state)
{
	(void)state;
	harness_log_clear();
	return 0;
}

static int case_teardown(void **state)
{
	(void)state;
	harness_handover_end(&serving);
	return 0;
}

/* Ten reloads, each with bytes held both ways, and a host program that
 * wrote half its CONNECT line before the first and finishes after the
 * last: nothing lost, repeated or reset, the counters carried over. */
static void test_reload_under_streams(void **state)
{
	static uint8_t buf[G2H_PIECE];
	/* The half line waits through all ten reloads: longer than the
	 * default --connect-timeout (2 s) on a busy machine or under a
	 * sanitizer, and its expiry is not what this case checks. */
	const char *more[] = { "--guest-cid", "3", "--socket",
			       harness_path("vhost.sock"), "--uds-path",
			       harness_path("v.sock"), "--connect-timeout",
			       "20000", NULL };
	pid_t pid = start_vsock(more);
	struct vg *g;
	struct flows f;
	struct vg_sock *late;
	char err[256], ok[16] = "";
	int half, e = 0;
	size_t got = 0;

	(void)state;
	assert_true(harness_wait_socket(harness_path("vhost.sock"), WAIT));
	g = vg_open(harness_path("vhost.sock"), WAIT, NULL, err, sizeof(err));
	if (!g)
		fail_msg("%s", err);
	flows_open(&f, g, harness_path("v.sock"));
	half = harness_unix_connect(harness_path("v.sock"), SOCK_STREAM);
	assert_true(half >= 0);
	assert_int_equal(write(half, "CONNECT 50", 10), 10);
	for (unsigned k = 0; k < 10; k++) {
		flows_send(&f, buf);
		pid = reload_ok(pid);
		flows_take(&f);
	}
	/* The line finished with the last successor. */
	assert_int_equal(vg_listen(g, HALF_PORT), 0);
	assert_int_equal(write(half, "01\n", 3), 3);
	late = vg_accept(g, HALF_PORT, false, WAIT, &e);
	assert_non_null(late);
	while (got < 3 && harness_wait_fd(half, POLLIN, WAIT) &&
	       read(half, ok + got, 1) == 1)
		got++;
	assert_memory_equal(ok, "OK ", 3);
	/* Nothing was reset either way, and the counters came across each
	 * time: every byte counted once. */
	assert_int_equal(vm_num(0, "totals.rsts_received"), 0);
	assert_int_equal(vm_num(0, "totals.rsts_sent"), 0);
	assert_int_equal(vm_num(0, "connections_open"), 5);
	assert_int_equal(vm_num(0, "totals.bytes_from_guest"),
			 (long long)f.g2h_off);
	vg_close(late);
	close(half);
	flows_close(&f);
	/* What the guest saw was a device: no protocol violation. */
	if (g->violations)
		fail_msg("%llu violations, the last: %s",
			 (unsigned long long)g->violations, g->violation);
	vg_free(g);
	stop_serving();
}

/* --vm's value for a VM of CID cid whose sockets are NAME.vhost and
 * NAME.v in the test's directory. */
static void vm_arg(char *out, size_t size, unsigned cid, const char *name)
{
	char sock[64], uds[64];

	snprintf(sock, sizeof(sock), "%s.vhost", name);
	snprintf(uds, sizeof(uds), "%s.v", name);
	snprintf(out, size, "guest-cid=%u,socket=%s,uds-path=%s", cid,
		 harness_path(sock), harness_path(uds));
}

/* Two VMs on two workers handed over together, each keeping its flows,
 * and a sibling connection between them carrying bytes both ways. */
static void test_reload_two_workers(void **state)
{
	static uint8_t buf[G2H_PIECE];
	char vm1[700], vm2[700];
	const char *more[] = { "--threads", "2", "--vm", vm1, "--vm", vm2,
			       NULL };
	struct vg *g[2];
	struct vg_sock *sib[2];
	struct flows f[2];
	uint64_t sib_off = 0;
	char err[256];
	int e = 0;
	pid_t pid;

	(void)state;
	vm_arg(vm1, sizeof(vm1), 3, "a");
	vm_arg(vm2, sizeof(vm2), 4, "b");
	pid = start_vsock(more);
	assert_true(harness_wait_socket(harness_path("b.vhost"), WAIT));
	for (unsigned i = 0; i < 2; i++) {
		struct vg_opts o;

		vg_opts_init(&o);
		o.guest_cid = 3 + i;
		o.siblings = true;
		g[i] = vg_open(harness_path(i ? "b.vhost" : "a.vhost"), WAIT,
			       &o, err, sizeof(err));
		if (!g[i])
			fail_msg("%s", err);
		flows_open(&f[i], g[i], harness_path(i ? "b.v" : "a.v"));
	}
	/* A sibling connection: VM 1's guest to VM 2's, through the
	 * router. */
	assert_int_equal(vg_listen(g[1], SIB_PORT), 0);
	sib[0] = vg_connect_cid_start(g[0], 4, SIB_PORT, &e);
	assert_non_null(sib[0]);
	sib[1] = vg_accept(g[1], SIB_PORT, false, WAIT, &e);
	assert_non_null(sib[1]);
	assert_int_equal(vg_connect_wait(sib[0], WAIT), 0);
	for (unsigned k = 0; k < 3; k++) {
		for (unsigned i = 0; i < 2; i++)
			flows_send(&f[i], buf);
		vg_pattern_fill(3, sib_off, buf, SIB_PIECE);
		assert_int_equal(vg_write(sib[k % 2], buf, SIB_PIECE, WAIT),
				 SIB_PIECE);
		pid = reload_ok(pid);
		for (unsigned i = 0; i < 2; i++)
			flows_take(&f[i]);
		guest_read_checked(sib[!(k % 2)], 3, sib_off, SIB_PIECE);
		sib_off += SIB_PIECE;
	}
	assert_int_equal(vm_num(1, "worker"), 1);
	/* A reload straight after one: the successor may still be resuming
	 * its VMs on their workers, and takes the request once they serve
	 * (not "under way already"). */
	for (unsigned k = 0; k < 3; k++)
		pid = reload_ok(pid);
	/* The flow was carried: no RST either way, and it is still open. */
	for (unsigned i = 0; i < 2; i++) {
		struct vg_sock_info info;

		vg_sock_info(sib[i], &info);
		assert_false(info.reset);
		assert_int_equal(vm_num(i, "totals.rsts_sent"), 0);
		vg_close(sib[i]);
	}
	for (unsigned i = 0; i < 2; i++) {
		flows_close(&f[i]);
		assert_int_equal(g[i]->violations, 0);
		vg_free(g[i]);
	}
	stop_serving();
}

/* A VMM that stopped half way through a message (vmio-bad-vmm
 * --kind partial, the backend's --message-timeout longer than the
 * test) holds up no hand-over: its half message goes to the successor
 * with its session, and the other VM's flows go on. Its connection is
 * never closed: it connected once. */
static void test_reload_past_a_stalled_vmm(void **state)
{
	static uint8_t buf[G2H_PIECE];
	char vm1[700], vm2[700];
	const char *more[] = { "--message-timeout", "600000", "--vm", vm1,
			       "--vm", vm2, NULL };
	struct harness_bad_vmm bad;
	struct vg *g;
	struct flows f;
	char err[256];
	pid_t pid;

	(void)state;
	vm_arg(vm1, sizeof(vm1), 3, "e");
	vm_arg(vm2, sizeof(vm2), 4, "s");
	pid = start_vsock(more);
	assert_true(harness_wait_socket(harness_path("s.vhost"), WAIT));
	/* Until vmio closes it, which it must not: the hold is longer
	 * than the test. */
	harness_bad_vmm_start(&bad, harness_path("s.vhost"), "partial", NULL);
	for (unsigned w = 0; w < WAIT / 10 && !harness_bad_vmm_ready(&bad); w++)
		usleep(10000);
	assert_true(harness_bad_vmm_ready(&bad));
	g = vg_open(harness_path("e.vhost"), WAIT, NULL, err, sizeof(err));
	if (!g)
		fail_msg("%s", err);
	flows_open(&f, g, harness_path("e.v"));
	for (unsigned k = 0; k < 3; k++) {
		flows_send(&f, buf);
		pid = reload_ok(pid);
		flows_take(&f);
	}
	flows_close(&f);
	vg_free(g);
	/* The stalled VMM kept its one connection across the reloads. */
	assert_int_equal(vm_num(1, "sessions"), 1);
	harness_bad_vmm_stop(&bad);
	if (!strstr(bad.said, "connects=1 "))
		fail_msg("the stalled VMM reconnected: %s", bad.said);
	stop_serving();
}

/* The hand-overs that fail: no binary at the path, a VM list that
 * changed. Each time the reload says why and the old process serves on,
 * its flows untouched; then a reload goes through. */
static void test_reload_refused(void **state)
{
	static uint8_t buf[G2H_PIECE];
	const char *more[] = { "--config", harness_path("vms.yaml"), NULL };
	struct vg *g;
	struct flows f;
	char out[2048], err[256];
	FILE *y = fopen(harness_path("vms.yaml"), "w");
	pid_t pid;

	(void)state;
	assert_non_null(y);
	fprintf(y, "vms:\n  - guest-cid: 3\n    socket: %s\n    uds-path: %s\n",
		harness_path("c.vhost"), harness_path("c.v"));
	fclose(y);
	pid = start_vsock(more);
	assert_true(harness_wait_socket(harness_path("c.vhost"), WAIT));
	g = vg_open(harness_path("c.vhost"), WAIT, NULL, err, sizeof(err));
	if (!g)
		fail_msg("%s", err);
	flows_open(&f, g, harness_path("c.v"));

	/* No binary where this one was started from. */
	assert_int_equal(unlink(harness_handover_copy()), 0);
	flows_send(&f, buf);
	assert_int_not_equal(reload(out, sizeof(out)), 0);
	if (!strstr(out, harness_handover_copy()))
		fail_msg("the refusal does not name the binary: %s", out);
	flows_take(&f);
	assert_int_equal(harness_control_num(harness_path("ctl"), "pid"), pid);

	/* A VM more in the file than the running process serves. */
	harness_handover_install();
	y = fopen(harness_path("vms.yaml"), "a");
	assert_non_null(y);
	fprintf(y, "  - guest-cid: 4\n    socket: %s\n    uds-path: %s\n",
		harness_path("d.vhost"), harness_path("d.v"));
	fclose(y);
	flows_send(&f, buf);
	assert_int_not_equal(
		harness_reload(harness_path("ctl"), out, sizeof(out)), 0);
	if (!strstr(out, "VM 2"))
		fail_msg("the refusal does not name the VM: %s", out);
	flows_take(&f);
	assert_int_equal(harness_control_num(harness_path("ctl"), "pid"), pid);

	/* The file as it was: the reload goes through. */
	y = fopen(harness_path("vms.yaml"), "w");
	assert_non_null(y);
	fprintf(y, "vms:\n  - guest-cid: 3\n    socket: %s\n    uds-path: %s\n",
		harness_path("c.vhost"), harness_path("c.v"));
	fclose(y);
	flows_send(&f, buf);
	reload_ok(pid);
	flows_take(&f);
	flows_close(&f);
	assert_int_equal(g->violations, 0);
	vg_free(g);
	stop_serving();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reload_under_streams,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_reload_two_workers,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_reload_refused,
						case_setup, case_teardown),
		cmocka_unit_test_setup_teardown(test_reload_past_a_stalled_vmm,
						case_setup, case_teardown),
	};
	int rc;

	if (harness_handover_init())
		return 1;
	harness_test_filter();
	rc = cmocka_run_group_tests(tests, NULL, harness_group_teardown);
	return rc;
}
