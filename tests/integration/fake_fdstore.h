/* systemd's side of the fd store, as far as vmio uses it, for tests that
 * crash vmio without a booted systemd: a notify socket that takes
 * FDSTORE=1 (dropping a second copy of an open file it keeps, as
 * systemd's same_fd() does), FDSTOREREMOVE=1 and READY=1, and a start of
 * vmio with what it keeps, as systemd passes it (LISTEN_FDS from fd 3,
 * LISTEN_PID, LISTEN_FDNAMES). The booted-systemd suite checks the real
 * one (tests/system). */
#ifndef VMIO_TESTS_FAKE_FDSTORE_H
#define VMIO_TESTS_FAKE_FDSTORE_H

#include <stdbool.h>
#include <sys/types.h>

struct fake_fdstore;

/* A store whose notify socket is at path. Fails the test if it cannot
 * be made. */
struct fake_fdstore *fake_fdstore_new(const char *path);
/* Closes every fd it keeps. */
void fake_fdstore_free(struct fake_fdstore *s);

/* Takes every message waiting on the notify socket, as systemd does
 * before it sees a child's exit. Returns how many. */
unsigned fake_fdstore_drain(struct fake_fdstore *s);
/* Takes messages until READY=1 has come (since the last start), up to
 * timeout_ms. */
bool fake_fdstore_wait_ready(struct fake_fdstore *s, int timeout_ms);

/* How many fds it keeps, and the one under name (-1: none): both after
 * every message already sent has been taken, so that what a sender did
 * before it answered the test is there, whatever the reader thread's
 * pace. */
unsigned fake_fdstore_count(struct fake_fdstore *s);
int fake_fdstore_find(struct fake_fdstore *s, const char *name);

/* Starts $VMIO_BIN with args (NULL-terminated, without argv[0]) as
 * systemd would: NOTIFY_SOCKET set, and every fd kept passed. Its stderr
 * goes to the harness's log. Returns the pid. */
pid_t fake_fdstore_spawn(struct fake_fdstore *s, const char *const args[]);
/* The same, returning once it has said READY=1 and its --control socket
 * (control) listens. */
pid_t fake_fdstore_start(struct fake_fdstore *s, const char *const args[],
			 const char *control);
/* SIGKILL to pid, reaped, and what it said before it died taken, as
 * systemd does before it handles the exit. */
void fake_fdstore_kill(struct fake_fdstore *s, pid_t pid);
/* SIGTERM to pid (a stop), reaped (it must exit 0), and what it said
 * taken: the store kept, as FileDescriptorStorePreserve=yes keeps it. */
void fake_fdstore_stop(struct fake_fdstore *s, pid_t pid);

/* A test case's: a fresh log and a store at harness_path("notify");
 * at its end, the process it serves with (*serving) stopped whatever
 * happened, and the store freed. */
struct fake_fdstore *fake_fdstore_case_begin(void);
void fake_fdstore_case_end(struct fake_fdstore **s, pid_t *serving);

#endif
