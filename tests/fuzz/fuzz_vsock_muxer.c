/* Fuzzes the vsock connection state machine, multiplexer and sibling
 * router (src/devices/vsock/) in-process, with a hostile guest: one or two
 * whole vsock devices (device.c, so hybrid.c's listeners too) on a real
 * vmio_loop, driven through their vmio_device_ops as the vhost-user core
 * drives them, sharing a router when there are two. The harness lays out
 * the rx and tx rings of each VM in a memfd, plays both guest drivers
 * (well-formed rings: ring-level hostility is fuzz_chain's) and the host
 * programs on real unix sockets.
 *
 * What must hold, checked with abort():
 *  - every used element refers to a chain the harness posted and has not
 *    had back yet, and its used length fits the chain's writable length;
 *  - every packet on rx has a well-formed header: used length at least
 *    44 and equal to 44 + hdr.len (a buffer used with 0 bytes is one
 *    given back empty, never inside a mergeable packet), src_cid the host (2) or the sibling's
 *    CID (all 64 bits), dst_cid the receiving VM's own, a known type and
 *    op, no payload unless RW, and a sibling's packet only when there is
 *    a sibling;
 *  - no fd leak (counted every 1024 inputs) and no sanitizer report; time
 *    per input is bounded (records, packets, loop turns), and the loop is
 *    only ever run with timeout 0.
 * The loop runs on a clock of the harness's (fuzz.h): it moves only at
 * the records that say so, and the devices' deadlines (connect timeout,
 * CONNECT line timeout, shutdown drain, the RST queue's retry, all on
 * the muxer's and hybrid's ticks) pass there, in the middle of whatever
 * the input set going; at the end it moves past all of them.
 *
 * Input: a 4-byte header (missing bytes read as zero), then records.
 *   [0]  bit 0 two VMs (sharing a router); bit 1 they share a group;
 *        bit 2 VM 0 negotiates SEQPACKET, bit 3 VM 1 does; bit 4 VM 1's
 *        CID is 0x100000003 (VM 0's low 32 bits) instead of 4; bit 5
 *        EVENT_IDX; bit 6 buf_size 4096 (else 65536); bit 7 VM 1 gets no
 *        SET_FEATURES (not attached)
 *  [1]  queue size 1 << (2 + [1] % 7) (4..256); max_conns 1 + [1] >> 4
 *  [2]  bits 0-2 router max flows 1 + [2] % 8; bits 3-4 the cost of a
 *        guest packet (guest_backlog.h): the default, none (bytes only),
 *        64, 16384 (a 64 KiB guest then holds 4 of our packets: the
 *        bound is met at once, and a seqpacket message may need more);
 *        bits 5-6 host-side ports: the default range, one port, three,
 *        or the last three below 2^31 (with one or three, CONNECTs to
 *        one guest port soon find every port in use); and bits 3-7
 *        together the connect (and CONNECT line) timeout,
 *        100 ms * (1 + [2] >> 3), 100 ms to 3.2 s (two branches took
 *        the same byte: each value is still reached, tied to the others)
 *  [3]  bit 0 VM 0 negotiates mergeable rx buffers (MRG_RXBUF), bit 1
 *        VM 1 does: rx packets then span buffers, and each must be
 *        whole, its buffers filled in order (all but the last full), its
 *        num_buffers and hdr.len agreeing with what arrived;
 *        bit 2 --tx-copy (else guest data to the host sockets is spliced
 *        and its tx chains held until read, devices/vsock/tx_splice.h);
 *        bit 3 --tx-hold 1 (else 2 + [3] >> 4): held chains come back
 *        out of order, when a host socket is read (record 7), closed or
 *        reset, and all at once on a queue stop
 * A record is a byte: kind = low nibble, a = high nibble, vm = a & 1
 * (VM 0 when there is one).
 *   0, 15 a guest tx packet, then a tx kick unless a & 8; 14 the
 *        same after a byte [k]: a burst of 1 + 4k copies (sel & 4: from
 *        successive src_ports), kicked whenever the ring is full (more
 *        packets than the RST queue and a callback's batch hold):
 *        [sel] [cids] [ports b b] [op] [type] [flags] [len b b]
 *        [actual b b] [buf_alloc] [fwd_cnt b b b b] [split], then the
 *        payload bytes (actual % 4097 of them, as many as the input has;
 *        sel & 2: actual % 16341, in 4 to 16 buffers; sel & 1: a
 *        pattern instead of input bytes)
 *        cids: low 2 bits src (own, own, sibling, raw 8 bytes follow),
 *        bits 2-4 dst (host, host, host, sibling, own, raw, 0, ~0)
 *        ports: see guest_port()/host_port()
 *        split: the chain is cut into 1 + split % 16 buffers (sel & 2:
 *        4 + split % 13), at most the queue's size; split & 0x10 cuts
 *        them unevenly; split & 0x40 puts them in an indirect table
 *   1    rx buffers: [n] [size] [split]: 1 + n % 8 chains of size bytes
 *        (size_rx()), each in 1 + (split & 0x3f) % 8 buffers (at least
 *        as many slots as the size needs, at most the queue's size);
 *        split & 0x40 through an indirect table; split & 0x80 makes the
 *        first buffer readable (a broken driver); kick unless a & 8
 *   2    1 + [b] % 16 loop turns (timeout 0); a & 8: before them the
 *        clock moves on by [t] (after [b]): t ms below 0x80, else
 *        (t - 0x7f) * 250 ms
 *   3    a host listener at <uds>_<port>: port index a >> 1 & 3, a & 8
 *        seqpacket
 *   4    accept on listener a >> 1 & 3 of vm
 *   5    a host program connects to the hybrid socket (a & 8: its
 *        seqpacket twin), then [sel]: 0 "CONNECT <port>\n" (port [b] by
 *        guest_port), 1 the same in lower case with stream bytes behind,
 *        2 [n] garbage bytes that follow, 3 nothing
 *   6    host socket a >> 1 writes [n] bytes that follow (n >= 0xf0:
 *        (n - 0xef) * 16 KiB of a pattern instead)
 *   7    host socket a >> 1 reads up to 64 * [n] bytes
 *   8    host socket a >> 1 shutdown [b] % 3
 *   9    host socket a >> 1 closed
 *  10    kick tx (a & 8) or rx of vm
 *  11    vm's front end goes (reset) and comes back: features, fresh rings
 *  12    vm's queues stop (a & 8: memory table changing) and start again
 *  13    listener a >> 1 & 3 of vm closed (its socket file removed)
 * FUZZ_VSOCK_MUXER_VERBOSE=1 logs at debug level and prints every rx
 * packet.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/vsock/conn_table.h"
#include "devices/vsock/device.h"
#include "devices/vsock/hybrid.h"
#include "devices/vsock/mrg_rx.h"
#include "devices/vsock/muxer.h"
#include "devices/vsock/packet.h"
#include "devices/vsock/router.h"
#include "event/loop.h"
#include "fuzz.h"
#include "util/log.h"
#include "virtio/features.h"
#include "virtio/ring.h"
#include "virtio/virtqueue.h"

#define FAIL(...)                                                             \
	do {                                                                  \
		fprintf(stderr, "fuzz_vsock_muxer: " __VA_ARGS__);            \
		fputc('\n', stderr);                                          \
		abort();                                                      \
	} while (0)

#define HDR 4u
#define NVM 2u
#define QMAX 256u
#define SLOT 4096u
#define UVA_BASE 0x7f0000000000ull
/* Guest memory: per VM and queue, its rings (one page each is plenty for
 * 128 entries) then a slot per descriptor. */
