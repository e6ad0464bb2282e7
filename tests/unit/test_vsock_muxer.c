/* The vsock multiplexer: its connection table and port allocation alone,
 * then the whole device in-process: `vmio vsock`'s device and the
 * vhost-user core run their loop on a thread of their own, and this thread
 * plays the guest driver through the in-tree front end (rx and tx rings
 * in a memfd) and the host programs on unix sockets. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/vsock/conn_table.h"
#include "devices/vsock/device.h"
#include "devices/vsock/device_handover.h"
#include "devices/vsock/muxer.h"
#include "devices/vsock/muxer_handover.h"
#include "devices/vsock/hybrid.h"
#include "devices/vsock/hybrid_handover.h"
#include "devices/vsock/packet.h"
#include "devices/vsock/rst_queue.h"
#include "frontend/frontend.h"
#include "util/json.h"
#include "util/log.h"
#include "vhost-user/backend.h"
#include "vhost-user/session_state.h"
#include "virtio/features.h"

#define CID_HO 7

/* ---- Table ------------------------------------------------------------ */

static void test_table_insert_find_remove(void **state)
{
	struct vsock_conn_table t;
	struct vsock_table_entry e[3] = {
		{ .local_port = 5000, .peer_port = 1 },
		{ .local_port = 5000, .peer_port = 2 },
		{ .local_port = 7, .peer_port = 1 },
	};
	struct vsock_table_entry dup = { .local_port = 5000, .peer_port = 2 };

	assert_int_equal(vsock_table_init(&t, 3), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(vsock_table_insert(&t, &e[i]), 0);
	assert_ptr_equal(vsock_table_find(&t, 5000, 1), &e[0]);
	assert_ptr_equal(vsock_table_find(&t, 5000, 2), &e[1]);
	assert_ptr_equal(vsock_table_find(&t, 7, 1), &e[2]);
	assert_null(vsock_table_find(&t, 1, 5000));
	assert_true(vsock_table_full(&t));

	vsock_table_remove(&t, &e[1]);
	assert_null(vsock_table_find(&t, 5000, 2));
	assert_ptr_equal(vsock_table_find(&t, 5000, 1), &e[0]);
	assert_int_equal(t.count, 2);
	assert_int_equal(vsock_table_insert(&t, &dup), 0);
	vsock_table_release(&t);
}

static void test_table_bound_and_duplicates(void **state)
{
	enum { N = 100 };
	struct vsock_conn_table t;
	struct vsock_table_entry e[N + 1];

	assert_int_equal(vsock_table_init(&t, N), 0);
	for (unsigned i = 0; i <= N; i++)
		e[i] = (struct vsock_table_entry){ .local_port = 9,
						   .peer_port = i };
	for (unsigned i = 0; i < N; i++)
		assert_int_equal(vsock_table_insert(&t, &e[i]), 0);
	assert_int_equal(vsock_table_insert(&t, &e[N]), -ENOSPC);
	struct vsock_table_entry again = e[4];
	assert_int_equal(vsock_table_insert(&t, &again), -EEXIST);
	for (unsigned i = 0; i < N; i++)
		assert_ptr_equal(vsock_table_find(&t, 9, i), &e[i]);
	vsock_table_release(&t);
	assert_int_equal(vsock_table_init(&t, 0), -EINVAL);
}

static uint32_t alloc(struct vsock_conn_table *t, uint32_t peer)
{
	uint32_t port = 0;

	assert_int_equal(vsock_table_alloc_port(t, peer, &port), 0);
	return port;
}

static void test_port_alloc_round_robin(void **state)
{
	struct vsock_conn_table t;
	struct vsock_table_entry used = { .local_port =
						  VSOCK_LOCAL_PORT_FIRST + 1,
					  .peer_port = 80 };
	uint32_t port;

	(void)state;
	assert_int_equal(vsock_table_init(&t, 8), 0);
	/* Small, counting up: "OK 1024\n" fits systemd-ssh-proxy's window. */
	assert_int_equal(alloc(&t, 80), 1024);
	assert_int_equal(vsock_table_insert(&t, &used), 0);
	/* FIRST + 1 is taken towards port 80, not towards 81. */
	assert_int_equal(alloc(&t, 80), VSOCK_LOCAL_PORT_FIRST + 2);
	t.next_port = VSOCK_LOCAL_PORT_FIRST + 1;
	assert_int_equal(alloc(&t, 81), VSOCK_LOCAL_PORT_FIRST + 1);
	/* The range wraps back to its start, skipping ports in use. */
	t.next_port = VSOCK_LOCAL_PORT_LAST;
	assert_int_equal(alloc(&t, 80), 65535);
	assert_int_equal(alloc(&t, 80), VSOCK_LOCAL_PORT_FIRST);
	assert_int_equal(alloc(&t, 80), VSOCK_LOCAL_PORT_FIRST + 2);

	/* Firecracker's range, up to its very last port. */
	vsock_table_set_ports(&t, VSOCK_FC_PORT_FIRST, VSOCK_FC_PORT_LAST);
	assert_int_equal(alloc(&t, 80), 1u << 30);
	t.next_port = VSOCK_FC_PORT_LAST;
	assert_int_equal(alloc(&t, 80), 0x7fffffffu);
	assert_int_equal(alloc(&t, 80), 1u << 30);

	/* A range every port of which is in use towards 80: refused, and
	 * the search ends. */
	vsock_table_set_ports(&t, VSOCK_LOCAL_PORT_FIRST + 1,
			      VSOCK_LOCAL_PORT_FIRST + 1);
	assert_int_equal(vsock_table_alloc_port(&t, 80, &port), -EADDRINUSE);
	assert_int_equal(alloc(&t, 81), VSOCK_LOCAL_PORT_FIRST + 1);
	/* The whole u32 range is allowed: no overflow at its end. */
	vsock_table_set_ports(&t, 0xfffffffeu, 0xffffffffu);
	assert_int_equal(alloc(&t, 80), 0xfffffffeu);
	assert_int_equal(alloc(&t, 80), 0xffffffffu);
	assert_int_equal(alloc(&t, 80), 0xfffffffeu);
	vsock_table_release(&t);
}

/* ---- Hand-over -------------------------------------------------------- */

/* The VM's --control document (its counters and connections). */
static char *muxer_doc(const struct vsock_muxer *m)
{
	struct vmio_json j;
	char *doc;

	vmio_json_init(&j, 1u << 16);
	vmio_json_object_begin(&j);
	vsock_muxer_write_stats(m, &j);
	vmio_json_object_end(&j);
	assert_false(j.truncated);
	doc = strndup(j.buf, j.len);
	vmio_json_fini(&j);
	return doc;
}

/* With VMIO_HANDOVER_SEEDS=DIR, the record goes there too, as a seed of
 * tests/fuzz/fuzz_vsock_handover's corpus (first byte: a VM's record,
 * the packet bound on). */
static void save_seed(const struct vmio_wire_writer *w)
{
	const char *dir = getenv("VMIO_HANDOVER_SEEDS");
	uint8_t mode = 3;
	char path[512];
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/vm_record", dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(&mode, 1, 1, f), 1);
	assert_int_equal(fwrite(w->buf, 1, w->len, f), w->len);
	fclose(f);
}

static struct vsock_muxer *handover_muxer(struct vmio_loop *loop)
{
	const struct vsock_muxer_config cfg = {
		.guest_cid = CID_HO,
		.buf_size = 65536,
		.max_conns = 8,
		.connect_timeout_ms = 2000,
		.tx_copy = true,
	};
	struct vsock_muxer *m = vsock_muxer_new(loop, &cfg);

	assert_non_null(m);
	return m;
}

/* Three host programs asked for guest ports, their REQUESTs still owed
 * (no queues): a successor's multiplexer restored from the record shows
 * the same document, owns the same sockets, and keeps their connect
 * deadlines; a record cut anywhere is refused, the successor left fresh
 * and every descriptor still the caller's. */
static void test_muxer_handover(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct vsock_muxer *m = handover_muxer(loop), *next;
	struct vmio_wire_writer w;
	struct vmio_wire_reader r;
	int fds[8], copies[8], peers[3];
	unsigned nfds = 0;
	const char *why = "";
	char *before, *after, *fresh;

	assert_non_null(loop);
	vsock_muxer_set_attached(m, true);
	for (int i = 0; i < 3; i++) {
		int sv[2];

		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
		peers[i] = sv[1];
		assert_int_equal(vsock_muxer_connect_local_type(
					 m, sv[0], VSOCK_TYPE_STREAM,
					 (uint32_t)(80 + i), NULL),
				 0);
	}
	vmio_wire_writer_init(&w, 0);
	assert_int_equal(vsock_muxer_save(m, &w, fds, 8, &nfds, &why), -1);
	assert_string_equal(why, "its host sockets are still watched");
	vsock_muxer_pause_host(m, true);
	assert_int_equal(vsock_muxer_save(m, &w, fds, 8, &nfds, &why), 0);
	assert_null(why);
	assert_false(w.failed);
	assert_int_equal(nfds, 3);
	before = muxer_doc(m);
	save_seed(&w);

	next = handover_muxer(loop);
	fresh = muxer_doc(next);
	for (size_t cut = 0; cut < w.len; cut++) {
		for (unsigned i = 0; i < nfds; i++)
			copies[i] = dup(fds[i]);
		vmio_wire_reader_init(&r, w.buf, cut);
		assert_int_equal(vsock_muxer_restore(next, &r, copies, nfds), -1);
		assert_non_null(r.why);
		after = muxer_doc(next);
		assert_string_equal(after, fresh);
		free(after);
		/* Still the caller's, each exactly once. */
		for (unsigned i = 0; i < nfds; i++) {
			if (copies[i] >= 0)
				assert_int_equal(close(copies[i]), 0);
		}
	}
	for (unsigned i = 0; i < nfds; i++)
		copies[i] = dup(fds[i]);
	vmio_wire_reader_init(&r, w.buf, w.len);
	assert_int_equal(vsock_muxer_restore(next, &r, copies, nfds), 0);
	assert_int_equal(r.left, 0);
	for (unsigned i = 0; i < nfds; i++)
		assert_int_equal(copies[i], -1);
	after = muxer_doc(next);
	assert_string_equal(after, before);
	vsock_muxer_pause_host(next, false);
	/* The old one goes (its sockets are copies): the peers still see
	 * the successor's end open. */
	vsock_muxer_free(m);
	for (int i = 0; i < 3; i++) {
		char c;

		assert_int_equal(recv(peers[i], &c, 1, MSG_DONTWAIT), -1);
		assert_int_equal(errno, EAGAIN);
	}
	/* Refused as it is: its queues run. */
	vsock_muxer_set_queues(next, (struct vmio_vq *)1, NULL, NULL);
	nfds = 0;
	assert_int_equal(vsock_muxer_save(next, &w, fds, 8, &nfds, &why), -1);
	assert_string_equal(why, "its queues still run");
	vsock_muxer_set_queues(next, NULL, NULL, NULL);
	vsock_muxer_free(next);
	for (int i = 0; i < 3; i++)
		close(peers[i]);
	free(before);
	free(after);
	free(fresh);
	vmio_wire_writer_fini(&w);
	vmio_loop_free(loop);
}

/* A host program at the hybrid listener's path, connected (not yet
 * accepted). */
static int hybrid_client(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Turns of the loop until the multiplexer has n connections. */
static void run_until_conns(struct vmio_loop *loop, struct vsock_muxer *m,
			    unsigned n)
{
	char want[64];

	snprintf(want, sizeof(want), "\"connections_open\":%u,", n);
	for (int i = 0; i < 1000; i++) {
		char *doc = muxer_doc(m);
		bool done = strstr(doc, want) != NULL;

		free(doc);
		if (done)
			return;
		vmio_loop_run_once(loop, 10);
	}
	fail_msg("no %u connections after 10 s", n);
}

/* The hybrid listener handed over with one host program half way
 * through its CONNECT line: the successor finishes that line (the
 * connection is made), accepts new programs at the same path, and the
 * old one, freed, leaves the socket file. Records cut anywhere are
 * refused, the file left too, and the sockets the caller's. */
static void test_hybrid_handover(void **state)
{
	struct vmio_loop *loop = vmio_loop_new();
	struct vsock_muxer *m = handover_muxer(loop);
	char dir[] = "/tmp/vmio-hybrid-XXXXXX", path[128];
	struct vsock_hybrid_config cfg = {
		.uds_path = path,
		.max_pending = 4,
		.line_timeout_ms = 5000,
		.line_max = 32,
	};
	struct vsock_hybrid *h, *next;
	struct vmio_wire_writer w;
	struct vmio_wire_reader r;
	int fds[8], copies[8], half, late, err = 0;
	unsigned nfds = 0;
	const char *why;
	struct stat st;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/v.sock", dir);
	vsock_muxer_set_attached(m, true);
	h = vsock_hybrid_new(loop, m, &cfg, &err);
	assert_int_equal(err, 0);
	assert_non_null(h);
	half = hybrid_client(path);
	assert_int_equal(send(half, "CONN", 4, 0), 4);
	/* Accepted, and its four bytes read into the line. */
	for (int i = 0; i < 20; i++)
		vmio_loop_run_once(loop, 10);
	vmio_wire_writer_init(&w, 0);
	vsock_hybrid_pause(h, true);
	assert_int_equal(vsock_hybrid_save(h, &w, fds, 8, &nfds, &why), 0);
	assert_int_equal(nfds, 3);
	for (size_t cut = 0; cut < w.len; cut++) {
		for (unsigned i = 0; i < nfds; i++)
			copies[i] = dup(fds[i]);
		vmio_wire_reader_init(&r, w.buf, cut);
		assert_null(vsock_hybrid_restore(loop, m, &cfg, &r, copies,
						 nfds));
		assert_non_null(r.why);
		for (unsigned i = 0; i < nfds; i++)
			if (copies[i] >= 0)
				assert_int_equal(close(copies[i]), 0);
		assert_int_equal(stat(path, &st), 0);
	}
	for (unsigned i = 0; i < nfds; i++)
		copies[i] = dup(fds[i]);
	vmio_wire_reader_init(&r, w.buf, w.len);
	next = vsock_hybrid_restore(loop, m, &cfg, &r, copies, nfds);
	assert_non_null(next);
	for (unsigned i = 0; i < nfds; i++)
		assert_int_equal(copies[i], -1);
	vsock_hybrid_handed_over(h);
	vsock_hybrid_free(h);
	assert_int_equal(stat(path, &st), 0);
	vsock_hybrid_pause(next, false);

	assert_int_equal(send(half, "ECT 80\n", 7, 0), 7);
	run_until_conns(loop, m, 1);
	late = hybrid_client(path);
	assert_int_equal(send(late, "CONNECT 81\n", 11, 0), 11);
	run_until_conns(loop, m, 2);

	vsock_hybrid_free(next);
	assert_int_not_equal(stat(path, &st), 0);
	close(half);
	close(late);
	vsock_muxer_free(m);
	vmio_wire_writer_fini(&w);
	vmio_loop_free(loop);
	rmdir(dir);
}

/* ---- The device in-process -------------------------------------------- */

#define CID 3
#define QSIZE 512
#define RXBUF 4096
#define WAIT_MS 10000

struct fx {
	char dir[64], vhost[96], uds[96];
	struct vsock_device_config cfg;
	struct vmio_loop *loop;
	struct vsock_device *dev;
	struct vmio_backend *be;
	pthread_t thread;
	volatile int stop;
	bool running; /* the loop thread: not while a test runs the loop */
	struct vmio_fe *fe;
	uint64_t rx_gpa[QSIZE]; /* rx buffers, by token index + 1 */
	uint64_t tx_gpa;        /* a scratch area for tx packets */
	unsigned tx_next;
	uint64_t clock_ns;      /* the loop's, with setup_clocked (atomic) */
};

static uint64_t fx_clock(void *opaque)
{
	return __atomic_load_n(&((struct fx *)opaque)->clock_ns,
			       __ATOMIC_ACQUIRE);
}

/* Moves the clock of a setup_clocked fixture on by ms. */
static void clock_advance(struct fx *f, uint64_t ms)
{
	__atomic_add_fetch(&f->clock_ns, ms * 1000000u, __ATOMIC_RELEASE);
}

static void *loop_thread(void *opaque)
{
	struct fx *f = opaque;

	while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE))
		vmio_loop_run_once(f->loop, 20);
	return NULL;
}

