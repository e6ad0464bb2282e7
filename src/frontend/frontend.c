#include "frontend/frontend.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "util/fd.h"
#include "virtio/features.h"

/* How long we wait for a reply: generous, because a sanitized backend on
 * a loaded machine is slow, but bounded, so a backend that never answers
 * fails the test instead of hanging it. */
#define FE_REPLY_TIMEOUT_MS 10000

static int connect_once(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		return fd;
	int saved = errno;
	close(fd);
	errno = saved;
	return -1;
}

struct vmio_fe *vmio_fe_connect(const char *path, int timeout_ms)
{
	int64_t deadline = vmio_now_ms() + timeout_ms;
	int backoff_ms = 1;
	struct vmio_fe *fe;
	int fd;

	/* The backend may still be starting: retry the errors that mean
	 * "not listening yet", with a short backoff, until the deadline. */
	for (;;) {
		fd = connect_once(path);
		if (fd >= 0)
			break;
		if (errno != ENOENT && errno != ECONNREFUSED && errno != EAGAIN)
			return NULL;
		if (vmio_now_ms() >= deadline) {
			errno = ETIMEDOUT;
			return NULL;
		}
		struct timespec ts = { 0, backoff_ms * 1000000L };
		nanosleep(&ts, NULL);
		if (backoff_ms < 50)
			backoff_ms *= 2;
	}

	fe = calloc(1, sizeof(*fe));
	if (!fe) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	fe->sock = fd;
	fe->mem_fd = -1;
	for (unsigned i = 0; i < VMIO_FE_MAX_QUEUES; i++) {
		fe->queues[i].kick_fd = -1;
		fe->queues[i].call_fd = -1;
	}
	return fe;
}

static void queue_teardown(struct vmio_fe *fe, unsigned idx)
{
	struct vmio_dvq *q = &fe->queues[idx];

	vmio_close_fd(&q->kick_fd);
	vmio_close_fd(&q->call_fd);
	vmio_dvq_release(q);
	fe->queue_set_up[idx] = false;
}

void vmio_fe_close(struct vmio_fe *fe)
{
	if (!fe)
		return;
	vmio_close_fd(&fe->sock);
	for (unsigned i = 0; i < VMIO_FE_MAX_QUEUES; i++)
		queue_teardown(fe, i);
	if (fe->mem)
		munmap(fe->mem, fe->mem_size);
	vmio_close_fd(&fe->mem_fd);
	free(fe);
}

static bool ack_negotiated(const struct vmio_fe *fe)
{
	return fe->protocol_features &
	       VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK);
}

/* Receives the reply to `request`, bounded in time. A closed connection is
 * -ECONNRESET: for the robustness tests that is one of the two accepted
 * ways a backend refuses a message. */
static int recv_reply(struct vmio_fe *fe, uint32_t request,
		      struct vhost_user_msg *msg)
{
	struct pollfd p = { .fd = fe->sock, .events = POLLIN };
	int r;

	do
		r = poll(&p, 1, FE_REPLY_TIMEOUT_MS);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ETIMEDOUT;
	r = vhost_user_msg_recv(fe->sock, msg);
	if (r == 0)
		return -ECONNRESET;
	if (r < 0)
		return r;
	vhost_user_msg_close_fds(msg);
	if (msg->hdr.request != request ||
	    !(msg->hdr.flags & VHOST_USER_REPLY_MASK))
		return -EPROTO;
	return 0;
}

int vmio_fe_request(struct vmio_fe *fe, uint32_t request, const void *payload,
		    uint32_t len, const int *fds, unsigned nfds, bool need_reply,
		    void *reply, uint32_t reply_len)
{
	struct vhost_user_msg msg;
	bool want_ack = need_reply && !reply && ack_negotiated(fe);
	int r;

	if (len > VHOST_USER_MAX_PAYLOAD || nfds > VHOST_USER_MAX_FDS)
		return -EINVAL;
	memset(&msg, 0, sizeof(msg));
	msg.hdr.request = request;
	msg.hdr.flags = VHOST_USER_VERSION;
	if (want_ack)
		msg.hdr.flags |= VHOST_USER_NEED_REPLY_MASK;
	msg.hdr.size = len;
	if (len)
		memcpy(&msg.payload, payload, len);
	for (unsigned i = 0; i < nfds; i++)
		msg.fds[i] = fds[i];
	msg.nfds = nfds;
	r = vhost_user_msg_send(fe->sock, &msg);
	if (r < 0)
		return r;
	if (!reply && !want_ack)
		return 0;

	r = recv_reply(fe, request, &msg);
	if (r < 0)
		return r;
	if (reply) {
		uint32_t n = msg.hdr.size < reply_len ? msg.hdr.size : reply_len;
		memcpy(reply, &msg.payload, n);
		return 0;
	}
	if (msg.hdr.size != sizeof(uint64_t))
		return -EPROTO;
	return msg.payload.u64 ? -EIO : 0;
}

