/* For the hand-over tests: vmio runs from a copy in the test's directory
 * (installed as a package upgrade does, a new file renamed over the
 * path), so that a case can take the binary away from the path it was
 * started from; the test is the subreaper of what it starts, so every
 * successor, whose parent exits, becomes its child and its end is
 * waited for. */
#ifndef VMIO_TESTS_HARNESS_HANDOVER_H
#define VMIO_TESTS_HARNESS_HANDOVER_H

#include <stddef.h>
#include <sys/types.h>

/* Remembers $VMIO_BIN, makes this process a subreaper and ignores
 * SIGPIPE. Returns 0, or -1 without $VMIO_BIN. */
int harness_handover_init(void);
/* The path the copy is installed at. */
const char *harness_handover_copy(void);
/* A fresh copy of $VMIO_BIN renamed over that path (harness_install). */
void harness_handover_install(void);
/* harness_spawn of a fresh copy. */
pid_t harness_handover_spawn(const char *const args[]);
/* A reload (harness_reload) that must go through: the new pid, which
 * --control at ctl names; old exits 0. */
pid_t harness_reload_ok(const char *ctl, pid_t old);

/* A case's end, whatever happened: *serving stopped if it still runs
 * (then -1), every child this test is the parent of reaped. */
void harness_handover_end(pid_t *serving);

#endif
