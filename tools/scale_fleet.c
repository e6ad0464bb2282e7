/* See scale_fleet.h. */
#include "scale_fleet.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"
#include "vsock_transfer.h"

int fleet_load(struct vsock_vm_list *vms, const char *config, char *err,
	       size_t err_size)
{
	*vms = (struct vsock_vm_list){ 0 };
	if (vsock_vms_load_config(vms, config, err, err_size) ||
	    vsock_vms_check(vms, err, err_size)) {
		vsock_vms_release(vms);
		return -1;
	}
	return 0;
}

struct vg *fleet_open(const struct vsock_vm_spec *vm, unsigned max_sockets,
		      char *err, size_t err_size)
{
	struct vg_opts o;

	vg_opts_init(&o);
	o.guest_cid = vm->guest_cid;
	if (o.max_sockets < max_sockets)
		o.max_sockets = max_sockets;
	return vg_open(vm->socket, XFER_STALL_MS, &o, err, err_size);
}

/* Where fleet_connect stands with one guest. */
struct progress {
	struct vg_sock **pending; /* window of them, npending used */
	unsigned npending, started, finished;
};

/* Looks at guest i's outstanding REQUESTs: each answered one is
 * finished (kept in out, or freed when a refusal was expected).
 * Returns how many finished, or -1 with err for a wrong answer. */
static int reap(struct vg *g, unsigned i, struct progress *p,
		unsigned per_guest, uint32_t port, bool refused,
		struct vg_sock **out, char *err, size_t err_size)
{
	int n = 0;

	for (unsigned k = 0; k < p->npending;) {
		struct vg_sock *s = p->pending[k];
		struct vg_sock_info si;

		vg_sock_info(s, &si);
		if (!si.established && !si.reset) {
			k++;
			continue;
		}
		if (refused != si.reset) {
			snprintf(err, err_size,
				 "guest %u (CID %" PRIu64 "): connection %u "
				 "to host port %u %s", i, g->o.guest_cid,
				 p->finished, port,
				 refused ? "established, but nobody listens "
					   "there"
					 : "refused by vmio");
			return -1;
		}
		if (refused)
			vg_close(s);
		else
			out[(size_t)i * per_guest + p->finished] = s;
		p->finished++;
		p->pending[k] = p->pending[--p->npending];
		n++;
	}
	return n;
}

int fleet_connect(struct vg *const *gs, unsigned n, uint32_t port,
		  unsigned per_guest, unsigned window, bool refused,
		  struct vg_sock **out, char *err, size_t err_size)
{
	struct progress *p = calloc(n, sizeof(*p));
	struct vg_sock **pend = calloc((size_t)n * window, sizeof(*pend));
	uint64_t total = (uint64_t)n * per_guest, finished = 0;
	int64_t last = vmio_now_ms();
	int rc = -1;

	if (!p || !pend) {
		snprintf(err, err_size, "out of memory");
		goto out;
	}
	for (unsigned i = 0; i < n; i++)
		p[i].pending = pend + (size_t)i * window;
	while (finished < total) {
		int r;

		/* A REQUEST goes out only with a tx slot free, so that no
		 * guest waits for its own slots while the others could go
		 * on. */
		for (unsigned i = 0; i < n; i++)
			while (p[i].npending < window &&
			       p[i].started < per_guest && gs[i]->tx_nfree) {
				int e = 0;
				struct vg_sock *s =
					vg_connect_start(gs[i], port, &e);

				if (!s) {
					snprintf(err, err_size,
						 "guest %u: REQUEST: %s", i,
						 strerror(-e));
					goto out;
				}
				p[i].pending[p[i].npending++] = s;
				p[i].started++;
			}
		r = vg_poll_many(gs, n, 100);
		if (r < 0) {
			snprintf(err, err_size, "vg_poll: %s", strerror(-r));
			goto out;
		}
		bool moved = false;

		for (unsigned i = 0; i < n; i++) {
			r = reap(gs[i], i, &p[i], per_guest, port, refused,
				 out, err, err_size);
			if (r < 0)
				goto out;
			finished += (uint64_t)r;
			moved |= r > 0;
		}
		if (moved) {
			last = vmio_now_ms();
		} else if (vmio_now_ms() - last > XFER_STALL_MS) {
			snprintf(err, err_size,
				 "no connection to host port %u answered for "
				 "%d s (%" PRIu64 " of %" PRIu64 " done)",
				 port, XFER_STALL_MS / 1000, finished, total);
			goto out;
		}
	}
	rc = 0;
out:
	free(pend);
	free(p);
	return rc;
}
