/* The device side of a split virtqueue against rings laid out by hand in
 * guest memory made of two adjacent memfd regions. */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "guest_regions.h"

#include "virtio/virtqueue.h"

/* Guest memory: region A [0, 0x8000) and region B [0x8000, 0x10000), at
 * unrelated VMM addresses so a gpa/uva mix-up shows. */
#define REGION_SIZE 0x8000u
#define UVA_A 0x7f0000000000ull
#define UVA_B 0x7e0000000000ull

#define QSIZE 8u
#define DESC_GPA 0x0000u
#define AVAIL_GPA 0x1000u
#define USED_GPA 0x2000u
#define TABLE_GPA 0x3000u /* indirect tables */
#define DATA_GPA 0x4000u

struct fx {
	struct vmio_mem mem;
	struct vmio_vq vq;
	struct vmio_chain chain;
	struct virtq_desc *desc;
	struct virtq_avail *avail;
	struct virtq_used *used;
	uint16_t avail_idx; /* driver's shadow */
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
	f->avail = gp(f, AVAIL_GPA);
	f->used = gp(f, USED_GPA);
	f->call_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(f->call_fd >= 0);

	vmio_vq_init(&f->vq, 3);
	f->vq.size = QSIZE;
	f->vq.desc_uva = UVA_A + DESC_GPA;
	f->vq.avail_uva = UVA_A + AVAIL_GPA;
	f->vq.used_uva = UVA_A + USED_GPA;
	f->vq.addr_set = true;
	vmio_vq_set_transport(&f->vq, &vmio_vq_eventfd_transport, &f->call_fd);
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), 0);
	assert_ptr_equal(f->vq.desc, f->desc);
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

static void write_desc(struct virtq_desc *d, uint64_t addr, uint32_t len,
		       uint16_t flags, uint16_t next)
{
	d->addr = htole64(addr);
	d->len = htole32(len);
	d->flags = htole16(flags);
	d->next = htole16(next);
}

static void set_desc(struct fx *f, unsigned i, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	write_desc(&f->desc[i], addr, len, flags, next);
}

/* Makes head available and publishes it. */
static void make_avail(struct fx *f, uint16_t head)
{
	f->avail->ring[f->avail_idx % QSIZE] = htole16(head);
	f->avail_idx++;
	f->avail->idx = htole16(f->avail_idx);
}

static uint16_t *used_event_of(struct fx *f)
{
	return &f->avail->ring[QSIZE];
}

static uint16_t *avail_event_of(struct fx *f)
{
	return (uint16_t *)&f->used->ring[QSIZE];
}

/* Notifications since the last call (the eventfd counter). */
static uint64_t calls(struct fx *f)
{
	uint64_t n = 0;

	if (read(f->call_fd, &n, sizeof(n)) != sizeof(n))
		return 0;
	return n;
}

/* Pops one simple chain (one readable descriptor) per head given. */
static void post_simple(struct fx *f, uint16_t head)
{
	set_desc(f, head, DATA_GPA + head * 0x100u, 0x10, 0, 0);
	make_avail(f, head);
}

static void expect_broken(struct fx *f)
{
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), -1);
	assert_true(f->vq.broken);
	assert_false(vmio_vq_ready(&f->vq));
	/* Stays broken, and the index did not move. */
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), -1);
	assert_int_equal(f->vq.last_avail_idx, 0);
}

static void test_init(void **state)
{
	struct vmio_vq vq;

	(void)state;
	memset(&vq, 0x5a, sizeof(vq));
	vmio_vq_init(&vq, 7);
	assert_int_equal(vq.index, 7);
	assert_null(vq.transport);
	assert_int_equal(vq.size, 0);
	assert_null(vq.desc);
	assert_null(vq.name);
	assert_false(vq.broken);
	assert_false(vmio_vq_ready(&vq));
	vmio_vq_release(&vq);
}

