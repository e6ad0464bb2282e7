/* VIRTIO_F_IN_ORDER end to end in one process: the device's side
 * (virtqueue.h) and the in-tree driver's (driver_vq.h) on the same guest
 * memory, split and packed. The device folds the used entries of chains
 * it only read into one per batch, written where the batch begins; the
 * driver gives every token back in order, with the length the device
 * wrote for chains it wrote into. */
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cmocka.h>

#include "guest_regions.h"

#include "frontend/driver_vq.h"
#include "virtio/virtqueue.h"

#define REGION_SIZE 0x10000u
#define UVA 0x7f0000000000ull
#define QSIZE 8u
#define DESC_GPA 0x0000u
#define AVAIL_GPA 0x1000u
#define USED_GPA 0x2000u
#define DATA_GPA 0x4000u

struct fx {
	struct vmio_mem mem;
	struct vmio_vq vq;
	struct vmio_dvq q;
	struct vmio_chain chain;
	bool packed;
	int call_fd;
};

static int setup_layout(void **state, bool packed, bool in_order)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->packed = packed;
	vmio_mem_init(&f->mem);
	guest_region_add(&f->mem, 0, REGION_SIZE, UVA);
	f->call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(f->call_fd >= 0);
	if (packed)
		assert_int_equal(vmio_dvq_init_packed(&f->q, 0, QSIZE,
						      guest_ptr(&f->mem, DESC_GPA), DESC_GPA,
						      guest_ptr(&f->mem, AVAIL_GPA), AVAIL_GPA,
						      guest_ptr(&f->mem, USED_GPA), USED_GPA),
				 0);
	else
		assert_int_equal(vmio_dvq_init(&f->q, 0, QSIZE,
					       guest_ptr(&f->mem, DESC_GPA), DESC_GPA,
					       guest_ptr(&f->mem, AVAIL_GPA), AVAIL_GPA,
					       guest_ptr(&f->mem, USED_GPA), USED_GPA),
				 0);
	f->q.in_order = in_order;

	vmio_vq_init(&f->vq, 0);
	f->vq.packed = packed;
	f->vq.in_order = in_order;
	f->vq.size = QSIZE;
	f->vq.desc_uva = UVA + DESC_GPA;
	f->vq.avail_uva = UVA + AVAIL_GPA;
	f->vq.used_uva = UVA + USED_GPA;
	f->vq.addr_set = true;
	vmio_vq_set_transport(&f->vq, &vmio_vq_eventfd_transport, &f->call_fd);
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), 0);
	*state = f;
	return 0;
}

static int setup_split(void **state)
{
	return setup_layout(state, false, true);
}

static int setup_packed(void **state)
{
	return setup_layout(state, true, true);
}

static int setup_split_unordered(void **state)
{
	return setup_layout(state, false, false);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	vmio_dvq_release(&f->q);
	vmio_vq_release(&f->vq);
	vmio_mem_clear(&f->mem);
	close(f->call_fd);
	free(f);
	return 0;
}

/* Adds a chain of n descriptors, all readable or all writable, with
 * token; returns its id. */
static int add(struct fx *f, unsigned n, bool writable, uintptr_t token)
{
	struct vmio_dbuf b[3];

	assert_true(n >= 1 && n <= 3);
	for (unsigned k = 0; k < n; k++)
		b[k] = (struct vmio_dbuf){ DATA_GPA + 0x100 * k, 64, writable };
	return vmio_dvq_add(&f->q, b, n, (void *)token);
}

/* The device pops one chain; returns its id. */
static uint16_t pop(struct fx *f)
{
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	return f->chain.head;
}

/* The driver reaps one token and its length. */
static void expect_used(struct fx *f, uintptr_t token, uint32_t len)
{
	uint32_t got_len = 0xffffffff;

	assert_int_equal((uintptr_t)vmio_dvq_get_used(&f->q, &got_len), token);
	assert_int_equal(got_len, len);
}

static void expect_none_used(struct fx *f)
{
	assert_false(vmio_dvq_used_pending(&f->q));
	assert_null(vmio_dvq_get_used(&f->q, NULL));
}

/* Three read-only chains used in one flush: one used entry, the third's
 * id, where the first's was due; the other slots untouched. */
