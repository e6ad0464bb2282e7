/* The vsock connection state machine against a socketpair (the host side)
 * and chains built by hand over local buffers (the guest side): connect
 * both ways, data both ways bounded by credit, a full host socket, half
 * close both ways, resets and hostile ops; and seqpacket (a SOCK_SEQPACKET
 * socketpair): messages gathered until EOM and sent whole, queued whole
 * behind a full host socket, host messages cut into packets with EOM on
 * the last, and messages too large either way refused; stream
 * payload spliced by reference, its chain held until the host read it;
 * and the guest's packet limit (guest_backlog.h): no packet past it, in
 * single and batched reads and between two packets of a message, credit
 * asked for while there, and small host writes merged for a guest that
 * fell behind, with everything that ends such a hold. Some of them again
 * with the connection handed to a successor midway (conn_handover.h):
 * the successor's connection carries on as if nothing happened, and every
 * shorter record than the whole is refused, leaking nothing. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/vsock/conn_from_guest.h"
#include "devices/vsock/conn_handover.h"
#include "devices/vsock/conn_to_guest.h"
#include "devices/vsock/connection.h"

#define GUEST_CID 3u
#define GUEST_PORT 1234u
#define HOST_PORT 5000u
#define RX_DATA 4096u

/* Chains are 16 KiB of iovecs: keep them off the stack. */
static struct vmio_chain txc, rxc;
/* A guest may not touch a buffer the device holds: guest_send writes
 * the next of these each time, so that a held one stays as sent. */
static uint8_t txbufs[4][VSOCK_HDR_SIZE + VSOCK_MAX_PKT_PAYLOAD];
static unsigned txnext;
static uint8_t rxbuf[VSOCK_HDR_SIZE + RX_DATA];
static struct vsock_conn conn;
static int host; /* the host program's end of the socketpair */
/* VSOCK_TYPE_STREAM, or SEQPACKET for the seqpacket cases. */
static uint16_t conn_type = VSOCK_TYPE_STREAM;

/* guest_send offers the chain to be held (tx_splice.h), and was it. */
static bool may_hold, last_held;

/* The guest's credit toward us, as a well-behaved guest would track it. */
static uint32_t guest_buf_alloc, guest_fwd_cnt;

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i % 251);
}

/* Hands the connection a guest packet; the payload is a slice of the
 * counting pattern starting at stream offset `at`, split over two
 * descriptors so the writev path sees more than one iovec. */
static void guest_send(uint16_t op, uint32_t flags, size_t at, uint32_t len)
{
	struct vsock_hdr h = {
		.src_cid = GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = GUEST_PORT,
		.dst_port = HOST_PORT,
		.len = len,
		.type = conn_type,
		.op = op,
		.flags = flags,
		.buf_alloc = guest_buf_alloc,
		.fwd_cnt = guest_fwd_cnt,
	};
	struct vsock_pkt pkt;
	size_t total = VSOCK_HDR_SIZE + len, i, split;
	uint8_t *txbuf = txbufs[txnext++ % 4];

	assert_true(len <= VSOCK_MAX_PKT_PAYLOAD);
	vsock_hdr_encode(&h, txbuf);
	for (i = 0; i < len; i++)
		txbuf[VSOCK_HDR_SIZE + i] = pattern(at + i);
	memset(&txc, 0, sizeof(txc));
	split = VSOCK_HDR_SIZE + len / 2;
	txc.iov[0].iov_base = txbuf;
	txc.iov[0].iov_len = split;
	txc.iov[1].iov_base = txbuf + split;
	txc.iov[1].iov_len = total - split;
	txc.nout = 2;
	txc.out_len = total;
	assert_int_equal(vsock_pkt_parse_tx(&txc, GUEST_CID,
					    VSOCK_MAX_PKT_PAYLOAD,
					    VSOCK_TYPES_ALL, &pkt, NULL),
			 VSOCK_PKT_OK);
	last_held = vsock_conn_from_guest(&conn, &pkt, &txc, may_hold);
}

/* Asks the connection for one packet into a Linux-shaped rx buffer
 * (header descriptor + 4 KiB data descriptor). Returns bytes written and
 * decodes the header into *h. */
static size_t guest_recv(struct vsock_hdr *h)
{
	size_t n;

	memset(&rxc, 0, sizeof(rxc));
	memset(rxbuf, 0xee, sizeof(rxbuf));
	rxc.iov[0].iov_base = rxbuf;
	rxc.iov[0].iov_len = VSOCK_HDR_SIZE;
	rxc.iov[1].iov_base = rxbuf + VSOCK_HDR_SIZE;
	rxc.iov[1].iov_len = RX_DATA;
	rxc.nin = 2;
	rxc.in_len = sizeof(rxbuf);
	{
		const struct vmio_chain *one = &rxc;
		uint32_t w = 0;

		n = vsock_conn_to_guest(&conn, &one, 1, VSOCK_MAX_PKT_PAYLOAD,
					&w)
			    ? w
			    : 0;
	}
	if (n) {
		vsock_hdr_decode(rxbuf, h);
		assert_int_equal(h->src_cid, VSOCK_HOST_CID);
		assert_int_equal(h->dst_cid, GUEST_CID);
		assert_int_equal(h->src_port, HOST_PORT);
		assert_int_equal(h->dst_port, GUEST_PORT);
		assert_int_equal(h->type, conn_type);
		assert_int_equal(n, VSOCK_HDR_SIZE + h->len);
	}
	return n;
}

static void expect_op(uint16_t op)
{
	struct vsock_hdr h;

	assert_true(guest_recv(&h) > 0);
	assert_int_equal(h.op, op);
}

/* The host end sees EOF: the connection closed (or half-closed) it. */
static void expect_host_eof(void)
{
	char c;

	assert_int_equal(recv(host, &c, 1, MSG_DONTWAIT), 0);
}

static int pair(uint32_t buf_size, bool peer, int sndbuf)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX,
				    conn_type == VSOCK_TYPE_SEQPACKET
					    ? SOCK_SEQPACKET
					    : SOCK_STREAM,
				    0, sv),
			 0);
	if (sndbuf)
		assert_int_equal(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF,
					    &sndbuf, sizeof(sndbuf)),
				 0);
	host = sv[1];
	guest_fwd_cnt = 0;
	if (peer) {
		struct vsock_hdr req = {
			.src_cid = GUEST_CID,
			.dst_cid = VSOCK_HOST_CID,
			.src_port = GUEST_PORT,
			.dst_port = HOST_PORT,
			.type = conn_type,
			.op = VSOCK_OP_REQUEST,
			.buf_alloc = guest_buf_alloc,
		};

		vsock_conn_init_peer(&conn, GUEST_CID, &req, sv[0], buf_size);
	} else {
		vsock_conn_init_local(&conn, GUEST_CID, HOST_PORT, GUEST_PORT,
				      sv[0], buf_size);
		if (conn_type == VSOCK_TYPE_SEQPACKET)
			vsock_conn_set_seqpacket(&conn);
	}
	return 0;
}

/* A guest-initiated connection, RESPONSE already taken by the guest. */
static void established(uint32_t buf_size, uint32_t guest_alloc, int sndbuf)
{
	guest_buf_alloc = guest_alloc;
	pair(buf_size, true, sndbuf);
	expect_op(VSOCK_OP_RESPONSE);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
}

/* Whether the test hands the connection over where it says
 * maybe_hand_over (the _handed_over variants). */
