/* The bounded JSON writer: commas and nesting, escaping of whatever a
 * user or guest names, and the cap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "util/json.h"

static void assert_doc(struct vmio_json *j, const char *want)
{
	assert_false(j->truncated);
	assert_int_equal(j->len, strlen(want));
	assert_memory_equal(j->buf, want, j->len);
}

static void test_nesting(void **state)
{
	struct vmio_json j;

	(void)state;
	vmio_json_init(&j, 4096);
	vmio_json_object_begin(&j);
	vmio_json_kv_uint(&j, "a", 1);
	vmio_json_key(&j, "list");
	vmio_json_array_begin(&j);
	vmio_json_uint(&j, 18446744073709551615ull);
	vmio_json_int(&j, -5);
	vmio_json_object_begin(&j);
	vmio_json_object_end(&j);
	vmio_json_array_begin(&j);
	vmio_json_array_end(&j);
	vmio_json_bool(&j, true);
	vmio_json_null(&j);
	vmio_json_array_end(&j);
	vmio_json_key(&j, "raw");
	vmio_json_raw(&j, "{\"x\":2}", 7);
	vmio_json_kv_string(&j, "s", NULL);
	vmio_json_object_end(&j);
	assert_doc(&j, "{\"a\":1,\"list\":[18446744073709551615,-5,{},[],"
		       "true,null],\"raw\":{\"x\":2},\"s\":null}");
	assert_int_equal(j.depth, 0);
	vmio_json_fini(&j);
}

static void test_escaping(void **state)
{
	struct vmio_json j;
	/* quote, backslash, newline, tab, other controls, DEL, valid UTF-8
	 * (é, €, U+1F600), a lone continuation byte, an overlong '/', a
	 * surrogate, a cut sequence at the end */
	static const char in[] = "q\"b\\n\nt\tc\x01\x1f" "d\x7f"
				 "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
				 "\x80" "\xc0\xaf" "\xed\xa0\x80" "\xe2\x82";

	(void)state;
	vmio_json_init(&j, 4096);
	vmio_json_string_n(&j, in, sizeof(in) - 1);
	assert_doc(&j, "\"q\\\"b\\\\n\\nt\\tc\\u0001\\u001fd\\u007f"
		       "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"
		       "\\u0080\\u00c0\\u00af\\u00ed\\u00a0\\u0080"
		       "\\u00e2\\u0082\"");
	vmio_json_reset(&j);
	/* A NUL inside a counted string is written, not an end. */
	vmio_json_string_n(&j, "a\0b", 3);
	assert_doc(&j, "\"a\\u0000b\"");
	vmio_json_reset(&j);
	vmio_json_object_begin(&j);
	vmio_json_kv_uint(&j, "k\"ey", 0);
	vmio_json_object_end(&j);
	assert_doc(&j, "{\"k\\\"ey\":0}");
	vmio_json_fini(&j);
}

static void test_cap(void **state)
{
	struct vmio_json j;
	char big[1000];

	(void)state;
	memset(big, 'x', sizeof(big));
	vmio_json_init(&j, 64);
	vmio_json_array_begin(&j);
	vmio_json_string_n(&j, big, sizeof(big));
	assert_true(j.truncated);
	assert_true(j.len <= 64);
	assert_true(j.size <= 64);
	/* Once truncated it stays so, and writes nothing more. */
	size_t len = j.len;
	vmio_json_uint(&j, 1);
	assert_int_equal(j.len, len);
	vmio_json_reset(&j);
	assert_false(j.truncated);
	vmio_json_uint(&j, 7);
	assert_doc(&j, "7");

	/* Exactly the cap fits. */
	vmio_json_reset(&j);
	vmio_json_string_n(&j, big, 62);
	assert_false(j.truncated);
	assert_int_equal(j.len, 64);
	assert_int_equal(j.buf[0], '"');
	assert_int_equal(j.buf[63], '"');
	vmio_json_fini(&j);
}

static void test_depth(void **state)
{
	struct vmio_json j;

	(void)state;
	vmio_json_init(&j, 4096);
	for (unsigned i = 0; i < VMIO_JSON_MAX_DEPTH; i++)
		vmio_json_array_begin(&j);
	assert_false(j.truncated);
	vmio_json_array_begin(&j);
	assert_true(j.truncated);
	vmio_json_reset(&j);
	vmio_json_array_end(&j); /* one end too many */
	assert_true(j.truncated);
	vmio_json_fini(&j);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_nesting),
		cmocka_unit_test(test_escaping),
		cmocka_unit_test(test_cap),
		cmocka_unit_test(test_depth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
