/* The held-buffer table (held.h): open addressing with linear probing, at
 * most half full, and deletion by shifting the run back, so that a lookup
 * stops at the first empty slot. */
#include "devices/net/held.h"

#include <errno.h>
#include <stdlib.h>

int vnet_held_init(struct vnet_held *h, unsigned max)
{
	unsigned slots = 2;

	while (slots < 2 * max)
		slots *= 2;
	h->e = calloc(slots, sizeof(h->e[0]));
	if (!h->e)
		return -ENOMEM;
	h->max = max;
	h->count = 0;
	h->mask = slots - 1;
	return 0;
}

void vnet_held_free(struct vnet_held *h)
{
	free(h->e);
	h->e = NULL;
	h->max = h->count = h->mask = 0;
}

static unsigned slot_of(const struct vnet_held *h, uint64_t addr)
{
	/* Buffers are a few hundred bytes apart at least: mix the bits. */
	addr ^= addr >> 29;
	addr *= 0xbf58476d1ce4e5b9ull;
	addr ^= addr >> 32;
	return (unsigned)addr & h->mask;
}

bool vnet_held_put(struct vnet_held *h, uint64_t addr, uint32_t cookie,
		   void *buf)
{
	unsigned i;

	if (!h->e || h->count >= h->max)
		return false;
	for (i = slot_of(h, addr); h->e[i].used; i = (i + 1) & h->mask)
		;
	h->e[i] = (struct vnet_held_entry){
		.addr = addr, .buf = buf, .cookie = cookie, .used = true
	};
	h->count++;
	return true;
}

/* Empties slot i and moves back the entries after it that probed past. */
static void remove_at(struct vnet_held *h, unsigned i)
{
	unsigned j = i;

	h->e[i].used = false;
	for (;;) {
		unsigned home;

		j = (j + 1) & h->mask;
		if (!h->e[j].used)
			break;
		home = slot_of(h, h->e[j].addr);
		/* Leave e[j] if its home lies cyclically in (i, j]. */
		if (i <= j ? (i < home && home <= j) : (i < home || home <= j))
			continue;
		h->e[i] = h->e[j];
		h->e[j].used = false;
		i = j;
	}
	h->count--;
}

bool vnet_held_take(struct vnet_held *h, uint64_t addr,
		    struct vnet_held_entry *out)
{
	if (!h->e)
		return false;
	for (unsigned i = slot_of(h, addr); h->e[i].used;
	     i = (i + 1) & h->mask) {
		if (h->e[i].addr == addr) {
			*out = h->e[i];
			remove_at(h, i);
			return true;
		}
	}
	return false;
}

bool vnet_held_take_any(struct vnet_held *h, struct vnet_held_entry *out)
{
	if (!h->e || !h->count)
		return false;
	for (unsigned i = 0; i <= h->mask; i++) {
		if (h->e[i].used) {
			*out = h->e[i];
			remove_at(h, i);
			return true;
		}
	}
	return false;
}
