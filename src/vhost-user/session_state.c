/* The session record: written from a held backend, read back into a
 * fresh one by replaying the messages that would have set it up, so that
 * a record is checked by the very code that checks a front end.
 *
 * Format version 1, every number little-endian:
 *   header (64 bytes): "VMIOSESS", version u32, total size u32, fds u32,
 *     regions u32, queues u32, flags u32 (bit 0: SET_OWNER seen; bit 1:
 *     a snapshot of a live session, for a crash: every base 0, to be
 *     read from the used ring),
 *     features u64, protocol features u64, status u32, channel fd u32,
 *     backend channel fd u32, 0 u32;
 *   per region (40): gpa, size, uva, mmap offset (u64 each), fd u32,
 *     identical ADD_MEM_REGs counted u32;
 *   per queue (64): size u32, flags u32 (ADDR_SET, STARTED, ENABLED,
 *     BROKEN), SET_VRING_ADDR's flags u32, base u32 (as GET_VRING_BASE),
 *     desc, used, avail, log addresses (u64 each), kick, call, err fds
 *     (u32 each), 0 u32.
 * An fd is an index into the record's fd list, or FD_NONE; each fd of the
 * list is named exactly once. */
#include "vhost-user/session_state.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/fd.h"
#include "util/wire.h"
#include "virtio/features.h"
#include "virtio/ring_access.h"
#include "vhost-user/backend.h"
#include "vhost-user/handlers.h"
#include "vhost-user/queue_home.h"
#include "vhost-user/queue_state.h"
#include "vhost-user/queues.h"
#include "vhost-user/session.h"

#define MAGIC "VMIOSESS"
#define HEAD_SIZE 64
#define REGION_SIZE 40
#define QUEUE_SIZE 64
#define FD_NONE UINT32_MAX

#define REC_OWNER 1u
#define REC_LIVE 2u
#define REC_FLAGS (REC_OWNER | REC_LIVE)

#define Q_ADDR_SET 1u
#define Q_STARTED 2u
#define Q_ENABLED 4u
#define Q_BROKEN 8u
#define Q_FLAGS (Q_ADDR_SET | Q_STARTED | Q_ENABLED | Q_BROKEN)

/* Dirty logging for a migration (VHOST_F_LOG_ALL): the log is in no
 * record, so a session that logs is refused a hand-over, not its log
 * lost. */

__attribute__((format(printf, 4, 5))) static int
refuse(int rc, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return rc;
}

void vmio_session_record_free(struct vmio_session_record *rec)
{
	free(rec->bytes);
	rec->bytes = NULL;
	rec->len = 0;
	for (unsigned i = 0; i < rec->nfds; i++)
		vmio_close_fd(&rec->fds[i]);
	rec->nfds = 0;
}

/* ---- Hold and resume ---------------------------------------------------- */

int vmio_session_hold(struct vmio_backend *be, void (*held)(void *opaque),
		      void *opaque, char *why, size_t why_len)
{
	if (be->state == VMIO_BE_HELD)
		return refuse(-EALREADY, why, why_len, "already held");
	if (!be->chan.open || be->state == VMIO_BE_CLOSING)
		return refuse(-ENOTCONN, why, why_len, "no front end");
	if (be->state == VMIO_BE_WAITING || vmio_home_busy(be))
		return refuse(-EAGAIN, why, why_len,
			      "a message waits for its queues to stop");
	if (be->acked_features & VMIO_BIT(VHOST_F_LOG_ALL))
		return refuse(-EOPNOTSUPP, why, why_len,
			      "dirty logging is on (a migration is running)");
	vmio_be_move(be, VMIO_BE_HELD);
	vhost_user_channel_freeze(&be->chan);
	be->held_cb = held;
	be->held_opaque = opaque;
	if (!vmio_bq_quiesce(be, 0, be->ops->num_queues, VMIO_QUEUE_HOLD))
		return -EINPROGRESS;
	be->held_cb = NULL;
	return 0;
}

