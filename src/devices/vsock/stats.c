/* The vsock counters (stats.h): sums and their JSON members. */
#include "devices/vsock/stats.h"

#include <inttypes.h>

#include "util/json.h"
#include "util/log.h"

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

void vsock_vm_stats_write(const struct vsock_vm_stats *st, unsigned live,
			  const struct vsock_conn_stats *totals,
			  struct vmio_json *j)
{
	vmio_json_kv_uint(j, "connections_open", live);
	vmio_json_kv_uint(j, "connections_opened", st->connections_opened);
	vmio_json_kv_uint(j, "connections_ended", st->connections_ended);
	vmio_json_kv_uint(j, "connections_refused", st->connections_refused);
	vmio_json_kv_uint(j, "rsts_unmatched", st->rsts_unmatched);
	vmio_json_kv_uint(j, "rsts_after_crash", st->rsts_after_crash);
	vmio_json_kv_uint(j, "rx_errors", st->rx_errors);
	vmio_json_kv_uint(j, "rx_packets", st->rx_packets);
	vmio_json_kv_uint(j, "rx_flushes", st->rx_flushes);
	vmio_json_key(j, "totals");
	vmio_json_object_begin(j);
	vsock_conn_stats_write(totals, j);
	vmio_json_object_end(j);
}

void vsock_vm_stats_log(const struct vsock_vm_stats *st, uint64_t guest_cid)
{
	log_debug("vsock: CID %" PRIu64 ": tx spliced %" PRIu64
		  " B, copied %" PRIu64 " B, chains held %" PRIu64
		  " (at most %" PRIu64 " at once, %" PRIu64 " found no room, "
		  "%" PRIu64 " wake-ups); "
		  "rx packets %" PRIu64 ", host reads %" PRIu64
		  ", CREDIT_REQUEST %" PRIu64 ", CREDIT_UPDATE %" PRIu64
		  ", used-ring flushes %" PRIu64,
		  guest_cid, st->tx_bytes_spliced, st->tx_bytes_copied,
		  st->tx_chains_held, st->tx_chains_held_max, st->tx_hold_full,
		  st->tx_hold_wakes,
		  st->rx_packets, st->rx_host_reads, st->rx_credit_requests,
		  st->rx_credit_updates, st->rx_flushes);
}
