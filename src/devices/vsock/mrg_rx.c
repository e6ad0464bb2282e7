/* Mergeable rx buffers; see mrg_rx.h. */
#include "devices/vsock/mrg_rx.h"

#include <string.h>

void vsock_mrg_begin(struct vsock_mrg *m, bool mergeable)
{
	m->view.nout = 0;
	m->view.nin = 0;
	m->view.out_len = 0;
	m->view.in_len = 0;
	m->view.head = 0;
	m->n = 0;
	m->room = 0;
	m->mergeable = mergeable;
}

/* Appends [base, base + len) of a buffer to the view, leaving out the
 * part that falls on num_buffers: real offsets [44, 46) of the packet
 * (none in the plain layout). at is the real offset of base. */
static bool view_append(struct vsock_mrg *m, char *base, uint64_t len,
			uint64_t at, unsigned *slots)
{
	const uint64_t hole = VSOCK_HDR_SIZE, hole_end = vsock_mrg_hdr_size(m);
	uint64_t ends[2][2] = { { at, at + len }, { 0, 0 } };
	unsigned parts = 1;

	if (hole_end > hole && at < hole_end && at + len > hole) {
		/* Before the hole, and after it. */
		ends[0][1] = at < hole ? hole : at;
		ends[1][0] = hole_end;
		ends[1][1] = at + len > hole_end ? at + len : hole_end;
		parts = 2;
	}
	for (unsigned p = 0; p < parts; p++) {
		uint64_t a = ends[p][0], b = ends[p][1];

		if (b <= a)
			continue;
		if (*slots == VMIO_CHAIN_MAX_IOV)
			return false;
		m->view.iov[(*slots)++] = (struct iovec){
			.iov_base = base + (a - at),
			.iov_len = (size_t)(b - a),
		};
	}
	return true;
}

bool vsock_mrg_add(struct vsock_mrg *m, const struct vmio_chain *c)
{
	unsigned slots = m->view.nin;
	uint64_t at = m->room;

	/* A plain buffer's used length is what was written, at most a
	 * packet: its size need not fit cap. */
	if (vsock_mrg_full(m) || (m->mergeable && c->in_len > UINT32_MAX))
		return false;
	for (unsigned i = 0; i < c->nin; i++) {
		const struct iovec *v = &c->iov[c->nout + i];

		if (!view_append(m, v->iov_base, v->iov_len, at, &slots))
			return false; /* view.nin unchanged: not added */
		at += v->iov_len;
	}
	m->view.nin = slots;
	m->view.in_len = !m->mergeable	      ? at
			 : at > VSOCK_MRG_HDR_SIZE ? at - 2
			 : at > VSOCK_HDR_SIZE	  ? VSOCK_HDR_SIZE
						  : at;
	m->cap[m->n++] = c->in_len > UINT32_MAX ? UINT32_MAX
						: (uint32_t)c->in_len;
	m->room = at;
	return true;
}

uint32_t vsock_mrg_payload_room(const struct vsock_mrg *m)
{
	uint64_t p;

	if (m->room < vsock_mrg_hdr_size(m))
		return 0;
	p = m->room - vsock_mrg_hdr_size(m);
	return p > VSOCK_MAX_PKT_PAYLOAD ? VSOCK_MAX_PKT_PAYLOAD : (uint32_t)p;
}

/* Writes byte b at real offset off of the packet. */
static void put_byte(const struct vsock_mrg *m,
		     const struct vmio_chain *const bufs[], uint64_t off,
		     uint8_t b)
{
	for (unsigned i = 0; i < m->n; i++) {
		if (off < m->cap[i]) {
			vmio_chain_write(bufs[i], off, &b, 1);
			return;
		}
		off -= m->cap[i];
	}
}

unsigned vsock_mrg_finish(const struct vsock_mrg *m,
			  const struct vmio_chain *const bufs[], uint32_t w,
			  uint32_t used[])
{
	const uint32_t hole = vsock_mrg_hdr_size(m) - VSOCK_HDR_SIZE;
	uint64_t left, real;
	unsigned k = 0;
	uint16_t count;

	if (w < VSOCK_HDR_SIZE || (uint64_t)w + hole > m->room)
		return 0;
	real = (uint64_t)w + hole;
	for (left = real; left && k < m->n; k++) {
		used[k] = left < m->cap[k] ? (uint32_t)left : m->cap[k];
		left -= used[k];
	}
	if (!m->mergeable)
		return k;
	/* le16, a byte at a time: it may straddle two buffers. */
	count = (uint16_t)k;
	put_byte(m, bufs, VSOCK_HDR_SIZE, (uint8_t)(count & 0xff));
	put_byte(m, bufs, VSOCK_HDR_SIZE + 1, (uint8_t)(count >> 8));
	return k;
}
