/* Fuzzes the whole virtio-net device (src/devices/net/) in-process: a
 * hostile guest writes every byte of the rings and descriptors, the VMM
 * starts, stops, pauses, disables and resets queues and changes the memory
 * table, and a fake port answers every call, either like TAP (copies
 * within the call) or like AF_XDP without a copy (holds tx frames until
 * tx_reap, receives into posted guest buffers given back by rx_reap,
 * attach and detach). The device is driven through its vmio_device_ops the
 * way the vhost-user core drives it (queues.c, handlers.c), on a real
 * vmio_loop; the queues' kick fds are watched as the core watches them, so
 * the device's own reschedules (deferred work) and its retry timers
 * come back through the loop.
 *
 * What must hold, checked with abort():
 *  - every chain the device pops goes back used exactly once (tracked by
 *    avail position through --wrap of vmio_vq_pop/unpop/push, so a head the
 *    guest itself posted twice is fine), is never unpopped once used, and
 *    its used length is at most its writable size;
 *  - between callbacks, the chains out on a pair are exactly those the
 *    port holds; after a real stop (GET_VRING_BASE), a memory table
 *    change and a reset, none are out, and the port holds nothing;
 *  - the port only ever sees buffers inside guest memory as mapped now,
 *    a validated frame, a header of the negotiated size, posts only while
 *    attached, and no tx, rx or post on a pair while its attach is under
 *    way (VNET_ATTACH_LATER);
 *  - at the end, with a guest that kicks whenever the device asks for
 *    kicks and a port that takes every frame, no running tx or control
 *    queue is left idle with chains waiting, nor an rx queue of a pair
 *    the guest receives on with buffers waiting while the port has
 *    frames for them or room to post them, or with frames received into
 *    posted buffers not given back (no lost wakeup);
 *  - no sanitizer report, no hang (every loop is bounded).
 * A queue the guest broke is exempt from the counts until the reset.
 *
 * Input: a 20-byte header (missing bytes read as zero), the image of guest
 * memory from gpa 0, the operations, then the port's answers.
 *   [0]     bit 0 the no-copy port (else TAP-like), bit 1 pair 0 and
 *           bit 2 pair 1 start copying (no-copy port: like --xdp-copy),
 *           bit 3 two queue pairs (else one), bit 4 start every queue
 *           before the operations, bit 5 a 256-byte hole between regions
 *   [1]     features: bit 0 MRG_RXBUF, 1 EVENT_IDX, 2 INDIRECT_DESC,
 *           3 CTRL_VQ, 4 MQ, 5 VERSION_1, 6 CSUM + HOST_TSO4/6,
 *           7 GUEST_CSUM + GUEST_TSO4
 *   [2]     MTU = 68 + 6 * [2]
 *   [3..7]  queue i has size 1 << ([3 + i] % 9)
 *   [8]     where memory splits in two regions, in 256-byte units (0: one)
 *   [9..10] initial last_avail_idx = used_idx of every queue (LE)
 *   [11]    the device's max_queue_size = [11] ? 1 << ([11] % 9) : none
 *   [12..13] image length (LE, at most MEM_SIZE), [14..15] ops length (LE)
 *   [16]    rx buffers the no-copy port holds per pair, at most (0:
 *           512); it answers -ENOSPC only then
 *   [17]    bit 0: the no-copy port's attach of a detached pair
 *           answers VNET_ATTACH_LATER (an XSK whose queue is still
 *           busy); such attaches finish at op 13 and before the drain
 *   [18..19] unused
 * Rings sit back to back from gpa 0, queue 0 first: desc (16-aligned),
 * avail, used (4-aligned). Queues are numbered as the device numbers them:
 * 2i rx and 2i+1 tx of pair i, then the control queue (2 without MQ).
 * Operations: a byte, low nibble the op, high nibble a (q = a % 8 % NQ):
 *   0 start q (SET_VRING_KICK, enabled)   1 stop q (GET_VRING_BASE)
 *   2 pause/resume q (SET_VRING_CALL)      3 enable (a & 8) or disable q
 *   4 kick q                               5 run the loop 1 + a times
 *   6 post head [b] on q                   7 write descriptor [b] of q:
 *     addr [b b], len [b b], flags [b], next [b]
 *   8 write at [off b b] [len b] bytes, which follow
 *   9 new memory table, cut at [b] (mapped anew, so every pointer moves)
 *  10 a & 8: a hold for a hand-over, then resumed; else reset (and
 *     renegotiate)                        11 1 + a / 2 frames on pair a & 1
 *  12 complete 1 + a / 2 tx frames (a / 2 == 7: all) on pair a & 1
 *  13 finish the attaches under way, fire the armed retry timers and
 *     run the loop once
 *  14 post one descriptor on q: head [b], addr [b b], len [b b], [b] bit
 *     0 writable, then kick
 *  15 a & 8: SET_FEATURES again, with the bits of [b] & 0xc6 flipped
 *     (EVENT_IDX, INDIRECT_DESC, CSUM..., GUEST_CSUM...); else read
 *     config space at [b] % 24, [b] % 8 bytes
 * (Multi-byte values are little-endian.) The port's answers are read as
 * it needs them (zero once they run out):
 *   tx       [a]: copying (or a % 8 >= 5), a % 4 == 1 -EAGAIN, 2 -EMSGSIZE,
 *            else sent; without a copy, a % 8 == 4 -EAGAIN, else held
 *   rx       [a] 0xff: lost (-EIO); else [b]: a frame of header + (a << 4 |
 *            b & 15) bytes, cut to the buffers
 *   rx_post  [a]: a % 8 == 2 -EFAULT; a buffer below header + largest
 *            frame is refused (-EMSGSIZE) unless a & 0x10
 *   op 11 without a copy, per buffer filled: [b b] length 1 + v % room
 *   attach   (of a pair detached and holding nothing) [a]: 0xc0 copies
 *            from now on, like XDP going to copy mode
 * FUZZ_NET_DEVICE_VERBOSE=1 traces the operations and prints the device's
 * counters.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "devices/net/device.h"
#include "devices/net/state.h"
#include "event/loop.h"
#include "fuzz.h"
#include "util/iov.h"
#include "util/log.h"
#include "virtio/features.h"
#include "virtio/virtqueue.h"

#define MEM_SIZE 0x10000u
#define HDR_SIZE 20u
#define UVA_BASE 0x7f0000000000ull
#define UVA_STRIDE 0x1000000000ull
#define NQ_MAX 5u
#define NPAIRS_MAX 2u
/* What the fake port holds per pair, each way, at most. */
#define FAKE_CAP 512u
/* Bounds per input: operations, loop rounds, chains popped (which keeps
 * avail positions from wrapping under a chain still out). */
#define MAX_OPS 512u
#define MAX_LOOP_ROUNDS 1024u
#define MAX_POPS 8192u
/* Bytes of guest buffers the port reads or writes in full per input. */
#define TOUCH_BUDGET (1u << 20)

#define H_NOCOPY 0x01
#define H_COPY0 0x02
#define H_COPY1 0x04
#define H_TWO_PAIRS 0x08
#define H_AUTOSTART 0x10
#define H_HOLE 0x20