int vmio_session_resume(struct vmio_backend *be)
{
	if (be->state != VMIO_BE_HELD)
		return -EINVAL;
	if (!be->chan.open)
		return -ENOTCONN;
	be->held_cb = NULL;
	/* While the queues are stopped the backend's loop owns them. */
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		struct vmio_backend_queue *q = &be->queues[i];

		if (q->started && q->enabled && vmio_vq_ready(&q->vq))
			vmio_vq_enable_kicks(&q->vq, true);
	}
	vmio_be_move(be, VMIO_BE_SERVING);
	vmio_bq_sync_all(be);
	for (unsigned i = 0; i < be->ops->num_queues; i++)
		if (be->queues[i].started)
			vmio_vq_signal(be->queues[i].call_fd);
	/* Starts sent to other threads: the channel reads again once they
	 * have answered (backend.c, homes_idle). */
	if (vmio_home_busy(be))
		return 0;
	return vhost_user_channel_resume(&be->chan) ? 0 : -ENOTCONN;
}

void vmio_session_handed_over(struct vmio_backend *be)
{
	if (be->state != VMIO_BE_HELD)
		return;
	be->held_cb = NULL;
	vhost_user_channel_close(&be->chan);
	vmio_session_drop(be);
	vmio_be_move(be, VMIO_BE_SERVING);
}

/* ---- Writing ------------------------------------------------------------ */

/* A copy of fd in the record's list; its index, or FD_NONE for -1. */
static int add_fd(struct vmio_session_record *rec, int fd, uint32_t *index)
{
	int copy;

	*index = FD_NONE;
	if (fd < 0)
		return 0;
	if (rec->nfds >= VMIO_SESSION_MAX_FDS)
		return -EMFILE;
	copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (copy < 0)
		return -errno;
	*index = rec->nfds;
	rec->fds[rec->nfds++] = copy;
	return 0;
}

/* Whether the stop gave every chain back: what was taken off the ring
 * was all used and published, so the base is where the guest stands. */
static bool finished(const struct vmio_vq *vq)
{
	if (vq->broken)
		return true; /* served by nobody until the VMM resets it */
	if (vq->batch_len || vq->unflushed)
		return false;
	if (vq->packed)
		return vq->last_avail_idx == vq->used_idx &&
		       vq->avail_wrap == vq->used_wrap;
	return vq->last_avail_idx == vq->used_idx &&
	       vq->used_idx == vq->published_used;
}

static int check_saveable(const struct vmio_backend *be, char *why,
			  size_t why_len)
{
	if (be->state != VMIO_BE_HELD)
		return refuse(-EINVAL, why, why_len, "the session is not held");
	if (!be->chan.open)
		return refuse(-ENOTCONN, why, why_len, "the front end left");
	if (vmio_home_busy(be))
		return refuse(-EAGAIN, why, why_len,
			      "queues are still stopping on their threads");
	for (unsigned i = 0; i < be->ops->num_queues; i++) {
		const struct vmio_backend_queue *q = &be->queues[i];

		if (q->state != VMIO_BQ_IDLE)
			return refuse(-EAGAIN, why, why_len,
				      "queue %u has not stopped for good", i);
		if (!finished(&q->vq))
			return refuse(-EBUSY, why, why_len,
				      "queue %u: chains taken off its ring "
				      "were not all given back at its stop",
				      i);
	}
	return 0;
}

/* live: a snapshot of a session that runs on, from the backend's loop:
 * a queue's indices and whether it broke are its thread's, so neither is
 * read (the base is 0, the used ring says it at a restore). */
static int write_queue(struct vmio_wire_writer *w,
		       struct vmio_session_record *rec,
		       const struct vmio_backend_queue *q, bool live)
{
	uint32_t flags = (q->vq.addr_set ? Q_ADDR_SET : 0) |
			 (q->started ? Q_STARTED : 0) |
			 (q->enabled ? Q_ENABLED : 0) |
			 (!live && q->vq.broken ? Q_BROKEN : 0);
	uint32_t kick, call, err;
	int rc = add_fd(rec, q->started ? q->kick_fd : -1, &kick);

	if (!rc)
		rc = add_fd(rec, q->call_fd, &call);
	if (!rc)
		rc = add_fd(rec, q->err_fd, &err);
	if (rc)
		return rc;
	vmio_wire_put_u32(w, q->vq.size);
	vmio_wire_put_u32(w, flags);
	vmio_wire_put_u32(w, q->addr.flags);
	vmio_wire_put_u32(w, live ? 0 : vmio_bq_base(q));
	vmio_wire_put_u64(w, q->addr.desc_uva);
	vmio_wire_put_u64(w, q->addr.used_uva);
	vmio_wire_put_u64(w, q->addr.avail_uva);
	vmio_wire_put_u64(w, q->addr.log_gpa);
	vmio_wire_put_u32(w, kick);
	vmio_wire_put_u32(w, call);
	vmio_wire_put_u32(w, err);
	vmio_wire_put_u32(w, 0);
	return 0;
}

