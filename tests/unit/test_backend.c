/* The vhost-user backend core, driven message by message from the other
 * end of a socketpair, with a fake device that counts what the core asks
 * of it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "event/loop.h"
#include "util/clock.h"
#include "util/log.h"
#include "virtio/features.h"
#include "frontend/msg_io.h"
#include "vhost-user/backend.h"
#include "vhost-user/kick_guard.h"

#define NQ 2
#define QSIZE 16
#define CONFIG_SIZE 8
#define MEM_SIZE (1u << 20)
#define UVA_BASE 0x7f0000000000ull
#define DEV_FEATURES                                                           \
	(VMIO_BIT(VIRTIO_F_VERSION_1) | VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |    \
	 VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) | VMIO_BIT(3))

/* ---- The fake device ------------------------------------------------ */

struct fake {
	int starts, stops, kicks, resets, changing, features_set;
	uint64_t features;
	bool running[NQ];
	struct vmio_mem *mem[NQ];
	unsigned consumed[NQ];
	uint8_t config[CONFIG_SIZE];
	/* A kick takes nothing (as a device waiting on its host would),
	 * and the next kick after it is cleared takes what waits. */
	bool blocked;
};

static struct vmio_chain chain;

/* Completes every chain the driver posted, writing nothing. */
static void drain(struct fake *f, struct vmio_vq *vq)
{
	while (vmio_vq_pop(vq, f->mem[vq->index], &chain) == 1) {
		vmio_vq_push(vq, chain.head, 0);
		f->consumed[vq->index]++;
	}
	vmio_vq_flush_and_notify(vq);
}

static void fake_start(void *dev, struct vmio_vq *vq, struct vmio_mem *mem)
{
	struct fake *f = dev;

	assert_false(f->running[vq->index]);
	f->starts++;
	f->running[vq->index] = true;
	f->mem[vq->index] = mem;
	drain(f, vq);
}

static void fake_stop(void *dev, struct vmio_vq *vq, enum vmio_queue_stop how)
{
	struct fake *f = dev;

	assert_true(f->running[vq->index]);
	f->stops++;
	f->running[vq->index] = false;
	f->mem[vq->index] = NULL;
}

static void fake_kick(void *dev, struct vmio_vq *vq)
{
	struct fake *f = dev;

	assert_true(f->running[vq->index]);
	f->kicks++;
	if (!f->blocked)
		drain(f, vq);
}

static void fake_changing(void *dev)
{
	((struct fake *)dev)->changing++;
}

static void fake_reset(void *dev)
{
	struct fake *f = dev;

	for (unsigned i = 0; i < NQ; i++)
		assert_false(f->running[i]);
	f->resets++;
}

static int fake_features_set(void *dev, uint64_t features)
{
	struct fake *f = dev;

	f->features_set++;
	f->features = features;
	return 0;
}

static int fake_get_config(void *dev, uint8_t *buf, uint32_t off, uint32_t len)
{
	memcpy(buf, ((struct fake *)dev)->config + off, len);
	return 0;
}

static int fake_set_config(void *dev, const uint8_t *buf, uint32_t off,
			   uint32_t len)
{
	memcpy(((struct fake *)dev)->config + off, buf, len);
	return 0;
}

/* The fake device's operations, for the two kinds below. */
#define FAKE_OPS \
	.name = "fake", \
	.features = DEV_FEATURES, \
	.protocol_features = VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIG), \
	.num_queues = NQ, \
	.max_queue_size = 256, \
	.config_size = CONFIG_SIZE, \
	.get_config = fake_get_config, \
	.set_config = fake_set_config, \
	.features_set = fake_features_set, \
	.queue_start = fake_start, \
	.queue_stop = fake_stop, \
	.queue_kick = fake_kick, \
	.memory_changing = fake_changing, \
	.reset = fake_reset

static const struct vmio_device_ops fake_ops = { FAKE_OPS };
/* A device that marks its writes: the core offers dirty logging. */
static const struct vmio_device_ops fake_logging_ops = {
	FAKE_OPS,
	.logs_writes = true,
};

/* ---- The fixture: a backend and its front end's socket -------------- */

struct fx {
	struct vmio_loop *loop;
	struct vmio_backend *be;
	struct fake dev;
	int fe;       /* our end */
	int gone;     /* disconnect callbacks */
	int memfd;
	uint8_t *mem; /* guest memory, gpa 0 at mem[0] */
	int kick[NQ], call[NQ];
	uint16_t avail_idx[NQ];
	int log_fd, saved_stderr;
};

static void on_gone(void *opaque)
{
	((struct fx *)opaque)->gone++;
}

static int setup_with(void **state, const struct vmio_device_ops *ops)
{
	struct fx *f = calloc(1, sizeof(*f));
	int sv[2];

	assert_non_null(f);
	f->loop = vmio_loop_new();
	f->be = vmio_backend_new(f->loop, ops, &f->dev);
	assert_non_null(f->be);
	vmio_backend_set_disconnect_cb(f->be, on_gone, f);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	assert_int_equal(vmio_backend_serve_fd(f->be, sv[0]), 0);
	f->fe = sv[1];
	fcntl(f->fe, F_SETFL, O_NONBLOCK);
	memcpy(f->dev.config, "\x01\x02\x03\x04\x05\x06\x07\x08", CONFIG_SIZE);

	f->memfd = memfd_create("guest", MFD_CLOEXEC);
	assert_true(f->memfd >= 0);
	assert_int_equal(ftruncate(f->memfd, MEM_SIZE), 0);
	f->mem = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		      f->memfd, 0);
	assert_true(f->mem != MAP_FAILED);
	for (unsigned i = 0; i < NQ; i++) {
		f->kick[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		f->call[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	f->log_fd = -1;
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, &fake_ops);
}

static int setup_logging(void **state)
{
	return setup_with(state, &fake_logging_ops);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	vmio_backend_free(f->be);
	vmio_loop_free(f->loop);
	if (f->fe >= 0)
		close(f->fe);
	for (unsigned i = 0; i < NQ; i++) {
		close(f->kick[i]);
		close(f->call[i]);
	}
	munmap(f->mem, MEM_SIZE);
	close(f->memfd);
	if (f->log_fd >= 0) {
		dup2(f->saved_stderr, 2);
		close(f->saved_stderr);
		close(f->log_fd);
	}
	free(f);
	return 0;
}

/* Sends to stderr what the backend logs, to check the log lines. */
static void capture_log(struct fx *f)
{
	fflush(stderr);
	f->saved_stderr = dup(2);
	f->log_fd = memfd_create("log", MFD_CLOEXEC);
	assert_true(f->log_fd >= 0);
	dup2(f->log_fd, 2);
}

static bool logged(struct fx *f, const char *what)
{
	static char buf[65536];
	ssize_t n;

	fflush(stderr);
	n = pread(f->log_fd, buf, sizeof(buf) - 1, 0);
	assert_true(n >= 0);
	buf[n] = 0;
	if (!strstr(buf, what)) {
		dprintf(f->saved_stderr, "log does not mention \"%s\":\n%s\n",
			what, buf);
		return false;
	}
	return true;
}

static void pump(struct fx *f)
{
	while (vmio_loop_run_once(f->loop, 20) > 0)
		;
}

static void send_msg(struct fx *f, uint32_t req, uint32_t flags,
		     const void *payload, uint32_t len, const int *fds,
		     unsigned nfds)
{
	struct vhost_user_msg m = {
		.hdr = { .request = req, .flags = VHOST_USER_VERSION | flags,
			 .size = len },
		.nfds = nfds,
	};

	if (len)
		memcpy(&m.payload, payload, len);
	for (unsigned i = 0; i < nfds; i++)
		m.fds[i] = fds[i];
	assert_int_equal(vhost_user_msg_send(f->fe, &m), 0);
	pump(f);
}

/* Returns 1 with the reply in *r, -EAGAIN if there is none, 0 if the
 * backend closed the connection. */
static int get_reply(struct fx *f, struct vhost_user_msg *r)
{
	int rc = vhost_user_msg_recv(f->fe, r);

	if (rc == 1) {
		assert_int_equal(r->hdr.flags, 0x5);
		assert_int_equal(r->nfds, 0);
	}
	return rc;
}

static uint64_t get_u64(struct fx *f, uint32_t req)
{
	struct vhost_user_msg r;

	send_msg(f, req, 0, NULL, 0, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.request, req);
	assert_int_equal(r.hdr.size, 8);
	return r.payload.u64;
}

/* Sends with NEED_REPLY (REPLY_ACK negotiated) and returns the ack. */
static uint64_t acked(struct fx *f, uint32_t req, const void *payload,
		      uint32_t len, const int *fds, unsigned nfds)
{
	struct vhost_user_msg r;

	send_msg(f, req, VHOST_USER_NEED_REPLY_MASK, payload, len, fds, nfds);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.request, req);
	assert_int_equal(r.hdr.size, 8);
	return r.payload.u64;
}

