/* The message handlers of the backend core: what each vhost-user request
 * does to the negotiated state, the memory table and the rings.
 *
 * Every message is checked for shape (payload size, fd count) against a
 * table before its handler runs, and every handler validates before it
 * changes anything, so a refused message leaves the state as it was.
 * The queues a request changes (stops_of, from the same table) have
 * stopped before its handler runs, on their own threads if they are
 * served elsewhere, and are restarted after it if they can run: the
 * handlers change stopped queues only, and start or stop none.
 *
 * What a failed message does to the connection:
 *  - a request with a reply of its own (GET_*) gets that reply with an
 *    empty payload, which every front end rejects as malformed;
 *  - with REPLY_ACK negotiated and NEED_REPLY set, the ack says failure;
 *  - otherwise the front end has no way to learn of the failure and would
 *    go on with a device that differs from what it believes, so the
 *    connection is closed (and the device reset). Unknown requests follow
 *    the same rule.
 * A malformed header always closes the connection: the stream can no
 * longer be trusted.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/fd.h"
#include "virtio/features.h"
#include "virtio/packed_ring.h"
#include "vhost-user/handlers.h"
#include "vhost-user/message.h"
#include "vhost-user/queues.h"
#include "vhost-user/session.h"

#define CORE_PROTOCOL_FEATURES                                                 \
	(VMIO_BIT(VHOST_USER_PROTOCOL_F_MQ) |                                  \
	 VMIO_BIT(VHOST_USER_PROTOCOL_F_REPLY_ACK) |                           \
	 VMIO_BIT(VHOST_USER_PROTOCOL_F_CONFIGURE_MEM_SLOTS) |                 \
	 VMIO_BIT(VHOST_USER_PROTOCOL_F_STATUS))

#define CONFIG_HDR_SIZE offsetof(struct vhost_user_config, payload)
#define MEM_TABLE_HDR_SIZE offsetof(struct vhost_user_memory, regions)

static uint64_t offered_features(const struct vmio_backend *be)
{
	return be->ops->features | VMIO_BIT(VHOST_USER_F_PROTOCOL_FEATURES) |
	       (be->ops->logs_writes ? VMIO_BIT(VHOST_F_LOG_ALL) : 0);
}

static uint64_t offered_protocol_features(const struct vmio_backend *be)
{
	return CORE_PROTOCOL_FEATURES | be->ops->protocol_features |
	       (be->ops->logs_writes
			? VMIO_BIT(VHOST_USER_PROTOCOL_F_LOG_SHMFD)
			: 0) |
	       (be->ops->send_rarp ? VMIO_BIT(VHOST_USER_PROTOCOL_F_RARP) : 0);
}

static bool has_protocol_feature(const struct vmio_backend *be, unsigned bit)
{
	return be->acked_protocol_features & VMIO_BIT(bit);
}

/* Takes fd i out of msg: the caller owns it now. */
static int take_fd(struct vhost_user_msg *msg, unsigned i)
{
	int fd = msg->fds[i];

	msg->fds[i] = -1;
	return fd;
}

/* ---- Memory table changes ---------------------------------------------- */

static void remap_all(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_backend_queue *q = &be->queues[i];
		if (vmio_bq_remap(q))
			be_err(be, "queue %u: rings lie outside the new memory table; "
			       "queue not served",
			       i);
	}
}

/* Before every change of the memory table (its queues have stopped, and
 * the dispatcher restarts them after): the device drops its pointers. */
static void memory_change_begin(struct vmio_backend *be)
{
	if (be->mem.nregions && be->ops->memory_changing)
		be->ops->memory_changing(be->dev);
}

/* ---- Message handlers -------------------------------------------------- */

static void reply_u64(struct vhost_user_msg *reply, uint64_t v)
{
	reply->payload.u64 = v;
	reply->hdr.size = sizeof(uint64_t);
}

static struct vmio_backend_queue *queue_at(struct vmio_backend *be,
					   const struct vhost_user_msg *msg,
					   uint64_t index)
{
	if (index >= be->ops->num_queues) {
		be_err(be, "%s: queue index %llu out of range (device has %u queues)",
		       vhost_user_request_name(msg->hdr.request),
		       (unsigned long long)index, be->ops->num_queues);
		return NULL;
	}
	return &be->queues[index];
}

static int get_features(struct vmio_backend *be, struct vhost_user_msg *msg,
			struct vhost_user_msg *reply)
{
	reply_u64(reply, offered_features(be));
	return 0;
}

/* Queue q logs its writes while the front end migrates (LOG_ALL acked),
 * its ring asks it (VHOST_VRING_F_LOG) and a log is mapped. Its queue
 * is stopped. */
static void apply_log(struct vmio_backend *be, struct vmio_backend_queue *q)
{
	bool on = (be->acked_features & VMIO_BIT(VHOST_F_LOG_ALL)) &&
		  (q->addr.flags & VMIO_BIT(VHOST_VRING_F_LOG)) &&
		  be->log.bits;

	q->vq.log = on ? &be->log : NULL;
	q->vq.log_mem = &be->mem;
}

static void apply_ring_features(struct vmio_backend *be)
{
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_vq *vq = &be->queues[i].vq;

		apply_log(be, &be->queues[i]);
		vq->event_idx =
			be->acked_features & VMIO_BIT(VIRTIO_RING_F_EVENT_IDX);
		vq->indirect =
			be->acked_features & VMIO_BIT(VIRTIO_RING_F_INDIRECT_DESC);
		vq->packed = be->acked_features & VMIO_BIT(VIRTIO_F_RING_PACKED);
		vq->in_order = be->acked_features & VMIO_BIT(VIRTIO_F_IN_ORDER);
	}
}

