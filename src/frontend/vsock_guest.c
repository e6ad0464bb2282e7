/* A guest's virtio-vsock driver on the in-tree front end. See
 * vsock_guest.h. */
#include "frontend/vsock_guest.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devices/vsock/mrg_rx.h"
#include "virtio/features.h"
#include "frontend/stream.h"
#include "util/byte_ring.h"
#include "util/clock.h"

#define RXQ 0
#define TXQ 1
#define TX_SLOT_SIZE (VSOCK_HDR_SIZE + VSOCK_MAX_PKT_PAYLOAD)
#define MAX_RAW_DESC 4u
/* An indirect table for the longest chain a cut makes. */
#define VG_TABLE_BYTES (16u * VG_CUT_MAX_DESC)

/* Control packets a socket owes the host, sent from vg_poll: the packet
 * handlers run while queues are being reaped and must not send (sending
 * may wait for a tx slot, which reaps again). */
#define CTL_CREDIT_UPDATE 1u
#define CTL_RST 2u /* for a packet we refused: Linux resets then */

/* Complete messages a seqpacket socket holds unread at most; one more is
 * a violation (the device sends no empty messages, so the credit bounds
 * them to buf_alloc; this is the driver's own bound). */
#define VG_MAX_MSGS 8192

struct vg_msg {
	uint32_t len;
	bool eor;
};

struct vg_sock {
	struct vg *g;
	uint64_t peer_cid; /* the host's, or a sibling guest's */
	uint32_t local_port, peer_port;
	uint16_t type;
	bool connecting, established, reset, refused;
	uint32_t peer_shut, local_shut;
	unsigned ctl;

	/* Our receive side: the host must keep rx_cnt - fwd_cnt within
	 * buf_alloc. adv_fwd_cnt is the fwd_cnt the host last heard. */
	uint32_t buf_alloc, rx_cnt, fwd_cnt, adv_fwd_cnt;
	struct vmio_byte_ring rbuf; /* buf_alloc bytes, made on the first data */
	/* The packets that hold them, as Linux queues them, and the error
	 * a refusal leaves for the next read. */
	struct vg_rxq rxq;
	int rx_err;
	bool rx_refused;
	/* Seqpacket: the complete messages in rbuf, oldest first (made with
	 * rbuf); the msg_partial bytes after them await their EOM. */
	struct vg_msg *msgs;
	unsigned msg_head, msg_count;
	uint32_t msg_partial;

	/* The host's receive side, as it advertised it. */
	uint32_t peer_buf_alloc, peer_fwd_cnt, tx_cnt;
};

struct vg_listener {
	uint32_t port;
	struct vsock_hdr *backlog; /* REQUESTs not accepted yet */
	unsigned n, cap;
	struct vg_listener *next;
};


static int left_ms(int64_t deadline)
{
	int64_t l = deadline - vmio_now_ms();

	return l < 0 ? 0 : (int)l;
}