static bool handover;

/* With VMIO_HANDOVER_SEEDS=DIR, each record goes there too, as a seed of
 * tests/fuzz/fuzz_vsock_handover's corpus (its first byte: the packet
 * bound on when the connection's overhead is not 0). */
static void save_seed(const struct vmio_wire_writer *w)
{
	const char *dir = getenv("VMIO_HANDOVER_SEEDS");
	static unsigned n;
	char path[512];
	uint8_t bound = conn.backlog.overhead != 0;
	FILE *f;

	if (!dir)
		return;
	snprintf(path, sizeof(path), "%s/record_%u", dir, n++);
	f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(&bound, 1, 1, f), 1);
	assert_int_equal(fwrite(w->buf, 1, w->len, f), w->len);
	fclose(f);
}

/* The connection handed to a successor: saved, taken back into a fresh
 * one that gets the host socket, the old one gone. buf_size: what the
 * connection was set up with (--tx-buffer-size). */
static void hand_over(uint32_t buf_size)
{
	struct vmio_wire_writer w;
	struct vmio_wire_reader r;
	struct vsock_conn next;
	uint32_t idx;

	assert_null(vsock_conn_handover_refusal(&conn));
	vmio_wire_writer_init(&w, 0);
	vsock_conn_save(&conn, 7, &w);
	assert_false(w.failed);
	save_seed(&w);
	/* Every field is needed: a record cut anywhere is refused. */
	for (size_t cut = 0; cut < w.len; cut += 1 + cut / 16) {
		vmio_wire_reader_init(&r, w.buf, cut);
		assert_int_equal(vsock_conn_restore(&next, GUEST_CID, buf_size,
						    conn.backlog.overhead, &r,
						    &idx),
				 -1);
		assert_non_null(r.why);
	}
	vmio_wire_reader_init(&r, w.buf, w.len);
	assert_int_equal(vsock_conn_restore(&next, GUEST_CID, buf_size,
					    conn.backlog.overhead, &r, &idx),
			 0);
	assert_int_equal(r.left, 0);
	assert_int_equal(idx, 7);
	assert_int_equal(next.state, conn.state);
	assert_int_equal(next.pending, conn.pending);
	assert_int_equal(next.credit.rx_cnt, conn.credit.rx_cnt);
	assert_int_equal(next.credit.tx_cnt, conn.credit.tx_cnt);
	assert_int_equal(next.credit.peer_fwd_cnt, conn.credit.peer_fwd_cnt);
	assert_int_equal(vmio_byte_ring_len(&next.ring),
			 vmio_byte_ring_len(&conn.ring));
	assert_int_equal(next.seq.msgs, conn.seq.msgs);
	assert_int_equal(next.seq.partial, conn.seq.partial);
	assert_int_equal(vsock_backlog_len(&next.backlog),
			 vsock_backlog_len(&conn.backlog));
	assert_memory_equal(&next.stats, &conn.stats, sizeof(conn.stats));
	next.fd = conn.fd;
	conn.fd = -1;
	vsock_conn_destroy(&conn);
	conn = next;
	vmio_wire_writer_fini(&w);
}

static void maybe_hand_over(uint32_t buf_size)
{
	if (handover)
		hand_over(buf_size);
}

static int teardown(void **state)
{
	handover = false;
	vsock_splice_free(conn.splice);
	conn.splice = NULL;
	may_hold = false;
	vsock_conn_destroy(&conn);
	close(host);
	conn_type = VSOCK_TYPE_STREAM;
	return 0;
}

/* Reads exactly n bytes of the pattern from the host end, at `at`. */
static void host_read_pattern(size_t at, size_t n)
{
	static uint8_t buf[VSOCK_MAX_PKT_PAYLOAD];
	size_t got = 0;

	while (got < n) {
		ssize_t r = recv(host, buf, n - got, MSG_DONTWAIT);

		assert_true(r > 0);
		for (ssize_t i = 0; i < r; i++)
			assert_int_equal(buf[i], pattern(at + got + (size_t)i));
		got += (size_t)r;
	}
}

/* A spliced chain stays held while any of its bytes is unread (a part
 * read frees nothing), credit included, and goes back once they all are;
 * the next one is measured behind it. */
static void test_spliced_chain_held(void **state)
{
	const char *why;
	uint16_t heads[4];

	if (!vsock_splice_supported(&why))
		skip();
	established(262144, 262144, 0);
	conn.splice = vsock_splice_new();
	assert_non_null(conn.splice);
	vsock_held_set_cap(&conn.held, 2);
	may_hold = true;

	guest_send(VSOCK_OP_RW, 0, 0, 60000);
	assert_true(last_held);
	assert_int_equal(conn.held.n, 1);
	assert_int_equal(conn.credit.fwd_cnt, 0);
	assert_int_equal(vsock_conn_tx_release(&conn, heads, 4, false), 0);
	host_read_pattern(0, 30000);
	assert_int_equal(vsock_conn_tx_release(&conn, heads, 4, false), 0);
	assert_int_equal(conn.credit.fwd_cnt, 0);

	/* A second chain behind it, then the first read through. */
	guest_send(VSOCK_OP_RW, 0, 60000, 20000);
	assert_true(last_held);
	assert_int_equal(conn.held.n, 2);
	host_read_pattern(30000, 30000);
	assert_int_equal(vsock_conn_tx_release(&conn, heads, 4, false), 1);
	assert_int_equal(conn.credit.fwd_cnt, 60000);
	assert_int_equal(conn.held.n, 1);

	/* The bound reached: a third is copied, not held. */
	guest_send(VSOCK_OP_RW, 0, 80000, 20000);
	assert_true(last_held);
	guest_send(VSOCK_OP_RW, 0, 100000, 20000);
	assert_false(last_held);
	assert_int_equal(conn.held.n, 2);
	host_read_pattern(60000, 60000);
	assert_int_equal(vsock_conn_tx_release(&conn, heads, 4, false), 2);
	assert_int_equal(conn.credit.fwd_cnt, 120000);
	assert_int_equal(conn.held.n, 0);

	/* Held with force (a queue stop): back unread. */
	guest_send(VSOCK_OP_RW, 0, 120000, 20000);
	assert_true(last_held);
	assert_int_equal(vsock_conn_tx_release(&conn, heads, 4, true), 1);
	host_read_pattern(120000, 20000);

	/* A small packet is copied even with room to hold it. */
	guest_send(VSOCK_OP_RW, 0, 140000, 1000);
	assert_false(last_held);
	host_read_pattern(140000, 1000);
}

static void test_peer_connect(void **state)
{
	struct vsock_hdr h;

	guest_buf_alloc = 262144;
	pair(65536, true, 0);
	assert_int_equal(conn.state, VSOCK_CONN_PEER_INIT);
	assert_int_equal(vsock_conn_pending_to_guest(&conn),
			 VSOCK_RXOP_RESPONSE);
	/* Nothing to watch until the guest knows it is connected. */
	assert_int_equal(vsock_conn_epoll_events(&conn), 0);
	assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE);
	assert_int_equal(h.op, VSOCK_OP_RESPONSE);
	assert_int_equal(h.buf_alloc, 65536);
	assert_int_equal(h.fwd_cnt, 0);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(guest_recv(&h), 0);
	assert_int_equal(vsock_conn_epoll_events(&conn), EPOLLIN);
}

