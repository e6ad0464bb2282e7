/* The no-copy receive reserve: frames reach guest buffers in the order
 * they landed, whether in a reserve frame or straight in a guest buffer;
 * guest buffers are kept back while the reserve may need them and only
 * then; the reserve never has more than its frames out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "devices/net/xdp_reserve.h"

enum { FRAMES = 4, FSIZE = 256, DATA_OFF = 128, HDR = 12, MAXF = 100,
       BUFS = 16, BUFLEN = HDR + MAXF, UMEM = 0x10000 };

static uint8_t area[FRAMES * FSIZE];
static uint8_t bufs[BUFS][BUFLEN];

/* Frame seq's bytes: its length is 10 + seq, each byte seq + i. */
static uint32_t frame_len(unsigned seq)
{
	return 10 + seq;
}

static void write_frame(uint8_t *p, unsigned seq)
{
	for (uint32_t i = 0; i < frame_len(seq); i++)
		p[i] = (uint8_t)(seq * 7 + i);
}

static void check_frame(const struct vnet_done *d, unsigned seq)
{
	const uint8_t *p = (const uint8_t *)d->buf + HDR;

	assert_int_equal(d->len, frame_len(seq));
	for (uint32_t i = 0; i < d->len; i++)
		assert_int_equal(p[i], (uint8_t)(seq * 7 + i));
}

static void setup_reserve(struct vnet_reserve *r)
{
	memset(area, 0, sizeof(area));
	memset(bufs, 0, sizeof(bufs));
	assert_int_equal(vnet_reserve_init(r, FRAMES, 8, FSIZE), 0);
	assert_true(vnet_reserve_place(r, area, UMEM, DATA_OFF, HDR, MAXF));
}

/* The kernel writes frame seq into the reserve frame at addr. */
static void land_reserve(struct vnet_reserve *r, uint64_t addr, unsigned seq)
{
	write_frame(area + (addr - UMEM) + DATA_OFF, seq);
	assert_int_equal(vnet_reserve_landed(r, addr, addr + DATA_OFF,
					     frame_len(seq)),
			 VNET_RESERVE_PENDING);
}

/* The kernel writes frame seq straight into guest buffer b. */
static struct vnet_done land_direct(unsigned b, unsigned seq)
{
	write_frame(bufs[b] + HDR, seq);
	return (struct vnet_done){ .buf = bufs[b], .cookie = b,
				   .len = frame_len(seq) };
}

static void test_no_reserve_is_direct(void **state)
{
	struct vnet_reserve r;
	struct vnet_done d = land_direct(0, 3), out[2];
	uint64_t addr;

	(void)state;
	assert_int_equal(vnet_reserve_init(&r, 0, 8, FSIZE), 0);
	assert_false(vnet_reserve_place(&r, area, UMEM, DATA_OFF, HDR, MAXF));
	assert_false(vnet_reserve_fill(&r, &addr));
	assert_false(vnet_reserve_holds_back(&r));
	assert_false(vnet_reserve_wants_fill(&r, 0, 64));
	assert_int_equal(vnet_reserve_landed(&r, UMEM, UMEM + DATA_OFF, 10),
			 VNET_RESERVE_NOT_OURS);
	vnet_reserve_direct(&r, &d);
	check_frame(&d, 3);
	assert_int_equal(vnet_reserve_drain(&r, out, 2), 0);
	assert_int_equal(r.c.direct, 1);
	vnet_reserve_fini(&r);
}

/* The guest runs dry: reserve frames go to the fill ring, buffers posted
 * afterwards are kept back, and each takes the oldest waiting frame. */
static void test_dry_guest_then_spares(void **state)
{
	struct vnet_reserve r;
	struct vnet_done out[FRAMES];
	uint64_t a[FRAMES], extra;

	(void)state;
	setup_reserve(&r);
	assert_true(vnet_reserve_wants_fill(&r, 0, 64));
	assert_false(vnet_reserve_wants_fill(&r, 64, 64));
	for (unsigned i = 0; i < FRAMES; i++)
		assert_true(vnet_reserve_fill(&r, &a[i]));
	assert_false(vnet_reserve_fill(&r, &extra));
	assert_int_equal(r.c.peak, FRAMES);
	land_reserve(&r, a[0], 0);
	land_reserve(&r, a[1], 1);
	land_reserve(&r, a[2], 2);
	/* Nothing to copy into yet: nothing comes out. */
	assert_int_equal(vnet_reserve_drain(&r, out, FRAMES), 0);
	/* One frame on the fill ring and three pending: four buffers
	 * are kept, the fifth may go to the fill ring. */
	for (unsigned b = 0; b < 4; b++) {
		assert_true(vnet_reserve_holds_back(&r));
		assert_true(vnet_reserve_keep(&r, bufs[b], b));
	}
	assert_false(vnet_reserve_holds_back(&r));
	assert_int_equal(vnet_reserve_drain(&r, out, 2), 2);
	check_frame(&out[0], 0);
	check_frame(&out[1], 1);
	assert_int_equal(out[0].cookie, 0);
	assert_int_equal(vnet_reserve_drain(&r, out, FRAMES), 1);
	check_frame(&out[0], 2);
	land_reserve(&r, a[3], 3);
	assert_int_equal(vnet_reserve_drain(&r, out, FRAMES), 1);
	check_frame(&out[0], 3);
	assert_int_equal(r.c.reserve, 4);
	assert_int_equal(r.c.direct, 0);
	/* Everything free again and nothing kept: nothing more wanted. */
	assert_false(vnet_reserve_holds_back(&r));
	assert_int_equal(r.nfree, FRAMES);
	vnet_reserve_fini(&r);
}

