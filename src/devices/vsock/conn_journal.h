/* The connections a VM has open, journaled where a crash cannot take
 * them: a memfd (kept in systemd's fd store beside the session, cli's
 * vsock_kept.h) with one slot per connection the table may hold
 * (--max-connections). After a crash the vmio that takes the session
 * back reads the dead one's journal and ends each connection on the
 * guest's side with an RST (its host socket closed with the dead
 * process): a guest that waits on an idle connection learns it is gone
 * instead of waiting for good.
 *
 * A slot (16 bytes, host order: the journal never leaves the machine):
 * local port u32, peer port u32, type u16, in use u16, check u32 (the
 * other fields mixed with a constant). A slot is filled before it is
 * marked in use, and marked free before it is reused, so a crash at any
 * point leaves each slot whole or free; the reader takes the memfd as
 * hostile anyway (any size, any bytes) and skips a slot whose check
 * fails. Adding and removing costs two stores; no system call. */
#ifndef VMIO_DEVICES_VSOCK_CONN_JOURNAL_H
#define VMIO_DEVICES_VSOCK_CONN_JOURNAL_H

#include <stdint.h>

#define VSOCK_JOURNAL_NONE UINT32_MAX

struct vsock_journal_slot;

struct vsock_journal {
	int fd; /* the memfd; -1: no journal (out of memory at start) */
	struct vsock_journal_slot *slots;
	unsigned max;
	uint32_t *free; /* a stack of free slot numbers */
	unsigned nfree;
};

/* A journal of max slots. Returns 0 or -errno (j->fd is then -1 and
 * every add returns VSOCK_JOURNAL_NONE: the device works, a crash then
 * leaves its connections to time out on the guest's side). */
int vsock_journal_init(struct vsock_journal *j, unsigned max);
void vsock_journal_fini(struct vsock_journal *j);

/* A connection opened: its slot, or VSOCK_JOURNAL_NONE (no journal). */
uint32_t vsock_journal_add(struct vsock_journal *j, uint32_t local_port,
			   uint32_t peer_port, uint16_t type);
/* It ended (slot from vsock_journal_add; NONE is a no-op). */
void vsock_journal_remove(struct vsock_journal *j, uint32_t slot);

/* A dead process's journal fd: calls cb for each connection in use, at
 * most max of them. Returns how many. */
unsigned vsock_journal_read(int fd, unsigned max,
			    void (*cb)(void *opaque, uint32_t local_port,
				       uint32_t peer_port, uint16_t type),
			    void *opaque);

#endif