static int set_features(struct vmio_backend *be, struct vhost_user_msg *msg,
			struct vhost_user_msg *reply)
{
	uint64_t want = msg->payload.u64, old = be->acked_features;
	int rc = 0;

	if (want & ~offered_features(be)) {
		be_err(be, "SET_FEATURES: bits 0x%llx were not offered",
		       (unsigned long long)(want & ~offered_features(be)));
		return -EINVAL;
	}
	be->acked_features = want;
	apply_ring_features(be);
	if (be->ops->features_set)
		rc = be->ops->features_set(be->dev, want);
	if (rc) {
		be_err(be, "SET_FEATURES: device %s refused features 0x%llx",
		       be->ops->name, (unsigned long long)want);
		be->acked_features = old;
		apply_ring_features(be);
	}
	return rc;
}

static int get_protocol_features(struct vmio_backend *be,
				 struct vhost_user_msg *msg,
				 struct vhost_user_msg *reply)
{
	reply_u64(reply, offered_protocol_features(be));
	return 0;
}

static int set_protocol_features(struct vmio_backend *be,
				 struct vhost_user_msg *msg,
				 struct vhost_user_msg *reply)
{
	uint64_t want = msg->payload.u64;

	if (want & ~offered_protocol_features(be)) {
		be_err(be, "SET_PROTOCOL_FEATURES: bits 0x%llx were not offered",
		       (unsigned long long)(want & ~offered_protocol_features(be)));
		return -EINVAL;
	}
	be->acked_protocol_features = want;
	return 0;
}

static int set_owner(struct vmio_backend *be, struct vhost_user_msg *msg,
		     struct vhost_user_msg *reply)
{
	be->owner = true;
	return 0;
}

static int reset_owner(struct vmio_backend *be, struct vhost_user_msg *msg,
		       struct vhost_user_msg *reply)
{
	uint64_t protocol = be->acked_protocol_features;

	vmio_session_reset(be);
	/* Protocol features belong to the connection, which goes on. */
	be->acked_protocol_features = protocol;
	be->touched = true;
	return 0;
}

static void region_desc(struct vmio_mem_region_desc *d,
			const struct vhost_user_memory_region *r)
{
	d->gpa = r->gpa;
	d->size = r->size;
	d->uva = r->uva;
	d->mmap_offset = r->mmap_offset;
}

static int set_mem_table(struct vmio_backend *be, struct vhost_user_msg *msg,
			 struct vhost_user_msg *reply)
{
	const struct vhost_user_memory *m = &msg->payload.memory;

	/* Build the new table beside the old one: a bad region leaves the
	 * running device untouched. */
	for (unsigned i = 0; i < m->nregions; i++) {
		struct vmio_mem_region_desc d;
		const char *why = "";
		region_desc(&d, &m->regions[i]);
		int rc = vmio_mem_add(&be->new_mem, &d, take_fd(msg, i), &why);
		if (rc) {
			be_err(be, "SET_MEM_TABLE: region %u (gpa 0x%llx size 0x%llx "
			       "uva 0x%llx offset 0x%llx): %s",
			       i, (unsigned long long)d.gpa,
			       (unsigned long long)d.size,
			       (unsigned long long)d.uva,
			       (unsigned long long)d.mmap_offset, why);
			vmio_mem_clear(&be->new_mem);
			return rc;
		}
	}
	memory_change_begin(be);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_vq_unmap(&be->queues[i].vq);
	vmio_mem_clear(&be->mem);
	vmio_mem_move(&be->mem, &be->new_mem);
	remap_all(be);
	return 0;
}

static int get_max_mem_slots(struct vmio_backend *be,
			     struct vhost_user_msg *msg,
			     struct vhost_user_msg *reply)
{
	reply_u64(reply, VMIO_MEM_MAX_REGIONS);
	return 0;
}

/* Like SET_MEM_TABLE, the region is checked and mapped before anything
 * changes: a refused one leaves the table, and the device, as they were. */
static int add_mem_reg(struct vmio_backend *be, struct vhost_user_msg *msg,
		       struct vhost_user_msg *reply)
{
	struct vmio_mem_region_desc d;
	struct vmio_mem_region r;
	const char *why = "";
	int rc;

	region_desc(&d, &msg->payload.mem_reg.region);
	rc = vmio_mem_prepare(&be->mem, &d, take_fd(msg, 0), &r, &why);
	if (rc) {
		be_err(be, "ADD_MEM_REG: region gpa 0x%llx size 0x%llx uva 0x%llx "
		       "offset 0x%llx: %s",
		       (unsigned long long)d.gpa, (unsigned long long)d.size,
		       (unsigned long long)d.uva,
		       (unsigned long long)d.mmap_offset, why);
		return rc;
	}
	memory_change_begin(be);
	vmio_mem_commit(&be->mem, &r);
	remap_all(be);
	return 0;
}

static int rem_mem_reg(struct vmio_backend *be, struct vhost_user_msg *msg,
		       struct vhost_user_msg *reply)
{
	struct vmio_mem_region_desc d;

	region_desc(&d, &msg->payload.mem_reg.region);
	if (!vmio_mem_holds(&be->mem, &d)) {
		be_err(be, "REM_MEM_REG: no region with gpa 0x%llx size 0x%llx "
		       "uva 0x%llx",
		       (unsigned long long)d.gpa, (unsigned long long)d.size,
		       (unsigned long long)d.uva);
		return -ENOENT;
	}
	memory_change_begin(be);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		vmio_vq_unmap(&be->queues[i].vq);
	vmio_mem_remove(&be->mem, &d);
	remap_all(be);
	return 0;
}

