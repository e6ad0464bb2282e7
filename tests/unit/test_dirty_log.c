/* The dirty-page log (virtio/dirty_log.h): what SET_LOG_BASE may map, one
 * bit per 4 KiB of guest-physical memory, marks found through the
 * regions from local addresses, and nothing written past the log (a log
 * too small for the memory table counts misses instead). The rings'
 * own marks are test_ring_log's. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "guest_regions.h"
#include "virtio/dirty_log.h"

#define PAGE 4096u

/* The VMM's view: byte i of its log file. */
static uint8_t vmm_byte(int fd, off_t i)
{
	uint8_t b = 0xee;

	assert_int_equal(pread(fd, &b, 1, i), 1);
	return b;
}

static void test_map_refusals(void **state)
{
	struct vmio_dirty_log log = { 0 };
	const char *why = NULL;

	(void)state;
	assert_int_equal(vmio_dirty_log_map(&log, test_memfd(PAGE), 0, 0, &why),
			 -EINVAL);
	assert_non_null(why);
	assert_int_equal(vmio_dirty_log_map(&log, test_memfd(PAGE),
					    VMIO_LOG_MAX_BYTES + 1, 0, &why),
			 -EINVAL);
	assert_int_equal(vmio_dirty_log_map(&log, test_memfd(PAGE), 8,
					    UINT64_MAX - 4, &why),
			 -EINVAL);
	/* A file shorter than the log would fault (SIGBUS) at a mark. */
	assert_int_equal(vmio_dirty_log_map(&log, test_memfd(8), 16, 0, &why),
			 -EINVAL);
	assert_int_equal(vmio_dirty_log_map(&log, test_memfd(PAGE), 8, PAGE,
					    &why),
			 -EINVAL);
	/* Not a file mmap takes. */
	assert_true(vmio_dirty_log_map(&log, -1, 8, 0, &why) < 0);
	assert_null(log.bits);
}

/* A page's bit, in the VMM's file at the log's offset (not aligned to a
 * page: the mapping starts below it). */
static void test_marks_pages(void **state)
{
	struct vmio_dirty_log log = { 0 };
	const char *why = NULL;
	int fd = test_memfd(2 * PAGE), mine = dup(fd);

	(void)state;
	assert_int_equal(vmio_dirty_log_map(&log, mine, 8, 100, &why), 0);
	vmio_dirty_log_mark_gpa(&log, 0x1000, 1);
	assert_int_equal(vmm_byte(fd, 100), 0x02);
	/* Across a page boundary: both pages. */
	vmio_dirty_log_mark_gpa(&log, 9 * PAGE - 1, 2);
	assert_int_equal(vmm_byte(fd, 101), 0x03);
	/* A mark ORs: the VMM's clear of another bit stays. */
	assert_int_equal(pwrite(fd, "\0", 1, 100), 1);
	vmio_dirty_log_mark_gpa(&log, 0, PAGE);
	assert_int_equal(vmm_byte(fd, 100), 0x01);
	assert_int_equal(vmm_byte(fd, 101), 0x03);
	assert_int_equal(log.misses, 0);
	/* Beyond the 64 pages the log covers: counted, never written. */
	vmio_dirty_log_mark_gpa(&log, 62 * PAGE, 4 * PAGE);
	assert_int_equal(vmm_byte(fd, 107), 0xc0);
	assert_int_equal(vmm_byte(fd, 108), 0);
	assert_int_equal(log.misses, 2);
	vmio_dirty_log_mark_gpa(&log, UINT64_MAX - 10, 100);
	assert_int_equal(vmm_byte(fd, 108), 0);
	vmio_dirty_log_unmap(&log);
	close(fd);
}

/* From a local address to the guest-physical page, through the region
 * it lies in; guest memory in two regions, the second at 1 MiB. */
static void test_marks_through_regions(void **state)
{
	struct vmio_dirty_log log = { 0 };
	struct vmio_mem mem;
	const char *why = NULL;
	int fd = test_memfd(PAGE), mine = dup(fd);
	uint8_t outside[16];
	struct iovec iov[2];

	(void)state;
	vmio_mem_init(&mem);
	guest_region_add(&mem, 0, 64 * 1024, 0x7000000000);
	guest_region_add(&mem, 1 << 20, 64 * 1024, 0x5000000000);
	/* 1 MiB + 64 KiB: 272 pages, 34 bytes. */
	assert_int_equal(vmio_dirty_log_map(&log, mine, 33, 0, &why), 0);
	assert_false(vmio_dirty_log_covers(&log, &mem));
	assert_int_equal(vmio_dirty_log_map(&log, dup(fd), 34, 0, &why), 0);
	assert_true(vmio_dirty_log_covers(&log, &mem));

	vmio_dirty_log_mark_host(&log, &mem, guest_ptr(&mem, (1 << 20) + PAGE),
				 1);
	assert_int_equal(vmm_byte(fd, 32), 0x02);
	/* Not guest memory: nothing. */
	vmio_dirty_log_mark_host(&log, &mem, outside, sizeof(outside));
	for (off_t i = 0; i < 34; i++)
		assert_int_equal(vmm_byte(fd, i), i == 32 ? 0x02 : 0);
	/* The first len bytes of an iov, no further. */
	iov[0] = (struct iovec){ guest_ptr(&mem, 2 * PAGE), PAGE };
	iov[1] = (struct iovec){ guest_ptr(&mem, 5 * PAGE), 2 * PAGE };
	vmio_dirty_log_mark_iov(&log, &mem, iov, 2, PAGE + 1);
	assert_int_equal(vmm_byte(fd, 0), 0x24);
	vmio_dirty_log_unmap(&log);
	vmio_mem_clear(&mem);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_map_refusals),
		cmocka_unit_test(test_marks_pages),
		cmocka_unit_test(test_marks_through_regions),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
