/* Fuzzes the vhost-user message handler: the VMM controls every message,
 * which fds come with it, and (since it shares guest memory) the rings.
 *
 * Input: a sequence of records until the data runs out.
 *   message:  [ctl] [12-byte header] [payload: min(size, max) bytes,
 *             zero-padded if the input ends first]
 *     ctl bit 7 clear: the fds the request calls for (a memfd per
 *             SET_MEM_TABLE region and for ADD_MEM_REG and SET_LOG_BASE
 *             (the log then lies over guest memory), an eventfd for
 *             SET_VRING_KICK/CALL/ERR unless NOFD, SET_BACKEND_REQ_FD,
 *             SET_LOG_FD);
 *     ctl bit 7 set: ctl & 0x0f fds (at most 8), memfds if bit 4 is set,
 *             else eventfds.
 *   memory:   [0xff] [offset: u32 LE] [len: u16 LE] [len bytes], written
 *             into guest memory (one 1 MiB memfd, gpa = fd offset), to lay
 *             out rings.
 *   clock:    [0x7f] [t]: the loop's clock moves on by t ms (t below 0x80)
 *             or (t - 0x7f) * 250 ms, and the loop runs: the deadlines
 *             kept on it pass there (the channel's --message-timeout on
 *             a message begun and not finished, the kick guard's looks,
 *             the session gap). The clock is the harness's (fuzz.h):
 *             nothing else moves it.
 *   late:     [0x7e] [k] [t], then a message record (whatever its ctl):
 *             through the socket, its first 1 + k % length bytes are
 *             sent, the clock moves on by t as above and the loop runs,
 *             then (if the connection is still open) the rest is sent: a
 *             message that takes longer than --message-timeout (1 s)
 *             closes the connection, one that takes less is served.
 *             Straight into the handler the clock moves, then the message
 *             is handled.
 * Eventfds start at 1 so every kick fd is readable: after each message the
 * loop runs once and delivers kicks to the device. A message the handler
 * answers by closing the connection ends the input, as it would end the
 * session. The backend is freed after every input.
 *
 * Each input runs three times: straight into the handler, then twice
 * through a socket and the backend's own channel, once with every message
 * written whole and once a byte at a time (the fds on its first byte,
 * the loop turning after every byte: every message split at every byte
 * boundary). The two socket runs must agree byte for byte on the replies,
 * on where the connection closed, and on the features acked.
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "util/log.h"
#include "virtio/features.h"
#include "frontend/msg_io.h"
#include "vhost-user/backend.h"
#include "vhost-user/handlers.h"

#define MEM_SIZE (1u << 20)
#define NQ 2
#define CTL_EXPLICIT 0x80
#define CTL_MEMFDS 0x10
#define CTL_MEMORY 0xff
#define CTL_CLOCK 0x7f
#define CTL_LATE 0x7e

/* ---- A device that serves rings and checks the core's promises ------ */

struct fuzz_dev {
	bool running[NQ];
	bool holds[NQ]; /* started, and only paused since */
	struct vmio_mem *mem[NQ];
	uint8_t config[8];
};

static struct vmio_chain chain;

static void serve(struct fuzz_dev *d, struct vmio_vq *vq)
{
	/* Bounded: a ring the fuzzer made may look endless. */
	for (unsigned n = 0; n < 2 * VIRTQ_MAX_SIZE; n++) {
		if (vmio_vq_pop(vq, d->mem[vq->index], &chain) != 1)
			break;
		uint8_t b[16];
		vmio_chain_read(&chain, 0, b, sizeof(b));
		vmio_chain_write(&chain, 0, b, sizeof(b));
		vmio_vq_log_iov(vq, vmio_chain_in(&chain), chain.nin,
				chain.in_len);
		vmio_vq_push(vq, chain.head, (uint32_t)chain.in_len);
	}
	vmio_vq_flush_and_notify(vq);
}

static void dev_start(void *dev, struct vmio_vq *vq, struct vmio_mem *mem)
{
	struct fuzz_dev *d = dev;

	if (vq->index >= NQ || d->running[vq->index] || !vmio_vq_ready(vq))
		abort();
	d->running[vq->index] = true;
	d->holds[vq->index] = true;
	d->mem[vq->index] = mem;
	serve(d, vq);
}

static void dev_stop(void *dev, struct vmio_vq *vq, enum vmio_queue_stop how)
{
	struct fuzz_dev *d = dev;

	/* A queue only paused since its start may be stopped again, for
	 * good or for a memory table change (device.h). */
	if (vq->index >= NQ ||
	    (!d->running[vq->index] &&
	     !(d->holds[vq->index] && how != VMIO_QUEUE_PAUSE)))
		abort();
	d->running[vq->index] = false;
	if (how != VMIO_QUEUE_PAUSE)
		d->holds[vq->index] = false;
	d->mem[vq->index] = NULL;
}