static void expect_closed(struct fx *f)
{
	struct vhost_user_msg r;

	assert_int_equal(get_reply(f, &r), 0);
	assert_int_equal(f->gone, 1);
}

static void negotiate(struct fx *f, uint64_t protocol)
{
	uint64_t features = get_u64(f, VHOST_USER_GET_FEATURES);

	send_msg(f, VHOST_USER_SET_OWNER, 0, NULL, 0, NULL, 0);
	get_u64(f, VHOST_USER_GET_PROTOCOL_FEATURES);
	send_msg(f, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &protocol, 8, NULL, 0);
	if (protocol & VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK))
		assert_int_equal(acked(f, VHOST_USER_SET_FEATURES, &features, 8,
				       NULL, 0), 0);
	else
		send_msg(f, VHOST_USER_SET_FEATURES, 0, &features, 8, NULL, 0);
}

#define ACK_PROTOCOL                                                           \
	(VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK) |                           \
	 VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ) |                                  \
	 VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIG))

static uint64_t mem_table(struct fx *f, unsigned nregions)
{
	struct vhost_user_memory m = { .nregions = nregions };
	uint64_t part = MEM_SIZE / nregions;
	int fds[VHOST_USER_MEM_TABLE_MAX_REGIONS];

	for (unsigned i = 0; i < nregions; i++) {
		m.regions[i] = (struct vhost_user_memory_region){
			.gpa = i * part,
			.size = part,
			.uva = UVA_BASE + i * part,
			.mmap_offset = i * part,
		};
		fds[i] = f->memfd;
	}
	return acked(f, VHOST_USER_SET_MEM_TABLE, &m,
		     8 + nregions * sizeof(m.regions[0]), fds, nregions);
}

/* Ring layout in guest memory: 16 KiB per queue from gpa 0, buffers from
 * 64 KiB. */
static uint64_t desc_gpa(unsigned q)
{
	return q * 0x4000ull;
}
static uint64_t avail_gpa(unsigned q)
{
	return q * 0x4000ull + 0x1000;
}
static uint64_t used_gpa(unsigned q)
{
	return q * 0x4000ull + 0x2000;
}

static struct vhost_user_vring_state vstate(unsigned q, unsigned num)
{
	return (struct vhost_user_vring_state){ .index = q, .num = num };
}

/* The ring addresses of queue q in the fixture's guest memory layout. */
static struct vhost_user_vring_addr vaddr(unsigned q)
{
	return (struct vhost_user_vring_addr){
		.index = q,
		.desc_uva = UVA_BASE + desc_gpa(q),
		.avail_uva = UVA_BASE + avail_gpa(q),
		.used_uva = UVA_BASE + used_gpa(q),
	};
}

static void setup_queue(struct fx *f, unsigned q)
{
	struct vhost_user_vring_state s = vstate(q, QSIZE);
	struct vhost_user_vring_addr a = vaddr(q);
	uint64_t idx = q;

	assert_int_equal(acked(f, VHOST_USER_SET_VRING_NUM, &s, 8, NULL, 0), 0);
	s.num = 0;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_BASE, &s, 8, NULL, 0), 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
			       NULL, 0), 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8,
			       &f->call[q], 1), 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_KICK, &idx, 8,
			       &f->kick[q], 1), 0);
	s.num = 1;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8, NULL, 0),
			 0);
}

/* Posts one readable buffer on queue q the way a driver does. */
static void post(struct fx *f, unsigned q)
{
	struct virtq_desc *desc = (void *)(f->mem + desc_gpa(q));
	struct virtq_avail *avail = (void *)(f->mem + avail_gpa(q));
	uint16_t slot = f->avail_idx[q] % QSIZE;

	desc[slot] = (struct virtq_desc){ .addr = 0x10000 + slot * 64,
					  .len = 64 };
	avail->ring[slot] = slot;
	__atomic_store_n(&avail->idx, ++f->avail_idx[q], __ATOMIC_RELEASE);
}

static uint16_t used_idx(struct fx *f, unsigned q)
{
	struct virtq_used *used = (void *)(f->mem + used_gpa(q));
	return __atomic_load_n(&used->idx, __ATOMIC_ACQUIRE);
}

static void kick(struct fx *f, unsigned q)
{
	uint64_t one = 1;
	assert_int_equal(write(f->kick[q], &one, 8), 8);
	pump(f);
}

static uint64_t calls(struct fx *f, unsigned q)
{
	uint64_t v = 0;
	if (read(f->call[q], &v, 8) < 0)
		return 0;
	return v;
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

static struct fx *running_device(void **state)
{
	struct fx *f = *state;

	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(mem_table(f, 1), 0);
	setup_queue(f, 0);
	setup_queue(f, 1);
	assert_int_equal(f->dev.starts, 2);
	return f;
}

/* ---- Negotiation ---------------------------------------------------- */

static void test_get_features(void **state)
{
	struct fx *f = *state;
	uint64_t v = get_u64(f, VHOST_USER_GET_FEATURES);

	assert_true(v & VMIO_BIT(VHOST_USER_F_PROTOCOL_FEATURES));
	assert_int_equal(v & DEV_FEATURES, DEV_FEATURES);
	assert_int_equal(v, DEV_FEATURES | VMIO_BIT(30));
}

static void test_get_protocol_features(void **state)
{
	struct fx *f = *state;
	uint64_t want = VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ) |
			VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK) |
			VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIG) |
			VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS) |
			VMIO_BIT(VHOST_USER_PROTOCOL_F_STATUS);

	assert_int_equal(get_u64(f, VHOST_USER_GET_PROTOCOL_FEATURES), want);
}

static void test_reply_ack(void **state)
{
	struct fx *f = *state;
	struct vhost_user_msg r;
	uint64_t p = ACK_PROTOCOL;

	/* Not negotiated yet: NEED_REPLY is ignored. */
	send_msg(f, VHOST_USER_SET_OWNER, VHOST_USER_NEED_REPLY_MASK, NULL, 0,
		 NULL, 0);
	assert_int_equal(get_reply(f, &r), -EAGAIN);
	send_msg(f, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &p, 8, NULL, 0);
	assert_int_equal(acked(f, VHOST_USER_SET_OWNER, NULL, 0, NULL, 0), 0);
	/* Without NEED_REPLY, still nothing. */
	send_msg(f, VHOST_USER_SET_OWNER, 0, NULL, 0, NULL, 0);
	assert_int_equal(get_reply(f, &r), -EAGAIN);
	/* A GET answers with its own reply, not an ack. */
	send_msg(f, VHOST_USER_GET_QUEUE_NUM, VHOST_USER_NEED_REPLY_MASK, NULL,
		 0, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.payload.u64, NQ);
	assert_int_equal(get_reply(f, &r), -EAGAIN);
}

static void test_set_features(void **state)
{
	struct fx *f = *state;

	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(f->dev.features_set, 1);
	assert_int_equal(f->dev.features, DEV_FEATURES | VMIO_BIT(30));
	assert_int_equal(vmio_backend_acked_features(f->be),
			 DEV_FEATURES | VMIO_BIT(30));
}

