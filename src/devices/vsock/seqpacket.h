/* Seqpacket message boundaries of one vsock connection (connection.h
 * says how the connection uses them), kept apart from its state machine:
 *
 *   guest -> host  the ends of the messages that wait in the connection's
 *                  byte ring, two bitmaps of one bit per buffer byte (EOM,
 *                  then EOR), set on a message's last byte; how many whole
 *                  messages wait; and the partial message at the ring's
 *                  tail, whose EOM has not come.
 *   host -> guest  the host message being sent, read whole, and what the
 *                  next RW packet of it carries (EOM, and EOR, on the
 *                  last).
 *
 * A mark is cleared in the same call that takes its message's bytes off
 * the ring, and the partial message has none: the ring, which starts
 * again at offset 0 once emptied, never meets a stale mark. */
#ifndef VMIO_DEVICES_VSOCK_SEQPACKET_H
#define VMIO_DEVICES_VSOCK_SEQPACKET_H

#include <stdbool.h>
#include <stdint.h>

#include "util/byte_ring.h"
#include "devices/vsock/packet.h"

struct vsock_seq {
	uint8_t *ends;        /* NULL until the first byte is buffered */
	uint32_t msgs;        /* whole messages in the ring */
	uint32_t partial;     /* bytes of the unfinished one, at the tail */
	uint8_t *hmsg;        /* the host message; NULL until the first */
	uint32_t hmsg_len, hmsg_off;
	uint32_t hmsg_pkts;   /* packets of it sent so far */
	bool hmsg_eor;
};

/* Makes the end maps for a ring of ring_size bytes, once. Returns 0, or
 * -1 when out of memory. */
int vsock_seq_ends_alloc(struct vsock_seq *s, size_t ring_size);

/* Length of the whole message that starts at byte from of r, and its
 * EOR; 0 if no message ends after from (the partial one, or none). */
uint32_t vsock_seq_msg_len(const struct vsock_seq *s,
			   const struct vmio_byte_ring *r, uint32_t from,
			   bool *eor);
/* Length of the first whole message in r (msgs > 0), and its EOR. */
uint32_t vsock_seq_first(const struct vsock_seq *s,
			 const struct vmio_byte_ring *r, bool *eor);
/* The first message (len bytes, from vsock_seq_first) went to the host:
 * its marks are cleared and its bytes taken off r. */
void vsock_seq_sent_first(struct vsock_seq *s, struct vmio_byte_ring *r,
			  uint32_t len);
/* The ring's last byte ends the partial message: it is whole now. */
void vsock_seq_end_msg(struct vsock_seq *s, const struct vmio_byte_ring *r,
		       bool eor);
/* Takes the partial message off the ring's tail. Returns its bytes. */
uint32_t vsock_seq_drop_partial(struct vsock_seq *s,
				struct vmio_byte_ring *r);

/* The buffer to read a host message into, size bytes (made on first use;
 * NULL when out of memory). */
uint8_t *vsock_seq_msg_buf(struct vsock_seq *s, size_t size);
/* A message of len bytes was read into the buffer. */
void vsock_seq_msg_loaded(struct vsock_seq *s, uint32_t len, bool eor);
/* A host message is under way (some of it not sent). */
static inline bool vsock_seq_msg_pending(const struct vsock_seq *s)
{
	return s->hmsg_off != s->hmsg_len;
}
/* Writes the next at most cap bytes of the host message into rx after
 * the header; *flags gets EOM (and EOR) on its last packet. Returns the
 * payload bytes written. */
uint32_t vsock_seq_msg_take(struct vsock_seq *s, const struct vmio_chain *rx,
			    uint32_t cap, uint32_t *flags);

/* The largest message, at most want, that one sendmsg on fd can carry;
 * raises SO_SNDBUF towards want first. A descriptor that is no socket
 * (tests) limits nothing. */
uint32_t vsock_seq_host_msg_max(int fd, uint32_t want);

/* Frees both buffers and forgets every message. */
void vsock_seq_free(struct vsock_seq *s);

#endif