#define RING_AREA 0x2000u
#define QAREA (RING_AREA + QMAX * SLOT)
#define MEM_SIZE (NVM * 2u * QAREA)
#define NLISTEN 4u
#define NHOST 8u
/* Bounds per input. */
#define MAX_RECORDS 512u
#define MAX_TX 2048u
#define MAX_TURNS 512u
#define MAX_RXBUF 512u

static const uint64_t VM1_CID_HIGH = 0x100000003ull;

/* ---- Per process ------------------------------------------------------ */

static int memfd = -1;
static uint8_t *image;
static struct vmio_mem mem;
static char tmpdir[64];
static unsigned long run_no;
static bool verbose;

/* The per-process directory goes with the process (every socket file in
 * it is removed after each input). */
static void remove_tmpdir(void)
{
	rmdir(tmpdir);
}

static void init_once(void)
{
	struct vmio_mem_region_desc d = {
		.gpa = 0, .size = MEM_SIZE, .uva = UVA_BASE, .mmap_offset = 0,
	};
	const char *why;

	if (image)
		return;
	verbose = getenv("FUZZ_VSOCK_MUXER_VERBOSE");
	vmio_log_set_level(verbose ? VMIO_LOG_DEBUG : VMIO_LOG_ERR);
	image = fuzz_guest_memory("fuzz_vsock_muxer", MEM_SIZE, &memfd);
	vmio_mem_init(&mem);
	if (vmio_mem_add(&mem, &d, dup(memfd), &why))
		abort();
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/vmio-fzmux-XXXXXX");
	if (!mkdtemp(tmpdir))
		abort();
	atexit(remove_tmpdir);
}

/* ---- Queues, as the core holds them, and the guest's view ------------- */

/* The most buffers in a chain the harness posts (Linux 6.17 cuts a
 * 64 KiB packet into three; drivers may cut into any number). */
#define MAXD 16u

struct chain_rec {
	bool out;          /* posted, not used yet */
	unsigned ndesc;    /* ring descriptors (the table's one, if any) */
	uint16_t desc[MAXD + 1];
	unsigned nel;      /* the chain's buffers, in order */
	struct {
		uint64_t addr;
		uint32_t len;
		bool wr;
	} el[MAXD];
	uint32_t in_len;   /* writable bytes */
};

struct gq {
	struct vmio_vq vq;
	uint64_t base_gpa; /* rings at base, slots at base + RING_AREA */
	uint64_t desc_gpa, avail_gpa, used_gpa;
	uint16_t avail_idx; /* the driver's */
	uint16_t last_used; /* used entries seen */
	uint16_t free_desc[QMAX];
	unsigned nfree;
	struct chain_rec rec[QMAX]; /* by head */
	bool running;
};

struct host_sock {
	int fd;
};

struct vm {
	bool present;
	uint64_t cid;
	char uds[96];
	struct vsock_device *dev;
	const struct vmio_device_ops *ops;
	uint64_t features;
	uint64_t acked;  /* the features the device was given (0: none yet) */
	struct gq q[2]; /* rx, tx */
	int lfd[NLISTEN];
	char lpath[NLISTEN][128];
	/* dst_cids the guest sent to (an RST may come back from them). */
	uint64_t dst_seen[16];
	unsigned ndst_seen;
	bool dst_overflow;
	/* A mergeable packet being put together from its buffers. */
	uint8_t asm_buf[VSOCK_MRG_HDR_SIZE + VSOCK_MAX_PKT_PAYLOAD];
	uint32_t asm_len;
	unsigned asm_bufs, asm_want;
};

static struct vmio_loop *loop;
static struct fuzz_clock clock_;
static struct vsock_router *router;
static struct vm vms[NVM];
static unsigned nvms;
static uint16_t qsize;
static struct host_sock hosts[NHOST];
static unsigned turns, ntx, nrxbuf;
static uint8_t hdr[HDR];

static uint8_t *gpa_ptr(uint64_t gpa)
{
	return image + gpa;
}

