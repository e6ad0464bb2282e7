/* Log lines a peer can trigger (a guest, a VMM, a host program): every
 * one goes through a rate limiter (architecture.md section 3), so a
 * hostile peer cannot flood the log. A line below the level filter is not
 * counted against the limit: a -v diagnostic that nobody sees must not
 * hide the warning that follows it. */
#ifndef VMIO_DEVICES_VSOCK_PEER_LOG_H
#define VMIO_DEVICES_VSOCK_PEER_LOG_H

#include "util/log.h"

#define vsock_peer_log(rl, level, ...)                                         \
	do {                                                                   \
		if (vmio_log_get_level() >= (level))                           \
			log_ratelimited(rl, level, __VA_ARGS__);               \
	} while (0)

#endif