static int set_vring_num(struct vmio_backend *be, struct vhost_user_msg *msg,
			 struct vhost_user_msg *reply)
{
	const struct vhost_user_vring_state *s = &msg->payload.state;
	struct vmio_backend_queue *q = queue_at(be, msg, s->index);

	if (!q)
		return -EINVAL;
	if (!s->num || (s->num & (s->num - 1)) || s->num > VIRTQ_MAX_SIZE ||
	    s->num > be->ops->max_queue_size) {
		be_err(be, "SET_VRING_NUM: queue %u: size %u is not a power of two "
		       "between 1 and %u",
		       s->index, s->num,
		       be->ops->max_queue_size < VIRTQ_MAX_SIZE ?
			       be->ops->max_queue_size : VIRTQ_MAX_SIZE);
		return -EINVAL;
	}
	q->vq.size = (uint16_t)s->num;
	if (vmio_bq_remap(q))
		be_err(be, "SET_VRING_NUM: queue %u: rings of %u entries do not "
		       "fit in guest memory; queue not served",
		       s->index, s->num);
	return 0;
}

static int set_vring_addr(struct vmio_backend *be, struct vhost_user_msg *msg,
			  struct vhost_user_msg *reply)
{
	const struct vhost_user_vring_addr *a = &msg->payload.addr;
	struct vmio_backend_queue *q = queue_at(be, msg, a->index);
	int rc;

	if (!q)
		return -EINVAL;
	q->addr = *a;
	apply_log(be, q);
	q->vq.desc_uva = a->desc_uva;
	q->vq.avail_uva = a->avail_uva;
	q->vq.used_uva = a->used_uva;
	q->vq.addr_set = true;
	/* Without memory yet the addresses wait for SET_MEM_TABLE. */
	rc = vmio_bq_remap(q);
	if (rc) {
		be_err(be, "SET_VRING_ADDR: queue %u: rings (desc 0x%llx avail "
		       "0x%llx used 0x%llx) outside guest memory or misaligned",
		       a->index, (unsigned long long)a->desc_uva,
		       (unsigned long long)a->avail_uva,
		       (unsigned long long)a->used_uva);
		q->vq.addr_set = false;
	}
	return rc;
}

/* A packed ring's base: the next descriptor to make available, and
 * (bits 16-31, when the front end sends them) the next to use, each an
 * offset and a wrap counter (vmio_packed_position). Nothing is in flight
 * across a stop, so without the second half used is where avail is. */
static void set_packed_base(struct vmio_vq *vq, uint32_t num)
{
	uint16_t avail = (uint16_t)num, used = (uint16_t)(num >> 16);

	if (!used)
		used = avail;
	vq->last_avail_idx = avail & (PVIRTQ_MAX_SIZE - 1);
	vq->avail_wrap = avail >> VIRTQ_EVENT_WRAP_SHIFT;
	vq->used_idx = used & (PVIRTQ_MAX_SIZE - 1);
	vq->used_wrap = used >> VIRTQ_EVENT_WRAP_SHIFT;
	vq->pops = 0;
	vq->unflushed = 0;
}

static int set_vring_base(struct vmio_backend *be, struct vhost_user_msg *msg,
			  struct vhost_user_msg *reply)
{
	const struct vhost_user_vring_state *s = &msg->payload.state;
	struct vmio_backend_queue *q = queue_at(be, msg, s->index);

	if (!q)
		return -EINVAL;
	if (s->num > UINT16_MAX && !q->vq.packed) {
		be_err(be, "SET_VRING_BASE: queue %u: base %u does not fit a split "
		       "ring index",
		       s->index, s->num);
		return -EINVAL;
	}
	/* Nothing is in flight across a stop, so used catches up with avail;
	 * a queue the guest broke gets a fresh start. */
	if (q->vq.packed) {
		set_packed_base(&q->vq, s->num);
	} else {
		q->vq.last_avail_idx = (uint16_t)s->num;
		q->vq.avail_known = 0;
		q->vq.used_idx = (uint16_t)s->num;
		q->vq.published_used = (uint16_t)s->num;
	}
	q->vq.signalled_used_valid = false;
	q->vq.batch_len = 0;
	q->vq.broken = false;
	return 0;
}

static int get_vring_base(struct vmio_backend *be, struct vhost_user_msg *msg,
			  struct vhost_user_msg *reply)
{
	const struct vhost_user_vring_state *s = &msg->payload.state;
	struct vmio_backend_queue *q = queue_at(be, msg, s->index);

	if (!q)
		return -EINVAL;
	/* The queue stopped for good (VMIO_QUEUE_HALT) before we got here:
	 * the device gave back every chain it held. */
	q->started = false;
	vmio_bq_set_kick_fd(q, -1);
	reply->payload.state.index = s->index;
	reply->payload.state.num = vmio_bq_base(q);
	reply->hdr.size = sizeof(reply->payload.state);
	return 0;
}

/* SET_VRING_KICK/CALL/ERR carry the queue index and a no-fd bit. */
static struct vmio_backend_queue *vring_fd_queue(struct vmio_backend *be,
						 struct vhost_user_msg *msg,
						 int *fd)
{
	uint64_t v = msg->payload.u64;

	if (v & ~(uint64_t)(VHOST_USER_VRING_IDX_MASK |
			    VHOST_USER_VRING_NOFD_MASK)) {
		be_err(be, "%s: unknown bits in 0x%llx",
		       vhost_user_request_name(msg->hdr.request),
		       (unsigned long long)v);
		return NULL;
	}
	struct vmio_backend_queue *q =
		queue_at(be, msg, v & VHOST_USER_VRING_IDX_MASK);
	if (q)
		*fd = (v & VHOST_USER_VRING_NOFD_MASK) ? -1 : take_fd(msg, 0);
	return q;
}