static void test_map_rejects(void **state)
{
	struct fx *f = *state;

	f->vq.desc_uva = UVA_A + DESC_GPA + 8; /* misaligned */
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), -EFAULT);
	assert_null(f->vq.desc);
	assert_null(f->vq.avail);
	assert_null(f->vq.used);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);

	f->vq.desc_uva = UVA_A + DESC_GPA;
	f->vq.used_uva = UVA_A + REGION_SIZE - 8; /* runs off region A */
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), -EFAULT);
	assert_null(f->vq.desc);
	f->vq.used_uva = UVA_A + USED_GPA + 2; /* misaligned */
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), -EFAULT);
	f->vq.used_uva = UVA_A + USED_GPA;
	f->vq.avail_uva = 0x1000; /* a gpa, not a uva */
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), -EFAULT);
	f->vq.avail_uva = UVA_A + AVAIL_GPA;
	f->vq.size = 6; /* not a power of two */
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), -EFAULT);
	f->vq.size = QSIZE;
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), 0);
	assert_ptr_equal(f->vq.used, f->used);
	assert_ptr_equal(f->vq.avail, f->avail);
}

static void test_simple_chain(void **state)
{
	struct fx *f = *state;
	struct vmio_chain *c = &f->chain;

	set_desc(f, 2, DATA_GPA, 100, VIRTQ_DESC_F_NEXT, 5);
	set_desc(f, 5, DATA_GPA + 0x1000, 200, VIRTQ_DESC_F_WRITE, 0);
	make_avail(f, 2);

	assert_int_equal(vmio_vq_avail_pending(&f->vq), 1);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, c), 1);
	assert_int_equal(c->head, 2);
	assert_int_equal(c->nout, 1);
	assert_int_equal(c->nin, 1);
	assert_int_equal(c->out_len, 100);
	assert_int_equal(c->in_len, 200);
	assert_ptr_equal(vmio_chain_out(c)[0].iov_base, gp(f, DATA_GPA));
	assert_int_equal(vmio_chain_out(c)[0].iov_len, 100);
	assert_ptr_equal(vmio_chain_in(c)[0].iov_base, gp(f, DATA_GPA + 0x1000));
	assert_int_equal(vmio_chain_in(c)[0].iov_len, 200);
	assert_int_equal(f->vq.last_avail_idx, 1);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, c), 0);
	assert_false(f->vq.broken);
}

static void test_empty_and_not_ready(void **state)
{
	struct fx *f = *state;

	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);
	post_simple(f, 0);
	vmio_vq_unmap(&f->vq);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 0);
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);
}

static void test_buffer_across_regions(void **state)
{
	struct fx *f = *state;
	struct vmio_chain *c = &f->chain;

	/* 0x100 bytes at the end of A, 0x100 at the start of B, then 0
	 * bytes (allowed, contributes nothing). */
	set_desc(f, 0, REGION_SIZE - 0x100, 0x200, VIRTQ_DESC_F_NEXT, 1);
	set_desc(f, 1, 0, 0, VIRTQ_DESC_F_WRITE, 0);
	make_avail(f, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, c), 1);
	assert_int_equal(c->nout, 2);
	assert_int_equal(c->nin, 0);
	assert_int_equal(c->out_len, 0x200);
	assert_int_equal(c->in_len, 0);
	assert_ptr_equal(c->iov[0].iov_base, gp(f, REGION_SIZE - 0x100));
	assert_int_equal(c->iov[0].iov_len, 0x100);
	assert_ptr_equal(c->iov[1].iov_base, gp(f, REGION_SIZE));
	assert_int_equal(c->iov[1].iov_len, 0x100);
}

static void test_full_length_chain(void **state)
{
	struct fx *f = *state;

	/* Exactly QSIZE descriptors is legal. */
	for (unsigned i = 0; i < QSIZE; i++)
		set_desc(f, i, DATA_GPA + i * 0x10, 0x10,
			 i + 1 < QSIZE ? VIRTQ_DESC_F_NEXT : 0, i + 1);
	make_avail(f, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.nout, QSIZE);
	assert_int_equal(f->chain.out_len, QSIZE * 0x10);
}

