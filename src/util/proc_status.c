#include "util/proc_status.h"

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
	f = fopen(path, "r");
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

long vmio_proc_maps_count(pid_t pid)
{
	char path[64], buf[4096];
	long n = 0;
	size_t got;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while ((got = fread(buf, 1, sizeof(buf), f)) > 0)
		for (size_t i = 0; i < got; i++)
			n += buf[i] == '\n';
	fclose(f);
	return n;
}
