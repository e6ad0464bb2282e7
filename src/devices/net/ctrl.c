#include "devices/net/ctrl.h"

#include <endian.h>
#include <string.h>

#include "virtio/features.h"

void vnet_ctrl_init(struct vnet_ctrl_state *st, uint64_t features,
		    uint16_t max_pairs, const uint8_t mac[6])
{
	memset(st, 0, sizeof(*st));
	st->features = features;
	st->max_pairs = max_pairs ? max_pairs : 1;
	st->pairs = 1;
	/* Until the guest says otherwise the device receives everything
	 * (5.1.6.5.1: promiscuous with no CTRL_RX). */
	st->promisc = true;
	memcpy(st->mac, mac, 6);
}

static bool has(const struct vnet_ctrl_state *st, unsigned bit)
{
	return st->features & VMIO_BIT(bit);
}

static uint8_t refuse(const char **why, const char *reason)
{
	*why = reason;
	return VIRTIO_NET_ERR;
}

/* PROMISC and ALLMULTI carry one byte, 0 or 1. */
static uint8_t rx_mode(struct vnet_ctrl_state *st, uint8_t cmd,
		       const uint8_t *data, size_t len, const char **why)
{
	if (!has(st, VIRTIO_NET_F_CTRL_RX))
		return refuse(why, "RX class without CTRL_RX");
	if (cmd != VIRTIO_NET_CTRL_RX_PROMISC &&
	    cmd != VIRTIO_NET_CTRL_RX_ALLMULTI)
		return refuse(why, "unknown RX command");
	if (len != 1)
		return refuse(why, "RX command data is not one byte");
	if (data[0] > 1)
		return refuse(why, "RX command value is not 0 or 1");
	if (cmd == VIRTIO_NET_CTRL_RX_PROMISC)
		st->promisc = data[0];
	else
		st->allmulti = data[0];
	return VIRTIO_NET_OK;
}

/* One table: le32 entries, then entries * 6 bytes. Returns the bytes it
 * takes from data, or 0 if it does not fit in len. */
static size_t mac_table_len(const uint8_t *data, size_t len, uint32_t *entries)
{
	uint32_t n;

	if (len < 4)
		return 0;
	memcpy(&n, data, 4);
	n = le32toh(n);
	/* Compared as a count first: n * 6 must not wrap. */
	if (n > (len - 4) / 6)
		return 0;
	*entries = n;
	return 4 + (size_t)n * 6;
}

static void mac_table_store(struct vnet_mac_table *t, const uint8_t *data,
			    uint32_t entries)
{
	uint32_t keep = entries < VNET_MAC_TABLE_MAX ? entries
						     : VNET_MAC_TABLE_MAX;

	t->entries = entries;
	t->overflow = entries > VNET_MAC_TABLE_MAX;
	memcpy(t->mac, data + 4, (size_t)keep * 6);
}

/* TABLE_SET: the unicast table then the multicast one, filling the
 * command exactly. */
static uint8_t mac_table_set(struct vnet_ctrl_state *st, const uint8_t *data,
			     size_t len, const char **why)
{
	uint32_t uc_n, mc_n;
	size_t uc_len, mc_len;

	if (!has(st, VIRTIO_NET_F_CTRL_RX))
		return refuse(why, "MAC table without CTRL_RX");
	uc_len = mac_table_len(data, len, &uc_n);
	if (!uc_len)
		return refuse(why, "unicast MAC table longer than the command");
	mc_len = mac_table_len(data + uc_len, len - uc_len, &mc_n);
	if (!mc_len)
		return refuse(why, "multicast MAC table longer than the command");
	if (uc_len + mc_len != len)
		return refuse(why, "bytes after the MAC tables");
	mac_table_store(&st->uc, data, uc_n);
	mac_table_store(&st->mc, data + uc_len, mc_n);
	return VIRTIO_NET_OK;
}

static uint8_t mac_addr_set(struct vnet_ctrl_state *st, const uint8_t *data,
			    size_t len, const char **why)
{
	static const uint8_t zero[6];

	if (!has(st, VIRTIO_NET_F_CTRL_MAC_ADDR))
		return refuse(why, "MAC address without CTRL_MAC_ADDR");
	if (len != 6)
		return refuse(why, "MAC address is not 6 bytes");
	if (data[0] & 1)
		return refuse(why, "MAC address is multicast");
	if (!memcmp(data, zero, 6))
		return refuse(why, "MAC address is zero");
	memcpy(st->mac, data, 6);
	return VIRTIO_NET_OK;
}

static uint8_t mac_cmd(struct vnet_ctrl_state *st, uint8_t cmd,
		       const uint8_t *data, size_t len, const char **why)
{
	if (cmd == VIRTIO_NET_CTRL_MAC_TABLE_SET)
		return mac_table_set(st, data, len, why);
	if (cmd == VIRTIO_NET_CTRL_MAC_ADDR_SET)
		return mac_addr_set(st, data, len, why);
	return refuse(why, "unknown MAC command");
}

/* VQ_PAIRS_SET: le16 pairs, 1 to max_virtqueue_pairs. */
static uint8_t mq_cmd(struct vnet_ctrl_state *st, uint8_t cmd,
		      const uint8_t *data, size_t len, const char **why)
{
	uint16_t pairs;

	if (!has(st, VIRTIO_NET_F_MQ))
		return refuse(why, "MQ class without MQ");
	if (cmd != VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET)
		return refuse(why, "unknown MQ command");
	if (len != 2)
		return refuse(why, "MQ pairs is not 2 bytes");
	memcpy(&pairs, data, 2);
	pairs = le16toh(pairs);
	if (pairs < VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MIN || pairs > st->max_pairs)
		return refuse(why, "MQ pairs out of range");
	st->pairs = pairs;
	return VIRTIO_NET_OK;
}

uint8_t vnet_ctrl_apply(struct vnet_ctrl_state *st, const uint8_t *cmd,
			size_t len, const char **why)
{
	const uint8_t *data;

	if (len < 2)
		return refuse(why, "command shorter than class and command");
	if (len > VNET_CTRL_MAX_LEN)
		return refuse(why, "command too long");
	data = cmd + 2;
	len -= 2;
	switch (cmd[0]) {
	case VIRTIO_NET_CTRL_RX:
		return rx_mode(st, cmd[1], data, len, why);
	case VIRTIO_NET_CTRL_MAC:
		return mac_cmd(st, cmd[1], data, len, why);
	case VIRTIO_NET_CTRL_MQ:
		return mq_cmd(st, cmd[1], data, len, why);
	case VIRTIO_NET_CTRL_ANNOUNCE:
		/* The guest announced itself after a migration (5.1.6.5.4):
		 * nothing of ours to clear, the announce bit is the VMM's
		 * config space. */
		if (!has(st, VIRTIO_NET_F_GUEST_ANNOUNCE))
			return refuse(why, "ANNOUNCE without GUEST_ANNOUNCE");
		if (cmd[1] != VIRTIO_NET_CTRL_ANNOUNCE_ACK || len)
			return refuse(why, "unknown ANNOUNCE command");
		return VIRTIO_NET_OK;
	}
	return refuse(why, "unknown or unsupported class");
}