static void gq_setup(struct vm *v, unsigned qi)
{
	struct gq *q = &v->q[qi];
	unsigned vmi = (unsigned)(v - vms);
	struct vmio_vq *vq = &q->vq;

	q->base_gpa = (uint64_t)(vmi * 2 + qi) * QAREA;
	memset(gpa_ptr(q->base_gpa), 0, RING_AREA);
	q->desc_gpa = q->base_gpa;
	q->avail_gpa = q->desc_gpa + virtq_desc_bytes(qsize);
	q->used_gpa = (q->avail_gpa + virtq_avail_bytes(qsize) + 3) & ~3ull;
	q->avail_idx = q->last_used = 0;
	q->nfree = qsize;
	for (unsigned i = 0; i < qsize; i++)
		q->free_desc[i] = (uint16_t)(qsize - 1 - i);
	memset(q->rec, 0, sizeof(q->rec));
	vmio_vq_init(vq, qi);
	vq->size = qsize;
	vq->desc_uva = UVA_BASE + q->desc_gpa;
	vq->avail_uva = UVA_BASE + q->avail_gpa;
	vq->used_uva = UVA_BASE + q->used_gpa;
	vq->addr_set = true;
	vq->event_idx = v->features & VMIO_BIT(VIRTIO_RING_F_EVENT_IDX);
	vq->indirect = v->features & VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC);
	if (vmio_vq_map(vq, &mem))
		abort();
	q->running = false;
}

static void q_start(struct vm *v, unsigned qi)
{
	v->q[qi].running = true;
	v->ops->queue_start(v->dev, &v->q[qi].vq, &mem);
}

static void q_stop(struct vm *v, unsigned qi)
{
	if (!v->q[qi].running)
		return;
	v->q[qi].running = false;
	v->ops->queue_stop(v->dev, &v->q[qi].vq, VMIO_QUEUE_PAUSE);
}

static void q_kick(struct vm *v, unsigned qi)
{
	if (v->q[qi].running && vmio_vq_ready(&v->q[qi].vq))
		v->ops->queue_kick(v->dev, &v->q[qi].vq);
}

static bool is_sibling_cid(const struct vm *v, uint64_t cid)
{
	for (unsigned i = 0; i < nvms; i++)
		if (&vms[i] != v && vms[i].cid == cid)
			return true;
	return false;
}

static void note_dst(struct vm *v, uint64_t cid)
{
	for (unsigned i = 0; i < v->ndst_seen; i++)
		if (v->dst_seen[i] == cid)
			return;
	if (v->ndst_seen == 16)
		v->dst_overflow = true;
	else
		v->dst_seen[v->ndst_seen++] = cid;
}

static bool addressed(const struct vm *v, uint64_t cid)
{
	for (unsigned i = 0; i < v->ndst_seen; i++)
		if (v->dst_seen[i] == cid)
			return true;
	return v->dst_overflow;
}

/* Copies the first len writable bytes of a posted chain. */
static void chain_gather(const struct gq *q, const struct chain_rec *r,
			 uint8_t *dst, uint32_t len)
{
	uint32_t got = 0;

	(void)q;
	for (unsigned i = 0; i < r->nel && got < len; i++) {
		uint32_t n;

		if (!r->el[i].wr)
			continue;
		n = r->el[i].len < len - got ? r->el[i].len : len - got;
		memcpy(dst + got, gpa_ptr(r->el[i].addr), n);
		got += n;
	}
}

/* What every rx header must say, however it arrived. */
static void check_rx_hdr(const struct vm *v, const uint8_t *wire)
{
	struct vsock_hdr h;

	vsock_hdr_decode(wire, &h);
	if (h.dst_cid != v->cid)
		FAIL("rx of CID %llu: dst_cid %llu", (unsigned long long)v->cid,
		     (unsigned long long)h.dst_cid);
	/* An RST answering a packet for a CID nobody serves comes from the
	 * CID the guest addressed (the guest finds its socket by it). */
	if (h.src_cid != VSOCK_HOST_CID && !is_sibling_cid(v, h.src_cid) &&
	    !(h.op == VSOCK_OP_RST && addressed(v, h.src_cid)))
		FAIL("rx of CID %llu: %s from CID %llu, neither the host nor "
		     "a sibling%s", (unsigned long long)v->cid,
		     vsock_op_name(h.op), (unsigned long long)h.src_cid,
		     h.op == VSOCK_OP_RST ? " nor a CID the guest addressed"
					  : "");
	/* An RST answering a guest packet of a type it may not use carries
	 * that type back (as the spec and Linux do); nothing else may. */
	if (h.op != VSOCK_OP_RST &&
	    h.type != VSOCK_TYPE_STREAM &&
	    !(h.type == VSOCK_TYPE_SEQPACKET &&
	      (v->features & VMIO_BIT(VIRTIO_VSOCK_F_SEQPACKET))))
		FAIL("rx: %s of type %u to a guest that %s SEQPACKET",
		     vsock_op_name(h.op), h.type,
		     v->features & VMIO_BIT(VIRTIO_VSOCK_F_SEQPACKET)
			     ? "negotiated" : "did not negotiate");
	if (h.op < VSOCK_OP_REQUEST || h.op > VSOCK_OP_MAX)
		FAIL("rx: op %u", h.op);
	if (h.op != VSOCK_OP_RW && h.len)
		FAIL("rx: %s with %u bytes", vsock_op_name(h.op), h.len);
	if (h.len > VSOCK_MAX_PKT_PAYLOAD)
		FAIL("rx: %u bytes of payload", h.len);
	if (verbose)
		fprintf(stderr, "rx CID %llu: %s %llu:%u -> %u type %u len %u "
			"flags %#x buf_alloc %u fwd_cnt %u\n",
			(unsigned long long)v->cid, vsock_op_name(h.op),
			(unsigned long long)h.src_cid, h.src_port, h.dst_port,
			h.type, h.len, h.flags, h.buf_alloc, h.fwd_cnt);
}