static int write_region(struct vmio_wire_writer *w,
			struct vmio_session_record *rec,
			const struct vmio_mem_region *r)
{
	uint32_t fd;
	int rc = add_fd(rec, r->fd, &fd);

	if (rc)
		return rc;
	vmio_wire_put_u64(w, r->d.gpa);
	vmio_wire_put_u64(w, r->d.size);
	vmio_wire_put_u64(w, r->d.uva);
	vmio_wire_put_u64(w, r->d.mmap_offset);
	vmio_wire_put_u32(w, fd);
	vmio_wire_put_u32(w, r->dups);
	return 0;
}

/* Bytes between the front end and the backend that neither has acted
 * on: a message half read, replies not yet taken. */
static bool in_flight(const struct vhost_user_channel *ch)
{
	return vhost_user_reader_started(&ch->in) ||
	       !vhost_user_outbox_empty(&ch->out);
}

/* Format 2's trailer: the half-read message (its bytes, then its fds'
 * indices) and the replies waiting. */
static int write_in_flight(struct vmio_wire_writer *w,
			   struct vmio_session_record *rec,
			   const struct vhost_user_channel *ch)
{
	/* 2.5 KiB: eight replies of the largest, or a message. */
	uint8_t buf[VHOST_USER_OUTBOX_SIZE];

	_Static_assert(VHOST_USER_OUTBOX_SIZE >=
			       sizeof(struct vhost_user_header) +
				       VHOST_USER_MAX_PAYLOAD,
		       "a half-read message fits the buffer");
	size_t n = vhost_user_reader_copy(&ch->in, buf);
	uint32_t index;

	vmio_wire_put_u32(w, (uint32_t)n);
	vmio_wire_put_bytes(w, buf, n);
	vmio_wire_put_u32(w, ch->in.msg.nfds);
	for (unsigned i = 0; i < ch->in.msg.nfds; i++) {
		int rc = add_fd(rec, ch->in.msg.fds[i], &index);

		if (rc)
			return rc;
		vmio_wire_put_u32(w, index);
	}
	n = vhost_user_outbox_copy(&ch->out, buf);
	vmio_wire_put_u32(w, (uint32_t)n);
	vmio_wire_put_bytes(w, buf, n);
	return 0;
}

/* The record into w, its fds into rec; the header's size and fd count
 * are known once the rest is written, and patched in then. Returns an
 * fd's copy's failure; w says whether the bytes fitted. */
static int write_record(struct vmio_wire_writer *w,
			struct vmio_session_record *rec,
			const struct vmio_backend *be, bool live)
{
	bool partial = !live && in_flight(&be->chan);
	const struct vmio_mem *mem = &be->mem;
	unsigned nq = be->ops->num_queues;
	uint32_t chan = FD_NONE, req = FD_NONE;
	size_t at_size;
	int rc = add_fd(rec, be->chan.fd, &chan);

	if (!rc)
		rc = add_fd(rec, be->backend_req_fd, &req);
	vmio_wire_put_bytes(w, MAGIC, 8);
	vmio_wire_put_u32(w, partial ? 2 : 1);
	at_size = w->len;
	vmio_wire_put_u32(w, 0); /* the size, then the fd count */
	vmio_wire_put_u32(w, 0);
	vmio_wire_put_u32(w, mem->nregions);
	vmio_wire_put_u32(w, nq);
	vmio_wire_put_u32(w, (be->owner ? REC_OWNER : 0) | (live ? REC_LIVE : 0));
	vmio_wire_put_u64(w, be->acked_features);
	vmio_wire_put_u64(w, be->acked_protocol_features);
	vmio_wire_put_u32(w, be->status);
	vmio_wire_put_u32(w, chan);
	vmio_wire_put_u32(w, req);
	vmio_wire_put_u32(w, 0);
	for (unsigned i = 0; i < mem->nregions && !rc; i++)
		rc = write_region(w, rec, &mem->regions[i]);
	for (unsigned i = 0; i < nq && !rc; i++)
		rc = write_queue(w, rec, &be->queues[i], live);
	if (!rc && partial)
		rc = write_in_flight(w, rec, &be->chan);
	vmio_wire_patch_u32(w, at_size, (uint32_t)w->len);
	vmio_wire_patch_u32(w, at_size + 4, rec->nfds);
	return rc;
}

