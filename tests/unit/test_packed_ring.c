/* The device side of a packed virtqueue against rings laid out by hand in
 * guest memory (two adjacent memfd regions): wraps at every position,
 * chains across the wrap, indirect tables, event suppression, and the
 * hostile layouts that must break the queue rather than the device. */
#include <endian.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "guest_regions.h"

#include "virtio/virtqueue.h"

#define REGION_SIZE 0x8000u
#define UVA_A 0x7f0000000000ull
#define UVA_B 0x7e0000000000ull

#define QSIZE 8u
#define DESC_GPA 0x0000u
#define DRIVER_GPA 0x1000u /* the driver's event suppression area */
#define DEVICE_GPA 0x1100u /* the device's */
#define TABLE_GPA 0x3000u
#define DATA_GPA 0x4000u

struct fx {
	struct vmio_mem mem;
	struct vmio_vq vq;
	struct vmio_chain chain;
	struct pvirtq_desc *desc;
	struct pvirtq_event_suppress *driver, *device;
	uint16_t pos; /* the driver's next position */
	bool wrap;    /* and its wrap counter */
	int call_fd;
};

static void add_region(struct vmio_mem *mem, uint64_t gpa, uint64_t uva)
{
	guest_region_add(mem, gpa, REGION_SIZE, uva);
}

static void *gp(struct fx *f, uint64_t gpa)
{
	return guest_ptr(&f->mem, gpa);
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	vmio_mem_init(&f->mem);
	add_region(&f->mem, 0, UVA_A);
	add_region(&f->mem, REGION_SIZE, UVA_B);
	f->desc = gp(f, DESC_GPA);
	f->driver = gp(f, DRIVER_GPA);
	f->device = gp(f, DEVICE_GPA);
	f->call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(f->call_fd >= 0);
	f->wrap = true;

	vmio_vq_init(&f->vq, 5);
	f->vq.packed = true;
	f->vq.indirect = true;
	f->vq.size = QSIZE;
	f->vq.desc_uva = UVA_A + DESC_GPA;
	f->vq.avail_uva = UVA_A + DRIVER_GPA;
	f->vq.used_uva = UVA_A + DEVICE_GPA;
	f->vq.addr_set = true;
	vmio_vq_set_transport(&f->vq, &vmio_vq_eventfd_transport, &f->call_fd);
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), 0);
	assert_ptr_equal(f->vq.pdesc, f->desc);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	vmio_vq_release(&f->vq);
	vmio_mem_clear(&f->mem);
	close(f->call_fd);
	free(f);
	return 0;
}

/* Both sides start at position p (wrap counters 1). */
static void start_at(struct fx *f, uint16_t p)
{
	f->pos = p;
	f->wrap = true;
	f->vq.last_avail_idx = f->vq.used_idx = p;
	f->vq.avail_wrap = f->vq.used_wrap = true;
}

static uint16_t avail_flags(bool wrap)
{
	return wrap ? VIRTQ_DESC_F_AVAIL : VIRTQ_DESC_F_USED;
}

struct buf {
	uint64_t gpa;
	uint32_t len;
	uint16_t flags; /* WRITE, INDIRECT */
};

/* Makes a chain of n buffers available with buffer id, the first
 * descriptor's flags last, as a driver does. */
static void post(struct fx *f, const struct buf *b, unsigned n, uint16_t id)
{
	uint16_t first = f->pos, first_flags = 0;

	for (unsigned k = 0; k < n; k++) {
		struct pvirtq_desc *d = &f->desc[f->pos];
		uint16_t flags = avail_flags(f->wrap) | b[k].flags;

		if (k + 1 < n)
			flags |= VIRTQ_DESC_F_NEXT;
		d->addr = htole64(b[k].gpa);
		d->len = htole32(b[k].len);
		d->id = htole16(id);
		if (k)
			d->flags = htole16(flags);
		else
			first_flags = flags;
		if (++f->pos == QSIZE) {
			f->pos = 0;
			f->wrap = !f->wrap;
		}
	}
	f->desc[first].flags = htole16(first_flags);
}

