#include "frontend/stream.h"

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "util/clock.h"
#include "virtio/features.h"

#define RX_QUEUE 0
#define TX_QUEUE 1
#define STREAM_MAX_SEGS 64

/* Words of the pattern come from splitmix64 of their index: any offset's
 * byte is computable on its own, and neighbouring words share no
 * structure that a copy bug (an offset off by a few bytes, a chunk
 * delivered twice) could hide behind. */
static uint64_t pattern_word(uint64_t seed, uint64_t k)
{
	uint64_t z = seed + (k + 1) * 0x9e3779b97f4a7c15ull;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint8_t vmio_stream_pattern_byte(uint64_t seed, uint64_t offset)
{
	return (uint8_t)(pattern_word(seed, offset / 8) >> (8 * (offset % 8)));
}

static void pattern_fill(uint64_t seed, uint64_t offset, uint8_t *buf,
			 size_t len)
{
	while (len && offset % 8) {
		*buf++ = vmio_stream_pattern_byte(seed, offset++);
		len--;
	}
	for (; len >= 8; len -= 8, buf += 8, offset += 8) {
		uint64_t w = htole64(pattern_word(seed, offset / 8));

		memcpy(buf, &w, 8);
	}
	while (len--)
		*buf++ = vmio_stream_pattern_byte(seed, offset++);
}

/* Returns the index of the first byte that differs from the pattern, or
 * len if all match. */
static size_t pattern_check(uint64_t seed, uint64_t offset,
			    const uint8_t *buf, size_t len)
{
	size_t i = 0;

	for (; i < len && (offset + i) % 8; i++)
		if (buf[i] != vmio_stream_pattern_byte(seed, offset + i))
			return i;
	for (; len - i >= 8; i += 8) {
		uint64_t want = htole64(pattern_word(seed, (offset + i) / 8));
		uint64_t got;

		memcpy(&got, buf + i, 8);
		if (got != want)
			break;
	}
	for (; i < len; i++)
		if (buf[i] != vmio_stream_pattern_byte(seed, offset + i))
			return i;
	return len;
}

void vmio_stream_opts_init(struct vmio_stream_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->bytes = 1ull << 30;
	o->tx_chunk = 64 * 1024;
	o->rx_chunk = 64 * 1024;
	o->segs = 1;
	o->stall_ms = 10000;
	o->seed = 0x766d696f; /* "vmio" */
}

static unsigned chains_per_queue(const struct vmio_stream_opts *o,
				 uint16_t queue_size)
{
	unsigned segs = o->segs ? o->segs : 1;

	return o->indirect ? queue_size : queue_size / segs;
}

uint64_t vmio_stream_mem_needed(const struct vmio_stream_opts *o,
				uint16_t queue_size)
{
	uint64_t chains = chains_per_queue(o, queue_size);
	uint64_t segs = o->segs ? o->segs : 1;
	uint64_t rings = 2 * (virtq_desc_bytes(queue_size) +
			      virtq_avail_bytes(queue_size) +
			      virtq_used_bytes(queue_size) + 64);
	uint64_t tables = o->indirect ? 2 * chains * (segs * 16 + 16) : 0;
	uint64_t bufs = chains * ((uint64_t)o->tx_chunk + o->rx_chunk + 128);
	uint64_t total = rings + tables + bufs + 65536;

	return (total + 4095) & ~4095ull;
}

static void set_err(char *err, size_t size, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(char *err, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, size, fmt, ap);
	va_end(ap);
}

struct vmio_fe *vmio_stream_connect(const char *path, int timeout_ms,
				    uint64_t mem_size, unsigned nregions,
				    uint16_t queue_size, char *err,
				    size_t err_size)
{
	return vmio_stream_connect_ex(path, timeout_ms, mem_size, nregions,
				      queue_size, 0, err, err_size);
}

struct vmio_fe *vmio_stream_connect_ex(const char *path, int timeout_ms,
				       uint64_t mem_size, unsigned nregions,
				       uint16_t queue_size,
				       uint64_t device_features, char *err,
				       size_t err_size)
{
	const uint64_t want = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_EVENT_IDX) |
			      VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC) |
			      device_features;
	const uint64_t want_proto =
		VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK);
	struct vmio_fe *fe = vmio_fe_connect(path, timeout_ms);
	const char *step;
	int r;

	if (!fe) {
		set_err(err, err_size, "cannot connect to %s: %s", path,
			strerror(errno));
		return NULL;
	}
	step = "feature negotiation";
	r = vmio_fe_negotiate(fe, want, want_proto);
	if (!r) {
		step = "SET_MEM_TABLE";
		r = vmio_fe_mem_create(fe, mem_size, nregions);
	}
	if (!r) {
		step = "setting up the rx queue";
		r = vmio_fe_queue_setup(fe, RX_QUEUE, queue_size);
	}
	if (!r) {
		step = "setting up the tx queue";
		r = vmio_fe_queue_setup(fe, TX_QUEUE, queue_size);
	}
	if (r) {
		set_err(err, err_size, "%s with %s failed: %s", step, path,
			strerror(-r));
		vmio_fe_close(fe);
		return NULL;
	}
	return fe;
}

