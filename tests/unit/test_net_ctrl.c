/* The control queue's commands: each class the device offers, with the
 * exact lengths and values it takes, and every way a guest can get one
 * wrong; a refused command changes nothing. */
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devices/net/ctrl.h"
#include "virtio/features.h"

#define ALL                                                                   \
	(VMIO_BIT(VIRTIO_NET_F_CTRL_VQ) | VMIO_BIT(VIRTIO_NET_F_CTRL_RX) |    \
	 VMIO_BIT(VIRTIO_NET_F_MQ) | VMIO_BIT(VIRTIO_NET_F_CTRL_MAC_ADDR))

static const uint8_t mac0[6] = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 };
static struct vnet_ctrl_state st;

static uint8_t apply(const uint8_t *cmd, size_t len)
{
	const char *why = NULL;
	struct vnet_ctrl_state before = st;
	uint8_t ack = vnet_ctrl_apply(&st, cmd, len, &why);

	if (ack != VIRTIO_NET_OK) {
		assert_int_equal(ack, VIRTIO_NET_ERR);
		assert_non_null(why);
		assert_memory_equal(&before, &st, sizeof(st));
	}
	return ack;
}

#define APPLY(...)                                                            \
	apply((const uint8_t[]){ __VA_ARGS__ },                               \
	      sizeof((const uint8_t[]){ __VA_ARGS__ }))

static int setup(void **state)
{
	vnet_ctrl_init(&st, ALL, 4, mac0);
	return 0;
}

static void test_initial_state(void **state)
{
	assert_int_equal(st.pairs, 1);
	assert_true(st.promisc);
	assert_memory_equal(st.mac, mac0, 6);
}

static void test_rx_mode(void **state)
{
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_PROMISC, 0),
			 VIRTIO_NET_OK);
	assert_false(st.promisc);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, VIRTIO_NET_CTRL_RX_ALLMULTI, 1),
			 VIRTIO_NET_OK);
	assert_true(st.allmulti);
	/* Value, length, command. */
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, 0, 2), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, 0), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, 0, 1, 1), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, 2, 1), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, 0xff, 1), VIRTIO_NET_ERR);
	/* Not negotiated. */
	vnet_ctrl_init(&st, VMIO_BIT(VIRTIO_NET_F_CTRL_VQ), 4, mac0);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX, 0, 1), VIRTIO_NET_ERR);
}

static void test_mac_table(void **state)
{
	/* One unicast entry, two multicast. */
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, VIRTIO_NET_CTRL_MAC_TABLE_SET,
			       1, 0, 0, 0, 2, 0, 0, 0, 0, 1,
			       2, 0, 0, 0, 1, 0, 0x5e, 0, 0, 1,
			       0x33, 0x33, 0, 0, 0, 1),
			 VIRTIO_NET_OK);
	assert_int_equal(st.uc.entries, 1);
	assert_int_equal(st.mc.entries, 2);
	assert_int_equal(st.mc.mac[1][0], 0x33);
	/* Empty tables. */
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 0, 0, 0, 0, 0, 0, 0, 0, 0),
			 VIRTIO_NET_OK);
	assert_int_equal(st.uc.entries, 0);
	/* Counts that do not match the bytes: too many, a huge one that
	 * would wrap entries * 6, bytes left over, a missing table. */
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 0, 1, 0, 0, 0, 0, 0, 0, 0),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 0, 0xff, 0xff, 0xff, 0xff,
			       0, 0, 0, 0),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 0, 0xab, 0xaa, 0xaa, 0x2a,
			       0, 0, 0, 0, 0, 0),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 0, 0, 0, 0, 0, 0, 0, 0, 0,
			       7),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 0, 0, 0, 0, 0),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 0, 0, 0, 0), VIRTIO_NET_ERR);
}

