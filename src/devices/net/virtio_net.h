/* virtio-net as the spec defines it (virtio 1.2, section 5.1): feature
 * bits, the header in front of every frame, the config space and the
 * control queue's commands. Only what vmio uses. */
#ifndef VMIO_DEVICES_NET_VIRTIO_NET_H
#define VMIO_DEVICES_NET_VIRTIO_NET_H

#include <stdint.h>

/* Feature bits. */
#define VIRTIO_NET_F_CSUM 0
#define VIRTIO_NET_F_GUEST_CSUM 1
#define VIRTIO_NET_F_MTU 3
#define VIRTIO_NET_F_MAC 5
#define VIRTIO_NET_F_GUEST_TSO4 7
#define VIRTIO_NET_F_GUEST_TSO6 8
#define VIRTIO_NET_F_GUEST_ECN 9
#define VIRTIO_NET_F_GUEST_UFO 10
#define VIRTIO_NET_F_HOST_TSO4 11
#define VIRTIO_NET_F_HOST_TSO6 12
#define VIRTIO_NET_F_HOST_ECN 13
#define VIRTIO_NET_F_HOST_UFO 14
#define VIRTIO_NET_F_MRG_RXBUF 15
#define VIRTIO_NET_F_STATUS 16
#define VIRTIO_NET_F_CTRL_VQ 17
#define VIRTIO_NET_F_CTRL_RX 18
#define VIRTIO_NET_F_CTRL_VLAN 19
#define VIRTIO_NET_F_GUEST_ANNOUNCE 21
#define VIRTIO_NET_F_MQ 22
#define VIRTIO_NET_F_CTRL_MAC_ADDR 23

/* The header in front of every frame, both ways. With VERSION_1 or
 * MRG_RXBUF it is 12 bytes (num_buffers included), else 10. */
struct virtio_net_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;     /* le16 */
	uint16_t gso_size;    /* le16 */
	uint16_t csum_start;  /* le16 */
	uint16_t csum_offset; /* le16 */
	uint16_t num_buffers; /* le16; rx only, with the 12-byte header */
} __attribute__((packed));

#define VIRTIO_NET_HDR_LEN_SHORT 10
#define VIRTIO_NET_HDR_LEN 12
#define VIRTIO_NET_HDR_NUM_BUFFERS_OFFSET 10

#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1
#define VIRTIO_NET_HDR_F_DATA_VALID 2
#define VIRTIO_NET_HDR_F_RSC_INFO 4

#define VIRTIO_NET_HDR_GSO_NONE 0
#define VIRTIO_NET_HDR_GSO_TCPV4 1
#define VIRTIO_NET_HDR_GSO_UDP 3
#define VIRTIO_NET_HDR_GSO_TCPV6 4
#define VIRTIO_NET_HDR_GSO_UDP_L4 5
#define VIRTIO_NET_HDR_GSO_ECN 0x80

/* Config space: every field little-endian. */
struct virtio_net_config {
	uint8_t mac[6];
	uint16_t status;
	uint16_t max_virtqueue_pairs;
	uint16_t mtu;
} __attribute__((packed));

#define VIRTIO_NET_S_LINK_UP 1

/* Control queue: class and command in the readable part, then the
 * command's data; one ack byte in the writable part. */
#define VIRTIO_NET_OK 0
#define VIRTIO_NET_ERR 1

#define VIRTIO_NET_CTRL_RX 0
#define VIRTIO_NET_CTRL_RX_PROMISC 0
#define VIRTIO_NET_CTRL_RX_ALLMULTI 1

#define VIRTIO_NET_CTRL_MAC 1
#define VIRTIO_NET_CTRL_MAC_TABLE_SET 0
#define VIRTIO_NET_CTRL_MAC_ADDR_SET 1

#define VIRTIO_NET_CTRL_ANNOUNCE 3
#define VIRTIO_NET_CTRL_ANNOUNCE_ACK 0

#define VIRTIO_NET_CTRL_MQ 4
#define VIRTIO_NET_CTRL_MQ_VQ_PAIRS_SET 0
#define VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MIN 1
#define VIRTIO_NET_CTRL_MQ_VQ_PAIRS_MAX 0x8000

/* Ethernet header, and the VLAN tag a frame may carry on top of it. */
#define VNET_ETH_HLEN 14
#define VNET_VLAN_HLEN 4
/* The largest frame a GSO header may describe: a 64 KiB IP packet. */
#define VNET_GSO_MAX_FRAME (65535 + VNET_ETH_HLEN + VNET_VLAN_HLEN)

#endif
