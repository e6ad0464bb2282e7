/* Fuzzes the successor's side of vmio net's hand-over
 * (devices/net/device_handover.h, port_tap.h): the device's record comes
 * from another process, maybe another release, and is read as hostile
 * input, beside descriptors that may not be what it says.
 *
 * Input: [0] bit 0: the port is a TAP whose "queues" are /dev/null
 * descriptors (no TAP here), else the null port; bit 1: two queue
 * pairs, else one; bit 2: an AF_XDP port's record (its check: no
 * interface here), --xdp-copy if bit 3; the rest is the record.
 * Invariants checked:
 *   - a refused record leaves nothing behind (ASan's leak check), and
 *     every descriptor it was given is still the caller's
 *   - a TAP record never takes a descriptor that is not a TAP's queue
 *   - an accepted one, its features negotiated again, is canonical after
 *     one round: saved and restored again it is accepted, and saving
 *     that gives the same bytes */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "devices/net/device_handover.h"
#include "devices/net/port_null.h"
#include "devices/net/port_tap.h"
#include "devices/net/port_xdp.h"
#include "devices/net/state.h"
#include "event/loop.h"
#include "fuzz.h"
#include "util/log.h"

static const struct vnet_device_config base = {
	.mac = { 0x52, 0x54, 0, 0x12, 0x34, 0x56 },
	.mtu = 1500,
	.max_queue_size = 256,
};

/* The TAP's restore on descriptors that are no TAP's: always refused,
 * each one left to the caller. */
static void tap_case(struct vmio_wire_reader *r, unsigned pairs)
{
	int fds[2], kept[2];

	for (unsigned i = 0; i < pairs; i++) {
		fds[i] = kept[i] = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (fds[i] < 0)
			abort();
	}
	if (vnet_port_tap_restore("vmiof0", pairs, r, fds, pairs) ||
	    vmio_wire_ok(r))
		abort();
	for (unsigned i = 0; i < pairs; i++) {
		if (fds[i] != kept[i])
			abort();
		close(fds[i]);
	}
}

/* d's record, after the head and the null port's (empty) record. */
static void save(const struct vnet_device *d, struct vmio_wire_writer *w)
{
	const char *why = NULL;
	unsigned nfds = 0;
	int fds[1];

	vmio_wire_writer_init(w, 1 << 20);
	if (vnet_device_save(d, w, fds, 0, &nfds, &why) || w->failed ||
	    nfds)
		abort();
}

/* A device on a null port from r, its session's features those of the
 * record. NULL if refused. */
static struct vnet_device *restore(struct vmio_loop *loop,
				   struct vnet_device_config *cfg,
				   struct vmio_wire_reader *r)
{
	struct vnet_device *d;
	const char *why = NULL;
	int err;

	if (vnet_device_read_head(r, cfg, "null"))
		return NULL;
	cfg->port = vnet_port_null_new(cfg->pairs, 0, &err);
	if (!cfg->port)
		abort();
	d = vnet_device_new(loop, cfg);
	if (!d)
		abort();
	if (vnet_device_restore(d, r)) {
		vnet_device_free(d);
		vnet_port_free(cfg->port);
		cfg->port = NULL;
		return NULL;
	}
	/* What the session's SET_FEATURES does before restored. */
	d->features = d->restored_features;
	if (vnet_device_restored(d, &why))
		abort();
	return d;
}

static void release(struct vnet_device *d, struct vnet_device_config *cfg)
{
	vnet_device_free(d);
	vnet_port_free(cfg->port);
	cfg->port = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vnet_device_config cfg = base, cfg2;
	struct vmio_wire_writer w1, w2;
	struct vmio_wire_reader r;
	struct vmio_loop *loop;
	struct vnet_device *d;
	static bool quiet;

	if (!quiet) {
		vmio_log_set_level(VMIO_LOG_ERR);
		quiet = true;
	}
	if (!size)
		return 0;
	cfg.pairs = data[0] & 2 ? 2 : 1;
	vmio_wire_reader_init(&r, data + 1, size - 1);
	if (data[0] & 4) {
		bool copy = data[0] & 8;

		/* Taken only as this command line would have written it. */
		if (!vnet_device_read_head(&r, &cfg, "xdp") &&
		    !vnet_port_xdp_check_record(&r, "vmiof0", 0, copy, 0) &&
		    ((r.p[-1] != 0) != copy ||
		     memcmp(r.p - 1 - 4 - 6, "vmiof0", 6)))
			abort();
		return 0;
	}
	if (data[0] & 1) {
		if (!vnet_device_read_head(&r, &cfg, "tap"))
			tap_case(&r, cfg.pairs);
		if (getenv("FUZZ_NET_HANDOVER_VERBOSE"))
			fprintf(stderr, "fuzz_net_handover: tap: %s\n", r.why);
		return 0;
	}
	loop = vmio_loop_new();
	if (!loop)
		abort();
	d = restore(loop, &cfg, &r);
	if (getenv("FUZZ_NET_HANDOVER_VERBOSE"))
		fprintf(stderr, "fuzz_net_handover: %s\n",
			d ? "taken" : r.why ? r.why : "refused");
	if (d) {
		/* One round: the record as this vmio writes it. */
		cfg2 = base;
		cfg2.pairs = cfg.pairs;
		save(d, &w1);
		release(d, &cfg);
		vmio_wire_reader_init(&r, w1.buf, w1.len);
		d = restore(loop, &cfg2, &r);
		if (!d)
			abort();
		save(d, &w2);
		if (w1.len != w2.len || memcmp(w1.buf, w2.buf, w1.len))
			abort();
		release(d, &cfg2);
		vmio_wire_writer_fini(&w1);
		vmio_wire_writer_fini(&w2);
	}
	vmio_loop_free(loop);
	return 0;
}
