/* `--fd-store` (vmio vsock, vmio net): a unit's vhost-user session, and
 * what its device needs beside it, kept in systemd's fd store
 * (handover/kept_state.h), so that the vmio systemd starts after a crash,
 * or a `systemctl restart`, takes the session back and the guest keeps
 * its device: QEMU never reconnects vhost-user-vsock, and a net guest
 * whose backend comes back this way sees no disconnect at all.
 *
 * The record, rewritten on the unit's loop whenever a message has
 * changed the session (vmio_backend_set_session_watch) or the command
 * says its device's state changed (session_kept_changed):
 *   format u32 (2);
 *   the unit's identity (ops.put_identity: its guest's CID and socket,
 *     say), so that a restart with another unit at that place leaves it
 *     alone;
 *   the device's record: u32 length, bytes, u32 fd count (0, 0: none);
 *   the session record (vmio_session_snapshot), to the end;
 * its fds the session's, then the device's. Format 1 (vmio vsock before
 * vmio net kept anything) had no device record: it is read as such. */
#ifndef VMIO_CLI_SESSION_KEPT_H
#define VMIO_CLI_SESSION_KEPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "event/loop.h"
#include "util/wire.h"
#include "vhost-user/backend.h"

struct vmio_json;

struct session_kept_ops {
	/* What names the unit: its first fields. */
	void (*put_identity)(void *opaque, struct vmio_wire_writer *w);
	/* Reads them back: 0, or -1 with r failed and why (another unit's,
	 * say: the command line changed). */
	int (*check_identity)(void *opaque, struct vmio_wire_reader *r,
			      char *why, size_t why_size);
	/* On the unit's loop, the session running: appends the device's
	 * record to w and its fds to fds (at most max; *nfds in: those
	 * there, out: after; they stay the device's). Returns 0, or -1 with
	 * *why. NULL: the device keeps nothing. */
	int (*put_device)(void *opaque, struct vmio_wire_writer *w, int fds[],
			  unsigned max, unsigned *nfds, const char **why);
};

struct session_kept;

/* Takes what systemd gave back under prefix (say "vmio.vm."), once,
 * before any unit is opened; session_kept_done closes what no unit
 * took. */
void session_kept_collect(const char *prefix);
void session_kept_done(void);

/* Unit name's (for the log: "VM 2", "net device") kept state under
 * prefix (a name systemd can keep: "vmio.vm.1"), on loop. NULL (logged)
 * without memory. */
struct session_kept *session_kept_open(const char *prefix, const char *name,
				       const struct session_kept_ops *ops,
				       void *opaque, struct vmio_loop *loop);
/* This process's copies closed; the store keeps the rest. */
void session_kept_free(struct session_kept *k);

/* What a crash left, taken back (session_kept_take). */
struct session_kept_taken {
	uint8_t *bytes;
	const uint8_t *device, *session;
	size_t device_len, session_len;
	int *fds; /* the session's, then the device's */
	unsigned nsession_fds, ndevice_fds;
};

/* The record the store kept, read (its identity checked): 1, with t to
 * restore from (session_kept_restore_session, and the device's record
 * the command's to read); 0 if nothing was kept; -1 if it is refused
 * (logged with why). On 0 and -1 the store is cleared, so that a VMM
 * whose socket nobody serves sees it close. */
int session_kept_take(struct session_kept *k, struct session_kept_taken *t);
/* The record in t->bytes (len bytes, nfds fds given back) read into t:
 * the identity checked (ops.check_identity with opaque), the device's
 * record and the session's found, the fds split between them. Returns
 * 0, or -errno with why (format, identity, a cut record). What
 * session_kept_take runs; its own for the fuzzer. */
int session_kept_parse(const struct session_kept_ops *ops, void *opaque,
		       struct session_kept_taken *t, size_t len, unsigned nfds,
		       char *why, size_t why_len);
/* The session into be (made for the device, listening, no front end),
 * held until vmio_session_resume. Returns 0, or -1 (logged, the store
 * cleared). */
int session_kept_restore_session(struct session_kept *k,
				 struct session_kept_taken *t,
				 struct vmio_backend *be);
/* The command refused t (its device's record): logged, the store
 * cleared. */
void session_kept_refuse(struct session_kept *k, const char *why);
/* Closes the fds of t nobody took, and frees it. */
void session_kept_taken_fini(struct session_kept_taken *t);

/* An fd kept beside the record under PREFIX.name: taken back (the
 * caller's, or -1), or kept from now on (a copy; 0, or -errno). */
int session_kept_take_fd(struct session_kept *k, const char *name);
int session_kept_replace_fd(struct session_kept *k, const char *name,
			    int fd);

/* From now on be's session is kept (with the device's record), and
 * cleared when the front end leaves. Before the unit's worker starts. */
void session_kept_start(struct session_kept *k, struct vmio_backend *be);
/* On the unit's loop: the device's state changed (a command of the
 * guest's control queue): the record is written again. */
void session_kept_changed(struct session_kept *k);

/* What was kept, as the member "fd_store" of the unit's object: records
 * written, clears, sends tried again (the notify socket full), and
 * whether one is owed now (0 or 1). On the unit's loop. */
void session_kept_write_stats(const struct session_kept *k,
			      struct vmio_json *j);

#endif