static void violation(struct vg *g, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void violation(struct vg *g, const char *fmt, ...)
{
	va_list ap;

	g->violations++;
	va_start(ap, fmt);
	vsnprintf(g->violation, sizeof(g->violation), fmt, ap);
	va_end(ap);
}

/* The Linux limits, unless the environment turns them off for a run
 * that shows what they catch (VG_RX_PKT_OVERHEAD=0, VG_TX_CAP=0). */
static uint32_t env_u32(const char *name, uint32_t dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	if (!v || !*v)
		return dflt;
	n = strtoul(v, &end, 10);
	return *end || n > UINT32_MAX ? dflt : (uint32_t)n;
}

void vg_opts_init(struct vg_opts *o)
{
	*o = (struct vg_opts){
		.guest_cid = 3,
		.queue_size = 256,
		.rx_bufs = 128,
		.rx_buf_size = 4096 + VSOCK_HDR_SIZE,
		.tx_slots = 64,
		.buf_alloc = 256 * 1024,
		.credit_threshold = 64 * 1024,
		.max_sockets = 4096,
		.seqpacket = true,
		.tx_pkt_max = VSOCK_MAX_PKT_PAYLOAD,
		.rx_pkt_overhead = env_u32("VG_RX_PKT_OVERHEAD",
					   VG_LINUX_PKT_OVERHEAD),
		.tx_cap = env_u32("VG_TX_CAP", 1) != 0,
	};
}

/* ---- pattern ---- */

/* Each 8-byte word is a hash of its index, so a byte shifted, repeated or
 * lost anywhere in a stream shows, and any offset is checked alone. */
static uint64_t pat_word(uint64_t seed, uint64_t k)
{
	uint64_t z = (k ^ seed) * 0xd6e8feb86659fd93ull;

	z ^= z >> 32;
	z *= 0xd6e8feb86659fd93ull;
	return z ^ (z >> 29);
}

static uint8_t pat_byte(uint64_t seed, uint64_t off)
{
	return (uint8_t)(pat_word(seed, off / 8) >> (8 * (off % 8)));
}

void vg_pattern_fill(uint64_t seed, uint64_t off, void *buf, size_t len)
{
	uint8_t *p = buf;

	for (; len && off % 8; len--)
		*p++ = pat_byte(seed, off++);
	for (; len >= 8; len -= 8, p += 8, off += 8) {
		uint64_t w = pat_word(seed, off / 8);

		for (unsigned i = 0; i < 8; i++)
			p[i] = (uint8_t)(w >> (8 * i));
	}
	for (; len; len--)
		*p++ = pat_byte(seed, off++);
}

size_t vg_pattern_check(uint64_t seed, uint64_t off, const void *buf,
			size_t len)
{
	const uint8_t *p = buf;
	size_t i = 0;

	for (; i < len && (off + i) % 8; i++)
		if (p[i] != pat_byte(seed, off + i))
			return i;
	for (; len - i >= 8; i += 8) {
		uint64_t w = pat_word(seed, (off + i) / 8);

		for (unsigned b = 0; b < 8; b++)
			if (p[i + b] != (uint8_t)(w >> (8 * b)))
				return i + b;
	}
	for (; i < len; i++)
		if (p[i] != pat_byte(seed, off + i))
			return i;
	return len;
}

/* ---- queues ---- */

/* Cuts len bytes at gpa into descriptors as c says, into b unless it is
 * NULL; returns how many. */
static unsigned cut_chain(const struct vg_cut *c, uint64_t gpa, uint32_t len,
			  bool writable, struct vmio_dbuf *b)
{
	unsigned n = 0;
	uint32_t off = 0;

	do {
		uint32_t k = len - off, most = n || !c->first ? c->piece
							      : c->first;

		if (most && k > most)
			k = most;
		if (b)
			b[n] = (struct vmio_dbuf){ .gpa = gpa + off, .len = k,
						   .writable = writable };
		n++;
		off += k;
	} while (off < len);
	return n;
}

static unsigned cut_count(const struct vg_cut *c, uint32_t len)
{
	return cut_chain(c, 0, len, false, NULL);
}

/* The ring descriptors a chain of n takes: one through a table. */
static unsigned cut_ring_cost(const struct vg_cut *c, unsigned n)
{
	return c->indirect ? 1 : n;
}

static int add_chain(struct vmio_dvq *q, const struct vg_cut *c,
		     uint64_t table_gpa, void *table,
		     const struct vmio_dbuf *b, unsigned n, void *token)
{
	if (c->indirect)
		return vmio_dvq_add_indirect(q, table, table_gpa, b, n, token);
	return vmio_dvq_add(q, b, n, token);
}

static int post_rx(struct vg *g, unsigned i)
{
	struct vmio_dbuf b[VG_CUT_MAX_DESC];
	const struct vg_cut *c = &g->o.rx_cut;
	unsigned n = cut_chain(c, g->rx_gpa[i], g->rx_size[i], true, b);
	void *table = c->indirect ? vmio_fe_ptr(g->fe, g->rx_table_gpa[i])
				  : NULL;

	if (add_chain(vmio_fe_queue(g->fe, RXQ), c,
		      c->indirect ? g->rx_table_gpa[i] : 0, table, b, n,
		      (void *)(uintptr_t)(i + 1)) < 0)
		return -ENOSPC;
	g->rx_dirty = true;
	return 0;
}

static struct vg_sock *find_sock(struct vg *g, uint32_t local, uint32_t peer)
{
	unsigned last = g->last_sock; /* a stream's packets come in runs */

	if (last < g->nsocks && g->socks[last]->local_port == local &&
	    g->socks[last]->peer_port == peer)
		return g->socks[last];
	for (unsigned i = 0; i < g->nsocks; i++)
		if (g->socks[i]->local_port == local &&
		    g->socks[i]->peer_port == peer) {
			g->last_sock = i;
			return g->socks[i];
		}
	return NULL;
}

static struct vg_listener *find_listener(struct vg *g, uint32_t port)
{
	for (struct vg_listener *l = g->listeners; l; l = l->next)
		if (l->port == port)
			return l;
	return NULL;
}

static void push_unmatched(struct vg *g, const struct vsock_hdr *h)
{
	unsigned cap = sizeof(g->unmatched) / sizeof(g->unmatched[0]);

	if (g->unmatched_len == cap) {
		/* Keep the newest: a test waits for what follows its act. */
		g->unmatched_head = (g->unmatched_head + 1) % cap;
		g->unmatched_len--;
		g->unmatched_dropped++;
	}
	g->unmatched[(g->unmatched_head + g->unmatched_len++) % cap] = *h;
}

/* Refuses an RW as Linux 6.12.94 does: the connection is reset, with an
 * RST owed to the device (sent from vg_poll: handlers do not send), and
 * the next read fails with ENOBUFS. */
static void sock_refuse(struct vg_sock *s, enum vg_rx_verdict v, uint32_t n)
{
	struct vg *g = s->g;
	uint32_t held = s->rx_cnt - s->fwd_cnt;

	if (v == VG_RX_OVER_PACKETS)
		g->rx_refused_pkts++;
	else
		g->rx_refused_bytes++;
	g->rx_resets++;
	snprintf(g->refusal, sizeof(g->refusal),
		 "port %u refused an RW of %u bytes with %u packets (%u "
		 "bytes) queued against buf_alloc %u: %s", s->local_port, n,
		 s->rxq.count, held, s->buf_alloc,
		 v == VG_RX_OVER_PACKETS ? "one packet too many"
					 : "past the credit");
	s->reset = true;
	s->rx_refused = true;
	s->rx_err = -ENOBUFS;
	s->ctl |= CTL_RST;
	g->ctl_owed = true;
}

/* Whether an RW of n bytes may join the socket's queue, by the rule of
 * vsock_guest_limits.h. */
static bool sock_admit(struct vg_sock *s, uint32_t n)
{
	struct vg *g = s->g;
	uint32_t held = s->rx_cnt - s->fwd_cnt;
	enum vg_rx_verdict v = vg_rx_admit(s->rxq.count, held, s->buf_alloc,
					   n, g->o.rx_pkt_overhead);

	if (v == VG_RX_ACCEPT)
		return true;
	/* The device may send no more than the buffer we advertised. */
	if (v == VG_RX_OVER_BYTES)
		violation(g, "RW of %u bytes on port %u overruns our credit "
			  "(%u free)", n, s->local_port, s->buf_alloc - held);
	/* Without the packet rule, as Linux 6.1: dropped, no reset. */
	if (g->o.rx_pkt_overhead)
		sock_refuse(s, v, n);
	return false;
}

/* An RW's payload joins the socket's bytes, and its packet the queue;
 * room is the payload space of the buffer it came in (what Linux can
 * copy later small packets into). */
static void sock_take_data(struct vg_sock *s, const uint8_t *p, uint32_t n,
			   bool eom, uint32_t room)
{
	struct vg *g = s->g;
	int r;

	if (!s->established || (s->peer_shut & VSOCK_SHUTDOWN_SEND)) {
		violation(g, "RW on port %u in the wrong state",
			  s->local_port);
		return;
	}
	if (!sock_admit(s, n))
		return;
	if (!s->rbuf.buf) {
		vmio_byte_ring_init(&s->rbuf, malloc(s->buf_alloc),
				    s->buf_alloc);
		if (s->type == VSOCK_TYPE_SEQPACKET)
			s->msgs = calloc(VG_MAX_MSGS, sizeof(*s->msgs));
		if (!s->rbuf.buf ||
		    (s->type == VSOCK_TYPE_SEQPACKET && !s->msgs)) {
			violation(g, "out of memory");
			return;
		}
	}
	/* sock_admit kept it within buf_alloc. */
	if (vmio_byte_ring_put(&s->rbuf, p, n)) {
		violation(g, "%u bytes past the receive buffer", n);
		return;
	}
	r = vg_rxq_add(&s->rxq, s->rx_cnt, n, room, eom);
	if (r < 0)
		violation(g, "out of memory");
	g->rx_coalesced += r == 1;
	if (s->rxq.peak > g->rx_queue_peak)
		g->rx_queue_peak = s->rxq.peak;
	s->rx_cnt += n;
}

/* A seqpacket RW: its bytes join the message; EOM completes it. */
static void sock_take_msg_data(struct vg_sock *s, const struct vsock_hdr *h,
			       const uint8_t *p, uint32_t n, uint32_t room)
{
	struct vg *g = s->g;
	uint32_t held = s->rx_cnt;

	sock_take_data(s, p, n, h->flags & VSOCK_SEQ_EOM, room);
	if (s->rx_cnt - held != n)
		return; /* refused, and counted */
	s->msg_partial += n;
	if (!(h->flags & VSOCK_SEQ_EOM)) {
		if (h->flags & VSOCK_SEQ_EOR)
			violation(g, "EOR without EOM on port %u",
				  s->local_port);
		return;
	}
	if (!s->msg_partial) {
		violation(g, "empty message on port %u", s->local_port);
		return;
	}
	if (s->msg_count == VG_MAX_MSGS) {
		violation(g, "more than %u messages unread on port %u",
			  VG_MAX_MSGS, s->local_port);
		return;
	}
	s->msgs[(s->msg_head + s->msg_count++) % VG_MAX_MSGS] = (struct vg_msg){
		.len = s->msg_partial,
		.eor = h->flags & VSOCK_SEQ_EOR,
	};
	s->msg_partial = 0;
}

static void handle_pkt(struct vg *g, const struct vsock_hdr *h,
		       const uint8_t *payload, uint32_t n, uint32_t room)
{
	struct vg_listener *l;
	struct vg_sock *s;

	g->pkts_rx++;
	if (h->op <= VSOCK_OP_MAX)
		g->rx_ops[h->op]++;
	if (getenv("VG_TRACE"))
		fprintf(stderr, "vg: rx %s %u->%u len %u flags %u buf %u fwd %u\n",
			vsock_op_name(h->op), h->src_port, h->dst_port, h->len,
			h->flags, h->buf_alloc, h->fwd_cnt);
	if (h->dst_cid != g->o.guest_cid ||
	    (h->src_cid != VSOCK_HOST_CID &&
	     (!g->o.siblings || h->src_cid == g->o.guest_cid)))
		violation(g, "%s with cids %llu -> %llu", vsock_op_name(h->op),
			  (unsigned long long)h->src_cid,
			  (unsigned long long)h->dst_cid);
	if (h->op != VSOCK_OP_RW && h->len)
		violation(g, "%s with len %u", vsock_op_name(h->op), h->len);

	s = find_sock(g, h->dst_port, h->src_port);
	if (s && s->peer_cid != h->src_cid)
		s = NULL;
	if (!s) {
		if (h->op == VSOCK_OP_REQUEST) {
			l = find_listener(g, h->dst_port);
			if (l) {
				if (l->n == l->cap) {
					unsigned cap = l->cap ? 2 * l->cap : 16;
					void *nb = realloc(l->backlog,
							   cap * sizeof(*h));

					if (!nb) {
						violation(g, "out of memory");
						return;
					}
					l->backlog = nb;
					l->cap = cap;
				}
				l->backlog[l->n++] = *h;
				return;
			}
			/* As Linux: no listener, refuse. */
			if (g->rstq_len < sizeof(g->rstq) / sizeof(g->rstq[0]))
				g->rstq[g->rstq_len++] = *h;
		}
		push_unmatched(g, h);
		return;
	}
	if (s->reset)
		return;
	if (h->type != s->type)
		violation(g, "%s of type %u on a socket of type %u",
			  vsock_op_name(h->op), h->type, s->type);
	if (h->flags && h->op != VSOCK_OP_SHUTDOWN &&
	    !(h->op == VSOCK_OP_RW && s->type == VSOCK_TYPE_SEQPACKET))
		violation(g, "%s with flags %#x", vsock_op_name(h->op),
			  h->flags);
	/* Every header carries the host's credit. */
	s->peer_buf_alloc = h->buf_alloc;
	s->peer_fwd_cnt = h->fwd_cnt;

	switch (h->op) {
	case VSOCK_OP_RESPONSE:
		if (!s->connecting)
			violation(g, "RESPONSE on port %u not connecting",
				  s->local_port);
		s->connecting = false;
		s->established = true;
		break;
	case VSOCK_OP_RST:
		if (s->connecting)
			s->refused = true;
		s->connecting = false;
		s->reset = true;
		break;
	case VSOCK_OP_SHUTDOWN:
		s->peer_shut |= h->flags & VSOCK_SHUTDOWN_MASK;
		break;
	case VSOCK_OP_RW:
		if (s->type == VSOCK_TYPE_SEQPACKET)
			sock_take_msg_data(s, h, payload, n, room);
		else
			sock_take_data(s, payload, n, false, room);
		break;
	case VSOCK_OP_CREDIT_UPDATE:
		break;
	case VSOCK_OP_CREDIT_REQUEST:
		s->ctl |= CTL_CREDIT_UPDATE;
		g->ctl_owed = true;
		break;
	default:
		violation(g, "%s on port %u", vsock_op_name(h->op),
			  s->local_port);
		break;
	}
}

static void asm_reset(struct vg *g)
{
	g->asm_len = g->asm_bufs = g->asm_want = g->asm_room = 0;
}

/* One used buffer of a mergeable packet (mrg_rx.h): appended to the
 * packet under way, which is handled once its num_buffers are in. The
 * device must fill every buffer but a packet's last, and use no more
 * buffers than the packet needs. */
static void take_mrg_buf(struct vg *g, unsigned i, uint32_t len)
{
	const uint8_t *p = vmio_fe_ptr(g->fe, g->rx_gpa[i]);
	struct vsock_hdr h;

	if (!len || len > g->rx_size[i] ||
	    g->asm_len + len > VSOCK_MRG_HDR_SIZE + VSOCK_MAX_PKT_PAYLOAD) {
		violation(g, "mergeable rx: used length %u of a %u-byte "
			  "buffer, %u bytes of the packet before it",
			  len, g->rx_size[i], g->asm_len);
		asm_reset(g);
		return;
	}
	memcpy(g->asm_buf + g->asm_len, p, len);
	g->asm_len += len;
	g->asm_room += g->rx_size[i];
	g->asm_bufs++;
	if (!g->asm_want && g->asm_len >= VSOCK_MRG_HDR_SIZE) {
		g->asm_want = (unsigned)g->asm_buf[VSOCK_HDR_SIZE] |
			      (unsigned)g->asm_buf[VSOCK_HDR_SIZE + 1] << 8;
		if (g->asm_want < g->asm_bufs) {
			violation(g, "mergeable rx: num_buffers %u, but the "
				  "header took %u", g->asm_want, g->asm_bufs);
			asm_reset(g);
			return;
		}
	}
	if (!g->asm_want || g->asm_bufs < g->asm_want) {
		if (len < g->rx_size[i])
			violation(g, "mergeable rx: buffer %u of a packet "
				  "used %u of %u bytes before the next",
				  g->asm_bufs, len, g->rx_size[i]);
		return;
	}
	vsock_hdr_decode(g->asm_buf, &h);
	if (h.len != g->asm_len - VSOCK_MRG_HDR_SIZE)
		violation(g, "mergeable rx: %s header len %u, %u bytes in %u "
			  "buffers",
			  vsock_op_name(h.op), h.len, g->asm_len, g->asm_bufs);
	else
		handle_pkt(g, &h, g->asm_buf + VSOCK_MRG_HDR_SIZE, h.len,
			   g->asm_room - VSOCK_MRG_HDR_SIZE);
	asm_reset(g);
}

/* Reaps both used rings. Handles packets, frees tx slots, re-posts rx
 * buffers. Sends nothing but the rx kick. Returns entries reaped. */
static int service(struct vg *g)
{
	struct vmio_dvq *rxq = vmio_fe_queue(g->fe, RXQ);
	struct vmio_dvq *txq = vmio_fe_queue(g->fe, TXQ);
	int events = 0;
	uint32_t len;
	void *tok;

	while ((tok = vmio_dvq_get_used(txq, &len))) {
		unsigned slot = (unsigned)((uintptr_t)tok - 1);

		if (g->o.tx_scribble)
			memset(vmio_fe_ptr(g->fe, g->tx_gpa[slot]), 0xa5,
			       TX_SLOT_SIZE);
		g->tx_free[g->tx_nfree++] = slot;
		events++;
	}
	while ((tok = vmio_dvq_get_used(rxq, &len))) {
		unsigned i = (unsigned)((uintptr_t)tok - 1);
		const uint8_t *p = vmio_fe_ptr(g->fe, g->rx_gpa[i]);
		struct vsock_hdr h;
		uint32_t n;

		events++;
		if (g->mrg) {
			take_mrg_buf(g, i, len);
			post_rx(g, i);
			continue;
		}
		if (len < VSOCK_HDR_SIZE || len > g->rx_size[i]) {
			violation(g, "rx used length %u", len);
			post_rx(g, i);
			continue;
		}
		vsock_hdr_decode(p, &h);
		n = len - VSOCK_HDR_SIZE;
		if (h.len != n) {
			violation(g, "%s header len %u, used len %u",
				  vsock_op_name(h.op), h.len, len);
			if (n > h.len)
				n = h.len;
		}
		handle_pkt(g, &h, p + VSOCK_HDR_SIZE, n,
			   g->rx_size[i] - VSOCK_HDR_SIZE);
		post_rx(g, i);
	}
	if (g->rx_dirty) {
		vmio_dvq_kick(rxq);
		g->rx_dirty = false;
	}
	return events;
}

/* Services the queues of every guest of gs, waiting up to timeout_ms for
 * any of them if none had anything. */
static int wait_many(struct vg *const *gs, unsigned n, int timeout_ms)
{
	struct pollfd p[2 * VG_POLL_MANY_MAX];
	int events = 0, r;
	uint64_t v;

	if (n > VG_POLL_MANY_MAX)
		return -E2BIG;
	for (unsigned i = 0; i < n; i++)
		events += service(gs[i]);
	if (events || timeout_ms == 0)
		return events;
	/* Ask for a call, then look again: an entry used between the first
	 * look and the request would otherwise be noticed by neither side. */
	for (unsigned i = 0; i < n; i++) {
		vmio_dvq_want_interrupt(vmio_fe_queue(gs[i]->fe, RXQ));
		vmio_dvq_want_interrupt(vmio_fe_queue(gs[i]->fe, TXQ));
		events += service(gs[i]);
	}
	if (events)
		return events;
	for (unsigned i = 0; i < n; i++)
		for (unsigned q = 0; q < 2; q++)
			p[2 * i + q] = (struct pollfd){
				.fd = vmio_fe_queue(gs[i]->fe, q)->call_fd,
				.events = POLLIN,
			};
	do
		r = poll(p, 2 * n, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	for (unsigned i = 0; i < 2 * n; i++)
		if (p[i].revents & POLLIN)
			(void)!read(p[i].fd, &v, sizeof(v));
	for (unsigned i = 0; i < n; i++)
		events += service(gs[i]);
	return events;
}

static int wait_events(struct vg *g, int timeout_ms)
{
	return wait_many(&g, 1, timeout_ms);
}

static int get_slot(struct vg *g, int timeout_ms, unsigned *slot)
{
	int64_t deadline = vmio_now_ms() + timeout_ms;

	for (;;) {
		int r;

		if (g->tx_nfree) {
			*slot = g->tx_free[--g->tx_nfree];
			return 0;
		}
		r = wait_events(g, left_ms(deadline));
		if (r < 0)
			return r;
		if (!r && vmio_now_ms() >= deadline && !g->tx_nfree)
			return -ETIMEDOUT;
	}
}

/* Puts a filled slot on the tx queue as the chain b[0..n). */
static int post_tx(struct vg *g, unsigned slot, const struct vmio_dbuf *b,
		   unsigned n)
{
	struct vmio_dvq *q = vmio_fe_queue(g->fe, TXQ);
	const struct vg_cut *c = &g->o.tx_cut;
	void *table = c->indirect ? vmio_fe_ptr(g->fe, g->tx_table_gpa[slot])
				  : NULL;

	if (add_chain(q, c, c->indirect ? g->tx_table_gpa[slot] : 0, table,
		      b, n, (void *)(uintptr_t)(slot + 1)) < 0) {
		g->tx_free[g->tx_nfree++] = slot;
		return -ENOSPC;
	}
	vmio_dvq_kick(q);
	g->pkts_tx++;
	return 0;
}

int vg_send_hdr(struct vg *g, const struct vsock_hdr *hdr,
		const void *payload, uint32_t payload_len, int timeout_ms)
{
	struct vmio_dbuf b[VG_CUT_MAX_DESC];
	unsigned slot, n;
	uint8_t *p;
	int r;

	if (payload_len > VSOCK_MAX_PKT_PAYLOAD)
		return -EMSGSIZE;
	r = get_slot(g, timeout_ms, &slot);
	if (r)
		return r;
	p = vmio_fe_ptr(g->fe, g->tx_gpa[slot]);
	vsock_hdr_encode(hdr, p);
	if (payload_len)
		memcpy(p + VSOCK_HDR_SIZE, payload, payload_len);
	n = cut_chain(&g->o.tx_cut, g->tx_gpa[slot],
		      VSOCK_HDR_SIZE + payload_len, false, b);
	return post_tx(g, slot, b, n);
}

int vg_send_raw(struct vg *g, const void *bytes, size_t n, unsigned ndesc,
		int timeout_ms)
{
	struct vmio_dbuf b[MAX_RAW_DESC];
	uint64_t gpa;
	unsigned slot, k = 0;
	int r;

	if (n > TX_SLOT_SIZE || ndesc == 0 || ndesc > MAX_RAW_DESC)
		return -EINVAL;
	r = get_slot(g, timeout_ms, &slot);
	if (r)
		return r;
	gpa = g->tx_gpa[slot];
	memcpy(vmio_fe_ptr(g->fe, gpa), bytes, n);
	/* ndesc pieces of about equal size; empty ones are left out, and
	 * no bytes at all is one empty descriptor. */
	for (unsigned i = 0; i < ndesc; i++) {
		uint32_t len = (uint32_t)(i + 1 == ndesc ? n - n / ndesc * i
							 : n / ndesc);

		if (len || (i + 1 == ndesc && !k))
			b[k++] = (struct vmio_dbuf){ .gpa = gpa, .len = len };
		gpa += len;
	}
	return post_tx(g, slot, b, k);
}


/* ---- driver ---- */

struct vg *vg_open(const char *path, int timeout_ms, const struct vg_opts *o,
		   char *err, size_t err_size)
{
	struct vg *g = calloc(1, sizeof(*g));
	uint64_t mem, rx_bytes;
	unsigned i, rx_desc, tx_desc;

	if (!g) {
		snprintf(err, err_size, "out of memory");
		return NULL;
	}
	if (o)
		g->o = *o;
	else
		vg_opts_init(&g->o);
	if ((!g->o.mergeable && g->o.rx_buf_size < VSOCK_HDR_SIZE + 1) ||
	    (g->o.mergeable && !g->o.rx_sizes && !g->o.rx_buf_size) ||
	    !g->o.tx_slots ||
	    !g->o.buf_alloc || !g->o.max_sockets || !g->o.tx_pkt_max ||
	    g->o.tx_pkt_max > VSOCK_MAX_PKT_PAYLOAD) {
		snprintf(err, err_size, "bad vsock guest options");
		free(g);
		return NULL;
	}
	g->rx_size = calloc(g->o.rx_bufs, sizeof(*g->rx_size));
	if (!g->rx_size) {
		snprintf(err, err_size, "out of memory");
		free(g);
		return NULL;
	}
	rx_bytes = 0;
	rx_desc = 1;
	for (i = 0; i < g->o.rx_bufs; i++) {
		g->rx_size[i] = g->o.mergeable && g->o.rx_sizes
					? g->o.rx_sizes[i % g->o.n_rx_sizes]
					: g->o.rx_buf_size;
		if (!g->rx_size[i]) {
			snprintf(err, err_size, "an rx buffer of 0 bytes");
			free(g->rx_size);
			free(g);
			return NULL;
		}
		rx_bytes += g->rx_size[i] + 64;
		if (cut_count(&g->o.rx_cut, g->rx_size[i]) > rx_desc)
			rx_desc = cut_count(&g->o.rx_cut, g->rx_size[i]);
	}
	/* vg_send_raw's chains take up to MAX_RAW_DESC, others what the
	 * cut makes; a chain through a table takes one slot of the ring. */
	tx_desc = cut_count(&g->o.tx_cut, TX_SLOT_SIZE);
	if (rx_desc > VG_CUT_MAX_DESC || tx_desc > VG_CUT_MAX_DESC ||
	    g->o.rx_bufs * cut_ring_cost(&g->o.rx_cut, rx_desc) >
		    g->o.queue_size ||
	    g->o.tx_slots * cut_ring_cost(&g->o.tx_cut,
					  tx_desc > 2 ? tx_desc : 2) >
		    g->o.queue_size) {
		snprintf(err, err_size, "vsock guest options: %u rx buffers "
			 "of up to %u descriptors or %u tx slots of up to %u "
			 "do not fit a queue of %u (at most %u a chain)",
			 g->o.rx_bufs, rx_desc, g->o.tx_slots, tx_desc,
			 g->o.queue_size, VG_CUT_MAX_DESC);
		free(g->rx_size);
		free(g);
		return NULL;
	}
	/* Rings and slack, then the buffers and their indirect tables. */
	mem = (2ull << 20) + rx_bytes +
	      (uint64_t)g->o.tx_slots * (TX_SLOT_SIZE + 64) +
	      (uint64_t)(g->o.rx_bufs + g->o.tx_slots) * VG_TABLE_BYTES;
	mem = (mem + 4095) & ~4095ull;
	g->fe = vmio_stream_connect_ex(
		path, timeout_ms, mem, 1, g->o.queue_size,
		(g->o.seqpacket ? 1ull << VIRTIO_VSOCK_F_SEQPACKET : 0) |
			(g->o.mergeable ? 1ull << VIRTIO_VSOCK_F_MRG_RXBUF
					: 0),
		err, err_size);
	if (g->fe && g->o.mergeable &&
	    !(g->fe->features & (1ull << VIRTIO_VSOCK_F_MRG_RXBUF))) {
		snprintf(err, err_size, "the device does not offer mergeable "
			 "rx buffers");
		goto fail;
	}
	g->mrg = g->fe && (g->fe->features & (1ull << VIRTIO_VSOCK_F_MRG_RXBUF));
	g->asm_buf = malloc(VSOCK_MRG_HDR_SIZE + VSOCK_MAX_PKT_PAYLOAD);
	if (g->fe && (g->o.rx_cut.indirect || g->o.tx_cut.indirect) &&
	    !(g->fe->features & (1ull << VIRTIO_RING_F_INDIRECT_DESC))) {
		snprintf(err, err_size, "the device does not offer indirect "
			 "descriptors");
		goto fail;
	}
	g->rx_gpa = calloc(g->o.rx_bufs, sizeof(*g->rx_gpa));
	g->rx_table_gpa = calloc(g->o.rx_bufs, sizeof(*g->rx_table_gpa));
	g->tx_gpa = calloc(g->o.tx_slots, sizeof(*g->tx_gpa));
	g->tx_table_gpa = calloc(g->o.tx_slots, sizeof(*g->tx_table_gpa));
	g->tx_free = calloc(g->o.tx_slots, sizeof(*g->tx_free));
	g->socks = calloc(g->o.max_sockets, sizeof(*g->socks));
	g->next_port = 50000;
	if (!g->fe || !g->rx_gpa || !g->rx_table_gpa || !g->tx_gpa ||
	    !g->tx_table_gpa || !g->tx_free || !g->socks || !g->asm_buf) {
		if (g->fe)
			snprintf(err, err_size, "out of memory");
		goto fail;
	}
	for (i = 0; i < g->o.rx_bufs; i++) {
		g->rx_gpa[i] = vmio_fe_alloc(g->fe, g->rx_size[i], 64);
		g->rx_table_gpa[i] = g->o.rx_cut.indirect
			? vmio_fe_alloc(g->fe, VG_TABLE_BYTES, 16) : 0;
		if (g->rx_gpa[i] == UINT64_MAX ||
		    g->rx_table_gpa[i] == UINT64_MAX || post_rx(g, i)) {
			snprintf(err, err_size, "cannot post rx buffers");
			goto fail;
		}
	}
	for (i = 0; i < g->o.tx_slots; i++) {
		g->tx_gpa[i] = vmio_fe_alloc(g->fe, TX_SLOT_SIZE, 64);
		g->tx_table_gpa[i] = g->o.tx_cut.indirect
			? vmio_fe_alloc(g->fe, VG_TABLE_BYTES, 16) : 0;
		if (g->tx_gpa[i] == UINT64_MAX ||
		    g->tx_table_gpa[i] == UINT64_MAX) {
			snprintf(err, err_size, "out of guest memory");
			goto fail;
		}
		g->tx_free[g->tx_nfree++] = i;
	}
	vmio_dvq_kick(vmio_fe_queue(g->fe, RXQ));
	g->rx_dirty = false;
	return g;
fail:
	vg_free(g);
	return NULL;
}

static void sock_free(struct vg_sock *s)
{
	vg_rxq_free(&s->rxq);
	free(s->msgs);
	free(s->rbuf.buf);
	free(s);
}

void vg_free(struct vg *g)
{
	struct vg_listener *l, *next;

	if (!g)
		return;
	for (unsigned i = 0; i < g->nsocks; i++)
		sock_free(g->socks[i]);
	for (l = g->listeners; l; l = next) {
		next = l->next;
		free(l->backlog);
		free(l);
	}
	if (g->fe)
		vmio_fe_close(g->fe);
	free(g->rx_gpa);
	free(g->rx_table_gpa);
	free(g->rx_size);
	free(g->asm_buf);
	free(g->tx_gpa);
	free(g->tx_table_gpa);
	free(g->tx_free);
	free(g->socks);
	free(g);
}

static void stamp(struct vg_sock *s, struct vsock_hdr *h, uint16_t op)
{
	*h = (struct vsock_hdr){
		.src_cid = s->g->o.guest_cid,
		.dst_cid = s->peer_cid,
		.src_port = s->local_port,
		.dst_port = s->peer_port,
		.type = s->type,
		.op = op,
		.buf_alloc = s->buf_alloc,
		.fwd_cnt = s->fwd_cnt,
	};
	s->adv_fwd_cnt = s->fwd_cnt;
}

static int sock_send(struct vg_sock *s, uint16_t op, uint32_t flags,
		     const void *payload, uint32_t n, int timeout_ms)
{
	struct vsock_hdr h;

	stamp(s, &h, op);
	h.flags = flags;
	h.len = n;
	return vg_send_hdr(s->g, &h, payload, n, timeout_ms);
}

/* Sends what packet handlers queued, as far as tx slots allow without
 * waiting; the rest stays queued for the next call. */
static void flush_ctl(struct vg *g)
{
	while (g->rstq_len && g->tx_nfree) {
		struct vsock_hdr h;

		vsock_hdr_reply(&g->rstq[0], VSOCK_OP_RST, &h);
		if (vg_send_hdr(g, &h, NULL, 0, 0))
			break;
		memmove(g->rstq, g->rstq + 1,
			--g->rstq_len * sizeof(g->rstq[0]));
	}
	/* A guest of many idle sockets polls often: look at them only when
	 * one owes something. */
	if (!g->ctl_owed)
		return;
	g->ctl_owed = false;
	for (unsigned i = 0; i < g->nsocks; i++) {
		struct vg_sock *s = g->socks[i];

		/* The RST of a refusal goes even though we count the socket
		 * reset already. */
		if ((s->ctl & CTL_RST) && g->tx_nfree &&
		    !sock_send(s, VSOCK_OP_RST, 0, NULL, 0, 0))
			s->ctl &= ~CTL_RST;
		if (s->ctl & CTL_RST)
			g->ctl_owed = true;
		if (!(s->ctl & CTL_CREDIT_UPDATE))
			continue;
		if (s->reset) /* nothing more goes to a reset peer */
			s->ctl &= ~CTL_CREDIT_UPDATE;
		else if (g->tx_nfree &&
			 !sock_send(s, VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0, 0))
			s->ctl &= ~CTL_CREDIT_UPDATE;
		else
			g->ctl_owed = true;
	}
}

int vg_poll(struct vg *g, int timeout_ms)
{
	return vg_poll_many(&g, 1, timeout_ms);
}

int vg_poll_many(struct vg *const *gs, unsigned n, int timeout_ms)
{
	int r = wait_many(gs, n, timeout_ms);

	if (r >= 0)
		for (unsigned i = 0; i < n; i++)
			flush_ctl(gs[i]);
	return r;
}

bool vg_next_unmatched(struct vg *g, struct vsock_hdr *h, int timeout_ms)
{
	unsigned cap = sizeof(g->unmatched) / sizeof(g->unmatched[0]);
	int64_t deadline = vmio_now_ms() + timeout_ms;

	for (bool polled = false;; polled = true) {
		if (g->unmatched_len) {
			*h = g->unmatched[g->unmatched_head];
			g->unmatched_head = (g->unmatched_head + 1) % cap;
			g->unmatched_len--;
			return true;
		}
		if (polled && vmio_now_ms() >= deadline)
			return false;
		if (vg_poll(g, left_ms(deadline)) < 0)
			return false;
	}
}

bool vg_wait_unmatched(struct vg *g, uint16_t op, uint32_t dst_port,
		       struct vsock_hdr *h, int timeout_ms)
{
	int64_t deadline = vmio_now_ms() + timeout_ms;

	while (vg_next_unmatched(g, h, left_ms(deadline)))
		if (h->op == op && h->dst_port == dst_port)
			return true;
	return false;
}

/* ---- sockets ---- */

static struct vg_sock *sock_new(struct vg *g, uint16_t type, uint32_t local,
			       uint32_t peer)
{
	struct vg_sock *s;

	if (g->nsocks == g->o.max_sockets)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->g = g;
	s->peer_cid = VSOCK_HOST_CID;
	s->local_port = local;
	s->peer_port = peer;
	s->type = type;
	s->buf_alloc = g->o.buf_alloc;
	g->socks[g->nsocks++] = s;
	return s;
}

static void sock_unlink(struct vg_sock *s)
{
	struct vg *g = s->g;

	for (unsigned i = 0; i < g->nsocks; i++)
		if (g->socks[i] == s) {
			g->socks[i] = g->socks[--g->nsocks];
			break;
		}
}

/* A socket that never got going (its REQUEST or RESPONSE could not be
 * sent, or the wait for it ended) is forgotten without an RST: the caller
 * gets NULL and the reason in *err. */
static struct vg_sock *sock_abandon(struct vg_sock *s, int reason, int *err)
{
	sock_unlink(s);
	sock_free(s);
	if (err)
		*err = reason;
	return NULL;
}

/* Every connect comes down to these two: a type, a peer CID and a port. */
static struct vg_sock *connect_start(struct vg *g, uint16_t type,
				     uint64_t cid, uint32_t local,
				     uint32_t port, int *err);
static struct vg_sock *connect_now(struct vg *g, uint16_t type, uint64_t cid,
				   uint32_t local, uint32_t port,
				   int timeout_ms, int *err);

struct vg_sock *vg_connect_start(struct vg *g, uint32_t port, int *err)
{
	return connect_start(g, VSOCK_TYPE_STREAM, VSOCK_HOST_CID, 0, port,
			     err);
}

struct vg_sock *vg_connect_cid_start(struct vg *g, uint64_t cid,
				     uint32_t port, int *err)
{
	return connect_start(g, VSOCK_TYPE_STREAM, cid, 0, port, err);
}

/* local 0: an ephemeral port no socket of ours uses with this peer. */
static struct vg_sock *connect_start(struct vg *g, uint16_t type,
				     uint64_t cid, uint32_t local,
				     uint32_t port, int *err)
{
	struct vg_sock *s;
	int r;

	if (local && find_sock(g, local, port)) {
		if (err)
			*err = -EADDRINUSE;
		return NULL;
	}
	while (!local || find_sock(g, local, port)) {
		local = g->next_port++;
		if (g->next_port == 0)
			g->next_port = 1024;
	}
	s = sock_new(g, type, local, port);
	if (!s) {
		if (err)
			*err = -ENOMEM;
		return NULL;
	}
	s->peer_cid = cid;
	s->connecting = true;
	r = sock_send(s, VSOCK_OP_REQUEST, 0, NULL, 0, 1000);
	if (r) {
		return sock_abandon(s, r, err);
	}
	return s;
}

int vg_connect_wait(struct vg_sock *s, int timeout_ms)
{
	int64_t deadline = vmio_now_ms() + timeout_ms;

	for (bool polled = false; s->connecting; polled = true) {
		if (polled && vmio_now_ms() >= deadline)
			return -ETIMEDOUT;
		int r = vg_poll(s->g, left_ms(deadline));

		if (r < 0)
			return r;
	}
	if (s->refused)
		return -ECONNREFUSED;
	return s->reset ? -ECONNRESET : 0;
}

struct vg_sock *vg_connect(struct vg *g, uint32_t port, int timeout_ms,
			   int *err)
{
	return connect_now(g, VSOCK_TYPE_STREAM, VSOCK_HOST_CID, 0, port,
			   timeout_ms, err);
}

struct vg_sock *vg_connect_from(struct vg *g, uint32_t local_port,
				uint32_t port, int timeout_ms, int *err)
{
	return connect_now(g, VSOCK_TYPE_STREAM, VSOCK_HOST_CID, local_port,
			   port, timeout_ms, err);
}

struct vg_sock *vg_connect_type(struct vg *g, uint16_t type, uint32_t port,
				int timeout_ms, int *err)
{
	return connect_now(g, type, VSOCK_HOST_CID, 0, port, timeout_ms, err);
}

struct vg_sock *vg_connect_cid(struct vg *g, uint64_t cid, uint32_t port,
			       int timeout_ms, int *err)
{
	return connect_now(g, VSOCK_TYPE_STREAM, cid, 0, port, timeout_ms,
			   err);
}

static struct vg_sock *connect_now(struct vg *g, uint16_t type, uint64_t cid,
				   uint32_t local, uint32_t port,
				   int timeout_ms, int *err)
{
	struct vg_sock *s = connect_start(g, type, cid, local, port, err);
	int r;

	if (!s)
		return NULL;
	r = vg_connect_wait(s, timeout_ms);
	if (r) /* the test asked for a bounded wait, not a clean close */
		return sock_abandon(s, r, err);
	return s;
}

int vg_listen(struct vg *g, uint32_t port)
{
	struct vg_listener *l;

	if (find_listener(g, port))
		return 0;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->port = port;
	l->next = g->listeners;
	g->listeners = l;
	return 0;
}

struct vg_sock *vg_accept(struct vg *g, uint32_t port, bool refuse,
			  int timeout_ms, int *err)
{
	struct vg_listener *l = find_listener(g, port);
	int64_t deadline = vmio_now_ms() + timeout_ms;
	struct vsock_hdr req, h;
	struct vg_sock *s;
	int r;

	if (err)
		*err = 0;
	if (!l) {
		if (err)
			*err = -EINVAL;
		return NULL;
	}
	for (bool polled = false; !l->n; polled = true) {
		if (polled && vmio_now_ms() >= deadline) {
			if (err)
				*err = -ETIMEDOUT;
			return NULL;
		}
		r = vg_poll(g, left_ms(deadline));
		if (r < 0) {
			if (err)
				*err = r;
			return NULL;
		}
	}
	req = l->backlog[0];
	memmove(l->backlog, l->backlog + 1, --l->n * sizeof(req));
	if (refuse) {
		vsock_hdr_reply(&req, VSOCK_OP_RST, &h);
		h.src_cid = g->o.guest_cid;
		r = vg_send_hdr(g, &h, NULL, 0, left_ms(deadline) + 1000);
		if (err)
			*err = r;
		return NULL;
	}
	s = sock_new(g, req.type, req.dst_port, req.src_port);
	if (!s) {
		if (err)
			*err = -ENOMEM;
		return NULL;
	}
	s->peer_cid = req.src_cid;
	s->peer_buf_alloc = req.buf_alloc;
	s->peer_fwd_cnt = req.fwd_cnt;
	s->tx_cnt = req.fwd_cnt;
	s->established = true;
	r = sock_send(s, VSOCK_OP_RESPONSE, 0, NULL, 0,
		      left_ms(deadline) + 1000);
	if (r) {
		return sock_abandon(s, r, err);
	}
	return s;
}

static uint32_t peer_credit(const struct vg_sock *s)
{
	return vg_tx_space(s->peer_buf_alloc, s->buf_alloc, s->tx_cnt,
			   s->peer_fwd_cnt, s->g->o.tx_cap);
}

/* Sends len bytes as RW packets within the credit; the last one carries
 * last_flags (a message's EOM). */
static ssize_t sock_write(struct vg_sock *s, const void *buf, size_t len,
			  uint32_t last_flags, int timeout_ms)
{
	int64_t deadline = vmio_now_ms() + timeout_ms;
	const uint8_t *p = buf;
	size_t done = 0;
	int err = 0;

	for (bool polled = false, capped = false; done < len;) {
		uint32_t n = peer_credit(s);

		if (s->reset) {
			err = -ECONNRESET;
			break;
		}
		if (!s->established) {
			err = -ENOTCONN;
			break;
		}
		if ((s->local_shut & VSOCK_SHUTDOWN_SEND) ||
		    (s->peer_shut & VSOCK_SHUTDOWN_RCV)) {
			err = -EPIPE;
			break;
		}
		if (!n) {
			int r;

			/* Once a wait: what the cap alone holds back. */
			if (!capped &&
			    vg_tx_space(s->peer_buf_alloc, s->buf_alloc,
					s->tx_cnt, s->peer_fwd_cnt, false)) {
				s->g->tx_cap_waits++;
				capped = true;
			}
			if (polled && vmio_now_ms() >= deadline) {
				err = -ETIMEDOUT;
				break;
			}
			r = vg_poll(s->g, left_ms(deadline));
			polled = true;
			if (r < 0) {
				err = r;
				break;
			}
			continue;
		}
		if (n > s->g->o.tx_pkt_max)
			n = s->g->o.tx_pkt_max;
		if (n > len - done)
			n = (uint32_t)(len - done);
		capped = false;
		err = sock_send(s, VSOCK_OP_RW,
				done + n == len ? last_flags : 0, p + done, n,
				left_ms(deadline));
		if (err)
			break;
		s->tx_cnt += n;
		done += n;
		/* Take what the device sent meanwhile (credit updates) without
		 * waiting. */
		vg_poll(s->g, 0);
	}
	return done ? (ssize_t)done : err;
}

ssize_t vg_write(struct vg_sock *s, const void *buf, size_t len,
		 int timeout_ms)
{
	return sock_write(s, buf, len, 0, timeout_ms);
}

ssize_t vg_send_msg(struct vg_sock *s, const void *buf, size_t len,
		    unsigned flags, int timeout_ms)
{
	uint32_t last = VSOCK_SEQ_EOM | (flags & VG_MSG_EOR ? VSOCK_SEQ_EOR
							   : 0);

	if (s->type != VSOCK_TYPE_SEQPACKET)
		return -EOPNOTSUPP;
	/* As Linux: a message the peer's buffer cannot hold is refused, and
	 * since the cap one ours cannot either. */
	if (len > vg_tx_space(s->peer_buf_alloc, s->buf_alloc, 0, 0,
			      s->g->o.tx_cap) &&
	    !(flags & VG_MSG_FORCE))
		return -EMSGSIZE;
	if (!len) {
		int r = sock_send(s, VSOCK_OP_RW, last, NULL, 0, timeout_ms);

		return r ? r : 0;
	}
	return sock_write(s, buf, len, last, timeout_ms);
}

/* Waits until the socket holds something to read: unread bytes, or with
 * msg a complete message. Returns 1, 0 at end of stream, or -errno. */
static int sock_wait_readable(struct vg_sock *s, bool msg, int64_t deadline)
{
	for (bool polled = false;; polled = true) {
		int r;

		/* Linux reports the error of a refusal before anything,
		 * once. */
		if (s->rx_err) {
			r = s->rx_err;
			s->rx_err = 0;
			return r;
		}
		if (msg ? s->msg_count : vmio_byte_ring_len(&s->rbuf))
			return 1;
		/* End of stream first: an RST after the host's
		 * SHUTDOWN(SEND) is how a finished connection goes away
		 * (Linux reads EOF then too). */
		if (s->peer_shut & VSOCK_SHUTDOWN_SEND)
			return 0;
		if (s->reset)
			return -ECONNRESET;
		if (!s->established)
			return -ENOTCONN;
		/* Look at the queues once even with no time to wait. */
		if (polled && vmio_now_ms() >= deadline)
			return -ETIMEDOUT;
		r = vg_poll(s->g, left_ms(deadline));
		if (r < 0)
			return r;
	}
}

/* Counts done bytes as read and tells the host when it should hear. */
static void sock_consumed(struct vg_sock *s, uint32_t done, int64_t deadline)
{
	s->fwd_cnt += done;
	vg_rxq_consumed(&s->rxq, s->fwd_cnt);
	/* As Linux: tell the host once the space it believes we have runs
	 * low, so it never stalls on a full buffer we already emptied. */
	if (s->buf_alloc - (s->rx_cnt - s->adv_fwd_cnt) <
		    s->g->o.credit_threshold &&
	    !s->reset) {
		s->ctl |= CTL_CREDIT_UPDATE;
		s->g->ctl_owed = true;
	}
	if (s->ctl & CTL_CREDIT_UPDATE) {
		if (!sock_send(s, VSOCK_OP_CREDIT_UPDATE, 0, NULL, 0,
			       left_ms(deadline) + 1000))
			s->ctl &= ~CTL_CREDIT_UPDATE;
	}
}

ssize_t vg_read(struct vg_sock *s, void *buf, size_t len, int timeout_ms)
{
	int64_t deadline = vmio_now_ms() + timeout_ms;
	uint32_t done;
	int r = sock_wait_readable(s, false, deadline);

	if (r <= 0)
		return r;
	done = (uint32_t)(vmio_byte_ring_len(&s->rbuf) < len ?
				  vmio_byte_ring_len(&s->rbuf) : len);
	vmio_byte_ring_take(&s->rbuf, buf, done);
	sock_consumed(s, done, deadline);
	return (ssize_t)done;
}

ssize_t vg_recv_msg(struct vg_sock *s, void *buf, size_t len,
		    unsigned *flags, int timeout_ms)
{
	int64_t deadline = vmio_now_ms() + timeout_ms;
	struct vg_msg m;
	uint32_t k;
	int r;

	if (flags)
		*flags = 0;
	if (s->type != VSOCK_TYPE_SEQPACKET)
		return -EOPNOTSUPP;
	r = sock_wait_readable(s, true, deadline);
	if (r <= 0)
		return r;
	m = s->msgs[s->msg_head];
	s->msg_head = (s->msg_head + 1) % VG_MAX_MSGS;
	s->msg_count--;
	k = m.len < len ? m.len : (uint32_t)len;
	vmio_byte_ring_take(&s->rbuf, buf, k);
	vmio_byte_ring_take(&s->rbuf, NULL, m.len - k);
	if (flags)
		*flags = (m.eor ? VG_MSG_EOR : 0) | (k < m.len ? VG_MSG_TRUNC
							       : 0);
	sock_consumed(s, m.len, deadline);
	return m.len;
}

int vg_shutdown(struct vg_sock *s, uint32_t flags)
{
	if (s->reset)
		return -ECONNRESET;
	s->local_shut |= flags & VSOCK_SHUTDOWN_MASK;
	return sock_send(s, VSOCK_OP_SHUTDOWN, flags, NULL, 0, 5000);
}

void vg_close(struct vg_sock *s)
{
	if (!s)
		return;
	if (!s->reset || (s->ctl & CTL_RST))
		(void)sock_send(s, VSOCK_OP_RST, 0, NULL, 0, 1000);
	sock_unlink(s);
	sock_free(s);
}

void vg_sock_info(const struct vg_sock *s, struct vg_sock_info *i)
{
	*i = (struct vg_sock_info){
		.local_port = s->local_port,
		.peer_port = s->peer_port,
		.established = s->established,
		.reset = s->reset,
		.peer_shut = s->peer_shut,
		.peer_credit = peer_credit(s),
		.peer_buf_alloc = s->peer_buf_alloc,
		.unread = (uint32_t)vmio_byte_ring_len(&s->rbuf),
		.queued_pkts = s->rxq.count,
		.refused = s->rx_refused,
	};
}