static void test_op_before_response(void **state)
{
	guest_buf_alloc = 4096;
	pair(65536, true, 0);
	guest_send(VSOCK_OP_RW, 0, 0, 10);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_host_eof();
	expect_op(VSOCK_OP_RST);
	assert_true(vsock_conn_is_dead(&conn));
}

static void test_local_connect(void **state)
{
	char line[32];
	ssize_t n;

	guest_buf_alloc = 8192;
	pair(65536, false, 0);
	assert_int_equal(conn.state, VSOCK_CONN_LOCAL_INIT);
	expect_op(VSOCK_OP_REQUEST);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	guest_send(VSOCK_OP_RESPONSE, 0, 0, 0);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	n = recv(host, line, sizeof(line), MSG_DONTWAIT);
	assert_int_equal(n, 8);
	assert_memory_equal(line, "OK 5000\n", 8);
	assert_int_equal(vsock_credit_peer_free(&conn.credit), 8192);
}

static void test_local_refused(void **state)
{
	guest_buf_alloc = 8192;
	pair(65536, false, 0);
	expect_op(VSOCK_OP_REQUEST);
	/* No listener in the guest: its RST closes the host socket, and is
	 * not answered. */
	guest_send(VSOCK_OP_RST, 0, 0, 0);
	expect_host_eof();
	assert_true(vsock_conn_is_dead(&conn));
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
}

static void test_local_unexpected(void **state)
{
	guest_buf_alloc = 8192;
	pair(65536, false, 0);
	expect_op(VSOCK_OP_REQUEST);
	guest_send(VSOCK_OP_RW, 0, 0, 5);
	expect_host_eof();
	expect_op(VSOCK_OP_RST);
	assert_true(vsock_conn_is_dead(&conn));
}

static void test_guest_to_host(void **state)
{
	uint8_t got[1000];
	size_t i;

	established(65536, 65536, 0);
	guest_send(VSOCK_OP_RW, 0, 0, 1000);
	assert_int_equal(recv(host, got, sizeof(got), MSG_DONTWAIT), 1000);
	for (i = 0; i < sizeof(got); i++)
		assert_int_equal(got[i], pattern(i));
	assert_int_equal(conn.credit.fwd_cnt, 1000);
	assert_int_equal(vmio_byte_ring_len(&conn.ring), 0);
	assert_null(conn.ring.buf); /* never needed */
	assert_int_equal(vsock_conn_epoll_events(&conn), EPOLLIN);
	/* 1000 of 64 KiB used: no update worth sending yet. */
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
}

/* The next packet for the guest is exactly one CREDIT_UPDATE, carrying
 * these counters. */
static void expect_credit_update(uint32_t buf_alloc, uint32_t fwd_cnt)
{
	struct vsock_hdr h;

	assert_int_equal(vsock_conn_pending_to_guest(&conn),
			 VSOCK_RXOP_CREDIT_UPDATE);
	assert_true(guest_recv(&h) > 0);
	assert_int_equal(h.op, VSOCK_OP_CREDIT_UPDATE);
	assert_int_equal(h.buf_alloc, buf_alloc);
	assert_int_equal(h.fwd_cnt, fwd_cnt);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
}

static void test_proactive_credit_update(void **state)
{
	established(4096, 65536, 0);
	/* 3500 of 4096 consumed: the guest thinks 596 are left, below the
	 * default threshold of a quarter. */
	guest_send(VSOCK_OP_RW, 0, 0, 3500);
	expect_credit_update(4096, 3500);
}

static void test_host_to_guest_credit(void **state)
{
	uint8_t data[5000];
	struct vsock_hdr h;
	size_t i;

	established(65536, 3000, 0);
	for (i = 0; i < sizeof(data); i++)
		data[i] = pattern(i);
	assert_int_equal(send(host, data, sizeof(data), 0), sizeof(data));
	vsock_conn_host_readable(&conn, false);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	/* Readability is known: EPOLLIN would only wake us again. */
	assert_int_equal(vsock_conn_epoll_events(&conn), 0);

	assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE + 3000);
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_int_equal(h.len, 3000);
	assert_memory_equal(rxbuf + VSOCK_HDR_SIZE, data, 3000);

	/* Credit exhausted: nothing until the guest stayed without for a
	 * whole tick (it may update by itself), then one CREDIT_REQUEST,
	 * then silence, and the host socket is not watched. */
	assert_true(vsock_conn_wants_tick(&conn));
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	vsock_conn_tick(&conn);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	vsock_conn_tick(&conn);
	assert_int_equal(vsock_conn_pending_to_guest(&conn),
			 VSOCK_RXOP_CREDIT_REQUEST);
	expect_op(VSOCK_OP_CREDIT_REQUEST);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(guest_recv(&h), 0);
	assert_int_equal(vsock_conn_epoll_events(&conn), 0);

	/* The guest consumed it all: the rest flows, bounded by the 4 KiB
	 * buffer rather than by credit. */
	guest_fwd_cnt = 3000;
	guest_send(VSOCK_OP_CREDIT_UPDATE, 0, 0, 0);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE + 2000);
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_memory_equal(rxbuf + VSOCK_HDR_SIZE, data + 3000, 2000);
	/* Short read: drained, back to watching the socket. */
	assert_int_equal(vsock_conn_epoll_events(&conn), EPOLLIN);
}

/* Batched host->guest reads: chains like guest_recv's, four of them. */
#define BATCH 4
static struct vmio_chain bc[BATCH];
static uint8_t bbuf[BATCH][VSOCK_HDR_SIZE + RX_DATA];

static unsigned guest_recv_batch(uint32_t written[BATCH])
{
	const struct vmio_chain *rx[BATCH];

	for (unsigned i = 0; i < BATCH; i++) {
		memset(&bc[i], 0, sizeof(bc[i]));
		memset(bbuf[i], 0xee, sizeof(bbuf[i]));
		bc[i].iov[0].iov_base = bbuf[i];
		bc[i].iov[0].iov_len = VSOCK_HDR_SIZE;
		bc[i].iov[1].iov_base = bbuf[i] + VSOCK_HDR_SIZE;
		bc[i].iov[1].iov_len = RX_DATA;
		bc[i].nin = 2;
		bc[i].in_len = sizeof(bbuf[i]);
		rx[i] = &bc[i];
	}
	return vsock_conn_to_guest(&conn, rx, BATCH,
					VSOCK_MAX_PKT_PAYLOAD, written);
}

/* Chain i of the last batch holds an RW of len bytes: stream bytes
 * [at, at + len), with the advertised credit in its header. */
static void expect_batch_rw(unsigned i, const uint32_t *written, size_t at,
			    uint32_t len)
{
	struct vsock_hdr h;

	vsock_hdr_decode(bbuf[i], &h);
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_int_equal(h.src_port, HOST_PORT);
	assert_int_equal(h.dst_port, GUEST_PORT);
	assert_int_equal(h.len, len);
	assert_int_equal(h.buf_alloc, 65536);
	assert_int_equal(h.fwd_cnt, 0);
	assert_int_equal(written[i], VSOCK_HDR_SIZE + len);
	for (uint32_t k = 0; k < len; k++)
		assert_int_equal(bbuf[i][VSOCK_HDR_SIZE + k], pattern(at + k));
}

