/* Types only: one VM's multiplexer (muxer.h) and its connections, shared
 * by the files that make it up, bottom up:
 *
 *   muxer_conns.c  the connection registry: a connection's entry, its
 *                  host fd watch, deadline and rx turn kept in line with
 *                  its state; the tx chains it holds (tx_splice.h)
 *   muxer_rx.c     the rx queue: packets for the guest as rx_sched.h
 *                  orders them, written by rx_writer.h
 *   muxer_tx.c     the tx queue: guest packets to their connection, a
 *                  guest connect, a sibling VM, or an RST
 *   muxer.c        the loop's callbacks, the tick's work, the public
 *                  interface
 *
 * The registry is below the queues, so the loop's callbacks that serve
 * rx after a host socket's event live in muxer.c and reach the registry
 * as the two function pointers below. */
#ifndef VMIO_DEVICES_VSOCK_MUXER_STATE_H
#define VMIO_DEVICES_VSOCK_MUXER_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "devices/vsock/conn_journal.h"
#include "devices/vsock/conn_table.h"
#include "devices/vsock/connection.h"
#include "devices/vsock/expiry.h"
#include "devices/vsock/muxer_config.h"
#include "devices/vsock/peer_log.h"
#include "devices/vsock/rst_queue.h"
#include "devices/vsock/rx_sched.h"
#include "devices/vsock/rx_writer.h"
#include "devices/vsock/stats.h"
#include "devices/vsock/tx_splice.h"
#include "event/loop.h"
#include "virtio/poll_window.h"

struct mux_conn {
	struct vsock_table_entry key;
	struct vsock_conn c;
	struct vsock_muxer *m;
	struct mux_conn *all_prev, *all_next; /* every connection */
	struct vsock_rx_link rx_link;         /* rx_sched.h's FIFO */
	int watched_fd;   /* fd registered on the loop, -1 if none */
	uint32_t watched; /* its events */
	uint64_t deadline_ns; /* 0: none (expiry.h) */
	struct vsock_holder holder; /* while it holds tx chains (tx_splice.h) */
	uint32_t journal_slot; /* conn_journal.h */
};

struct vsock_muxer {
	struct vmio_loop *loop;
	struct vsock_muxer_config cfg;
	char *uds_path;
	unsigned types;
	struct vsock_conn_table table;
	struct mux_conn *all;
	struct vsock_rx_sched rxs;

	struct vsock_rstq rstq;
	/* RSTs owed for the connections a dead vmio's journal named
	 * (vsock_muxer_owe_rsts), moved into rstq as it has room, before
	 * any other rx packet: at most cfg.max_conns. */
	struct vsock_hdr *owed;
	unsigned nowed, owed_next;
	uint32_t owed_port_max; /* the highest local port among them */
	struct vsock_journal journal;
	bool tx_stalled; /* tx stopped because rstq was full */
	bool attached;   /* a VMM is there (vsock_muxer_set_attached) */
	bool mrg;        /* mergeable rx buffers negotiated (mrg_rx.h) */
	/* A hand-over is under way (muxer_handover.h): no host socket is
	 * watched and the tick does nothing, so nothing changes after the
	 * record was written. */
	bool host_paused;

	struct vmio_vq *rx, *tx;
	struct vmio_mem *mem;

	struct vsock_expiry expiry; /* the tick */
	/* The queues' next turn: tx (which serves rx after it) and rx. The
	 * router schedules rx_again for sibling packets. */
	struct vmio_defer tx_again, rx_again;
	/* muxer.c's callbacks of a connection's host fd and of its held
	 * chains' wake-up watch, which the registry registers. */
	vmio_fd_cb conn_io_cb, hold_wake_cb;

	struct vmio_ratelimit rl;
	struct vsock_vm_stats stats;
	/* Large: one iovec array per chain, never on the stack. */
	struct vsock_rx_writer rxw;
	struct vmio_chain txc;
	struct mux_conn *rx_served; /* the connection rxw just wrote for */

	/* Each queue's polling window (virtio/poll_window.h, as net's):
	 * after work, a dry ring is looked at again once a loop turn for
	 * cfg.poll_ns before its kicks go back on. */
	struct vmio_poll_window rx_poll, tx_poll;

	struct vsock_splice *splice; /* NULL: the copy path */
	struct vsock_holders holders;
};

/* Asks for a turn of a queue once the loop has served everything else;
 * tx's turn serves rx after it. */
static inline void mux_resched(struct vsock_muxer *m, bool rx, bool tx)
{
	if (tx)
		vmio_defer_schedule(&m->tx_again);
	else if (rx)
		vmio_defer_schedule(&m->rx_again);
}

#endif
