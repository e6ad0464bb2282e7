/* Guest-to-host data without vmio's copy: a tx chain's payload, in guest
 * memory, is vmspliced into a pipe and spliced from there into the host
 * socket. AF_UNIX stream sockets take spliced pages by reference since
 * Linux 6.5 (MSG_SPLICE_PAGES), so the host reader copies straight from
 * guest pages. The chain must then stay with the device until the reader
 * has read those bytes: a guest that got it back could rewrite the buffer
 * under the reader. Which bytes are read is told by SIOCOUTQ (the socket's
 * unread send memory, which the kernel releases skb by skb, in order):
 *
 *   every send on a socket that holds chains is measured, SIOCOUTQ before
 *   and after; `added` sums the growth. A chain's mark is `added` just
 *   after its bytes went in. The chain is read through once SIOCOUTQ is
 *   at most added - mark, the memory of what was queued behind it.
 *
 * A reader consuming during a send makes the measured growth smaller than
 * the real one, which only makes the test stricter (a chain is released
 * later, never early); once the socket is drained every chain goes.
 *
 * Other socket types (seqpacket) and kernels before 6.5 would copy anyway:
 * they keep the copy path. */
#ifndef VMIO_DEVICES_VSOCK_TX_SPLICE_H
#define VMIO_DEVICES_VSOCK_TX_SPLICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct vmio_loop;
struct vsock_vm_stats;

/* Whether this kernel splices into AF_UNIX stream sockets without a
 * copy. *why says why not (or which kernel does). */
bool vsock_splice_supported(const char **why);

/* One pipe pair per multiplexer (one loop), empty between calls. */
struct vsock_splice;

/* NULL (with errno) if no pipe could be made. splice(2) has no
 * MSG_NOSIGNAL, so this sets SIGPIPE to SIG_IGN if it was SIG_DFL (vmio
 * ignores it anyway): a host peer gone is EPIPE for its connection. */
struct vsock_splice *vsock_splice_new(void);
void vsock_splice_free(struct vsock_splice *s);

/* Moves up to len bytes of iov[0..n) into socket fd by reference.
 * Returns the bytes the socket took (a prefix; 0 when it is full), or -1
 * with errno on an error of the socket (the pipe is empty again in every
 * case: what the socket did not take is thrown away, and the caller copies
 * it from guest memory as it would have). */
ssize_t vsock_splice_send(struct vsock_splice *s, int fd,
			  const struct iovec *iov, unsigned n, size_t len);

/* The socket's unread send memory (SIOCOUTQ), or UINT64_MAX when it
 * cannot say (nothing is released on that). */
uint64_t vsock_splice_outq(int fd);

/* ---- Held chains, one connection's ------------------------------------ */

/* A tx chain whose payload went to the host socket by reference: given
 * back once the host read it. */
struct vsock_tx_held {
	uint16_t head;  /* the chain, to push used */
	uint32_t bytes; /* its payload in the socket: consumed on release */
	uint64_t mark;  /* outq_added just after those bytes went in */
};

/* A FIFO of at most cap chains, made on the first one, oldest at first;
 * outq_added sums the measured growth of the socket's SIOCOUTQ. */
struct vsock_held_chains {
	struct vsock_tx_held *v;
	uint16_t cap, first, n;
	uint64_t outq_added;
};

/* Sets the bound (> 0). Before the first hold only. */
void vsock_held_set_cap(struct vsock_held_chains *h, uint16_t cap);
/* Keeps chain head, whose first `bytes` of payload the socket holds by
 * reference. False if there is no room (the caller checks n < cap before
 * it splices, so only a failed allocation). */
bool vsock_held_push(struct vsock_held_chains *h, uint16_t head,
		     uint32_t bytes);
/* Adds what the socket's send memory grew by since `before` (its
 * SIOCOUTQ just before a send) to outq_added; an unknown or shrunk one
 * adds 0, which only delays releases. */
void vsock_held_grew(struct vsock_held_chains *h, int fd, uint64_t before);
/* Takes the oldest chain off if the host read through it, given outq
 * (the socket's SIOCOUTQ), or whatever outq says with force: its head
 * and bytes in *out. False when none goes. */
bool vsock_held_pop(struct vsock_held_chains *h, uint64_t outq, bool force,
		    struct vsock_tx_held *out);
/* Forgets every chain (they were given back, or the guest is gone). */
void vsock_held_free(struct vsock_held_chains *h);

/* ---- Held chains, one VM's -------------------------------------------- */

/* A connection's part in the VM's bookkeeping: on the list of holders
 * while it holds any chain, and a dup of its host socket watched for
 * EPOLLOUT, edge-triggered (the kernel wakes it as the reader frees what
 * we sent), made on the first hold (-1: none). Without one (no fd left)
 * the tick still looks. */
struct vsock_holder {
	struct vsock_holder *next;
	bool listed;
	int wake_fd;
};

/* At most max chains held at once over the VM (that bound is the
 * caller's), one connection at most half of them (at least one), so a
 * host reader that stalls leaves the others room. */
struct vsock_holders {
	struct vmio_loop *loop;
	struct vsock_holder *list;
	unsigned total, max, per_conn;
};

void vsock_holders_init(struct vsock_holders *hs, struct vmio_loop *loop,
			unsigned max);
static inline void vsock_holder_init(struct vsock_holder *ho)
{
	ho->next = NULL;
	ho->listed = false;
	ho->wake_fd = -1;
}
/* Whether a connection that holds held_n chains may keep another. */
static inline bool vsock_holders_room(const struct vsock_holders *hs,
				      unsigned held_n)
{
	return hs->total < hs->max && held_n < hs->per_conn;
}
/* A connection kept a chain (counted in st): listed, and its socket fd
 * watched, wake(opaque) called on the watch. */
void vsock_holders_add(struct vsock_holders *hs, struct vsock_holder *ho,
		       int fd, void (*wake)(void *opaque, int fd,
					    uint32_t events),
		       void *opaque, struct vsock_vm_stats *st);
/* k of a connection's chains went back; none_left: it holds no more. */
void vsock_holders_released(struct vsock_holders *hs, struct vsock_holder *ho,
			    unsigned k, bool none_left);
/* Its socket is closed or it is being freed: the dup goes (it would keep
 * the socket open). */
void vsock_holder_unwatch(struct vsock_holders *hs, struct vsock_holder *ho);

#endif
