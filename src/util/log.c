#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "util/clock.h"

static enum vmio_log_level current_level = VMIO_LOG_INFO;

void vmio_log_set_level(enum vmio_log_level level)
{
	current_level = level;
}

enum vmio_log_level vmio_log_get_level(void)
{
	return current_level;
}

void vmio_log(enum vmio_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	va_list ap;

	if (level > current_level)
		return;
	/* One fprintf call per line keeps lines from different threads whole. */
	char line[1024];
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "vmio: %s: %s\n", names[level], line);
}

bool vmio_ratelimit_allow(struct vmio_ratelimit *rl)
{
	uint64_t now = vmio_now_ns();

	if (now - rl->window_start_ns >= 1000000000ull) {
		rl->window_start_ns = now;
		rl->passed = 0;
	}
	if (rl->passed < rl->burst) {
		rl->passed++;
		rl->suppressed = 0;
		return true;
	}
	rl->suppressed++;
	return false;
}
