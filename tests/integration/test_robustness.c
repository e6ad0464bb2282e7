/* Bad input from the VMM side (messages) and from the guest side (rings)
 * against the real `vmio loopback` process. Each must be refused — a
 * non-zero REPLY_ACK or a closed connection — and the process must live
 * on and serve the next front end. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frontend/stream.h"
#include "harness.h"
#include "virtio/features.h"

#define QSIZE 64

static struct harness_loopback lb = { .name = "robust.sock" };

static int setup(void **state)
{
	const char *log = harness_path("vmio.log");

	/* Each test reads the log for its own lines only. */
	if (truncate(log, 0) < 0 && errno != ENOENT)
		fail_msg("cannot truncate %s: %s", log, strerror(errno));
	return harness_loopback_setup(state);
}

static void assert_alive(struct harness_loopback *c)
{
	if (harness_wait_exit(c->pid, 0) != -1)
		fail_msg("vmio died");
}

/* The process survived and a well-behaved front end still gets served. */
static void assert_serves(struct harness_loopback *c)
{
	struct vmio_stream_opts o;
	struct vmio_stream_result res;
	char err[256];

	assert_alive(c);
	vmio_stream_opts_init(&o);
	o.bytes = 1ull << 20;
	o.tx_chunk = 4096;
	o.rx_chunk = 3000;
	o.verify = true;
	/* Not harness_stream_session: a failure here must say that it is
	 * the proof of life that failed, not the attack before it. */
	uint64_t mem = vmio_stream_mem_needed(&o, QSIZE);
	struct vmio_fe *fe = vmio_stream_connect(c->sock, HARNESS_WAIT_MS, mem,
						 1, QSIZE, err, sizeof(err));
	if (!fe)
		fail_msg("the next front end is not served: %s", err);
	if (vmio_stream_run(fe, &o, &res))
		fail_msg("the next front end's stream failed: %s", res.error);
	vmio_fe_close(fe);
	assert_alive(c);
}

/* A connected front end with REPLY_ACK, so refusals arrive as acks. */
static struct vmio_fe *fe_open(struct harness_loopback *c)
{
	struct vmio_fe *fe = vmio_fe_connect(c->sock, HARNESS_WAIT_MS);

	assert_non_null(fe);
	assert_int_equal(vmio_fe_negotiate(fe,
					   VMIO_BIT(VIRTIO_F_VERSION_1) |
						   VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
						   VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC),
					   VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK)),
			 0);
	assert_true(fe->protocol_features &
		    VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK));
	return fe;
}

/* The two accepted refusals; a timeout (the backend ignored it) or an ack
 * of 0 (it accepted it) fail. */
static void assert_refused(int r, const char *what)
{
	if (r != -EIO && r != -ECONNRESET && r != -EPIPE)
		fail_msg("%s: expected a refusal, got %d (%s)", what, r,
			 r ? strerror(-r) : "accepted");
	printf("# %s: %s\n", what,
	       r == -EIO ? "refused by REPLY_ACK" : "connection closed");
}

static int request(struct vmio_fe *fe, uint32_t req, const void *p,
		   uint32_t len, const int *fds, unsigned nfds)
{
	return vmio_fe_request(fe, req, p, len, fds, nfds, true, NULL, 0);
}

/* One refused request on a fresh connection, then the proof of life. */
static void refused_alone(struct harness_loopback *c, uint32_t req,
			  const void *p, uint32_t len, const int *fds,
			  unsigned nfds, const char *what)
{
	struct vmio_fe *fe = fe_open(c);

	assert_refused(request(fe, req, p, len, fds, nfds), what);
	vmio_fe_close(fe);
	assert_serves(c);
}

/* Sends what vmio_fe_request will not: any header, any number of fds. */
static void send_raw(int sock, uint32_t req, uint32_t size, const void *p,
		     uint32_t plen, const int *fds, unsigned nfds)
{
	struct vhost_user_header h = {
		.request = req,
		.flags = VHOST_USER_VERSION | VHOST_USER_NEED_REPLY_MASK,
		.size = size,
	};
	struct iovec iov[2] = {
		{ .iov_base = &h, .iov_len = sizeof(h) },
		{ .iov_base = (void *)p, .iov_len = plen },
	};
	char cbuf[CMSG_SPACE(64 * sizeof(int))];
	struct msghdr m = { .msg_iov = iov, .msg_iovlen = plen ? 2 : 1 };

	if (nfds) {
		m.msg_control = cbuf;
		m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	}
	assert_true(sendmsg(sock, &m, MSG_NOSIGNAL) >= 0);
}