static void post1(struct fx *f, uint32_t len, uint16_t id)
{
	const struct buf b = { DATA_GPA, len, 0 };

	post(f, &b, 1, id);
}

static bool used_at(struct fx *f, uint16_t p, bool wrap, uint16_t id,
		    uint32_t len)
{
	uint16_t flags = le16toh(f->desc[p].flags);

	return !!(flags & VIRTQ_DESC_F_AVAIL) == wrap &&
	       !!(flags & VIRTQ_DESC_F_USED) == wrap &&
	       le16toh(f->desc[p].id) == id && le32toh(f->desc[p].len) == len;
}

/* One-descriptor chains through two whole turns of the ring, from every
 * starting position: each wraps once per turn, used where it was. */
static void test_wrap_at_every_position(void **state)
{
	struct fx *f = *state;

	for (uint16_t start = 0; start < QSIZE; start++) {
		memset(f->desc, 0, QSIZE * sizeof(*f->desc));
		start_at(f, start);
		for (unsigned k = 0; k < 2 * QSIZE; k++) {
			uint16_t p = f->vq.used_idx;
			bool w = f->vq.used_wrap;
			uint16_t id = (uint16_t)(k % QSIZE);

			post1(f, 100 + k, id);
			assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
			assert_int_equal(f->chain.head, id);
			assert_int_equal(f->chain.out_len, 100 + k);
			assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);
			vmio_vq_push(&f->vq, id, 7);
			/* Written at the flush, not before. */
			assert_false(used_at(f, p, w, id, 7));
			vmio_vq_flush_and_notify(&f->vq);
			assert_true(used_at(f, p, w, id, 7));
		}
		assert_int_equal(f->vq.last_avail_idx, start);
		assert_false(f->vq.broken);
	}
}

/* A chain of three from the ring's last slot: read in ring order across
 * the wrap, its id from the last, one used descriptor that skips three. */
static void test_chain_across_the_wrap(void **state)
{
	struct fx *f = *state;
	const struct buf b[3] = {
		{ DATA_GPA, 10, 0 },
		{ DATA_GPA + 100, 20, 0 },
		{ DATA_GPA + 200, 30, VIRTQ_DESC_F_WRITE },
	};

	start_at(f, QSIZE - 1);
	post(f, b, 3, 5);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 5);
	assert_int_equal(f->chain.nout, 2);
	assert_int_equal(f->chain.nin, 1);
	assert_int_equal(f->chain.out_len, 30);
	assert_int_equal(f->chain.in_len, 30);
	assert_int_equal(f->vq.last_avail_idx, 2);
	assert_false(f->vq.avail_wrap);
	vmio_vq_push(&f->vq, 5, 30);
	vmio_vq_flush_and_notify(&f->vq);
	assert_true(used_at(f, QSIZE - 1, true, 5, 30));
	assert_int_equal(f->vq.used_idx, 2);
	assert_false(f->vq.used_wrap);
}

static void test_indirect_table(void **state)
{
	struct fx *f = *state;
	struct pvirtq_desc *t = gp(f, TABLE_GPA);
	const struct buf b = { TABLE_GPA, 3 * 16, VIRTQ_DESC_F_INDIRECT };

	t[0] = (struct pvirtq_desc){ htole64(DATA_GPA), htole32(8), 0, 0 };
	t[1] = (struct pvirtq_desc){ htole64(DATA_GPA + 8), htole32(8), 0, 0 };
	t[2] = (struct pvirtq_desc){ htole64(DATA_GPA + 64), htole32(64), 0,
				     htole16(VIRTQ_DESC_F_WRITE) };
	start_at(f, 3);
	post(f, &b, 1, 2);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 2);
	assert_int_equal(f->chain.nout, 2);
	assert_int_equal(f->chain.nin, 1);
	assert_int_equal(f->chain.in_len, 64);
	vmio_vq_push(&f->vq, 2, 64);
	assert_int_equal(f->vq.used_idx, 4);
}

static void expect_broken(struct fx *f)
{
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), -1);
	assert_true(f->vq.broken);
	assert_false(vmio_vq_ready(&f->vq));
}