static void test_set_features_unknown_bit(void **state)
{
	struct fx *f = *state;
	uint64_t p = ACK_PROTOCOL, bad = VMIO_BIT(VIRTIO_F_VERSION_1) | VMIO_BIT(40);

	capture_log(f);
	send_msg(f, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &p, 8, NULL, 0);
	assert_int_not_equal(acked(f, VHOST_USER_SET_FEATURES, &bad, 8, NULL, 0),
			     0);
	assert_true(logged(f, "SET_FEATURES"));
	assert_int_equal(f->dev.features_set, 0);
	assert_int_equal(vmio_backend_acked_features(f->be), 0);
	/* Unknown protocol features are refused too. */
	p = VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD);
	assert_int_not_equal(acked(f, VHOST_USER_SET_PROTOCOL_FEATURES, &p, 8,
				   NULL, 0), 0);
	assert_true(logged(f, "SET_PROTOCOL_FEATURES"));
}

static void test_failure_without_ack_closes(void **state)
{
	struct fx *f = *state;
	uint64_t bad = VMIO_BIT(40);

	capture_log(f);
	send_msg(f, VHOST_USER_SET_FEATURES, 0, &bad, 8, NULL, 0);
	expect_closed(f);
	assert_true(logged(f, "SET_FEATURES"));
	assert_int_equal(f->dev.resets, 1);
}

static void test_small_requests(void **state)
{
	struct fx *f = *state;
	uint64_t status = 0x0f;

	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(get_u64(f, VHOST_USER_GET_QUEUE_NUM), NQ);
	assert_int_equal(get_u64(f, VHOST_USER_GET_MAX_MEM_SLOTS),
			 VMIO_MEM_MAX_REGIONS);
	assert_int_equal(acked(f, VHOST_USER_SET_STATUS, &status, 8, NULL, 0), 0);
	assert_int_equal(get_u64(f, VHOST_USER_GET_STATUS), 0x0f);
	int fd = eventfd(0, EFD_CLOEXEC);
	assert_int_equal(acked(f, VHOST_USER_SET_BACKEND_REQ_FD, NULL, 0, &fd, 1),
			 0);
	close(fd);
}

static void test_config(void **state)
{
	struct fx *f = *state;
	struct vhost_user_config c = { .offset = 2, .size = 4, .flags = 0 };
	struct vhost_user_msg r;

	negotiate(f, ACK_PROTOCOL);
	send_msg(f, VHOST_USER_GET_CONFIG, 0, &c, 12 + 4, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.size, 12 + 4);
	assert_int_equal(r.payload.config.offset, 2);
	assert_int_equal(r.payload.config.size, 4);
	assert_memory_equal(r.payload.config.payload, "\x03\x04\x05\x06", 4);

	c.offset = 6;
	c.size = 2;
	memcpy(c.payload, "\xaa\xbb", 2);
	assert_int_equal(acked(f, VHOST_USER_SET_CONFIG, &c, 12 + 2, NULL, 0), 0);
	assert_memory_equal(f->dev.config + 6, "\xaa\xbb", 2);
}

static void test_config_out_of_bounds(void **state)
{
	struct fx *f = *state;
	struct vhost_user_config c = { .offset = 4, .size = 8 };
	struct vhost_user_msg r;

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	/* A failed GET gets its reply with an empty payload. */
	send_msg(f, VHOST_USER_GET_CONFIG, 0, &c, 12 + 8, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.size, 0);
	assert_true(logged(f, "GET_CONFIG: offset 4 size 8 beyond"));
	/* Offset near 2^32 must not wrap. */
	c.offset = 0xfffffffc;
	send_msg(f, VHOST_USER_GET_CONFIG, 0, &c, 12 + 8, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.size, 0);
	assert_int_not_equal(acked(f, VHOST_USER_SET_CONFIG, &c, 12 + 8, NULL, 0),
			     0);
	/* The size field and the payload size disagree. */
	c.offset = 0;
	c.size = 4;
	send_msg(f, VHOST_USER_GET_CONFIG, 0, &c, 12 + 8, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.size, 0);
	assert_true(logged(f, "does not match a config block"));
	assert_int_equal(f->gone, 0);
}

/* ---- Queues --------------------------------------------------------- */

static void test_queue_start_and_kick(void **state)
{
	struct fx *f = running_device(state);

	assert_true(f->dev.running[0] && f->dev.running[1]);
	post(f, 1);
	kick(f, 1);
	assert_int_equal(f->dev.kicks, 1);
	assert_int_equal(f->dev.consumed[1], 1);
	assert_int_equal(used_idx(f, 1), 1);
	assert_true(calls(f, 1) >= 1);
	/* Buffers posted before the queue started are seen at start. */
	assert_int_equal(f->dev.consumed[0], 0);
}

static void test_buffers_before_start_are_served(void **state)
{
	struct fx *f = *state;

	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(mem_table(f, 1), 0);
	post(f, 0);
	post(f, 0);
	setup_queue(f, 0);
	assert_int_equal(f->dev.consumed[0], 2);
	assert_int_equal(used_idx(f, 0), 2);
}

static void test_get_vring_base_stops(void **state)
{
	struct fx *f = running_device(state);
	struct vhost_user_vring_state s = vstate(1, 0);
	struct vhost_user_msg r;

	post(f, 1);
	post(f, 1);
	kick(f, 1);
	send_msg(f, VHOST_USER_GET_VRING_BASE, 0, &s, 8, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.size, 8);
	assert_int_equal(r.payload.state.index, 1);
	assert_int_equal(r.payload.state.num, 2);
	assert_int_equal(f->dev.stops, 1);
	assert_false(f->dev.running[1]);
	assert_true(f->dev.running[0]);
	/* Stopped: kicks go nowhere. */
	post(f, 1);
	kick(f, 1);
	assert_int_equal(f->dev.kicks, 1);
	assert_int_equal(used_idx(f, 1), 2);
	/* And it can be restarted where it stopped. */
	s.num = 2;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_BASE, &s, 8, NULL, 0), 0);
	uint64_t idx = 1;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_KICK, &idx, 8,
			       &f->kick[1], 1), 0);
	assert_true(f->dev.running[1]);
	assert_int_equal(used_idx(f, 1), 3);
}

/* QEMU 8.1 and later (10.0 too) stop a device with SET_VRING_ENABLE 0,
 * then GET_VRING_BASE per queue, and only then SET_STATUS 0; 7.2 sent
 * SET_STATUS 0 first. Either way the bases are where the rings stopped,
 * and the device starts again from them. */
static void stop_in_order(struct fx *f, bool status_first)
{
	struct vhost_user_vring_state s = vstate(1, 0);
	struct vhost_user_msg r;
	uint64_t zero = 0;

	post(f, 1);
	post(f, 1);
	post(f, 1);
	kick(f, 1);
	assert_int_equal(used_idx(f, 1), 3);
	if (status_first)
		assert_int_equal(acked(f, VHOST_USER_SET_STATUS, &zero, 8, NULL,
				       0), 0);
	for (unsigned q = 0; q < 2; q++) {
		s = vstate(q, 0);
		assert_int_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8,
				       NULL, 0), 0);
	}
	for (unsigned q = 0; q < 2; q++) {
		s = vstate(q, 0);
		send_msg(f, VHOST_USER_GET_VRING_BASE, 0, &s, 8, NULL, 0);
		assert_int_equal(get_reply(f, &r), 1);
		assert_int_equal(r.payload.state.index, q);
		assert_int_equal(r.payload.state.num, q == 1 ? 3 : 0);
	}
	if (!status_first)
		assert_int_equal(acked(f, VHOST_USER_SET_STATUS, &zero, 8, NULL,
				       0), 0);
	assert_false(f->dev.running[0] || f->dev.running[1]);
	assert_int_equal(get_u64(f, VHOST_USER_GET_STATUS), 0);

	/* Started again from the base it gave. */
	s = vstate(1, 3);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_BASE, &s, 8, NULL, 0), 0);
	uint64_t idx = 1;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_KICK, &idx, 8,
			       &f->kick[1], 1), 0);
	s.num = 1;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8, NULL, 0),
			 0);
	assert_true(f->dev.running[1]);
	post(f, 1);
	kick(f, 1);
	assert_int_equal(used_idx(f, 1), 4);
	assert_int_equal(f->gone, 0);
}

