/* Logging to stderr with levels, and a rate limiter for messages that a
 * guest or a VMM can trigger at will (so a hostile peer cannot flood the
 * log). */
#ifndef VMIO_UTIL_LOG_H
#define VMIO_UTIL_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum vmio_log_level {
	VMIO_LOG_ERR = 0,
	VMIO_LOG_WARN = 1,
	VMIO_LOG_INFO = 2,
	VMIO_LOG_DEBUG = 3,
};

void vmio_log_set_level(enum vmio_log_level level);
enum vmio_log_level vmio_log_get_level(void);
void vmio_log(enum vmio_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Whether stderr is the journal (JOURNAL_STREAM names it). */
bool vmio_log_to_journal(void);

/* A line of output that is not a log message (a usage error, counters
 * printed on exit): as it is, after the "<N>" severity when stderr is the
 * journal, so that the journal files it at its level. Printed whatever
 * the level filter says. */
void vmio_log_raw(enum vmio_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define log_err(...) vmio_log(VMIO_LOG_ERR, __VA_ARGS__)
#define log_warn(...) vmio_log(VMIO_LOG_WARN, __VA_ARGS__)
#define log_info(...) vmio_log(VMIO_LOG_INFO, __VA_ARGS__)
#define log_debug(...)                                                         \
	do {                                                                   \
		if (vmio_log_get_level() >= VMIO_LOG_DEBUG)                    \
			vmio_log(VMIO_LOG_DEBUG, __VA_ARGS__);                 \
	} while (0)

/* At most `burst` messages per second pass; the rest are counted and the
 * count is reported with the next message that passes. */
struct vmio_ratelimit {
	uint64_t window_start_ns;
	unsigned burst;
	unsigned passed;
	unsigned suppressed;
};

#define VMIO_RATELIMIT_INIT(b) { .burst = (b) }

/* Returns true if the caller may log now. */
bool vmio_ratelimit_allow(struct vmio_ratelimit *rl);

#define log_ratelimited(rl, level, fmt, ...)                                   \
	do {                                                                   \
		unsigned vmio_rl_sup_ = (rl)->suppressed;                      \
		if (vmio_ratelimit_allow(rl)) {                                \
			if (vmio_rl_sup_)                                      \
				vmio_log(level, fmt " (%u similar suppressed)", \
					 ##__VA_ARGS__, vmio_rl_sup_);         \
			else                                                   \
				vmio_log(level, fmt, ##__VA_ARGS__);           \
		}                                                              \
	} while (0)

#endif
