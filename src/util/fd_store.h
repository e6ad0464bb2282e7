/* systemd's file descriptor store: descriptors a service gives systemd
 * to keep (FDSTORE=1, FDNAME=) and gets back, by name, when it starts
 * again after a crash or a restart (LISTEN_FDS, LISTEN_FDNAMES, as
 * socket activation passes them). The unit must allow it
 * (FileDescriptorStoreMax=); without NOTIFY_SOCKET every call here is a
 * no-op that says so.
 *
 * What systemd does with what it is given, and what this file relies on
 * (systemd's docs/FILE_DESCRIPTOR_STORE.md, src/core/service.c):
 *   - a descriptor that refers to the same open file as one already
 *     stored is dropped without a word: the name it came with is then
 *     not given back (callers store each open file once);
 *   - FDPOLL=0 keeps a descriptor that reports POLLHUP (a front end's
 *     socket the VMM closed is removed by us, not by systemd);
 *   - FDSTOREREMOVE=1 with FDNAME= closes every descriptor of that name;
 *   - past FileDescriptorStoreMax= the rest are closed (logged by
 *     systemd only).
 * Sends never wait: a notify socket that is full is an error the caller
 * retries later. */
#ifndef VMIO_UTIL_FD_STORE_H
#define VMIO_UTIL_FD_STORE_H

#include <stdbool.h>

/* A name systemd takes: 1 to 255 characters, printable ASCII, no ':'
 * (LISTEN_FDNAMES's separator). */
#define VMIO_FD_STORE_NAME_MAX 255

/* Whether a store is there to use: NOTIFY_SOCKET set. */
bool vmio_fd_store_available(void);

/* Gives systemd a copy of fd to keep under name. Returns 1 if sent, 0
 * without NOTIFY_SOCKET, -EAGAIN if the notify socket is full, other
 * -errno on failure. */
int vmio_fd_store_put(int fd, const char *name);

/* Asks systemd to close what it keeps under name. Same returns. */
int vmio_fd_store_remove(const char *name);

/* ---- At start: what systemd gave back ------------------------------- */

/* Takes the descriptors systemd passed (LISTEN_PID is this process,
 * LISTEN_FDS of them from fd 3, named by LISTEN_FDNAMES) whose names
 * start with prefix, and unsets those variables so that nothing else
 * takes them again. Descriptors with other names are left where they
 * are. Call once, before any thread starts. Returns how many were
 * taken (0: none passed). */
unsigned vmio_fd_store_collect(const char *prefix);

/* Adds fd under name to the collection, as if systemd had given it back
 * (the fuzzer's and the tests' way in). Returns 0, or -ENOMEM (fd left
 * to the caller). */
int vmio_fd_store_give(const char *name, int fd);

/* The descriptor given back under name, taken from the collection (the
 * caller owns it), or -1. */
int vmio_fd_store_take(const char *name);

/* How many of the collection's names start with prefix and are not yet
 * taken. */
unsigned vmio_fd_store_count(const char *prefix);

/* Closes what nobody took, asks systemd to close its copies too (a
 * socket nobody serves must reach its peer's end), and forgets the
 * collection. Returns how many it closed. */
unsigned vmio_fd_store_close_rest(void);

#endif