static void test_stop_order_qemu10(void **state)
{
	stop_in_order(running_device(state), false);
}

static void test_stop_order_qemu72(void **state)
{
	stop_in_order(running_device(state), true);
}

/* Without REPLY_ACK, QEMU 8.2 and later follow SET_VRING_ENABLE with a
 * GET_FEATURES and take its reply as the sign that the enable is done:
 * the queue must have stopped (or started) by the time that reply is
 * written. */
static void test_enable_then_get_features_barrier(void **state)
{
	struct fx *f = *state;
	uint64_t protocol = VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ) |
			    VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIG);
	struct vhost_user_vring_state s;
	struct vhost_user_vring_addr a = vaddr(0);
	uint64_t idx = 0;
	struct vhost_user_msg r;

	struct vhost_user_memory m = { .nregions = 1 };

	m.regions[0] = (struct vhost_user_memory_region){
		.size = MEM_SIZE, .uva = UVA_BASE };
	negotiate(f, protocol);
	send_msg(f, VHOST_USER_SET_MEM_TABLE, 0, &m, 8 + 32, &f->memfd, 1);
	s = vstate(0, QSIZE);
	send_msg(f, VHOST_USER_SET_VRING_NUM, 0, &s, 8, NULL, 0);
	send_msg(f, VHOST_USER_SET_VRING_ADDR, 0, &a, sizeof(a), NULL, 0);
	send_msg(f, VHOST_USER_SET_VRING_CALL, 0, &idx, 8, &f->call[0], 1);
	send_msg(f, VHOST_USER_SET_VRING_KICK, 0, &idx, 8, &f->kick[0], 1);
	s = vstate(0, 1);
	send_msg(f, VHOST_USER_SET_VRING_ENABLE, 0, &s, 8, NULL, 0);
	get_u64(f, VHOST_USER_GET_FEATURES);
	assert_true(f->dev.running[0]);
	s = vstate(0, 0);
	send_msg(f, VHOST_USER_SET_VRING_ENABLE, 0, &s, 8, NULL, 0);
	get_u64(f, VHOST_USER_GET_FEATURES);
	assert_false(f->dev.running[0]);
	/* Nothing but the two replies was written. */
	assert_int_equal(get_reply(f, &r), -EAGAIN);
	assert_int_equal(f->gone, 0);
}

/* QEMU 10 acks every protocol feature the backend offers up to bit 19
 * (SHARED_OBJECT 18, DEVICE_STATE 19): vmio offers none it does not do,
 * and refuses an ack of them. */
static void test_protocol_features_qemu10_mask(void **state)
{
	struct fx *f = *state;
	uint64_t offered = get_u64(f, VHOST_USER_GET_PROTOCOL_FEATURES);

	capture_log(f);
	assert_int_equal(offered & (VMIO_BIT(17) | VMIO_BIT(18) | VMIO_BIT(19)),
			 0);
	for (unsigned bit = 17; bit <= 19; bit++) {
		uint64_t p = VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK);

		send_msg(f, VHOST_USER_SET_PROTOCOL_FEATURES, 0, &p, 8, NULL,
			 0);
		p |= VMIO_BIT(bit);
		assert_int_not_equal(acked(f, VHOST_USER_SET_PROTOCOL_FEATURES,
					   &p, 8, NULL, 0), 0);
	}
}

static void test_without_protocol_features_kick_enables(void **state)
{
	struct fx *f = *state;
	struct vhost_user_vring_state s = vstate(0, QSIZE);
	struct vhost_user_vring_addr a = vaddr(0);
	struct vhost_user_memory m = { .nregions = 1 };
	uint64_t features = VMIO_BIT(VIRTIO_F_VERSION_1), idx = 0;

	m.regions[0] = (struct vhost_user_memory_region){
		.size = MEM_SIZE, .uva = UVA_BASE };
	send_msg(f, VHOST_USER_SET_FEATURES, 0, &features, 8, NULL, 0);
	send_msg(f, VHOST_USER_SET_MEM_TABLE, 0, &m, 8 + 32, &f->memfd, 1);
	send_msg(f, VHOST_USER_SET_VRING_NUM, 0, &s, 8, NULL, 0);
	send_msg(f, VHOST_USER_SET_VRING_ADDR, 0, &a, sizeof(a), NULL, 0);
	send_msg(f, VHOST_USER_SET_VRING_KICK, 0, &idx, 8, &f->kick[0], 1);
	assert_int_equal(f->dev.starts, 1);
	assert_int_equal(f->gone, 0);
}

static void test_enable_disable(void **state)
{
	struct fx *f = running_device(state);
	struct vhost_user_vring_state s = vstate(0, 0);

	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8, NULL, 0), 0);
	assert_false(f->dev.running[0]);
	assert_int_equal(f->dev.stops, 1);
	s.num = 1;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8, NULL, 0), 0);
	assert_true(f->dev.running[0]);
	s.num = 2;
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8, NULL, 0),
			     0);
}

static void test_mem_table_replaced_while_running(void **state)
{
	struct fx *f = running_device(state);

	post(f, 1);
	kick(f, 1);
	assert_int_equal(f->dev.consumed[1], 1);

	/* DPDK re-sends the same memory cut differently. */
	assert_int_equal(mem_table(f, 4), 0);
	assert_int_equal(f->dev.changing, 1);
	assert_int_equal(f->dev.stops, 2);
	assert_int_equal(f->dev.starts, 4);
	assert_true(f->dev.running[0] && f->dev.running[1]);

	post(f, 1);
	kick(f, 1);
	assert_int_equal(f->dev.consumed[1], 2);
	assert_int_equal(used_idx(f, 1), 2);
	post(f, 0);
	kick(f, 0);
	assert_int_equal(used_idx(f, 0), 1);
}

static void test_mem_table_without_rings_stops_queue(void **state)
{
	struct fx *f = running_device(state);
	struct vhost_user_memory m = { .nregions = 1 };

	capture_log(f);
	/* The new table only covers the upper half: the rings are gone. */
	m.regions[0] = (struct vhost_user_memory_region){
		.gpa = MEM_SIZE / 2, .size = MEM_SIZE / 2,
		.uva = UVA_BASE + MEM_SIZE / 2, .mmap_offset = MEM_SIZE / 2 };
	assert_int_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, 8 + 32,
			       &f->memfd, 1), 0);
	assert_false(f->dev.running[0]);
	assert_false(f->dev.running[1]);
	assert_true(logged(f, "outside the new memory table"));
	/* Back to full memory: they run again. */
	assert_int_equal(mem_table(f, 2), 0);
	assert_true(f->dev.running[0] && f->dev.running[1]);
}

/* Memory slots negotiated, the lower half of guest memory added alone
 * (ADD_MEM_REG), and queue 0 set up in it. */
static void first_half_added(struct fx *f)
{
	struct vhost_user_mem_reg r = { 0 };

	negotiate(f, ACK_PROTOCOL |
			     VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS));
	r.region = (struct vhost_user_memory_region){
		.size = MEM_SIZE / 2, .uva = UVA_BASE };
	assert_int_equal(acked(f, VHOST_USER_ADD_MEM_REG, &r, sizeof(r),
			       &f->memfd, 1), 0);
	setup_queue(f, 0);
	assert_true(f->dev.running[0]);
}

