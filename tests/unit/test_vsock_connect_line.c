/* The hybrid-vsock CONNECT line parser: valid lines however they are
 * split, stream data after the newline left alone, and every way a host
 * program can get it wrong; and the seqpacket form, where the first
 * message is the line and nothing else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "devices/vsock/connect_line.h"

/* Feeds s in one piece. */
static enum vsock_line_result feed_all(const char *s, size_t max,
				       size_t *consumed, uint32_t *port,
				       const char **why)
{
	struct vsock_connect_line l;

	vsock_connect_line_init(&l, max);
	*why = NULL;
	return vsock_connect_line_feed(&l, (const uint8_t *)s, strlen(s),
				       consumed, port, why);
}

static void expect_done(const char *s, uint32_t want)
{
	size_t consumed;
	uint32_t port = 0xdeadbeef;
	const char *why;

	assert_int_equal(feed_all(s, 64, &consumed, &port, &why),
			 VSOCK_LINE_DONE);
	assert_int_equal(consumed, strlen(s));
	assert_int_equal(port, want);
}

static void expect_bad(const char *s, size_t max)
{
	size_t consumed;
	uint32_t port;
	const char *why;

	assert_int_equal(feed_all(s, max, &consumed, &port, &why),
			 VSOCK_LINE_BAD);
	assert_non_null(why);
	assert_true(consumed <= strlen(s));
}

static void test_valid(void **state)
{
	(void)state;
	expect_done("CONNECT 5000\n", 5000);
	expect_done("connect 52\n", 52);
	expect_done("CoNnEcT 1\n", 1);
	expect_done("CONNECT \t  7\n", 7);
	expect_done("CONNECT\t8\r\n", 8);
	expect_done("CONNECT 0\n", 0);
	expect_done("CONNECT 4294967295\n", 4294967295u);
	expect_done("CONNECT 0004294967295\n", 4294967295u);
}

static void test_split_one_byte_at_a_time(void **state)
{
	const char *s = "connect 1234\r\n";
	struct vsock_connect_line l;
	size_t i, consumed;
	uint32_t port = 0;
	const char *why = NULL;

	(void)state;
	vsock_connect_line_init(&l, 32);
	for (i = 0; i + 1 < strlen(s); i++) {
		assert_int_equal(vsock_connect_line_feed(&l,
				 (const uint8_t *)s + i, 1, &consumed, &port,
				 &why), VSOCK_LINE_MORE);
		assert_int_equal(consumed, 1);
	}
	assert_int_equal(vsock_connect_line_feed(&l, (const uint8_t *)s + i, 1,
						 &consumed, &port, &why),
			 VSOCK_LINE_DONE);
	assert_int_equal(consumed, 1);
	assert_int_equal(port, 1234);

	/* Finished: nothing more is taken, and DONE is not repeated. */
	assert_int_equal(vsock_connect_line_feed(&l, (const uint8_t *)"x", 1,
						 &consumed, &port, &why),
			 VSOCK_LINE_BAD);
	assert_int_equal(consumed, 0);
}

static void test_empty_feed(void **state)
{
	struct vsock_connect_line l;
	size_t consumed = 99;
	uint32_t port;
	const char *why;

	(void)state;
	vsock_connect_line_init(&l, 32);
	assert_int_equal(vsock_connect_line_feed(&l, NULL, 0, &consumed, &port,
						 &why), VSOCK_LINE_MORE);
	assert_int_equal(consumed, 0);
}

static void test_data_after_newline_not_consumed(void **state)
{
	static const char s[] = "CONNECT 99\nhello\nCONNECT 1\n";
	struct vsock_connect_line l;
	size_t consumed;
	uint32_t port = 0;
	const char *why;

	(void)state;
	vsock_connect_line_init(&l, 32);
	/* In two pieces, the second holding the newline and the data. */
	assert_int_equal(vsock_connect_line_feed(&l, (const uint8_t *)s, 4,
						 &consumed, &port, &why),
			 VSOCK_LINE_MORE);
	assert_int_equal(consumed, 4);
	assert_int_equal(vsock_connect_line_feed(&l, (const uint8_t *)s + 4,
						 sizeof(s) - 1 - 4, &consumed,
						 &port, &why),
			 VSOCK_LINE_DONE);
	assert_int_equal(consumed, strlen("CONNECT 99\n") - 4);
	assert_int_equal(port, 99);
}

static void test_length_limit(void **state)
{
	char s[VSOCK_CONNECT_LINE_MAX_LIMIT + 8];
	struct vsock_connect_line l;
	size_t consumed, n;
	uint32_t port = 0;
	const char *why = NULL;

	(void)state;
	/* Exactly max bytes with the newline is fine; one more is not. */
	expect_done("CONNECT       5\n", 5); /* 16 bytes, max 64 */
	assert_int_equal(feed_all("CONNECT       5\n", 16, &consumed, &port,
				  &why), VSOCK_LINE_DONE);
	assert_int_equal(feed_all("CONNECT        5\n", 16, &consumed, &port,
				  &why), VSOCK_LINE_BAD);
	assert_string_equal(why, "line too long");
	/* Refused at the byte that cannot fit, without waiting for '\n':
	 * the 16th byte would leave no room for it. */
	assert_int_equal(consumed, 16);

	/* A line that never ends is refused at the limit, however slowly it
	 * arrives, and the bytes after the limit are not taken. */
	memset(s, 'a', sizeof(s));
	vsock_connect_line_init(&l, VSOCK_CONNECT_LINE_MAX_LIMIT);
	for (n = 0; n + 1 < VSOCK_CONNECT_LINE_MAX_LIMIT; n++)
		assert_int_equal(vsock_connect_line_feed(&l,
				 (const uint8_t *)s + n, 1, &consumed, &port,
				 &why), VSOCK_LINE_MORE);
	assert_int_equal(vsock_connect_line_feed(&l, (const uint8_t *)s + n, 8,
						 &consumed, &port, &why),
			 VSOCK_LINE_BAD);
	assert_int_equal(consumed, 1);
	assert_string_equal(why, "line too long");
}