/* The loop thread stopped (and joined), so that this thread can run the
 * loop itself: loop_drain, then loop_resume. */
static void loop_pause(struct fx *f)
{
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
	assert_int_equal(pthread_join(f->thread, NULL), 0);
	f->running = false;
}

static void loop_resume(struct fx *f)
{
	__atomic_store_n(&f->stop, 0, __ATOMIC_RELEASE);
	assert_int_equal(pthread_create(&f->thread, NULL, loop_thread, f), 0);
	f->running = true;
}

/* Runs the (paused) loop until nothing is ready: every event that was
 * pending, and all they led to, has been handled. Bounded. */
static void loop_drain(struct fx *f)
{
	for (int turns = 0; turns < 10000; turns++) {
		int n = vmio_loop_run_once(f->loop, 0);

		assert_true(n >= 0);
		if (!n)
			return;
	}
	fail_msg("the loop never ran out of work");
}

/* A kick, whether or not the device asked for one. */
static void kick_fd(struct vmio_dvq *q)
{
	uint64_t one = 1;

	assert_int_equal(write(q->kick_fd, &one, sizeof(one)),
			 (ssize_t)sizeof(one));
}

/* clocked: the loop runs on f->clock_ns, which only the test moves, from
 * a start far from CLOCK_MONOTONIC's readings. */
