/* The path and arguments this process started with (start_path.h). */
#include "handover/start_path.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char start_path[PATH_MAX];
static char *const *start_argv;

/* dir/name into start_path if it is an executable file. */
static int try_path(const char *dir, size_t dlen, const char *name)
{
	size_t nlen = strlen(name);

	if (dlen + 1 + nlen >= sizeof(start_path))
		return -1;
	memcpy(start_path, dir, dlen);
	start_path[dlen] = '/';
	memcpy(start_path + dlen + 1, name, nlen + 1);
	return access(start_path, X_OK);
}

/* argv[0] made absolute, symbolic links kept: a link an upgrade points
 * elsewhere is followed at the reload, as a shell would. A bare name is
 * looked up in PATH as the shell that started us did. */
static int from_argv0(const char *a0)
{
	char cwd[PATH_MAX];
	const char *path = getenv("PATH");

	if (!a0 || !a0[0])
		return -1;
	while (a0[0] == '.' && a0[1] == '/')
		a0 += 2;
	if (a0[0] == '/')
		return try_path("", 0, a0 + 1);
	if (strchr(a0, '/'))
		return getcwd(cwd, sizeof(cwd)) ? try_path(cwd, strlen(cwd), a0)
						: -1;
	while (path && *path) {
		const char *colon = strchrnul(path, ':');

		if (colon > path && path[0] == '/' &&
		    !try_path(path, (size_t)(colon - path), a0))
			return 0;
		path = *colon ? colon + 1 : colon;
	}
	return -1;
}

int vmio_start_path_init(int argc, char **argv)
{
	ssize_t n;

	(void)argc;
	start_argv = argv;
	if (!from_argv0(argv[0]))
		return 0;
	/* Started by a name we cannot find again: the file itself. */
	n = readlink("/proc/self/exe", start_path, sizeof(start_path) - 1);
	if (n > 0 && start_path[0] == '/') {
		start_path[n] = '\0';
		return 0;
	}
	start_path[0] = '\0';
	return -1;
}

const char *vmio_start_path(void)
{
	return start_path[0] ? start_path : NULL;
}

char *const *vmio_start_argv(void)
{
	return start_argv;
}
