/* The net device's record at a hand-over (device_handover.h). */
#include "devices/net/device_handover.h"

#include <string.h>

#include "devices/net/state.h"
#include "devices/net/steering.h"

#define NCOUNTERS (sizeof(struct vnet_stats) / sizeof(uint64_t))

static void put_table(struct vmio_wire_writer *w,
		      const struct vnet_mac_table *t)
{
	uint32_t kept = t->entries < VNET_MAC_TABLE_MAX ? t->entries
							: VNET_MAC_TABLE_MAX;

	vmio_wire_put_u32(w, t->entries);
	vmio_wire_put_bytes(w, t->mac, 6 * (size_t)kept);
}

static void put_stats(struct vmio_wire_writer *w, const struct vnet_stats *s)
{
	uint64_t v[NCOUNTERS];

	memcpy(v, s, sizeof(v));
	vmio_wire_put_counters(w, v, NCOUNTERS);
}

/* The record; the counters zero unless counted (a device that serves
 * on has them written on the pairs' loops). */
static int put_record(const struct vnet_device *d, struct vmio_wire_writer *w,
		      int fds[], unsigned max, unsigned *nfds,
		      const char **why, bool counted)
{
	static const struct vnet_stats none;
	const struct vnet_ctrl_state *c = &d->ctrl_state;

	vmio_wire_put_u32(w, VNET_HANDOVER_VERSION);
	vmio_wire_put_bytes(w, d->cfg.mac, 6);
	vmio_wire_put_u16(w, d->cfg.mtu);
	vmio_wire_put_u32(w, d->npairs);
	vmio_wire_put_u32(w, (uint32_t)strlen(d->be->ops->name));
	vmio_wire_put_bytes(w, d->be->ops->name, strlen(d->be->ops->name));
	if (d->be->ops->save(d->be, w, fds, max, nfds, why))
		return -1;
	vmio_wire_put_u64(w, d->features);
	vmio_wire_put_u16(w, c->pairs);
	vmio_wire_put_u8(w, c->promisc);
	vmio_wire_put_u8(w, c->allmulti);
	vmio_wire_put_bytes(w, c->mac, 6);
	put_table(w, &c->uc);
	put_table(w, &c->mc);
	put_stats(w, counted ? &d->stats : &none);
	for (unsigned i = 0; i < d->npairs; i++)
		put_stats(w, counted ? &d->pairs[i].stats : &none);
	return 0;
}

int vnet_device_save(const struct vnet_device *d, struct vmio_wire_writer *w,
		     int fds[], unsigned max, unsigned *nfds,
		     const char **why)
{
	for (unsigned i = 0; i < d->npairs; i++) {
		const struct vnet_pair *p = &d->pairs[i];

		if (p->tx_held || p->rx_held || p->attaching || p->rx ||
		    p->tx) {
			*why = "a queue pair still runs or holds guest buffers";
			return -1;
		}
	}
	if (d->ack_waits || d->ctrl) {
		*why = "the control queue still runs";
		return -1;
	}
	if (d->be->ops->release)
		d->be->ops->release(d->be);
	return put_record(d, w, fds, max, nfds, why, true);
}

int vnet_device_snapshot(const struct vnet_device *d,
			 struct vmio_wire_writer *w, int fds[], unsigned max,
			 unsigned *nfds, const char **why)
{
	return put_record(d, w, fds, max, nfds, why, false);
}

int vnet_device_read_head(struct vmio_wire_reader *r,
			  const struct vnet_device_config *cfg,
			  const char *port)
{
	uint32_t version = vmio_wire_get_u32(r);
	const uint8_t *mac;
	uint16_t mtu;
	uint32_t pairs, len;
	const uint8_t *name;

	if (vmio_wire_ok(r) && version != VNET_HANDOVER_VERSION) {
		vmio_wire_fail(r, "a net device record of a version this vmio does not read");
		return -1;
	}
	mac = vmio_wire_get_bytes(r, 6);
	mtu = vmio_wire_get_u16(r);
	pairs = vmio_wire_get_u32(r);
	len = vmio_wire_get_count(r, 1);
	name = vmio_wire_get_bytes(r, len);
	if (!vmio_wire_ok(r))
		return -1;
	if (memcmp(mac, cfg->mac, 6) || mtu != cfg->mtu ||
	    pairs != cfg->pairs) {
		vmio_wire_fail(r, "the predecessor's --mac, --mtu or --queues differ from these");
		return -1;
	}
	if (len != strlen(port) || memcmp(name, port, len)) {
		vmio_wire_fail(r, "the predecessor ran another port (--tap, --null)");
		return -1;
	}
	return 0;
}

static void get_table(struct vmio_wire_reader *r, struct vnet_mac_table *t)
{
	const uint8_t *macs;
	uint32_t kept;

	t->entries = vmio_wire_get_u32(r);
	kept = t->entries < VNET_MAC_TABLE_MAX ? t->entries
					       : VNET_MAC_TABLE_MAX;
	t->overflow = t->entries > VNET_MAC_TABLE_MAX;
	macs = vmio_wire_get_bytes(r, 6 * (size_t)kept);
	if (macs)
		memcpy(t->mac, macs, 6 * (size_t)kept);
}

static void get_stats(struct vmio_wire_reader *r, struct vnet_stats *s)
{
	uint64_t v[NCOUNTERS] = { 0 };

	vmio_wire_get_counters(r, v, NCOUNTERS, 4 * NCOUNTERS);
	memcpy(s, v, sizeof(v));
}

int vnet_device_restore(struct vnet_device *d, struct vmio_wire_reader *r)
{
	struct vnet_ctrl_state *c = &d->restored;
	const uint8_t *mac;

	vnet_ctrl_init(c, 0, (uint16_t)d->npairs, d->cfg.mac);
	d->restored_features = vmio_wire_get_u64(r);
	c->pairs = vmio_wire_get_u16(r);
	c->promisc = vmio_wire_get_u8(r) != 0;
	c->allmulti = vmio_wire_get_u8(r) != 0;
	mac = vmio_wire_get_bytes(r, 6);
	if (mac)
		memcpy(c->mac, mac, 6);
	get_table(r, &c->uc);
	get_table(r, &c->mc);
	if (vmio_wire_ok(r) && (c->pairs < 1 || c->pairs > d->npairs)) {
		vmio_wire_fail(r, "more queue pairs in use than the device has");
		return -1;
	}
	get_stats(r, &d->stats);
	for (unsigned i = 0; i < d->npairs; i++)
		get_stats(r, &d->pairs[i].stats);
	if (!vmio_wire_ok(r))
		return -1;
	if (r->left) {
		vmio_wire_fail(r, "bytes past its end");
		return -1;
	}
	d->restoring = true;
	return 0;
}

int vnet_device_restored(struct vnet_device *d, const char **why)
{
	if (!d->restoring)
		return 0;
	d->restoring = false;
	if (d->features != d->restored_features) {
		*why = "the session's features are not the device's";
		return -1;
	}
	d->restored.features = d->features;
	d->restored.max_pairs = d->ctrl_state.max_pairs;
	d->ctrl_state = d->restored;
	vnet_update_steering(d);
	return 0;
}
