/* The driver's side of a packed ring (virtio 1.x, 2.8), under
 * driver_vq.h's interface. */
#ifndef VMIO_FRONTEND_DRIVER_PACKED_H
#define VMIO_FRONTEND_DRIVER_PACKED_H

#include <stdbool.h>
#include <stdint.h>

#include "frontend/dvq_state.h"

/* Lays the ring out (zeroed) and sets the wrap counters; the free list
 * and arrays are the caller's. */
int vmio_dvq_packed_setup(struct vmio_dvq *q);
int vmio_dvq_packed_add(struct vmio_dvq *q, const struct vmio_dbuf *bufs,
			unsigned n, void *token);
bool vmio_dvq_packed_kick(struct vmio_dvq *q);
void *vmio_dvq_packed_get_used(struct vmio_dvq *q, uint32_t *len);
void vmio_dvq_packed_want_interrupt(struct vmio_dvq *q);
bool vmio_dvq_packed_used_pending(struct vmio_dvq *q);
/* Writes an indirect table of n entries in the packed layout. */
void vmio_dvq_packed_fill_table(struct pvirtq_desc *t,
				const struct vmio_dbuf *bufs, unsigned n);
/* Marks the chain added last as indirect (its descriptor is not yet
 * available). */
void vmio_dvq_packed_mark_indirect(struct vmio_dvq *q);

#endif