static int setup_with(void **state, bool clocked)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct vsock_device_config cfg = {
		.guest_cid = CID,
		.buf_size = 65536,
		.max_conns = 64,
		.connect_timeout_ms = 300,
		.connect_line_max = 64,
		.max_queue_size = 1024,
	};
	int err = 0;

	snprintf(f->dir, sizeof(f->dir), "/tmp/vmio-mux-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->vhost, sizeof(f->vhost), "%s/vhost.sock", f->dir);
	snprintf(f->uds, sizeof(f->uds), "%s/vm.vsock", f->dir);
	cfg.uds_path = f->uds;
	f->cfg = cfg;
	f->loop = vmio_loop_new();
	assert_non_null(f->loop);
	f->clock_ns = 5000000000000000ull;
	if (clocked)
		assert_int_equal(vmio_loop_set_clock(f->loop, fx_clock, f), 0);
	f->dev = vsock_device_new(f->loop, &cfg, &err);
	assert_non_null(f->dev);
	f->be = vmio_backend_new(f->loop, vsock_device_ops(f->dev), f->dev);
	assert_non_null(f->be);
	assert_int_equal(vmio_backend_listen(f->be, f->vhost), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, loop_thread, f), 0);
	f->running = true;

	f->fe = vmio_fe_connect(f->vhost, WAIT_MS);
	assert_non_null(f->fe);
	assert_int_equal(vmio_fe_negotiate(f->fe,
					   VMIO_BIT(VIRTIO_F_VERSION_1) |
						   VMIO_BIT(VIRTIO_RING_F_EVENT_IDX),
					   VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK) |
						   VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIG)),
			 0);
	assert_int_equal(vmio_fe_mem_create(f->fe, 8u << 20, 1), 0);
	assert_int_equal(vmio_fe_queue_setup(f->fe, VSOCK_RX_QUEUE, QSIZE), 0);
	assert_int_equal(vmio_fe_queue_setup(f->fe, VSOCK_TX_QUEUE, QSIZE), 0);
	for (unsigned i = 0; i < QSIZE; i++) {
		f->rx_gpa[i] = vmio_fe_alloc(f->fe, RXBUF, 64);
		assert_int_not_equal(f->rx_gpa[i], UINT64_MAX);
	}
	f->tx_gpa = vmio_fe_alloc(f->fe, (uint64_t)QSIZE * 128, 64);
	assert_int_not_equal(f->tx_gpa, UINT64_MAX);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, false);
}

