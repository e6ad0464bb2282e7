/* A VM's session kept in systemd's fd store; see vsock_kept.h. */
#include "cli/vsock_kept.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/session_kept.h"
#include "util/fd.h"
#include "util/log.h"
#include "vhost-user/session_state.h"

#define PREFIX "vmio.vm."
#define JOURNAL "conns"

struct vsock_kept {
	struct session_kept *s;
	unsigned index;
	uint64_t guest_cid;
	const char *socket; /* "" for --fd */
};

void vsock_kept_collect(void)
{
	session_kept_collect(PREFIX);
}

void vsock_kept_done(void)
{
	session_kept_done();
}

/* The guest's CID, then the socket's path (u32 length, bytes). */
static void put_identity(void *opaque, struct vmio_wire_writer *w)
{
	const struct vsock_kept *k = opaque;
	size_t plen = strlen(k->socket);

	vmio_wire_put_u64(w, k->guest_cid);
	vmio_wire_put_u32(w, (uint32_t)plen);
	vmio_wire_put_bytes(w, k->socket, plen);
}

static int check_identity(void *opaque, struct vmio_wire_reader *r,
			  char *why, size_t why_len)
{
	const struct vsock_kept *k = opaque;
	uint64_t cid = vmio_wire_get_u64(r);
	uint32_t plen = vmio_wire_get_count(r, 1);
	const uint8_t *path = vmio_wire_get_bytes(r, plen);

	if (!vmio_wire_ok(r)) {
		snprintf(why, why_len, "its record is cut: %s", r->why);
		return -1;
	}
	if (cid == k->guest_cid && plen == strlen(k->socket) &&
	    !memcmp(path, k->socket, plen))
		return 0;
	snprintf(why, why_len,
		 "it was another VM's (CID %llu, socket %.*s): the VM list changed",
		 (unsigned long long)cid, (int)(plen > 200 ? 200 : plen),
		 (const char *)path);
	vmio_wire_fail(r, "another VM's");
	return -1;
}

static const struct session_kept_ops vsock_kept_ops = {
	.put_identity = put_identity,
	.check_identity = check_identity,
};

struct vsock_kept *vsock_kept_open(unsigned index,
				   const struct vsock_vm_spec *v,
				   struct vmio_loop *loop)
{
	struct vsock_kept *k = calloc(1, sizeof(*k));
	char prefix[32], name[32];

	snprintf(prefix, sizeof(prefix), PREFIX "%u", index);
	snprintf(name, sizeof(name), "VM %u", index + 1);
	if (k)
		k->s = session_kept_open(prefix, name, &vsock_kept_ops, k,
					 loop);
	if (!k || !k->s) {
		free(k);
		return NULL;
	}
	k->index = index;
	k->guest_cid = v->guest_cid;
	k->socket = v->socket ? v->socket : "";
	return k;
}

void vsock_kept_free(struct vsock_kept *k)
{
	if (!k)
		return;
	session_kept_free(k->s);
	free(k);
}

int vsock_kept_restore(struct vsock_kept *k, struct vmio_backend *be,
		       struct vsock_device *dev)
{
	struct session_kept_taken t;
	int journal = session_kept_take_fd(k->s, JOURNAL);
	int rc = session_kept_take(k->s, &t);
	unsigned reset;

	if (rc > 0) {
		if (session_kept_restore_session(k->s, &t, be))
			rc = -1;
		session_kept_taken_fini(&t);
	}
	if (rc > 0) {
		reset = journal >= 0 ? vsock_device_owe_rsts(dev, journal) : 0;
		log_info("VM %u: session taken back from the fd store; %u connection%s of the process before reset",
			 k->index + 1, reset, reset == 1 ? "" : "s");
	}
	vmio_close_fd(&journal);
	return rc;
}

void vsock_kept_start(struct vsock_kept *k, struct vmio_backend *be,
		      struct vsock_device *dev)
{
	int journal = vsock_device_journal_fd(dev);

	if (journal >= 0 &&
	    session_kept_replace_fd(k->s, JOURNAL, journal))
		log_warn("VM %u: its journal of connections is not in the fd store: after a crash its connections are not reset",
			 k->index + 1);
	session_kept_start(k->s, be);
}

void vsock_kept_write_stats(const struct vsock_kept *k, struct vmio_json *j)
{
	session_kept_write_stats(k->s, j);
}