static void check_rx_pkt(const struct vm *v, const struct gq *q,
			 const struct chain_rec *r, uint32_t used_len)
{
	uint8_t wire[VSOCK_HDR_SIZE];
	struct vsock_hdr h;

	if (used_len < VSOCK_HDR_SIZE)
		FAIL("rx: a %u-byte packet", used_len);
	chain_gather(q, r, wire, VSOCK_HDR_SIZE);
	vsock_hdr_decode(wire, &h);
	if (h.len != used_len - VSOCK_HDR_SIZE)
		FAIL("rx: hdr.len %u, used length %u", h.len, used_len);
	check_rx_hdr(v, wire);
}

/* One used buffer of a mergeable packet: appended to the packet under
 * way, which is checked once its num_buffers are in. */
static void take_rx_buf(struct vm *v, const struct gq *q,
			const struct chain_rec *r, uint32_t used_len)
{
	struct vsock_hdr h;

	if (!used_len)
		FAIL("rx: a mergeable buffer used with 0 bytes");
	if (v->asm_len + used_len > sizeof(v->asm_buf))
		FAIL("rx: a mergeable packet of more than %zu bytes",
		     sizeof(v->asm_buf));
	chain_gather(q, r, v->asm_buf + v->asm_len, used_len);
	v->asm_len += used_len;
	v->asm_bufs++;
	if (!v->asm_want && v->asm_len >= VSOCK_MRG_HDR_SIZE) {
		v->asm_want = v->asm_buf[VSOCK_HDR_SIZE] |
			      v->asm_buf[VSOCK_HDR_SIZE + 1] << 8;
		if (v->asm_want < v->asm_bufs ||
		    v->asm_want > VSOCK_MRG_MAX_BUFS)
			FAIL("rx: num_buffers %u after %u buffers",
			     v->asm_want, v->asm_bufs);
	}
	if (!v->asm_want || v->asm_bufs < v->asm_want) {
		if (used_len != r->in_len)
			FAIL("rx: buffer %u of a mergeable packet used %u of "
			     "%u bytes, and the packet goes on",
			     v->asm_bufs, used_len, r->in_len);
		return;
	}
	vsock_hdr_decode(v->asm_buf, &h);
	if (h.len != v->asm_len - VSOCK_MRG_HDR_SIZE)
		FAIL("rx: mergeable hdr.len %u, %u bytes in %u buffers", h.len,
		     v->asm_len, v->asm_bufs);
	check_rx_hdr(v, v->asm_buf);
	v->asm_len = 0;
	v->asm_bufs = v->asm_want = 0;
}

/* Takes every used element the device published since the last look. */
static void reap(struct vm *v, unsigned qi)
{
	struct gq *q = &v->q[qi];
	const struct virtq_used *u =
		(const struct virtq_used *)gpa_ptr(q->used_gpa);
	uint16_t idx = __atomic_load_n(&u->idx, __ATOMIC_ACQUIRE);

	if ((uint16_t)(idx - q->last_used) > qsize)
		FAIL("q%u: used idx moved by %u (size %u)", qi,
		     (uint16_t)(idx - q->last_used), qsize);
	while (q->last_used != idx) {
		const struct virtq_used_elem *e =
			&u->ring[q->last_used % qsize];
		uint32_t id = e->id, len = e->len;
		struct chain_rec *r;

		q->last_used++;
		if (id >= qsize || !q->rec[id].out)
			FAIL("q%u: used id %u, not a chain out", qi, id);
		r = &q->rec[id];
		if (len > r->in_len)
			FAIL("q%u: used length %u, chain takes %u", qi, len,
			     r->in_len);
		/* A buffer given back empty (rx_writer.h): only ever
		 * between packets. */
		if (qi == VSOCK_RX_QUEUE && !len) {
			if (v->asm_len)
				FAIL("rx: a buffer given back empty inside "
				     "a mergeable packet");
		} else if (qi == VSOCK_RX_QUEUE &&
		    (v->acked & VMIO_BIT(VIRTIO_VSOCK_F_MRG_RXBUF)))
			take_rx_buf(v, q, r, len);
		else if (qi == VSOCK_RX_QUEUE)
			check_rx_pkt(v, q, r, len);
		r->out = false;
		for (unsigned i = 0; i < r->ndesc; i++)
			q->free_desc[q->nfree++] = r->desc[i];
	}
}

static void reap_all(void)
{
	for (unsigned i = 0; i < nvms; i++)
		for (unsigned qi = 0; qi < 2; qi++)
			reap(&vms[i], qi);
}

static uint64_t slot_gpa(const struct gq *q, uint16_t d)
{
	return q->base_gpa + RING_AREA + (uint64_t)d * SLOT;
}

/* Posts a chain of n (at most MAXD) buffers with lens[i] bytes, writable
 * as said, in the ring or (indirect) through a table that one ring
 * descriptor points to. Returns the head, or -1 without enough free
 * descriptors. Each buffer is the slot of a descriptor taken for it, the
 * table the head's slot. */