static void test_loop_is_broken(void **state)
{
	struct fx *f = *state;

	set_desc(f, 0, DATA_GPA, 0x10, VIRTQ_DESC_F_NEXT, 1);
	set_desc(f, 1, DATA_GPA, 0x10, VIRTQ_DESC_F_NEXT, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_chain_longer_than_queue(void **state)
{
	struct fx *f = *state;

	/* Every descriptor once, then back to the middle. */
	for (unsigned i = 0; i < QSIZE; i++)
		set_desc(f, i, DATA_GPA, 0x10, VIRTQ_DESC_F_NEXT,
			 i + 1 < QSIZE ? i + 1 : 4);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_next_out_of_range(void **state)
{
	struct fx *f = *state;

	set_desc(f, 0, DATA_GPA, 0x10, VIRTQ_DESC_F_NEXT, QSIZE);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_head_out_of_range(void **state)
{
	struct fx *f = *state;

	make_avail(f, QSIZE);
	expect_broken(f);
}

static void test_desc_outside_memory(void **state)
{
	struct fx *f = *state;

	set_desc(f, 0, 2 * REGION_SIZE - 0x10, 0x20, 0, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_desc_addr_wraps(void **state)
{
	struct fx *f = *state;

	set_desc(f, 0, UINT64_MAX - 0x10, 0x100, 0, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_readable_after_writable(void **state)
{
	struct fx *f = *state;

	set_desc(f, 0, DATA_GPA, 0x10, VIRTQ_DESC_F_NEXT, 1);
	set_desc(f, 1, DATA_GPA + 0x100, 0x10,
		 VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 2);
	set_desc(f, 2, DATA_GPA + 0x200, 0x10, 0, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_avail_idx_jump(void **state)
{
	struct fx *f = *state;

	post_simple(f, 0);
	f->avail->idx = htole16(QSIZE + 1);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), QSIZE);
	expect_broken(f);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 0);
}

static struct virtq_desc *table_at(struct fx *f, uint64_t gpa)
{
	return vmio_mem_gpa_ptr(&f->mem, gpa, sizeof(struct virtq_desc));
}

static void test_indirect(void **state)
{
	struct fx *f = *state;
	struct vmio_chain *c = &f->chain;
	struct virtq_desc *t = table_at(f, TABLE_GPA);

	f->vq.indirect = true;
	write_desc(&t[0], DATA_GPA + 0x100, 20, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 2);
	write_desc(&t[1], 0xdead0000, 1, 0, 0); /* not in the chain */
	write_desc(&t[2], DATA_GPA + 0x200, 30, VIRTQ_DESC_F_WRITE, 0);
	/* A direct readable descriptor, then the indirect table. */
	set_desc(f, 4, DATA_GPA, 10, VIRTQ_DESC_F_NEXT, 6);
	set_desc(f, 6, TABLE_GPA, 3 * sizeof(*t), VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 4);

	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, c), 1);
	assert_int_equal(c->head, 4);
	assert_int_equal(c->nout, 1);
	assert_int_equal(c->nin, 2);
	assert_int_equal(c->out_len, 10);
	assert_int_equal(c->in_len, 50);
	assert_ptr_equal(c->iov[0].iov_base, gp(f, DATA_GPA));
	assert_ptr_equal(c->iov[1].iov_base, gp(f, DATA_GPA + 0x100));
	assert_int_equal(c->iov[1].iov_len, 20);
	assert_ptr_equal(c->iov[2].iov_base, gp(f, DATA_GPA + 0x200));
	assert_int_equal(c->iov[2].iov_len, 30);
	/* Found in one region: no gathering needed. */
	assert_null(f->vq.indirect_scratch);
}

static void test_indirect_across_regions(void **state)
{
	struct fx *f = *state;
	struct vmio_chain *c = &f->chain;
	uint64_t tgpa = REGION_SIZE - 2 * sizeof(struct virtq_desc);
	struct virtq_desc entries[3];

	f->vq.indirect = true;
	write_desc(&entries[0], DATA_GPA, 11, VIRTQ_DESC_F_NEXT, 1);
	write_desc(&entries[1], DATA_GPA + 0x100, 22, VIRTQ_DESC_F_NEXT, 2);
	write_desc(&entries[2], DATA_GPA + 0x200, 33, VIRTQ_DESC_F_WRITE, 0);
	memcpy(gp(f, tgpa), entries, 2 * sizeof(entries[0]));
	memcpy(gp(f, REGION_SIZE), &entries[2], sizeof(entries[0]));
	set_desc(f, 0, tgpa, sizeof(entries), VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 0);

	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, c), 1);
	assert_int_equal(c->nout, 2);
	assert_int_equal(c->nin, 1);
	assert_int_equal(c->out_len, 33);
	assert_int_equal(c->in_len, 33);
	assert_ptr_equal(c->iov[1].iov_base, gp(f, DATA_GPA + 0x100));
	assert_ptr_equal(c->iov[2].iov_base, gp(f, DATA_GPA + 0x200));
	assert_non_null(f->vq.indirect_scratch);
	assert_true(f->vq.indirect_scratch_len >= 3);

	/* The scratch is reused for the next one. */
	void *scratch = f->vq.indirect_scratch;

	make_avail(f, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, c), 1);
	assert_ptr_equal(f->vq.indirect_scratch, scratch);
	assert_int_equal(c->in_len, 33);
}

static void test_indirect_unaligned_table(void **state)
{
	struct fx *f = *state;
	struct virtq_desc e;

	/* The spec does not require a table to be aligned. */
	f->vq.indirect = true;
	write_desc(&e, DATA_GPA, 7, VIRTQ_DESC_F_WRITE, 0);
	memcpy(gp(f, TABLE_GPA + 3), &e, sizeof(e));
	set_desc(f, 0, TABLE_GPA + 3, sizeof(e), VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.nin, 1);
	assert_int_equal(f->chain.in_len, 7);
}

static void test_indirect_nested(void **state)
{
	struct fx *f = *state;
	struct virtq_desc *t = table_at(f, TABLE_GPA);

	f->vq.indirect = true;
	write_desc(&t[0], TABLE_GPA + 0x100, 16, VIRTQ_DESC_F_INDIRECT, 0);
	write_desc(table_at(f, TABLE_GPA + 0x100), DATA_GPA, 4, 0, 0);
	set_desc(f, 0, TABLE_GPA, 16, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_indirect_with_next(void **state)
{
	struct fx *f = *state;
	struct virtq_desc *t = table_at(f, TABLE_GPA);

	f->vq.indirect = true;
	write_desc(&t[0], DATA_GPA, 4, 0, 0);
	set_desc(f, 0, TABLE_GPA, 16, VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_NEXT, 1);
	set_desc(f, 1, DATA_GPA, 4, 0, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_indirect_not_negotiated(void **state)
{
	struct fx *f = *state;
	struct virtq_desc *t = table_at(f, TABLE_GPA);

	write_desc(&t[0], DATA_GPA, 4, 0, 0);
	set_desc(f, 0, TABLE_GPA, 16, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_indirect_bad_length(void **state)
{
	struct fx *f = *state;
	struct virtq_desc *t = table_at(f, TABLE_GPA);

	f->vq.indirect = true;
	write_desc(&t[0], DATA_GPA, 4, 0, 0);
	set_desc(f, 0, TABLE_GPA, 20, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_indirect_loop(void **state)
{
	struct fx *f = *state;
	struct virtq_desc *t = table_at(f, TABLE_GPA);

	f->vq.indirect = true;
	write_desc(&t[0], DATA_GPA, 4, VIRTQ_DESC_F_NEXT, 1);
	write_desc(&t[1], DATA_GPA, 4, VIRTQ_DESC_F_NEXT, 0);
	set_desc(f, 0, TABLE_GPA, 32, VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 0);
	expect_broken(f);
}

static void test_too_many_iovecs(void **state)
{
	struct fx *f = *state;
	unsigned n = VMIO_CHAIN_MAX_IOV + 1;
	uint64_t tgpa = REGION_SIZE; /* all of region B is free */
	struct virtq_desc *t = table_at(f, tgpa);

	assert_true(n * sizeof(*t) <= REGION_SIZE);
	f->vq.indirect = true;
	for (unsigned i = 0; i < n; i++)
		write_desc(&t[i], DATA_GPA + i, 1,
			   i + 1 < n ? VIRTQ_DESC_F_NEXT : 0, i + 1);
	set_desc(f, 0, tgpa, n * sizeof(*t), VIRTQ_DESC_F_INDIRECT, 0);
	make_avail(f, 0);
	expect_broken(f);

	/* One fewer fits exactly. */
	vmio_vq_release(&f->vq);
	vmio_vq_init(&f->vq, 3);
	f->vq.size = QSIZE;
	f->vq.desc_uva = UVA_A + DESC_GPA;
	f->vq.avail_uva = UVA_A + AVAIL_GPA;
	f->vq.used_uva = UVA_A + USED_GPA;
	f->vq.addr_set = true;
	f->vq.indirect = true;
	f->vq.last_avail_idx = f->avail_idx - 1;
	assert_int_equal(vmio_vq_map(&f->vq, &f->mem), 0);
	write_desc(&t[n - 2], DATA_GPA, 1, 0, 0);
	set_desc(f, 0, tgpa, (n - 1) * sizeof(*t), VIRTQ_DESC_F_INDIRECT, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.nout, VMIO_CHAIN_MAX_IOV);
}

static void test_push_flush_notifies_once(void **state)
{
	struct fx *f = *state;
	struct virtq_used_elem e;

	post_simple(f, 3);
	post_simple(f, 1);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 3);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 1);

	vmio_vq_push(&f->vq, 3, 100);
	vmio_vq_push(&f->vq, 1, 0);
	/* Not visible before the flush. */
	assert_int_equal(le16toh(f->used->idx), 0);
	assert_int_equal(calls(f), 0);

	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(le16toh(f->used->idx), 2);
	e = f->used->ring[0];
	assert_int_equal(le32toh(e.id), 3);
	assert_int_equal(le32toh(e.len), 100);
	e = f->used->ring[1];
	assert_int_equal(le32toh(e.id), 1);
	assert_int_equal(le32toh(e.len), 0);
	assert_int_equal(calls(f), 1);

	/* Nothing new: no second notification. */
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(calls(f), 0);
}

static void test_used_ring_wraps(void **state)
{
	struct fx *f = *state;

	for (unsigned i = 0; i < QSIZE + 3; i++) {
		post_simple(f, (uint16_t)(i % QSIZE));
		assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
		vmio_vq_push(&f->vq, f->chain.head, i);
		vmio_vq_flush_and_notify(&f->vq);
	}
	assert_int_equal(le16toh(f->used->idx), QSIZE + 3);
	assert_int_equal(le32toh(f->used->ring[2].len), QSIZE + 2);
	assert_int_equal(le32toh(f->used->ring[3].len), 3);
	assert_int_equal(calls(f), QSIZE + 3);
}

static void test_event_idx_suppression(void **state)
{
	struct fx *f = *state;

	f->vq.event_idx = true;
	*used_event_of(f) = htole16(0);
	for (unsigned i = 0; i < 4; i++)
		post_simple(f, (uint16_t)i);

	/* The first flush always notifies: there is no previous one. */
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, f->chain.head, 1);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(calls(f), 1);

	/* The driver wants a notification once entry 3 is used (idx > 3). */
	*used_event_of(f) = htole16(3);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, f->chain.head, 1);
	vmio_vq_flush_and_notify(&f->vq); /* used idx 2 */
	assert_int_equal(calls(f), 0);
	assert_int_equal(le16toh(f->used->idx), 2);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, f->chain.head, 1);
	vmio_vq_flush_and_notify(&f->vq); /* used idx 3 */
	assert_int_equal(calls(f), 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, f->chain.head, 1);
	vmio_vq_flush_and_notify(&f->vq); /* used idx 4: passes 3 */
	assert_int_equal(calls(f), 1);
	assert_int_equal(le16toh(f->used->idx), 4);
}

static void test_event_idx_batch_crossing(void **state)
{
	struct fx *f = *state;

	f->vq.event_idx = true;
	f->vq.signalled_used_valid = true; /* as if notified at 0 before */
	*used_event_of(f) = htole16(1);
	for (unsigned i = 0; i < 3; i++) {
		post_simple(f, (uint16_t)i);
		assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
		vmio_vq_push(&f->vq, f->chain.head, 0);
	}
	/* One flush covering 0 -> 3 crosses used_event 1: one call. */
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(calls(f), 1);
	/* used_event stays behind: no more calls. */
	post_simple(f, 3);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, f->chain.head, 0);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(calls(f), 0);
}

static void test_no_interrupt_flag(void **state)
{
	struct fx *f = *state;

	f->avail->flags = htole16(VIRTQ_AVAIL_F_NO_INTERRUPT);
	post_simple(f, 0);
	post_simple(f, 1);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, f->chain.head, 5);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(le16toh(f->used->idx), 1);
	assert_int_equal(calls(f), 0);

	f->avail->flags = 0;
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	vmio_vq_push(&f->vq, f->chain.head, 5);
	vmio_vq_flush_and_notify(&f->vq);
	assert_int_equal(le16toh(f->used->idx), 2);
	assert_int_equal(calls(f), 1);
}

static void test_unpop(void **state)
{
	struct fx *f = *state;

	post_simple(f, 5);
	post_simple(f, 6);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 6);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 0);
	vmio_vq_unpop(&f->vq, 1);
	assert_int_equal(f->vq.last_avail_idx, 1);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 1);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 6);
	vmio_vq_unpop(&f->vq, 2);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(f->chain.head, 5);
}