/* After a raw message: a non-zero ack or the connection closing. */
static void assert_raw_refused(struct vmio_fe *fe, const char *what)
{
	struct pollfd p = { .fd = fe->sock, .events = POLLIN };
	struct vhost_user_msg msg;

	if (poll(&p, 1, HARNESS_WAIT_MS) != 1)
		fail_msg("%s: no answer within %d ms", what, HARNESS_WAIT_MS);
	int r = vhost_user_msg_recv(fe->sock, &msg);
	if (r <= 0) {
		printf("# %s: connection closed\n", what);
		return;
	}
	vhost_user_msg_close_fds(&msg);
	if (msg.hdr.size != 8 || msg.payload.u64 == 0)
		fail_msg("%s: accepted", what);
	printf("# %s: refused by REPLY_ACK\n", what);
}

static int new_eventfd(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	assert_true(fd >= 0);
	return fd;
}

static void test_bad_message_size(void **state)
{
	struct harness_loopback *c = *state;
	uint64_t features = 0;
	struct vhost_user_vring_addr addr = { 0 };

	refused_alone(c, VHOST_USER_SET_FEATURES, &features, 4, NULL, 0,
		      "SET_FEATURES with 4 bytes");
	refused_alone(c, VHOST_USER_SET_VRING_ADDR, &addr, 8, NULL, 0,
		      "SET_VRING_ADDR with 8 bytes");
	refused_alone(c, VHOST_USER_SET_VRING_NUM, &features, 4, NULL, 0,
		      "SET_VRING_NUM with 4 bytes");
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &addr, 4, NULL, 0,
		      "SET_MEM_TABLE with 4 bytes");

	/* A payload larger than any message: the stream cannot be trusted
	 * any more, the connection must go. */
	struct vmio_fe *fe = fe_open(c);
	send_raw(fe->sock, VHOST_USER_SET_FEATURES, 1u << 20, NULL, 0, NULL, 0);
	assert_raw_refused(fe, "a 1 MiB payload");
	vmio_fe_close(fe);
	assert_serves(c);
}

static void test_unknown_request(void **state)
{
	struct harness_loopback *c = *state;
	uint64_t v = 0;

	refused_alone(c, 99, &v, sizeof(v), NULL, 0, "request 99");
	refused_alone(c, VHOST_USER_REQUEST_MAX + 1000, NULL, 0, NULL, 0,
		      "request 1041");
	refused_alone(c, VHOST_USER_NONE, NULL, 0, NULL, 0, "request 0");
}

static void test_too_many_fds(void **state)
{
	struct harness_loopback *c = *state;
	int fds[12];
	uint64_t idx = 0;

	for (unsigned i = 0; i < 12; i++)
		fds[i] = new_eventfd();
	refused_alone(c, VHOST_USER_SET_OWNER, NULL, 0, fds, 2,
		      "SET_OWNER with 2 fds");
	refused_alone(c, VHOST_USER_SET_VRING_CALL, &idx, sizeof(idx), fds, 2,
		      "SET_VRING_CALL with 2 fds");

	/* More than any message may carry. */
	struct vmio_fe *fe = fe_open(c);
	send_raw(fe->sock, VHOST_USER_SET_VRING_KICK, 8, &idx, 8, fds, 12);
	assert_raw_refused(fe, "12 fds");
	vmio_fe_close(fe);
	assert_serves(c);
	for (unsigned i = 0; i < 12; i++)
		close(fds[i]);
}

static struct vhost_user_memory one_region(uint64_t gpa, uint64_t size,
					   uint64_t uva)
{
	struct vhost_user_memory m = { .nregions = 1 };

	m.regions[0] = (struct vhost_user_memory_region){
		.gpa = gpa, .size = size, .uva = uva, .mmap_offset = 0,
	};
	return m;
}

static uint32_t mem_len(unsigned n)
{
	return (uint32_t)(8 + n * sizeof(struct vhost_user_memory_region));
}

