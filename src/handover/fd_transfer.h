/* Carrying one record and a list of file descriptors across a unix
 * SOCK_SEQPACKET socket, without blocking: each side is a state machine
 * its owner steps when the loop says the socket is ready.
 *
 * On the wire, in this order, one message each:
 *   the header: magic, record length, fd count   (3 x u32, no fds)
 *   the fds, at most VMIO_FD_CHUNK a message: u32 count + SCM_RIGHTS
 *   the record, in pieces of at most VMIO_FD_PIECE bytes
 * Seqpacket keeps each message whole, and the fds ride on the message
 * that names their count, so the receiver can hold every one to the
 * count announced. The receiver treats the sender as hostile: sizes past
 * its bounds, fds where none are due, a cut message or cut control data
 * fail the transfer, and every fd it received is closed on failure: no
 * fd leaks, none is taken twice. */
#ifndef VMIO_HANDOVER_FD_TRANSFER_H
#define VMIO_HANDOVER_FD_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

/* SCM_MAX_FD in the kernel: more in one message is refused (EINVAL). */
#define VMIO_FD_CHUNK 253u
#define VMIO_FD_PIECE 32768u
#define VMIO_FD_MAGIC 0x564d4658u /* "VMFX" */

/* One message of len bytes with nfds fds (at most VMIO_FD_CHUNK; the
 * kernel takes copies), without blocking: seqpacket sends it whole or
 * not at all. Returns 0, -EAGAIN or -errno. What the sender's steps are
 * made of, and what a test sends a receiver as a hostile peer would. */
int vmio_fd_send_message(int sock, const void *data, size_t len,
			 const int *fds, size_t nfds);

struct vmio_fd_sender {
	int sock;
	const uint8_t *rec;
	size_t len, off;
	const int *fds;
	size_t nfds, fds_sent;
	int stage;
};

/* Sends rec (len bytes) and fds (nfds, still the caller's: the kernel
 * takes copies) on sock, a non-blocking seqpacket socket. Both arrays
 * must outlive the transfer. */
void vmio_fd_sender_init(struct vmio_fd_sender *s, int sock,
			 const uint8_t *rec, size_t len, const int *fds,
			 size_t nfds);
/* Sends what the socket takes. Returns 0 once all is sent, -EAGAIN to
 * be called again when it is writable, or -errno. */
int vmio_fd_sender_step(struct vmio_fd_sender *s);

struct vmio_fd_receiver {
	int sock;
	size_t max_len, max_fds;
	uint8_t *rec;
	size_t len, off;
	int *fds;
	size_t nfds, got;
	int stage;
};

/* Receives on sock (non-blocking seqpacket) a record of at most max_len
 * bytes and at most max_fds fds. */
void vmio_fd_receiver_init(struct vmio_fd_receiver *r, int sock,
			   size_t max_len, size_t max_fds);
/* Takes what has arrived. Returns 0 once all is in (r->rec, r->len,
 * r->fds, r->nfds), -EAGAIN to be called again when readable, or -1
 * with the reason in why (the fds received are closed then). */
int vmio_fd_receiver_step(struct vmio_fd_receiver *r, char *why,
			  size_t why_size);
/* Closes every fd still in r->fds (those not taken: set to -1 as they
 * are taken) and frees the record. */
void vmio_fd_receiver_fini(struct vmio_fd_receiver *r);

#endif
