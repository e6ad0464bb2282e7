/* Fuzzes the descriptor chain walker: the guest controls every byte of the
 * rings and the descriptors, and the VMM how memory is cut into regions.
 *
 * Input: a 16-byte header (missing bytes read as zero), then the image of
 * guest memory from gpa 0 (zero-padded to MEM_SIZE).
 *   [0]    queue size = 1 << ([0] % 9), so 1..256
 *   [1]    bit 0 INDIRECT_DESC, bit 1 EVENT_IDX, bit 2 leave a hole between
 *          regions, bit 3 start with kicks off, bit 4 unpop once, bit 5 a
 *          packed ring (the descriptor ring from gpa 0, then the driver's
 *          and the device's event suppression areas; [6..9] are then
 *          offset | wrap << 15 of avail and used), bit 6 IN_ORDER (the
 *          used entries of chains with no writable part go in batches)
 *   [2]    regions = 1 + [2] % 3
 *   [3..4] region boundaries, in units of 256 bytes
 *   [5]    flush after every 1 + [5] % 8 chains
 *   [6..7] initial last_avail_idx, [8..9] initial used_idx (LE)
 *   [10]   the pop after which one chain is given back (with bit 4)
 *   [11]   offset for vmio_chain_read/write
 * Rings sit back to back from gpa 0: desc, avail, then used (4-aligned).
 */
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "util/log.h"
#include "virtio/virtqueue.h"

#define MEM_SIZE 0x10000u
#define HDR_SIZE 16u
#define UVA_BASE 0x7f0000000000ull
#define UVA_STRIDE 0x1000000000ull
/* Bytes of each iovec touched in full per input; past it only the ends,
 * which is what finds an iovec reaching outside its region anyway. */
#define TOUCH_BUDGET (1u << 20)

#define F_INDIRECT 0x01
#define F_EVENT_IDX 0x02
#define F_HOLE 0x04
#define F_KICKS_OFF 0x08
#define F_UNPOP 0x10
#define F_PACKED 0x20
#define F_IN_ORDER 0x40

struct layout {
	unsigned nregions;
	uint64_t start[3], end[3];
};

/* State kept across inputs: one memfd, our own view of it, and the last
 * region table (rebuilt only when an input cuts memory differently). */
static int memfd = -1;
static uint8_t *image;
static int call_fd = -1;
static struct vmio_mem mem;
static struct layout mem_layout;
static struct vmio_chain chain;

