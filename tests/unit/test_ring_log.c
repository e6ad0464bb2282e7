/* The rings' own marks while logging (dirty_log.h): the used entries a
 * flush publishes, each layout's, marked at the flush and not before,
 * across the ring's wrap, and nothing while the queue does not log.
 * Rings of 4096 entries, so that their entries span pages apart from
 * the split ring's used->idx: a missed run shows as a page unmarked. */
#include <endian.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "guest_regions.h"

#include "virtio/dirty_log.h"
#include "virtio/virtqueue.h"

#define PAGE 4096u
#define MEM_SIZE 0x40000u /* 64 pages: the log's 8 bytes */
#define UVA 0x7f0000000000ull
#define QSIZE 4096u

/* Split: the descriptor table on pages 0-15, the avail ring at page 16,
 * the used ring at page 20 (its idx there, its 4096 elements up to page
 * 28). Packed: the descriptor ring on pages 0-15, 256 a page; the event
 * areas on pages 16 and 17. */
#define DESC_GPA 0x0u
#define AVAIL_GPA 0x10000u
#define USED_GPA 0x14000u
#define DRIVER_GPA 0x10000u
#define DEVICE_GPA 0x11000u

struct fx {
	struct vmio_mem mem;
	struct vmio_vq vq;
	struct vmio_dirty_log log;
	int log_fd; /* the VMM's */
};

static int setup(struct fx **out, bool packed)
{
	struct fx *f = calloc(1, sizeof(*f));
	const char *why = NULL;

	assert_non_null(f);
	vmio_mem_init(&f->mem);
	guest_region_add(&f->mem, 0, MEM_SIZE, UVA);
	f->log_fd = test_memfd(8);
	assert_int_equal(vmio_dirty_log_map(&f->log, dup(f->log_fd), 8, 0, &why),
			 0);
	vmio_vq_init(&f->vq, 0);
	f->vq.packed = packed;
	f->vq.size = QSIZE;
	f->vq.desc_uva = UVA + DESC_GPA;
	f->vq.avail_uva = UVA + (packed ? DRIVER_GPA : AVAIL_GPA);
	f->vq.used_uva = UVA + (packed ? DEVICE_GPA : USED_GPA);
	f->vq.addr_set = true;
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), 0);
	/* Packed: no pop gave the ids pushed here, so each takes a slot. */
	if (packed)
		memset(f->vq.buf_ndesc, 0, QSIZE * sizeof(*f->vq.buf_ndesc));
	*out = f;
	return 0;
}

static int setup_split(void **state)
{
	return setup((struct fx **)state, false);
}

static int setup_packed(void **state)
{
	return setup((struct fx **)state, true);
}

static int teardown(void **state)
{
	struct fx *f = *state;

	vmio_vq_release(&f->vq);
	vmio_dirty_log_unmap(&f->log);
	vmio_mem_clear(&f->mem);
	close(f->log_fd);
	free(f);
	return 0;
}

/* The pages marked, bit p for page p, as the VMM reads them; cleared. */
static uint64_t marked(struct fx *f)
{
	uint8_t b[8];
	uint64_t m = 0;

	assert_int_equal(pread(f->log_fd, b, 8, 0), 8);
	for (unsigned i = 0; i < 8; i++)
		m |= (uint64_t)b[i] << (8 * i);
	memset(b, 0, sizeof(b));
	assert_int_equal(pwrite(f->log_fd, b, 8, 0), 8);
	return m;
}

#define BIT(p) (1ull << (p))

static void logging(struct fx *f, bool on)
{
	f->vq.log = on ? &f->log : NULL;
	f->vq.log_mem = on ? &f->mem : NULL;
}

static void push_n(struct fx *f, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		vmio_vq_push(&f->vq, (uint16_t)(i % QSIZE), 1);
}

/* One push not logging marks nothing, even at its flush; one logging
 * marks nothing until its flush, which marks `pages`; a flush with
 * nothing pushed marks nothing. */
static void check_one_push(struct fx *f, uint64_t pages)
{
	push_n(f, 1);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(marked(f), 0);

	logging(f, true);
	push_n(f, 1);
	assert_int_equal(marked(f), 0);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(marked(f), pages);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(marked(f), 0);
}