/* A frame that landed in a guest buffer behind pending ones: the buffer
 * carries the oldest pending frame, its own waits its turn. Order holds
 * across any mix. */
static void test_direct_behind_pending_swaps(void **state)
{
	struct vnet_reserve r;
	struct vnet_done d, out[8];
	uint64_t a[FRAMES];
	unsigned next = 0;

	(void)state;
	setup_reserve(&r);
	for (unsigned i = 0; i < 2; i++)
		assert_true(vnet_reserve_fill(&r, &a[i]));
	land_reserve(&r, a[0], 0);
	land_reserve(&r, a[1], 1);
	d = land_direct(5, 2);
	vnet_reserve_direct(&r, &d);
	assert_ptr_equal(d.buf, bufs[5]);
	check_frame(&d, next++);
	d = land_direct(6, 3);
	vnet_reserve_direct(&r, &d);
	check_frame(&d, next++);
	assert_int_equal(r.c.reordered, 2);
	/* Frames 2 and 3 wait in the reserve, in order. */
	assert_int_equal(r.npend, 2);
	assert_true(vnet_reserve_keep(&r, bufs[7], 7));
	assert_true(vnet_reserve_keep(&r, bufs[8], 8));
	assert_int_equal(vnet_reserve_drain(&r, out, 8), 2);
	check_frame(&out[0], next++);
	check_frame(&out[1], next++);
	/* Nothing pending: a direct frame stays where it is. */
	d = land_direct(9, 4);
	vnet_reserve_direct(&r, &d);
	check_frame(&d, 4);
	assert_int_equal(r.c.direct, 1);
	assert_int_equal(r.c.reserve, 4);
	vnet_reserve_fini(&r);
}

/* Spares beyond what the reserve needs go back to the fill ring; while
 * the guest keeps some spare, no reserve frame is added. */
static void test_surplus_and_fill_policy(void **state)
{
	struct vnet_reserve r;
	struct vnet_done d, out[4];
	uint64_t a;

	(void)state;
	setup_reserve(&r);
	assert_true(vnet_reserve_fill(&r, &a));
	assert_true(vnet_reserve_keep(&r, bufs[0], 0));
	assert_false(vnet_reserve_surplus(&r, &d));
	assert_false(vnet_reserve_wants_fill(&r, 0, 64));
	assert_true(vnet_reserve_keep(&r, bufs[1], 1));
	assert_true(vnet_reserve_surplus(&r, &d));
	assert_ptr_equal(d.buf, bufs[1]);
	land_reserve(&r, a, 0);
	assert_int_equal(vnet_reserve_drain(&r, out, 4), 1);
	/* Dry again with the ring low: frames go; once started they keep
	 * going while the guest has nothing spare. */
	assert_true(vnet_reserve_wants_fill(&r, 10, 64));
	assert_true(vnet_reserve_fill(&r, &a));
	assert_true(vnet_reserve_wants_fill(&r, 100, 64));
	vnet_reserve_fini(&r);
}

/* Descriptors that are not ours, or ours but elsewhere, or too long; the
 * spare table's bound; detach. */