/* A memfd to back regions the tests describe by hand. */
static int region_fd(uint64_t size)
{
	int fd = memfd_create("robust", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	return fd;
}

static void test_too_few_fds(void **state)
{
	struct harness_loopback *c = *state;
	struct vhost_user_memory m = one_region(0, 1 << 20, 0x7f0000000000);
	uint64_t idx = 1;
	int fd = region_fd(2 << 20);

	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(1), NULL, 0,
		      "SET_MEM_TABLE without an fd");
	m.nregions = 2;
	m.regions[1] = (struct vhost_user_memory_region){
		.gpa = 1 << 20, .size = 1 << 20, .uva = 0x7f0000100000,
		.mmap_offset = 1 << 20,
	};
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(2), &fd, 1,
		      "SET_MEM_TABLE of 2 regions with 1 fd");
	refused_alone(c, VHOST_USER_SET_VRING_KICK, &idx, sizeof(idx), NULL, 0,
		      "SET_VRING_KICK without an fd or NOFD");
	close(fd);
}

static void test_overlapping_regions(void **state)
{
	struct harness_loopback *c = *state;
	int fd = region_fd(4 << 20);
	int fds[2] = { fd, fd };
	struct vhost_user_memory m = { .nregions = 2 };

	/* Same guest addresses. */
	m.regions[0] = (struct vhost_user_memory_region){
		.gpa = 0, .size = 2 << 20, .uva = 0x7f0000000000,
	};
	m.regions[1] = (struct vhost_user_memory_region){
		.gpa = 1 << 20, .size = 2 << 20, .uva = 0x7f0010000000,
		.mmap_offset = 2 << 20,
	};
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(2), fds, 2,
		      "regions overlapping in gpa");

	/* Same VMM addresses. */
	m.regions[1].gpa = 2 << 20;
	m.regions[1].uva = 0x7f0000100000;
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(2), fds, 2,
		      "regions overlapping in uva");
	close(fd);
}

static void test_overflowing_region(void **state)
{
	struct harness_loopback *c = *state;
	int fd = region_fd(1 << 20);
	struct vhost_user_memory m;

	m = one_region(UINT64_MAX - 4095, 8192, 0x7f0000000000);
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(1), &fd, 1,
		      "gpa + size overflows");
	m = one_region(0, 8192, UINT64_MAX - 4095);
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(1), &fd, 1,
		      "uva + size overflows");
	m = one_region(0, 8192, 0x7f0000000000);
	m.regions[0].mmap_offset = UINT64_MAX - 4095;
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(1), &fd, 1,
		      "mmap_offset + size overflows");
	m = one_region(0, 0, 0x7f0000000000);
	refused_alone(c, VHOST_USER_SET_MEM_TABLE, &m, mem_len(1), &fd, 1,
		      "a region of size 0");
	close(fd);
}

static void test_ring_outside_memory(void **state)
{
	struct harness_loopback *c = *state;
	const uint64_t size = 1 << 20;
	struct vhost_user_vring_state num = { .index = 0, .num = QSIZE };

	for (unsigned k = 0; k < 3; k++) {
		struct vmio_fe *fe = fe_open(c);
		uint64_t base;

		assert_int_equal(vmio_fe_mem_create(fe, size, 1), 0);
		base = (uint64_t)(uintptr_t)fe->mem;
		struct vhost_user_vring_addr a = {
			.index = 0,
			.desc_uva = base,
			.avail_uva = base + 4096,
			.used_uva = base + 8192,
		};
		if (k == 0)
			a.desc_uva = base + size + 4096; /* past the end */
		else if (k == 1)
			a.used_uva = base + size - 16; /* runs off the end */
		else
			a.avail_uva = 4096; /* nowhere near */
		assert_int_equal(request(fe, VHOST_USER_SET_VRING_NUM, &num,
					 sizeof(num), NULL, 0),
				 0);
		assert_refused(request(fe, VHOST_USER_SET_VRING_ADDR, &a,
				       sizeof(a), NULL, 0),
			       "ring outside guest memory");
		vmio_fe_close(fe);
	}
	assert_serves(c);
}