static void test_one_entry_per_batch(void **state)
{
	struct fx *f = *state;
	int id[3];

	for (unsigned i = 0; i < 3; i++)
		id[i] = add(f, 1, false, 1 + i);
	vmio_dvq_kick(&f->q);
	if (!f->packed)
		f->q.used->ring[1].id = htole32(0xdead);
	for (unsigned i = 0; i < 3; i++)
		vmio_vq_push(&f->vq, pop(f), 0);
	/* Nothing is visible before the flush. */
	if (f->packed)
		assert_false(vmio_dvq_used_pending(&f->q));
	vmio_vq_flush_and_notify(&f->vq);
	if (f->packed) {
		assert_int_equal(le16toh(f->q.pdesc[0].id), id[2]);
		/* Slots 1 and 2 still hold what the driver made available. */
		assert_true(le16toh(f->q.pdesc[1].flags) & VIRTQ_DESC_F_AVAIL);
		assert_false(le16toh(f->q.pdesc[1].flags) & VIRTQ_DESC_F_USED);
	} else {
		assert_int_equal(le16toh(f->q.used->idx), 3);
		assert_int_equal(le32toh(f->q.used->ring[0].id), id[2]);
		assert_int_equal(le32toh(f->q.used->ring[1].id), 0xdead);
	}
	for (unsigned i = 0; i < 3; i++)
		expect_used(f, 1 + i, 0);
	expect_none_used(f);
	assert_int_equal(f->q.num_free, QSIZE);
}

/* A batch as long as the ring ends at once, in one entry at its first
 * slot; both layouts publish it at the flush (a packed ring's used
 * descriptors wait for the flush too). */
static void test_batch_ends_at_the_ring(void **state)
{
	struct fx *f = *state;
	uint16_t h[QSIZE];

	for (unsigned i = 0; i < QSIZE; i++)
		add(f, 1, false, 1 + i);
	vmio_dvq_kick(&f->q);
	for (unsigned i = 0; i < QSIZE; i++)
		h[i] = pop(f);
	for (unsigned i = 0; i < QSIZE; i++)
		vmio_vq_push(&f->vq, h[i], 0);
	expect_none_used(f);
	vmio_vq_flush_and_notify(&f->vq);
	if (f->packed) {
		assert_int_equal(le16toh(f->q.pdesc[0].id), h[QSIZE - 1]);
		for (unsigned i = 0; i < QSIZE; i++)
			expect_used(f, 1 + i, 0);
	} else {
		assert_int_equal(le32toh(f->q.used->ring[0].id), h[QSIZE - 1]);
		for (unsigned i = 0; i < QSIZE; i++)
			expect_used(f, 1 + i, 0);
	}
	expect_none_used(f);
	assert_int_equal(f->q.num_free, QSIZE);
}

/* A chain the device wrote into gets its own entry with its length; the
 * read-only ones around it are batched before and after it. */
static void test_written_chain_ends_the_batch(void **state)
{
	struct fx *f = *state;
	uint16_t h[4];

	add(f, 1, false, 1);
	add(f, 2, false, 2);
	add(f, 1, true, 3);
	add(f, 1, false, 4);
	vmio_dvq_kick(&f->q);
	for (unsigned i = 0; i < 4; i++)
		h[i] = pop(f);
	vmio_vq_push(&f->vq, h[0], 0);
	vmio_vq_push(&f->vq, h[1], 0);
	vmio_vq_push(&f->vq, h[2], 40);
	vmio_vq_push(&f->vq, h[3], 0);
	vmio_vq_flush_and_notify(&f->vq);
	if (f->packed) {
		/* Positions: chain 1 at 0, chain 2 at 1-2, 3 at 3, 4 at 4. */
		assert_int_equal(le16toh(f->q.pdesc[0].id), h[1]);
		assert_int_equal(le16toh(f->q.pdesc[3].id), h[2]);
		assert_int_equal(le32toh(f->q.pdesc[3].len), 40);
		assert_int_equal(le16toh(f->q.pdesc[4].id), h[3]);
	} else {
		assert_int_equal(le16toh(f->q.used->idx), 4);
		assert_int_equal(le32toh(f->q.used->ring[0].id), h[1]);
		assert_int_equal(le32toh(f->q.used->ring[2].id), h[2]);
		assert_int_equal(le32toh(f->q.used->ring[2].len), 40);
		assert_int_equal(le32toh(f->q.used->ring[3].id), h[3]);
	}
	expect_used(f, 1, 0);
	expect_used(f, 2, 0);
	expect_used(f, 3, 40);
	expect_used(f, 4, 0);
	expect_none_used(f);
}

