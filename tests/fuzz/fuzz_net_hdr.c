/* Fuzzes the net device's validators: the virtio-net header of a
 * transmitted frame and the control queue's commands. The guest writes
 * every byte of both; whatever they hold, an accepted header must describe
 * a frame the kernel can take as it is, and a refused command must change
 * nothing.
 *
 * Input: [0] bit 0 picks the validator.
 *   header:  [1] features (bit 0 CSUM, 1 HOST_TSO4, 2 HOST_TSO6,
 *            3 VERSION_1), [2..3] MTU (LE, at least 68), [4..6] frame
 *            length (LE), then the header's 12 bytes (missing ones zero).
 *   control: [1] features (bit 0 CTRL_RX, 1 MQ, 2 CTRL_MAC_ADDR), [2]
 *            max_virtqueue_pairs, then the command.
 */
#include <assert.h>
#include <endian.h>
#include <string.h>

#include "devices/net/ctrl.h"
#include "devices/net/header.h"
#include "fuzz.h"
#include "virtio/features.h"

static uint64_t pick(uint8_t bits, const unsigned *map, unsigned n)
{
	uint64_t f = 0;

	for (unsigned i = 0; i < n; i++)
		if (bits & (1u << i))
			f |= VMIO_BIT(map[i]);
	return f;
}

static void fuzz_header(const uint8_t *data, size_t size)
{
	static const unsigned map[] = { VIRTIO_NET_F_CSUM,
					VIRTIO_NET_F_HOST_TSO4,
					VIRTIO_NET_F_HOST_TSO6,
					VIRTIO_F_VERSION_1 };
	uint8_t in[7 + sizeof(struct virtio_net_hdr)] = { 0 };
	struct virtio_net_hdr h;
	uint64_t features;
	uint16_t mtu;
	size_t len;

	memcpy(in, data, size < sizeof(in) ? size : sizeof(in));
	features = pick(in[1], map, 4);
	mtu = (uint16_t)(in[2] | in[3] << 8);
	if (mtu < 68)
		mtu = 68;
	len = (size_t)in[4] | (size_t)in[5] << 8 | (size_t)in[6] << 16;
	memcpy(&h, in + 7, sizeof(h));
	if (vnet_hdr_check_tx(&h, len, features, mtu) != VNET_HDR_OK)
		return;
	/* What an accepted header promises the backend. */
	assert(len >= VNET_ETH_HLEN && len <= VNET_GSO_MAX_FRAME);
	assert(!(h.flags & ~VIRTIO_NET_HDR_F_NEEDS_CSUM));
	assert(le16toh(h.hdr_len) <= len);
	if (h.flags & VIRTIO_NET_HDR_F_NEEDS_CSUM) {
		assert(features & VMIO_BIT(VIRTIO_NET_F_CSUM));
		assert((size_t)le16toh(h.csum_start) + le16toh(h.csum_offset) +
			       2 <= len);
	}
	if (h.gso_type == VIRTIO_NET_HDR_GSO_NONE) {
		assert(len <= vnet_max_frame(mtu));
		assert(h.gso_size == 0);
	} else {
		assert(h.gso_type == VIRTIO_NET_HDR_GSO_TCPV4 ||
		       h.gso_type == VIRTIO_NET_HDR_GSO_TCPV6);
		assert(le16toh(h.gso_size) > 0 && le16toh(h.gso_size) <= mtu);
	}
}

static void fuzz_ctrl(const uint8_t *data, size_t size)
{
	static const unsigned map[] = { VIRTIO_NET_F_CTRL_RX, VIRTIO_NET_F_MQ,
					VIRTIO_NET_F_CTRL_MAC_ADDR };
	static const uint8_t mac[6] = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 };
	static struct vnet_ctrl_state st, before;
	const char *why = NULL;
	uint8_t ack;

	if (size < 3)
		return;
	vnet_ctrl_init(&st, pick(data[1], map, 3) |
				    VMIO_BIT(VIRTIO_NET_F_CTRL_VQ),
		       data[2], mac);
	before = st;
	ack = vnet_ctrl_apply(&st, data + 3, size - 3, &why);
	if (ack != VIRTIO_NET_OK) {
		assert(ack == VIRTIO_NET_ERR && why);
		assert(!memcmp(&st, &before, sizeof(st)));
		return;
	}
	assert(st.pairs >= 1 && st.pairs <= st.max_pairs);
	assert(!(st.mac[0] & 1));
	assert(st.uc.overflow == (st.uc.entries > VNET_MAC_TABLE_MAX));
	assert(st.mc.overflow == (st.mc.entries > VNET_MAC_TABLE_MAX));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	if (data[0] & 1)
		fuzz_ctrl(data, size);
	else
		fuzz_header(data, size);
	return 0;
}