static void test_bad_queue_size(void **state)
{
	struct harness_loopback *c = *state;
	static const uint32_t bad[] = { 0, 3, 100, 65536, 1u << 31 };

	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct vhost_user_vring_state s = { .index = 1, .num = bad[i] };
		char what[64];

		snprintf(what, sizeof(what), "queue size %u", bad[i]);
		refused_alone(c, VHOST_USER_SET_VRING_NUM, &s, sizeof(s), NULL,
			      0, what);
	}
	struct vhost_user_vring_state s = { .index = 200, .num = 64 };
	refused_alone(c, VHOST_USER_SET_VRING_NUM, &s, sizeof(s), NULL, 0,
		      "queue 200 of 2");
	/* Each refusal is a protocol error the control socket counts. */
	assert_true(harness_control_num(c->ctl, "backends.0.protocol_errors") >=
		    6);
}

static void kick(int fd)
{
	uint64_t one = 1;

	assert_int_equal(write(fd, &one, sizeof(one)), sizeof(one));
}

/* A kick on a queue with no memory and no rings: the backend may refuse
 * SET_VRING_KICK, or accept it and simply not serve the queue; either way
 * kicks must not crash it, the connection still answers, and the next
 * front end is served. */
static void test_kick_before_setup(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = fe_open(c);
	int kfd = new_eventfd(), cfd = new_eventfd();
	uint64_t idx = 1, features = 0;
	struct vhost_user_vring_state en = { .index = 1, .num = 1 };
	int r;

	const char *what = "SET_VRING_CALL before the ring";

	r = request(fe, VHOST_USER_SET_VRING_CALL, &idx, sizeof(idx), &cfd, 1);
	if (!r) {
		what = "SET_VRING_KICK before the ring";
		r = request(fe, VHOST_USER_SET_VRING_KICK, &idx, sizeof(idx),
			    &kfd, 1);
	}
	if (r) {
		assert_refused(r, what);
		vmio_fe_close(fe);
		close(kfd);
		close(cfd);
		assert_serves(c);
		return;
	}
	request(fe, VHOST_USER_SET_VRING_ENABLE, &en, sizeof(en), NULL, 0);
	for (unsigned i = 0; i < 5; i++)
		kick(kfd);

	/* Memory, but still no ring addresses. */
	assert_int_equal(vmio_fe_mem_create(fe, 1 << 20, 1), 0);
	kick(kfd);
	assert_int_equal(vmio_fe_request(fe, VHOST_USER_GET_FEATURES, NULL, 0,
					 NULL, 0, false, &features,
					 sizeof(features)),
			 0);
	assert_true(features & VMIO_BIT(VIRTIO_F_VERSION_1));
	assert_alive(c);
	vmio_fe_close(fe);
	close(kfd);
	close(cfd);
	assert_serves(c);
}

/* The memory table changes under running rings to memory that no longer
 * holds them: the table may be refused, or accepted with the queues left
 * unserved; a kick then must not touch the old mappings. */
static void test_rings_lost_by_new_table(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = harness_connect(c->sock, 1 << 20, 1, QSIZE);
	int fd = region_fd(1 << 20);
	struct vhost_user_memory m = one_region(0, 1 << 20, 0x100000000000);
	uint64_t features = 0;

	int r = request(fe, VHOST_USER_SET_MEM_TABLE, &m, mem_len(1), &fd, 1);
	printf("# table without the rings: %s\n",
	       r == 0 ? "accepted" : r == -EIO ? "refused by REPLY_ACK" :
						 "connection closed");
	if (r == 0) {
		struct vmio_dbuf t = { .gpa = 4096, .len = 100 };

		assert_true(vmio_dvq_add(vmio_fe_queue(fe, 1), &t, 1,
					 (void *)1) >= 0);
		vmio_dvq_kick(vmio_fe_queue(fe, 1));
		kick(vmio_fe_queue(fe, 1)->kick_fd);
		kick(vmio_fe_queue(fe, 0)->kick_fd);
		assert_int_equal(vmio_fe_request(fe, VHOST_USER_GET_FEATURES,
						 NULL, 0, NULL, 0, false,
						 &features, sizeof(features)),
				 0);
	} else {
		assert_refused(r, "table without the rings");
	}
	close(fd);
	vmio_fe_close(fe);
	assert_serves(c);
}

