/* The vsock connection table: connections keyed by their port pair
 * (local_port on the host side, peer_port on the guest side), as
 * Firecracker's muxer keys them, and the allocation of host-side ports for
 * host-initiated connections.
 *
 * The table is intrusive (the caller embeds struct vsock_table_entry in
 * its connection) and bounded: it never holds more than `max` entries, the
 * --max-connections limit, so a guest opening connections without end
 * meets a refusal, not an allocation. Buckets are sized once, from max.
 *
 * Ports come from the guest, so the hash is seeded at random: a guest
 * cannot pick port pairs that all land in one bucket without knowing it.
 *
 * One table serves one VM. Sibling routing (a later issue) adds a table
 * per VM and a CID lookup in front; nothing here assumes a single VM. */
#ifndef VMIO_DEVICES_VSOCK_CONN_TABLE_H
#define VMIO_DEVICES_VSOCK_CONN_TABLE_H

#include <stdbool.h>
#include <stdint.h>

/* Host-side ports handed to host-initiated connections (the port the
 * guest sees as the source, and the one in the `OK <port>` reply): round
 * robin over [2^30, 2^31), as Firecracker does, so they never collide
 * with the well-known low ports a guest connects to. */
#define VSOCK_LOCAL_PORT_FIRST (1u << 30)
#define VSOCK_LOCAL_PORT_END (1u << 31)

struct vsock_table_entry {
	struct vsock_table_entry *next; /* bucket chain */
	uint32_t local_port;
	uint32_t peer_port;
};

struct vsock_conn_table {
	struct vsock_table_entry **buckets;
	uint32_t mask; /* buckets - 1 */
	uint32_t seed;
	unsigned count;
	unsigned max;
	uint32_t next_port; /* next candidate of vsock_table_alloc_port */
};

/* Returns 0, or -ENOMEM / -EINVAL (max 0). */
int vsock_table_init(struct vsock_conn_table *t, unsigned max);
/* Frees the buckets; the entries are the caller's. */
void vsock_table_release(struct vsock_conn_table *t);

struct vsock_table_entry *vsock_table_find(const struct vsock_conn_table *t,
					   uint32_t local_port,
					   uint32_t peer_port);

/* Inserts e under its ports. Returns 0, -EEXIST if the pair is taken, or
 * -ENOSPC if the table holds max entries already. */
int vsock_table_insert(struct vsock_conn_table *t,
		       struct vsock_table_entry *e);

/* Removes e, which must be in the table. */
void vsock_table_remove(struct vsock_conn_table *t,
			struct vsock_table_entry *e);

static inline bool vsock_table_full(const struct vsock_conn_table *t)
{
	return t->count >= t->max;
}

/* Picks a host-side port for a new connection to the guest's peer_port:
 * the next one round robin, skipping any whose pair with peer_port is in
 * use (at most max are, so the search ends within max + 1 steps). */
uint32_t vsock_table_alloc_port(struct vsock_conn_table *t,
				uint32_t peer_port);

#endif
