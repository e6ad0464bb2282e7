/* The virtio-net header and frame-size checks: every field the guest
 * controls, against the frame length and the negotiated features. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <endian.h>
#include <string.h>

#include <cmocka.h>

#include "devices/net/header.h"
#include "virtio/features.h"

#define MTU 1500
#define OFFLOADS                                                              \
	(VMIO_BIT(VIRTIO_NET_F_CSUM) | VMIO_BIT(VIRTIO_NET_F_HOST_TSO4) |     \
	 VMIO_BIT(VIRTIO_NET_F_HOST_TSO6))
#define PLAIN VMIO_BIT(VIRTIO_F_VERSION_1)

static struct virtio_net_hdr hdr(uint8_t flags, uint8_t gso_type,
				 uint16_t hdr_len, uint16_t gso_size,
				 uint16_t csum_start, uint16_t csum_offset)
{
	return (struct virtio_net_hdr){
		.flags = flags,
		.gso_type = gso_type,
		.hdr_len = htole16(hdr_len),
		.gso_size = htole16(gso_size),
		.csum_start = htole16(csum_start),
		.csum_offset = htole16(csum_offset),
	};
}

static enum vnet_hdr_verdict check(struct virtio_net_hdr h, size_t len,
				   uint64_t features)
{
	return vnet_hdr_check_tx(&h, len, features, MTU);
}

static void test_plain_frames(void **state)
{
	struct virtio_net_hdr z = hdr(0, 0, 0, 0, 0, 0);

	assert_int_equal(check(z, 64, PLAIN), VNET_HDR_OK);
	assert_int_equal(check(z, 14, PLAIN), VNET_HDR_OK);
	assert_int_equal(check(z, 1518, PLAIN), VNET_HDR_OK);
	/* Checksum fields mean nothing without NEEDS_CSUM. */
	assert_int_equal(check(hdr(0, 0, 0, 0, 9999, 9999), 64, PLAIN),
			 VNET_HDR_OK);
	/* hdr_len is a hint without GSO, but still inside the frame. */
	assert_int_equal(check(hdr(0, 0, 54, 0, 0, 0), 64, PLAIN), VNET_HDR_OK);
	assert_int_equal(check(hdr(0, 0, 65, 0, 0, 0), 64, PLAIN),
			 VNET_HDR_BAD_HDR_LEN);
}

static void test_frame_sizes(void **state)
{
	struct virtio_net_hdr z = hdr(0, 0, 0, 0, 0, 0);

	assert_int_equal(check(z, 0, PLAIN), VNET_HDR_FRAME_SHORT);
	assert_int_equal(check(z, 13, PLAIN), VNET_HDR_FRAME_SHORT);
	assert_int_equal(check(z, 1519, PLAIN), VNET_HDR_FRAME_LONG);
	assert_int_equal(check(z, 65536, PLAIN), VNET_HDR_FRAME_LONG);
	assert_int_equal(vnet_hdr_check_tx(&z, 9018, PLAIN, 9000), VNET_HDR_OK);
	assert_int_equal(vnet_hdr_check_tx(&z, 9019, PLAIN, 9000),
			 VNET_HDR_FRAME_LONG);
}

static void test_flags(void **state)
{
	assert_int_equal(check(hdr(VIRTIO_NET_HDR_F_DATA_VALID, 0, 0, 0, 0, 0),
			       64, PLAIN | OFFLOADS),
			 VNET_HDR_BAD_FLAGS);
	assert_int_equal(check(hdr(VIRTIO_NET_HDR_F_RSC_INFO, 0, 0, 0, 0, 0),
			       64, PLAIN | OFFLOADS),
			 VNET_HDR_BAD_FLAGS);
	assert_int_equal(check(hdr(0x80, 0, 0, 0, 0, 0), 64, PLAIN | OFFLOADS),
			 VNET_HDR_BAD_FLAGS);
	/* NEEDS_CSUM only with CSUM negotiated. */
	assert_int_equal(check(hdr(1, 0, 0, 0, 34, 16), 64, PLAIN),
			 VNET_HDR_BAD_FLAGS);
	assert_int_equal(check(hdr(1, 0, 0, 0, 34, 16), 64, PLAIN | OFFLOADS),
			 VNET_HDR_OK);
}