static void dev_kick(void *dev, struct vmio_vq *vq)
{
	struct fuzz_dev *d = dev;

	if (vq->index >= NQ || !d->running[vq->index])
		abort();
	serve(d, vq);
}

static void dev_reset(void *dev)
{
	struct fuzz_dev *d = dev;

	for (unsigned i = 0; i < NQ; i++)
		if (d->running[i])
			abort();
	memset(d->config, 0, sizeof(d->config));
}

static int dev_get_config(void *dev, uint8_t *buf, uint32_t off, uint32_t len)
{
	struct fuzz_dev *d = dev;

	if ((uint64_t)off + len > sizeof(d->config))
		abort();
	memcpy(buf, d->config + off, len);
	return 0;
}

static int dev_set_config(void *dev, const uint8_t *buf, uint32_t off,
			  uint32_t len)
{
	struct fuzz_dev *d = dev;

	if ((uint64_t)off + len > sizeof(d->config))
		abort();
	memcpy(d->config + off, buf, len);
	return 0;
}

static int dev_features_set(void *dev, uint64_t features)
{
	/* Refuse one combination so the failure path runs too. */
	return (features & VMIO_BIT(VIRTIO_F_NOTIFY_ON_EMPTY)) ? -EINVAL : 0;
}

static const struct vmio_device_ops dev_ops = {
	.name = "fuzz",
	.features = VMIO_BIT(VIRTIO_F_VERSION_1) |
		    VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
		    VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) |
		    VMIO_BIT(VIRTIO_F_NOTIFY_ON_EMPTY),
	.num_queues = NQ,
	.max_queue_size = 256,
	.config_size = 8,
	.get_config = dev_get_config,
	.set_config = dev_set_config,
	.features_set = dev_features_set,
	/* Dirty logging offered: SET_LOG_BASE, and every mark on the
	 * rings and the chains, run against what the VMM sends. */
	.logs_writes = true,
	.queue_start = dev_start,
	.queue_stop = dev_stop,
	.queue_kick = dev_kick,
	.reset = dev_reset,
};

/* ---- Process-wide equipment ----------------------------------------- */

static struct vmio_loop *loop;
static struct fuzz_clock clock_ = { FUZZ_CLOCK_START };
static int memfd = -1;
static uint8_t *image;

static void init_once(void)
{
	if (loop)
		return;
	vmio_log_set_level(VMIO_LOG_ERR);
	loop = vmio_loop_new();
	memfd = memfd_create("fuzz_vhost_msg", MFD_CLOEXEC);
	if (!loop || memfd < 0 || ftruncate(memfd, MEM_SIZE) < 0 ||
	    vmio_loop_set_clock(loop, fuzz_clock_now, &clock_))
		abort();
	image = mmap(NULL, MEM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd,
		     0);
	if (image == MAP_FAILED)
		abort();
}

/* Every input starts from zeroed guest memory. */
static void clear_memory(void)
{
	if (ftruncate(memfd, 0) < 0 || ftruncate(memfd, MEM_SIZE) < 0)
		abort();
}

/* ---- Turning bytes into messages ------------------------------------ */

struct cursor {
	const uint8_t *p;
	size_t left;
};

static bool take(struct cursor *c, void *dst, size_t len)
{
	size_t n = len < c->left ? len : c->left;

	memcpy(dst, c->p, n);
	memset((uint8_t *)dst + n, 0, len - n);
	c->p += n;
	c->left -= n;
	return n == len;
}

static void memory_record(struct cursor *c)
{
	uint32_t off = 0;
	uint16_t len = 0;

	take(c, &off, sizeof(off));
	take(c, &len, sizeof(len));
	off = le32toh(off) % MEM_SIZE;
	len = le16toh(len);
	if (len > MEM_SIZE - off)
		len = (uint16_t)(MEM_SIZE - off);
	if (len > c->left)
		len = (uint16_t)c->left;
	memcpy(image + off, c->p, len);
	c->p += len;
	c->left -= len;
}

/* Moves the clock on by the step its byte says. */
static void clock_record(struct cursor *c)
{
	uint8_t t = 0;

	take(c, &t, 1);
	clock_.ns += fuzz_clock_step_ns(t);
}

static int new_fd(bool mem)
{
	int fd = mem ? dup(memfd) : eventfd(1, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0)
		abort();
	return fd;
}