static void test_host_to_guest_batch(void **state)
{
	static uint8_t data[20000];
	uint32_t written[BATCH];
	struct vsock_hdr h;
	size_t i;

	established(65536, 10000, 0);
	for (i = 0; i < sizeof(data); i++)
		data[i] = pattern(i);
	assert_int_equal(send(host, data, sizeof(data), 0), sizeof(data));
	shutdown(host, SHUT_WR);
	vsock_conn_host_readable(&conn, false);
	assert_int_equal(vsock_conn_to_guest_batch_bytes(&conn), 10000);

	/* One read, bounded by credit: 4096 + 4096 + 1808, the fourth
	 * chain unused. Every packet counted against the credit. */
	assert_int_equal(guest_recv_batch(written), 3);
	expect_batch_rw(0, written, 0, 4096);
	expect_batch_rw(1, written, 4096, 4096);
	expect_batch_rw(2, written, 8192, 1808);
	assert_int_equal(vsock_credit_peer_free(&conn.credit), 0);
	assert_int_equal(vsock_conn_to_guest_batch_bytes(&conn), 0);
	vsock_conn_tick(&conn);
	vsock_conn_tick(&conn);
	assert_int_equal(vsock_conn_pending_to_guest(&conn),
			 VSOCK_RXOP_CREDIT_REQUEST);
	/* Not RW next: one chain, the CREDIT_REQUEST. */
	assert_int_equal(guest_recv_batch(written), 1);
	vsock_hdr_decode(bbuf[0], &h);
	assert_int_equal(h.op, VSOCK_OP_CREDIT_REQUEST);
	assert_int_equal(written[0], VSOCK_HDR_SIZE);

	/* The rest fills the credit exactly: RW stays pending (the socket
	 * may hold more), and the next read finds EOF: SHUTDOWN. */
	guest_fwd_cnt = 10000;
	guest_send(VSOCK_OP_CREDIT_UPDATE, 0, 0, 0);
	assert_int_equal(guest_recv_batch(written), 3);
	expect_batch_rw(0, written, 10000, 4096);
	expect_batch_rw(1, written, 14096, 4096);
	expect_batch_rw(2, written, 18192, 1808);
	guest_fwd_cnt = 20000;
	guest_send(VSOCK_OP_CREDIT_UPDATE, 0, 0, 0);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	assert_int_equal(guest_recv_batch(written), 1);
	vsock_hdr_decode(bbuf[0], &h);
	assert_int_equal(h.op, VSOCK_OP_SHUTDOWN);
	assert_int_equal(h.flags, VSOCK_SHUTDOWN_SEND);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(guest_recv_batch(written), 0);
}

/* A guest that holds VSOCK_CONN_MERGE_AFTER of our packets unread gets
 * small host writes merged: held while the socket has less than a
 * packet's worth, sent once it has. What a full packet leaves behind is
 * held in the same way, not sent as a small packet of its own; the tick
 * sends it whatever its size. */
static void test_merge_after_full_packet(void **state)
{
	static uint8_t data[8 * 100 + 100 + 5000];
	struct vsock_hdr h;
	size_t i, at = 0;

	established(65536, 262144, 0);
	for (i = 0; i < sizeof(data); i++)
		data[i] = pattern(i);
	/* Eight lone writes go out at once, a packet each. */
	for (i = 0; i < VSOCK_CONN_MERGE_AFTER; i++, at += 100) {
		assert_int_equal(send(host, data + at, 100, 0), 100);
		vsock_conn_host_readable(&conn, false);
		assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE + 100);
	}
	assert_int_equal(conn.stats.merge_holds, 0);

	/* The ninth waits for more. */
	assert_int_equal(send(host, data + at, 100, 0), 100);
	vsock_conn_host_readable(&conn, false);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(conn.stats.merge_holds, 1);
	assert_int_equal(vsock_conn_epoll_events(&conn),
			 EPOLLIN | EPOLLRDHUP | EPOLLET);

	/* A packet's worth: one full packet, and the rest held again. */
	assert_int_equal(send(host, data + at + 100, 5000, 0), 5000);
	vsock_conn_host_readable(&conn, false);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE + RX_DATA);
	assert_memory_equal(rxbuf + VSOCK_HDR_SIZE, data + at, RX_DATA);
	at += RX_DATA;
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(guest_recv(&h), 0);
	assert_int_equal(conn.stats.merge_holds, 2);

	/* The tick ends the hold: the rest goes, short as it is. */
	assert_true(vsock_conn_wants_tick(&conn));
	vsock_conn_tick(&conn);
	assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE + sizeof(data) - at);
	assert_memory_equal(rxbuf + VSOCK_HDR_SIZE, data + at,
			    sizeof(data) - at);
}

static void test_credit_overrun(void **state)
{
	established(1024, 65536, 0);
	guest_send(VSOCK_OP_RW, 0, 0, 1024);
	guest_send(VSOCK_OP_RW, 0, 1024, 2000);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_op(VSOCK_OP_RST);
	assert_true(vsock_conn_is_dead(&conn));
}

static void test_fwd_cnt_ahead(void **state)
{
	established(65536, 65536, 0);
	guest_fwd_cnt = 10; /* nothing was ever sent to it */
	guest_send(VSOCK_OP_CREDIT_UPDATE, 0, 0, 0);
	expect_host_eof();
	expect_op(VSOCK_OP_RST);
}

/* Fills the host socket (small SO_SNDBUF, nobody reading) and then the
 * ring, as a guest obeying credit would: up to exactly buf_size held.
 * Returns the bytes sent. */
#define SMALL_TX 16384u
static size_t fill_host(void)
{
	size_t sent = 0;
	unsigned rounds = 0;

	/* Partial writes leave odd amounts held: top up exactly. */
	while (vsock_credit_rx_pending(&conn.credit) < SMALL_TX) {
		uint32_t room = SMALL_TX -
				vsock_credit_rx_pending(&conn.credit);
		uint32_t len = room < 1024 ? room : 1024;

		assert_true(++rounds < 10000);
		guest_send(VSOCK_OP_RW, 0, sent, len);
		sent += len;
		assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	}
	assert_int_equal(vmio_byte_ring_len(&conn.ring), SMALL_TX);
	assert_int_equal(vsock_conn_epoll_events(&conn) & EPOLLOUT, EPOLLOUT);
	return sent;
}

/* Reads everything from the host end, flushing the connection whenever
 * the socket runs dry, and checks the order. Returns bytes read; stops at
 * EOF or when no more comes. */
static size_t drain_host(size_t from, size_t expect, bool want_eof)
{
	uint8_t got[4096];
	size_t seen = 0;
	unsigned idle = 0;

	for (;;) {
		ssize_t n = recv(host, got, sizeof(got), MSG_DONTWAIT);
		ssize_t i;

		if (n == 0)
			break;
		if (n < 0) {
			assert_true(errno == EAGAIN);
			if (seen == expect && !want_eof)
				break;
			assert_true(++idle < 1000);
			vsock_conn_flush(&conn);
			continue;
		}
		for (i = 0; i < n; i++)
			assert_int_equal(got[i], pattern(from + seen + (size_t)i));
		seen += (size_t)n;
	}
	return seen;
}

static void test_full_host_socket(void **state)
{
	size_t sent;

	established(SMALL_TX, 65536, 4096);
	sent = fill_host();
	maybe_hand_over(SMALL_TX);
	/* One byte more than the credit allows would be an overrun; an
	 * obedient guest waits. Now the host reads: flush drains in order. */
	assert_int_equal(drain_host(0, sent, false), sent);
	assert_int_equal(vmio_byte_ring_len(&conn.ring), 0);
	assert_int_equal(vsock_conn_epoll_events(&conn), EPOLLIN);
	assert_int_equal(conn.credit.fwd_cnt, (uint32_t)sent);
	expect_op(VSOCK_OP_CREDIT_UPDATE);
	/* Still usable afterwards, through the ring's wrap. */
	guest_send(VSOCK_OP_RW, 0, sent, 3000);
	assert_int_equal(drain_host(sent, 3000, false), 3000);
}

