/* A VM's session kept in systemd's fd store; see vsock_kept.h. */
#include "cli/vsock_kept.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "event/loop.h"
#include "handover/kept_state.h"
#include "util/fd.h"
#include "util/fd_store.h"
#include "util/json.h"
#include "util/log.h"
#include "util/wire.h"
#include "vhost-user/session_state.h"

#define FORMAT 1u
#define PREFIX "vmio.vm."
#define JOURNAL "conns"
/* A notify socket that was full is tried again after this long: systemd
 * reads it as it goes (it takes 512 datagrams, this host's kernel 10
 * where nothing raised net.unix.max_dgram_qlen). */
#define RETRY_MS 20

struct vsock_kept {
	struct vmio_kept *kept;
	struct vmio_backend *be;
	struct vsock_device *dev;
	unsigned index;
	uint64_t guest_cid;
	const char *socket; /* "" for --fd */
	struct vmio_ratelimit rl;
	struct vmio_timer retry; /* on the VM's loop */
	enum { KEPT_DONE, KEPT_WRITE, KEPT_CLEAR } owed;
	uint64_t writes, clears, retries; /* --control's fd_store */
};

void vsock_kept_collect(void)
{
	unsigned n = vmio_fd_store_collect(PREFIX);

	if (n)
		log_info("fd store: %u descriptor%s given back", n,
			 n == 1 ? "" : "s");
}

void vsock_kept_done(void)
{
	unsigned n = vmio_fd_store_close_rest();

	if (n)
		log_info("fd store: %u descriptor%s of no VM served now closed",
			 n, n == 1 ? "" : "s");
}

static void retry_cb(void *opaque);

struct vsock_kept *vsock_kept_open(unsigned index,
				   const struct vsock_vm_spec *v,
				   struct vmio_loop *loop)
{
	struct vsock_kept *k = calloc(1, sizeof(*k));
	char prefix[32];

	snprintf(prefix, sizeof(prefix), PREFIX "%u", index);
	if (k)
		k->kept = vmio_kept_open(prefix);
	if (k && k->kept && vmio_timer_init(&k->retry, loop, retry_cb, k)) {
		vmio_kept_free(k->kept);
		k->kept = NULL;
	}
	if (!k || !k->kept) {
		free(k);
		log_err("VM %u: out of memory for its fd store state",
			index + 1);
		return NULL;
	}
	k->index = index;
	k->guest_cid = v->guest_cid;
	k->socket = v->socket ? v->socket : "";
	k->rl = (struct vmio_ratelimit)VMIO_RATELIMIT_INIT(5);
	return k;
}

void vsock_kept_free(struct vsock_kept *k)
{
	if (!k)
		return;
	vmio_timer_fini(&k->retry);
	vmio_kept_free(k->kept);
	free(k);
}

/* What the store is owed, sent now, or again on the timer while the
 * notify socket is full. */
static void owe(struct vsock_kept *k, int rc, int what)
{
	if (!rc && what == KEPT_WRITE)
		k->writes++;
	else if (!rc)
		k->clears++;
	k->retries += rc == -EAGAIN;
	k->owed = rc == -EAGAIN ? what : KEPT_DONE;
	if (k->owed != KEPT_DONE)
		vmio_timer_arm_ms(&k->retry, RETRY_MS);
	else
		vmio_timer_cancel(&k->retry);
}

static void clear(struct vsock_kept *k)
{
	owe(k, vmio_kept_clear(k->kept), KEPT_CLEAR);
}

/* ---- After a crash ------------------------------------------------------ */

/* The VM's record around the session; *session points into bytes. */
static int parse_vm(const struct vsock_kept *k, const uint8_t *bytes,
		    size_t len, const uint8_t **session, size_t *session_len,
		    char *why, size_t why_len)
{
	struct vmio_wire_reader r;
	uint32_t format, plen;
	uint64_t cid;
	const uint8_t *path;

	vmio_wire_reader_init(&r, bytes, len);
	format = vmio_wire_get_u32(&r);
	cid = vmio_wire_get_u64(&r);
	plen = vmio_wire_get_count(&r, 1);
	path = vmio_wire_get_bytes(&r, plen);
	if (!vmio_wire_ok(&r)) {
		snprintf(why, why_len, "its record is cut (%zu bytes)", len);
		return -EINVAL;
	}
	if (format != FORMAT) {
		snprintf(why, why_len, "record format %u; this vmio reads %u",
			 format, FORMAT);
		return -EPROTONOSUPPORT;
	}
	if (cid != k->guest_cid || plen != strlen(k->socket) ||
	    memcmp(path, k->socket, plen)) {
		snprintf(why, why_len,
			 "it was another VM's (CID %llu, socket %.*s): the VM list changed",
			 (unsigned long long)cid, (int)(plen > 200 ? 200 : plen),
			 (const char *)path);
		return -ESTALE;
	}
	*session = bytes + (len - r.left);
	*session_len = r.left;
	return 0;
}

