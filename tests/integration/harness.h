/* Shared by the integration tests: start `vmio` (the binary named by the
 * VMIO_BIN environment variable) in another process, wait for its socket,
 * and stop it, all bounded in time. */
#ifndef VMIO_TESTS_HARNESS_H
#define VMIO_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* A fresh directory under $TMPDIR (or /tmp), removed by harness_cleanup. */
const char *harness_tmpdir(void);
/* Joins harness_tmpdir() and name into a static-lifetime string. */
const char *harness_path(const char *name);

/* Starts $VMIO_BIN with args (NULL-terminated, without argv[0]). Its
 * stderr goes to harness_path("vmio.log") (appended). Returns the pid, or
 * -1 (and fails the test) if it cannot be started. */
pid_t harness_spawn(const char *const args[]);

/* Waits until a unix socket at path accepts connections. Returns true on
 * success, false after timeout_ms. */
bool harness_wait_socket(const char *path, int timeout_ms);

/* Waits for pid to exit, up to timeout_ms. Returns its wait status, or -1
 * on timeout (the process is left running). */
int harness_wait_exit(pid_t pid, int timeout_ms);

/* SIGTERM, then SIGKILL after timeout_ms; returns the wait status. */
int harness_stop(pid_t pid, int timeout_ms);

/* True if the log written by spawned processes contains needle. */
bool harness_log_contains(const char *needle);

/* Runs $VMIO_BIN with args to completion (bounded by timeout_ms), capturing
 * stdout and stderr into the given buffers (NUL-terminated, truncated to
 * their size). Returns the exit status, or -1 on timeout or failure. */
int harness_run(const char *const args[], int timeout_ms, char *out,
		size_t out_size, char *err, size_t err_size);

/* Removes the temporary directory. */
void harness_cleanup(void);

#endif
