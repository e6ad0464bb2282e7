#include "devices/net/header.h"

#include <endian.h>

#include "virtio/features.h"

/* IPv4's minimum MTU (68) less 20-byte IP and TCP headers. */
#define VNET_GSO_MIN_SIZE 28

const char *vnet_hdr_verdict_name(enum vnet_hdr_verdict v)
{
	static const char *const names[VNET_HDR_NVERDICTS] = {
		[VNET_HDR_OK] = "ok",
		[VNET_HDR_BAD_FLAGS] = "bad_flags",
		[VNET_HDR_BAD_GSO_TYPE] = "bad_gso_type",
		[VNET_HDR_BAD_GSO_SIZE] = "bad_gso_size",
		[VNET_HDR_BAD_HDR_LEN] = "bad_hdr_len",
		[VNET_HDR_BAD_CSUM] = "bad_csum",
		[VNET_HDR_FRAME_SHORT] = "frame_short",
		[VNET_HDR_FRAME_LONG] = "frame_long",
	};

	return (unsigned)v < VNET_HDR_NVERDICTS ? names[v] : "unknown";
}

size_t vnet_hdr_len(uint64_t features)
{
	if (features & (VMIO_BIT(VIRTIO_F_VERSION_1) |
			VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF)))
		return VIRTIO_NET_HDR_LEN;
	return VIRTIO_NET_HDR_LEN_SHORT;
}

size_t vnet_max_frame(uint16_t mtu)
{
	return (size_t)mtu + VNET_ETH_HLEN + VNET_VLAN_HLEN;
}

/* The feature that lets the guest send a GSO type, or 0 if we never
 * accept it (UFO, USO and ECN are not offered). */
static uint64_t gso_feature(uint8_t gso_type)
{
	switch (gso_type) {
	case VIRTIO_NET_HDR_GSO_TCPV4:
		return VMIO_BIT(VIRTIO_NET_F_HOST_TSO4);
	case VIRTIO_NET_HDR_GSO_TCPV6:
		return VMIO_BIT(VIRTIO_NET_F_HOST_TSO6);
	default:
		return 0;
	}
}

static enum vnet_hdr_verdict check_flags(uint8_t flags, uint64_t features)
{
	/* DATA_VALID and RSC_INFO are the device's to set on rx only. */
	if (flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM)
		return VNET_HDR_BAD_FLAGS;
	if ((flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) &&
	    !(features & VMIO_BIT(VIRTIO_NET_F_CSUM)))
		return VNET_HDR_BAD_FLAGS;
	return VNET_HDR_OK;
}

/* GSO: a negotiated type, a checksum to finish (the kernel needs one to
 * segment), a segment size that fits the frame, and headers that end
 * inside it. Without GSO, gso_size must be 0. */
static enum vnet_hdr_verdict check_gso(const struct virtio_net_hdr *h,
				       size_t frame_len, uint64_t features,
				       uint16_t mtu)
{
	uint16_t gso_size = le16toh(h->gso_size);
	uint16_t hdr_len = le16toh(h->hdr_len);
	uint64_t need;

	if (h->gso_type == VIRTIO_NET_HDR_GSO_NONE)
		return gso_size ? VNET_HDR_BAD_GSO_SIZE : VNET_HDR_OK;
	need = gso_feature(h->gso_type);
	if (!need || !(features & need))
		return VNET_HDR_BAD_GSO_TYPE;
	if (!(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
		return VNET_HDR_BAD_FLAGS;
	if (hdr_len < VNET_ETH_HLEN || hdr_len >= frame_len)
		return VNET_HDR_BAD_HDR_LEN;
	/* A segment carries at least a minimal IPv4 MSS and at most an MTU:
	 * a 1-byte gso_size would make the kernel build 64 Ki segments. */
	if (gso_size < VNET_GSO_MIN_SIZE || gso_size > mtu)
		return VNET_HDR_BAD_GSO_SIZE;
	return VNET_HDR_OK;
}

static enum vnet_hdr_verdict check_csum(const struct virtio_net_hdr *h,
					size_t frame_len)
{
	uint32_t start = le16toh(h->csum_start);
	uint32_t off = le16toh(h->csum_offset);

	/* The 16-bit checksum field the kernel will write lies at
	 * csum_start + csum_offset: both bytes must be in the frame. */
	if (!(h->flags & VIRTIO_NET_HDR_F_NEEDS_CSUM))
		return VNET_HDR_OK;
	if (start + off + 2 > frame_len)
		return VNET_HDR_BAD_CSUM;
	return VNET_HDR_OK;
}

enum vnet_hdr_verdict vnet_hdr_check_tx(const struct virtio_net_hdr *h,
					size_t frame_len, uint64_t features,
					uint16_t mtu)
{
	enum vnet_hdr_verdict v;
	size_t max = h->gso_type == VIRTIO_NET_HDR_GSO_NONE
			     ? vnet_max_frame(mtu)
			     : VNET_GSO_MAX_FRAME;

	if (frame_len < VNET_ETH_HLEN)
		return VNET_HDR_FRAME_SHORT;
	if (frame_len > max)
		return VNET_HDR_FRAME_LONG;
	v = check_flags(h->flags, features);
	if (v == VNET_HDR_OK)
		v = check_gso(h, frame_len, features, mtu);
	if (v == VNET_HDR_OK)
		v = check_csum(h, frame_len);
	if (v == VNET_HDR_OK && le16toh(h->hdr_len) > frame_len)
		v = VNET_HDR_BAD_HDR_LEN;
	return v;
}