static void test_full_host_overrun(void **state)
{
	established(SMALL_TX, 65536, 4096);
	fill_host();
	guest_send(VSOCK_OP_RW, 0, 0, 1);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	assert_null(conn.ring.buf);
	expect_op(VSOCK_OP_RST);
}

static void test_guest_shutdown_send(void **state)
{
	struct vsock_hdr h;
	size_t sent;

	established(SMALL_TX, 65536, 4096);
	sent = fill_host();
	guest_send(VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_SEND, 0, 0);
	/* Buffered data first: no EOF yet, the connection lives on. */
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	assert_false(conn.host_shut_wr);
	assert_int_equal(drain_host(0, sent, true), sent); /* then EOF */
	assert_true(conn.host_shut_wr);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);

	/* The host replies and closes its side: the guest reads the reply,
	 * then SHUTDOWN(SEND), then the flow is reset (clean close). */
	assert_int_equal(send(host, "bye", 3, 0), 3);
	shutdown(host, SHUT_WR);
	vsock_conn_host_readable(&conn, false);
	assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE + 3);
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_memory_equal(rxbuf + VSOCK_HDR_SIZE, "bye", 3);
	vsock_conn_host_readable(&conn, false);
	assert_true(guest_recv(&h) > 0);
	assert_int_equal(h.op, VSOCK_OP_SHUTDOWN);
	assert_int_equal(h.flags, VSOCK_SHUTDOWN_SEND);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_op(VSOCK_OP_RST);
	assert_true(vsock_conn_is_dead(&conn));
}

static void test_host_eof(void **state)
{
	struct vsock_hdr h;
	char got[8];

	established(65536, 65536, 0);
	shutdown(host, SHUT_WR);
	vsock_conn_host_readable(&conn, false);
	assert_true(guest_recv(&h) > 0);
	assert_int_equal(h.op, VSOCK_OP_SHUTDOWN);
	assert_int_equal(h.flags, VSOCK_SHUTDOWN_SEND);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	assert_int_equal(vsock_conn_epoll_events(&conn), 0);
	/* Half-closed: the guest may still send. */
	guest_send(VSOCK_OP_RW, 0, 0, 8);
	assert_int_equal(recv(host, got, sizeof(got), MSG_DONTWAIT), 8);
	/* The guest closes: nothing left either way, RST. */
	guest_send(VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_MASK, 0, 0);
	expect_host_eof();
	expect_op(VSOCK_OP_RST);
	assert_true(vsock_conn_is_dead(&conn));
}

static void test_guest_close_with_buffer(void **state)
{
	size_t sent;

	established(SMALL_TX, 65536, 4096);
	sent = fill_host();
	guest_send(VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_MASK, 0, 0);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	/* The host still gets every byte, then EOF, then the RST goes. */
	assert_int_equal(drain_host(0, sent, true), sent);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_op(VSOCK_OP_RST);
}

static void test_guest_rst(void **state)
{
	struct vsock_hdr h;

	established(65536, 65536, 0);
	guest_send(VSOCK_OP_RST, 0, 0, 0);
	assert_int_equal(conn.fd, -1);
	expect_host_eof();
	assert_true(vsock_conn_is_dead(&conn));
	assert_int_equal(guest_recv(&h), 0);
	assert_int_equal(vsock_conn_epoll_events(&conn), 0);
	/* Late packets on a killed flow change nothing. */
	guest_send(VSOCK_OP_RW, 0, 0, 4);
	assert_true(vsock_conn_is_dead(&conn));
}

static void test_credit_request(void **state)
{
	struct vsock_hdr h;

	established(65536, 65536, 0);
	guest_send(VSOCK_OP_RW, 0, 0, 100);
	guest_send(VSOCK_OP_CREDIT_REQUEST, 0, 0, 0);
	expect_credit_update(65536, 100);
	assert_int_equal(guest_recv(&h), 0);
}

static void test_unexpected_op(void **state)
{
	established(65536, 65536, 0);
	guest_send(VSOCK_OP_RESPONSE, 0, 0, 0);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_host_eof();
	expect_op(VSOCK_OP_RST);
	assert_true(vsock_conn_is_dead(&conn));
}

static void test_second_request(void **state)
{
	established(65536, 65536, 0);
	guest_send(VSOCK_OP_REQUEST, 0, 0, 0);
	expect_host_eof();
	expect_op(VSOCK_OP_RST);
}

static void test_rw_after_shutdown(void **state)
{
	established(65536, 65536, 0);
	guest_send(VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_SEND, 0, 0);
	guest_send(VSOCK_OP_RW, 0, 0, 4);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_op(VSOCK_OP_RST);
}

static void test_host_gone(void **state)
{
	established(65536, 65536, 0);
	close(host);
	host = -1;
	/* EPIPE, not SIGPIPE: the flow is reset. */
	guest_send(VSOCK_OP_RW, 0, 0, 10);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_op(VSOCK_OP_RST);
}

/* ---- seqpacket ---- */

/* One host message; -1 if none waits. Checks its bytes are the pattern
 * from stream offset `at`. */
static ssize_t host_msg(size_t at)
{
	static uint8_t buf[1 << 17];
	ssize_t n = recv(host, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);

	for (ssize_t i = 0; i < n; i++)
		assert_int_equal(buf[i], pattern(at + (size_t)i));
	return n < 0 ? -1 : n;
}

static void seq_established(uint32_t buf_size, uint32_t guest_alloc,
			    int sndbuf)
{
	conn_type = VSOCK_TYPE_SEQPACKET;
	established(buf_size, guest_alloc, sndbuf);
	assert_int_equal(conn.type, VSOCK_TYPE_SEQPACKET);
	/* buf_size fits in the socket's default buffer: unchanged. */
	assert_int_equal(conn.credit.buf_alloc, buf_size);
}

static void test_seq_guest_message_whole(void **state)
{
	seq_established(65536, 65536, 0);
	/* Three packets, one message: nothing reaches the host before EOM. */
	guest_send(VSOCK_OP_RW, 0, 0, 1000);
	guest_send(VSOCK_OP_RW, 0, 1000, 3000);
	assert_int_equal(host_msg(0), -1);
	guest_send(VSOCK_OP_RW, VSOCK_SEQ_EOM | VSOCK_SEQ_EOR, 4000, 5);
	assert_int_equal(host_msg(0), 4005);
	/* A message in one packet goes straight through. */
	guest_send(VSOCK_OP_RW, VSOCK_SEQ_EOM, 7, 1);
	assert_int_equal(host_msg(7), 1);
	/* An empty EOM ends the message before it, and is nothing alone. */
	guest_send(VSOCK_OP_RW, 0, 9, 10);
	guest_send(VSOCK_OP_RW, VSOCK_SEQ_EOM, 0, 0);
	assert_int_equal(host_msg(9), 10);
	guest_send(VSOCK_OP_RW, VSOCK_SEQ_EOM, 0, 0);
	assert_int_equal(host_msg(0), -1);
	/* All of it consumed: the guest's credit is whole again. */
	assert_int_equal(vsock_credit_rx_pending(&conn.credit), 0);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
}

