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
 * guest sees as the source, and the one in the `OK <port>` reply):
 * counting up through a range, skipping a port whose pair is in use, and
 * wrapping at its end. By default 1024 to 65535, small as
 * vhost-device-vsock's: systemd's ssh proxy (systemd-ssh-proxy
 * vsock-mux/PATH, v259) consumes the OK line only when it fits in
 * "OK 65535\n", and leaves a longer one in front of the guest's banner.
 * Not below 1024: a guest takes a source port under 1024 for a privileged
 * peer (Linux reserves them for CAP_NET_BIND_SERVICE), which a host
 * program that connected to the hybrid socket is not. Firecracker's range,
 * 2^30 to 2^31 - 1, is there for clients that expect it
 * (--host-port-range). */
#define VSOCK_LOCAL_PORT_FIRST 1024u
#define VSOCK_LOCAL_PORT_LAST 65535u
#define VSOCK_FC_PORT_FIRST (1u << 30)
#define VSOCK_FC_PORT_LAST ((1u << 31) - 1)

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
	uint32_t port_first, port_last; /* the range, inclusive */
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

/* Sets the range of host-side ports (first <= last), and starts at its
 * first. Without it: VSOCK_LOCAL_PORT_FIRST to VSOCK_LOCAL_PORT_LAST. */
void vsock_table_set_ports(struct vsock_conn_table *t, uint32_t first,
			   uint32_t last);

/* Moves the next port past port, if it is in the range: a connection the
 * guest may still hold (one a crashed vmio had open, reset but perhaps
 * not yet closed by its program) is not named again at once. */
void vsock_table_ports_after(struct vsock_conn_table *t, uint32_t port);

/* Picks a host-side port for a new connection to the guest's peer_port:
 * the next one of the range, skipping any whose pair with peer_port is in
 * use. Returns 0 with *port set, or -EADDRINUSE when every port of the
 * range is in use towards peer_port (the search looks at most at min(max,
 * range) + 1 ports: only max pairs can be in use). */
int vsock_table_alloc_port(struct vsock_conn_table *t, uint32_t peer_port,
			   uint32_t *port);

#endif
