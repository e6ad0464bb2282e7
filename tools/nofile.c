/* See nofile.h. */
#include "nofile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>

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

int nofile_raise(uint64_t need, char *err, size_t err_size)
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
