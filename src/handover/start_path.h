/* The binary a successor is started from, and the arguments it gets:
 * what this process was started as, settled at start.
 *
 * Settled at start because later it cannot be: a package upgrade renames
 * a new file over the path, and /proc/self/exe then names the old,
 * deleted file ("/usr/bin/vmio (deleted)"). The path read at start still
 * names the place the new binary is installed at, which is what a reload
 * must run. */
#ifndef VMIO_HANDOVER_START_PATH_H
#define VMIO_HANDOVER_START_PATH_H

/* Records the absolute path of the running binary and argv (argc
 * entries; kept, not copied: main's argv lives as long as the process).
 * Returns 0, or -1 if no absolute path could be found (a hand-over will
 * then say so). */
int vmio_start_path_init(int argc, char **argv);

/* The absolute path, or NULL if none was found (or init was not
 * called). */
const char *vmio_start_path(void);
/* argv as main got it, NULL-terminated. */
char *const *vmio_start_argv(void);

#endif