static void test_indirect_not_negotiated(void **state)
{
	struct fx *f = *state;
	const struct buf b = { TABLE_GPA, 16, VIRTQ_DESC_F_INDIRECT };

	f->vq.indirect = false;
	start_at(f, 0);
	post(f, &b, 1, 0);
	expect_broken(f);
}

static void test_indirect_in_a_chain(void **state)
{
	struct fx *f = *state;
	const struct buf b[2] = {
		{ DATA_GPA, 16, 0 },
		{ TABLE_GPA, 16, VIRTQ_DESC_F_INDIRECT },
	};

	start_at(f, 0);
	post(f, b, 2, 0);
	expect_broken(f);
}

/* A driver whose wrap counter went wrong: a descriptor marked with the
 * other lap's flags is not available (no pop, no break); one in the
 * middle of a chain breaks the queue. */
static void test_wrong_wrap_counter(void **state)
{
	struct fx *f = *state;
	const struct buf b[2] = { { DATA_GPA, 16, 0 }, { DATA_GPA, 16, 0 } };

	start_at(f, 0);
	f->wrap = false; /* the driver thinks it is on the second lap */
	post1(f, 16, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);
	assert_false(f->vq.broken);
	start_at(f, 0);
	post(f, b, 2, 1);
	f->desc[1].flags = htole16(avail_flags(false)); /* the second: wrong */
	expect_broken(f);
}

/* Every descriptor says NEXT: the chain would be longer than the ring. */
static void test_chain_longer_than_the_ring(void **state)
{
	struct fx *f = *state;
	struct buf b[QSIZE];

	for (unsigned k = 0; k < QSIZE; k++)
		b[k] = (struct buf){ DATA_GPA, 1, 0 };
	start_at(f, 0);
	post(f, b, QSIZE, 0);
	f->desc[QSIZE - 1].flags |= htole16(VIRTQ_DESC_F_NEXT);
	/* The ring's first descriptor is available on the next lap's
	 * terms only: the walk sees it as not available and breaks. */
	expect_broken(f);
}

static void test_buffer_outside_memory(void **state)
{
	struct fx *f = *state;
	const struct buf b = { 2 * REGION_SIZE - 8, 64, 0 };

	start_at(f, 0);
	post(f, &b, 1, 0);
	expect_broken(f);
}

static void test_buffer_id_beyond_the_queue(void **state)
{
	struct fx *f = *state;

	start_at(f, 0);
	post1(f, 16, QSIZE);
	expect_broken(f);
}

static void test_base_beyond_the_queue(void **state)
{
	struct fx *f = *state;

	start_at(f, 0);
	post1(f, 16, 0);
	f->vq.last_avail_idx = QSIZE + 3;
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 0);
	expect_broken(f);
}

/* Unpop gives back the last chains popped: they come again, in order. */
static void test_unpop(void **state)
{
	struct fx *f = *state;

	start_at(f, 6);
	for (uint16_t id = 0; id < 3; id++)
		post1(f, 10 + id, id);
	for (uint16_t id = 0; id < 3; id++)
		assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_unpop(&f->vq, 2);
	assert_int_equal(f->vq.last_avail_idx, 7);
	assert_true(f->vq.avail_wrap);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 1);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 2);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);
}

/* vmio_vq_progress moves with every descriptor the driver makes
 * available, those the device has not taken included (rx buffers it
 * holds), across the wrap; and with every pop. A look that finds it as
 * it was is a kick that brought nothing. */
static void test_progress(void **state)
{
	struct fx *f = *state;
	uint32_t p, q;

	start_at(f, 5);
	p = vmio_vq_progress(&f->vq);
	assert_int_equal(vmio_vq_progress(&f->vq), p);
	post1(f, 10, 0);
	q = vmio_vq_progress(&f->vq);
	assert_int_not_equal(q, p);
	/* Past the wrap: 5, 6, 7, then 0 and 1 in the next lap. */
	for (uint16_t id = 1; id < 5; id++) {
		post1(f, 10, id);
		p = q;
		q = vmio_vq_progress(&f->vq);
		assert_int_not_equal(q, p);
	}
	assert_int_equal(vmio_vq_progress(&f->vq), q);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_not_equal(vmio_vq_progress(&f->vq), q);
	q = vmio_vq_progress(&f->vq);
	vmio_vq_push(&f->vq, 0, 0);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(vmio_vq_progress(&f->vq), q);
}