/* The fds a well-behaved VMM would send with this message. */
static void natural_fds(struct vhost_user_msg *m, unsigned *n, bool *mem)
{
	*n = 0;
	*mem = false;
	switch (m->hdr.request) {
	case VHOST_USER_SET_MEM_TABLE:
		*n = m->payload.memory.nregions;
		if (*n > VHOST_USER_MAX_FDS)
			*n = VHOST_USER_MAX_FDS;
		*mem = true;
		break;
	case VHOST_USER_ADD_MEM_REG:
	case VHOST_USER_SET_LOG_BASE:
		*n = 1;
		*mem = true;
		break;
	case VHOST_USER_SET_VRING_KICK:
	case VHOST_USER_SET_VRING_CALL:
	case VHOST_USER_SET_VRING_ERR:
		*n = (m->payload.u64 & VHOST_USER_VRING_NOFD_MASK) ? 0 : 1;
		break;
	case VHOST_USER_SET_BACKEND_REQ_FD:
	case VHOST_USER_SET_LOG_FD:
		*n = 1;
		break;
	}
}

static void attach_fds(struct vhost_user_msg *m, uint8_t ctl)
{
	unsigned n;
	bool mem;

	if (ctl & CTL_EXPLICIT) {
		n = ctl & 0x0f;
		if (n > VHOST_USER_MAX_FDS)
			n = VHOST_USER_MAX_FDS;
		mem = ctl & CTL_MEMFDS;
	} else {
		natural_fds(m, &n, &mem);
	}
	for (unsigned i = 0; i < n; i++)
		m->fds[i] = new_fd(mem);
	m->nfds = n;
}

/* Reads the next message record into m (fds attached). Returns false at
 * the end of the input. */
static bool read_message(struct cursor *c, uint8_t ctl, struct vhost_user_msg *m)
{
	size_t len;

	memset(m, 0, sizeof(*m));
	if (!take(c, &m->hdr, sizeof(m->hdr)))
		return false;
	len = m->hdr.size < VHOST_USER_MAX_PAYLOAD ? m->hdr.size :
						       VHOST_USER_MAX_PAYLOAD;
	take(c, &m->payload, len);
	attach_fds(m, ctl);
	return true;
}

/* Returns false when the backend would have closed the connection. */
static bool message_record(struct vmio_backend *be, struct cursor *c,
			   uint8_t ctl)
{
	struct vhost_user_msg m, reply;

	if (!read_message(c, ctl, &m))
		return false;
	enum vhost_user_result r = vmio_backend_handle_msg(be, &m, &reply);
	/* Its queues run here: no message waits for them. */
	if (r == VHOST_USER_WAIT)
		abort();
	if (m.nfds)
		abort(); /* the handler owns (and closes) every fd it gets */
	if (r == VHOST_USER_REPLY && reply.hdr.size > VHOST_USER_MAX_PAYLOAD)
		abort();
	vmio_loop_run_once(loop, 0);
	return r != VHOST_USER_CLOSE;
}

/* ---- The same input through a socket -------------------------------- */

struct outcome {
	uint64_t replies_hash; /* FNV-1a over every reply byte */
	size_t replies_len;
	long closed_at;        /* the message after which it closed, or -1 */
	uint64_t acked;
};

static void hash_bytes(struct outcome *o, const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		o->replies_hash ^= p[i];
		o->replies_hash *= 0x100000001b3ull;
	}
	o->replies_len += n;
}