static void test_mac_table_overflow(void **state)
{
	static uint8_t cmd[2 + 4 + 6 * 100 + 4];
	uint32_t n = htole32(100);

	cmd[0] = VIRTIO_NET_CTRL_MAC;
	cmd[1] = VIRTIO_NET_CTRL_MAC_TABLE_SET;
	memcpy(cmd + 2, &n, 4);
	assert_int_equal(apply(cmd, sizeof(cmd)), VIRTIO_NET_OK);
	assert_int_equal(st.uc.entries, 100);
	assert_true(st.uc.overflow);
	assert_false(st.mc.overflow);
}

static void test_mac_addr(void **state)
{
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, VIRTIO_NET_CTRL_MAC_ADDR_SET,
			       0x02, 1, 2, 3, 4, 5),
			 VIRTIO_NET_OK);
	assert_int_equal(st.mac[5], 5);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 1, 0x01, 1, 2, 3, 4, 5),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 1, 0, 0, 0, 0, 0, 0),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 1, 2, 1, 2, 3, 4),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 1, 2, 1, 2, 3, 4, 5, 6),
			 VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 2, 2, 1, 2, 3, 4, 5),
			 VIRTIO_NET_ERR);
	vnet_ctrl_init(&st, ALL & ~VMIO_BIT(VIRTIO_NET_F_CTRL_MAC_ADDR), 4, mac0);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MAC, 1, 2, 1, 2, 3, 4, 5),
			 VIRTIO_NET_ERR);
}

static void test_mq(void **state)
{
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 4, 0), VIRTIO_NET_OK);
	assert_int_equal(st.pairs, 4);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 1, 0), VIRTIO_NET_OK);
	assert_int_equal(st.pairs, 1);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 0, 0), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 5, 0), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 0, 0x80), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 2), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 2, 0, 0), VIRTIO_NET_ERR);
	/* RSS and hash configuration are not offered. */
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 1, 2, 0), VIRTIO_NET_ERR);
	vnet_ctrl_init(&st, ALL & ~VMIO_BIT(VIRTIO_NET_F_MQ), 4, mac0);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_MQ, 0, 2, 0), VIRTIO_NET_ERR);
}

static void test_bad_classes_and_lengths(void **state)
{
	static uint8_t big[VNET_CTRL_MAX_LEN + 1];

	assert_int_equal(apply(NULL, 0), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_RX), VIRTIO_NET_ERR);
	/* VLAN, GUEST_OFFLOADS: not offered; ANNOUNCE not negotiated
	 * here. */
	assert_int_equal(APPLY(2, 0, 1, 0), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(3, 0), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(5, 0, 0, 0, 0, 0, 0, 0, 0, 0), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(0xff, 0xff), VIRTIO_NET_ERR);
	assert_int_equal(apply(big, sizeof(big)), VIRTIO_NET_ERR);
}

/* The guest's ack of its announcement after a migration: OK, and
 * nothing changes; only ACK, with no data. */
static void test_announce_ack(void **state)
{
	struct vnet_ctrl_state before;

	vnet_ctrl_init(&st, ALL | VMIO_BIT(VIRTIO_NET_F_GUEST_ANNOUNCE), 4,
		       mac0);
	before = st;
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_ANNOUNCE,
			       VIRTIO_NET_CTRL_ANNOUNCE_ACK),
			 VIRTIO_NET_OK);
	assert_memory_equal(&before, &st, sizeof(st));
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_ANNOUNCE, 1), VIRTIO_NET_ERR);
	assert_int_equal(APPLY(VIRTIO_NET_CTRL_ANNOUNCE,
			       VIRTIO_NET_CTRL_ANNOUNCE_ACK, 0),
			 VIRTIO_NET_ERR);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_initial_state, setup),
		cmocka_unit_test_setup(test_rx_mode, setup),
		cmocka_unit_test_setup(test_mac_table, setup),
		cmocka_unit_test_setup(test_mac_table_overflow, setup),
		cmocka_unit_test_setup(test_mac_addr, setup),
		cmocka_unit_test_setup(test_mq, setup),
		cmocka_unit_test_setup(test_bad_classes_and_lengths, setup),
		cmocka_unit_test_setup(test_announce_ack, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