static int save(const struct vmio_backend *be, struct vmio_session_record *rec,
		bool live, char *why, size_t why_len)
{
	struct vmio_wire_writer w;
	int rc;

	vmio_wire_writer_init(&w, 0);
	rc = write_record(&w, rec, be, live);
	if (rc)
		refuse(rc, why, why_len, "cannot copy the session's fds: %s",
		       strerror(-rc));
	else if (w.failed)
		rc = refuse(-ENOMEM, why, why_len, "out of memory");
	if (rc) {
		vmio_wire_writer_fini(&w);
		vmio_session_record_free(rec);
		return rc;
	}
	rec->bytes = w.buf;
	rec->len = w.len;
	return 0;
}

int vmio_session_save(const struct vmio_backend *be,
		      struct vmio_session_record *rec, char *why,
		      size_t why_len)
{
	int rc = check_saveable(be, why, why_len);

	rec->bytes = NULL;
	rec->len = 0;
	rec->nfds = 0;
	return rc ? rc : save(be, rec, false, why, why_len);
}

int vmio_session_snapshot(const struct vmio_backend *be,
			  struct vmio_session_record *rec, char *why,
			  size_t why_len)
{
	rec->bytes = NULL;
	rec->len = 0;
	rec->nfds = 0;
	if (!be->chan.open || be->state == VMIO_BE_CLOSING)
		return refuse(-ENOTCONN, why, why_len, "no front end");
	if (be->state != VMIO_BE_SERVING)
		return refuse(-EAGAIN, why, why_len,
			      "a message is under way or the session is held");
	if (be->acked_features & VMIO_BIT(VHOST_F_LOG_ALL))
		return refuse(-EOPNOTSUPP, why, why_len,
			      "dirty logging is on (a migration is running)");
	return save(be, rec, true, why, why_len);
}

/* ---- Reading ------------------------------------------------------------ */

struct rec_region {
	struct vhost_user_memory_region d;
	uint32_t fd, dups;
};

struct rec_queue {
	uint32_t size, flags, base, kick, call, err;
	struct vhost_user_vring_addr addr;
};

/* The record, parsed: lengths and fd indices checked, nothing applied. */
struct parsed {
	uint32_t nregions, flags, status, chan, req;
	uint64_t features, protocol_features;
	struct rec_region regions[VMIO_MEM_MAX_REGIONS];
	struct rec_queue *queues;
	bool named[VMIO_SESSION_MAX_FDS];
	/* Format 2: the channel's bytes in flight. */
	const uint8_t *partial, *replies;
	uint32_t got, nreplies, npfds;
	uint32_t pfds[VHOST_USER_MAX_FDS];
};

/* An fd index: FD_NONE (when allowed), or one of the list not named
 * before. */
static int check_fd(struct parsed *p, uint32_t index, unsigned nfds,
		    bool optional, const char *what, char *why,
		    size_t why_len)
{
	if (index == FD_NONE) {
		if (optional)
			return 0;
		return refuse(-EINVAL, why, why_len, "%s has no fd", what);
	}
	if (index >= nfds)
		return refuse(-EINVAL, why, why_len,
			      "%s names fd %u of a list of %u", what, index,
			      nfds);
	if (p->named[index])
		return refuse(-EINVAL, why, why_len,
			      "%s names fd %u, which is named before", what,
			      index);
	p->named[index] = true;
	return 0;
}