static void test_enable_kicks_flags(void **state)
{
	struct fx *f = *state;

	assert_false(vmio_vq_enable_kicks(&f->vq, false));
	assert_int_equal(le16toh(f->used->flags), VIRTQ_USED_F_NO_NOTIFY);
	assert_false(vmio_vq_enable_kicks(&f->vq, true));
	assert_int_equal(le16toh(f->used->flags), 0);

	/* Buffers that arrive while kicks are off are reported on enable. */
	assert_false(vmio_vq_enable_kicks(&f->vq, false));
	post_simple(f, 0);
	assert_true(vmio_vq_enable_kicks(&f->vq, true));
	assert_int_equal(le16toh(f->used->flags), 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_false(vmio_vq_enable_kicks(&f->vq, true));
}

static void test_enable_kicks_event_idx(void **state)
{
	struct fx *f = *state;

	f->vq.event_idx = true;
	*avail_event_of(f) = htole16(0xffff);

	/* Kicks on: every pop tells the driver how far we have read. */
	post_simple(f, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(le16toh(*avail_event_of(f)), 1);

	/* Kicks off: avail_event stays where it was. */
	assert_false(vmio_vq_enable_kicks(&f->vq, false));
	post_simple(f, 1);
	post_simple(f, 2);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(le16toh(*avail_event_of(f)), 1);
	assert_int_equal(le16toh(f->used->flags), 0);

	/* On again: avail_event = our position, and one is pending. */
	assert_true(vmio_vq_enable_kicks(&f->vq, true));
	assert_int_equal(le16toh(*avail_event_of(f)), 2);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(le16toh(*avail_event_of(f)), 3);
	assert_false(vmio_vq_enable_kicks(&f->vq, true));
}

static void test_avail_pending(void **state)
{
	struct fx *f = *state;

	assert_int_equal(vmio_vq_avail_pending(&f->vq), 0);
	post_simple(f, 0);
	post_simple(f, 1);
	post_simple(f, 2);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 3);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 2);
}

