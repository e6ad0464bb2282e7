/* Several VMs in one `vmio vsock` process (--vm, --config), each guest
 * played by an in-tree front end (frontend/vsock_guest.h), all driven
 * from this one thread: sibling connections in a shared group with data
 * both ways checked byte for byte, RST across groups and to unknown CIDs,
 * no CID spoofing, a VMM that goes away (its sibling connections are
 * reset, the other VMs carry on), a sibling that stops reading (its
 * neighbours' host traffic is not held up), one that ignores credit (its
 * connection is reset, nothing else), and the command line's errors.
 *
 * The host side of a guest-to-host transfer is a reader thread; cmocka's
 * assertions stay in the main thread. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include "frontend/vsock_guest.h"
#include "harness.h"

#define WAIT HARNESS_WAIT_MS
#define NVM 3
#define PORT 5000
#define CHUNK 65536

/* VMs 0 and 1 (CIDs 3 and 4) share the default group; VM 2 (CID 5) is
 * alone in group "other". */
static const uint64_t cid[NVM] = { 3, 4, 5 };

struct fleet {
	char sock[NVM][256], uds[NVM][256];
	pid_t pid;
	struct vg *g[NVM];
};

static unsigned seq;

static struct vg *guest_open(struct fleet *f, unsigned i)
{
	struct vg_opts o;
	char err[256];
	struct vg *g;

	vg_opts_init(&o);
	o.guest_cid = cid[i];
	o.siblings = true;
	g = vg_open(f->sock[i], WAIT, &o, err, sizeof(err));
	if (!g)
		fail_msg("VM %u: %s", i, err);
	return g;
}

static void fleet_paths(struct fleet *f)
{
	seq++;
	for (unsigned i = 0; i < NVM; i++) {
		snprintf(f->sock[i], sizeof(f->sock[i]), "%s/f%u-vhost%u.sock",
			 harness_tmpdir(), seq, i);
		snprintf(f->uds[i], sizeof(f->uds[i]), "%s/f%u-vm%u.vsock",
			 harness_tmpdir(), seq, i);
	}
}

static void fleet_start(struct fleet *f, const char *const args[])
{
	f->pid = harness_spawn(args);
	assert_true(f->pid > 0);
	for (unsigned i = 0; i < NVM; i++)
		if (!harness_wait_socket(f->sock[i], WAIT))
			fail_msg("vmio did not listen on %s", f->sock[i]);
	for (unsigned i = 0; i < NVM; i++)
		f->g[i] = guest_open(f, i);
}

static int fleet_setup(void **state)
{
	static struct fleet fl;
	struct fleet *f = &fl;
	char vm[NVM][700];
	const char *args[2 * NVM + 2] = { "vsock" };

	memset(f, 0, sizeof(*f));
	fleet_paths(f);
	for (unsigned i = 0; i < NVM; i++) {
		snprintf(vm[i], sizeof(vm[i]),
			 "guest-cid=%" PRIu64 ",socket=%s,uds-path=%s%s",
			 cid[i], f->sock[i], f->uds[i],
			 i == 2 ? ",groups=other" : "");
		args[1 + 2 * i] = "--vm";
		args[2 + 2 * i] = vm[i];
	}
	fleet_start(f, args);
	*state = f;
	return 0;
}

/* The same VMs from a YAML file. */
static int fleet_config_setup(void **state)
{
	static struct fleet fl;
	struct fleet *f = &fl;
	const char *path;
	FILE *cf;

	memset(f, 0, sizeof(*f));
	fleet_paths(f);
	path = harness_path("vms.yaml");
	cf = fopen(path, "w");
	assert_non_null(cf);
	fprintf(cf, "# written by test_vsock_siblings\nvms:\n");
	for (unsigned i = 0; i < NVM; i++)
		fprintf(cf, "  - guest_cid: %" PRIu64 "\n    socket: %s\n"
			    "    uds_path: %s\n    groups: %s\n",
			cid[i], f->sock[i], f->uds[i],
			i == 2 ? "other" : "default+spare");
	fclose(cf);
	fleet_start(f, (const char *const[]){ "vsock", "--config", path,
					       NULL });
	*state = f;
	return 0;
}