static int request_u64(struct vmio_fe *fe, uint32_t request, uint64_t v)
{
	return vmio_fe_request(fe, request, &v, sizeof(v), NULL, 0, true, NULL,
			       0);
}

static int get_u64(struct vmio_fe *fe, uint32_t request, uint64_t *v)
{
	*v = 0;
	return vmio_fe_request(fe, request, NULL, 0, NULL, 0, false, v,
			       sizeof(*v));
}

uint64_t vmio_fe_ring_features(void)
{
	const char *ring = getenv("VMIO_RING");
	const char *in_order = getenv("VMIO_IN_ORDER");
	uint64_t f = 0;

	if (ring && !strcmp(ring, "packed"))
		f |= VMIO_BIT(VIRTIO_F_RING_PACKED);
	if (!in_order || strcmp(in_order, "0"))
		f |= VMIO_BIT(VIRTIO_F_IN_ORDER);
	return f;
}

int vmio_fe_negotiate(struct vmio_fe *fe, uint64_t want_features,
		      uint64_t want_protocol_features)
{
	const uint64_t proto_bit = VMIO_BIT(VHOST_USER_F_PROTOCOL_FEATURES);
	int r;

	r = get_u64(fe, VHOST_USER_GET_FEATURES, &fe->device_features);
	if (r < 0)
		return r;
	want_features |= vmio_fe_ring_features();
	fe->features = fe->device_features & want_features & ~proto_bit;

	/* Protocol features come first, as QEMU sends them, so that every
	 * later message may already ask for REPLY_ACK. */
	if ((fe->device_features & proto_bit) && want_protocol_features) {
		uint64_t offered;

		fe->features |= proto_bit;
		r = get_u64(fe, VHOST_USER_GET_PROTOCOL_FEATURES, &offered);
		if (r < 0)
			return r;
		uint64_t acked = offered & want_protocol_features;
		r = request_u64(fe, VHOST_USER_SET_PROTOCOL_FEATURES, acked);
		if (r < 0)
			return r;
		fe->protocol_features = acked;
	}
	r = vmio_fe_request(fe, VHOST_USER_SET_OWNER, NULL, 0, NULL, 0, true,
			    NULL, 0);
	if (r < 0)
		return r;
	return request_u64(fe, VHOST_USER_SET_FEATURES, fe->features);
}

/* Region boundaries fall on pages, because the backend maps each region
 * from the fd at mmap_offset; the last region takes the remainder. */
static int send_mem_table(struct vmio_fe *fe, unsigned nregions)
{
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	struct vhost_user_memory m;
	int fds[VHOST_USER_MEM_TABLE_MAX_REGIONS];
	uint64_t step, off = 0;

	if (nregions == 0 || nregions > VHOST_USER_MEM_TABLE_MAX_REGIONS)
		return -EINVAL;
	step = fe->mem_size / nregions / page * page;
	if (step == 0)
		return -EINVAL;

	memset(&m, 0, sizeof(m));
	m.nregions = nregions;
	for (unsigned i = 0; i < nregions; i++) {
		struct vhost_user_memory_region *reg = &m.regions[i];
		uint64_t size = i + 1 < nregions ? step : fe->mem_size - off;

		reg->gpa = off;
		reg->size = size;
		reg->uva = (uint64_t)(uintptr_t)fe->mem + off;
		reg->mmap_offset = off;
		fds[i] = fe->mem_fd;
		off += size;
	}
	int r = vmio_fe_request(fe, VHOST_USER_SET_MEM_TABLE, &m,
				(uint32_t)(8 + nregions * sizeof(m.regions[0])),
				fds, nregions, true, NULL, 0);
	if (r == 0)
		fe->nregions = nregions;
	return r;
}

