#include "frontend/driver_in_order.h"

void vmio_dvq_order_push(struct vmio_dvq *q, uint16_t id)
{
	unsigned at = (unsigned)q->order_head + q->order_count;

	q->order[at % q->size] = id;
	q->order_count++;
}

void vmio_dvq_order_see(struct vmio_dvq *q, uint16_t id, uint32_t len)
{
	q->batch_seen = true;
	q->batch_id = id;
	q->batch_len = len;
}

int vmio_dvq_order_take(struct vmio_dvq *q, uint32_t *len)
{
	uint16_t id;

	if (!q->order_count) {
		q->batch_seen = false;
		return -1;
	}
	id = q->order[q->order_head];
	q->order_head = (uint16_t)((q->order_head + 1u) % q->size);
	q->order_count--;
	/* An id the device named that we never gave it would never close
	 * the batch: the batch ends with whatever is out. */
	if (id == q->batch_id || !q->order_count) {
		q->batch_seen = false;
		*len = id == q->batch_id ? q->batch_len : 0;
	} else {
		*len = 0;
	}
	return id;
}
