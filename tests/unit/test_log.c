/* Log lines: a "<N>" severity when stderr is the journal (JOURNAL_STREAM
 * names it), a UTC timestamp otherwise; the level filter. Each case runs
 * in a child, since the sink is worked out once per process. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/log.h"

/* Runs the logging in a child whose stderr is a pipe, journal or not;
 * returns what it wrote. */
static void capture(bool journal, char *out, size_t size)
{
	int p[2];
	pid_t pid;
	size_t got = 0;
	ssize_t n;

	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct stat st;
		char js[64];

		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		fstat(STDERR_FILENO, &st);
		snprintf(js, sizeof(js), "%llu:%llu",
			 (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino);
		if (journal)
			setenv("JOURNAL_STREAM", js, 1);
		else
			setenv("JOURNAL_STREAM", "1:2", 1); /* not ours */
		vmio_log_set_level(VMIO_LOG_INFO);
		log_err("disk %d on fire", 3);
		log_warn("smoke");
		log_debug("not shown at info");
		log_info("all well");
		_exit(0);
	}
	close(p[1]);
	while (got + 1 < size && (n = read(p[0], out + got, size - 1 - got)) > 0)
		got += (size_t)n;
	out[got] = '\0';
	close(p[0]);
	waitpid(pid, NULL, 0);
}

static void test_journal_prefixes(void **state)
{
	char out[1024];

	capture(true, out, sizeof(out));
	assert_string_equal(out, "<3>vmio: error: disk 3 on fire\n"
				 "<4>vmio: warning: smoke\n"
				 "<6>vmio: info: all well\n");
}

static void test_timestamps_elsewhere(void **state)
{
	char out[1024], *line = out;
	unsigned lines = 0;

	capture(false, out, sizeof(out));
	for (char *nl; (nl = strchr(line, '\n')); line = nl + 1, lines++) {
		int y, mo, d, h, mi, s, ms, end = 0;

		*nl = '\0';
		assert_int_equal(sscanf(line, "%4d-%2d-%2dT%2d:%2d:%2d.%3dZ %n",
					&y, &mo, &d, &h, &mi, &s, &ms, &end),
				 7);
		assert_true(y >= 2024 && mo >= 1 && mo <= 12 && ms < 1000);
		assert_int_equal(strncmp(line + end, "vmio: ", 6), 0);
	}
	assert_int_equal(lines, 3);
	assert_non_null(strstr(out, "vmio: error: disk 3 on fire"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_journal_prefixes),
		cmocka_unit_test(test_timestamps_elsewhere),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
