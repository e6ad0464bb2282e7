/* The vhost-user wire format (QEMU docs/interop/vhost-user.rst): a 12-byte
 * header in native byte order, a payload of at most VHOST_USER_MAX_PAYLOAD
 * bytes, and file descriptors as SCM_RIGHTS. Shared by the backend core and
 * the in-tree front end. */
#ifndef VMIO_VHOST_USER_PROTOCOL_H
#define VMIO_VHOST_USER_PROTOCOL_H

#include <stdint.h>

#include "virtio/memory.h"

enum vhost_user_request {
	VHOST_USER_NONE = 0,
	VHOST_USER_GET_FEATURES = 1,
	VHOST_USER_SET_FEATURES = 2,
	VHOST_USER_SET_OWNER = 3,
	VHOST_USER_RESET_OWNER = 4,
	VHOST_USER_SET_MEM_TABLE = 5,
	VHOST_USER_SET_LOG_BASE = 6,
	VHOST_USER_SET_LOG_FD = 7,
	VHOST_USER_SET_VRING_NUM = 8,
	VHOST_USER_SET_VRING_ADDR = 9,
	VHOST_USER_SET_VRING_BASE = 10,
	VHOST_USER_GET_VRING_BASE = 11,
	VHOST_USER_SET_VRING_KICK = 12,
	VHOST_USER_SET_VRING_CALL = 13,
	VHOST_USER_SET_VRING_ERR = 14,
	VHOST_USER_GET_PROTOCOL_FEATURES = 15,
	VHOST_USER_SET_PROTOCOL_FEATURES = 16,
	VHOST_USER_GET_QUEUE_NUM = 17,
	VHOST_USER_SET_VRING_ENABLE = 18,
	VHOST_USER_SEND_RARP = 19,
	VHOST_USER_NET_SET_MTU = 20,
	VHOST_USER_SET_BACKEND_REQ_FD = 21,
	VHOST_USER_IOTLB_MSG = 22,
	VHOST_USER_SET_VRING_ENDIAN = 23,
	VHOST_USER_GET_CONFIG = 24,
	VHOST_USER_SET_CONFIG = 25,
	VHOST_USER_GET_INFLIGHT_FD = 31,
	VHOST_USER_SET_INFLIGHT_FD = 32,
	VHOST_USER_GET_MAX_MEM_SLOTS = 36,
	VHOST_USER_ADD_MEM_REG = 37,
	VHOST_USER_REM_MEM_REG = 38,
	VHOST_USER_SET_STATUS = 39,
	VHOST_USER_GET_STATUS = 40,
	VHOST_USER_REQUEST_MAX = 41,
};

enum vhost_user_protocol_feature {
	VHOST_USER_PROTOCOL_F_MQ = 0,
	VHOST_USER_PROTOCOL_F_LOG_SHMFD = 1,
	VHOST_USER_PROTOCOL_F_RARP = 2,
	VHOST_USER_PROTOCOL_F_REPLY_ACK = 3,
	VHOST_USER_PROTOCOL_F_NET_MTU = 4,
	VHOST_USER_PROTOCOL_F_BACKEND_REQ = 5,
	VHOST_USER_PROTOCOL_F_CONFIG = 9,
	VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS = 15,
	VHOST_USER_PROTOCOL_F_STATUS = 16,
};

#define VHOST_USER_VERSION 0x1u
#define VHOST_USER_VERSION_MASK 0x3u
#define VHOST_USER_REPLY_MASK (1u << 2)
#define VHOST_USER_NEED_REPLY_MASK (1u << 3)

/* SET_VRING_KICK/CALL/ERR: queue index in bits 0-7, bit 8 says no fd. */
#define VHOST_USER_VRING_IDX_MASK 0xffu
#define VHOST_USER_VRING_NOFD_MASK (1u << 8)

/* Regions in one SET_MEM_TABLE, and fds in one message. */
#define VHOST_USER_MEM_TABLE_MAX_REGIONS 8
#define VHOST_USER_MAX_FDS 8
#define VHOST_USER_MAX_CONFIG_SIZE 256
/* Default for how long a front end may take to finish a message it
 * started, or to take a reply (vmio_backend_set_message_timeout). */
#define VHOST_USER_MSG_TIMEOUT_MS 1000

struct vhost_user_header {
	uint32_t request;
	uint32_t flags;
	uint32_t size; /* payload bytes that follow */
} __attribute__((packed));

struct vhost_user_vring_state {
	uint32_t index;
	uint32_t num;
} __attribute__((packed));

/* The virtio feature bit a front end acks while it migrates the guest
 * (the device logs its writes), and SET_VRING_ADDR's flag that a ring
 * logs. */
#define VHOST_F_LOG_ALL 26
#define VHOST_VRING_F_LOG 0

struct vhost_user_vring_addr {
	uint32_t index;
	uint32_t flags; /* bit 0: VHOST_VRING_F_LOG */
	uint64_t desc_uva;
	uint64_t used_uva;
	uint64_t avail_uva;
	uint64_t log_gpa;
} __attribute__((packed));

struct vhost_user_memory_region {
	uint64_t gpa;
	uint64_t size;
	uint64_t uva;
	uint64_t mmap_offset;
} __attribute__((packed));

struct vhost_user_memory {
	uint32_t nregions;
	uint32_t padding;
	struct vhost_user_memory_region regions[VHOST_USER_MEM_TABLE_MAX_REGIONS];
} __attribute__((packed));

struct vhost_user_mem_reg {
	uint64_t padding;
	struct vhost_user_memory_region region;
} __attribute__((packed));

/* SET_LOG_BASE's: the dirty log, mmap_size bytes of the fd sent with it
 * from mmap_offset. */
struct vhost_user_log {
	uint64_t mmap_size;
	uint64_t mmap_offset;
} __attribute__((packed));

struct vhost_user_config {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t payload[VHOST_USER_MAX_CONFIG_SIZE];
} __attribute__((packed));

union vhost_user_payload {
	uint64_t u64;
	struct vhost_user_vring_state state;
	struct vhost_user_vring_addr addr;
	struct vhost_user_memory memory;
	struct vhost_user_mem_reg mem_reg;
	struct vhost_user_log log;
	struct vhost_user_config config;
};

#define VHOST_USER_MAX_PAYLOAD sizeof(union vhost_user_payload)

struct vhost_user_msg {
	struct vhost_user_header hdr;
	union vhost_user_payload payload;
	int fds[VHOST_USER_MAX_FDS];
	unsigned nfds;
};

#endif