static int set_vring_kick(struct vmio_backend *be, struct vhost_user_msg *msg,
			  struct vhost_user_msg *reply)
{
	int fd = -1;
	struct vmio_backend_queue *q = vring_fd_queue(be, msg, &fd);

	if (!q)
		return -EINVAL;
	if (!q->vq.size || !q->vq.addr_set) {
		be_err(be, "SET_VRING_KICK: queue %u started before its size and "
		       "addresses were set",
		       q->vq.index);
		vmio_close_fd(&fd);
		return -EINVAL;
	}
	vmio_bq_set_kick_fd(q, fd);
	q->started = true;
	/* Without protocol features there is no SET_VRING_ENABLE: a started
	 * ring is an enabled one. */
	if (!(be->acked_features & VMIO_BIT(VHOST_USER_F_PROTOCOL_FEATURES)))
		q->enabled = true;
	return 0;
}

enum vring_notifier { VRING_CALL, VRING_ERR };

/* SET_VRING_CALL and SET_VRING_ERR: swap one of the queue's notifier fds.
 * QEMU swaps call fds while running (notifier masking); the device may be
 * signalling the old one, so the queue stops first. */
static int swap_vring_notifier(struct vmio_backend *be,
			       struct vhost_user_msg *msg,
			       enum vring_notifier which)
{
	int fd = -1;
	struct vmio_backend_queue *q = vring_fd_queue(be, msg, &fd);

	if (!q)
		return -EINVAL;
	int *slot = which == VRING_CALL ? &q->call_fd : &q->err_fd;
	/* A saturated eventfd, or a pipe no one reads, must not hold the
	 * loop in write(). */
	if (fd >= 0)
		vmio_fd_set_nonblock(fd);
	vmio_close_fd(slot);
	*slot = fd;
	if (which != VRING_CALL)
		return 0;
	vmio_vq_notify_moved(&q->vq);
	if (q->started)
		vmio_vq_signal(q->call_fd);
	return 0;
}

static int set_vring_call(struct vmio_backend *be, struct vhost_user_msg *msg,
			  struct vhost_user_msg *reply)
{
	return swap_vring_notifier(be, msg, VRING_CALL);
}

static int set_vring_err(struct vmio_backend *be, struct vhost_user_msg *msg,
			 struct vhost_user_msg *reply)
{
	return swap_vring_notifier(be, msg, VRING_ERR);
}

static int set_vring_enable(struct vmio_backend *be,
			    struct vhost_user_msg *msg,
			    struct vhost_user_msg *reply)
{
	const struct vhost_user_vring_state *s = &msg->payload.state;
	struct vmio_backend_queue *q = queue_at(be, msg, s->index);

	if (!q)
		return -EINVAL;
	if (s->num > 1) {
		be_err(be, "SET_VRING_ENABLE: queue %u: state %u is neither 0 nor 1",
		       s->index, s->num);
		return -EINVAL;
	}
	/* A disable stopped the queue for good (VMIO_QUEUE_HALT: the device
	 * gave back what it holds) before we got here. */
	q->enabled = s->num;
	return 0;
}

static int get_queue_num(struct vmio_backend *be, struct vhost_user_msg *msg,
			 struct vhost_user_msg *reply)
{
	reply_u64(reply, be->ops->num_queues);
	return 0;
}

static int check_config_range(struct vmio_backend *be,
			      const struct vhost_user_msg *msg)
{
	const struct vhost_user_config *c = &msg->payload.config;

	if ((uint64_t)c->offset + c->size > be->ops->config_size) {
		be_err(be, "%s: offset %u size %u beyond the %u bytes of config "
		       "space",
		       vhost_user_request_name(msg->hdr.request), c->offset,
		       c->size, be->ops->config_size);
		return -EINVAL;
	}
	return 0;
}

static int get_config(struct vmio_backend *be, struct vhost_user_msg *msg,
		      struct vhost_user_msg *reply)
{
	const struct vhost_user_config *c = &msg->payload.config;
	struct vhost_user_config *r = &reply->payload.config;
	int rc = check_config_range(be, msg);

	if (rc)
		return rc;
	if (!be->ops->get_config) {
		be_err(be, "GET_CONFIG: device %s has no config space",
		       be->ops->name);
		return -ENOTSUP;
	}
	memset(r->payload, 0, c->size);
	rc = be->ops->get_config(be->dev, r->payload, c->offset, c->size);
	if (rc) {
		be_err(be, "GET_CONFIG: device %s failed: errno %d", be->ops->name,
		       -rc);
		return rc;
	}
	r->offset = c->offset;
	r->size = c->size;
	r->flags = c->flags;
	reply->hdr.size = CONFIG_HDR_SIZE + c->size;
	return 0;
}

static int set_config(struct vmio_backend *be, struct vhost_user_msg *msg,
		      struct vhost_user_msg *reply)
{
	const struct vhost_user_config *c = &msg->payload.config;
	int rc = check_config_range(be, msg);

	if (rc)
		return rc;
	if (!be->ops->set_config) {
		be_err(be, "SET_CONFIG: device %s's config space is read-only",
		       be->ops->name);
		return -EPERM;
	}
	rc = be->ops->set_config(be->dev, c->payload, c->offset, c->size);
	if (rc)
		be_err(be, "SET_CONFIG: device %s refused offset %u size %u: "
		       "errno %d",
		       be->ops->name, c->offset, c->size, -rc);
	return rc;
}

