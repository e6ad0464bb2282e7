/* The vsock counters (stats.h): sums and their JSON members. */
#include "devices/vsock/stats.h"

#include "util/json.h"

void vsock_conn_stats_add(struct vsock_conn_stats *sum,
			  const struct vsock_conn_stats *s)
{
	sum->bytes_to_guest += s->bytes_to_guest;
	sum->packets_to_guest += s->packets_to_guest;
	sum->bytes_from_guest += s->bytes_from_guest;
	sum->packets_from_guest += s->packets_from_guest;
	sum->credit_requests_sent += s->credit_requests_sent;
	sum->credit_requests_received += s->credit_requests_received;
	sum->credit_stalls += s->credit_stalls;
	sum->packet_stalls += s->packet_stalls;
	sum->merge_holds += s->merge_holds;
	sum->rsts_sent += s->rsts_sent;
	sum->rsts_received += s->rsts_received;
}

void vsock_conn_stats_write(const struct vsock_conn_stats *s,
			    struct vmio_json *j)
{
	vmio_json_kv_uint(j, "bytes_to_guest", s->bytes_to_guest);
	vmio_json_kv_uint(j, "packets_to_guest", s->packets_to_guest);
	vmio_json_kv_uint(j, "bytes_from_guest", s->bytes_from_guest);
	vmio_json_kv_uint(j, "packets_from_guest", s->packets_from_guest);
	vmio_json_kv_uint(j, "credit_requests_sent", s->credit_requests_sent);
	vmio_json_kv_uint(j, "credit_requests_received",
			  s->credit_requests_received);
	vmio_json_kv_uint(j, "credit_stalls", s->credit_stalls);
	vmio_json_kv_uint(j, "packet_stalls", s->packet_stalls);
	vmio_json_kv_uint(j, "merge_holds", s->merge_holds);
	vmio_json_kv_uint(j, "rsts_sent", s->rsts_sent);
	vmio_json_kv_uint(j, "rsts_received", s->rsts_received);
}
