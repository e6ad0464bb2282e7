/* See scale_proc.h. */
#include "scale_proc.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

int proc_mem_read(pid_t pid, struct proc_mem *m)
{
	static const struct {
		const char *key;
		size_t off;
	} keys[] = {
		{ "VmRSS:", offsetof(struct proc_mem, rss) },
		{ "RssAnon:", offsetof(struct proc_mem, anon) },
		{ "RssFile:", offsetof(struct proc_mem, file) },
		{ "RssShmem:", offsetof(struct proc_mem, shmem) },
	};
	char path[64], line[256];
	unsigned found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	*m = (struct proc_mem){ 0 };
	while (fgets(line, sizeof(line), f))
		for (unsigned i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
			size_t n = strlen(keys[i].key);

			if (strncmp(line, keys[i].key, n))
				continue;
			*(uint64_t *)((char *)m + keys[i].off) =
				strtoull(line + n, NULL, 10);
			found |= 1u << i;
		}
	fclose(f);
	if (found != (1u << (sizeof(keys) / sizeof(keys[0]))) - 1) {
		errno = EPROTO;
		return -1;
	}
	return 0;
}

int proc_fd_count(pid_t pid, uint64_t *n)
{
	char path[64];
	struct dirent *e;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	*n = 0;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			(*n)++;
	closedir(d);
	return 0;
}

int proc_cpu_seconds(pid_t pid, double *s)
{
	char path[64], buf[1024], *p;
	unsigned long long ut, st;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: fields count
	 * from the last ')'. utime and stime are fields 14 and 15, the 12th
	 * and 13th after it. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			 "%llu %llu", &ut, &st) != 2) {
		errno = EPROTO;
		return -1;
	}
	*s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	return 0;
}

/* Whether CAP_SYS_RESOURCE is in our effective set (bit 24 of CapEff). */
static bool has_sys_resource(void)
{
	unsigned long long caps = 0;
	char line[256];
	bool found = false;
	FILE *f = fopen("/proc/self/status", "re");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &caps) == 1;
	fclose(f);
	return found && (caps >> 24 & 1);
}

int proc_raise_nofile(uint64_t need, char *err, size_t err_size)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl)) {
		snprintf(err, err_size, "getrlimit: %s", strerror(errno));
		return -1;
	}
	if (rl.rlim_cur >= need)
		return 0;
	if (rl.rlim_max < need)
		rl.rlim_max = need;
	rl.rlim_cur = need;
	if (setrlimit(RLIMIT_NOFILE, &rl)) {
		int e = errno;
		unsigned long long nr_open = 0;
		FILE *f = fopen("/proc/sys/fs/nr_open", "re");

		if (f) {
			if (fscanf(f, "%llu", &nr_open) != 1)
				nr_open = 0;
			fclose(f);
		}
		getrlimit(RLIMIT_NOFILE, &rl);
		snprintf(err, err_size,
			 "RLIMIT_NOFILE: %" PRIu64 " descriptors are needed, "
			 "one per connection, and the hard limit %llu cannot "
			 "be raised that far (%s: that needs "
			 "CAP_SYS_RESOURCE%s, and at most fs.nr_open, %llu); "
			 "ask for fewer connections",
			 need, (unsigned long long)rl.rlim_max, strerror(e),
			 has_sys_resource() ? "" : ", which this process "
						   "does not have",
			 nr_open);
		return -1;
	}
	return 0;
}