static int set_status(struct vmio_backend *be, struct vhost_user_msg *msg,
		      struct vhost_user_msg *reply)
{
	if (msg->payload.u64 > UINT8_MAX) {
		be_err(be, "SET_STATUS: status 0x%llx does not fit a byte",
		       (unsigned long long)msg->payload.u64);
		return -EINVAL;
	}
	/* Only stored: QEMU writes 0 before GET_VRING_BASE when it stops, so
	 * a reset here would lose the ring state it is about to ask for. */
	be->status = (uint8_t)msg->payload.u64;
	return 0;
}

static int get_status(struct vmio_backend *be, struct vhost_user_msg *msg,
		      struct vhost_user_msg *reply)
{
	reply_u64(reply, be->status);
	return 0;
}

static int set_backend_req_fd(struct vmio_backend *be,
			      struct vhost_user_msg *msg,
			      struct vhost_user_msg *reply)
{
	/* Kept (no backend-initiated requests are sent yet) so the front end
	 * does not see its channel closed. */
	vmio_close_fd(&be->backend_req_fd);
	be->backend_req_fd = take_fd(msg, 0);
	return 0;
}

/* ---- Dirty logging (a migration) --------------------------------------- */

/* The log QEMU reads and clears while it migrates the guest, mapped in
 * place of the last (it sends a larger one when memory grows). Every
 * queue is paused meanwhile: the rings may be writing the old one. A
 * log that has no bit for some page of the memory table is refused
 * whole, and nothing logs until a good one comes: a mark beyond it
 * would be lost, and QEMU would migrate that page stale; a refusal
 * closes the session (refusal_closes). The reply, a u64 0, is what QEMU
 * waits for under LOG_SHMFD. */
static int set_log_base(struct vmio_backend *be, struct vhost_user_msg *msg,
			struct vhost_user_msg *reply)
{
	const struct vhost_user_log *l = &msg->payload.log;
	const char *why = NULL;
	int rc;

	reply_u64(reply, 0);
	/* The log's fd comes with the message only under LOG_SHMFD. */
	if (!has_protocol_feature(be, VHOST_USER_PROTOCOL_F_LOG_SHMFD)) {
		be_err(be, "SET_LOG_BASE without LOG_SHMFD negotiated");
		return -EINVAL;
	}
	rc = vmio_dirty_log_map(&be->log, take_fd(msg, 0), l->mmap_size,
				l->mmap_offset, &why);
	if (!rc && !vmio_dirty_log_covers(&be->log, &be->mem)) {
		why = "the log has no bit for some pages of the memory table";
		vmio_dirty_log_unmap(&be->log);
		rc = -EINVAL;
	}
	if (rc)
		be_err(be, "SET_LOG_BASE: %llu bytes at offset %llu: %s",
		       (unsigned long long)l->mmap_size,
		       (unsigned long long)l->mmap_offset, why);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		apply_log(be, &be->queues[i]);
	return rc;
}

/* The eventfd a back end may signal after it logged: kept, as libvhost
 * user keeps it; QEMU reads the log when it syncs, not on a signal. */
static int set_log_fd(struct vmio_backend *be, struct vhost_user_msg *msg,
		      struct vhost_user_msg *reply)
{
	vmio_close_fd(&be->log_call_fd);
	be->log_call_fd = take_fd(msg, 0);
	return 0;
}

/* The guest's MAC in the u64's first 6 bytes: the device announces it
 * (QEMU sends this once a migration is done, for a guest without
 * VIRTIO_NET_F_GUEST_ANNOUNCE). */
static int send_rarp(struct vmio_backend *be, struct vhost_user_msg *msg,
		     struct vhost_user_msg *reply)
{
	uint8_t mac[6];

	if (!has_protocol_feature(be, VHOST_USER_PROTOCOL_F_RARP) ||
	    !be->ops->send_rarp) {
		be_err(be, "SEND_RARP without RARP negotiated");
		return -EINVAL;
	}
	memcpy(mac, &msg->payload.u64, sizeof(mac));
	be->ops->send_rarp(be->dev, mac);
	return 0;
}

/* ---- Dispatch ---------------------------------------------------------- */

enum payload_rule {
	P_NONE,
	P_U64,
	P_STATE,
	P_ADDR,
	P_MEM_TABLE,
	P_MEM_REG,
	P_CONFIG,
	P_LOG,
};

enum fd_rule {
	F_NONE,
	F_ONE,
	F_MAYBE_ONE,  /* REM_MEM_REG: some front ends send the region's fd */
	F_PER_REGION, /* SET_MEM_TABLE */
	F_VRING,      /* one unless VHOST_USER_VRING_NOFD_MASK */
};

/* The queues a request changes, which stop (on their own threads, for a
 * device that serves queues elsewhere) before its handler runs. */
enum stop_rule {
	S_NONE,
	S_ALL,        /* features: every queue pauses */
	S_ALL_MEMORY, /* the memory table: every chain comes back */
	S_ALL_HALT,   /* RESET_OWNER */
	S_STATE,      /* the queue of payload.state.index pauses */
	S_ADDR,       /* of payload.addr.index */
	S_FD,         /* of the index in payload.u64 */
	S_BASE_GET,   /* GET_VRING_BASE: the queue stops for good */
	S_ENABLE,     /* SET_VRING_ENABLE: a disable stops it for good */
};

struct handler {
	int (*fn)(struct vmio_backend *be, struct vhost_user_msg *msg,
		  struct vhost_user_msg *reply);
	uint8_t payload;
	uint8_t fds;
	bool has_reply;
	uint8_t stops;
};

