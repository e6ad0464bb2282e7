/* Guest memory table: validation, mapping and bounds-checked translation. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "guest_regions.h"
#include "virtio/memory.h"

#define PAGE 4096u

static bool fd_is_closed(int fd)
{
	return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

static struct vmio_mem_region_desc region(uint64_t gpa, uint64_t size,
					  uint64_t uva, uint64_t off)
{
	struct vmio_mem_region_desc d = {
		.gpa = gpa, .size = size, .uva = uva, .mmap_offset = off,
	};
	return d;
}

/* Whether a region of mem keeps fd (for a session record). */
static bool kept(const struct vmio_mem *mem, int fd)
{
	for (unsigned i = 0; i < mem->nregions; i++)
		if (mem->regions[i].fd == fd)
			return true;
	return false;
}

/* The fd is consumed: kept by the region it maps, or closed (a refused
 * region, or a copy of one present, which is counted). */
static int add(struct vmio_mem *mem, struct vmio_mem_region_desc d,
	       const char **why)
{
	int fd = test_memfd(d.mmap_offset + d.size);
	int ret = vmio_mem_add(mem, &d, fd, why);

	if (ret)
		assert_true(fd_is_closed(fd));
	else
		assert_true(kept(mem, fd) || fd_is_closed(fd));
	return ret;
}

static int setup(void **state)
{
	static struct vmio_mem mem;

	vmio_mem_init(&mem);
	*state = &mem;
	return 0;
}

static int teardown(void **state)
{
	vmio_mem_clear(*state);
	return 0;
}

static void test_add_and_lookup(void **state)
{
	struct vmio_mem *mem = *state;
	struct vmio_mem_region_desc d = region(0x10000, 2 * PAGE, 0x70000000, 0);
	const char *why = NULL;
	int fd = test_memfd(2 * PAGE);
	uint8_t byte = 0;
	uint8_t *p;

	assert_int_equal(vmio_mem_add(mem, &d, dup(fd), &why), 0);
	assert_int_equal(mem->nregions, 1);

	p = vmio_mem_gpa_ptr(mem, 0x10000, 2 * PAGE);
	assert_non_null(p);
	assert_ptr_equal(p, mem->regions[0].host);
	assert_ptr_equal(vmio_mem_uva_ptr(mem, 0x70000000, 16), p);
	assert_ptr_equal(vmio_mem_uva_ptr(mem, 0x70000010, 16), p + 16);

	/* The mapping is the fd's memory, shared. */
	p[100] = 0xab;
	assert_int_equal(pread(fd, &byte, 1, 100), 1);
	assert_int_equal(byte, 0xab);
	close(fd);

	/* Bounds, including len 0 counting as one byte. */
	assert_ptr_equal(vmio_mem_gpa_ptr(mem, 0x10000 + 2 * PAGE - 1, 1),
			 p + 2 * PAGE - 1);
	assert_ptr_equal(vmio_mem_gpa_ptr(mem, 0x10000 + 2 * PAGE - 1, 0),
			 p + 2 * PAGE - 1);
	assert_null(vmio_mem_gpa_ptr(mem, 0x10000 + 2 * PAGE - 1, 2));
	assert_null(vmio_mem_gpa_ptr(mem, 0x10000 + 2 * PAGE, 0));
	assert_null(vmio_mem_gpa_ptr(mem, 0xffff, 1));
	assert_null(vmio_mem_gpa_ptr(mem, 0x10000, 2 * PAGE + 1));
	assert_null(vmio_mem_gpa_ptr(mem, 0x10010, UINT64_MAX));
	assert_null(vmio_mem_uva_ptr(mem, 0x70000000 + 2 * PAGE, 1));
	assert_null(vmio_mem_uva_ptr(mem, 0x70000000 + 8, UINT64_MAX - 4));
	assert_null(vmio_mem_uva_ptr(mem, 0x10000, 1));
}

