#include "util/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

/* Where stderr goes decides the line's prefix: the journal (systemd says
 * so in JOURNAL_STREAM, "DEV:INODE" of the stream it gave us) reads a
 * "<N>" severity and stamps the time itself; anything else gets a UTC
 * timestamp. Worked out once; 0 until then. */
enum { SINK_UNKNOWN, SINK_JOURNAL, SINK_PLAIN };
static int sink;

static int find_sink(void)
{
	const char *js = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;

	if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 &&
	    fstat(STDERR_FILENO, &st) == 0 &&
	    (unsigned long long)st.st_dev == dev &&
	    (unsigned long long)st.st_ino == ino)
		return SINK_JOURNAL;
	return SINK_PLAIN;
}

/* syslog(3) priorities: LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG. */
static const int prio[] = { 3, 4, 6, 7 };

static int get_sink(void)
{
	int where = __atomic_load_n(&sink, __ATOMIC_RELAXED);

	if (where == SINK_UNKNOWN) {
		where = find_sink();
		__atomic_store_n(&sink, where, __ATOMIC_RELAXED);
	}
	return where;
}

bool vmio_log_to_journal(void)
{
	return get_sink() == SINK_JOURNAL;
}

void vmio_log_raw(enum vmio_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (get_sink() == SINK_JOURNAL)
		fprintf(stderr, "<%d>%s\n", prio[level], line);
	else
		fprintf(stderr, "%s\n", line);
}

void vmio_log(enum vmio_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warning", "info", "debug" };
	int where;
	char line[1024], stamp[80] = "";
	va_list ap;

	if (level > current_level)
		return;
	where = get_sink();
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (where == SINK_PLAIN) {
		struct timespec ts;
		struct tm tm;

		clock_gettime(CLOCK_REALTIME, &ts);
		gmtime_r(&ts.tv_sec, &tm);
		snprintf(stamp, sizeof(stamp),
			 "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			 tm.tm_hour, tm.tm_min, tm.tm_sec,
			 (long)(ts.tv_nsec / 1000000) % 1000);
		/* One fprintf call per line keeps lines from different
		 * threads whole. */
		fprintf(stderr, "%svmio: %s: %s\n", stamp, names[level], line);
	} else {
		fprintf(stderr, "<%d>vmio: %s: %s\n", prio[level], names[level],
			line);
	}
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
