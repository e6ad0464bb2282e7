/* The hand-over's state envelope: what is written reads back, and what
 * is short, corrupted, oversized, of another format or claims fds it
 * does not own is refused with its reason. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "handover/envelope.h"

static uint8_t *written(size_t *len)
{
	struct vmio_envelope_writer w;
	const uint8_t *rec;
	uint8_t *copy;

	vmio_envelope_writer_init(&w, "1.2.3");
	assert_int_equal(vmio_envelope_add(&w, "redirect.listener", "abc", 3, 1), 0);
	assert_int_equal(vmio_envelope_add(&w, "control", "", 0, 0), 0);
	assert_int_equal(vmio_envelope_add(&w, "vhost-user.0", "\0\1\2\3", 4, 300), 0);
	assert_int_equal(vmio_envelope_finish(&w, &rec, len), 0);
	copy = malloc(*len);
	memcpy(copy, rec, *len);
	vmio_envelope_writer_fini(&w);
	return copy;
}

/* After an edit, the checksum made right again: what the reader says
 * then is about the edit, not the checksum. */
static void reseal(uint8_t *rec, size_t len)
{
	uint32_t crc = (uint32_t)crc32(0L, rec, (uInt)(len - 4));

	for (int i = 0; i < 4; i++)
		rec[len - 4 + i] = (uint8_t)(crc >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void expect_refused(const uint8_t *rec, size_t len, const char *why)
{
	struct vmio_envelope e;
	char msg[256] = "";

	assert_int_equal(vmio_envelope_read(&e, rec, len, msg, sizeof(msg)), -1);
	if (!strstr(msg, why))
		fail_msg("refused with '%s', not '%s'", msg, why);
}

static void test_round_trip(void **state)
{
	size_t len;
	uint8_t *rec = written(&len);
	struct vmio_envelope e;
	const struct vmio_envelope_section *s;
	char why[256];

	(void)state;
	assert_int_equal(vmio_envelope_read(&e, rec, len, why, sizeof(why)), 0);
	assert_int_equal(e.format, VMIO_ENVELOPE_FORMAT);
	assert_string_equal(e.version, "1.2.3");
	assert_int_equal(e.nsections, 3);
	assert_int_equal(e.nfds, 301);
	s = vmio_envelope_find(&e, "redirect.listener");
	assert_non_null(s);
	assert_int_equal(s->len, 3);
	assert_memory_equal(s->data, "abc", 3);
	assert_int_equal(s->fd_first, 0);
	assert_int_equal(s->fd_count, 1);
	s = vmio_envelope_find(&e, "vhost-user.0");
	assert_non_null(s);
	assert_int_equal(s->fd_first, 1);
	assert_int_equal(s->fd_count, 300);
	assert_memory_equal(s->data, "\0\1\2\3", 4);
	assert_null(vmio_envelope_find(&e, "net"));
	free(rec);
}

/* written()'s record byte for byte, as format 1's first release wrote
 * it: a successor of another release reads these bytes, so a change to
 * the writer must not move one of them. */
static const char format_1[] =
	/* magic, format 1, flags 0, 175 bytes in all */
	"VMIOHAND" "\001\000" "\000\000" "\257\000\000\000"
	/* the writer's version, NUL-padded to 32 */
	"1.2.3\000\000\000\000\000\000\000\000\000\000\000\000\000\000"
	"\000\000\000\000\000\000\000\000\000\000\000\000\000"
	/* 3 sections, 301 fds */
	"\003\000\000\000" "\055\001\000\000"
	/* redirect.listener: fds 0+1, 3 bytes */
	"redirect.listener\000\000\000\000\000\000\000"
	"\000\000\000\000" "\001\000\000\000" "\003\000\000\000" "abc"
	/* control: fds 1+0, no byte */
	"control\000\000\000\000\000\000\000\000\000\000\000\000\000\000"
	"\000\000\000"
	"\001\000\000\000" "\000\000\000\000" "\000\000\000\000"
	/* vhost-user.0: fds 1+300, 4 bytes */
	"vhost-user.0\000\000\000\000\000\000\000\000\000\000\000\000"
	"\001\000\000\000" "\054\001\000\000" "\004\000\000\000"
	"\000\001\002\003"
	/* CRC-32 */
	"\007\234\264\020";

static void test_format_1_bytes(void **state)
{
	size_t len;
	uint8_t *rec = written(&len);

	(void)state;
	assert_int_equal(len, sizeof(format_1) - 1);
	assert_memory_equal(rec, format_1, len);
	free(rec);
}

/* Every record cut short is refused, and so is every change of one byte
 * (CRC-32 catches them all). */
static void test_every_cut_and_flip_refused(void **state)
{
	size_t len;
	uint8_t *rec = written(&len);
	struct vmio_envelope e;
	char why[256];

	(void)state;
	for (size_t i = 0; i < len; i++) {
		assert_int_equal(vmio_envelope_read(&e, rec, i, why, sizeof(why)),
				 -1);
		rec[i] ^= 0x5a;
		assert_int_equal(vmio_envelope_read(&e, rec, len, why, sizeof(why)),
				 -1);
		rec[i] ^= 0x5a;
	}
	expect_refused(rec, 10, "shorter than its header");
	expect_refused(rec, len - 1, "arrived");
	rec[60] ^= 1; /* inside a section name: only the checksum sees it */
	expect_refused(rec, len, "checksum");
	free(rec);
}

static void test_unknown_format_refused(void **state)
{
	size_t len;
	uint8_t *rec = written(&len);

	(void)state;
	rec[8] = 99;
	reseal(rec, len);
	expect_refused(rec, len,
		       "state format version 99: this vmio reads versions 1 to 1");
	rec[8] = 0;
	reseal(rec, len);
	expect_refused(rec, len, "state format version 0");
	rec[8] = 1;
	rec[10] = 1; /* a flag */
	reseal(rec, len);
	expect_refused(rec, len, "flags");
	rec[0] = 'X';
	expect_refused(rec, len, "bad magic");
	free(rec);
}

static void test_lengths_and_indices_not_trusted(void **state)
{
	size_t len;
	uint8_t *rec = written(&len);
	uint8_t *s1 = rec + VMIO_ENVELOPE_HEADER; /* "redirect.listener" */

	(void)state;
	/* A payload past the end. */
	put32(s1 + VMIO_ENVELOPE_NAME_MAX + 8, 0xfffffff0u);
	reseal(rec, len);
	expect_refused(rec, len, "past the end of the state");
	put32(s1 + VMIO_ENVELOPE_NAME_MAX + 8, 3);
	/* An fd range that overlaps the next section's. */
	put32(s1 + VMIO_ENVELOPE_NAME_MAX + 4, 2);
	reseal(rec, len);
	expect_refused(rec, len, "the next free is");
	put32(s1 + VMIO_ENVELOPE_NAME_MAX + 4, 1);
	/* An fd range past the list. */
	put32(s1 + VMIO_ENVELOPE_NAME_MAX, 5000);
	reseal(rec, len);
	expect_refused(rec, len, "fds 5000+1");
	put32(s1 + VMIO_ENVELOPE_NAME_MAX, 0);
	/* More fds in the list than the sections claim. */
	put32(rec + 52, 302);
	reseal(rec, len);
	expect_refused(rec, len, "the sections claim 301");
	put32(rec + 52, 301);
	/* More sections than the bound. */
	put32(rec + 48, VMIO_ENVELOPE_MAX_SECTIONS + 1);
	reseal(rec, len);
	expect_refused(rec, len, "sections: at most");
	put32(rec + 48, 2);
	reseal(rec, len);
	expect_refused(rec, len, "after the last section");
	put32(rec + 48, 3);
	/* A name twice, and a name that is no name. */
	memcpy(s1, "control", 8);
	memset(s1 + 8, 0, VMIO_ENVELOPE_NAME_MAX - 8);
	reseal(rec, len);
	expect_refused(rec, len, "appears twice");
	s1[0] = 'C';
	reseal(rec, len);
	expect_refused(rec, len, "is not [a-z0-9._-]+");
	/* A declared length past the cap. */
	put32(rec + 12, VMIO_ENVELOPE_MAX_BYTES + 1);
	reseal(rec, len);
	expect_refused(rec, len, "arrived");
	free(rec);
}

static void test_writer_bounds(void **state)
{
	struct vmio_envelope_writer w;
	const uint8_t *rec;
	size_t len;

	(void)state;
	vmio_envelope_writer_init(&w, "x");
	assert_int_equal(vmio_envelope_add(&w, "Bad Name", "", 0, 0), -1);
	assert_int_equal(vmio_envelope_finish(&w, &rec, &len), -1);
	vmio_envelope_writer_fini(&w);
	vmio_envelope_writer_init(&w, "x");
	for (unsigned i = 0; i < VMIO_ENVELOPE_MAX_SECTIONS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "s%u", i);
		assert_int_equal(vmio_envelope_add(&w, name, "", 0, 0), 0);
	}
	assert_int_equal(vmio_envelope_add(&w, "one-more", "", 0, 0), -1);
	vmio_envelope_writer_fini(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_format_1_bytes),
		cmocka_unit_test(test_every_cut_and_flip_refused),
		cmocka_unit_test(test_unknown_format_refused),
		cmocka_unit_test(test_lengths_and_indices_not_trusted),
		cmocka_unit_test(test_writer_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