static void test_index_wraparound(void **state)
{
	struct fx *f = *state;

	/* Both sides near 2^16: the distance is what counts. */
	f->avail_idx = 0xfffe;
	f->vq.last_avail_idx = 0xfffe;
	f->avail->idx = htole16(0xfffe);
	post_simple(f, 0);
	post_simple(f, 1);
	post_simple(f, 2);
	assert_int_equal(le16toh(f->avail->idx), 1);
	assert_int_equal(vmio_vq_avail_pending(&f->vq), 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 1);
		assert_int_equal(f->chain.head, i);
	}
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), 0);
	assert_int_equal(f->vq.last_avail_idx, 1);
}

static void test_chain_read_write(void **state)
{
	struct fx *f = *state;
	struct vmio_chain *c = &f->chain;
	uint8_t src[64], buf[64];
	uint8_t *in0, *in1;

	for (unsigned i = 0; i < sizeof(src); i++)
		src[i] = (uint8_t)(i + 1);
	/* Readable: 5 + 7 + 11 bytes holding 1..23; writable: 4 + 6. */
	memcpy(gp(f, DATA_GPA), src, 5);
	memcpy(gp(f, DATA_GPA + 0x100), src + 5, 7);
	memcpy(gp(f, DATA_GPA + 0x200), src + 12, 11);
	set_desc(f, 0, DATA_GPA, 5, VIRTQ_DESC_F_NEXT, 1);
	set_desc(f, 1, DATA_GPA + 0x100, 7, VIRTQ_DESC_F_NEXT, 2);
	set_desc(f, 2, DATA_GPA + 0x200, 11, VIRTQ_DESC_F_NEXT, 3);
	set_desc(f, 3, DATA_GPA + 0x300, 4, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 4);
	set_desc(f, 4, DATA_GPA + 0x400, 6, VIRTQ_DESC_F_WRITE, 0);
	make_avail(f, 0);
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, c), 1);
	assert_int_equal(c->nout, 3);
	assert_int_equal(c->nin, 2);

	memset(buf, 0, sizeof(buf));
	assert_int_equal(vmio_chain_read(c, 3, buf, 15), 15);
	assert_memory_equal(buf, src + 3, 15);
	assert_int_equal(vmio_chain_read(c, 0, buf, sizeof(buf)), 23);
	assert_memory_equal(buf, src, 23);
	assert_int_equal(vmio_chain_read(c, 12, buf, 11), 11);
	assert_memory_equal(buf, src + 12, 11);
	assert_int_equal(vmio_chain_read(c, 20, buf, sizeof(buf)), 3);
	assert_memory_equal(buf, src + 20, 3);
	assert_int_equal(vmio_chain_read(c, 23, buf, 1), 0);
	assert_int_equal(vmio_chain_read(c, 1000, buf, 1), 0);

	in0 = gp(f, DATA_GPA + 0x300);
	in1 = gp(f, DATA_GPA + 0x400);
	memset(in0, 0, 4);
	memset(in1, 0, 8);
	assert_int_equal(vmio_chain_write(c, 2, src, 5), 5);
	assert_memory_equal(in0 + 2, src, 2);
	assert_memory_equal(in1, src + 2, 3);
	assert_int_equal(in0[0], 0);
	assert_int_equal(in1[3], 0);
	assert_int_equal(vmio_chain_write(c, 0, src, sizeof(src)), 10);
	assert_memory_equal(in0, src, 4);
	assert_memory_equal(in1, src + 4, 6);
	assert_int_equal(in1[6], 0); /* nothing past the buffer */
	assert_int_equal(vmio_chain_write(c, 10, src, 1), 0);
}