static void test_seq_queued_behind_full_host(void **state)
{
	size_t off = 0, at = 0, len = 0;
	unsigned i, sent = 0, got = 0;
	ssize_t n;

	/* The host reads nothing: its socket takes some messages (its
	 * buffer counts each small one as a kilobyte or so), the rest wait
	 * in the ring, whole. One message in three is two packets. */
	seq_established(65536, 65536, 0);
	for (i = 0; i < 1000; i++) {
		uint32_t plen = 20 + i % 40;
		bool eom = i % 3 != 0;

		guest_send(VSOCK_OP_RW, eom ? VSOCK_SEQ_EOM : 0, off, plen);
		off += plen;
		sent += eom;
		/* Mid-message, some messages whole in the ring. */
		if (i == 600)
			maybe_hand_over(65536);
	}
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	assert_true(conn.seq.msgs > 0);
	assert_true(vsock_conn_epoll_events(&conn) & EPOLLOUT);
	/* Then it reads: every message in order, its length that of its
	 * packets, its bytes the pattern where it started. */
	for (i = 0; i < 1000; i++) {
		len += 20 + i % 40;
		if (i % 3 == 0)
			continue;
		n = host_msg(at);
		if (n < 0) {
			vsock_conn_flush(&conn);
			n = host_msg(at);
		}
		assert_int_equal(n, len);
		at += len;
		len = 0;
		got++;
	}
	assert_int_equal(got, sent);
	assert_int_equal(host_msg(0), -1);
	assert_int_equal(conn.seq.msgs, 0);
	/* The last packet (i = 999) began a message that has not ended. */
	assert_int_equal(conn.seq.partial, len);
	assert_int_equal(vmio_byte_ring_len(&conn.ring), len);
	assert_int_equal(vsock_credit_rx_pending(&conn.credit), len);
}

static void test_seq_guest_message_too_large(void **state)
{
	seq_established(8192, 65536, 0);
	guest_send(VSOCK_OP_RW, 0, 0, 4096);
	guest_send(VSOCK_OP_RW, 0, 4096, 4096);
	/* The whole buffer and no end: refused, not split. */
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_host_eof();
	expect_op(VSOCK_OP_RST);
}

static void test_seq_shutdown_mid_message(void **state)
{
	seq_established(65536, 65536, 0);
	guest_send(VSOCK_OP_RW, VSOCK_SEQ_EOM, 0, 10);
	guest_send(VSOCK_OP_RW, 0, 10, 20);
	guest_send(VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_SEND, 0, 0);
	/* The whole message arrives, the half one never does. */
	assert_int_equal(host_msg(0), 10);
	expect_host_eof();
	assert_int_equal(vsock_credit_rx_pending(&conn.credit), 0);
}

static void test_seq_host_message_to_guest(void **state)
{
	static uint8_t msg[10000];
	struct vsock_hdr h;
	size_t i, got = 0;

	seq_established(65536, 65536, 0);
	for (i = 0; i < sizeof(msg); i++)
		msg[i] = pattern(i);
	assert_int_equal(send(host, msg, sizeof(msg), 0), sizeof(msg));
	assert_int_equal(send(host, msg, 3, 0), 3);
	vsock_conn_host_readable(&conn, false);
	/* 4096 + 4096 + 1808, EOM on the last only; then the next one. */
	while (got < sizeof(msg)) {
		assert_true(guest_recv(&h) > 0);
		assert_int_equal(h.op, VSOCK_OP_RW);
		assert_memory_equal(rxbuf + VSOCK_HDR_SIZE, msg + got, h.len);
		got += h.len;
		assert_int_equal(h.flags,
				 got == sizeof(msg) ? VSOCK_SEQ_EOM : 0);
		/* The host message half sent to the guest. */
		if (got == RX_DATA)
			maybe_hand_over(65536);
	}
	assert_int_equal(got, sizeof(msg));
	assert_true(guest_recv(&h) > 0);
	assert_int_equal(h.len, 3);
	assert_int_equal(h.flags, VSOCK_SEQ_EOM);
	/* Drained: no packet, and EPOLLIN back on. */
	assert_int_equal(guest_recv(&h), 0);
	assert_true(vsock_conn_epoll_events(&conn) & EPOLLIN);
	/* Host close: SHUTDOWN as for a stream. */
	close(host);
	host = -1;
	vsock_conn_host_readable(&conn, false);
	expect_op(VSOCK_OP_SHUTDOWN);
}

static void test_seq_host_message_too_large(void **state)
{
	static uint8_t msg[5000];
	struct vsock_hdr h;

	/* The guest's buffer is 4096 bytes: a message of 5000 can never be
	 * taken whole. */
	seq_established(65536, 4096, 0);
	assert_int_equal(send(host, msg, sizeof(msg), 0), sizeof(msg));
	vsock_conn_host_readable(&conn, false);
	assert_true(guest_recv(&h) > 0);
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
	expect_host_eof();
}

static void test_seq_local_connect(void **state)
{
	char line[32];
	ssize_t n;

	conn_type = VSOCK_TYPE_SEQPACKET;
	guest_buf_alloc = 65536;
	pair(65536, false, 0);
	expect_op(VSOCK_OP_REQUEST);
	guest_send(VSOCK_OP_RESPONSE, 0, 0, 0);
	assert_int_equal(conn.state, VSOCK_CONN_ESTABLISHED);
	/* "OK <port>\n" is one message. */
	n = recv(host, line, sizeof(line), MSG_DONTWAIT);
	assert_int_equal(n, 8);
	assert_memory_equal(line, "OK 5000\n", 8);
	/* A stream packet on the seqpacket flow is another flow: reset. */
	conn_type = VSOCK_TYPE_STREAM;
	guest_send(VSOCK_OP_RW, 0, 0, 4);
	conn_type = VSOCK_TYPE_SEQPACKET;
	assert_int_equal(conn.state, VSOCK_CONN_KILLED);
}

/* ---- The guest's packet limit and merging (guest_backlog.h) ---------- */

/* Sends n bytes of the pattern, from stream offset at, to the guest. */
static void host_send_pattern(size_t at, size_t n)
{
	static uint8_t buf[8 * RX_DATA];

	assert_true(n <= sizeof(buf));
	for (size_t i = 0; i < n; i++)
		buf[i] = pattern(at + i);
	assert_int_equal(send(host, buf, n, 0), (ssize_t)n);
}

/* The next packet is an RW of len bytes of the pattern at `at`, with
 * `flags`. */
static void expect_rw(size_t at, uint32_t len, uint32_t flags)
{
	struct vsock_hdr h;

	assert_int_equal(guest_recv(&h), VSOCK_HDR_SIZE + len);
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_int_equal(h.flags, flags);
	for (uint32_t k = 0; k < len; k++)
		assert_int_equal(rxbuf[VSOCK_HDR_SIZE + k], pattern(at + k));
}

/* The guest read through fwd_cnt and says so. */
static void guest_reads_to(uint32_t fwd_cnt)
{
	guest_fwd_cnt = fwd_cnt;
	guest_send(VSOCK_OP_CREDIT_UPDATE, 0, 0, 0);
}

/* Four packets at 65536 bytes each fill a 256 KiB guest: the fifth
 * waits, with byte credit to spare, until the guest has read one through
 * (a packet half read still counts, as Linux counts it); meanwhile the
 * host socket is not watched, and credit is asked for after a tick. */