static int post_chain(struct vm *v, unsigned qi, unsigned n,
		      const uint32_t *lens, const bool *writable,
		      bool indirect)
{
	struct gq *q = &v->q[qi];
	struct virtq_desc *dt = (struct virtq_desc *)gpa_ptr(q->desc_gpa);
	struct virtq_avail *av = (struct virtq_avail *)gpa_ptr(q->avail_gpa);
	struct chain_rec *r;
	unsigned nd = n + (indirect ? 1 : 0);
	uint16_t d[MAXD + 1];
	struct virtq_desc *t;

	reap(v, qi);
	if (!n || n > MAXD || q->nfree < nd)
		return -1;
	for (unsigned i = 0; i < nd; i++)
		d[i] = q->free_desc[--q->nfree];
	r = &q->rec[d[0]];
	r->ndesc = nd;
	r->nel = n;
	r->in_len = 0;
	for (unsigned i = 0; i < nd; i++)
		r->desc[i] = d[i];
	if (indirect) {
		t = (struct virtq_desc *)gpa_ptr(slot_gpa(q, d[0]));
		dt[d[0]] = (struct virtq_desc){
			.addr = slot_gpa(q, d[0]),
			.len = (uint32_t)(n * sizeof(*t)),
			.flags = VIRTQ_DESC_F_INDIRECT,
		};
	}
	for (unsigned i = 0; i < n; i++) {
		uint16_t next = indirect ? (uint16_t)(i + 1) : d[i + 1];
		struct virtq_desc *e = indirect ? &t[i] : &dt[d[i]];

		r->el[i].addr = slot_gpa(q, d[indirect ? i + 1 : i]);
		r->el[i].len = lens[i];
		r->el[i].wr = writable[i];
		e->addr = r->el[i].addr;
		e->len = lens[i];
		e->flags = (uint16_t)((writable[i] ? VIRTQ_DESC_F_WRITE : 0) |
				      (i + 1 < n ? VIRTQ_DESC_F_NEXT : 0));
		e->next = i + 1 < n ? next : 0;
		if (writable[i])
			r->in_len += lens[i];
	}
	r->out = true;
	av->ring[q->avail_idx % qsize] = d[0];
	__atomic_store_n(&av->idx, (uint16_t)(q->avail_idx + 1),
			 __ATOMIC_RELEASE);
	q->avail_idx++;
	return d[0];
}

/* ---- Ports and CIDs --------------------------------------------------- */

static const uint32_t listen_ports[NLISTEN] = { 1000, 1001, 1002, 5000 };

/* A guest-side port: mostly one of a few (so flows meet). */
static uint32_t guest_port(uint8_t b, struct stream *s)
{
	switch (b >> 6) {
	case 0:
	case 1:
		return 2000 + (b & 7);
	case 2:
		return listen_ports[b & 3];
	default:
		return (b & 1) ? next32(s) : 2000u + (b & 63u);
	}
}

/* The first host-side port of the range (header [2]). */
static uint32_t port_first;

/* A port on the other side: a listener's, one the host allocated for a
 * CONNECT (counting up from port_first), a guest's (for a sibling), or
 * any. */
static uint32_t host_port(uint8_t b, struct stream *s)
{
	switch (b >> 6) {
	case 0:
		return listen_ports[b & 3];
	case 1:
		return port_first + (b & 15);
	case 2:
		return 2000 + (b & 7);
	default:
		return (b & 1) ? next32(s) : listen_ports[(b >> 1) & 3];
	}
}

static const struct vm *sibling_of(const struct vm *v)
{
	return nvms > 1 ? &vms[v == &vms[0] ? 1 : 0] : v;
}

/* ---- Records ---------------------------------------------------------- */

static void rec_tx(struct vm *v, uint8_t a, struct stream *s, unsigned copies)
{
	uint8_t sel = next8(s), cids = next8(s);
	uint8_t pb0 = next8(s), pb1 = next8(s);
	struct vsock_hdr h = { 0 };
	uint32_t actual, lens[MAXD];
	bool wr[MAXD] = { false };
	static uint8_t buf[4 * SLOT];
	unsigned n, split;
	int head;

	switch (cids & 3) {
	case 0:
	case 1:
		h.src_cid = v->cid;
		break;
	case 2:
		h.src_cid = sibling_of(v)->cid;
		break;
	default:
		h.src_cid = next64(s);
	}
	switch ((cids >> 2) & 7) {
	case 0:
	case 1:
	case 2:
		h.dst_cid = VSOCK_HOST_CID;
		break;
	case 3:
		h.dst_cid = sibling_of(v)->cid;
		break;
	case 4:
		h.dst_cid = v->cid;
		break;
	case 5:
		h.dst_cid = next64(s);
		break;
	case 6:
		h.dst_cid = 0;
		break;
	default:
		h.dst_cid = ~0ull;
	}
	h.src_port = guest_port(pb0, s);
	h.dst_port = host_port(pb1, s);
	h.op = next8(s);
	if (h.op < 16)
		h.op = (uint16_t)(h.op % 8); /* mostly valid ops */
	h.type = next8(s);
	if (h.type < 0xf0)
		h.type = (uint16_t)(h.type % 2 + 1);
	h.flags = next8(s);
	if (h.flags & 0x80)
		h.flags = next32(s);
	else
		h.flags &= 3;
	h.len = next16(s);
	/* sel & 2: up to what four slots hold (more than the host socket
	 * takes in a few packets, and than our credit in a few more). */
	actual = next16(s) % ((sel & 2) ? 4 * SLOT - VSOCK_HDR_SIZE + 1
					 : SLOT + 1);
	if (!(h.len & 0x8000))
		h.len = actual; /* mostly honest */
	else if (h.len & 0x4000)
		h.len = next32(s);
	switch (next8(s) & 3) {
	case 0:
		h.buf_alloc = 65536;
		break;
	case 1:
		h.buf_alloc = 0;
		break;
	case 2:
		h.buf_alloc = 4096;
		break;
	default:
		h.buf_alloc = next32(s);
	}
	h.fwd_cnt = next32(s);
	split = next8(s);
	note_dst(v, h.dst_cid);
	vsock_hdr_encode(&h, buf);
	/* sel & 1: a pattern, not the input's bytes (so that an input of a
	 * few KiB can send MiBs). */
	for (uint32_t i = 0; i < actual; i++)
		buf[VSOCK_HDR_SIZE + i] = (sel & 1) ? (uint8_t)(i * 7 + sel)
						    : next8(s);
	/* Cut header + payload into n descriptors, each within its slot. */
	{
		uint32_t total = VSOCK_HDR_SIZE + actual, left;

		n = (sel & 2) ? 4 + split % (MAXD - 3) : 1 + split % MAXD;
		if (n > qsize)
			n = (sel & 2) ? 4 : qsize; /* a chain fits its ring */
		if (total > n * SLOT)
			total = n * SLOT;
		left = total;
		for (unsigned i = 0; i < n; i++) {
			uint32_t l = i + 1 == n ? left
					       : (split & 0x10 ? 1 + i * 13
							       : left / (n - i));
			uint32_t rest = (n - 1 - i) * SLOT; /* the others' room */

			if (l > left)
				l = left;
			if (left > rest && l < left - rest)
				l = left - rest;
			if (l > SLOT)
				l = SLOT;
			lens[i] = l;
			left -= l;
		}
		if (left) /* cannot happen: n slots hold total */
			abort();
	}
	/* A burst: the same packet (sel & 4: from successive guest ports),
	 * kicked whenever the ring is full. */
	for (unsigned k = 0; k < copies && ntx < MAX_TX; k++) {
		uint32_t off = 0;

		if (k && (sel & 4)) {
			h.src_port++;
			vsock_hdr_encode(&h, buf);
		}
		head = post_chain(v, VSOCK_TX_QUEUE, n, lens, wr,
				  split & 0x40);
		if (head < 0) {
			q_kick(v, VSOCK_TX_QUEUE);
			head = post_chain(v, VSOCK_TX_QUEUE, n, lens, wr,
					  split & 0x40);
		}
		if (head < 0)
			break;
		for (unsigned i = 0; i < n; i++) {
			const struct chain_rec *r =
				&v->q[VSOCK_TX_QUEUE].rec[head];

			memcpy(gpa_ptr(r->el[i].addr), buf + off, lens[i]);
			off += lens[i];
		}
		ntx++;
	}
	if (!(a & 8))
		q_kick(v, VSOCK_TX_QUEUE);
}