static void test_csum_bounds(void **state)
{
	uint64_t f = PLAIN | OFFLOADS;

	/* The 2-byte field at csum_start + csum_offset must be inside. */
	assert_int_equal(check(hdr(1, 0, 0, 0, 46, 16), 64, f), VNET_HDR_OK);
	assert_int_equal(check(hdr(1, 0, 0, 0, 47, 16), 64, f),
			 VNET_HDR_BAD_CSUM);
	assert_int_equal(check(hdr(1, 0, 0, 0, 0xffff, 0xffff), 64, f),
			 VNET_HDR_BAD_CSUM);
	assert_int_equal(check(hdr(1, 0, 0, 0, 62, 0), 64, f), VNET_HDR_OK);
	assert_int_equal(check(hdr(1, 0, 0, 0, 63, 0), 64, f),
			 VNET_HDR_BAD_CSUM);
}

static void test_gso(void **state)
{
	uint64_t f = PLAIN | OFFLOADS;

	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34,
				   16), 20000, f),
			 VNET_HDR_OK);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV6, 74, 1428, 54,
				   16), 65000, f),
			 VNET_HDR_OK);
	/* Not negotiated, not offered, or unknown. */
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34,
				   16), 20000, PLAIN),
			 VNET_HDR_BAD_FLAGS);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34,
				   16), 20000,
			       PLAIN | VMIO_BIT(VIRTIO_NET_F_CSUM)),
			 VNET_HDR_BAD_GSO_TYPE);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_UDP, 42, 1472, 34, 6),
			       20000, f),
			 VNET_HDR_BAD_GSO_TYPE);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_UDP_L4, 42, 1472, 34,
				   6), 20000, f),
			 VNET_HDR_BAD_GSO_TYPE);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4 |
					      VIRTIO_NET_HDR_GSO_ECN,
				   54, 1448, 34, 16), 20000, f),
			 VNET_HDR_BAD_GSO_TYPE);
	assert_int_equal(check(hdr(1, 2, 54, 1448, 34, 16), 20000, f),
			 VNET_HDR_BAD_GSO_TYPE);
	/* GSO needs the checksum to finish. */
	assert_int_equal(check(hdr(0, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34,
				   16), 20000, f),
			 VNET_HDR_BAD_FLAGS);
	/* gso_size: 0, tiny, above the MTU; and without GSO, non-zero. */
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 0, 34, 16),
			       20000, f),
			 VNET_HDR_BAD_GSO_SIZE);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1, 34, 16),
			       20000, f),
			 VNET_HDR_BAD_GSO_SIZE);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1501, 34,
				   16), 20000, f),
			 VNET_HDR_BAD_GSO_SIZE);
	assert_int_equal(check(hdr(0, 0, 0, 1448, 0, 0), 64, f),
			 VNET_HDR_BAD_GSO_SIZE);
	/* hdr_len: below an Ethernet header, or the whole frame. */
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 10, 1448, 34,
				   16), 20000, f),
			 VNET_HDR_BAD_HDR_LEN);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 20000, 1448, 34,
				   16), 20000, f),
			 VNET_HDR_BAD_HDR_LEN);
	/* The frame: at most 64 KiB of IP behind Ethernet and a VLAN tag. */
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34,
				   16), VNET_GSO_MAX_FRAME, f),
			 VNET_HDR_OK);
	assert_int_equal(check(hdr(1, VIRTIO_NET_HDR_GSO_TCPV4, 54, 1448, 34,
				   16), VNET_GSO_MAX_FRAME + 1, f),
			 VNET_HDR_FRAME_LONG);
}

static void test_header_len_and_names(void **state)
{
	assert_int_equal(vnet_hdr_len(0), 10);
	assert_int_equal(vnet_hdr_len(PLAIN), 12);
	assert_int_equal(vnet_hdr_len(VMIO_BIT(VIRTIO_NET_F_MRG_RXBUF)), 12);
	for (unsigned v = 0; v < VNET_HDR_NVERDICTS; v++)
		assert_non_null(vnet_hdr_verdict_name(v));
	assert_string_equal(vnet_hdr_verdict_name(VNET_HDR_NVERDICTS),
			    "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_plain_frames),
		cmocka_unit_test(test_frame_sizes),
		cmocka_unit_test(test_flags),
		cmocka_unit_test(test_csum_bounds),
		cmocka_unit_test(test_gso),
		cmocka_unit_test(test_header_len_and_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
