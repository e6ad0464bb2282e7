/* The memory and descriptors of a process, as /proc/PID/status and
 * /proc/PID/fd say: how the tests check that a stalled peer does not grow
 * vmio's buffers, and how the scale benchmark charges each connection. */
#ifndef VMIO_UTIL_PROC_STATUS_H
#define VMIO_UTIL_PROC_STATUS_H

#include <sys/types.h>

/* A "Key:   N kB" line of /proc/PID/status (key "VmRSS", "RssAnon",
 * ...), in KiB; -1 if the process is gone or has no such line. */
long vmio_proc_status_kib(pid_t pid, const char *key);

/* Open descriptors: the entries of /proc/PID/fd; -1 if it is gone. */
long vmio_proc_fd_count(pid_t pid);

#endif