int vmio_fe_mem_create(struct vmio_fe *fe, uint64_t size, unsigned nregions)
{
	if (fe->mem)
		return -EBUSY;
	fe->mem_fd = memfd_create("vmio-guest", MFD_CLOEXEC);
	if (fe->mem_fd < 0)
		return -errno;
	if (ftruncate(fe->mem_fd, (off_t)size) < 0)
		return -errno;
	void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
		       fe->mem_fd, 0);
	if (p == MAP_FAILED)
		return -errno;
	fe->mem = p;
	fe->mem_size = size;
	fe->alloc_next = 0;
	return send_mem_table(fe, nregions);
}

int vmio_fe_mem_resend(struct vmio_fe *fe, unsigned nregions)
{
	if (!fe->mem)
		return -EINVAL;
	return send_mem_table(fe, nregions);
}

uint64_t vmio_fe_alloc(struct vmio_fe *fe, uint64_t len, uint64_t align)
{
	uint64_t start;

	if (align == 0)
		align = 1;
	start = (fe->alloc_next + align - 1) / align * align;
	if (start < fe->alloc_next || start > fe->mem_size ||
	    len > fe->mem_size - start)
		return UINT64_MAX;
	fe->alloc_next = start + len;
	return start;
}

void *vmio_fe_ptr(struct vmio_fe *fe, uint64_t gpa)
{
	return fe->mem + gpa;
}

static uint64_t uva_of(struct vmio_fe *fe, uint64_t gpa)
{
	return (uint64_t)(uintptr_t)fe->mem + gpa;
}

static int send_vring_fd(struct vmio_fe *fe, uint32_t request, unsigned idx,
			 int fd)
{
	uint64_t v = idx;

	return vmio_fe_request(fe, request, &v, sizeof(v), &fd, 1, true, NULL,
			       0);
}

static int send_vring_state(struct vmio_fe *fe, uint32_t request,
			    unsigned idx, uint32_t num)
{
	struct vhost_user_vring_state s = { .index = idx, .num = num };

	return vmio_fe_request(fe, request, &s, sizeof(s), NULL, 0, true, NULL,
			       0);
}

/* A packed ring (2.8): the descriptor ring (16-aligned) and the two
 * 4-byte event suppression areas. */
static int alloc_packed_rings(struct vmio_fe *fe, unsigned idx, uint16_t size)
{
	uint64_t d = vmio_fe_alloc(fe, (uint64_t)size * sizeof(struct pvirtq_desc),
				   16);
	uint64_t drv = vmio_fe_alloc(fe, sizeof(struct pvirtq_event_suppress), 4);
	uint64_t dev = vmio_fe_alloc(fe, sizeof(struct pvirtq_event_suppress), 4);

	if (d == UINT64_MAX || drv == UINT64_MAX || dev == UINT64_MAX)
		return -ENOMEM;
	return vmio_dvq_init_packed(&fe->queues[idx], idx, size,
				    vmio_fe_ptr(fe, d), d, vmio_fe_ptr(fe, drv),
				    drv, vmio_fe_ptr(fe, dev), dev);
}

/* Ring alignment from virtio 1.x 2.7: descriptors 16, avail 2, used 4. */
static int alloc_rings(struct vmio_fe *fe, unsigned idx, uint16_t size)
{
	if (fe->features & VMIO_BIT(VIRTIO_F_RING_PACKED))
		return alloc_packed_rings(fe, idx, size);
	uint64_t d = vmio_fe_alloc(fe, virtq_desc_bytes(size), 16);
	uint64_t a = vmio_fe_alloc(fe, virtq_avail_bytes(size), 2);
	uint64_t u = vmio_fe_alloc(fe, virtq_used_bytes(size), 4);

	if (d == UINT64_MAX || a == UINT64_MAX || u == UINT64_MAX)
		return -ENOMEM;
	return vmio_dvq_init(&fe->queues[idx], idx, size, vmio_fe_ptr(fe, d),
			     d, vmio_fe_ptr(fe, a), a, vmio_fe_ptr(fe, u), u);
}

