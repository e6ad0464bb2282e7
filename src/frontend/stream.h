/* A byte stream through a loopback-style queue pair, driven by the in-tree
 * front end: what vmio-drive and the integration tests run. Data posted on
 * the tx queue is a deterministic pattern whose byte at any stream offset
 * can be computed, so every byte that comes back on the rx queue can be
 * checked without keeping a copy. */
#ifndef VMIO_FRONTEND_STREAM_H
#define VMIO_FRONTEND_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "frontend/frontend.h"

struct vmio_stream_opts {
	uint64_t bytes;       /* to move (default 1 GiB) */
	uint32_t tx_chunk;    /* bytes per tx chain (default 64 KiB) */
	uint32_t rx_chunk;    /* bytes per rx chain (default tx_chunk) */
	unsigned segs;        /* buffers per chain (default 1) */
	bool indirect;        /* chains as one indirect descriptor */
	bool verify;          /* check every received byte */
	uint64_t remap_every; /* re-send SET_MEM_TABLE every N bytes (0: no) */
	int stall_ms;         /* give up after this long without progress
				 * (default 10 s) */
	uint64_t seed;        /* of the pattern */
};

/* Sets the defaults for every field. */
void vmio_stream_opts_init(struct vmio_stream_opts *o);

struct vmio_stream_result {
	uint64_t bytes;        /* received (and checked, with verify) */
	double seconds;
	unsigned remaps;       /* SET_MEM_TABLE re-sent */
	unsigned crossing_bufs; /* buffers posted across a region boundary */
	char error[256];       /* why it failed; empty on success */
};

/* Byte `offset` of the pattern for `seed`. */
uint8_t vmio_stream_pattern_byte(uint64_t seed, uint64_t offset);

/* Connects to path, negotiates (VERSION_1, EVENT_IDX, INDIRECT_DESC,
 * REPLY_ACK), creates mem_size bytes of guest memory in nregions regions
 * and sets up queues 0 (rx) and 1 (tx) with queue_size entries. Returns
 * NULL with err filled on failure. */
struct vmio_fe *vmio_stream_connect(const char *path, int timeout_ms,
				    uint64_t mem_size, unsigned nregions,
				    uint16_t queue_size, char *err,
				    size_t err_size);
/* The same, also asking for the device-specific feature bits in
 * device_features (acked where the device offers them). */
struct vmio_fe *vmio_stream_connect_ex(const char *path, int timeout_ms,
				       uint64_t mem_size, unsigned nregions,
				       uint16_t queue_size,
				       uint64_t device_features, char *err,
				       size_t err_size);

/* Guest memory a stream with these options needs, rings included. */
uint64_t vmio_stream_mem_needed(const struct vmio_stream_opts *o,
				uint16_t queue_size);

/* Runs the stream over fe's queues 0 and 1 until o->bytes came back.
 * Allocates its buffers from fe's guest memory. Returns 0, or -1 with
 * r->error set. */
int vmio_stream_run(struct vmio_fe *fe, const struct vmio_stream_opts *o,
		    struct vmio_stream_result *r);

#endif
