/* Several VMs in one `vmio vsock` process (--vm, --config), each guest
 * played by an in-tree front end (frontend/vsock_guest.h), all driven
 * from this one thread: sibling connections in a shared group with data
 * both ways checked byte for byte, RST across groups and to unknown CIDs,
 * no CID spoofing, a VMM that goes away (its sibling connections are
 * reset, the other VMs carry on), a sibling that stops reading (its
 * neighbours' host traffic is not held up), one that ignores credit (its
 * connection is reset, nothing else), and the command line's errors.
 *
 * The same under worker threads (--threads: one loop, the default, and a
 * worker per VM), and what only threads can get wrong: a VMM that goes
 * while a sibling on another worker is sending to it, a memory table
 * changed under sibling traffic, SIGTERM while every worker streams,
 * and thread=K putting a VM where it says.
 *
 * The host side of a guest-to-host transfer is a reader thread; cmocka's
 * assertions stay in the main thread. A guest driven from a thread of
 * its own (vg is not shared) reports back through its struct. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/un.h>
#include <unistd.h>

#include "frontend/vsock_guest.h"
#include "harness.h"

#include <jansson.h>

#define WAIT HARNESS_WAIT_MS
#define NVM 3
#define PORT 5000
#define CHUNK 65536

/* VMs 0 and 1 (CIDs 3 and 4) share the default group; VM 2 (CID 5) is
 * alone in group "other". */
static const uint64_t cid[NVM] = { 3, 4, 5 };

struct fleet {
	char sock[NVM][256], uds[NVM][256], ctl[256];
	pid_t pid;
	struct vg *g[NVM];
};

static unsigned seq;
/* Guests that take mergeable rx buffers: sibling packets of 64 KiB then
 * reach them whole, over several buffers. */
static bool guest_mrg[NVM];

static struct vg *guest_open(struct fleet *f, unsigned i)
{
	struct vg_opts o;
	char err[256];
	struct vg *g;

	vg_opts_init(&o);
	o.guest_cid = cid[i];
	o.siblings = true;
	o.mergeable = guest_mrg[i];
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
	snprintf(f->ctl, sizeof(f->ctl), "%s/f%u.ctl", harness_tmpdir(), seq);
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

/* The fleet from --vm arguments; threads: the --threads value, or NULL
 * for the default; vm_extra: appended to every --vm (",thread=0"). */
static int fleet_setup_with(void **state, const char *threads,
			    const char *const vm_extra[NVM])
{
	static struct fleet fl;
	struct fleet *f = &fl;
	char vm[NVM][700];
	const char *args[2 * NVM + 6] = { "vsock" };
	unsigned n = 1;

	memset(f, 0, sizeof(*f));
	fleet_paths(f);
	for (unsigned i = 0; i < NVM; i++) {
		snprintf(vm[i], sizeof(vm[i]),
			 "guest-cid=%" PRIu64 ",socket=%s,uds-path=%s%s%s",
			 cid[i], f->sock[i], f->uds[i],
			 i == 2 ? ",groups=other" : "",
			 vm_extra ? vm_extra[i] : "");
		args[n++] = "--vm";
		args[n++] = vm[i];
	}
	if (threads) {
		args[n++] = "--threads";
		args[n++] = threads;
	}
	args[n++] = "--control";
	args[n++] = f->ctl;
	fleet_start(f, args);
	*state = f;
	return 0;
}

static int fleet_setup(void **state)
{
	return fleet_setup_with(state, NULL, NULL);
}

/* One loop for all: the program before worker threads. */
static int fleet_setup_one_loop(void **state)
{
	return fleet_setup_with(state, "1", NULL);
}

/* A worker per VM: every sibling packet crosses threads. */
static int fleet_setup_worker_each(void **state)
{
	return fleet_setup_with(state, "3", NULL);
}

/* VM 1 takes mergeable rx buffers, VM 0 does not: one sender's 64 KiB
 * packets go whole to one and in pieces to the other. */
static int fleet_setup_mergeable(void **state)
{
	guest_mrg[1] = true;
	return fleet_setup_with(state, "3", NULL);
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
		guest_mrg[i] = false;
	}
	if (!f->pid) /* the test stopped it */
		return 0;
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
	uint64_t bad_at; /* the first wrong byte's offset, if bad */
	pthread_t t;
};