#define FAIL(...)                                                             \
	do {                                                                  \
		fprintf(stderr, "fuzz_net_device: " __VA_ARGS__);             \
		fputc('\n', stderr);                                          \
		abort();                                                      \
	} while (0)

/* ---- Input ------------------------------------------------------------ */

static struct stream ops_in, answers;
static uint8_t hdr[HDR_SIZE];

/* ---- Guest memory ----------------------------------------------------- */

static int memfd = -1;
static uint8_t *image; /* the guest's view */
static struct vmio_mem mem;
static unsigned nregions;
static uint64_t reg_start[2], reg_end[2];
static unsigned generation; /* of the table: each maps anew */

static void init_once(void)
{
	if (image)
		return;
	vmio_log_set_level(VMIO_LOG_ERR);
	image = fuzz_guest_memory("fuzz_net_device", MEM_SIZE, &memfd);
	vmio_mem_init(&mem);
}

static uint64_t region_uva(unsigned i, uint64_t gpa_start)
{
	return UVA_BASE - i * UVA_STRIDE + gpa_start;
}

static uint64_t gpa_to_uva(uint64_t gpa)
{
	for (unsigned i = 0; i < nregions; i++)
		if (gpa >= reg_start[i] && gpa < reg_end[i])
			return region_uva(i, reg_start[i]) + gpa - reg_start[i];
	return 0;
}

/* Maps guest memory anew, cut at cut * 256 (0: one region): the old
 * mappings go only after the new ones exist, so every local pointer
 * changes, and one the device kept would fault. */
static void install_table(uint8_t cut)
{
	struct vmio_mem fresh;
	uint64_t c = (uint64_t)cut * 256;

	vmio_mem_init(&fresh);
	nregions = c ? 2 : 1;
	reg_start[0] = 0;
	reg_end[0] = c ? c : MEM_SIZE;
	reg_start[1] = c + ((hdr[0] & H_HOLE) && c + 256 < MEM_SIZE ? 256 : 0);
	reg_end[1] = MEM_SIZE;
	for (unsigned i = 0; i < nregions; i++) {
		struct vmio_mem_region_desc d = {
			.gpa = reg_start[i],
			.size = reg_end[i] - reg_start[i],
			.uva = region_uva(i, reg_start[i]),
			.mmap_offset = reg_start[i],
		};
		const char *why;

		if (vmio_mem_add(&fresh, &d, dup(memfd), &why))
			abort(); /* the harness builds valid tables only */
	}
	vmio_mem_clear(&mem);
	vmio_mem_move(&mem, &fresh);
	generation++;
}

/* Whether [p, p + len) lies inside one region as mapped now. */
static bool in_guest(const void *p, size_t len)
{
	const uint8_t *b = p;

	for (unsigned i = 0; i < mem.nregions; i++) {
		const struct vmio_mem_region *r = &mem.regions[i];

		if (b >= r->host && (uint64_t)(b - r->host) < r->d.size &&
		    len <= r->d.size - (uint64_t)(b - r->host))
			return true;
	}
	return false;
}

static size_t touch_budget;

/* Reads (and with write, rewrites) guest bytes the way a kernel would,
 * through libc, so that the sanitizers see the whole range. */
static void touch(void *p, size_t len, bool write)
{
	static uint8_t scratch[MEM_SIZE];

	if (!len)
		return;
	if (!in_guest(p, len))
		FAIL("backend given %p+%zu, outside guest memory", p, len);
	if (len > touch_budget || len > sizeof(scratch)) {
		volatile uint8_t *v = p;

		(void)v[0];
		(void)v[len - 1];
		return;
	}
	touch_budget -= len;
	memcpy(scratch, p, len);
	if (write) {
		memset(scratch, 0x5a, len);
		memcpy(p, scratch, len);
	}
}

/* ---- Queues, as the vhost-user core holds them ------------------------ */

struct hq {
	struct vmio_vq vq;
	int kick_fd, call_fd;
	bool started, enabled;
	bool running;
	bool holds; /* only paused since its start: may hold chains */
	bool kick_watched;
	uint64_t desc_gpa, avail_gpa, used_gpa;
};

static struct hq queues[NQ_MAX];
static unsigned nq;
static struct vmio_loop *loop;
static struct vnet_device *dev;
static const struct vmio_device_ops *ops;
static uint64_t features;

/* Chains out, by avail position. */
enum { REC_NONE, REC_OUT, REC_USED };
static uint8_t rec_state[NQ_MAX][65536];
static uint16_t rec_head[NQ_MAX][65536];
static uint64_t rec_in_len[NQ_MAX][65536];
static uint32_t rec_written[NQ_MAX][65536];
static uint16_t rec_lo[NQ_MAX]; /* no chain out before it */
static unsigned rec_out[NQ_MAX];
static unsigned pops;

static unsigned qindex(const struct vmio_vq *vq)
{
	for (unsigned i = 0; i < nq; i++)
		if (vq == &queues[i].vq)
			return i;
	FAIL("the device used a queue that is not the core's");
}

/* The positions popped since the last clear lie in [rec_base, rec_base +
 * rec_span) (mod 2^16): MAX_POPS keeps the span short, and only it is
 * cleared. */
static uint16_t rec_base[NQ_MAX];
static uint32_t rec_span[NQ_MAX];

static void rec_clear(unsigned i)
{
	for (uint32_t k = 0; k < rec_span[i]; k++)
		rec_state[i][(uint16_t)(rec_base[i] + k)] = REC_NONE;
	rec_base[i] = rec_lo[i] = queues[i].vq.last_avail_idx;
	rec_span[i] = 0;
	rec_out[i] = 0;
}

int __real_vmio_vq_pop(struct vmio_vq *vq, const struct vmio_mem *m,
		       struct vmio_chain *chain);
int __wrap_vmio_vq_pop(struct vmio_vq *vq, const struct vmio_mem *m,
		       struct vmio_chain *chain);
void __real_vmio_vq_unpop(struct vmio_vq *vq, unsigned n);
void __wrap_vmio_vq_unpop(struct vmio_vq *vq, unsigned n);
void __real_vmio_vq_push(struct vmio_vq *vq, uint16_t head, uint32_t written);
void __wrap_vmio_vq_push(struct vmio_vq *vq, uint16_t head, uint32_t written);

int __wrap_vmio_vq_pop(struct vmio_vq *vq, const struct vmio_mem *m,
		       struct vmio_chain *chain)
{
	uint16_t pos = vq->last_avail_idx;
	int r = __real_vmio_vq_pop(vq, m, chain);
	unsigned i;

	if (r != 1 || !dev)
		return r;
	i = qindex(vq);
	if (m != &mem)
		FAIL("queue %u popped with a memory table not the core's", i);
	if (!queues[i].started || !queues[i].enabled || !queues[i].running)
		FAIL("queue %u popped while not running", i);
	if (rec_state[i][pos] == REC_OUT)
		FAIL("queue %u: avail position %u popped twice", i, pos);
	if (!rec_out[i] || (uint16_t)(rec_lo[i] - pos) - 1u < 32767u)
		rec_lo[i] = pos; /* (an unpop may have moved it back) */
	if ((uint16_t)(pos - rec_base[i]) >= rec_span[i])
		rec_span[i] = (uint16_t)(pos - rec_base[i]) + 1u;
	rec_state[i][pos] = REC_OUT;
	rec_head[i][pos] = chain->head;
	rec_in_len[i][pos] = chain->in_len;
	rec_out[i]++;
	pops++;
	return r;
}