/* One chain's worth of buffer: `len` bytes at gpa, posted as `segs`
 * descriptors (or one indirect table of them at table_gpa). */
struct slot {
	uint64_t gpa;
	uint64_t table_gpa;
	uint64_t offset; /* tx: stream offset of the data it carries */
	uint32_t len;    /* tx: bytes it carries now */
};

struct stream {
	struct vmio_fe *fe;
	const struct vmio_stream_opts *o;
	struct vmio_stream_result *r;
	unsigned segs;
	unsigned nchains;
	struct slot *tx, *rx;
	unsigned *tx_free; /* stack of free tx slot numbers */
	unsigned tx_nfree;
	uint64_t sent;     /* stream bytes posted on tx */
	uint64_t received; /* stream bytes reaped from rx (and checked) */
	uint64_t next_remap;
};

static int alloc_slots(struct stream *s, struct slot *slots, uint32_t chunk)
{
	for (unsigned i = 0; i < s->nchains; i++) {
		slots[i].gpa = vmio_fe_alloc(s->fe, chunk, 64);
		slots[i].table_gpa = 0;
		if (s->o->indirect)
			slots[i].table_gpa =
				vmio_fe_alloc(s->fe, 16ull * s->segs, 16);
		if (slots[i].gpa == UINT64_MAX ||
		    slots[i].table_gpa == UINT64_MAX)
			return -1;
	}
	return 0;
}

/* Counted so that a test can tell its buffers really straddle regions. */
static bool crosses_region(const struct vmio_fe *fe, uint64_t gpa,
			   uint32_t len)
{
	uint64_t step = fe->mem_size / fe->nregions / 4096 * 4096;
	uint64_t first, last;

	if (len == 0 || fe->nregions < 2 || step == 0)
		return false;
	first = gpa / step;
	last = (gpa + len - 1) / step;
	if (first > fe->nregions - 1)
		first = fe->nregions - 1;
	if (last > fe->nregions - 1)
		last = fe->nregions - 1;
	return first != last;
}

/* Cuts len bytes at gpa into at most s->segs non-empty buffers. Returns
 * how many. */
static unsigned split(struct stream *s, uint64_t gpa, uint32_t len,
		      bool writable, struct vmio_dbuf *bufs)
{
	uint32_t piece = len / s->segs;
	unsigned n = 0;

	if (piece == 0)
		piece = len;
	while (len) {
		uint32_t l = n + 1 == s->segs || piece > len ? len : piece;

		bufs[n].gpa = gpa;
		bufs[n].len = l;
		bufs[n].writable = writable;
		if (crosses_region(s->fe, gpa, l))
			s->r->crossing_bufs++;
		gpa += l;
		len -= l;
		n++;
	}
	return n;
}

