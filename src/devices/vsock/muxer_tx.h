/* The multiplexer's tx queue (muxer_state.h): each guest packet parsed
 * and taken to its connection (by port pair), to a new connection (a
 * REQUEST to a host service), to a sibling VM (router.h), or answered
 * with a synthetic RST (rst_queue.h); popped only while the RST queue has
 * room for the packet's answer. */
#ifndef VMIO_DEVICES_VSOCK_MUXER_TX_H
#define VMIO_DEVICES_VSOCK_MUXER_TX_H

#include "devices/vsock/muxer_state.h"

/* Serves the tx queue as far as there are packets and budget, held chains
 * the host has read given back first; then serves rx, which its packets
 * may have given work. */
void mux_serve_tx(struct vsock_muxer *m);

#endif
