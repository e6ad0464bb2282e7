#include "devices/vsock/conn_table.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>

static uint32_t table_hash(const struct vsock_conn_table *t, uint32_t local,
			   uint32_t peer)
{
	/* Two rounds of a multiply-xorshift mix: cheap, and with a secret
	 * seed the guest cannot aim pairs at a bucket. */
	uint32_t h = t->seed ^ local;

	h = (h ^ (h >> 16)) * 0x7feb352du;
	h ^= peer;
	h = (h ^ (h >> 15)) * 0x846ca68bu;
	h ^= h >> 16;
	return h & t->mask;
}

int vsock_table_init(struct vsock_conn_table *t, unsigned max)
{
	uint32_t n = 16;

	*t = (struct vsock_conn_table){ .max = max,
					.port_first = VSOCK_LOCAL_PORT_FIRST,
					.port_last = VSOCK_LOCAL_PORT_LAST,
					.next_port = VSOCK_LOCAL_PORT_FIRST };
	if (!max)
		return -EINVAL;
	/* At least one bucket per entry keeps chains short. */
	while (n < max && n < (1u << 24))
		n <<= 1;
	t->buckets = calloc(n, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	t->mask = n - 1;
	if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) !=
	    (ssize_t)sizeof(t->seed))
		t->seed = (uint32_t)time(NULL) * 2654435761u;
	return 0;
}

void vsock_table_release(struct vsock_conn_table *t)
{
	free(t->buckets);
	t->buckets = NULL;
	t->count = 0;
}

struct vsock_table_entry *vsock_table_find(const struct vsock_conn_table *t,
					   uint32_t local_port,
					   uint32_t peer_port)
{
	struct vsock_table_entry *e;

	for (e = t->buckets[table_hash(t, local_port, peer_port)]; e;
	     e = e->next)
		if (e->local_port == local_port && e->peer_port == peer_port)
			return e;
	return NULL;
}

int vsock_table_insert(struct vsock_conn_table *t, struct vsock_table_entry *e)
{
	uint32_t b;

	if (vsock_table_find(t, e->local_port, e->peer_port))
		return -EEXIST;
	if (vsock_table_full(t))
		return -ENOSPC;
	b = table_hash(t, e->local_port, e->peer_port);
	e->next = t->buckets[b];
	t->buckets[b] = e;
	t->count++;
	return 0;
}

void vsock_table_remove(struct vsock_conn_table *t, struct vsock_table_entry *e)
{
	struct vsock_table_entry **pp =
		&t->buckets[table_hash(t, e->local_port, e->peer_port)];

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == e) {
			*pp = e->next;
			e->next = NULL;
			t->count--;
			return;
		}
	}
}

void vsock_table_set_ports(struct vsock_conn_table *t, uint32_t first,
			   uint32_t last)
{
	t->port_first = t->next_port = first;
	t->port_last = last;
}

void vsock_table_ports_after(struct vsock_conn_table *t, uint32_t port)
{
	if (port < t->port_first || port > t->port_last)
		return;
	t->next_port = port < t->port_last ? port + 1 : t->port_first;
}

int vsock_table_alloc_port(struct vsock_conn_table *t, uint32_t peer_port,
			   uint32_t *port)
{
	uint64_t range = (uint64_t)t->port_last - t->port_first + 1;
	uint64_t tries = range < (uint64_t)t->max + 1 ? range
						      : (uint64_t)t->max + 1;

	while (tries--) {
		uint32_t p = t->next_port;

		t->next_port = p < t->port_last ? p + 1 : t->port_first;
		if (!vsock_table_find(t, p, peer_port)) {
			*port = p;
			return 0;
		}
	}
	return -EADDRINUSE;
}
