/* What /proc says about another process, the backend under test: its
 * resident memory, its descriptors and the CPU time it (or one of its
 * threads) used. For the tests and benchmarks that watch `vmio` from
 * outside. */
#ifndef VMIO_FRONTEND_PROCFS_H
#define VMIO_FRONTEND_PROCFS_H

#include <stddef.h>
#include <sys/types.h>

/* A "Key:   N kB" line of /proc/PID/status (key "VmRSS", "RssAnon",
 * ...), in KiB; -1 if the process is gone or has no such line. */
long vmio_proc_status_kib(pid_t pid, const char *key);

/* Open descriptors: the entries of /proc/PID/fd; -1 if it is gone. */
long vmio_proc_fd_count(pid_t pid);

/* utime + stime of a stat file (/proc/PID/stat, or a thread's
 * /proc/PID/task/TID/stat) in clock ticks, and the name in it (comm,
 * "vmio-w1" for vmio's worker 1) if name is not NULL; -1 if it is gone. */
long vmio_proc_stat_ticks(const char *path, char *name, size_t name_size);

/* The same for a whole process. */
long vmio_proc_cpu_ticks(pid_t pid);

#endif
