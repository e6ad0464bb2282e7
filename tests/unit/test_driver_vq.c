/* The driver side of the split ring, with no device: the test plays the
 * device by reading the avail ring and writing the used ring by hand. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "frontend/driver_vq.h"

#define QSIZE 8

struct fixture {
	struct vmio_dvq q;
	uint8_t *mem; /* desc at 0, avail at 4096, used at 8192 */
};

static int setup_common(void **state, bool event_idx)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->mem = aligned_alloc(4096, 3 * 4096);
	assert_non_null(f->mem);
	memset(f->mem, 0xa5, 3 * 4096); /* init must clear the rings */
	assert_int_equal(vmio_dvq_init(&f->q, 1, QSIZE, f->mem, 0x10000,
				       f->mem + 4096, 0x11000, f->mem + 8192,
				       0x12000),
			 0);
	f->q.event_idx = event_idx;
	f->q.kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	f->q.call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(f->q.kick_fd >= 0 && f->q.call_fd >= 0);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_common(state, false);
}

static int setup_event_idx(void **state)
{
	return setup_common(state, true);
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	close(f->q.kick_fd);
	close(f->q.call_fd);
	vmio_dvq_release(&f->q);
	free(f->mem);
	free(f);
	return 0;
}

/* How many kicks the device would have seen since the last call. */
static uint64_t kicks(struct fixture *f)
{
	uint64_t v = 0;

	if (read(f->q.kick_fd, &v, sizeof(v)) < 0)
		return 0;
	return v;
}

static uint16_t *avail_event(struct fixture *f)
{
	return (uint16_t *)&f->q.used->ring[QSIZE];
}

static uint16_t used_event(struct fixture *f)
{
	return le16toh(f->q.avail->ring[QSIZE]);
}

/* The device's part: mark chain `head` used with `len` bytes written. */
static void device_push(struct fixture *f, uint16_t head, uint32_t len)
{
	uint16_t idx = le16toh(f->q.used->idx);

	f->q.used->ring[idx % QSIZE].id = htole32(head);
	f->q.used->ring[idx % QSIZE].len = htole32(len);
	f->q.used->idx = htole16(idx + 1);
}

static int add_one(struct fixture *f, uint64_t gpa, void *token)
{
	struct vmio_dbuf b = { .gpa = gpa, .len = 100, .writable = true };

	return vmio_dvq_add(&f->q, &b, 1, token);
}

static void test_init_clears_rings(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(f->q.num_free, QSIZE);
	assert_int_equal(f->q.avail->idx, 0);
	assert_int_equal(f->q.avail->flags, 0);
	assert_int_equal(f->q.used->idx, 0);
	assert_int_equal(f->q.desc[QSIZE - 1].addr, 0);
	assert_int_equal(f->q.desc_gpa, 0x10000);
	assert_int_equal(f->q.used_gpa, 0x12000);
}

static void test_add_writes_chain(void **state)
{
	struct fixture *f = *state;
	struct vmio_dbuf bufs[3] = {
		{ .gpa = 0x1000, .len = 10 },
		{ .gpa = 0x2000, .len = 20 },
		{ .gpa = 0x3000, .len = 30, .writable = true },
	};
	int head = vmio_dvq_add(&f->q, bufs, 3, (void *)0x77);

	assert_true(head >= 0);
	assert_int_equal(f->q.num_free, QSIZE - 3);
	/* Not published before the kick. */
	assert_int_equal(f->q.avail->idx, 0);
	assert_int_equal(le16toh(f->q.avail->ring[0]), head);

	uint16_t i = (uint16_t)head;
	for (unsigned k = 0; k < 3; k++) {
		const struct virtq_desc *d = &f->q.desc[i];
		uint16_t flags = le16toh(d->flags);

		assert_int_equal(le64toh(d->addr), bufs[k].gpa);
		assert_int_equal(le32toh(d->len), bufs[k].len);
		assert_int_equal(!!(flags & VIRTQ_DESC_F_WRITE), bufs[k].writable);
		assert_int_equal(!!(flags & VIRTQ_DESC_F_NEXT), k < 2);
		i = le16toh(d->next);
	}

	assert_true(vmio_dvq_kick(&f->q));
	assert_int_equal(le16toh(f->q.avail->idx), 1);
	assert_int_equal(kicks(f), 1);
}

