/* virtio feature bits common to every device (virtio 1.x, section 6), and
 * the one bit vhost-user adds. Device-specific bits live with the device. */
#ifndef VMIO_VIRTIO_FEATURES_H
#define VMIO_VIRTIO_FEATURES_H

#define VIRTIO_F_NOTIFY_ON_EMPTY 24
#define VIRTIO_RING_F_INDIRECT_DESC 28
#define VIRTIO_RING_F_EVENT_IDX 29
#define VHOST_USER_F_PROTOCOL_FEATURES 30
#define VIRTIO_F_VERSION_1 32
#define VIRTIO_F_ACCESS_PLATFORM 33
#define VIRTIO_F_RING_PACKED 34
#define VIRTIO_F_IN_ORDER 35

#define VMIO_BIT(n) (1ull << (n))

#endif