static uint32_t size_rx(uint8_t b)
{
	switch (b >> 5) {
	case 0:
		return b & 31; /* tiny: under a header, mostly */
	case 1:
		return VSOCK_HDR_SIZE + (b & 31);
	case 2:
	case 3:
	case 4:
		return SLOT;
	case 5:
		return 64 + (uint32_t)(b & 31) * 64;
	default:
		return 3 * SLOT;
	}
}

static void rec_rx(struct vm *v, uint8_t a, struct stream *s)
{
	unsigned count = 1 + next8(s) % 8;
	uint32_t size = size_rx(next8(s));
	uint8_t split = next8(s);

	for (unsigned c = 0; c < count && nrxbuf < MAX_RXBUF; c++) {
		unsigned n = 1 + (split & 0x3f) % 8;
		uint32_t lens[8], left = size;
		bool wr[8] = { true, true, true, true, true, true, true, true };

		if (size > n * SLOT)
			n = 3;
		if (n > qsize)
			n = qsize < 3 ? qsize : 3; /* sizes fit 3 slots */
		for (unsigned i = 0; i < n; i++) {
			uint32_t l = i + 1 == n ? left : left / (n - i);

			if (l > SLOT)
				l = SLOT;
			lens[i] = l;
			left -= l;
		}
		if (split & 0x80)
			wr[0] = false;
		if (post_chain(v, VSOCK_RX_QUEUE, n, lens, wr, split & 0x40) < 0)
			break;
		nrxbuf++;
	}
	if (!(a & 8))
		q_kick(v, VSOCK_RX_QUEUE);
}

static void run_loop(unsigned n)
{
	for (unsigned i = 0; i < n && turns < MAX_TURNS; i++, turns++) {
		if (vmio_loop_run_once(loop, 0) < 0)
			FAIL("loop: run_once failed");
		reap_all();
	}
}

/* Record 2. */
static void rec_turns(uint8_t a, struct stream *s)
{
	unsigned n = 1 + next8(s) % 16;

	if (a & 8)
		clock_.ns += fuzz_clock_step_ns(next8(s));
	run_loop(n);
}

static int unix_socket(bool seq)
{
	return socket(AF_UNIX, (seq ? SOCK_SEQPACKET : SOCK_STREAM) |
				       SOCK_NONBLOCK | SOCK_CLOEXEC,
		      0);
}

static void set_path(struct sockaddr_un *sa, const char *path)
{
	size_t n = strlen(path);

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n >= sizeof(sa->sun_path))
		abort(); /* the harness's paths are short */
	memcpy(sa->sun_path, path, n);
}

static void rec_listen(struct vm *v, uint8_t a)
{
	unsigned i = (a >> 1) & 3;
	struct sockaddr_un sa;
	int fd;

	if (v->lfd[i] >= 0)
		return;
	{
		char p[sizeof(v->lpath[i])];

		snprintf(p, sizeof(p), "%.96s_%u", v->uds, listen_ports[i]);
		memcpy(v->lpath[i], p, sizeof(p));
	}
	set_path(&sa, v->lpath[i]);
	fd = unix_socket(a & 8);
	if (fd < 0)
		return;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4)) {
		close(fd);
		return;
	}
	v->lfd[i] = fd;
}

static void listener_close(struct vm *v, unsigned i)
{
	if (v->lfd[i] < 0)
		return;
	close(v->lfd[i]);
	unlink(v->lpath[i]);
	v->lfd[i] = -1;
}

static int host_slot(void)
{
	for (unsigned i = 0; i < NHOST; i++)
		if (hosts[i].fd < 0)
			return (int)i;
	return -1;
}

