/* The driver's reading of used entries under VIRTIO_F_IN_ORDER, for both
 * layouts: the device uses chains in the order they were made available
 * and may write one used entry for a batch of them, the last one's id,
 * where the batch's first entry is due (2.7.9, 2.8.20). So the driver
 * keeps the ids it made available, oldest first, and takes them in that
 * order: each before the batch's id is used with no length, the batch's
 * own with the entry's. */
#ifndef VMIO_FRONTEND_DRIVER_IN_ORDER_H
#define VMIO_FRONTEND_DRIVER_IN_ORDER_H

#include <stdint.h>

#include "frontend/dvq_state.h"

/* id was made available (after every id pushed before it). */
void vmio_dvq_order_push(struct vmio_dvq *q, uint16_t id);

/* The device's entry for the next batch: its id and length. */
void vmio_dvq_order_see(struct vmio_dvq *q, uint16_t id, uint32_t len);

/* The oldest id made available and not yet taken, now used; *len its
 * length (0 before the batch's own id). -1 if none is out: a device
 * that used more than it was given. */
int vmio_dvq_order_take(struct vmio_dvq *q, uint32_t *len);

#endif