static void test_packet_bound(void **state)
{
	established(65536, 262144, 0);
	vsock_conn_set_packet_overhead(&conn, 65536);
	host_send_pattern(0, 5 * RX_DATA);
	vsock_conn_host_readable(&conn, false);
	for (unsigned i = 0; i < 4; i++)
		expect_rw(i * RX_DATA, RX_DATA, 0);
	assert_int_equal(vsock_backlog_len(&conn.backlog), 4);
	assert_true(vsock_credit_peer_free(&conn.credit) > 0);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(conn.stats.packet_stalls, 1);
	assert_int_equal(conn.stats.credit_stalls, 0);
	assert_int_equal(vsock_conn_epoll_events(&conn), 0);
	assert_true(vsock_conn_wants_tick(&conn));
	/* Four packets the guest holds unread. */
	maybe_hand_over(65536);

	guest_reads_to(RX_DATA / 2);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	vsock_conn_tick(&conn);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	vsock_conn_tick(&conn);
	assert_int_equal(vsock_conn_pending_to_guest(&conn),
			 VSOCK_RXOP_CREDIT_REQUEST);
	expect_op(VSOCK_OP_CREDIT_REQUEST);

	guest_reads_to(RX_DATA);
	assert_int_equal(vsock_backlog_len(&conn.backlog), 3);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	expect_rw(4 * RX_DATA, RX_DATA, 0);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(conn.stats.packet_stalls, 2);
}

/* A batched read takes no more chains than the guest has room for
 * packets: three of the four, the fourth given back. */
static void test_packet_bound_batch(void **state)
{
	uint32_t written[BATCH];

	established(65536, 262144, 0);
	vsock_conn_set_packet_overhead(&conn, 65536);
	host_send_pattern(0, RX_DATA);
	vsock_conn_host_readable(&conn, false);
	expect_rw(0, RX_DATA, 0);
	host_send_pattern(RX_DATA, 4 * RX_DATA);
	vsock_conn_host_readable(&conn, false);
	assert_int_equal(guest_recv_batch(written), 3);
	assert_int_equal(vsock_backlog_len(&conn.backlog), 4);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
}

/* Overhead 0: bytes only, as before the bound: the whole credit goes. */
static void test_packet_bound_off(void **state)
{
	established(65536, 262144, 0);
	vsock_conn_set_packet_overhead(&conn, 0);
	host_send_pattern(0, 5 * RX_DATA);
	vsock_conn_host_readable(&conn, false);
	for (unsigned i = 0; i < 5; i++)
		expect_rw(i * RX_DATA, RX_DATA, 0);
	assert_int_equal(conn.stats.packet_stalls, 0);
}

/* Seqpacket: the bound stops a message between two of its packets, and
 * the rest of it goes, EOM on its last, once the guest read the message
 * before it. */
static void test_seq_packet_bound_mid_message(void **state)
{
	static uint8_t msg[10000];

	seq_established(65536, 262144, 0);
	vsock_conn_set_packet_overhead(&conn, 65536);
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = pattern(i);
	assert_int_equal(send(host, msg, sizeof(msg), 0), sizeof(msg));
	assert_int_equal(send(host, msg, sizeof(msg), 0), sizeof(msg));
	vsock_conn_host_readable(&conn, false);
	expect_rw(0, 4096, 0);
	expect_rw(4096, 4096, 0);
	expect_rw(8192, 1808, VSOCK_SEQ_EOM);
	expect_rw(0, 4096, 0);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	/* The first message read: three packets freed. */
	guest_reads_to(sizeof(msg));
	assert_int_equal(vsock_backlog_len(&conn.backlog), 1);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	expect_rw(4096, 4096, 0);
	expect_rw(8192, 1808, VSOCK_SEQ_EOM);
}

/* A message that needs more packets than the bound allows: a guest
 * cannot read any of it before its EOM (Linux dequeues seqpacket data a
 * whole message at a time), so its fwd_cnt stays put and a bound that
 * stopped the message midway would never open again. Here 4 packets at
 * 65536 bytes each (the largest --rx-packet-overhead) in 256 KiB, a
 * message of 5 packets of 4 KiB; the same comes with the default 1024
 * and a guest that posts rx buffers under 1 KiB. The whole message must
 * go: the guest's own limit (576 bytes a packet on Linux) takes any
 * message its buffer takes, in buffers of 576 bytes or more. */
static void test_seq_message_longer_than_bound(void **state)
{
	static uint8_t msg[5 * 4096 - 100];

	seq_established(65536, 262144, 0);
	vsock_conn_set_packet_overhead(&conn, 65536);
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = pattern(i);
	assert_int_equal(send(host, msg, sizeof(msg), 0), sizeof(msg));
	vsock_conn_host_readable(&conn, false);
	for (unsigned i = 0; i < 4; i++)
		expect_rw(i * 4096, 4096, 0);
	/* The guest holds four packets of a message it cannot read yet,
	 * and says so whenever asked. */
	guest_reads_to(0);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	expect_rw(4 * 4096, 4096 - 100, VSOCK_SEQ_EOM);
}

/* Sends one 100-byte host write and tells the connection. */
static void host_write_small(size_t *at)
{
	host_send_pattern(*at, 100);
	*at += 100;
	vsock_conn_host_readable(&conn, false);
}

/* A guest that keeps up never sees a write held; one that holds
 * VSOCK_CONN_MERGE_AFTER of our packets unread gets the small writes that
 * follow merged into one full rx buffer, the host socket watched
 * edge-triggered meanwhile so each new write is looked at. */
static void test_merge_hold(void **state)
{
	size_t at = 0;

	established(65536, 262144, 0);
	for (unsigned i = 0; i < VSOCK_CONN_MERGE_AFTER; i++) {
		host_write_small(&at);
		assert_false(conn.merge_hold);
		assert_int_equal(vsock_conn_pending_to_guest(&conn),
				 VSOCK_RXOP_RW);
		expect_rw(at - 100, 100, 0);
	}
	host_write_small(&at);
	assert_true(conn.merge_hold);
	assert_int_equal(conn.stats.merge_holds, 1);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	assert_int_equal(vsock_conn_epoll_events(&conn),
			 EPOLLIN | EPOLLRDHUP | EPOLLET);
	assert_true(vsock_conn_wants_tick(&conn));
	/* Still short of a packet: still held, counted once. */
	host_send_pattern(at, 3900);
	at += 3900;
	vsock_conn_host_readable(&conn, false);
	assert_true(conn.merge_hold);
	assert_int_equal(conn.stats.merge_holds, 1);
	/* A packet's worth: it goes, one full buffer. */
	host_send_pattern(at, 200);
	at += 200;
	vsock_conn_host_readable(&conn, false);
	assert_false(conn.merge_hold);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	expect_rw(800, RX_DATA, 0);
	/* The rest, short of a packet, is held again (see
	 * test_merge_after_full_packet); the tick sends it. */
	assert_int_equal(conn.stats.merge_holds, 2);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
	vsock_conn_tick(&conn);
	expect_rw(800 + RX_DATA, (uint32_t)(at - 800 - RX_DATA), 0);
}

/* What ends a hold short of a packet: the tick, the guest reading below
 * the mark, the host hanging up; and a guest that shut down receiving
 * has nothing held for it. */