static void test_overlap_gpa_rejected(void **state)
{
	struct vmio_mem *mem = *state;
	const char *why = NULL;

	assert_int_equal(add(mem, region(0x10000, 4 * PAGE, 0x100000, 0), &why), 0);
	/* Starts inside, ends inside, and covers the existing one. */
	assert_int_equal(add(mem, region(0x11000, PAGE, 0x200000, 0), &why), -EINVAL);
	assert_non_null(strstr(why, "overlaps"));
	why = NULL;
	assert_int_equal(add(mem, region(0xf000, 2 * PAGE, 0x200000, 0), &why), -EINVAL);
	assert_non_null(strstr(why, "guest"));
	assert_int_equal(add(mem, region(0, 0x100000, 0x200000, 0), &why), -EINVAL);
	assert_int_equal(mem->nregions, 1);
	/* Touching is not overlapping. */
	assert_int_equal(add(mem, region(0x14000, PAGE, 0x200000, 0), &why), 0);
	assert_int_equal(add(mem, region(0xf000, PAGE, 0x300000, 0), &why), 0);
	assert_int_equal(mem->nregions, 3);
}

static void test_overlap_uva_rejected(void **state)
{
	struct vmio_mem *mem = *state;
	const char *why = NULL;

	assert_int_equal(add(mem, region(0x10000, 4 * PAGE, 0x100000, 0), &why), 0);
	assert_int_equal(add(mem, region(0x90000, PAGE, 0x103000, 0), &why), -EINVAL);
	assert_non_null(strstr(why, "overlaps"));
	assert_non_null(strstr(why, "user"));
	assert_int_equal(add(mem, region(0x90000, PAGE, 0x104000, 0), &why), 0);
	assert_int_equal(mem->nregions, 2);
}

static void test_overflow_rejected(void **state)
{
	struct vmio_mem *mem = *state;
	struct vmio_mem_region_desc d;
	const char *why = NULL;

	d = region(UINT64_MAX - PAGE + 1, PAGE, 0x100000, 0);
	assert_int_equal(vmio_mem_add(mem, &d, test_memfd(PAGE), &why), -EINVAL);
	assert_non_null(strstr(why, "wraps"));
	d = region(UINT64_MAX - 100, PAGE, 0x100000, 0);
	assert_int_equal(vmio_mem_add(mem, &d, test_memfd(PAGE), &why), -EINVAL);
	d = region(0, PAGE, UINT64_MAX - 100, 0);
	why = NULL;
	assert_int_equal(vmio_mem_add(mem, &d, test_memfd(PAGE), &why), -EINVAL);
	assert_non_null(strstr(why, "user"));
	d = region(0, PAGE, 0x100000, UINT64_MAX - 100);
	why = NULL;
	assert_int_equal(vmio_mem_add(mem, &d, test_memfd(PAGE), &why), -EINVAL);
	assert_non_null(strstr(why, "offset"));
	d = region(0, UINT64_MAX, 0, 0);
	assert_int_equal(vmio_mem_add(mem, &d, test_memfd(PAGE), &why), -EINVAL);
	assert_int_equal(mem->nregions, 0);
}

static void test_zero_size_rejected(void **state)
{
	struct vmio_mem *mem = *state;
	const char *why = NULL;

	assert_int_equal(add(mem, region(0x1000, 0, 0x1000, 0), &why), -EINVAL);
	assert_non_null(strstr(why, "zero"));
	assert_int_equal(mem->nregions, 0);
}

static void test_file_too_small_rejected(void **state)
{
	struct vmio_mem *mem = *state;
	struct vmio_mem_region_desc d = region(0, 4 * PAGE, 0, 0);
	const char *why = NULL;
	int fd = test_memfd(2 * PAGE);

	assert_int_equal(vmio_mem_add(mem, &d, fd, &why), -EINVAL);
	assert_true(fd_is_closed(fd));
	assert_non_null(strstr(why, "end of its file"));
	/* And a bad fd is refused without touching anything. */
	assert_int_equal(vmio_mem_add(mem, &d, -1, &why), -EBADF);
	assert_int_equal(mem->nregions, 0);
}

