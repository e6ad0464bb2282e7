/* See procfs.h. */
#include "frontend/procfs.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long vmio_proc_status_kib(pid_t pid, const char *key)
{
	char path[64], line[256];
	size_t klen = strlen(key);
	long kib = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (kib < 0 && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, klen) && line[klen] == ':')
			kib = strtol(line + klen + 1, NULL, 10);
	fclose(f);
	return kib;
}

long vmio_proc_fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	long n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	d = opendir(path);
	if (!d)
		return -1;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

long vmio_proc_stat_ticks(const char *path, char *name, size_t name_size)
{
	char buf[1024], *p, *o;
	unsigned long ut, st;
	size_t n;
	FILE *f;

	f = fopen(path, "re");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The name may hold blanks and parentheses: fields 14 and 15 are
	 * counted after the last ')'. */
	p = strrchr(buf, ')');
	o = strchr(buf, '(');
	if (!p || !o || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u "
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