/* A chain out with head at another position than pos (and before
 * end) that could have taken written bytes: the one a push matched when
 * the guest had put head in twice. */
static bool rec_swap(unsigned i, uint16_t pos, uint16_t end)
{
	for (uint16_t o = rec_lo[i]; o != end; o++) {
		if (o == pos || rec_state[i][o] != REC_OUT ||
		    rec_head[i][o] != rec_head[i][pos] ||
		    rec_in_len[i][o] < rec_written[i][pos])
			continue;
		rec_state[i][o] = REC_USED;
		rec_written[i][o] = rec_written[i][pos];
		rec_state[i][pos] = REC_OUT;
		return true;
	}
	return false;
}

void __wrap_vmio_vq_unpop(struct vmio_vq *vq, unsigned n)
{
	if (dev) {
		unsigned i = qindex(vq);
		uint16_t end = (uint16_t)(vq->last_avail_idx - n);

		for (unsigned k = 1; k <= n; k++) {
			uint16_t pos = (uint16_t)(vq->last_avail_idx - k);

			if (rec_state[i][pos] == REC_USED && rec_swap(i, pos, end))
				rec_out[i]++;
			if (rec_state[i][pos] != REC_OUT)
				FAIL("queue %u: unpop of avail position %u, "
				     "which is %s", i, pos,
				     rec_state[i][pos] == REC_USED
					     ? "used already"
					     : "not popped");
			rec_state[i][pos] = REC_NONE;
			rec_out[i]--;
		}
	}
	__real_vmio_vq_unpop(vq, n);
}

/* Which chain out a push gives back: the head's, and if the guest put
 * that head in more than once, the one with the fewest writable bytes
 * that can take written (which never leaves a later push without a
 * match another choice would have had). */
void __wrap_vmio_vq_push(struct vmio_vq *vq, uint16_t head, uint32_t written)
{
	if (dev) {
		unsigned i = qindex(vq);
		bool same_head = false, found = false;
		uint16_t best = 0;

		if (!vq->used)
			FAIL("queue %u: head %u pushed with the rings unmapped "
			     "(lost)", i, head);
		for (uint16_t pos = rec_lo[i]; pos != vq->last_avail_idx; pos++) {
			if (rec_state[i][pos] != REC_OUT ||
			    rec_head[i][pos] != head)
				continue;
			same_head = true;
			if (written <= rec_in_len[i][pos] &&
			    (!found || rec_in_len[i][pos] < rec_in_len[i][best])) {
				best = pos;
				found = true;
			}
		}
		if (!found)
			FAIL("queue %u: head %u used (%u bytes) but %s", i,
			     head, written,
			     same_head ? "its chain has fewer writable bytes"
				       : "no chain with it is out");
		rec_state[i][best] = REC_USED;
		rec_written[i][best] = written;
		rec_out[i]--;
		while (rec_lo[i] != vq->last_avail_idx &&
		       rec_state[i][rec_lo[i]] != REC_OUT)
			rec_lo[i]++;
	}
	__real_vmio_vq_push(vq, head, written);
}

static void kick_cb(void *opaque, int fd, uint32_t events);

static void start_queue(struct hq *q)
{
	int rc = vmio_loop_add(loop, q->kick_fd, EPOLLIN, kick_cb, q);

	if (rc)
		FAIL("cannot watch a kick fd: %d", rc);
	q->kick_watched = true;
	q->running = true;
	q->holds = true;
	ops->queue_start(dev, &q->vq, &mem);
}

/* As the core does it (src/vhost-user/queue_home.c): a queue only paused
 * gets a stop that wants its chains back too. */
static void stop_queue_for(struct hq *q, enum vmio_queue_stop how)
{
	if (!q->running && !(q->holds && how != VMIO_QUEUE_PAUSE))
		return;
	if (q->kick_watched)
		vmio_loop_remove(loop, q->kick_fd);
	q->kick_watched = false;
	q->running = false;
	if (how != VMIO_QUEUE_PAUSE)
		q->holds = false;
	ops->queue_stop(dev, &q->vq, how);
}

/* As the core decides it (src/vhost-user/queues.c). */
static void stop_queue(struct hq *q)
{
	stop_queue_for(q, q->started && q->enabled ? VMIO_QUEUE_PAUSE
						   : VMIO_QUEUE_HALT);
}

static void sync_queue(struct hq *q)
{
	bool ready = q->started && q->enabled && vmio_vq_ready(&q->vq);

	if (ready && !q->running)
		start_queue(q);
	else if (!ready && q->running)
		stop_queue(q);
}

static void pause_queue(struct hq *q)
{
	if (q->running)
		stop_queue(q);
}

static void kick_cb(void *opaque, int fd, uint32_t events)
{
	struct hq *q = opaque;
	uint64_t count;

	(void)events;
	if (read(fd, &count, sizeof(count)) < 0)
		count = 0;
	if (!q->running)
		return;
	ops->queue_kick(dev, &q->vq);
	sync_queue(q);
}

/* Where queue i's rings sit: back to back from gpa 0. */
static void plan_rings(void)
{
	uint64_t at = 0;

	for (unsigned i = 0; i < NQ_MAX; i++) {
		unsigned size = 1u << (hdr[3 + i] % 9);
		struct hq *q = &queues[i];

		at = (at + 15) & ~15ull;
		q->desc_gpa = at;
		q->avail_gpa = at + virtq_desc_bytes(size);
		q->used_gpa = (q->avail_gpa + virtq_avail_bytes(size) + 3) & ~3ull;
		at = q->used_gpa + virtq_used_bytes(size);
	}
}

static void map_queue(struct hq *q)
{
	vmio_vq_unmap(&q->vq);
	if (q->vq.addr_set)
		vmio_vq_map(&q->vq, &mem);
}

/* A queue as the VMM sets it up: size, base, addresses, fds (started by
 * an operation, or at once with H_AUTOSTART). */
static void setup_queue(unsigned i)
{
	struct hq *q = &queues[i];
	struct vmio_vq *vq = &q->vq;
	uint16_t base = (uint16_t)(hdr[9] | hdr[10] << 8);

	vmio_vq_init(vq, i);
	vq->size = (uint16_t)(1u << (hdr[3 + i] % 9));
	/* The core refuses SET_VRING_NUM above the device's limit: such a
	 * queue keeps no size, and never maps. */
	if (vq->size > ops->max_queue_size)
		vq->size = 0;
	vq->desc_uva = gpa_to_uva(q->desc_gpa);
	vq->avail_uva = gpa_to_uva(q->avail_gpa);
	vq->used_uva = gpa_to_uva(q->used_gpa);
	vq->addr_set = vq->desc_uva && vq->avail_uva && vq->used_uva;
	vq->event_idx = features & VMIO_BIT(VIRTIO_RING_F_EVENT_IDX);
	vq->indirect = features & VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC);
	q->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	q->call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->kick_fd < 0 || q->call_fd < 0)
		abort();
	vmio_vq_set_transport(vq, &vmio_vq_eventfd_transport, &q->call_fd);
	q->started = q->enabled = false;
	vq->last_avail_idx = vq->used_idx = vq->published_used = base;
	q->running = q->kick_watched = false;
	map_queue(q);
	rec_clear(i);
}

