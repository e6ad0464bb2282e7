/* The control queue's commands (virtio 1.2, 5.1.6.5): RX mode, MAC
 * filter table and address, number of queue pairs. The guest writes the
 * whole command; each one is checked for its class, its command, its
 * exact length and its values before anything changes. A pure function
 * on a copied buffer, so it can be fuzzed on its own. */
#ifndef VMIO_DEVICES_NET_CTRL_H
#define VMIO_DEVICES_NET_CTRL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/net/virtio_net.h"

/* Filter entries kept per table. A table with more entries is accepted
 * (Linux sends every address it has) and marked overflowed: the device
 * then behaves as if in promiscuous mode for that kind, as QEMU does. */
#define VNET_MAC_TABLE_MAX 64

/* Longest command accepted: class, command, and two full MAC tables
 * with their counts. Longer ones are refused without being read. */
#define VNET_CTRL_MAX_LEN (2 + 2 * (4 + 6 * 256))

struct vnet_mac_table {
	uint32_t entries;  /* as the guest sent it */
	bool overflow;     /* entries > VNET_MAC_TABLE_MAX */
	uint8_t mac[VNET_MAC_TABLE_MAX][6];
};

struct vnet_ctrl_state {
	/* Set by the device before commands arrive. */
	uint64_t features;   /* negotiated */
	uint16_t max_pairs;  /* the config space's max_virtqueue_pairs */

	/* What the commands set. */
	uint16_t pairs;      /* active queue pairs, 1 until MQ sets more */
	bool promisc, allmulti;
	uint8_t mac[6];
	struct vnet_mac_table uc, mc;
};

/* Puts st in the state of a device just reset. */
void vnet_ctrl_init(struct vnet_ctrl_state *st, uint64_t features,
		    uint16_t max_pairs, const uint8_t mac[6]);

/* Runs one command (cmd[0] class, cmd[1] command, then its data; len
 * bytes in all). Returns VIRTIO_NET_OK if it was valid and applied, or
 * VIRTIO_NET_ERR with st unchanged and *why set to a static reason. */
uint8_t vnet_ctrl_apply(struct vnet_ctrl_state *st, const uint8_t *cmd,
			size_t len, const char **why);

#endif