/* Counts the chains whose indirect table crosses a region boundary. */
static void note_table(struct stream *s, const struct slot *sl, unsigned n)
{
	if (crosses_region(s->fe, sl->table_gpa, 16 * n))
		s->r->crossing_bufs++;
}

static int post(struct stream *s, unsigned qidx, struct slot *sl,
		uint32_t len, bool writable, void *token)
{
	struct vmio_dvq *q = vmio_fe_queue(s->fe, qidx);
	struct vmio_dbuf bufs[STREAM_MAX_SEGS];
	unsigned n = split(s, sl->gpa, len, writable, bufs);
	int head;

	if (s->o->indirect) {
		head = vmio_dvq_add_indirect(q, vmio_fe_ptr(s->fe, sl->table_gpa),
					     sl->table_gpa, bufs, n, token);
		if (head >= 0)
			note_table(s, sl, n);
		return head;
	}
	return vmio_dvq_add(q, bufs, n, token);
}

/* Slot numbers travel as tokens, offset by one so none is NULL. */
static void *token_of(unsigned i)
{
	return (void *)(uintptr_t)(i + 1);
}

static unsigned slot_of(void *token)
{
	return (unsigned)((uintptr_t)token - 1);
}

static bool post_tx(struct stream *s)
{
	bool posted = false;

	while (s->tx_nfree && s->sent < s->o->bytes) {
		unsigned i = s->tx_free[s->tx_nfree - 1];
		struct slot *sl = &s->tx[i];
		uint64_t left = s->o->bytes - s->sent;

		sl->len = left < s->o->tx_chunk ? (uint32_t)left : s->o->tx_chunk;
		sl->offset = s->sent;
		/* Without verify the buffers keep what they were filled with
		 * at the start, so a benchmark measures the device rather than
		 * our pattern generator. */
		if (s->o->verify)
			pattern_fill(s->o->seed, sl->offset,
				     vmio_fe_ptr(s->fe, sl->gpa), sl->len);
		if (post(s, TX_QUEUE, sl, sl->len, false, token_of(i)) < 0)
			break;
		s->tx_nfree--;
		s->sent += sl->len;
		posted = true;
	}
	return posted;
}

static int reap_tx(struct stream *s)
{
	struct vmio_dvq *q = vmio_fe_queue(s->fe, TX_QUEUE);
	uint32_t len;
	void *tok;
	int n = 0;

	while ((tok = vmio_dvq_get_used(q, &len))) {
		s->tx_free[s->tx_nfree++] = slot_of(tok);
		n++;
	}
	return n;
}

static int check_rx(struct stream *s, const struct slot *sl, uint32_t len)
{
	const uint8_t *p = vmio_fe_ptr(s->fe, sl->gpa);
	size_t bad;

	if (len > s->o->rx_chunk) {
		set_err(s->r->error, sizeof(s->r->error),
			"device wrote %u bytes into an rx buffer of %u", len,
			s->o->rx_chunk);
		return -1;
	}
	if (len > s->o->bytes - s->received) {
		set_err(s->r->error, sizeof(s->r->error),
			"received more than the %" PRIu64 " bytes sent",
			s->o->bytes);
		return -1;
	}
	if (!s->o->verify)
		return 0;
	bad = pattern_check(s->o->seed, s->received, p, len);
	if (bad < len) {
		uint64_t at = s->received + bad;

		set_err(s->r->error, sizeof(s->r->error),
			"byte at stream offset %" PRIu64 " is 0x%02x, expected 0x%02x",
			at, p[bad], vmio_stream_pattern_byte(s->o->seed, at));
		return -1;
	}
	return 0;
}