static void test_kick_nothing_new(void **state)
{
	struct fixture *f = *state;

	assert_false(vmio_dvq_kick(&f->q));
	assert_int_equal(kicks(f), 0);
}

static void test_no_notify_suppresses_kick(void **state)
{
	struct fixture *f = *state;

	f->q.used->flags = htole16(VIRTQ_USED_F_NO_NOTIFY);
	assert_true(add_one(f, 0x1000, (void *)1) >= 0);
	assert_false(vmio_dvq_kick(&f->q));
	/* Published all the same: the device polls. */
	assert_int_equal(le16toh(f->q.avail->idx), 1);
	assert_int_equal(kicks(f), 0);

	f->q.used->flags = 0;
	assert_true(add_one(f, 0x2000, (void *)2) >= 0);
	assert_true(vmio_dvq_kick(&f->q));
	assert_int_equal(kicks(f), 1);
}

static void test_reap(void **state)
{
	struct fixture *f = *state;
	uint32_t len = 0;
	int a = add_one(f, 0x1000, (void *)0xa);
	int b = add_one(f, 0x2000, (void *)0xb);

	vmio_dvq_kick(&f->q);
	assert_null(vmio_dvq_get_used(&f->q, &len));

	/* Out of order completion is the device's right. */
	device_push(f, (uint16_t)b, 42);
	device_push(f, (uint16_t)a, 7);
	assert_ptr_equal(vmio_dvq_get_used(&f->q, &len), (void *)0xb);
	assert_int_equal(len, 42);
	assert_ptr_equal(vmio_dvq_get_used(&f->q, &len), (void *)0xa);
	assert_int_equal(len, 7);
	assert_null(vmio_dvq_get_used(&f->q, &len));
	assert_int_equal(f->q.num_free, QSIZE);
	assert_int_equal(f->q.last_used_idx, 2);
}

static void test_enospc_and_recycling(void **state)
{
	struct fixture *f = *state;
	struct vmio_dbuf bufs[3] = {
		{ .gpa = 0x1000, .len = 1 },
		{ .gpa = 0x2000, .len = 1 },
		{ .gpa = 0x3000, .len = 1 },
	};
	int h1 = vmio_dvq_add(&f->q, bufs, 3, (void *)1);
	int h2 = vmio_dvq_add(&f->q, bufs, 3, (void *)2);
	uint32_t len;

	assert_true(h1 >= 0 && h2 >= 0);
	assert_int_equal(f->q.num_free, 2);
	assert_int_equal(vmio_dvq_add(&f->q, bufs, 3, (void *)3), -ENOSPC);
	assert_int_equal(f->q.num_free, 2);
	assert_int_equal(vmio_dvq_add(&f->q, bufs, 0, (void *)3), -EINVAL);

	vmio_dvq_kick(&f->q);
	device_push(f, (uint16_t)h1, 0);
	assert_ptr_equal(vmio_dvq_get_used(&f->q, &len), (void *)1);
	assert_int_equal(f->q.num_free, 5);

	/* The freed descriptors serve a longer chain; every descriptor of
	 * the ring is then in use exactly once. */
	struct vmio_dbuf five[5];
	for (unsigned k = 0; k < 5; k++)
		five[k] = (struct vmio_dbuf){ .gpa = 0x100 * k, .len = 1 };
	int h3 = vmio_dvq_add(&f->q, five, 5, (void *)3);
	assert_true(h3 >= 0);
	assert_int_equal(f->q.num_free, 0);

	bool seen[QSIZE] = { false };
	int heads[2] = { h2, h3 };
	unsigned lens[2] = { 3, 5 };
	for (unsigned c = 0; c < 2; c++) {
		uint16_t i = (uint16_t)heads[c];
		for (unsigned k = 0; k < lens[c]; k++) {
			assert_true(i < QSIZE);
			assert_false(seen[i]);
			seen[i] = true;
			i = le16toh(f->q.desc[i].next);
		}
	}
}

static void test_bad_used_id_skipped(void **state)
{
	struct fixture *f = *state;
	uint32_t len;
	int a = add_one(f, 0x1000, (void *)0xa);

	vmio_dvq_kick(&f->q);
	device_push(f, QSIZE + 3, 1);    /* not a descriptor */
	device_push(f, (uint16_t)a, 5);
	device_push(f, (uint16_t)a, 5);  /* twice */
	assert_ptr_equal(vmio_dvq_get_used(&f->q, &len), (void *)0xa);
	assert_null(vmio_dvq_get_used(&f->q, &len));
	assert_int_equal(f->q.num_free, QSIZE);
}

