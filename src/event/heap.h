/* A binary min-heap of nodes keyed by a u64 (the loop's timers, by
 * deadline). Each node keeps its own position, so removing one is
 * O(log n); room is reserved ahead, so a push never allocates. Pure data
 * structure: it knows nothing of loops or clocks. */
#ifndef VMIO_EVENT_HEAP_H
#define VMIO_EVENT_HEAP_H

#include <stddef.h>
#include <stdint.h>

struct vmio_heap_node {
	uint64_t key;
	size_t index; /* VMIO_HEAP_IDLE when not in the heap */
};

#define VMIO_HEAP_IDLE SIZE_MAX

struct vmio_heap {
	struct vmio_heap_node **slot;
	size_t len;      /* nodes in the heap */
	size_t reserved; /* room promised: len never exceeds it */
	size_t cap;      /* slots allocated, >= reserved */
};

/* Promises room for one more node. Returns 0 or -ENOMEM. */
int vmio_heap_reserve(struct vmio_heap *h);
/* Takes one promise back (its node must not be in the heap). */
void vmio_heap_unreserve(struct vmio_heap *h);
/* Adds a node that is not in the heap; there must be room reserved. */
void vmio_heap_push(struct vmio_heap *h, struct vmio_heap_node *n);
/* Removes a node if it is in the heap. */
void vmio_heap_remove(struct vmio_heap *h, struct vmio_heap_node *n);
static inline struct vmio_heap_node *vmio_heap_min(const struct vmio_heap *h)
{
	return h->len ? h->slot[0] : NULL;
}
void vmio_heap_release(struct vmio_heap *h);

#endif
