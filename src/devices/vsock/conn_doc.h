/* One connection as the --control document shows it (stats.h has the
 * counters; this adds who it joins, and how): an object of its ports,
 * type, initiator, host path and state, then its counters. */
#ifndef VMIO_DEVICES_VSOCK_CONN_DOC_H
#define VMIO_DEVICES_VSOCK_CONN_DOC_H

#include "devices/vsock/connection.h"

struct vmio_json;

/* uds_path: the device's --uds-path. */
void vsock_conn_write_doc(const struct vsock_conn *c, const char *uds_path,
			  struct vmio_json *j);

#endif