static int parse_queue(struct parsed *p, struct vmio_wire_reader *r,
		       unsigned i, unsigned nfds, char *why, size_t why_len)
{
	struct rec_queue *q = &p->queues[i];
	char what[32];
	int rc;

	q->size = vmio_wire_get_u32(r);
	q->flags = vmio_wire_get_u32(r);
	q->addr.index = i;
	q->addr.flags = vmio_wire_get_u32(r);
	q->base = vmio_wire_get_u32(r);
	q->addr.desc_uva = vmio_wire_get_u64(r);
	q->addr.used_uva = vmio_wire_get_u64(r);
	q->addr.avail_uva = vmio_wire_get_u64(r);
	q->addr.log_gpa = vmio_wire_get_u64(r);
	q->kick = vmio_wire_get_u32(r);
	q->call = vmio_wire_get_u32(r);
	q->err = vmio_wire_get_u32(r);
	if (vmio_wire_get_u32(r) || (q->flags & ~Q_FLAGS))
		return refuse(-EINVAL, why, why_len,
			      "queue %u: unknown flags or fields", i);
	if (q->kick != FD_NONE && !(q->flags & Q_STARTED))
		return refuse(-EINVAL, why, why_len,
			      "queue %u: a kick fd but not started", i);
	snprintf(what, sizeof(what), "queue %u's kick", i);
	rc = check_fd(p, q->kick, nfds, true, what, why, why_len);
	snprintf(what, sizeof(what), "queue %u's call", i);
	if (!rc)
		rc = check_fd(p, q->call, nfds, true, what, why, why_len);
	snprintf(what, sizeof(what), "queue %u's err", i);
	if (!rc)
		rc = check_fd(p, q->err, nfds, true, what, why, why_len);
	return rc;
}

/* Format 2's trailer; its bytes are checked as the channel takes them
 * (vhost_user_channel_preload). */
static int parse_in_flight(struct parsed *p, struct vmio_wire_reader *r,
			   unsigned nfds, char *why, size_t why_len)
{
	int rc = 0;

	p->got = vmio_wire_get_count(r, 1);
	p->partial = vmio_wire_get_bytes(r, p->got);
	p->npfds = vmio_wire_get_u32(r);
	if (p->npfds > VHOST_USER_MAX_FDS)
		return refuse(-EINVAL, why, why_len,
			      "a half-read message with %u fds", p->npfds);
	for (unsigned i = 0; i < p->npfds && !rc; i++) {
		p->pfds[i] = vmio_wire_get_u32(r);
		rc = check_fd(p, p->pfds[i], nfds, false,
			      "the half-read message", why, why_len);
	}
	p->nreplies = vmio_wire_get_count(r, 1);
	p->replies = vmio_wire_get_bytes(r, p->nreplies);
	if (!rc && (!p->got && !p->npfds && !p->nreplies))
		rc = refuse(-EINVAL, why, why_len,
			    "format 2 with no bytes in flight");
	return rc;
}

