/* The multiplexer's rx queue (muxer_state.h): packets for the guest, from
 * the source whose turn rx_sched.h says it is (the RST queue, a sibling
 * VM, a connection), written into the guest's buffers by rx_writer.h, in
 * either layout; work left at the batch's end, or in a polling window
 * (virtio/poll_window.h), is resumed on the loop's next turn. */
#ifndef VMIO_DEVICES_VSOCK_MUXER_RX_H
#define VMIO_DEVICES_VSOCK_MUXER_RX_H

#include "devices/vsock/muxer_state.h"

/* Serves the rx queue as far as there are packets, buffers and budget;
 * then restarts a tx queue that waited for room in the RST queue. */
void mux_serve_rx(struct vsock_muxer *m);

/* Moves the RSTs owed (muxer_state.h) into the RST queue as far as it
 * has room. */
void mux_rx_owed_refill(struct vsock_muxer *m);

#endif