static void close_queue(unsigned i)
{
	struct vmio_vq *vq = &queues[i].vq;

	if (queues[i].kick_watched)
		vmio_loop_remove(loop, queues[i].kick_fd);
	queues[i].kick_watched = false;
	close(queues[i].kick_fd);
	close(queues[i].call_fd);
	queues[i].started = queues[i].enabled = false;
	vmio_vq_release(vq);
	queues[i].holds = false;
	vmio_vq_init(vq, i);
}

/* ---- The fake port ------------------------------------------------- */

struct held_tx {
	uint32_t cookie;
	unsigned nseg;
	struct iovec seg[4];
};

struct posted_rx {
	void *buf;
	size_t len;
	uint32_t cookie;
	uint32_t filled; /* frame length behind the header, 0 while empty */
};

struct fake_pair {
	bool attached;
	bool pending;  /* attach answered VNET_ATTACH_LATER, not finished */
	bool copy;     /* no-copy port: this pair copies (XDP copy mode) */
	bool enabled;  /* set_pair_enabled */
	int fd;        /* rx_fd: readable while there is work */
	bool fd_up;
	unsigned frames; /* copying: frames waiting for rx */
	struct held_tx tx[FAKE_CAP];
	unsigned ntx, tx_done; /* held, and of those (first) completed */
	struct posted_rx rx[FAKE_CAP];
	unsigned nrx, rx_filled; /* posted, and of those (first) filled */
};

struct fake {
	struct vnet_port b;
	size_t hdr_len;
	bool configured;
	unsigned rx_cap; /* rx buffers held per pair, at most */
	bool attach_later; /* header [17] bit 0 */
	struct fake_pair p[NPAIRS_MAX];
};

static struct fake fk;
/* The drain at the end: the port takes every frame. */
static bool cooperative;

static struct fake_pair *fake_pair(struct vnet_port *b, unsigned pair)
{
	if (b != &fk.b || pair >= fk.b.pairs)
		FAIL("backend called for pair %u of %u", pair, fk.b.pairs);
	return &fk.p[pair];
}

static bool nocopy(const struct fake_pair *p)
{
	return fk.b.ops->rx_post && !p->copy;
}

/* The rx descriptor polls readable exactly while there is work. */
static void fake_update_fd(struct fake_pair *p)
{
	bool want = p->frames ||
		    (nocopy(p) && (p->rx_filled || (!p->attached && p->nrx)));
	uint64_t v = 1;

	if (want == p->fd_up)
		return;
	if (want) {
		if (write(p->fd, &v, sizeof(v)) < 0)
			abort();
	} else if (read(p->fd, &v, sizeof(v)) < 0) {
		abort();
	}
	p->fd_up = want;
}

static int fake_configure(struct vnet_port *b, uint64_t f, size_t hdr_len)
{
	(void)f;
	if (b != &fk.b ||
	    (hdr_len != VIRTIO_NET_HDR_LEN && hdr_len != VIRTIO_NET_HDR_LEN_SHORT))
		FAIL("configure with a %zu-byte header", hdr_len);
	fk.hdr_len = hdr_len;
	fk.configured = true;
	return 0;
}

/* What every frame handed over must be. */
static size_t check_frame(const struct iovec *iov, unsigned niov,
			  bool data_touch)
{
	size_t len = 0;

	if (!fk.configured || niov < 1 || niov > VNET_MAX_IOV ||
	    iov[0].iov_len != fk.hdr_len)
		FAIL("tx: %u segments, header of %zu bytes (negotiated %zu)",
		     niov, niov ? iov[0].iov_len : 0, fk.hdr_len);
	for (unsigned i = 1; i < niov; i++) {
		if (!iov[i].iov_len)
			continue;
		if (data_touch)
			touch(iov[i].iov_base, iov[i].iov_len, false);
		else if (!in_guest(iov[i].iov_base, iov[i].iov_len))
			FAIL("tx: segment %u outside guest memory", i);
		len += iov[i].iov_len;
	}
	if (len < VNET_ETH_HLEN || len > VNET_GSO_MAX_FRAME)
		FAIL("tx: a %zu-byte frame passed validation", len);
	return len;
}

static int fake_tx(struct vnet_port *b, unsigned pair,
		   const struct iovec *iov, unsigned niov, uint32_t cookie)
{
	struct fake_pair *p = fake_pair(b, pair);
	uint8_t a = next8(&answers);
	struct held_tx *h;

	if (p->pending)
		FAIL("tx on pair %u while its attach is under way", pair);
	if (fk.b.ops->attach && !p->attached)
		return -ENETDOWN; /* like XDP once detached */
	/* Copying: the frame is sent (read) within the call, or the
	 * channel is full, or it is dropped. */
	if (!nocopy(p) || a % 8 >= 5 || cooperative) {
		check_frame(iov, niov, true);
		switch (cooperative ? 0 : a % 4) {
		case 1:
			return -EAGAIN;
		case 2:
			return -EMSGSIZE;
		default:
			return 0;
		}
	}
	/* Without a copy: held, read when the kernel sends it. */
	check_frame(iov, niov, false);
	if (a % 8 == 4 || p->ntx == FAKE_CAP)
		return -EAGAIN;
	h = &p->tx[p->ntx++];
	h->cookie = cookie;
	h->nseg = 0;
	for (unsigned i = 1; i < niov && h->nseg < 4; i++)
		h->seg[h->nseg++] = iov[i];
	return VNET_TX_HELD;
}

static unsigned fake_tx_reap(struct vnet_port *b, unsigned pair,
			     uint32_t *cookies, unsigned max)
{
	struct fake_pair *p = fake_pair(b, pair);
	unsigned n = p->attached ? p->tx_done : p->ntx;

	if (n > max)
		n = max;
	for (unsigned i = 0; i < n; i++)
		cookies[i] = p->tx[i].cookie;
	memmove(p->tx, p->tx + n, (p->ntx - n) * sizeof(p->tx[0]));
	p->ntx -= n;
	p->tx_done -= n < p->tx_done ? n : p->tx_done;
	return n;
}

static unsigned tx_flushes;

static void fake_tx_flush(struct vnet_port *b, unsigned pair)
{
	fake_pair(b, pair);
	tx_flushes++;
}

static int fake_rx_fd(struct vnet_port *b, unsigned pair)
{
	struct fake_pair *p = fake_pair(b, pair);

	/* Like XDP: a detached pair has no socket to poll. */
	if (fk.b.ops->attach && !p->attached)
		return -1;
	return p->fd;
}