static int fleet_teardown(void **state)
{
	struct fleet *f = *state;
	int st;

	for (unsigned i = 0; i < NVM; i++) {
		vg_free(f->g[i]);
		f->g[i] = NULL;
	}
	st = harness_stop(f->pid, 5000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	return 0;
}

static void assert_clean(struct fleet *f, unsigned i)
{
	if (f->g[i]->violations)
		fail_msg("VM %u saw the device break the protocol %" PRIu64
			 " times; last: %s",
			 i, f->g[i]->violations, f->g[i]->violation);
}

/* Guest a connects to guest b's port; b accepts. */
static void sib_connect(struct fleet *f, unsigned a, unsigned b,
			uint32_t port, struct vg_sock **sa, struct vg_sock **sb)
{
	int err = 0;

	assert_int_equal(vg_listen(f->g[b], port), 0);
	*sa = vg_connect_cid_start(f->g[a], cid[b], port, &err);
	assert_non_null(*sa);
	*sb = vg_accept(f->g[b], port, false, WAIT, &err);
	if (!*sb)
		fail_msg("VM %u did not get VM %u's REQUEST: %d", b, a, err);
	assert_int_equal(vg_connect_wait(*sa, WAIT), 0);
}

/* Closes a connection between VMs 0 and 1, which saw nothing wrong. */
static void close_pair(struct fleet *f, struct vg_sock *a, struct vg_sock *b)
{
	vg_close(a);
	vg_close(b);
	assert_clean(f, 0);
	assert_clean(f, 1);
}

/* Streams total bytes of a pattern from s to r, reading each write on
 * the other side before the next (one thread drives both guests). */
static void pump(struct vg_sock *s, struct vg_sock *r, uint64_t total,
		 uint64_t seed)
{
	static uint8_t buf[CHUNK];
	uint64_t sent = 0, got = 0;

	while (sent < total) {
		size_t n = total - sent < CHUNK ? (size_t)(total - sent)
						: CHUNK;
		ssize_t w;

		vg_pattern_fill(seed, sent, buf, n);
		w = vg_write(s, buf, n, WAIT);
		if (w != (ssize_t)n)
			fail_msg("write at %" PRIu64 ": %zd", sent, w);
		sent += n;
		while (got < sent) {
			ssize_t k = vg_read(r, buf, sizeof(buf), WAIT);

			if (k <= 0)
				fail_msg("read at %" PRIu64 ": %zd", got, k);
			if (vg_pattern_check(seed, got, buf, (size_t)k) !=
			    (size_t)k)
				fail_msg("wrong data near offset %" PRIu64,
					 got);
			got += (uint64_t)k;
		}
	}
}

/* Waits until s is reset. */
static bool wait_reset(struct vg *g, struct vg_sock *s, int ms)
{
	struct vg_sock_info i;

	for (int n = 0; n < ms / 20; n++) {
		vg_sock_info(s, &i);
		if (i.reset)
			return true;
		if (vg_poll(g, 20) < 0)
			return false;
	}
	vg_sock_info(s, &i);
	return i.reset;
}

/* ---- host side: a reader thread at <uds>_<port> ---- */

struct host_reader {
	int lfd;
	uint64_t want, got, seed;
	bool bad;
	pthread_t t;
};

static void *host_reader_main(void *arg)
{
	struct host_reader *h = arg;
	static uint8_t buf[CHUNK];
	struct pollfd p = { .fd = h->lfd, .events = POLLIN };
	int fd;

	if (poll(&p, 1, WAIT) != 1)
		return NULL;
	fd = accept4(h->lfd, NULL, NULL, SOCK_CLOEXEC);
	p.fd = fd;
	while (fd >= 0 && h->got < h->want && poll(&p, 1, WAIT) == 1) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		if (vg_pattern_check(h->seed, h->got, buf, (size_t)n) !=
		    (size_t)n)
			h->bad = true;
		h->got += (uint64_t)n;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static void host_reader_start(struct host_reader *h, const char *uds,
			      uint32_t port, uint64_t want)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	memset(h, 0, sizeof(*h));
	h->want = want;
	h->seed = port;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s_%u", uds, port);
	h->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(h->lfd >= 0);
	assert_int_equal(bind(h->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(h->lfd, 4), 0);
	assert_int_equal(pthread_create(&h->t, NULL, host_reader_main, h), 0);
}

static void host_reader_join(struct host_reader *h)
{
	pthread_join(h->t, NULL);
	close(h->lfd);
	assert_false(h->bad);
	assert_int_equal(h->got, h->want);
}

/* A guest-to-host transfer of a pattern, in steps. */
struct host_xfer {
	struct host_reader h;
	struct vg_sock *s;
	uint32_t port;
	uint64_t sent;
};

static void xfer_start(struct host_xfer *x, struct fleet *f, unsigned i,
		       uint32_t port, uint64_t total)
{
	int err = 0;

	host_reader_start(&x->h, f->uds[i], port, total);
	x->port = port;
	x->sent = 0;
	x->s = vg_connect(f->g[i], port, WAIT, &err);
	if (!x->s)
		fail_msg("VM %u: connect to the host: %d", i, err);
}

static void xfer_write(struct host_xfer *x, uint64_t bytes)
{
	static uint8_t buf[CHUNK];

	for (uint64_t end = x->sent + bytes; x->sent < end;
	     x->sent += CHUNK) {
		vg_pattern_fill(x->port, x->sent, buf, CHUNK);
		assert_int_equal(vg_write(x->s, buf, CHUNK, WAIT), CHUNK);
	}
}

static void xfer_finish(struct host_xfer *x)
{
	host_reader_join(&x->h);
	vg_close(x->s);
}

/* Guest i sends total bytes to the host reader on port. */
static void to_host(struct fleet *f, unsigned i, uint32_t port,
		    uint64_t total)
{
	struct host_xfer x;

	xfer_start(&x, f, i, port, total);
	xfer_write(&x, total);
	xfer_finish(&x);
}

/* ---- cases ---- */

static void test_sibling_stream(void **state)
{
	struct fleet *f = *state;
	struct vg_sock *a, *b;
	struct vg_sock_info i;

	sib_connect(f, 0, 1, PORT, &a, &b);
	vg_sock_info(b, &i);
	/* 64 KiB packets cross into 4 KiB rx buffers: split on the way. */
	pump(a, b, 8u << 20, 1);
	pump(b, a, 2u << 20, 2);
	/* The other way round, on another port, at the same time. */
	{
		struct vg_sock *c, *d;

		sib_connect(f, 1, 0, PORT + 1, &c, &d);
		pump(c, d, 1u << 20, 3);
		pump(a, b, 1u << 20, 4);
		vg_close(c);
		assert_true(wait_reset(f->g[0], d, WAIT));
		vg_close(d);
	}
	/* A half close crosses as a SHUTDOWN. */
	assert_int_equal(vg_shutdown(a, VSOCK_SHUTDOWN_SEND), 0);
	{
		char x;

		assert_int_equal(vg_read(b, &x, 1, WAIT), 0);
	}
	vg_close(a);
	assert_true(wait_reset(f->g[1], b, WAIT));
	vg_close(b);
	for (unsigned k = 0; k < NVM; k++)
		assert_clean(f, k);
}

static void test_group_isolation(void **state)
{
	struct fleet *f = *state;
	int err = 0;

	assert_int_equal(vg_listen(f->g[0], PORT), 0);
	assert_int_equal(vg_listen(f->g[2], PORT), 0);
	/* CID 5 is in another group: both ways refused, never delivered. */
	assert_null(vg_connect_cid(f->g[2], cid[0], PORT, WAIT, &err));
	assert_int_equal(err, -ECONNREFUSED);
	assert_null(vg_connect_cid(f->g[0], cid[2], PORT, WAIT, &err));
	assert_int_equal(err, -ECONNREFUSED);
	/* No VM has CID 99; and the host's own, reached through vmio,
	 * still works alongside. */
	assert_null(vg_connect_cid(f->g[1], 99, PORT, WAIT, &err));
	assert_int_equal(err, -ECONNREFUSED);
	to_host(f, 2, 6000, 1u << 20);
	/* The refused REQUESTs never reached a listener. */
	assert_null(vg_accept(f->g[0], PORT, false, 0, &err));
	assert_null(vg_accept(f->g[2], PORT, false, 0, &err));
	for (unsigned k = 0; k < NVM; k++)
		assert_clean(f, k);
}

/* A guest cannot send as another: a REQUEST with VM 1's CID as source,
 * sent by VM 0 to VM 1, is dropped; VM 1 sees only the honest one that
 * follows it. */
static void test_no_spoofing(void **state)
{
	struct fleet *f = *state;
	struct vsock_hdr h = {
		.src_cid = cid[2], /* not VM 0's */
		.dst_cid = cid[1],
		.src_port = 777,
		.dst_port = PORT,
		.type = VSOCK_TYPE_STREAM,
		.op = VSOCK_OP_REQUEST,
		.buf_alloc = 65536,
	};
	struct vg_sock *a, *b;
	struct vg_sock_info i;

	assert_int_equal(vg_send_hdr(f->g[0], &h, NULL, 0, WAIT), 0);
	h.src_cid = cid[1]; /* VM 1's own, as if from itself */
	assert_int_equal(vg_send_hdr(f->g[0], &h, NULL, 0, WAIT), 0);
	sib_connect(f, 0, 1, PORT, &a, &b);
	vg_sock_info(b, &i);
	assert_int_not_equal(i.peer_port, 777);
	pump(a, b, 65536, 5);
	vg_close(a);
	vg_close(b);
	assert_clean(f, 1);
}

/* VM 1's VMM goes away while VM 0 has a sibling connection to it and a
 * transfer to the host: the sibling connection is reset, the host
 * transfer completes, and a new VMM for VM 1 is served afresh. */
static void test_vmm_gone(void **state)
{
	struct fleet *f = *state;
	struct vg_sock *a, *b, *c, *d;
	char x;

	struct host_xfer hx;

	sib_connect(f, 0, 1, PORT, &a, &b);
	pump(a, b, 1u << 20, 6);
	/* VM 0 is halfway through a transfer to the host when VM 1's VMM
	 * goes. */
	xfer_start(&hx, f, 0, 6001, 16u << 20);
	xfer_write(&hx, 8u << 20);
	vg_free(f->g[1]);
	f->g[1] = NULL;
	assert_true(wait_reset(f->g[0], a, WAIT));
	assert_int_equal(vg_read(a, &x, 1, WAIT), -ECONNRESET);
	vg_close(a);
	xfer_write(&hx, 8u << 20);
	xfer_finish(&hx);
	/* With no VMM, VM 1 cannot be reached. */
	{
		int err = 0;

		assert_null(vg_connect_cid(f->g[0], cid[1], PORT, WAIT, &err));
		assert_int_equal(err, -ECONNREFUSED);
	}
	f->g[1] = guest_open(f, 1);
	sib_connect(f, 0, 1, PORT + 2, &c, &d);
	pump(d, c, 1u << 20, 7);
	close_pair(f, c, d);
}

/* VM 1 stops taking packets (its driver is not polled, so its rx ring
 * fills): VM 0's sibling connection waits on credit, its host transfer
 * does not wait at all, and once VM 1 reads again everything arrives. */
static void test_stalled_sibling(void **state)
{
	struct fleet *f = *state;
	static uint8_t buf[CHUNK];
	struct vg_sock *a, *b;
	struct vg_sock_info i;
	uint64_t sent = 0, got = 0;

	sib_connect(f, 0, 1, PORT, &a, &b);
	/* Up to VM 1's whole buffer, unread: no credit update comes. */
	vg_sock_info(a, &i);
	while (sent < i.peer_credit) {
		vg_pattern_fill(8, sent, buf, CHUNK);
		assert_int_equal(vg_write(a, buf, CHUNK, WAIT), CHUNK);
		sent += CHUNK;
	}
	to_host(f, 0, 6002, 16u << 20);
	while (got < sent) {
		ssize_t k = vg_read(b, buf, sizeof(buf), WAIT);

		assert_true(k > 0);
		assert_int_equal(vg_pattern_check(8, got, buf, (size_t)k), k);
		got += (uint64_t)k;
	}
	pump(a, b, 1u << 20, 9);
	close_pair(f, a, b);
}

/* VM 0 ignores credit and floods a VM 1 that reads nothing: once VM 1's
 * share of vmio's queue for VM 0 is full the connection is reset, and
 * VM 0 keeps working (another sibling connection, the host). */
static void test_credit_flood(void **state)
{
	struct fleet *f = *state;
	static uint8_t buf[CHUNK];
	struct vg_sock *a, *b, *c, *d;
	struct vg_sock_info i;
	struct vsock_hdr h;
	unsigned n;

	sib_connect(f, 0, 1, PORT, &a, &b);
	vg_sock_info(a, &i);
	h = (struct vsock_hdr){
		.src_cid = cid[0],
		.dst_cid = cid[1],
		.src_port = i.local_port,
		.dst_port = i.peer_port,
		.len = CHUNK,
		.type = VSOCK_TYPE_STREAM,
		.op = VSOCK_OP_RW,
		.buf_alloc = 256 * 1024,
	};
	memset(buf, 'x', sizeof(buf));
	/* 6 MiB, well past the 4 MiB a pair may queue. */
	for (n = 0; n < 96 && !i.reset; n++) {
		assert_int_equal(vg_send_hdr(f->g[0], &h, buf, CHUNK, WAIT),
				 0);
		vg_poll(f->g[0], 0);
		vg_sock_info(a, &i);
	}
	assert_true(wait_reset(f->g[0], a, WAIT));
	assert_true(harness_log_contains("not taking its packets"));
	vg_close(a);
	to_host(f, 0, 6003, 1u << 20);
	/* VM 1 now drains what was queued, sees the reset, and takes new
	 * connections. Its driver saw data beyond the credit it gave: the
	 * sender's fault, forwarded as sent, so its violations are not
	 * checked here. */
	assert_true(wait_reset(f->g[1], b, WAIT));
	vg_close(b);
	sib_connect(f, 0, 1, PORT + 3, &c, &d);
	pump(c, d, 1u << 20, 10);
	vg_close(c);
	vg_close(d);
	assert_clean(f, 0);
}

/* ---- command line ---- */

static void expect_usage(const char *const args[], const char *says)
{
	char out[512], err[2048];
	int st = harness_run(args, WAIT, out, sizeof(out), err, sizeof(err));

	if (st < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 2 ||
	    !strstr(err, says))
		fail_msg("exit %d, stderr '%s' (wanted 2 and '%s')", st, err,
			 says);
}

static void test_cli_errors(void **state)
{
	char a[300], b[300], c[300];
	const char *yaml = harness_path("bad.yaml");
	FILE *cf;

	snprintf(a, sizeof(a), "guest-cid=3,socket=%s,uds-path=%s",
		 harness_path("a.sock"), harness_path("a.vsock"));
	snprintf(b, sizeof(b), "guest-cid=3,socket=%s,uds-path=%s",
		 harness_path("b.sock"), harness_path("b.vsock"));
	snprintf(c, sizeof(c), "guest-cid=4,socket=%s,uds-path=%s",
		 harness_path("b.sock"), harness_path("a.vsock"));
	expect_usage((const char *const[]){ "vsock", "--vm", a, "--vm", b,
					    NULL },
		     "guest-cid 3 is VM 1's too");
	expect_usage((const char *const[]){ "vsock", "--vm", a, "--vm", c,
					    NULL },
		     "uds-path");
	expect_usage((const char *const[]){ "vsock", "--vm", a, "--guest-cid",
					    "4", NULL },
		     "--guest-cid cannot be used with --vm");
	expect_usage((const char *const[]){ "vsock", "--vm", a, "--socket",
					    "/tmp/x", NULL },
		     "--socket cannot be used with --vm");
	expect_usage((const char *const[]){ "vsock", "--vm", a, "--groups",
					    "x", NULL },
		     "--groups cannot be used with --vm");
	expect_usage((const char *const[]){ "vsock", "--guest-cid", "3",
					    "--socket", "s", "--uds-path", "u",
					    "--groups", "a++b", NULL },
		     "--groups: 'a++b' has an empty group name");
	expect_usage((const char *const[]){ "vsock", "--vm",
					    "guest-cid=3,socket=s", NULL },
		     "uds-path is required");
	expect_usage((const char *const[]){ "vsock", "--vm",
					    "guest-cid=3,colour=red", NULL },
		     "unknown key 'colour'");
	expect_usage((const char *const[]){ "vsock", "--vm",
					    "guest-cid=3,socket=s,uds-path="
					    "/nonexistent-dir/u",
					    NULL },
		     "VM 1: uds-path: directory '/nonexistent-dir'");
	cf = fopen(yaml, "w");
	assert_non_null(cf);
	fprintf(cf, "vms:\n  - guest_cid: 3\n    socket: s\n"
		    "    uds_path: u\n    queue_size: 1000\n");
	fclose(cf);
	expect_usage((const char *const[]){ "vsock", "--config", yaml, NULL },
		     ":5: vms[0]: queue-size: '1000'");
	cf = fopen(yaml, "w");
	assert_non_null(cf);
	fprintf(cf, "vms:\n  - {guest_cid: 3, socket: s, uds_path: u}\n"
		    "  - {guest_cid: 3, socket: t, uds_path: v}\n");
	fclose(cf);
	expect_usage((const char *const[]){ "vsock", "--config", yaml, NULL },
		     "bad.yaml: VM 2 (line 3): guest-cid 3 is VM 1's too");
	expect_usage((const char *const[]){ "vsock", "--config", yaml, "--vm",
					    a, NULL },
		     "--vm and --config cannot be used together");
	expect_usage((const char *const[]){ "vsock", "--config",
					    harness_path("missing.yaml"),
					    NULL },
		     "missing.yaml: No such file");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_sibling_stream,
						fleet_setup, fleet_teardown),
		cmocka_unit_test_setup_teardown(test_group_isolation,
						fleet_setup, fleet_teardown),
		cmocka_unit_test_setup_teardown(test_no_spoofing, fleet_setup,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_vmm_gone, fleet_setup,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_stalled_sibling,
						fleet_config_setup,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_credit_flood, fleet_setup,
						fleet_teardown),
		cmocka_unit_test(test_cli_errors),
	};
	int rc = cmocka_run_group_tests(tests, NULL, harness_group_teardown);

	return rc;
}
