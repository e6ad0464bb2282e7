/* `vmio vsock --fd-store`: each VM's vhost-user session kept in
 * systemd's fd store (handover/kept_state.h), so that the vmio systemd
 * starts after a crash, or a `systemctl restart`, takes the session back
 * and the guest keeps its device: QEMU never reconnects
 * vhost-user-vsock, and never learns that the process behind its socket
 * changed.
 *
 * What is kept, under "vmio.vm.N" (N: the VM's place in the list): the
 * session record (cli/session_kept.h), named by the guest's CID and the
 * vhost-user socket's path (a restart with another VM at that place
 * leaves it alone), and the journal of its open connections, as "conns"
 * (conn_journal.h).
 * What is not: the connections themselves (their host sockets closed
 * with the dead process; each is reset on the guest's side), the bytes
 * they held, the chains popped and not given back (served again from the
 * used ring: split rings only, a packed ring's session is refused), and
 * a message the dead process had read and not answered (that VMM waits
 * on; its --message-timeout, if any, is QEMU's). */
#ifndef VMIO_CLI_VSOCK_KEPT_H
#define VMIO_CLI_VSOCK_KEPT_H

#include "cli/vsock_vms.h"
#include "event/loop.h"
#include "devices/vsock/device.h"
#include "vhost-user/backend.h"

struct vsock_kept;

/* Takes what systemd gave back (vmio_fd_store_collect), once, before any
 * VM is opened; the rest is closed by vsock_kept_done. */
void vsock_kept_collect(void);
void vsock_kept_done(void);

/* VM index's kept state, on the VM's loop. NULL (logged) without
 * memory. */
struct vsock_kept *vsock_kept_open(unsigned index,
				   const struct vsock_vm_spec *v,
				   struct vmio_loop *loop);
/* This process's copies closed; the store keeps the rest. */
void vsock_kept_free(struct vsock_kept *k);

/* After a crash: the session the store kept, restored into be (made for
 * dev, listening, no front end yet), and every connection of the dead
 * process's journal reset on the guest's side; held until
 * vmio_session_resume. Returns 1 if taken back, 0 if nothing was kept,
 * -1 if refused (logged with why: the VM changed, a record cut or
 * changed, a packed ring): the VM then starts fresh and its VMM's
 * socket, which nobody serves, is closed with the rest. */
int vsock_kept_restore(struct vsock_kept *k, struct vmio_backend *be,
		       struct vsock_device *dev);

/* From now on the session of be is kept, and dev's journal: on the VM's
 * worker, whenever a message settles (vmio_backend_set_session_watch),
 * and cleared when the front end leaves. Before the worker starts. */
void vsock_kept_start(struct vsock_kept *k, struct vmio_backend *be,
		      struct vsock_device *dev);

struct vmio_json;
/* What was kept, as the member "fd_store" of the VM's object: records
 * written, clears, sends tried again (the notify socket full), and
 * whether one is owed now (0 or 1). On the VM's loop. */
void vsock_kept_write_stats(const struct vsock_kept *k, struct vmio_json *j);

#endif