int vsock_kept_restore(struct vsock_kept *k, struct vmio_backend *be,
		       struct vsock_device *dev)
{
	int fds[VMIO_SESSION_MAX_FDS];
	const uint8_t *session;
	size_t len, session_len;
	uint8_t *bytes = NULL;
	unsigned nfds = 0, reset;
	char why[256] = "";
	int journal = vmio_kept_take_fd(k->kept, JOURNAL);
	int rc = vmio_kept_take(k->kept, &bytes, &len, fds,
				VMIO_SESSION_MAX_FDS, &nfds, why, sizeof(why));

	if (rc > 0 && parse_vm(k, bytes, len, &session, &session_len, why,
			       sizeof(why))) {
		for (unsigned i = 0; i < nfds; i++)
			vmio_close_fd(&fds[i]);
		rc = -1;
	}
	if (rc > 0) {
		char err[200];

		/* Consumes the fds, whatever it returns. */
		if (vmio_session_restore(be, session, session_len, fds, nfds,
					 err, sizeof(err))) {
			snprintf(why, sizeof(why), "its session: %s", err);
			rc = -1;
		}
	}
	/* Nothing taken back: what the store keeps goes, the front end's
	 * socket with it, so that its VMM sees the end of the session. */
	if (rc <= 0)
		clear(k);
	if (rc < 0) {
		log_err("VM %u: the session the fd store kept is not taken back: %s; its guest has no vsock device until the VM restarts",
			k->index + 1, why);
		rc = -1;
	} else if (rc > 0) {
		reset = journal >= 0 ? vsock_device_owe_rsts(dev, journal) : 0;
		log_info("VM %u: session taken back from the fd store; %u connection%s of the process before reset",
			 k->index + 1, reset, reset == 1 ? "" : "s");
	}
	vmio_close_fd(&journal);
	free(bytes);
	return rc;
}

/* ---- Keeping ------------------------------------------------------------- */

static void keep_session(struct vsock_kept *k)
{
	struct vmio_session_record rec;
	struct vmio_wire_writer w;
	char why[200];
	size_t plen = strlen(k->socket);
	int rc = vmio_session_snapshot(k->be, &rec, why, sizeof(why));

	if (rc) {
		if (rc != -EAGAIN)
			log_ratelimited(&k->rl, VMIO_LOG_WARN,
					"VM %u: its session is not kept in the fd store: %s",
					k->index + 1, why);
		return;
	}
	vmio_wire_writer_init(&w, 0);
	vmio_wire_put_u32(&w, FORMAT);
	vmio_wire_put_u64(&w, k->guest_cid);
	vmio_wire_put_u32(&w, (uint32_t)plen);
	vmio_wire_put_bytes(&w, k->socket, plen);
	vmio_wire_put_bytes(&w, rec.bytes, rec.len);
	if (w.failed) {
		rc = -ENOMEM;
	} else {
		rc = vmio_kept_write(k->kept, w.buf, w.len, rec.fds,
				     rec.nfds);
		rec.nfds = 0; /* taken, whatever it returned */
	}
	vmio_session_record_free(&rec);
	vmio_wire_writer_fini(&w);
	owe(k, rc, KEPT_WRITE);
	if (rc && rc != -EAGAIN)
		log_ratelimited(&k->rl, VMIO_LOG_WARN,
				"VM %u: its session is not kept in the fd store: %s",
				k->index + 1, strerror(-rc));
}

static void on_session(void *opaque, bool gone)
{
	struct vsock_kept *k = opaque;

	if (gone)
		clear(k);
	else
		keep_session(k);
}

static void retry_cb(void *opaque)
{
	struct vsock_kept *k = opaque;

	if (k->owed == KEPT_CLEAR)
		clear(k);
	else if (k->owed == KEPT_WRITE)
		keep_session(k);
}

void vsock_kept_write_stats(const struct vsock_kept *k, struct vmio_json *j)
{
	vmio_json_key(j, "fd_store");
	vmio_json_object_begin(j);
	vmio_json_kv_uint(j, "writes", k->writes);
	vmio_json_kv_uint(j, "clears", k->clears);
	vmio_json_kv_uint(j, "retries", k->retries);
	vmio_json_kv_uint(j, "owed", k->owed != KEPT_DONE);
	vmio_json_object_end(j);
}

void vsock_kept_start(struct vsock_kept *k, struct vmio_backend *be,
		      struct vsock_device *dev)
{
	int journal = vsock_device_journal_fd(dev);

	k->be = be;
	k->dev = dev;
	if (journal >= 0 && vmio_kept_replace_fd(k->kept, JOURNAL, journal))
		log_warn("VM %u: its journal of connections is not in the fd store: after a crash its connections are not reset",
			 k->index + 1);
	vmio_backend_set_session_watch(be, on_session, k);
}
