/* The data packets a guest holds unread (guest_backlog.h). */
#include "devices/vsock/guest_backlog.h"

#include <stdlib.h>

void vsock_backlog_init(struct vsock_backlog *b, uint32_t overhead)
{
	*b = (struct vsock_backlog){ .overhead = overhead };
}

void vsock_backlog_free(struct vsock_backlog *b)
{
	free(b->end);
	b->end = NULL;
	b->cap = b->head = b->len = 0;
}

uint32_t vsock_backlog_limit(const struct vsock_backlog *b,
			     uint32_t peer_buf_alloc)
{
	uint32_t n;

	if (!b->overhead)
		return UINT32_MAX;
	n = peer_buf_alloc / b->overhead;
	if (n < 1)
		n = 1;
	return n < VSOCK_BACKLOG_MAX ? n : VSOCK_BACKLOG_MAX;
}

uint32_t vsock_backlog_room(const struct vsock_backlog *b,
			    uint32_t peer_buf_alloc)
{
	uint32_t limit = vsock_backlog_limit(b, peer_buf_alloc);

	if (limit == UINT32_MAX)
		return UINT32_MAX;
	return b->len < limit ? limit - b->len : 0;
}

/* Makes room for `want` entries, keeping the FIFO's order. */
static int backlog_grow(struct vsock_backlog *b, uint32_t want)
{
	uint32_t *n, i;

	n = malloc(sizeof(*n) * want);
	if (!n)
		return -1;
	for (i = 0; i < b->len; i++)
		n[i] = b->end[(b->head + i) % b->cap];
	free(b->end);
	b->end = n;
	b->cap = want;
	b->head = 0;
	return 0;
}

int vsock_backlog_reserve(struct vsock_backlog *b, uint32_t n)
{
	uint32_t want = b->len + n;

	if (!b->overhead || want <= b->cap)
		return 0;
	/* Grown by doubling, from a small start: most connections never
	 * have more than a few packets out. */
	if (want < 2 * b->cap)
		want = 2 * b->cap;
	if (want < 16)
		want = 16;
	if (want > VSOCK_BACKLOG_MAX && b->len + n <= VSOCK_BACKLOG_MAX)
		want = VSOCK_BACKLOG_MAX;
	return backlog_grow(b, want);
}

void vsock_backlog_push(struct vsock_backlog *b, uint32_t tx_end)
{
	/* Without reserved room (a caller's bug) the packet goes
	 * uncounted rather than written out of bounds. */
	if (!b->overhead || b->len == b->cap)
		return;
	b->end[(b->head + b->len) % b->cap] = tx_end;
	b->len++;
}

void vsock_backlog_consumed(struct vsock_backlog *b, uint32_t fwd_cnt)
{
	/* A packet is read through once fwd_cnt reaches its end: end -
	 * fwd_cnt, on the circle, is then 0 or "negative". */
	while (b->len && (int32_t)(b->end[b->head] - fwd_cnt) <= 0) {
		b->head = (b->head + 1) % b->cap;
		b->len--;
	}
}