static void test_too_many_regions(void **state)
{
	struct vmio_mem *mem = *state;
	const char *why = NULL;
	int fd = test_memfd(PAGE);

	/* Add them in descending gpa to exercise the sorted insert too. */
	for (unsigned i = VMIO_MEM_MAX_REGIONS; i > 0; i--) {
		struct vmio_mem_region_desc d =
			region((uint64_t)i * PAGE, PAGE, (uint64_t)i * PAGE, 0);

		assert_int_equal(vmio_mem_add(mem, &d, dup(fd), &why), 0);
	}
	assert_int_equal(mem->nregions, VMIO_MEM_MAX_REGIONS);
	for (unsigned i = 1; i < VMIO_MEM_MAX_REGIONS; i++)
		assert_true(mem->regions[i - 1].d.gpa < mem->regions[i].d.gpa);

	struct vmio_mem_region_desc extra = region(0x1000000, PAGE, 0x1000000, 0);
	int fd2 = dup(fd);

	why = NULL;
	assert_int_equal(vmio_mem_add(mem, &extra, fd2, &why), -ENOSPC);
	assert_true(fd_is_closed(fd2));
	assert_non_null(strstr(why, "too many"));
	close(fd);

	/* All 64 are one page each, back to back: one range spans them. */
	struct iovec iov[VMIO_MEM_MAX_REGIONS];
	unsigned niov = 0;

	assert_int_equal(vmio_mem_gpa_to_iov(mem, PAGE + 10,
					     (VMIO_MEM_MAX_REGIONS - 1) * PAGE,
					     iov, &niov, VMIO_MEM_MAX_REGIONS),
			 0);
	assert_int_equal(niov, VMIO_MEM_MAX_REGIONS);
	assert_ptr_equal(iov[0].iov_base, mem->regions[0].host + 10);
	assert_int_equal(iov[0].iov_len, PAGE - 10);
	assert_int_equal(iov[VMIO_MEM_MAX_REGIONS - 1].iov_len, 10);
}

static void test_unaligned_mmap_offset(void **state)
{
	struct vmio_mem *mem = *state;
	struct vmio_mem_region_desc d = region(0x40000, PAGE, 0x500000, 0x1234);
	const char *why = NULL;
	const char pattern[] = "guest bytes at 0x1234";
	int fd = test_memfd(3 * PAGE);
	char *p;

	assert_int_equal(pwrite(fd, pattern, sizeof(pattern), 0x1234),
			 (ssize_t)sizeof(pattern));
	assert_int_equal(vmio_mem_add(mem, &d, fd, &why), 0);
	p = vmio_mem_gpa_ptr(mem, 0x40000, sizeof(pattern));
	assert_non_null(p);
	assert_memory_equal(p, pattern, sizeof(pattern));
	/* The last byte is mapped and writable. */
	p[PAGE - 1] = 1;
	assert_ptr_equal(vmio_mem_uva_ptr(mem, 0x500000 + PAGE - 1, 1),
			 p + PAGE - 1);
	assert_null(vmio_mem_gpa_ptr(mem, 0x40000 + PAGE - 1, 2));
}

/* Two adjacent regions [0, 0x2000) and [0x2000, 0x4000) from different
 * files, added in reverse order. */
static void add_two_adjacent(struct vmio_mem *mem)
{
	const char *why = NULL;

	assert_int_equal(add(mem, region(0x2000, 0x2000, 0x900000, PAGE), &why), 0);
	assert_int_equal(add(mem, region(0, 0x2000, 0x800000, 0), &why), 0);
}