/* A request whose reply says nothing of failure, refused: the session
 * closes, the only way the front end learns of it (SET_LOG_BASE's u64:
 * QEMU would migrate with no page marked). */
static bool refusal_closes(uint32_t request)
{
	return request == VHOST_USER_SET_LOG_BASE;
}

static const struct handler handlers[VHOST_USER_REQUEST_MAX] = {
	[VHOST_USER_GET_FEATURES] = { get_features, P_NONE, F_NONE, true, S_NONE },
	[VHOST_USER_SET_FEATURES] = { set_features, P_U64, F_NONE, false,
				      S_ALL },
	[VHOST_USER_SET_OWNER] = { set_owner, P_NONE, F_NONE, false, S_NONE },
	[VHOST_USER_RESET_OWNER] = { reset_owner, P_NONE, F_NONE, false,
				     S_ALL_HALT },
	[VHOST_USER_SET_MEM_TABLE] = { set_mem_table, P_MEM_TABLE,
				       F_PER_REGION, false, S_ALL_MEMORY },
	[VHOST_USER_SET_LOG_BASE] = { set_log_base, P_LOG, F_ONE, true,
				      S_ALL },
	[VHOST_USER_SET_LOG_FD] = { set_log_fd, P_NONE, F_ONE, false, S_NONE },
	[VHOST_USER_SEND_RARP] = { send_rarp, P_U64, F_NONE, false, S_NONE },
	[VHOST_USER_SET_VRING_NUM] = { set_vring_num, P_STATE, F_NONE, false,
				       S_STATE },
	[VHOST_USER_SET_VRING_ADDR] = { set_vring_addr, P_ADDR, F_NONE, false,
					S_ADDR },
	[VHOST_USER_SET_VRING_BASE] = { set_vring_base, P_STATE, F_NONE, false,
					S_STATE },
	[VHOST_USER_GET_VRING_BASE] = { get_vring_base, P_STATE, F_NONE, true,
					S_BASE_GET },
	[VHOST_USER_SET_VRING_KICK] = { set_vring_kick, P_U64, F_VRING, false,
					S_FD },
	[VHOST_USER_SET_VRING_CALL] = { set_vring_call, P_U64, F_VRING, false,
					S_FD },
	[VHOST_USER_SET_VRING_ERR] = { set_vring_err, P_U64, F_VRING, false,
				       S_FD },
	[VHOST_USER_GET_PROTOCOL_FEATURES] = { get_protocol_features, P_NONE,
					       F_NONE, true, S_NONE },
	[VHOST_USER_SET_PROTOCOL_FEATURES] = { set_protocol_features, P_U64,
					       F_NONE, false, S_NONE },
	[VHOST_USER_GET_QUEUE_NUM] = { get_queue_num, P_NONE, F_NONE, true, S_NONE },
	[VHOST_USER_SET_VRING_ENABLE] = { set_vring_enable, P_STATE, F_NONE,
					  false, S_ENABLE },
	[VHOST_USER_SET_BACKEND_REQ_FD] = { set_backend_req_fd, P_NONE, F_ONE,
					    false, S_NONE },
	[VHOST_USER_GET_CONFIG] = { get_config, P_CONFIG, F_NONE, true, S_NONE },
	[VHOST_USER_SET_CONFIG] = { set_config, P_CONFIG, F_NONE, false, S_NONE },
	[VHOST_USER_GET_MAX_MEM_SLOTS] = { get_max_mem_slots, P_NONE, F_NONE,
					   true, S_NONE },
	[VHOST_USER_ADD_MEM_REG] = { add_mem_reg, P_MEM_REG, F_ONE, false,
				     S_ALL_MEMORY },
	[VHOST_USER_REM_MEM_REG] = { rem_mem_reg, P_MEM_REG, F_MAYBE_ONE,
				     false, S_ALL_MEMORY },
	[VHOST_USER_SET_STATUS] = { set_status, P_U64, F_NONE, false, S_NONE },
	[VHOST_USER_GET_STATUS] = { get_status, P_NONE, F_NONE, true, S_NONE },
};

/* The queues [*first, *first + *n) that msg changes, and how they stop
 * for it. An index out of range names none: the handler refuses it. */
static void stops_of(const struct vmio_backend *be,
		     const struct vhost_user_msg *msg, enum stop_rule rule,
		     unsigned *first, unsigned *n, enum vmio_queue_stop *how)
{
	uint64_t index = 0;

	*first = 0;
	*n = 0;
	*how = VMIO_QUEUE_PAUSE;
	switch (rule) {
	case S_NONE:
		return;
	case S_ALL_HALT:
		*how = VMIO_QUEUE_HALT;
		/* fall through */
	case S_ALL:
		*n = be->ops->num_queues;
		return;
	case S_ALL_MEMORY:
		*how = VMIO_QUEUE_MEMORY;
		*n = be->ops->num_queues;
		return;
	case S_STATE:
		index = msg->payload.state.index;
		break;
	case S_BASE_GET:
		index = msg->payload.state.index;
		*how = VMIO_QUEUE_HALT;
		break;
	case S_ENABLE:
		index = msg->payload.state.index;
		if (!msg->payload.state.num)
			*how = VMIO_QUEUE_HALT;
		break;
	case S_ADDR:
		index = msg->payload.addr.index;
		break;
	case S_FD:
		index = msg->payload.u64 & VHOST_USER_VRING_IDX_MASK;
		break;
	}
	if (index < be->ops->num_queues) {
		*first = (unsigned)index;
		*n = 1;
	}
}