static void init_once(void)
{
	if (image)
		return;
	vmio_log_set_level(VMIO_LOG_ERR);
	image = fuzz_guest_memory("fuzz_chain", MEM_SIZE, &memfd);
	call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (call_fd < 0)
		abort();
	vmio_mem_init(&mem);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void plan_layout(const uint8_t *h, struct layout *l)
{
	unsigned want = 1 + h[2] % 3, ncuts = 0;
	uint64_t cuts[2];

	for (unsigned i = 0; i < 2 && ncuts + 1 < want; i++) {
		uint64_t c = (uint64_t)h[3 + i] * 256;

		if (c && (!ncuts || c != cuts[0]))
			cuts[ncuts++] = c;
	}
	qsort(cuts, ncuts, sizeof(cuts[0]), cmp_u64);
	memset(l, 0, sizeof(*l));
	l->nregions = ncuts + 1;
	for (unsigned i = 0; i < l->nregions; i++) {
		l->start[i] = i ? cuts[i - 1] : 0;
		l->end[i] = i < ncuts ? cuts[i] : MEM_SIZE;
	}
	/* A hole: guest memory with a gap the chains may point into. */
	if ((h[1] & F_HOLE) && l->nregions > 1)
		l->start[1] += 256;
}

static uint64_t region_uva(unsigned i, uint64_t gpa_start)
{
	/* Descending, and unrelated to gpa order, to catch mix-ups. */
	return UVA_BASE - i * UVA_STRIDE + gpa_start;
}

static void install_layout(const struct layout *l)
{
	if (mem.nregions && !memcmp(l, &mem_layout, sizeof(*l)))
		return;
	vmio_mem_clear(&mem);
	memset(&mem_layout, 0, sizeof(mem_layout));
	for (unsigned i = 0; i < l->nregions; i++) {
		struct vmio_mem_region_desc d = {
			.gpa = l->start[i],
			.size = l->end[i] - l->start[i],
			.uva = region_uva(i, l->start[i]),
			.mmap_offset = l->start[i],
		};
		const char *why;

		if (!d.size)
			continue;
		if (vmio_mem_add(&mem, &d, dup(memfd), &why))
			abort(); /* the harness only builds valid tables */
	}
	mem_layout = *l;
}

static uint64_t gpa_to_uva(const struct layout *l, uint64_t gpa)
{
	for (unsigned i = 0; i < l->nregions; i++)
		if (gpa >= l->start[i] && gpa < l->end[i])
			return region_uva(i, l->start[i]) + gpa - l->start[i];
	return 0; /* in the hole: vmio_vq_map must refuse it */
}

static void setup_vq(struct vmio_vq *vq, const uint8_t *h,
		     const struct layout *l)
{
	unsigned size = 1u << (h[0] % 9);
	bool packed = h[1] & F_PACKED;
	uint64_t avail = virtq_desc_bytes(size);
	uint64_t used = packed ? avail + sizeof(struct pvirtq_event_suppress)
			       : (avail + virtq_avail_bytes(size) + 3) & ~3ull;
	uint16_t avail_pos = (uint16_t)(h[6] | h[7] << 8);
	uint16_t used_pos = (uint16_t)(h[8] | h[9] << 8);

	vmio_vq_init(vq, 0);
	vq->name = "fuzz";
	vq->size = (uint16_t)size;
	vq->desc_uva = gpa_to_uva(l, 0);
	vq->avail_uva = gpa_to_uva(l, avail);
	vq->used_uva = gpa_to_uva(l, used);
	vq->addr_set = true;
	vq->indirect = h[1] & F_INDIRECT;
	vq->event_idx = h[1] & F_EVENT_IDX;
	vmio_vq_set_transport(vq, &vmio_vq_eventfd_transport, &call_fd);
	vq->packed = packed;
	vq->in_order = h[1] & F_IN_ORDER;
	if (packed) {
		vq->last_avail_idx = avail_pos & (PVIRTQ_MAX_SIZE - 1);
		vq->avail_wrap = avail_pos >> VIRTQ_EVENT_WRAP_SHIFT;
		vq->used_idx = used_pos & (PVIRTQ_MAX_SIZE - 1);
		vq->used_wrap = used_pos >> VIRTQ_EVENT_WRAP_SHIFT;
		return;
	}
	vq->last_avail_idx = avail_pos;
	vq->used_idx = used_pos;
	vq->published_used = vq->used_idx;
}

/* Every iovec must lie inside one region's mapping. */
static void check_iov_inside(const struct iovec *iov)
{
	const uint8_t *p = iov->iov_base;

	for (unsigned i = 0; i < mem.nregions; i++) {
		const struct vmio_mem_region *r = &mem.regions[i];

		if (p >= r->host && (uint64_t)(p - r->host) < r->d.size &&
		    iov->iov_len <= r->d.size - (uint64_t)(p - r->host))
			return;
	}
	fprintf(stderr, "iovec %p+%zu outside guest memory\n", iov->iov_base,
		iov->iov_len);
	abort();
}

/* Reads and rewrites every byte (within the budget), through libc so that
 * the sanitizers check the whole range without a traced compare per byte. */
static void touch(const struct iovec *iov, size_t *budget)
{
	static uint8_t copy[MEM_SIZE];
	volatile uint8_t *p = iov->iov_base;
	size_t n = iov->iov_len;

	if (!n)
		return;
	if (n <= *budget && n <= sizeof(copy)) {
		*budget -= n;
		memcpy(copy, iov->iov_base, n);
		copy[n - 1]++;
		memcpy(iov->iov_base, copy, n);
	} else {
		p[0] = (uint8_t)(p[0] + 1);
		p[n - 1] = (uint8_t)(p[n - 1] + 1);
	}
}

static void check_chain(const struct vmio_vq *vq, const struct vmio_chain *c,
			size_t *budget)
{
	uint64_t out = 0, in = 0;

	if (c->head >= vq->size || c->nout + c->nin > VMIO_CHAIN_MAX_IOV)
		abort();
	for (unsigned i = 0; i < c->nout + c->nin; i++) {
		check_iov_inside(&c->iov[i]);
		touch(&c->iov[i], budget);
		if (i < c->nout)
			out += c->iov[i].iov_len;
		else
			in += c->iov[i].iov_len;
	}
	if (out != c->out_len || in != c->in_len)
		abort();
}

/* What a copy of up to max bytes from offset into a part of total bytes
 * must return. */
static size_t copy_len(uint64_t total, unsigned offset, size_t max)
{
	if (offset >= total)
		return 0;
	return total - offset < max ? (size_t)(total - offset) : max;
}

static void exercise_copies(const struct vmio_chain *c, unsigned offset)
{
	uint8_t buf[512];

	if (vmio_chain_read(c, offset, buf, sizeof(buf)) !=
	    copy_len(c->out_len, offset, sizeof(buf)))
		abort();
	memset(buf, 0xa5, sizeof(buf));
	if (vmio_chain_write(c, offset, buf, sizeof(buf)) !=
	    copy_len(c->in_len, offset, sizeof(buf)))
		abort();
}

static void run(struct vmio_vq *vq, const uint8_t *h)
{
	unsigned max_pops = 2u * vq->size + 2;
	unsigned flush_every = 1 + h[5] % 8;
	bool unpopped = !(h[1] & F_UNPOP);
	size_t budget = TOUCH_BUDGET;

	if (h[1] & F_KICKS_OFF)
		vmio_vq_enable_kicks(vq, false);
	for (unsigned i = 0; i < max_pops; i++) {
		int r = vmio_vq_pop(vq, &mem, &chain);

		if (r <= 0)
			break;
		check_chain(vq, &chain, &budget);
		if (!unpopped && i == h[10] % max_pops) {
			unpopped = true;
			vmio_vq_unpop(vq, 1);
			continue;
		}
		exercise_copies(&chain, h[11]);
		vmio_vq_push(vq, chain.head, (uint32_t)chain.in_len);
		if ((i + 1) % flush_every == 0)
			vmio_vq_flush_and_notify(vq);
		if (i == max_pops / 2)
			vmio_vq_enable_kicks(vq, !(h[1] & F_KICKS_OFF));
	}
	vmio_vq_flush_and_notify(vq);
	vmio_vq_avail_pending(vq);
	vmio_vq_enable_kicks(vq, true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t h[HDR_SIZE] = { 0 };
	struct layout l;
	struct vmio_vq vq;
	uint64_t drained;
	size_t body;

	init_once();
	if (size)
		memcpy(h, data, size < HDR_SIZE ? size : HDR_SIZE);
	body = size > HDR_SIZE ? size - HDR_SIZE : 0;
	if (body > MEM_SIZE)
		body = MEM_SIZE;
	if (body)
		memcpy(image, data + HDR_SIZE, body);
	memset(image + body, 0, MEM_SIZE - body);

	plan_layout(h, &l);
	install_layout(&l);
	setup_vq(&vq, h, &l);
	if (vmio_vq_map(&vq, &mem) == 0)
		run(&vq, h);
	vmio_vq_release(&vq);
	if (read(call_fd, &drained, sizeof(drained)) < 0)
		drained = 0;
	return 0;
}