static int maybe_remap(struct stream *s)
{
	unsigned n;
	int r;

	if (!s->o->remap_every || s->received < s->next_remap)
		return 0;
	s->next_remap += s->o->remap_every;
	/* A different split each time: 1, 2, ... 8 regions, then again. */
	n = s->fe->nregions % VHOST_USER_MEM_TABLE_MAX_REGIONS + 1;
	r = vmio_fe_mem_resend(s->fe, n);
	if (r) {
		set_err(s->r->error, sizeof(s->r->error),
			"re-sending SET_MEM_TABLE (%u regions) failed: %s", n,
			strerror(-r));
		return -1;
	}
	s->r->remaps++;
	return 0;
}

/* Returns the number of rx chains reaped (and re-posted), or -1. The
 * memory table is re-sent as soon as the stream passes each mark, while
 * the device has the rest of both rings in hand. */
static int reap_rx(struct stream *s)
{
	struct vmio_dvq *q = vmio_fe_queue(s->fe, RX_QUEUE);
	uint32_t len;
	void *tok;
	int n = 0;

	while ((tok = vmio_dvq_get_used(q, &len))) {
		unsigned i = slot_of(tok);

		if (check_rx(s, &s->rx[i], len))
			return -1;
		s->received += len;
		n++;
		if (maybe_remap(s))
			return -1;
		if (post(s, RX_QUEUE, &s->rx[i], s->o->rx_chunk, true, tok) < 0) {
			set_err(s->r->error, sizeof(s->r->error),
				"cannot re-post an rx buffer");
			return -1;
		}
	}
	return n;
}


static void drain_eventfd(int fd)
{
	uint64_t v;

	/* Non-blocking: EAGAIN only means nothing was pending. */
	if (read(fd, &v, sizeof(v)) < 0)
		return;
}

/* Sleeps until the device notifies either queue, at most timeout_ms.
 * Interrupts are requested first and the rings checked again after, so a
 * used entry pushed in between is not slept through. The socket is
 * watched too: the backend sends nothing unasked, so anything there means
 * it went away, and waiting out the stall timeout would only hide that.
 * Returns 0, or -1 with the error set. */
static int wait_device(struct stream *s, int timeout_ms)
{
	struct vmio_dvq *rx = vmio_fe_queue(s->fe, RX_QUEUE);
	struct vmio_dvq *tx = vmio_fe_queue(s->fe, TX_QUEUE);
	struct pollfd p[3] = {
		{ .fd = rx->call_fd, .events = POLLIN },
		{ .fd = tx->call_fd, .events = POLLIN },
		{ .fd = s->fe->sock, .events = POLLIN },
	};

	vmio_dvq_want_interrupt(rx);
	vmio_dvq_want_interrupt(tx);
	if (vmio_dvq_used_pending(rx) || vmio_dvq_used_pending(tx))
		return 0;
	if (poll(p, 3, timeout_ms) <= 0)
		return 0;
	if (p[2].revents) {
		set_err(s->r->error, sizeof(s->r->error),
			"the backend closed the connection (sent %" PRIu64
			" bytes, received %" PRIu64 ")",
			s->sent, s->received);
		return -1;
	}
	drain_eventfd(rx->call_fd);
	drain_eventfd(tx->call_fd);
	return 0;
}

