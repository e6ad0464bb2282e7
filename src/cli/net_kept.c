/* The net device kept in systemd's fd store; see net_kept.h. */
#include "cli/net_kept.h"

#include <stdio.h>
#include <string.h>

#include "devices/net/device_handover.h"

#define PREFIX "vmio.net."

/* The socket's path (u32 length, bytes): the port and the device's
 * configuration are the device record's to check. */
static void put_identity(void *opaque, struct vmio_wire_writer *w)
{
	const struct net_kept *k = opaque;
	size_t plen = strlen(k->socket);

	vmio_wire_put_u32(w, (uint32_t)plen);
	vmio_wire_put_bytes(w, k->socket, plen);
}

static int check_identity(void *opaque, struct vmio_wire_reader *r,
			  char *why, size_t why_len)
{
	const struct net_kept *k = opaque;
	uint32_t plen = vmio_wire_get_count(r, 1);
	const uint8_t *path = vmio_wire_get_bytes(r, plen);

	if (!vmio_wire_ok(r)) {
		snprintf(why, why_len, "its record is cut: %s", r->why);
		return -1;
	}
	if (plen == strlen(k->socket) && !memcmp(path, k->socket, plen))
		return 0;
	snprintf(why, why_len,
		 "it was the device of another socket (%.*s): the command line changed",
		 (int)(plen > 200 ? 200 : plen), (const char *)path);
	vmio_wire_fail(r, "another socket's");
	return -1;
}

static int put_device(void *opaque, struct vmio_wire_writer *w, int fds[],
		      unsigned max, unsigned *nfds, const char **why)
{
	const struct net_kept *k = opaque;

	return vnet_device_snapshot(k->dev, w, fds, max, nfds, why);
}

static const struct session_kept_ops net_kept_ops = {
	.put_identity = put_identity,
	.check_identity = check_identity,
	.put_device = put_device,
};

int net_kept_open(struct net_kept *k, const char *socket,
		  struct vmio_loop *loop, bool collect)
{
	*k = (struct net_kept){ .socket = socket ? socket : "" };
	if (collect)
		session_kept_collect(PREFIX);
	k->s = session_kept_open(PREFIX "0", "net device", &net_kept_ops, k,
				 loop);
	return k->s ? 0 : -1;
}

void net_kept_fini(struct net_kept *k)
{
	session_kept_free(k->s);
	k->s = NULL;
}

static void on_changed(void *opaque)
{
	struct net_kept *k = opaque;

	session_kept_changed(k->s);
}

void net_kept_start(struct net_kept *k, struct vmio_backend *be,
		    struct vnet_device *dev)
{
	k->dev = dev;
	vnet_device_watch_state(dev, on_changed, k);
	session_kept_start(k->s, be);
}