/* Captures what the library logs to stderr while fn runs. */
static size_t capture_stderr(void (*fn)(struct fx *), struct fx *f,
			     char *out, size_t cap)
{
	int fds[2], saved;
	ssize_t n;

	assert_int_equal(pipe2(fds, O_NONBLOCK), 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fds[1], 2);
	fn(f);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	close(fds[1]);
	n = read(fds[0], out, cap - 1);
	close(fds[0]);
	if (n < 0)
		n = 0;
	out[n] = 0;
	return (size_t)n;
}

static void break_it(struct fx *f)
{
	vmio_vq_set_broken(&f->vq, "bad thing %d", 42);
}

static void pop_it(struct fx *f)
{
	assert_int_equal(vmio_vq_pop(&f->vq, &f->mem, &f->chain), -1);
}

static void count_broken(void *opaque)
{
	(*(unsigned *)opaque)++;
}

static const struct vmio_vq_transport counting = {
	.broken = count_broken,
};

static void test_set_broken_logs_once(void **state)
{
	struct fx *f = *state;
	char log[1024];
	unsigned told = 0;

	f->vq.name = "rx";
	vmio_vq_set_transport(&f->vq, &counting, &told);
	assert_true(capture_stderr(break_it, f, log, sizeof(log)) > 0);
	assert_non_null(strstr(log, "virtqueue 3 (rx)"));
	assert_non_null(strstr(log, "bad thing 42"));
	assert_true(f->vq.broken);
	assert_int_equal(told, 1);

	/* Again, and a pop: silent, and the transport is not told again. */
	assert_int_equal(capture_stderr(break_it, f, log, sizeof(log)), 0);
	post_simple(f, 0);
	assert_int_equal(capture_stderr(pop_it, f, log, sizeof(log)), 0);
	assert_int_equal(told, 1);
	vmio_vq_set_transport(&f->vq, NULL, NULL);
}