static int setup_clocked(void **state)
{
	return setup_with(state, true);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	vmio_fe_close(f->fe);
	__atomic_store_n(&f->stop, 1, __ATOMIC_RELEASE);
	if (f->running)
		pthread_join(f->thread, NULL);
	vmio_backend_free(f->be);
	vsock_device_free(f->dev);
	vmio_loop_free(f->loop);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Posts n rx buffers (token: index + 1 into rx_gpa). */
static void post_rx(struct fx *f, unsigned n)
{
	struct vmio_dvq *q = vmio_fe_queue(f->fe, VSOCK_RX_QUEUE);

	for (unsigned i = 0; i < n; i++) {
		struct vmio_dbuf b = { .len = RXBUF, .writable = true };
		int head;

		/* Any free slot; find its buffer by the head index. */
		b.gpa = f->rx_gpa[q->free_head];
		head = vmio_dvq_add(q, &b, 1,
				    (void *)(uintptr_t)(q->free_head + 1));
		assert_true(head >= 0);
	}
	vmio_dvq_kick(q);
}

/* Sends a packet on tx with an optional payload, the guest's buffer
 * buf_alloc bytes. */
static void send_pkt_alloc(struct fx *f, uint32_t src_port, uint32_t dst_port,
			   uint16_t op, uint32_t flags, const void *data,
			   uint32_t len, uint32_t buf_alloc)
{
	struct vmio_dvq *q = vmio_fe_queue(f->fe, VSOCK_TX_QUEUE);
	struct vsock_hdr h = {
		.src_cid = CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = src_port,
		.dst_port = dst_port,
		.len = len,
		.type = VSOCK_TYPE_STREAM,
		.op = op,
		.flags = flags,
		.buf_alloc = buf_alloc,
	};
	uint64_t gpa = f->tx_gpa + (uint64_t)(f->tx_next++ % QSIZE) * 128;
	struct vmio_dbuf b = { .gpa = gpa, .len = VSOCK_HDR_SIZE + len };

	assert_true(len <= 128 - VSOCK_HDR_SIZE);
	vsock_hdr_encode(&h, vmio_fe_ptr(f->fe, gpa));
	if (len)
		memcpy((uint8_t *)vmio_fe_ptr(f->fe, gpa) + VSOCK_HDR_SIZE,
		       data, len);
	/* Reap what the device gave back, so descriptors never run out. */
	while (vmio_dvq_get_used(q, NULL))
		;
	assert_true(vmio_dvq_add(q, &b, 1, (void *)1) >= 0);
	vmio_dvq_kick(q);
}

static void send_pkt(struct fx *f, uint32_t src_port, uint32_t dst_port,
		     uint16_t op, uint32_t flags, const void *data,
		     uint32_t len)
{
	send_pkt_alloc(f, src_port, dst_port, op, flags, data, len, 65536);
}

/* Waits for the next rx packet: header in *h, payload into data. */
static bool recv_pkt(struct fx *f, struct vsock_hdr *h, void *data,
		     size_t size, int timeout_ms)
{
	struct vmio_dvq *q = vmio_fe_queue(f->fe, VSOCK_RX_QUEUE);

	for (int waited = 0; waited < timeout_ms; waited += 5) {
		uint32_t len;
		void *tok = vmio_dvq_get_used(q, &len);

		if (tok) {
			uint8_t *p = vmio_fe_ptr(
				f->fe, f->rx_gpa[(uintptr_t)tok - 1]);

			assert_true(len >= VSOCK_HDR_SIZE);
			vsock_hdr_decode(p, h);
			assert_int_equal(h->len, len - VSOCK_HDR_SIZE);
			if (data)
				memcpy(data, p + VSOCK_HDR_SIZE,
				       h->len < size ? h->len : size);
			post_rx(f, 1);
			return true;
		}
		vmio_dvq_want_interrupt(q);
		vmio_dvq_wait(q, 5);
	}
	return false;
}

static int accept_within(int lfd, int timeout_ms)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	if (poll(&p, 1, timeout_ms) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

static int listen_at(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	return fd;
}

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path));
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Reads exactly n bytes within timeout_ms. */
static void read_exact(int fd, void *buf, size_t n)
{
	size_t got = 0;

	while (got < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		assert_int_equal(poll(&p, 1, WAIT_MS), 1);
		r = read(fd, (uint8_t *)buf + got, n - got);
		assert_true(r > 0);
		got += (size_t)r;
	}
}