static ssize_t fake_rx(struct vnet_port *b, unsigned pair,
		       const struct iovec *iov, unsigned niov)
{
	static uint8_t frame[4096 + VIRTIO_NET_HDR_LEN];
	struct fake_pair *p = fake_pair(b, pair);
	size_t room = 0, len;
	uint8_t a;

	if (p->pending)
		FAIL("rx on pair %u while its attach is under way", pair);
	if (!fk.configured || niov > VNET_MAX_IOV)
		FAIL("rx into %u segments", niov);
	for (unsigned i = 0; i < niov; i++) {
		if (iov[i].iov_len && !in_guest(iov[i].iov_base, iov[i].iov_len))
			FAIL("rx: segment %u outside guest memory", i);
		room += iov[i].iov_len;
	}
	if (!p->frames)
		return -EAGAIN;
	p->frames--;
	fake_update_fd(p);
	a = next8(&answers);
	if (a == 0xff)
		return -EIO; /* lost */
	len = fk.hdr_len + ((size_t)a << 4 | (next8(&answers) & 15));
	if (len > room)
		len = room; /* the kernel writes no more than the buffers take */
	memset(frame, a, len);
	vmio_iov_from_buf(iov, niov, 0, frame, len);
	return (ssize_t)len;
}

static bool fake_rx_posts(struct vnet_port *b, unsigned pair)
{
	struct fake_pair *p = fake_pair(b, pair);

	return !p->copy || p->nrx;
}

static int fake_rx_post(struct vnet_port *b, unsigned pair, void *buf,
			size_t len, uint32_t cookie)
{
	struct fake_pair *p = fake_pair(b, pair);
	uint8_t a = next8(&answers);

	if (p->pending)
		FAIL("rx_post on pair %u while its attach is under way", pair);
	if (!p->attached || p->copy)
		return -ENOSPC; /* like XDP once detached */
	if (!in_guest(buf, len))
		FAIL("rx_post of %p+%zu, outside guest memory", buf, len);
	/* Full, as the contract has it: the device waits for a reap. */
	if (p->nrx == fk.rx_cap)
		return -ENOSPC;
	if (a % 8 == 2 && !cooperative)
		return -EFAULT;
	/* XDP wants room for the largest frame; bit 4 takes a smaller one
	 * all the same (its frames then stay within it). */
	if (len < fk.hdr_len ||
	    (len < fk.hdr_len + fk.b.max_frame && !(a & 0x10)))
		return -EMSGSIZE;
	p->rx[p->nrx++] = (struct posted_rx){ .buf = buf, .len = len,
					       .cookie = cookie };
	return 0;
}

static unsigned fake_rx_reap(struct vnet_port *b, unsigned pair,
			     struct vnet_done *done, unsigned max)
{
	struct fake_pair *p = fake_pair(b, pair);
	unsigned n = p->attached ? p->rx_filled : p->nrx;

	if (n > max)
		n = max;
	for (unsigned i = 0; i < n; i++)
		done[i] = (struct vnet_done){ .buf = p->rx[i].buf,
					      .cookie = p->rx[i].cookie,
					      .len = p->rx[i].filled };
	memmove(p->rx, p->rx + n, (p->nrx - n) * sizeof(p->rx[0]));
	p->nrx -= n;
	p->rx_filled -= n < p->rx_filled ? n : p->rx_filled;
	fake_update_fd(p);
	return n;
}

static int fake_attach(struct vnet_port *b, unsigned pair,
		       const struct vmio_mem *m)
{
	struct fake_pair *p = fake_pair(b, pair);

	if (m != &mem)
		FAIL("attach to a memory table not the core's");
	if (p->pending)
		return VNET_ATTACH_LATER;
	if (fk.attach_later && !p->attached && !cooperative) {
		p->pending = true;
		return VNET_ATTACH_LATER;
	}
	/* Like XDP going copy: only with nothing held. */
	if (!p->attached && !p->nrx && !p->ntx &&
	    next8(&answers) == 0xc0)
		p->copy = true;
	p->attached = true;
	fake_update_fd(p);
	return 0;
}

static void fake_detach(struct vnet_port *b, unsigned pair)
{
	struct fake_pair *p = fake_pair(b, pair);

	p->pending = false; /* the attempt is given up */
	p->attached = false;
	p->tx_done = p->ntx;
	fake_update_fd(p);
}

static int fake_set_pair_enabled(struct vnet_port *b, unsigned pair,
				 bool on)
{
	fake_pair(b, pair)->enabled = on;
	return 0;
}

static const char *fake_pair_mode(struct vnet_port *b, unsigned pair)
{
	return nocopy(fake_pair(b, pair)) ? "no-copy" : "copy";
}

static void fake_free(struct vnet_port *b)
{
	(void)b;
}

static const struct vnet_port_ops copy_ops = {
	.name = "fake-copy",
	.configure = fake_configure,
	.tx = fake_tx,
	.rx_fd = fake_rx_fd,
	.rx = fake_rx,
	.set_pair_enabled = fake_set_pair_enabled,
	.free = fake_free,
};

static const struct vnet_port_ops nocopy_ops = {
	.name = "fake-nocopy",
	.configure = fake_configure,
	.tx = fake_tx,
	.tx_reap = fake_tx_reap,
	.tx_flush = fake_tx_flush,
	.rx_fd = fake_rx_fd,
	.rx = fake_rx,
	.rx_posts = fake_rx_posts,
	.rx_post = fake_rx_post,
	.rx_reap = fake_rx_reap,
	.attach = fake_attach,
	.detach = fake_detach,
	.set_pair_enabled = fake_set_pair_enabled,
	.pair_mode = fake_pair_mode,
	.free = fake_free,
};

/* Frames arrive: copying, they wait for rx; without a copy, the kernel
 * writes them into the oldest empty posted buffers, behind the header. */
static void fake_frames(unsigned pair, unsigned n)
{
	struct fake_pair *p = &fk.p[pair];

	if (pair >= fk.b.pairs)
		return;
	if (!nocopy(p)) {
		p->frames = p->frames + n > FAKE_CAP ? FAKE_CAP : p->frames + n;
	} else if (p->attached) {
		for (; n && p->rx_filled < p->nrx; n--) {
			struct posted_rx *r = &p->rx[p->rx_filled++];
			size_t room = r->len - fk.hdr_len;
			size_t len = next16(&answers);

			len = room ? 1 + len % room : 0;
			touch((uint8_t *)r->buf + fk.hdr_len, len, true);
			r->filled = (uint32_t)len;
		}
	}
	fake_update_fd(p);
}

/* The kernel is done sending n held frames (read from guest memory). */
static void fake_complete(unsigned pair, unsigned n)
{
	struct fake_pair *p = &fk.p[pair];

	if (pair >= fk.b.pairs || !p->attached)
		return;
	for (; n && p->tx_done < p->ntx; n--) {
		const struct held_tx *h = &p->tx[p->tx_done++];

		for (unsigned i = 0; i < h->nseg; i++)
			touch(h->seg[i].iov_base, h->seg[i].iov_len, false);
	}
}

static unsigned fake_held(unsigned pair)
{
	return fk.p[pair].ntx + fk.p[pair].nrx;
}

/* ---- Checks ------------------------------------------------------------ */

static bool verbose;

static unsigned npairs_used(void)
{
	return (features & VMIO_BIT(VIRTIO_NET_F_MQ)) ? fk.b.pairs : 1;
}

