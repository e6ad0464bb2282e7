/* The multiplexer's connection registry (muxer_state.h): a connection in
 * the table and the list of all, and the muxer's view of it (its host fd
 * watch, its deadline, its rx turn) brought in line with its state after
 * every call into it; the tx chains it holds (tx_splice.h) given back. */
#ifndef VMIO_DEVICES_VSOCK_MUXER_CONNS_H
#define VMIO_DEVICES_VSOCK_MUXER_CONNS_H

#include <stdbool.h>

#include "devices/vsock/muxer_state.h"

/* A connection not set up yet (vsock_conn_init_*), in no table. */
struct mux_conn *mux_conn_new(struct vsock_muxer *m);
/* Gives a connection just set up the VM's counters, limiter and packet
 * overhead, and a stream the splice path and its bound. */
void mux_conn_setup(struct vsock_muxer *m, struct mux_conn *mc);
/* Puts a connection set up by vsock_conn_init_* in the table; -errno if
 * the table refuses it. */
int mux_conn_insert(struct vsock_muxer *m, struct mux_conn *mc);
/* Ends a connection: its held chains go back, its fd is closed, its
 * counters join the VM's ended ones. */
void mux_conn_free(struct mux_conn *mc);
/* Brings the muxer's view of a connection in line with its state; called
 * after every call into it. May free it. */
void mux_conn_update(struct mux_conn *mc);
/* The connection of an rx FIFO link (NULL: none). On every packet's
 * path: inline. */
static inline struct mux_conn *mux_rx_conn(struct vsock_rx_link *l)
{
	return l ? (struct mux_conn *)((char *)l -
				       offsetof(struct mux_conn, rx_link))
		 : NULL;
}

/* Whether a connection may hold another tx chain. */
static inline bool mux_hold_room(const struct vsock_muxer *m,
				 const struct mux_conn *mc)
{
	return m->splice && vsock_holders_room(&m->holders, mc->c.held.n);
}
/* A connection just kept a chain. */
void mux_hold_note(struct vsock_muxer *m, struct mux_conn *mc);
/* Gives back the chains of mc the host has read through (all with
 * force), the used ring published at once: for callers outside a tx
 * turn. */
void mux_hold_release(struct mux_conn *mc, bool force);
/* The same for every holder; returns the chains pushed, not flushed. */
unsigned mux_hold_release_all(struct vsock_muxer *m, bool force);

#endif
