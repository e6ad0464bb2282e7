/* What a backend program tells a VMM about itself before it starts it
 * (QEMU's "backend program conventions"). */
#ifndef VMIO_VHOST_USER_CAPABILITIES_H
#define VMIO_VHOST_USER_CAPABILITIES_H

/* The JSON that --print-capabilities prints for a device type ("vsock",
 * "net"): {"type": "...", "features": [...]} per vhost-user.json. */
void vmio_backend_print_capabilities(const char *type);

#endif