/* Between callbacks: the chains out on a pair are the ones its port
 * holds; nothing is out on another queue. */
static void check_between(void)
{
	unsigned data = 2 * npairs_used();

	for (unsigned pair = 0; pair < fk.b.pairs; pair++) {
		unsigned out = 0;
		bool broken = false;

		for (unsigned i = 2 * pair; i < 2 * pair + 2 && i < data; i++) {
			out += rec_out[i];
			broken |= queues[i].vq.broken;
		}
		if (!broken && out != fake_held(pair))
			FAIL("pair %u: %u chains out, the port holds %u",
			     pair, out, fake_held(pair));
	}
	for (unsigned i = data; i < nq; i++)
		if (!queues[i].vq.broken && rec_out[i])
			FAIL("queue %u: %u chains out between callbacks", i,
			     rec_out[i]);
}

/* After a stop for good, a table change or a reset: nothing out. */
static void check_none_out(unsigned i, const char *when)
{
	if (!queues[i].vq.broken && rec_out[i])
		FAIL("queue %u: %u chains still out after %s", i, rec_out[i],
		     when);
	if (!queues[i].vq.broken &&
	    queues[i].vq.published_used != queues[i].vq.used_idx)
		FAIL("queue %u: used entries not published after %s", i, when);
}

static void check_pair_empty(unsigned pair, const char *when)
{
	if (fake_held(pair))
		FAIL("pair %u: the port still holds %u tx and %u rx "
		     "buffers after %s", pair, fk.p[pair].ntx, fk.p[pair].nrx,
		     when);
}

/* ---- The device's life ------------------------------------------------- */

static uint64_t pick_features(uint8_t bits)
{
	static const uint64_t map[8] = {
		VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF),
		VMIO_BIT(VIRTIO_RING_F_EVENT_IDX),
		VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC),
		VMIO_BIT(VIRTIO_NET_F_CTRL_VQ) | VMIO_BIT(VIRTIO_NET_F_CTRL_RX) |
			VMIO_BIT(VIRTIO_NET_F_CTRL_MAC_ADDR),
		VMIO_BIT(VIRTIO_NET_F_MQ),
		VMIO_BIT(VIRTIO_F_VERSION_1),
		VMIO_BIT(VIRTIO_NET_F_CSUM) | VMIO_BIT(VIRTIO_NET_F_HOST_TSO4) |
			VMIO_BIT(VIRTIO_NET_F_HOST_TSO6),
		VMIO_BIT(VIRTIO_NET_F_GUEST_CSUM) |
			VMIO_BIT(VIRTIO_NET_F_GUEST_TSO4),
	};
	uint64_t f = VMIO_BIT(VIRTIO_NET_F_MAC) | VMIO_BIT(VIRTIO_NET_F_MTU) |
		     VMIO_BIT(VIRTIO_NET_F_STATUS);

	for (unsigned i = 0; i < 8; i++)
		if (bits & (1u << i))
			f |= map[i];
	return f;
}

/* The VMM's setup: features, then every queue's configuration. */
static void negotiate(void)
{
	features = pick_features(hdr[1]);
	if (ops->features_set(dev, features))
		FAIL("features 0x%llx refused", (unsigned long long)features);
	for (unsigned i = 0; i < nq; i++)
		setup_queue(i);
}

/* Starts queue i as SET_VRING_KICK (then SET_VRING_ENABLE 1) would. */
static void op_start(unsigned i)
{
	struct hq *q = &queues[i];

	pause_queue(q);
	q->started = true;
	q->enabled = true;
	sync_queue(q);
}

/* GET_VRING_BASE: the VMM reads last_avail_idx after this, so every
 * chain must be back. */
static void op_stop(unsigned i)
{
	struct hq *q = &queues[i];

	q->started = false;
	stop_queue_for(q, VMIO_QUEUE_HALT);
	check_none_out(i, "GET_VRING_BASE");
}

/* A hold for a hand-over (vmio_session_hold) that this process then
 * resumes (the successor refused): every queue stops for good with every
 * chain back, the port's steering left as it was (the frames waiting on
 * a pair's queue are the successor's to read, or this process's again);
 * then the queues run again, as vmio_session_resume syncs them. */
static void op_hold_resume(void)
{
	bool enabled[NPAIRS_MAX];

	for (unsigned pair = 0; pair < fk.b.pairs; pair++)
		enabled[pair] = fk.p[pair].enabled;
	for (unsigned i = 0; i < nq; i++)
		stop_queue_for(&queues[i], VMIO_QUEUE_HOLD);
	for (unsigned i = 0; i < nq; i++)
		check_none_out(i, "a hold");
	for (unsigned pair = 0; pair < fk.b.pairs; pair++)
		if (fk.p[pair].enabled != enabled[pair])
			FAIL("a hold steered pair %u %s", pair,
			     enabled[pair] ? "off" : "on");
	for (unsigned i = 0; i < nq; i++)
		sync_queue(&queues[i]);
}

/* The VMM's reset_session: every queue paused, the device reset, the
 * rings unmapped, the queues back to nothing. */
static void op_reset(bool again)
{
	for (unsigned i = 0; i < nq; i++)
		stop_queue_for(&queues[i], VMIO_QUEUE_HALT);
	ops->reset(dev);
	for (unsigned i = 0; i < nq; i++)
		check_none_out(i, "reset");
	for (unsigned pair = 0; pair < fk.b.pairs; pair++)
		check_pair_empty(pair, "reset");
	for (unsigned i = 0; i < nq; i++) {
		vmio_vq_unmap(&queues[i].vq);
		close_queue(i);
	}
	if (!again)
		return;
	install_table(hdr[8]);
	negotiate();
}

/* SET_FEATURES while queues run (QEMU sends it once per vhost_dev, so
 * once per queue pair with MQ): the core pauses every queue, sets the
 * rings' features, tells the device, and restarts them. Only bits that
 * keep the header size and the queues' roles change here. */
static void op_set_features(uint8_t flip)
{
	hdr[1] ^= flip & 0xc6; /* EVENT_IDX, INDIRECT, CSUM, GUEST_CSUM */
	for (unsigned i = 0; i < nq; i++)
		pause_queue(&queues[i]);
	features = pick_features(hdr[1]);
	for (unsigned i = 0; i < nq; i++) {
		queues[i].vq.event_idx =
			features & VMIO_BIT(VIRTIO_RING_F_EVENT_IDX);
		queues[i].vq.indirect =
			features & VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC);
	}
	if (ops->features_set(dev, features))
		FAIL("features 0x%llx refused", (unsigned long long)features);
	for (unsigned i = 0; i < nq; i++)
		sync_queue(&queues[i]);
}

