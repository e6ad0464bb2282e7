/* What vmio net's device hands a successor vmio, beside the vhost-user
 * session (vhost-user/session_state.h): its configuration (checked, not
 * taken: the successor has the same command line), its port's record
 * and descriptors (port.h's save: for a TAP its queues, which keep the
 * interface and its addresses alive, and what was applied to it), the
 * control queue's state (promiscuous and all-multicast modes, the MAC
 * and its filter tables, the queue pairs in use: the steering follows)
 * and the counters. The order of steps, both sides:
 *
 *   old: hold the session (every queue stops for good: a no-copy port
 *        gives every chain back, a waiting control ack is unpopped),
 *        save the session, vnet_device_save; send both records
 *   new: vnet_device_read_head (the command line checked against it),
 *        the port from the record (vnet_port_tap_restore, or a null
 *        port), vnet_device_new on it, vnet_device_restore, a backend
 *        on its ops, restore the session (held: its features set the
 *        port up as it is already), vnet_device_restored
 *   old, once the new one has taken over: the session handed over,
 *        then the device and its port freed (this process's copies of
 *        the queues closed: the interface stays, the successor has it)
 *   new: resume the session
 *   old, if the new one failed: resume the session.
 *
 * The record (util/wire.h): version u32 (VNET_HANDOVER_VERSION); mac 6
 * bytes, mtu u16, pairs u32; the port's name (u32 length, bytes) and
 * its record; features u64; the control state: pairs u16, promisc u8,
 * allmulti u8, mac 6 bytes, then the unicast and multicast tables
 * (entries u32, then min(entries, VNET_MAC_TABLE_MAX) addresses); the
 * control queue's counters, then each pair's (vmio_wire_put_counters). */
#ifndef VMIO_DEVICES_NET_DEVICE_HANDOVER_H
#define VMIO_DEVICES_NET_DEVICE_HANDOVER_H

#include <stdbool.h>
#include <stddef.h>

#include "devices/net/config.h"
#include "devices/net/device.h"
#include "util/wire.h"

#define VNET_HANDOVER_VERSION 1u

/* Appends d's record to w and its port's descriptors to fds (at most
 * max; *nfds in: those there, out: after; they stay the port's). Every
 * queue must have stopped for good. Returns 0, or -1 with *why. */
int vnet_device_save(const struct vnet_device *d, struct vmio_wire_writer *w,
		     int fds[], unsigned max, unsigned *nfds,
		     const char **why);

/* The same record of a device that serves on, for its restore after
 * this process dies (cli/net_kept.h): on the device's loop, between
 * messages; its counters zero (the pairs write theirs as they run), and
 * what the queues hold left out (a restore serves each ring again from
 * its used index). Returns 0, or -1 with *why (a port that keeps no
 * record). */
int vnet_device_snapshot(const struct vnet_device *d,
			 struct vmio_wire_writer *w, int fds[], unsigned max,
			 unsigned *nfds, const char **why);

/* The record's head, checked against cfg (the successor's command line;
 * its port not looked at) and port (its name: "tap", "null"): 0, or -1
 * with r failed. r is then at the port's record. */
int vnet_device_read_head(struct vmio_wire_reader *r,
			  const struct vnet_device_config *cfg,
			  const char *port);

/* The rest of the record into d (fresh, on the port the record's came
 * back as): the counters now, the control state once the session is
 * restored. Returns 0, or -1 with r failed. */
int vnet_device_restore(struct vnet_device *d, struct vmio_wire_reader *r);

/* The session is restored (its features negotiated again): the control
 * state applied and the pairs steered as it says. Returns 0, or -1 with
 * *why (the session's features are not the record's). */
int vnet_device_restored(struct vnet_device *d, const char **why);

#endif
