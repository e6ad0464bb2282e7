/* Seqpacket message boundaries; see seqpacket.h. */
#include "devices/vsock/seqpacket.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/socket.h>

/* The byte of the EOM map (eor false) or the EOR map (eor true) that
 * holds the bit of buffer offset pos. */
static uint8_t *map_byte(const struct vsock_seq *s,
			 const struct vmio_byte_ring *r, uint32_t pos, bool eor)
{
	return s->ends + (eor ? (r->size + 7u) / 8u : 0) + pos / 8u;
}

static bool map_bit(const struct vsock_seq *s, const struct vmio_byte_ring *r,
		    uint32_t pos, bool eor)
{
	return *map_byte(s, r, pos, eor) & (1u << (pos % 8u));
}

static void map_set(struct vsock_seq *s, const struct vmio_byte_ring *r,
		    uint32_t pos, bool eor, bool on)
{
	uint8_t *b = map_byte(s, r, pos, eor);

	if (on)
		*b |= (uint8_t)(1u << (pos % 8u));
	else
		*b &= (uint8_t)~(1u << (pos % 8u));
}

int vsock_seq_ends_alloc(struct vsock_seq *s, size_t ring_size)
{
	if (!s->ends)
		s->ends = calloc(2, (ring_size + 7u) / 8u);
	return s->ends ? 0 : -1;
}

uint32_t vsock_seq_msg_len(const struct vsock_seq *s,
			   const struct vmio_byte_ring *r, uint32_t from,
			   bool *eor)
{
	uint32_t len = (uint32_t)vmio_byte_ring_len(r), i = from;

	while (i < len) {
		uint32_t pos = (uint32_t)vmio_byte_ring_pos(r, i);

		/* Whole empty bytes of the map at once. */
		if (pos % 8u == 0 && i + 8u <= len && pos + 8u <= r->size &&
		    !*map_byte(s, r, pos, false)) {
			i += 8;
			continue;
		}
		if (map_bit(s, r, pos, false)) {
			*eor = map_bit(s, r, pos, true);
			return i + 1 - from;
		}
		i++;
	}
	*eor = false;
	return 0;
}

uint32_t vsock_seq_first(const struct vsock_seq *s,
			 const struct vmio_byte_ring *r, bool *eor)
{
	uint32_t n = vsock_seq_msg_len(s, r, 0, eor);

	/* No end: cannot happen with msgs > 0. */
	return n ? n : (uint32_t)vmio_byte_ring_len(r);
}

void vsock_seq_sent_first(struct vsock_seq *s, struct vmio_byte_ring *r,
			  uint32_t len)
{
	uint32_t end = (uint32_t)vmio_byte_ring_pos(r, len - 1);

	map_set(s, r, end, false, false);
	map_set(s, r, end, true, false);
	vmio_byte_ring_consumed(r, len);
	s->msgs--;
}

void vsock_seq_end_msg(struct vsock_seq *s, const struct vmio_byte_ring *r,
		       bool eor)
{
	uint32_t end = (uint32_t)vmio_byte_ring_pos(r, vmio_byte_ring_len(r) - 1);

	map_set(s, r, end, false, true);
	map_set(s, r, end, true, eor);
	s->msgs++;
	s->partial = 0;
}

uint32_t vsock_seq_drop_partial(struct vsock_seq *s, struct vmio_byte_ring *r)
{
	uint32_t n = s->partial;

	/* The partial message is the last bytes held and carries no mark. */
	vmio_byte_ring_unproduce(r, n);
	s->partial = 0;
	return n;
}

uint8_t *vsock_seq_msg_buf(struct vsock_seq *s, size_t size)
{
	if (!s->hmsg)
		s->hmsg = malloc(size);
	return s->hmsg;
}

void vsock_seq_msg_loaded(struct vsock_seq *s, uint32_t len, bool eor)
{
	s->hmsg_len = len;
	s->hmsg_off = 0;
	s->hmsg_eor = eor;
}

uint32_t vsock_seq_msg_take(struct vsock_seq *s, const struct vmio_chain *rx,
			    uint32_t cap, uint32_t *flags)
{
	if (cap > s->hmsg_len - s->hmsg_off)
		cap = s->hmsg_len - s->hmsg_off;
	if (!cap)
		return 0;
	cap = (uint32_t)vsock_pkt_write_payload(rx, 0, s->hmsg + s->hmsg_off,
						cap);
	s->hmsg_off += cap;
	s->hmsg_pkts++;
	if (s->hmsg_off == s->hmsg_len) {
		*flags = VSOCK_SEQ_EOM | (s->hmsg_eor ? VSOCK_SEQ_EOR : 0);
		s->hmsg_off = s->hmsg_len = s->hmsg_pkts = 0;
	}
	return cap;
}

/* AF_UNIX refuses (EMSGSIZE) a message longer than the sender's
 * SO_SNDBUF less this. */
#define UNIX_MSG_OVERHEAD 32

uint32_t vsock_seq_host_msg_max(int fd, uint32_t want)
{
	socklen_t l = sizeof(int);
	int v;

	if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &l) ||
	    v <= UNIX_MSG_OVERHEAD)
		return want;
	if ((uint32_t)(v - UNIX_MSG_OVERHEAD) < want) {
		/* The kernel doubles what it is given and caps it at
		 * net.core.wmem_max. */
		uint64_t need = (uint64_t)want + UNIX_MSG_OVERHEAD;
		int ask = need / 2 + 1 > INT_MAX / 2 ? INT_MAX / 2
						     : (int)(need / 2 + 1);

		l = sizeof(int);
		if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &ask, sizeof(ask)) ||
		    getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &l) ||
		    v <= UNIX_MSG_OVERHEAD)
			return want;
	}
	return (uint32_t)(v - UNIX_MSG_OVERHEAD) < want
		       ? (uint32_t)(v - UNIX_MSG_OVERHEAD)
		       : want;
}

void vsock_seq_free(struct vsock_seq *s)
{
	free(s->ends);
	free(s->hmsg);
	*s = (struct vsock_seq){ 0 };
}