static void op_mem_change(uint8_t cut)
{
	for (unsigned i = 0; i < nq; i++)
		stop_queue_for(&queues[i], VMIO_QUEUE_MEMORY);
	if (mem.nregions && ops->memory_changing)
		ops->memory_changing(dev);
	for (unsigned i = 0; i < nq; i++)
		check_none_out(i, "a memory table change");
	for (unsigned pair = 0; pair < fk.b.pairs; pair++)
		if (fk.p[pair].attached || fake_held(pair))
			FAIL("pair %u still attached (holding %u) at a memory "
			     "table change", pair, fake_held(pair));
	install_table(cut);
	for (unsigned i = 0; i < nq; i++) {
		struct vmio_vq *vq = &queues[i].vq;

		vq->desc_uva = gpa_to_uva(queues[i].desc_gpa);
		vq->avail_uva = gpa_to_uva(queues[i].avail_gpa);
		vq->used_uva = gpa_to_uva(queues[i].used_gpa);
		vq->addr_set = vq->desc_uva && vq->avail_uva && vq->used_uva;
		map_queue(&queues[i]);
	}
	for (unsigned i = 0; i < nq; i++)
		sync_queue(&queues[i]);
}

static unsigned loop_rounds;

static void run_loop(unsigned n)
{
	while (n-- && loop_rounds < MAX_LOOP_ROUNDS) {
		loop_rounds++;
		if (vmio_loop_run_once(loop, 0) <= 0)
			break;
	}
}

/* The attaches under way finish, as the port's retry timer would
 * finish them (outside any call from the device). */
static void finish_attaches(void)
{
	for (unsigned i = 0; i < fk.b.pairs; i++) {
		struct fake_pair *p = &fk.p[i];

		if (!p->pending)
			continue;
		p->pending = false;
		p->attached = true;
		fake_update_fd(p);
		if (fk.b.attached)
			fk.b.attached(fk.b.attached_opaque, i);
	}
}

static void fire_retry_timers(void)
{
	finish_attaches();
	for (unsigned i = 0; i < fk.b.pairs; i++) {
		struct vnet_pair *p = &dev->pairs[i];

		if (vmio_timer_armed(&p->retry))
			vmio_timer_arm_ns(&p->retry, 0);
	}
	run_loop(1);
}

static void guest_kick(unsigned i)
{
	uint64_t one = 1;

	if (write(queues[i].kick_fd, &one, sizeof(one)) < 0)
		abort();
}

static void guest_post(unsigned i, uint16_t head)
{
	struct hq *q = &queues[i];
	uint16_t size = (uint16_t)(1u << (hdr[3 + i] % 9)), idx, le;
	uint64_t idx_at = q->avail_gpa + 2;
	uint64_t slot;

	if (idx_at + 2 > MEM_SIZE)
		return;
	memcpy(&le, image + idx_at, 2);
	idx = le16toh(le);
	slot = q->avail_gpa + 4 + 2u * (idx & (size - 1));
	le = htole16(head);
	if (slot + 2 <= MEM_SIZE)
		memcpy(image + slot, &le, 2);
	le = htole16((uint16_t)(idx + 1));
	memcpy(image + idx_at, &le, 2);
}

static void guest_desc(unsigned i, uint8_t n, uint16_t addr, uint16_t len,
		       uint16_t flags, uint16_t next)
{
	struct hq *q = &queues[i];
	uint16_t size = (uint16_t)(1u << (hdr[3 + i] % 9));
	uint64_t at = q->desc_gpa + 16u * (n & (size - 1));
	struct virtq_desc d = {
		.addr = htole64(addr),
		.len = htole32(len),
		.flags = htole16(flags),
		.next = htole16(next),
	};

	if (at + sizeof(d) <= MEM_SIZE)
		memcpy(image + at, &d, sizeof(d));
}

/* Whether the loop has nothing to run now and no retry timer is armed. */
static bool quiet(void)
{
	for (unsigned i = 0; i < fk.b.pairs; i++)
		if (vmio_timer_armed(&dev->pairs[i].retry))
			return false;
	return true;
}

/* An rx queue after the drain, where it can be told: without MRG_RXBUF
 * (with it, the buffers waiting may be too few for a frame), on a pair
 * the guest receives on, the device must not sit on buffers while the
 * port has frames for them (copying), or while it has room to post
 * them (no copy). */
static void check_rx_drained(unsigned i)
{
	const struct vmio_vq *vq = &queues[i].vq;
	unsigned pair = i / 2;
	struct fake_pair *p = &fk.p[pair];
	uint16_t pending = vmio_vq_avail_pending(vq);

	if (i >= 2 * npairs_used() || pair >= vnet_active_pairs(dev))
		return;
	if (fk.b.ops->rx_posts && fake_rx_posts(&fk.b, pair) && p->attached &&
	    p->rx_filled)
		FAIL("rx queue %u: %u frames received into posted buffers "
		     "never given back, kicks %s", i, p->rx_filled,
		     vq->kicks_disabled ? "off" : "on");
	if (!pending)
		return;
	if (fk.b.ops->rx_posts && fake_rx_posts(&fk.b, pair)) {
		if (p->attached && !p->copy && p->nrx < fk.rx_cap)
			FAIL("rx queue %u idle with %u buffers waiting, the "
			     "backend holding %u of %u, kicks %s", i, pending,
			     p->nrx, fk.rx_cap,
			     vq->kicks_disabled ? "off" : "on");
		return;
	}
	if (features & VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF))
		return;
	if (p->frames && fake_rx_fd(&fk.b, pair) >= 0)
		FAIL("rx queue %u idle with %u buffers waiting and %u frames "
		     "in the port, kicks %s", i, pending, p->frames,
		     vq->kicks_disabled ? "off" : "on");
}

/* A guest that plays by the rules from now on, and a port that takes
 * every frame: whatever happened before, the device must not sleep with
 * frames or commands it was told about. The guest kicks each queue whose
 * kicks the device wants (its own shadow: the guest may have scribbled
 * over the flags in the used ring); the device may not have turned kicks
 * off and then gone idle with no reschedule or timer pending. */
static void drain(void)
{
	int kicked_at[NQ_MAX];
	bool settled = false;

	cooperative = true;
	finish_attaches();
	for (unsigned i = 0; i < nq; i++)
		kicked_at[i] = -1;
	for (unsigned round = 0; round < 64 && !settled; round++) {
		bool kicked = false;
		int n;

		for (unsigned pair = 0; pair < fk.b.pairs; pair++)
			fk.p[pair].tx_done = fk.p[pair].ntx;
		/* The guest kicks after posting, and the device's own writes
		 * (a frame received over a ring) may post too: kick again
		 * whenever the avail index moved since the last kick. */
		for (unsigned i = 0; i < nq; i++) {
			const struct vmio_vq *vq = &queues[i].vq;

			if (!queues[i].running || vq->kicks_disabled ||
			    !vmio_vq_avail_pending(vq) ||
			    kicked_at[i] == le16toh(vq->avail->idx))
				continue;
			kicked_at[i] = le16toh(vq->avail->idx);
			guest_kick(i);
			kicked = true;
		}
		n = vmio_loop_run_once(loop, 0);
		if (n > 0 || kicked)
			continue;
		if (quiet())
			settled = true;
		else
			fire_retry_timers();
	}
	cooperative = false;
	/* Still busy after all those rounds (frames keep rewriting rings):
	 * nothing to conclude. */
	if (!settled)
		return;
	for (unsigned i = 0; i < nq; i++) {
		const struct vmio_vq *vq = &queues[i].vq;
		bool tx = i < 2 * npairs_used() && i % 2;
		bool ctrl = i == ((features & VMIO_BIT(VIRTIO_NET_F_MQ))
					  ? 2 * npairs_used()
					  : 2) &&
			    (features & VMIO_BIT(VIRTIO_NET_F_CTRL_VQ));

		if (!queues[i].running || vq->broken)
			continue;
		if (!tx && !ctrl) {
			check_rx_drained(i);
			continue;
		}
		if (vmio_vq_avail_pending(vq))
			FAIL("queue %u (%s) idle with %u chains waiting, kicks "
			     "%s", i, tx ? "tx" : "ctrl",
			     vmio_vq_avail_pending(vq),
			     vq->kicks_disabled ? "off" : "on");
	}
}