static void collect_replies(int fe, struct outcome *o)
{
	uint8_t buf[4096];
	ssize_t n;

	while ((n = recv(fe, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		hash_bytes(o, buf, (size_t)n);
}

static void gone_cb(void *opaque)
{
	*(bool *)opaque = true;
}

/* Sends bytes [from, to) of the message on the wire, its fds with the
 * first byte. */
static void send_part(int fe, const uint8_t *wire, size_t from, size_t to,
		      const struct vhost_user_msg *m)
{
	union {
		char buf[CMSG_SPACE(VHOST_USER_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { (void *)(wire + from), to - from };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (from == 0 && m->nfds) {
		size_t len = m->nfds * sizeof(int);
		memset(control.buf, 0, sizeof(control.buf));
		mh.msg_control = control.buf;
		mh.msg_controllen = CMSG_SPACE(len);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(len);
		memcpy(CMSG_DATA(cm), m->fds, len);
	}
	/* A peer gone mid-message is fine: the outcome records it. */
	(void)!sendmsg(fe, &mh, MSG_NOSIGNAL);
}

/* Sends bytes [from, to) of the message: at once, or (split) a byte at a
 * time with a turn of the loop after each, until the connection goes. */
static void send_range(int fe, const uint8_t *wire, size_t from, size_t to,
		       const struct vhost_user_msg *m, bool split,
		       const bool *gone)
{
	if (!split) {
		if (from < to)
			send_part(fe, wire, from, to, m);
		return;
	}
	for (size_t k = from; k < to && !*gone; k++) {
		send_part(fe, wire, k, k + 1, m);
		vmio_loop_run_once(loop, 0);
	}
}

static void settle(void);

/* Turns the loop until nothing is left to do (bounded: a ring the fuzzer
 * made may keep a device busy). */
static void settle(void)
{
	for (int i = 0; i < 64 && vmio_loop_run_once(loop, 0) > 0; i++)
		;
}

static void socket_run(const uint8_t *data, size_t size, bool split,
		       struct outcome *o)
{
	struct cursor c = { .p = data, .left = size };
	struct fuzz_dev dev = { .config = { 1, 2, 3, 4, 5, 6, 7, 8 } };
	bool gone = false;
	int sv[2];

	*o = (struct outcome){ .replies_hash = 0xcbf29ce484222325ull,
			       .closed_at = -1 };
	clear_memory();
	struct vmio_backend *be = vmio_backend_new(loop, &dev_ops, &dev);
	if (!be || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	vmio_backend_set_disconnect_cb(be, gone_cb, &gone);
	if (vmio_backend_serve_fd(be, sv[1]))
		abort();
	for (long index = 0; c.left && !gone; index++) {
		uint8_t ctl = *c.p++;
		c.left--;
		if (ctl == CTL_MEMORY) {
			memory_record(&c);
			continue;
		}
		if (ctl == CTL_CLOCK) {
			clock_record(&c);
			settle();
			collect_replies(sv[0], o);
			if (gone)
				o->closed_at = index;
			continue;
		}
		/* A late message: its first part, time, then the rest. */
		uint8_t late_k = 0;
		bool late = ctl == CTL_LATE;
		uint64_t late_ns = 0;
		if (late) {
			take(&c, &late_k, 1);
			uint8_t t = 0;
			take(&c, &t, 1);
			late_ns = fuzz_clock_step_ns(t);
			if (!c.left)
				break;
			ctl = *c.p++;
			c.left--;
		}
		struct vhost_user_msg m;
		if (!read_message(&c, ctl, &m))
			break;
		uint8_t wire[sizeof(m.hdr) + VHOST_USER_MAX_PAYLOAD];
		size_t len = sizeof(m.hdr);
		memcpy(wire, &m.hdr, sizeof(m.hdr));
		if (m.hdr.size <= VHOST_USER_MAX_PAYLOAD) {
			memcpy(wire + len, &m.payload, m.hdr.size);
			len += m.hdr.size;
		}
		size_t first = late ? 1 + late_k % len : len;
		send_range(sv[0], wire, 0, first, &m, split, &gone);
		if (late) {
			settle();
			clock_.ns += late_ns;
			settle();
		}
		if (!gone)
			send_range(sv[0], wire, first, len, &m, split, &gone);
		vhost_user_msg_close_fds(&m);
		settle();
		collect_replies(sv[0], o);
		if (gone)
			o->closed_at = index;
	}
	if (!gone)
		o->acked = vmio_backend_acked_features(be);
	vmio_backend_free(be);
	collect_replies(sv[0], o);
	close(sv[0]);
	for (unsigned i = 0; i < NQ; i++)
		if (dev.running[i])
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cursor c = { .p = data, .left = size };
	struct fuzz_dev dev = { .config = { 1, 2, 3, 4, 5, 6, 7, 8 } };
	struct vmio_backend *be;

	init_once();
	clear_memory();
	be = vmio_backend_new(loop, &dev_ops, &dev);
	if (!be)
		abort();
	while (c.left) {
		uint8_t ctl = *c.p++;
		c.left--;
		if (ctl == CTL_MEMORY) {
			memory_record(&c);
		} else if (ctl == CTL_CLOCK) {
			clock_record(&c);
			vmio_loop_run_once(loop, 0);
		} else if (ctl == CTL_LATE) {
			uint8_t k;

			take(&c, &k, 1);
			clock_record(&c);
			if (!c.left)
				break;
			ctl = *c.p++;
			c.left--;
			if (!message_record(be, &c, ctl))
				break;
		} else if (!message_record(be, &c, ctl)) {
			break;
		}
	}
	vmio_backend_free(be);
	for (unsigned i = 0; i < NQ; i++)
		if (dev.running[i])
			abort();

	struct outcome whole, split;
	socket_run(data, size, false, &whole);
	socket_run(data, size, true, &split);
	if (whole.replies_len != split.replies_len ||
	    whole.replies_hash != split.replies_hash ||
	    whole.closed_at != split.closed_at || whole.acked != split.acked)
		abort();
	if (!fuzz_fds_steady())
		abort();
	return 0;
}
