#include "event/heap.h"

#include <errno.h>
#include <stdlib.h>

static void place(struct vmio_heap *h, size_t i, struct vmio_heap_node *n)
{
	h->slot[i] = n;
	n->index = i;
}

static void sift_up(struct vmio_heap *h, size_t i)
{
	struct vmio_heap_node *n = h->slot[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (h->slot[parent]->key <= n->key)
			break;
		place(h, i, h->slot[parent]);
		i = parent;
	}
	place(h, i, n);
}

static void sift_down(struct vmio_heap *h, size_t i)
{
	struct vmio_heap_node *n = h->slot[i];

	for (;;) {
		size_t child = 2 * i + 1;
		if (child >= h->len)
			break;
		if (child + 1 < h->len &&
		    h->slot[child + 1]->key < h->slot[child]->key)
			child++;
		if (n->key <= h->slot[child]->key)
			break;
		place(h, i, h->slot[child]);
		i = child;
	}
	place(h, i, n);
}

int vmio_heap_reserve(struct vmio_heap *h)
{
	if (h->reserved == h->cap) {
		size_t cap = h->cap ? h->cap * 2 : 16;
		struct vmio_heap_node **s = realloc(h->slot, cap * sizeof(*s));
		if (!s)
			return -ENOMEM;
		h->slot = s;
		h->cap = cap;
	}
	h->reserved++;
	return 0;
}

void vmio_heap_unreserve(struct vmio_heap *h)
{
	if (h->reserved > h->len)
		h->reserved--;
}

void vmio_heap_push(struct vmio_heap *h, struct vmio_heap_node *n)
{
	if (n->index != VMIO_HEAP_IDLE || h->len == h->reserved)
		return; /* already in, or no room promised: a caller's bug */
	h->slot[h->len++] = n;
	sift_up(h, h->len - 1);
}

void vmio_heap_remove(struct vmio_heap *h, struct vmio_heap_node *n)
{
	size_t i = n->index;

	if (i >= h->len || h->slot[i] != n)
		return;
	n->index = VMIO_HEAP_IDLE;
	h->len--;
	if (i == h->len)
		return;
	place(h, i, h->slot[h->len]);
	if (i > 0 && h->slot[(i - 1) / 2]->key > h->slot[i]->key)
		sift_up(h, i);
	else
		sift_down(h, i);
}

void vmio_heap_release(struct vmio_heap *h)
{
	free(h->slot);
	*h = (struct vmio_heap){ 0 };
}
