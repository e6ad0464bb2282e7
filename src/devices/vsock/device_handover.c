/* A vsock device's hand-over record; see device_handover.h.
 *
 * Layout (the version is the whole hand-over record's): the
 * multiplexer's record, then the hybrid listener's. */
#include "devices/vsock/device_handover.h"

#include "devices/vsock/device_internal.h"
#include "devices/vsock/hybrid_handover.h"
#include "devices/vsock/muxer_handover.h"

void vsock_device_pause_host(struct vsock_device *d, bool paused)
{
	vsock_muxer_pause_host(d->mux, paused);
	vsock_hybrid_pause(d->hybrid, paused);
}

int vsock_device_save(const struct vsock_device *d, struct vmio_wire_writer *w,
		      int fds[], unsigned max_fds, unsigned *nfds,
		      const char **why)
{
	if (vsock_muxer_save(d->mux, w, fds, max_fds, nfds, why))
		return -1;
	return vsock_hybrid_save(d->hybrid, w, fds, max_fds, nfds, why);
}

struct vsock_device *vsock_device_restore(struct vmio_loop *loop,
					  const struct vsock_device_config *cfg,
					  struct vmio_wire_reader *r, int fds[],
					  unsigned nfds)
{
	struct vsock_device *d = vsock_device_alloc(loop, cfg);
	struct vsock_hybrid_config hc = vsock_device_hybrid_config(cfg);

	if (!d) {
		vmio_wire_fail(r, "out of memory");
		return NULL;
	}
	if (!vsock_muxer_restore(d->mux, r, fds, nfds))
		d->hybrid = vsock_hybrid_restore(loop, d->mux, &hc, r, fds,
						  nfds);
	if (vmio_wire_ok(r) && d->hybrid)
		return d;
	vsock_device_free(d);
	return NULL;
}

void vsock_device_handed_over(struct vsock_device *d)
{
	vsock_hybrid_handed_over(d->hybrid);
}