static int parse(const struct vmio_backend *be, const uint8_t *bytes,
		 size_t len, unsigned nfds, struct parsed *p, char *why,
		 size_t why_len)
{
	unsigned nq = be->ops->num_queues;
	struct vmio_wire_reader r;
	uint32_t version, size, rec_nfds, rec_nq;
	size_t base;
	int rc;

	vmio_wire_reader_init(&r, bytes, len);
	if (len < HEAD_SIZE || memcmp(vmio_wire_get_bytes(&r, 8), MAGIC, 8))
		return refuse(-EINVAL, why, why_len,
			      "not a session record (%zu bytes)", len);
	version = vmio_wire_get_u32(&r);
	if (version < VMIO_SESSION_STATE_VERSION_MIN ||
	    version > VMIO_SESSION_STATE_VERSION)
		return refuse(-EPROTONOSUPPORT, why, why_len,
			      "record format %u; this vmio reads formats %u to %u",
			      version, VMIO_SESSION_STATE_VERSION_MIN,
			      VMIO_SESSION_STATE_VERSION);
	size = vmio_wire_get_u32(&r);
	rec_nfds = vmio_wire_get_u32(&r);
	p->nregions = vmio_wire_get_u32(&r);
	rec_nq = vmio_wire_get_u32(&r);
	p->flags = vmio_wire_get_u32(&r);
	p->features = vmio_wire_get_u64(&r);
	p->protocol_features = vmio_wire_get_u64(&r);
	p->status = vmio_wire_get_u32(&r);
	p->chan = vmio_wire_get_u32(&r);
	p->req = vmio_wire_get_u32(&r);
	if (size != len)
		return refuse(-EINVAL, why, why_len,
			      "record of %zu bytes says it has %u", len, size);
	if (rec_nfds != nfds)
		return refuse(-EINVAL, why, why_len,
			      "record names %u fds, %u came with it", rec_nfds,
			      nfds);
	if (rec_nq != nq)
		return refuse(-EINVAL, why, why_len,
			      "record of %u queues for a device %s of %u",
			      rec_nq, be->ops->name, nq);
	if (p->nregions > VMIO_MEM_MAX_REGIONS)
		return refuse(-EINVAL, why, why_len,
			      "%u memory regions (at most %u)", p->nregions,
			      VMIO_MEM_MAX_REGIONS);
	base = HEAD_SIZE + (size_t)p->nregions * REGION_SIZE +
	       (size_t)nq * QUEUE_SIZE;
	if ((p->flags & REC_LIVE) && version != 1)
		return refuse(-EINVAL, why, why_len,
			      "a snapshot with bytes in flight");
	if (version == 1 ? len != base : len <= base)
		return refuse(-EINVAL, why, why_len,
			      "record of %zu bytes does not hold %u regions "
			      "and %u queues",
			      len, p->nregions, nq);
	if (vmio_wire_get_u32(&r) || (p->flags & ~REC_FLAGS))
		return refuse(-EINVAL, why, why_len,
			      "unknown flags or fields in the header");
	rc = check_fd(p, p->chan, nfds, false, "the front end's socket", why,
		      why_len);
	if (!rc)
		rc = check_fd(p, p->req, nfds, true, "the backend channel", why,
			      why_len);
	for (unsigned i = 0; i < p->nregions && !rc; i++) {
		struct rec_region *g = &p->regions[i];
		char what[32];

		g->d.gpa = vmio_wire_get_u64(&r);
		g->d.size = vmio_wire_get_u64(&r);
		g->d.uva = vmio_wire_get_u64(&r);
		g->d.mmap_offset = vmio_wire_get_u64(&r);
		g->fd = vmio_wire_get_u32(&r);
		g->dups = vmio_wire_get_u32(&r);
		snprintf(what, sizeof(what), "memory region %u", i);
		rc = check_fd(p, g->fd, nfds, false, what, why, why_len);
	}
	for (unsigned i = 0; i < nq && !rc; i++)
		rc = parse_queue(p, &r, i, nfds, why, why_len);
	if (!rc && version == 2)
		rc = parse_in_flight(p, &r, nfds, why, why_len);
	/* The length check above makes every read fit; should the layout
	 * and that check ever part, the reader refuses the record rather
	 * than reading past it (a failed read gives 0s, which nothing
	 * before here applies). */
	if (!rc && (!vmio_wire_ok(&r) || r.left))
		rc = refuse(-EINVAL, why, why_len,
			    "record of %zu bytes does not end with its last "
			    "queue (or format 2's bytes in flight)", len);
	for (unsigned i = 0; i < nfds && !rc; i++)
		if (!p->named[i])
			rc = refuse(-EINVAL, why, why_len,
				    "fd %u of %u is named nowhere", i, nfds);
	return rc;
}

/* A front end's socket: anything else on the channel would be read as
 * messages, or fail on every turn. */
static int check_socket(int fd, char *why, size_t why_len)
{
	int type = 0, domain = 0;
	socklen_t tl = sizeof(type), dl = sizeof(domain);

	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) < 0 ||
	    type != SOCK_STREAM || domain != AF_UNIX)
		return refuse(-ENOTSOCK, why, why_len,
			      "the front end's fd is not a unix stream socket");
	return 0;
}

/* ---- Replaying --------------------------------------------------------- */

struct replay {
	struct vmio_backend *be;
	int *fds;
	char *why;
	size_t why_len;
	bool live; /* a snapshot: each base is where the used ring stands */
};

/* One message as the front end would have sent it; fd FD_NONE: none (or
 * the NOFD bit, which vring fds carry in the payload). The fd goes into
 * the message, which consumes it. */
static int apply(struct replay *rp, uint32_t request, const void *payload,
		 uint32_t size, uint32_t fd, const char *what)
{
	struct vhost_user_msg m;
	int rc;

	memset(&m, 0, sizeof(m));
	m.hdr.request = request;
	m.hdr.flags = VHOST_USER_VERSION;
	m.hdr.size = size;
	if (size)
		memcpy(&m.payload, payload, size);
	if (fd != FD_NONE) {
		m.fds[0] = rp->fds[fd];
		m.nfds = 1;
		rp->fds[fd] = -1;
	}
	rc = vmio_backend_apply_msg(rp->be, &m);
	if (rc)
		return refuse(rc, rp->why, rp->why_len, "%s refused (%s): %s",
			      what, vhost_user_request_name(request),
			      strerror(-rc));
	return 0;
}