/* Split, from used index `from`. */
static void split_at(struct fx *f, uint16_t from)
{
	f->vq.used_idx = f->vq.published_used = from;
}

/* A push marks nothing; its flush marks its element's page (element 2000
 * at 0x14000 + 4 + 16000: page 23) and used->idx's (page 20), not
 * avail_event's (page 28), which no pop moved. Not logging: nothing. */
static void test_split_flush_marks(void **state)
{
	struct fx *f = *state;

	split_at(f, 2000);
	check_one_push(f, BIT(20) | BIT(23));
	assert_int_equal(le16toh(f->vq.used->idx), 2002);
}

/* 700 elements from 4000: 4000-4095 on pages 27 and 28, then 0-603 on
 * pages 20 and 21 (and used->idx on 20); none of 22-26. */
static void test_split_flush_marks_across_the_wrap(void **state)
{
	struct fx *f = *state;

	logging(f, true);
	split_at(f, 4000);
	push_n(f, 700);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(marked(f), BIT(20) | BIT(21) | BIT(27) | BIT(28));
}

/* In order, chains with no writable part: one element for the batch,
 * written when the flush ends it, at the batch's first slot (element
 * 2100: page 24). */
static void test_split_flush_marks_a_batch(void **state)
{
	struct fx *f = *state;

	f->vq.in_order = true;
	logging(f, true);
	split_at(f, 2100);
	for (uint16_t h = 0; h < 3; h++) {
		f->vq.out_only[h] = true;
		vmio_vq_push(&f->vq, h, 0);
	}
	assert_int_equal(marked(f), 0);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(le32toh(f->vq.used->ring[2100].id), 2);
	assert_int_equal(marked(f), BIT(20) | BIT(24));
}

/* Packed, from position `from` (wrap counters 1). */
static void packed_at(struct fx *f, uint16_t from)
{
	f->vq.used_idx = f->vq.last_avail_idx = from;
	f->vq.used_wrap = f->vq.avail_wrap = true;
}

/* Descriptor 1000 (at 16000: page 3), at the flush. Not logging:
 * nothing. */
static void test_packed_flush_marks(void **state)
{
	struct fx *f = *state;

	packed_at(f, 1000);
	check_one_push(f, BIT(3));
}

/* 700 descriptors from 4000: 4000-4095 on page 15, then 0-603 on pages
 * 0 to 2; nothing past the ring (the event areas, page 16 on). */
static void test_packed_flush_marks_across_the_wrap(void **state)
{
	struct fx *f = *state;

	logging(f, true);
	packed_at(f, 4000);
	push_n(f, 700);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(f->vq.used_idx, 604);
	assert_int_equal(marked(f), BIT(0) | BIT(1) | BIT(2) | BIT(15));
}

/* A chain of several descriptors skips them all: the run marked is the
 * slots pushed, its used descriptor in the first (chains of 300 from
 * 3800: used descriptors at 3800 and 4 after the wrap; slots to 303,
 * pages 14, 15, 0 and 1). */
static void test_packed_flush_marks_long_chains(void **state)
{
	struct fx *f = *state;

	logging(f, true);
	packed_at(f, 3800);
	f->vq.buf_ndesc[7] = 300;
	f->vq.buf_ndesc[8] = 300;
	vmio_vq_push(&f->vq, 7, 1);
	vmio_vq_push(&f->vq, 8, 1);
	assert_int_equal(f->vq.used_idx, 304);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(marked(f), BIT(0) | BIT(1) | BIT(14) | BIT(15));
}

int main(void)
{
#define T(fn, s) cmocka_unit_test_setup_teardown(fn, s, teardown)
	const struct CMUnitTest tests[] = {
		T(test_split_flush_marks, setup_split),
		T(test_split_flush_marks_across_the_wrap, setup_split),
		T(test_split_flush_marks_a_batch, setup_split),
		T(test_packed_flush_marks, setup_packed),
		T(test_packed_flush_marks_across_the_wrap, setup_packed),
		T(test_packed_flush_marks_long_chains, setup_packed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