static void test_add_rem_mem_reg(void **state)
{
	struct fx *f = *state;
	struct vhost_user_mem_reg r = { 0 };

	/* Two halves, the second added while the queue runs. */
	first_half_added(f);
	r.region = (struct vhost_user_memory_region){
		.gpa = MEM_SIZE / 2, .size = MEM_SIZE / 2,
		.uva = UVA_BASE + MEM_SIZE / 2, .mmap_offset = MEM_SIZE / 2 };
	assert_int_equal(acked(f, VHOST_USER_ADD_MEM_REG, &r, sizeof(r),
			       &f->memfd, 1), 0);
	assert_int_equal(f->dev.changing, 1);
	assert_true(f->dev.running[0]);
	post(f, 0);
	kick(f, 0);
	assert_int_equal(used_idx(f, 0), 1);
	/* Overlapping the first: refused, nothing changes. */
	r.region.gpa = 0x1000;
	r.region.uva = UVA_BASE + 0x1000;
	assert_int_not_equal(acked(f, VHOST_USER_ADD_MEM_REG, &r, sizeof(r),
				   &f->memfd, 1), 0);
	assert_true(f->dev.running[0]);
	/* Removing the second half leaves the rings where they were. */
	r.region = (struct vhost_user_memory_region){
		.gpa = MEM_SIZE / 2, .size = MEM_SIZE / 2,
		.uva = UVA_BASE + MEM_SIZE / 2 };
	assert_int_equal(acked(f, VHOST_USER_REM_MEM_REG, &r, sizeof(r), NULL, 0),
			 0);
	assert_true(f->dev.running[0]);
	/* A region that is not there. */
	assert_int_not_equal(acked(f, VHOST_USER_REM_MEM_REG, &r, sizeof(r),
				   NULL, 0), 0);
	/* Removing the first takes the rings away. */
	r.region = (struct vhost_user_memory_region){
		.size = MEM_SIZE / 2, .uva = UVA_BASE };
	assert_int_equal(acked(f, VHOST_USER_REM_MEM_REG, &r, sizeof(r),
			       &f->memfd, 1), 0);
	assert_false(f->dev.running[0]);
}

/* A region that cannot be added (it overlaps, or its file is too short
 * for it) or removed (it is not there) is refused before anything
 * changes: the device is not told the memory changes, and the table it
 * runs on is the one it had. */
static void test_refused_mem_reg_changes_nothing(void **state)
{
	struct fx *f = *state;
	struct vhost_user_mem_reg r = { 0 };
	int small = memfd_create("small", MFD_CLOEXEC);

	capture_log(f);
	assert_true(small >= 0);
	assert_int_equal(ftruncate(small, 4096), 0);
	first_half_added(f);
	assert_int_equal(f->dev.changing, 0);
	/* Overlapping the first region. */
	r.region = (struct vhost_user_memory_region){
		.gpa = 0x1000, .size = MEM_SIZE / 2, .uva = UVA_BASE + 0x1000 };
	assert_int_not_equal(acked(f, VHOST_USER_ADD_MEM_REG, &r, sizeof(r),
				   &f->memfd, 1), 0);
	assert_true(logged(f, "overlaps an existing one"));
	/* Past the end of its file. */
	r.region = (struct vhost_user_memory_region){
		.gpa = MEM_SIZE / 2, .size = MEM_SIZE / 2,
		.uva = UVA_BASE + MEM_SIZE / 2 };
	assert_int_not_equal(acked(f, VHOST_USER_ADD_MEM_REG, &r, sizeof(r),
				   &small, 1), 0);
	assert_true(logged(f, "past the end of its file"));
	/* Not there. */
	assert_int_not_equal(acked(f, VHOST_USER_REM_MEM_REG, &r, sizeof(r),
				   NULL, 0), 0);
	assert_int_equal(f->dev.changing, 0);
	assert_true(f->dev.running[0]);
	post(f, 0);
	kick(f, 0);
	assert_int_equal(used_idx(f, 0), 1);
	close(small);
}

static void test_call_fd_replaced_while_running(void **state)
{
	struct fx *f = running_device(state);
	int newcall = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t idx = 0;

	assert_int_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8, &newcall,
			       1), 0);
	assert_true(f->dev.running[0]);
	calls(f, 0);
	post(f, 0);
	kick(f, 0);
	uint64_t v = 0;
	assert_int_equal(read(newcall, &v, 8), 8);
	assert_int_equal(calls(f, 0), 0);
	close(newcall);
}

/* QEMU 11 sets NEED_REPLY on SET_VRING_KICK, _CALL and _ERR (it waits for
 * the backend to use the new call fd before it looks for an interrupt left
 * on the masked one): each is acked once in effect, and at debug level the
 * log names each request with its payload and the flag, and a GET_*'s
 * reply (docs/qemu-11.md reads QEMU's sequence from that log). */
static void test_vring_fd_requests_acked_and_logged(void **state)
{
	struct fx *f = running_device(state);
	int call = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	int err = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	enum vmio_log_level old = vmio_log_get_level();
	uint64_t idx = 0, v = 0;

	capture_log(f);
	vmio_log_set_level(VMIO_LOG_DEBUG);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ERR, &idx, 8, &err, 1),
			 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8, &call, 1),
			 0);
	get_u64(f, VHOST_USER_GET_FEATURES);
	vmio_log_set_level(old);
	assert_true(logged(f, "vhost-user: SET_VRING_ERR 0x0 (8 bytes, 1 fds, "
			      "need_reply)"));
	assert_true(logged(f, "vhost-user: SET_VRING_CALL 0x0 (8 bytes, 1 fds, "
			      "need_reply)"));
	assert_true(logged(f, "vhost-user: GET_FEATURES (0 bytes, 0 fds)"));
	assert_true(logged(f, "vhost-user: GET_FEATURES reply 0x"));
	/* Acked means in use: the queue's next signal goes to the new fd. */
	while (read(call, &v, 8) == 8)
		;
	post(f, 0);
	kick(f, 0);
	assert_int_equal(read(call, &v, 8), 8);
	close(call);
	close(err);
}

/* QEMU starts a queue on its masked notifier and discards what that got
 * when it installs the guest's call fd: a queue served before the swap (a
 * restarted backend, with chains the guest posted while it was away) must
 * signal the new fd, or a driver under event_idx waits for ever. */
static void test_new_call_fd_hears_of_earlier_work(void **state)
{
	struct fx *f = running_device(state);
	int newcall = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	uint64_t idx = 0, v = 0;

	post(f, 0);
	kick(f, 0);
	assert_int_equal(used_idx(f, 0), 1);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8, &newcall,
			       1), 0);
	/* Nothing new was used, and still the new fd was signalled. */
	assert_int_equal(used_idx(f, 0), 1);
	assert_int_equal(read(newcall, &v, 8), 8);
	assert_int_equal(v, 1);
	close(newcall);
}

/* A call fd that cannot take a signal (a full pipe, blocking on the VMM's
 * side) must not hold the loop: the push goes on, and so does the
 * connection. */
static void test_call_fd_that_would_block(void **state)
{
	struct fx *f = running_device(state);
	int pipefd[2];
	uint64_t idx = 0;

	assert_int_equal(pipe2(pipefd, O_CLOEXEC | O_NONBLOCK), 0);
	fcntl(pipefd[1], F_SETPIPE_SZ, 4096);
	char junk[512] = { 0 };
	while (write(pipefd[1], junk, sizeof(junk)) > 0)
		;
	assert_int_equal(fcntl(pipefd[1], F_SETFL, 0), 0); /* blocking */
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8,
			       &pipefd[1], 1), 0);
	post(f, 0);
	kick(f, 0); /* returns: the device's signal did not block */
	assert_int_equal(used_idx(f, 0), 1);
	assert_true(get_u64(f, VHOST_USER_GET_FEATURES) &
		    VMIO_BIT(VHOST_USER_F_PROTOCOL_FEATURES));
	assert_int_equal(f->gone, 0);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* ---- Bad input ------------------------------------------------------ */

static void test_bad_sizes(void **state)
{
	struct fx *f = *state;
	uint8_t junk[64] = { 0 };
	struct vhost_user_msg r;

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	assert_int_not_equal(acked(f, VHOST_USER_SET_FEATURES, junk, 4, NULL, 0),
			     0);
	assert_true(logged(f, "SET_FEATURES: payload of 4 bytes, expected 8"));
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_NUM, junk, 12, NULL,
				   0), 0);
	assert_true(logged(f, "SET_VRING_NUM: payload of 12 bytes"));
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_ADDR, junk, 32, NULL,
				   0), 0);
	assert_int_not_equal(acked(f, VHOST_USER_SET_OWNER, junk, 8, NULL, 0),
			     0);
	/* A GET with a payload it should not have: empty reply. */
	send_msg(f, VHOST_USER_GET_FEATURES, 0, junk, 8, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.size, 0);
	assert_int_equal(f->gone, 0);
}

