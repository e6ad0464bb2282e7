/* For the hand-over tests (harness_handover.h). */
#include "harness_handover.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "harness.h"

static char build_bin[512]; /* $VMIO_BIN as meson gave it */
static char copy_bin[512];  /* the copy each case's vmio runs from */

int harness_handover_init(void)
{
	const char *bin = getenv("VMIO_BIN");

	if (!bin)
		return -1;
	snprintf(build_bin, sizeof(build_bin), "%s", bin);
	snprintf(copy_bin, sizeof(copy_bin), "%s", harness_path("vmio"));
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	signal(SIGPIPE, SIG_IGN);
	return 0;
}

const char *harness_handover_copy(void)
{
	return copy_bin;
}

void harness_handover_install(void)
{
	harness_install(build_bin, copy_bin);
}

pid_t harness_handover_spawn(const char *const args[])
{
	pid_t pid;

	harness_handover_install();
	setenv("VMIO_BIN", copy_bin, 1);
	pid = harness_spawn(args);
	setenv("VMIO_BIN", build_bin, 1);
	return pid;
}

pid_t harness_reload_ok(const char *ctl, pid_t old)
{
	char out[2048];
	long long pid;

	if (harness_reload(ctl, out, sizeof(out)) ||
	    !strstr(out, "handed over to pid "))
		fail_msg("reload: %s", out);
	pid = strtoll(strstr(out, "pid ") + 4, NULL, 10);
	assert_true(pid > 0 && pid != old);
	assert_int_equal(harness_control_num(ctl, "pid"), pid);
	/* The old one exits 0 once the successor took over. */
	harness_expect_exit((pid_t)old, 0);
	return (pid_t)pid;
}

void harness_handover_end(pid_t *serving)
{
	if (*serving > 0 && kill(*serving, 0) == 0)
		harness_stop(*serving, HARNESS_WAIT_MS);
	*serving = -1;
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}