static void *host_reader_main(void *arg)
{
	struct host_reader *h = arg;
	/* One per reader: a test may run several at once. */
	static __thread uint8_t buf[CHUNK];
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
		if (!h->bad && vg_pattern_check(h->seed, h->got, buf,
						 (size_t)n) != (size_t)n) {
			h->bad = true;
			h->bad_at = h->got + vg_pattern_check(h->seed, h->got,
							      buf, (size_t)n);
		}
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

/* A client that reads the control socket over and over, from a thread of
 * its own, while the VMs' workers carry traffic: each document is
 * assembled from snapshots the workers take themselves. */
struct ctl_reader {
	const char *path;
	atomic_bool stop;
	unsigned docs, bad;
	pthread_t thread;
};

static void *ctl_reader_main(void *opaque)
{
	struct ctl_reader *r = opaque;
	static char buf[1 << 16];

	while (!atomic_load(&r->stop)) {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		size_t got = 0;
		ssize_t n;

		strcpy(sa.sun_path, r->path);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
			r->bad++;
			if (fd >= 0)
				close(fd);
			continue;
		}
		while ((n = read(fd, buf + got, sizeof(buf) - got)) > 0)
			got += (size_t)n;
		close(fd);
		if (got > 2 && buf[0] == '{' && buf[got - 2] == '}')
			r->docs++;
		else
			r->bad++;
	}
	return NULL;
}

