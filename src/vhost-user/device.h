/* What a device tells the vhost-user core about itself, and the callbacks
 * through which the core drives it. A device is this table plus its
 * private state; it never sees a vhost-user message.
 *
 * Threading: the core calls every callback from the loop it was given,
 * except that a device may name another loop for a queue (queue_loop):
 * queue_start, queue_stop and queue_kick of that queue then run on that
 * loop's thread. The core sends them there and waits for the answer
 * without blocking (it reads no further message meanwhile), so every
 * other callback (features_set, memory_changing, reset) runs on the
 * core's loop only while every queue they concern has stopped on its
 * own thread; a message that changes a queue takes effect there before
 * its reply is sent. */
#ifndef VMIO_VHOST_USER_DEVICE_H
#define VMIO_VHOST_USER_DEVICE_H

#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "virtio/memory.h"
#include "virtio/virtqueue.h"

/* Why a queue stops: for a moment, while the core changes what the queue
 * runs on (ring addresses, size, memory table, features), or for good
 * (GET_VRING_BASE, SET_VRING_ENABLE 0, the front end gone), when the
 * device gives back every chain it holds. */
enum vmio_queue_stop {
	VMIO_QUEUE_PAUSE,
	VMIO_QUEUE_HALT,
	/* For good, for a hand-over (vmio_session_hold): every chain back,
	 * as HALT, but the guest still serves the queue, from the successor
	 * (or from this process again if the hand-over fails): what the
	 * device set up outside the session for it (a TAP queue attached,
	 * with the frames waiting in it) stays as it is. */
	VMIO_QUEUE_HOLD,
	/* The memory table is about to change: give back every chain (the
	 * queue restarts on the new table, its ring unchanged). Sent also
	 * to a queue that was only paused, since it may hold chains. */
	VMIO_QUEUE_MEMORY,
};

struct vmio_cpu_account;
struct vmio_loop;

struct vmio_device_ops {
	const char *name; /* "vsock", "net", "loopback": for log lines */

	/* virtio features the device offers. The core adds
	 * VHOST_USER_F_PROTOCOL_FEATURES; VERSION_1, EVENT_IDX and
	 * INDIRECT_DESC are the device's to offer. */
	uint64_t features;
	/* vhost-user protocol features beyond the core's own (MQ, REPLY_ACK,
	 * CONFIGURE_MEM_SLOTS, STATUS). CONFIG is the device's to offer: only
	 * one whose config space the front end reads from the back end
	 * (vsock's CID, loopback's) offers it; QEMU keeps virtio-net's config
	 * space itself and warns at every start about a net back end that
	 * offers it. */
	uint64_t protocol_features;
	/* The device marks every byte it writes into guest memory
	 * (vmio_vq_log_iov, before each push): the core then offers
	 * VHOST_F_LOG_ALL and LOG_SHMFD, so that QEMU can migrate the guest. */
	bool logs_writes;
	/* SEND_RARP (after a migration, for a guest that does not announce
	 * itself): the device sends a RARP from mac out of its host side.
	 * Set: the core offers VHOST_USER_PROTOCOL_F_RARP. May be NULL. */
	void (*send_rarp)(void *dev, const uint8_t mac[6]);
	unsigned num_queues;
	/* SET_VRING_NUM above this is refused: a queue the device starts
	 * is never larger. */
	uint16_t max_queue_size;
	uint32_t config_size;    /* bytes of config space; 0 if none */

	/* Config space reads and writes, already bounds-checked against
	 * config_size (the device checks no range again). Return 0 or
	 * -errno. set_config may be NULL (read-only
	 * config: writes are refused). */
	int (*get_config)(void *dev, uint8_t *buf, uint32_t offset, uint32_t len);
	int (*set_config)(void *dev, const uint8_t *buf, uint32_t offset,
			  uint32_t len);

	/* The front end acknowledged these features (a subset of
	 * `features`). Return 0, or -errno to refuse them. May be NULL. */
	int (*features_set)(void *dev, uint64_t features);

	/* The queue became ready (started, enabled, rings mapped) or stopped
	 * being so. After queue_start the core calls queue_kick on every kick;
	 * the device should also look at the ring once at start, since the
	 * driver may have posted buffers before. mem is the current guest
	 * memory; it stays valid until memory_changing or queue_stop. A
	 * paused queue restarts with queue_start once the change is made. */
	void (*queue_start)(void *dev, struct vmio_vq *vq, struct vmio_mem *mem);
	void (*queue_stop)(void *dev, struct vmio_vq *vq,
			   enum vmio_queue_stop how);
	void (*queue_kick)(void *dev, struct vmio_vq *vq);

	/* The loop that serves queue index with the negotiated features, or
	 * NULL for the core's own. Asked at each start; the queue stays
	 * there until it stops. May be NULL: every queue on the core's. */
	struct vmio_loop *(*queue_loop)(void *dev, unsigned index);
	/* The CPU account (event/cpu_account.h) that queue index's kicks,
	 * and whatever its queue_start makes, are charged to; NULL, or the
	 * op NULL: the backend's (the VM's). For a device that reports a
	 * part of the VM apart, as net does each queue pair: such an
	 * account is a part (its parent) of the VM's. */
	struct vmio_cpu_account *(*queue_account)(void *dev, unsigned index);

	/* The memory table is about to be replaced: drop every pointer into
	 * guest memory (give held chains back with vmio_vq_unpop, or push
	 * them). Queues then restart with queue_start. May be NULL. */
	void (*memory_changing)(void *dev);

	/* The front end disconnected or sent RESET_OWNER: all queues are
	 * already stopped; forget per-connection state. May be NULL. */
	void (*reset)(void *dev);
};

/* get_config for a device whose config space is one le64 (vsock's
 * guest_cid, loopback's byte count), config_size 8: the core checked the
 * range against it. */
static inline int vmio_config_read_le64(uint64_t value, uint8_t *buf,
					uint32_t offset, uint32_t len)
{
	uint64_t le = htole64(value);

	memcpy(buf, (const uint8_t *)&le + offset, len);
	return 0;
}

#endif