static void test_broken_chain_log_names_descriptor(void **state)
{
	struct fx *f = *state;
	char log[1024];

	set_desc(f, 2, DATA_GPA, 0x10, VIRTQ_DESC_F_NEXT, 9);
	make_avail(f, 2);
	assert_true(capture_stderr(pop_it, f, log, sizeof(log)) > 0);
	assert_non_null(strstr(log, "virtqueue 3"));
	assert_non_null(strstr(log, "descriptor 2"));
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_init),
		T(test_map_rejects),
		T(test_simple_chain),
		T(test_empty_and_not_ready),
		T(test_buffer_across_regions),
		T(test_full_length_chain),
		T(test_loop_is_broken),
		T(test_chain_longer_than_queue),
		T(test_next_out_of_range),
		T(test_head_out_of_range),
		T(test_desc_outside_memory),
		T(test_desc_addr_wraps),
		T(test_readable_after_writable),
		T(test_avail_idx_jump),
		T(test_indirect),
		T(test_indirect_across_regions),
		T(test_indirect_unaligned_table),
		T(test_indirect_nested),
		T(test_indirect_with_next),
		T(test_indirect_not_negotiated),
		T(test_indirect_bad_length),
		T(test_indirect_loop),
		T(test_too_many_iovecs),
		T(test_push_flush_notifies_once),
		T(test_used_ring_wraps),
		T(test_event_idx_suppression),
		T(test_event_idx_batch_crossing),
		T(test_no_interrupt_flag),
		T(test_unpop),
		T(test_enable_kicks_flags),
		T(test_enable_kicks_event_idx),
		T(test_avail_pending),
		T(test_index_wraparound),
		T(test_chain_read_write),
		T(test_set_broken_logs_once),
		T(test_broken_chain_log_names_descriptor),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