static void test_event_idx_kick_suppression(void **state)
{
	struct fixture *f = *state;

	/* The device wants a kick once avail idx passes 2. */
	*avail_event(f) = htole16(2);
	assert_true(add_one(f, 0x1000, (void *)1) >= 0);
	assert_false(vmio_dvq_kick(&f->q)); /* idx 0 -> 1 */
	assert_true(add_one(f, 0x2000, (void *)2) >= 0);
	assert_false(vmio_dvq_kick(&f->q)); /* 1 -> 2 */
	assert_int_equal(kicks(f), 0);
	assert_true(add_one(f, 0x3000, (void *)3) >= 0);
	assert_true(add_one(f, 0x4000, (void *)4) >= 0);
	assert_true(vmio_dvq_kick(&f->q)); /* 2 -> 4 crosses 2 */
	assert_int_equal(kicks(f), 1);
	assert_int_equal(le16toh(f->q.avail->idx), 4);

	/* used->flags means nothing under EVENT_IDX. */
	f->q.used->flags = htole16(VIRTQ_USED_F_NO_NOTIFY);
	*avail_event(f) = htole16(4);
	assert_true(add_one(f, 0x5000, (void *)5) >= 0);
	assert_true(vmio_dvq_kick(&f->q));
	assert_int_equal(kicks(f), 1);
}

static void test_event_idx_wraps(void **state)
{
	struct fixture *f = *state;
	uint32_t len;

	/* Run the 16-bit indices across the wrap. */
	for (unsigned n = 0; n < 65540; n++) {
		int h = add_one(f, 0x1000, (void *)1);

		assert_true(h >= 0);
		*avail_event(f) = htole16(f->q.avail_idx - 1);
		assert_true(vmio_dvq_kick(&f->q));
		device_push(f, (uint16_t)h, 1);
		assert_non_null(vmio_dvq_get_used(&f->q, &len));
	}
	assert_int_equal(kicks(f), 65540);
	assert_int_equal(f->q.num_free, QSIZE);
	assert_int_equal(f->q.last_used_idx, (uint16_t)65540);
}

static void test_want_interrupt_event_idx(void **state)
{
	struct fixture *f = *state;
	uint32_t len;
	int h = add_one(f, 0x1000, (void *)1);

	vmio_dvq_kick(&f->q);
	device_push(f, (uint16_t)h, 1);
	assert_non_null(vmio_dvq_get_used(&f->q, &len));
	vmio_dvq_want_interrupt(&f->q);
	assert_int_equal(used_event(f), 1);
}

static void test_want_interrupt_flags(void **state)
{
	struct fixture *f = *state;

	f->q.avail->flags = htole16(VIRTQ_AVAIL_F_NO_INTERRUPT);
	vmio_dvq_want_interrupt(&f->q);
	assert_int_equal(f->q.avail->flags, 0);
}

static void test_wait(void **state)
{
	struct fixture *f = *state;
	uint64_t one = 1;

	assert_int_equal(vmio_dvq_wait(&f->q, 0), 0);
	assert_int_equal(write(f->q.call_fd, &one, sizeof(one)), sizeof(one));
	assert_int_equal(vmio_dvq_wait(&f->q, 1000), 1);
	/* Drained: the next wait times out. */
	assert_int_equal(vmio_dvq_wait(&f->q, 0), 0);
}

static void test_init_rejects_size_zero(void **state)
{
	struct vmio_dvq q;
	uint8_t mem[64];

	(void)state;
	assert_int_equal(vmio_dvq_init(&q, 0, 0, mem, 0, mem, 0, mem, 0),
			 -EINVAL);
	vmio_dvq_release(&q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_init_clears_rings, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_add_writes_chain, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_kick_nothing_new, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_notify_suppresses_kick,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_reap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_enospc_and_recycling, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_used_id_skipped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_event_idx_kick_suppression,
						setup_event_idx, teardown),
		cmocka_unit_test_setup_teardown(test_event_idx_wraps,
						setup_event_idx, teardown),
		cmocka_unit_test_setup_teardown(test_want_interrupt_event_idx,
						setup_event_idx, teardown),
		cmocka_unit_test_setup_teardown(test_want_interrupt_flags, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wait, setup, teardown),
		cmocka_unit_test(test_init_rejects_size_zero),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
