/* Checks of what the guest puts in front of and around a transmitted
 * frame: the virtio-net header and the frame's length. The guest writes
 * every field; the kernel (TAP) or a ring (AF_XDP) must only ever see a
 * header that matches the frame and what was negotiated. Pure functions
 * on a local copy of the header, so they can be fuzzed on their own. */
#ifndef VMIO_DEVICES_NET_HEADER_H
#define VMIO_DEVICES_NET_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "devices/net/virtio_net.h"

/* Why a frame was refused: the counters of --stats are indexed by it. */
enum vnet_hdr_verdict {
	VNET_HDR_OK = 0,
	VNET_HDR_BAD_FLAGS,     /* unknown bit, or NEEDS_CSUM without CSUM */
	VNET_HDR_BAD_GSO_TYPE,  /* unknown, or not negotiated */
	VNET_HDR_BAD_GSO_SIZE,  /* 0 with GSO, non-zero without, or too big */
	VNET_HDR_BAD_HDR_LEN,   /* beyond the frame */
	VNET_HDR_BAD_CSUM,      /* csum_start + csum_offset + 2 beyond it */
	VNET_HDR_FRAME_SHORT,   /* shorter than an Ethernet header */
	VNET_HDR_FRAME_LONG,    /* longer than the MTU (or 64 KiB with GSO) */
	VNET_HDR_NVERDICTS,
};

/* A short name of a verdict for log lines and --stats. */
const char *vnet_hdr_verdict_name(enum vnet_hdr_verdict v);

/* The size of the header in front of every frame, both ways, for the
 * negotiated features: 12 bytes with VERSION_1 or MRG_RXBUF, else 10. */
size_t vnet_hdr_len(uint64_t features);

/* The largest frame (Ethernet header on, virtio-net header off) a guest
 * may send without GSO: MTU plus an Ethernet header and a VLAN tag. */
size_t vnet_max_frame(uint16_t mtu);

/* Checks a transmitted frame's header h (as the guest wrote it; the
 * le16 fields are converted here) against frame_len, the bytes after
 * the header, and the negotiated features. */
enum vnet_hdr_verdict vnet_hdr_check_tx(const struct virtio_net_hdr *h,
					size_t frame_len, uint64_t features,
					uint16_t mtu);

#endif
