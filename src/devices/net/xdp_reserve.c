/* The no-copy receive reserve (xdp_reserve.h). */
#include "devices/net/xdp_reserve.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum { RES_FREE, RES_FILL, RES_PEND };

int vnet_reserve_init(struct vnet_reserve *r, unsigned nframes,
		      unsigned spare_max, size_t frame_size)
{
	memset(r, 0, sizeof(*r));
	r->nframes = nframes;
	r->frame_size = frame_size;
	r->spare_max = spare_max;
	if (!nframes)
		return 0;
	r->state = calloc(nframes, sizeof(r->state[0]));
	r->free = calloc(nframes, sizeof(r->free[0]));
	r->pend = calloc(nframes, sizeof(r->pend[0]));
	r->spare = calloc(spare_max ? spare_max : 1, sizeof(r->spare[0]));
	r->tmp = malloc(frame_size);
	if (!r->state || !r->free || !r->pend || !r->spare || !r->tmp) {
		vnet_reserve_fini(r);
		return -ENOMEM;
	}
	return 0;
}

void vnet_reserve_fini(struct vnet_reserve *r)
{
	free(r->state);
	free(r->free);
	free(r->pend);
	free(r->spare);
	free(r->tmp);
	r->state = NULL;
	r->free = NULL;
	r->pend = NULL;
	r->spare = NULL;
	r->tmp = NULL;
	r->mem = NULL;
	r->nframes = 0;
}

bool vnet_reserve_place(struct vnet_reserve *r, uint8_t *mem, uint64_t umem,
			size_t data_off, size_t hdr_len, size_t max_frame)
{
	r->mem = NULL;
	r->nfree = r->nfill = r->npend = r->pend_head = 0;
	r->nspare = r->spare_head = 0;
	if (!r->nframes || data_off > r->frame_size ||
	    max_frame > r->frame_size - data_off)
		return false;
	r->mem = mem;
	r->umem = umem;
	r->data_off = data_off;
	r->hdr_len = hdr_len;
	r->max_frame = max_frame;
	/* Lowest frames on top: they are the ones used most. */
	for (unsigned i = 0; i < r->nframes; i++) {
		r->state[i] = RES_FREE;
		r->free[i] = r->nframes - 1 - i;
	}
	r->nfree = r->nframes;
	return true;
}

static uint8_t *frame_data(const struct vnet_reserve *r, uint32_t frame)
{
	return r->mem + (size_t)frame * r->frame_size + r->data_off;
}

static void put_free(struct vnet_reserve *r, uint32_t frame)
{
	r->state[frame] = RES_FREE;
	r->free[r->nfree++] = frame;
}

bool vnet_reserve_fill(struct vnet_reserve *r, uint64_t *addr)
{
	uint32_t frame;

	if (!r->mem || !r->nfree)
		return false;
	frame = r->free[--r->nfree];
	r->state[frame] = RES_FILL;
	r->nfill++;
	if (r->nfill + r->npend > r->c.peak)
		r->c.peak = r->nfill + r->npend;
	*addr = r->umem + (uint64_t)frame * r->frame_size;
	return true;
}

enum vnet_reserve_landing vnet_reserve_landed(struct vnet_reserve *r,
					      uint64_t addr, uint64_t data,
					      uint32_t len)
{
	uint64_t off, frame;

	if (!r->mem || addr < r->umem)
		return VNET_RESERVE_NOT_OURS;
	off = addr - r->umem;
	frame = off / r->frame_size;
	if (frame >= r->nframes || off % r->frame_size ||
	    r->state[frame] != RES_FILL)
		return VNET_RESERVE_NOT_OURS;
	r->nfill--;
	if (data != addr + r->data_off || len > r->max_frame) {
		put_free(r, (uint32_t)frame);
		return VNET_RESERVE_BAD;
	}
	r->state[frame] = RES_PEND;
	r->pend[(r->pend_head + r->npend) % r->nframes] =
		(struct vnet_reserve_pend){ (uint32_t)frame, len };
	r->npend++;
	return VNET_RESERVE_PENDING;
}

bool vnet_reserve_keep(struct vnet_reserve *r, void *buf, uint32_t cookie)
{
	if (r->nspare == r->spare_max)
		return false;
	r->spare[(r->spare_head + r->nspare) % r->spare_max] =
		(struct vnet_done){ .buf = buf, .cookie = cookie };
	r->nspare++;
	return true;
}

bool vnet_reserve_surplus(struct vnet_reserve *r, struct vnet_done *out)
{
	if (r->nspare <= r->npend + r->nfill)
		return false;
	r->nspare--;
	*out = r->spare[(r->spare_head + r->nspare) % r->spare_max];
	return true;
}

static struct vnet_done take_oldest_spare(struct vnet_reserve *r)
{
	struct vnet_done d = r->spare[r->spare_head];

	r->spare_head = (r->spare_head + 1) % r->spare_max;
	r->nspare--;
	return d;
}

bool vnet_reserve_take_spare(struct vnet_reserve *r, struct vnet_done *out)
{
	if (!r->nspare)
		return false;
	*out = take_oldest_spare(r);
	out->len = 0;
	return true;
}

static struct vnet_reserve_pend take_oldest_pend(struct vnet_reserve *r)
{
	struct vnet_reserve_pend p = r->pend[r->pend_head];

	r->pend_head = (r->pend_head + 1) % r->nframes;
	r->npend--;
	return p;
}

unsigned vnet_reserve_drain(struct vnet_reserve *r, struct vnet_done *done,
			    unsigned max)
{
	unsigned n = 0;

	while (n < max && r->npend && r->nspare) {
		struct vnet_reserve_pend p = take_oldest_pend(r);
		struct vnet_done d = take_oldest_spare(r);

		memcpy((uint8_t *)d.buf + r->hdr_len, frame_data(r, p.frame),
		       p.len);
		d.len = p.len;
		put_free(r, p.frame);
		r->c.reserve++;
		done[n++] = d;
	}
	return n;
}

void vnet_reserve_direct(struct vnet_reserve *r, struct vnet_done *d)
{
	struct vnet_reserve_pend p;
	uint8_t *in_buf, *in_frame;

	if (!r->npend) {
		r->c.direct++;
		return;
	}
	/* The buffer takes the oldest pending frame; its own frame goes
	 * into that reserve frame, at the end of the line. */
	p = take_oldest_pend(r);
	in_buf = (uint8_t *)d->buf + r->hdr_len;
	in_frame = frame_data(r, p.frame);
	memcpy(r->tmp, in_buf, d->len);
	memcpy(in_buf, in_frame, p.len);
	memcpy(in_frame, r->tmp, d->len);
	r->pend[(r->pend_head + r->npend) % r->nframes] =
		(struct vnet_reserve_pend){ p.frame, d->len };
	r->npend++;
	d->len = p.len;
	r->c.reserve++;
	r->c.reordered++;
}

bool vnet_reserve_wants_fill(const struct vnet_reserve *r,
			     unsigned guest_fill, unsigned low)
{
	if (!r->mem || !r->nfree || r->nspare)
		return false;
	return r->nfill || guest_fill < low;
}

void vnet_reserve_detach(struct vnet_reserve *r)
{
	for (unsigned i = 0; r->mem && i < r->nframes; i++) {
		if (r->state[i] == RES_PEND)
			r->c.lost++;
		if (r->state[i] != RES_FREE)
			put_free(r, i);
	}
	r->nfill = r->npend = r->pend_head = 0;
}