static void test_merge_release(void **state)
{
	size_t at = 0;

	established(65536, 262144, 0);
	for (unsigned i = 0; i < VSOCK_CONN_MERGE_AFTER; i++) {
		host_write_small(&at);
		expect_rw(at - 100, 100, 0);
	}
	host_write_small(&at);
	assert_true(conn.merge_hold);
	vsock_conn_tick(&conn);
	assert_false(conn.merge_hold);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	expect_rw(at - 100, 100, 0);

	/* Nine held: reading one leaves eight, still behind; two, seven. */
	host_write_small(&at);
	assert_true(conn.merge_hold);
	guest_reads_to(100);
	assert_true(conn.merge_hold);
	guest_reads_to(200);
	assert_false(conn.merge_hold);
	assert_int_equal(vsock_conn_pending_to_guest(&conn), VSOCK_RXOP_RW);
	expect_rw(at - 100, 100, 0);

	/* Eight held again. */
	host_write_small(&at);
	assert_true(conn.merge_hold);
	vsock_conn_host_readable(&conn, true);
	assert_false(conn.merge_hold);
	expect_rw(at - 100, 100, 0);

	host_write_small(&at);
	assert_true(conn.merge_hold);
	guest_send(VSOCK_OP_SHUTDOWN, VSOCK_SHUTDOWN_RCV, 0, 0);
	assert_false(conn.merge_hold);
	assert_false(vsock_conn_wants_tick(&conn));
	assert_int_equal(vsock_conn_pending_to_guest(&conn), 0);
}

/* Overhead 0 turns merging off with the bound. */
static void test_merge_off(void **state)
{
	size_t at = 0;

	established(65536, 262144, 0);
	vsock_conn_set_packet_overhead(&conn, 0);
	for (unsigned i = 0; i < 2 * VSOCK_CONN_MERGE_AFTER; i++) {
		host_write_small(&at);
		assert_false(conn.merge_hold);
		expect_rw(at - 100, 100, 0);
	}
	assert_int_equal(conn.stats.merge_holds, 0);
}

static void test_full_host_socket_handed_over(void **state)
{
	handover = true;
	test_full_host_socket(state);
}

static void test_seq_queued_handed_over(void **state)
{
	handover = true;
	test_seq_queued_behind_full_host(state);
}

static void test_seq_host_message_handed_over(void **state)
{
	handover = true;
	test_seq_host_message_to_guest(state);
}

static void test_packet_bound_handed_over(void **state)
{
	handover = true;
	test_packet_bound(state);
}

/* Records this vmio could not have written are refused. */
static void test_handover_refused(void **state)
{
	struct vmio_wire_writer w;
	struct vmio_wire_reader r;
	struct vsock_conn next;
	uint32_t idx;

	established(SMALL_TX, 65536, 4096);
	fill_host();
	vmio_wire_writer_init(&w, 0);
	vsock_conn_save(&conn, 0, &w);
	/* A smaller --tx-buffer-size than the buffer. */
	vmio_wire_reader_init(&r, w.buf, w.len);
	assert_int_equal(vsock_conn_restore(&next, GUEST_CID, SMALL_TX / 2, 0,
					    &r, &idx),
			 -1);
	assert_string_equal(r.why, "a buffer size this vmio would not give");
	/* A type that is neither stream nor seqpacket. */
	w.buf[0] = 9;
	vmio_wire_reader_init(&r, w.buf, w.len);
	assert_int_equal(vsock_conn_restore(&next, GUEST_CID, SMALL_TX, 0, &r,
					    &idx),
			 -1);
	assert_string_equal(r.why, "a connection field out of range");
	w.buf[0] = VSOCK_TYPE_STREAM;
	/* More bytes held than the credit says (rx_cnt, after type, state,
	 * flags and seven u32). */
	w.buf[4 + 7 * 4 + 4]++;
	vmio_wire_reader_init(&r, w.buf, w.len);
	assert_int_equal(vsock_conn_restore(&next, GUEST_CID, SMALL_TX, 0, &r,
					    &idx),
			 -1);
	assert_string_equal(r.why, "buffered bytes that do not match the credit");
	vmio_wire_writer_fini(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_peer_connect, teardown),
		cmocka_unit_test_teardown(test_spliced_chain_held, teardown),
		cmocka_unit_test_teardown(test_op_before_response, teardown),
		cmocka_unit_test_teardown(test_local_connect, teardown),
		cmocka_unit_test_teardown(test_local_refused, teardown),
		cmocka_unit_test_teardown(test_local_unexpected, teardown),
		cmocka_unit_test_teardown(test_guest_to_host, teardown),
		cmocka_unit_test_teardown(test_proactive_credit_update,
					  teardown),
		cmocka_unit_test_teardown(test_host_to_guest_credit, teardown),
		cmocka_unit_test_teardown(test_credit_overrun, teardown),
		cmocka_unit_test_teardown(test_fwd_cnt_ahead, teardown),
		cmocka_unit_test_teardown(test_full_host_socket, teardown),
		cmocka_unit_test_teardown(test_full_host_overrun, teardown),
		cmocka_unit_test_teardown(test_guest_shutdown_send, teardown),
		cmocka_unit_test_teardown(test_host_eof, teardown),
		cmocka_unit_test_teardown(test_guest_close_with_buffer,
					  teardown),
		cmocka_unit_test_teardown(test_guest_rst, teardown),
		cmocka_unit_test_teardown(test_host_to_guest_batch, teardown),
		cmocka_unit_test_teardown(test_merge_after_full_packet,
					  teardown),
		cmocka_unit_test_teardown(test_credit_request, teardown),
		cmocka_unit_test_teardown(test_unexpected_op, teardown),
		cmocka_unit_test_teardown(test_second_request, teardown),
		cmocka_unit_test_teardown(test_rw_after_shutdown, teardown),
		cmocka_unit_test_teardown(test_host_gone, teardown),
		cmocka_unit_test_teardown(test_seq_guest_message_whole,
					  teardown),
		cmocka_unit_test_teardown(test_seq_queued_behind_full_host,
					  teardown),
		cmocka_unit_test_teardown(test_seq_guest_message_too_large,
					  teardown),
		cmocka_unit_test_teardown(test_seq_shutdown_mid_message,
					  teardown),
		cmocka_unit_test_teardown(test_seq_host_message_to_guest,
					  teardown),
		cmocka_unit_test_teardown(test_seq_host_message_too_large,
					  teardown),
		cmocka_unit_test_teardown(test_seq_local_connect, teardown),
		cmocka_unit_test_teardown(test_packet_bound, teardown),
		cmocka_unit_test_teardown(test_packet_bound_batch, teardown),
		cmocka_unit_test_teardown(test_packet_bound_off, teardown),
		cmocka_unit_test_teardown(test_seq_packet_bound_mid_message,
					  teardown),
		cmocka_unit_test_teardown(test_seq_message_longer_than_bound,
					  teardown),
		cmocka_unit_test_teardown(test_merge_hold, teardown),
		cmocka_unit_test_teardown(test_merge_release, teardown),
		cmocka_unit_test_teardown(test_merge_off, teardown),
		cmocka_unit_test_teardown(test_full_host_socket_handed_over,
					  teardown),
		cmocka_unit_test_teardown(test_seq_queued_handed_over,
					  teardown),
		cmocka_unit_test_teardown(test_seq_host_message_handed_over,
					  teardown),
		cmocka_unit_test_teardown(test_packet_bound_handed_over,
					  teardown),
		cmocka_unit_test_teardown(test_handover_refused, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
