/* The counters as one log line: the integration tests read it, so its
 * words stay stable ("tx_frames=N", one "name=N" per counter). */
#include <inttypes.h>
#include <stdio.h>

#include "devices/net/stats.h"
#include "util/json.h"

void vnet_stats_format(const struct vnet_stats *s, char *buf, size_t size)
{
	char invalid[256];
	size_t off = 0;
	uint64_t dropped = s->tx_bad_chain + s->tx_backend_errors;

	invalid[0] = '\0';
	for (unsigned v = VNET_HDR_OK + 1; v < VNET_HDR_NVERDICTS; v++) {
		dropped += s->tx_invalid[v];
		if (s->tx_invalid[v] && off < sizeof(invalid))
			off += (size_t)snprintf(invalid + off,
						sizeof(invalid) - off,
						" %s=%" PRIu64,
						vnet_hdr_verdict_name(v),
						s->tx_invalid[v]);
	}
	snprintf(buf, size, "tx_frames=%" PRIu64 " tx_bytes=%" PRIu64
		 " tx_dropped=%" PRIu64 " tx_bad_chain=%" PRIu64
		 " tx_backend_errors=%" PRIu64 " rx_frames=%" PRIu64
		 " rx_bytes=%" PRIu64 " rx_errors=%" PRIu64
		 " rx_turns=%" PRIu64 " rx_buffers_exhausted=%" PRIu64
		 " ctrl_ok=%" PRIu64 " ctrl_err=%" PRIu64 " rarps=%" PRIu64 "%s",
		 s->tx_frames, s->tx_bytes, dropped, s->tx_bad_chain,
		 s->tx_backend_errors, s->rx_frames, s->rx_bytes, s->rx_errors,
		 s->rx_turns, s->rx_buffers_exhausted, s->ctrl_ok, s->ctrl_err,
		 s->rarps, invalid);
}

void vnet_stats_add(struct vnet_stats *sum, const struct vnet_stats *s)
{
	sum->tx_frames += s->tx_frames;
	sum->tx_bytes += s->tx_bytes;
	for (unsigned v = 0; v < VNET_HDR_NVERDICTS; v++)
		sum->tx_invalid[v] += s->tx_invalid[v];
	sum->tx_bad_chain += s->tx_bad_chain;
	sum->tx_backend_errors += s->tx_backend_errors;
	sum->rx_frames += s->rx_frames;
	sum->rx_bytes += s->rx_bytes;
	sum->rx_errors += s->rx_errors;
	sum->rx_turns += s->rx_turns;
	sum->rx_buffers_exhausted += s->rx_buffers_exhausted;
	sum->ctrl_ok += s->ctrl_ok;
	sum->ctrl_err += s->ctrl_err;
	sum->rarps += s->rarps;
}

void vnet_stats_write(const struct vnet_stats *s, struct vmio_json *j)
{
	uint64_t dropped = s->tx_bad_chain + s->tx_backend_errors;

	for (unsigned v = VNET_HDR_OK + 1; v < VNET_HDR_NVERDICTS; v++)
		dropped += s->tx_invalid[v];
	vmio_json_kv_uint(j, "tx_frames", s->tx_frames);
	vmio_json_kv_uint(j, "tx_bytes", s->tx_bytes);
	vmio_json_kv_uint(j, "tx_dropped", dropped);
	vmio_json_key(j, "tx_invalid");
	vmio_json_object_begin(j);
	for (unsigned v = VNET_HDR_OK + 1; v < VNET_HDR_NVERDICTS; v++)
		vmio_json_kv_uint(j, vnet_hdr_verdict_name(v),
				  s->tx_invalid[v]);
	vmio_json_object_end(j);
	vmio_json_kv_uint(j, "tx_bad_chain", s->tx_bad_chain);
	vmio_json_kv_uint(j, "tx_backend_errors", s->tx_backend_errors);
	vmio_json_kv_uint(j, "rx_frames", s->rx_frames);
	vmio_json_kv_uint(j, "rx_bytes", s->rx_bytes);
	vmio_json_kv_uint(j, "rx_errors", s->rx_errors);
	vmio_json_kv_uint(j, "rx_turns", s->rx_turns);
	vmio_json_kv_uint(j, "rx_buffers_exhausted", s->rx_buffers_exhausted);
	vmio_json_kv_uint(j, "ctrl_ok", s->ctrl_ok);
	vmio_json_kv_uint(j, "ctrl_err", s->ctrl_err);
	vmio_json_kv_uint(j, "rarps", s->rarps);
}