static void test_bad_mem_tables(void **state)
{
	struct fx *f = *state;
	struct vhost_user_memory m = { .nregions = 2 };
	int fds[2] = { f->memfd, f->memfd };

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	int before = count_open_fds();
	/* Overlapping in guest addresses. */
	m.regions[0] = (struct vhost_user_memory_region){
		.gpa = 0, .size = 0x10000, .uva = UVA_BASE };
	m.regions[1] = (struct vhost_user_memory_region){
		.gpa = 0x8000, .size = 0x10000, .uva = UVA_BASE + 0x100000 };
	assert_int_not_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, 8 + 64, fds,
				   2), 0);
	assert_true(logged(f, "overlaps"));
	/* Overflowing the address space. */
	m.nregions = 1;
	m.regions[0] = (struct vhost_user_memory_region){
		.gpa = 0xfffffffffffff000ull, .size = 0x2000, .uva = UVA_BASE };
	assert_int_not_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, 8 + 32, fds,
				   1), 0);
	assert_true(logged(f, "wraps"));
	/* Bigger than the file behind it. */
	m.regions[0] = (struct vhost_user_memory_region){
		.size = 2 * MEM_SIZE, .uva = UVA_BASE };
	assert_int_not_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, 8 + 32, fds,
				   1), 0);
	/* No regions, too many regions, too short a payload. */
	m.nregions = 0;
	assert_int_not_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, 8, NULL, 0),
			     0);
	m.nregions = 9;
	assert_int_not_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, sizeof(m),
				   NULL, 0), 0);
	m.nregions = 2;
	assert_int_not_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, 8 + 32, fds,
				   2), 0);
	assert_true(logged(f, "too short for 2 regions"));
	/* One fd for two regions. */
	assert_int_not_equal(acked(f, VHOST_USER_SET_MEM_TABLE, &m, 8 + 64, fds,
				   1), 0);
	assert_true(logged(f, "SET_MEM_TABLE: 1 file descriptors, expected 2"));
	/* Every fd that came with a refused message was closed. */
	assert_int_equal(count_open_fds(), before);
	assert_int_equal(f->gone, 0);
}

static void test_bad_fd_counts(void **state)
{
	struct fx *f = *state;
	int fds[3] = { f->kick[0], f->kick[0], f->kick[0] };
	uint64_t idx = 0;

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(mem_table(f, 1), 0);
	int before = count_open_fds();
	assert_int_not_equal(acked(f, VHOST_USER_SET_OWNER, NULL, 0, fds, 1), 0);
	assert_true(logged(f, "SET_OWNER: 1 file descriptors, expected 0"));
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8, NULL,
				   0), 0);
	assert_true(logged(f, "SET_VRING_CALL: 0 file descriptors, expected 1"));
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8, fds,
				   3), 0);
	idx = VHOST_USER_VRING_NOFD_MASK;
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8, fds,
				   1), 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8, NULL, 0),
			 0);
	struct vhost_user_mem_reg reg = { 0 };
	assert_int_not_equal(acked(f, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg),
				   NULL, 0), 0);
	assert_int_equal(count_open_fds(), before);
}

static void test_unknown_request(void **state)
{
	struct fx *f = *state;
	uint64_t zero = 0;

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_ENDIAN, &zero, 8,
				   NULL, 0),
			     0);
	assert_true(logged(f, "unsupported request 23 (SET_VRING_ENDIAN)"));
	assert_int_not_equal(acked(f, 77, NULL, 0, NULL, 0), 0);
	assert_true(logged(f, "unsupported request 77 (unknown)"));
	assert_int_equal(f->gone, 0);
	/* Without a way to report it, the connection goes. */
	send_msg(f, 77, 0, NULL, 0, NULL, 0);
	expect_closed(f);
}

static void test_bad_header_closes(void **state)
{
	struct fx *f = *state;
	struct vhost_user_header h = { .request = VHOST_USER_GET_FEATURES,
				       .flags = VHOST_USER_VERSION |
						VHOST_USER_REPLY_MASK };

	capture_log(f);
	assert_int_equal(write(f->fe, &h, sizeof(h)), sizeof(h));
	pump(f);
	expect_closed(f);
	assert_true(logged(f, "malformed message"));
}

static void test_bad_queue_sizes(void **state)
{
	struct fx *f = *state;
	static const unsigned bad[] = { 0, 3, 512, 65536, 100000 };

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct vhost_user_vring_state s = vstate(0, bad[i]);
		assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_NUM, &s, 8,
					   NULL, 0), 0);
	}
	assert_true(logged(f, "size 3 is not a power of two"));
	assert_true(logged(f, "size 65536"));
	assert_true(logged(f, "size 0 "));
}

static void test_queue_index_out_of_range(void **state)
{
	struct fx *f = *state;
	struct vhost_user_vring_state s = vstate(NQ, QSIZE);
	struct vhost_user_vring_addr a = { .index = 200 };
	struct vhost_user_msg r;
	uint64_t idx = NQ;

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_NUM, &s, 8, NULL, 0),
			     0);
	assert_true(logged(f, "SET_VRING_NUM: queue index 2 out of range"));
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
				   NULL, 0), 0);
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_KICK, &idx, 8,
				   &f->kick[0], 1), 0);
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8, NULL,
				   0), 0);
	s.index = 0xffffffff;
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_BASE, &s, 8, NULL, 0),
			     0);
	send_msg(f, VHOST_USER_GET_VRING_BASE, 0, &s, 8, NULL, 0);
	assert_int_equal(get_reply(f, &r), 1);
	assert_int_equal(r.hdr.size, 0);
	/* Unknown bits above the index and the no-fd flag. */
	idx = 0x10000;
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_CALL, &idx, 8,
				   &f->call[0], 1), 0);
}

static void test_rings_outside_memory(void **state)
{
	struct fx *f = *state;
	struct vhost_user_vring_state s = vstate(0, QSIZE);
	struct vhost_user_vring_addr a = {
		.index = 0,
		.desc_uva = UVA_BASE + desc_gpa(0),
		.avail_uva = UVA_BASE + avail_gpa(0),
		.used_uva = UVA_BASE + MEM_SIZE - 8, /* runs off the end */
	};
	uint64_t idx = 0;

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(mem_table(f, 1), 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_NUM, &s, 8, NULL, 0), 0);
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
				   NULL, 0), 0);
	assert_true(logged(f, "outside guest memory"));
	a.used_uva = 0x1000; /* not guest memory at all */
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
				   NULL, 0), 0);
	/* A kick for a queue whose rings were never accepted. */
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_KICK, &idx, 8,
				   &f->kick[0], 1), 0);
	assert_true(logged(f, "started before its size and addresses"));
	assert_int_equal(f->dev.starts, 0);
}

static void test_kick_before_setup(void **state)
{
	struct fx *f = *state;
	uint64_t idx = 1;

	capture_log(f);
	negotiate(f, ACK_PROTOCOL);
	assert_int_not_equal(acked(f, VHOST_USER_SET_VRING_KICK, &idx, 8,
				   &f->kick[1], 1), 0);
	assert_true(logged(f, "SET_VRING_KICK: queue 1 started before"));
	assert_int_equal(f->dev.starts, 0);
}

static void test_addr_before_mem_table(void **state)
{
	struct fx *f = *state;
	struct vhost_user_vring_state s = vstate(0, QSIZE);
	struct vhost_user_vring_addr a = vaddr(0);
	uint64_t idx = 0;

	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_NUM, &s, 8, NULL, 0), 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a), NULL,
			       0), 0);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_KICK, &idx, 8,
			       &f->kick[0], 1), 0);
	s.num = 1;
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ENABLE, &s, 8, NULL, 0), 0);
	assert_int_equal(f->dev.starts, 0);
	/* The memory arrives last; the queue starts then. */
	assert_int_equal(mem_table(f, 1), 0);
	assert_int_equal(f->dev.starts, 1);
}

