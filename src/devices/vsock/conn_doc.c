/* One connection in the --control document; see conn_doc.h. */
#include "devices/vsock/conn_doc.h"

#include "devices/vsock/host_service.h"
#include "util/json.h"

void vsock_conn_write_doc(const struct vsock_conn *c, const char *uds_path,
			  struct vmio_json *j)
{
	bool from_guest = c->guest_initiated;

	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "guest_port", c->peer_port);
	vmio_json_kv_uint(j, "host_port", c->local_port);
	vmio_json_kv_string(j, "type", c->type == VSOCK_TYPE_SEQPACKET ?
					       "seqpacket" : "stream");
	vmio_json_kv_string(j, "initiator", from_guest ? "guest" : "host");
	/* A guest connect went to <uds_path>_<port>; a host program came
	 * in through the hybrid socket at uds_path. */
	vmio_json_key(j, "host_path");
	if (from_guest) {
		char path[4096 + 16];
		int n = vsock_service_path(uds_path, c->local_port, path,
					   sizeof(path));
		vmio_json_string_n(j, path, n < 0 ? 0 :
				   (size_t)n < sizeof(path) ? (size_t)n :
							      sizeof(path) - 1);
	} else {
		vmio_json_string(j, uds_path);
	}
	vmio_json_kv_string(j, "state", vsock_conn_state_name(c->state));
	vsock_conn_stats_write(&c->stats, j);
	vmio_json_object_end(j);
}