/* Two chains of one descriptor, tokens 1 and 2, made available, used
 * with no length and flushed; their ids in *a and *b. */
static void use_two(struct fx *f, bool writable, uint16_t *a, uint16_t *b)
{
	add(f, 1, writable, 1);
	add(f, 1, writable, 2);
	vmio_dvq_kick(&f->q);
	*a = pop(f);
	*b = pop(f);
	vmio_vq_push(&f->vq, *a, 0);
	vmio_vq_push(&f->vq, *b, 0);
	vmio_vq_flush_and_notify(&f->vq);
}

/* A chain the device wrote nothing into still has its own entry: the
 * driver of a receive queue reads every length. */
static void test_empty_receive_not_batched(void **state)
{
	struct fx *f = *state;
	uint16_t a, b;

	use_two(f, true, &a, &b);
	if (f->packed) {
		assert_int_equal(le16toh(f->q.pdesc[0].id), a);
		assert_int_equal(le16toh(f->q.pdesc[1].id), b);
	} else {
		assert_int_equal(le32toh(f->q.used->ring[0].id), a);
		assert_int_equal(le32toh(f->q.used->ring[1].id), b);
	}
	expect_used(f, 1, 0);
	expect_used(f, 2, 0);
}

/* Many rounds of chains of one to three descriptors, read-only or
 * written, in batches of every size, flushed at random: the ring wraps
 * many times; every token comes back once, in order, with its length. */
static void test_rounds_across_wraps(void **state)
{
	struct fx *f = *state;
	uint32_t seed = 12345;
	uintptr_t next_token = 1, expect_token = 1;
	uint32_t lens[4096];
	uint16_t heads[QSIZE];

	for (unsigned round = 0; round < 400; round++) {
		unsigned n = 0, reaped = 0;

		/* The driver fills what it can. */
		for (;;) {
			seed = seed * 1103515245u + 12345u;
			unsigned ndesc = 1 + (seed >> 16) % 3;
			bool writable = (seed >> 20) & 1;

			if (ndesc > f->q.num_free)
				break;
			lens[next_token % 4096] = writable ? 1 + (seed >> 8) % 64 : 0;
			assert_true(add(f, ndesc, writable, next_token) >= 0);
			next_token++;
		}
		vmio_dvq_kick(&f->q);
		while (vmio_vq_pop(&f->vq, &f->mem, &f->chain) == 1)
			heads[n++] = f->chain.head;
		for (unsigned i = 0; i < n; i++) {
			uintptr_t t = expect_token + i;

			vmio_vq_push(&f->vq, heads[i], lens[t % 4096]);
			seed = seed * 1103515245u + 12345u;
			if ((seed >> 16) % 3 == 0)
				vmio_vq_flush_and_notify(&f->vq);
		}
		vmio_vq_flush_and_notify(&f->vq);
		while (vmio_dvq_used_pending(&f->q)) {
			expect_used(f, expect_token, lens[expect_token % 4096]);
			expect_token++;
			reaped++;
		}
		assert_int_equal(reaped, n);
		assert_int_equal(f->q.num_free, QSIZE);
	}
	assert_int_equal(expect_token, next_token);
}

/* Without IN_ORDER every chain gets its own entry, as before. */
static void test_not_negotiated(void **state)
{
	struct fx *f = *state;
	uint16_t a, b;

	use_two(f, false, &a, &b);
	assert_int_equal(le32toh(f->q.used->ring[0].id), a);
	assert_int_equal(le32toh(f->q.used->ring[1].id), b);
	expect_used(f, 1, 0);
	expect_used(f, 2, 0);
	expect_none_used(f);
}

#define BOTH(t)                                                              \
	cmocka_unit_test_setup_teardown(t, setup_split, teardown),           \
		cmocka_unit_test_setup_teardown(t, setup_packed, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		BOTH(test_one_entry_per_batch),
		BOTH(test_batch_ends_at_the_ring),
		BOTH(test_written_chain_ends_the_batch),
		BOTH(test_empty_receive_not_batched),
		BOTH(test_rounds_across_wraps),
		cmocka_unit_test_setup_teardown(test_not_negotiated,
						setup_split_unordered, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