static bool notified(struct fx *f)
{
	uint64_t v;

	return read(f->call_fd, &v, sizeof(v)) == sizeof(v);
}

/* One used chain, flushed: whether the driver hears of it. */
static bool use_one(struct fx *f, uint16_t id)
{
	post1(f, 16, id);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, id, 0);
	vmio_vq_flush_and_notify(&f->vq);
	return notified(f);
}

static void test_driver_event_suppression(void **state)
{
	struct fx *f = *state;

	start_at(f, 0);
	f->driver->flags = htole16(VIRTQ_EVENT_F_DISABLE);
	assert_false(use_one(f, 0));
	f->driver->flags = htole16(VIRTQ_EVENT_F_ENABLE);
	assert_true(use_one(f, 1));
	/* With EVENT_IDX: only once the used position passes off_wrap. */
	f->vq.event_idx = true;
	f->driver->off_wrap = htole16(5 | 1u << VIRTQ_EVENT_WRAP_SHIFT);
	f->driver->flags = htole16(VIRTQ_EVENT_F_DESC);
	assert_false(use_one(f, 2)); /* positions 2, 3, 4: before 5 */
	assert_false(use_one(f, 3));
	assert_false(use_one(f, 4));
	assert_true(use_one(f, 5));  /* the descriptor at 5 used */
	assert_false(use_one(f, 6));
}

/* More than a ring's worth used between two flushes (the driver reaping
 * and posting meanwhile, as it does while we run): the offsets alone
 * cannot say whether the driver's event was passed, so it is told. */
static void test_more_than_a_ring_between_flushes(void **state)
{
	struct fx *f = *state;

	start_at(f, 0);
	f->vq.event_idx = true;
	use_one(f, 0); /* the first decision, always told */
	/* The driver waits at position 5 of the next lap... */
	f->driver->off_wrap = htole16(5 | 0u << VIRTQ_EVENT_WRAP_SHIFT);
	f->driver->flags = htole16(VIRTQ_EVENT_F_DESC);
	/* ...and we use QSIZE + 2 more before flushing: past it, around. */
	for (unsigned k = 0; k < QSIZE + 2; k++) {
		uint16_t id = (uint16_t)(k % QSIZE);

		post1(f, 16, id);
		assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
		vmio_vq_push(&f->vq, id, 0);
	}
	vmio_vq_flush_and_notify(&f->vq);
	assert_true(notified(f));
}

/* Kicks off: DISABLE; on with EVENT_IDX: the next position to look at. */
static void test_device_event_suppression(void **state)
{
	struct fx *f = *state;

	start_at(f, 2);
	vmio_vq_enable_kicks(&f->vq, false);
	assert_int_equal(le16toh(f->device->flags), VIRTQ_EVENT_F_DISABLE);
	f->vq.event_idx = true;
	assert_false(vmio_vq_enable_kicks(&f->vq, true));
	assert_int_equal(le16toh(f->device->flags), VIRTQ_EVENT_F_DESC);
	assert_int_equal(le16toh(f->device->off_wrap),
			 2 | 1u << VIRTQ_EVENT_WRAP_SHIFT);
	post1(f, 16, 0);
	assert_true(vmio_vq_enable_kicks(&f->vq, true));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wrap_at_every_position, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chain_across_the_wrap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_not_negotiated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_indirect_in_a_chain, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_wrap_counter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chain_longer_than_the_ring, setup, teardown),
		cmocka_unit_test_setup_teardown(test_buffer_outside_memory, setup, teardown),
		cmocka_unit_test_setup_teardown(test_buffer_id_beyond_the_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_base_beyond_the_queue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unpop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_progress, setup, teardown),
		cmocka_unit_test_setup_teardown(test_driver_event_suppression, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_event_suppression, setup, teardown),
		cmocka_unit_test_setup_teardown(test_more_than_a_ring_between_flushes, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
