/* The rx scheduler; see rx_sched.h. */
#include "devices/vsock/rx_sched.h"

#include <stddef.h>

enum vsock_rx_source vsock_rx_sched_next(const struct vsock_rx_sched *s,
					 bool rst_waiting, bool sib_waiting)
{
	if (rst_waiting)
		return VSOCK_RX_RST;
	if (sib_waiting && (s->sib_turn || !s->head))
		return VSOCK_RX_SIBLING;
	return s->head ? VSOCK_RX_CONN : VSOCK_RX_NONE;
}

static struct vsock_rx_link *pop(struct vsock_rx_sched *s)
{
	struct vsock_rx_link *l = s->head;

	if (!l)
		return NULL;
	s->head = l->next;
	if (!s->head)
		s->tail = NULL;
	l->next = NULL;
	l->queued = false;
	return l;
}

struct vsock_rx_link *vsock_rx_sched_take(struct vsock_rx_sched *s,
					  enum vsock_rx_source src)
{
	if (src == VSOCK_RX_SIBLING)
		s->sib_turn = false;
	if (src != VSOCK_RX_CONN)
		return NULL;
	s->sib_turn = true;
	return pop(s);
}

void vsock_rx_sched_add(struct vsock_rx_sched *s, struct vsock_rx_link *l)
{
	if (l->queued)
		return;
	l->next = NULL;
	if (s->tail)
		s->tail->next = l;
	else
		s->head = l;
	s->tail = l;
	l->queued = true;
}

/* Singly linked, so removal walks; it happens once per connection and
 * the FIFO holds only connections with something to send. */
void vsock_rx_sched_remove(struct vsock_rx_sched *s, struct vsock_rx_link *l)
{
	struct vsock_rx_link **pp = &s->head, *prev = NULL;

	if (!l->queued)
		return;
	for (; *pp; prev = *pp, pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			if (s->tail == l)
				s->tail = prev;
			break;
		}
	}
	l->next = NULL;
	l->queued = false;
}

void vsock_rx_sched_reset(struct vsock_rx_sched *s)
{
	s->sib_turn = false;
}