static int check_payload(struct vmio_backend *be,
			 const struct vhost_user_msg *msg, enum payload_rule rule)
{
	static const uint32_t fixed[] = {
		[P_NONE] = 0,
		[P_U64] = sizeof(uint64_t),
		[P_STATE] = sizeof(struct vhost_user_vring_state),
		[P_ADDR] = sizeof(struct vhost_user_vring_addr),
		[P_MEM_REG] = sizeof(struct vhost_user_mem_reg),
		[P_LOG] = sizeof(struct vhost_user_log),
	};
	const char *name = vhost_user_request_name(msg->hdr.request);
	uint32_t size = msg->hdr.size;

	if (rule == P_MEM_TABLE) {
		uint32_t n = msg->payload.memory.nregions;
		/* QEMU sends only the regions it uses; others the whole
		 * struct. */
		if (size < MEM_TABLE_HDR_SIZE) {
			be_err(be, "%s: payload of %u bytes is too short", name, size);
			return -EINVAL;
		}
		if (n < 1 || n > VHOST_USER_MEM_TABLE_MAX_REGIONS) {
			be_err(be, "%s: %u regions (must be 1 to %u)", name, n,
			       VHOST_USER_MEM_TABLE_MAX_REGIONS);
			return -EINVAL;
		}
		if (size < MEM_TABLE_HDR_SIZE +
				   n * sizeof(struct vhost_user_memory_region)) {
			be_err(be, "%s: payload of %u bytes too short for %u regions",
			       name, size, n);
			return -EINVAL;
		}
		return 0;
	}
	if (rule == P_CONFIG) {
		if (size < CONFIG_HDR_SIZE) {
			be_err(be, "%s: payload of %u bytes is too short", name, size);
			return -EINVAL;
		}
		uint32_t n = msg->payload.config.size;
		if (n > VHOST_USER_MAX_CONFIG_SIZE || size != CONFIG_HDR_SIZE + n) {
			be_err(be, "%s: payload of %u bytes does not match a config "
			       "block of %u bytes (at most %u)",
			       name, size, n, VHOST_USER_MAX_CONFIG_SIZE);
			return -EINVAL;
		}
		return 0;
	}
	if (size != fixed[rule]) {
		be_err(be, "%s: payload of %u bytes, expected %u", name, size,
		       fixed[rule]);
		return -EINVAL;
	}
	return 0;
}

static int check_fds(struct vmio_backend *be, const struct vhost_user_msg *msg,
		     enum fd_rule rule)
{
	unsigned lo, hi;

	switch (rule) {
	case F_ONE:
		lo = hi = 1;
		break;
	case F_MAYBE_ONE:
		lo = 0;
		hi = 1;
		break;
	case F_PER_REGION:
		lo = hi = msg->payload.memory.nregions;
		break;
	case F_VRING:
		lo = hi = (msg->payload.u64 & VHOST_USER_VRING_NOFD_MASK) ? 0 : 1;
		break;
	default:
		lo = hi = 0;
		break;
	}
	if (msg->nfds < lo || msg->nfds > hi) {
		be_err(be, "%s: %u file descriptors, expected %u%s",
		       vhost_user_request_name(msg->hdr.request), msg->nfds, lo,
		       hi > lo ? " or 1" : "");
		return -EINVAL;
	}
	return 0;
}

static int check_header(struct vmio_backend *be,
			const struct vhost_user_msg *msg)
{
	const struct vhost_user_header *h = &msg->hdr;

	if ((h->flags & VHOST_USER_VERSION_MASK) != VHOST_USER_VERSION ||
	    (h->flags & VHOST_USER_REPLY_MASK) ||
	    h->size > VHOST_USER_MAX_PAYLOAD || msg->nfds > VHOST_USER_MAX_FDS) {
		be_err(be, "malformed message: request %u flags 0x%x size %u, "
		       "%u fds",
		       h->request, h->flags, h->size, msg->nfds);
		return -EPROTO;
	}
	return 0;
}

/* What a request carries, for the debug log (" 0x1 queue 0 ..."): the
 * value of a u64 payload, a queue's index and number, a config block's
 * place, a memory region; nothing for the others. With the reply's (a
 * GET_*'s value) logged after its handler, a -v -v log shows what a front
 * end asked for and what it was told, which is how docs/qemu-11.md
 * compares two QEMUs. */
static void describe(const struct vhost_user_msg *msg, enum payload_rule rule,
		     char *buf, size_t n)
{
	const union vhost_user_payload *p = &msg->payload;

	buf[0] = '\0';
	switch (rule) {
	case P_U64:
		snprintf(buf, n, " 0x%llx", (unsigned long long)p->u64);
		break;
	case P_STATE:
		snprintf(buf, n, " queue %u num %u", p->state.index,
			 p->state.num);
		break;
	case P_ADDR:
		snprintf(buf, n, " queue %u flags 0x%x", p->addr.index,
			 p->addr.flags);
		break;
	case P_MEM_TABLE:
		snprintf(buf, n, " %u regions", p->memory.nregions);
		break;
	case P_MEM_REG:
		snprintf(buf, n, " gpa 0x%llx size 0x%llx",
			 (unsigned long long)p->mem_reg.region.gpa,
			 (unsigned long long)p->mem_reg.region.size);
		break;
	case P_CONFIG:
		snprintf(buf, n, " offset %u size %u flags 0x%x",
			 p->config.offset, p->config.size, p->config.flags);
		break;
	case P_LOG:
		snprintf(buf, n, " size %llu offset %llu",
			 (unsigned long long)p->log.mmap_size,
			 (unsigned long long)p->log.mmap_offset);
		break;
	case P_NONE:
		break;
	}
}

