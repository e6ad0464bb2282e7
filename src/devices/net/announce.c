/* The guest's new place announced after a migration; see announce.h. */
#include "devices/net/announce.h"

#include <string.h>

#include "devices/net/virtio_net.h"

void vnet_rarp_frame(const uint8_t mac[6], uint8_t *frame)
{
	/* RFC 903 over Ethernet: htype 1, ptype IPv4, hlen 6, plen 4, op 3;
	 * sender and target hardware addresses both the MAC, no IPv4
	 * address. */
	static const uint8_t head[] = { 0x80, 0x35, 0x00, 0x01, 0x08, 0x00,
					0x06, 0x04, 0x00, 0x03 };

	memset(frame, 0, VNET_RARP_LEN);
	memset(frame, 0xff, 6);
	memcpy(frame + 6, mac, 6);
	memcpy(frame + 12, head, sizeof(head));
	memcpy(frame + 22, mac, 6);
	memcpy(frame + 32, mac, 6);
}

/* On pair 0's loop: once, best effort (a port that is full drops it, as
 * a frame from the guest would be). */
static void on_rarp(void *opaque)
{
	struct vnet_device *d = opaque;
	struct vnet_pair *p = &d->pairs[0];
	uint8_t hdr[VIRTIO_NET_HDR_LEN] = { 0 }, frame[VNET_RARP_LEN];
	struct iovec iov[2] = {
		{ hdr, d->hdr_len },
		{ frame, sizeof(frame) },
	};

	vnet_rarp_frame(d->rarp_mac, frame);
	if (d->be->ops->tx(d->be, 0, iov, 2, 0) == 0)
		p->stats.rarps++;
	else
		log_warn("net: the RARP announcing %02x:%02x:%02x:%02x:%02x:%02x after a migration was not sent: the %s port took no frame",
			 d->rarp_mac[0], d->rarp_mac[1], d->rarp_mac[2],
			 d->rarp_mac[3], d->rarp_mac[4], d->rarp_mac[5],
			 d->be->ops->name);
}

void vnet_announce_init(struct vnet_device *d)
{
	vmio_defer_init(&d->rarp, d->pairs[0].loop, on_rarp, d);
}

void vnet_announce_fini(struct vnet_device *d)
{
	vmio_defer_cancel(&d->rarp);
}

void vnet_announce_rarp(struct vnet_device *d, const uint8_t mac[6])
{
	/* A port that holds what it sends would give back a guest chain
	 * that never was. */
	if (d->be->ops->tx_reap) {
		log_warn("net: no RARP after a migration through the %s port: it sends only guest memory; a guest with VIRTIO_NET_F_GUEST_ANNOUNCE announces itself",
			 d->be->ops->name);
		return;
	}
	memcpy(d->rarp_mac, mac, 6);
	vmio_defer_post(&d->rarp);
}
