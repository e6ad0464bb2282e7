#include "util/proc_stat.h"

#include <stdio.h>
#include <string.h>

long vmio_proc_stat_ticks(const char *path, char *name, size_t name_size)
{
	char buf[1024], *p, *o;
	unsigned long ut, st;
	size_t n;
	FILE *f;

	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* Fields 14 and 15, counted after the ')' that ends the name: the
	 * name itself may hold spaces and parentheses. */
	p = strrchr(buf, ')');
	o = strchr(buf, '(');
	if (!p || !o || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
			       "%*u %*u %lu %lu", &ut, &st) != 2)
		return -1;
	if (name)
		snprintf(name, name_size, "%.*s", (int)(p - o - 1), o + 1);
	return (long)(ut + st);
}

long vmio_proc_cpu_ticks(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	return vmio_proc_stat_ticks(path, NULL, 0);
}