/* Makes the handler's reply, the REPLY_ACK ack, or nothing; decides
 * whether a failure ends the connection (see the top of this file). */
static enum vhost_user_result finish(const struct handler *h,
				     const struct vhost_user_msg *msg,
				     struct vhost_user_msg *reply, bool ack,
				     int rc)
{
	if (h && h->has_reply) {
		if (rc && refusal_closes(msg->hdr.request))
			return VHOST_USER_CLOSE;
		if (rc)
			reply->hdr.size = 0;
	} else if (ack) {
		reply_u64(reply, rc ? (uint64_t)-rc : 0);
	} else {
		return rc ? VHOST_USER_CLOSE : VHOST_USER_DONE;
	}
	reply->hdr.request = msg->hdr.request;
	reply->hdr.flags = VHOST_USER_VERSION | VHOST_USER_REPLY_MASK;
	reply->nfds = 0;
	return VHOST_USER_REPLY;
}

/* Checks msg against its handler's rules, stops the queues it changes,
 * runs the handler and restarts them if they can run. Returns 0, -errno
 * (refused), or 1 when it waits for its queues (VHOST_USER_WAIT: its fds
 * still in it). *hp: its handler, NULL for an unknown request. */
static int dispatch(struct vmio_backend *be, struct vhost_user_msg *msg,
		    struct vhost_user_msg *reply, const struct handler **hp)
{
	const struct handler *h = NULL;
	unsigned first, n;
	enum vmio_queue_stop how;
	int rc = 0;

	if (msg->hdr.request < VHOST_USER_REQUEST_MAX)
		h = &handlers[msg->hdr.request];
	if (!h || !h->fn) {
		be_err(be, "unsupported request %u (%s)", msg->hdr.request,
		       vhost_user_request_name(msg->hdr.request));
		h = NULL;
		rc = -EPROTO;
	}
	*hp = h;
	if (!rc)
		rc = check_payload(be, msg, h->payload);
	if (!rc)
		rc = check_fds(be, msg, h->fds);
	if (rc)
		return rc;
	stops_of(be, msg, h->stops, &first, &n, &how);
	if (!vmio_bq_quiesce(be, first, n, how))
		return 1;
	if (vmio_log_get_level() >= VMIO_LOG_DEBUG) {
		char what[80];

		describe(msg, h->payload, what, sizeof(what));
		log_debug("vhost-user: %s%s (%u bytes, %u fds%s)",
			  vhost_user_request_name(msg->hdr.request), what,
			  msg->hdr.size, msg->nfds,
			  (msg->hdr.flags & VHOST_USER_NEED_REPLY_MASK)
				  ? ", need_reply"
				  : "");
	}
	rc = h->fn(be, msg, reply);
	if (!rc && h->has_reply && vmio_log_get_level() >= VMIO_LOG_DEBUG) {
		char what[80] = "";

		/* GET_VRING_BASE's state is as long as a u64. */
		if (msg->hdr.request == VHOST_USER_GET_VRING_BASE)
			describe(reply, P_STATE, what, sizeof(what));
		else if (msg->hdr.request == VHOST_USER_GET_CONFIG)
			describe(reply, P_CONFIG, what, sizeof(what));
		else if (reply->hdr.size == sizeof(uint64_t))
			describe(reply, P_U64, what, sizeof(what));
		log_debug("vhost-user: %s reply%s",
			  vhost_user_request_name(msg->hdr.request), what);
	}
	/* Whatever the handler made of them (even if it refused the
	 * request), the queues run again if they can. */
	for (unsigned i = first; i < first + n; i++)
		vmio_bq_sync(&be->queues[i]);
	return rc;
}

enum vhost_user_result vmio_backend_handle_msg(struct vmio_backend *be,
					       struct vhost_user_msg *msg,
					       struct vhost_user_msg *reply)
{
	const struct handler *h = NULL;
	bool ack;
	int rc;

	memset(reply, 0, sizeof(*reply));
	be->touched = true;
	rc = check_header(be, msg);
	if (rc) {
		if (msg->nfds > VHOST_USER_MAX_FDS)
			msg->nfds = VHOST_USER_MAX_FDS;
		vhost_user_msg_close_fds(msg);
		return VHOST_USER_CLOSE;
	}
	/* Whether an ack is due is decided by what was negotiated when the
	 * request arrived, not by what the request changes. */
	ack = (msg->hdr.flags & VHOST_USER_NEED_REPLY_MASK) &&
	      has_protocol_feature(be, VHOST_USER_PROTOCOL_F_REPLY_ACK);
	rc = dispatch(be, msg, reply, &h);
	if (rc == 1)
		return VHOST_USER_WAIT;
	vhost_user_msg_close_fds(msg);
	return finish(h, msg, reply, ack, rc);
}

int vmio_backend_apply_msg(struct vmio_backend *be, struct vhost_user_msg *msg)
{
	const struct handler *h = NULL;
	struct vhost_user_msg reply;
	int rc;

	memset(&reply, 0, sizeof(reply));
	be->touched = true;
	rc = check_header(be, msg);
	if (!rc)
		rc = dispatch(be, msg, &reply, &h);
	/* A request with a reply of its own is never replayed: the caller
	 * would not see what the reply says. */
	if (!rc && h->has_reply)
		rc = -EPROTO;
	if (rc == 1)
		rc = -EBUSY; /* its queues were still stopping elsewhere */
	if (msg->nfds > VHOST_USER_MAX_FDS)
		msg->nfds = VHOST_USER_MAX_FDS;
	vhost_user_msg_close_fds(msg);
	return rc;
}