static int apply_u64(struct replay *rp, uint32_t request, uint64_t v,
		     uint32_t fd, const char *what)
{
	return apply(rp, request, &v, sizeof(v), fd, what);
}

static int apply_state(struct replay *rp, uint32_t request, unsigned index,
		       uint32_t num, const char *what)
{
	struct vhost_user_vring_state s = { .index = index, .num = num };

	return apply(rp, request, &s, sizeof(s), FD_NONE, what);
}

/* SET_VRING_KICK/CALL/ERR: the fd, or the NOFD bit. */
static int apply_vring_fd(struct replay *rp, uint32_t request, unsigned index,
			  uint32_t fd, const char *what)
{
	uint64_t v = index;

	if (fd == FD_NONE)
		v |= VHOST_USER_VRING_NOFD_MASK;
	return apply_u64(rp, request, v, fd, what);
}

/* A snapshot's queue: the process that wrote it died with chains it had
 * popped and not given back, so the ring is served again from the last
 * entry it used, as QEMU and DPDK do at a reconnect without an inflight
 * region. A split ring says where that is (used->idx, in guest memory:
 * any value is a place to pop from, and what is popped is checked); a
 * packed ring keeps its used position in no index, so it cannot be. A
 * queue not yet set up starts at 0, as a fresh one would. */
static int base_from_used_ring(struct replay *rp,
			       const struct vmio_backend_queue *bq, unsigned i,
			       uint32_t *base)
{
	if (!bq->vq.addr_set || !bq->vq.used) {
		if (bq->vq.packed && bq->vq.addr_set)
			return refuse(-EOPNOTSUPP, rp->why, rp->why_len,
				      "queue %u: a packed ring's place is "
				      "not kept across a crash", i);
		*base = 0;
		return 0;
	}
	*base = vmio_ld16_acquire(&bq->vq.used->idx);
	return 0;
}

static int replay_queue(struct replay *rp, const struct rec_queue *q,
			unsigned i)
{
	struct vmio_backend_queue *bq = &rp->be->queues[i];
	uint32_t base = q->base;
	char what[64];
	int rc = 0;

	snprintf(what, sizeof(what), "queue %u", i);
	if (q->size)
		rc = apply_state(rp, VHOST_USER_SET_VRING_NUM, i, q->size,
				 what);
	if (!rc && (q->flags & Q_ADDR_SET))
		rc = apply(rp, VHOST_USER_SET_VRING_ADDR, &q->addr,
			   sizeof(q->addr), FD_NONE, what);
	if (!rc && rp->live)
		rc = base_from_used_ring(rp, bq, i, &base);
	if (!rc)
		rc = apply_state(rp, VHOST_USER_SET_VRING_BASE, i, base,
				 what);
	if (!rc && q->call != FD_NONE)
		rc = apply_vring_fd(rp, VHOST_USER_SET_VRING_CALL, i, q->call,
				    what);
	if (!rc && q->err != FD_NONE)
		rc = apply_vring_fd(rp, VHOST_USER_SET_VRING_ERR, i, q->err,
				    what);
	if (!rc && (q->flags & Q_STARTED))
		rc = apply_vring_fd(rp, VHOST_USER_SET_VRING_KICK, i, q->kick,
				    what);
	if (!rc)
		rc = apply_state(rp, VHOST_USER_SET_VRING_ENABLE, i,
				 !!(q->flags & Q_ENABLED), what);
	/* Kept broken: the VMM resets such a queue, as before. */
	if (!rc && (q->flags & Q_BROKEN))
		bq->vq.broken = true;
	return rc;
}

