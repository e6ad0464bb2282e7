/* The UMEM view of guest memory: our own area first, then each region
 * back to back, the same pages as memory.c's mappings; offsets only for
 * ranges inside one region. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "devices/net/umem_view.h"

#define PAGE 4096u

/* Adds a region of size bytes at gpa, backed by a memfd. */
static void add_region(struct vmio_mem *mem, uint64_t gpa, uint64_t size)
{
	int fd = memfd_create("test_umem_view", MFD_CLOEXEC);
	struct vmio_mem_region_desc d = {
		.gpa = gpa, .size = size, .uva = 0x7f0000000000ull + gpa,
	};
	const char *why = NULL;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	assert_int_equal(vmio_mem_add(mem, &d, fd, &why), 0);
}

static void test_layout(void **state)
{
	struct vmio_mem mem;
	struct vnet_umem_view v;
	const char *why = NULL;
	uint8_t *g0, *g1;
	uint64_t off;

	vmio_mem_init(&mem);
	add_region(&mem, 0, 16 * PAGE);
	add_region(&mem, 1ull << 32, 8 * PAGE);
	assert_int_equal(vnet_umem_view_map(&v, &mem, 100, &why), 0);
	assert_int_equal(v.own_size, PAGE); /* at least a page */
	assert_int_equal(v.size, PAGE + 24 * PAGE);
	assert_true(vnet_umem_view_matches(&v, &mem));

	g0 = vmio_mem_gpa_ptr(&mem, 0, 1);
	g1 = vmio_mem_gpa_ptr(&mem, 1ull << 32, 1);
	off = vnet_umem_view_offset(&v, g0 + 100, 64);
	assert_int_equal(off, PAGE + 100);
	off = vnet_umem_view_offset(&v, g1 + 5, 10);
	assert_int_equal(off, PAGE + 16 * PAGE + 5);

	/* The same pages, both ways. */
	memcpy(g1 + 5, "guest", 5);
	assert_memory_equal(v.base + off, "guest", 5);
	memcpy(v.base + PAGE + 200, "view", 4);
	assert_memory_equal(g0 + 200, "view", 4);

	/* Ranges outside one region. */
	assert_int_equal(vnet_umem_view_offset(&v, g0 + 16 * PAGE - 10, 11),
			 UINT64_MAX);
	assert_int_equal(vnet_umem_view_offset(&v, g0 + 16 * PAGE - 10, 10),
			 PAGE + 16 * PAGE - 10);
	assert_int_equal(vnet_umem_view_offset(&v, v.base, 1), UINT64_MAX);
	assert_int_equal(vnet_umem_view_offset(&v, &why, 1), UINT64_MAX);

	vnet_umem_view_unmap(&v);
	assert_null(v.base);
	/* memory.c's mappings outlive the view. */
	assert_memory_equal(g0 + 200, "view", 4);
	vmio_mem_clear(&mem);
}

static void test_own_only(void **state)
{
	struct vnet_umem_view v;
	const char *why = NULL;

	assert_int_equal(vnet_umem_view_map(&v, NULL, 3 * PAGE + 1, &why), 0);
	assert_int_equal(v.size, 4 * PAGE);
	assert_int_equal(v.nslots, 0);
	v.base[v.size - 1] = 1; /* ours, writable */
	vnet_umem_view_unmap(&v);
}

static void test_matches(void **state)
{
	struct vmio_mem a, b;
	struct vnet_umem_view v;
	const char *why = NULL;

	vmio_mem_init(&a);
	vmio_mem_init(&b);
	add_region(&a, 0, 4 * PAGE);
	add_region(&b, 0, 4 * PAGE);
	assert_int_equal(vnet_umem_view_map(&v, &a, PAGE, &why), 0);
	assert_true(vnet_umem_view_matches(&v, &a));
	/* Same layout, other pages: a new view is needed. */
	assert_false(vnet_umem_view_matches(&v, &b));
	assert_false(vnet_umem_view_matches(&v, NULL));
	vnet_umem_view_unmap(&v);
	assert_false(vnet_umem_view_matches(&v, &a));
	vmio_mem_clear(&a);
	vmio_mem_clear(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_own_only),
		cmocka_unit_test(test_matches),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