/* ---- Disconnects ---------------------------------------------------- */

static void test_disconnect_resets(void **state)
{
	struct fx *f = running_device(state);
	int sv[2];

	close(f->fe);
	f->fe = -1;
	pump(f);
	assert_int_equal(f->gone, 1);
	assert_int_equal(f->dev.resets, 1);
	assert_int_equal(f->dev.stops, 2);
	assert_false(f->dev.running[0] || f->dev.running[1]);

	/* A new front end finds a fresh device. */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
			 0);
	assert_int_equal(vmio_backend_serve_fd(f->be, sv[0]), 0);
	f->fe = sv[1];
	fcntl(f->fe, F_SETFL, O_NONBLOCK);
	assert_int_equal(vmio_backend_sessions(f->be), 2);
	assert_int_equal(vmio_backend_acked_features(f->be), 0);
	uint64_t idx = 0;
	send_msg(f, VHOST_USER_SET_VRING_KICK, 0, &idx, 8, &f->kick[0], 1);
	/* Its queue 0 knows nothing of the old rings: the kick is refused. */
	struct vhost_user_msg r;
	assert_int_equal(get_reply(f, &r), 0);
	assert_int_equal(f->gone, 2);
	assert_int_equal(f->dev.starts, 2);
}

static void test_reset_owner(void **state)
{
	struct fx *f = running_device(state);

	assert_int_equal(acked(f, VHOST_USER_RESET_OWNER, NULL, 0, NULL, 0), 0);
	assert_int_equal(f->dev.resets, 1);
	assert_int_equal(f->dev.stops, 2);
	assert_int_equal(vmio_backend_acked_features(f->be), 0);
	assert_int_equal(f->gone, 0);
}

static void test_no_fd_leak_over_session(void **state)
{
	struct fx *f = *state;
	int before = count_open_fds();
	int sv[2];

	for (int round = 0; round < 3; round++) {
		negotiate(f, ACK_PROTOCOL);
		assert_int_equal(mem_table(f, 2), 0);
		setup_queue(f, 0);
		setup_queue(f, 1);
		close(f->fe);
		pump(f);
		assert_int_equal(socketpair(AF_UNIX,
					    SOCK_STREAM | SOCK_CLOEXEC, 0, sv),
				 0);
		assert_int_equal(vmio_backend_serve_fd(f->be, sv[0]), 0);
		f->fe = sv[1];
		fcntl(f->fe, F_SETFL, O_NONBLOCK);
	}
	assert_int_equal(f->gone, 3);
	assert_int_equal(count_open_fds(), before);
}

/* ---- Listening ------------------------------------------------------ */

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(sa.sun_path, path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool readable(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	return poll(&p, 1, 0) == 1;
}

static void temp_path(char *buf, size_t len)
{
	snprintf(buf, len, "/tmp/vmio-test-backend-%d.sock", (int)getpid());
	unlink(buf);
}

static void test_listen(void **state)
{
	struct fx *f = *state;
	struct vmio_backend *be = vmio_backend_new(f->loop, &fake_ops, &f->dev);
	struct vmio_backend *other = vmio_backend_new(f->loop, &fake_ops, &f->dev);
	struct vhost_user_msg m = {
		.hdr = { .request = VHOST_USER_GET_QUEUE_NUM,
			 .flags = VHOST_USER_VERSION },
	};
	char path[108];
	struct stat st;

	capture_log(f);
	temp_path(path, sizeof(path));
	assert_int_equal(vmio_backend_listen(be, path), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));

	/* A live backend owns the path. */
	assert_int_equal(vmio_backend_listen(other, path), -EADDRINUSE);
	assert_true(logged(f, path));
	pump(f); /* the probe connection comes and goes */

	int a = connect_to(path);
	assert_true(a >= 0);
	pump(f);
	int b = connect_to(path);
	assert_true(b >= 0);
	/* The second one waits in the backlog while the first is served. */
	assert_int_equal(vhost_user_msg_send(b, &m), 0);
	pump(f);
	assert_false(readable(b));
	assert_int_equal(vhost_user_msg_send(a, &m), 0);
	pump(f);
	assert_int_equal(vhost_user_msg_recv(a, &m), 1);
	assert_int_equal(m.payload.u64, NQ);

	/* After the first leaves, the waiting one is served. */
	close(a);
	pump(f);
	pump(f);
	assert_int_equal(vhost_user_msg_recv(b, &m), 1);
	assert_int_equal(m.payload.u64, NQ);
	close(b);
	pump(f);

	/* And so is a later one. */
	a = connect_to(path);
	m.hdr.flags = VHOST_USER_VERSION;
	assert_int_equal(vhost_user_msg_send(a, &m), 0);
	pump(f);
	assert_int_equal(vhost_user_msg_recv(a, &m), 1);
	close(a);
	pump(f);

	vmio_backend_free(be);
	assert_int_equal(stat(path, &st), -1);
	vmio_backend_free(other);
}

/* The loop's clock in the kick guard's tests: a number the test moves. */
static uint64_t test_clock_now(void *opaque)
{
	return *(const uint64_t *)opaque;
}

/* A running device whose loop goes by *now, its idle kicks guarded at
 * 1000 a second, one at once: each costs 1 ms. */
static void guarded_device_on_clock(void **state, uint64_t *now)
{
	struct fx *f = *state;
	struct vmio_kick_budget b = { .rate = 1000, .burst = 1 };

	*now = 5000000000000000ull;
	assert_int_equal(vmio_loop_set_clock(f->loop, test_clock_now, now), 0);
	vmio_backend_set_kick_budget(f->be, &b);
	running_device(state);
}

/* The idle-kick budget and the looks of a held queue go by the loop's
 * clock: with it standing still, real time refills nothing and brings no
 * look; moved on, the look comes and finds the work. */
static void test_kick_guard_on_the_loop_clock(void **state)
{
	struct fx *f = *state;
	uint64_t now;

	guarded_device_on_clock(state, &now);
	kick(f, 1); /* idle: the one token */
	usleep(5000); /* 5 ms of real time: 5 tokens on the wrong clock */
	kick(f, 1); /* idle, none left: served, then the kick fd goes */
	assert_int_equal(f->dev.kicks, 2);
	post(f, 1);
	kick(f, 1); /* unheard */
	usleep(20000);
	pump(f);
	assert_int_equal(f->dev.kicks, 2);
	assert_int_equal(f->dev.consumed[1], 0);
	/* The first look, VMIO_KICK_POLL_MIN_NS on, finds the work. */
	now += VMIO_KICK_POLL_MIN_NS;
	pump(f);
	assert_int_equal(f->dev.consumed[1], 1);
	/* And the kick fd is back: a kick is served at once. */
	post(f, 1);
	kick(f, 1);
	assert_int_equal(f->dev.consumed[1], 2);
}

/* A device that acts only when kicked, and a kick the guard hears at a
 * look while the ring stands where it stood after the last kick served:
 * a chain posted then that the device did not take (it was blocked).
 * The look serves the kick; were it only counted, the device would never
 * take the chain, and a guest under EVENT_IDX never kicks again for it
 * (what stalled vmio-vsock-bench's h2g stream under load). */
static void test_kick_guard_look_serves_the_kick(void **state)
{
	struct fx *f = *state;
	uint64_t now;

	guarded_device_on_clock(state, &now);
	f->dev.blocked = true;
	post(f, 1);
	kick(f, 1); /* work, but the device takes nothing */
	kick(f, 1); /* idle: the one token */
	kick(f, 1); /* idle, none left: served, then the kick fd goes */
	assert_int_equal(f->dev.consumed[1], 0);
	f->dev.blocked = false;
	kick(f, 1); /* unheard until the look */
	now += VMIO_KICK_POLL_MIN_NS;
	pump(f);
	assert_int_equal(f->dev.consumed[1], 1);
}