static void test_bad_landings_and_detach(void **state)
{
	struct vnet_reserve r;
	struct vnet_done d;
	uint64_t a, b;

	(void)state;
	setup_reserve(&r);
	assert_true(vnet_reserve_fill(&r, &a));
	assert_true(vnet_reserve_fill(&r, &b));
	/* Not on the fill ring, misaligned, outside. */
	assert_int_equal(vnet_reserve_landed(&r, UMEM + 2 * FSIZE,
					     UMEM + 2 * FSIZE + DATA_OFF, 10),
			 VNET_RESERVE_NOT_OURS);
	assert_int_equal(vnet_reserve_landed(&r, a + 1, a + 1 + DATA_OFF, 10),
			 VNET_RESERVE_NOT_OURS);
	assert_int_equal(vnet_reserve_landed(&r, UMEM - FSIZE, UMEM, 10),
			 VNET_RESERVE_NOT_OURS);
	assert_int_equal(vnet_reserve_landed(&r, UMEM + FRAMES * FSIZE,
					     UMEM + FRAMES * FSIZE + DATA_OFF,
					     10),
			 VNET_RESERVE_NOT_OURS);
	/* Ours, but elsewhere or too long: freed, not pending. */
	assert_int_equal(vnet_reserve_landed(&r, a, a + DATA_OFF + 4, 10),
			 VNET_RESERVE_BAD);
	assert_int_equal(vnet_reserve_landed(&r, b, b + DATA_OFF, MAXF + 1),
			 VNET_RESERVE_BAD);
	assert_int_equal(r.npend, 0);
	assert_int_equal(r.nfree, FRAMES);
	/* A frame twice: the second is not ours any more. */
	assert_true(vnet_reserve_fill(&r, &a));
	land_reserve(&r, a, 1);
	assert_int_equal(vnet_reserve_landed(&r, a, a + DATA_OFF, 10),
			 VNET_RESERVE_NOT_OURS);
	for (unsigned i = 0; i < 8; i++)
		assert_true(vnet_reserve_keep(&r, bufs[i], i));
	assert_false(vnet_reserve_keep(&r, bufs[8], 8));
	/* Detach: the pending frame is lost (counted), spares come back
	 * unused, every frame is free. */
	assert_true(vnet_reserve_fill(&r, &b));
	vnet_reserve_detach(&r);
	assert_int_equal(r.c.lost, 1);
	assert_int_equal(r.nfree, FRAMES);
	for (unsigned i = 0; i < 8; i++) {
		assert_true(vnet_reserve_take_spare(&r, &d));
		assert_int_equal(d.cookie, i);
		assert_int_equal(d.len, 0);
	}
	assert_false(vnet_reserve_take_spare(&r, &d));
	/* A geometry where a frame does not fit: no reserve. */
	assert_false(vnet_reserve_place(&r, area, UMEM, FSIZE - MAXF + 1, HDR,
					MAXF));
	assert_false(vnet_reserve_fill(&r, &a));
	vnet_reserve_fini(&r);
}

/* Random mixes against a model: every frame comes out once, in order. */
static void test_random_order(void **state)
{
	struct vnet_reserve r;
	struct vnet_done out[16], d;
	uint64_t onfill[64];
	unsigned nfill = 0, fill_head = 0, seq = 0, want = 0, guest_free = BUFS;
	/* The fill ring's model: reserve frames (addr) or guest buffers
	 * (addr < UMEM: buffer index). */
	uint8_t gbuf_busy[BUFS] = { 0 };

	(void)state;
	srand(7);
	setup_reserve(&r);
	for (unsigned step = 0; step < 20000; step++) {
		int op = rand() % 4;
		unsigned n;

		if (op == 0 && nfill < 64) {
			/* The device posts a guest buffer. */
			unsigned b;

			for (b = 0; b < BUFS && gbuf_busy[b]; b++)
				;
			if (b == BUFS)
				continue;
			gbuf_busy[b] = 1;
			guest_free--;
			if (vnet_reserve_holds_back(&r))
				assert_true(vnet_reserve_keep(&r, bufs[b], b));
			else
				onfill[(fill_head + nfill++) % 64] = b;
		} else if (op == 1) {
			/* Reserve frames when wanted. */
			uint64_t a;

			while (nfill < 64 &&
			       vnet_reserve_wants_fill(&r, nfill, 3) &&
			       vnet_reserve_fill(&r, &a))
				onfill[(fill_head + nfill++) % 64] = a;
			while (nfill < 64 && vnet_reserve_surplus(&r, &d))
				onfill[(fill_head + nfill++) % 64] = d.cookie;
		} else if (op == 2 && nfill) {
			/* A frame lands in the fill ring's next entry. */
			uint64_t e = onfill[fill_head];

			fill_head = (fill_head + 1) % 64;
			nfill--;
			if (e >= UMEM) {
				land_reserve(&r, e, seq++ % 80);
				n = vnet_reserve_drain(&r, out, 16);
			} else {
				out[0] = land_direct((unsigned)e, seq++ % 80);
				vnet_reserve_direct(&r, &out[0]);
				n = 1;
			}
			for (unsigned i = 0; i < n; i++) {
				check_frame(&out[i], want++ % 80);
				gbuf_busy[out[i].cookie] = 0;
				guest_free++;
			}
		} else if (op == 3) {
			n = vnet_reserve_drain(&r, out, 16);
			for (unsigned i = 0; i < n; i++) {
				check_frame(&out[i], want++ % 80);
				gbuf_busy[out[i].cookie] = 0;
				guest_free++;
			}
		}
		assert_true(r.nfill + r.npend + r.nfree == FRAMES);
		assert_true(r.c.peak <= FRAMES);
	}
	assert_true(want > 1000);
	assert_true(r.c.reserve > 100);
	assert_true(r.c.direct > 100);
	(void)guest_free;
	vnet_reserve_fini(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_reserve_is_direct),
		cmocka_unit_test(test_dry_guest_then_spares),
		cmocka_unit_test(test_direct_behind_pending_swaps),
		cmocka_unit_test(test_surplus_and_fill_policy),
		cmocka_unit_test(test_bad_landings_and_detach),
		cmocka_unit_test(test_random_order),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
