/* A state that outlives its process: bytes and the fds they name, kept
 * in systemd's fd store (util/fd_store.h) as they change, so that the
 * vmio systemd starts after a crash (or a `systemctl restart`) finds
 * them and takes up what the dead one served. Nothing here knows what
 * the bytes mean: a command keeps a VM's session record in one.
 *
 * In the store, under a prefix (say "vmio.vm.3"):
 *   PREFIX.s0, PREFIX.s1  two memfds, written in turn, each a whole
 *                         record (below) or nothing: a process that dies
 *                         halfway through writing one leaves the other;
 *   PREFIX.fN             the record's fds, each open file once (systemd
 *                         drops a second copy of one it keeps, and the
 *                         name with it), N from 0;
 *   PREFIX.NAME           an fd kept beside them (vmio_kept_replace_fd).
 * A memfd's record (little-endian): "VMIOKEPT", format u32 (1), fd count
 * u32, stamp u64 (CLOCK_REALTIME ns: the newer of the two wins), length
 * u32 of the bytes, then per fd a u32 (N of PREFIX.fN, or bit 31 and the
 * index of an earlier fd of the same open file), the bytes, and a CRC-32
 * of all before it. It is read as hostile input: a record that is cut,
 * changed or names an fd the store did not give back is refused.
 *
 * Names are fixed, so whichever process writes next (a successor after
 * a hand-over, the restarted one after a crash) replaces what the last
 * one kept: its first write replaces every name (remove, then put), the
 * next ones only those whose fd changed. A crash in the middle of that
 * first write may leave a name missing: the state is then refused. */
#ifndef VMIO_HANDOVER_KEPT_STATE_H
#define VMIO_HANDOVER_KEPT_STATE_H

#include <stddef.h>
#include <stdint.h>

/* The most fds one kept state names. */
#define VMIO_KEPT_MAX_FDS 1024
/* The largest record taken back. */
#define VMIO_KEPT_MAX_BYTES (1u << 20)
/* The longest prefix. */
#define VMIO_KEPT_PREFIX_MAX 64

struct vmio_kept;

/* The kept state under prefix, with what vmio_fd_store_collect gave back
 * under it (nothing, unless systemd started this process with its fd
 * store). NULL without memory or for a prefix systemd cannot name. */
struct vmio_kept *vmio_kept_open(const char *prefix);
/* Closes this process's copies; the store keeps what it has, for the
 * next process. */
void vmio_kept_free(struct vmio_kept *k);

/* The newest whole record given back: its bytes (malloc'd, the
 * caller's) and its fds (the caller's, in the record's order, at most
 * max). Returns 1, 0 if nothing was kept (or an empty state), or -errno
 * with why: every record given back was cut or changed, or names an fd
 * the store did not give back; what was given back is then closed. Once:
 * later calls return 0. */
int vmio_kept_take(struct vmio_kept *k, uint8_t **bytes, size_t *len,
		   int *fds, unsigned max, unsigned *nfds, char *why,
		   size_t why_len);

/* The fd given back under PREFIX.name (the caller's), or -1. */
int vmio_kept_take_fd(struct vmio_kept *k, const char *name);

/* Keeps fd (a copy: the caller keeps its own) under PREFIX.name from now
 * on, replacing what was kept there. Returns 0, or -errno. */
int vmio_kept_replace_fd(struct vmio_kept *k, const char *name, int fd);

/* Keeps bytes and fds from now on, in place of what was kept. The fds
 * are copies the kept state takes (it closes them when they are
 * replaced). Returns 0, or -errno (the notify socket full: the next
 * write replaces every name; out of memory; a memfd write failed): what a
 * restart finds is then the record before, or none. */
int vmio_kept_write(struct vmio_kept *k, const void *bytes, size_t len,
		    int *fds, unsigned nfds);

/* Nothing to take up any more (the front end left): an empty record,
 * and the fds removed from the store (a socket the store kept would
 * never reach its peer's end). Returns 0, or -EAGAIN: call again. */
int vmio_kept_clear(struct vmio_kept *k);

#endif