static void test_gpa_to_iov_across_regions(void **state)
{
	struct vmio_mem *mem = *state;
	struct iovec iov[4];
	unsigned niov = 1;

	add_two_adjacent(mem);
	assert_int_equal(mem->regions[0].d.gpa, 0);

	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x1f00, 0x200, iov, &niov, 4), 0);
	assert_int_equal(niov, 3);
	assert_ptr_equal(iov[1].iov_base, mem->regions[0].host + 0x1f00);
	assert_int_equal(iov[1].iov_len, 0x100);
	assert_ptr_equal(iov[2].iov_base, mem->regions[1].host);
	assert_int_equal(iov[2].iov_len, 0x100);

	/* Inside one region: one entry. */
	niov = 0;
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x2100, 0x100, iov, &niov, 4), 0);
	assert_int_equal(niov, 1);
	assert_ptr_equal(iov[0].iov_base, mem->regions[1].host + 0x100);

	/* Length 0: nothing, even at an unmapped address. */
	niov = 0;
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x99999999, 0, iov, &niov, 4), 0);
	assert_int_equal(niov, 0);

	/* The whole of both exactly. */
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0, 0x4000, iov, &niov, 4), 0);
	assert_int_equal(niov, 2);
	assert_int_equal(iov[0].iov_len + iov[1].iov_len, 0x4000);

	/* A gpa_ptr may not straddle the two. */
	assert_null(vmio_mem_gpa_ptr(mem, 0x1fff, 2));
}

static void test_gpa_to_iov_efault(void **state)
{
	struct vmio_mem *mem = *state;
	const char *why = NULL;
	struct iovec iov[4];
	unsigned niov = 1;

	add_two_adjacent(mem);
	/* A third region after a gap. */
	assert_int_equal(add(mem, region(0x5000, 0x1000, 0xa00000, 0), &why), 0);

	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x3f00, 0x200, iov, &niov, 4),
			 -EFAULT);
	assert_int_equal(niov, 1);
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x3f00, 0x1200, iov, &niov, 4),
			 -EFAULT);
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x4000, 1, iov, &niov, 4),
			 -EFAULT);
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x5800, 0x1000, iov, &niov, 4),
			 -EFAULT);
	/* Wraps past 2^64. */
	assert_int_equal(vmio_mem_gpa_to_iov(mem, UINT64_MAX - 10, 100, iov,
					     &niov, 4),
			 -EFAULT);
	assert_int_equal(niov, 1);
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x5800, 0x800, iov, &niov, 4), 0);
	assert_int_equal(niov, 2);
}

static void test_gpa_to_iov_enobufs(void **state)
{
	struct vmio_mem *mem = *state;
	struct iovec iov[4];
	unsigned niov = 2;

	add_two_adjacent(mem);
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x1000, 0x2000, iov, &niov, 3),
			 -ENOBUFS);
	assert_int_equal(niov, 2);
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x1000, 0x100, iov, &niov, 2),
			 -ENOBUFS);
	assert_int_equal(niov, 2);
	assert_int_equal(vmio_mem_gpa_to_iov(mem, 0x1000, 0x2000, iov, &niov, 4), 0);
	assert_int_equal(niov, 4);
}

static void test_remove(void **state)
{
	struct vmio_mem *mem = *state;
	struct vmio_mem_region_desc a = region(0, 0x2000, 0x800000, 0);
	struct vmio_mem_region_desc b = region(0x2000, 0x2000, 0x900000, PAGE);
	struct vmio_mem_region_desc wrong = a;

	add_two_adjacent(mem);
	wrong.uva += PAGE;
	assert_int_equal(vmio_mem_remove(mem, &wrong), -ENOENT);
	wrong = a;
	wrong.size = PAGE;
	assert_int_equal(vmio_mem_remove(mem, &wrong), -ENOENT);
	assert_int_equal(mem->nregions, 2);

	assert_int_equal(vmio_mem_remove(mem, &a), 0);
	assert_int_equal(mem->nregions, 1);
	assert_null(vmio_mem_gpa_ptr(mem, 0x1000, 1));
	assert_null(vmio_mem_uva_ptr(mem, 0x800000, 1));
	assert_non_null(vmio_mem_gpa_ptr(mem, 0x2000, 0x2000));
	assert_int_equal(vmio_mem_remove(mem, &a), -ENOENT);

	assert_int_equal(vmio_mem_remove(mem, &b), 0);
	assert_int_equal(mem->nregions, 0);
	assert_null(vmio_mem_gpa_ptr(mem, 0x2000, 1));
}

/* QEMU's multi-queue vhost-user net adds each region once per queue pair:
 * the same region again is counted, and stays until removed as often. */
