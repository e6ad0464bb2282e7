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

#endif