static int setup(struct stream *s)
{
	struct vmio_stream_result *r = s->r;

	s->segs = s->o->segs ? s->o->segs : 1;
	s->nchains = chains_per_queue(s->o, vmio_fe_queue(s->fe, TX_QUEUE)->size);
	if (!s->fe->queue_set_up[RX_QUEUE] || !s->fe->queue_set_up[TX_QUEUE] ||
	    vmio_fe_queue(s->fe, RX_QUEUE)->size !=
		    vmio_fe_queue(s->fe, TX_QUEUE)->size) {
		set_err(r->error, sizeof(r->error),
			"queues 0 and 1 must be set up with the same size");
		return -1;
	}
	if (s->nchains == 0 || s->segs > STREAM_MAX_SEGS || !s->o->tx_chunk ||
	    !s->o->rx_chunk) {
		set_err(r->error, sizeof(r->error),
			"bad stream options: %u buffers per chain, chunks %u/%u",
			s->segs, s->o->tx_chunk, s->o->rx_chunk);
		return -1;
	}
	s->tx = calloc(s->nchains, sizeof(*s->tx));
	s->rx = calloc(s->nchains, sizeof(*s->rx));
	s->tx_free = calloc(s->nchains, sizeof(*s->tx_free));
	if (!s->tx || !s->rx || !s->tx_free) {
		set_err(r->error, sizeof(r->error), "out of memory");
		return -1;
	}
	if (alloc_slots(s, s->tx, s->o->tx_chunk) ||
	    alloc_slots(s, s->rx, s->o->rx_chunk)) {
		set_err(r->error, sizeof(r->error),
			"guest memory too small for %u chains of %u + %u bytes",
			s->nchains, s->o->tx_chunk, s->o->rx_chunk);
		return -1;
	}
	for (unsigned i = 0; i < s->nchains; i++) {
		s->tx_free[s->tx_nfree++] = s->nchains - 1 - i;
		if (!s->o->verify)
			pattern_fill(s->o->seed, (uint64_t)i * s->o->tx_chunk,
				     vmio_fe_ptr(s->fe, s->tx[i].gpa),
				     s->o->tx_chunk);
	}
	for (unsigned i = 0; i < s->nchains; i++)
		if (post(s, RX_QUEUE, &s->rx[i], s->o->rx_chunk, true,
			 token_of(i)) < 0) {
			set_err(r->error, sizeof(r->error),
				"cannot post rx buffer %u", i);
			return -1;
		}
	s->next_remap = s->o->remap_every;
	return 0;
}

static int step(struct stream *s, bool *progress)
{
	int ntx = reap_tx(s);
	int nrx = reap_rx(s);

	if (nrx < 0)
		return -1;
	*progress = ntx > 0 || nrx > 0;
	post_tx(s);
	vmio_dvq_kick(vmio_fe_queue(s->fe, TX_QUEUE));
	vmio_dvq_kick(vmio_fe_queue(s->fe, RX_QUEUE));
	return 0;
}

static int loop(struct stream *s)
{
	const int64_t stall_ns = (int64_t)s->o->stall_ms * 1000000;
	int64_t last_progress = (int64_t)vmio_now_ns();
	bool progress;

	while (s->received < s->o->bytes) {
		if (step(s, &progress))
			return -1;
		int64_t now = (int64_t)vmio_now_ns();
		if (progress) {
			last_progress = now;
			continue;
		}
		if (now - last_progress >= stall_ns) {
			set_err(s->r->error, sizeof(s->r->error),
				"no progress for %d ms: sent %" PRIu64
				" of %" PRIu64 " bytes, received %" PRIu64,
				s->o->stall_ms, s->sent, s->o->bytes,
				s->received);
			return -1;
		}
		if (wait_device(s, (int)((stall_ns - (now - last_progress)) /
					 1000000) + 1))
			return -1;
	}
	return 0;
}

int vmio_stream_run(struct vmio_fe *fe, const struct vmio_stream_opts *o,
		    struct vmio_stream_result *r)
{
	struct stream s = { .fe = fe, .o = o, .r = r };
	int64_t start;
	int ret;

	memset(r, 0, sizeof(*r));
	ret = setup(&s);
	if (!ret) {
		start = (int64_t)vmio_now_ns();
		vmio_dvq_kick(vmio_fe_queue(fe, RX_QUEUE));
		ret = loop(&s);
		r->seconds = (double)((int64_t)vmio_now_ns() - start) / 1e9;
	}
	r->bytes = s.received;
	free(s.tx);
	free(s.rx);
	free(s.tx_free);
	return ret;
}
