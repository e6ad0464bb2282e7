/* The memory and descriptors of a process, as /proc/PID/status,
 * /proc/PID/fd and /proc/PID/maps say: how the tests check that a stalled peer does not grow
 * vmio's buffers, how the scale benchmark charges each connection, and
 * how the hand-over benchmark tells that nothing leaked. */
#ifndef VMIO_UTIL_PROC_STATUS_H
#define VMIO_UTIL_PROC_STATUS_H

#include <sys/types.h>

/* A "Key:   N kB" line of /proc/PID/status (key "VmRSS", "RssAnon",
 * ...), in KiB; -1 if the process is gone or has no such line. */
long vmio_proc_status_kib(pid_t pid, const char *key);

/* Open descriptors: the entries of /proc/PID/fd; -1 if it is gone. */
long vmio_proc_fd_count(pid_t pid);

/* Memory mappings: the lines of /proc/PID/maps; -1 if it is gone. */
long vmio_proc_maps_count(pid_t pid);

#endif
