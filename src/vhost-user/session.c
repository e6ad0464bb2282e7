#include "vhost-user/session.h"

#include "util/fd.h"
#include "vhost-user/queues.h"

/* What both ends of a session share: the memory, the rings, the fds and
 * what was negotiated go; the queues have stopped. */
static void forget(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_vq_unmap(&be->queues[i].vq);
	vmio_mem_clear(&be->mem);
	vmio_mem_clear(&be->new_mem);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_bq_reset(&be->queues[i]);
	vmio_close_fd(&be->backend_req_fd);
	vmio_dirty_log_unmap(&be->log);
	vmio_close_fd(&be->log_call_fd);
	be->acked_features = 0;
	be->acked_protocol_features = 0;
	be->owner = false;
	be->status = 0;
	be->touched = false;
}

void vmio_session_reset(struct vmio_backend *be)
{
	if (!be->touched)
		return;
	vmio_bq_pause_all(be);
	if (be->ops->reset)
		be->ops->reset(be->dev);
	forget(be);
}

void vmio_session_drop(struct vmio_backend *be)
{
	if (be->touched)
		forget(be);
}