static void rec_accept(struct vm *v, uint8_t a)
{
	unsigned i = (a >> 1) & 3;
	int slot = host_slot(), fd;

	if (v->lfd[i] < 0 || slot < 0)
		return;
	fd = accept4(v->lfd[i], NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd >= 0)
		hosts[slot].fd = fd;
}

static void host_send(int fd, const void *p, size_t n)
{
	if (n)
		(void)send(fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
}

static void rec_connect(struct vm *v, uint8_t a, struct stream *s)
{
	char path[128], line[300];
	struct sockaddr_un sa;
	bool seq = a & 8;
	int slot = host_slot(), fd, n = 0;
	uint8_t sel = next8(s), b = next8(s);

	if (slot < 0)
		return;
	snprintf(path, sizeof(path), "%s%s", v->uds,
		 seq ? VSOCK_HYBRID_SEQPACKET_SUFFIX : "");
	set_path(&sa, path);
	fd = unix_socket(seq);
	if (fd < 0)
		return;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		close(fd);
		return;
	}
	hosts[slot].fd = fd;
	switch (sel & 3) {
	case 0:
		n = snprintf(line, sizeof(line), "CONNECT %u\n",
			     guest_port(b, s));
		break;
	case 1:
		n = snprintf(line, sizeof(line), "connect  %u\r\nearly",
			     guest_port(b, s));
		break;
	case 2:
		for (n = 0; n < b; n++)
			line[n] = (char)next8(s);
		break;
	default:
		break;
	}
	host_send(fd, line, (size_t)n);
}

static void rec_write(uint8_t a, struct stream *s)
{
	struct host_sock *h = &hosts[(a >> 1) % NHOST];
	static uint8_t buf[256 * 1024];
	unsigned n = next8(s);

	/* 0xf0 and up: (n - 0xef) * 16 KiB of a pattern. */
	if (n >= 0xf0) {
		n = (n - 0xefu) * 16384u;
		for (unsigned i = 0; i < n; i++)
			buf[i] = (uint8_t)(i * 13);
	} else {
		for (unsigned i = 0; i < n; i++)
			buf[i] = next8(s);
	}
	if (h->fd >= 0)
		host_send(h->fd, buf, n);
}

static void rec_read(uint8_t a, struct stream *s)
{
	struct host_sock *h = &hosts[(a >> 1) % NHOST];
	static uint8_t buf[64 * 256];
	size_t n = 64u * next8(s);

	if (h->fd >= 0 && n)
		(void)recv(h->fd, buf, n, MSG_DONTWAIT);
}

static void rec_shutdown(uint8_t a, struct stream *s)
{
	struct host_sock *h = &hosts[(a >> 1) % NHOST];
	static const int how[3] = { SHUT_RD, SHUT_WR, SHUT_RDWR };
	uint8_t b = next8(s);

	if (h->fd >= 0)
		(void)shutdown(h->fd, how[b % 3]);
}

static void rec_close(uint8_t a)
{
	struct host_sock *h = &hosts[(a >> 1) % NHOST];

	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
}

static void vm_attach(struct vm *v)
{
	v->ops->features_set(v->dev, v->features);
	v->acked = v->features;
}

static void vm_start_queues(struct vm *v)
{
	/* Fresh rings: no packet under way. */
	v->asm_len = 0;
	v->asm_bufs = v->asm_want = 0;
	for (unsigned qi = 0; qi < 2; qi++) {
		gq_setup(v, qi);
		q_start(v, qi);
	}
}

static void rec_reset(struct vm *v)
{
	reap(v, 0);
	reap(v, 1);
	q_stop(v, 0);
	q_stop(v, 1);
	v->ops->reset(v->dev);
	v->acked = 0;
	for (unsigned qi = 0; qi < 2; qi++)
		vmio_vq_release(&v->q[qi].vq);
	vm_attach(v);
	vm_start_queues(v);
}

/* Queues stop and start again with their rings as they are (what the
 * core does on a pause or a memory table change: the device is told and
 * must hold nothing). */
static void rec_restart(struct vm *v, uint8_t a)
{
	reap(v, 0);
	reap(v, 1);
	if (a & 8) {
		v->ops->memory_changing(v->dev);
		v->q[0].running = v->q[1].running = false;
	} else {
		q_stop(v, 0);
		q_stop(v, 1);
	}
	for (unsigned qi = 0; qi < 2; qi++)
		if (vmio_vq_ready(&v->q[qi].vq))
			q_start(v, qi);
}

/* ---- Setup and teardown ----------------------------------------------- */

static bool tx_copy;
static unsigned tx_hold;
static uint32_t pkt_overhead, port_last;

static unsigned connect_timeout_ms;

static void vm_new(unsigned i, uint32_t buf_size, unsigned max_conns)
{
	struct vm *v = &vms[i];
	struct vsock_device_config cfg = {
		.guest_cid = v->cid,
		.uds_path = v->uds,
		.buf_size = buf_size,
		.max_conns = max_conns,
		.connect_timeout_ms = connect_timeout_ms,
		.connect_line_max = 64,
		.max_queue_size = QMAX,
		.router = router,
		.vm_index = i,
		.tx_copy = tx_copy,
		.tx_hold_max = tx_hold,
		.rx_pkt_overhead = pkt_overhead,
		.port_first = port_first,
		.port_last = port_last,
	};
	int err = 0;

	snprintf(v->uds, sizeof(v->uds), "%s/%lu_%u", tmpdir, run_no, i);
	for (unsigned k = 0; k < NLISTEN; k++)
		v->lfd[k] = -1;
	v->dev = vsock_device_new(loop, &cfg, &err);
	if (!v->dev)
		FAIL("vsock_device_new: %s", strerror(-err));
	v->ops = vsock_device_ops(v->dev);
	v->present = true;
}

