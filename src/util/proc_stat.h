/* The CPU time a process, or one of its threads, has used, as
 * /proc/PID/stat (or /proc/PID/task/TID/stat) says: how the tests check
 * that vmio does not spin and which worker did the work, and how the
 * benchmarks charge a relay that keeps running. */
#ifndef VMIO_UTIL_PROC_STAT_H
#define VMIO_UTIL_PROC_STAT_H

#include <stddef.h>
#include <sys/types.h>

/* utime + stime in clock ticks (sysconf(_SC_CLK_TCK) a second) from the
 * stat file at path, and the name in it (comm) into name unless it is
 * NULL. Returns -1 if the file cannot be read or parsed (the process is
 * gone). */
long vmio_proc_stat_ticks(const char *path, char *name, size_t name_size);

/* The same for the whole process pid (/proc/PID/stat). */
long vmio_proc_cpu_ticks(pid_t pid);

#endif