/* Session for the ring tests: a set-up queue pair to write bad chains in. */
static struct vmio_fe *ring_session(struct harness_loopback *c)
{
	return harness_connect(c->sock, 1 << 20, 1, QSIZE);
}

static void sleep_ms(int ms)
{
	struct timespec ts = { 0, ms * 1000000L };

	nanosleep(&ts, NULL);
}

/* The log is written by another process: wait for the line, bounded. */
static void assert_log_eventually(const char *needle)
{
	for (int waited = 0; waited < HARNESS_WAIT_MS; waited += 10) {
		if (harness_log_contains(needle))
			return;
		sleep_ms(10);
	}
	fail_msg("the log never said \"%s\"", needle);
}

static uint64_t tx_data(struct vmio_fe *fe, uint32_t len)
{
	uint64_t gpa = vmio_fe_alloc(fe, len, 64);

	assert_true(gpa != UINT64_MAX);
	memset(vmio_fe_ptr(fe, gpa), 0x5a, len);
	return gpa;
}

static void post_rx(struct vmio_fe *fe, uint32_t len)
{
	struct vmio_dbuf b = { .gpa = vmio_fe_alloc(fe, len, 64), .len = len,
			       .writable = true };

	assert_true(b.gpa != UINT64_MAX);
	assert_true(vmio_dvq_add(vmio_fe_queue(fe, 0), &b, 1, (void *)1) >= 0);
	vmio_dvq_kick(vmio_fe_queue(fe, 0));
}

static void ring_case_done(struct harness_loopback *c, struct vmio_fe *fe,
			   const char *needle)
{
	assert_log_eventually(needle);
	printf("# log: %s\n", needle);
	assert_alive(c);
	vmio_fe_close(fe);
	assert_serves(c);
}

static void test_descriptor_loop(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = ring_session(c);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	uint64_t gpa = tx_data(fe, 200);
	struct vmio_dbuf b[2] = { { .gpa = gpa, .len = 100 },
				  { .gpa = gpa + 100, .len = 100 } };

	post_rx(fe, 4096);
	int head = vmio_dvq_add(tx, b, 2, (void *)1);
	assert_true(head >= 0);
	uint16_t second = le16toh(tx->desc[head].next);
	tx->desc[second].flags = htole16(VIRTQ_DESC_F_NEXT);
	tx->desc[second].next = htole16((uint16_t)head);
	vmio_dvq_kick(tx);
	ring_case_done(c, fe, "virtqueue 1 (tx) broken");
}

static void test_descriptor_outside_memory(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = ring_session(c);
	struct vmio_dvq *rx = vmio_fe_queue(fe, 0);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	struct vmio_dbuf bad = { .gpa = fe->mem_size + (1 << 20), .len = 4096,
				 .writable = true };
	struct vmio_dbuf t = { .gpa = tx_data(fe, 100), .len = 100 };

	/* The device pops rx only with tx data in hand: give it both. */
	assert_true(vmio_dvq_add(rx, &bad, 1, (void *)1) >= 0);
	vmio_dvq_kick(rx);
	assert_true(vmio_dvq_add(tx, &t, 1, (void *)2) >= 0);
	vmio_dvq_kick(tx);
	ring_case_done(c, fe, "virtqueue 0 (rx) broken");
}

static void test_descriptor_straddles_end(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = ring_session(c);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	struct vmio_dbuf t = { .gpa = fe->mem_size - 10, .len = 20 };

	post_rx(fe, 4096);
	assert_true(vmio_dvq_add(tx, &t, 1, (void *)2) >= 0);
	vmio_dvq_kick(tx);
	ring_case_done(c, fe, "virtqueue 1 (tx) broken");
}