static void op(uint8_t b)
{
	unsigned a = b >> 4, qi = (a & 7) % nq;

	if (verbose)
		fprintf(stderr, "fuzz_net_device: op %u a %u (q %u) at %zu\n",
			b & 15, a, qi, ops_in.pos - 1);

	switch (b & 15) {
	case 0:
		op_start(qi);
		break;
	case 1:
		op_stop(qi);
		break;
	case 2: /* SET_VRING_CALL: a pause, the same rings */
		pause_queue(&queues[qi]);
		sync_queue(&queues[qi]);
		break;
	case 3: /* SET_VRING_ENABLE, in the core's order */
		queues[qi].enabled = a & 8;
		stop_queue_for(&queues[qi], a & 8 ? VMIO_QUEUE_PAUSE
						  : VMIO_QUEUE_HALT);
		sync_queue(&queues[qi]);
		break;
	case 4:
		guest_kick(qi);
		break;
	case 5:
		run_loop(1 + a);
		break;
	case 6:
		guest_post(qi, next8(&ops_in));
		break;
	case 7: {
		uint8_t n = next8(&ops_in);
		uint16_t addr = next16(&ops_in), len = next16(&ops_in);
		uint8_t flags = next8(&ops_in);

		guest_desc(qi, n, addr, len, flags, next8(&ops_in));
		break;
	}
	case 8: {
		uint16_t off = next16(&ops_in);
		uint8_t len = next8(&ops_in);

		for (unsigned k = 0; k < len; k++) {
			uint8_t v = next8(&ops_in);

			if ((unsigned)off + k < MEM_SIZE)
				image[off + k] = v;
		}
		break;
	}
	case 9:
		op_mem_change(next8(&ops_in));
		break;
	case 10:
		if (a & 8)
			op_hold_resume();
		else
			op_reset(true);
		break;
	case 11:
		fake_frames(a & 1, 1 + a / 2);
		break;
	case 12:
		fake_complete(a & 1, a / 2 == 7 ? FAKE_CAP : 1 + a / 2);
		break;
	case 13:
		fire_retry_timers();
		break;
	case 14: {
		uint8_t head = next8(&ops_in);
		uint16_t addr = next16(&ops_in), len = next16(&ops_in);
		uint8_t w = next8(&ops_in);

		guest_desc(qi, head, addr, len,
			   (w & 1) ? VIRTQ_DESC_F_WRITE : 0, 0);
		guest_post(qi, head);
		guest_kick(qi);
		break;
	}
	case 15:
		if (a & 8) {
			op_set_features(next8(&ops_in));
		} else {
			uint8_t buf[32];
			uint8_t off = next8(&ops_in) % 24;
			uint8_t len = next8(&ops_in) % 8;

			/* The core reads only within config_size. */
			if ((uint32_t)off + len <= ops->config_size)
				ops->get_config(dev, buf, off, len);
		}
		break;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t image_len, ops_len, at = HDR_SIZE;
	struct vnet_device_config cfg = {
		.mac = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 },
	};

	init_once();
	verbose = getenv("FUZZ_NET_DEVICE_VERBOSE");
	memset(hdr, 0, sizeof(hdr));
	memcpy(hdr, data, size < HDR_SIZE ? size : HDR_SIZE);
	image_len = (size_t)(hdr[12] | hdr[13] << 8);
	ops_len = (size_t)(hdr[14] | hdr[15] << 8);
	if (image_len > MEM_SIZE)
		image_len = MEM_SIZE;
	if (at > size)
		at = size;
	if (image_len > size - at)
		image_len = size - at;
	memcpy(image, data + at, image_len);
	memset(image + image_len, 0, MEM_SIZE - image_len);
	at += image_len;
	if (ops_len > size - at)
		ops_len = size - at;
	ops_in = (struct stream){ .p = data + at, .len = ops_len };
	at += ops_len;
	answers = (struct stream){ .p = data + at, .len = size - at };

	memset(&fk, 0, sizeof(fk));
	fk.b.ops = (hdr[0] & H_NOCOPY) ? &nocopy_ops : &copy_ops;
	fk.b.pairs = (hdr[0] & H_TWO_PAIRS) ? 2 : 1;
	fk.rx_cap = hdr[16] ? hdr[16] : FAKE_CAP;
	fk.attach_later = (hdr[0] & H_NOCOPY) && (hdr[17] & 1);
	for (unsigned i = 0; i < fk.b.pairs; i++) {
		fk.p[i].fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		if (fk.p[i].fd < 0)
			abort();
		fk.p[i].copy = !(hdr[0] & H_NOCOPY) ||
			       (hdr[0] & (i ? H_COPY1 : H_COPY0));
	}
	cfg.mtu = (uint16_t)(68 + 6 * hdr[2]);
	cfg.pairs = fk.b.pairs;
	cfg.max_queue_size = hdr[11] ? (uint16_t)(1u << (hdr[11] % 9)) : 0;
	cfg.port = &fk.b;
	touch_budget = TOUCH_BUDGET;
	pops = loop_rounds = tx_flushes = 0;

	loop = vmio_loop_new();
	if (!loop)
		abort();
	install_table(hdr[8]);
	plan_rings();
	dev = vnet_device_new(loop, &cfg);
	if (!dev)
		abort();
	ops = vnet_device_ops(dev);
	nq = ops->num_queues;
	if (nq > NQ_MAX)
		abort();
	negotiate();
	if (hdr[0] & H_AUTOSTART)
		for (unsigned i = 0; i < nq; i++)
			op_start(i);
	check_between();
	for (unsigned n = 0; n < MAX_OPS && ops_in.pos < ops_in.len &&
			     pops < MAX_POPS;
	     n++) {
		op(next8(&ops_in));
		check_between();
	}
	drain();
	/* The front end goes: everything must come back. */
	op_reset(false);
	if (verbose) {
		char line[512];

		struct vnet_stats st;

		vnet_device_stats(dev, &st);
		vnet_stats_format(&st, line, sizeof(line));
		fprintf(stderr, "fuzz_net_device: %s pops=%u loop_rounds=%u "
			"tx_flushes=%u\n", line, pops, loop_rounds, tx_flushes);
	}
	vnet_device_free(dev);
	dev = NULL;
	for (unsigned i = 0; i < fk.b.pairs; i++)
		close(fk.p[i].fd);
	vmio_loop_free(loop);
	loop = NULL;
	return 0;
}