static int replay(struct replay *rp, const struct parsed *p)
{
	struct vmio_backend *be = rp->be;
	int rc;

	rc = apply_u64(rp, VHOST_USER_SET_PROTOCOL_FEATURES,
		       p->protocol_features, FD_NONE, "the protocol features");
	if (!rc && (p->flags & REC_OWNER))
		rc = apply(rp, VHOST_USER_SET_OWNER, NULL, 0, FD_NONE,
			   "the owner");
	if (!rc)
		rc = apply_u64(rp, VHOST_USER_SET_FEATURES, p->features,
			       FD_NONE, "the features");
	for (unsigned i = 0; i < p->nregions && !rc; i++) {
		struct vhost_user_mem_reg reg = { .region = p->regions[i].d };
		char what[32];

		snprintf(what, sizeof(what), "memory region %u", i);
		rc = apply(rp, VHOST_USER_ADD_MEM_REG, &reg, sizeof(reg),
			   p->regions[i].fd, what);
		/* Each region is new to the table (a copy of one before it
		 * would be counted, not mapped): its place is its order. */
		if (!rc && be->mem.nregions != i + 1)
			rc = refuse(-EINVAL, rp->why, rp->why_len,
				    "memory region %u repeats one before it",
				    i);
		if (!rc)
			be->mem.regions[i].dups = p->regions[i].dups;
	}
	if (!rc && p->status)
		rc = apply_u64(rp, VHOST_USER_SET_STATUS, p->status, FD_NONE,
			       "the status");
	if (!rc && p->req != FD_NONE)
		rc = apply(rp, VHOST_USER_SET_BACKEND_REQ_FD, NULL, 0, p->req,
			   "the backend channel");
	for (unsigned i = 0; i < be->ops->num_queues && !rc; i++)
		rc = replay_queue(rp, &p->queues[i], i);
	return rc;
}

/* The channel's bytes in flight, as format 2 carries them. */
static int preload(struct vmio_backend *be, struct parsed *p, int *fds,
		   char *why, size_t why_len)
{
	int mine[VHOST_USER_MAX_FDS];
	const char *problem;

	for (unsigned i = 0; i < p->npfds; i++) {
		mine[i] = fds[p->pfds[i]];
		fds[p->pfds[i]] = -1;
	}
	if (vhost_user_channel_preload(&be->chan, p->partial, p->got, mine,
				       p->npfds, p->replies, p->nreplies,
				       &problem))
		return refuse(-EINVAL, why, why_len,
			      "the bytes in flight on its channel: %s",
			      problem);
	return 0;
}

int vmio_session_restore(struct vmio_backend *be, const void *bytes,
			 size_t len, int *fds, unsigned nfds, char *why,
			 size_t why_len)
{
	struct parsed *p = NULL;
	struct replay rp = { be, fds, why, why_len, false };
	unsigned given = nfds;
	int rc = 0;

	if (nfds > VMIO_SESSION_MAX_FDS) {
		rc = refuse(-EINVAL, why, why_len, "%u fds (at most %u)", nfds,
			    VMIO_SESSION_MAX_FDS);
	} else if (be->touched || be->chan.open ||
		   be->state != VMIO_BE_SERVING) {
		rc = refuse(-EBUSY, why, why_len,
			    "the backend already serves a front end");
	}
	if (!rc) {
		p = calloc(1, sizeof(*p));
		if (p)
			p->queues = calloc(be->ops->num_queues,
					   sizeof(*p->queues));
		if (!p || !p->queues)
			rc = refuse(-ENOMEM, why, why_len, "out of memory");
	}
	if (!rc)
		rc = parse(be, bytes, len, nfds, p, why, why_len);
	if (!rc)
		rc = check_socket(fds[p->chan], why, why_len);
	if (!rc) {
		rp.live = p->flags & REC_LIVE;
		/* Held from the first message: no queue starts, so a refusal
		 * halfway leaves no trace in guest memory. */
		vmio_be_move(be, VMIO_BE_HELD);
		rc = replay(&rp, p);
		if (!rc) {
			int chan = fds[p->chan];

			fds[p->chan] = -1;
			rc = vmio_backend_serve_taken_fd(be, chan);
			if (rc) {
				close(chan);
				refuse(rc, why, why_len,
				       "cannot serve the front end's socket: %s",
				       strerror(-rc));
			} else {
				vhost_user_channel_freeze(&be->chan);
				rc = preload(be, p, fds, why, why_len);
			}
		}
		if (rc) {
			vmio_be_move(be, VMIO_BE_SERVING);
			vmio_session_reset(be);
		}
	}
	if (p)
		free(p->queues);
	free(p);
	/* What no message took: a refusal's, and none on success (every fd
	 * is named once). */
	for (unsigned i = 0; i < given; i++)
		vmio_close_fd(&fds[i]);
	return rc;
}
