/* What vmio-scale reads about another process (vmio) from /proc: its
 * memory, its descriptors and its CPU time, the figures the scale bench
 * reports per connection and per GiB. */
#ifndef VMIO_TOOLS_SCALE_PROC_H
#define VMIO_TOOLS_SCALE_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* From /proc/PID/status, in KiB. */
struct proc_mem {
	uint64_t rss, anon, file, shmem;
};

/* Each returns 0, or -1 with errno set (the process is gone, or /proc
 * says something unexpected). */
int proc_mem_read(pid_t pid, struct proc_mem *m);
/* Open descriptors: the entries of /proc/PID/fd. */
int proc_fd_count(pid_t pid, uint64_t *n);
/* utime + stime of the whole process, in seconds. */
int proc_cpu_seconds(pid_t pid, double *s);

/* Raises this process's RLIMIT_NOFILE to at least need descriptors
 * (hard limit too: as root up to fs.nr_open). Returns 0, or -1 with a
 * message in err saying what stands in the way. */
int proc_raise_nofile(uint64_t need, char *err, size_t err_size);

#endif
