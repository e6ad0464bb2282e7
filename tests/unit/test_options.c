/* Option parsing: numbers with units and the common backend options. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <string.h>

#include "cli/options.h"

static void test_parse_u64(void **state)
{
	uint64_t v = 0;
	assert_int_equal(vmio_parse_u64("0", 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(vmio_parse_u64("65536", UINT64_MAX, &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(vmio_parse_u64("64k", UINT64_MAX, &v), 0);
	assert_int_equal(v, 65536);
	assert_int_equal(vmio_parse_u64("4M", UINT64_MAX, &v), 0);
	assert_int_equal(v, 4u << 20);
	assert_int_equal(vmio_parse_u64("1g", UINT64_MAX, &v), 0);
	assert_int_equal(v, 1u << 30);
	assert_int_equal(vmio_parse_u64("0x10", UINT64_MAX, &v), 0);
	assert_int_equal(v, 16);

	assert_int_equal(vmio_parse_u64("", 10, &v), -EINVAL);
	assert_int_equal(vmio_parse_u64("-1", UINT64_MAX, &v), -EINVAL);
	assert_int_equal(vmio_parse_u64("+1", UINT64_MAX, &v), -EINVAL);
	assert_int_equal(vmio_parse_u64(" 1", UINT64_MAX, &v), -EINVAL);
	assert_int_equal(vmio_parse_u64("12x", UINT64_MAX, &v), -EINVAL);
	assert_int_equal(vmio_parse_u64("1kk", UINT64_MAX, &v), -EINVAL);
	assert_int_equal(vmio_parse_u64("11", 10, &v), -ERANGE);
	assert_int_equal(vmio_parse_u64("99999999999999999999", UINT64_MAX, &v),
			 -ERANGE);
	assert_int_equal(vmio_parse_u64("17179869184g", UINT64_MAX, &v), -ERANGE);
}

static void test_common_options(void **state)
{
	struct vmio_backend_opts o;
	char err[128];

	vmio_backend_opts_init(&o, 256);
	assert_int_equal(o.fd, -1);
	assert_int_equal(o.queue_size, 256);
	assert_int_equal(vmio_backend_opts_check(&o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "--socket-path"));

	assert_int_equal(vmio_backend_opts_handle(&o, VMIO_OPT_SOCKET_PATH,
						  "/tmp/s", err, sizeof(err)), 1);
	assert_string_equal(o.socket_path, "/tmp/s");
	assert_int_equal(vmio_backend_opts_check(&o, err, sizeof(err)), 0);

	assert_int_equal(vmio_backend_opts_handle(&o, VMIO_OPT_FD, "3", err,
						  sizeof(err)), 1);
	assert_int_equal(o.fd, 3);
	assert_int_equal(vmio_backend_opts_check(&o, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "exclude"));

	assert_int_equal(vmio_backend_opts_handle(&o, VMIO_OPT_FD, "x", err,
						  sizeof(err)), -1);
	assert_non_null(strstr(err, "--fd"));
	assert_int_equal(vmio_backend_opts_handle(&o, 'z', NULL, err,
						  sizeof(err)), 0);
}

static void test_queue_size(void **state)
{
	struct vmio_backend_opts o;
	char err[128];

	vmio_backend_opts_init(&o, 256);
	assert_int_equal(vmio_backend_opts_handle(&o, VMIO_OPT_QUEUE_SIZE,
						  "32768", err, sizeof(err)), 1);
	assert_int_equal(o.queue_size, 32768);
	assert_int_equal(vmio_backend_opts_handle(&o, VMIO_OPT_QUEUE_SIZE, "1",
						  err, sizeof(err)), 1);
	assert_int_equal(o.queue_size, 1);
	const char *bad[] = { "0", "3", "1000", "65536", "abc", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(vmio_backend_opts_handle(&o, VMIO_OPT_QUEUE_SIZE,
							  bad[i], err, sizeof(err)),
				 -1);
		assert_non_null(strstr(err, "power of two"));
	}
	assert_int_equal(o.queue_size, 1);
}

static void test_cpu_list(void **state)
{
	static const struct {
		const char *text;
		int rc;
		unsigned cpus[6];
	} cases[] = {
		{ "0", 1, { 0 } },
		{ "3,1", 2, { 3, 1 } },
		{ "0-3,8", 5, { 0, 1, 2, 3, 8 } },
		{ "10-11,4095", 3, { 10, 11, 4095 } },
		{ "", -EINVAL, { 0 } },
		{ "1,", -EINVAL, { 0 } },
		{ "1-", -EINVAL, { 0 } },
		{ "3-1", -EINVAL, { 0 } },
		{ "1,1", -EINVAL, { 0 } },
		{ "0-2,2", -EINVAL, { 0 } },
		{ "-1", -EINVAL, { 0 } },
		{ "a", -EINVAL, { 0 } },
		{ "1k", -EINVAL, { 0 } },
		{ "4096", -ERANGE, { 0 } },
		{ "99999999999999999999", -ERANGE, { 0 } },
		{ "0-6", -ERANGE, { 0 } }, /* more than the room, 6 */
	};
	unsigned cpus[6];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = vmio_parse_cpu_list(cases[i].text, 4095, cpus, 6);

		if (rc != cases[i].rc)
			fail_msg("'%s': %d, expected %d", cases[i].text, rc,
				 cases[i].rc);
		for (int k = 0; k < rc; k++)
			assert_int_equal(cpus[k], cases[i].cpus[k]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_u64),
		cmocka_unit_test(test_common_options),
		cmocka_unit_test(test_queue_size),
		cmocka_unit_test(test_cpu_list),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
