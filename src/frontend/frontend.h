/* The in-tree vhost-user front end: the VMM's side of the protocol, with
 * guest memory in a memfd, for tests and benchmarks that drive a device
 * from a plain process. It is equipment, not a VMM: it does what a test
 * tells it, including things a well-behaved VMM never does. */
#ifndef VMIO_FRONTEND_FRONTEND_H
#define VMIO_FRONTEND_FRONTEND_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend/driver_vq.h"
#include "frontend/msg_io.h"
#include "vhost-user/protocol.h"

#define VMIO_FE_MAX_QUEUES 16

struct vmio_fe {
	int sock;
	uint64_t device_features;   /* what GET_FEATURES offered */
	uint64_t features;          /* what we acked */
	uint64_t protocol_features; /* acked */

	/* Guest memory: one memfd, mapped once here, described to the backend
	 * as nregions regions laid end to end from gpa 0. */
	int mem_fd;
	uint8_t *mem;
	uint64_t mem_size;
	unsigned nregions;
	uint64_t alloc_next; /* bump allocator, gpa */

	struct vmio_dvq queues[VMIO_FE_MAX_QUEUES];
	bool queue_set_up[VMIO_FE_MAX_QUEUES];
};

/* Connects to a backend's socket, retrying until timeout_ms if it is not
 * there yet. Returns NULL (errno set) on failure. */
struct vmio_fe *vmio_fe_connect(const char *path, int timeout_ms);
/* Closes the socket and frees the memory without stopping any queue, as a
 * VMM that dies would. */
void vmio_fe_close(struct vmio_fe *fe);

/* Sends one request. If reply is non-NULL, waits (bounded) for the reply
 * and copies up to reply_len payload bytes. With need_reply set and
 * REPLY_ACK negotiated, also waits for the u64 ack and returns -EIO
 * if it is non-zero. Returns 0 or -errno. */
int vmio_fe_request(struct vmio_fe *fe, uint32_t request, const void *payload,
		    uint32_t len, const int *fds, unsigned nfds, bool need_reply,
		    void *reply, uint32_t reply_len);

/* The ring features every front end of ours asks for, so that a whole
 * test run or benchmark can go one way or the other: VIRTIO_F_RING_PACKED
 * when the environment says VMIO_RING=packed; VIRTIO_F_IN_ORDER (taken
 * where offered, as DPDK's virtio-user does) unless it says
 * VMIO_IN_ORDER=0. */
uint64_t vmio_fe_ring_features(void);

/* GET_FEATURES, GET/SET_PROTOCOL_FEATURES, SET_OWNER, SET_FEATURES with
 * the intersection of what is offered and wanted. Returns 0 or -errno. */
int vmio_fe_negotiate(struct vmio_fe *fe, uint64_t want_features,
		      uint64_t want_protocol_features);

/* Creates size bytes of guest memory (a memfd) and sends SET_MEM_TABLE
 * with it cut into nregions equal regions. */
int vmio_fe_mem_create(struct vmio_fe *fe, uint64_t size, unsigned nregions);
/* Sends SET_MEM_TABLE again for the same memory, cut into nregions
 * regions, as DPDK does while running. */
int vmio_fe_mem_resend(struct vmio_fe *fe, unsigned nregions);

/* Allocates len bytes of guest memory aligned to align; returns the gpa,
 * or UINT64_MAX when full. */
uint64_t vmio_fe_alloc(struct vmio_fe *fe, uint64_t len, uint64_t align);
/* Local pointer for a gpa of our own memory (no checks: we made it). */
void *vmio_fe_ptr(struct vmio_fe *fe, uint64_t gpa);

/* Allocates rings for queue idx and sends SET_VRING_NUM, SET_VRING_BASE 0,
 * SET_VRING_ADDR, SET_VRING_CALL, SET_VRING_KICK and SET_VRING_ENABLE 1. */
int vmio_fe_queue_setup(struct vmio_fe *fe, unsigned idx, uint16_t size);
/* What QEMU does as a migration starts: SET_LOG_BASE with size bytes of
 * log_fd (LOG_SHMFD must be negotiated; log_fd stays the caller's),
 * SET_FEATURES with VHOST_F_LOG_ALL added, and SET_VRING_ADDR again for
 * every queue set up, with VHOST_VRING_F_LOG. Returns 0 or -errno. */
int vmio_fe_log_start(struct vmio_fe *fe, int log_fd, uint64_t size);
/* GET_VRING_BASE: the backend stops the queue and reports where it was. */
int vmio_fe_queue_stop(struct vmio_fe *fe, unsigned idx, uint16_t *base);

static inline struct vmio_dvq *vmio_fe_queue(struct vmio_fe *fe, unsigned idx)
{
	return &fe->queues[idx];
}

#endif
