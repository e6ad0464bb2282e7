/* Guest buffers a no-copy port holds, by UMEM address. What goes onto
 * the fill or TX ring is an address; what comes back (an RX descriptor, a
 * completion) is that address again, and this table finds the chain it
 * belongs to. The capacity is fixed at creation (the ring's size bounds
 * what is out at once); one address may be in twice, since a guest may
 * post one buffer twice and the kernel will hand it back twice. */
#ifndef VMIO_DEVICES_NET_HELD_H
#define VMIO_DEVICES_NET_HELD_H

#include <stdbool.h>
#include <stdint.h>

struct vnet_held_entry {
	uint64_t addr;
	void *buf;       /* the device's pointer, given back with the cookie */
	uint32_t cookie; /* the chain's head */
	bool used;
};

struct vnet_held {
	unsigned max;   /* entries allowed */
	unsigned count;
	unsigned mask;  /* slots - 1; slots is a power of two >= 2 * max */
	struct vnet_held_entry *e;
};

/* Returns 0 or -ENOMEM. */
int vnet_held_init(struct vnet_held *h, unsigned max);
void vnet_held_free(struct vnet_held *h);

/* Adds an entry. false if max are held already. */
bool vnet_held_put(struct vnet_held *h, uint64_t addr, uint32_t cookie,
		   void *buf);
/* Removes one entry for addr into *out. false if there is none. */
bool vnet_held_take(struct vnet_held *h, uint64_t addr,
		    struct vnet_held_entry *out);
/* Removes any one entry into *out (giving everything back). false if
 * empty. */
bool vnet_held_take_any(struct vnet_held *h, struct vnet_held_entry *out);

#endif