static void test_nested_indirect(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = ring_session(c);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	uint64_t outer = vmio_fe_alloc(fe, 32, 16);
	uint64_t inner = vmio_fe_alloc(fe, 16, 16);
	uint64_t data = tx_data(fe, 64);
	struct virtq_desc *o = vmio_fe_ptr(fe, outer);
	struct virtq_desc *in = vmio_fe_ptr(fe, inner);
	struct vmio_dbuf one = { .gpa = outer, .len = 32 };

	in[0] = (struct virtq_desc){ .addr = htole64(data), .len = htole32(64) };
	o[0] = (struct virtq_desc){ .addr = htole64(data), .len = htole32(64),
				    .flags = htole16(VIRTQ_DESC_F_NEXT),
				    .next = htole16(1) };
	o[1] = (struct virtq_desc){ .addr = htole64(inner), .len = htole32(16),
				    .flags = htole16(VIRTQ_DESC_F_INDIRECT) };
	post_rx(fe, 4096);
	int head = vmio_dvq_add(tx, &one, 1, (void *)1);
	assert_true(head >= 0);
	tx->desc[head].flags = htole16(VIRTQ_DESC_F_INDIRECT);
	vmio_dvq_kick(tx);
	ring_case_done(c, fe, "virtqueue 1 (tx) broken");
}

/* ---- The same attacks on packed rings ---------------------------------- */

/* A session whose front end asks for packed rings. */
static struct vmio_fe *packed_session(struct harness_loopback *c)
{
	struct vmio_fe *fe;

	setenv("VMIO_RING", "packed", 1);
	fe = ring_session(c);
	unsetenv("VMIO_RING");
	assert_true(fe->features & VMIO_BIT(VIRTIO_F_RING_PACKED));
	assert_true(vmio_fe_queue(fe, 1)->packed);
	return fe;
}

/* The last descriptor of a chain says NEXT: the chain runs into a slot
 * the driver never made available. */
static void test_packed_chain_runs_on(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = packed_session(c);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	uint64_t gpa = tx_data(fe, 200);
	struct vmio_dbuf b[2] = { { .gpa = gpa, .len = 100 },
				  { .gpa = gpa + 100, .len = 100 } };
	uint16_t at = tx->next_avail;

	post_rx(fe, 4096);
	assert_true(vmio_dvq_add(tx, b, 2, (void *)1) >= 0);
	tx->pdesc[(at + 1) % tx->size].flags |= htole16(VIRTQ_DESC_F_NEXT);
	vmio_dvq_kick(tx);
	ring_case_done(c, fe, "virtqueue 1 (tx) broken");
}

/* A buffer id the queue cannot have. */
static void test_packed_bad_buffer_id(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = packed_session(c);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	struct vmio_dbuf t = { .gpa = tx_data(fe, 100), .len = 100 };
	uint16_t at = tx->next_avail;

	post_rx(fe, 4096);
	assert_true(vmio_dvq_add(tx, &t, 1, (void *)1) >= 0);
	tx->pdesc[at].id = htole16(0xffff);
	vmio_dvq_kick(tx);
	ring_case_done(c, fe, "virtqueue 1 (tx) broken");
}

/* A packed buffer outside guest memory. */
static void test_packed_descriptor_outside_memory(void **state)
{
	struct harness_loopback *c = *state;
	struct vmio_fe *fe = packed_session(c);
	struct vmio_dvq *tx = vmio_fe_queue(fe, 1);
	struct vmio_dbuf t = { .gpa = fe->mem_size + (1 << 20), .len = 100 };

	post_rx(fe, 4096);
	assert_true(vmio_dvq_add(tx, &t, 1, (void *)1) >= 0);
	vmio_dvq_kick(tx);
	ring_case_done(c, fe, "virtqueue 1 (tx) broken");
}

#define CASE(f)                                                              \
	cmocka_unit_test_prestate_setup_teardown(f, setup,                   \
						 harness_loopback_teardown, &lb)

int main(void)
{
	const struct CMUnitTest tests[] = {
		CASE(test_bad_message_size),
		CASE(test_unknown_request),
		CASE(test_too_many_fds),
		CASE(test_too_few_fds),
		CASE(test_overlapping_regions),
		CASE(test_overflowing_region),
		CASE(test_ring_outside_memory),
		CASE(test_bad_queue_size),
		CASE(test_kick_before_setup),
		CASE(test_rings_lost_by_new_table),
		CASE(test_descriptor_loop),
		CASE(test_descriptor_outside_memory),
		CASE(test_descriptor_straddles_end),
		CASE(test_nested_indirect),
		CASE(test_packed_chain_runs_on),
		CASE(test_packed_bad_buffer_id),
		CASE(test_packed_descriptor_outside_memory),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, harness_group_teardown);
}
