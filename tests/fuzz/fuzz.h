/* The libFuzzer entry point every target defines. */
#ifndef VMIO_TESTS_FUZZ_H
#define VMIO_TESTS_FUZZ_H

#include <dirent.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* An input read a value at a time, little-endian; zero once it runs out,
 * so a short input is still a whole one. */
struct stream {
	const uint8_t *p;
	size_t len, pos;
};

static inline uint8_t next8(struct stream *s)
{
	return s->pos < s->len ? s->p[s->pos++] : 0;
}

static inline uint16_t next16(struct stream *s)
{
	uint16_t lo = next8(s);

	return (uint16_t)(lo | next8(s) << 8);
}

static inline uint32_t next32(struct stream *s)
{
	uint32_t lo = next16(s);

	return lo | (uint32_t)next16(s) << 16;
}

static inline uint64_t next64(struct stream *s)
{
	uint64_t lo = next32(s);

	return lo | (uint64_t)next32(s) << 32;
}

/* A clock for a target's loop (vmio_loop_set_clock) that moves only when
 * the input says so: deadlines pass inside an input, at the record that
 * moves it, and never because the machine was slow. */
struct fuzz_clock {
	uint64_t ns;
};

/* Where a fuzz_clock starts: far from 0 (which some deadlines read as
 * "none") and from CLOCK_MONOTONIC's readings, so that a deadline taken
 * on the wrong clock shows. */
#define FUZZ_CLOCK_START 4000000000000000000ull

static inline uint64_t fuzz_clock_now(void *opaque)
{
	return ((const struct fuzz_clock *)opaque)->ns;
}

/* How far an input byte moves the clock: below 0x80 that many ms (the
 * kick guard's looks, the ticks), else (b - 0x7f) quarter seconds, up to
 * 32 s (past every timeout a target sets). */
static inline uint64_t fuzz_clock_step_ns(uint8_t b)
{
	uint64_t ms = b < 0x80 ? b : (b - 0x7fu) * 250u;

	return ms * 1000000u;
}

/* Guest memory for a target: a memfd of size bytes (for vmio_mem regions
 * to map, as a VMM's would be) in *fd, and the target's own shared
 * mapping of it, returned. Aborts on failure: without memory a target
 * has nothing to test. */
static inline uint8_t *fuzz_guest_memory(const char *name, size_t size,
					 int *fd)
{
	void *p;

	*fd = memfd_create(name, MFD_CLOEXEC);
	if (*fd < 0 || ftruncate(*fd, (off_t)size) < 0)
		abort();
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
	if (p == MAP_FAILED)
		abort();
	return p;
}

/* LeakSanitizer does not see fds: every 1024 inputs, count them. Returns
 * false once more than 8 are open beyond the count at the first call. */
static inline bool fuzz_fds_steady(void)
{
	static unsigned runs;
	static int baseline = -1;
	DIR *d;
	int n = 0;

	if (runs++ % 1024)
		return true;
	d = opendir("/proc/self/fd");
	if (!d)
		abort();
	while (readdir(d))
		n++;
	closedir(d);
	if (baseline < 0)
		baseline = n;
	return n <= baseline + 8;
}

#endif
