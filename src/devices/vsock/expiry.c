/* The expiry tick; see expiry.h. */
#include "devices/vsock/expiry.h"

#include "devices/vsock/peer_log.h"

int vsock_expiry_init(struct vsock_expiry *x, struct vmio_loop *loop,
		      unsigned connect_timeout_ms, vmio_task_cb tick,
		      void *opaque)
{
	x->connect_timeout_ms = connect_timeout_ms;
	return vmio_timer_init(&x->tick, loop, tick, opaque);
}

void vsock_expiry_fini(struct vsock_expiry *x)
{
	vmio_timer_fini(&x->tick);
}

void vsock_expiry_run(struct vsock_expiry *x, bool on)
{
	if (vmio_timer_armed(&x->tick) == on)
		return;
	if (on)
		vmio_timer_arm_periodic_ns(&x->tick,
					   VSOCK_EXPIRY_TICK_MS * 1000000ull);
	else
		vmio_timer_cancel(&x->tick);
}

static void set_deadline(struct vsock_expiry *x, uint64_t *deadline_ns,
			 unsigned ms)
{
	*deadline_ns = vmio_loop_now_ns(x->tick.loop) + (uint64_t)ms * 1000000u;
	vsock_expiry_run(x, true);
}

void vsock_expiry_connect(struct vsock_expiry *x, uint64_t *deadline_ns)
{
	set_deadline(x, deadline_ns, x->connect_timeout_ms);
}

void vsock_expiry_follow(struct vsock_expiry *x, const struct vsock_conn *c,
			 uint64_t *deadline_ns)
{
	if (c->state == VSOCK_CONN_ESTABLISHED &&
	    (c->peer_shut & VSOCK_SHUTDOWN_MASK) == VSOCK_SHUTDOWN_MASK) {
		if (!*deadline_ns)
			set_deadline(x, deadline_ns, VSOCK_EXPIRY_SHUTDOWN_MS);
	} else if (c->state != VSOCK_CONN_LOCAL_INIT) {
		*deadline_ns = 0;
	}
}

uint64_t vsock_expiry_now(const struct vsock_expiry *x)
{
	return vmio_loop_now_ns(x->tick.loop);
}

bool vsock_expiry_rst(const struct vsock_conn *c, struct vsock_hdr *rst)
{
	/* A REQUEST still queued never reached the guest. */
	if (c->state == VSOCK_CONN_LOCAL_INIT &&
	    (c->pending & VSOCK_RXOP_REQUEST))
		return false;
	*rst = (struct vsock_hdr){
		.src_cid = VSOCK_HOST_CID,
		.dst_cid = c->guest_cid,
		.src_port = c->local_port,
		.dst_port = c->peer_port,
		.type = c->type,
		.op = VSOCK_OP_RST,
	};
	return true;
}

void vsock_expiry_log(const struct vsock_expiry *x, struct vmio_ratelimit *rl,
		      const struct vsock_conn *c)
{
	if (c->state == VSOCK_CONN_LOCAL_INIT)
		vsock_peer_log(rl, VMIO_LOG_INFO,
			       "vsock: guest did not answer the connection to "
			       "its port %u within %u ms; closing the host "
			       "socket",
			       c->peer_port, x->connect_timeout_ms);
	else
		vsock_peer_log(rl, VMIO_LOG_INFO,
			       "vsock: connection %u:%u closed by the guest but "
			       "not drained within %u ms; RST",
			       c->local_port, c->peer_port,
			       VSOCK_EXPIRY_SHUTDOWN_MS);
}