static int send_ring_setup(struct vmio_fe *fe, unsigned idx)
{
	struct vmio_dvq *q = &fe->queues[idx];
	struct vhost_user_vring_addr addr = {
		.index = idx,
		.desc_uva = uva_of(fe, q->desc_gpa),
		.used_uva = uva_of(fe, q->used_gpa),
		.avail_uva = uva_of(fe, q->avail_gpa),
	};
	int r;

	r = send_vring_state(fe, VHOST_USER_SET_VRING_NUM, idx, q->size);
	if (!r)
		/* Packed: offset 0 with both wrap counters at 1. */
		r = send_vring_state(fe, VHOST_USER_SET_VRING_BASE, idx,
				     q->packed ? 0x80008000u : 0);
	if (!r)
		r = vmio_fe_request(fe, VHOST_USER_SET_VRING_ADDR, &addr,
				    sizeof(addr), NULL, 0, true, NULL, 0);
	if (!r)
		r = send_vring_fd(fe, VHOST_USER_SET_VRING_CALL, idx,
				  q->call_fd);
	if (!r)
		r = send_vring_fd(fe, VHOST_USER_SET_VRING_KICK, idx,
				  q->kick_fd);
	if (!r && (fe->features & VMIO_BIT(VHOST_USER_F_PROTOCOL_FEATURES)))
		r = send_vring_state(fe, VHOST_USER_SET_VRING_ENABLE, idx, 1);
	return r;
}

int vmio_fe_queue_setup(struct vmio_fe *fe, unsigned idx, uint16_t size)
{
	struct vmio_dvq *q;
	int r;

	if (idx >= VMIO_FE_MAX_QUEUES || !fe->mem)
		return -EINVAL;
	if (fe->queue_set_up[idx])
		queue_teardown(fe, idx);
	r = alloc_rings(fe, idx, size);
	if (r < 0)
		return r;
	q = &fe->queues[idx];
	q->event_idx = fe->features & VMIO_BIT(VIRTIO_RING_F_EVENT_IDX);
	q->in_order = fe->features & VMIO_BIT(VIRTIO_F_IN_ORDER);
	q->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	fe->queue_set_up[idx] = true;
	if (q->kick_fd < 0 || q->call_fd < 0) {
		r = -errno;
		queue_teardown(fe, idx);
		return r;
	}
	return send_ring_setup(fe, idx);
}

int vmio_fe_log_start(struct vmio_fe *fe, int log_fd, uint64_t size)
{
	struct vhost_user_log log = { .mmap_size = size, .mmap_offset = 0 };
	uint64_t features = fe->features | VMIO_BIT(VHOST_F_LOG_ALL), zero;
	int r = vmio_fe_request(fe, VHOST_USER_SET_LOG_BASE, &log, sizeof(log),
				&log_fd, 1, false, &zero, sizeof(zero));

	if (!r)
		r = vmio_fe_request(fe, VHOST_USER_SET_FEATURES, &features,
				    sizeof(features), NULL, 0, true, NULL, 0);
	for (unsigned idx = 0; !r && idx < VMIO_FE_MAX_QUEUES; idx++) {
		struct vmio_dvq *q = &fe->queues[idx];
		struct vhost_user_vring_addr addr = {
			.index = idx,
			.flags = VMIO_BIT(VHOST_VRING_F_LOG),
			.desc_uva = uva_of(fe, q->desc_gpa),
			.used_uva = uva_of(fe, q->used_gpa),
			.avail_uva = uva_of(fe, q->avail_gpa),
			.log_gpa = q->used_gpa,
		};

		if (fe->queue_set_up[idx])
			r = vmio_fe_request(fe, VHOST_USER_SET_VRING_ADDR,
					    &addr, sizeof(addr), NULL, 0, true,
					    NULL, 0);
	}
	if (!r)
		fe->features = features;
	return r;
}

int vmio_fe_queue_stop(struct vmio_fe *fe, unsigned idx, uint16_t *base)
{
	struct vhost_user_vring_state s = { .index = idx };
	int r;

	r = vmio_fe_request(fe, VHOST_USER_GET_VRING_BASE, &s, sizeof(s), NULL,
			    0, false, &s, sizeof(s));
	if (r == 0 && base)
		*base = (uint16_t)s.num;
	return r;
}