static void test_control_during_traffic(void **state)
{
	struct fleet *f = *state;
	static struct ctl_reader r;
	json_t *doc;
	char key[64];

	r = (struct ctl_reader){ .path = f->ctl };
	assert_int_equal(pthread_create(&r.thread, NULL, ctl_reader_main, &r),
			 0);
	test_sibling_stream(state);
	atomic_store(&r.stop, true);
	pthread_join(r.thread, NULL);
	print_message("# %u documents read during the streams\n", r.docs);
	assert_true(r.docs > 0);
	assert_int_equal(r.bad, 0);

	doc = harness_control_get(f->ctl);
	for (unsigned i = 0; i < NVM; i++) {
		snprintf(key, sizeof(key), "vms.%u.guest_cid", i);
		assert_int_equal(harness_json_num(doc, key), cid[i]);
		snprintf(key, sizeof(key), "vms.%u.vm", i);
		assert_int_equal(harness_json_num(doc, key), i + 1);
		snprintf(key, sizeof(key), "vms.%u.sessions", i);
		assert_int_equal(harness_json_num(doc, key), 1);
		snprintf(key, sizeof(key), "vms.%u.protocol_errors", i);
		assert_int_equal(harness_json_num(doc, key), 0);
	}
	json_decref(doc);
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
/* VM 1's VMM comes back: a sibling connection on port carries data
 * both ways (seeded seed, seed + 1). */
static void vm1_back(struct fleet *f, uint32_t port, uint64_t seed)
{
	struct vg_sock *c, *d;

	f->g[1] = guest_open(f, 1);
	sib_connect(f, 0, 1, port, &c, &d);
	pump(c, d, 1u << 20, seed);
	pump(d, c, 1u << 20, seed + 1);
	close_pair(f, c, d);
}

static void test_vmm_gone(void **state)
{
	struct fleet *f = *state;
	struct vg_sock *a, *b;
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
	vm1_back(f, PORT + 2, 7);
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

/* ---- worker threads ---- */

/* A guest driven from a thread of its own. */
struct guest_thread {
	pthread_t t;
	struct fleet *f;
	struct vg_sock *s;
	unsigned vm;
	uint64_t seed;       /* of the pattern written or checked */
	uint64_t limit;      /* bytes to move (reader: then disconnect) */
	uint64_t done;       /* __atomic: moved so far */
	ssize_t last;        /* the call that ended it */
	bool bad;            /* wrong data */
	bool forever;        /* writer: until an error, not limit */
};

/* Writes a pattern on s until limit (or, forever, an error). */
static void *writer_main(void *arg)
{
	struct guest_thread *w = arg;
	static __thread uint8_t buf[CHUNK];

	for (;;) {
		uint64_t at = __atomic_load_n(&w->done, __ATOMIC_RELAXED);

		if (!w->forever && at >= w->limit)
			break;
		vg_pattern_fill(w->seed, at, buf, CHUNK);
		w->last = vg_write(w->s, buf, CHUNK, WAIT);
		if (w->last != CHUNK)
			break;
		__atomic_store_n(&w->done, at + CHUNK, __ATOMIC_RELEASE);
	}
	return NULL;
}

/* Reads and checks limit bytes on s, then drops its whole VMM (the
 * guest's vhost-user connection) without closing anything first. */
static void *reader_then_gone_main(void *arg)
{
	struct guest_thread *r = arg;
	static __thread uint8_t buf[CHUNK];
	uint64_t got = 0;

	while (got < r->limit) {
		ssize_t k = vg_read(r->s, buf, sizeof(buf), WAIT);

		r->last = k;
		if (k <= 0)
			break;
		if (vg_pattern_check(r->seed, got, buf, (size_t)k) !=
		    (size_t)k)
			r->bad = true;
		got += (uint64_t)k;
		__atomic_store_n(&r->done, got, __ATOMIC_RELEASE);
	}
	vg_free(r->f->g[r->vm]);
	r->f->g[r->vm] = NULL;
	return NULL;
}

/* VM 1's VMM goes while VM 0, on another worker, is sending to it as
 * fast as credit allows: VM 0's connection is reset (its write fails),
 * nothing else is touched, and VM 1 comes back and is reachable. */
static void test_gone_while_sending(void **state)
{
	struct fleet *f = *state;
	struct guest_thread w = { .f = f, .vm = 0, .seed = 10,
				  .forever = true };
	struct guest_thread r = { .f = f, .vm = 1, .seed = 10,
				  .limit = 16u << 20 };
	struct vg_sock *a, *b;

	sib_connect(f, 0, 1, PORT, &a, &b);
	w.s = a;
	r.s = b;
	assert_int_equal(pthread_create(&w.t, NULL, writer_main, &w), 0);
	assert_int_equal(pthread_create(&r.t, NULL, reader_then_gone_main,
					&r),
			 0);
	assert_int_equal(pthread_join(r.t, NULL), 0);
	assert_int_equal(pthread_join(w.t, NULL), 0);
	assert_false(r.bad);
	assert_int_equal(r.done, r.limit);
	/* The writer stopped because its peer reset, not on a timeout. */
	if (w.last != -ECONNRESET && w.last != -EPIPE)
		fail_msg("VM 0's write ended with %zd, not a reset", w.last);
	vg_close(a);
	assert_clean(f, 0);
	to_host(f, 0, 6003, 4u << 20);
	vm1_back(f, PORT + 3, 9);
}

/* VM 1's VMM sends its memory table again, cut another way each time,
 * while VM 0 streams to it from another worker: every byte arrives once,
 * in order, and neither guest sees a protocol violation. */
static void test_mem_table_under_sibling_traffic(void **state)
{
	struct fleet *f = *state;
	static uint8_t buf[CHUNK];
	struct guest_thread w = { .f = f, .vm = 0, .seed = 11,
				  .limit = 32u << 20 };
	struct vg_sock *a, *b;
	uint64_t got = 0, next_remap = 1u << 20;
	unsigned remaps = 0;

	sib_connect(f, 0, 1, PORT, &a, &b);
	w.s = a;
	assert_int_equal(pthread_create(&w.t, NULL, writer_main, &w), 0);
	while (got < w.limit) {
		ssize_t k = vg_read(b, buf, sizeof(buf), WAIT);

		if (k <= 0)
			fail_msg("read at %" PRIu64 ": %zd", got, k);
		if (vg_pattern_check(11, got, buf, (size_t)k) != (size_t)k)
			fail_msg("wrong data near offset %" PRIu64, got);
		got += (uint64_t)k;
		if (got >= next_remap) {
			assert_int_equal(vmio_fe_mem_resend(f->g[1]->fe,
							    1 + remaps % 4),
					 0);
			remaps++;
			next_remap += 1u << 20;
		}
	}
	assert_int_equal(pthread_join(w.t, NULL), 0);
	assert_int_equal(w.done, w.limit);
	assert_true(remaps >= 16);
	close_pair(f, a, b);
}

static bool path_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* SIGTERM while every worker streams a guest's data to the host: a
 * clean exit, in time, with every socket vmio made removed. */
static void test_sigterm_all_busy(void **state)
{
	struct fleet *f = *state;
	/* Static: a failed assertion leaves the test function while the
	 * threads still use them. */
	static struct host_reader h[NVM];
	static struct guest_thread w[NVM];
	char path[300];
	int st;

	for (unsigned i = 0; i < NVM; i++) {
		int err = 0;

		/* host_reader checks the pattern seeded with its port. */
		host_reader_start(&h[i], f->uds[i], 7000, UINT64_MAX);
		w[i] = (struct guest_thread){ .f = f, .vm = i, .seed = 7000,
					      .forever = true };
		w[i].s = vg_connect(f->g[i], 7000, WAIT, &err);
		if (!w[i].s)
			fail_msg("VM %u: connect to the host: %d", i, err);
		assert_int_equal(pthread_create(&w[i].t, NULL, writer_main,
						&w[i]),
				 0);
	}
	/* Under way on every worker. */
	for (unsigned i = 0; i < NVM; i++)
		while (__atomic_load_n(&w[i].done, __ATOMIC_ACQUIRE) <
		       (4u << 20))
			sched_yield();
	kill(f->pid, SIGTERM);
	st = harness_wait_exit(f->pid, 5000);
	if (st == -1)
		fail_msg("vmio did not exit within 5 s of SIGTERM");
	f->pid = 0;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	for (unsigned i = 0; i < NVM; i++) {
		/* Each ends once its side of vmio is gone. */
		pthread_join(w[i].t, NULL);
		pthread_join(h[i].t, NULL);
		close(h[i].lfd);
		if (h[i].bad)
			fail_msg("VM %u: the host got a wrong byte at %" PRIu64
				 " of %" PRIu64 " (the guest wrote %" PRIu64
				 ")",
				 i, h[i].bad_at, h[i].got, w[i].done);
		assert_false(path_exists(f->sock[i]));
		snprintf(path, sizeof(path), "%s", f->uds[i]);
		assert_false(path_exists(path));
		vg_free(f->g[i]);
		f->g[i] = NULL;
	}
}

/* VM i has thread=2-i; workers 1 and 2 are "vmio-w1" and "vmio-w2". VM 0
 * streams 1 GiB to the host: worker 2 does the work, and worker 1,
 * whose VM is idle, is not woken for it. Ticks are sampled by the
 * kernel, so the idle one may be charged one that it brushed against
 * while setting its VM up. */
static int fleet_setup_reversed(void **state)
{
	static const char *const extra[NVM] = { ",thread=2", ",thread=1",
						",thread=0" };

	return fleet_setup_with(state, "3", extra);
}

/* The workers of a vmio: worker 0 is its main thread, the others are
 * named vmio-wK (a sanitizer's own threads are not counted). */
static unsigned count_workers(const struct harness_thread *t, unsigned n)
{
	unsigned w = 1;

	for (unsigned k = 0; k < n; k++)
		w += !strncmp(t[k].name, "vmio-w", 6);
	return w;
}

static void test_thread_key(void **state)
{
	struct fleet *f = *state;
	struct harness_thread before[8], after[8];
	unsigned nb = harness_threads(f->pid, before, 8), na;
	long busy, idle;

	assert_int_equal(count_workers(before, nb), NVM);
	/* 1 GiB: some 100 ms of vmio's CPU, so that the tick-sampled
	 * count of the busy worker is far from the idle one's. */
	to_host(f, 0, 6004, 1024u << 20);
	na = harness_threads(f->pid, after, 8);
	busy = harness_thread_ticks(after, na, "vmio-w2") -
	       harness_thread_ticks(before, nb, "vmio-w2");
	idle = harness_thread_ticks(after, na, "vmio-w1") -
	       harness_thread_ticks(before, nb, "vmio-w1");
	printf("# worker 2 (VM 0): %ld ticks; worker 1 (idle VM 1): %ld\n",
	       busy, idle);
	assert_true(idle <= 1);
	assert_true(busy >= idle + 3);
}

/* Workers are never more than the VMs; --threads 1 is one thread. */
static void test_thread_count(void **state)
{
	static const struct {
		const char *threads;
		unsigned workers;
	} counts[] = { { "1", 1 }, { "2", 2 }, { "8", NVM } };
	struct harness_thread t[16];

	for (unsigned c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		void *st;
		struct fleet *f;

		fleet_setup_with(&st, counts[c].threads, NULL);
		f = st;
		assert_int_equal(count_workers(t, harness_threads(f->pid, t,
								  16)),
				 counts[c].workers);
		fleet_teardown(&st);
	}
}

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
	{
		char t[360];

		/* A worker that is not there. */
		snprintf(t, sizeof(t), "%s,thread=1", a);
		expect_usage((const char *const[]){ "vsock", "--threads", "1",
						    "--vm", t, NULL },
			     "VM 1: thread=1, but there is 1 worker");
	}
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
		cmocka_unit_test_setup_teardown(test_sibling_stream,
						fleet_setup_one_loop,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_sibling_stream,
						fleet_setup_worker_each,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_control_during_traffic,
						fleet_setup_worker_each,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_vmm_gone,
						fleet_setup_worker_each,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_sibling_stream,
						fleet_setup_mergeable,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_gone_while_sending,
						fleet_setup_mergeable,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_gone_while_sending,
						fleet_setup_worker_each,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(
			test_mem_table_under_sibling_traffic,
			fleet_setup_worker_each, fleet_teardown),
		cmocka_unit_test_setup_teardown(test_sigterm_all_busy,
						fleet_setup_worker_each,
						fleet_teardown),
		cmocka_unit_test_setup_teardown(test_thread_key,
						fleet_setup_reversed,
						fleet_teardown),
		cmocka_unit_test(test_thread_count),
		cmocka_unit_test(test_cli_errors),
	};
	int rc;

	harness_test_filter();
	rc = cmocka_run_group_tests(tests, NULL, harness_group_teardown);

	return rc;
}