static void test_max_clamped(void **state)
{
	struct vsock_connect_line l;

	(void)state;
	vsock_connect_line_init(&l, 0);
	assert_int_equal(l.max, VSOCK_CONNECT_LINE_MAX_MIN);
	vsock_connect_line_init(&l, 100000);
	assert_int_equal(l.max, VSOCK_CONNECT_LINE_MAX_LIMIT);
	vsock_connect_line_init(&l, 40);
	assert_int_equal(l.max, 40);
}

static void test_bad_lines(void **state)
{
	static const char *const bad[] = {
		"\n",                    /* empty */
		"\r\n",
		"CONNEC 5\n",            /* unknown keyword */
		"CONNECTX 5\n",
		"LISTEN 5\n",
		" CONNECT 5\n",          /* leading blank */
		"CONNECT\n",             /* missing port */
		"CONNECT \n",
		"CONNECT\t\r\n",
		"CONNECT5\n",            /* no blank */
		"CONNECT x\n",           /* not numeric */
		"CONNECT -1\n",          /* sign */
		"CONNECT +1\n",
		"CONNECT 0x10\n",        /* trailing garbage */
		"CONNECT 4294967296\n",  /* overflow */
		"CONNECT 99999999999999999999999\n",
		"CONNECT 5 \n",          /* trailing blank */
		"CONNECT 5 6\n",
		"CONNECT 5\r\r\n",
		"CONNECT 5\rx\n",
		"CONNECT 5x\n",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_bad(bad[i], 64);
	}
}

static void test_reasons(void **state)
{
	size_t consumed;
	uint32_t port;
	const char *why;

	(void)state;
	feed_all("HELLO 1\n", 64, &consumed, &port, &why);
	assert_string_equal(why, "unknown keyword (want CONNECT)");
	feed_all("CONNECT\n", 64, &consumed, &port, &why);
	assert_string_equal(why, "missing port");
	feed_all("CONNECT abc\n", 64, &consumed, &port, &why);
	assert_string_equal(why, "port is not a decimal number");
	feed_all("CONNECT 4294967296\n", 64, &consumed, &port, &why);
	assert_string_equal(why, "port out of range");
	feed_all("CONNECT 12 \n", 64, &consumed, &port, &why);
	assert_string_equal(why, "trailing garbage after port");
}

static void test_nul_byte(void **state)
{
	static const uint8_t s[] = "CONN\0ECT 5\n";
	struct vsock_connect_line l;
	size_t consumed;
	uint32_t port;
	const char *why = NULL;

	(void)state;
	vsock_connect_line_init(&l, 64);
	/* Refused at the NUL itself, not at the newline. */
	assert_int_equal(vsock_connect_line_feed(&l, s, sizeof(s) - 1,
						 &consumed, &port, &why),
			 VSOCK_LINE_BAD);
	assert_int_equal(consumed, 5);
	assert_string_equal(why, "NUL byte in line");
	/* Finished after BAD too. */
	assert_int_equal(vsock_connect_line_feed(&l, s + 5, 1, &consumed,
						 &port, &why), VSOCK_LINE_BAD);
	assert_int_equal(consumed, 0);
}

static enum vsock_line_result message(const char *s, uint32_t *port,
				      const char **why)
{
	*why = NULL;
	return vsock_connect_line_message((const uint8_t *)s, strlen(s), 64,
					  port, why);
}

static void test_message(void **state)
{
	static const char *const bad[] = {
		"CONNECT 5000",       /* no newline: a message does not go on */
		"CONNECT 5000\nabc",  /* data after the line, same message */
		"CONNECT 5000\n\n",
		"",
		"\n",
		"CONNECT x\n",
		"CONNECT 99999999999\n",
		"CONNECT 1\0\n",
	};
	uint32_t port = 0;
	const char *why;

	(void)state;
	assert_int_equal(message("CONNECT 5000\n", &port, &why),
			 VSOCK_LINE_DONE);
	assert_int_equal(port, 5000);
	assert_int_equal(message("connect\t7\r\n", &port, &why),
			 VSOCK_LINE_DONE);
	assert_int_equal(port, 7);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(message(bad[i], &port, &why),
				 VSOCK_LINE_BAD);
		assert_non_null(why);
	}
	assert_string_equal((message("CONNECT 1", &port, &why), why),
			    "first message is not a whole line");
	assert_string_equal((message("CONNECT 1\nx", &port, &why), why),
			    "more than the line in its message");
	/* Longer than the maximum: refused as a stream line would be. */
	assert_int_equal(vsock_connect_line_message(
				 (const uint8_t *)"CONNECT        1\n", 17, 16,
				 &port, &why),
			 VSOCK_LINE_BAD);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_split_one_byte_at_a_time),
		cmocka_unit_test(test_empty_feed),
		cmocka_unit_test(test_data_after_newline_not_consumed),
		cmocka_unit_test(test_length_limit),
		cmocka_unit_test(test_max_clamped),
		cmocka_unit_test(test_bad_lines),
		cmocka_unit_test(test_reasons),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_message),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