/* A VMM that connects and hangs up in a loop gets a session at most every
 * VMIO_BACKEND_SESSION_GAP_NS; the rest wait in the backlog, and every one
 * is still served. */
static void test_sessions_spaced(void **state)
{
	struct fx *f = *state;
	struct vmio_backend *be = vmio_backend_new(f->loop, &fake_ops, &f->dev);
	char path[108];
	enum { N = 6 };

	temp_path(path, sizeof(path));
	assert_int_equal(vmio_backend_listen(be, path), 0);
	unsigned start = vmio_backend_sessions(be);
	uint64_t t0 = vmio_now_ns();
	for (int i = 0; i < N; i++) {
		int fd = connect_to(path);
		assert_true(fd >= 0);
		close(fd);
	}
	uint64_t end = t0 + 10000000000ull;
	while (vmio_backend_sessions(be) < start + N && vmio_now_ns() < end)
		vmio_loop_run_once(f->loop, 20);
	assert_int_equal(vmio_backend_sessions(be), start + N);
	assert_true(vmio_now_ns() - t0 >= (N - 1) * VMIO_BACKEND_SESSION_GAP_NS);
	vmio_backend_free(be);
}

static void test_listen_replaces_stale_socket(void **state)
{
	struct fx *f = *state;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct vmio_backend *be = vmio_backend_new(f->loop, &fake_ops, &f->dev);
	char path[108];

	temp_path(path, sizeof(path));
	strcpy(sa.sun_path, path);
	/* A socket file nobody listens on: what a killed backend leaves. */
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(s);
	assert_int_equal(vmio_backend_listen(be, path), 0);
	int a = connect_to(path);
	assert_true(a >= 0);
	close(a);
	pump(f);
	vmio_backend_free(be);

	/* A regular file is not ours to remove. */
	int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	close(fd);
	be = vmio_backend_new(f->loop, &fake_ops, &f->dev);
	assert_int_equal(vmio_backend_listen(be, path), -EEXIST);
	vmio_backend_free(be);
	assert_int_equal(unlink(path), 0);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* ---- Dirty logging (a migration) ------------------------------------ */

/* A device that does not mark its writes offers no logging. */
static void test_log_not_offered(void **state)
{
	struct fx *f = *state;

	assert_int_equal(get_u64(f, VHOST_USER_GET_FEATURES) &
				 VMIO_BIT(VHOST_F_LOG_ALL),
			 0);
	assert_int_equal(get_u64(f, VHOST_USER_GET_PROTOCOL_FEATURES) &
				 VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD),
			 0);
}

/* SET_LOG_BASE with a log of bytes bytes; its reply (a u64 0) returned,
 * or -1 if the session closed instead. *fd: the VMM's end of the log. */
static int set_log_base(struct fx *f, uint64_t bytes, int *fd)
{
	struct vhost_user_log l = { .mmap_size = bytes, .mmap_offset = 0 };
	struct vhost_user_msg r;

	*fd = memfd_create("log", MFD_CLOEXEC);
	assert_true(*fd >= 0);
	assert_int_equal(ftruncate(*fd, 4096), 0);
	send_msg(f, VHOST_USER_SET_LOG_BASE, 0, &l, sizeof(l), fd, 1);
	if (get_reply(f, &r) != 1)
		return -1;
	assert_int_equal(r.hdr.request, VHOST_USER_SET_LOG_BASE);
	assert_int_equal(r.hdr.size, 8);
	return (int)r.payload.u64;
}

static uint8_t log_byte(int fd, off_t i)
{
	uint8_t b = 0xee;

	assert_int_equal(pread(fd, &b, 1, i), 1);
	return b;
}

/* Logging on (LOG_ALL acked, a log that covers the 1 MiB of guest
 * memory, queue 0's ring asking for it): a chain completed on queue 0
 * marks the page of its used ring (gpa 0x2000: page 2); queue 1, whose
 * ring does not ask, marks nothing (its used ring is on page 6). */
static void test_log_marks_used_ring(void **state)
{
	struct fx *f = *state;
	struct vhost_user_vring_addr a = vaddr(0);
	int fd;

	assert_true(get_u64(f, VHOST_USER_GET_FEATURES) &
		    VMIO_BIT(VHOST_F_LOG_ALL));
	negotiate(f, ACK_PROTOCOL | VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD));
	assert_int_equal(mem_table(f, 1), 0);
	assert_int_equal(set_log_base(f, MEM_SIZE / 4096 / 8, &fd), 0);
	setup_queue(f, 0);
	setup_queue(f, 1);
	a.flags = VMIO_BIT(VHOST_VRING_F_LOG);
	assert_int_equal(acked(f, VHOST_USER_SET_VRING_ADDR, &a, sizeof(a),
			       NULL, 0), 0);
	post(f, 0);
	kick(f, 0);
	post(f, 1);
	kick(f, 1);
	assert_int_equal(used_idx(f, 0), 1);
	assert_int_equal(used_idx(f, 1), 1);
	assert_int_equal(log_byte(fd, 0) & 0x04, 0x04);
	assert_int_equal(log_byte(fd, 0) & 0x40, 0);
	close(fd);
}

/* A log with no bit for some of the memory table, or one sent without
 * LOG_SHMFD: the session closes (QEMU's reply has no status, and it
 * would migrate with pages unmarked). */
static void test_log_too_small_closes(void **state)
{
	struct fx *f = *state;
	int fd;

	negotiate(f, ACK_PROTOCOL | VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD));
	assert_int_equal(mem_table(f, 1), 0);
	assert_int_equal(set_log_base(f, MEM_SIZE / 4096 / 8 - 1, &fd), -1);
	expect_closed(f);
	close(fd);
}

static void test_log_without_shmfd_closes(void **state)
{
	struct fx *f = *state;
	int fd;

	negotiate(f, ACK_PROTOCOL);
	assert_int_equal(mem_table(f, 1), 0);
	assert_int_equal(set_log_base(f, MEM_SIZE / 4096 / 8, &fd), -1);
	expect_closed(f);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_get_features),
		T(test_get_protocol_features),
		T(test_reply_ack),
		T(test_set_features),
		T(test_set_features_unknown_bit),
		T(test_failure_without_ack_closes),
		T(test_small_requests),
		T(test_config),
		T(test_config_out_of_bounds),
		T(test_queue_start_and_kick),
		T(test_buffers_before_start_are_served),
		T(test_get_vring_base_stops),
		T(test_without_protocol_features_kick_enables),
		T(test_enable_disable),
		T(test_stop_order_qemu10),
		T(test_stop_order_qemu72),
		T(test_enable_then_get_features_barrier),
		T(test_protocol_features_qemu10_mask),
		T(test_mem_table_replaced_while_running),
		T(test_mem_table_without_rings_stops_queue),
		T(test_add_rem_mem_reg),
		T(test_refused_mem_reg_changes_nothing),
		T(test_call_fd_replaced_while_running),
		T(test_vring_fd_requests_acked_and_logged),
		T(test_new_call_fd_hears_of_earlier_work),
		T(test_call_fd_that_would_block),
		T(test_bad_sizes),
		T(test_bad_mem_tables),
		T(test_bad_fd_counts),
		T(test_unknown_request),
		T(test_bad_header_closes),
		T(test_bad_queue_sizes),
		T(test_queue_index_out_of_range),
		T(test_rings_outside_memory),
		T(test_kick_before_setup),
		T(test_addr_before_mem_table),
		T(test_disconnect_resets),
		T(test_reset_owner),
		T(test_no_fd_leak_over_session),
		T(test_listen),
		T(test_listen_replaces_stale_socket),
		T(test_sessions_spaced),
		T(test_kick_guard_on_the_loop_clock),
		T(test_kick_guard_look_serves_the_kick),
		T(test_log_not_offered),
		cmocka_unit_test_setup_teardown(test_log_marks_used_ring,
						setup_logging, teardown),
		cmocka_unit_test_setup_teardown(test_log_too_small_closes,
						setup_logging, teardown),
		cmocka_unit_test_setup_teardown(test_log_without_shmfd_closes,
						setup_logging, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