/* The guest's port 40001 connects to the host service at port 5000
 * (listening at *lfd): returns the host's end, the guest told RESPONSE
 * with our buffer. */
static int guest_connects(struct fx *f, int *lfd)
{
	char path[128];
	struct vsock_hdr h;
	int hfd;

	snprintf(path, sizeof(path), "%s_5000", f->uds);
	*lfd = listen_at(path);
	post_rx(f, 8);
	send_pkt(f, 40001, 5000, VSOCK_OP_REQUEST, 0, NULL, 0);
	hfd = accept_within(*lfd, WAIT_MS);
	assert_true(hfd >= 0);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RESPONSE);
	assert_int_equal(h.src_port, 5000);
	assert_int_equal(h.dst_port, 40001);
	assert_int_equal(h.buf_alloc, 65536);
	return hfd;
}

static void test_request_without_listener_is_rst(void **state)
{
	struct fx *f = *state;
	struct vsock_hdr h;

	post_rx(f, 8);
	send_pkt(f, 40000, 1234, VSOCK_OP_REQUEST, 0, NULL, 0);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(h.src_cid, VSOCK_HOST_CID);
	assert_int_equal(h.dst_cid, CID);
	assert_int_equal(h.src_port, 1234);
	assert_int_equal(h.dst_port, 40000);
}