static void vm_free(struct vm *v)
{
	if (!v->present)
		return;
	for (unsigned k = 0; k < NLISTEN; k++)
		listener_close(v, k);
	vsock_device_free(v->dev);
	for (unsigned qi = 0; qi < 2; qi++)
		vmio_vq_release(&v->q[qi].vq);
	memset(v, 0, sizeof(*v));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct stream s = { .p = data, .len = size };
	uint32_t buf_size;
	unsigned max_conns;

	init_once();
	run_no++;
	for (unsigned i = 0; i < HDR; i++)
		hdr[i] = next8(&s);
	nvms = (hdr[0] & 1) ? 2 : 1;
	qsize = (uint16_t)(1u << (2 + hdr[1] % 7));
	max_conns = 1 + (hdr[1] >> 4);
	buf_size = (hdr[0] & 0x40) ? 4096 : 65536;
	turns = ntx = nrxbuf = 0;
	for (unsigned i = 0; i < NHOST; i++)
		hosts[i].fd = -1;

	connect_timeout_ms = 100u * (1u + (hdr[2] >> 3));
	loop = vmio_loop_new();
	clock_.ns = FUZZ_CLOCK_START;
	if (!loop || vmio_loop_set_clock(loop, fuzz_clock_now, &clock_))
		abort();
	router = nvms > 1 ? vsock_router_new(nvms, 1 + hdr[2] % 8) : NULL;
	if (nvms > 1 && !router)
		abort();
	if (router && (hdr[0] & 2))
		vsock_router_link(router, 0, 1);
	vms[0].cid = 3;
	vms[1].cid = (hdr[0] & 0x10) ? VM1_CID_HIGH : 4;
	tx_copy = hdr[3] & 4;
	tx_hold = (hdr[3] & 8) ? 1 : 2 + (hdr[3] >> 4);
	{
		static const uint32_t overheads[4] = {
			0, VSOCK_MUX_NO_PACKET_BOUND, 64, 16384
		};
		static const uint32_t firsts[4] = {
			VSOCK_LOCAL_PORT_FIRST, VSOCK_LOCAL_PORT_FIRST,
			VSOCK_LOCAL_PORT_FIRST, VSOCK_FC_PORT_LAST - 2
		};
		static const uint32_t spans[4] = {
			VSOCK_LOCAL_PORT_LAST - VSOCK_LOCAL_PORT_FIRST, 0, 2, 2
		};

		pkt_overhead = overheads[(hdr[2] >> 3) & 3];
		port_first = firsts[(hdr[2] >> 5) & 3];
		port_last = port_first + spans[(hdr[2] >> 5) & 3];
	}
	for (unsigned i = 0; i < nvms; i++) {
		struct vm *v = &vms[i];

		/* Indirect tables are the driver's choice chain by chain
		 * (records 0 and 1), so always negotiated. */
		v->features = VMIO_BIT(VIRTIO_F_VERSION_1) |
			      VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC);
		if (hdr[0] & 0x20)
			v->features |= VMIO_BIT(VIRTIO_RING_F_EVENT_IDX);
		if (hdr[0] & (4u << i))
			v->features |= VMIO_BIT(VIRTIO_VSOCK_F_SEQPACKET);
		if (hdr[3] & (1u << i))
			v->features |= VMIO_BIT(VIRTIO_VSOCK_F_MRG_RXBUF);
		vm_new(i, buf_size, max_conns);
		if (!(i == 1 && (hdr[0] & 0x80)))
			vm_attach(v);
		vm_start_queues(v);
	}

	for (unsigned r = 0; r < MAX_RECORDS && s.pos < s.len; r++) {
		uint8_t op = next8(&s), kind = op & 15, a = op >> 4;
		struct vm *v = &vms[nvms > 1 ? (a & 1) : 0];

		switch (kind) {
		case 0:
		case 15:
			if (ntx < MAX_TX)
				rec_tx(v, a, &s, 1);
			else
				s.pos = s.len;
			break;
		case 14:
			if (ntx < MAX_TX)
				rec_tx(v, a, &s, 1 + 4u * next8(&s));
			else
				s.pos = s.len;
			break;
		case 1:
			rec_rx(v, a, &s);
			break;
		case 2:
			rec_turns(a, &s);
			break;
		case 3:
			rec_listen(v, a);
			break;
		case 4:
			rec_accept(v, a);
			break;
		case 5:
			rec_connect(v, a, &s);
			break;
		case 6:
			rec_write(a, &s);
			break;
		case 7:
			rec_read(a, &s);
			break;
		case 8:
			rec_shutdown(a, &s);
			break;
		case 9:
			rec_close(a);
			break;
		case 10:
			q_kick(v, (a & 8) ? VSOCK_TX_QUEUE : VSOCK_RX_QUEUE);
			break;
		case 11:
			rec_reset(v);
			break;
		case 12:
			rec_restart(v, a);
			break;
		case 13:
			listener_close(v, (a >> 1) & 3);
			break;
		}
		reap_all();
	}
	/* Let what the input set going run out (bounded), then every
	 * deadline it left pass. */
	turns = 0;
	run_loop(32);
	clock_.ns += fuzz_clock_step_ns(0xff);
	run_loop(8);
	reap_all();

	for (unsigned i = 0; i < NHOST; i++)
		rec_close((uint8_t)(i << 1));
	/* Every host socket closed: the devices see the EOFs, and the
	 * drains they start time out. */
	turns = 0;
	run_loop(8);
	clock_.ns += fuzz_clock_step_ns(0xff);
	run_loop(8);
	reap_all();
	for (unsigned i = 0; i < NVM; i++)
		vm_free(&vms[i]);
	vsock_router_free(router);
	router = NULL;
	vmio_loop_free(loop);
	loop = NULL;
	if (!fuzz_fds_steady())
		FAIL("fds leak over inputs");
	return 0;
}