static void test_duplicate_add(void **state)
{
	struct vmio_mem *mem = *state;
	struct vmio_mem_region_desc a = region(0x10000, 4 * PAGE, 0x100000, 0);
	const char *why = NULL;
	uint8_t *p;

	assert_int_equal(add(mem, a, &why), 0);
	p = vmio_mem_gpa_ptr(mem, 0x10000, 1);
	assert_non_null(p);
	assert_int_equal(add(mem, a, &why), 0);
	assert_int_equal(mem->nregions, 1);
	assert_ptr_equal(vmio_mem_gpa_ptr(mem, 0x10000, 1), p);
	/* Not identical: still an overlap. */
	a.mmap_offset = PAGE;
	assert_int_equal(add(mem, a, &why), -EINVAL);
	a.mmap_offset = 0;

	assert_int_equal(vmio_mem_remove(mem, &a), 0);
	assert_int_equal(mem->nregions, 1);
	assert_ptr_equal(vmio_mem_gpa_ptr(mem, 0x10000, 1), p);
	assert_int_equal(vmio_mem_remove(mem, &a), 0);
	assert_int_equal(mem->nregions, 0);
	assert_int_equal(vmio_mem_remove(mem, &a), -ENOENT);
}

static void test_clear_and_move(void **state)
{
	struct vmio_mem *mem = *state;
	static struct vmio_mem other;
	uint8_t *p;

	add_two_adjacent(mem);
	p = vmio_mem_gpa_ptr(mem, 0x2000, 1);
	*p = 7;

	vmio_mem_init(&other);
	vmio_mem_move(&other, mem);
	assert_int_equal(mem->nregions, 0);
	assert_null(vmio_mem_gpa_ptr(mem, 0x2000, 1));
	assert_int_equal(other.nregions, 2);
	assert_ptr_equal(vmio_mem_gpa_ptr(&other, 0x2000, 1), p);
	assert_int_equal(*p, 7);

	int fd0 = other.regions[0].fd, fd1 = other.regions[1].fd;

	assert_false(fd_is_closed(fd0));
	vmio_mem_clear(&other);
	/* The fds kept for a session record go with their mappings. */
	assert_true(fd_is_closed(fd0) && fd_is_closed(fd1));
	assert_int_equal(other.nregions, 0);
	assert_null(vmio_mem_gpa_ptr(&other, 0x2000, 1));
	assert_null(vmio_mem_uva_ptr(&other, 0x900000, 1));
	/* A cleared table accepts the same regions again. */
	add_two_adjacent(mem);
	assert_int_equal(mem->nregions, 2);
}

/* PREFETCHW is asked for exactly where the kernel says the CPU has it
 * (its flag is "3dnowprefetch" in /proc/cpuinfo): where it has not, the
 * instruction may fault, and where it has, receive buffers would lose
 * the prefetch that made net's rx fast (architecture.md section 1). */
static void test_prefetchw_detected(void **state)
{
#if defined(__x86_64__) || defined(__i386__)
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[8192];
	bool has = false, seen = false;

	assert_non_null(f);
	while (!seen && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5))
			continue;
		seen = true;
		has = strstr(line, " 3dnowprefetch") != NULL;
	}
	fclose(f);
	assert_true(seen);
	assert_int_equal(vmio_cpu_has_prefetchw, has);
#else
	assert_false(vmio_cpu_has_prefetchw);
#endif
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_add_and_lookup),
		T(test_overlap_gpa_rejected),
		T(test_overlap_uva_rejected),
		T(test_overflow_rejected),
		T(test_zero_size_rejected),
		T(test_file_too_small_rejected),
		T(test_too_many_regions),
		T(test_unaligned_mmap_offset),
		T(test_gpa_to_iov_across_regions),
		T(test_gpa_to_iov_efault),
		T(test_gpa_to_iov_enobufs),
		T(test_remove),
		T(test_duplicate_add),
		T(test_clear_and_move),
		cmocka_unit_test(test_prefetchw_detected),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