static void test_guest_to_host_stream(void **state)
{
	struct fx *f = *state;
	char buf[64];
	struct vsock_hdr h;
	int lfd, hfd = guest_connects(f, &lfd);

	send_pkt(f, 40001, 5000, VSOCK_OP_RW, 0, "hello", 5);
	read_exact(hfd, buf, 5);
	assert_memory_equal(buf, "hello", 5);

	assert_int_equal(write(hfd, "world!", 6), 6);
	assert_true(recv_pkt(f, &h, buf, sizeof(buf), WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_int_equal(h.len, 6);
	assert_memory_equal(buf, "world!", 6);

	/* Half-close from the guest reaches the host as EOF. */
	send_pkt(f, 40001, 5000, VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_SEND, NULL,
		 0);
	struct pollfd p = { .fd = hfd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(read(hfd, buf, sizeof(buf)), 0);
	/* ... and the host can still answer. */
	assert_int_equal(write(hfd, "bye", 3), 3);
	assert_true(recv_pkt(f, &h, buf, sizeof(buf), WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_memory_equal(buf, "bye", 3);
	/* Host close: SHUTDOWN(SEND), then the connection is done: RST. */
	close(hfd);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_SHUTDOWN);
	assert_int_equal(h.flags, VSOCK_SHUTDOWN_SEND);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RST);
	close(lfd);
}

static void test_host_to_guest_connect(void **state)
{
	struct fx *f = *state;
	char line[32], buf[64];
	struct vsock_hdr h;
	int fd;

	post_rx(f, 8);
	fd = connect_to(f->uds);
	/* Stream data right behind the line must not be eaten by it. */
	assert_int_equal(write(fd, "connect 700\nearly", 17), 17);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	assert_int_equal(h.dst_port, 700);
	assert_int_equal(h.src_port, VSOCK_LOCAL_PORT_FIRST);
	send_pkt(f, 700, h.src_port, VSOCK_OP_RESPONSE, 0, NULL, 0);
	snprintf(line, sizeof(line), "OK %u\n", VSOCK_LOCAL_PORT_FIRST);
	read_exact(fd, buf, strlen(line));
	assert_memory_equal(buf, line, strlen(line));
	assert_true(recv_pkt(f, &h, buf, sizeof(buf), WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_int_equal(h.len, 5);
	assert_memory_equal(buf, "early", 5);
	close(fd);
}

static void test_host_connect_refused_by_guest(void **state)
{
	struct fx *f = *state;
	struct vsock_hdr h;
	char c;
	int fd;

	post_rx(f, 8);
	fd = connect_to(f->uds);
	assert_int_equal(write(fd, "CONNECT 701\n", 12), 12);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	send_pkt(f, 701, h.src_port, VSOCK_OP_RST, 0, NULL, 0);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(read(fd, &c, 1), 0);
	close(fd);
}

static void test_host_connect_times_out(void **state)
{
	struct fx *f = *state;
	struct vsock_hdr h;
	char c;
	int fd;

	post_rx(f, 8);
	fd = connect_to(f->uds);
	assert_int_equal(write(fd, "CONNECT 702\n", 12), 12);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	/* No answer: after the connect timeout (300 ms here) the host
	 * socket is closed and the guest gets an RST. */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(read(fd, &c, 1), 0);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(h.dst_port, 702);
	close(fd);
}

/* Which clock decides: the loop's. A guest that does not answer a
 * host's CONNECT, and a host that does not finish its CONNECT line, are
 * closed once the loop's clock passes the connect timeout (300 ms, the
 * line's too), whatever real time did. */
static void test_deadlines_on_the_loop_clock(void **state)
{
	struct fx *f = *state;
	struct pollfd p[2];
	struct vsock_hdr h;
	char c;
	int fd, slow;

	post_rx(f, 8);
	fd = connect_to(f->uds);
	slow = connect_to(f->uds);
	assert_int_equal(write(fd, "CONNECT 702\n", 12), 12);
	assert_int_equal(write(slow, "CONN", 4), 4);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	p[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
	p[1] = (struct pollfd){ .fd = slow, .events = POLLIN };
	/* More than the timeout passes in real time, then 250 ms on the
	 * loop's clock: the ticks that run then find both still waiting. */
	assert_int_equal(poll(p, 2, 400), 0);
	clock_advance(f, 250);
	assert_int_equal(poll(p, 2, 300), 0);
	/* Past it on the loop's clock (and the next ticks): both close, the
	 * guest gets an RST. */
	clock_advance(f, 100);
	assert_int_equal(poll(&p[0], 1, WAIT_MS), 1);
	assert_int_equal(read(fd, &c, 1), 0);
	assert_int_equal(poll(&p[1], 1, WAIT_MS), 1);
	assert_int_equal(read(slow, &c, 1), 0);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(h.dst_port, 702);
	close(fd);
	close(slow);
}

/* The fixture's driver did not negotiate SEQPACKET: a CONNECT on the
 * seqpacket socket is refused at once, and no REQUEST goes to the guest. */
static void test_seqpacket_connect_without_feature_refused(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vsock_hdr h;
	char c;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	post_rx(f, 8);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s.seqpacket", f->uds);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(write(fd, "CONNECT 703\n", 12), 12);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(read(fd, &c, 1), 0);
	assert_false(recv_pkt(f, &h, NULL, 0, 100));
	close(fd);
}

static void test_bad_connect_line_closes_only_that_socket(void **state)
{
	struct fx *f = *state;
	char c;
	int bad, slow;

	bad = connect_to(f->uds);
	slow = connect_to(f->uds);
	assert_int_equal(write(bad, "HELLO 5\n", 8), 8);
	assert_int_equal(write(slow, "CONN", 4), 4);
	struct pollfd p = { .fd = bad, .events = POLLIN };
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(read(bad, &c, 1), 0);
	/* The unfinished line is closed at the timeout. */
	p.fd = slow;
	assert_int_equal(poll(&p, 1, WAIT_MS), 1);
	assert_int_equal(read(slow, &c, 1), 0);
	close(bad);
	close(slow);
}

/* Two connections with host data waiting and the guest posting one rx
 * buffer at a time: turns alternate between them, so a bulk sender
 * cannot starve another. A turn fills as many posted buffers as one
 * batched read covers; the guest here never has more than two posted, so
 * a turn is one or two packets and a connection never sends more than
 * two in a row. */
static void test_rx_round_robin(void **state)
{
	struct fx *f = *state;
	static uint8_t big[48 * 1024];
	int lfd[2], hfd[2];
	unsigned count[2] = { 0, 0 };
	int last = -1;
	unsigned both = 0, run = 0;
	struct vsock_hdr h;

	for (int i = 0; i < 2; i++) {
		char path[128];

		snprintf(path, sizeof(path), "%s_%u", f->uds, 6000 + i);
		lfd[i] = listen_at(path);
	}
	post_rx(f, 2);
	for (int i = 0; i < 2; i++) {
		send_pkt(f, 41000 + i, 6000 + i, VSOCK_OP_REQUEST, 0, NULL, 0);
		hfd[i] = accept_within(lfd[i], WAIT_MS);
		assert_true(hfd[i] >= 0);
		assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
		assert_int_equal(h.op, VSOCK_OP_RESPONSE);
	}
	/* recv_pkt reposts one buffer per packet, so the guest never has
	 * more than a couple posted: the device must choose between the
	 * two for each. */
	for (int i = 0; i < 2; i++)
		assert_int_equal(write(hfd[i], big, sizeof(big)),
				 (ssize_t)sizeof(big));
	while (count[0] + count[1] < 16 && recv_pkt(f, &h, NULL, 0, WAIT_MS)) {
		int which;

		assert_int_equal(h.op, VSOCK_OP_RW);
		which = h.src_port == 6000 ? 0 : 1;
		run = which == last ? run + 1 : 1;
		/* Once both have sent, never more than one turn (at most
		 * the two posted buffers) of the same one in a row. */
		if (count[0] && count[1]) {
			assert_true(run <= 2);
			both++;
		}
		count[which]++;
		last = which;
	}
	assert_int_equal(count[0] + count[1], 16);
	/* The guest had two buffers posted before the second host wrote,
	 * so the first may take a few: not more. */
	assert_true(both >= 10);
	for (int i = 0; i < 2; i++) {
		close(hfd[i]);
		close(lfd[i]);
	}
}

/* 300 packets for flows that do not exist and no rx buffers: the device
 * queues 256 RSTs, then stops taking tx until the guest posts rx buffers;
 * then every RST arrives. Nothing is dropped, nothing grows. */
/* A figure of the VM's --control document, read with the loop paused
 * (by the caller). */
static uint64_t vm_stat_paused(struct fx *f, const char *name)
{
	struct vmio_json j;
	char key[64];
	const char *p;
	uint64_t v;

	snprintf(key, sizeof(key), "\"%s\":", name);
	vmio_json_init(&j, 1u << 16);
	vmio_json_object_begin(&j);
	vsock_device_write_stats(f->dev, &j);
	vmio_json_object_end(&j);
	assert_non_null(j.buf);
	p = strstr(j.buf, key);
	assert_non_null(p);
	v = strtoull(p + strlen(key), NULL, 10);
	vmio_json_fini(&j);
	return v;
}

static uint64_t rx_errors(struct fx *f)
{
	uint64_t v;

	loop_pause(f);
	v = vm_stat_paused(f, "rx_errors");
	loop_resume(f);
	return v;
}

/* Posts one rx buffer of len bytes at the first free slot, readable
 * (a broken driver) or not; returns its token. */
static uintptr_t post_rx_odd(struct fx *f, uint32_t len, bool readable)
{
	struct vmio_dvq *q = vmio_fe_queue(f->fe, VSOCK_RX_QUEUE);
	uintptr_t tok = (uintptr_t)q->free_head + 1;
	struct vmio_dbuf b = { .gpa = f->rx_gpa[q->free_head], .len = len,
			       .writable = !readable };

	assert_true(vmio_dvq_add(q, &b, 1, (void *)tok) >= 0);
	return tok;
}

/* A buffer the device cannot use goes back used and empty, as net does,
 * and the queue goes on: the RST comes in the next good buffer, and the
 * VM counts the two in rx_errors (architecture.md section 6). */
static void test_unusable_rx_buffers_given_back_empty(void **state)
{
	struct fx *f = *state;
	struct vmio_dvq *q = vmio_fe_queue(f->fe, VSOCK_RX_QUEUE);
	uintptr_t small = post_rx_odd(f, 10, false);
	uintptr_t readable = post_rx_odd(f, RXBUF, true);
	struct vsock_hdr h;
	uint32_t len = 1;
	void *tok = NULL;

	post_rx(f, 4); /* kicks all six */
	send_pkt(f, 40000, 1234, VSOCK_OP_REQUEST, 0, NULL, 0);
	for (int waited = 0; !tok && waited < WAIT_MS; waited += 5) {
		tok = vmio_dvq_get_used(q, &len);
		if (!tok) {
			vmio_dvq_want_interrupt(q);
			vmio_dvq_wait(q, 5);
		}
	}
	assert_ptr_equal(tok, (void *)small);
	assert_int_equal(len, 0);
	tok = vmio_dvq_get_used(q, &len);
	assert_ptr_equal(tok, (void *)readable);
	assert_int_equal(len, 0);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(h.dst_port, 40000);
	assert_int_equal(rx_errors(f), 2);
	/* Still served: another refused connect gets its RST too. */
	send_pkt(f, 40001, 1234, VSOCK_OP_REQUEST, 0, NULL, 0);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.dst_port, 40001);
}

/* Host data the guest has room for goes out in 64 KiB steps, each told
 * to the guest at once (VSOCK_MUX_RX_NOTIFY_BYTES): the guest copies one
 * while the device fills the next, rather than waiting for the batch. */
static void test_rx_told_every_64k(void **state)
{
	struct fx *f = *state;
	struct vmio_dvq *q = vmio_fe_queue(f->fe, VSOCK_RX_QUEUE);
	static uint8_t big[192 * 1024];
	uint64_t flushes, got = 0;
	struct vsock_hdr h;
	int lfd, hfd = guest_connects(f, &lfd);
	uint32_t len;
	void *tok;

	loop_pause(f);
	post_rx(f, 56); /* 64 in all: 256 KiB */
	send_pkt_alloc(f, 40001, 5000, VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0,
		       256 * 1024);
	loop_drain(f);
	flushes = vm_stat_paused(f, "rx_flushes");
	memset(big, 0x5a, sizeof(big));
	assert_int_equal(write(hfd, big, sizeof(big)), (ssize_t)sizeof(big));
	loop_drain(f);
	/* One turn read it all (every buffer was there): three steps. */
	assert_true(vm_stat_paused(f, "rx_flushes") - flushes >= 3);
	while ((tok = vmio_dvq_get_used(q, &len))) {
		vsock_hdr_decode(vmio_fe_ptr(f->fe,
					     f->rx_gpa[(uintptr_t)tok - 1]),
				 &h);
		assert_int_equal(h.op, VSOCK_OP_RW);
		got += h.len;
	}
	assert_int_equal(got, sizeof(big));
	loop_resume(f);
	close(hfd);
	close(lfd);
}

static void test_rst_queue_bound_stalls_tx(void **state)
{
	struct fx *f = *state;
	struct vmio_dvq *tx = vmio_fe_queue(f->fe, VSOCK_TX_QUEUE);
	unsigned n_used = 0, n_rst = 0;
	struct vsock_hdr h;

	for (unsigned i = 0; i < 300; i++) {
		struct vmio_dbuf b = { .gpa = f->tx_gpa + (uint64_t)i * 128,
				       .len = VSOCK_HDR_SIZE };
		struct vsock_hdr p = {
			.src_cid = CID, .dst_cid = VSOCK_HOST_CID,
			.src_port = 50000 + i, .dst_port = 9,
			.type = VSOCK_TYPE_STREAM, .op = VSOCK_OP_RW,
		};

		vsock_hdr_encode(&p, vmio_fe_ptr(f->fe, b.gpa));
		assert_true(vmio_dvq_add(tx, &b, 1, (void *)1) >= 0);
	}
	vmio_dvq_kick(tx);
	/* Bounded: however slow the machine, the first 256 come back. */
	for (int waited = 0;
	     n_used < VSOCK_RSTQ_SIZE && waited < WAIT_MS; waited += 10) {
		vmio_dvq_want_interrupt(tx);
		while (vmio_dvq_get_used(tx, NULL))
			n_used++;
		if (n_used < VSOCK_RSTQ_SIZE)
			vmio_dvq_wait(tx, 10);
	}
	assert_int_equal(n_used, VSOCK_RSTQ_SIZE);
	/* And no more: the loop, stopped and run on this thread until
	 * nothing is left to do, has done all it would with these 300; a
	 * kick of our own makes the device look at the tx ring once more. */
	loop_pause(f);
	loop_drain(f);
	while (vmio_dvq_get_used(tx, NULL))
		n_used++;
	assert_int_equal(n_used, VSOCK_RSTQ_SIZE);
	kick_fd(tx);
	loop_drain(f);
	while (vmio_dvq_get_used(tx, NULL))
		n_used++;
	assert_int_equal(n_used, VSOCK_RSTQ_SIZE);
	loop_resume(f);
	post_rx(f, 300);
	while (n_rst < 300 && recv_pkt(f, &h, NULL, 0, WAIT_MS)) {
		assert_int_equal(h.op, VSOCK_OP_RST);
		assert_int_equal(h.dst_port, 50000 + n_rst);
		n_rst++;
	}
	assert_int_equal(n_rst, 300);
	while (vmio_dvq_get_used(tx, NULL))
		n_used++;
	assert_int_equal(n_used, 300);
}

/* ---- Hand-over of the whole device ------------------------------------ */

/* The device and its session handed to a fresh device and backend on the
 * same loop, as a successor process takes them (device_handover.h's
 * steps), the loop paused meanwhile: the front end sends no message. */
static void hand_device_over(struct fx *f)
{
	struct vmio_session_record rec;
	struct vmio_wire_writer w;
	struct vmio_wire_reader r;
	struct vsock_device *next;
	struct vmio_backend *nbe;
	int fds[64], copies[64], rc = -EAGAIN;
	unsigned nfds = 0;
	const char *why = NULL;
	char err[200];

	loop_pause(f);
	for (int i = 0; i < 1000 && rc == -EAGAIN; i++) {
		rc = vmio_session_hold(f->be, NULL, NULL, err, sizeof(err));
		if (rc == -EAGAIN)
			vmio_loop_run_once(f->loop, 1);
	}
	if (rc)
		fail_msg("hold: %s", err);
	vsock_device_pause_host(f->dev, true);
	if (vmio_session_save(f->be, &rec, err, sizeof(err)))
		fail_msg("session save: %s", err);
	vmio_wire_writer_init(&w, 0);
	if (vsock_device_save(f->dev, &w, fds, 64, &nfds, &why))
		fail_msg("device save: %s", why);
	for (unsigned i = 0; i < nfds; i++)
		copies[i] = dup(fds[i]);

	vmio_wire_reader_init(&r, w.buf, w.len);
	next = vsock_device_restore(f->loop, &f->cfg, &r, copies, nfds);
	if (!next)
		fail_msg("device restore: %s", r.why);
	assert_int_equal(r.left, 0);
	for (unsigned i = 0; i < nfds; i++)
		assert_int_equal(copies[i], -1);
	nbe = vmio_backend_new(f->loop, vsock_device_ops(next), next);
	assert_non_null(nbe);
	if (vmio_session_restore(nbe, rec.bytes, rec.len, rec.fds, rec.nfds,
				 err, sizeof(err)))
		fail_msg("session restore: %s", err);
	vmio_session_record_free(&rec);
	vmio_wire_writer_fini(&w);

	vmio_session_handed_over(f->be);
	vsock_device_handed_over(f->dev);
	vmio_backend_free(f->be);
	vsock_device_free(f->dev);
	f->be = nbe;
	f->dev = next;
	vsock_device_pause_host(next, false);
	assert_int_equal(vmio_session_resume(nbe), 0);
	loop_resume(f);
}

/* A guest connection with bytes both ways, and a host program half way
 * through its CONNECT line, handed over three times: the flow goes on
 * (its bytes in order, nothing reset, credit intact), the host program
 * finishes its line with the successor, and new connections both ways
 * work at the same paths. */
static void test_device_handover(void **state)
{
	struct fx *f = *state;
	char buf[64], line[32];
	struct vsock_hdr h;
	int lfd, hfd = guest_connects(f, &lfd), half;

	half = connect_to(f->uds);
	assert_int_equal(write(half, "CONNECT 1", 9), 9);

	for (int round = 0; round < 3; round++) {
		char word[8];

		snprintf(word, sizeof(word), "to%d", round);
		send_pkt(f, 40001, 5000, VSOCK_OP_RW, 0, word, 3);
		read_exact(hfd, buf, 3);
		assert_memory_equal(buf, word, 3);
		hand_device_over(f);
		/* A byte the host wrote after the hand-over reaches the
		 * guest, on the same flow. */
		word[0] = 'b';
		assert_int_equal(write(hfd, word, 3), 3);
		assert_true(recv_pkt(f, &h, buf, sizeof(buf), WAIT_MS));
		assert_int_equal(h.op, VSOCK_OP_RW);
		assert_int_equal(h.src_port, 5000);
		assert_int_equal(h.dst_port, 40001);
		assert_memory_equal(buf, word, 3);
	}
	/* The line finished with the successor: its REQUEST reaches the
	 * guest, which answers; the host program gets its OK. */
	assert_int_equal(write(half, "234\n", 4), 4);
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	assert_int_equal(h.dst_port, 1234);
	send_pkt(f, 1234, h.src_port, VSOCK_OP_RESPONSE, 0, NULL, 0);
	snprintf(line, sizeof(line), "OK %u\n", h.src_port);
	read_exact(half, buf, strlen(line));
	assert_memory_equal(buf, line, strlen(line));
	/* A new guest connection to the same service. */
	send_pkt(f, 40002, 5000, VSOCK_OP_REQUEST, 0, NULL, 0);
	close(accept_within(lfd, WAIT_MS));
	assert_true(recv_pkt(f, &h, NULL, 0, WAIT_MS));
	assert_int_equal(h.op, VSOCK_OP_RESPONSE);
	assert_int_equal(h.dst_port, 40002);
	close(half);
	close(hfd);
	close(lfd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_table_insert_find_remove),
		cmocka_unit_test(test_table_bound_and_duplicates),
		cmocka_unit_test(test_port_alloc_round_robin),
		cmocka_unit_test(test_muxer_handover),
		cmocka_unit_test(test_hybrid_handover),
		cmocka_unit_test_setup_teardown(test_request_without_listener_is_rst,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_handover, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_guest_to_host_stream,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_to_guest_connect,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_refused_by_guest,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_host_connect_times_out,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadlines_on_the_loop_clock,
						setup_clocked, teardown),
		cmocka_unit_test_setup_teardown(
			test_seqpacket_connect_without_feature_refused, setup,
			teardown),
		cmocka_unit_test_setup_teardown(
			test_bad_connect_line_closes_only_that_socket, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_rx_round_robin, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_unusable_rx_buffers_given_back_empty, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_rx_told_every_64k, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rst_queue_bound_stalls_tx,
						setup, teardown),
	};

	vmio_log_set_level(VMIO_LOG_WARN);
	if (getenv("VMIO_TEST_FILTER"))
		cmocka_set_test_filter(getenv("VMIO_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
